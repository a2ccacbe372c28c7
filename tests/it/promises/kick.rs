//! Issue 27: a tick started by a QwenPaw turn's end (`atc tick --kicked`, the plugin's
//! hook) costs what the ended turn concerns, and every give-up it decides is heard.
//!
//! The hook hands the kicked tick the turn that ended in `ATC_KICK` (a JSON list of
//! `{agent_id, session_id, user_id, channel}`; never on the command line, never in a log).
//! The kicked tick polls only the watches that turn may concern (a child of that session;
//! a child on that agent whose session atc does not know, once per chat), delivers what
//! waits for that chat, and leaves its give-ups marked unsaid in the job file: nobody
//! reads its stderr. The next tick with a real stderr says them, once.

use crate::support;

use std::process::Stdio;

use serde_json::{Value, json};
use support::bodies;
use support::fake::Reply;
use support::scene::Scene;

const TASK: &str = "task-3f9a0c1b2d4e";
const CHILD: &str = "default:to:worker:1:3f9a";

/// `ATC_KICK` for one turn that ended: `agent`'s chat `session` of `default` on `console`.
fn ended(agent: &str, session: &str) -> String {
    json!([{"agent_id": agent, "session_id": session, "user_id": "default", "channel": "console"}])
        .to_string()
}

/// `atc tick --kicked` as the plugin starts it, for the turns in `kick` (`ATC_KICK`).
fn kicked<'a>(s: &'a Scene, kick: &str, extra: &[&str]) -> support::atc::Run<'a> {
    let mut args = vec!["--kicked"];
    args.extend_from_slice(extra);
    s.tick(&args).env("ATC_KICK", kick)
}

fn misrouted_line(task: &str) -> String {
    format!(
        "atc: gave up on {task} (misrouted): the parent chat is gone (it was there when the task was watched: deleted since?), so nothing was posted; `atc redeliver {task} --create-session` starts that chat anew, or watch again for another chat; `atc status {task}` says more"
    )
}

fn give_ups(file: &Value) -> Vec<Value> {
    file["give_ups"].as_array().cloned().unwrap_or_default()
}

// ---------------------------------------------------------------------------------------
// Defect 2: give-ups a kicked tick decides are said to /dev/null, once.

#[test]
fn a_kicked_ticks_give_up_is_left_unsaid_then_said_once_by_the_next_tick() {
    let s = Scene::new();
    s.watch(
        TASK,
        &["--child-session", CHILD, "--target-agent", "worker"],
    );
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    // The parent chat is deleted while its child runs.
    s.chats.delete("s-77");
    let line = misrouted_line(TASK);
    let out = kicked(&s, &ended("worker", CHILD), &["--json"])
        .stdout_inspected()
        .file(|file| {
            let said = give_ups(file);
            assert_eq!(said.len(), 1, "{file:#}");
            assert_eq!(said[0]["task_id"], TASK);
            assert!(said[0].get("said_at").is_none(), "{file:#}");
        })
        .run();
    // Nothing on its stderr (nobody reads it); the line for the plugin in its JSON.
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["gave_up"][0]["line"], line.as_str(), "{report:#}");
    assert_eq!(s.status(TASK), "misrouted");
    // status marks it.
    s.atc(["status"])
        .stdout_contains(format!("{TASK}  misrouted*"))
        .stdout_contains("* given up by a tick nobody heard")
        .file_unchanged();
    // doctor lists it, not yet said.
    s.healthy();
    let said = s.atc(["doctor"]).doctor_said(1);
    let at = said
        .lines()
        .position(|l| {
            l.starts_with("✓ give-ups: 1 in the last day, 1 not yet said by a tick a person hears")
        })
        .unwrap_or_else(|| panic!("{said}"));
    let listed = said.lines().nth(at + 1).unwrap();
    assert!(
        listed.starts_with("  ") && listed.ends_with(&format!(" (not yet said): {line}")),
        "{said}"
    );
    // The next tick with a real stderr says it, once.
    s.tick(&[]).stderr(format!("{line}\n")).file(|file| {
        assert!(give_ups(file)[0]["said_at"].is_string(), "{file:#}");
    });
    s.tick(&[]).file_unchanged();
    s.atc(["status"])
        .stdout_contains(format!("{TASK}  misrouted "))
        .file_unchanged();
    let said = s.atc(["doctor"]).doctor_said(1);
    assert!(
        said.lines().any(|l| l == "✓ give-ups: 1 in the last day"),
        "{said}"
    );
}

#[test]
fn a_tick_whose_stderr_is_discarded_leaves_its_give_up_unsaid() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.chats.delete("s-77");
    // The plugin's cadence: `atc tick` with stderr to /dev/null.
    let out = s
        .env
        .std_cmd()
        .env("ATC_BASE_URL", s.server.url())
        .arg("tick")
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    assert!(give_ups(&s.env.file())[0].get("said_at").is_none());
    s.tick(&[]).stderr(format!("{}\n", misrouted_line(TASK)));
}

// ---------------------------------------------------------------------------------------
// Defect 3: a kick polls everything, several times.

const TASKS: [&str; 5] = [
    "task-000000000001",
    "task-000000000002",
    "task-000000000003",
    "task-000000000004",
    "task-000000000005",
];

/// Five watches of long children on agent `worker`, their sessions known (`child-<n>`).
fn long_children() -> Scene {
    let s = Scene::new();
    for (i, task) in TASKS.iter().enumerate() {
        let child = format!("child-{i}");
        s.watch(
            task,
            &["--child-session", &child, "--target-agent", "worker"],
        );
        s.poll_replies(task, vec![Reply::json(200, bodies::RUNNING)]);
    }
    s.tick(&[]).run();
    s
}

fn polls(s: &Scene) -> Vec<usize> {
    TASKS.iter().map(|t| s.polls(t)).collect()
}

#[test]
fn a_turn_end_that_concerns_no_watch_costs_no_request_and_no_write() {
    let s = long_children();
    assert_eq!(polls(&s), [1; 5]);
    let log = std::fs::read(format!("{}.log", s.env.state.display())).unwrap();
    // A chat of another agent, and one of `worker` no watch names.
    kicked(&s, &ended("default", "elsewhere"), &[]).file_unchanged();
    kicked(&s, &ended("worker", "child-99"), &[]).file_unchanged();
    // (With -v, it says so.)
    kicked(&s, &ended("worker", "child-98"), &["-v"])
        .stderr("tick: nothing to do: the QwenPaw turn that ended concerns no watch and no waiting parent\n")
        .file_unchanged();
    assert_eq!(polls(&s), [1; 5], "a kick nothing concerns polled");
    assert!(s.server.take_unscripted().is_empty());
    assert_eq!(
        std::fs::read(format!("{}.log", s.env.state.display())).unwrap(),
        log,
        "a kick nothing concerns wrote the event log"
    );
}

#[test]
fn a_childs_turn_end_polls_that_child_only() {
    let s = long_children();
    kicked(&s, &ended("worker", "child-2"), &[]).run();
    let after = polls(&s);
    assert_eq!(
        [after[0], after[1], after[3], after[4]],
        [1; 4],
        "{after:?}"
    );
    // Once, then within the look-again window while it still reads running (bounded).
    assert!((2..=6).contains(&after[2]), "{after:?}");
}

#[test]
fn a_watch_whose_child_session_is_unknown_is_polled_once_per_chat_of_its_agent() {
    let s = Scene::new();
    s.watch(TASK, &["--target-agent", "worker"]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::RUNNING)]);
    // Registered an hour ago: every chat a kick sees from now on is seen after it.
    s.env.edit_job(TASK, |job| {
        job.insert("registered_at".into(), json!(support::ago(3600)));
    });
    // A turn of another agent does not concern it.
    kicked(&s, &ended("default", "elsewhere"), &[]).file_unchanged();
    assert_eq!(s.polls(TASK), 0);
    // A chat's turn on its agent may be its child's: polled once (not again in the
    // window), and the chat remembered.
    kicked(&s, &ended("worker", "some-chat"), &[]).file(|file| {
        assert_eq!(file["kick_chats"][0]["agent_id"], "worker", "{file:#}");
        assert_eq!(file["kick_chats"][0]["session_id"], "some-chat", "{file:#}");
    });
    assert_eq!(s.polls(TASK), 1);
    // That chat's next turn: not its child's (a child's chat ends one turn). No request.
    kicked(&s, &ended("worker", "some-chat"), &[]).file_unchanged();
    assert_eq!(s.polls(TASK), 1);
    // Another chat of that agent: polled once again.
    kicked(&s, &ended("worker", "another-chat"), &[]).run();
    assert_eq!(s.polls(TASK), 2);
    // Once the watch ends, the chats are forgotten.
    s.atc(["cancel", TASK]).stdout_inspected().run();
    s.tick(&[]).file(|file| {
        assert!(file.get("kick_chats").is_none(), "{file:#}");
    });
}

#[test]
fn a_parents_turn_end_delivers_what_waits_for_that_chat_and_polls_nothing_else() {
    let s = long_children();
    s.watch(TASK, &["--session", "s-88", "--child-session", CHILD]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    // The parent is busy when the result arrives: held.
    s.chats.busy_for("s-88", 1);
    s.tick(&[]).run();
    assert_eq!(s.status(TASK), "delivering");
    assert_eq!(polls(&s), [2; 5]);
    // The parent's turn ends: delivered, and no child polled.
    kicked(&s, &ended("default", "s-88"), &[]).run();
    assert_eq!(s.status(TASK), "done");
    assert_eq!(s.delivered("s-88").len(), 1);
    assert_eq!(polls(&s), [2; 5]);
    assert_eq!(s.polls(TASK), 1);
}

/// A kick that names no turn (an older plugin's, or `ATC_KICK` unreadable) polls every
/// watch, once (issue 36: it polled each watch up to five times, 60 watches 240 polls),
/// and does not look again for children that still run: its looks poll nothing.
#[test]
fn a_kick_without_context_polls_every_watch_once() {
    let s = long_children();
    let passes = |run: support::atc::Run<'_>| run.stdout_inspected().json()["passes"].clone();
    assert_eq!(passes(s.tick(&["--kicked", "--json"])), 1);
    assert_eq!(polls(&s), [2; 5], "one poll each, after the timer's");
    assert_eq!(
        passes(s.tick(&["--kicked", "--json"]).env("ATC_KICK", "not json")),
        1
    );
    assert_eq!(polls(&s), [3; 5], "an unreadable ATC_KICK: the same");
}

/// A kick that names no turn looks again while a busy parent holds a delivery: the
/// result goes once the parent's turn is over, within the tick, and the child is not
/// polled again.
#[test]
fn a_kick_without_context_looks_again_for_a_busy_parent() {
    let s = Scene::new();
    s.watch(TASK, &["--session", "s-88", "--child-session", CHILD]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.chats.busy_for("s-88", 1);
    let report = s.tick(&["--kicked", "--json"]).stdout_inspected().json();
    assert_eq!(report["passes"], 2, "{report:#}");
    assert_eq!(s.status(TASK), "done");
    assert_eq!(s.delivered("s-88").len(), 1);
    assert_eq!(s.polls(TASK), 1, "the child is polled once");
}

// ---------------------------------------------------------------------------------------
// Defect 4: a false check-in at the moment the child finishes.

#[test]
fn a_kick_posts_no_check_in_for_the_child_whose_turn_just_ended() {
    let s = Scene::new();
    s.watch(
        TASK,
        &[
            "--child-session",
            CHILD,
            "--target-agent",
            "worker",
            "--check-in",
            "2s",
        ],
    );
    // The hook runs a few ms before the record says finished: the first poll reads the
    // stale `running`, though a check-in is long due (the record started long ago).
    s.poll_replies(
        TASK,
        vec![
            Reply::json(200, bodies::RUNNING),
            Reply::json(200, bodies::FINISHED_COMPLETED),
        ],
    );
    kicked(&s, &ended("worker", CHILD), &[]).run();
    let turns = s.delivered("s-77");
    assert_eq!(turns.len(), 1, "{turns:?}");
    assert!(turns[0].contains("[STATUS: finished]"), "{}", turns[0]);
    assert_eq!(s.job(TASK)["check_ins"], Value::Null);
    assert_eq!(s.status(TASK), "done");
}

// ---------------------------------------------------------------------------------------
// Defect 5: `tick --json` of several passes reports only the last.

#[test]
fn a_kicked_ticks_json_reports_every_pass() {
    let s = Scene::new();
    let (a, b) = ("task-00000000000a", "task-00000000000b");
    s.watch(a, &["--session", "s-a", "--child-session", "kid-a"]);
    s.watch(b, &["--session", "s-b", "--child-session", "kid-b"]);
    s.poll_replies(a, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.poll_replies(
        b,
        vec![
            Reply::json(200, bodies::RUNNING),
            Reply::json(200, bodies::FINISHED_COMPLETED),
        ],
    );
    s.chats.delete("s-a");
    // Both children's turns ended.
    let both = json!([
        {"agent_id": "default", "session_id": "kid-a", "user_id": "default", "channel": "console"},
        {"agent_id": "default", "session_id": "kid-b", "user_id": "default", "channel": "console"},
    ])
    .to_string();
    let out = s
        .tick(&["--kicked", "--json"])
        .env("ATC_KICK", &both)
        .stdout_inspected()
        .stderr_inspected()
        .run();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["passes"], 2, "{report:#}");
    assert_eq!(report["polled"], 3, "{report:#}");
    assert_eq!(report["delivered"], 1, "{report:#}");
    assert_eq!(report["tasks"]["delivered"], json!([b]), "{report:#}");
    assert_eq!(
        report["tasks"]["polled"],
        json!([a, b]),
        "listed once: {report:#}"
    );
    assert_eq!(report["given_up"], 1, "{report:#}");
    assert_eq!(report["gave_up"][0]["task_id"], a, "{report:#}");
    assert_eq!(s.status(a), "misrouted");
    assert_eq!(s.status(b), "done");
}

// ---------------------------------------------------------------------------------------
// The mark: a kick that finds a tick running hands it its turn.

#[test]
fn a_kick_that_finds_a_tick_running_hands_it_its_turn_and_that_pass_looks_only_there() {
    let s = long_children();
    // The timer's tick is slow on its first poll of the first child: it holds the tick
    // lock meanwhile.
    s.poll_replies(
        TASKS[0],
        vec![
            Reply::json(200, bodies::RUNNING).with_delay(std::time::Duration::from_millis(1500)),
            Reply::json(200, bodies::RUNNING),
        ],
    );
    let timer = s.tick(&["--json"]).stdout_inspected().spawn();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while s.polls(TASKS[0]) < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the timer never polled"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    kicked(&s, &ended("worker", "child-3"), &["--json"])
        .stdout("{\n  \"skipped\": \"another atc tick is running\"\n}\n")
        .run();
    let mark = s.env.state.with_file_name("jobs.json.tick.again");
    let held = std::fs::read_to_string(&mark).unwrap();
    assert_eq!(
        held,
        "{\"agent_id\":\"worker\",\"session_id\":\"child-3\",\"user_id\":\"default\",\"channel\":\"console\"}\n"
    );
    let out = timer.wait();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!mark.exists(), "the mark was not taken");
    // The timer's pass polled all five once; the mark's passes only child-3 (once, then
    // within the window while it still reads running).
    let after = polls(&s);
    assert_eq!(
        [after[0], after[1], after[2], after[4]],
        [2; 4],
        "{after:?}"
    );
    assert!((3..=7).contains(&after[3]), "{after:?}");
    assert_eq!(
        report["polled"].as_u64().unwrap() as usize,
        5 + after[3] - 2,
        "{report:#}"
    );
}

/// Issue 36 (L5): a result whose POST met 409 (the parent was mid-turn) goes when that
/// parent's turn ends (its kick), not at the busy retry 20 s later; the kick used to say it
/// concerned nothing.
#[test]
fn a_result_that_met_409_goes_when_the_parents_turn_ends() {
    use support::chats::PostFault;
    let s = long_children();
    s.watch(TASK, &["--session", "s-88", "--child-session", CHILD]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.chats.fault(PostFault::Busy);
    s.tick(&[]).run();
    assert_eq!(s.status(TASK), "delivering");
    assert!(s.delivered("s-88").is_empty());
    assert!(
        s.turn(TASK)["delivery"]["next_attempt_at"].is_string(),
        "backed off: {}",
        s.turn(TASK)
    );
    // The parent's turn ends a moment later: delivered now, the back-off not waited out.
    kicked(&s, &ended("default", "s-88"), &[]).run();
    assert_eq!(s.status(TASK), "done");
    assert_eq!(s.delivered("s-88").len(), 1);
    assert_eq!(s.polls(TASK), 1, "the child is not polled again");
}
