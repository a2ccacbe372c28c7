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
mod tests {
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
}
