//! Self-tests of the fake QwenPaw server in `tests/support/fake.rs`.

use crate::support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use support::bodies;
use support::fake::{FakeQwenPaw, Reply, Wire};

const TASK1: &str = "/api/console/chat/task/task-1";

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .new_agent()
}

/// (status, content-type, body) of a GET.
fn get(agent: &ureq::Agent, url: &str) -> (u16, String, String) {
    let mut resp = agent.get(url).call().expect("GET failed");
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let body = resp.body_mut().read_to_string().unwrap();
    (resp.status().as_u16(), ct, body)
}

/// Read one HTTP/1.1 response from a raw stream: (status line, headers, body).
fn read_raw_response(r: &mut BufReader<TcpStream>) -> (String, Vec<String>, String) {
    let mut status = String::new();
    r.read_line(&mut status).unwrap();
    let mut headers = Vec::new();
    let mut len = 0usize;
    loop {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        let l = l.trim_end().to_string();
        if l.is_empty() {
            break;
        }
        if let Some(v) = l.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap();
        }
        headers.push(l);
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).unwrap();
    (
        status.trim_end().to_string(),
        headers,
        String::from_utf8(body).unwrap(),
    )
}

#[test]
fn bodies_are_valid_json_and_builders_match_the_consts() {
    for (name, body) in [
        ("RUNNING", bodies::RUNNING),
        ("FINISHED_COMPLETED", bodies::FINISHED_COMPLETED),
        ("FINISHED_FAILED_LLM", bodies::FINISHED_FAILED_LLM),
        ("FINISHED_TIMEOUT", bodies::FINISHED_TIMEOUT),
        ("FINISHED_CANCELLED", bodies::FINISHED_CANCELLED),
        ("SUBMIT_OK", bodies::SUBMIT_OK),
        ("BUSY_409", bodies::BUSY_409),
        ("NO_CONSOLE_503", bodies::NO_CONSOLE_503),
        ("AUTH_401_RUNTIME", bodies::AUTH_401_RUNTIME),
        (
            "AUTH_401_NOT_AUTHENTICATED",
            bodies::AUTH_401_NOT_AUTHENTICATED,
        ),
        ("AUTH_401_EXPIRED", bodies::AUTH_401_EXPIRED),
        ("NO_ROUTE", bodies::NO_ROUTE),
    ] {
        serde_json::from_str::<serde_json::Value>(body)
            .unwrap_or_else(|e| panic!("{name} is not JSON ({e}): {body}"));
    }

    // The builders reproduce the observed bodies byte for byte.
    assert_eq!(
        bodies::finished_completed("demo-1", "ECHO: hello"),
        bodies::FINISHED_COMPLETED
    );
    assert_eq!(
        bodies::finished_failed("Model 'mock-model' execution failed. Reason: …"),
        bodies::FINISHED_FAILED_LLM
    );
    assert_eq!(bodies::running_at(1796003454.6703575), bodies::RUNNING);
    assert_eq!(
        bodies::running_at(5.0),
        r#"{"status":"running","started_at":5.0}"#
    );
    assert_eq!(
        bodies::not_found("task-000000000000"),
        r#"{"detail":"Task not found: task-000000000000"}"#
    );
    assert_eq!(
        bodies::unknown_agent("x"),
        r#"{"detail":"Agent 'x' not found"}"#
    );

    // ...and escape what they are given.
    let tricky = "line 1\n\"quoted\" \\ tab\t ünïcode";
    let v: serde_json::Value =
        serde_json::from_str(&bodies::finished_completed("s\"1", tricky)).unwrap();
    assert_eq!(v["result"]["session_id"], "s\"1");
    assert_eq!(v["result"]["output"][0]["content"][0]["text"], tricky);
    let v: serde_json::Value = serde_json::from_str(&bodies::finished_failed(tricky)).unwrap();
    assert_eq!(v["result"]["error"]["message"], tricky);
    let v: serde_json::Value = serde_json::from_str(&bodies::not_found("a\"b")).unwrap();
    assert_eq!(v["detail"], "Task not found: a\"b");
}

#[test]
fn scripted_replies_are_consumed_in_order_and_the_last_repeats() {
    let fake = FakeQwenPaw::start();
    fake.on(
        "GET",
        TASK1,
        vec![
            Reply::json(200, bodies::RUNNING),
            Reply::json(200, &bodies::running_at(1.5)),
            Reply::json(200, bodies::FINISHED_COMPLETED),
        ],
    );
    let a = agent();
    let url = format!("{}{TASK1}", fake.url());
    let got: Vec<String> = (0..5).map(|_| get(&a, &url).2).collect();
    let running_again = bodies::running_at(1.5);
    assert_eq!(
        got,
        [
            bodies::RUNNING,
            running_again.as_str(),
            bodies::FINISHED_COMPLETED,
            bodies::FINISHED_COMPLETED,
            bodies::FINISHED_COMPLETED,
        ]
    );
    assert_eq!(fake.hits("GET", TASK1), 5);
    assert_eq!(fake.hits("POST", TASK1), 0);

    // `on` again replaces the script (and restarts it).
    fake.on(
        "GET",
        TASK1,
        vec![Reply::json(404, &bodies::not_found("task-1"))],
    );
    let (status, ct, body) = get(&a, &url);
    assert_eq!((status, ct.as_str()), (404, "application/json"));
    assert_eq!(body, r#"{"detail":"Task not found: task-1"}"#);
}

#[test]
fn prefix_routes_longest_wins_exact_beats_prefix_and_query_is_split_off() {
    let fake = FakeQwenPaw::start();
    fake.on_prefix("GET", "/api/", vec![Reply::text(200, "api")]);
    fake.on_prefix(
        "GET",
        "/api/console/chat/task/",
        vec![Reply::json(200, bodies::RUNNING)],
    );
    fake.on("GET", TASK1, vec![Reply::html(200, "<p>exact</p>")]);
    let a = agent();
    let u = fake.url();

    assert_eq!(
        get(&a, &format!("{u}/api/version")),
        (200, "text/plain; charset=utf-8".into(), "api".into())
    );
    assert_eq!(
        get(&a, &format!("{u}/api/console/chat/task/task-2?x=1")).2,
        bodies::RUNNING
    );
    assert_eq!(
        get(&a, &format!("{u}{TASK1}?user_id=u&channel=c")),
        (
            200,
            "text/html; charset=utf-8".into(),
            "<p>exact</p>".into()
        )
    );
    // Method must match too: a POST nobody scripted is unscripted.
    let resp = a.post(format!("{u}/api/version")).send("").unwrap();
    assert_eq!(resp.status().as_u16(), 500);
    assert_eq!(fake.take_unscripted(), ["POST /api/version"]);

    let reqs = fake.requests();
    assert_eq!(reqs.len(), 4);
    assert_eq!(reqs[1].path, "/api/console/chat/task/task-2");
    assert_eq!(reqs[1].query, "x=1");
    assert_eq!(reqs[2].path, TASK1);
    assert_eq!(reqs[2].query, "user_id=u&channel=c");
    assert_eq!(reqs[3].method, "POST");
    assert_eq!(fake.hits("GET", TASK1), 1);
}

#[test]
fn an_unscripted_request_is_answered_500_and_named() {
    let fake = FakeQwenPaw::start();
    let (status, ct, body) = get(&agent(), &format!("{}/api/nope?x=1", fake.api()));
    assert_eq!(status, 500);
    assert_eq!(ct, "application/json");
    assert!(
        body.contains("no script for GET /api/api/nope?x=1"),
        "{body}"
    );
    assert_eq!(fake.hits("GET", "/api/api/nope"), 1);
    assert_eq!(fake.take_unscripted(), ["GET /api/api/nope?x=1"]);
    assert!(fake.take_unscripted().is_empty(), "taken once");
}

#[test]
fn an_unscripted_request_left_untaken_fails_the_test_on_drop() {
    let fake = FakeQwenPaw::start();
    let (status, _, _) = get(&agent(), &format!("{}/nobody-scripted", fake.url()));
    assert_eq!(status, 500);
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(fake)));
    let message = dropped.expect_err("dropping the fake must fail the test");
    let message = message
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(message.contains("GET /nobody-scripted"), "{message}");
}

#[test]
fn expected_hits_are_checked_on_drop() {
    let fake = FakeQwenPaw::start();
    fake.answer("GET", "/api/version", 200, r#""2.2.2""#);
    fake.expect_hits("GET", "/api/version", 2);
    get(&agent(), &format!("{}/version", fake.api()));
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(fake)));
    let message = dropped.expect_err("one hit of two must fail the test");
    let message = message
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(message.contains("hit 1 times, expected 2"), "{message}");

    let fake = FakeQwenPaw::start();
    fake.answer("GET", "/api/version", 200, r#""2.2.2""#);
    fake.expect_hits("GET", "/api/version", 1);
    get(&agent(), &format!("{}/version", fake.api()));
    drop(fake);
}

#[test]
fn records_method_path_headers_and_body() {
    let fake = FakeQwenPaw::start();
    fake.on(
        "POST",
        "/api/console/chat/task",
        vec![Reply::json(200, bodies::SUBMIT_OK)],
    );
    let body = r#"{"session_id":"demo-1","input":[{"role":"user","content":[{"type":"text","text":"héllo"}]}]}"#;
    let mut resp = agent()
        .post(format!("{}/console/chat/task", fake.api()))
        .header("X-Agent-Id", "default")
        .header("X-QwenPaw-Runtime-Token", "s3cret")
        .header("Content-Type", "application/json")
        .send(body)
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.body_mut().read_to_string().unwrap(), bodies::SUBMIT_OK);

    let reqs = fake.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/api/console/chat/task");
    assert_eq!(r.query, "");
    assert_eq!(r.body, body);
    assert_eq!(r.header("x-agent-id"), Some("default"));
    assert_eq!(r.header("X-QWENPAW-RUNTIME-TOKEN"), Some("s3cret"));
    assert!(r.headers.iter().all(|(n, _)| *n == n.to_ascii_lowercase()));
    assert_eq!(r.header("x-missing"), None);
    assert_eq!(r.json()["input"][0]["content"][0]["text"], "héllo");
    assert_eq!(fake.hits("post", "/api/console/chat/task"), 1);
}

#[test]
fn dropped_reply_fails_the_client_but_the_request_is_recorded() {
    let fake = FakeQwenPaw::start();
    fake.on(
        "POST",
        "/api/console/chat/task",
        vec![Reply::dropped(), Reply::json(200, bodies::SUBMIT_OK)],
    );
    let a = agent();
    let url = format!("{}/console/chat/task", fake.api());
    let err = a.post(&url).send(r#"{"session_id":"s"}"#);
    assert!(err.is_err(), "client should see an error, got {err:?}");
    assert_eq!(fake.hits("POST", "/api/console/chat/task"), 1);
    assert_eq!(fake.requests()[0].json()["session_id"], "s");

    // The fake keeps serving; the script moved on.
    let mut ok = a.post(&url).send("{}").unwrap();
    assert_eq!(ok.body_mut().read_to_string().unwrap(), bodies::SUBMIT_OK);
    assert_eq!(fake.hits("POST", "/api/console/chat/task"), 2);
}

#[test]
fn delayed_request_is_recorded_on_receipt_and_a_hangup_mid_delay_is_harmless() {
    let fake = FakeQwenPaw::start();
    fake.on(
        "GET",
        TASK1,
        vec![
            Reply::json(200, bodies::RUNNING).with_delay(Duration::from_millis(300)),
            Reply::json(200, bodies::FINISHED_COMPLETED),
        ],
    );
    let mut s = TcpStream::connect(("127.0.0.1", fake.port())).unwrap();
    write!(s, "GET {TASK1} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while fake.hits("GET", TASK1) == 0 {
        assert!(Instant::now() < deadline, "request never recorded");
        thread::sleep(Duration::from_millis(5));
    }
    // Recorded while its reply is still being delayed; now hang up.
    drop(s);
    thread::sleep(Duration::from_millis(400));
    let (status, _, body) = get(&agent(), &format!("{}{TASK1}", fake.url()));
    assert_eq!((status, body.as_str()), (200, bodies::FINISHED_COMPLETED));
}

#[test]
fn keep_alive_serves_several_requests_and_drop_closes_idle_connections() {
    let fake = FakeQwenPaw::start();
    fake.answer("GET", "/api/version", 200, r#""2.2.2""#);
    let s = TcpStream::connect(("127.0.0.1", fake.port())).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    for _ in 0..3 {
        write!(w, "GET /api/version HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let (status, headers, body) = read_raw_response(&mut r);
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(
            headers.contains(&"content-length: 7".to_string()),
            "{headers:?}"
        );
        assert!(
            headers.contains(&"connection: keep-alive".to_string()),
            "{headers:?}"
        );
        assert_eq!(body, r#""2.2.2""#);
    }
    // `Connection: close` is honoured.
    write!(
        w,
        "GET /api/version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let (_, headers, _) = read_raw_response(&mut r);
    assert!(
        headers.contains(&"connection: close".to_string()),
        "{headers:?}"
    );
    let mut rest = Vec::new();
    assert_eq!(r.read_to_end(&mut rest).unwrap(), 0);
    assert_eq!(fake.hits("GET", "/api/version"), 4);

    // Dropping the fake is prompt even with an idle kept-alive connection open,
    // and that connection gets no further answers.
    let s = TcpStream::connect(("127.0.0.1", fake.port())).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    write!(w, "GET /api/version HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    read_raw_response(&mut r);
    // (No bound on how long the drop takes: a busy machine may make it slow; a drop that
    // hangs hangs the test.)
    drop(fake);
    let _ = write!(w, "GET /api/version HTTP/1.1\r\nHost: x\r\n\r\n");
    let mut rest = Vec::new();
    let n = r.read_to_end(&mut rest).unwrap_or(0);
    assert_eq!(n, 0, "got an answer after drop: {rest:?}");
}

#[test]
fn fifty_clients_against_a_held_route_are_served_concurrently() {
    let fake = FakeQwenPaw::start();
    // Every answer is held until all fifty requests are on record: a fake that served one
    // connection at a time would never read the second. No clock in it.
    let gate = support::fake::Gate::new();
    fake.on(
        "GET",
        TASK1,
        vec![Reply::json(200, bodies::RUNNING).held(&gate)],
    );
    let url = format!("{}{TASK1}", fake.url());
    let a = agent();
    let handles: Vec<_> = (0..50)
        .map(|_| {
            let (a, url) = (a.clone(), url.clone());
            thread::spawn(move || get(&a, &url))
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while fake.hits("GET", TASK1) < 50 {
        assert!(
            Instant::now() < deadline,
            "only {} of 50 held requests were read: the fake is not concurrent",
            fake.hits("GET", TASK1)
        );
        thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(fake.peak_in_flight(), 50, "all fifty answered at once");
    gate.open();
    for h in handles {
        let (status, _, body) = h.join().unwrap();
        assert_eq!((status, body.as_str()), (200, bodies::RUNNING));
    }
    assert_eq!(fake.hits("GET", TASK1), 50);
}

#[test]
fn raw_bodies_extra_headers_and_removed_scripts() {
    let fake = FakeQwenPaw::start();
    fake.on(
        "GET",
        TASK1,
        vec![
            Reply::raw(200, "application/json", b"{\"x\":\"\xff\"}")
                .with_header("location", "http://elsewhere/"),
        ],
    );
    let mut s = TcpStream::connect(("127.0.0.1", fake.port())).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {TASK1} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    assert!(got.ends_with(b"\r\n\r\n{\"x\":\"\xff\"}"), "{got:?}");
    let head = String::from_utf8_lossy(&got);
    assert!(
        head.contains("\r\nlocation: http://elsewhere/\r\n"),
        "{head}"
    );
    assert!(head.contains("\r\ncontent-length: 9\r\n"), "{head}");

    // Without its script the route is unscripted again.
    fake.off("GET", TASK1);
    let (status, _, _) = get(&agent(), &format!("{}{TASK1}", fake.url()));
    assert_eq!(status, 500);
    assert_eq!(fake.take_unscripted(), [format!("GET {TASK1}")]);
}

#[test]
fn a_hanging_reply_is_silent_until_the_client_leaves_and_never_outlives_the_fake() {
    let fake = FakeQwenPaw::start();
    fake.on("GET", TASK1, vec![Reply::hang()]);
    // A client that gives up sees its own timeout, not an answer.
    let impatient = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_millis(300)))
        .build()
        .new_agent();
    let err = impatient
        .get(format!("{}{TASK1}", fake.url()))
        .call()
        .unwrap_err();
    assert!(matches!(err, ureq::Error::Timeout(_)), "{err:?}");

    // A client that would wait forever: dropping the fake ends the silence with a close.
    let mut s = TcpStream::connect(("127.0.0.1", fake.port())).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {TASK1} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while fake.hits("GET", TASK1) < 2 {
        assert!(Instant::now() < deadline, "request never recorded");
        thread::sleep(Duration::from_millis(5));
    }
    drop(fake);
    let mut got = Vec::new();
    s.read_to_end(&mut got)
        .expect("closed by the fake, not left to the read timeout");
    assert!(got.is_empty(), "a hanging reply sent {got:?}");
}

#[test]
fn cut_and_stalled_bodies_stop_where_they_are_told() {
    let fake = FakeQwenPaw::start();
    fake.on(
        "GET",
        TASK1,
        vec![
            Reply::json(200, "0123456789").on_wire(Wire::Cut(4)),
            Reply::json(200, "0123456789").on_wire(Wire::Stall(6)),
        ],
    );
    let request = || {
        let mut s = TcpStream::connect(("127.0.0.1", fake.port())).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(s, "GET {TASK1} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        s
    };
    let mut cut = Vec::new();
    request().read_to_end(&mut cut).unwrap();
    let cut = String::from_utf8(cut).unwrap();
    assert!(cut.contains("content-length: 10\r\n"), "{cut}");
    assert!(cut.ends_with("\r\n\r\n0123"), "{cut}");

    let mut stalled = request();
    let mut got = Vec::new();
    let mut buf = [0u8; 512];
    while !got.ends_with(b"012345") {
        let n = stalled.read(&mut buf).unwrap();
        assert!(n > 0, "closed early: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    // The rest never comes; the client leaving ends it.
    drop(stalled);
}

#[test]
fn a_tls_handshake_is_answered_400_in_plain_http_and_counts_as_unscripted() {
    let fake = FakeQwenPaw::start();
    let mut s = TcpStream::connect(("127.0.0.1", fake.port())).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // A handshake record of five bytes (a real ClientHello is longer, not different).
    s.write_all(&[0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5])
        .unwrap();
    let mut r = BufReader::new(s);
    let (status, _, body) = read_raw_response(&mut r);
    assert_eq!(status, "HTTP/1.1 400 Bad Request");
    assert_eq!(body, bodies::INVALID_HTTP_400);
    assert_eq!(
        fake.take_unscripted(),
        ["a TLS handshake (an https:// client)"]
    );
    assert!(fake.requests().is_empty());
}
