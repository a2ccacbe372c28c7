//! The harness's own view of a QwenPaw server: submit turns, read task records and
//! read chats back (contract §3, §4, §6). Independent of atc's HTTP code on purpose.

use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::R;

pub struct Api {
    agent: ureq::Agent,
    /// `http://127.0.0.1:<port>` (no `/api`).
    pub root: String,
    pub token: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub content_type: String,
    pub body: String,
}

impl Resp {
    pub fn json(&self) -> R<Value> {
        serde_json::from_str(&self.body)
            .map_err(|e| format!("not JSON ({e}): HTTP {} {:?}", self.status, self.body))
    }

    /// Checks that the answer's HTTP status is `want`; `what` names the request.
    pub fn expect(&self, want: u16, what: &str) -> R<()> {
        if self.status != want {
            return Err(format!("{what}: HTTP {} {}", self.status, self.body));
        }
        Ok(())
    }
}

/// One stored chat message, flattened to what the scenarios check.
#[derive(Debug, Clone)]
pub struct Msg {
    pub role: String,
    pub kind: String,
    pub text: String,
    pub raw: Value,
}

impl Msg {
    /// `metadata.metadata.<key>` of a stored user message (contract §6).
    pub fn inner_meta(&self, key: &str) -> Option<&Value> {
        self.raw.get("metadata")?.get("metadata")?.get(key)
    }

    /// The delivery id atc stamped on a stored user turn (`qwenpaw_client_message_id`).
    pub fn delivery_id(&self) -> Option<&str> {
        self.inner_meta("qwenpaw_client_message_id")?.as_str()
    }
}

/// The user turns of `msgs` that carry `task`'s result (its `[TASK_ID: …]` line).
pub fn carrying<'a>(msgs: &'a [Msg], task: &str) -> Vec<&'a Msg> {
    let marker = format!("[TASK_ID: {task}]");
    msgs.iter()
        .filter(|m| m.role == "user" && m.text.contains(&marker))
        .collect()
}

/// The text parts of a message's `content`, one per line.
pub fn text_of(content: &Value) -> String {
    content
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter(|p| p["type"] == "text")
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// The text of the last output message of a finished task's record.
pub fn answer_of(payload: &Value) -> String {
    payload["result"]["output"]
        .as_array()
        .and_then(|o| o.last())
        .map(|m| text_of(&m["content"]))
        .unwrap_or_default()
}

fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Api {
    pub fn new(root: &str, token: Option<String>) -> Api {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        Api {
            agent,
            root: root.trim_end_matches('/').to_string(),
            token,
        }
    }

    pub fn with_token(&self, token: Option<String>) -> Api {
        Api::new(&self.root, token)
    }

    fn finish(
        &self,
        result: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
        what: &str,
    ) -> R<Resp> {
        let mut resp = result.map_err(|e| format!("{what}: {e}"))?;
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let body = resp
            .body_mut()
            .read_to_string()
            .map_err(|e| format!("{what}: reading body: {e}"))?;
        Ok(Resp {
            status,
            content_type,
            body,
        })
    }

    /// `req` with the agent's header (when `agent` is given) and the runtime token's.
    fn headers<B>(
        &self,
        mut req: ureq::RequestBuilder<B>,
        agent: Option<&str>,
    ) -> ureq::RequestBuilder<B> {
        if let Some(a) = agent {
            req = req.header("X-Agent-Id", a);
        }
        if let Some(t) = &self.token {
            req = req.header("X-QwenPaw-Runtime-Token", t);
        }
        req
    }

    /// GET `<root><path>` (path starts with `/api/`).
    pub fn get(&self, path: &str, agent: Option<&str>) -> R<Resp> {
        let url = format!("{}{path}", self.root);
        let req = self.headers(self.agent.get(&url), agent);
        self.finish(req.call(), &format!("GET {url}"))
    }

    pub fn post(&self, path: &str, agent: Option<&str>, body: &Value) -> R<Resp> {
        let url = format!("{}{path}", self.root);
        let req = self.headers(self.agent.post(&url), agent);
        let req = req.header("Content-Type", "application/json");
        self.finish(req.send(body.to_string()), &format!("POST {url}"))
    }

    /// DELETE `<root><path>` (a chat: `/api/chats/<uuid>`, with the agent's header).
    pub fn delete(&self, path: &str, agent: Option<&str>) -> R<Resp> {
        let url = format!("{}{path}", self.root);
        let req = self.headers(self.agent.delete(&url), agent);
        self.finish(req.call(), &format!("DELETE {url}"))
    }

    pub fn submit_body(session: &str, user: &str, text: &str, timeout: Option<u64>) -> Value {
        let mut body = json!({
            "session_id": session, "user_id": user, "channel": "console",
            "input": [{"role": "user", "content": [{"type": "text", "text": text}]}],
        });
        if let Some(t) = timeout {
            body["timeout"] = json!(t);
        }
        body
    }

    /// POST a turn; returns the raw 200 response (the caller reads `task_id`).
    pub fn submit_raw(
        &self,
        agent: Option<&str>,
        session: &str,
        user: &str,
        text: &str,
        timeout: Option<u64>,
    ) -> R<Resp> {
        self.post(
            "/api/console/chat/task",
            agent,
            &Api::submit_body(session, user, text, timeout),
        )
    }

    pub fn submit(
        &self,
        agent: Option<&str>,
        session: &str,
        user: &str,
        text: &str,
        timeout: Option<u64>,
    ) -> R<String> {
        let resp = self.submit_raw(agent, session, user, text, timeout)?;
        resp.expect(200, &format!("submit to {session}"))?;
        let v = resp.json()?;
        v["task_id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("submit to {session}: no task_id in {}", resp.body))
    }

    pub fn task(&self, task_id: &str) -> R<Resp> {
        self.get(&format!("/api/console/chat/task/{}", enc(task_id)), None)
    }

    /// Polls until the task record says `finished`; returns (parsed, raw body).
    pub fn wait_finished(&self, task_id: &str, timeout: Duration) -> R<(Value, String)> {
        let deadline = Instant::now() + timeout;
        loop {
            let resp = self.task(task_id)?;
            resp.expect(200, &format!("GET task {task_id}"))?;
            let v = resp.json()?;
            if v["status"] == "finished" {
                return Ok((v, resp.body));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "task {task_id} not finished after {timeout:?}: {}",
                    resp.body
                ));
            }
            sleep(Duration::from_millis(100));
        }
    }

    /// The chats of (user, channel) for an agent (contract §6).
    pub fn chats(&self, agent: &str, user: &str) -> R<Vec<Value>> {
        let resp = self.get(
            &format!("/api/chats?user_id={}&channel=console", enc(user)),
            Some(agent),
        )?;
        resp.expect(200, "GET chats")?;
        match resp.json()? {
            Value::Array(list) => Ok(list),
            other => Err(format!("GET chats: not a list: {other}")),
        }
    }

    /// The uuid of the chat with exactly this (session, user, console) triple.
    pub fn chat_id(&self, agent: &str, user: &str, session: &str) -> R<Option<String>> {
        let chats = self.chats(agent, user)?;
        let ids: Vec<String> = chats
            .iter()
            .filter(|c| {
                c["session_id"] == session && c["user_id"] == user && c["channel"] == "console"
            })
            .filter_map(|c| c["id"].as_str().map(str::to_string))
            .collect();
        match ids.len() {
            0 => Ok(None),
            1 => Ok(Some(ids[0].clone())),
            n => Err(format!("{n} chats for session {session} (user {user})")),
        }
    }

    /// (messages, status) of one chat.
    pub fn chat(&self, chat_id: &str) -> R<(Vec<Msg>, String)> {
        let resp = self.get(&format!("/api/chats/{}", enc(chat_id)), None)?;
        resp.expect(200, &format!("GET chat {chat_id}"))?;
        let v = resp.json()?;
        let msgs = v["messages"]
            .as_array()
            .ok_or_else(|| format!("GET chat {chat_id}: no messages: {}", resp.body))?
            .iter()
            .map(|m| Msg {
                role: m["role"].as_str().unwrap_or("").to_string(),
                kind: m["type"].as_str().unwrap_or("").to_string(),
                text: text_of(&m["content"]),
                raw: m.clone(),
            })
            .collect();
        Ok((msgs, v["status"].as_str().unwrap_or("").to_string()))
    }

    /// The history of a session once its chat is idle (empty when no such chat).
    pub fn history(
        &self,
        agent: &str,
        user: &str,
        session: &str,
        timeout: Duration,
    ) -> R<Vec<Msg>> {
        let deadline = Instant::now() + timeout;
        let Some(id) = self.chat_id(agent, user, session)? else {
            return Ok(Vec::new());
        };
        loop {
            let (msgs, status) = self.chat(&id)?;
            if status != "running" {
                return Ok(msgs);
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "chat of session {session} still running after {timeout:?}"
                ));
            }
            sleep(Duration::from_millis(100));
        }
    }

    /// How many user turns of the chat of (`user`, `session`) on `default` carry `task`'s
    /// result (none when there is no such chat).
    pub fn results_in(&self, user: &str, session: &str, task: &str) -> R<usize> {
        let Some(chat) = self.chat_id("default", user, session)? else {
            return Ok(0);
        };
        Ok(carrying(&self.chat(&chat)?.0, task).len())
    }

    /// [`Api::make_parent`], then the new parent chat's id.
    pub fn parent_chat(&self, agent: &str, user: &str, session: &str) -> R<String> {
        self.make_parent(agent, user, session)?;
        self.chat_id(agent, user, session)?
            .ok_or_else(|| format!("no parent chat {session}"))
    }

    /// Posts a first turn into a new parent chat and waits until it is idle.
    pub fn make_parent(&self, agent: &str, user: &str, session: &str) -> R<Vec<Msg>> {
        let tid = self.submit(
            Some(agent),
            session,
            user,
            &format!("hello from parent {session}"),
            None,
        )?;
        self.wait_finished(&tid, Duration::from_secs(60))?;
        let msgs = self.history(agent, user, session, Duration::from_secs(30))?;
        if msgs.len() < 2 {
            return Err(format!(
                "parent {session}: expected a user turn and a reply, got {msgs:?}"
            ));
        }
        Ok(msgs)
    }
}
