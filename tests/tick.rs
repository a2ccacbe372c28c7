//! `atc tick` mechanics beyond the seed's behaviours: parallelism, single flight, locking
//! around network I/O, the report, auth, the request shapes and the error classes.

mod support;

use std::time::{Duration, Instant};

use predicates::prelude::*;
use serde_json::{Value, json};
use support::atc::{job, stderr, stdout};
use support::bodies;
use support::fake::Reply;
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
fn polls_run_in_parallel() {
    let s = Scene::new();
    const JOBS: usize = 200;
    const LATENCY: Duration = Duration::from_millis(50);
    let jobs: Vec<Value> = (0..JOBS)
        .map(|i| job(&format!("task-{i:012x}"), "pending", &s.server.api()))
        .collect();
    s.env.write_file(&json!({"version": 1, "jobs": jobs}));
    s.server.on_prefix(
        "GET",
        "/api/console/chat/task/",
        vec![Reply::json(200, bodies::RUNNING).with_delay(LATENCY)],
    );
    let started = Instant::now();
    s.tick(&[]);
    let elapsed = started.elapsed();
    let sequential = LATENCY * JOBS as u32;
    assert_eq!(s.server.requests().len(), JOBS);
    assert!(
        elapsed * 4 <= sequential,
        "one tick over {JOBS} jobs took {elapsed:?}; sequential polling would take {sequential:?}"
    );
    assert!(s.env.jobs().iter().all(|j| j["polls"] == 1));
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
        s.post_replies(vec![
            Reply::json(200, bodies::SUBMIT_OK).with_delay(Duration::from_millis(300)),
        ]);
        let ticks: Vec<_> = (0..2)
            .map(|_| s.env.std_cmd().arg("tick").spawn().unwrap())
            .collect();
        for mut tick in ticks {
            assert!(tick.wait().unwrap().success());
        }
        s.tick(&[]);
        assert_eq!(s.posts().len(), 1, "round {round}");
        assert_eq!(s.status(TASK), "done");
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
    s.env
        .cmd()
        .arg("tick")
        .assert()
        .success()
        .stdout("")
        .stderr("");
    s.env
        .cmd()
        .args(["tick", "-v"])
        .assert()
        .success()
        .stderr(predicate::str::contains("another atc tick is running"));
    assert_eq!(s.polls(TASK), 0);
}

#[test]
fn watch_and_cancel_do_not_wait_for_a_tick_stuck_on_a_slow_server() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(
        TASK,
        vec![Reply::json(200, bodies::RUNNING).with_delay(Duration::from_secs(10))],
    );
    let mut tick = s.env.std_cmd().arg("tick").spawn().unwrap();
    wait_until("the slow poll", || s.polls(TASK) == 1);
    s.watch("task-other", &[]);
    s.env
        .cmd()
        .args(["cancel", "task-other"])
        .assert()
        .success();
    s.env.cmd().arg("status").assert().success();
    assert!(
        tick.try_wait().unwrap().is_none(),
        "the tick is still waiting on the server"
    );
    assert!(tick.wait().unwrap().success());
    assert_eq!(s.status("task-other"), "cancelled");
    assert_eq!(s.job(TASK)["polls"], 1);
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
    s.post_replies(vec![Reply::json(200, bodies::SUBMIT_OK)]);
    let out = s.tick(&[]);
    assert_eq!((stdout(&out), stderr(&out)), (String::new(), String::new()));

    s.watch("task-fin2", &["--session", "s-4"]);
    s.poll_replies(
        "task-fin2",
        vec![Reply::json(200, bodies::FINISHED_COMPLETED)],
    );
    s.post_replies(vec![Reply::json(409, bodies::BUSY_409)]);
    let out = s.tick(&["-v", "--busy-retry", "0s"]);
    assert_eq!(stdout(&out), "");
    assert_eq!(
        stderr(&out),
        "tick: 2 polled, 0 delivered, 1 busy, 0 lost, 0 errors\n"
    );

    let out = s
        .env
        .cmd()
        .args(["--json", "tick", "--busy-retry", "0s"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["polled"], 1);
    assert_eq!(report["busy"], 1);
    assert_eq!(report["tasks"]["busy"], json!(["task-fin2"]));
    assert_eq!(report["tasks"]["running"], json!(["task-run"]));
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("ECHO"),
        "no message text in reports"
    );
}

#[test]
fn tokens_come_from_the_environment_and_go_nowhere_else() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.post_replies(vec![Reply::json(200, bodies::SUBMIT_OK)]);
    let before = s.server.requests().len();
    let out = s
        .env
        .cmd()
        .args(["-vv", "--json", "tick"])
        .env("QWENPAW_RUNTIME_INTERNAL_TOKEN", "rt-secret-1")
        .env("ATC_BEARER_TOKEN", "bearer-secret-2")
        .output()
        .unwrap();
    assert!(out.status.success());
    let requests: Vec<_> = s.server.requests().into_iter().skip(before).collect();
    assert_eq!(requests.len(), 2, "one poll, one delivery");
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
    let all_output = format!("{}{}", stdout(&out), stderr(&out));
    assert!(!all_output.contains("secret"), "{all_output}");
    assert!(!String::from_utf8_lossy(&s.env.bytes()).contains("secret"));
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
    s.post_replies(vec![Reply::json(200, bodies::SUBMIT_OK)]);
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
    s.post_replies(vec![Reply::json(200, bodies::SUBMIT_OK)]);
    s.tick(&[]);
    assert_eq!(s.posts().len(), 2, "one per chat");
    assert_eq!(s.status("task-a"), "done", "oldest first");
    assert_eq!(s.status("task-b"), "delivering");
    s.tick(&[]);
    assert_eq!(s.status("task-b"), "done");
    assert_eq!(s.posts().len(), 3);
}

#[test]
fn a_refused_delivery_waits_and_another_4xx_is_an_error_with_the_detail() {
    let s = Scene::new();
    s.watch(TASK, &["--agent", "ghost"]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.post_replies(vec![Reply::json(404, &bodies::unknown_agent("ghost"))]);
    s.tick(&[]);
    let job = s.job(TASK);
    assert_eq!(job["status"], "error");
    assert!(
        job["last_error"]
            .as_str()
            .unwrap()
            .contains("Agent 'ghost' not found"),
        "{job}"
    );

    // Nothing sent: the server is down when the delivery is due.
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.post_replies(vec![Reply::json(409, bodies::BUSY_409)]);
    s.tick(&[]);
    let dead = format!("{}/api", Scene::dead_url());
    s.env.edit_job(TASK, |job| {
        job.insert("base_url".into(), json!(dead));
        job["delivery"]["next_attempt_at"] = json!("2020-01-01T00:00:00Z");
    });
    s.tick(&[]);
    let job = s.job(TASK);
    assert_eq!(job["status"], "delivering", "{job}");
    assert_eq!(job["delivery"]["unreachable"], 1);
    assert!(job["delivery"]["next_attempt_at"].as_str().unwrap() > "2020");
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
    s.server.on(
        "POST",
        "/api/console/chat/task",
        vec![
            Reply::json(409, bodies::BUSY_409),
            Reply::json(200, bodies::SUBMIT_OK),
        ],
    );
    s.tick(&[]);
    // Which of the two deliveries met the 409 depends on timing; find out from the file.
    let busy = if s.status("task-busy") == "delivering" {
        "task-busy"
    } else {
        "task-done"
    };
    let done = if busy == "task-busy" {
        "task-done"
    } else {
        "task-busy"
    };

    let list = stdout(&s.env.cmd().arg("status").output().unwrap());
    assert!(list.contains("1 failed check: HTTP 503"), "{list}");
    assert!(list.contains("chat busy ×1; next try in"), "{list}");
    assert!(list.contains("delivered 0s ago"), "{list}");

    let strike = stdout(
        &s.env
            .cmd()
            .args(["status", "task-strike"])
            .output()
            .unwrap(),
    );
    assert!(
        strike.contains("strikes         1") && strike.contains("last error      HTTP 503"),
        "{strike}"
    );
    let waiting = stdout(&s.env.cmd().args(["status", busy]).output().unwrap());
    assert!(
        waiting.contains("busy            1 (409 chat busy)") && waiting.contains("next attempt"),
        "{waiting}"
    );
    let delivered = stdout(&s.env.cmd().args(["status", done]).output().unwrap());
    assert!(
        delivered.contains("delivered       ") && delivered.contains("[STATUS: finished]"),
        "{delivered}"
    );
}

#[test]
fn a_pass_with_nothing_to_change_does_not_rewrite_the_file() {
    use std::os::unix::fs::MetadataExt;
    let s = Scene::new();
    let mut finished = job("task-done", "done", &s.server.api());
    finished["updated_at"] = json!("2099-01-01T00:00:00Z");
    s.env.write_file(
        &json!({"version": 1, "jobs": [finished, job("task-lost", "lost", &s.server.api())]}),
    );
    // Recent enough to be kept.
    s.env.edit_job("task-lost", |j| {
        j.insert("updated_at".into(), json!("2099-01-01T00:00:00Z"));
    });
    let inode = std::fs::metadata(&s.env.state).unwrap().ino();
    let before = s.env.bytes();
    s.tick(&[]);
    assert_eq!(
        std::fs::metadata(&s.env.state).unwrap().ino(),
        inode,
        "not replaced"
    );
    assert_eq!(s.env.bytes(), before);
    assert!(s.server.requests().is_empty());
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
    s.post_replies(vec![Reply::json(200, bodies::SUBMIT_OK)]);
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

#[test]
fn watch_warns_when_the_parent_chat_does_not_exist() {
    let s = Scene::new();
    let chats = r#"[{"id":"6f1c0e1a-0000-4000-8000-000000000001","session_id":"s-77","user_id":"default","channel":"console","status":"idle"}]"#;
    s.server
        .on("GET", "/api/chats", vec![Reply::json(200, chats)]);
    let watch = |task: &str, session: &str| {
        s.env
            .cmd()
            .args([
                "--base-url",
                &s.server.url(),
                "watch",
                task,
                "--session",
                session,
            ])
            .output()
            .unwrap()
    };
    let known = watch("task-a", "s-77");
    assert!(known.status.success());
    assert_eq!(stderr(&known), "");
    let ghost = watch("task-b", "s-78");
    assert!(ghost.status.success(), "a warning, not a refusal");
    let warning = stderr(&ghost);
    assert!(
        warning.starts_with("atc: warning: ")
            && warning.contains("no chat with session s-78 (user default, channel console)"),
        "{warning}"
    );
    assert_eq!(s.status("task-b"), "pending");
    let lookup = s
        .server
        .requests()
        .into_iter()
        .find(|r| r.path == "/api/chats")
        .unwrap();
    assert_eq!(lookup.query, "user_id=default&channel=console");
    assert_eq!(lookup.header("x-agent-id"), Some("default"));

    // The server being away is no reason to complain (or to fail).
    let dead = Scene::dead_url();
    s.env
        .cmd()
        .args(["--base-url", &dead, "watch", "task-c", "--session", "s-1"])
        .assert()
        .success()
        .stderr("");
}

#[test]
fn an_abandoned_job_counts_as_one_error() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(
        TASK,
        vec![Reply::json(500, r#"{"detail":"Internal Server Error"}"#)],
    );
    let out = s.tick(&["-v", "--max-strikes", "1"]);
    assert_eq!(s.status(TASK), "abandoned");
    assert_eq!(
        stderr(&out),
        "tick: 1 polled, 0 delivered, 0 busy, 0 lost, 1 errors\n"
    );
}
