//! The simulated QwenPaw behind `atc::qwenpaw::Server`: task records that finish when the
//! history says (with an answer, an empty answer or a failure) and vanish when the server
//! restarts; chats that exist, vanish, come back and turn busy and idle; delivery POSTs
//! that are stored with their metadata (so read-back finds them), dropped before or after
//! storing, answered 500, 409 or refused, or over a flaky network; the turn each stored
//! POST wakes (its own task record, running for a while or not, ending with a reply, an
//! empty one or a failure, forgotten on a restart; the chat is busy while it runs), logged
//! for the oracle with every poll of it served; each task's own chat (`child-<task id>`,
//! listed, busy while the task runs), where a delegation tree's results land; a crash
//! armed for one tick, which stops the pass at one of `src/crash.rs`'s points by unwinding
//! out of a request; and other processes:
//! operations queued for a phase of the next tick run when the pass reaches it (the pass
//! holds no job-file lock while it waits on the network, so a `watch`, a `cancel` or
//! another tick may land right there). Bodies are the shapes the fake server pins to the
//! real one (`tests/support/bodies.rs`, `chats.rs`).

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, Weak};

use atc::qwenpaw::{Answer, Server, Transport};
use atc::settings::Auth;
use serde_json::{Value, json};

/// How a child task ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    Answer(String),
    Empty,
    Failed,
    /// Stopped through `POST /console/chat/stop` (contract §12).
    Cancelled,
}

#[derive(Clone, Debug)]
pub struct Task {
    pub agent: String,
    /// When it started (its record's `started_at`, the back-off's anchor: issue 38).
    pub started_at: u64,
    pub end: Option<End>,
    /// When it ended: the simulated second, and where in the world's order.
    pub ended: Option<(u64, u64)>,
}

impl Task {
    /// It ends now (unless it already has).
    pub fn finish(&mut self, end: End, at: u64, seq: u64) -> bool {
        if self.end.is_some() {
            return false;
        }
        self.end = Some(end);
        self.ended = Some((at, seq));
        true
    }
}

#[derive(Clone, Debug)]
pub struct Chat {
    pub id: String,
    pub session: String,
    pub user: String,
    pub channel: String,
    /// Every stored message: atc's turns (user, with metadata) and the parent's replies.
    pub messages: Vec<Value>,
    pub busy: bool,
    /// When a person archived it (`true`) or took it out of the archive (`false`), in sim
    /// seconds, in order: QwenPaw still takes POSTs into an archived chat.
    pub archived: Vec<(u64, bool)>,
}

impl Chat {
    pub fn is_archived(&self) -> bool {
        self.archived.last().is_some_and(|(_, on)| *on)
    }
}

/// What the next delivery POST suffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostFault {
    /// The connection drops before the server stores anything (the request may have left).
    DropBeforeStore,
    /// Stored, then the connection drops: the outcome is unknown to atc.
    DropAfterStore,
    /// Stored, then 500.
    Error500AfterStore,
    /// 500, nothing stored.
    Error500,
    /// 409, as if a turn were running.
    Busy,
    /// 400: the server will not take it (a refusal, nothing stored).
    Refused,
    /// No answer (the client gives up, nothing stored yet), then stored [`LATE`] later: a
    /// server busy elsewhere (QwenPaw awaits the agent, the chat and its tracker first).
    StoreLate,
}

/// How long after a [`PostFault::StoreLate`] POST the server stores it: past one settle
/// window (`limits().settle`, 60 s), within two.
pub const LATE: u64 = 90;

/// How the turn the next stored POST wakes ends (by default: at once, with a reply of its
/// own, which names the turn, so a copy of it anywhere is found).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// It runs `n` × 40 s first (the chat is busy meanwhile), then replies.
    Slow(u8),
    /// It completes with no reply.
    Empty,
    /// It fails; its output holds a partial text, which is no reply.
    Failed,
}

/// How a woken turn ended (or will, at `ends_at`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Woken {
    Reply(String),
    Empty,
    /// Failed, with the partial text its output holds.
    Failed(String),
}

/// The record of the turn a stored POST woke (`turn-<n>`), kept for the oracle after a
/// restart forgot it.
#[derive(Clone, Debug)]
pub struct Woke {
    /// Its task id (`turn-<n>`): what the POST's answer names.
    pub id: String,
    /// When it was stored: the world's order (`SimServer::seq`), and the simulated second.
    pub seq: u64,
    pub at: u64,
    /// The chat it is in: its id and (session, user, channel).
    pub chat_id: String,
    pub chat: (String, String, String),
    /// The POST's delivery id (`qwenpaw_client_message_id`) and text.
    pub delivery: String,
    pub text: String,
    pub ends_at: u64,
    pub end: Woken,
    /// The POST's answer reached atc (200, naming this record): not dropped, not a 500,
    /// not stored late.
    pub answered: bool,
    /// The tick (`SimServer::tick`) that posted it; 0: none (a late store).
    pub tick: u64,
}

/// What a poll of a woken turn's record was served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    Running,
    Ended,
    /// 404: the server restarted since.
    Gone,
}

/// A poll of a woken turn's record, as served: (order, second, turn id, what, tick).
#[derive(Clone, Debug)]
pub struct Served {
    pub seq: u64,
    pub at: u64,
    pub turn: String,
    pub seen: Seen,
    pub tick: u64,
}

/// Where, in the next tick, a queued operation of another process lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// While the tick polls a task (or a parent turn).
    Poll,
    /// While it looks at a chat, a channel, or stops a child.
    Look,
    /// As a POST goes out, before the server stores it.
    Send,
    /// After the server stored a POST, before its answer reaches the tick.
    Sent,
    /// Between a kicked tick's passes.
    Pause,
}

/// Where an armed crash stops the tick (each is one of `src/crash.rs`'s points, or a save
/// that never landed: the same file on disk).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Crash {
    /// `polled` (and `save-before-rename` of the decide save): at the first poll, nothing
    /// after `prepare` saved.
    Polled,
    /// `save-before-rename` of the claim save: at the first look, after `decide` saved.
    Decided,
    /// `read-back`: right after a chat history was read.
    ReadBack,
    /// `claimed`: the write-ahead record saved, the first POST not sent.
    Claimed,
    /// `posted` (and `save-before-rename` of the record save): after the n-th POST was
    /// served (1-based), its outcome not saved.
    Posted(u8),
}

/// The panic payload of a simulated crash.
pub struct SimCrash;

#[derive(Default)]
pub struct State {
    pub tasks: BTreeMap<String, Task>,
    pub chats: Vec<Chat>,
    /// Chats deleted during the history, with what they held.
    pub gone: Vec<Chat>,
    /// Parent turns the POSTs started (task id → its record in `woken`): lost on restart
    /// like any task record.
    pub turns: BTreeMap<String, usize>,
    /// Every turn a stored POST woke, in order (kept after a restart).
    pub woken: Vec<Woke>,
    /// Every poll of a woken turn's record the server answered, in order.
    pub served: Vec<Served>,
    /// How the turn the next stored POST wakes ends.
    pub next_wake: Option<Wake>,
    /// The drain: a child's chat is idle even while its task runs (as every chat is).
    pub quiet: bool,
    pub down: bool,
    pub post_fault: Option<PostFault>,
    /// How many POSTs go by before `post_fault` meets one.
    pub fault_skip: u8,
    /// What the next POST of a follow-up suffers (trees: few POSTs are follow-ups).
    pub up_fault: Option<PostFault>,
    /// A flaky network: every other POST's answer is lost after the server stored it.
    pub flaky: bool,
    flaky_posts: u64,
    pub crash: Option<Crash>,
    pub posts: u32,
    /// Forwards sent to people: (channel, text).
    pub sent: Vec<(String, String)>,
    /// The tasks a stop ended (a child's session is `child-<task id>`).
    pub stopped: Vec<String>,
    /// Every stop asked for, by task (the stops that did not stop it too).
    pub stops: BTreeMap<String, u32>,
    /// The stop route answers 500 (nothing stopped) while this is set.
    pub stop_fault: bool,
    pub next: u64,
    /// POSTs to be stored later (`PostFault::StoreLate`): when (unix seconds), the body.
    pub late: Vec<(u64, Value)>,
    /// How many of them were stored.
    pub stored_late: u64,
    /// The tasks polled since the current tick began, in order.
    pub polled: Vec<String>,
    /// Where in the world's order each task's record was last served (any answer), and
    /// how often it was.
    pub last_poll: BTreeMap<String, u64>,
    pub polls: BTreeMap<String, u64>,
}

pub struct SimServer {
    pub state: Mutex<State>,
    auth: Auth,
    /// Operations of other processes, for a phase of the next tick.
    /// Each with how many more times its phase comes before it lands (0: the next).
    queue: Mutex<Vec<(Phase, u8, crate::world::Op)>>,
    /// How often a queued operation let its phase go by, to land at a later one.
    pub deferred: std::sync::atomic::AtomicU64,
    /// The world they act on (set once it exists).
    env: OnceLock<Weak<crate::world::Env>>,
    /// An operation of another process is running: its own requests run no others.
    running_other: AtomicBool,
    /// A tick of the history is running: only its requests meet other processes.
    ticking: AtomicBool,
    /// The world's order of events: stores, polls served, facts (shared with the world).
    pub seq: std::sync::atomic::AtomicU64,
    /// The history's tick running now, counted from 1 (0: none has started yet).
    pub tick: std::sync::atomic::AtomicU64,
    /// The lanes of the parallel phase running now, and their turns.
    pub lanes: Mutex<Lanes>,
    turns: Condvar,
}

fn answer(status: u16, body: &Value) -> Result<Answer, Transport> {
    Ok(Answer {
        status,
        content_type: "application/json".into(),
        body: Ok(body.to_string()),
    })
}

fn unreachable(method: &str) -> Result<Answer, Transport> {
    Err(Transport {
        nothing_sent: true,
        message: format!("{method} http://sim/api: connection refused (is QwenPaw running?)"),
    })
}

fn crash() -> ! {
    // A lane of a parallel phase that crashes takes the process with it: its other
    // lanes stop at their next request (`Lanes::park`).
    CRASHED.with(|c| c.set(LANE.with(Cell::get).is_some()));
    std::panic::panic_any(SimCrash)
}

thread_local! {
    /// The lane of a parallel phase this thread is (`Server::lane_started`).
    static LANE: Cell<Option<usize>> = const { Cell::new(None) };
    /// This lane crashed (a simulated crash, not a bug's panic).
    static CRASHED: Cell<bool> = const { Cell::new(false) };
}

/// The lanes of a parallel phase (`--concurrency` above 1), run one at a time: where a
/// lane starts or makes a request it parks, and once every lane of the phase is parked
/// (or has ended) the seed draws which goes on. So requests of a pass's several lanes
/// interleave in an order the history's seed decides, and a history replays from it
/// (a thread scheduler's order would not: issue 35).
#[derive(Default)]
pub struct Lanes {
    /// Lanes of the phase running now that have not ended.
    live: usize,
    parked: BTreeSet<usize>,
    /// The lane whose turn it is.
    turn: Option<usize>,
    /// A lane crashed: the others stop at their next request.
    crashed: bool,
    /// The draws: `seed` and how many were drawn.
    pub seed: u64,
    draws: u64,
    /// How often another lane went on where one parked (the lanes interleaved).
    pub switched: u64,
}

impl Lanes {
    /// Gives the turn to a parked lane, drawn from the seed, once no lane runs.
    fn dispatch(&mut self, from: Option<usize>) {
        if self.turn.is_some() || self.live == 0 || self.parked.len() < self.live {
            return;
        }
        self.draws += 1;
        let mut x = self.seed ^ self.draws.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        // splitmix64
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^= x >> 31;
        let pick = (x % self.parked.len() as u64) as usize;
        let next = *self.parked.iter().nth(pick).expect("a parked lane");
        if from.is_some_and(|f| f != next) {
            self.switched += 1;
        }
        self.turn = Some(next);
    }
}

/// Crashes here when the tick's armed crash is `point` (disarmed first, the lock let go);
/// otherwise hands the state back.
fn crash_at(mut s: MutexGuard<'_, State>, point: Crash) -> MutexGuard<'_, State> {
    if s.crash == Some(point) {
        s.crash = None;
        drop(s);
        crash();
    }
    s
}

fn chat_json(chat: &Chat, busy: bool) -> Value {
    json!({"id": chat.id, "name": "New Chat", "session_id": chat.session, "user_id": chat.user,
           "channel": chat.channel, "status": if busy { "running" } else { "idle" },
           "archived": chat.is_archived()})
}

/// A chat is busy while the world says so, while a turn a POST woke there still runs, or,
/// a child's chat, while the child's task runs (its one turn).
fn busy(s: &State, chat: &Chat, now: u64) -> bool {
    let task = chat
        .session
        .strip_prefix("child-")
        .and_then(|task| s.tasks.get(task));
    chat.busy
        || (!s.quiet && task.is_some_and(|t| t.end.is_none()))
        || s.turns.values().any(|&i| {
            let w = &s.woken[i];
            w.chat_id == chat.id && w.ends_at > now
        })
}

impl SimServer {
    pub fn new() -> SimServer {
        SimServer {
            state: Mutex::new(State::default()),
            auth: Auth::default(),
            queue: Mutex::new(Vec::new()),
            deferred: std::sync::atomic::AtomicU64::new(0),
            env: OnceLock::new(),
            running_other: AtomicBool::new(false),
            ticking: AtomicBool::new(false),
            seq: std::sync::atomic::AtomicU64::new(0),
            tick: std::sync::atomic::AtomicU64::new(0),
            lanes: Mutex::new(Lanes::default()),
            turns: Condvar::new(),
        }
    }

    fn lanes_lock(&self) -> MutexGuard<'_, Lanes> {
        self.lanes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Where a lane of a parallel phase starts a request: it waits for its turn (the
    /// requests of another process's operation, run inside a lane's, do not).
    fn gate(&self) {
        if let Some(lane) = LANE.with(Cell::get)
            && !self.running_other.load(Ordering::SeqCst)
        {
            self.park(lane);
        }
    }

    fn park(&self, lane: usize) {
        let mut l = self.lanes_lock();
        // A lane that ran stops for a request (one that starts had no turn yet: the order
        // lanes start in is the threads', and counts for nothing).
        let ran = l.turn == Some(lane);
        if ran {
            l.turn = None;
        }
        l.parked.insert(lane);
        l.dispatch(ran.then_some(lane));
        self.turns.notify_all();
        while l.turn != Some(lane) {
            let (next, waited) = self
                .turns
                .wait_timeout(l, std::time::Duration::from_secs(30))
                .unwrap_or_else(|p| p.into_inner());
            l = next;
            assert!(
                !waited.timed_out() || l.turn == Some(lane),
                "lane {lane} waited 30 s for its turn: live {}, parked {:?}, turn {:?}",
                l.live,
                l.parked,
                l.turn
            );
        }
        l.parked.remove(&lane);
        let crashed = l.crashed;
        drop(l);
        if crashed {
            crash();
        }
    }

    /// The next number in the world's order.
    pub fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The simulated second.
    fn now(&self) -> u64 {
        self.env
            .get()
            .and_then(Weak::upgrade)
            .map_or(0, |e| e.clock.secs())
    }

    /// A tick of the history starts (or ends): queued operations land in its phases.
    pub fn ticking(&self, on: bool) {
        self.ticking.store(on, Ordering::SeqCst);
    }

    pub fn set_env(&self, env: Weak<crate::world::Env>) {
        let _ = self.env.set(env);
    }

    /// Queues `op` for `phase` of the next tick, after `skip` times that phase came by (a
    /// later POST of a pass, or of a kicked tick's later pass).
    pub fn queue(&self, phase: Phase, skip: u8, op: crate::world::Op) {
        self.queue.lock().unwrap().push((phase, skip, op));
    }

    /// Whether other processes' operations wait for the next tick.
    pub fn has_queued(&self) -> bool {
        !self
            .queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }

    /// The operations still queued (a tick that never reached their phase): they run after
    /// it, as if they landed just then.
    pub fn take_queued(&self) -> Vec<(Phase, crate::world::Op)> {
        std::mem::take(&mut *self.queue.lock().unwrap())
            .into_iter()
            .map(|(phase, _, op)| (phase, op))
            .collect()
    }

    /// Runs the operations queued for `phase`, as other processes would while the tick
    /// waits here (none from inside another such operation).
    pub fn interleave(&self, phase: Phase) {
        if self.running_other.load(Ordering::SeqCst) || !self.ticking.load(Ordering::SeqCst) {
            return;
        }
        let due: Vec<crate::world::Op> = {
            let mut queue = self.queue.lock().unwrap();
            let (now, mut later): (Vec<_>, Vec<_>) = queue
                .drain(..)
                .partition(|(p, skip, _)| *p == phase && *skip == 0);
            // The others of this phase wait for its next time.
            for entry in later.iter_mut().filter(|(p, _, _)| *p == phase) {
                entry.1 -= 1;
                self.deferred.fetch_add(1, Ordering::SeqCst);
            }
            *queue = later;
            now.into_iter().map(|(_, _, op)| op).collect()
        };
        if due.is_empty() {
            return;
        }
        let Some(env) = self.env.get().and_then(Weak::upgrade) else {
            return;
        };
        self.running_other.store(true, Ordering::SeqCst);
        for op in due {
            env.run_other(phase, &op);
        }
        self.running_other.store(false, Ordering::SeqCst);
    }

    pub fn lock(&self) -> MutexGuard<'_, State> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        // What a slow server held is stored once its time has come, before anything else.
        if !s.late.is_empty()
            && let Some(now) = self
                .env
                .get()
                .and_then(Weak::upgrade)
                .map(|e| e.clock.secs())
        {
            let due: Vec<Value> = {
                let (due, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut s.late)
                    .into_iter()
                    .partition(|(at, _)| *at <= now);
                s.late = wait;
                due.into_iter().map(|(_, body)| body).collect()
            };
            for body in due {
                let _ = self.store_now(&mut s, &body, None, false);
                s.stored_late += 1;
            }
        }
        s
    }

    /// Before a look request: other processes may act; an armed `Decided` crash stops the
    /// tick here.
    fn look(&self) -> Option<Result<Answer, Transport>> {
        self.interleave(Phase::Look);
        let s = crash_at(self.lock(), Crash::Decided);
        s.down.then(|| unreachable("GET"))
    }
}

impl Server for SimServer {
    fn auth(&self) -> &Auth {
        &self.auth
    }

    fn lanes(&self, workers: usize, items: usize) -> usize {
        // A pass inside a lane (another process's tick, run by an operation there) runs
        // its phases on one thread.
        if LANE.with(Cell::get).is_some() || self.running_other.load(Ordering::SeqCst) {
            return 1;
        }
        let n = workers.clamp(1, items.max(1));
        if n > 1 {
            let mut l = self.lanes_lock();
            l.live = n;
            l.parked.clear();
            l.turn = None;
            l.crashed = false;
        }
        n
    }

    fn lane_started(&self, lane: usize) {
        LANE.with(|l| l.set(Some(lane)));
        CRASHED.with(|c| c.set(false));
        self.park(lane);
    }

    fn lane_ended(&self, lane: usize) {
        LANE.with(|l| l.set(None));
        let mut l = self.lanes_lock();
        l.live -= 1;
        if CRASHED.with(Cell::take) {
            l.crashed = true;
        }
        if l.turn == Some(lane) {
            l.turn = None;
        }
        l.dispatch(None);
        self.turns.notify_all();
    }

    fn allow_insecure(&mut self, _base_url: &str) {}

    fn get_task(&self, _base: &str, task_id: &str, agent: &str) -> Result<Answer, Transport> {
        self.gate();
        self.interleave(Phase::Poll);
        let mut s = crash_at(self.lock(), Crash::Polled);
        if s.down {
            return unreachable("GET");
        }
        s.polled.push(task_id.to_owned());
        let seq = self.next_seq();
        s.last_poll.insert(task_id.to_owned(), seq);
        *s.polls.entry(task_id.to_owned()).or_default() += 1;
        if task_id.starts_with("turn-") {
            let (seq, at, tick) = (
                self.next_seq(),
                self.now(),
                self.tick.load(Ordering::SeqCst),
            );
            let Some(&i) = s.turns.get(task_id) else {
                s.served.push(Served {
                    seq,
                    at,
                    turn: task_id.to_owned(),
                    seen: Seen::Gone,
                    tick,
                });
                return answer(
                    404,
                    &json!({"detail": format!("Task not found: {task_id}")}),
                );
            };
            let w = s.woken[i].clone();
            let message = |text: &str| {
                json!([{"type": "message", "role": "assistant",
                    "content": [{"type": "text", "text": text}]}])
            };
            let (seen, body) = if at < w.ends_at {
                (
                    Seen::Running,
                    json!({"status": "running", "started_at": 1796003454.67}),
                )
            } else {
                let result = match &w.end {
                    Woken::Reply(text) => {
                        json!({"status": "completed", "session_id": w.chat.0, "output": message(text)})
                    }
                    Woken::Empty => {
                        json!({"status": "completed", "session_id": w.chat.0, "output": []})
                    }
                    Woken::Failed(partial) => json!({"status": "failed", "session_id": w.chat.0,
                        "output": message(partial),
                        "error": {"code": "MODEL_EXECUTION_ERROR", "message": "Model execution failed."}}),
                };
                (
                    Seen::Ended,
                    json!({"status": "finished", "started_at": 1796003454.67, "result": result}),
                )
            };
            s.served.push(Served {
                seq,
                at,
                turn: task_id.to_owned(),
                seen,
                tick,
            });
            return answer(200, &body);
        }
        let Some(task) = s.tasks.get(task_id).filter(|t| t.agent == agent) else {
            return answer(
                404,
                &json!({"detail": format!("Task not found: {task_id}")}),
            );
        };
        // The record names the child's own session, as QwenPaw's does, and when it
        // started (a float, as QwenPaw's does).
        let child = format!("child-{task_id}");
        let started = task.started_at as f64 + 0.67;
        let body = match &task.end {
            None => json!({"status": "running", "started_at": started}),
            Some(End::Answer(text)) => json!({"status": "finished", "started_at": started,
                "result": {"status": "completed", "session_id": child, "output": [
                    {"type": "message", "role": "assistant",
                     "content": [{"type": "text", "text": text}]}]}}),
            Some(End::Empty) => json!({"status": "finished", "started_at": started,
                "result": {"status": "completed", "session_id": child, "output": []}}),
            Some(End::Cancelled) => json!({"status": "finished", "started_at": started,
                "result": {"status": "failed", "error": {"message": "Task cancelled"}}}),
            Some(End::Failed) => json!({"status": "finished", "started_at": started + 0.16,
                "result": {"status": "failed", "session_id": child, "output": [],
                    "error": {"code": "MODEL_EXECUTION_ERROR", "message": "Model execution failed."}}}),
        };
        answer(200, &body)
    }

    fn list_chats(
        &self,
        _base: &str,
        _agent: &str,
        filter: Option<(&str, &str)>,
    ) -> Result<Answer, Transport> {
        self.gate();
        if let Some(down) = self.look() {
            return down;
        }
        let s = self.lock();
        let now = self.now();
        let listed: Vec<Value> = s
            .chats
            .iter()
            .filter(|c| filter.is_none_or(|(u, ch)| c.user == u && c.channel == ch))
            .map(|c| chat_json(c, busy(&s, c, now)))
            .collect();
        answer(200, &Value::Array(listed))
    }

    fn chat_status(&self, _base: &str, _agent: &str, chat_id: &str) -> Result<Answer, Transport> {
        self.gate();
        if let Some(down) = self.look() {
            return down;
        }
        let s = self.lock();
        // QwenPaw's status route asks the task tracker only: any id is "idle".
        let now = self.now();
        let busy = s.chats.iter().any(|c| c.id == chat_id && busy(&s, c, now));
        answer(
            200,
            &json!({"status": if busy { "running" } else { "idle" }}),
        )
    }

    fn chat_history(&self, _base: &str, _agent: &str, chat_id: &str) -> Result<Answer, Transport> {
        self.gate();
        if let Some(down) = self.look() {
            return down;
        }
        let s = self.lock();
        let served = match s.chats.iter().find(|c| c.id == chat_id) {
            None => answer(
                404,
                &json!({"detail": format!("Chat not found: {chat_id}")}),
            ),
            Some(c) => answer(
                200,
                &json!({"messages": c.messages, "status": if busy(&s, c, self.now()) { "running" } else { "idle" }}),
            ),
        };
        let _s = crash_at(s, Crash::ReadBack);
        served
    }

    fn post_turn(&self, _base: &str, _agent: &str, body: &Value) -> Result<Answer, Transport> {
        self.gate();
        let s = crash_at(self.lock(), Crash::Claimed);
        drop(s);
        self.interleave(Phase::Send);
        let mut s = self.lock();
        if s.down {
            return unreachable("POST");
        }
        let served = self.store_turn(&mut s, body);
        s.posts += 1;
        let posted = Crash::Posted(s.posts.min(255) as u8);
        let s = crash_at(s, posted);
        drop(s);
        self.interleave(Phase::Sent);
        served
    }

    fn send_message(&self, _base: &str, _agent: &str, body: &Value) -> Result<Answer, Transport> {
        self.gate();
        drop(crash_at(self.lock(), Crash::Claimed));
        self.interleave(Phase::Send);
        let mut s = self.lock();
        if s.down {
            return unreachable("POST");
        }
        let field = |key: &str| body[key].as_str().unwrap_or("").to_owned();
        s.sent.push((field("channel"), field("text")));
        s.posts += 1;
        let posted = Crash::Posted(s.posts.min(255) as u8);
        let _s = crash_at(s, posted);
        answer(
            200,
            &json!({"success": true, "message": "Message sent successfully"}),
        )
    }

    fn channel_health(
        &self,
        _base: &str,
        _agent: &str,
        channel: &str,
    ) -> Result<Answer, Transport> {
        self.gate();
        if let Some(down) = self.look() {
            return down;
        }
        answer(
            200,
            &json!({"channel": channel, "status": "healthy", "detail": "connected"}),
        )
    }

    /// Stops what runs in a child's chat, `child-<task id>`: named by the uuid a lookup
    /// found (`GET /chats` lists it), or by its session (a chat deleted since, or one atc
    /// did not look up).
    fn stop_chat(&self, _base: &str, agent: &str, chat_id: &str) -> Result<Answer, Transport> {
        self.gate();
        if let Some(down) = self.look() {
            return down;
        }
        let mut s = self.lock();
        let session = s
            .chats
            .iter()
            .find(|c| c.id == chat_id)
            .map_or(chat_id, |c| c.session.as_str())
            .to_owned();
        let task_id = session.strip_prefix("child-").unwrap_or("").to_owned();
        *s.stops.entry(task_id.clone()).or_default() += 1;
        if s.stop_fault {
            return answer(500, &json!({"detail": "Internal Server Error"}));
        }
        let (now, seq) = (self.now(), self.next_seq());
        let stopped = s
            .tasks
            .get_mut(&task_id)
            .filter(|t| t.agent == agent)
            .is_some_and(|task| task.finish(End::Cancelled, now, seq));
        if stopped {
            s.stopped.push(task_id);
        }
        answer(200, &json!({ "stopped": stopped }))
    }

    /// `default` and every agent a task runs on.
    fn list_agents(&self, _base: &str) -> Result<Answer, Transport> {
        self.gate();
        if let Some(down) = self.look() {
            return down;
        }
        let s = self.lock();
        let mut agents: Vec<&str> = std::iter::once("default")
            .chain(s.tasks.values().map(|t| t.agent.as_str()))
            .collect();
        agents.sort_unstable();
        agents.dedup();
        let listed: Vec<Value> = agents
            .iter()
            .map(|a| json!({"id": a, "enabled": true}))
            .collect();
        answer(200, &json!({ "agents": listed }))
    }
}

impl SimServer {
    fn store_turn(&self, s: &mut State, body: &Value) -> Result<Answer, Transport> {
        let flaky = s.flaky && {
            s.flaky_posts += 1;
            s.flaky_posts % 2 == 1
        };
        let fault = if s.fault_skip > 0 && s.post_fault.is_some() {
            s.fault_skip -= 1;
            None
        } else {
            s.post_fault.take()
        };
        let follow_up = body.to_string().contains("[atc: follow-up");
        let fault = fault
            .or_else(|| s.up_fault.take_if(|_| follow_up))
            .or(flaky.then_some(PostFault::DropAfterStore));
        let lost = || {
            Err(Transport {
                nothing_sent: false,
                message: "POST http://sim/api/console/chat/task: connection reset".into(),
            })
        };
        match fault {
            Some(PostFault::Busy) => {
                return answer(
                    409,
                    &json!({"detail": "A task is already running for this chat. Wait for it to finish or use a different session_id."}),
                );
            }
            Some(PostFault::Error500) => {
                return answer(500, &json!({"detail": "Internal Server Error"}));
            }
            Some(PostFault::Refused) => {
                return answer(400, &json!({"detail": "Invalid request"}));
            }
            Some(PostFault::DropBeforeStore) => return lost(),
            Some(PostFault::StoreLate) => {
                let at = self
                    .env
                    .get()
                    .and_then(Weak::upgrade)
                    .map_or(0, |e| e.clock.secs())
                    + LATE;
                s.late.push((at, body.clone()));
                return Err(Transport {
                    nothing_sent: false,
                    message: "POST http://sim/api/console/chat/task: timed out".into(),
                });
            }
            _ => {}
        }
        self.store_now(s, body, fault, true)
    }

    /// Stores a posted turn in its chat (or a new one), wakes a turn there, and answers as
    /// `fault` says. `live`: atc is waiting for the answer (not a late store).
    fn store_now(
        &self,
        s: &mut State,
        body: &Value,
        fault: Option<PostFault>,
        live: bool,
    ) -> Result<Answer, Transport> {
        let lost = || {
            Err(Transport {
                nothing_sent: false,
                message: "POST http://sim/api/console/chat/task: connection reset".into(),
            })
        };
        let text = |key: &str| body[key].as_str().unwrap_or("default").to_owned();
        let (session, user, channel) = (text("session_id"), text("user_id"), text("channel"));
        s.next += 1;
        let n = s.next;
        let i = match s
            .chats
            .iter()
            .position(|c| c.session == session && c.user == user && c.channel == channel)
        {
            Some(i) => i,
            None => {
                s.chats.push(Chat {
                    // Started by a POST into a triple nobody had.
                    id: format!("ghost-{n}"),
                    session,
                    user,
                    channel,
                    messages: Vec::new(),
                    busy: false,
                    archived: Vec::new(),
                });
                s.chats.len() - 1
            }
        };
        let now = self.now();
        if busy(s, &s.chats[i], now) {
            return answer(
                409,
                &json!({"detail": "A task is already running for this chat. Wait for it to finish or use a different session_id."}),
            );
        }
        let input = &body["input"][0];
        let mut metadata = input["metadata"].clone();
        let delivery = metadata["qwenpaw_client_message_id"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        let posted = input["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        metadata["qwenpaw_tag"] = json!("external_user_query");
        metadata["qwenpaw_turn_state"] = json!({"status": "completed"});
        // The turn it wakes: the next one's end as the world set it, or a reply at once.
        let turn = format!("turn-{n}");
        let (ends_at, end) = match s.next_wake.take() {
            None => (now, Woken::Reply(format!("«reply of {turn}»"))),
            Some(Wake::Slow(k)) => (
                now + 40 * u64::from(k.clamp(1, 3)),
                Woken::Reply(format!("«reply of {turn}»")),
            ),
            Some(Wake::Empty) => (now, Woken::Empty),
            Some(Wake::Failed) => (now, Woken::Failed(format!("«partial of {turn}»"))),
        };
        let chat = &mut s.chats[i];
        // `sim_stored_at`: when it was stored (the simulation's own key, for its checks).
        chat.messages.push(json!({"role": "user", "type": "message", "content": input["content"],
            "metadata": {"original_id": format!("msg-{n}"), "original_name": "user", "metadata": metadata},
            "sim_stored_at": now}));
        if let Woken::Reply(reply) = &end {
            chat.messages
                .push(json!({"role": "assistant", "type": "message",
                "content": [{"type": "text", "text": reply}]}));
        }
        let woke = Woke {
            id: turn.clone(),
            seq: self.next_seq(),
            at: now,
            chat_id: chat.id.clone(),
            chat: (
                chat.session.clone(),
                chat.user.clone(),
                chat.channel.clone(),
            ),
            delivery,
            text: posted,
            ends_at,
            end,
            answered: live
                && !matches!(
                    fault,
                    Some(PostFault::DropAfterStore | PostFault::Error500AfterStore)
                ),
            tick: if live {
                self.tick.load(Ordering::SeqCst)
            } else {
                0
            },
        };
        s.woken.push(woke);
        let at = s.woken.len() - 1;
        s.turns.insert(turn.clone(), at);
        match fault {
            Some(PostFault::DropAfterStore) => lost(),
            Some(PostFault::Error500AfterStore) => {
                answer(500, &json!({"detail": "Internal Server Error"}))
            }
            _ => answer(200, &json!({"task_id": turn, "timeout": 3600})),
        }
    }
}

/// The server as a second process sees it (`&self` is all a nested tick may hold).
pub struct Proxy<'a>(pub &'a SimServer);

impl Server for Proxy<'_> {
    fn auth(&self) -> &Auth {
        self.0.auth()
    }
    fn lanes(&self, workers: usize, items: usize) -> usize {
        self.0.lanes(workers, items)
    }
    fn lane_started(&self, lane: usize) {
        self.0.lane_started(lane);
    }
    fn lane_ended(&self, lane: usize) {
        self.0.lane_ended(lane);
    }
    fn allow_insecure(&mut self, _base_url: &str) {}
    fn get_task(&self, base: &str, task_id: &str, agent: &str) -> Result<Answer, Transport> {
        self.0.get_task(base, task_id, agent)
    }
    fn list_chats(
        &self,
        base: &str,
        agent: &str,
        filter: Option<(&str, &str)>,
    ) -> Result<Answer, Transport> {
        self.0.list_chats(base, agent, filter)
    }
    fn chat_status(&self, base: &str, agent: &str, chat_id: &str) -> Result<Answer, Transport> {
        self.0.chat_status(base, agent, chat_id)
    }
    fn chat_history(&self, base: &str, agent: &str, chat_id: &str) -> Result<Answer, Transport> {
        self.0.chat_history(base, agent, chat_id)
    }
    fn post_turn(&self, base: &str, agent: &str, body: &Value) -> Result<Answer, Transport> {
        self.0.post_turn(base, agent, body)
    }
    fn send_message(&self, base: &str, agent: &str, body: &Value) -> Result<Answer, Transport> {
        self.0.send_message(base, agent, body)
    }
    fn channel_health(&self, base: &str, agent: &str, channel: &str) -> Result<Answer, Transport> {
        self.0.channel_health(base, agent, channel)
    }
    fn stop_chat(&self, base: &str, agent: &str, chat_id: &str) -> Result<Answer, Transport> {
        self.0.stop_chat(base, agent, chat_id)
    }
    fn list_agents(&self, base: &str) -> Result<Answer, Transport> {
        self.0.list_agents(base)
    }
}

/// The text of an atc turn stored in a chat, with its delivery id.
pub fn delivered(chat: &Chat) -> Vec<(String, String)> {
    chat.messages
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| {
            (
                m["metadata"]["metadata"]["qwenpaw_client_message_id"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
                m["content"][0]["text"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}
