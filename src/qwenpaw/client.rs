//! The HTTP side of QwenPaw: one configured client, one method per request kind, every URL
//! built (and percent-encoded) here. It returns what the server answered, as an
//! [`Answer`], or why nothing usable came back, as a [`Transport`] error; `task` and
//! `chat` turn those into typed observations.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use ureq::http::Response;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{
    Buffers, ConnectProxyConnector, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout,
    RustlsConnector, Transport as UreqTransport,
};
use ureq::{Agent, Body};

use crate::settings::{Auth, insecure_refusal, insecure_remote_host};

/// Answers larger than this are cut off and count as unreadable.
pub const MAX_BODY: u64 = 8 * 1024 * 1024;

/// What the server answered: status, content type (lowercase) and the body, if it could be
/// read whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub content_type: String,
    pub body: Result<String, String>,
}

impl Answer {
    /// Whether the answer claims to be JSON (`application/json`, `…+json`).
    pub fn is_json(&self) -> bool {
        let mime = self.content_type.split(';').next().unwrap_or("").trim();
        mime == "application/json" || mime.ends_with("+json")
    }

    /// The content type as a person reads it: "no content type" when the server sent none.
    pub fn kind(&self) -> &str {
        if self.content_type.is_empty() {
            "no content type"
        } else {
            &self.content_type
        }
    }
}

/// No answer: the request failed in transport.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transport {
    /// True when the request certainly never reached the server (refused, DNS, connect
    /// timeout): nothing was sent.
    pub nothing_sent: bool,
    /// `METHOD url: what went wrong`.
    pub message: String,
}

pub struct Client {
    /// One agent (one pool, one kept-alive connection per host) per lane, so parallel
    /// workers never share a pool or wait on each other's lock. A connection is reused only
    /// while it has been idle less than [`MAX_IDLE`], and only after a probe found it still
    /// open ([`Socket`]): a POST never goes out on a connection the server is about to
    /// close (its outcome would be unknown).
    lanes: Vec<Agent>,
    auth: Auth,
    /// Base URLs a watch allowed tokens to go to over plain http (`--allow-insecure-remote`).
    insecure_ok: Vec<String>,
}

/// Idle keep-alive connections a lane keeps: one per host, for this many hosts (a tick
/// talks to the QwenPaw servers its jobs name, usually one).
const IDLE_HOSTS: usize = 16;

/// Each connection's buffers (ureq's default is 128 KiB each, zeroed when a connection
/// opens: with a lane per worker that was 2 MiB written and ~500 page faults per tick for
/// answers of a few hundred bytes). Answers of any size still arrive (in more reads); a
/// response head must fit in the input buffer, so it is also the bound ureq enforces on
/// heads (`MAX_HEAD`, below it so an oversized head is named as such).
const INPUT_BUFFER: usize = 32 * 1024;
const MAX_HEAD: usize = 16 * 1024;
const OUTPUT_BUFFER: usize = 16 * 1024;

/// A kept-alive connection idle longer than this is closed, not reused. QwenPaw's server
/// (uvicorn) closes idle connections after 5 s: well before that, the server cannot be
/// closing one just as a request goes out on it.
pub const MAX_IDLE: Duration = Duration::from_secs(2);

thread_local! {
    /// The lane the current thread's requests use (`enter_lane`); 0 for the main thread.
    static LANE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Makes the current thread (a worker of a parallel phase) use lane `lane` of every
/// client: its own kept-alive connections.
pub fn enter_lane(lane: usize) {
    LANE.with(|l| l.set(lane));
}

impl Client {
    /// A client for one thread (one lane).
    pub fn new(http_timeout: Duration, auth: Auth) -> Client {
        Client::with_lanes(http_timeout, auth, 1)
    }

    /// A client for `lanes` worker threads: each keeps its own connections.
    pub fn with_lanes(http_timeout: Duration, auth: Auth, lanes: usize) -> Client {
        let build = || -> Agent {
            let phase = Some(http_timeout);
            let mut config = Agent::config_builder()
                .http_status_as_error(false)
                .user_agent(concat!("atc/", env!("CARGO_PKG_VERSION")))
                // Per-phase timeouts, so a timeout says whether the request went out.
                .timeout_resolve(phase)
                .timeout_connect(phase)
                .timeout_send_request(phase)
                .timeout_send_body(phase)
                .timeout_recv_response(phase)
                .timeout_recv_body(phase)
                .max_redirects(0);
            config = config
                .input_buffer_size(INPUT_BUFFER)
                .max_response_header_size(MAX_HEAD)
                .output_buffer_size(OUTPUT_BUFFER)
                .max_idle_connections(IDLE_HOSTS)
                .max_idle_connections_per_host(1)
                .max_idle_age(MAX_IDLE);
            // ureq's default chain (a CONNECT proxy if one is configured, TCP, TLS for
            // https) with atc's TCP transport in the middle.
            let connector =
                ().chain(ConnectProxyConnector::default())
                    .chain(Tcp)
                    .chain(RustlsConnector::default());
            Agent::with_parts(config.build(), connector, OnceResolver::default())
        };
        Client {
            lanes: (0..lanes.max(1)).map(|_| build()).collect(),
            auth,
            insecure_ok: Vec::new(),
        }
    }

    pub fn auth(&self) -> &Auth {
        &self.auth
    }

    /// The agent of the current thread's lane.
    fn lane(&self) -> &Agent {
        &self.lanes[LANE.with(std::cell::Cell::get) % self.lanes.len()]
    }

    /// Lets tokens go to `base_url` over plain http (a watch recorded the allowance).
    pub fn allow_insecure(&mut self, base_url: &str) {
        if !self.insecure_ok.iter().any(|b| b == base_url) {
            self.insecure_ok.push(base_url.to_owned());
        }
    }

    /// Refuses, before anything is sent, a request that would carry a token over plain
    /// http to another machine (anyone on the path could read it).
    fn guard(&self, method: &str, url: &str) -> Result<(), Transport> {
        let Some(host) = insecure_remote_host(url).filter(|_| self.auth.has_token()) else {
            return Ok(());
        };
        if self.auth.allow_insecure_remote
            || self.insecure_ok.iter().any(|b| url.starts_with(b.as_str()))
        {
            return Ok(());
        }
        Err(Transport {
            nothing_sent: true,
            message: format!("{method} {url}: {}", insecure_refusal(host)),
        })
    }

    fn with_auth<B>(&self, mut request: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        if let Some(token) = &self.auth.runtime_token {
            request = request.header("X-QwenPaw-Runtime-Token", token);
        }
        if let Some(token) = &self.auth.bearer_token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        request
    }

    /// `GET {base}/console/chat/task/{id}` as `agent` (the agent the task runs on, as
    /// `check_agent_task` asks).
    pub fn get_task(
        &self,
        base_url: &str,
        task_id: &str,
        agent: &str,
    ) -> Result<Answer, Transport> {
        self.read(
            &format!("{base_url}/console/chat/task/{}", encode(task_id)),
            agent,
        )
    }

    /// `POST {base}/console/chat/task` with `body` (a new user turn) as `agent`.
    pub fn post_turn(
        &self,
        base_url: &str,
        agent: &str,
        body: &Value,
    ) -> Result<Answer, Transport> {
        self.post(&format!("{base_url}/console/chat/task"), agent, body)
    }

    /// `POST {base}/messages/send` with `body` as `agent`: text to a person through one of
    /// the agent's channels (not stored in any chat, never starts a turn).
    pub fn send_message(
        &self,
        base_url: &str,
        agent: &str,
        body: &Value,
    ) -> Result<Answer, Transport> {
        self.post(&format!("{base_url}/messages/send"), agent, body)
    }

    /// `GET {base}/config/channels/{channel}/health` as `agent`.
    pub fn channel_health(
        &self,
        base_url: &str,
        agent: &str,
        channel: &str,
    ) -> Result<Answer, Transport> {
        self.read(
            &format!("{base_url}/config/channels/{}/health", encode(channel)),
            agent,
        )
    }

    /// `GET {base}/chats` as `agent`: its chats, of one user on one channel when
    /// `filter` says which (otherwise all of them).
    pub fn list_chats(
        &self,
        base_url: &str,
        agent: &str,
        filter: Option<(&str, &str)>,
    ) -> Result<Answer, Transport> {
        let url = match filter {
            Some((user_id, channel)) => format!(
                "{base_url}/chats?user_id={}&channel={}",
                encode(user_id),
                encode(channel)
            ),
            None => format!("{base_url}/chats"),
        };
        self.read(&url, agent)
    }

    /// `GET {base}/chats/{id}/status` as `agent`: is a turn running in the chat?
    pub fn chat_status(
        &self,
        base_url: &str,
        agent: &str,
        chat_id: &str,
    ) -> Result<Answer, Transport> {
        self.read(
            &format!("{base_url}/chats/{}/status", encode(chat_id)),
            agent,
        )
    }

    /// `GET {base}/chats/{id}` as `agent`: the chat's stored history and status.
    pub fn chat_history(
        &self,
        base_url: &str,
        agent: &str,
        chat_id: &str,
    ) -> Result<Answer, Transport> {
        self.read(&format!("{base_url}/chats/{}", encode(chat_id)), agent)
    }

    /// `POST {base}/console/chat/stop?chat_id={id}` as `agent`: stop the turn running in
    /// that chat (its uuid; a session id finds only `console` chats). QwenPaw answers
    /// `{"stopped": true}`, or `{"stopped": false}` when nothing was running there.
    pub fn stop_chat(
        &self,
        base_url: &str,
        agent: &str,
        chat_id: &str,
    ) -> Result<Answer, Transport> {
        self.post(
            &format!("{base_url}/console/chat/stop?chat_id={}", encode(chat_id)),
            agent,
            &Value::Object(serde_json::Map::new()),
        )
    }

    /// `GET {base}/version`: which QwenPaw answers (it needs the token like any path).
    pub fn version(&self, base_url: &str) -> Result<Answer, Transport> {
        self.read(&format!("{base_url}/version"), "default")
    }

    /// `GET {base}/healthz`: 200 once the server is up, 503 while it starts.
    pub fn health(&self, base_url: &str) -> Result<Answer, Transport> {
        self.read(&format!("{base_url}/healthz"), "default")
    }

    /// `GET {base}/agents`: `{"agents": [{"id": …}, …]}`.
    pub fn list_agents(&self, base_url: &str) -> Result<Answer, Transport> {
        self.read(&format!("{base_url}/agents"), "default")
    }

    /// `GET {base}/plugins/{id}/status`: `{"loaded": …}` (404 when not installed).
    pub fn plugin_status(&self, base_url: &str, plugin_id: &str) -> Result<Answer, Transport> {
        self.read(
            &format!("{base_url}/plugins/{}/status", encode(plugin_id)),
            "default",
        )
    }

    /// `GET {base}/frontend_plugin`: the loaded plugins, each with the bundle the web
    /// console imports (`frontend_entry`, null for none); 404 on a QwenPaw without
    /// frontend plugins.
    pub fn frontend_plugins(&self, base_url: &str) -> Result<Answer, Transport> {
        self.read(&format!("{base_url}/frontend_plugin"), "default")
    }

    /// `POST {base}/plugins/install` with `{"source": <dir>, "force": …}`: the running
    /// server (re)loads the plugin in that folder, no restart.
    pub fn install_plugin(&self, base_url: &str, body: &Value) -> Result<Answer, Transport> {
        self.post(&format!("{base_url}/plugins/install"), "default", body)
    }

    /// `DELETE {base}/plugins/{id}`: the running server unloads the plugin (its shutdown
    /// hooks run), removes its tools from every agent and deletes its folder; no prompt.
    pub fn uninstall_plugin(&self, base_url: &str, plugin_id: &str) -> Result<Answer, Transport> {
        let url = format!("{base_url}/plugins/{}", encode(plugin_id));
        self.guard("DELETE", &url)?;
        let request = self
            .with_auth(self.lane().delete(&url))
            .header("X-Agent-Id", "default")
            .header("Accept", "application/json");
        finish("DELETE", &url, request.call())
    }

    fn post(&self, url: &str, agent: &str, body: &Value) -> Result<Answer, Transport> {
        self.guard("POST", url)?;
        let request = self
            .with_auth(self.lane().post(url))
            .header("X-Agent-Id", agent)
            .header("Accept", "application/json");
        finish("POST", url, request.send_json(body))
    }

    fn read(&self, url: &str, agent: &str) -> Result<Answer, Transport> {
        self.guard("GET", url)?;
        let request = self
            .with_auth(self.lane().get(url))
            .header("X-Agent-Id", agent)
            .header("Accept", "application/json");
        finish("GET", url, request.call())
    }
}

/// Looks each host up once per lane, and an IP address not at all. ureq resolves the host
/// before every request, even one that reuses a pooled connection, and with a resolve
/// timeout its resolver starts a thread per lookup: a thread per poll. What was found is
/// kept by scheme and authority as the URL spells them, so a request to a known host costs
/// two string comparisons.
#[derive(Debug, Default)]
struct OnceResolver {
    lookup: DefaultResolver,
    /// (scheme, authority, addresses).
    known: Mutex<Vec<(String, String, ResolvedSocketAddrs)>>,
}

impl Resolver for OnceResolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let (Some(scheme), Some(authority)) = (uri.scheme(), uri.authority()) else {
            return self.lookup.resolve(uri, config, timeout);
        };
        let known = || self.known.lock().unwrap_or_else(|p| p.into_inner());
        let found = known()
            .iter()
            .find(|(s, a, _)| s == scheme.as_str() && a == authority.as_str())
            .map(|(_, _, addrs)| addrs.clone());
        if let Some(addrs) = found {
            return Ok(addrs);
        }
        let Some(host_port) = DefaultResolver::host_and_port(scheme, authority) else {
            return self.lookup.resolve(uri, config, timeout);
        };
        let addrs = match host_port.parse::<std::net::SocketAddr>() {
            Ok(addr) => {
                let mut one = self.lookup.empty();
                one.push(addr);
                one
            }
            Err(_) => self.lookup.resolve(uri, config, timeout)?,
        };
        known().push((scheme.to_string(), authority.to_string(), addrs.clone()));
        Ok(addrs)
    }
}

/// The TCP step of the connector chain: ureq's `TcpConnector`, but its connections are
/// [`Socket`]s (ureq's `TcpTransport` gives no way to drive its socket differently).
#[derive(Debug)]
struct Tcp;

impl<In: UreqTransport> Connector<In> for Tcp {
    type Out = Either<In, Socket>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        if let Some(proxied) = chained {
            return Ok(Some(Either::A(proxied)));
        }
        let budget = details.timeout.not_zero().map(|t| *t);
        let started = std::time::Instant::now();
        let mut last = None;
        for (i, addr) in details.addrs.iter().enumerate() {
            let left = budget.map(|b| b.saturating_sub(started.elapsed()));
            let left = connect_wait(left, i, details.addrs.len())
                .ok_or(ureq::Error::Timeout(details.timeout.reason))?;
            let connected = match left {
                Some(left) => TcpStream::connect_timeout(addr, left),
                None => TcpStream::connect(addr),
            };
            match connected {
                Ok(stream) => {
                    if details.config.no_delay() {
                        stream.set_nodelay(true)?;
                    }
                    let socket = Socket::new(stream, details.config);
                    (details.register_shutdown)(Arc::downgrade(&socket.stream) as _)?;
                    return Ok(Some(Either::B(socket)));
                }
                Err(err) => last = Some(connect_failed(err)),
            }
        }
        Err(last.unwrap_or(ureq::Error::ConnectionFailed))
    }
}

/// A connect that failed, as ureq names it: a timeout is `Timeout(Connect)` (nothing
/// was sent: another address, or the next tick, may try), anything else the I/O error.
fn connect_failed(err: io::Error) -> ureq::Error {
    if timed_out(&err) {
        ureq::Error::Timeout(ureq::Timeout::Connect)
    } else {
        ureq::Error::Io(err)
    }
}

/// How long to wait for address `i` of `n` with `left` of the connect budget remaining
/// (`Some(None)`: no budget, wait as long as the system does; `None`: the budget is spent).
/// As ureq shares it: half of what is left (at least 10 ms) for each address but the
/// last, so one that never answers does not use up the others' time; the rest for the last.
fn connect_wait(left: Option<Duration>, i: usize, n: usize) -> Option<Option<Duration>> {
    let Some(left) = left else {
        return Some(None);
    };
    if left.is_zero() {
        return None;
    }
    Some(Some(if i + 1 < n {
        (left / 2).max(Duration::from_millis(10)).min(left)
    } else {
        left
    }))
}

/// One kept-alive TCP connection, driven for a loop of small requests: ureq's
/// `TcpTransport` made two probes (six system calls) and two `setsockopt`s per request
/// around its one send and one receive. The same safeguards, with fewer system calls:
/// - A pooled connection is probed once, when the pool hands it out (one non-blocking
///   peek: closed, or holding bytes nobody asked for, means it is not reused), not also
///   when it goes back in, right after its answer was read whole (ureq itself checks that
///   no unread bytes are left then).
/// - The socket's timeouts are set only when the phase's remaining budget is not already
///   enforced by the ones set: a socket timeout at most 1/8 above the budget is kept, and
///   one is set 1/16 above the budget, so the next phase's or the next request's budget
///   (the same less a few microseconds, or more by as much) keeps it. ureq checks each
///   phase's deadline before every read and write, so a hanging or trickling server still
///   ends at its deadline, at most 1/8 late.
struct Socket {
    /// Shared with the pool's shutdown handle (as ureq's own transport does).
    stream: Arc<TcpStream>,
    buffers: LazyBuffers,
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
    /// Whether the socket was read or written since the pool last asked `is_open`.
    used: bool,
}

/// Names the peer only: the buffers hold requests, tokens included.
impl std::fmt::Debug for Socket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Socket")
            .field("peer", &self.stream.peer_addr().ok())
            .finish_non_exhaustive()
    }
}

impl Socket {
    fn new(stream: TcpStream, config: &ureq::config::Config) -> Socket {
        Socket {
            stream: Arc::new(stream),
            buffers: LazyBuffers::new(config.input_buffer_size(), config.output_buffer_size()),
            read_timeout: None,
            write_timeout: None,
            used: true,
        }
    }
}

/// The socket timeout to set before waiting at most `budget` (`None`: no limit), when
/// `set` is the one set now; `None` when `set` already does.
fn timeout_change(set: Option<Duration>, budget: Option<Duration>) -> Option<Option<Duration>> {
    match (set, budget) {
        (None, None) => None,
        (Some(set), Some(budget)) if budget <= set && set - budget <= budget / 8 => None,
        (_, budget) => Some(budget.map(|b| b + b / 16)),
    }
}

/// A socket's timeout ran out (a blocking socket with a timeout reports `WouldBlock`).
fn timed_out(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    )
}

impl UreqTransport for Socket {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        let timeout = timeout.for_write();
        let budget = timeout.not_zero().map(|t| *t);
        if let Some(change) = timeout_change(self.write_timeout, budget) {
            self.stream.set_write_timeout(change)?;
            self.write_timeout = change;
        }
        self.used = true;
        match (&*self.stream).write_all(&self.buffers.output()[..amount]) {
            Ok(()) => Ok(()),
            Err(err) if timed_out(&err) => Err(ureq::Error::Timeout(timeout.reason)),
            Err(err) => Err(err.into()),
        }
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        let timeout = timeout.for_read();
        let budget = timeout.not_zero().map(|t| *t);
        if let Some(change) = timeout_change(self.read_timeout, budget) {
            self.stream.set_read_timeout(change)?;
            self.read_timeout = change;
        }
        self.used = true;
        let read = loop {
            match (&*self.stream).read(self.buffers.input_append_buf()) {
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        match read {
            Ok(amount) => {
                self.buffers.input_appended(amount);
                Ok(amount > 0)
            }
            Err(err) if timed_out(&err) => Err(ureq::Error::Timeout(timeout.reason)),
            Err(err) => Err(err.into()),
        }
    }

    fn is_open(&mut self) -> bool {
        // ureq asks when a connection goes back to the pool (right after its answer was
        // read) and again when the pool hands it out: the second answer is the one that
        // counts, so only that one looks at the socket.
        if std::mem::take(&mut self.used) {
            return true;
        }
        still_open(&self.stream)
    }
}

/// Whether a kept-alive connection can carry another request: the peer has not closed it
/// and sent nothing unasked. One `recv(MSG_PEEK | MSG_DONTWAIT)`.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn still_open(stream: &TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    const MSG_PEEK: i32 = 0x2;
    const MSG_DONTWAIT: i32 = 0x40;
    unsafe extern "C" {
        fn recv(fd: i32, buf: *mut u8, len: usize, flags: i32) -> isize;
    }
    let mut byte = 0u8;
    // SAFETY: recv writes at most `len` (1) bytes into `byte`, which lives across the call;
    // the descriptor belongs to `stream`, borrowed for the call.
    let got = unsafe { recv(stream.as_raw_fd(), &mut byte, 1, MSG_PEEK | MSG_DONTWAIT) };
    got < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock
}

/// Elsewhere as ureq does it: a non-blocking read of one byte.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn still_open(stream: &TcpStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return false;
    }
    let open = matches!(stream.peek(&mut [0]), Err(e) if e.kind() == io::ErrorKind::WouldBlock);
    open && stream.set_nonblocking(false).is_ok()
}

fn finish(
    method: &str,
    url: &str,
    result: Result<Response<Body>, ureq::Error>,
) -> Result<Answer, Transport> {
    match result {
        Ok(response) => Ok(read_answer(response)),
        Err(err) => Err(Transport {
            nothing_sent: nothing_sent(&err),
            message: format!("{method} {url}: {}", describe(&err)),
        }),
    }
}

fn read_answer(mut response: Response<Body>) -> Answer {
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let body = response
        .body_mut()
        .with_config()
        .limit(MAX_BODY)
        .read_to_string()
        .map_err(|err| match err {
            ureq::Error::BodyExceedsLimit(_) => {
                format!("the answer is larger than {} MiB", MAX_BODY / 1024 / 1024)
            }
            other => format!("reading the answer failed: {}", describe(&other)),
        });
    Answer {
        status,
        content_type,
        body,
    }
}

/// Percent-encodes one URL path segment or query value (RFC 3986 unreserved characters
/// pass through). Validated task ids never need it; it is applied anyway so no URL is ever
/// built from raw input.
pub fn encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// True when the request certainly never reached the server.
fn nothing_sent(err: &ureq::Error) -> bool {
    match err {
        ureq::Error::HostNotFound | ureq::Error::ConnectionFailed => true,
        ureq::Error::Timeout(timeout) => {
            matches!(timeout, ureq::Timeout::Resolve | ureq::Timeout::Connect)
        }
        ureq::Error::Io(io) => matches!(
            io.kind(),
            io::ErrorKind::ConnectionRefused
                | io::ErrorKind::AddrNotAvailable
                | io::ErrorKind::NetworkUnreachable
                | io::ErrorKind::HostUnreachable
        ),
        _ => false,
    }
}

fn describe(err: &ureq::Error) -> String {
    match err {
        ureq::Error::Io(io) if io.kind() == io::ErrorKind::ConnectionRefused => {
            "connection refused (is QwenPaw running?)".to_owned()
        }
        // rustls read bytes that are no TLS record at all: an https:// URL for a server
        // that answers plain HTTP (rustls has no other name for it than this variant).
        ureq::Error::Io(io)
            if io.kind() == io::ErrorKind::InvalidData
                && io.to_string().contains("InvalidContentType") =>
        {
            format!("TLS handshake failed: is the server plain http://? ({io})")
        }
        ureq::Error::Timeout(timeout) => format!("timed out ({timeout})"),
        // ureq's "io: Peer disconnected": the server (or a proxy before it) closed the
        // connection before its answer was whole.
        ureq::Error::Io(io) if io.kind() == io::ErrorKind::UnexpectedEof => {
            "the server closed the connection before its answer was whole".to_owned()
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests;
