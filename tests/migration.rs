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

/// A version-1 file captured mid-POST by atc 0.1 (a crash-points build, killed at
/// `posted`): a batch of two results, its carrier's write-ahead record saved and the POST
/// served, its member pointing at it (`carried_by`). Its times were set to a fixed past
/// moment (the attempt long settled), its base URL is the test's.
const MID_POST: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/jobs.v1-mid-post.json"
);

/// The fixture aimed at `api` (it was captured against another fake's port).
fn mid_post_at(api: &str) -> Value {
    let mut file: Value = serde_json::from_slice(&std::fs::read(MID_POST).unwrap()).unwrap();
    for job in file["jobs"].as_array_mut().unwrap() {
        job["base_url"] = json!(api);
    }
    file
}

#[test]
fn a_v1_file_captured_mid_post_becomes_a_claimed_turn_read_back_and_never_posted_again() {
    let s = support::scene::Scene::new();
    s.add_chat("s-77", "default", "console");
    let fixture = mid_post_at(&s.server.api());
    let jobs = fixture["jobs"].as_array().unwrap();
    let (carrier, member) = (&jobs[0], &jobs[1]);
    assert!(carrier["delivery"]["attempt_started_at"].is_string());
    assert_eq!(member["carried_by"], carrier["job_id"]);
    let id = format!("atc-{}", carrier["job_id"].as_str().unwrap());
    // The POST the crashed tick served is in the chat.
    s.chats
        .seed_turn("s-77", &id, carrier["turn_text"].as_str().unwrap());
    s.env.write_file(&fixture);
    // Read, it is a claimed turn in flight (nothing posted blind); no save yet.
    let listed = s
        .atc(["--json", "status", "task-v1mid00002"])
        .file_unchanged()
        .json();
    let turn = &listed["turns"][0];
    assert_eq!(turn["turn_id"], id.as_str(), "{turn}");
    assert_eq!(turn["state"], "claimed", "{turn}");
    assert!(turn["delivery"]["attempt_started_at"].is_string(), "{turn}");
    assert_eq!(
        support::atc::carried_tasks(turn),
        ["task-v1mid00001", "task-v1mid00002"]
    );
    assert_eq!(listed["jobs"][0]["turn"], id.as_str());
    // The next tick recovers it as unconfirmed, reads the chat back, finds it.
    s.tick(&["-vv"])
        .stderr_contains("tick: recovered_unconfirmed: task-v1mid00001 task-v1mid00002")
        .stderr_contains("tick: confirmed: task-v1mid00001 task-v1mid00002")
        .run();
    assert!(s.posts().is_empty(), "nothing was posted again");
    assert_eq!(s.delivered("s-77").len(), 1);
    for task in ["task-v1mid00001", "task-v1mid00002"] {
        assert_eq!(s.status(task), "done");
        assert_eq!(s.job(task)["turn"], id.as_str());
    }
    let file = s.env.file();
    assert_eq!(file["version"], 2, "written as version 2");
    assert_eq!(file["turns"][0]["state"], "delivered");
    assert_eq!(file["turns"][0]["delivery"]["confirmed"], "read-back");
    assert!(file["jobs"][0].get("carried_by").is_none());
    assert!(file["jobs"][1].get("group_tasks").is_none());
}

#[test]
fn a_v1_file_captured_mid_post_whose_post_never_arrived_is_posted_once() {
    let s = support::scene::Scene::new();
    s.add_chat("s-77", "default", "console");
    s.env.write_file(&mid_post_at(&s.server.api()));
    // Read back: absent, the chat idle, the attempt long settled: posted again, once.
    s.tick(&["-vv"])
        .stderr_contains("tick: recovered_unconfirmed: task-v1mid00001 task-v1mid00002")
        .stderr_contains("tick: delivered: task-v1mid00001 task-v1mid00002")
        .run();
    s.tick(&[]).run();
    assert_eq!(s.posts().len(), 1);
    let turns = s.delivered("s-77");
    assert_eq!(turns.len(), 1);
    assert!(
        turns[0].starts_with("[ATC_RESULTS] 2 tasks: 2 completed"),
        "the same turn, as version 1 composed it: {}",
        turns[0]
    );
    let id = s.posts()[0].json()["input"][0]["metadata"]["qwenpaw_client_message_id"].clone();
    assert_eq!(
        id,
        s.turn("task-v1mid00002")["turn_id"],
        "its own delivery id"
    );
    for task in ["task-v1mid00001", "task-v1mid00002"] {
        assert_eq!(s.status(task), "done");
    }
}
