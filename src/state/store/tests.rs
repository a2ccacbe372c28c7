use super::*;

#[test]
fn refuses_doubtful_files() {
    for (bytes, says) in [
        (&b""[..], "empty"),
        (b"{\"version\": 2, \"jobs\": [", "truncated"),
        (b"<html>", "not valid JSON"),
        (b"{\"jobs\": []}", "no \"version\""),
        (b"{\"version\": 3, \"jobs\": []}", "newer"),
        (b"{\"version\": \"1\", \"jobs\": []}", "unsupported version"),
        (b"{\"version\": 2, \"jobs\": {}}", "schema"),
        (
            b"{\"version\": 1, \"jobs\": []}",
            "development build of atc before 0.2",
        ),
        (
            b"{\"version\": 2, \"jobs\": [{\"job_id\": 5}]}",
            "v2 schema",
        ),
        (
            b"{\"version\": 2, \"jobs\": [], \"turns\": [{\"turn_id\": 5}]}",
            "v2 schema",
        ),
    ] {
        let problem = parse(bytes).unwrap_err();
        assert!(problem.what.contains(says), "{problem:?} should say {says}");
        let fix = match says {
            "newer" => Fix::Upgrade,
            "development build of atc before 0.2" => Fix::Replace,
            _ => Fix::Edit,
        };
        assert_eq!(problem.fix, fix);
    }
    assert_eq!(parse(b"{\"version\":2,\"jobs\":[]}").unwrap().version, 2);
}

#[test]
fn schema_errors_name_the_job_and_the_field() {
    let mut job = serde_json::to_value(Job::sample(crate::job::Watch::Pending)).unwrap();
    let id = job["job_id"].as_str().unwrap().to_owned();
    for (field, value, says) in [
        (
            "strikes",
            serde_json::json!("3"),
            "field \"strikes\": invalid type",
        ),
        (
            "check_in",
            serde_json::json!(7),
            "field \"check_in\": invalid type",
        ),
        (
            "status",
            serde_json::json!("exploded"),
            "field \"status\": unknown variant",
        ),
    ] {
        let mut bad = job.clone();
        bad[field] = value;
        let bytes = serde_json::to_vec(&serde_json::json!({"version": 2, "jobs": [bad]})).unwrap();
        let problem = parse(&bytes).unwrap_err();
        assert!(
            problem
                .what
                .contains(&format!("v2 schema: job {id} (task task-1) {says}")),
            "{problem:?}"
        );
    }
    // The poll counters development builds wrote are fields like any other it does
    // not know: the file still loads.
    let mut counted = job.clone();
    counted["polls"] = serde_json::json!(7);
    counted["last_polled_at"] = serde_json::json!("2026-11-30T20:15:03Z");
    let bytes = serde_json::to_vec(&serde_json::json!({"version": 2, "jobs": [counted]})).unwrap();
    assert_eq!(parse(&bytes).unwrap().jobs.len(), 1);
    job.as_object_mut().unwrap().remove("session_id");
    let bytes = serde_json::to_vec(&serde_json::json!({"version": 2, "jobs": [job]})).unwrap();
    let problem = parse(&bytes).unwrap_err();
    assert!(
        problem.what.contains("field \"session_id\": missing field"),
        "{problem:?}"
    );
}

#[test]
fn refuses_two_jobs_for_one_task_or_one_job_id() {
    let one = Job::sample(crate::job::Watch::Pending);
    let bytes = |jobs: Vec<Job>| {
        serde_json::to_vec(&JobFile {
            version: VERSION,
            jobs,
            ..JobFile::default()
        })
        .unwrap()
    };
    let mut again = one.clone();
    again.job_id = "another-registration".into();
    let problem = parse(&bytes(vec![one.clone(), again])).unwrap_err();
    assert!(
        problem.what.contains("two jobs for task task-1"),
        "{problem:?}"
    );
    let mut twin = one.clone();
    twin.task_id = "task-2".into();
    let problem = parse(&bytes(vec![one.clone(), twin.clone()])).unwrap_err();
    assert!(
        problem
            .what
            .contains(&format!("two jobs with job id {}", one.job_id)),
        "{problem:?}"
    );
    twin.job_id = "another-registration".into();
    assert_eq!(parse(&bytes(vec![one, twin])).unwrap().jobs.len(), 2);
}
