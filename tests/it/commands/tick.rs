//! `atc tick` mechanics beyond the seed's behaviours: parallelism, single flight, locking
//! around network I/O, the report, auth, the request shapes and the error classes.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::atc::{job, turn_for, turn_of};
use support::bodies;
use support::chats::PostFault;
use support::fake::Reply;
use support::hermetic::NOWHERE;
use support::scene::Scene;

const TASK: &str = "task-3f9a0c1b2d4e";

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn polls_run_in_parallel_up_to_the_concurrency() {
    let s = Scene::new();
    const JOBS: usize = 120;
    let jobs: Vec<Value> = (0..JOBS)
        .map(|i| job(&format!("task-{i:012x}"), "pending", &s.server.api()))
        .collect();
    s.env.write_file(&json!({"version": 2, "jobs": jobs}));
    s.server.on_prefix(
        "GET",
        "/api/console/chat/task/",
        vec![Reply::json(200, bodies::RUNNING).with_delay(Duration::from_millis(30))],
    );
    s.tick(&["--concurrency", "6"]).run();
    assert_eq!(s.server.requests().len(), JOBS);
    let peak = s.server.peak_in_flight();
    assert!(
        (2..=6).contains(&peak),
        "{peak} polls were in flight at once; want parallel, at most --concurrency 6"
    );
    assert!(
        s.env
            .jobs()
            .iter()
            .all(|j| j["started_at"] == "2026-11-30T01:50:54Z"),
        "every poll was applied (its start time recorded)"
    );
}

#[test]
fn two_ticks_started_together_never_deliver_twice() {
    for round in 0..3 {
        let s = Scene::new();
        s.watch(TASK, &[]);
        s.poll_replies(
            TASK,
            vec![
                Reply::json(200, bodies::FINISHED_COMPLETED).with_delay(Duration::from_millis(200)),
            ],
        );
        s.chats
            .fault(PostFault::SlowAfterStore(Duration::from_millis(300)));
        let ticks: Vec<_> = (0..2).map(|_| s.tick(&[]).spawn()).collect();
        for tick in ticks {
            tick.wait();
        }
        s.tick(&[]);
        assert_eq!(s.posts().len(), 1, "round {round}");
        assert_eq!(s.status(TASK), "done");
        assert_eq!(s.delivered("s-77").len(), 1, "round {round}");
    }
}

#[test]
fn a_second_tick_exits_quietly_while_one_runs() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(s.env.state.with_file_name("jobs.json.tick.lock"))
        .unwrap();
    lock.lock().unwrap();
    s.tick(&[]).file_unchanged();
    s.tick(&["-v"])
        .stderr_contains("tick: another atc tick is running")
        .file_unchanged();
    let report = s.atc(["--json", "tick"]).file_unchanged().json();
    assert_eq!(report, json!({"skipped": "another atc tick is running"}));
    assert_eq!(s.polls(TASK), 0);
}

#[test]
fn watch_and_cancel_do_not_wait_for_a_tick_stuck_on_a_slow_server() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    // The poll is held until the others are done: the tick is stuck on the server for
    // exactly as long as the test needs (no clock: a slow machine cannot end it early).
    let gate = support::fake::Gate::new();
    s.poll_replies(TASK, vec![Reply::json(200, bodies::RUNNING).held(&gate)]);
    let mut tick = s.tick(&[]).spawn();
    wait_until("the slow poll", || s.polls(TASK) == 1);
    s.watch("task-other", &[]);
    s.atc(["cancel", "task-other"])
        .stdout_contains("Cancelled the watch on task-other");
    s.atc(["status"]).stdout_contains("task-other");
    assert!(tick.is_running(), "the tick is still waiting on the server");
    gate.open();
    tick.wait();
    assert_eq!(s.status("task-other"), "cancelled");
    let job = s.job(TASK);
    assert_eq!(job["status"], "pending", "{job}");
    assert_eq!(
        job["started_at"], "2026-11-30T01:50:54Z",
        "its poll was applied: {job}"
    );
}

#[test]
fn a_tick_is_silent_verbose_on_request_and_reports_json() {
    let s = Scene::new();
    s.watch("task-run", &[]);
    s.watch("task-fin", &["--session", "s-2"]);
    s.watch("task-gone", &["--session", "s-3"]);
    s.poll_replies("task-run", vec![Reply::json(200, bodies::RUNNING)]);
    s.poll_replies(
        "task-fin",
        vec![Reply::json(200, bodies::FINISHED_COMPLETED)],
    );
    s.poll_replies(
        "task-gone",
        vec![Reply::json(404, &bodies::not_found("task-gone"))],
    );
    s.tick(&[]);

    s.watch("task-fin2", &["--session", "s-4"]);
    s.poll_replies(
        "task-fin2",
        vec![Reply::json(200, bodies::FINISHED_COMPLETED)],
    );
    s.chats.busy_for("s-4", 1000);
    // Each outcome a reader can use, by name; bookkeeping (the parent turns followed,
    // each turn's claim) only in the counts.
    s.tick(&["-vv"]).stderr(
        "tick: busy: task-fin2\ntick: finished: task-fin2\ntick: forwarded: task-fin task-gone\ntick: polled: task-run task-fin2\ntick: running: task-run\ntick: 2 polled, 0 delivered, 1 busy, 0 lost, 0 failed checks, 0 given up, 2 parent turns followed, 2 console toasts\n",
    );

    let report = s.atc(["--json", "tick"]).json();
    assert_eq!(report["polled"], 1);
    assert_eq!(report["busy"], 1);
    assert_eq!(report["tasks"]["busy"], json!(["task-fin2"]));
    assert_eq!(report["tasks"]["running"], json!(["task-run"]));
    assert!(
        !report.to_string().contains("ECHO"),
        "no message text in reports"
    );

    s.tick(&["-vv"]).stderr(
        "tick: busy: task-fin2\ntick: polled: task-run\ntick: running: task-run\ntick: 1 polled, 0 delivered, 1 busy, 0 lost, 0 failed checks, 0 given up\n",
    );
    // -vvv: first where the pass spent its time, phase by phase, then what -vv says.
    let out = s.tick(&["-vvv"]).stderr_inspected().run();
    let said = String::from_utf8(out.stderr).unwrap();
    let (timing, rest) = said.split_once('\n').unwrap();
    let phases: Vec<&str> = timing
        .strip_prefix("tick: ")
        .unwrap()
        .split(", ")
        .map(|phase| {
            let (name, took) = phase.strip_suffix(" ms").unwrap().split_once(' ').unwrap();
            let (whole, tenths) = took.split_once('.').unwrap();
            assert!(
                !whole.is_empty()
                    && whole.bytes().all(|b| b.is_ascii_digit())
                    && tenths.len() == 1
                    && tenths.bytes().all(|b| b.is_ascii_digit()),
                "{timing}"
            );
            name
        })
        .collect();
    assert_eq!(
        phases,
        [
            "prepare", "poll", "decide", "look", "claim", "send", "record"
        ]
    );
    assert_eq!(
        rest,
        "tick: busy: task-fin2\ntick: polled: task-run\ntick: running: task-run\ntick: 1 polled, 0 delivered, 1 busy, 0 lost, 0 failed checks, 0 given up\n"
    );
}

#[test]
fn tokens_come_from_the_environment_and_go_nowhere_else() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    let before = s.server.requests().len();
    let report = s
        .atc(["-vv", "--json", "tick"])
        .env("QWENPAW_RUNTIME_INTERNAL_TOKEN", "rt-secret-1")
        .env("ATC_BEARER_TOKEN", "bearer-secret-2")
        .never_shows("rt-secret-1")
        .never_shows("bearer-secret-2")
        .json();
    assert_eq!(report["delivered"], 1);
    let requests: Vec<_> = s.server.requests().into_iter().skip(before).collect();
    let shown: Vec<String> = requests
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(
        shown,
        [
            format!("GET /api/console/chat/task/{TASK}"),
            "GET /api/chats".to_owned(),
            "POST /api/console/chat/task".to_owned()
        ],
        "one poll, one chat check, one delivery"
    );
    for request in requests {
        assert_eq!(
            request.header("x-qwenpaw-runtime-token"),
            Some("rt-secret-1")
        );
        assert_eq!(
            request.header("authorization"),
            Some("Bearer bearer-secret-2")
        );
    }
}

#[test]
fn a_rejected_token_is_a_strike_that_names_the_variable() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(401, bodies::AUTH_401_RUNTIME)]);
    s.tick(&[]);
    let job = s.job(TASK);
    assert_eq!(
        (job["status"].as_str(), job["strikes"].as_u64()),
        (Some("pending"), Some(1))
    );
    let error = job["last_error"].as_str().unwrap();
    assert!(
        error.contains("401")
            && error.contains("Invalid runtime boundary token")
            && error.contains("QWENPAW_RUNTIME_INTERNAL_TOKEN"),
        "{error}"
    );
    assert!(s.posts().is_empty());
}

#[test]
fn an_answer_over_8_mib_is_a_failed_check() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    let huge = bodies::finished_completed("s", &"x".repeat(9 * 1024 * 1024));
    s.poll_replies(TASK, vec![Reply::json(200, &huge)]);
    s.tick(&[]);
    let job = s.job(TASK);
    assert_eq!(job["status"], "pending");
    assert!(
        job["last_error"].as_str().unwrap().contains("8 MiB"),
        "{job}"
    );
    assert!(s.posts().is_empty());
}

#[test]
fn the_delivery_posts_the_exact_shape_and_a_turn_timeout_only_when_asked() {
    let s = Scene::new();
    s.watch("task-a", &[]);
    s.watch("task-b", &["--session", "s-2"]);
    s.poll_replies("task-a", vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.poll_replies(
        "task-b",
        vec![
            Reply::json(200, bodies::RUNNING),
            Reply::json(200, bodies::FINISHED_COMPLETED),
        ],
    );
    s.tick(&[]);
    s.tick(&["--turn-timeout", "5m"]);
    let posts = s.posts();
    assert_eq!(posts.len(), 2);
    assert!(
        posts[0].json().get("timeout").is_none(),
        "no timeout unless asked"
    );
    assert_eq!(posts[1].json()["timeout"], 300);
    assert_eq!(
        posts[0].header("content-type"),
        Some("application/json; charset=utf-8")
    );
    assert_eq!(posts[0].path, "/api/console/chat/task");
}

#[test]
fn one_delivery_per_parent_chat_per_tick() {
    let s = Scene::new();
    s.watch("task-a", &[]);
    s.watch("task-b", &[]);
    s.watch("task-c", &["--session", "s-other"]);
    for task in ["task-a", "task-b", "task-c"] {
        s.poll_replies(task, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    }
    // One result per turn (batching off; `tests/it/promises/batch.rs` has the default).
    s.tick(&["--no-batch"]);
    assert_eq!(s.posts().len(), 2, "one per chat");
    assert_eq!(s.status("task-a"), "done", "oldest first");
    assert_eq!(s.status("task-b"), "delivering");
    s.tick(&["--no-batch"]);
    assert_eq!(s.status("task-b"), "done");
    assert_eq!(s.posts().len(), 3);
}

#[test]
fn a_refused_delivery_is_an_error_with_the_detail_and_an_unreachable_chat_waits() {
    let s = Scene::new();
    s.watch(TASK, &["--agent", "ghost"]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.chats.fault(PostFault::UnknownAgent);
    s.tick(&[]).stderr(format!(
        "atc: gave up on {TASK} (error): the server refused the delivery (HTTP 404); `atc status {TASK}` shows its answer; `atc redeliver {TASK}` tries again once that is fixed\n"
    ));
    s.assert_refused(TASK, "Agent 'ghost' not found");
    s.atc(["status", TASK])
        .stdout_contains("the server refused the delivery (404: Agent 'ghost' not found)");

    // The server is down when the delivery is due: the chat check cannot be made.
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.chats.fault(PostFault::Busy);
    s.tick(&[]);
    // The 409 let the claim go: the turn is open again, and the job, watched where no
    // server answers, leaves it for a turn of its own there.
    assert_eq!(s.turn(TASK)["state"], "open");
    s.env.edit_job(TASK, |job| {
        job.insert("base_url".into(), json!(format!("{NOWHERE}/api")));
    });
    s.tick(&[]);
    assert_eq!(s.status(TASK), "delivering");
    let turn = s.turn(TASK);
    assert_eq!(turn["delivery"]["unreachable"], 1);
    assert!(
        turn["delivery"]["next_attempt_at"].is_null(),
        "asked again next tick"
    );
    assert!(
        turn["delivery"]["error"]
            .as_str()
            .unwrap()
            .contains("connection refused"),
        "{turn}"
    );
    assert_eq!(s.posts().len(), 1, "only the first, refused one");
}

#[test]
fn status_shows_what_the_tick_recorded() {
    let s = Scene::new();
    s.watch("task-strike", &[]);
    s.watch("task-busy", &["--session", "s-2"]);
    s.watch("task-done", &["--session", "s-3"]);
    s.poll_replies(
        "task-strike",
        vec![Reply::json(503, r#"{"detail":"Service Unavailable"}"#)],
    );
    s.poll_replies(
        "task-busy",
        vec![Reply::json(200, bodies::FINISHED_COMPLETED)],
    );
    s.poll_replies(
        "task-done",
        vec![Reply::json(
            200,
            &bodies::finished_completed("c", "line one\nline two"),
        )],
    );
    s.chats.busy_for("s-2", 1000);
    let started = Instant::now();
    s.tick(&[]);

    let listed = s
        .atc(["status"])
        .stdout_contains("1 failed check: HTTP 503")
        .stdout_contains("waiting for the chat ×1")
        .run();
    // When it was delivered is an age: computed at two moments, so a range.
    support::atc::assert_age(
        &support::atc::stdout(&listed),
        "delivered ",
        started.elapsed(),
    );
    s.atc(["status", "task-strike"])
        .stdout_contains("strikes         1")
        .stdout_contains("last error      HTTP 503")
        .stdout_contains("note            1 failed check in a row; last: HTTP 503");
    s.atc(["status", "task-busy"])
        .stdout_contains("busy            1 (parent chat busy)")
        .stdout_contains("waiting since")
        .stdout_contains("the parent chat is running a turn; trying again on the next ticks");
    s.atc(["status", "task-done"])
        .stdout_contains("delivered       ")
        .stdout_contains("outcome         completed")
        .stdout_contains("[STATUS: finished]");
}

#[test]
fn a_pass_with_nothing_to_change_does_not_rewrite_the_file() {
    use std::os::unix::fs::MetadataExt;
    let s = Scene::new();
    let mut finished = job("task-done", "done", &s.server.api());
    finished["updated_at"] = json!("2099-01-01T00:00:00Z");
    let mut lost = job("task-lost", "lost", &s.server.api());
    lost["job_id"] = json!("0123456789ab");
    // Recent enough to be kept.
    lost["updated_at"] = json!("2099-01-01T00:00:00Z");
    let turn = turn_for(&mut finished, "delivered");
    s.env
        .write_file(&json!({"version": 2, "jobs": [finished, lost], "turns": [turn]}));
    let inode = std::fs::metadata(&s.env.state).unwrap().ino();
    s.tick(&[]).file_unchanged().run();
    assert_eq!(
        std::fs::metadata(&s.env.state).unwrap().ino(),
        inode,
        "not replaced"
    );
    assert!(s.server.requests().is_empty());
}

#[test]
fn a_settled_file_is_not_read_again_until_it_changes_or_a_job_is_due_for_pruning() {
    let s = Scene::new();
    let mut done = job("task-done", "done", &s.server.api());
    done["updated_at"] = json!("2099-01-01T00:00:00Z");
    let turn = turn_for(&mut done, "delivered");
    s.env
        .write_file(&json!({"version": 2, "jobs": [done], "turns": [turn]}));
    s.tick(&["-v"])
        .stderr("tick: 0 polled, 0 delivered, 0 busy, 0 lost, 0 failed checks, 0 given up\n")
        .file_unchanged()
        .run();
    let unchanged = "tick: nothing to do: every watch has ended and the job file is as the last tick found it\n";
    s.tick(&["-v"]).stderr(unchanged).file_unchanged().run();
    // Another --keep could prune: looked at again.
    s.tick(&["-v", "--keep", "1d"])
        .stderr("tick: 0 polled, 0 delivered, 0 busy, 0 lost, 0 failed checks, 0 given up\n")
        .file_unchanged()
        .run();
    // A new watch changes the file: the next tick reads it and polls.
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::RUNNING)]);
    s.tick(&["-v"])
        .stderr("tick: 1 polled, 0 delivered, 0 busy, 0 lost, 0 failed checks, 0 given up\n")
        .run();
    assert_eq!(s.polls(TASK), 1);
    // An edit by hand is seen too.
    s.atc(["cancel", TASK]).stdout_inspected().run();
    s.tick(&[]).run();
    s.tick(&["-v"]).stderr(unchanged).file_unchanged().run();
    s.env.edit_job("task-done", |job| {
        job.insert("status".into(), json!("pending"));
    });
    s.poll_replies("task-done", vec![Reply::json(200, bodies::RUNNING)]);
    s.tick(&["-v"])
        .stderr("tick: 1 polled, 0 delivered, 0 busy, 0 lost, 0 failed checks, 0 given up\n")
        .run();
    // A job past --keep is pruned, though nothing else changed.
    let s = Scene::new();
    let mut old = job("task-old", "done", &s.server.api());
    old["updated_at"] = json!("2020-01-01T00:00:00Z");
    let turn = turn_for(&mut old, "delivered");
    s.env
        .write_file(&json!({"version": 2, "jobs": [old], "turns": [turn]}));
    s.tick(&["--keep", "3650d"]).file_unchanged().run();
    s.tick(&["--keep", "3650d", "-v"])
        .stderr(unchanged)
        .file_unchanged()
        .run();
    s.tick(&[]).run();
    assert!(s.env.jobs().is_empty(), "pruned at the default --keep");
}

#[test]
fn polls_of_a_task_still_running_rewrite_nothing_after_the_first() {
    use std::os::unix::fs::MetadataExt;
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::RUNNING)]);
    s.tick(&[]).run();
    assert_eq!(
        s.job(TASK)["started_at"],
        "2026-11-30T01:50:54Z",
        "the first poll is recorded"
    );
    let inode = std::fs::metadata(&s.env.state).unwrap().ino();
    for _ in 0..3 {
        s.tick(&[]).file_unchanged().run();
    }
    assert_eq!(
        std::fs::metadata(&s.env.state).unwrap().ino(),
        inode,
        "not replaced"
    );
    assert_eq!(s.polls(TASK), 4, "every tick polled");
    s.atc(["status"]).stdout_contains("running for ");
}

#[test]
fn older_servers_top_level_terminal_statuses_are_delivered_and_others_keep_waiting() {
    let s = Scene::new();
    s.watch("task-old", &[]);
    s.watch("task-queued", &["--session", "s-2"]);
    s.poll_replies(
        "task-old",
        vec![Reply::json(
            200,
            r#"{"status":"cancelled","started_at":1796003164.3}"#,
        )],
    );
    s.poll_replies(
        "task-queued",
        vec![Reply::json(200, r#"{"status":"pending"}"#)],
    );
    s.tick(&[]);
    assert_eq!(s.status("task-old"), "done");
    assert_eq!(s.status("task-queued"), "pending");
    let posts = s.posts();
    assert_eq!(posts.len(), 1);
    assert_eq!(
        Scene::posted_text(&posts[0]),
        "[TASK_ID: task-old]\n[STATUS: cancelled]\n\n{\n  \"status\": \"cancelled\",\n  \"started_at\": 1796003164.3\n}"
    );
}

/// Found by hand: a result went into a chat the person had archived (QwenPaw still posts
/// into it), where its agent answered out of the console's list, without a word.
#[test]
fn watch_into_an_archived_chat_says_where_the_result_goes() {
    let s = Scene::new();
    s.add_chat("s-77", "alice", "console");
    s.chats.archive("s-77");
    s.checked(&["task-a"], || {
        s.atc(["watch", "task-a", "--session", "s-77", "--user", "alice"])
            .stdout_contains("Watching task-a")
            .stderr(
                "atc: note: the chat of session s-77 (user alice, channel console) is archived: the result goes there all the same and its agent answers there, where QwenPaw's console lists it under archived chats (unarchive it to have it back among the others)\n",
            )
            .run()
    });
    assert_eq!(s.status("task-a"), "pending");
    s.checked(&["task-b"], || {
        s.atc([
            "watch",
            "task-b",
            "--session",
            "s-77",
            "--user",
            "alice",
            "-q",
        ])
        .stdout("")
        .stderr("")
        .run()
    });
    assert_eq!(s.status("task-b"), "pending");
}

/// Found by hand: a person archived the parent chat after the watch; the result went
/// there (QwenPaw posts into an archived chat) and `atc status` said only "delivered", so
/// a person who looked for it in the console's list found no chat.
#[test]
fn a_result_delivered_into_a_chat_archived_after_the_watch_says_so() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.chats.archive("s-77");
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.tick(&[]);
    assert_eq!(s.status(TASK), "done");
    assert_eq!(s.delivered("s-77").len(), 1);
    assert_eq!(s.turn(TASK)["chat_archived"], true, "{}", s.turn(TASK));
    s.atc(["status"])
        .stdout_contains("delivered 0s ago into an archived chat")
        .run();
    s.atc(["status", TASK])
        .stdout_contains("delivered; its chat was archived when it was posted (QwenPaw's console lists archived chats apart: unarchive it there to have it back among the others)")
        .stdout_contains(" (archived)\n")
        .run();
    // A chat never archived says nothing of it, and the record holds no such key.
    let other = "task-000000000002";
    s.chats.add("default", "s-88", "default", "console");
    s.watch(other, &["--session", "s-88"]);
    s.poll_replies(other, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.tick(&[]);
    assert_eq!(s.status(other), "done");
    assert!(
        s.turn(other).get("chat_archived").is_none(),
        "{}",
        s.turn(other)
    );
    let out = s.atc(["status", other]).stdout_inspected().run();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("archived"));
}

#[test]
fn watch_refuses_a_parent_chat_that_does_not_exist() {
    let s = Scene::new();
    s.add_chat("s-77", "alice", "console");
    s.checked(&["task-a"], || {
        s.atc(["watch", "task-a", "--session", "s-77", "--user", "alice"])
            .stdout_contains("Watching task-a")
            .run()
    });
    s.atc(["watch", "task-b", "--session", "s-77"])
        .status(1)
        .stderr_contains(
            "has no chat with session s-77 (user default, channel console) for agent 'default'",
        )
        .stderr_contains("chats with session id s-77: user alice on console")
        .stderr_contains("--create-session")
        .file_unchanged();
    let lookups: Vec<String> = s
        .server
        .requests()
        .into_iter()
        .filter(|r| r.path == "/api/chats")
        .map(|r| r.query)
        .collect();
    assert_eq!(
        lookups,
        [
            "user_id=alice&channel=console",
            "user_id=default&channel=console",
            ""
        ]
    );
    assert!(
        s.server
            .requests()
            .iter()
            .all(|r| r.header("x-agent-id") == Some("default"))
    );

    // The server being away is no reason to refuse; it says the check was skipped.
    s.atc(["--base-url", NOWHERE, "watch", "task-c", "--session", "s-1"])
        .stdout_contains("Watching task-c")
        .chat_check_skipped();
    s.atc([
        "-v",
        "--base-url",
        NOWHERE,
        "watch",
        "task-d",
        "--session",
        "s-1",
    ])
    .stdout_contains("Watching task-d")
    .stderr_contains("atc: QwenPaw API http://127.0.0.1:9/api (from --base-url)")
    .chat_check_skipped();
    s.atc([
        "-q",
        "--base-url",
        NOWHERE,
        "watch",
        "task-e",
        "--session",
        "s-1",
    ])
    .file(|file| assert_eq!(file["jobs"].as_array().unwrap().len(), 4));
}

/// A watched task whose every poll answers 500: with `--max-strikes 1`, abandoned at once.
fn watched_failing() -> Scene {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(
        TASK,
        vec![Reply::json(500, r#"{"detail":"Internal Server Error"}"#)],
    );
    s
}

#[test]
fn an_abandoned_job_is_one_failed_check_and_one_give_up_said_once() {
    let s = watched_failing();
    s.tick(&["-v", "--max-strikes", "1"])
        .stderr(format!(
            "atc: gave up on {TASK} (abandoned): 1 failed check in a row (HTTP 500); `atc status {TASK}` says more; the task may still run: `atc wait {TASK}` asks the server\ntick: {TASK}: failed check, abandoned: HTTP 500: Internal Server Error\ntick: 1 polled, 1 delivered, 0 busy, 0 lost, 1 failed check, 1 given up\n"
        ))
        .run();
    // Said once: the next tick only learns how the parent's turn (the notice's) ended,
    // and says that rather than "0 polled" alone.
    s.tick(&["-v", "--max-strikes", "1"])
        .stderr("tick: 0 polled, 0 delivered, 0 busy, 0 lost, 0 failed checks, 0 given up, 1 parent turn followed, 1 console toast\n")
        .file(|file| assert_eq!(turn_of(file, TASK)["parent_turn"], "completed"));
    s.tick(&["--max-strikes", "1"]).file_unchanged();
    assert_eq!(s.status(TASK), "abandoned");
    s.atc(["status", TASK]).stdout_contains(
        "abandoned after 1 failed check in a row; last: HTTP 500: Internal Server Error; the parent was told",
    );
    // `status --json`, of the list and of the task, carries the records that name it:
    // the notice's turn and the give-up.
    let file = s.env.file();
    assert_eq!(file["turns"].as_array().unwrap().len(), 1, "{file}");
    assert_eq!(file["give_ups"].as_array().unwrap().len(), 1, "{file}");
    for args in [&["--json", "status"][..], &["--json", "status", TASK]] {
        let shown = s.atc(args.iter().copied()).file_unchanged().json();
        assert_eq!(shown["turns"], file["turns"], "{args:?}");
        assert_eq!(shown["give_ups"], file["give_ups"], "{args:?}");
    }
}

#[test]
fn a_request_nobody_scripted_fails_the_test() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.tick(&[]);
    assert_eq!(
        s.server.take_unscripted(),
        [format!("GET /api/console/chat/task/{TASK}")],
        "the fake names the request it had no script for"
    );
    assert_eq!(s.job(TASK)["strikes"], 1);
}

/// A give-up is saved by one save of the pass and said at once: a later save of the same
/// pass that fails (exit 4) does not swallow it, and the next tick does not say it again.
#[test]
fn a_give_up_is_said_even_when_a_later_save_of_its_tick_fails() {
    let s = watched_failing();
    // The abandoned job's notice is due: after the save that gave it up, the pass looks at
    // the parent chat; then the job directory becomes a plain file, so the claim's save
    // (the notice's write-ahead) cannot be made.
    let dir = s.env.state.parent().unwrap().to_owned();
    let away = dir.with_file_name("state.away");
    let chats = s.chats.clone();
    let (d, a) = (dir.clone(), away.clone());
    let once = std::sync::atomic::AtomicBool::new(false);
    s.server.handle(
        "GET",
        "/api/chats",
        std::sync::Arc::new(move |r| {
            if !once.swap(true, std::sync::atomic::Ordering::SeqCst) {
                std::fs::rename(&d, &a).unwrap();
                std::fs::write(&d, b"in the way").unwrap();
            }
            chats.read(r)
        }),
    );
    let out = s
        .env
        .std_cmd()
        .env("ATC_BASE_URL", s.server.url())
        .args(["tick", "--max-strikes", "1"])
        .output()
        .unwrap();
    std::fs::remove_file(&dir).unwrap();
    std::fs::rename(&away, &dir).unwrap();
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "atc: gave up on {TASK} (abandoned): 1 failed check in a row (HTTP 500); `atc status {TASK}` says more; the task may still run: `atc wait {TASK}` asks the server\n\
             atc: cannot create the job file's directory {}: something that is not a directory is in the way; point --state (or ATC_STATE) at a place where it can be created\n",
            dir.display()
        )
    );
    // Saved as given up; its notice not yet posted.
    assert_eq!(s.status(TASK), "abandoned");
    assert!(s.posts().is_empty());
    // The next tick posts the notice and does not say the give-up again.
    s.tick(&["--max-strikes", "1"]).run();
    assert_eq!(s.posts().len(), 1);
    assert_eq!(s.status(TASK), "abandoned");
}

/// Issue 36 (L3): a give-up line stderr cannot take (a full disk) does not stop the tick
/// (it panicked, exit 101, after the record was saved as said: never said again); the
/// record is unsaid again, and the next tick a person hears says it, once.
#[test]
fn a_give_up_line_stderr_cannot_take_is_said_by_the_next_tick() {
    if !std::path::Path::new("/dev/full").exists() {
        return;
    }
    let s = watched_failing();
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = s
        .env
        .std_cmd()
        .args(["tick", "--max-strikes", "1"])
        .stderr(full)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let file = s.env.file();
    let records = file["give_ups"].as_array().unwrap();
    assert_eq!(records.len(), 1, "{file}");
    assert!(records[0].get("said_at").is_none(), "unsaid: {file}");
    s.tick(&["--max-strikes", "1"])
        .stderr(format!(
            "atc: gave up on {TASK} (abandoned): 1 failed check in a row (HTTP 500); `atc status {TASK}` says more; the task may still run: `atc wait {TASK}` asks the server\n"
        ))
        .run();
    s.tick(&["--max-strikes", "1"]).file_unchanged();
}
