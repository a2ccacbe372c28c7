//! What a poll of `GET /console/chat/task/{id}` answered, as a typed [`Poll`]: a
//! [`TaskRecord`], QwenPaw's "no such task", or why the answer is no use (a strike).
//!
//! Content type is judged before status: a wrong base URL can answer an HTML 404 page,
//! which must not park a live task as lost.

use serde_json::Value;

use super::{Answer, Transport, detail};
use crate::job::TaskOutcome;
use crate::settings::Auth;
use crate::time::Timestamp;

/// The task record QwenPaw keeps: its top-level status, when it started, and the whole
/// payload (rendering needs all of it).
#[derive(Clone, Debug, PartialEq)]
pub struct TaskRecord {
    pub status: String,
    pub started_at: Option<Timestamp>,
    pub payload: Value,
}

impl TaskRecord {
    /// 2.2 only ever answers `running` or `finished`; older servers also reported these
    /// top-level terminal states. Anything else is still on its way.
    pub fn is_finished(&self) -> bool {
        matches!(
            self.status.as_str(),
            "finished" | "failed" | "cancelled" | "timeout" | "error"
        )
    }

    /// How a finished task ended. Success is `result.status == "completed"` and nothing
    /// else; a failure is told apart by its error (contract §4, §10).
    pub fn outcome(&self) -> TaskOutcome {
        let result = self.payload.get("result");
        match self.status.as_str() {
            "finished" => match result.and_then(|r| r.get("status")).and_then(Value::as_str) {
                Some("completed") => TaskOutcome::Completed,
                Some("failed") => failure(result.and_then(|r| r.get("error"))),
                _ => TaskOutcome::Other,
            },
            "cancelled" => TaskOutcome::Cancelled,
            "timeout" => TaskOutcome::TimedOut,
            "failed" | "error" => TaskOutcome::Failed,
            _ => TaskOutcome::Other,
        }
    }

    /// The child's own session, as a completed record names it (`result.session_id`;
    /// failed, timed-out and cancelled results have none).
    pub fn child_session(&self) -> Option<&str> {
        self.payload.get("result")?.get("session_id")?.as_str()
    }

    /// `result.status` of a finished record (`completed`, `failed`…), if it has one.
    pub fn result_status(&self) -> Option<&str> {
        self.payload.get("result")?.get("status")?.as_str()
    }

    /// The turn's final tool-free answer (seed 003): the text of the assistant messages
    /// after its last tool call or tool output. An "I will inspect…" said together with a
    /// tool call belongs to that call's round and is never part of it. "" when the turn
    /// ended on a tool call, or said nothing.
    pub fn final_reply(&self) -> String {
        let Some(output) = self
            .payload
            .get("result")
            .and_then(|r| r.get("output"))
            .and_then(Value::as_array)
        else {
            return String::new();
        };
        let is_reply = |item: &Value| {
            item.get("type").and_then(Value::as_str) == Some("message")
                && item.get("role").and_then(Value::as_str) == Some("assistant")
        };
        let start = output
            .iter()
            .rposition(|item| !is_reply(item))
            .map_or(0, |i| i + 1);
        let texts: Vec<&str> = output[start..]
            .iter()
            .flat_map(|item| {
                item.get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
            })
            .filter(|part| part.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect();
        texts.join("\n").trim().to_owned()
    }
}

fn failure(error: Option<&Value>) -> TaskOutcome {
    let (message, code) = match error {
        Some(Value::Object(e)) => (
            e.get("message").and_then(Value::as_str).unwrap_or(""),
            e.get("code").and_then(Value::as_str).unwrap_or(""),
        ),
        Some(Value::String(message)) => (message.as_str(), ""),
        _ => ("", ""),
    };
    if message == "Failed to finalize fork worktree" {
        TaskOutcome::ForkNotFinalized
    } else if code == "timeout" || message.starts_with("Task timed out") {
        TaskOutcome::TimedOut
    } else if message == "Task cancelled" {
        TaskOutcome::Cancelled
    } else {
        TaskOutcome::Failed
    }
}

/// What one poll saw.
#[derive(Clone, Debug, PartialEq)]
pub enum Poll {
    Record(TaskRecord),
    /// A JSON 404 other than FastAPI's "no such route": the server has no record of the
    /// task.
    NotFound {
        detail: String,
    },
    /// No usable answer; `error` says what went wrong and what to suspect.
    Failed {
        error: String,
    },
    /// 401 or 403: the server refused the credentials. A strike for the tick (a token
    /// can be fixed while the watch waits); the end for `wait`.
    Denied {
        error: String,
    },
}

/// Classifies a poll of `task_id`. `base_url` is named when it is the likely culprit;
/// `auth` says which token hint fits a 401.
pub fn classify(
    result: Result<Answer, Transport>,
    task_id: &str,
    base_url: &str,
    auth: &Auth,
) -> Poll {
    let answer = match result {
        Ok(answer) => answer,
        Err(transport) => {
            return Poll::Failed {
                error: transport.message,
            };
        }
    };
    let status = answer.status;
    let body = match &answer.body {
        Ok(body) => body,
        Err(error) => {
            return Poll::Failed {
                error: format!("HTTP {status}: {error}"),
            };
        }
    };
    if !answer.is_json() {
        let shown = if answer.content_type.is_empty() {
            "no content type"
        } else {
            &answer.content_type
        };
        return Poll::Failed {
            error: format!(
                "HTTP {status} with {shown} instead of JSON: is the base URL {base_url} right? It must point at QwenPaw's /api"
            ),
        };
    }
    match status {
        200 => {}
        // Only QwenPaw's own answer for this id parks a job as lost. Any other 404 (FastAPI's
        // "no such route", a proxy, another service on that port) means the base URL is
        // wrong, and a live task must not be given up for it.
        404 if detail(body) == format!("Task not found: {task_id}") => {
            return Poll::NotFound {
                detail: detail(body),
            };
        }
        404 if detail(body) == "Not Found" => {
            return Poll::Failed {
                error: format!(
                    "HTTP 404 Not Found: no such route; is the base URL {base_url} right? It must point at QwenPaw's /api"
                ),
            };
        }
        404 => {
            return Poll::Failed {
                error: format!(
                    "HTTP 404 {}: not QwenPaw's answer for this task; is the base URL {base_url} right? It must point at QwenPaw's /api",
                    detail(body)
                ),
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
            return Poll::Denied {
                error: format!("HTTP {status} {}: {hint}", detail(body)),
            };
        }
        _ => {
            return Poll::Failed {
                error: format!("HTTP {status}: {}", detail(body)),
            };
        }
    }
    let payload: Value = match serde_json::from_str(body) {
        Ok(value @ Value::Object(_)) => value,
        Ok(_) => {
            return Poll::Failed {
                error: "HTTP 200 but the body is not a JSON object".to_owned(),
            };
        }
        // Broken, truncated, or nested deeper than serde_json's recursion limit.
        Err(err) => {
            return Poll::Failed {
                error: format!("HTTP 200 but the body is not valid JSON ({err})"),
            };
        }
    };
    let started_at = payload
        .get("started_at")
        .and_then(Value::as_f64)
        .and_then(Timestamp::from_unix_f64);
    match payload.get("status").and_then(Value::as_str) {
        Some(status) => Poll::Record(TaskRecord {
            status: status.to_owned(),
            started_at,
            payload,
        }),
        None => Poll::Failed {
            error: "HTTP 200 but the body has no \"status\"".to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "http://h/api";

    fn answer(status: u16, content_type: &str, body: &str) -> Result<Answer, Transport> {
        Ok(Answer {
            status,
            content_type: content_type.into(),
            body: Ok(body.into()),
        })
    }

    fn json(status: u16, body: &str) -> Result<Answer, Transport> {
        answer(status, "application/json", body)
    }

    fn classify(result: Result<Answer, Transport>, base: &str, auth: &Auth) -> Poll {
        super::classify(result, "task-1", base, auth)
    }

    fn record(body: &str) -> TaskRecord {
        match classify(json(200, body), BASE, &Auth::default()) {
            Poll::Record(record) => record,
            other => panic!("{other:?}"),
        }
    }

    fn failed(poll: Poll) -> String {
        match poll {
            Poll::Failed { error } | Poll::Denied { error } => error,
            other => panic!("not a failed check: {other:?}"),
        }
    }

    #[test]
    fn records_carry_status_start_and_payload() {
        let poll = classify(
            json(200, r#"{"status":"running","started_at":1796003454.67}"#),
            BASE,
            &Auth::default(),
        );
        let Poll::Record(record) = poll else {
            panic!("{poll:?}")
        };
        assert_eq!(record.status, "running");
        assert!(!record.is_finished());
        assert_eq!(record.started_at, Some(Timestamp::from_unix(1796003454)));
        for status in ["finished", "failed", "cancelled", "timeout", "error"] {
            let body = format!(r#"{{"status":"{status}"}}"#);
            let Poll::Record(record) = classify(json(200, &body), BASE, &Auth::default()) else {
                panic!("{status}")
            };
            assert!(record.is_finished(), "{status}");
        }
    }

    #[test]
    fn only_a_task_404_is_not_found() {
        assert_eq!(
            classify(
                json(404, r#"{"detail":"Task not found: task-1"}"#),
                BASE,
                &Auth::default()
            ),
            Poll::NotFound {
                detail: "Task not found: task-1".into()
            }
        );
        let route = failed(classify(
            json(404, r#"{"detail":"Not Found"}"#),
            BASE,
            &Auth::default(),
        ));
        assert!(
            route.contains("no such route") && route.contains(BASE),
            "{route}"
        );
        let html = failed(classify(
            answer(404, "text/html", "<html>"),
            BASE,
            &Auth::default(),
        ));
        assert!(
            html.contains("instead of JSON") && html.contains(BASE),
            "{html}"
        );
        for other in [
            r#"{"detail":"Task not found: task-2"}"#,
            r#"{"detail":"Chat not found: x"}"#,
            r#"{"error":"no such thing"}"#,
        ] {
            let strike = failed(classify(json(404, other), BASE, &Auth::default()));
            assert!(
                strike.contains("not QwenPaw's answer for this task") && strike.contains(BASE),
                "{strike}"
            );
        }
    }

    #[test]
    fn outcomes_tell_finished_from_succeeded() {
        let finished =
            |result: &str| record(&format!(r#"{{"status":"finished","result":{result}}}"#));
        assert_eq!(
            finished(r#"{"status":"completed","output":[]}"#).outcome(),
            TaskOutcome::Completed
        );
        for (result, want) in [
            (
                r#"{"status":"failed","error":{"message":"Task timed out after 1s","code":"timeout"}}"#,
                TaskOutcome::TimedOut,
            ),
            (
                r#"{"status":"failed","error":{"message":"Task cancelled"}}"#,
                TaskOutcome::Cancelled,
            ),
            (
                r#"{"status":"failed","error":{"message":"Failed to finalize fork worktree"}}"#,
                TaskOutcome::ForkNotFinalized,
            ),
            (
                r#"{"status":"failed","error":{"code":"MODEL_EXECUTION_ERROR","message":"boom"}}"#,
                TaskOutcome::Failed,
            ),
            (
                r#"{"status":"failed","error":"Rate limit exceeded"}"#,
                TaskOutcome::Failed,
            ),
            (
                r#"{"status":"failed","error":"Task timed out after 600s"}"#,
                TaskOutcome::TimedOut,
            ),
            (
                r#"{"status":"failed","error":{"message":"boom","code":"timeout"}}"#,
                TaskOutcome::TimedOut,
            ),
            (r#"{"status":"weird"}"#, TaskOutcome::Other),
        ] {
            assert_eq!(finished(result).outcome(), want, "{result}");
        }
        for (status, want) in [
            ("cancelled", TaskOutcome::Cancelled),
            ("timeout", TaskOutcome::TimedOut),
            ("failed", TaskOutcome::Failed),
            ("error", TaskOutcome::Failed),
        ] {
            let record = record(&format!(r#"{{"status":"{status}"}}"#));
            assert_eq!(record.outcome(), want, "{status}");
        }
        assert_eq!(
            finished(r#"{"status":"completed","session_id":"child-1","output":[]}"#)
                .child_session(),
            Some("child-1")
        );
        assert_eq!(
            finished(r#"{"status":"failed","error":{"message":"boom"}}"#).child_session(),
            None
        );
        let answer = finished(
            r#"{"status":"completed","output":[{"content":[{"type":"text","text":"  hi \n"}]}]}"#,
        );
        let turn = finished(
            r#"{"status":"completed","output":[
                {"type":"message","role":"assistant","content":[{"type":"text","text":"I will inspect."}]},
                {"type":"plugin_call","role":"assistant","content":[{"type":"data","data":{"name":"x"}}]},
                {"type":"plugin_call_output","role":"tool","content":[{"type":"text","text":"RAW"}]},
                {"type":"message","role":"assistant","content":[{"type":"text","text":"FINAL"},{"type":"text","text":"two"}]}]}"#,
        );
        assert_eq!(
            turn.final_reply(),
            "FINAL\ntwo",
            "only what came after the last tool"
        );
        let ends_on_a_call = finished(
            r#"{"status":"completed","output":[
                {"type":"message","role":"assistant","content":[{"type":"text","text":"I will inspect."}]},
                {"type":"plugin_call","role":"assistant","content":[]}]}"#,
        );
        assert_eq!(ends_on_a_call.final_reply(), "");
        assert_eq!(
            finished(r#"{"status":"completed","output":[]}"#).final_reply(),
            ""
        );
        assert_eq!(answer.result_status(), Some("completed"));
    }

    #[test]
    fn other_answers_are_strikes_that_say_why() {
        let auth = Auth::default();
        let unauthorized = failed(classify(
            json(401, r#"{"detail":"Invalid runtime boundary token"}"#),
            BASE,
            &auth,
        ));
        assert_eq!(
            unauthorized,
            "HTTP 401 Invalid runtime boundary token: set QWENPAW_RUNTIME_INTERNAL_TOKEN (runtime token) or ATC_BEARER_TOKEN (web login) in atc tick's environment"
        );
        assert_eq!(
            failed(classify(
                json(403, r#"{"detail":"Forbidden"}"#),
                BASE,
                &auth
            )),
            "HTTP 403 Forbidden: the agent may be disabled, or the token lacks access",
            "a 403 is not for want of a token"
        );
        let with_token = Auth {
            runtime_token: Some("t".into()),
            ..Auth::default()
        };
        assert!(failed(classify(json(401, "{}"), BASE, &with_token)).contains("check"));
        assert!(failed(classify(json(503, r#"{"detail":"x"}"#), BASE, &auth)).contains("503: x"));
        assert!(failed(classify(json(200, "[]"), BASE, &auth)).contains("not a JSON object"));
        assert!(failed(classify(json(200, "{}"), BASE, &auth)).contains("no \"status\""));
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let too_deep = failed(classify(json(200, &deep), BASE, &auth));
        assert!(
            too_deep
                .starts_with("HTTP 200 but the body is not valid JSON (recursion limit exceeded"),
            "{too_deep}"
        );
        assert!(
            failed(classify(json(200, r#"{"status":"#), BASE, &auth))
                .contains("not valid JSON (EOF while parsing")
        );
        let unreadable = Ok(Answer {
            status: 200,
            content_type: "application/json".into(),
            body: Err("the answer is larger than 8 MiB".into()),
        });
        assert!(failed(classify(unreadable, BASE, &auth)).contains("8 MiB"));
        let refused = Err(Transport {
            nothing_sent: true,
            message: "GET x: connection refused".into(),
        });
        assert_eq!(
            failed(classify(refused, BASE, &auth)),
            "GET x: connection refused"
        );
    }
}
