//! A std-only fake QwenPaw HTTP/1.1 server for integration tests.
//!
//! One accept thread, one thread per connection, keep-alive, `Content-Length`
//! bodies only. Routes are scripted per `METHOD path` (exact) or `METHOD prefix`;
//! every request is recorded the moment it has been read, before any delay.
//!
//! Strict by default: a request no script covers is answered 500 and **fails the test**
//! when the fake is dropped, naming the request (`take_unscripted` accepts them
//! explicitly); `expect_hits` states how often a route must have been hit by then.
//!
//! Paths are recorded and matched **as sent on the wire** (not percent-decoded),
//! so a test can check that the client percent-encodes task ids.
//!
//! Faults a client must survive are replies too: any bytes as a body (`Reply::raw`), extra
//! headers (a redirect's `location`), and how the answer goes out ([`Wire`]): not at all
//! (`Reply::hang`), trickling (`Wire::Drip`), its head in two reads (`Wire::SplitHead`), stopping halfway (`Wire::Stall`), cut off
//! (`Wire::Cut`), or never ending (`Wire::Endless`). A silent or endless answer lasts until
//! the client gives up or the fake is dropped, so it never outlives the test. A TLS handshake (an `https://` client
//! on this plain-HTTP port) is answered 400 like uvicorn does, and counts as a request no
//! script covers.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// Largest request head (request line + headers) the fake accepts.
const MAX_HEAD: usize = 64 * 1024;
/// Stack size of connection threads (they only parse HTTP).
const CONN_STACK: usize = 256 * 1024;

/// One scripted reply.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
    /// Headers besides `server`, `content-length`, `content-type` and `connection`.
    pub headers: Vec<(String, String)>,
    /// Slept after the request has been read and recorded, before answering.
    pub delay: Duration,
    /// Read and record the request, then close the socket without answering.
    pub drop_connection: bool,
    /// How the answer goes out.
    pub wire: Wire,
    /// Held back (after the request is on record) until this gate opens.
    pub gate: Option<Gate>,
}

/// Holds replies back until the test opens it: a request the fake is answering for exactly
/// as long as the test needs, with no clock in it (a held reply also lets go when the fake
/// is dropped, so a failing test never hangs on it).
#[derive(Clone, Debug, Default)]
pub struct Gate(Arc<(Mutex<bool>, std::sync::Condvar)>);

impl Gate {
    pub fn new() -> Gate {
        Gate::default()
    }

    /// Lets every held reply go, now and from now on.
    pub fn open(&self) {
        let (open, changed) = &*self.0;
        *open.lock().unwrap_or_else(|e| e.into_inner()) = true;
        changed.notify_all();
    }

    fn wait(&self, stop: &AtomicBool) {
        let (open, changed) = &*self.0;
        let mut is_open = open.lock().unwrap_or_else(|e| e.into_inner());
        while !*is_open && !stop.load(Ordering::SeqCst) {
            is_open = changed
                .wait_timeout(is_open, Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// How an answer goes out on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    /// All at once.
    Whole,
    /// Not a byte: the connection stays open and silent until the client closes it.
    Hang,
    /// The head at once, then the body one byte at a time, this long apart.
    Drip(Duration),
    /// The status line alone, then (this long after) the rest: a head that arrives in two
    /// reads, as over a real network or through a proxy.
    SplitHead(Duration),
    /// The head and the first `n` bytes of the body, then silence as with `Hang`: a body
    /// that never completes.
    Stall(usize),
    /// The head and the first `n` bytes of the body, then the connection is closed.
    Cut(usize),
    /// A head without a length (`connection: close`), then the body over and over until
    /// the client stops reading.
    Endless,
}

impl Reply {
    fn new(status: u16, content_type: &str, body: &str) -> Reply {
        Reply::raw(status, content_type, body.as_bytes())
    }

    /// Any bytes as the body (invalid UTF-8, say), with this content type ("" for none).
    pub fn raw(status: u16, content_type: &str, body: &[u8]) -> Reply {
        Reply {
            status,
            content_type: content_type.to_string(),
            body: body.to_vec(),
            headers: Vec::new(),
            delay: Duration::ZERO,
            drop_connection: false,
            wire: Wire::Whole,
            gate: None,
        }
    }

    /// `content-type: application/json`.
    pub fn json(status: u16, body: &str) -> Reply {
        Reply::new(status, "application/json", body)
    }

    /// `content-type: text/html; charset=utf-8`.
    pub fn html(status: u16, body: &str) -> Reply {
        Reply::new(status, "text/html; charset=utf-8", body)
    }

    /// `content-type: text/plain; charset=utf-8`.
    pub fn text(status: u16, body: &str) -> Reply {
        Reply::new(status, "text/plain; charset=utf-8", body)
    }

    /// Sleep `d` after reading the request, before answering (or dropping).
    pub fn with_delay(mut self, d: Duration) -> Reply {
        self.delay = d;
        self
    }

    /// Answer only once `gate` opens (the request is on record meanwhile).
    pub fn held(mut self, gate: &Gate) -> Reply {
        self.gate = Some(gate.clone());
        self
    }

    /// Read the whole request, record it, then close the socket without answering.
    pub fn dropped() -> Reply {
        Reply {
            drop_connection: true,
            ..Reply::new(0, "", "")
        }
    }

    /// Read and record the request, then never send a byte (until the client gives up).
    pub fn hang() -> Reply {
        Reply::new(0, "", "").on_wire(Wire::Hang)
    }

    /// Adds a header (`location`, say).
    pub fn with_header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// Sends this answer the way `wire` says.
    pub fn on_wire(mut self, wire: Wire) -> Reply {
        self.wire = wire;
        self
    }
}

/// One request as the fake received it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    /// Path without the query string, as sent (not percent-decoded).
    pub path: String,
    /// Query string without the `?` (empty if none).
    pub query: String,
    /// Header names lowercased, values trimmed, in arrival order.
    pub headers: Vec<(String, String)>,
    /// Body, lossily decoded as UTF-8.
    pub body: String,
}

impl Recorded {
    /// First header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body parsed as JSON; panics with the body if it is not JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| {
            panic!(
                "{} {} body is not JSON ({e}): {:?}",
                self.method, self.path, self.body
            )
        })
    }
}

/// Answers a request, or `None` to leave it unscripted.
pub type Handler = Arc<dyn Fn(&Recorded) -> Option<Reply> + Send + Sync>;

struct Script {
    replies: Vec<Reply>,
    next: usize,
    /// A handler instead of canned replies.
    handler: Option<Handler>,
}

impl Script {
    fn new(replies: Vec<Reply>) -> Script {
        assert!(
            !replies.is_empty(),
            "FakeQwenPaw: a route needs at least one reply"
        );
        Script {
            replies,
            next: 0,
            handler: None,
        }
    }

    fn handled_by(handler: Handler) -> Script {
        Script {
            replies: Vec::new(),
            next: 0,
            handler: Some(handler),
        }
    }

    /// The handler's answer, or the next canned reply.
    fn answer(&mut self, request: &Recorded) -> Option<Reply> {
        match &self.handler {
            Some(handler) => handler(request),
            None => Some(self.take()),
        }
    }

    /// Next reply; the last one repeats forever.
    fn take(&mut self) -> Reply {
        let i = self.next.min(self.replies.len() - 1);
        if self.next < self.replies.len() - 1 {
            self.next += 1;
        }
        self.replies[i].clone()
    }
}

#[derive(Default)]
struct State {
    /// Replies for the next requests of a route, before any script (`once`).
    once: HashMap<(String, String), Vec<Reply>>,
    exact: HashMap<(String, String), Script>,
    /// (method, prefix, script); looked up by longest matching prefix.
    prefixes: Vec<(String, String, Script)>,
    requests: Vec<Recorded>,
    /// `METHOD path?query` of every request no script covered.
    unscripted: Vec<String>,
    /// (method, exact path, hits) to check on drop.
    expected: Vec<(String, String, usize)>,
}

impl State {
    fn reply_for(&mut self, request: &Recorded) -> Reply {
        let (method, path, query) = (&request.method, &request.path, &request.query);
        let key = (method.to_string(), path.to_string());
        if let Some(replies) = self.once.get_mut(&key).filter(|r| !r.is_empty()) {
            return replies.remove(0);
        }
        if let Some(s) = self.exact.get_mut(&key) {
            return s.take();
        }
        if let Some(reply) = self
            .prefixes
            .iter_mut()
            .filter(|(m, p, _)| m == method && path.starts_with(p.as_str()))
            .max_by_key(|(_, p, _)| p.len())
            .and_then(|(_, _, s)| s.answer(request))
        {
            return reply;
        }
        let shown = if query.is_empty() {
            format!("{method} {path}")
        } else {
            format!("{method} {path}?{query}")
        };
        let body = serde_json::json!({ "detail": format!("fake QwenPaw: no script for {shown}") });
        self.unscripted.push(shown);
        Reply::json(500, &body.to_string())
    }
}

struct Shared {
    state: Mutex<State>,
    stop: AtomicBool,
    /// Requests being answered right now, and the most there ever were at once.
    in_flight: AtomicUsize,
    peak_in_flight: AtomicUsize,
    /// TCP connections accepted so far.
    connections: AtomicUsize,
}

impl Shared {
    /// Lock, ignoring poisoning (a panicking test thread must not wedge the fake).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The fake server. Dropping it stops accepting new connections and closes
/// kept-alive ones after their current request.
pub struct FakeQwenPaw {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl FakeQwenPaw {
    /// Bind `127.0.0.1:0` and start serving.
    pub fn start() -> FakeQwenPaw {
        let listener = TcpListener::bind("127.0.0.1:0").expect("FakeQwenPaw: bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("FakeQwenPaw: local_addr");
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            stop: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            peak_in_flight: AtomicUsize::new(0),
            connections: AtomicUsize::new(0),
        });
        let acc_shared = Arc::clone(&shared);
        let acceptor = thread::Builder::new()
            .name(format!("fake-qwenpaw-{}", addr.port()))
            .spawn(move || accept_loop(listener, acc_shared))
            .expect("FakeQwenPaw: spawn accept thread");
        FakeQwenPaw {
            addr,
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// `http://127.0.0.1:PORT` (no `/api`).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.addr.port())
    }

    /// `http://127.0.0.1:PORT/api`.
    pub fn api(&self) -> String {
        format!("{}/api", self.url())
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Script replies for `method` + exact `path` (no query string). Replies are
    /// consumed in order; the last one repeats forever. Replaces any earlier
    /// script for the same route. Panics if `replies` is empty.
    pub fn on(&self, method: &str, path: &str, replies: Vec<Reply>) {
        let script = Script::new(replies);
        self.shared
            .lock()
            .exact
            .insert((method.to_ascii_uppercase(), path.to_string()), script);
    }

    /// [`on`](Self::on) with one JSON reply, which repeats forever.
    pub fn answer(&self, method: &str, path: &str, status: u16, body: &str) {
        self.on(method, path, vec![Reply::json(status, body)]);
    }

    /// The next `method path` (exact) request gets `reply`, before any script; the route
    /// answers as before afterwards. For a request a command makes once in passing (the
    /// task check of `watch`), whatever the test scripted for later.
    pub fn once(&self, method: &str, path: &str, reply: Reply) {
        self.shared
            .lock()
            .once
            .entry((method.to_ascii_uppercase(), path.to_string()))
            .or_default()
            .push(reply);
    }

    /// Forgets the `once` replies of a route nothing asked for; returns how many.
    pub fn unused_once(&self, method: &str, path: &str) -> usize {
        self.shared
            .lock()
            .once
            .remove(&(method.to_ascii_uppercase(), path.to_string()))
            .map_or(0, |r| r.len())
    }

    /// Removes the script for `method` + exact `path` (prefix routes answer it again).
    pub fn off(&self, method: &str, path: &str) {
        self.shared
            .lock()
            .exact
            .remove(&(method.to_ascii_uppercase(), path.to_string()));
    }

    /// Like [`on`](Self::on) for every path starting with `prefix`. Exact routes
    /// win over prefixes; among prefixes the longest match wins.
    pub fn on_prefix(&self, method: &str, prefix: &str, replies: Vec<Reply>) {
        self.add_prefix(method, prefix, Script::new(replies));
    }

    /// Lets `handler` answer every `method` request whose path starts with `prefix` (a
    /// prefix route: exact scripts win over it; `None` leaves a request unscripted).
    pub fn handle(&self, method: &str, prefix: &str, handler: Handler) {
        self.add_prefix(method, prefix, Script::handled_by(handler));
    }

    /// Adds a prefix route, or replaces the one for the same method and prefix.
    fn add_prefix(&self, method: &str, prefix: &str, script: Script) {
        let method = method.to_ascii_uppercase();
        let mut st = self.shared.lock();
        match st
            .prefixes
            .iter_mut()
            .find(|(m, p, _)| *m == method && p == prefix)
        {
            Some(entry) => entry.2 = script,
            None => st.prefixes.push((method, prefix.to_string(), script)),
        }
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.lock().requests.clone()
    }

    /// TCP connections accepted so far (keep-alive reuse keeps this low).
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// The most requests that were ever being answered at the same time (a measure of the
    /// client's parallelism that needs no clock).
    pub fn peak_in_flight(&self) -> usize {
        self.shared.peak_in_flight.load(Ordering::SeqCst)
    }

    /// The requests no script covered so far (and forgets them: a test that takes them
    /// has dealt with them). Any left when the fake is dropped fail the test.
    pub fn take_unscripted(&self) -> Vec<String> {
        std::mem::take(&mut self.shared.lock().unscripted)
    }

    /// When the fake is dropped, `method path` (exact) must have been hit `hits` times.
    pub fn expect_hits(&self, method: &str, path: &str, hits: usize) {
        self.shared
            .lock()
            .expected
            .push((method.to_ascii_uppercase(), path.to_string(), hits));
    }

    /// Number of requests received with this method and exact path.
    pub fn hits(&self, method: &str, path: &str) -> usize {
        self.shared
            .lock()
            .requests
            .iter()
            .filter(|r| r.method.eq_ignore_ascii_case(method) && r.path == path)
            .count()
    }
}

impl Drop for FakeQwenPaw {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept(). Only join if the wake-up connection got
        // through; otherwise leave the thread (it dies with the process).
        let woke = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1)).is_ok();
        if let Some(h) = self.acceptor.take()
            && woke
        {
            let _ = h.join();
        }
        if std::thread::panicking() {
            return;
        }
        let state = self.shared.lock();
        assert!(
            state.unscripted.is_empty(),
            "FakeQwenPaw got requests no script covers: {:?}",
            state.unscripted
        );
        for (method, path, want) in &state.expected {
            let got = state
                .requests
                .iter()
                .filter(|r| r.method == *method && r.path == *path)
                .count();
            assert_eq!(
                got, *want,
                "FakeQwenPaw: {method} {path} was hit {got} times, expected {want}"
            );
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for conn in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let stream = match conn {
            Ok(s) => s,
            // e.g. EMFILE or a connection reset before accept: keep serving.
            Err(_) => {
                thread::sleep(Duration::from_millis(5));
                continue;
            }
        };
        shared.connections.fetch_add(1, Ordering::SeqCst);
        let conn_shared = Arc::clone(&shared);
        let spawned = thread::Builder::new()
            .name("fake-qwenpaw-conn".to_string())
            .stack_size(CONN_STACK)
            .spawn(move || {
                let _ = serve_connection(stream, &conn_shared);
            });
        // If the thread cannot be spawned the stream is dropped (client sees a close).
        drop(spawned);
    }
}

/// A parsed request head plus body.
struct Request {
    rec: Recorded,
    version: String,
}

/// Serve requests on one connection until the client closes it, a reply says
/// close/drop, or the fake is stopped.
fn serve_connection(stream: TcpStream, shared: &Shared) -> io::Result<()> {
    let _ = stream.set_nodelay(true);
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    if reader.fill_buf()?.first() == Some(&TLS_HANDSHAKE) {
        shared
            .lock()
            .unscripted
            .push("a TLS handshake (an https:// client)".to_string());
        return refuse_tls(reader, writer);
    }
    loop {
        let req = match read_request(&mut reader, &mut writer)? {
            Some(r) => r,
            None => return Ok(()), // clean EOF between requests
        };
        if shared.stop.load(Ordering::SeqCst) {
            let _ = writer.shutdown(Shutdown::Both);
            return Ok(());
        }
        let keep_alive = wants_keep_alive(&req);
        let now = shared.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        shared.peak_in_flight.fetch_max(now, Ordering::SeqCst);
        // The request is on record before it is answered (a handler may take a while).
        shared.lock().requests.push(req.rec.clone());
        let reply = shared.lock().reply_for(&req.rec);
        if let Some(gate) = &reply.gate {
            gate.wait(&shared.stop);
        }
        if !reply.delay.is_zero() {
            thread::sleep(reply.delay);
        }
        shared.in_flight.fetch_sub(1, Ordering::SeqCst);
        if reply.drop_connection {
            let _ = writer.shutdown(Shutdown::Both);
            return Ok(());
        }
        if reply.wire != Wire::Whole {
            // Faulty answers end the connection one way or another.
            let _ = send_faulty(&mut reader, &mut writer, &reply, shared);
            let _ = writer.shutdown(Shutdown::Both);
            return Ok(());
        }
        write_reply(&mut writer, &reply, keep_alive)?;
        if !keep_alive {
            let _ = writer.shutdown(Shutdown::Both);
            return Ok(());
        }
    }
}

fn wants_keep_alive(req: &Request) -> bool {
    let conn = req
        .rec
        .header("connection")
        .unwrap_or("")
        .to_ascii_lowercase();
    let tokens = || conn.split(',').map(str::trim);
    if req.version.eq_ignore_ascii_case("HTTP/1.0") {
        tokens().any(|t| t == "keep-alive")
    } else {
        !tokens().any(|t| t == "close")
    }
}

/// Read one line (CRLF or LF), without the terminator. `None` on EOF before any byte.
fn read_line(reader: &mut BufReader<TcpStream>, budget: &mut usize) -> io::Result<Option<String>> {
    let mut buf = Vec::new();
    let n = reader
        .by_ref()
        .take(*budget as u64 + 1)
        .read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Ok(None);
    }
    if n > *budget {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "request head too large",
        ));
    }
    *budget -= n;
    if buf.last() != Some(&b'\n') {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "EOF inside request head",
        ));
    }
    buf.pop();
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Ok(Some(String::from_utf8_lossy(&buf).into_owned()))
}

fn bad(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

/// Read one request. `Ok(None)` when the client closed the connection cleanly
/// before sending anything.
fn read_request(
    reader: &mut BufReader<TcpStream>,
    writer: &mut TcpStream,
) -> io::Result<Option<Request>> {
    let mut budget = MAX_HEAD;
    // Tolerate stray empty lines before a request line (RFC 9112 §2.2).
    let line = loop {
        match read_line(reader, &mut budget)? {
            None => return Ok(None),
            Some(l) if l.is_empty() => continue,
            Some(l) => break l,
        }
    };
    let mut parts = line.split_whitespace();
    let (method, target, version) = match (parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(t), Some(v)) => (m.to_string(), t.to_string(), v.to_string()),
        _ => {
            let _ = write_reply(
                writer,
                &Reply::text(400, "Invalid HTTP request received."),
                false,
            );
            return Err(bad("malformed request line"));
        }
    };

    let mut headers = Vec::new();
    loop {
        let l = read_line(reader, &mut budget)?
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "EOF in headers"))?;
        if l.is_empty() {
            break;
        }
        if let Some((name, value)) = l.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let header = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.as_str())
    };

    if header("transfer-encoding").is_some_and(|te| te.to_ascii_lowercase().contains("chunked")) {
        let _ = write_reply(
            writer,
            &Reply::text(501, "chunked request bodies unsupported"),
            false,
        );
        return Err(bad("chunked request body"));
    }
    let len: usize = match header("content-length") {
        None => 0,
        Some(v) => v.trim().parse().map_err(|_| bad("bad content-length"))?,
    };
    if len > 0 && header("expect").is_some_and(|e| e.eq_ignore_ascii_case("100-continue")) {
        writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        writer.flush()?;
    }
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body)?;

    // Absolute-form target ("http://host:port/path?q") -> origin-form.
    let target = match target.split_once("://") {
        Some((_, rest)) => match rest.find('/') {
            Some(i) => rest[i..].to_string(),
            None => "/".to_string(),
        },
        None => target,
    };
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (target, String::new()),
    };

    Ok(Some(Request {
        rec: Recorded {
            method: method.to_ascii_uppercase(),
            path,
            query,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        },
        version,
    }))
}

fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Unknown",
    }
}

/// The status line and headers of `reply`; `length` is the content-length to announce
/// (none for a body that ends when the connection does).
fn head(reply: &Reply, length: Option<usize>, keep_alive: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {} {}\r\nserver: fake-qwenpaw\r\n",
        reply.status,
        reason(reply.status)
    );
    if let Some(length) = length {
        out.push_str(&format!("content-length: {length}\r\n"));
    }
    if !reply.content_type.is_empty() {
        out.push_str(&format!("content-type: {}\r\n", reply.content_type));
    }
    for (name, value) in &reply.headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str(if keep_alive {
        "connection: keep-alive\r\n\r\n"
    } else {
        "connection: close\r\n\r\n"
    });
    out.into_bytes()
}

fn write_reply(w: &mut TcpStream, reply: &Reply, keep_alive: bool) -> io::Result<()> {
    let mut bytes = head(reply, Some(reply.body.len()), keep_alive);
    bytes.extend_from_slice(&reply.body);
    w.write_all(&bytes)?;
    w.flush()
}

/// Sends `reply` the faulty way its [`Wire`] says. Returns when the answer is done with
/// (sent, cut) or the client is gone; silence lasts until the client closes the
/// connection or the fake is stopped.
fn send_faulty(
    reader: &mut BufReader<TcpStream>,
    w: &mut TcpStream,
    reply: &Reply,
    shared: &Shared,
) -> io::Result<()> {
    let partly = |n: usize| {
        let mut bytes = head(reply, Some(reply.body.len()), false);
        bytes.extend_from_slice(&reply.body[..n.min(reply.body.len())]);
        bytes
    };
    match reply.wire {
        Wire::Whole => write_reply(w, reply, false),
        Wire::Hang => silence(reader, shared),
        Wire::Stall(n) => {
            w.write_all(&partly(n))?;
            w.flush()?;
            silence(reader, shared)
        }
        Wire::Cut(n) => {
            w.write_all(&partly(n))?;
            w.flush()
        }
        Wire::SplitHead(after) => {
            let whole = partly(reply.body.len());
            let line = whole.iter().position(|b| *b == b'\n').map_or(0, |i| i + 1);
            w.write_all(&whole[..line])?;
            w.flush()?;
            thread::sleep(after);
            w.write_all(&whole[line..])?;
            w.flush()
        }
        Wire::Drip(every) => {
            w.write_all(&head(reply, Some(reply.body.len()), false))?;
            w.flush()?;
            for byte in &reply.body {
                if shared.stop.load(Ordering::SeqCst) {
                    return Ok(());
                }
                thread::sleep(every);
                w.write_all(&[*byte])?;
                w.flush()?;
            }
            Ok(())
        }
        Wire::Endless => {
            let unit: &[u8] = if reply.body.is_empty() {
                b" "
            } else {
                &reply.body
            };
            w.write_all(&head(reply, None, false))?;
            let chunk = unit.repeat((64 * 1024 / unit.len()).max(1));
            // Ends when the client hangs up (the write fails) or the fake stops.
            while !shared.stop.load(Ordering::SeqCst) {
                w.write_all(&chunk)?;
            }
            Ok(())
        }
    }
}

/// Waits, saying nothing, until the client closes the connection or the fake is stopped.
fn silence(reader: &mut BufReader<TcpStream>, shared: &Shared) -> io::Result<()> {
    reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_millis(50)))?;
    let mut buf = [0u8; 1024];
    while !shared.stop.load(Ordering::SeqCst) {
        match reader.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The first byte of a TLS record carrying a handshake (a ClientHello, here).
const TLS_HANDSHAKE: u8 = 0x16;

/// What a plain-HTTP server such as uvicorn does with a TLS ClientHello: reads it, answers
/// 400 in plain HTTP, closes. The whole record is read first, so closing does not reset
/// the connection before the client has read the answer.
fn refuse_tls(mut reader: BufReader<TcpStream>, mut writer: TcpStream) -> io::Result<()> {
    reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut header = [0u8; 5];
    reader.read_exact(&mut header)?;
    let mut record = vec![0u8; usize::from(u16::from_be_bytes([header[3], header[4]]))];
    reader.read_exact(&mut record)?;
    write_reply(
        &mut writer,
        &Reply::text(400, "Invalid HTTP request received."),
        false,
    )?;
    let _ = writer.shutdown(Shutdown::Write);
    // Until the client hangs up (it sends an alert first, perhaps).
    let mut rest = Vec::new();
    let _ = reader.read_to_end(&mut rest);
    Ok(())
}
