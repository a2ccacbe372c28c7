//! A stateful stand-in for QwenPaw's chats on the fake server, with the behaviour the
//! contract (§3, §6) pins: chats are keyed by the exact (session, user, channel) of an
//! agent; a POST into a triple nobody has creates a new ("ghost") chat; a running chat
//! answers 409; a posted user turn is stored with its input metadata under
//! `metadata.metadata` and its turn state; `GET /api/chats/{id}` reads it all back. The
//! turn a POST starts is a task the parent can be followed by.
//!
//! Faults for the next POST (`fault`) let a test drop the connection after the turn was
//! stored, answer 500 after storing, and so on: what the exactly-once guarantee is about.
//!
//! IM channels (`channel`) answer their health and take `POST /api/messages/send`
//! (recorded per channel: what the person received); `reply` shapes the woken parent's
//! turn (a tool call before the final text, an empty final, a failed turn).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};

use super::bodies;
use super::fake::{FakeQwenPaw, Recorded, Reply, Wire};

/// What the next delivery POST suffers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PostFault {
    /// Store the turn, then close the connection without answering.
    DropAfterStore,
    /// Close the connection without storing or answering (the request did arrive).
    DropBeforeStore,
    /// Store the turn, then send the answer's head and only this many bytes of its body,
    /// and close.
    CutAfterStore(usize),
    /// Store the turn, then answer 500.
    Error500AfterStore,
    /// Answer 500 without storing anything.
    Error500,
    /// Store the turn, then wait this long before answering.
    SlowAfterStore(Duration),
    /// Answer 409 as if a turn were running.
    Busy,
    /// Answer 404 `Agent '…' not found`.
    UnknownAgent,
}

struct Chat {
    id: String,
    agent: String,
    session: String,
    user: String,
    channel: String,
    messages: Vec<Value>,
    /// Looks (list, status, history, POST) that still find it running.
    running_for: u32,
    /// Created by a POST, not by the test: a ghost.
    ghost: bool,
    /// A person archived it (listed with QwenPaw's `archived_at` and `archived`).
    archived: bool,
}

/// What the next `POST /api/messages/send` on a channel suffers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SendFault {
    /// 500 `Failed to send message: …` (nothing sent).
    Error500,
    /// Send it, then close the connection without answering.
    DropAfterSend,
}

/// An IM channel of the agent.
struct Channel {
    healthy: bool,
    /// What reached the person: (user, session, text).
    sent: Vec<(String, String, String)>,
    faults: VecDeque<SendFault>,
}

/// How the woken parent's next turn in a chat goes.
#[derive(Clone, Debug)]
pub enum ParentReply {
    /// `ECHO: <delivered text>`.
    Echo,
    /// Says "I will inspect…" with a tool call, gets the tool's output, then says `final`.
    ToolThenFinal(String),
    /// Completes with no answer at all.
    Empty,
    /// The turn fails.
    Fails,
}

#[derive(Default)]
struct Sim {
    chats: Vec<Chat>,
    faults: VecDeque<PostFault>,
    /// Parent turns started by POSTs: task id → its finished record.
    turns: HashMap<String, String>,
    channels: HashMap<String, Channel>,
    replies: HashMap<String, ParentReply>,
    /// The `chat_id` of every stop asked for, in order.
    stops: Vec<String>,
    next: u64,
    /// Every stored POST is answered this long after it was stored, at most (a slow
    /// server: the turn is in the chat while the tick still waits for the answer).
    latency: Option<(super::rng::Rng, u64)>,
}

impl Sim {
    fn running(chat: &mut Chat) -> bool {
        if chat.running_for > 0 {
            chat.running_for -= 1;
            true
        } else {
            false
        }
    }
}

/// The chats of a fake QwenPaw; cheap to clone (all clones share one state).
#[derive(Clone)]
pub struct Chats {
    sim: Arc<Mutex<Sim>>,
}

/// Percent-decodes a query value (and `+` as space).
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn query(request: &Recorded, key: &str) -> Option<String> {
    request.query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (decode(k) == key).then(|| decode(v))
    })
}

fn agent(request: &Recorded) -> String {
    request.header("x-agent-id").unwrap_or("default").to_owned()
}

fn chat_json(chat: &Chat, running: bool) -> Value {
    json!({"id": chat.id, "name": "New Chat", "session_id": chat.session, "user_id": chat.user,
           "channel": chat.channel, "status": if running { "running" } else { "idle" },
           "archived_at": chat.archived.then_some("2026-12-07T01:44:51.321574Z"),
           "archived": chat.archived})
}

impl Chats {
    /// Serves QwenPaw's chat routes, delivery POSTs and parent-turn polls on `server`.
    /// Exact scripts on the server still win (a test can script a child's polls, or the
    /// POST itself).
    pub fn install(server: &FakeQwenPaw) -> Chats {
        let chats = Chats {
            sim: Arc::new(Mutex::new(Sim::default())),
        };
        let c = chats.clone();
        server.handle("GET", "/api/chats", Arc::new(move |r| c.read(r)));
        let c = chats.clone();
        server.handle(
            "POST",
            "/api/console/chat/task",
            Arc::new(move |r| c.post(r)),
        );
        let c = chats.clone();
        server.handle(
            "GET",
            "/api/console/chat/task/",
            Arc::new(move |r| c.turn(r)),
        );
        let c = chats.clone();
        server.handle("POST", "/api/messages/send", Arc::new(move |r| c.send(r)));
        let c = chats.clone();
        server.handle(
            "POST",
            "/api/console/chat/stop",
            Arc::new(move |r| c.stop(r)),
        );
        let c = chats.clone();
        server.handle(
            "GET",
            "/api/config/channels/",
            Arc::new(move |r| c.health(r)),
        );
        // Like QwenPaw: the console channel is always there (a send to it is a toast).
        chats.channel("console", true);
        chats
    }

    /// Stores a user turn with delivery id `delivery_id` in the chat of agent `default`
    /// and `session`, as QwenPaw stores a POST it took (what an earlier tick posted).
    pub fn seed_turn(&self, session: &str, delivery_id: &str, text: &str) {
        let mut sim = self.lock();
        sim.next += 1;
        let n = sim.next;
        let chat = sim
            .chats
            .iter_mut()
            .find(|c| c.agent == "default" && c.session == session)
            .expect("a chat for the session");
        chat.messages.push(json!({"role": "user", "type": "message",
            "content": [{"type": "text", "text": text}],
            "metadata": {"original_id": format!("msg-{n}"), "original_name": "user",
                "metadata": {"qwenpaw_client_message_id": delivery_id,
                    "qwenpaw_tag": "external_user_query",
                    "qwenpaw_turn_state": {"status": "completed"}}},
            "timestamp": "2026-12-01 07:00:00.000"}));
    }

    /// From now on every stored delivery POST is answered up to `max` after it was stored
    /// (a random delay, from `seed`).
    pub fn post_latency(&self, max: Duration, seed: u64) {
        self.lock().latency = Some((super::rng::Rng::new(seed), max.as_millis() as u64));
    }

    /// Configures the agent's IM channel `name` (healthy or not).
    pub fn channel(&self, name: &str, healthy: bool) {
        let mut sim = self.lock();
        let channel = sim.channels.entry(name.to_owned()).or_insert(Channel {
            healthy,
            sent: Vec::new(),
            faults: VecDeque::new(),
        });
        channel.healthy = healthy;
    }

    /// The next send on channel `name` suffers `fault`.
    pub fn send_fault(&self, name: &str, fault: SendFault) {
        if let Some(channel) = self.lock().channels.get_mut(name) {
            channel.faults.push_back(fault);
        }
    }

    /// The texts the person received on channel `name`.
    pub fn received(&self, name: &str) -> Vec<String> {
        self.lock()
            .channels
            .get(name)
            .map(|c| c.sent.iter().map(|(_, _, text)| text.clone()).collect())
            .unwrap_or_default()
    }

    /// Every send on channel `name`: (user, session, text).
    pub fn sends(&self, name: &str) -> Vec<(String, String, String)> {
        self.lock()
            .channels
            .get(name)
            .map(|c| c.sent.clone())
            .unwrap_or_default()
    }

    /// The parent's turns in the chat of `session` go like `reply`.
    pub fn reply(&self, session: &str, reply: ParentReply) {
        self.lock().replies.insert(session.to_owned(), reply);
    }

    fn lock(&self) -> MutexGuard<'_, Sim> {
        self.sim.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a parent chat of `agent` (with one earlier exchange in it); returns its id.
    pub fn add(&self, agent: &str, session: &str, user: &str, channel: &str) -> String {
        let mut sim = self.lock();
        if let Some(chat) = sim.chats.iter().find(|c| {
            c.agent == agent && c.session == session && c.user == user && c.channel == channel
        }) {
            return chat.id.clone();
        }
        sim.next += 1;
        let id = format!("6f1c0e1a-0000-4000-8000-{:012}", sim.next);
        sim.chats.push(Chat {
            id: id.clone(),
            agent: agent.into(),
            session: session.into(),
            user: user.into(),
            channel: channel.into(),
            messages: vec![
                json!({"role": "user", "type": "message", "content": [{"type": "text", "text": "hello"}]}),
                json!({"role": "assistant", "type": "message", "content": [{"type": "text", "text": "ECHO: hello"}]}),
            ],
            running_for: 0,
            ghost: false,
            archived: false,
        });
        id
    }

    /// Adds a child's chat of `agent` (session `session`, user `default`, on `console`)
    /// with a turn running until it is stopped; returns its id.
    pub fn add_child(&self, agent: &str, session: &str) -> String {
        let id = self.add(agent, session, "default", "console");
        if let Some(chat) = self.lock().chats.iter_mut().find(|c| c.id == id) {
            chat.running_for = u32::MAX;
        }
        id
    }

    /// The `chat_id` of every `POST /api/console/chat/stop`, in order.
    pub fn stops(&self) -> Vec<String> {
        self.lock().stops.clone()
    }

    /// `POST /api/console/chat/stop?chat_id=…` as QwenPaw 2.2.2 answers it (contract §12):
    /// a chat uuid finds any chat of the agent, a session id only one on `console`; 200
    /// `{"stopped":true}` when a turn was running there, `{"stopped":false}` otherwise
    /// (an unknown id too); 422 without `chat_id`.
    fn stop(&self, request: &Recorded) -> Option<Reply> {
        if request.path != "/api/console/chat/stop" {
            return None;
        }
        let Some(id) = query(request, "chat_id") else {
            return Some(Reply::json(422, bodies::STOP_NO_CHAT_ID_422));
        };
        let agent = agent(request);
        let mut sim = self.lock();
        sim.stops.push(id.clone());
        let chat = sim.chats.iter_mut().find(|c| {
            c.agent == agent && (c.id == id || (c.session == id && c.channel == "console"))
        });
        let stopped = match chat {
            Some(chat) if chat.running_for > 0 => {
                chat.running_for = 0;
                true
            }
            _ => false,
        };
        Some(Reply::json(
            200,
            if stopped {
                bodies::STOPPED
            } else {
                bodies::NOT_STOPPED
            },
        ))
    }

    /// The chat of `session` reports a running turn for its next `looks` looks.
    pub fn busy_for(&self, session: &str, looks: u32) {
        for chat in self
            .lock()
            .chats
            .iter_mut()
            .filter(|c| c.session == session)
        {
            chat.running_for = looks;
        }
    }

    /// The next POST suffers `fault` (queued: one per POST).
    pub fn fault(&self, fault: PostFault) {
        self.lock().faults.push_back(fault);
    }

    /// A person archives the chat of `session` (QwenPaw still posts into it).
    pub fn archive(&self, session: &str) {
        for chat in self
            .lock()
            .chats
            .iter_mut()
            .filter(|c| c.session == session)
        {
            chat.archived = true;
        }
    }

    /// Deletes the chat of `session`.
    pub fn delete(&self, session: &str) {
        self.lock().chats.retain(|c| c.session != session);
    }

    /// The texts of the user turns posted into the chat of `session` (by atc: those with
    /// a delivery id), in order.
    pub fn delivered(&self, session: &str) -> Vec<String> {
        let sim = self.lock();
        sim.chats
            .iter()
            .filter(|c| c.session == session && !c.ghost)
            .flat_map(|c| c.messages.iter())
            .filter(|m| {
                m["role"] == "user"
                    && m["metadata"]["metadata"]["qwenpaw_client_message_id"].is_string()
            })
            .map(|m| m["content"][0]["text"].as_str().unwrap_or("").to_owned())
            .collect()
    }

    /// Chats a POST created because nobody had its triple: (session, user, channel).
    pub fn ghosts(&self) -> Vec<(String, String, String)> {
        self.lock()
            .chats
            .iter()
            .filter(|c| c.ghost)
            .map(|c| (c.session.clone(), c.user.clone(), c.channel.clone()))
            .collect()
    }

    /// Answers a chat read (`GET /api/chats…`) from the simulated chats (for a test that
    /// wraps the route to act on the read).
    pub fn read(&self, request: &Recorded) -> Option<Reply> {
        let mut sim = self.lock();
        let agent = agent(request);
        let rest = request.path.strip_prefix("/api/chats")?;
        if rest.is_empty() {
            let (user, channel) = (query(request, "user_id"), query(request, "channel"));
            let listed: Vec<Value> = sim
                .chats
                .iter_mut()
                .filter(|c| {
                    c.agent == agent
                        && user.as_ref().is_none_or(|u| *u == c.user)
                        && channel.as_ref().is_none_or(|ch| *ch == c.channel)
                })
                .map(|c| {
                    let running = Sim::running(c);
                    chat_json(c, running)
                })
                .collect();
            return Some(Reply::json(200, &Value::Array(listed).to_string()));
        }
        let rest = rest.strip_prefix('/')?;
        let (id, status_only) = match rest.strip_suffix("/status") {
            Some(id) => (decode(id), true),
            None => (decode(rest), false),
        };
        let chat = sim
            .chats
            .iter_mut()
            .find(|c| c.id == id && c.agent == agent);
        Some(match (chat, status_only) {
            // QwenPaw's status route asks the task tracker only: any id is "idle".
            (None, true) => Reply::json(200, r#"{"status":"idle"}"#),
            (None, false) => Reply::json(404, &bodies::chat_not_found(&id)),
            (Some(chat), true) => {
                let running = Sim::running(chat);
                Reply::json(
                    200,
                    &json!({"status": if running { "running" } else { "idle" }}).to_string(),
                )
            }
            (Some(chat), false) => {
                let running = Sim::running(chat);
                Reply::json(
                    200,
                    &json!({"messages": chat.messages, "status": if running { "running" } else { "idle" }})
                        .to_string(),
                )
            }
        })
    }

    fn post(&self, request: &Recorded) -> Option<Reply> {
        let mut sim = self.lock();
        let body: Value = serde_json::from_str(&request.body).ok()?;
        let agent = agent(request);
        let fault = sim.faults.pop_front();
        match fault {
            Some(PostFault::Busy) => return Some(Reply::json(409, bodies::BUSY_409)),
            Some(PostFault::Error500) => {
                return Some(Reply::json(500, r#"{"detail":"Internal Server Error"}"#));
            }
            Some(PostFault::UnknownAgent) => {
                return Some(Reply::json(404, &bodies::unknown_agent(&agent)));
            }
            Some(PostFault::DropBeforeStore) => return Some(Reply::dropped()),
            _ => {}
        }
        let text = |key: &str| body[key].as_str().unwrap_or("default").to_owned();
        let (session, user, channel) = (text("session_id"), text("user_id"), text("channel"));
        sim.next += 1;
        let n = sim.next;
        let position = sim.chats.iter().position(|c| {
            c.agent == agent && c.session == session && c.user == user && c.channel == channel
        });
        let i = match position {
            Some(i) => i,
            None => {
                sim.chats.push(Chat {
                    id: format!("6f1c0e1a-0000-4000-9000-{n:012}"),
                    agent: agent.clone(),
                    session,
                    user,
                    channel,
                    messages: Vec::new(),
                    running_for: 0,
                    ghost: true,
                    archived: false,
                });
                sim.chats.len() - 1
            }
        };
        if Sim::running(&mut sim.chats[i]) {
            return Some(Reply::json(409, bodies::BUSY_409));
        }
        let input = &body["input"][0];
        let mut metadata = input["metadata"].clone();
        if !metadata.is_object() {
            metadata = json!({});
        }
        metadata["qwenpaw_tag"] = json!("external_user_query");
        metadata["qwenpaw_turn_state"] = json!({"status": "completed"});
        let said = input["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        let chat = &mut sim.chats[i];
        chat.messages.push(json!({"role": "user", "type": "message", "content": input["content"],
            "metadata": {"original_id": format!("msg-{n}"), "original_name": "user", "metadata": metadata},
            "timestamp": "2026-12-01 07:00:00.000"}));
        let session = chat.session.clone();
        let reply = sim
            .replies
            .get(&session)
            .cloned()
            .unwrap_or(ParentReply::Echo);
        let text_item = |text: &str| {
            json!({"type": "message", "role": "assistant",
                   "content": [{"type": "text", "text": text}]})
        };
        let (status, output) = match &reply {
            ParentReply::Echo => ("completed", vec![text_item(&format!("ECHO: {said}"))]),
            ParentReply::ToolThenFinal(last) => (
                "completed",
                vec![
                    text_item("I will inspect the result first."),
                    json!({"type": "plugin_call", "role": "assistant",
                           "content": [{"type": "data", "data": {"name": "execute_shell_command"}}]}),
                    json!({"type": "plugin_call_output", "role": "tool",
                           "content": [{"type": "data", "data": {"output": "inspected"}}]}),
                    text_item(last),
                ],
            ),
            ParentReply::Empty => ("completed", vec![]),
            ParentReply::Fails => ("failed", vec![]),
        };
        sim.chats[i].messages.extend(output.iter().cloned());
        let turn = format!("task-{n:012x}");
        let finished = json!({"status": "finished", "started_at": 1796003454.67,
            "result": {"status": status, "session_id": session, "output": output}});
        sim.turns.insert(turn.clone(), finished.to_string());
        let mut ok = Reply::json(200, &json!({"task_id": turn, "timeout": 3600}).to_string());
        if let Some((rng, max)) = sim.latency.as_mut() {
            let ms = rng.below(*max as usize + 1) as u64;
            ok = ok.with_delay(Duration::from_millis(ms));
        }
        Some(match fault {
            Some(PostFault::DropAfterStore) => Reply::dropped(),
            Some(PostFault::Error500AfterStore) => {
                Reply::json(500, r#"{"detail":"Internal Server Error"}"#)
            }
            Some(PostFault::SlowAfterStore(delay)) => ok.with_delay(delay),
            Some(PostFault::CutAfterStore(n)) => ok.on_wire(Wire::Cut(n)),
            _ => ok,
        })
    }

    fn send(&self, request: &Recorded) -> Option<Reply> {
        let body: Value = serde_json::from_str(&request.body).ok()?;
        let field = |key: &str| body[key].as_str().unwrap_or("").to_owned();
        let name = field("channel");
        let mut sim = self.lock();
        let Some(channel) = sim.channels.get_mut(&name) else {
            return Some(Reply::json(
                404,
                &json!({"detail": format!("Channel not found: {name}")}).to_string(),
            ));
        };
        let fault = channel.faults.pop_front();
        if fault == Some(SendFault::Error500) {
            return Some(Reply::json(
                500,
                r#"{"detail":"Failed to send message: broker said no"}"#,
            ));
        }
        // Like QwenPaw: an unhealthy channel still answers 200 and sends nothing.
        if channel.healthy {
            channel
                .sent
                .push((field("target_user"), field("target_session"), field("text")));
        }
        Some(match fault {
            Some(SendFault::DropAfterSend) => Reply::dropped(),
            _ => Reply::json(
                200,
                &json!({"success": true, "message": format!("Message sent successfully to {name}")})
                    .to_string(),
            ),
        })
    }

    fn health(&self, request: &Recorded) -> Option<Reply> {
        let name = request
            .path
            .strip_prefix("/api/config/channels/")?
            .strip_suffix("/health")?;
        let sim = self.lock();
        Some(match sim.channels.get(name) {
            None => Reply::json(
                404,
                &json!({"detail": format!("Channel '{name}' is not running. It may be disabled or not configured.")})
                    .to_string(),
            ),
            Some(c) if c.healthy => Reply::json(
                200,
                &json!({"channel": name, "status": "healthy", "detail": "connected"}).to_string(),
            ),
            Some(_) => Reply::json(
                200,
                &json!({"channel": name, "status": "unhealthy", "detail": "MQTT client is not connected to broker."})
                    .to_string(),
            ),
        })
    }

    fn turn(&self, request: &Recorded) -> Option<Reply> {
        let id = request.path.strip_prefix("/api/console/chat/task/")?;
        let sim = self.lock();
        sim.turns.get(id).map(|body| Reply::json(200, body))
    }
}
