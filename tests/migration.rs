//! Job files written by earlier versions keep loading and lose nothing: the version-1
//! fixture with a job in every status, a group whose turn went out (its carrier and a
//! carried member, with a forward) and a group still held, plus a field from elsewhere.
//! Version 2 keeps each turn as a record of its own: what a version-1 job held of the
//! turn it carried (or mirrored) is on that turn, and the job points at it.

mod support;

use serde_json::{Value, json};
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

/// The fields of a version-1 job that version 2 keeps on the job's turn.
const TURN_FIELDS: [&str; 8] = [
    "delivery",
    "delivered_at",
    "turn_task_id",
    "parent_turn",
    "forward",
    "group_tasks",
    "turn_text",
    "carried_by",
];

/// Where each job's turn stands after the migration (`None`: nothing on its way).
const STATES: [(&str, Option<&str>); 16] = [
    ("task-v10000001", None),
    // A 409 after the attempt was counted: claimed, posted again once the chat is idle.
    ("task-v10000002", Some("claimed")),
    ("task-v10000003", Some("delivered")),
    ("task-v10000004", Some("unconfirmed")),
    ("task-v10000005", Some("undelivered")),
    ("task-v10000006", Some("delivered")),
    ("task-v10000007", None),
    ("task-v10000008", Some("undelivered")),
    // Cancelled after its POST landed: the turn landed all the same.
    ("task-v10000009", Some("delivered")),
    ("task-v1000000a", None),
    ("task-v1000000b", Some("misrouted")),
    ("task-v1000000c", Some("refused")),
    ("task-v1000000d", Some("delivered")),
    ("task-v1000000e", Some("delivered")),
    // Group h still has a member running: held, in no turn yet.
    ("task-v1000000f", None),
    ("task-v10000010", None),
];

/// Checks that `jobs` and `turns` hold everything the version-1 jobs `old` did: each
/// job's own fields on the job, what it held of its turn on the turn it points at.
fn nothing_lost(old: &[Value], jobs: &[Value], turns: &[Value]) {
    assert_eq!(jobs.len(), old.len());
    for (task, state) in STATES {
        let o = old.iter().find(|j| j["task_id"] == task).expect(task);
        let new = jobs.iter().find(|j| j["task_id"] == task).expect(task);
        let turn = new["turn"].as_str().map(|id| {
            let found: Vec<&Value> = turns.iter().filter(|t| t["turn_id"] == id).collect();
            assert_eq!(found.len(), 1, "{task}: turn {id}");
            found[0]
        });
        assert_eq!(turn.map(|t| t["state"].as_str().unwrap()), state, "{task}");
        let why = format!("{task}: {new} (turn {turn:?})");
        // The job's own fields are as they were; a notice's (or an old group carrier's
        // whole) text is its turn's now.
        for (key, value) in o.as_object().unwrap() {
            if TURN_FIELDS.contains(&key.as_str()) {
                continue;
            }
            if key == "final" && new.get("final").is_none() {
                let turn = turn.unwrap_or_else(|| panic!("{why}: its text went nowhere"));
                assert_eq!(&turn["text"], value, "{why}: the text moved to its turn");
                continue;
            }
            assert_eq!(&new[key], value, "{why}: {key}");
        }
        for key in new.as_object().unwrap().keys() {
            assert!(key == "turn" || o.get(key).is_some(), "{why}: new {key}");
        }
        let Some(turn) = turn else {
            // Nothing on its way: nothing of a turn to keep.
            for key in TURN_FIELDS {
                match (key, o.get(key)) {
                    (_, None) => {}
                    ("delivery", Some(d)) => {
                        assert_eq!(d["attempts"], 0, "{why}");
                        assert_eq!(d["busy"], 0, "{why}");
                    }
                    (key, Some(v)) => panic!("{why}: {key} {v} went nowhere"),
                }
            }
            continue;
        };
        let carries: Vec<&Value> = turn["carries"].as_array().unwrap().iter().collect();
        assert!(
            carries
                .iter()
                .any(|b| b["job_id"] == o["job_id"] && b["task_id"] == o["task_id"]),
            "{why}: its turn carries it"
        );
        let carrier = o.get("carried_by").is_none();
        if carrier {
            // The delivery id version 1 posted it with: read back where it was posted.
            assert_eq!(
                turn["turn_id"],
                json!(format!("atc-{}", o["job_id"].as_str().unwrap())),
                "{why}"
            );
            assert_eq!(turn["delivery"], o["delivery"], "{why}: delivery");
            for key in ["delivered_at", "turn_task_id", "parent_turn", "forward"] {
                assert_eq!(turn[key], o[key], "{why}: {key}");
            }
            let tasks: Vec<&Value> = carries.iter().map(|b| &b["task_id"]).collect();
            match o.get("group_tasks") {
                Some(group) => {
                    assert_eq!(json!(tasks), *group, "{why}: what it carries");
                }
                None => assert_eq!(tasks, [&o["task_id"]], "{why}: alone"),
            }
            if let Some(text) = o.get("turn_text") {
                assert_eq!(&turn["text"], text, "{why}");
            }
        } else {
            // A carried member mirrored its carrier's turn: it points at that turn.
            let carrier = &o["carried_by"];
            assert_eq!(
                turn["turn_id"],
                json!(format!("atc-{}", carrier.as_str().unwrap())),
                "{why}"
            );
            assert!(carries.iter().any(|b| b["job_id"] == *carrier), "{why}");
            for key in ["delivered_at", "turn_task_id"] {
                if let Some(v) = o.get(key) {
                    assert_eq!(&turn[key], v, "{why}: {key}");
                }
            }
        }
    }
    // Every turn is some job's.
    for turn in turns {
        assert!(
            jobs.iter().any(|j| j["turn"] == turn["turn_id"]),
            "a turn no job points at: {turn}"
        );
    }
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
    let jobs = listed["jobs"].as_array().unwrap();
    let turns = listed["turns"].as_array().unwrap();
    nothing_lost(&want, jobs, turns);
    for job in &want {
        let task = job["task_id"].as_str().unwrap();
        env.atc(["status", task])
            .stdout_contains(task)
            .file_unchanged()
            .run();
    }

    // A rewrite (any command that saves) writes version 2 and keeps every record as the
    // migration read it.
    env.atc(["watch", "task-new", "--session", "s-1"])
        .chat_check_skipped()
        .stdout_contains("Watching task-new")
        .run();
    let file = env.file();
    assert_eq!(file["version"], 2, "written as version 2");
    let saved = file["jobs"].as_array().unwrap();
    assert_eq!(saved.len(), want.len() + 1);
    for job in jobs {
        assert!(saved.contains(job), "kept as read: {job}");
    }
    assert_eq!(&file["turns"], &listed["turns"], "turns kept as read");
    nothing_lost(
        &want,
        &saved[..want.len()],
        file["turns"].as_array().unwrap(),
    );
}
