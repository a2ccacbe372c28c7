//! The parent chat: the user turn a delivery posts (`POST /console/chat/task`), what the
//! server made of it, and whether the chat exists (`GET /chats`). Pure: the client does the
//! requests.

use std::time::Duration;

use serde_json::{Value, json};

use super::{Answer, Transport, detail};
use crate::turn::{Health, Posted, Sent, Turn};

/// The body of a delivery: `text` as a new user turn in the turn's exact chat triple (any
/// other triple would silently start a new chat). `content` must be a list of parts: a
/// plain string is dropped by QwenPaw. The turn's id is the delivery id QwenPaw keeps on
/// the stored user message (`metadata`), so the turn can be found again by reading the
/// chat back; `atc_task_id` names the first task it carries.
pub fn turn_body(turn: &Turn, text: &str, turn_timeout: Option<Duration>) -> Value {
    let first = turn.carries.first().map_or("", |b| b.task_id.as_str());
    let mut body = json!({
        "session_id": turn.chat.session_id,
        "user_id": turn.chat.user_id,
        "channel": turn.chat.channel,
        "input": [{
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "metadata": {
                "qwenpaw_client_message_id": turn.turn_id,
                "atc_task_id": first,
            },
        }],
    });
    if let Some(timeout) = turn_timeout {
        body["timeout"] = json!(timeout.as_secs().max(1));
    }
    body
}

/// How a delivery POST ended, from what came back.
pub fn posted(result: Result<Answer, Transport>) -> Posted {
    let answer = match result {
        Ok(answer) => answer,
        Err(Transport {
            nothing_sent: true,
            message,
        }) => return Posted::NotSent { error: message },
        Err(Transport { message, .. }) => {
            return Posted::Unknown {
                error: message,
                http_status: None,
            };
        }
    };
    let status = answer.status;
    let is_json = answer.is_json();
    let said = |body: Result<String, String>| body.map_or_else(|e| e, |b| detail(&b));
    match (status, answer.body) {
        (200..=299, Ok(body)) if is_json => Posted::Accepted {
            turn_task_id: serde_json::from_str::<Value>(&body)
                .ok()
                .and_then(|v| v.get("task_id")?.as_str().map(str::to_owned)),
        },
        (200..=299, _) => Posted::Unknown {
            error: format!("HTTP {status} with an unreadable or non-JSON answer"),
            http_status: Some(status),
        },
        (409, body) => Posted::Busy { detail: said(body) },
        (500..=599, body) => Posted::Unknown {
            error: format!("HTTP {status}: {}", said(body)),
            http_status: Some(status),
        },
        (_, body) => Posted::Rejected {
            http_status: status,
            detail: said(body),
        },
    }
}

/// The body of a forward: `text` to the person of the turn's chat, through its channel,
/// as that channel addresses them (`target_user` the chat's user id, `target_session` its
/// session id, e.g. `mqtt:alice`).
pub fn forward_body(turn: &Turn, text: &str) -> Value {
    json!({
        "channel": turn.chat.channel,
        "target_user": turn.chat.user_id,
        "target_session": turn.chat.session_id,
        "text": text,
    })
}

/// How a forward's send ended, from what came back.
pub fn forwarded(result: Result<Answer, Transport>) -> Sent {
    let answer = match result {
        Ok(answer) => answer,
        Err(Transport {
            nothing_sent: true,
            message,
        }) => {
            return Sent::Failed {
                http_status: None,
                detail: message,
            };
        }
        Err(Transport { message, .. }) => return Sent::Unknown { error: message },
    };
    let status = answer.status;
    let is_json = answer.is_json();
    let said =
        |body: &Result<String, String>| body.as_ref().map_or_else(|e| e.clone(), |b| detail(b));
    match status {
        200..=299 => {
            let success = answer
                .body
                .as_ref()
                .ok()
                .filter(|_| is_json)
                .and_then(|b| serde_json::from_str::<Value>(b).ok())
                .and_then(|v| v.get("success").and_then(Value::as_bool));
            match success {
                Some(true) => Sent::Accepted,
                Some(false) => Sent::Failed {
                    http_status: Some(status),
                    detail: format!("HTTP {status}: the server says it did not send it"),
                },
                None => Sent::Unknown {
                    error: format!("HTTP {status} with an unreadable or non-JSON answer"),
                },
            }
        }
        500..=599 => Sent::Failed {
            http_status: Some(status),
            detail: format!("HTTP {status}: {}", said(&answer.body)),
        },
        _ => Sent::Rejected {
            http_status: status,
            detail: said(&answer.body),
        },
    }
}

/// What `GET /config/channels/{channel}/health` says.
pub fn health(result: Result<Answer, Transport>) -> Health {
    let (status, value) = match json_body(result, "(a channel health)") {
        Ok(answer) => answer,
        Err(error) => return Health::Unknown { error },
    };
    let said = detail(&value.to_string());
    match (status, value.get("status").and_then(Value::as_str)) {
        (200, Some("healthy")) => Health::Healthy,
        (200, Some(other)) => Health::Unhealthy {
            detail: value
                .get("detail")
                .and_then(Value::as_str)
                .map_or_else(|| other.to_owned(), |d| crate::text::one_line(d, 300)),
        },
        (200, None) => Health::Unknown {
            error: "HTTP 200 but the health has no \"status\"".to_owned(),
        },
        (404, _) => Health::Missing { detail: said },
        (status, _) => Health::Unknown {
            error: format!("HTTP {status}: {said}"),
        },
    }
}

/// One chat as `GET /chats` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatRef {
    pub id: String,
    pub session_id: String,
    pub user_id: String,
    pub channel: String,
    /// A turn is running in it.
    pub running: bool,
    /// A person archived it (QwenPaw 2.2's `archived`): a POST still lands there, but the
    /// console lists it apart, under archived chats.
    pub archived: bool,
}

impl ChatRef {
    /// "user alice on console".
    pub fn describe(&self) -> String {
        format!("user {} on {}", self.user_id, self.channel)
    }
}

/// What an answer that should be a JSON body of `want` says, or why it is no use.
fn json_body(result: Result<Answer, Transport>, want: &str) -> Result<(u16, Value), String> {
    let answer = result.map_err(|transport| transport.message)?;
    let status = answer.status;
    let body = answer
        .body
        .clone()
        .map_err(|e| format!("HTTP {status}: {e}"))?;
    if !answer.is_json() {
        return Err(format!(
            "HTTP {status} with {} instead of JSON {want}",
            if answer.content_type.is_empty() {
                "no content type"
            } else {
                &answer.content_type
            }
        ));
    }
    let value =
        serde_json::from_str(&body).map_err(|e| format!("HTTP {status}: not JSON ({e})"))?;
    Ok((status, value))
}

/// Why a chat lookup told nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unusable {
    /// A definite no: the server does not know (or will not serve) the parent agent.
    Refused(String),
    /// Could not tell: unreachable, an error answer, a body that is no use.
    Unknown(String),
}

impl Unusable {
    pub fn message(&self) -> &str {
        match self {
            Unusable::Refused(m) | Unusable::Unknown(m) => m,
        }
    }
}

/// The chats `GET /chats` listed.
pub fn chats(result: Result<Answer, Transport>) -> Result<Vec<ChatRef>, Unusable> {
    let (status, value) = json_body(result, "(a chat list)").map_err(Unusable::Unknown)?;
    if status != 200 {
        let said = detail(&value.to_string());
        let message = format!("HTTP {status}: {said}");
        // QwenPaw's answer for an agent it does not have (404) or has disabled (403).
        let unknown_agent =
            status == 404 && said.starts_with("Agent ") && said.ends_with("not found");
        return Err(if unknown_agent || status == 403 {
            Unusable::Refused(message)
        } else {
            Unusable::Unknown(message)
        });
    }
    let list = value
        .as_array()
        .ok_or_else(|| Unusable::Unknown("HTTP 200 but the chat list is not a list".to_owned()))?;
    let text = |chat: &Value, key: &str| chat.get(key).and_then(Value::as_str).map(str::to_owned);
    Ok(list
        .iter()
        .filter_map(|chat| {
            Some(ChatRef {
                id: text(chat, "id")?,
                session_id: text(chat, "session_id")?,
                user_id: text(chat, "user_id")?,
                channel: text(chat, "channel")?,
                running: text(chat, "status").as_deref() == Some("running"),
                archived: chat.get("archived").and_then(Value::as_bool) == Some(true),
            })
        })
        .collect())
}

/// The chat with exactly this triple, if the list has one.
pub fn find<'a>(
    chats: &'a [ChatRef],
    session_id: &str,
    user_id: &str,
    channel: &str,
) -> Option<&'a ChatRef> {
    chats
        .iter()
        .find(|c| c.session_id == session_id && c.user_id == user_id && c.channel == channel)
}

/// The child's chat among an agent's chats: the one with its session id (the running one
/// if several are, else the one on `console`, where QwenPaw's own submit puts it).
pub fn child_chat<'a>(chats: &'a [ChatRef], session_id: &str) -> Option<&'a ChatRef> {
    let mine = || chats.iter().filter(|c| c.session_id == session_id);
    mine()
        .find(|c| c.running)
        .or_else(|| mine().find(|c| c.channel == "console"))
        .or_else(|| mine().next())
}

/// The agents `GET /agents` lists that can run anything: a disabled one answers 403.
pub fn agents(result: Result<Answer, Transport>) -> Result<Vec<String>, String> {
    let (status, value) = json_body(result, "(an agent list)")?;
    if status != 200 {
        return Err(format!("HTTP {status}: {}", detail(&value.to_string())));
    }
    let list = value
        .get("agents")
        .and_then(Value::as_array)
        .ok_or_else(|| "HTTP 200 but the answer has no \"agents\" list".to_owned())?;
    Ok(list
        .iter()
        .filter(|a| a.get("enabled").and_then(Value::as_bool) != Some(false))
        .filter_map(|a| a.get("id").and_then(Value::as_str).map(str::to_owned))
        .collect())
}

/// What `POST /console/chat/stop` said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// `{"stopped": true}`: a running turn was stopped.
    Stopped,
    /// `{"stopped": false}`: nothing was running in that chat.
    NotRunning,
}

/// The answer to `POST /console/chat/stop`, or why it tells nothing.
pub fn stopped(result: Result<Answer, Transport>) -> Result<Stop, String> {
    let (status, value) = json_body(result, "(a stop answer)")?;
    match (status, value.get("stopped").and_then(Value::as_bool)) {
        (200, Some(true)) => Ok(Stop::Stopped),
        (200, Some(false)) => Ok(Stop::NotRunning),
        (200, None) => Err("HTTP 200 but the answer has no \"stopped\"".to_owned()),
        (status, _) => Err(format!("HTTP {status}: {}", detail(&value.to_string()))),
    }
}

/// `GET /chats/{id}/status`: whether a turn is running.
pub fn running(result: Result<Answer, Transport>) -> Result<bool, String> {
    let (status, value) = json_body(result, "(a chat status)")?;
    match (status, value.get("status").and_then(Value::as_str)) {
        (200, Some("running")) => Ok(true),
        (200, Some(_)) => Ok(false),
        (200, None) => Err("HTTP 200 but the chat status has no \"status\"".to_owned()),
        (status, _) => Err(format!("HTTP {status}: {}", detail(&value.to_string()))),
    }
}

/// What reading the parent chat back said about one delivery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadBack {
    /// A user message carries the delivery's id; `turn` is how the turn it started ended,
    /// when the server has stamped it (`qwenpaw_turn_state`).
    Found { turn: Option<String> },
    /// No such message; whether a turn is running in the chat right now.
    Absent { running: bool },
    /// The server has no such chat (`Chat not found`).
    NoChat,
}

/// Reads `GET /chats/{id}` for the user message whose metadata carries `client_message_id`
/// (QwenPaw keeps input metadata under the stored message's `metadata.metadata`).
pub fn read_back(
    result: Result<Answer, Transport>,
    client_message_id: &str,
) -> Result<ReadBack, String> {
    let (status, value) = json_body(result, "(a chat history)")?;
    match status {
        200 => {}
        404 if detail(&value.to_string()).starts_with("Chat not found") => {
            return Ok(ReadBack::NoChat);
        }
        _ => return Err(format!("HTTP {status}: {}", detail(&value.to_string()))),
    }
    let messages = value
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| "HTTP 200 but the chat history has no messages".to_owned())?;
    let ours = messages.iter().rev().find(|m| {
        m.get("role").and_then(Value::as_str) == Some("user")
            && inner_metadata(m, "qwenpaw_client_message_id").and_then(Value::as_str)
                == Some(client_message_id)
    });
    Ok(match ours {
        Some(message) => ReadBack::Found {
            turn: inner_metadata(message, "qwenpaw_turn_state")
                .and_then(|state| state.get("status"))
                .and_then(Value::as_str)
                .map(str::to_owned),
        },
        None => ReadBack::Absent {
            running: value.get("status").and_then(Value::as_str) == Some("running"),
        },
    })
}

fn inner_metadata<'a>(message: &'a Value, key: &str) -> Option<&'a Value> {
    message.get("metadata")?.get("metadata")?.get(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(status: u16, body: &str) -> Result<Answer, Transport> {
        Ok(Answer {
            status,
            content_type: "application/json".into(),
            body: Ok(body.into()),
        })
    }

    #[test]
    fn agents_are_the_ones_that_can_run_anything() {
        let listed = r#"{"agents":[{"id":"default","enabled":true},{"id":"off","enabled":false},{"id":"QA"}]}"#;
        assert_eq!(
            agents(json(200, listed)),
            Ok(vec!["default".to_owned(), "QA".to_owned()])
        );
        assert!(
            agents(json(200, "[]"))
                .unwrap_err()
                .contains("no \"agents\"")
        );
        assert!(
            agents(json(401, r#"{"detail":"Not authenticated"}"#))
                .unwrap_err()
                .starts_with("HTTP 401")
        );
    }

    #[test]
    fn stop_answers_as_qwenpaw_gives_them() {
        assert_eq!(stopped(json(200, r#"{"stopped":true}"#)), Ok(Stop::Stopped));
        assert_eq!(
            stopped(json(200, r#"{"stopped":false}"#)),
            Ok(Stop::NotRunning)
        );
        let refused = stopped(json(422, r#"{"detail":[{"msg":"Field required"}]}"#));
        assert!(refused.unwrap_err().starts_with("HTTP 422"));
        assert!(stopped(json(200, "{}")).is_err());
        let down = Err(Transport {
            nothing_sent: true,
            message: "POST http://h/api/console/chat/stop: connection refused".into(),
        });
        assert!(stopped(down).unwrap_err().contains("connection refused"));
    }

    #[test]
    fn the_child_chat_is_the_running_one_then_the_console_one() {
        let chat = |id: &str, sid: &str, channel: &str, running: bool| ChatRef {
            id: id.into(),
            session_id: sid.into(),
            user_id: "u".into(),
            channel: channel.into(),
            running,
            archived: false,
        };
        let chats = [
            chat("c1", "other", "console", true),
            chat("c2", "kid", "mqtt", false),
            chat("c3", "kid", "console", false),
        ];
        assert_eq!(child_chat(&chats, "kid").unwrap().id, "c3");
        let chats = [chats[1].clone(), chat("c4", "kid", "mqtt", true)];
        assert_eq!(child_chat(&chats, "kid").unwrap().id, "c4");
        assert!(child_chat(&chats, "nobody").is_none());
    }

    #[test]
    fn post_outcomes() {
        assert_eq!(
            posted(json(200, r#"{"task_id":"task-p","timeout":60}"#)),
            Posted::Accepted {
                turn_task_id: Some("task-p".into())
            }
        );
        assert!(matches!(
            posted(json(409, r#"{"detail":"A task is already running"}"#)),
            Posted::Busy { detail } if detail == "A task is already running"
        ));
        assert!(matches!(
            posted(json(502, r#"{"detail":"Bad Gateway"}"#)),
            Posted::Unknown {
                http_status: Some(502),
                ..
            }
        ));
        assert!(matches!(
            posted(json(404, r#"{"detail":"Agent 'x' not found"}"#)),
            Posted::Rejected { http_status: 404, detail } if detail == "Agent 'x' not found"
        ));
        let html = Ok(Answer {
            status: 200,
            content_type: "text/html".into(),
            body: Ok("<html>".into()),
        });
        assert!(matches!(
            posted(html),
            Posted::Unknown {
                http_status: Some(200),
                ..
            }
        ));
        let refused = Err(Transport {
            nothing_sent: true,
            message: "refused".into(),
        });
        assert!(matches!(posted(refused), Posted::NotSent { .. }));
        let reset = Err(Transport {
            nothing_sent: false,
            message: "reset".into(),
        });
        assert!(matches!(
            posted(reset),
            Posted::Unknown {
                http_status: None,
                ..
            }
        ));
    }

    #[test]
    fn chats_are_found_by_the_whole_triple() {
        let list = json(
            200,
            r#"[{"id":"c1","session_id":"s-77","user_id":"alice","channel":"console","status":"running"},
                {"id":"c2","session_id":"s-77","user_id":"bob","channel":"discord","status":"idle",
                 "archived_at":"2026-12-07T01:44:51.321574Z","archived":true},
                {"id":"c3"}]"#,
        );
        let listed = chats(list).unwrap();
        assert_eq!(listed.len(), 2, "entries without the fields are skipped");
        let found = find(&listed, "s-77", "alice", "console").unwrap();
        assert_eq!((found.id.as_str(), found.running), ("c1", true));
        // QwenPaw 2.2.2's own fields for a chat a person archived.
        assert_eq!((found.archived, listed[1].archived), (false, true));
        assert!(find(&listed, "s-77", "alice", "discord").is_none());
        assert!(find(&listed, "s-78", "alice", "console").is_none());
        assert_eq!(listed[1].describe(), "user bob on discord");
        assert_eq!(
            chats(json(401, r#"{"detail":"Not authenticated"}"#)),
            Err(Unusable::Unknown("HTTP 401: Not authenticated".into()))
        );
        assert_eq!(
            chats(json(404, r#"{"detail":"Agent 'x' not found"}"#)),
            Err(Unusable::Refused("HTTP 404: Agent 'x' not found".into()))
        );
        assert!(matches!(
            chats(json(404, r#"{"detail":"Not Found"}"#)),
            Err(Unusable::Unknown(_))
        ));
        assert_eq!(
            chats(json(500, r#"{"detail":"Model 'm' not found"}"#)),
            Err(Unusable::Unknown("HTTP 500: Model 'm' not found".into())),
            "only a 404 names an agent the server does not have"
        );
        assert!(chats(json(200, "{}")).is_err());
    }

    #[test]
    fn forwards_and_channel_health() {
        assert_eq!(
            forwarded(json(
                200,
                r#"{"success":true,"message":"Message sent successfully to mqtt"}"#
            )),
            Sent::Accepted
        );
        assert!(matches!(
            forwarded(json(200, r#"{"success":false,"message":"x"}"#)),
            Sent::Failed {
                http_status: Some(200),
                ..
            }
        ));
        assert_eq!(
            forwarded(json(404, r#"{"detail":"Channel not found: dingtalk"}"#)),
            Sent::Rejected {
                http_status: 404,
                detail: "Channel not found: dingtalk".into()
            }
        );
        assert!(matches!(
            forwarded(json(500, r#"{"detail":"Failed to send message: boom"}"#)),
            Sent::Failed { http_status: Some(500), detail } if detail.contains("Failed to send message: boom")
        ));
        let reset = Err(Transport {
            nothing_sent: false,
            message: "reset".into(),
        });
        assert_eq!(
            forwarded(reset),
            Sent::Unknown {
                error: "reset".into()
            }
        );
        let refused = Err(Transport {
            nothing_sent: true,
            message: "refused".into(),
        });
        assert!(matches!(
            forwarded(refused),
            Sent::Failed {
                http_status: None,
                ..
            }
        ));

        assert_eq!(
            health(json(
                200,
                r#"{"channel":"mqtt","status":"healthy","detail":"MQTT connected"}"#
            )),
            Health::Healthy
        );
        assert_eq!(
            health(json(
                200,
                r#"{"channel":"mqtt","status":"unhealthy","detail":"MQTT client is not connected to broker."}"#
            )),
            Health::Unhealthy {
                detail: "MQTT client is not connected to broker.".into()
            }
        );
        assert!(matches!(
            health(json(404, r#"{"detail":"Channel 'x' not available"}"#)),
            Health::Missing { .. }
        ));
        assert!(matches!(health(json(500, "{}")), Health::Unknown { .. }));
    }

    #[test]
    fn chat_status_and_read_back() {
        assert_eq!(running(json(200, r#"{"status":"running"}"#)), Ok(true));
        assert_eq!(running(json(200, r#"{"status":"idle"}"#)), Ok(false));
        assert!(running(json(500, r#"{"detail":"x"}"#)).is_err());

        let history = r#"{"status":"idle","messages":[
            {"role":"user","type":"message","content":[{"type":"text","text":"hello"}],"metadata":{"original_name":"user","metadata":{"qwenpaw_client_message_id":"other"}}},
            {"role":"user","type":"message","content":[{"type":"text","text":"T"}],"metadata":{"original_name":"user","metadata":{"qwenpaw_client_message_id":"atc-j1","qwenpaw_turn_state":{"status":"completed"}}}},
            {"role":"assistant","type":"message","content":[{"type":"text","text":"ok"}]}]}"#;
        assert_eq!(
            read_back(json(200, history), "atc-j1"),
            Ok(ReadBack::Found {
                turn: Some("completed".into())
            })
        );
        assert_eq!(
            read_back(json(200, history), "atc-j2"),
            Ok(ReadBack::Absent { running: false })
        );
        assert_eq!(
            read_back(json(200, r#"{"status":"running","messages":[]}"#), "atc-j1"),
            Ok(ReadBack::Absent { running: true })
        );
        assert_eq!(
            read_back(json(404, r#"{"detail":"Chat not found: c9"}"#), "atc-j1"),
            Ok(ReadBack::NoChat)
        );
        assert_eq!(
            read_back(json(404, r#"{"detail":"Not Found"}"#), "atc-j1"),
            Err("HTTP 404: Not Found".into()),
            "a route the server does not have is not a chat it lost"
        );
        assert!(read_back(json(200, r#"{"status":"idle"}"#), "atc-j1").is_err());
        let html = Ok(Answer {
            status: 200,
            content_type: "text/html".into(),
            body: Ok("<html>".into()),
        });
        assert!(
            read_back(html, "atc-j1")
                .unwrap_err()
                .contains("instead of JSON")
        );
    }
}
