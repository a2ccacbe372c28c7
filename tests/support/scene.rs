//! A test scene: a hermetic atc environment wired to a fake QwenPaw whose chats
//! (`support::chats`) hold the parent chats the scene's watches name.

use std::ffi::OsString;

use serde_json::Value;

use super::atc::{Run, TestEnv};
use super::chats::Chats;
use super::fake::{FakeQwenPaw, Recorded, Reply};

pub struct Scene {
    pub env: TestEnv,
    pub server: FakeQwenPaw,
    pub chats: Chats,
    /// `watch`'s task checks each task got (its GETs that were no tick's poll).
    checks: std::sync::Mutex<std::collections::HashMap<String, usize>>,
}

impl Default for Scene {
    fn default() -> Self {
        Self::new()
    }
}

impl Scene {
    pub fn new() -> Scene {
        let server = FakeQwenPaw::start();
        let chats = Chats::install(&server);
        Scene {
            env: TestEnv::new(),
            server,
            chats,
            checks: Default::default(),
        }
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

    /// Adds a parent chat of agent `default`; returns its id.
    pub fn add_chat(&self, session: &str, user: &str, channel: &str) -> String {
        self.chats.add("default", session, user, channel)
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
        self.chats.add(
            &value("--agent", "default"),
            &value("--session", "s-77"),
            &value("--user", "default"),
            &value("--channel", "console"),
        );
        let mut args = vec!["watch", task_id];
        if !extra.contains(&"--session") {
            args.extend(["--session", "s-77"]);
        }
        args.extend_from_slice(extra);
        let out = self.checked(&[task_id], || self.atc(args).stdout_inspected().run());
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            ["Watching ", "Already watching ", "Re-targeted "]
                .iter()
                .any(|start| said.starts_with(start)),
            "watch said {said:?}"
        );
    }

    /// Runs `watch` (in `run`), the server knowing each of `task_ids` as a running task for
    /// its task check (whatever the test scripted for the ticks' polls, which that check
    /// leaves alone); `polls` does not count the checks.
    pub fn checked<T>(&self, task_ids: &[&str], run: impl FnOnce() -> T) -> T {
        for task_id in task_ids {
            self.server.once(
                "GET",
                &Self::task_path(task_id),
                Reply::json(200, super::bodies::RUNNING),
            );
        }
        let out = run();
        for task_id in task_ids {
            if self.server.unused_once("GET", &Self::task_path(task_id)) == 0 {
                *self
                    .checks
                    .lock()
                    .unwrap()
                    .entry((*task_id).to_owned())
                    .or_default() += 1;
            }
        }
        out
    }

    /// The fake answers doctor's questions (version, health, agents) as a healthy 2.2.2
    /// server does.
    pub fn healthy(&self) {
        use super::bodies;
        for (path, body) in [
            ("/api/version", bodies::VERSION),
            ("/api/healthz", bodies::HEALTH_OK),
            ("/api/agents", bodies::AGENTS),
        ] {
            self.server.answer("GET", path, 200, body);
        }
    }

    /// Scripts the GET replies for a task.
    pub fn poll_replies(&self, task_id: &str, replies: Vec<Reply>) {
        self.server.on("GET", &Self::task_path(task_id), replies);
    }

    /// Scripts the delivery POST replies (instead of the chats' own answers: nothing is
    /// stored then).
    pub fn post_replies(&self, replies: Vec<Reply>) {
        self.server.on("POST", "/api/console/chat/task", replies);
    }

    /// The texts atc delivered into the chat of `session`, as the fake stored them.
    pub fn delivered(&self, session: &str) -> Vec<String> {
        self.chats.delivered(session)
    }

    /// Starts `atc tick ARGS…` in the background and returns once its delivery POST has
    /// reached the fake (which holds the answer back as scripted).
    pub fn tick_until_posted(&self, args: &[&str]) -> super::atc::Running<'_> {
        let tick = self.tick(args).spawn();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while self.posts().is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "the POST never arrived"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        tick
    }

    /// `atc tick ARGS…`: by default it must exit 0 and print nothing.
    pub fn tick(&self, args: &[&str]) -> Run<'_> {
        self.atc(std::iter::once("tick").chain(args.iter().copied()))
    }

    /// `n` plain ticks, each exiting 0: what they said on stderr, in order (the give-up
    /// lines a test counts).
    pub fn ticks_said(&self, n: usize) -> String {
        (0..n)
            .map(|_| {
                let out = self.tick(&[]).stderr_inspected().run();
                String::from_utf8_lossy(&out.stderr).into_owned()
            })
            .collect()
    }

    pub fn job(&self, task_id: &str) -> Value {
        self.env.job(task_id)
    }

    /// The turn that carries `task_id`'s block (`TestEnv::turn`).
    pub fn turn(&self, task_id: &str) -> Value {
        self.env.turn(task_id)
    }

    /// The tasks the turn of `task_id` carries, in its order.
    pub fn turn_tasks(&self, task_id: &str) -> Vec<String> {
        super::atc::carried_tasks(&self.turn(task_id))
    }

    /// `task_id`'s job gave up as `error`: its turn was refused, with an error that names
    /// `cause`.
    pub fn assert_refused(&self, task_id: &str, cause: &str) {
        assert_eq!(self.status(task_id), "error", "{}", self.job(task_id));
        let turn = self.turn(task_id);
        assert_eq!(turn["state"], "refused", "{turn}");
        let error = turn["delivery"]["error"].as_str().unwrap_or_default();
        assert!(error.contains(cause), "{turn}");
    }

    pub fn status(&self, task_id: &str) -> String {
        self.job(task_id)["status"].as_str().unwrap().to_owned()
    }

    /// The polls of `task_id` ticks made (not `watch`'s task checks).
    pub fn polls(&self, task_id: &str) -> usize {
        let checks = self
            .checks
            .lock()
            .unwrap()
            .get(task_id)
            .copied()
            .unwrap_or(0);
        self.server.hits("GET", &Self::task_path(task_id)) - checks
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
