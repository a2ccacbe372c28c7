//! One simulated world: a real job file (in a private temp directory), the simulated
//! QwenPaw, the simulated clock; the operations a history is made of, each run through
//! the same library code the commands and the tick run; and the promises checked after
//! every operation and after the drain that ends every history.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use atc::job::{ForwardMode, Job, OnEmpty, OnNoAnswer, Options, Outbound, Status, Target};
use atc::lifecycle::{self, Event, Limits, WatchRequest};
use atc::settings::{Auth, Setting, Source, Tick};
use atc::state::Store;
use atc::time::{Clock, Timestamp};

use crate::server::{Chat, Crash, End, PostFault, SimServer, Task, delivered};

pub const BASE: &str = "http://127.0.0.1:8088/api";
pub const TASKS: u8 = 6;
/// The parent chats a watch can name: (session, user, channel).
pub const CHATS: [(&str, &str, &str); 3] = [
    ("s1", "u", "console"),
    ("s2", "u", "console"),
    ("s3", "u", "imsg"),
];

pub fn limits() -> Limits {
    Limits {
        max_strikes: 3,
        max_age: Duration::from_secs(2 * 3600),
        busy_retry: Duration::from_secs(30),
        busy_deadline: Duration::from_secs(600),
        settle: Duration::from_secs(60),
        keep: Duration::from_secs(3 * 3600),
    }
}

pub fn task_id(i: u8) -> String {
    format!("task-{i}")
}

/// The answer a task finishes with: unique, so a chat holding it twice is found.
pub fn answer_of(i: u8) -> String {
    format!("«answer of task-{i}»")
}

/// Where a task runs: the last two on another agent (`--target-agent worker`).
pub fn agent_of(i: u8) -> &'static str {
    if i >= 4 { "worker" } else { "default" }
}

/// How a finished task ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    Answer,
    Empty,
    Failed,
}

/// Clock jumps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Jump {
    /// A few minutes.
    Minutes(u8),
    PastBusyDeadline,
    PastMaxAge,
    PastKeep,
}

/// One thing that happens in a history. `tasks` is a bit set of task indices; `opts` bits:
/// 1 `--on-no-answer silent`, 2 `--on-empty skip`, 4 `--fork-branch b`, 8 `--forward never`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Watch {
        tasks: u8,
        chat: u8,
        group: bool,
        create_session: bool,
        opts: u8,
    },
    Cancel(u8),
    Redeliver {
        task: u8,
        create_session: bool,
    },
    Tick,
    /// A tick with `--no-batch` (batches already composed still go out as they are).
    TickNoBatch,
    CrashTick(Crash),
    Import(u8),
    Finish(u8, Ending),
    /// Every running task finishes with its answer.
    FinishAll,
    Restart,
    DeleteChat(u8),
    CreateChat(u8),
    Busy(u8, bool),
    Fault(PostFault),
    Down(bool),
    Jump(Jump),
}

pub struct SimClock(AtomicU64);

impl Clock for SimClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_unix(self.0.load(Ordering::Relaxed))
    }
}

impl SimClock {
    fn advance(&self, d: Duration) {
        self.0.fetch_add(d.as_secs(), Ordering::Relaxed);
    }
    fn secs(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

pub struct World {
    _dir: tempfile::TempDir,
    path: PathBuf,
    tick: Tick,
    pub server: SimServer,
    clock: SimClock,
    /// The jobs as the last operation left them.
    jobs: Vec<Job>,
    /// Every registration's last state, by job id (kept after it is pruned).
    last: BTreeMap<String, Job>,
    /// Registrations replaced by a later watch of the same task.
    replaced: BTreeSet<String>,
    /// Tasks whose record was pruned (after `--keep`): watched again, they are new to atc,
    /// and their result may rightly go out again.
    forgotten: BTreeSet<String>,
    /// Tasks some watch registered with `--stop-after`.
    stop_asked: BTreeSet<String>,
    /// When each registration was first seen ended (sim seconds).
    ended_at: BTreeMap<String, u64>,
    pub ops: u64,
    /// Give-ups seen in a tick and found named in its report.
    pub reported: u64,
    chat_serial: u64,
    /// What the last tick reported (`None` after any other operation, or a crashed tick).
    report: Option<serde_json::Value>,
    /// What the history did so far, for failure messages.
    pub trail: Vec<String>,
}

fn scratch() -> tempfile::TempDir {
    // A RAM disk where there is one: every save fsyncs, and a history saves hundreds of times.
    let shm = std::path::Path::new("/dev/shm");
    let mut builder = tempfile::Builder::new();
    builder.prefix("atc-sim-");
    if shm.is_dir()
        && let Ok(dir) = builder.tempdir_in(shm)
    {
        return dir;
    }
    builder.tempdir().expect("a temp dir")
}

impl World {
    pub fn new() -> World {
        let dir = scratch();
        let path = dir.path().join("state").join("jobs.json");
        let server = SimServer::new();
        {
            let mut s = server.lock();
            for i in 0..TASKS {
                s.tasks.insert(
                    task_id(i),
                    Task {
                        agent: agent_of(i).into(),
                        end: None,
                    },
                );
            }
        }
        let mut world = World {
            tick: Tick {
                state: Setting {
                    value: path.clone(),
                    source: Source::Default,
                },
                limits: limits(),
                concurrency: 1,
                http_timeout: Duration::from_secs(60),
                turn_timeout: None,
                auth: Auth::default(),
                kicked: false,
                batch: true,
            },
            path,
            _dir: dir,
            server,
            clock: SimClock(AtomicU64::new(1_800_000_000)),
            jobs: Vec::new(),
            last: BTreeMap::new(),
            replaced: BTreeSet::new(),
            forgotten: BTreeSet::new(),
            stop_asked: BTreeSet::new(),
            ended_at: BTreeMap::new(),
            ops: 0,
            reported: 0,
            chat_serial: 0,
            report: None,
            trail: Vec::new(),
        };
        for c in 0..CHATS.len() as u8 {
            world.create_chat(c);
        }
        world
    }

    fn store(&self) -> Store {
        Store::new(self.path.clone())
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    fn create_chat(&mut self, c: u8) {
        let (session, user, channel) = CHATS[c as usize];
        let mut s = self.server.lock();
        if s.chats
            .iter()
            .any(|x| x.session == session && x.user == user && x.channel == channel)
        {
            return;
        }
        self.chat_serial += 1;
        s.chats.push(Chat {
            id: format!("chat-{session}-{}", self.chat_serial),
            session: session.into(),
            user: user.into(),
            channel: channel.into(),
            messages: Vec::new(),
            busy: false,
        });
    }

    pub fn apply(&mut self, op: &Op) {
        self.ops += 1;
        let said = match op {
            Op::Watch {
                tasks,
                chat,
                group,
                create_session,
                opts,
            } => self.watch(*tasks, *chat, *group, *create_session, *opts),
            Op::Cancel(t) => self.cancel(*t),
            Op::Redeliver {
                task,
                create_session,
            } => self.redeliver(*task, *create_session),
            Op::Tick => self.tick(None),
            Op::TickNoBatch => {
                self.tick.batch = false;
                let said = self.tick(None);
                self.tick.batch = true;
                said
            }
            Op::CrashTick(at) => self.tick(Some(*at)),
            Op::Import(t) => self.import(*t),
            Op::Finish(t, ending) => {
                let mut s = self.server.lock();
                if let Some(task) = s.tasks.get_mut(&task_id(*t))
                    && task.end.is_none()
                {
                    task.end = Some(match ending {
                        Ending::Answer => End::Answer(answer_of(*t)),
                        Ending::Empty => End::Empty,
                        Ending::Failed => End::Failed,
                    });
                }
                String::new()
            }
            Op::FinishAll => {
                let mut s = self.server.lock();
                for (id, task) in s.tasks.iter_mut() {
                    if task.end.is_none() {
                        let i: u8 = id.trim_start_matches("task-").parse().unwrap_or(0);
                        task.end = Some(End::Answer(answer_of(i)));
                    }
                }
                String::new()
            }
            Op::Restart => {
                let mut s = self.server.lock();
                s.tasks.clear();
                s.turns.clear();
                String::new()
            }
            Op::DeleteChat(c) => {
                let (session, user, channel) = CHATS[*c as usize];
                let mut s = self.server.lock();
                let (gone, kept): (Vec<Chat>, Vec<Chat>) = s
                    .chats
                    .drain(..)
                    .partition(|x| x.session == session && x.user == user && x.channel == channel);
                s.chats = kept;
                s.gone.extend(gone);
                String::new()
            }
            Op::CreateChat(c) => {
                self.create_chat(*c);
                String::new()
            }
            Op::Busy(c, busy) => {
                let (session, ..) = CHATS[*c as usize];
                for x in self.server.lock().chats.iter_mut() {
                    if x.session == session {
                        x.busy = *busy;
                    }
                }
                String::new()
            }
            Op::Fault(fault) => {
                self.server.lock().post_fault = Some(*fault);
                String::new()
            }
            Op::Down(down) => {
                self.server.lock().down = *down;
                String::new()
            }
            Op::Jump(jump) => {
                let l = limits();
                self.clock.advance(match jump {
                    Jump::Minutes(m) => Duration::from_secs(60 * u64::from(*m % 10 + 1)),
                    Jump::PastBusyDeadline => l.busy_deadline + Duration::from_secs(1),
                    Jump::PastMaxAge => l.max_age + Duration::from_secs(1),
                    Jump::PastKeep => l.keep + Duration::from_secs(1),
                });
                String::new()
            }
        };
        self.trail.push(format!("{op:?}{said}"));
        self.observe();
    }

    fn watch(
        &mut self,
        tasks: u8,
        chat: u8,
        group: bool,
        create_session: bool,
        opts: u8,
    ) -> String {
        let ids: Vec<u8> = (0..TASKS).filter(|i| tasks & (1 << i) != 0).collect();
        let Some(&first) = ids.first() else {
            return " (no task)".into();
        };
        let (session, user, channel) = CHATS[chat as usize % CHATS.len()];
        let target = Target {
            agent_id: "default".into(),
            target_agent: (agent_of(first) != "default").then(|| agent_of(first).into()),
            session_id: session.into(),
            user_id: user.into(),
            channel: channel.into(),
        };
        let options = Options {
            create_session,
            on_no_answer: if opts & 1 != 0 {
                OnNoAnswer::Silent
            } else {
                OnNoAnswer::Notify
            },
            on_empty: if opts & 2 != 0 {
                OnEmpty::Skip
            } else {
                OnEmpty::default()
            },
            fork_branch: (opts & 4 != 0).then(|| "b".into()),
            group: group.then(|| "G".into()),
            forward: if opts & 8 != 0 {
                ForwardMode::Never
            } else {
                ForwardMode::default()
            },
            allow_insecure_remote: false,
            stop_after_secs: (opts & 16 != 0).then_some(1),
            check_in_secs: (opts & 32 != 0).then_some(1),
        };
        // `atc watch` looks the chat up first, as the command does.
        let chat_id = {
            let s = self.server.lock();
            if s.down {
                None
            } else {
                match s
                    .chats
                    .iter()
                    .find(|c| c.session == session && c.user == user && c.channel == channel)
                {
                    Some(c) => Some(c.id.clone()),
                    None if create_session => None,
                    None => return " → refused: no such chat".into(),
                }
            }
        };
        let request = WatchRequest {
            task_ids: ids.iter().map(|&i| task_id(i)).collect(),
            target,
            base_url: BASE.into(),
            options: options.clone(),
            chat_id,
            // Every child's session is known (`child-<task id>`): `--stop-after` needs it.
            child_sessions: ids
                .iter()
                .map(|&i| (task_id(i), format!("child-{}", task_id(i))))
                .collect(),
        };
        let now = self.now();
        let result = self.store().update(|file| {
            lifecycle::watch(&mut file.jobs, &request, atc::ids::new_job_id, now)
                .map_err(|why| anyhow::anyhow!("{why:?}"))
        });
        match result {
            Err(why) => format!(" → refused: {}", short(&why.to_string())),
            Ok(registered) => {
                if options.stop_after_secs.is_some() {
                    for r in &registered {
                        self.stop_asked.insert(r.job().task_id.clone());
                    }
                }
                // A watch that exits 0 applies what it was asked, or says what it did not.
                for r in &registered {
                    let job = r.job();
                    let mut wanted = options.clone();
                    let mut got = job.options.clone();
                    for field in r.not_applied() {
                        match *field {
                            "--on-no-answer" => wanted.on_no_answer = got.on_no_answer,
                            "--on-empty" => wanted.on_empty = got.on_empty,
                            "--fork-branch" => wanted.fork_branch = got.fork_branch.clone(),
                            "--forward" => wanted.forward = got.forward,
                            "--create-session" => wanted.create_session = got.create_session,
                            "--stop-after" => wanted.stop_after_secs = got.stop_after_secs,
                            "--check-in" => wanted.check_in_secs = got.check_in_secs,
                            other => panic!("unknown option {other}"),
                        }
                    }
                    got.allow_insecure_remote = false;
                    assert_eq!(
                        got, wanted,
                        "the watch of {} exited 0 but keeps other options than it was given, and does not say so",
                        job.task_id
                    );
                }
                let kinds: Vec<String> = registered.iter().map(kind).collect();
                format!(" → {}", kinds.join(", "))
            }
        }
    }

    fn cancel(&mut self, t: u8) -> String {
        let id = task_id(t);
        let now = self.now();
        let l = limits();
        self.store()
            .update(|file| {
                let Some(job) = file.find_mut(&id) else {
                    return Ok(" → no watch".to_owned());
                };
                let step = lifecycle::step(job, Event::Cancelled, now, &l);
                let said = format!(" → {:?}", step.outcomes);
                *job = step.job;
                Ok(said)
            })
            .expect("cancel")
    }

    fn redeliver(&mut self, t: u8, create_session: bool) -> String {
        let id = task_id(t);
        let now = self.now();
        let l = limits();
        self.store()
            .update(|file| {
                let Some(i) = lifecycle::redelivery(&file.jobs, &id) else {
                    return Ok(" → no watch".to_owned());
                };
                let step =
                    lifecycle::step(&file.jobs[i], Event::Redeliver { create_session }, now, &l);
                if step.is_ignored() {
                    return Ok(" → refused".to_owned());
                }
                file.jobs[i] = step.job;
                Ok(" → requeued".to_owned())
            })
            .expect("redeliver")
    }

    fn import(&mut self, t: u8) -> String {
        let now = self.now();
        let text = serde_json::json!({"jobs": [{"task_id": task_id(t), "session_id": "s1",
            "user_id": "u", "channel": "console", "agent_id": "default",
            "target_agent": (agent_of(t) != "default").then(|| agent_of(t)),
            "status": "pending", "registered_at": self.clock.secs()}]})
        .to_string();
        let records =
            atc::plugin::records(&text, BASE, limits().max_age, now).expect("a good file");
        let done = self
            .store()
            .update(|file| Ok(atc::plugin::merge(&mut file.jobs, records)))
            .expect("import");
        format!(" → {} added", done.added.len())
    }

    fn tick(&mut self, crash: Option<Crash>) -> String {
        self.clock.advance(Duration::from_secs(20));
        {
            let mut s = self.server.lock();
            s.crash = crash;
            s.posts = 0;
        }
        let store = self.store();
        let (tick, clock) = (&self.tick, &self.clock);
        let server = &mut self.server;
        let mut heard = Vec::new();
        let ran = catch_unwind(AssertUnwindSafe(|| {
            atc::pass::run_with(&store, tick, server, clock, &mut |gave_up| {
                heard.push(gave_up.line())
            })
        }));
        let crashed = self.server.lock().crash.take().is_none() && crash.is_some();
        match ran {
            Ok(report) => {
                let report = report.expect("a tick never fails on a good file");
                if let Some(report) = &report {
                    // Announced as saved, every one of them, once.
                    let lines: Vec<String> = report.gave_up().iter().map(|g| g.line()).collect();
                    if heard != lines {
                        self.fail(&format!(
                            "the pass announced {heard:?}, its report says {lines:?}"
                        ));
                    }
                }
                self.report = report.map(|r| r.to_json());
                String::new()
            }
            Err(payload) if payload.is::<crate::server::SimCrash>() => {
                assert!(crashed);
                " → crashed".into()
            }
            Err(payload) => std::panic::resume_unwind(payload),
        }
    }

    /// After every operation: the file loads, every status change is one `step` allows,
    /// held results are kept, ended jobs are kept for `--keep`, notices tell the truth.
    fn observe(&mut self) {
        let jobs = self
            .store()
            .load()
            .unwrap_or_else(|e| self.fail(&format!("the job file does not load: {e:#}")))
            .jobs;
        let now = self.clock.secs();
        let l = limits();
        let report = self.report.take();
        for old in &self.jobs {
            let new = jobs.iter().find(|j| j.job_id == old.job_id);
            if let Some(new) = new {
                // Loud: a tick that gave a job up says so in its report.
                if let Some(report) = &report
                    && gave_up(new)
                    && !gave_up(old)
                {
                    let named = report["tasks"].as_object().is_some_and(|by| {
                        by.values().any(|tasks| {
                            tasks
                                .as_array()
                                .is_some_and(|t| t.iter().any(|t| *t == new.task_id))
                        })
                    });
                    if !named {
                        self.fail(&format!(
                            "the tick gave {} up ({}) and its report does not say so: {report}",
                            new.task_id, new.status
                        ));
                    }
                    self.reported += 1;
                }
                if !reachable(old.status, new.status) {
                    self.fail(&format!(
                        "{} went {} → {}, which no step allows",
                        old.task_id, old.status, new.status
                    ));
                }
                continue;
            }
            let successor = jobs.iter().find(|j| j.task_id == old.task_id);
            match successor {
                Some(next) => {
                    self.replaced.insert(old.job_id.clone());
                    if holds_result(old) && next.final_text.is_none() {
                        self.fail(&format!(
                            "a re-registration of {} threw away the result it held ({} → {})",
                            old.task_id, old.status, next.status
                        ));
                    }
                }
                None => {
                    // Pruned.
                    self.forgotten.insert(old.task_id.clone());
                    if open(old, self.now()) {
                        self.fail(&format!("{} was pruned while {}", old.task_id, old.status));
                    }
                    let ended = self.ended_at.get(&old.job_id).copied().unwrap_or(now);
                    if now.saturating_sub(ended) <= l.keep.as_secs() {
                        self.fail(&format!(
                            "{} ({}) was pruned {}s after it ended, before --keep ({}s)",
                            old.task_id,
                            old.status,
                            now - ended,
                            l.keep.as_secs()
                        ));
                    }
                }
            }
        }
        for job in &jobs {
            if job.status.is_terminal() {
                self.ended_at.entry(job.job_id.clone()).or_insert(now);
            }
            if job.status == Status::Expired
                && let Some(text) = job.final_text.as_deref().filter(|_| job.notice.is_some())
            {
                let age = text
                    .split("had not finished ")
                    .nth(1)
                    .and_then(|rest| rest.split(" after").next())
                    .and_then(|d| humantime::parse_duration(d).ok());
                if age.is_none_or(|age| age < l.max_age) {
                    self.fail(&format!(
                        "the expired notice of {} misstates its age: {text:?}",
                        job.task_id
                    ));
                }
            }
            self.last.insert(job.job_id.clone(), job.clone());
        }
        self.jobs = jobs;
    }

    fn fail(&self, what: &str) -> ! {
        panic!(
            "{what}\nhistory so far:\n  {}\njobs: {}",
            self.trail.join("\n  "),
            serde_json::to_string_pretty(&self.jobs).unwrap_or_default()
        )
    }

    /// Server up, no faults, chats idle, and enough simulated time for every deadline.
    pub fn drain(&mut self) {
        {
            let mut s = self.server.lock();
            s.down = false;
            s.post_fault = None;
            s.crash = None;
            for c in s.chats.iter_mut() {
                c.busy = false;
            }
        }
        self.trail.push("-- drain --".into());
        let l = limits();
        // Each tick also moves the clock 20 s on.
        let jumps = [
            Duration::ZERO,
            l.settle,
            l.busy_deadline + l.settle,
            l.max_age,
            l.settle,
            l.busy_deadline + l.settle,
        ];
        for jump in jumps {
            self.clock.advance(jump);
            for _ in 0..2 {
                self.apply(&Op::Tick);
            }
        }
    }

    /// The promises, checked over everything the history did. Returns the delivered
    /// turns it checked, and how many of them were batches.
    pub fn check(&self) -> (u64, u64) {
        let s = self.server.lock();
        let mut turns = 0u64;
        let mut batches = 0u64;
        // Never twice: no chat holds a delivery (by its id) or a result (by its text) twice.
        for chat in s.chats.iter().chain(&s.gone) {
            let mut ids: BTreeMap<String, usize> = BTreeMap::new();
            let mut answers: BTreeMap<u8, usize> = BTreeMap::new();
            for (id, text) in delivered(chat) {
                turns += 1;
                *ids.entry(id).or_default() += 1;
                // A batch says what it holds, and holds no group member's block.
                if let Some(rest) = text.strip_prefix("[ATC_RESULTS] ") {
                    batches += 1;
                    let said: usize = rest
                        .split(' ')
                        .next()
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(0);
                    let blocks = text.matches("[TASK_ID: ").count();
                    if said < 2 || said != blocks {
                        self.fail(&format!("a batch says {said} tasks and holds {blocks}"));
                    }
                    if text.contains("[ATC_GROUP: ") {
                        self.fail("a group's turn went out inside a batch");
                    }
                }
                for i in 0..TASKS {
                    if text.contains(&answer_of(i)) {
                        *answers.entry(i).or_default() += 1;
                    }
                }
            }
            for (id, n) in &ids {
                if *n > 1 {
                    self.fail(&format!("delivery {id} is in chat {} {n} times", chat.id));
                }
            }
            for (i, n) in &answers {
                if *n > 1 && !self.forgotten.contains(&task_id(*i)) {
                    self.fail(&format!(
                        "the result of {} is in chat {} {n} times",
                        task_id(*i),
                        chat.id
                    ));
                }
            }
        }
        // Check-ins: at most `MAX_CHECK_INS` per registration (each by its own delivery id,
        // which the loop above holds to once), and only for a watch that asked for them.
        for chat in s.chats.iter().chain(&s.gone) {
            let mut per_job: BTreeMap<String, u32> = BTreeMap::new();
            for (id, text) in delivered(chat) {
                if text.starts_with("[ATC_RESULTS] ") {
                    // A check-in carried in a batch travels by its carrier's id: its block
                    // says which of its watch's check-ins it is.
                    for block in blocks(&text).filter(|b| b.contains("[STATUS: running]")) {
                        let n: u32 = block
                            .split("(check-in ")
                            .nth(1)
                            .and_then(|rest| rest.split(' ').next())
                            .and_then(|n| n.parse().ok())
                            .unwrap_or(u32::MAX);
                        if n > atc::lifecycle::MAX_CHECK_INS {
                            self.fail(&format!("a batch carries check-in {n}: {block:?}"));
                        }
                    }
                } else if text.contains("[STATUS: running]") {
                    let job = id.rsplit_once("-c").map_or(id.as_str(), |(j, _)| j);
                    *per_job.entry(job.to_owned()).or_default() += 1;
                }
            }
            for (job, n) in per_job {
                if n > atc::lifecycle::MAX_CHECK_INS {
                    self.fail(&format!("{job} checked in {n} times"));
                }
            }
        }
        // Every chat the job's triple ever named (deleted ones keep what they held).
        let turns_in = |job: &Job| -> Vec<(String, String)> {
            s.chats
                .iter()
                .chain(&s.gone)
                .filter(|c| {
                    c.session == job.target.session_id
                        && c.user == job.target.user_id
                        && c.channel == job.target.channel
                })
                .flat_map(delivered)
                .collect()
        };
        for (job_id, job) in &self.last {
            if self.replaced.contains(job_id) {
                continue;
            }
            // Nothing held without a bound: after the drain every job has ended, and nothing
            // of it is due any more (an unknown delivery's read-back window has closed).
            if open(job, self.now()) {
                self.fail(&format!(
                    "{} is still {} (outbound {:?}) after every deadline passed",
                    job.task_id,
                    job.status,
                    job.outbound()
                ));
            }
            let marker = format!("[TASK_ID: {}]", job.task_id);
            match job.outbound() {
                // Always heard: a delivered turn is in exactly its target chat.
                Some(Outbound::Delivered) => {
                    let turns = turns_in(job);
                    // A check-in names the task too: only the result counts here.
                    if !turns.iter().any(|(_, t)| {
                        blocks(t)
                            .any(|b| b.starts_with(&marker) && !b.contains("[STATUS: running]"))
                    }) {
                        self.fail(&format!(
                            "{} says delivered, but its chat has no turn for it",
                            job.task_id
                        ));
                    }
                    if job.options.group.is_some()
                        && !turns
                            .iter()
                            .any(|(_, t)| t.starts_with("[ATC_GROUP: G]") && t.contains(&marker))
                    {
                        self.fail(&format!(
                            "group member {} was delivered outside a group turn",
                            job.task_id
                        ));
                    }
                }
                // A give-up says why.
                Some(Outbound::Undelivered | Outbound::Misrouted | Outbound::Unconfirmed) => {
                    let why = job.delivery.as_ref().and_then(|d| d.error.clone());
                    if why.is_none() && job.last_error.is_none() {
                        self.fail(&format!(
                            "{} gave up ({}) without a reason",
                            job.task_id, job.status
                        ));
                    }
                }
                _ => {}
            }
            // Stops: only a watch that asked for one stops its child; a result of a child atc
            // stopped says so, once, and one it did not stop never does.
            let stopped = s.stopped.contains(&job.task_id);
            if stopped && !self.stop_asked.contains(&job.task_id) {
                self.fail(&format!(
                    "{} was stopped, but no watch of it asked for --stop-after",
                    job.task_id
                ));
            }
            if job.stopped_at.is_some() && !stopped {
                self.fail(&format!(
                    "{} says atc stopped it, but the server stopped nothing",
                    job.task_id
                ));
            }
            if let Some(text) = &job.final_text
                && job.outcome.is_some()
            {
                let lines = text.matches("[atc: stopped this task after").count();
                let want = usize::from(
                    job.stopped_at.is_some()
                        && job.carried_by.is_none()
                        && job.group_tasks.is_none(),
                );
                if job.group_tasks.is_none() && job.carried_by.is_none() && lines != want {
                    self.fail(&format!(
                        "{}'s result has {lines} stop lines, {want} expected",
                        job.task_id
                    ));
                }
            }
            if job.status == Status::Error && job.last_error.is_none() {
                self.fail(&format!("{} is error without a reason", job.task_id));
            }
            if job.status.ends_without_answer()
                && job.options.on_no_answer == OnNoAnswer::Notify
                && job.notice.is_none()
            {
                self.fail(&format!(
                    "{} ended {} and its parent was never told",
                    job.task_id, job.status
                ));
            }
        }
        (turns, batches)
    }
}

/// The texts of the atc turns a chat holds, in order.
pub fn delivered_texts(chat: &crate::server::Chat) -> Vec<String> {
    delivered(chat).into_iter().map(|(_, text)| text).collect()
}

/// The blocks of a turn, each from its `[TASK_ID: …]` line (a batch holds several).
fn blocks(text: &str) -> impl Iterator<Item = &str> {
    text.match_indices("[TASK_ID: ").map(move |(at, _)| {
        let rest = &text[at..];
        let end = rest[1..].find("[TASK_ID: ").map_or(rest.len(), |n| n + 1);
        &rest[..end]
    })
}

/// Still live: watched, its turn on its way, a read-back window open, a forward due.
fn open(job: &Job, now: Timestamp) -> bool {
    job.status == Status::Pending
        || job.outbound() == Some(Outbound::Delivering)
        || lifecycle::is_due(job, now, &limits())
        || lifecycle::forward_due(job)
}

/// Ended without delivering: the result or the notice given up.
fn gave_up(job: &Job) -> bool {
    matches!(
        job.status,
        Status::Error | Status::Lost | Status::Expired | Status::Abandoned
    ) || matches!(
        job.outbound(),
        Some(Outbound::Undelivered | Outbound::Misrouted | Outbound::Unconfirmed)
    )
}

/// Holds its rendered result, not yet (certainly) delivered.
fn holds_result(job: &Job) -> bool {
    job.final_text.is_some()
        && job.outcome.is_some()
        && matches!(
            job.status,
            Status::Delivering | Status::Undelivered | Status::Misrouted | Status::Error
        )
}

/// Whether `step`s can take a job from `from` to `to` (the statuses `lifecycle` moves
/// between; a carried group member follows its carrier's turn wherever it goes).
fn reachable(from: Status, to: Status) -> bool {
    use Status::*;
    let outbound = [Delivering, Done, Unconfirmed, Undelivered, Misrouted];
    from == to
        || match from {
            Pending => to != Pending,
            Delivering | Unconfirmed | Undelivered | Misrouted => {
                outbound.contains(&to)
                    || to == Cancelled && matches!(from, Delivering | Unconfirmed)
                    || to == Error && from == Delivering
            }
            Error => to == Delivering || outbound.contains(&to),
            Done | Cancelled | Skipped | Lost | Expired | Abandoned => false,
        }
}

fn kind(r: &lifecycle::Registered) -> String {
    let name = format!("{r:?}");
    let name = name.split([' ', '(', '{']).next().unwrap_or("");
    format!("{} {}", r.job().task_id, name)
}

fn short(text: &str) -> String {
    text.chars().take(80).collect()
}
