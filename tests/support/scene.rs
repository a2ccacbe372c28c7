//! A test scene: a hermetic atc environment wired to a fake QwenPaw.

use std::process::Output;

use serde_json::Value;

use super::atc::TestEnv;
use super::fake::{FakeQwenPaw, Recorded, Reply};

pub struct Scene {
    pub env: TestEnv,
    pub server: FakeQwenPaw,
}

impl Default for Scene {
    fn default() -> Self {
        Self::new()
    }
}

impl Scene {
    pub fn new() -> Scene {
        Scene {
            env: TestEnv::new(),
            server: FakeQwenPaw::start(),
        }
    }

    /// A loopback URL where nothing listens (connections are refused at once).
    pub fn dead_url() -> String {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", closed.local_addr().unwrap())
    }

    pub fn task_path(task_id: &str) -> String {
        format!("/api/console/chat/task/{task_id}")
    }

    /// `atc watch TASK …extra` against the fake (session `s-77` unless `extra` names one);
    /// must succeed.
    pub fn watch(&self, task_id: &str, extra: &[&str]) {
        let mut cmd = self.env.cmd();
        cmd.args(["--base-url", &self.server.url(), "watch", task_id]);
        if !extra.contains(&"--session") {
            cmd.args(["--session", "s-77"]);
        }
        let out = cmd.args(extra).output().unwrap();
        assert!(
            out.status.success(),
            "watch failed: {}",
            String::from_utf8_lossy(&out.stderr)
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

    /// Runs `atc tick ARGS`; asserts it exits 0 and returns its output.
    pub fn tick(&self, args: &[&str]) -> Output {
        let out = self.env.cmd().arg("tick").args(args).output().unwrap();
        assert!(
            out.status.success(),
            "tick failed ({:?}): {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        out
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
