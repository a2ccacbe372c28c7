//! The parent chat: the user turn a delivery posts (`POST /console/chat/task`), what the
//! server made of it, and whether the chat exists (`GET /chats`). Pure: the client does the
//! requests.

use std::time::Duration;

use serde_json::{Value, json};

use super::{Answer, Transport, detail};
use crate::job::Job;
use crate::lifecycle::Posted;

/// The delivery id QwenPaw keeps on the stored user message (`metadata`), so the turn can
/// be found again by reading the chat back.
pub fn client_message_id(job: &Job) -> String {
    format!("atc-{}", job.job_id)
}

/// The body of a delivery: `text` as a new user turn in the job's exact chat triple (any
/// other triple would silently start a new chat). `content` must be a list of parts: a
/// plain string is dropped by QwenPaw.
pub fn turn(job: &Job, text: &str, turn_timeout: Option<Duration>) -> Value {
    let mut body = json!({
        "session_id": job.target.session_id,
        "user_id": job.target.user_id,
        "channel": job.target.channel,
        "input": [{
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "metadata": {
                "qwenpaw_client_message_id": client_message_id(job),
                "atc_task_id": job.task_id,
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

/// Whether the chat list answered by `GET /chats?user_id=&channel=` holds the exact triple:
/// `Some(false)` means QwenPaw would silently start a new ("ghost") chat for it; `None`,
/// that the answer does not tell.
pub fn has_chat(
    result: Result<Answer, Transport>,
    session_id: &str,
    user_id: &str,
    channel: &str,
) -> Option<bool> {
    let answer = result.ok()?;
    if answer.status != 200 || !answer.is_json() {
        return None;
    }
    let chats: Value = serde_json::from_str(&answer.body.ok()?).ok()?;
    let field = |chat: &Value, key| chat.get(key).and_then(Value::as_str).map(str::to_owned);
    Some(chats.as_array()?.iter().any(|chat| {
        field(chat, "session_id").as_deref() == Some(session_id)
            && field(chat, "user_id").as_deref() == Some(user_id)
            && field(chat, "channel").as_deref() == Some(channel)
    }))
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
    fn a_chat_matches_on_the_whole_triple() {
        let chats = r#"[{"id":"c1","session_id":"s-77","user_id":"alice","channel":"console"}]"#;
        assert_eq!(
            has_chat(json(200, chats), "s-77", "alice", "console"),
            Some(true)
        );
        assert_eq!(
            has_chat(json(200, chats), "s-77", "bob", "console"),
            Some(false)
        );
        assert_eq!(
            has_chat(json(200, chats), "s-77", "alice", "discord"),
            Some(false)
        );
        assert_eq!(has_chat(json(401, "{}"), "s-77", "alice", "console"), None);
        assert_eq!(has_chat(json(200, "{}"), "s-77", "alice", "console"), None);
    }
}
