//! A test scene: a hermetic atc environment wired to a fake QwenPaw that knows the parent
//! chats the scene's watches name (so `watch`'s chat check finds them).

use std::cell::RefCell;
use std::ffi::OsString;

use serde_json::{Value, json};

use super::atc::{Run, TestEnv};
use super::fake::{FakeQwenPaw, Recorded, Reply};

pub struct Scene {
    pub env: TestEnv,
    pub server: FakeQwenPaw,
    /// The parent chats `GET /api/chats` lists: (session, user, channel).
    chats: RefCell<Vec<(String, String, String)>>,
}

impl Default for Scene {
    fn default() -> Self {
        Self::new()
    }
}

impl Scene {
    pub fn new() -> Scene {
        let scene = Scene {
            env: TestEnv::new(),
            server: FakeQwenPaw::start(),
            chats: RefCell::new(Vec::new()),
        };
        scene.script_chats();
        scene
    }

    pub fn task_path(task_id: &str) -> String {
        format!("/api/console/chat/task/{task_id}")
    }

    /// `atc ARGS…` aimed at the fake (`ATC_BASE_URL`).
    pub fn atc<I, S>(&self, args: I) -> Run<'_>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.env.atc(args).env("ATC_BASE_URL", self.server.url())
    }

    /// Makes `GET /api/chats` list this chat too.
    pub fn add_chat(&self, session: &str, user: &str, channel: &str) {
        self.chats
            .borrow_mut()
            .push((session.into(), user.into(), channel.into()));
        self.script_chats();
    }

    fn script_chats(&self) {
        let chats: Vec<Value> = self
            .chats
            .borrow()
            .iter()
            .enumerate()
            .map(|(i, (session, user, channel))| {
                json!({"id": format!("6f1c0e1a-0000-4000-8000-{i:012}"), "session_id": session,
                       "user_id": user, "channel": channel, "status": "idle"})
            })
            .collect();
        self.server.on(
            "GET",
            "/api/chats",
            vec![Reply::json(200, &Value::Array(chats).to_string())],
        );
    }

    /// `atc watch TASK …extra` against the fake (session `s-77` unless `extra` names one),
    /// for a parent chat the fake knows: it must succeed, say so on stdout and nothing on
    /// stderr.
    pub fn watch(&self, task_id: &str, extra: &[&str]) {
        let value = |flag: &str, default: &str| {
            extra
                .iter()
                .position(|a| *a == flag)
                .map_or(default.to_owned(), |i| extra[i + 1].to_owned())
        };
        let (session, user, channel) = (
            value("--session", "s-77"),
            value("--user", "default"),
            value("--channel", "console"),
        );
        self.add_chat(&session, &user, &channel);
        let mut args = vec!["watch", task_id];
        if !extra.contains(&"--session") {
            args.extend(["--session", "s-77"]);
        }
        args.extend_from_slice(extra);
        let out = self.atc(args).stdout_inspected().run();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            ["Watching ", "Already watching ", "Re-targeted "]
                .iter()
                .any(|start| said.starts_with(start)),
            "watch said {said:?}"
        );
    }

    /// Scripts the GET replies for a task.
    pub fn poll_replies(&self, task_id: &str, replies: Vec<Reply>) {
        self.server.on("GET", &Self::task_path(task_id), replies);
    }

    /// Scripts the delivery POST replies.
    pub fn post_replies(&self, replies: Vec<Reply>) {
        self.server.on("POST", "/api/console/chat/task", replies);
    }

    /// `atc tick ARGS…`: by default it must exit 0 and print nothing.
    pub fn tick(&self, args: &[&str]) -> Run<'_> {
        self.atc(std::iter::once("tick").chain(args.iter().copied()))
    }

    pub fn job(&self, task_id: &str) -> Value {
        self.env.job(task_id)
    }

    pub fn status(&self, task_id: &str) -> String {
        self.job(task_id)["status"].as_str().unwrap().to_owned()
    }

    pub fn polls(&self, task_id: &str) -> usize {
        self.server.hits("GET", &Self::task_path(task_id))
    }

    pub fn posts(&self) -> Vec<Recorded> {
        self.server
            .requests()
            .into_iter()
            .filter(|r| r.method == "POST" && r.path == "/api/console/chat/task")
            .collect()
    }

    /// The text of a recorded delivery POST.
    pub fn posted_text(post: &Recorded) -> String {
        post.json()["input"][0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}
