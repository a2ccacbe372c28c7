//! Polls follow the child's own end (issue 38): a child whose turn's end atc's plugin
//! kicks is polled by that kick, and by scheduled ticks only on its back-off; every other
//! watch by every tick. The schedule itself (20 s, 40 s, 80 s… up to `--poll-ceiling`) is
//! `lifecycle::backoff`'s unit tests, on an injected clock; here, the wiring.

use crate::support;

use serde_json::{Value, json};
use support::bodies;
use support::fake::Reply;
use support::scene::Scene;

const TASK: &str = "task-3f9a0c1b2d4e";
const BARE: &str = "task-00000000000b";
const CHILD: &str = "default:to:worker:1:3f9a";

/// A ceiling so long that no back-off time falls between two ticks of this test, however
/// slow the machine (the record says the child started days ago).
const CEILING: [&str; 2] = ["--poll-ceiling", "3650d"];

/// A tick of the plugin's cadence on the fake's server (`ATC_BASE_URL` names it).
fn cadence(s: &Scene) -> support::atc::Run<'_> {
    s.tick(&CEILING).env("ATC_CADENCE_TICK", "1")
}

fn heartbeat(s: &Scene) -> Value {
    let lock = s.env.state.with_extension("json.tick.lock");
    let line = std::fs::read_to_string(lock).unwrap();
    serde_json::from_str(line.lines().next().unwrap()).unwrap()
}

#[test]
fn a_child_the_plugin_kicks_for_is_polled_by_its_kick_not_by_every_tick() {
    let s = Scene::new();
    s.watch(TASK, &["--child-session", CHILD]);
    s.watch(BARE, &[]);
    for task in [TASK, BARE] {
        s.poll_replies(task, vec![Reply::json(200, bodies::RUNNING); 16]);
    }
    // A timer's tick alone: no plugin has ticked, every watch is polled every tick.
    s.tick(&CEILING);
    assert_eq!((s.polls(TASK), s.polls(BARE)), (1, 1));
    s.atc(["status", TASK])
        .stdout_contains(
            "next poll       by every tick: no atc plugin on its server kicks this job file",
        )
        .run();
    // The plugin's cadence names its server: from now on the child is on its back-off.
    cadence(&s);
    assert_eq!(
        heartbeat(&s)["plugins"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        [&format!("{}/api", s.server.url())],
        "the server whose plugin ticks"
    );
    assert_eq!(
        (s.polls(TASK), s.polls(BARE)),
        (1, 2),
        "the first cadence tick found its last time long past"
    );
    cadence(&s);
    s.tick(&CEILING);
    assert_eq!(
        (s.polls(TASK), s.polls(BARE)),
        (1, 4),
        "scheduled ticks poll the kicked-for child only on its back-off; the other every time"
    );
    s.atc(["status", TASK])
        .stdout_contains("next poll       at ")
        .stdout_contains("for its back-off: atc's plugin kicks when the child's turn ends")
        .run();
    s.atc(["status", BARE])
        .stdout_contains(
            "next poll       by every tick: its child's session is not known, so no kick names it",
        )
        .run();
    // The child's turn ended: the plugin's kick polls it.
    let kick = json!([{"agent_id": "default", "session_id": CHILD, "user_id": "default", "channel": "console"}])
        .to_string();
    s.tick(&["--kicked"]).env("ATC_KICK", kick).run();
    // (A child still reading running is looked at again for up to 2 s.)
    assert!(s.polls(TASK) >= 2, "the kick polls what it concerns");
}

#[test]
fn a_plugin_of_another_server_puts_no_child_here_on_a_back_off() {
    let s = Scene::new();
    s.watch(TASK, &["--child-session", CHILD]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::RUNNING); 4]);
    for _ in 0..3 {
        s.tick(&CEILING)
            .env("ATC_CADENCE_TICK", "1")
            .env("ATC_BASE_URL", "http://127.0.0.1:9/api")
            .run();
    }
    // Its watch's server is the fake's; the plugin that ticks is another server's.
    assert_eq!(s.polls(TASK), 3);
}

/// The back-offs count from the last scheduled pass that polled every watch due and
/// finished (`last_swept_at` in the tick lock): a scheduled tick that fails (here, a job
/// file it cannot read: exit 3) was stamped at its start, polled nothing, and moves none
/// on; one that finishes does.
#[test]
fn a_scheduled_tick_that_fails_moves_no_back_off() {
    let s = Scene::new();
    s.watch(TASK, &["--child-session", CHILD]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::RUNNING); 4]);
    cadence(&s).run();
    let lock = s.env.state.with_extension("json.tick.lock");
    let mut beat = heartbeat(&s);
    assert!(
        beat["last_swept_at"].is_string(),
        "a finished cadence tick: {beat}"
    );
    // Where the back-offs counted from, long before this test.
    const LONG_AGO: &str = "2026-01-01T00:00:00Z";
    beat["last_swept_at"] = json!(LONG_AGO);
    std::fs::write(&lock, format!("{beat}\n")).unwrap();
    let good = std::fs::read(&s.env.state).unwrap();
    std::fs::write(&s.env.state, b"{ not json").unwrap();
    cadence(&s)
        .status(3)
        .stderr_contains("it was left untouched")
        .file_unchanged()
        .run();
    let beat = heartbeat(&s);
    assert_eq!(beat["last_swept_at"], LONG_AGO, "a failed tick: {beat}");
    assert_ne!(beat["finished"], true, "{beat}");
    std::fs::write(&s.env.state, good).unwrap();
    cadence(&s).run();
    let swept = heartbeat(&s)["last_swept_at"].clone();
    assert!(
        swept.as_str().is_some_and(|at| at > LONG_AGO),
        "a finished tick: {swept}"
    );
}
