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
        (b"{\"version\": 0, \"jobs\": []}", "unsupported version 0"),
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

/// A result the file calls settled (an edit by hand dropped its turn) gets a turn record
/// that stands as the file said, with the job's text, so `atc status` shows it unchanged
/// and nothing posts it again unasked; every state but delivered says why.
#[test]
fn a_settled_result_without_its_turn_gets_one_that_stands_as_the_file_said() {
    use crate::job::Watch;
    for (shown, state) in [
        (Status::Done, TurnState::Delivered),
        (Status::Unconfirmed, TurnState::Unconfirmed),
        (Status::Undelivered, TurnState::Undelivered),
        (Status::Misrouted, TurnState::Misrouted),
        (Status::Error, TurnState::Refused),
    ] {
        let mut job = Job::sample(Watch::Finished);
        job.shown = shown;
        job.final_text = Some("the answer".into());
        let bytes = serde_json::to_vec(&JobFile {
            version: VERSION,
            jobs: vec![job],
            ..JobFile::default()
        })
        .unwrap();
        let file = parse(&bytes).unwrap();
        let [turn] = &file.turns[..] else {
            panic!("{shown}: one turn, not {:?}", file.turns)
        };
        assert_eq!(turn.state, state, "{shown}");
        assert_eq!(file.jobs[0].turn.as_deref(), Some(turn.turn_id.as_str()));
        assert_eq!(turn.text.as_deref(), Some("the answer"));
        assert_eq!(crate::status::status(&file.jobs[0], Some(turn)), shown);
        assert_eq!(
            turn.delivery
                .error
                .as_deref()
                .is_some_and(|e| e.contains(&format!(
                    "the job file said {shown} with no turn record for it"
                ))),
            shown != Status::Done,
            "{shown}"
        );
        let unconfirmed = shown == Status::Unconfirmed;
        assert_eq!(
            turn.delivery.unknown_since.is_some(),
            unconfirmed,
            "{shown}"
        );
        assert_eq!(
            turn.delivery.read_back_closed_at.is_some(),
            unconfirmed,
            "{shown}"
        );
    }
}

/// A turn's bad field is named by its path, one level down too, and a turn's base URL
/// is checked like a job's even when the jobs' URLs were sound.
#[test]
fn a_turns_bad_field_is_named_and_its_base_url_checked() {
    let job = Job::sample(crate::job::Watch::Pending);
    let turn = Turn::sample(TurnState::Open);
    let file = |turn: serde_json::Value| {
        serde_json::to_vec(&serde_json::json!({"version": 2, "jobs": [job], "turns": [turn]}))
            .unwrap()
    };
    let mut bad = serde_json::to_value(&turn).unwrap();
    bad["delivery"]["unreachable"] = serde_json::json!("three");
    let problem = parse(&file(bad)).unwrap_err();
    assert!(
        problem.what.contains(
            "does not match the v2 schema: turn atc-j1 field \"delivery.unreachable\": invalid type"
        ),
        "{problem:?}"
    );
    let mut elsewhere = turn.clone();
    elsewhere.chat.base_url = "file:///etc".into();
    let problem = parse(&file(serde_json::to_value(&elsewhere).unwrap())).unwrap_err();
    assert!(
        problem.what.starts_with(
            "has turn atc-j1 with a bad base_url: base URL \"file:///etc\" uses file://"
        ),
        "{problem:?}"
    );
    assert_eq!(problem.fix, Fix::Edit);
}

/// What this process read is seen again without a read only while it is what is on
/// disk: once another process saved, it is not.
#[test]
fn what_was_read_is_seen_again_only_while_it_is_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.json");
    let store = Store::new(path.clone());
    store
        .update(|file| {
            file.jobs.push(Job::sample(crate::job::Watch::Pending));
            Ok(())
        })
        .unwrap();
    assert_eq!(store.with_known(|file| file.jobs.len()), Some(1));
    Store::new(path)
        .update(|file| {
            file.jobs.clear();
            Ok(())
        })
        .unwrap();
    assert_eq!(store.with_known(|file| file.jobs.len()), None);
    assert_eq!(store.load().unwrap().jobs.len(), 0);
}

/// A save is proved possible without saving: where the job file's directory is missing
/// it is refused with exit 4 and nothing written; where it is sound, nothing is left.
#[test]
fn a_save_is_proved_without_saving() {
    let dir = tempfile::tempdir().unwrap();
    let file = JobFile {
        version: VERSION,
        jobs: vec![Job::sample(crate::job::Watch::Pending)],
        ..JobFile::default()
    };
    let gone = Store::new(dir.path().join("gone").join("jobs.json"));
    let err = gone.prove_save(&file).unwrap_err();
    assert_eq!(crate::exit::exit_for(&err), Exit::StateUnwritable);
    assert!(
        format!("{err:#}").contains("nothing was changed"),
        "{err:#}"
    );
    Store::new(dir.path().join("jobs.json"))
        .prove_save(&file)
        .unwrap();
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// A give-up's line goes to a person's stderr as the file holds it: one with a control
/// character is refused, and so is one over 64 KiB; 64 KiB is taken.
#[test]
fn a_give_up_line_is_plain_and_at_most_64_kib() {
    let file = |line: String| {
        let record = crate::job_file::GiveUpRecord {
            at: crate::time::Timestamp::from_unix(1_800_000_000),
            task_id: "task-1".into(),
            with: vec![],
            line,
            said_at: None,
        };
        serde_json::to_vec(&JobFile {
            version: VERSION,
            give_ups: vec![record],
            ..JobFile::default()
        })
        .unwrap()
    };
    assert_eq!(
        parse(&file("x".repeat(64 * 1024))).unwrap().give_ups.len(),
        1
    );
    for line in ["x".repeat(64 * 1024 + 1), "gave up\u{1b}[2J".to_owned()] {
        let problem = parse(&file(line)).unwrap_err();
        assert_eq!(
            problem.what,
            "has a bad line in give-up 1 of give_ups: control characters or over 64 KiB"
        );
    }
}
