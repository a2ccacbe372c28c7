//! A misbehaving server, fault by fault: down, hanging, trickling, erroring in bursts, busy
//! in storms, answering HTML, redirecting, cutting connections, sending too much, invalid
//! UTF-8 or absurdly deep JSON, speaking plain HTTP to an https:// URL. Each ends in the
//! right status, with one copy at most in the parent chat, a valid job file, and a note
//! that says what went wrong and what to suspect.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::atc::TestEnv;
use support::bodies;
use support::chats::PostFault;
use support::fake::{FakeQwenPaw, Reply, Wire};
use support::hermetic::NOWHERE;
use support::scene::Scene;

const TASK: &str = "task-3f9a0c1b2d4e";

/// The job of `TASK` after ticks that only struck it: still pending with `strikes` failed
/// checks in a row, nothing posted. Returns its last error.
fn struck(s: &Scene, strikes: u64) -> String {
    let job = s.job(TASK);
    assert_eq!(job["status"], "pending", "{job}");
    assert_eq!(job["strikes"], strikes, "{job}");
    assert!(
        s.posts().iter().all(|p| p.json()["session_id"] != "s-77"),
        "nothing was posted for it"
    );
    assert!(s.delivered("s-77").is_empty());
    job["last_error"].as_str().expect("a last error").to_owned()
}

/// `atc status TASK` tells the person the failed checks and the last error.
fn status_says(s: &Scene, strikes: u64, error: &str) {
    let checks = if strikes == 1 {
        "1 failed check".to_owned()
    } else {
        format!("{strikes} failed checks")
    };
    s.atc(["status", TASK])
        .stdout_contains(format!("last error      {error}"))
        .stdout_contains(format!("note            {checks} in a row; last: {error}"));
}

/// The task finished and its result is in the parent chat exactly once, no strikes left.
/// With the result due, the chat list answers `reply`: nothing is posted, the job waits
/// saying `says`; once the list is sound again the result is delivered, once.
fn a_bad_chat_list_waits_then_delivers(s: &Scene, reply: Reply, says: &str) {
    s.server.on("GET", "/api/chats", vec![reply]);
    s.tick(&[]);
    assert_eq!(s.status(TASK), "delivering");
    let turn = s.turn(TASK);
    let error = turn["delivery"]["error"].as_str().unwrap();
    assert!(error.contains(says), "{turn}");
    s.server.off("GET", "/api/chats");
    s.tick(&[]);
    delivered_once(s);
}

fn delivered_once(s: &Scene) {
    let job = s.job(TASK);
    assert_eq!(job["status"], "done", "{job}");
    assert!(job.get("strikes").is_none(), "strikes reset: {job}");
    assert!(job.get("last_error").is_none(), "{job}");
    let turn = s.turn(TASK);
    assert_eq!(turn["state"], "delivered", "{turn}");
    assert!(turn["delivery"].get("error").is_none(), "{turn}");
    let delivered = s.delivered("s-77");
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert!(delivered[0].ends_with("ECHO: hello"), "{delivered:?}");
}

fn poll_url(s: &Scene) -> String {
    format!("GET {}/console/chat/task/{TASK}", s.server.api())
}

// ---------------------------------------------------------------------------------------
// Down, hanging, trickling

#[test]
fn a_server_that_is_down_is_a_strike_saying_so_and_recovery_delivers_once() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.env.edit_job(TASK, |job| {
        job.insert("base_url".into(), json!(format!("{NOWHERE}/api")));
    });
    s.tick(&[]);
    s.tick(&[]);
    let error = struck(&s, 2);
    assert_eq!(
        error,
        format!(
            "GET {NOWHERE}/api/console/chat/task/{TASK}: connection refused (is QwenPaw running?)"
        )
    );
    status_says(&s, 2, &error);

    // Back up: the next good answer delivers, and the strikes are gone.
    s.env.edit_job(TASK, |job| {
        job.insert("base_url".into(), json!(s.server.api()));
    });
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.tick(&[]);
    delivered_once(&s);

    // `wait` in the foreground gives up after five refused polls, with exit 5 and the same
    // words (the hermetic base URL is where nothing listens).
    s.env
        .atc(["wait", TASK, "--interval", "0s"])
        .status(5)
        .stderr(format!(
            "atc: {TASK}: 5 polls in a row failed; last: GET {NOWHERE}/api/console/chat/task/{TASK}: connection refused (is QwenPaw running?)\n"
        ))
        .file_unchanged();
}

#[test]
fn a_hanging_server_is_a_strike_at_the_http_timeout_and_the_tick_finishes() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.watch("task-fine", &["--session", "s-2"]);
    s.poll_replies(
        TASK,
        vec![Reply::hang(), Reply::json(200, bodies::FINISHED_COMPLETED)],
    );
    s.poll_replies(
        "task-fine",
        vec![Reply::json(200, bodies::FINISHED_COMPLETED)],
    );
    s.tick(&["--http-timeout", "1s"]);
    let error = struck(&s, 1);
    assert_eq!(
        error,
        format!("{}: timed out (receive response)", poll_url(&s))
    );
    status_says(&s, 1, &error);
    assert_eq!(s.status("task-fine"), "done", "the others are not held up");
    assert_eq!(s.delivered("s-2").len(), 1);

    // The chat check hangs when the result is due: nothing is posted blind, it waits.
    s.server.on("GET", "/api/chats", vec![Reply::hang()]);
    s.tick(&["--http-timeout", "1s"]);
    assert_eq!(s.status(TASK), "delivering");
    let turn = s.turn(TASK);
    assert_eq!(turn["delivery"]["unreachable"], 1, "{turn}");
    assert_eq!(turn["delivery"]["attempts"], 0, "{turn}");
    assert!(
        turn["delivery"]["error"]
            .as_str()
            .unwrap()
            .contains("/api/chats?user_id=default&channel=console: timed out (receive response)"),
        "{turn}"
    );
    assert!(s.delivered("s-77").is_empty());
    s.server.off("GET", "/api/chats");
    s.tick(&["--http-timeout", "1s"]);
    delivered_once(&s);
    assert_eq!(s.posts().len(), 2, "one per task");
}

#[test]
fn a_body_that_trickles_or_never_completes_is_a_strike_at_the_http_timeout() {
    for (name, wire) in [
        (
            "a byte every 100 ms",
            Wire::Drip(Duration::from_millis(100)),
        ),
        ("part of the body, then silence", Wire::Stall(100)),
        ("the head, then silence", Wire::Stall(0)),
    ] {
        let s = Scene::new();
        s.watch(TASK, &[]);
        s.poll_replies(
            TASK,
            vec![
                Reply::json(200, bodies::FINISHED_COMPLETED).on_wire(wire),
                Reply::json(200, bodies::FINISHED_COMPLETED),
            ],
        );
        s.tick(&["--http-timeout", "1s"]);
        let error = struck(&s, 1);
        assert_eq!(
            error, "HTTP 200: reading the answer failed: timed out (receive body)",
            "{name}"
        );
        s.tick(&["--http-timeout", "1s"]);
        delivered_once(&s);
    }
}

/// An answer whose head arrives in two reads (the status line first) is read whole.
#[test]
fn an_answer_whose_head_arrives_in_two_reads_is_read_whole() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(
        TASK,
        vec![
            Reply::json(200, bodies::FINISHED_COMPLETED)
                .on_wire(Wire::SplitHead(Duration::from_millis(50))),
        ],
    );
    s.tick(&[]);
    delivered_once(&s);
}

/// A server that closes the connection without an answer, or in the middle of one, is a
/// strike saying so at once (not at the HTTP timeout), and the next poll goes on.
#[test]
fn a_connection_closed_without_an_answer_or_cut_short_is_a_strike_at_once() {
    let closed = "the server closed the connection before its answer was whole";
    for (name, reply, said) in [
        ("no answer", Reply::dropped(), None),
        (
            "half the body",
            Reply::json(200, bodies::FINISHED_COMPLETED).on_wire(Wire::Cut(20)),
            Some(format!("HTTP 200: reading the answer failed: {closed}")),
        ),
    ] {
        let s = Scene::new();
        s.watch(TASK, &[]);
        s.poll_replies(
            TASK,
            vec![reply, Reply::json(200, bodies::FINISHED_COMPLETED)],
        );
        s.tick(&["--http-timeout", "5s"]);
        let error = struck(&s, 1);
        let said = said.unwrap_or_else(|| format!("{}: {closed}", poll_url(&s)));
        assert_eq!(error, said, "{name}");
        s.tick(&[]);
        delivered_once(&s);
    }
}

// ---------------------------------------------------------------------------------------
// Error answers

#[test]
fn a_burst_of_5xx_is_strikes_that_reset_on_success_then_delivered_once() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    let nginx = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n";
    s.poll_replies(
        TASK,
        vec![
            Reply::json(500, r#"{"detail":"Internal Server Error"}"#),
            Reply::html(502, nginx),
            Reply::json(503, r#"{"detail":"Service Unavailable"}"#),
            Reply::json(200, bodies::RUNNING),
            Reply::text(504, "upstream timed out"),
            Reply::json(200, bodies::FINISHED_COMPLETED),
        ],
    );
    // Five failed polls in all, more than --max-strikes 4: only a run of them counts.
    let limit = ["--max-strikes", "4"];
    let api = s.server.api();
    for (strikes, error) in [
        (1, "HTTP 500: Internal Server Error".to_owned()),
        (
            2,
            format!(
                "HTTP 502 with text/html; charset=utf-8 instead of JSON: is the base URL {api} right? It must point at QwenPaw's /api"
            ),
        ),
        (3, "HTTP 503: Service Unavailable".to_owned()),
    ] {
        s.tick(&limit);
        assert_eq!(struck(&s, strikes), error);
    }
    status_says(&s, 3, "HTTP 503: Service Unavailable");
    s.tick(&limit);
    let job = s.job(TASK);
    assert_eq!(job["status"], "pending");
    assert!(job.get("strikes").is_none(), "a good answer resets: {job}");
    s.tick(&limit);
    assert!(struck(&s, 1).starts_with("HTTP 504 with text/plain"));

    // The chat check meets a 503 when the result is due: it waits, posts nothing.
    s.server.answer(
        "GET",
        "/api/chats",
        503,
        r#"{"detail":"Service Unavailable"}"#,
    );
    s.tick(&limit);
    assert_eq!(s.status(TASK), "delivering");
    let turn = s.turn(TASK);
    assert_eq!(turn["delivery"]["unreachable"], 1, "{turn}");
    assert!(s.posts().is_empty());
    s.server.off("GET", "/api/chats");
    s.tick(&limit);
    delivered_once(&s);
    assert_eq!(s.posts().len(), 1);
}

#[test]
fn a_409_storm_backs_off_never_stores_twice_and_ends_delivered() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    for _ in 0..5 {
        s.chats.fault(PostFault::Busy);
    }
    s.tick(&[]);
    assert_eq!(s.status(TASK), "delivering");
    let turn = s.turn(TASK);
    assert_eq!(turn["delivery"]["busy"], 1);
    assert!(turn["delivery"]["next_attempt_at"].is_string(), "{turn}");
    // Within --busy-retry (20 s by default) the next tick does not post again.
    s.tick(&[]).file_unchanged();
    assert_eq!(s.posts().len(), 1, "backed off");
    s.atc(["status", TASK])
        .stdout_contains("parent chat busy (409: A task is already running for this chat.");
    // 20 s later; from now on every 409 may be retried on the next tick.
    s.env.edit_turn(TASK, |turn| {
        turn["delivery"]["next_attempt_at"] = json!("2026-01-01T00:00:00Z");
    });
    for busy in 2..=5 {
        s.tick(&["--busy-retry", "0s"]);
        assert_eq!(s.turn(TASK)["delivery"]["busy"], busy);
        assert_eq!(s.posts().len(), busy);
    }
    s.tick(&["--busy-retry", "0s"]);
    delivered_once(&s);
    let posts = s.posts();
    assert_eq!(posts.len(), 6, "five refused, one taken");
    let ids: Vec<Value> = posts
        .iter()
        .map(|p| p.json()["input"][0]["metadata"]["qwenpaw_client_message_id"].clone())
        .collect();
    assert!(
        ids.iter().all(|id| *id == ids[0]),
        "one delivery id: {ids:?}"
    );
    // The next tick follows the parent's turn; it posts nothing.
    s.tick(&["--busy-retry", "0s"]);
    assert_eq!(s.turn(TASK)["parent_turn"], "completed");
    assert_eq!(s.posts().len(), 6, "nothing more once delivered");
}

#[test]
fn an_endless_409_storm_ends_undelivered_at_the_busy_deadline() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.post_replies(vec![Reply::json(409, bodies::BUSY_409)]);
    let args = ["--busy-retry", "0s", "--busy-deadline", "1h"];
    for busy in 1..=3 {
        s.tick(&args);
        assert_eq!(s.status(TASK), "delivering");
        let turn = s.turn(TASK);
        assert_eq!(turn["delivery"]["busy"], busy, "{turn}");
    }
    // An hour of 409s later.
    s.env.edit_turn(TASK, |turn| {
        turn["delivery"]["waiting_since"] = json!("2026-01-01T00:00:00Z");
    });
    s.tick(&args).stderr(format!(
        "atc: gave up on {TASK} (undelivered): the parent chat stayed busy past --busy-deadline; `atc status {TASK}` says more; `atc redeliver {TASK}` tries again\n"
    ));
    let job = s.job(TASK);
    assert_eq!(job["status"], "undelivered", "{job}");
    assert!(
        job["final"].as_str().unwrap().ends_with("ECHO: hello"),
        "kept"
    );
    assert_eq!(s.posts().len(), 4);
    s.atc(["status", TASK])
        .stdout_contains("not delivered after 4 waits (parent chat busy (409: A task is already running for this chat.")
        .stdout_contains("`atc redeliver` tries again");
    s.tick(&args).file_unchanged();
    assert_eq!(s.posts().len(), 4, "given up: no more POSTs");
}

#[test]
fn html_error_pages_are_strikes_that_name_the_base_url() {
    for status in [200, 404] {
        let s = Scene::new();
        s.watch(TASK, &[]);
        s.poll_replies(
            TASK,
            vec![
                Reply::html(
                    status,
                    "<!doctype html><title>Sign in</title><form>…</form>",
                ),
                Reply::json(200, bodies::FINISHED_COMPLETED),
            ],
        );
        s.tick(&[]);
        let error = struck(&s, 1);
        assert_eq!(
            error,
            format!(
                "HTTP {status} with text/html; charset=utf-8 instead of JSON: is the base URL {} right? It must point at QwenPaw's /api",
                s.server.api()
            )
        );
        status_says(&s, 1, &error);

        // The same page where the chat list should be: no POST, and the same suspect.
        s.server.on(
            "GET",
            "/api/chats",
            vec![Reply::html(status, "<!doctype html><title>Sign in</title>")],
        );
        s.tick(&[]);
        assert_eq!(s.status(TASK), "delivering");
        assert!(s.posts().is_empty());
        let turn = s.turn(TASK);
        let error = turn["delivery"]["error"].as_str().unwrap();
        assert!(
            error.contains(&format!(
                "HTTP {status} with text/html; charset=utf-8 instead of JSON"
            )),
            "{error}"
        );
        s.server.off("GET", "/api/chats");
        s.tick(&[]);
        delivered_once(&s);
    }
}

/// A response head of a few KiB (long cookies, a proxy's headers) is read like any other;
/// one over 16 KiB is refused, named as a head too large, and struck like any failed check.
#[test]
fn a_long_response_head_is_read_and_an_oversized_one_named() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(
        TASK,
        vec![
            Reply::json(200, bodies::RUNNING).with_header("x-padding", &"a".repeat(12 * 1024)),
            Reply::json(200, bodies::RUNNING).with_header("x-padding", &"a".repeat(20 * 1024)),
        ],
    );
    s.tick(&[]).run();
    let job = s.job(TASK);
    assert!(
        job["strikes"].as_u64().unwrap_or(0) == 0 && job.get("last_error").is_none(),
        "{job}"
    );
    s.tick(&[]).run();
    // How much of the head ureq had read when it stopped depends on how it arrived.
    let error = struck(&s, 1);
    let said = format!(
        "GET {}/console/chat/task/{TASK}: response header is too big: ",
        s.server.api()
    );
    assert!(
        error.starts_with(&said) && error.ends_with(" > 16384"),
        "{error}"
    );
}

// ---------------------------------------------------------------------------------------
// Redirects and tokens

/// A web login's token can be long (a JWT of a few KiB): the request head carrying it
/// goes out whole, past any buffer of atc's.
#[test]
fn a_long_token_goes_out_whole() {
    let token: String = "eyJhbGciOi.".repeat(600);
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::RUNNING)]);
    s.tick(&[])
        .env("ATC_BEARER_TOKEN", &token)
        .never_shows(&token)
        .run();
    // The tick's poll (the watch's task check before it carried no token).
    let polled = s
        .server
        .requests()
        .into_iter()
        .rfind(|r| r.method == "GET" && r.path.ends_with(TASK))
        .expect("the poll");
    let sent = polled.header("authorization").unwrap_or("none");
    assert!(
        sent == format!("Bearer {token}"),
        "sent {} bytes: {}…",
        sent.len(),
        &sent[..sent.len().min(40)]
    );
}

#[test]
fn redirects_are_never_followed_and_the_tokens_never_leave() {
    const RUNTIME: &str = "rt-planted-5d1c";
    const BEARER: &str = "bearer-planted-9e2f";
    let elsewhere = FakeQwenPaw::start();
    let s = Scene::new();
    s.watch(TASK, &[]);
    let away = format!("{}/api/console/chat/task/{TASK}", elsewhere.url());
    s.poll_replies(
        TASK,
        vec![
            Reply::html(301, "<a href>Moved</a>").with_header("location", &away),
            Reply::html(302, "<a href>Found</a>").with_header("location", &away),
            Reply::json(307, r#"{"detail":"Temporary Redirect"}"#).with_header("location", &away),
            Reply::json(200, bodies::FINISHED_COMPLETED),
        ],
    );
    let tick = |s: &Scene, said: &str| {
        s.tick(&[])
            .stderr(said)
            .env("QWENPAW_RUNTIME_INTERNAL_TOKEN", RUNTIME)
            .env("ATC_BEARER_TOKEN", BEARER)
            .never_shows(RUNTIME)
            .never_shows(BEARER)
            .run();
    };
    let api = s.server.api();
    let before = s.server.requests().len();
    for (strikes, error) in [
        (
            1,
            format!(
                "HTTP 301 with text/html; charset=utf-8 instead of JSON: is the base URL {api} right? It must point at QwenPaw's /api"
            ),
        ),
        (
            2,
            format!(
                "HTTP 302 with text/html; charset=utf-8 instead of JSON: is the base URL {api} right? It must point at QwenPaw's /api"
            ),
        ),
        (3, "HTTP 307: Temporary Redirect".to_owned()),
    ] {
        tick(&s, "");
        assert_eq!(struck(&s, strikes), error);
    }
    // The delivery is redirected too (a 307/308 would re-send the body and the tokens):
    // refused, not followed.
    s.post_replies(vec![
        Reply::json(308, r#"{"detail":"Permanent Redirect"}"#).with_header(
            "location",
            &format!("{}/api/console/chat/task", elsewhere.url()),
        ),
    ]);
    tick(
        &s,
        &format!(
            "atc: gave up on {TASK} (error): the server refused the delivery (HTTP 308); `atc status {TASK}` shows its answer; `atc redeliver {TASK}` tries again once that is fixed\n"
        ),
    );
    s.assert_refused(TASK, "Permanent Redirect");
    s.atc(["status", TASK])
        .stdout_contains("the server refused the delivery (308: Permanent Redirect)")
        .never_shows(RUNTIME)
        .never_shows(BEARER);
    assert!(
        elsewhere.requests().is_empty(),
        "the redirect target was reached: {:?}",
        elsewhere.requests()
    );
    // The tokens were planted for real: QwenPaw got both on every request of the ticks.
    let ticked = &s.server.requests()[before..];
    let shown: Vec<String> = ticked
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    let poll = format!("GET /api/console/chat/task/{TASK}");
    assert_eq!(
        shown,
        [
            poll.as_str(),
            &poll,
            &poll,
            &poll,
            "GET /api/chats",
            "POST /api/console/chat/task"
        ]
    );
    for request in ticked {
        assert_eq!(request.header("x-qwenpaw-runtime-token"), Some(RUNTIME));
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {BEARER}").as_str())
        );
    }
    assert!(s.delivered("s-77").is_empty());
}

// ---------------------------------------------------------------------------------------
// Connections cut around the delivery (tests/it/promises/delivery.rs covers a drop after storing, a
// 500 around storing and a slow answer)

#[test]
fn a_connection_cut_around_the_post_leaves_exactly_one_copy() {
    for (name, fault, stored) in [
        (
            "received, dropped before it was stored",
            PostFault::DropBeforeStore,
            false,
        ),
        (
            "stored, the answer cut off after 10 bytes of its body",
            PostFault::CutAfterStore(10),
            true,
        ),
    ] {
        let s = Scene::new();
        s.watch(TASK, &[]);
        s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
        s.chats.fault(fault);
        s.tick(&[]);
        let job = s.job(TASK);
        assert_eq!(job["status"], "unconfirmed", "{name}: {job}");
        let turn = s.turn(TASK);
        let error = turn["delivery"]["error"].as_str().unwrap();
        let want = if stored {
            "HTTP 200 with an unreadable or non-JSON answer"
        } else {
            "POST "
        };
        assert!(error.contains(want), "{name}: {error}");
        s.atc(["status", TASK])
            .stdout_contains("delivery outcome unknown (")
            .stdout_contains(
                "atc reads the parent chat back and posts again only if it is not there",
            );
        // Let the settle time (--http-timeout) pass since the attempt.
        s.env.settle_passed(TASK);
        s.tick(&[]);
        if !stored {
            // Absent once: looked at again a settle window later before it goes again.
            s.env.absent_long_ago(TASK);
        }
        s.tick(&[]);
        s.tick(&[]);
        let job = s.job(TASK);
        assert_eq!(job["status"], "done", "{name}: {job}");
        assert_eq!(s.delivered("s-77").len(), 1, "{name}: exactly one copy");
        assert_eq!(s.posts().len(), if stored { 1 } else { 2 }, "{name}");
        assert_eq!(
            s.turn(TASK)["delivery"]["confirmed"],
            if stored {
                json!("read-back")
            } else {
                Value::Null
            },
            "{name}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Bodies no parser should choke on

#[test]
fn an_endless_answer_stops_at_the_size_cap_and_is_a_strike() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(
        TASK,
        vec![
            // No length, never ends: only the cap stops the reading.
            Reply::json(200, r#"{"status":"running","pad":[0,"#).on_wire(Wire::Endless),
            Reply::json(200, bodies::FINISHED_COMPLETED),
        ],
    );
    s.tick(&[]);
    let error = struck(&s, 1);
    assert_eq!(error, "HTTP 200: the answer is larger than 8 MiB");
    status_says(&s, 1, &error);
    s.tick(&[]);
    delivered_once(&s);
}

#[test]
fn invalid_utf8_in_an_answer_is_a_strike_that_says_so() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(
        TASK,
        vec![
            Reply::raw(
                200,
                "application/json",
                b"{\"status\":\"finished\",\"result\":{\"status\":\"completed\",\"output\":[{\"content\":[{\"type\":\"text\",\"text\":\"caf\xe9 \xff\xfe\"}]}]}}",
            ),
            Reply::raw(500, "application/json", b"{\"detail\":\"\xc3\x28\"}"),
            Reply::json(200, bodies::FINISHED_COMPLETED),
        ],
    );
    s.tick(&[]);
    let error = struck(&s, 1);
    assert_eq!(
        error,
        "HTTP 200: reading the answer failed: io: stream did not contain valid UTF-8"
    );
    status_says(&s, 1, &error);
    s.tick(&[]);
    assert_eq!(
        struck(&s, 2),
        "HTTP 500: reading the answer failed: io: stream did not contain valid UTF-8"
    );
    a_bad_chat_list_waits_then_delivers(
        &s,
        Reply::raw(200, "application/json", b"[{\"id\":\"\xff\"}]"),
        "stream did not contain valid UTF-8",
    );
}

#[test]
fn json_nested_ten_thousand_deep_is_a_strike_not_a_crash() {
    let deep = |inner: &str| {
        format!(
            r#"{{"status":"finished","result":{}{inner}{}}}"#,
            "[".repeat(10_000),
            "]".repeat(10_000)
        )
    };
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(
        TASK,
        vec![
            Reply::json(200, &deep("")),
            Reply::json(
                500,
                &format!(r#"{{"detail":{}}}"#, "{\"a\":".repeat(10_000)),
            ),
            Reply::json(200, bodies::FINISHED_COMPLETED),
        ],
    );
    s.tick(&[]);
    let error = struck(&s, 1);
    assert!(
        error.starts_with("HTTP 200 but the body is not valid JSON (recursion limit exceeded"),
        "{error}"
    );
    status_says(&s, 1, &error);
    s.tick(&[]);
    let error = struck(&s, 2);
    assert!(
        error.starts_with("HTTP 500: {\"detail\":{\"a\":"),
        "{error}"
    );
    assert!(
        error.chars().count() <= 310,
        "the detail is cut short: {error}"
    );
    a_bad_chat_list_waits_then_delivers(
        &s,
        Reply::json(200, &deep("0")),
        "recursion limit exceeded",
    );
}

// ---------------------------------------------------------------------------------------
// https:// for a plain-HTTP server

#[test]
fn an_https_url_for_a_plain_http_server_says_so() {
    let server = FakeQwenPaw::start();
    let base = format!("https://127.0.0.1:{}", server.port());
    let env = TestEnv::new();
    env.atc(["--base-url", &base, "wait", TASK, "--interval", "0s"])
        .status(5)
        .stderr(format!(
            "atc: {TASK}: 5 polls in a row failed; last: GET {base}/api/console/chat/task/{TASK}: TLS handshake failed: is the server plain http://? (received corrupt message of type InvalidContentType)\n"
        ))
        .no_file();
    assert_eq!(
        server.take_unscripted(),
        vec!["a TLS handshake (an https:// client)"; 5],
        "five polls, each a handshake answered in plain HTTP"
    );

    // A tick: a strike with the same words.
    // Registered now: the fixture's fixed date is past the 24 h age cap by now.
    let mut pending = support::atc::job(TASK, "pending", &format!("{base}/api"));
    pending["registered_at"] = json!(atc::time::Timestamp::now().to_string());
    env.write_file(&json!({"version": 2, "jobs": [pending]}));
    env.atc(["tick"]).run();
    let job = env.job(TASK);
    assert_eq!(
        (job["status"].as_str(), job["strikes"].as_u64()),
        (Some("pending"), Some(1))
    );
    assert_eq!(
        job["last_error"],
        format!(
            "GET {base}/api/console/chat/task/{TASK}: TLS handshake failed: is the server plain http://? (received corrupt message of type InvalidContentType)"
        )
    );
    assert_eq!(server.take_unscripted().len(), 1);
}
