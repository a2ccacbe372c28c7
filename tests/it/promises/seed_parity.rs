//! The seed plugin's behaviours (Agent Task Callback 0.1.5, `../shared/seeds/000_…txt`:
//! "How it works", "Limitations" and the changelog 0.1.2–0.1.5), ported one test each and
//! named after them, against the fake QwenPaw. Where the seed and the verified 2.2.2
//! contract disagree, the contract wins (noted per test); where atc now does better than
//! the seed (a notice instead of a silent park, read-back instead of giving up), the test
//! says what the seed did and checks what atc does.

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::bodies;
use support::chats::PostFault;
use support::fake::Reply;
use support::hermetic::NOWHERE;
use support::scene::Scene;

const TASK: &str = "task-3f9a0c1b2d4e";

/// 0.1.2: "a task id that 404s … 404 now parks the job as lost" — after one poll, and it
/// is never polled again. The seed parked it silently; atc tells the parent once.
#[test]
fn a_404_parks_the_job_as_lost_after_one_poll() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(404, &bodies::not_found(TASK))]);
    s.tick(&[]);
    assert_eq!(s.status(TASK), "lost");
    assert_eq!(
        s.job(TASK)["last_error"],
        "Task not found: task-3f9a0c1b2d4e"
    );
    s.atc(["status", TASK])
        .stdout_contains("the server has no record of the task (Task not found: task-3f9a0c1b2d4e)")
        .stdout_contains("restarted")
        .stdout_contains("the parent was told");
    s.tick(&[]);
    s.tick(&[]);
    assert_eq!(s.polls(TASK), 1);
    let told = s.delivered("s-77");
    assert_eq!(told.len(), 1, "one notice, not a result: {told:?}");
    assert!(told[0].starts_with(&format!("[TASK_ID: {TASK}]\n[STATUS: lost]\n\n")));
}

/// "An answer that isn't JSON names the base URL as the suspect and counts as one failed
/// check" — an HTML 404 page is a wrong URL, not a lost task.
#[test]
fn an_html_404_is_a_wrong_url_not_a_lost_task() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(
        TASK,
        vec![Reply::html(404, "<html><body>Not Found</body></html>")],
    );
    s.tick(&[]);
    let job = s.job(TASK);
    assert_eq!(job["status"], "pending");
    assert_eq!(job["strikes"], 1);
    let error = job["last_error"].as_str().unwrap();
    assert!(
        error.contains("instead of JSON") && error.contains(&s.server.api()),
        "{error}"
    );
}

/// The same lesson for FastAPI's JSON "no such route" 404 (a base URL with a wrong path):
/// only "Task not found" means the task is lost.
#[test]
fn a_json_no_route_404_is_a_wrong_url_not_a_lost_task() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(404, bodies::NO_ROUTE)]);
    s.tick(&[]);
    let job = s.job(TASK);
    assert_eq!(job["status"], "pending");
    assert_eq!(job["strikes"], 1);
    assert!(
        job["last_error"]
            .as_str()
            .unwrap()
            .contains("no such route"),
        "{job}"
    );
}

/// 0.1.2: failures other than 404 stay retryable (strikes), for a 500 and for a server
/// that refuses connections.
#[test]
fn a_500_and_a_refused_connection_stay_retryable() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(
        TASK,
        vec![
            Reply::json(500, r#"{"detail":"Internal Server Error"}"#),
            Reply::json(200, bodies::RUNNING),
        ],
    );
    s.tick(&[]);
    assert_eq!(
        (s.status(TASK), s.job(TASK)["strikes"].clone()),
        ("pending".into(), json!(1))
    );
    s.tick(&[]);
    let job = s.job(TASK);
    assert_eq!(job["status"], "pending");
    assert!(
        job.get("strikes").is_none(),
        "a good answer resets the strikes: {job}"
    );

    s.atc([
        "--base-url",
        NOWHERE,
        "watch",
        "task-refused",
        "--session",
        "s-77",
    ])
    .stdout_contains("Watching task-refused")
    .chat_check_skipped();
    s.tick(&[]);
    let job = s.job("task-refused");
    assert_eq!(job["status"], "pending");
    assert_eq!(job["strikes"], 1);
    assert!(
        job["last_error"].as_str().unwrap().contains("refused"),
        "{job}"
    );
}

/// "90 consecutive failed checks" → abandoned, with the last error kept.
#[test]
fn the_strike_cap_abandons_the_job() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(502, r#"{"detail":"bad gateway"}"#)]);
    for _ in 0..2 {
        s.tick(&["--max-strikes", "3"]);
    }
    // The tick that gives up says so: cron mails it, the journal keeps it.
    s.tick(&["--max-strikes", "3"]).stderr(format!(
        "atc: gave up on {TASK} (abandoned): 3 failed checks in a row (HTTP 502); `atc status {TASK}` says more; the task may still run: `atc wait {TASK}` asks the server\n"
    ));
    let job = s.job(TASK);
    assert_eq!(job["status"], "abandoned");
    assert!(job["last_error"].as_str().unwrap().contains("bad gateway"));
    s.tick(&["--max-strikes", "3"]);
    assert_eq!(s.polls(TASK), 3, "an abandoned job is not polled again");
    assert_eq!(job["notice"], "delivered", "the parent hears of it: {job}");
}

/// "Jobs older than 24 h are dropped … their task record has almost certainly gone" — here
/// a job still running past the age cap expires.
#[test]
fn the_age_cap_expires_the_job() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.env.edit_job(TASK, |job| {
        job.insert("registered_at".into(), json!("2020-01-01T00:00:00Z"));
    });
    s.poll_replies(TASK, vec![Reply::json(200, bodies::RUNNING)]);
    s.tick(&["--max-age", "24h"]);
    assert_eq!(s.status(TASK), "expired");
    s.tick(&[]);
    assert_eq!(s.polls(TASK), 1);
}

/// 0.1.4 "stop-event checks around delivery": a cancel that lands before the delivery
/// prevents the POST.
#[test]
fn a_cancel_before_delivery_blocks_the_post() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.chats.fault(PostFault::Busy);
    s.tick(&["--busy-retry", "0s"]);
    assert_eq!(s.status(TASK), "delivering");
    s.atc(["cancel", TASK]).stdout_contains("Cancelled");
    s.tick(&["--busy-retry", "0s"]);
    assert_eq!(s.status(TASK), "cancelled");
    assert_eq!(
        s.posts().len(),
        1,
        "only the busy attempt before the cancel"
    );
    assert!(s.delivered("s-77").is_empty());
}

/// The same promise when the look before the POST finds the parent busy: the turn is
/// composed but never claimed, and a cancel then takes the result out of it.
#[test]
fn a_cancel_before_the_claim_blocks_the_post() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.chats.busy_for("s-77", 1);
    s.tick(&[]);
    assert_eq!(s.status(TASK), "delivering");
    assert_eq!(s.turn(TASK)["state"], "open");
    // The child had finished (its result waits for the busy parent): not "keeps running".
    s.atc(["cancel", TASK]).stdout(format!(
        "Cancelled the watch on {TASK}; the child had already finished; its result is not delivered (check_agent_task still shows it).\n"
    ));
    s.tick(&[]);
    s.tick(&[]);
    assert_eq!(s.status(TASK), "cancelled");
    assert!(s.posts().is_empty(), "never posted");
    assert!(s.delivered("s-77").is_empty());
}

/// 0.1.4 "idempotent re-registration keeping the live watcher's job_id"; "Registering the
/// same task_id twice replaces the job record rather than starting a second poller."
#[test]
fn re_registration_keeps_one_job_per_task() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    let first = s.job(TASK)["job_id"].clone();
    s.watch(TASK, &[]);
    assert_eq!(s.job(TASK)["job_id"], first);
    s.watch(TASK, &["--user", "alice"]);
    assert_ne!(s.job(TASK)["job_id"], first);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::RUNNING)]);
    s.tick(&[]);
    assert_eq!(s.polls(TASK), 1, "one poller per task");
    assert_eq!(s.env.jobs().len(), 1);
}

/// 0.1.4 "no re-watch of delivered tasks".
#[test]
fn a_delivered_task_is_not_watched_again() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.tick(&[]);
    assert_eq!(s.status(TASK), "done");
    s.atc(["watch", TASK, "--session", "s-77"])
        .status(1)
        .stderr_contains("already delivered");
    s.tick(&[]);
    assert_eq!(s.posts().len(), 1);
}

/// 0.1.3: polls carry the X-Agent-Id of the target agent (as check_agent_task does); the
/// delivery goes out as the watching agent.
#[test]
fn polls_carry_the_target_agents_id() {
    let s = Scene::new();
    s.watch(TASK, &["--agent", "default", "--target-agent", "SE"]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.tick(&[]);
    let requests = s.server.requests();
    let get = requests
        .iter()
        .find(|r| r.path == Scene::task_path(TASK))
        .unwrap();
    assert_eq!(get.header("x-agent-id"), Some("SE"));
    let post = requests.iter().find(|r| r.method == "POST").unwrap();
    assert_eq!(post.header("x-agent-id"), Some("default"));
}

/// How it works, 3–4: a finished task is delivered once, as a user turn into the exact
/// registering chat, and the job becomes done.
#[test]
fn a_finished_task_is_delivered_exactly_once() {
    let s = Scene::new();
    s.watch(TASK, &["--user", "alice", "--channel", "discord"]);
    s.poll_replies(
        TASK,
        vec![
            Reply::json(200, bodies::RUNNING),
            Reply::json(200, bodies::FINISHED_COMPLETED),
        ],
    );
    // The fake has no discord channel: the parent's reply cannot go on to the person,
    // which the one tick that finds out says, once.
    let said = s.ticks_said(4);
    assert_eq!(
        said.lines()
            .filter(|l| l.starts_with(&format!("atc: gave up on {TASK} (done, forward failed)")))
            .count(),
        1,
        "{said}"
    );
    assert_eq!(said.lines().count(), 1, "{said}");
    let posts = s.posts();
    assert_eq!(posts.len(), 1);
    let job = s.job(TASK);
    let body = posts[0].json();
    assert_eq!(
        body,
        json!({
            "session_id": "s-77", "user_id": "alice", "channel": "discord",
            "input": [{"role": "user", "content": [{"type": "text", "text": job["final"]}],
                       "metadata": {"qwenpaw_client_message_id": format!("atc-{}", job["job_id"].as_str().unwrap()),
                                    "atc_task_id": TASK}}]
        })
    );
    assert_eq!(job["status"], "done");
    let turn = s.turn(TASK);
    assert_eq!(
        turn["turn_id"],
        body["input"][0]["metadata"]["qwenpaw_client_message_id"]
    );
    assert!(turn["turn_task_id"].as_str().unwrap().starts_with("task-"));
    assert_eq!(
        turn["parent_turn"], "completed",
        "the parent's turn is followed to its end"
    );
    assert!(turn["delivered_at"].is_string());
    assert_eq!(s.polls(TASK), 2, "a done job is not polled again");
    assert_eq!(s.delivered("s-77"), [job["final"].as_str().unwrap()]);
}

/// "the payload has no final_response field (the reply is the text of the last output
/// item) … only the formatter turns a failed run into a failure sentence" (0.1.2).
#[test]
fn the_delivery_is_the_last_messages_text_and_failures_say_task_failed() {
    let s = Scene::new();
    s.watch("task-ok", &[]);
    s.watch("task-bad", &["--session", "s-88"]);
    s.poll_replies(
        "task-ok",
        vec![Reply::json(
            200,
            &bodies::finished_completed("child-1", "第一\n最终答案 🎯"),
        )],
    );
    s.poll_replies("task-bad", vec![Reply::json(200, bodies::FINISHED_TIMEOUT)]);
    s.tick(&[]);
    let posts = s.posts();
    assert_eq!(posts.len(), 2);
    let by_session = |sid: &str| {
        posts
            .iter()
            .find(|p| p.json()["session_id"] == sid)
            .map(Scene::posted_text)
            .unwrap()
    };
    assert_eq!(
        by_session("s-77"),
        "[TASK_ID: task-ok]\n[STATUS: finished]\n\nTask completed.\n\n[SESSION: child-1]\n\n第一\n最终答案 🎯"
    );
    let failed = by_session("s-88");
    assert_eq!(
        failed,
        "[TASK_ID: task-bad]\n[STATUS: finished]\n\nTask failed.\n\nError: Task timed out after 1s"
    );
    assert!(!failed.contains('{'), "no JSON dump");
}

/// "When a POST's outcome is unknown the job parks as unconfirmed … nothing is sent again
/// — that one reply has to be fetched by hand." atc reads the parent chat back instead:
/// a reset, a 5xx or a timeout after the turn was stored ends with the one copy found.
#[test]
fn an_unknown_post_outcome_is_settled_by_reading_the_chat_back() {
    for (name, fault) in [
        ("reset", PostFault::DropAfterStore),
        ("500", PostFault::Error500AfterStore),
        ("timeout", PostFault::SlowAfterStore(Duration::from_secs(3))),
    ] {
        let s = Scene::new();
        s.watch(TASK, &[]);
        s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
        s.chats.fault(fault);
        s.tick(&["--http-timeout", "1s"]);
        let job = s.job(TASK);
        assert_eq!(job["status"], "unconfirmed", "{name}: {job}");
        assert!(job["final"].as_str().unwrap().ends_with("ECHO: hello"));
        assert!(s.turn(TASK)["delivery"]["attempt_started_at"].is_null());
        s.tick(&["--http-timeout", "1s"]);
        let job = s.job(TASK);
        assert_eq!(job["status"], "done", "{name}: {job}");
        let turn = s.turn(TASK);
        assert_eq!(turn["delivery"]["confirmed"], "read-back", "{name}");
        assert_eq!(
            turn["parent_turn"], "completed",
            "{name}: stamped on the stored turn"
        );
        assert_eq!(s.posts().len(), 1, "{name}: never re-posted");
        assert_eq!(s.delivered("s-77").len(), 1, "{name}: exactly one copy");
    }
}

/// "a delivery attempt that meets HTTP 409 … backs off and retries … instead of blindly
/// re-posting, so a busy parent session never receives duplicate turns". atc asks the
/// chat first, so a 409 only comes from a race; it still backs off.
#[test]
fn a_409_backs_off_and_later_delivers_exactly_once() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.chats.fault(PostFault::Busy);
    s.tick(&[]);
    assert_eq!(s.status(TASK), "delivering");
    let turn = s.turn(TASK);
    assert_eq!(turn["delivery"]["busy"], 1);
    assert_eq!(turn["delivery"]["last_http_status"], 409);
    assert!(turn["delivery"]["next_attempt_at"].is_string());
    s.tick(&[]);
    assert_eq!(s.posts().len(), 1, "not before the back-off is over");
    s.env.edit_turn(TASK, |turn| {
        turn["delivery"]["next_attempt_at"] = json!("2020-01-01T00:00:00Z");
    });
    s.tick(&[]);
    s.tick(&[]);
    assert_eq!(s.posts().len(), 2);
    assert_eq!(
        Scene::posted_text(&s.posts()[0]),
        Scene::posted_text(&s.posts()[1]),
        "the same stored text"
    );
    assert_eq!(s.status(TASK), "done");
    assert_eq!(s.turn(TASK)["delivery"]["attempts"], 2);
    assert_eq!(
        s.polls(TASK),
        1,
        "a finished task is not polled again while its delivery waits"
    );
    assert_eq!(s.delivered("s-77").len(), 1);
}

/// "… up to 30 × 20 s" (the seed then dropped the result): atc asks the chat each tick and
/// waits until --busy-deadline, without a single 409, then keeps the text as undelivered.
#[test]
fn a_chat_busy_too_long_leaves_the_result_undelivered() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.chats.busy_for("s-77", 1000);
    s.tick(&[]);
    s.tick(&[]);
    assert_eq!(s.status(TASK), "delivering");
    assert_eq!(s.turn(TASK)["delivery"]["busy"], 2);
    s.env.edit_turn(TASK, |turn| {
        turn["delivery"]["waiting_since"] = json!("2020-01-01T00:00:00Z");
    });
    s.tick(&["--busy-deadline", "6h"]).stderr(format!(
        "atc: gave up on {TASK} (undelivered): the parent chat stayed busy past --busy-deadline; `atc status {TASK}` says more; `atc redeliver {TASK}` tries again\n"
    ));
    let job = s.job(TASK);
    assert_eq!(job["status"], "undelivered");
    assert!(job["final"].as_str().unwrap().contains("ECHO: hello"));
    assert!(s.posts().is_empty(), "no POST into a busy chat, so no 409");
    s.atc(["status", TASK])
        .stdout_contains("undelivered")
        .stdout_contains("not delivered after 3 waits (the parent chat is running a turn)")
        .stdout_contains("ECHO: hello");
}

/// "Jobs older than 24 h are dropped at startup" → pruning: ended jobs older than --keep
/// go; live jobs and recent ended ones stay.
#[test]
fn pruning_keeps_pending_and_recent_terminal_jobs() {
    let s = Scene::new();
    for task in ["task-old-done", "task-new-done", "task-old-pending"] {
        s.watch(task, &[]);
    }
    for (task, status) in [("task-old-done", "done"), ("task-new-done", "lost")] {
        s.env.edit_job(task, |job| {
            job.insert("status".into(), json!(status));
        });
    }
    for task in ["task-old-done", "task-old-pending"] {
        s.env.edit_job(task, |job| {
            job.insert("registered_at".into(), json!("2020-01-01T00:00:00Z"));
            job.insert("updated_at".into(), json!("2020-01-01T00:00:00Z"));
        });
    }
    s.poll_replies("task-old-pending", vec![Reply::json(200, bodies::RUNNING)]);
    s.tick(&["--keep", "7d", "--max-age", "3650d"]);
    let left: Vec<String> = s
        .env
        .jobs()
        .iter()
        .map(|j| j["task_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(left, ["task-new-done", "task-old-pending"]);
    // The log keeps what went, and as what.
    let log = s.env.logged(&["task-old-done"]);
    let last = log.last().unwrap();
    assert_eq!(
        (&last["event"], &last["status"]),
        (&json!("pruned"), &json!("done")),
        "{log:?}"
    );
}

/// 0.1.4 "guarded terminal writes": a cancel that lands while the POST is in flight stays
/// cancelled, and `cancel` says the result may be on its way.
#[test]
fn a_cancel_during_the_post_is_not_clobbered() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.chats
        .fault(PostFault::SlowAfterStore(Duration::from_secs(2)));
    let tick = s.tick_until_posted(&[]);
    s.atc(["cancel", TASK])
        .stdout_contains("may already be on its way")
        .run();
    tick.wait();
    let job = s.job(TASK);
    assert_eq!(job["status"], "cancelled", "{job}");
    assert!(job.get("delivered_at").is_none(), "{job}");
    // Since issue 15 the cancelled job keeps that the POST was accepted (so a re-watch is
    // refused rather than posting the result again): it still points at its turn, which
    // landed.
    let turn = s.turn(TASK);
    assert_eq!(turn["state"], "delivered", "{turn}");
    assert_eq!(turn["delivery"]["last_http_status"], 200, "{turn}");
    // What became of it is worded from the turn, not stored on the job.
    s.atc(["status", TASK])
        .stdout_contains(format!(
            "cancelled while its result was being posted; it was delivered anyway (turn {})",
            turn["turn_id"].as_str().unwrap()
        ))
        .file_unchanged()
        .run();
}

/// 0.1.2 "dropping unconfirmed, which risked duplicate delivery": a tick killed mid-POST
/// leaves a job the next tick recovers — and, reading the chat back, finds delivered: one
/// copy, never a second POST.
#[test]
fn a_tick_killed_during_the_post_never_posts_twice() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.chats
        .fault(PostFault::SlowAfterStore(Duration::from_secs(30)));
    s.tick_until_posted(&[]).kill();
    assert_eq!(
        s.status(TASK),
        "delivering",
        "the write-ahead record is on disk"
    );
    // Its turn was claimed: a redeliver now is refused as being posted.
    s.atc(["redeliver", TASK])
        .status(1)
        .stderr(format!(
            "atc: {TASK} is being posted (its turn was claimed); only an undelivered, unconfirmed, misrouted or refused (error) delivery, or a result the parent read itself, can be tried again\n"
        ))
        .file_unchanged()
        .run();
    s.tick(&[]);
    let job = s.job(TASK);
    assert_eq!(job["status"], "done", "{job}");
    assert_eq!(s.turn(TASK)["delivery"]["confirmed"], "read-back");
    s.tick(&[]);
    assert_eq!(s.posts().len(), 1);
    assert_eq!(s.delivered("s-77").len(), 1);
}

/// The same, for a tick that died between the write-ahead save and the POST: the file
/// shows an attempt in flight and nothing was sent. The next tick never posts blind: it
/// reads the chat back, finds nothing, and only then posts (once).
#[test]
fn a_write_ahead_record_without_a_post_is_read_back_then_posted_once() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    let mut file = s.env.file();
    let job = &mut file["jobs"][0];
    job["status"] = json!("delivering");
    job["final"] =
        json!("[TASK_ID: task-3f9a0c1b2d4e]\n[STATUS: finished]\n\nTask completed.\n\nX");
    let mut turn = support::atc::turn_for(job, "claimed");
    turn["delivery"] = json!({"attempts": 1, "busy": 0, "last_http_status": null,
        "next_attempt_at": null, "attempt_started_at": "2026-11-30T20:14:05Z"});
    file["turns"] = json!([turn]);
    s.env.write_file(&file);
    s.tick(&[]);
    // Recovered as of unknown outcome: read back once the settle window from then has
    // passed, and absent once is not proof: a second look a window later.
    assert_eq!(s.status(TASK), "unconfirmed");
    s.env.settle_passed(TASK);
    s.tick(&[]);
    assert_eq!(s.status(TASK), "unconfirmed");
    s.env.absent_long_ago(TASK);
    s.tick(&[]);
    let job = s.job(TASK);
    assert_eq!(job["status"], "done", "{job}");
    assert_eq!(s.turn(TASK)["delivery"]["attempts"], 2);
    let history = s
        .server
        .requests()
        .into_iter()
        .position(|r| r.path.starts_with("/api/chats/") && r.method == "GET");
    let post = s
        .server
        .requests()
        .into_iter()
        .position(|r| r.method == "POST");
    assert!(history < post, "read back first, then post");
    assert_eq!(s.posts().len(), 1);
    assert_eq!(s.polls(TASK), 0);
    assert_eq!(s.delivered("s-77").len(), 1);
}
