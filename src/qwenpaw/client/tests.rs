//! The client's unit tests: its wording, its timeouts, its connections and its lanes.

use super::*;

#[test]
fn each_thread_uses_the_lane_it_entered() {
    let client = Client::with_lanes(Duration::from_secs(1), Auth::default(), 4);
    let uses = |lane: usize| std::ptr::eq(client.lane(), &client.lanes[lane]);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            assert!(uses(0), "a thread starts in lane 0");
            enter_lane(2);
            assert!(uses(2));
            // A lane past the client's count wraps around.
            enter_lane(7);
            assert!(uses(3));
        });
    });
    assert!(uses(0), "another thread's lane is its own");
}

#[test]
fn tokens_go_over_plain_http_only_to_the_base_urls_allowed() {
    let auth = Auth {
        runtime_token: Some("tok".to_owned()),
        ..Auth::default()
    };
    let mut client = Client::new(Duration::from_secs(1), auth);
    let [a, b, c] = [
        "http://10.0.0.1:8088/api",
        "http://10.0.0.2:8088/api",
        "http://10.0.0.3:8088/api",
    ];
    for allowed in [a, b, a] {
        client.allow_insecure(allowed);
    }
    assert_eq!(client.insecure_ok, [a, b], "each once");
    for url in [a, b] {
        assert!(
            client.guard("GET", &format!("{url}/version")).is_ok(),
            "{url}"
        );
    }
    let refused = client.guard("GET", &format!("{c}/version")).unwrap_err();
    assert!(refused.nothing_sent, "{}", refused.message);
    assert!(
        refused.message.starts_with(&format!("GET {c}/version: ")),
        "{}",
        refused.message
    );
}

#[test]
fn a_host_is_looked_up_once_per_scheme_and_authority() {
    let resolver = OnceResolver::default();
    let config = ureq::config::Config::default();
    let resolve = |url: &str| {
        let uri: ureq::http::Uri = url.parse().unwrap();
        let found = resolver
            .resolve(&uri, &config, NextTimeout::default())
            .unwrap();
        found.iter().copied().collect::<Vec<_>>()
    };
    let local: std::net::SocketAddr = "127.0.0.1:8088".parse().unwrap();
    for _ in 0..2 {
        assert_eq!(resolve("http://127.0.0.1:8088/api/version"), [local]);
    }
    assert_eq!(resolver.known.lock().unwrap().len(), 1, "kept once");
    assert_eq!(resolve("https://127.0.0.1:8088/api/version"), [local]);
    assert_eq!(resolver.known.lock().unwrap().len(), 2, "by scheme too");
}

#[test]
fn each_address_but_the_last_waits_half_of_the_connect_budget_left() {
    let ms = Duration::from_millis;
    assert_eq!(connect_wait(None, 0, 2), Some(None), "no budget");
    assert_eq!(connect_wait(Some(ms(1000)), 0, 2), Some(Some(ms(500))));
    assert_eq!(connect_wait(Some(ms(1000)), 1, 2), Some(Some(ms(1000))));
    assert_eq!(
        connect_wait(Some(ms(15)), 0, 3),
        Some(Some(ms(10))),
        "at least 10 ms"
    );
    assert_eq!(
        connect_wait(Some(ms(5)), 0, 2),
        Some(Some(ms(5))),
        "never past the budget"
    );
    assert_eq!(connect_wait(Some(Duration::ZERO), 0, 2), None, "spent");
    assert_eq!(connect_wait(Some(Duration::ZERO), 1, 2), None, "spent");
}

#[test]
fn what_never_reached_the_server_is_told_from_what_may_have() {
    for kind in [io::ErrorKind::TimedOut, io::ErrorKind::WouldBlock] {
        let err = connect_failed(io::Error::new(kind, "no answer"));
        assert!(
            matches!(err, ureq::Error::Timeout(ureq::Timeout::Connect)),
            "{err}"
        );
        assert!(nothing_sent(&err));
        assert_eq!(describe(&err), "timed out (connect)");
    }
    let err = connect_failed(io::Error::new(io::ErrorKind::ConnectionRefused, "refused"));
    assert!(nothing_sent(&err));
    assert_eq!(describe(&err), "connection refused (is QwenPaw running?)");
    // What certainly never reached the server, and what may have.
    for (err, sent) in [
        (ureq::Error::HostNotFound, false),
        (ureq::Error::ConnectionFailed, false),
        (ureq::Error::Timeout(ureq::Timeout::Resolve), false),
        (ureq::Error::Timeout(ureq::Timeout::RecvResponse), true),
        (ureq::Error::Timeout(ureq::Timeout::SendBody), true),
        (
            connect_failed(io::Error::new(
                io::ErrorKind::NetworkUnreachable,
                "no route",
            )),
            false,
        ),
        (
            connect_failed(io::Error::new(io::ErrorKind::ConnectionReset, "reset")),
            true,
        ),
    ] {
        assert_eq!(nothing_sent(&err), !sent, "{err}");
    }
}

#[test]
fn encodes_segments_and_values() {
    assert_eq!(encode("task-1_A"), "task-1_A");
    assert_eq!(encode("a/b c%"), "a%2Fb%20c%25");
    assert_eq!(encode("é&x=1"), "%C3%A9%26x%3D1");
}

#[test]
fn errors_say_what_to_suspect() {
    let io = |kind, text: &str| ureq::Error::Io(io::Error::new(kind, text.to_owned()));
    assert_eq!(
        describe(&io(io::ErrorKind::ConnectionRefused, "refused")),
        "connection refused (is QwenPaw running?)"
    );
    assert_eq!(
        describe(&io(
            io::ErrorKind::InvalidData,
            "received corrupt message of type InvalidContentType"
        )),
        "TLS handshake failed: is the server plain http://? (received corrupt message of type InvalidContentType)"
    );
    assert_eq!(
        describe(&io(
            io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8"
        )),
        "io: stream did not contain valid UTF-8"
    );
    assert_eq!(
        describe(&ureq::Error::Timeout(ureq::Timeout::RecvBody)),
        "timed out (receive body)"
    );
    assert_eq!(
        describe(&io(io::ErrorKind::UnexpectedEof, "Peer disconnected")),
        "the server closed the connection before its answer was whole"
    );
}

#[test]
fn a_socket_timeout_is_set_only_when_the_one_set_does_not_enforce_the_budget() {
    let s = Duration::from_secs;
    let ms = Duration::from_millis;
    let us = Duration::from_micros;
    assert_eq!(timeout_change(None, None), None);
    // Set with headroom: 1/16 above the budget.
    assert_eq!(timeout_change(None, Some(s(16))), Some(Some(s(17))));
    // The next phase's or request's budget, a little less or a little more: kept.
    assert_eq!(timeout_change(Some(s(17)), Some(s(16) - us(3))), None);
    assert_eq!(timeout_change(Some(s(17)), Some(s(16) + us(3))), None);
    assert_eq!(timeout_change(Some(s(17)), Some(s(16))), None);
    // At most 1/8 above the budget: kept; more (a phase that has waited): lowered.
    assert_eq!(timeout_change(Some(s(9)), Some(s(8))), None);
    assert_eq!(
        timeout_change(Some(s(10)), Some(s(8))),
        Some(Some(ms(8500)))
    );
    assert_eq!(
        timeout_change(Some(s(17)), Some(s(4))),
        Some(Some(ms(4250)))
    );
    // A longer budget is raised to; no budget clears the timeout.
    assert_eq!(timeout_change(Some(s(5)), Some(s(16))), Some(Some(s(17))));
    assert_eq!(timeout_change(Some(s(5)), None), Some(None));
}

#[test]
fn a_kept_alive_connection_is_open_until_the_peer_closes_it_or_sends_unasked() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let client = TcpStream::connect(addr).unwrap();
    let (mut peer, _) = listener.accept().unwrap();
    assert!(still_open(&client), "idle and open");
    assert!(still_open(&client), "the probe reads nothing");
    peer.write_all(b"x").unwrap();
    let mut seen = [0u8];
    // Once the byte has arrived (a blocking peek waits for it), the probe says no.
    client.peek(&mut seen).unwrap();
    assert!(!still_open(&client), "bytes nobody asked for");

    let client = TcpStream::connect(addr).unwrap();
    let (peer, _) = listener.accept().unwrap();
    drop(peer);
    // Once the close has arrived (a blocking peek returns 0), the probe says no.
    assert_eq!(client.peek(&mut seen).unwrap(), 0);
    assert!(!still_open(&client), "closed by the peer");
}

/// Serves `answers` answers, one per request, then closes the connection; again on the
/// next connection. Says on `closed` when it closed one.
fn closing_server(answers: usize) -> (String, std::sync::mpsc::Receiver<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (tx, closed) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let mut conn = conn.unwrap();
            let mut reader = io::BufReader::new(conn.try_clone().unwrap());
            for _ in 0..answers {
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if io::BufRead::read_line(&mut reader, &mut line).unwrap() == 0 {
                        return;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap();
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                let answer = b"{\"ok\":true}";
                write!(
                    conn,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                    answer.len()
                )
                .unwrap();
                conn.write_all(answer).unwrap();
            }
            drop((conn, reader));
            if tx.send(()).is_err() {
                return;
            }
        }
    });
    (base, closed)
}

#[test]
fn a_socket_shows_its_peer_never_its_buffers() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let config = ureq::config::Config::default();
    let mut socket = Socket::new(TcpStream::connect(addr).unwrap(), &config);
    let token = b"X-QwenPaw-Runtime-Token: secret";
    socket.buffers.output()[..token.len()].copy_from_slice(token);
    let shown = format!("{socket:?}");
    assert_eq!(shown, format!("Socket {{ peer: Some({addr}), .. }}"));
}

#[test]
fn a_connection_the_server_closed_is_not_reused_for_a_post() {
    // One answer per connection: each kept-alive connection is closed by the server
    // right after its answer. The closed one must never carry the next request.
    let (base, closed) = closing_server(1);
    let client = Client::new(Duration::from_secs(5), Auth::default());
    let get = client.version(&base).unwrap();
    assert_eq!(
        (get.status, get.body),
        (200, Ok(r#"{"ok":true}"#.to_owned()))
    );
    closed.recv().unwrap();
    let post = client
        .post_turn(&base, "default", &serde_json::json!({"x": 1}))
        .unwrap();
    assert_eq!(post.status, 200);
    closed.recv().unwrap();
    let again = client.version(&base).unwrap();
    assert_eq!(again.status, 200);
}

#[test]
fn a_connection_the_server_keeps_open_is_reused() {
    let (base, closed) = closing_server(3);
    let client = Client::new(Duration::from_secs(5), Auth::default());
    for _ in 0..3 {
        assert_eq!(client.version(&base).unwrap().status, 200);
    }
    // Three answers on one connection: only then did the server close it.
    closed.recv().unwrap();
    assert!(
        closed.try_recv().is_err(),
        "one connection carried all three"
    );
}

#[test]
fn json_is_recognised_by_its_content_type() {
    let answer = |ct: &str| Answer {
        status: 200,
        content_type: ct.into(),
        body: Ok(String::new()),
    };
    assert!(answer("application/json").is_json());
    assert!(answer("application/json; charset=utf-8").is_json());
    assert!(answer("application/problem+json").is_json());
    assert!(!answer("text/html; charset=utf-8").is_json());
    assert!(!answer("").is_json());
    assert_eq!(answer("text/html").kind(), "text/html");
    assert_eq!(answer("").kind(), "no content type");
}
