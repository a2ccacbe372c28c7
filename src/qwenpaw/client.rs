//! The HTTP side of QwenPaw: one configured client, one method per request kind, every URL
//! built (and percent-encoded) here. It returns what the server answered, as an
//! [`Answer`], or why nothing usable came back, as a [`Transport`] error; `task` and
//! `chat` turn those into typed observations.

use std::io;
use std::time::Duration;

use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;

use ureq::http::Response;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};
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
    /// while it has been idle less than [`MAX_IDLE`], and only after ureq checked it is
    /// still open: a POST never goes out on a connection the server is about to close (its
    /// outcome would be unknown).
    lanes: Vec<Agent>,
    auth: Auth,
    /// Base URLs a watch allowed tokens to go to over plain http (`--allow-insecure-remote`).
    insecure_ok: Vec<String>,
}

/// Idle keep-alive connections a lane keeps: one per host, for this many hosts (a tick
/// talks to the QwenPaw servers its jobs name, usually one).
const IDLE_HOSTS: usize = 16;

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
                .max_idle_connections(IDLE_HOSTS)
                .max_idle_connections_per_host(1)
                .max_idle_age(MAX_IDLE);
            Agent::with_parts(
                config.build(),
                DefaultConnector::default(),
                OnceResolver::default(),
            )
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

    /// `POST {base}/plugins/install` with `{"source": <dir>, "force": …}`: the running
    /// server (re)loads the plugin in that folder, no restart.
    pub fn install_plugin(&self, base_url: &str, body: &Value) -> Result<Answer, Transport> {
        self.post(&format!("{base_url}/plugins/install"), "default", body)
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

/// Looks each host up once per process, and an IP address not at all. ureq resolves the
/// host before every request, even one that reuses a pooled connection, and with a resolve
/// timeout its resolver starts a thread per lookup: a thread per poll.
#[derive(Debug, Default)]
struct OnceResolver {
    lookup: DefaultResolver,
    known: Mutex<HashMap<String, ResolvedSocketAddrs>>,
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
        let Some(host_port) = DefaultResolver::host_and_port(scheme, authority) else {
            return self.lookup.resolve(uri, config, timeout);
        };
        if let Ok(addr) = host_port.parse::<std::net::SocketAddr>() {
            let mut one = self.lookup.empty();
            one.push(addr);
            return Ok(one);
        }
        let known = |m: &Mutex<HashMap<String, ResolvedSocketAddrs>>| {
            m.lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&host_port)
                .cloned()
        };
        if let Some(addrs) = known(&self.known) {
            return Ok(addrs);
        }
        let addrs = self.lookup.resolve(uri, config, timeout)?;
        self.known
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(host_port, addrs.clone());
        Ok(addrs)
    }
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
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
