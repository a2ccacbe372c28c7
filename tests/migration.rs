//! Job files written by earlier versions keep loading and lose nothing: the version-1
//! fixture with a job in every status, a group whose turn went out (its carrier and a
//! carried member, with a forward) and a group still held, plus a field from elsewhere.

mod support;

use serde_json::Value;
use support::atc::TestEnv;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/jobs.v1-every-status.json"
);

/// The fixture as this version keeps it: the poll counters of earlier versions are read
/// and dropped (counting every poll would rewrite the file on every tick).
fn kept(fixture: &[u8]) -> Vec<Value> {
    let mut original: Value = serde_json::from_slice(fixture).unwrap();
    for job in original["jobs"].as_array_mut().unwrap() {
        let job = job.as_object_mut().unwrap();
        job.remove("polls");
        job.remove("last_polled_at");
    }
    original["jobs"].as_array().unwrap().clone()
}

#[test]
fn a_v1_file_with_every_status_and_groups_loads_and_loses_nothing() {
    let env = TestEnv::new();
    let fixture = std::fs::read(FIXTURE).unwrap();
    env.write_bytes(&fixture);
    let want = kept(&fixture);
    let statuses: std::collections::BTreeSet<&str> =
        want.iter().map(|j| j["status"].as_str().unwrap()).collect();
    assert_eq!(statuses.len(), 12, "the fixture holds every status");

    let listed = env
        .atc(["--json", "status", "--all"])
        .file_unchanged()
        .json();
    let listed = listed["jobs"].as_array().unwrap();
    assert_eq!(listed.len(), want.len());
    for job in &want {
        assert!(listed.contains(job), "listed as it is: {job}");
    }
    for job in &want {
        let task = job["task_id"].as_str().unwrap();
        env.atc(["status", task])
            .stdout_contains(task)
            .file_unchanged()
            .run();
    }

    // A rewrite (any command that saves) keeps every old record as it was.
    env.atc(["watch", "task-new", "--session", "s-1"])
        .chat_check_skipped()
        .stdout_contains("Watching task-new")
        .run();
    let jobs = env.jobs();
    assert_eq!(jobs.len(), want.len() + 1);
    assert_eq!(&jobs[..want.len()], want.as_slice(), "old records kept");
    assert_eq!(env.file()["version"], 1, "no new schema was needed");
}
