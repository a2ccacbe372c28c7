//! Talking to QwenPaw: one configured client, one function per request kind. Answers are
//! classified here into the plain observations `lifecycle` understands.

use std::io;
use std::time::Duration;

use serde_json::{Value, json};
use ureq::http::Response;
use ureq::{Agent, Body};

use crate::ids::encode_path_segment;
use crate::job::{Job, Target};
use crate::lifecycle::{Check, Posted};
use crate::render;
use crate::settings::Auth;
use crate::time::Timestamp;

/// Answers larger than this are cut off and count as a failed check.
pub const MAX_BODY: u64 = 8 * 1024 * 1024;

pub struct Client {
    /// Polls: keep-alive, shared by every worker thread.
    polls: Agent,
    /// Deliveries: never reuses a pooled connection. A POST sent on a connection the server
    /// had already closed fails after sending, and would have to count as "outcome unknown".
    posts: Agent,
    auth: Auth,
}

impl Client {
    pub fn new(http_timeout: Duration, auth: Auth) -> Client {
        let build = |pooled: bool| -> Agent {
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
            if !pooled {
                config = config
                    .max_idle_connections(0)
                    .max_idle_connections_per_host(0);
            }
            config.build().into()
        };
        Client {
            polls: build(true),
            posts: build(false),
            auth,
        }
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

    /// `GET {base}/console/chat/task/{id}` as the agent the task runs on.
    pub fn poll(&self, job: &Job) -> Check {
        let url = format!(
            "{}/console/chat/task/{}",
            job.base_url,
            encode_path_segment(&job.task_id)
        );
        let request = self
            .with_auth(self.polls.get(&url))
            .header("X-Agent-Id", job.poll_agent())
            .header("Accept", "application/json");
        match request.call() {
            Ok(response) => classify_poll(job, response, &self.auth),
            Err(err) => Check::Failed {
                error: format!("GET {url}: {}", describe(&err)),
            },
        }
    }

    /// `POST {base}/console/chat/task`: `text` as a new user turn in the job's chat.
    pub fn deliver(&self, job: &Job, text: &str, turn_timeout: Option<Duration>) -> Posted {
        let url = format!("{}/console/chat/task", job.base_url);
        let mut body = json!({
            "session_id": job.session_id,
            "user_id": job.user_id,
            "channel": job.channel,
            "input": [{
                "role": "user",
                "content": [{"type": "text", "text": text}],
                "metadata": {
                    "qwenpaw_client_message_id": format!("atc-{}", job.job_id),
                    "atc_task_id": job.task_id,
                },
            }],
        });
        if let Some(timeout) = turn_timeout {
            body["timeout"] = json!(timeout.as_secs().max(1));
        }
        let request = self
            .with_auth(self.posts.post(&url))
            .header("X-Agent-Id", &job.agent_id)
            .header("Accept", "application/json");
        match request.send_json(&body) {
            Ok(response) => classify_post(response),
            Err(err) if nothing_sent(&err) => Posted::NotSent {
                error: format!("POST {url}: {}", describe(&err)),
            },
            Err(err) => Posted::Unknown {
                error: format!("POST {url}: {}", describe(&err)),
                http_status: None,
            },
        }
    }
    /// Whether the parent chat exists on the server: `Some(false)` means QwenPaw would
    /// silently start a new ("ghost") chat for this triple. `None`: could not tell.
    pub fn chat_exists(&self, base_url: &str, target: &Target) -> Option<bool> {
        let url = format!(
            "{base_url}/chats?user_id={}&channel={}",
            encode_path_segment(&target.user_id),
            encode_path_segment(&target.channel)
        );
        let request = self
            .with_auth(self.polls.get(&url))
            .header("X-Agent-Id", &target.agent_id)
            .header("Accept", "application/json");
        let answer = read(request.call().ok()?);
        if answer.status != 200 || !is_json(&answer.content_type) {
            return None;
        }
        let chats: Value = serde_json::from_str(&answer.body.ok()?).ok()?;
        Some(chats.as_array()?.iter().any(|chat| {
            chat.get("session_id").and_then(Value::as_str) == Some(target.session_id.as_str())
                && chat.get("user_id").and_then(Value::as_str) == Some(target.user_id.as_str())
                && chat.get("channel").and_then(Value::as_str) == Some(target.channel.as_str())
        }))
    }
}

/// A read answer: status, whether it claims to be JSON, and the body (if readable).
struct Answer {
    status: u16,
    content_type: String,
    body: Result<String, String>,
}

fn read(mut response: Response<Body>) -> Answer {
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

fn is_json(content_type: &str) -> bool {
    let mime = content_type.split(';').next().unwrap_or("").trim();
    mime == "application/json" || mime.ends_with("+json")
}

/// QwenPaw's error bodies are `{"detail": "…"}` (or a list of validation errors).
fn detail(body: &str) -> String {
    let text = match serde_json::from_str::<Value>(body) {
        Ok(Value::Object(map)) => match map.get("detail") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => body.to_owned(),
        },
        _ => body.to_owned(),
    };
    one_line(&text, 300)
}

fn one_line(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    render::truncate_chars(flat.trim().to_owned(), max)
}

/// Content type first, then status: a wrong base URL can answer an HTML 404 page, which
/// must not park a live task as lost.
fn classify_poll(job: &Job, response: Response<Body>, auth: &Auth) -> Check {
    let answer = read(response);
    let status = answer.status;
    let body = match answer.body {
        Ok(body) => body,
        Err(error) => {
            return Check::Failed {
                error: format!("HTTP {status}: {error}"),
            };
        }
    };
    if !is_json(&answer.content_type) {
        let shown = if answer.content_type.is_empty() {
            "no content type"
        } else {
            &answer.content_type
        };
        return Check::Failed {
            error: format!(
                "HTTP {status} with {shown} instead of JSON: is the base URL {} right? It must point at QwenPaw's /api",
                job.base_url
            ),
        };
    }
    match status {
        200 => {}
        // FastAPI's own "no such route" 404 is JSON too: a wrong base URL path, not a
        // lost task (which says "Task not found: <id>").
        404 if detail(&body) == "Not Found" => {
            return Check::Failed {
                error: format!(
                    "HTTP 404 Not Found: no such route; is the base URL {} right? It must point at QwenPaw's /api",
                    job.base_url
                ),
            };
        }
        404 => {
            return Check::Lost {
                detail: detail(&body),
            };
        }
        401 | 403 => {
            let hint = match (
                status,
                auth.runtime_token.is_some(),
                auth.bearer_token.is_some(),
            ) {
                (403, ..) => "the agent may be disabled, or the token lacks access",
                (_, false, false) => {
                    "set QWENPAW_RUNTIME_INTERNAL_TOKEN (runtime token) or ATC_BEARER_TOKEN (web login) in atc tick's environment"
                }
                _ => {
                    "check QWENPAW_RUNTIME_INTERNAL_TOKEN / ATC_BEARER_TOKEN in atc tick's environment"
                }
            };
            return Check::Failed {
                error: format!("HTTP {status} {}: {hint}", detail(&body)),
            };
        }
        _ => {
            return Check::Failed {
                error: format!("HTTP {status}: {}", detail(&body)),
            };
        }
    }
    let payload: Value = match serde_json::from_str(&body) {
        Ok(value @ Value::Object(_)) => value,
        Ok(_) | Err(_) => {
            return Check::Failed {
                error: "HTTP 200 but the body is not a JSON object".to_owned(),
            };
        }
    };
    let started_at = payload
        .get("started_at")
        .and_then(Value::as_f64)
        .and_then(Timestamp::from_unix_f64);
    match payload.get("status").and_then(Value::as_str) {
        // 2.2 only ever answers running or finished; older servers also reported these
        // top-level terminal states.
        Some("finished" | "failed" | "cancelled" | "timeout" | "error") => Check::Finished {
            text: render::render(&job.task_id, &payload),
            started_at,
        },
        Some(_) => Check::Running { started_at },
        None => Check::Failed {
            error: "HTTP 200 but the body has no \"status\"".to_owned(),
        },
    }
}

fn classify_post(response: Response<Body>) -> Posted {
    let answer = read(response);
    let status = answer.status;
    match (status, answer.body) {
        (200..=299, Ok(body)) if is_json(&answer.content_type) => Posted::Accepted {
            turn_task_id: serde_json::from_str::<Value>(&body)
                .ok()
                .and_then(|v| v.get("task_id")?.as_str().map(str::to_owned)),
        },
        (200..=299, _) => Posted::Unknown {
            error: format!("HTTP {status} with an unreadable or non-JSON answer"),
            http_status: Some(status),
        },
        (409, body) => Posted::Busy {
            detail: body.map_or_else(|e| e, |b| detail(&b)),
        },
        (500..=599, body) => Posted::Unknown {
            error: format!("HTTP {status}: {}", body.map_or_else(|e| e, |b| detail(&b))),
            http_status: Some(status),
        },
        (_, body) => Posted::Rejected {
            http_status: status,
            detail: body.map_or_else(|e| e, |b| detail(&b)),
        },
    }
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
        ureq::Error::Timeout(timeout) => format!("timed out ({timeout})"),
        other => other.to_string(),
    }
}
