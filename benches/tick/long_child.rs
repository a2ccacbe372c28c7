//! Case `long-child` (issue 38): one child running 30 minutes on a server whose atc plugin
//! is loaded, watched with its session known. The real pass (`atc::cmd::tick::passes` over
//! `atc::pass::run_with`, as `atc tick` runs it) against a fake QwenPaw inside this process
//! that counts the GETs of the child's task record, on a simulated clock: the plugin's
//! cadence ticks every 20 s, and at 30 minutes the child's turn ends and the plugin kicks
//! one tick naming it (the `ATC_KICK` a kicked tick reads). Run twice in the same run:
//! (A) the ticks name their server (`Tick::server`, the plugin's `ATC_BASE_URL`), so the
//! watch is polled on its back-off; (B) they name none (no plugin recorded): today's 20 s
//! cadence, every tick polls. Measured: the GETs of the task, and the simulated time from
//! the child's end to the delivery POST.

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use atc::cmd::tick::{SETTLE, Window};
use atc::job::{ForwardMode, Options, Origin, Target};
use atc::lifecycle::WatchRequest;
use atc::lifecycle::kick::Ended;
use atc::qwenpaw::{Answer, Server, Transport};
use atc::settings::{Auth, Setting, Source, Tick};
use atc::state::Store;
use atc::time::{Clock, Timestamp};
use serde_json::{Value, json};

const BASE_URL: &str = "http://127.0.0.1:8088/api";
const TASK: &str = "task-long-child";
const CHILD_AGENT: &str = "worker";
const CHILD_SESSION: &str = "long-child";
/// The parent chat the result goes to: (id, session, user, channel).
const PARENT: (&str, &str, &str, &str) = ("chat-parent", "parent", "u", "console");
/// Simulated time 0 (unix seconds): the watch is made and the child starts.
const EPOCH: u64 = 1_800_000_000;
/// The plugin's cadence.
const CADENCE_MS: u64 = 20_000;
/// The child's turn ends (the plugin's hook runs, and kicks a tick) at 30 minutes.
pub const END_MS: u64 = 1_800_000;
/// The task record reads `finished` this long after the hook ran (contract §13: 5–10 ms).
const RECORD_LAG_MS: u64 = 10;
/// The cadence goes on this long after the end (nothing more may be polled).
const AFTER_MS: u64 = 120_000;

/// Milliseconds since [`EPOCH`]; the pass reads whole seconds, as the job file holds them.
struct SimClock(AtomicU64);

impl SimClock {
    fn ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
    fn set(&self, ms: u64) {
        self.0.fetch_max(ms, Ordering::SeqCst);
    }
    fn advance(&self, d: Duration) {
        self.0.fetch_add(d.as_millis() as u64, Ordering::SeqCst);
    }
}

impl Clock for SimClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_unix(EPOCH + self.ms() / 1000)
    }
}

/// The kicked tick's window on the simulated clock: it waits [`SETTLE`] before its first
/// look, then looks again after the same pauses as the real one.
struct SimWindow<'a> {
    clock: &'a SimClock,
    left: std::slice::Iter<'static, Duration>,
}

impl Window for SimWindow<'_> {
    fn restart(&mut self) {
        self.left = atc::cmd::tick::KICK_PAUSES.iter();
    }
    fn pause(&mut self, _store: &Store) -> bool {
        match self.left.next() {
            Some(pause) => {
                self.clock.advance(*pause);
                true
            }
            None => false,
        }
    }
    fn settle(&self, _store: &Store) {
        self.clock.advance(SETTLE);
    }
}

/// The QwenPaw the pass talks to: the child's record reads running until the end (plus
/// [`RECORD_LAG_MS`]), then finished with an answer; the parent chat is idle; a delivery
/// POST is taken. Every GET of the child's record is counted, with its simulated time.
struct FakeServer<'a> {
    clock: &'a SimClock,
    auth: Auth,
    /// When (ms) each GET of the child's task record came.
    polls: Mutex<Vec<u64>>,
    /// When (ms) each delivery POST came.
    posts: Mutex<Vec<u64>>,
    /// Every other request (chat lookups, the parent turn followed).
    others: AtomicU64,
}

type Reply = Result<Answer, Transport>;

fn answer(status: u16, body: &Value) -> Reply {
    Ok(Answer {
        status,
        content_type: "application/json".into(),
        body: Ok(body.to_string()),
    })
}

fn message(text: &str) -> Value {
    json!([{"type": "message", "role": "assistant",
        "content": [{"type": "text", "text": text}], "status": "completed"}])
}

impl FakeServer<'_> {
    fn other(&self) {
        self.others.fetch_add(1, Ordering::SeqCst);
    }
}

impl Server for FakeServer<'_> {
    fn auth(&self) -> &Auth {
        &self.auth
    }
    fn allow_insecure(&mut self, _base_url: &str) {}
    fn get_task(&self, _base: &str, task_id: &str, agent: &str) -> Reply {
        let started = EPOCH as f64;
        if task_id != TASK {
            // The parent turn the delivery started: over, its reply given.
            self.other();
            return answer(
                200,
                &json!({"status": "finished", "started_at": started, "result":
                    {"status": "completed", "session_id": PARENT.1, "output": message("noted")}}),
            );
        }
        let now = self.clock.ms();
        self.polls.lock().unwrap().push(now);
        if agent != CHILD_AGENT {
            return answer(
                404,
                &json!({"detail": format!("Task not found: {task_id}")}),
            );
        }
        if now < END_MS + RECORD_LAG_MS {
            return answer(200, &json!({"status": "running", "started_at": started}));
        }
        answer(
            200,
            &json!({"status": "finished", "started_at": started, "result": {"status": "completed",
                "session_id": CHILD_SESSION, "output": message("ECHO: 30 minutes of work")}}),
        )
    }
    fn list_chats(&self, _base: &str, _agent: &str, filter: Option<(&str, &str)>) -> Reply {
        self.other();
        let (id, session, user, channel) = PARENT;
        let listed = if filter.is_none_or(|(u, c)| u == user && c == channel) {
            json!([{"id": id, "name": "New Chat", "session_id": session, "user_id": user,
                "channel": channel, "status": "idle"}])
        } else {
            json!([])
        };
        answer(200, &listed)
    }
    fn chat_status(&self, _base: &str, _agent: &str, _chat_id: &str) -> Reply {
        self.other();
        answer(200, &json!({"status": "idle"}))
    }
    fn chat_history(&self, _base: &str, _agent: &str, _chat_id: &str) -> Reply {
        self.other();
        answer(200, &json!({"messages": [], "status": "idle"}))
    }
    fn post_turn(&self, _base: &str, _agent: &str, _body: &Value) -> Reply {
        let mut posts = self.posts.lock().unwrap();
        posts.push(self.clock.ms());
        answer(
            200,
            &json!({"task_id": format!("turn-{}", posts.len()), "timeout": 3600}),
        )
    }
    fn send_message(&self, _base: &str, _agent: &str, _body: &Value) -> Reply {
        self.other();
        answer(
            200,
            &json!({"success": true, "message": "Message sent successfully"}),
        )
    }
    fn channel_health(&self, _base: &str, _agent: &str, channel: &str) -> Reply {
        self.other();
        answer(
            200,
            &json!({"channel": channel, "status": "healthy", "detail": "connected"}),
        )
    }
    fn stop_chat(&self, _base: &str, _agent: &str, _chat_id: &str) -> Reply {
        self.other();
        answer(200, &json!({"stopped": false}))
    }
    fn list_agents(&self, _base: &str) -> Reply {
        self.other();
        answer(
            200,
            &json!({"agents": [{"id": "default", "enabled": true},
                {"id": CHILD_AGENT, "enabled": true}]}),
        )
    }
}

/// What one scenario did.
pub struct Scenario {
    /// The simulated times (s) of the GETs of the child's task.
    pub polls: Vec<f64>,
    /// From the child's turn's end to the (first) delivery POST, simulated seconds.
    pub post_after_end_s: Option<f64>,
    pub posts: usize,
    /// Every other request the pass made (chat lookups, the parent turn followed).
    pub others: u64,
    /// Ticks run (the cadence's and the kick).
    pub ticks: usize,
    /// The passes of the kicked tick (1: it delivered in its first pass).
    pub kicked_passes: usize,
    /// The wall time of the whole scenario.
    pub wall: Duration,
}

/// Runs one scenario: `plugin` says whether the ticks name their server (the plugin's
/// `ATC_BASE_URL`).
pub fn run(plugin: bool) -> Scenario {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let state_dir = dir.path().join("state");
    std::fs::create_dir_all(&state_dir).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&state_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let path: PathBuf = state_dir.join("jobs.json");
    let store = Store::new(path.clone());
    let clock = SimClock(AtomicU64::new(0));
    let limits = atc::settings::default_limits();
    // `atc watch TASK --target-agent worker --child-session long-child`, from the parent
    // chat, at time 0 (the parent chat looked up first, as the command does).
    let (chat_id, session, user, channel) = PARENT;
    let request = WatchRequest {
        task_ids: vec![TASK.into()],
        target: Target {
            agent_id: "default".into(),
            target_agent: Some(CHILD_AGENT.into()),
            session_id: session.into(),
            user_id: user.into(),
            channel: channel.into(),
        },
        base_url: BASE_URL.into(),
        options: Options {
            forward: ForwardMode::Never,
            ..Options::default()
        },
        chat_id: Some(chat_id.into()),
        child_sessions: vec![(TASK.into(), CHILD_SESSION.into())],
        target_agents: Vec::new(),
        origin: Origin::Cli,
    };
    store
        .update(|file| {
            let now = clock.now();
            atc::lifecycle::watch(
                &mut file.jobs,
                &file.turns,
                &request,
                || "00000000a1c0".into(),
                now,
            )
            .map_err(|why| anyhow::anyhow!("{why:?}"))?;
            atc::lifecycle::compose::tidy(file, now, &limits);
            Ok(())
        })
        .unwrap();
    // The plugin's cadence tick (`ATC_CADENCE_TICK=1`, `ATC_BASE_URL`), and its kick.
    let cadence = Tick {
        state: Setting {
            value: path,
            source: Source::Default,
        },
        limits,
        concurrency: super::CONCURRENCY,
        http_timeout: atc::settings::defaults::HTTP_TIMEOUT,
        turn_timeout: None,
        auth: Auth::default(),
        kicked: false,
        cadence: true,
        server: plugin.then(|| BASE_URL.to_owned()),
        batch: true,
    };
    let kicked = Tick {
        kicked: true,
        cadence: false,
        ..cadence.clone()
    };
    let mut server = FakeServer {
        clock: &clock,
        auth: Auth::default(),
        polls: Mutex::new(Vec::new()),
        posts: Mutex::new(Vec::new()),
        others: AtomicU64::new(0),
    };
    let (mut ticks, mut kicked_passes) = (0, 0);
    let run_tick = |tick: &Tick, kick: Option<Ended>, server: &mut FakeServer<'_>| {
        let mut window = SimWindow {
            clock: &clock,
            left: atc::cmd::tick::KICK_PAUSES.iter(),
        };
        // Started by the plugin with stderr to /dev/null: nobody hears it.
        let reports = atc::cmd::tick::passes(
            &store,
            kick,
            false,
            &mut |intent, say| atc::pass::run_with(&store, tick, server, &clock, intent, say),
            &mut window,
            &mut |_| {},
            &mut |_| Ok(()),
        )
        .expect("a tick over a good job file");
        assert!(!reports.is_empty(), "no other tick holds the lock");
        reports.len()
    };
    let mut at = CADENCE_MS;
    while at <= END_MS + AFTER_MS {
        if at == END_MS {
            // The child's turn ends: the plugin's hook kicks a tick naming that turn (what
            // `atc tick --kicked` reads from ATC_KICK), before the cadence's tick of this
            // same second.
            clock.set(END_MS);
            let ended = Ended::from_kick(&super::turn_ended(CHILD_AGENT, CHILD_SESSION));
            kicked_passes = run_tick(&kicked, Some(ended), &mut server);
            ticks += 1;
        }
        clock.set(at);
        run_tick(&cadence, None, &mut server);
        ticks += 1;
        at += CADENCE_MS;
    }
    let polls: Vec<f64> = server
        .polls
        .lock()
        .unwrap()
        .iter()
        .map(|ms| *ms as f64 / 1e3)
        .collect();
    let posts = server.posts.lock().unwrap().clone();
    Scenario {
        polls,
        post_after_end_s: posts
            .first()
            .map(|ms| ms.saturating_sub(END_MS) as f64 / 1e3),
        posts: posts.len(),
        others: server.others.load(Ordering::SeqCst),
        ticks,
        kicked_passes,
        wall: started.elapsed(),
    }
}
