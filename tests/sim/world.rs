//! One simulated world: a real job file (in a private temp directory), the simulated
//! QwenPaw, the simulated clock; the operations a history is made of, each run through
//! the same library code the commands and the tick run; other processes' operations,
//! which land while a tick waits on the network; and the promises checked after every
//! operation and after the drain that ends every history, in the terms of a queue checker
//! (every block owed is delivered once, or given up and heard; none lost, none twice).

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use atc::cmd::tick::Window;
use atc::job::{ForwardMode, Job, OnEmpty, OnNoAnswer, Options, Origin, Status, Target};
use atc::lifecycle::backoff::{self, Polling};
use atc::lifecycle::kick::{Ended, TurnEnd};
use atc::lifecycle::{Limits, WatchRequest};
use atc::pass::Heartbeat;
use atc::settings::{Auth, Setting, Source, Tick};
use atc::state::Store;
use atc::time::{Clock, Timestamp};
use atc::turn::{BlockKind, Turn, TurnState};

use crate::oracle::{Fact, Owed, Verdict};
use crate::server::{Chat, Crash, End, Phase, PostFault, Proxy, SimServer, Task, Wake, delivered};

pub const BASE: &str = "http://127.0.0.1:8088/api";
/// Another server, whose plugin may tick the same job file (issue 38).
pub const OTHER: &str = "http://127.0.0.1:9099/api";
/// The simulated second every history starts at; the tasks started about then.
pub const EPOCH: u64 = 1_800_000_000;
pub const TASKS: u8 = 6;
/// The parent chats a watch can name: (session, user, channel).
pub const CHATS: [(&str, &str, &str); 3] = [
    ("s1", "u", "console"),
    ("s2", "u", "console"),
    ("s3", "u", "imsg"),
];

/// Every chat a watch can name: the parent chats ([`CHATS`]), then each task's own child
/// chat (a background task's session, `child-<task id>`, on the task's agent), for watches
/// of a delegation tree (issue 37).
pub const NCHATS: usize = CHATS.len() + TASKS as usize;

/// The chat a drawn index names (one of [`NCHATS`]): a parent chat below `CHATS.len()`,
/// a child's chat above.
pub fn chat_index(c: u8) -> usize {
    let c = c as usize;
    if c < CHATS.len() {
        c
    } else {
        CHATS.len() + (c - CHATS.len()) % TASKS as usize
    }
}

/// The (session, user, channel) of chat `c` (an index below [`NCHATS`]).
pub fn chat_at(c: usize) -> (String, &'static str, &'static str) {
    match CHATS.get(c) {
        Some((session, user, channel)) => ((*session).to_owned(), user, channel),
        None => (
            child_chat_of(c as u8 - CHATS.len() as u8),
            "default",
            "console",
        ),
    }
}

/// The agent chat `c` belongs to: a child's chat, its task's.
pub fn agent_at(c: usize) -> &'static str {
    if c < CHATS.len() {
        "default"
    } else {
        agent_of((c - CHATS.len()) as u8)
    }
}

/// Task `i`'s own chat, the session its record names.
pub fn child_chat_of(i: u8) -> String {
    format!("child-{}", task_id(i))
}

pub fn limits() -> Limits {
    Limits {
        max_strikes: 3,
        max_age: Duration::from_secs(2 * 3600),
        busy_retry: Duration::from_secs(30),
        busy_deadline: Duration::from_secs(600),
        settle: Duration::from_secs(60),
        keep: Duration::from_secs(3 * 3600),
        follow_up_depth: 2,
        poll_ceiling: Duration::from_secs(300),
    }
}

/// Where atc's QwenPaw plugin runs, as a history draws it (issue 38).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum On {
    /// No plugin names its server: every tick polls every watch.
    Nowhere,
    /// On the simulated server: its kicks (and its cadence's ticks) name it, and a watch
    /// of a known child session is polled on a back-off.
    Here,
    /// On another server that ticks the same job file: it changes nothing here.
    Elsewhere,
}

/// atc's plugin in a history (issue 38): where it runs, whether its cadence runs the
/// scheduled ticks (else a timer does, naming no server), and the ticks' `--poll-ceiling`.
/// `other`: a plugin on another server ticks the same job file too (issue 36 M5), its
/// kicks and its cadence's ticks naming that server ([`Op::OtherServer`]), beside this
/// server's own. With it, the ticks' `--concurrency` (`lanes`, issue 35): above 1, a
/// pass's parallel phases run on that many threads, whose requests interleave in an order
/// `order` (a seed) draws ([`crate::server::Lanes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plugin {
    pub on: On,
    pub cadence: bool,
    pub ceiling: u64,
    pub other: bool,
    pub lanes: usize,
    pub order: u64,
}

impl Plugin {
    /// No plugin names its server (the histories before issue 38, and the named tests).
    pub const NONE: Plugin = Plugin {
        on: On::Nowhere,
        cadence: false,
        ceiling: 300,
        other: false,
        lanes: 1,
        order: 0,
    };

    /// The server its ticks name (`ATC_BASE_URL`, as the tick reads it).
    fn server(self) -> Option<String> {
        let url = match self.on {
            On::Nowhere => return None,
            On::Here => BASE,
            On::Elsewhere => OTHER,
        };
        Some(atc::validate::base_url(url).expect("a good URL"))
    }
}

/// When task `i`'s child started (its record's `started_at`): about when the history
/// began, some of them off the ticks' 20 s grid.
pub fn started_at(i: u8) -> u64 {
    EPOCH - 10 * u64::from(i)
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

/// The child's own session, as a watch records it (`--child-session`): known for every
/// task but the last, whose watches never name it (a kick on its agent may be its child's).
pub fn child_session_of(i: u8) -> Option<String> {
    (i + 1 < TASKS).then(|| format!("child-{}", task_id(i)))
}

/// Which QwenPaw turn a kick says ended (`ATC_KICK`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kick {
    /// The child of task `i`'s turn (its session, on its agent): it may have finished.
    Child(u8),
    /// A turn in parent chat `c`: it is idle now.
    Parent(u8),
    /// A chat of the worker agent no watch names (a child whose session is unknown?).
    Worker,
    /// A chat of an agent no watch names: nothing concerns it.
    Elsewhere,
}

impl Kick {
    fn ended(self) -> TurnEnd {
        let end = |agent: &str, session: &str, user: &str, channel: &str| TurnEnd {
            agent_id: agent.into(),
            session_id: session.into(),
            user_id: Some(user.into()),
            channel: Some(channel.into()),
            watched: false,
        };
        match self {
            Kick::Child(i) => end(
                agent_of(i),
                &child_session_of(i).unwrap_or_else(|| format!("unrecorded-{}", task_id(i))),
                "default",
                "console",
            ),
            Kick::Parent(c) => {
                let (session, user, channel) = CHATS[c as usize % CHATS.len()];
                end("default", session, user, channel)
            }
            Kick::Worker => end("worker", "a-worker-chat", "default", "console"),
            Kick::Elsewhere => end("another-agent", "elsewhere", "default", "console"),
        }
    }
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
    /// To exactly a limit after the moment one record's clock counts from (`pick` chooses
    /// the record), plus `delta` seconds (-1, 0 or 1), at the next tick: the boundaries
    /// atc's `>` and `>=` are about.
    Edge(Edge, i8, u8),
}

/// Which limit a [`Jump::Edge`] lands on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edge {
    /// `--keep` after an ended job (or its turn) last changed.
    Keep,
    /// `--max-age` after a pending job was registered.
    MaxAge,
    /// `--busy-deadline` after a turn's delivery began waiting.
    BusyDeadline,
    /// `--settle` after a turn of unknown outcome was sent, or first looked absent.
    Settle,
    /// A pending watch's next back-off poll (issue 38): the limit is nothing.
    Backoff,
}

/// How a history breaks atc's config file (issue 36 M2). Whether a command refuses the
/// file is atc's own decision (`atc::settings::resolve`, asked for every command the world
/// runs while the file is there): a tick refuses it whole (exit 78); a watch leaves out
/// the tick's knobs it does not read, and says so.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Typo {
    /// A tick's knob misspelt: an unknown key (`max-agee`).
    Key,
    /// A tick's knob with a value atc cannot read (`busy-deadline = "soon"`).
    Value,
    /// A key a watch reads, wrong (`base-url = "ftp://…"`): a watch refuses the file too.
    WatchKey,
}

impl Typo {
    fn line(self) -> &'static str {
        match self {
            Typo::Key => "max-agee = \"2h\"\n",
            Typo::Value => "busy-deadline = \"soon\"\n",
            Typo::WatchKey => "base-url = \"ftp://127.0.0.1:8088/api\"\n",
        }
    }
}

/// atc's config file in a history: never written, broken, or fixed (a good file).
#[derive(Clone, Copy, Debug, Default)]
struct Config {
    written: bool,
    broken: Option<Typo>,
}

/// The command line a person or the plugin runs for `op` (what atc's settings see of it:
/// which command, which flags; the task and the chat change no refusal).
fn command_line(op: &Op) -> Option<Vec<&'static str>> {
    let chat = ["--session", "s1", "--user", "u", "--channel", "console"];
    let line: Vec<&str> = match op {
        Op::Tick | Op::CrashTick(_) | Op::OtherServer(None) => vec!["tick"],
        Op::TickNoBatch => vec!["tick", "--no-batch"],
        Op::KickedTick | Op::Kick(_) | Op::OtherServer(Some(_)) => vec!["tick", "--kicked"],
        Op::Watch { .. } => [&["watch", "task-0", "--base-url", BASE][..], &chat].concat(),
        Op::AutoWatch { .. } => [
            &["watch", "task-0", "--origin", "auto", "--base-url", BASE][..],
            &chat,
        ]
        .concat(),
        Op::ParentRead(..) => [&["parent-read", "task-0"][..], &chat].concat(),
        Op::Cancel(_) => vec!["cancel", "task-0"],
        Op::CancelCheckIns(_) => vec!["cancel", "task-0", "--check-ins"],
        Op::CancelStop(_) => vec!["cancel", "task-0", "--stop"],
        Op::Redeliver { .. } | Op::RedeliverMany { .. } | Op::RedeliverGivenUp { .. } => {
            vec!["redeliver", "task-0"]
        }
        Op::Import(_) => vec!["import-plugin-state", "/dev/null"],
        _ => return None,
    };
    Some(line)
}

fn is_tick(op: &Op) -> bool {
    matches!(
        op,
        Op::Tick | Op::TickNoBatch | Op::KickedTick | Op::Kick(_) | Op::OtherServer(_)
    )
}

fn unix(t: Timestamp) -> u64 {
    Timestamp::from_unix(0).elapsed_at(t).as_secs()
}

/// The moments a [`Jump::Edge`] may count from, and the limit it adds.
fn edges(file: &atc::job_file::JobFile, edge: Edge) -> (Vec<u64>, Duration) {
    let l = limits();
    let turns = atc::lifecycle::Turns::of(&file.turns);
    match edge {
        Edge::Keep => (
            file.jobs
                .iter()
                .filter(|j| j.watch != atc::job::Watch::Pending)
                .map(|j| unix(atc::lifecycle::last_change(j, &turns)))
                .collect(),
            l.keep,
        ),
        Edge::MaxAge => (
            file.jobs
                .iter()
                .filter(|j| j.watch == atc::job::Watch::Pending)
                .map(|j| unix(j.registered_at))
                .collect(),
            l.max_age,
        ),
        Edge::BusyDeadline => (
            file.turns
                .iter()
                .filter_map(|t| t.delivery.waiting_since.map(unix))
                .collect(),
            l.busy_deadline,
        ),
        Edge::Settle => (
            file.turns
                .iter()
                .filter(|t| t.state == TurnState::Unconfirmed)
                .flat_map(|t| {
                    let d = &t.delivery;
                    [d.last_attempt_at.max(d.unknown_since), d.absent_since]
                })
                .flatten()
                .map(unix)
                .collect(),
            l.settle,
        ),
        // The world's own: `Env::backoff_times`.
        Edge::Backoff => (Vec::new(), Duration::ZERO),
    }
}

/// One thing that happens in a history. `tasks` is a bit set of task indices; `opts` bits:
/// 1 `--on-no-answer silent`, 2 `--on-empty skip`, 4 `--fork-branch b`, 8 `--forward
/// never`, 16 `--stop-after 1s`, 32 `--check-in 1s`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Watch {
        tasks: u8,
        chat: u8,
        group: bool,
        create_session: bool,
        opts: u8,
    },
    /// What atc's plugin runs at the end of a parent's turn in `chat` whose
    /// `submit_to_agent` calls started `tasks` (a bit set): `watch --origin auto`, each task
    /// with its own agent and child session.
    AutoWatch {
        tasks: u8,
        chat: u8,
    },
    /// The parent in `chat` read task `.0`'s finished result itself (`check_agent_task`),
    /// which atc's plugin reports: `atc parent-read`. Only a task that finished can be read.
    ParentRead(u8, u8),
    Cancel(u8),
    /// `atc cancel T --check-ins`.
    CancelCheckIns(u8),
    /// `atc cancel T --stop`.
    CancelStop(u8),
    Redeliver {
        task: u8,
        create_session: bool,
    },
    /// `atc redeliver T1 T2 …` of the tasks in `tasks` (a bit set), all or none.
    RedeliverMany {
        tasks: u8,
        create_session: bool,
    },
    /// `atc redeliver T` of a task a give-up named, as a person does on reading it: of the
    /// tasks `atc doctor` and `atc status` show waiting (`status::stuck`), the latest
    /// first, `pick` chooses one.
    RedeliverGivenUp {
        pick: u8,
        create_session: bool,
    },
    Tick,
    /// A tick with `--no-batch` (turns already composed still go out as they are).
    TickNoBatch,
    /// A tick a QwenPaw turn's end started (`--kicked`) by an older plugin, which does not
    /// say which turn: it leaves a mark when another tick runs, and looks again while a busy
    /// parent holds a delivery (its looks poll nothing).
    KickedTick,
    /// A tick a QwenPaw turn's end started, told which turn (`ATC_KICK`): it looks only at
    /// what that turn concerns. Nobody hears it (its stderr goes to /dev/null).
    Kick(Kick),
    CrashTick(Crash),
    Import(u8),
    /// Another process runs `op` while the next tick waits at `phase`.
    Interleave(Phase, Box<Op>),
    /// Two operations of other processes at one phase, one after the other: e.g. a POST
    /// that took minutes (a jump) and a turn that ended meanwhile (its kick finds the tick
    /// running and leaves its mark).
    Both(Box<Op>, Box<Op>),
    /// The same, the `n`-th time after the first that the tick waits at `phase` (a later
    /// POST of a pass, a later look, a kicked tick's later pass).
    InterleaveAt(Phase, u8, Box<Op>),
    Finish(u8, Ending),
    /// Every running task finishes with its answer.
    FinishAll,
    /// The child's turn ends as `Finish` says, and the plugin's kick for that turn's end
    /// runs (a tick, `Kick::Child`). A plain `Finish` is a kick missed: only a scheduled
    /// tick finds the result (issue 38: the back-off's poll, in a world with a plugin).
    FinishKicked(u8, Ending),
    Restart,
    DeleteChat(u8),
    CreateChat(u8),
    /// A person archives the chat (`true`) or takes it out of the archive (`false`):
    /// QwenPaw still takes POSTs into it; atc says a result went there.
    Archive(u8, bool),
    Busy(u8, bool),
    Fault(PostFault),
    Down(bool),
    /// The server's stop route fails (500) from now on, or no more.
    StopFault(bool),
    /// The same fault for a later POST: `.0` POSTs go by first.
    FaultLater(u8, PostFault),
    /// The same fault for the next POST of a follow-up (issue 37).
    FaultUp(PostFault),
    /// How the turn the next stored POST wakes ends (by default: a reply, at once).
    Woken(Wake),
    /// The network turns flaky (every other POST's answer lost after the server stored
    /// it: read-back's work), or steady again.
    Flaky(bool),
    Jump(Jump),
    /// A person (or a model) breaks atc's config file (issue 36 M2): from now on every
    /// command atc refuses the file for exits 78 and does nothing.
    BreakConfig(Typo),
    /// The config file is fixed (the drain fixes it first, if need be).
    FixConfig,
    /// A tick the plugin on another server starts (issue 36 M5), naming that server: its
    /// kick for the end of a turn there (`Some`), or its cadence's tick (`None`).
    OtherServer(Option<Kick>),
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
    pub fn secs(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// `Sometimes`, one counter a branch, with `named` (each counter beside the words a failing
/// run prints) and `add`, written from one list.
macro_rules! sometimes {
    ($($(#[$doc:meta])* $field:ident: $label:literal,)*) => {
        /// The branches a run must reach, each counted.
        #[derive(Clone, Copy, Debug, Default)]
        pub struct Sometimes {
            $($(#[$doc])* pub $field: u64,)*
        }

        impl Sometimes {
            pub fn named(&self) -> Vec<(&'static str, u64)> {
                vec![$(($label, self.$field)),*]
            }

            pub fn add(&mut self, other: &Sometimes) {
                $(self.$field += other.$field;)*
            }
        }
    };
}

// The branches a run must reach ("sometimes" assertions, as Antithesis has them): each
// is counted, and a run that never reached one fails.
sometimes! {
    /// A cancel landed while its job's turn was claimed and in flight (between the claim
    /// and the record of what the POST did).
    cancel_between_claim_and_record: "cancel between claim and record",
    /// A claimed turn's only job was cancelled.
    claimed_turn_lost_its_only_job: "claimed turn lost its only job",
    /// A tick died after a POST was served and before its outcome was saved.
    crash_between_post_and_save: "crash between POST and save",
    /// A turn of several blocks was read back and found.
    batch_read_back: "read-back of a batch",
    /// A turn answered 409 after its claim, then was delivered.
    busy_then_delivered: "409 then delivered",
    /// `cancel --check-ins` of a job whose check-in rode in a turn of several blocks.
    batched_check_in_turned_off: "cancel --check-ins of a batched check-in",
    /// A turn of several blocks was refused.
    refused_batch: "refused batch",
    /// A second tick started while a tick was between its phases.
    second_tick_during_a_tick: "a second tick during a tick",
    /// A kicked tick made more than one pass.
    kicked_passes: "a kicked tick's extra passes",
    /// The parent read a result whose turn was claimed (it went out as it was).
    read_in_flight: "a read of a claimed turn",
    /// The parent read a result that sat in an open turn (it left the turn).
    read_out_of_an_open_turn: "a read out of an open turn",
    /// An automatic watch met a live watch of the same task (the model's own).
    auto_watch_met_a_watch: "an auto-watch of a watched task",
    /// A give-up a tick nobody heard decided was said by a later tick.
    said_late: "a give-up said by a later tick",
    /// A kick whose turn concerned nothing: no request, no write.
    kick_unconcerned: "a kick that concerned nothing",
    /// A kick polled a watch whose child's session is unknown (once per chat).
    kick_polled_unknown: "a kick's poll of a child of unknown session",
    /// A tick gave up stopping a child (`--stop-after`): its stops kept failing.
    stop_given_up: "a stop given up",
    /// The server stored a POST after atc had given up waiting for its answer.
    stored_late: "a POST the server stored late",
    /// The clock landed on a limit, or a second either side (`Jump::Edge`).
    on_an_edge: "the clock on a limit's edge",
    /// A kick for a child's turn polled the watch that names its session.
    kick_polled_child: "a kick's poll of the child it named",
    /// A parent read a task watched for another chat (that read is not this chat's).
    read_from_another_chat: "a read by another chat than the watch's",
    /// A child failed with no output under a watch that skips an empty answer.
    failed_under_skip: "a failed child with no output under --on-empty skip",
    /// A watch passing another task's child session was refused.
    other_child_session_refused: "a watch passing another task's child session refused",
    /// A group's name, its earlier turn delivered, took new members: its next round.
    group_next_round: "a group's next round under the same name",
    /// An operation of another process let its phase go by, to land at a later one.
    landed_later: "an operation landing at a later phase of a tick",
    /// A follow-up (issue 37) stored in a chat.
    follow_up: "a follow-up delivered",
    /// A follow-up of a follow-up (three levels: a great-grandchild's result went up twice).
    three_levels: "three levels",
    /// A result landed in a child's chat before the child's own result had landed anywhere
    /// (the child still running, as far as atc can know).
    child_running: "a child still running when its grandchild's result landed",
    /// A follow-up whose POST's outcome was unknown, read back and found.
    follow_up_read_back: "a follow-up read back after an unknown POST outcome",
    /// A woken reply that stayed down at the depth limit.
    depth_limit: "a woken reply kept down by the depth limit",
    /// A reply woken in the chat a watch of its task delivers into (a --session that was
    /// the child's own) kept down: up is where it already is.
    own_chat: "a reply woken in its watch's own chat kept down",
    /// A watch naming its task's own child session as --session (known: --child-session,
    /// or an earlier watch's) refused.
    own_chat_refused: "a watch for its task's own child's chat refused",
    /// A scheduled tick left a pending watch on its back-off unpolled (issue 38).
    backoff_skipped: "a scheduled tick skipped a watch on its back-off",
    /// A scheduled tick polled a watch on its back-off (not at its own time) whose child
    /// had ended unpolled: a missed kick's result, found by the back-off.
    backoff_found: "a missed kick's result found by the back-off",
    /// A scheduled tick polled a watch on its back-off at its own time (a check-in, its
    /// stop, its expiry).
    backoff_own_time: "a watch on back-off polled at its own time",
    /// A watch on its back-off whose child ended a ceiling ago, unpolled since, was owed
    /// a poll by a scheduled tick (and the tick is checked to have polled it).
    backoff_ceiling: "a poll owed a ceiling after a missed kick",
    /// The clock landed on a watch's back-off time, or a second either side.
    on_a_backoff_time: "the clock on a back-off time",
    /// A back-off time came while a scheduled tick ran (the clock moved between its
    /// passes), and the watch that tick did not poll kept it.
    backoff_kept_mid_tick: "a back-off time come during a tick, kept",
    /// A back-off time had come when a scheduled tick crashed, and the watch it did not
    /// poll kept it.
    backoff_kept_crashed: "a back-off time a crashed tick did not poll, kept",
    /// A tick refused the broken config file (exit 78): no pass ran, nothing changed.
    config_refused_tick: "a tick refused by a broken config",
    /// A watch (or an automatic one) recorded while the config file was broken.
    config_broken_watch: "a watch recorded while the config was broken",
    /// A result watched while the config file was broken, delivered once it was fixed.
    config_fixed_delivered: "a result delivered after the config was fixed",
    /// A tick another server's plugin started (its kick or its cadence) ran among this
    /// server's own (its plugin here too).
    other_server_tick: "a tick another server's plugin started",
    /// Another server's tick started while a tick ran (between its phases).
    other_server_mid_pass: "another server's tick during a tick",
    /// A tick's parallel phase ran on several lanes whose requests interleaved (another
    /// lane went on where one stopped for a request: `--concurrency` above 1).
    lanes_interleaved: "a tick's lanes interleaved",
    /// `redeliver` of several sent a turn two of them shared once ("goes again with").
    shared_turn_redelivered: "a redeliver of several sending their shared turn once",
    /// `redeliver` put a given-up follow-up (issue 37) back in line.
    follow_up_redelivered: "a given-up follow-up sent again by redeliver",
    /// A turn was delivered into a chat a person had archived, and its record says so.
    archived_delivered: "a delivery into an archived chat",
}

/// What the blocks of a history came to, as a queue checker counts them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Queue {
    /// Results and notices atc took on.
    pub owed: u64,
    /// In the parent chat exactly once.
    pub delivered_once: u64,
    /// Given up (undelivered, misrouted, refused, of unknown outcome).
    pub given_up: u64,
    /// Of those, said in a give-up line.
    pub heard: u64,
    /// Taken back by a person (`cancel`).
    pub withdrawn: u64,
    /// Not posted: the parent read it itself (`parent-read`) before its turn was claimed.
    pub read: u64,
    /// Check-ins owed, and of those in a chat.
    pub check_ins: u64,
    pub checked_in: u64,
    /// Failures (the run stops at the first): owed and in no chat, or in one twice.
    pub lost: u64,
    pub duplicated: u64,
}

impl Queue {
    pub fn add(&mut self, other: &Queue) {
        self.owed += other.owed;
        self.delivered_once += other.delivered_once;
        self.given_up += other.given_up;
        self.heard += other.heard;
        self.withdrawn += other.withdrawn;
        self.read += other.read;
        self.check_ins += other.check_ins;
        self.checked_in += other.checked_in;
        self.lost += other.lost;
        self.duplicated += other.duplicated;
    }
}

/// What the operations of the world note down (they may run inside a tick).
#[derive(Default)]
pub struct Notes {
    /// Tasks some watch registered with `--stop-after`, or a person stopped (`cancel --stop`).
    pub stop_asked: BTreeSet<String>,
    /// Give-up lines heard (said by a tick a person hears), in order.
    pub heard: Vec<String>,
    /// What other processes did while a tick ran.
    pub others: Vec<String>,
    /// Registrations made where the file held no record of the task (a watch's `New`, an
    /// import): the one before it, if any, was pruned, not replaced.
    pub fresh: BTreeSet<String>,
    /// Registrations that replaced an ended record, by new job id, with the status that
    /// record had then (another process may have changed it since the last look).
    pub rewatched: BTreeMap<String, Status>,
    /// Registrations that replaced a record, by new job id, with the job id replaced.
    pub replaced_by: BTreeMap<String, String>,
    /// What the world did, for the oracle (`oracle.rs`): never atc's records.
    pub facts: Vec<(u64, Fact)>,
    /// Where each fact falls in the world's order (`SimServer::seq`), beside `facts`.
    pub fact_seqs: Vec<u64>,
    /// Give-up lines heard, with where each falls in the world's order.
    pub heard_at: Vec<(u64, String)>,
    /// The ticks (`SimServer::tick`) that crashed.
    pub crashed: BTreeSet<u64>,
    /// The reports of ticks that ran inside another tick (between a kicked tick's passes).
    pub nested_reports: Vec<serde_json::Value>,
    /// Registrations made while the config file was broken, by job id, until their result
    /// is delivered (issue 36 M2).
    pub broken_watches: BTreeSet<String>,
    pub sometimes: Sometimes,
}

/// Everything an operation needs, whoever runs it: the job file, the clock, the server.
pub struct Env {
    pub path: PathBuf,
    pub clock: SimClock,
    pub server: SimServer,
    pub notes: Mutex<Notes>,
    tick: Tick,
    /// atc's plugin in this history (issue 38).
    pub plugin: Plugin,
    /// atc's config file (issue 36 M2): where it is (`ATC_CONFIG`), and what it holds.
    config_path: PathBuf,
    config: Mutex<Config>,
    /// The next job id: counted, not drawn from `/dev/urandom`, so that one seed gives one
    /// history and one set of totals (turn ids, and `compose`'s ties between open turns,
    /// follow from the job ids).
    ids: AtomicU64,
}

/// A kicked tick's window in simulated time: up to four looks again; other processes'
/// operations for [`Phase::Pause`] land in the pause.
struct SimWindow<'a> {
    server: &'a SimServer,
    left: usize,
}

impl Window for SimWindow<'_> {
    fn restart(&mut self) {
        self.left = 4;
    }

    fn pause(&mut self, _store: &Store) -> bool {
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        self.server.interleave(Phase::Pause);
        true
    }

    fn settle(&self, _store: &Store) {
        self.server.interleave(Phase::Pause);
    }
}

/// The server as a tick talks to it, counting its requests.
struct Counting<'a> {
    server: Proxy<'a>,
    requests: std::sync::atomic::AtomicU64,
}

impl Counting<'_> {
    fn count(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }
}

impl atc::qwenpaw::Server for Counting<'_> {
    fn auth(&self) -> &Auth {
        self.server.auth()
    }
    fn lanes(&self, workers: usize, items: usize) -> usize {
        self.server.lanes(workers, items)
    }
    fn lane_started(&self, lane: usize) {
        self.server.lane_started(lane);
    }
    fn lane_ended(&self, lane: usize) {
        self.server.lane_ended(lane);
    }
    fn allow_insecure(&mut self, base_url: &str) {
        self.server.allow_insecure(base_url);
    }
    fn get_task(&self, base: &str, task_id: &str, agent: &str) -> Reply {
        self.count();
        self.server.get_task(base, task_id, agent)
    }
    fn list_chats(&self, base: &str, agent: &str, filter: Option<(&str, &str)>) -> Reply {
        self.count();
        self.server.list_chats(base, agent, filter)
    }
    fn chat_status(&self, base: &str, agent: &str, chat_id: &str) -> Reply {
        self.count();
        self.server.chat_status(base, agent, chat_id)
    }
    fn chat_history(&self, base: &str, agent: &str, chat_id: &str) -> Reply {
        self.count();
        self.server.chat_history(base, agent, chat_id)
    }
    fn post_turn(&self, base: &str, agent: &str, body: &serde_json::Value) -> Reply {
        self.count();
        self.server.post_turn(base, agent, body)
    }
    fn send_message(&self, base: &str, agent: &str, body: &serde_json::Value) -> Reply {
        self.count();
        self.server.send_message(base, agent, body)
    }
    fn channel_health(&self, base: &str, agent: &str, channel: &str) -> Reply {
        self.count();
        self.server.channel_health(base, agent, channel)
    }
    fn stop_chat(&self, base: &str, agent: &str, chat_id: &str) -> Reply {
        self.count();
        self.server.stop_chat(base, agent, chat_id)
    }
    fn list_agents(&self, base: &str) -> Reply {
        self.count();
        self.server.list_agents(base)
    }
}

type Reply = Result<atc::qwenpaw::Answer, atc::qwenpaw::Transport>;

/// What a tick op is started for: `None` a timer's tick, else the kick (`Ended`), and
/// whether a person hears the tick (a timer's: yes; a kick's: nobody).
fn kick_of(op: &Op) -> (Option<Ended>, bool) {
    match op {
        Op::KickedTick => (Some(Ended::Unknown), false),
        Op::Kick(kick) | Op::OtherServer(Some(kick)) => {
            (Some(Ended::Known(vec![kick.ended()])), false)
        }
        _ => (None, true),
    }
}

impl Env {
    /// The limits the world's ticks run with (`--poll-ceiling` drawn per history).
    pub fn limits(&self) -> &Limits {
        &self.tick.limits
    }

    /// A tick as the world starts it: kicked (by the plugin), or scheduled (by the
    /// plugin's cadence, which names its server, or by a timer, which names none).
    fn tick_for(&self, kicked: bool) -> Tick {
        let mut tick = self.tick.clone();
        tick.kicked = kicked;
        tick.cadence = !kicked && self.plugin.cadence && self.plugin.on != On::Nowhere;
        tick.server = self.plugin.server().filter(|_| kicked || tick.cadence);
        tick
    }

    /// The tick `op` starts: this server's (as [`Env::tick_for`] says), or one another
    /// server's plugin started (its kick or its cadence's), naming that server.
    fn tick_of(&self, op: &Op) -> Tick {
        match op {
            Op::OtherServer(kick) => {
                let mut tick = self.tick.clone();
                tick.kicked = kick.is_some();
                tick.cadence = kick.is_none();
                tick.server = Some(atc::validate::base_url(OTHER).expect("a good URL"));
                tick
            }
            _ => self.tick_for(kick_of(op).0.is_some()),
        }
    }

    /// Whether the config file is broken now.
    pub fn config_broken(&self) -> bool {
        self.config
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .broken
            .is_some()
    }

    /// Writes the config file (0600): broken by `typo`, or good (`None`).
    fn write_config(&self, typo: Option<Typo>) {
        use std::os::unix::fs::OpenOptionsExt;
        let text = match typo {
            Some(typo) => format!("# atc\nkeep = \"3h\"\n{}", typo.line()),
            None => "# atc\nkeep = \"3h\"\nmax-age = \"2h\"\n".to_owned(),
        };
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&self.config_path)
            .expect("the config file");
        std::io::Write::write_all(&mut file, text.as_bytes()).expect("the config file");
        *self.config.lock().unwrap_or_else(|p| p.into_inner()) = Config {
            written: true,
            broken: typo,
        };
    }

    /// Whether atc refuses `op` for the config file as it is (issue 36 M2): atc's own
    /// settings decide (`atc::settings::resolve`, as the command would run). A refusal is
    /// said (exit 78, naming the file); a good file is refused by nothing; a tick never
    /// goes on past a broken file; a watch that does names what it left out. `None`: the
    /// command runs.
    fn refusal(&self, op: &Op) -> Option<String> {
        let config = *self.config.lock().unwrap_or_else(|p| p.into_inner());
        if !config.written {
            return None;
        }
        let line = command_line(op)?;
        let cli = atc::cli::parse_from(line.iter().copied())
            .unwrap_or_else(|why| panic!("the world's command line {line:?}: {why}"));
        let env = atc::settings::VarsEnv::new([
            format!("ATC_CONFIG={}", self.config_path.display()),
            format!("ATC_STATE={}", self.path.display()),
            format!(
                "HOME={}",
                self.config_path.parent().expect("a dir").display()
            ),
        ]);
        match atc::settings::resolve(cli, &env) {
            Ok(settings) => {
                if let Some(typo) = config.broken {
                    match settings.action {
                        atc::settings::Action::Watch(watch) => assert!(
                            !watch.config_skipped.is_empty(),
                            "{line:?} went on past a broken config file ({typo:?}) and says nothing of it"
                        ),
                        atc::settings::Action::Tick(_) => {
                            panic!("a tick went on past a broken config file ({typo:?})")
                        }
                        _ => {}
                    }
                }
                None
            }
            Err(failure) => {
                // Recording a watch does not depend on the tick's knobs: a broken file
                // loses a watch only where the watch reads it.
                assert!(
                    !matches!(op, Op::Watch { .. } | Op::AutoWatch { .. })
                        || config.broken == Some(Typo::WatchKey),
                    "{line:?} refused a config file broken in a tick's knob ({:?}): {}",
                    config.broken,
                    failure.message
                );
                let file = self.config_path.display().to_string();
                assert!(
                    config.broken.is_some()
                        && failure.exit == atc::exit::Exit::Config
                        && failure.message.contains(&file),
                    "{line:?} refused ({:?}) a config file {:?}: {}",
                    failure.exit,
                    config.broken,
                    failure.message
                );
                if is_tick(op) || matches!(op, Op::CrashTick(_)) {
                    self.notes().sometimes.config_refused_tick += 1;
                    // The person who sees it asks `atc config show` what is wrong: it
                    // shows the file past that line and names it, where the refusal's
                    // own advice sends them (it once refused the same way).
                    let cli = atc::cli::parse_from(["config", "show"]).expect("a command");
                    match atc::settings::resolve(cli, &env).map(|s| s.action) {
                        Ok(atc::settings::Action::Config(shown)) => assert_eq!(
                            shown.file.skipped,
                            std::slice::from_ref(&failure.message),
                            "`atc config show` does not name the line the tick refused"
                        ),
                        other => panic!(
                            "`atc config show` refused a config file a tick refused ({:?}): {other:?}",
                            config.broken
                        ),
                    }
                }
                let why = failure.message.replace(&file, "config.toml");
                Some(format!(" → refused (exit 78): {}", short(&why)))
            }
        }
    }

    /// Whether `tick`, starting at `now` after the heartbeat `beat`, counts the plugin of
    /// `base_url` as ticking (its own mark included), as the pass does.
    fn kicking(&self, beat: &Heartbeat, tick: &Tick, base_url: &str, now: Timestamp) -> bool {
        tick.server.as_deref() == Some(base_url)
            || beat.kicking(base_url, now, self.limits().poll_ceiling)
    }

    /// The next back-off poll of each pending watch on one, for the next scheduled tick
    /// (a [`Jump::Edge`] to [`Edge::Backoff`]).
    fn backoff_times(&self, file: &atc::job_file::JobFile) -> Vec<u64> {
        let beat = Heartbeat::read(&self.store().tick_lock_path());
        let tick = self.tick_for(false);
        let now = self.now().saturating_add(Duration::from_secs(20));
        file.jobs
            .iter()
            .filter(|j| j.watch == atc::job::Watch::Pending)
            .filter_map(|j| {
                let kicking = self.kicking(&beat, &tick, &j.base_url, now);
                match backoff::polling(j, kicking, beat.last_swept_at, now, self.limits()) {
                    Polling::BackOff { next, own: false } => Some(unix(next)),
                    _ => None,
                }
            })
            .collect()
    }

    /// A fresh job id (12 hex digits), the same in every run of a history.
    fn job_id(&self) -> String {
        format!("{:012x}", self.ids.fetch_add(1, Ordering::Relaxed))
    }

    pub fn store(&self) -> Store {
        Store::new(self.path.clone())
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    fn fact(&self, fact: Fact) {
        let at = self.clock.secs();
        let seq = self.server.next_seq();
        let mut n = self.notes();
        n.facts.push((at, fact));
        n.fact_seqs.push(seq);
    }

    /// Give-up lines a person heard, in the world's order.
    fn hear(&self, lines: &[String]) {
        let mut n = self.notes();
        for line in lines {
            let seq = self.server.next_seq();
            n.heard.push(line.clone());
            n.heard_at.push((seq, line.clone()));
        }
    }

    /// The oracle's record of what a watch registered (a refusal registers nothing).
    /// `named`: the child sessions the request named, by task.
    fn registered(
        &self,
        registered: &[atc::lifecycle::Registered],
        chat: u8,
        agent: Option<&str>,
        named: &[(String, String)],
    ) {
        use atc::lifecycle::Registered as R;
        for r in registered {
            let epoch = match r {
                R::New(_) | R::Rewatched { .. } | R::Kept { .. } | R::Retargeted { .. } => true,
                R::AlreadyWatching(_) | R::Updated { .. } => false,
                R::LeftAlone { .. } => continue,
            };
            let job = r.job();
            self.fact(Fact::Watched {
                task: job.task_id.clone(),
                chat: chat_index(chat),
                child: named
                    .iter()
                    .find(|(t, _)| *t == job.task_id)
                    .map(|(_, session)| session.clone()),
                epoch,
                skip_empty: job.options.on_empty == OnEmpty::Skip,
                agent: agent.is_none_or(|a| {
                    let i: u8 = job.task_id.trim_start_matches("task-").parse().unwrap_or(0);
                    a == agent_of(i)
                }),
            });
        }
    }

    /// A watch recorded while the config file is broken (issue 36 M2): its result is
    /// followed until it is delivered.
    fn recorded_while_broken(&self, registered: &[atc::lifecycle::Registered]) {
        if !self.config_broken() {
            return;
        }
        let mut n = self.notes();
        for r in registered {
            if !matches!(r, atc::lifecycle::Registered::LeftAlone { .. }) {
                n.sometimes.config_broken_watch += 1;
                n.broken_watches.insert(r.job().job_id.clone());
            }
        }
    }

    fn notes(&self) -> std::sync::MutexGuard<'_, Notes> {
        self.notes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An operation of another process, landing while a tick waits at `phase`.
    pub fn run_other(&self, phase: Phase, op: &Op) {
        if let Op::Both(first, then) = op {
            self.run_other(phase, first);
            self.run_other(phase, then);
            return;
        }
        // A command atc refuses for a broken config file does nothing (issue 36 M2).
        if let Some(refused) = self.refusal(op) {
            self.notes()
                .others
                .push(format!("[{phase:?}] {op:?}{refused}"));
            return;
        }
        // What it meets, for the branches a run must reach.
        let file = self.store().load().ok();
        let turn_of = |t: u8| {
            let file = file.as_ref()?;
            let job = file.find(&task_id(t))?;
            file.turn_of(job).cloned().map(|turn| (job.clone(), turn))
        };
        match op {
            Op::Cancel(t) | Op::CancelStop(t) => {
                if let Some((job, turn)) = turn_of(*t)
                    && turn.in_flight()
                    && job.shown() != Status::Cancelled
                    && turn.carries_job(&job.job_id)
                {
                    let mut n = self.notes();
                    n.sometimes.cancel_between_claim_and_record += 1;
                    if turn.carries.len() == 1 {
                        n.sometimes.claimed_turn_lost_its_only_job += 1;
                    }
                }
            }
            op if is_tick(op) => {
                let mut n = self.notes();
                n.sometimes.second_tick_during_a_tick += 1;
                if matches!(op, Op::OtherServer(_)) {
                    n.sometimes.other_server_mid_pass += 1;
                }
            }
            _ => {}
        }
        let said = match op {
            op if is_tick(op) => self.nested_tick(op),
            Op::CrashTick(_) | Op::Interleave(..) | Op::InterleaveAt(..) => {
                " (not while a tick runs)".into()
            }
            other => self.act_now(other),
        };
        self.notes()
            .others
            .push(format!("[{phase:?}] {op:?}{said}"));
    }

    /// A tick that starts while another holds the tick lock: it finds the lock held and
    /// exits; a kicked one leaves its mark for the running tick's next pass.
    fn nested_tick(&self, op: &Op) -> String {
        let (kick, heard) = kick_of(op);
        let tick = self.tick_of(op);
        let store = self.store();
        let mut proxy = Proxy(&self.server);
        let mut said = Vec::new();
        let reports = atc::cmd::tick::passes(
            &store,
            kick,
            heard,
            &mut |intent, say| {
                atc::pass::run_with(&store, &tick, &mut proxy, &self.clock, intent, say)
            },
            &mut SimWindow {
                server: &self.server,
                left: 0,
            },
            &mut |line| said.push(line.to_owned()),
            &mut |_| Ok(()),
        )
        .expect("a nested tick never fails");
        // Between a kicked tick's passes the lock is free: this one ran a pass of its own,
        // and what it gave up a person heard from it, if anyone hears it.
        if let Err(why) = said_as_reported(&reports, heard, &said) {
            panic!("a nested tick: {why}");
        }
        self.hear(&said);
        self.notes()
            .nested_reports
            .extend(reports.iter().map(|r| r.to_json()));
        format!(" → {} passes", reports.len())
    }

    /// Every operation but a tick: what the command (or the world) does, unless atc
    /// refuses the config file for it.
    fn act(&self, op: &Op) -> String {
        self.refusal(op).unwrap_or_else(|| self.act_now(op))
    }

    fn act_now(&self, op: &Op) -> String {
        match op {
            Op::Watch {
                tasks,
                chat,
                group,
                create_session,
                opts,
            } => self.watch(*tasks, *chat, *group, *create_session, *opts),
            Op::AutoWatch { tasks, chat } => self.auto_watch(*tasks, *chat),
            Op::ParentRead(t, chat) => self.parent_read(*t, *chat),
            Op::Cancel(t) => self.cancel(*t),
            Op::CancelCheckIns(t) => self.cancel_check_ins(*t),
            Op::CancelStop(t) => self.cancel_stop(*t),
            Op::Redeliver {
                task,
                create_session,
            } => self.redeliver(*task, *create_session),
            Op::RedeliverMany {
                tasks,
                create_session,
            } => self.redeliver_many(*tasks, *create_session),
            Op::RedeliverGivenUp {
                pick,
                create_session,
            } => self.redeliver_given_up(*pick, *create_session),
            Op::Import(t) => self.import(*t),
            Op::Finish(t, ending) => {
                let (at, seq) = (self.clock.secs(), self.server.next_seq());
                let mut s = self.server.lock();
                let end = match ending {
                    Ending::Answer => End::Answer(answer_of(*t)),
                    Ending::Empty => End::Empty,
                    Ending::Failed => End::Failed,
                };
                if let Some(task) = s.tasks.get_mut(&task_id(*t))
                    && task.finish(end, at, seq)
                {
                    drop(s);
                    if *ending == Ending::Failed
                        && self.store().load().ok().is_some_and(|file| {
                            file.find(&task_id(*t)).is_some_and(|j| {
                                j.watch == atc::job::Watch::Pending
                                    && j.options.on_empty == OnEmpty::Skip
                            })
                        })
                    {
                        self.notes().sometimes.failed_under_skip += 1;
                    }
                    self.fact(Fact::Finished { task: task_id(*t) });
                }
                String::new()
            }
            Op::FinishAll => {
                let (at, seq) = (self.clock.secs(), self.server.next_seq());
                let mut s = self.server.lock();
                let mut ended = Vec::new();
                for (id, task) in s.tasks.iter_mut() {
                    let i: u8 = id.trim_start_matches("task-").parse().unwrap_or(0);
                    if task.finish(End::Answer(answer_of(i)), at, seq) {
                        ended.push(id.clone());
                    }
                }
                drop(s);
                for task in ended {
                    self.fact(Fact::Finished { task });
                }
                String::new()
            }
            Op::Restart => {
                let mut s = self.server.lock();
                s.tasks.clear();
                s.turns.clear();
                drop(s);
                self.fact(Fact::Restarted);
                String::new()
            }
            Op::DeleteChat(c) => {
                let (session, user, channel) = chat_at(chat_index(*c));
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
            Op::Archive(c, on) => {
                let (session, user, channel) = chat_at(chat_index(*c));
                let now = self.clock.secs();
                for x in self.server.lock().chats.iter_mut() {
                    if x.session == session
                        && x.user == user
                        && x.channel == channel
                        && x.is_archived() != *on
                    {
                        x.archived.push((now, *on));
                    }
                }
                String::new()
            }
            Op::Busy(c, busy) => {
                let (session, ..) = chat_at(chat_index(*c));
                for x in self.server.lock().chats.iter_mut() {
                    if x.session == session {
                        x.busy = *busy;
                    }
                }
                String::new()
            }
            Op::Fault(fault) => {
                let mut s = self.server.lock();
                s.post_fault = Some(*fault);
                s.fault_skip = 0;
                String::new()
            }
            Op::FaultUp(fault) => {
                self.server.lock().up_fault = Some(*fault);
                String::new()
            }
            Op::FaultLater(skip, fault) => {
                let mut s = self.server.lock();
                s.post_fault = Some(*fault);
                s.fault_skip = *skip;
                String::new()
            }
            Op::Down(down) => {
                self.server.lock().down = *down;
                String::new()
            }
            Op::StopFault(on) => {
                self.server.lock().stop_fault = *on;
                String::new()
            }
            Op::Woken(wake) => {
                self.server.lock().next_wake = Some(*wake);
                String::new()
            }
            Op::Flaky(on) => {
                self.server.lock().flaky = *on;
                String::new()
            }
            Op::Jump(jump) => {
                let l = limits();
                self.clock.advance(match jump {
                    Jump::Minutes(m) => Duration::from_secs(60 * u64::from(*m % 10 + 1)),
                    Jump::PastBusyDeadline => l.busy_deadline + Duration::from_secs(1),
                    Jump::PastMaxAge => l.max_age + Duration::from_secs(1),
                    Jump::PastKeep => l.keep + Duration::from_secs(1),
                    Jump::Edge(edge, delta, pick) => {
                        let Ok(file) = self.store().load() else {
                            return " (no file)".into();
                        };
                        let (bases, limit) = match edge {
                            Edge::Backoff => (self.backoff_times(&file), Duration::ZERO),
                            _ => edges(&file, *edge),
                        };
                        let Some(base) = bases.get(*pick as usize % bases.len().max(1)) else {
                            return " (nothing counts to it)".into();
                        };
                        // The next tick adds 20 s before it looks.
                        let target =
                            (base + limit.as_secs()).saturating_add_signed(i64::from(*delta)) - 20;
                        let now = self.clock.secs();
                        if target <= now {
                            return " (already past)".into();
                        }
                        let mut n = self.notes();
                        n.sometimes.on_an_edge += 1;
                        n.sometimes.on_a_backoff_time += u64::from(*edge == Edge::Backoff);
                        Duration::from_secs(target - now)
                    }
                });
                String::new()
            }
            Op::BreakConfig(typo) => {
                self.write_config(Some(*typo));
                String::new()
            }
            Op::FixConfig => {
                if !self.config_broken() {
                    return " (not broken)".into();
                }
                self.write_config(None);
                String::new()
            }
            Op::Tick
            | Op::TickNoBatch
            | Op::KickedTick
            | Op::Kick(_)
            | Op::OtherServer(_)
            | Op::FinishKicked(..)
            | Op::CrashTick(_)
            | Op::Interleave(..)
            | Op::InterleaveAt(..)
            | Op::Both(..) => {
                unreachable!("ticks run through World::tick; two others' through run_other")
            }
        }
    }

    pub fn create_chat(&self, c: u8) {
        let (session, user, channel) = chat_at(chat_index(c));
        let mut s = self.server.lock();
        if s.chats
            .iter()
            .any(|x| x.session == session && x.user == user && x.channel == channel)
        {
            return;
        }
        s.next += 1;
        let id = format!("chat-{session}-{}", s.next);
        s.chats.push(Chat {
            id,
            session,
            user: user.into(),
            channel: channel.into(),
            messages: Vec::new(),
            busy: false,
            archived: Vec::new(),
        });
    }

    fn watch(&self, tasks: u8, chat: u8, group: bool, create_session: bool, opts: u8) -> String {
        let ids: Vec<u8> = (0..TASKS).filter(|i| tasks & (1 << i) != 0).collect();
        let Some(&first) = ids.first() else {
            return " (no task)".into();
        };
        let c = chat_index(chat);
        let (session, user, channel) = chat_at(c);
        let session = session.as_str();
        // A child's chat is its agent's: a task on another agent is its `--target-agent`.
        let target = Target {
            agent_id: agent_at(c).into(),
            target_agent: (agent_of(first) != agent_at(c)).then(|| agent_of(first).into()),
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
            // Every child's session but the last task's is known (`child-<task id>`):
            // `--stop-after` needs it; a kick finds an unknown one by its agent. A stray
            // (opts 64): a model or a person passes another task's child session (the next
            // task's), which a stop would end.
            child_sessions: ids
                .iter()
                .filter_map(|&i| {
                    let of = if opts & 64 != 0 { (i + 1) % TASKS } else { i };
                    child_session_of(of).map(|c| (task_id(i), c))
                })
                .collect(),
            target_agents: Vec::new(),
            origin: Origin::Cli,
        };
        let now = self.now();
        let mut before: Vec<(String, String)> = Vec::new();
        let mut group_went_out = false;
        let result = self.store().update(|file| {
            before = file
                .jobs
                .iter()
                .map(|j| (j.task_id.clone(), j.job_id.clone()))
                .collect();
            group_went_out = group
                && file.turns.iter().any(|t| {
                    t.group.as_deref() == Some("G")
                        && t.chat.session_id == session
                        && t.chat.user_id == user
                        && t.chat.channel == channel
                });
            let done =
                atc::lifecycle::watch(&mut file.jobs, &file.turns, &request, || self.job_id(), now)
                    .map_err(|why| anyhow::anyhow!("{}", refused(&why)))?;
            atc::lifecycle::compose::tidy(file, now, &limits());
            Ok(done)
        });
        match result {
            Err(why) => {
                let why = why.to_string();
                if why.starts_with("OwnChildSession") {
                    self.notes().sometimes.own_chat_refused += 1;
                } else if opts & 64 != 0 && why.contains("ChildSession") {
                    self.notes().sometimes.other_child_session_refused += 1;
                }
                format!(" → refused: {}", short(&why))
            }
            Ok(registered) => {
                if group_went_out
                    && registered
                        .iter()
                        .any(|r| matches!(r, atc::lifecycle::Registered::New(_)))
                {
                    self.notes().sometimes.group_next_round += 1;
                }
                self.registered(
                    &registered,
                    chat,
                    Some(agent_of(first)),
                    &request.child_sessions,
                );
                self.recorded_while_broken(&registered);
                if options.stop_after_secs.is_some() {
                    let mut n = self.notes();
                    for r in &registered {
                        n.stop_asked.insert(r.job().task_id.clone());
                        // A session that was another task's: a stop asked for it ends
                        // that task's child (atc cannot tell until this one runs on).
                        if let Some(session) = &r.job().child_session
                            && let Some(of) = session.strip_prefix("child-")
                        {
                            n.stop_asked.insert(of.to_owned());
                        }
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
                            // Not an option: the agent its held result came from is kept.
                            "--target-agent" => {}
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
                {
                    let mut n = self.notes();
                    for r in &registered {
                        match r {
                            atc::lifecycle::Registered::New(_) => {
                                n.fresh.insert(r.job().job_id.clone());
                            }
                            atc::lifecycle::Registered::Rewatched { was, job } => {
                                n.rewatched.insert(job.job_id.clone(), *was);
                            }
                            _ => {}
                        }
                        // Which record this one replaced (the checker asks whether that
                        // one was fresh and made since its last look).
                        let job = r.job();
                        if let Some((_, id)) = before
                            .iter()
                            .find(|(task, id)| *task == job.task_id && *id != job.job_id)
                        {
                            n.replaced_by.insert(job.job_id.clone(), id.clone());
                        }
                    }
                }
                let kinds: Vec<String> = registered.iter().map(kind).collect();
                format!(" → {}", kinds.join(", "))
            }
        }
    }

    /// `watch --origin auto`: the plugin at the end of a turn that submitted `tasks` from
    /// `chat`. It is the same registration as the model's own: a record the file holds
    /// keeps its id, options, chat and origin (it may only gain the child's session and
    /// the agent it runs on); one of another chat or ended is left alone.
    fn auto_watch(&self, tasks: u8, chat: u8) -> String {
        let ids: Vec<u8> = (0..TASKS).filter(|i| tasks & (1 << i) != 0).collect();
        if ids.is_empty() {
            return " (no task)".into();
        }
        let c = chat_index(chat);
        let (session, user, channel) = chat_at(c);
        let session = session.as_str();
        // The turn ran in that chat (a child's own, for a task it delegated): it exists,
        // unless it was deleted since.
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
                    None => return " → refused: no such chat".into(),
                }
            }
        };
        let request = WatchRequest {
            task_ids: ids.iter().map(|&i| task_id(i)).collect(),
            target: Target {
                agent_id: agent_at(c).into(),
                target_agent: None,
                session_id: session.into(),
                user_id: user.into(),
                channel: channel.into(),
            },
            base_url: BASE.into(),
            options: Options::default(),
            chat_id,
            child_sessions: ids
                .iter()
                .map(|&i| (task_id(i), format!("child-{}", task_id(i))))
                .collect(),
            target_agents: ids
                .iter()
                .map(|&i| (task_id(i), agent_of(i).to_owned()))
                .collect(),
            origin: Origin::Auto,
        };
        let before = self.store().load().expect("the file loads");
        let now = self.now();
        let registered = self
            .store()
            .update(|file| {
                let done = atc::lifecycle::watch(
                    &mut file.jobs,
                    &file.turns,
                    &request,
                    || self.job_id(),
                    now,
                )
                .map_err(|why| anyhow::anyhow!("{why:?}"))?;
                atc::lifecycle::compose::tidy(file, now, &limits());
                Ok(done)
            })
            .expect("an automatic watch refuses nothing");
        self.registered(&registered, chat, None, &request.child_sessions);
        self.recorded_while_broken(&registered);
        for r in &registered {
            let job = r.job();
            let Some(old) = before.find(&job.task_id) else {
                assert!(
                    matches!(r, atc::lifecycle::Registered::New(_)),
                    "{r:?} of a task the file did not hold"
                );
                assert_eq!(job.origin, Origin::Auto);
                self.notes().fresh.insert(job.job_id.clone());
                continue;
            };
            // The same registration: nothing it says changes but what it lacked.
            let mut same = job.clone();
            // The session QwenPaw printed wins over one a watch named (a stray's: another
            // task's), and the stops counted against the wrong one start over; where the
            // wrong one's chat was found (its agent) is forgotten with it.
            if job.child_session != old.child_session {
                same.child_agent = old.child_agent.clone();
                same.stop_tries = old.stop_tries;
                same.stop_error = old.stop_error.clone();
                same.stopped_at = old.stopped_at;
                same.stop_asked_at = old.stop_asked_at;
                same.last_error = old.last_error.clone();
            }
            same.child_session = old.child_session.clone();
            same.child_chat_id = old.child_chat_id.clone();
            same.target.target_agent = old.target.target_agent.clone();
            same.updated_at = old.updated_at;
            assert_eq!(
                same, *old,
                "an automatic watch of {} changed its record",
                job.task_id
            );
            if matches!(
                r,
                atc::lifecycle::Registered::AlreadyWatching(_)
                    | atc::lifecycle::Registered::Updated { .. }
            ) {
                self.notes().sometimes.auto_watch_met_a_watch += 1;
            }
        }
        let kinds: Vec<String> = registered.iter().map(kind).collect();
        format!(" → {}", kinds.join(", "))
    }

    /// `atc parent-read`: the parent in `chat` read task `t`'s finished result itself.
    fn parent_read(&self, t: u8, chat: u8) -> String {
        let id = task_id(t);
        let finished = self
            .server
            .lock()
            .tasks
            .get(&id)
            .is_some_and(|task| task.end.is_some());
        if !finished {
            return " (still running: nothing to read)".into();
        }
        let c = chat_index(chat);
        let (session, user, channel) = chat_at(c);
        let session = session.as_str();
        self.fact(Fact::Read {
            task: id.clone(),
            chat: c,
        });
        let file = self.store().load().expect("the file loads");
        if let Some(job) = file.find(&id)
            && job.target.session_id != session
            && atc::status::owes(job, file.turn_of(job)).is_some()
        {
            self.notes().sometimes.read_from_another_chat += 1;
        }
        if let Some(job) = file.find(&id)
            && let Some(turn) = file.turn_of(job)
            && turn.carries_job(&job.job_id)
            && job.target.session_id == session
            && job.read_by_parent_at.is_none()
        {
            let mut n = self.notes();
            if turn.is_open() && atc::status::owes(job, Some(turn)).is_some() {
                n.sometimes.read_out_of_an_open_turn += 1;
            } else if !turn.state.is_given_up()
                && matches!(job.shown(), Status::Delivering | Status::Unconfirmed)
            {
                n.sometimes.read_in_flight += 1;
            }
        }
        let now = self.now();
        let reads = self
            .store()
            .update(|file| {
                Ok(atc::lifecycle::read::parent_read_in(
                    file,
                    std::slice::from_ref(&id),
                    (agent_at(c), session, user, channel),
                    now,
                    &limits(),
                ))
            })
            .expect("parent-read");
        format!(" → {}", reads[0].outcome)
    }

    fn cancel(&self, t: u8) -> String {
        let id = task_id(t);
        let now = self.now();
        let file = self.store().load().expect("the file loads");
        if let Some(job) = file.find(&id)
            && let Some(turn) = file.turn_of(job)
            && !turn.is_open()
            && !turn.state.is_given_up()
            && turn.carries.len() == 1
            && turn.carries_job(&job.job_id)
            && matches!(job.shown(), Status::Pending | Status::Delivering)
        {
            self.notes().sometimes.claimed_turn_lost_its_only_job += 1;
        }
        let path = self.path.clone();
        let done = self.store().update(|file| {
            atc::lifecycle::cancel::cancel_in(file, &id, false, None, &path, now, &limits())
        });
        match done {
            Ok((job, _, _)) => {
                self.fact(Fact::Cancelled { task: id });
                format!(" → {}", job.shown())
            }
            Err(why) => format!(" → refused: {}", short(&format!("{why:#}"))),
        }
    }

    fn cancel_check_ins(&self, t: u8) -> String {
        let id = task_id(t);
        let now = self.now();
        let file = self.store().load().expect("the file loads");
        if let Some(job) = file.find(&id)
            && job.check_in
            && job.options.check_in_secs.is_some()
            && file.turn_of(job).is_some_and(|t| t.carries.len() > 1)
        {
            self.notes().sometimes.batched_check_in_turned_off += 1;
        }
        let path = self.path.clone();
        let done = self.store().update(|file| {
            atc::lifecycle::cancel::check_ins_off_in(file, &id, &path, now, &limits())
        });
        match done {
            Ok((_, claimed)) => format!(" → off (claimed: {claimed})"),
            Err(why) => format!(" → refused: {}", short(&format!("{why:#}"))),
        }
    }

    /// `cancel --stop`: the stop goes out first (no lock across the network), then the
    /// cancel records what it said.
    fn cancel_stop(&self, t: u8) -> String {
        let id = task_id(t);
        let file = self.store().load().expect("the file loads");
        let Some(job) = file.find(&id).cloned() else {
            return " → no watch".into();
        };
        let stopped = if matches!(job.shown(), Status::Pending | Status::Cancelled) {
            self.notes().stop_asked.insert(id.clone());
            // A session that was another task's (a stray watch named it): the stop ends
            // that task's child.
            if let Some(of) = job
                .child_session
                .as_deref()
                .and_then(|s| s.strip_prefix("child-"))
            {
                self.notes().stop_asked.insert(of.to_owned());
            }
            // As the command does: a child whose record says it ended is sent no stop.
            let ended = job
                .child_session
                .as_ref()
                .and_then(|_| atc::pass::already_ended(&Proxy(&self.server), &job));
            match ended
                .map(Ok)
                .unwrap_or_else(|| atc::pass::stop_child(&Proxy(&self.server), &job))
            {
                Ok(stopped) => Some(stopped),
                Err(why) => return format!(" → refused: {}", short(&why.message())),
            }
        } else {
            None
        };
        let now = self.now();
        let path = self.path.clone();
        let done = self.store().update(|file| {
            let stopped = stopped.as_ref().map(|s| (job.job_id.as_str(), s));
            atc::lifecycle::cancel::cancel_in(file, &id, true, stopped, &path, now, &limits())
        });
        match done {
            Ok((job, _, _)) => {
                self.fact(Fact::Cancelled { task: id });
                format!(" → {} (stopped)", job.shown())
            }
            Err(why) => format!(" → refused: {}", short(&format!("{why:#}"))),
        }
    }

    /// What `redeliver`'s look before the lock finds of the chat of `task`'s job.
    fn chat_lookup(&self, id: &str) -> Option<atc::lifecycle::redeliver::ChatLookup> {
        use atc::lifecycle::redeliver::ChatLookup;
        let file = self.store().load().expect("the file loads");
        file.find(id).map(|job| {
            let s = self.server.lock();
            let t = &job.target;
            if s.down {
                ChatLookup::Unknown("connection refused".into())
            } else if s
                .chats
                .iter()
                .any(|c| c.session == t.session_id && c.user == t.user_id && c.channel == t.channel)
            {
                ChatLookup::Found
            } else {
                ChatLookup::Absent
            }
        })
    }

    fn redeliver_many(&self, tasks: u8, create_session: bool) -> String {
        let ids: Vec<String> = (0..TASKS)
            .filter(|i| tasks & (1 << i) != 0)
            .map(task_id)
            .collect();
        let now = self.now();
        // The command looks each chat up first, before the lock.
        let chats: Vec<_> = ids.iter().map(|id| self.chat_lookup(id)).collect();
        let asked: Vec<_> = ids
            .iter()
            .zip(&chats)
            .map(|(id, chat)| (id.as_str(), chat.as_ref()))
            .collect();
        let path = self.path.clone();
        let done = self.store().update(|file| {
            atc::lifecycle::redeliver::redeliver_each_in(
                file,
                &asked,
                create_session,
                &path,
                now,
                &limits(),
            )
        });
        match done {
            Ok(done) => {
                let mut with = 0;
                let file = self.store().load().expect("the file loads");
                for ((job, said), id) in done.iter().zip(&ids) {
                    debug_assert_eq!(&job.task_id, id);
                    if said.contains(" goes again with ") {
                        with += 1;
                    }
                    if said.contains(" follow-up") {
                        self.notes().sometimes.follow_up_redelivered += 1;
                    }
                    back_in_line(&file, id, said);
                    self.fact(Fact::Redelivered { task: id.clone() });
                }
                if with > 0 {
                    self.notes().sometimes.shared_turn_redelivered += 1;
                }
                format!(" → {} requeued ({with} with another's turn)", done.len())
            }
            Err(why) => format!(" → refused: {}", short(&format!("{why:#}"))),
        }
    }

    fn redeliver_given_up(&self, pick: u8, create_session: bool) -> String {
        let file = self.store().load().expect("the file loads");
        let given_up = stuck_tasks(&file);
        if given_up.is_empty() {
            return " → nothing given up".into();
        }
        // The latest first.
        let t = given_up[given_up.len() - 1 - usize::from(pick) % given_up.len()];
        format!(" {}{}", task_id(t), self.redeliver(t, create_session))
    }

    fn redeliver(&self, t: u8, create_session: bool) -> String {
        let id = task_id(t);
        let now = self.now();
        // The command looks the chat up first, before the lock.
        let chat = self.chat_lookup(&id);
        let path = self.path.clone();
        let done = self.store().update(|file| {
            atc::lifecycle::redeliver::redeliver_in(
                file,
                &id,
                chat.as_ref(),
                create_session,
                &path,
                now,
                &limits(),
            )
        });
        match done {
            Ok((_, said)) => {
                back_in_line(&self.store().load().expect("the file loads"), &id, &said);
                self.fact(Fact::Redelivered { task: id });
                if said.contains(" follow-up") {
                    self.notes().sometimes.follow_up_redelivered += 1;
                }
                if said.contains("'s follow-up (turn ") {
                    return " → its follow-up requeued".into();
                }
                if said.contains(" follow-ups (turns ") {
                    return " → its follow-ups requeued".into();
                }
                " → requeued".into()
            }
            Err(why) => format!(" → refused: {}", short(&format!("{why:#}"))),
        }
    }

    fn import(&self, t: u8) -> String {
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
            .update(|file| Ok(atc::plugin::merge(file, records)))
            .expect("import");
        for (task, _, _) in &done.added {
            self.fact(Fact::Watched {
                task: task.clone(),
                chat: 0,
                child: None,
                epoch: true,
                skip_empty: false,
                agent: true,
            });
        }
        let mut n = self.notes();
        for (_, _, job_id) in &done.added {
            n.fresh.insert(job_id.clone());
        }
        format!(" → {} added", done.added.len())
    }
}

/// The tasks `atc doctor` and `atc status` show waiting for a person (`status::stuck`),
/// each once, in the file's order.
fn stuck_tasks(file: &atc::job_file::JobFile) -> Vec<u8> {
    let mut tasks: Vec<u8> = Vec::new();
    let listed = atc::status::stuck(&file.jobs, &file.turns);
    let ids = listed
        .iter()
        .filter_map(|s| s.task_id.strip_prefix("task-")?.parse::<u8>().ok());
    for task in ids {
        if !tasks.contains(&task) {
            tasks.push(task);
        }
    }
    tasks
}

/// What `redeliver` said of `task` holds in `file`: the watch polls again, or a block of
/// it is back in line (its turn open or to be read back, or owed anew). A task said to go
/// "with" another's turn is in that turn.
fn back_in_line(file: &atc::job_file::JobFile, task: &str, said: &str) {
    let job = file.find(task).expect("a task redelivered is watched");
    let in_line = |t: &Turn| {
        t.carries_job(&job.job_id) && matches!(t.state, TurnState::Open | TurnState::Unconfirmed)
    };
    let back = job.watch == atc::job::Watch::Pending
        || atc::status::owes(job, file.turn_of(job)).is_some()
        || file.turns.iter().any(in_line);
    assert!(
        back,
        "redeliver said {said:?}, and nothing of {task} is back in line"
    );
    if let Some((_, turn)) = said.split_once(", in its turn ") {
        let turn = turn.trim_end_matches('.');
        assert!(
            file.turn(turn).is_some_and(in_line),
            "redeliver said {said:?}, and turn {turn} is not open with {task} in it"
        );
    }
}

/// A pending watch as a scheduled tick about to run finds it (issue 38).
struct Expected {
    task: String,
    /// The poll the world owes it, and why.
    owed: Option<(Owed, String)>,
    /// How atc's back-off says it is polled.
    polling: Polling,
    /// Its child ended, and no poll of its record was served since (a kick missed).
    ended: bool,
}

pub struct World {
    _dir: tempfile::TempDir,
    pub env: Arc<Env>,
    /// The jobs and turns as the last operation left them.
    jobs: Vec<Job>,
    turns: Vec<Turn>,
    /// Every registration's last state, by job id (kept after it is pruned).
    last: BTreeMap<String, Job>,
    /// Every turn's last state, by turn id.
    last_turns: BTreeMap<String, Turn>,
    /// The states each turn was seen in, in order (each once in a row), by turn id.
    turn_states: BTreeMap<String, Vec<TurnState>>,
    /// The turn each registration pointed at, as it was when the registration was last
    /// seen: a pruned job's give-up is judged by its turn then, not by a later redelivery
    /// of that turn for another job it carried.
    turn_when_last: BTreeMap<String, Turn>,
    /// What each turn carried and said when it was first seen claimed.
    claimed: BTreeMap<String, (Vec<atc::turn::Block>, Option<String>)>,
    /// Registrations replaced by a later watch of the same task.
    replaced: BTreeSet<String>,
    /// Tasks whose record was pruned (after `--keep`): watched again, they are new to atc,
    /// and their result may rightly go out again.
    forgotten: BTreeSet<String>,
    /// The blocks registrations owed at some point: (job id, task id, block).
    owed: BTreeSet<(String, String, BlockKind)>,
    /// Turns seen answered 409 after their claim.
    busy_after_claim: BTreeSet<String>,
    /// The registrations of each task that asked for check-ins.
    checking_in: BTreeMap<String, BTreeSet<String>>,
    /// Every give-up the job file recorded, by (when, line): the most records of it seen
    /// at once said, and unsaid.
    give_ups: BTreeMap<(String, String), (usize, usize)>,
    /// The chats kicks polled watches of unknown child session for, as seen.
    kick_chats: BTreeSet<(String, String, String)>,
    pub ops: u64,
    /// Give-ups seen in a tick and found named in its report.
    pub reported: u64,
    /// What the last tick reported (`None` after any other operation, or a crashed tick).
    report: Option<Vec<serde_json::Value>>,
    /// What the history did so far, for failure messages.
    pub trail: Vec<String>,
    pub sometimes: Sometimes,
    pub queue: Queue,
    /// The oracle's verdict (`oracle.rs`), once checked.
    pub verdict: Verdict,
    /// When the drain began (sim seconds), and where in the world's order.
    drained_at: u64,
    drain_seq: u64,
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
    /// A world with no plugin naming its server (every tick polls every watch).
    pub fn new() -> World {
        World::with(Plugin::NONE)
    }

    pub fn with(plugin: Plugin) -> World {
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
                        started_at: started_at(i),
                        end: None,
                        ended: None,
                    },
                );
            }
        }
        let tick = Tick {
            state: Setting {
                value: path.clone(),
                source: Source::Default,
            },
            limits: Limits {
                poll_ceiling: Duration::from_secs(plugin.ceiling),
                ..limits()
            },
            concurrency: plugin.lanes,
            http_timeout: Duration::from_secs(60),
            turn_timeout: None,
            auth: Auth::default(),
            kicked: false,
            cadence: false,
            server: None,
            batch: true,
        };
        let env = Arc::new(Env {
            path,
            clock: SimClock(AtomicU64::new(EPOCH)),
            server,
            notes: Mutex::new(Notes::default()),
            tick,
            plugin,
            config_path: dir.path().join("config.toml"),
            config: Mutex::new(Config::default()),
            ids: AtomicU64::new(0xa00000000000),
        });
        env.server.set_env(Arc::downgrade(&env));
        env.server.lanes.lock().unwrap().seed = plugin.order;
        // The parent chats, then each task's own chat (it exists while the task runs, and
        // after: a background task's session).
        for c in 0..NCHATS as u8 {
            env.create_chat(c);
        }
        World {
            _dir: dir,
            env,
            jobs: Vec::new(),
            turns: Vec::new(),
            last: BTreeMap::new(),
            last_turns: BTreeMap::new(),
            turn_states: BTreeMap::new(),
            turn_when_last: BTreeMap::new(),
            claimed: BTreeMap::new(),
            replaced: BTreeSet::new(),
            forgotten: BTreeSet::new(),
            owed: BTreeSet::new(),
            busy_after_claim: BTreeSet::new(),
            checking_in: BTreeMap::new(),
            give_ups: BTreeMap::new(),
            kick_chats: BTreeSet::new(),
            ops: 0,
            reported: 0,
            report: None,
            trail: if plugin == Plugin::NONE {
                Vec::new()
            } else {
                vec![format!("-- {plugin:?} --")]
            },
            sometimes: Sometimes::default(),
            queue: Queue::default(),
            verdict: Verdict::default(),
            drained_at: 0,
            drain_seq: 0,
        }
    }

    pub fn server(&self) -> &SimServer {
        &self.env.server
    }

    /// Every turn the history saw, as last seen (pruned ones too), by turn id.
    pub fn turns_seen(&self) -> impl Iterator<Item = &Turn> {
        self.last_turns.values()
    }

    /// The states turn `id` was seen in, in order.
    pub fn states_of(&self, id: &str) -> &[TurnState] {
        self.turn_states.get(id).map_or(&[], Vec::as_slice)
    }

    /// Every registration the history saw, as last seen (replaced and pruned ones too).
    pub fn jobs_seen(&self) -> impl Iterator<Item = &Job> {
        self.last.values()
    }

    /// The job file as it is now.
    pub fn file(&self) -> atc::job_file::JobFile {
        self.env.store().load().expect("the file loads")
    }

    /// When the drain began (sim seconds; 0 before it).
    pub fn drained_at(&self) -> u64 {
        self.drained_at
    }

    fn now(&self) -> Timestamp {
        self.env.clock.now()
    }

    pub fn apply(&mut self, op: &Op) {
        self.ops += 1;
        let said = match op {
            Op::Tick => self.tick(None, op, true),
            Op::TickNoBatch => self.tick(None, op, false),
            Op::KickedTick | Op::Kick(_) | Op::OtherServer(_) => self.tick(None, op, true),
            Op::FinishKicked(t, ending) => {
                let ended = self.env.act(&Op::Finish(*t, *ending));
                let kick = Op::Kick(Kick::Child(*t));
                let said = self.tick(None, &kick, true);
                format!("{ended} → {kick:?}{said}")
            }
            Op::CrashTick(at) => self.tick(Some(*at), op, true),
            Op::Interleave(phase, inner) => {
                self.env.server.queue(*phase, 0, (**inner).clone());
                String::new()
            }
            Op::InterleaveAt(phase, skip, inner) => {
                self.env.server.queue(*phase, *skip, (**inner).clone());
                String::new()
            }
            other => self.env.act(other),
        };
        self.trail.push(format!("{op:?}{said}"));
        let others = std::mem::take(&mut self.env.notes().others);
        self.trail
            .extend(others.into_iter().map(|o| format!("  {o}")));
        self.observe();
        if is_tick(op) || matches!(op, Op::FinishKicked(..) | Op::CrashTick(_)) {
            self.leftovers();
        }
    }

    /// Other processes' operations the last tick never reached land now, after it: a tick
    /// among them is a tick of its own (nothing holds the lock any more).
    fn leftovers(&mut self) {
        let queued = self
            .env
            .server
            .take_queued()
            .into_iter()
            .flat_map(|(phase, op)| match op {
                Op::Both(first, then) => vec![(phase, *first), (phase, *then)],
                op => vec![(phase, op)],
            });
        for (phase, op) in queued.collect::<Vec<_>>() {
            match op {
                op if is_tick(&op) => self.apply(&op),
                other => {
                    self.env.run_other(phase, &other);
                    let others = std::mem::take(&mut self.env.notes().others);
                    self.trail
                        .extend(others.into_iter().map(|o| format!("  after: {o}")));
                    self.observe();
                }
            }
        }
    }

    fn tick(&mut self, crash: Option<Crash>, op: &Op, batch: bool) -> String {
        let (kick, heard) = kick_of(op);
        let kicked = kick.is_some();
        self.env.clock.advance(Duration::from_secs(20));
        // A broken config file (issue 36 M2): the tick exits 78 before it reads anything;
        // no pass runs, no crash point is reached, nothing changes on disk.
        let before = self.on_disk();
        if let Some(refused) = self.env.refusal(op) {
            if self.on_disk() != before {
                self.fail("a tick refused by a broken config file changed what is on disk");
            }
            return refused;
        }
        // A kick for a child's turn polls the watch that names that child's session (the
        // world asks it: nothing else may land in the tick, the server is up).
        let must_poll = match op {
            Op::Kick(Kick::Child(i)) if crash.is_none() && !self.env.server.has_queued() => {
                let session = child_session_of(*i);
                let pending = self.env.store().load().ok().is_some_and(|file| {
                    file.find(&task_id(*i)).is_some_and(|job| {
                        job.shown() == Status::Pending
                            && session.is_some()
                            && job.child_session == session
                    })
                });
                (pending && !self.env.server.lock().down).then(|| task_id(*i))
            }
            _ => None,
        };
        let mut tick = self.env.tick_of(op);
        tick.batch = batch;
        // What a scheduled tick owes each pending watch (issue 38), judged where nothing
        // else may land in the tick (no crash armed, nothing queued, the server up).
        let expected = if !kicked
            && crash.is_none()
            && !self.env.server.has_queued()
            && !self.env.server.lock().down
        {
            self.expected_polls(&tick)
        } else {
            Vec::new()
        };
        {
            let mut s = self.env.server.lock();
            s.crash = crash;
            s.posts = 0;
            s.polled.clear();
        }
        let tick_no = self.env.server.tick.fetch_add(1, Ordering::SeqCst) + 1;
        let began = self.now();
        let swept_before = Heartbeat::read(&self.env.store().tick_lock_path()).last_swept_at;
        let env = &*self.env;
        let store = env.store();
        let mut said = Vec::new();
        let mut server = Counting {
            server: Proxy(&env.server),
            requests: AtomicU64::new(0),
        };
        // A mark another tick left (a turn's end it let go, or a bare one): a kick that
        // names its turn takes it, and what it concerns is that kick's too.
        let marked = store.tick_again_path().exists();
        let switched = env.server.lanes.lock().unwrap().switched;
        env.server.ticking(true);
        let ran = catch_unwind(AssertUnwindSafe(|| {
            atc::cmd::tick::passes(
                &store,
                kick,
                heard,
                &mut |intent, say| {
                    atc::pass::run_with(&store, &tick, &mut server, &env.clock, intent, say)
                },
                &mut SimWindow {
                    server: &env.server,
                    left: 4,
                },
                &mut |line| said.push(line.to_owned()),
                &mut |_| Ok(()),
            )
        }));
        env.server.ticking(false);
        if env.server.lanes.lock().unwrap().switched > switched {
            self.env.notes().sometimes.lanes_interleaved += 1;
        }
        let crashed = env.server.lock().crash.take().is_none() && crash.is_some();
        self.env.hear(&said);
        if ran.is_err() {
            self.env.notes().crashed.insert(tick_no);
        }
        match ran {
            Ok(reports) => {
                let reports = reports.expect("a tick never fails on a good file");
                // Said as saved, every one of them, once; by a tick nobody hears, nothing.
                if let Err(why) = said_as_reported(&reports, heard, &said) {
                    self.fail(&why);
                }
                let late: usize = reports.iter().map(|r| r.said_late().len()).sum();
                self.env.notes().sometimes.said_late += u64::from(late > 0);
                if let Some(task) = &must_poll {
                    if !self.env.server.lock().polled.contains(task) {
                        self.fail(&format!(
                            "a kick for the end of {task}'s child turn did not poll it"
                        ));
                    }
                    self.env.notes().sometimes.kick_polled_child += 1;
                }
                // A turn's end that concerns nothing costs the server no request.
                if !reports.is_empty() && reports.iter().all(|r| r.is_unconcerned()) {
                    let requests = server.requests.load(Ordering::Relaxed);
                    if requests > 0 {
                        self.fail(&format!(
                            "a kick that concerned nothing made {requests} requests"
                        ));
                    }
                    self.env.notes().sometimes.kick_unconcerned += 1;
                }
                if let Op::Kick(Kick::Elsewhere) | Op::OtherServer(Some(Kick::Elsewhere)) = op
                    && !marked
                    && server.requests.load(Ordering::Relaxed) > 0
                    && reports.len() == 1
                {
                    self.fail("a kick for a chat nothing watches made requests");
                }
                if kicked && reports.len() > 1 {
                    self.env.notes().sometimes.kicked_passes += 1;
                }
                if matches!(op, Op::OtherServer(_)) && self.env.plugin.on == On::Here {
                    self.sometimes.other_server_tick += 1;
                }
                self.judge_polls(&expected);
                // Judged alone: no other tick ran inside this one (its polls, its
                // scheduled time).
                if !kicked
                    && !reports.is_empty()
                    && self.env.server.tick.load(Ordering::SeqCst) == tick_no
                {
                    self.judge_backoff_kept(&tick, Some(began), None);
                }
                let said = format!(" → {} passes", reports.len());
                // A tick that ran between this one's passes (its own pass) reported what it
                // gave up itself.
                let nested = std::mem::take(&mut self.env.notes().nested_reports);
                self.report = Some(reports.iter().map(|r| r.to_json()).chain(nested).collect());
                said
            }
            Err(payload) if payload.is::<crate::server::SimCrash>() => {
                assert!(crashed);
                if !kicked && self.env.server.tick.load(Ordering::SeqCst) == tick_no {
                    self.judge_backoff_kept(&tick, swept_before, crash);
                }
                if matches!(crash, Some(Crash::Posted(_))) {
                    self.env.notes().sometimes.crash_between_post_and_save += 1;
                }
                " → crashed".into()
            }
            Err(payload) => std::panic::resume_unwind(payload),
        }
    }

    /// What a tick may change on disk: the job file, the tick lock's heartbeat, the mark a
    /// kicked tick leaves.
    fn on_disk(&self) -> (Option<Vec<u8>>, Option<Vec<u8>>, bool) {
        let store = self.env.store();
        (
            std::fs::read(&self.env.path).ok(),
            std::fs::read(store.tick_lock_path()).ok(),
            store.tick_again_path().exists(),
        )
    }

    /// Each pending watch as a scheduled tick about to run finds it (issue 38): the poll
    /// the world owes it (`oracle::poll_owed`), and how atc's back-off says it is polled
    /// (for the branches a run must reach).
    fn expected_polls(&self, tick: &Tick) -> Vec<Expected> {
        let Ok(file) = self.env.store().load() else {
            return Vec::new();
        };
        let beat = Heartbeat::read(&self.env.store().tick_lock_path());
        let now = self.now();
        let s = self.env.server.lock();
        let notes = self.env.notes();
        file.jobs
            .iter()
            .filter(|job| job.watch == atc::job::Watch::Pending)
            .map(|job| {
                let task = job.task_id.as_str();
                // Its child ended, and no poll of its record was served since.
                let ended = s
                    .tasks
                    .get(task)
                    .and_then(|t| t.ended)
                    .filter(|(_, seq)| s.last_poll.get(task).is_none_or(|p| p < seq));
                let from = ended.map(|(at, _)| {
                    let touched = notes
                        .facts
                        .iter()
                        .filter(|(_, f)| f.task() == Some(task))
                        .map(|(at, _)| *at)
                        .max()
                        .unwrap_or(0);
                    at.max(touched)
                });
                let kicking = self.env.kicking(&beat, tick, &job.base_url, now);
                Expected {
                    task: task.to_owned(),
                    owed: crate::oracle::poll_owed(
                        job,
                        self.env.clock.secs(),
                        self.env.limits(),
                        from,
                    ),
                    polling: backoff::polling(
                        job,
                        kicking,
                        beat.last_swept_at,
                        now,
                        self.env.limits(),
                    ),
                    ended: ended.is_some(),
                }
            })
            .collect()
    }

    /// After a scheduled tick: a watch on its back-off that the tick did not poll keeps
    /// every back-off time after `from`. A tick that finished swept at its start (`from`):
    /// its later passes (a kick's mark, landed while it ran) poll only what that turn
    /// concerns, and a back-off time that came meanwhile is still owed. A tick that
    /// `crashed` may have polled nothing: `from` is where the back-offs counted from
    /// before it, and it moves none on.
    fn judge_backoff_kept(&mut self, tick: &Tick, from: Option<Timestamp>, crashed: Option<Crash>) {
        let Ok(file) = self.env.store().load() else {
            return;
        };
        let beat = Heartbeat::read(&self.env.store().tick_lock_path());
        let now = self.now();
        let polled = self.env.server.lock().polled.clone();
        let limits = *self.env.limits();
        for job in file
            .jobs
            .iter()
            .filter(|job| job.watch == atc::job::Watch::Pending && !polled.contains(&job.task_id))
        {
            let kicking = self.env.kicking(&beat, tick, &job.base_url, now);
            let at = |since| match backoff::polling(job, kicking, since, now, &limits) {
                Polling::BackOff { next, .. } => Some(next),
                Polling::EveryTick(_) => None,
            };
            let (Some(owed), Some(next)) = (at(from), at(beat.last_swept_at)) else {
                continue;
            };
            if next > owed {
                let tick = match crashed {
                    Some(crash) => format!("a scheduled tick that crashed ({crash:?})"),
                    None => "a scheduled tick".to_owned(),
                };
                self.fail(&format!(
                    "{tick} left {} on its back-off with its next poll at {}s, past {}s, a back-off time {} that no pass polled",
                    job.task_id,
                    unix(next),
                    unix(owed),
                    from.map_or("from the start".to_owned(), |at| format!("after {}s", unix(at))),
                ));
            }
            match crashed {
                None if from.is_some_and(|from| from < owed) && owed <= now => {
                    self.sometimes.backoff_kept_mid_tick += 1;
                }
                Some(_) if owed <= now => self.sometimes.backoff_kept_crashed += 1,
                _ => {}
            }
        }
    }

    /// After a scheduled tick: it polled every watch it owed a poll.
    fn judge_polls(&mut self, expected: &[Expected]) {
        if expected.is_empty() {
            return;
        }
        let polled = self.env.server.lock().polled.clone();
        let now = self.now();
        for e in expected {
            let was = polled.contains(&e.task);
            if let Some((owed, why)) = &e.owed {
                if !was {
                    let how = match e.polling {
                        Polling::EveryTick(why) => format!("polled every tick: {}", why.says()),
                        Polling::BackOff { next, own } => format!(
                            "on its back-off, next at {}s{}",
                            unix(next),
                            if own { " (its own time)" } else { "" }
                        ),
                    };
                    self.fail(&format!(
                        "a scheduled tick at {}s did not poll {} ({how}): {why}",
                        self.env.clock.secs(),
                        e.task,
                    ));
                }
                if *owed == Owed::Ceiling && matches!(e.polling, Polling::BackOff { .. }) {
                    self.sometimes.backoff_ceiling += 1;
                }
            }
            match e.polling {
                Polling::EveryTick(_) => {}
                Polling::BackOff { .. } if !was => self.sometimes.backoff_skipped += 1,
                Polling::BackOff { own: true, next } if next <= now => {
                    self.sometimes.backoff_own_time += 1;
                }
                Polling::BackOff { own: false, .. } if e.ended => {
                    self.sometimes.backoff_found += 1;
                }
                Polling::BackOff { .. } => {}
            }
        }
    }

    /// After every operation: the file loads, every status change is one `step` allows,
    /// held results are kept, ended jobs are kept for `--keep`, notices tell the truth,
    /// open turns carry only what belongs there, a claimed turn never changes.
    fn observe(&mut self) {
        let file = self
            .env
            .store()
            .load()
            .unwrap_or_else(|e| self.fail(&format!("the job file does not load: {e:#}")));
        let (jobs, turns) = (file.jobs.clone(), file.turns.clone());
        let now = self.env.clock.secs();
        for chat in &file.kick_chats {
            if self.kick_chats.insert((
                chat.agent_id.clone(),
                chat.session_id.clone(),
                chat.at.to_string(),
            )) {
                self.sometimes.kick_polled_unknown += 1;
            }
        }
        let mut records: BTreeMap<(String, String), (usize, usize)> = BTreeMap::new();
        for r in &file.give_ups {
            let seen = records
                .entry((r.at.to_string(), r.line.clone()))
                .or_default();
            if r.is_unsaid() {
                seen.1 += 1;
            } else {
                seen.0 += 1;
            }
        }
        for (key, (said, unsaid)) in records {
            let most = self.give_ups.entry(key).or_default();
            most.0 = most.0.max(said);
            most.1 = most.1.max(unsaid);
        }
        // One truth: what a job shows is its watch and the turn that carries its block.
        for job in &jobs {
            let turn = file.turn_of(job);
            let shown = atc::status::status(job, turn);
            if shown != job.shown() {
                self.fail(&format!(
                    "{} is {} in the file and {shown} from its turn ({:?})",
                    job.task_id,
                    job.shown(),
                    turn.map(|t| t.state)
                ));
            }
        }
        let l = limits();
        let reports = self.report.take();
        for old in &self.jobs {
            let new = jobs.iter().find(|j| j.job_id == old.job_id);
            if let Some(new) = new {
                // Loud: a tick that gave a job up says so in its report.
                if let Some(reports) = &reports
                    && gave_up(new)
                    && !gave_up(old)
                {
                    let named = reports.iter().any(|report| {
                        report["tasks"].as_object().is_some_and(|by| {
                            by.values().any(|tasks| {
                                tasks
                                    .as_array()
                                    .is_some_and(|t| t.iter().any(|t| *t == new.task_id))
                            })
                        })
                    });
                    if !named {
                        self.fail(&format!(
                            "the tick gave {} up ({}) and its report does not say so: {reports:?}",
                            new.task_id,
                            new.shown()
                        ));
                    }
                    self.reported += 1;
                }
                // A stop that keeps failing is tried a bounded number of times, and the
                // tick that gives it up says so: in its report, and in a line heard.
                if new.stop_tries > atc::lifecycle::STOP_TRIES {
                    self.fail(&format!(
                        "{} was stopped {} times without success (at most {})",
                        new.task_id,
                        new.stop_tries,
                        atc::lifecycle::STOP_TRIES
                    ));
                }
                if atc::lifecycle::stop_given_up(new) && !atc::lifecycle::stop_given_up(old) {
                    // (A tick between a kicked tick's passes may be the one: its line is
                    // heard all the same.) A tick nobody hears leaves it unsaid in the file,
                    // for the next tick a person hears (the drain checks that one said it).
                    let line = format!("gave up on {} (pending, stop given up)", new.task_id);
                    let heard = self.env.notes().heard.iter().any(|h| h.contains(&line));
                    let unsaid = file
                        .give_ups
                        .iter()
                        .any(|r| r.is_unsaid() && r.line.contains(&line));
                    if !heard && !unsaid {
                        self.fail(&format!(
                            "the tick gave up stopping {} and said nothing",
                            new.task_id
                        ));
                    }
                    self.env.notes().sometimes.stop_given_up += 1;
                }
                if !reachable(old.shown(), new.shown()) {
                    self.fail(&format!(
                        "{} went {} → {}, which no step allows",
                        old.task_id,
                        old.shown(),
                        new.shown()
                    ));
                }
                continue;
            }
            let (fresh, rewatched, replaced_by) = {
                let n = self.env.notes();
                (n.fresh.clone(), n.rewatched.clone(), n.replaced_by.clone())
            };
            // A fresh registration (the one before it was pruned), or one that replaced a
            // fresh one made since the last look: either way `old` was pruned.
            let fresh_since = |id: &String| {
                fresh.contains(id)
                    || replaced_by
                        .get(id)
                        .is_some_and(|was| fresh.contains(was) && !self.last.contains_key(was))
            };
            let successor = jobs
                .iter()
                .find(|j| j.task_id == old.task_id)
                .filter(|next| !fresh_since(&next.job_id));
            match successor {
                Some(next) => {
                    self.replaced.insert(old.job_id.clone());
                    // What the record held when it was replaced: a cancel run while the
                    // tick ran may have ended it since the last look.
                    let held = match rewatched.get(&next.job_id) {
                        Some(was) => holds_result(old) && !matches!(was, Status::Cancelled),
                        None => holds_result(old),
                    };
                    if held && next.final_text.is_none() {
                        self.fail(&format!(
                            "a re-registration of {} threw away the result it held ({} → {})",
                            old.task_id,
                            old.shown(),
                            next.shown()
                        ));
                    }
                }
                None => {
                    // Pruned. (Several passes may have run since the last look: what
                    // counts is the file now; a turn pruned with it was settled.)
                    self.forgotten.insert(old.task_id.clone());
                    if old.shown() == Status::Pending {
                        self.fail(&format!("{} was pruned while {}", old.task_id, old.shown()));
                    }
                    if turns
                        .iter()
                        .any(|t| !atc::turn::is_settled(t) && t.carries_job(&old.job_id))
                    {
                        self.fail(&format!(
                            "{} was pruned while a turn that is not settled carries it",
                            old.task_id
                        ));
                    }
                    // From when it (or a turn that carried one of its blocks: its result,
                    // its check-ins, a follow-up that went up for it) last changed, as last
                    // seen: the record's own clock (a clock jump landing inside the tick
                    // that ended it makes the moment it was seen later than its end).
                    let changed = self
                        .last_turns
                        .values()
                        .chain(self.turn_when_last.get(&old.job_id))
                        .filter(|t| t.carries_job(&old.job_id))
                        .fold(old.updated_at, |at, t| at.max(t.updated_at));
                    let ended = unix(changed);
                    if now.saturating_sub(ended) <= l.keep.as_secs() {
                        self.fail(&format!(
                            "{} ({}) was pruned {}s after it last changed, before --keep ({}s)",
                            old.task_id,
                            old.shown(),
                            now - ended,
                            l.keep.as_secs()
                        ));
                    }
                }
            }
        }
        for job in &jobs {
            if let Some(kind) = atc::status::owes(job, file.turn_of(job)) {
                self.owed
                    .insert((job.job_id.clone(), job.task_id.clone(), kind));
            }
            if job.options.check_in_secs.is_some() || job.check_ins > 0 {
                self.checking_in
                    .entry(job.task_id.clone())
                    .or_default()
                    .insert(job.job_id.clone());
            }
            if job.shown() == Status::Expired
                && job.notice
                && let Some(text) = file.turn_of(job).and_then(|t| t.text.as_deref())
                && !text.starts_with("[ATC_")
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
            // A job points only at a turn that carries it (or at none).
            if let Some(id) = &job.turn
                && let Some(turn) = turns.iter().find(|t| t.turn_id == *id)
                && !turn.carries_job(&job.job_id)
            {
                self.fail(&format!(
                    "{} points at turn {id}, which does not carry it",
                    job.task_id
                ));
            }
            self.last.insert(job.job_id.clone(), job.clone());
            match job
                .turn
                .as_deref()
                .and_then(|id| turns.iter().find(|t| t.turn_id == id))
            {
                Some(turn) => self.turn_when_last.insert(job.job_id.clone(), turn.clone()),
                None => self.turn_when_last.remove(&job.job_id),
            };
        }
        for turn in &turns {
            // A block born and sent within one tick is owed too: its turn says so.
            for block in &turn.carries {
                self.owed
                    .insert((block.job_id.clone(), block.task_id.clone(), block.kind));
            }
            // One rule of membership: an open turn carries only blocks that belong there (a
            // follow-up's is fixed when it opens: below).
            if turn.is_open() && !turn.is_follow_up() {
                for block in &turn.carries {
                    let belongs = jobs
                        .iter()
                        .find(|j| j.job_id == block.job_id)
                        .is_some_and(|j| atc::lifecycle::compose::belongs(j, turn, block.kind));
                    if !belongs {
                        self.fail(&format!(
                            "open turn {} carries {}'s {} block, which no longer belongs there",
                            turn.turn_id,
                            block.task_id,
                            block.kind.as_str()
                        ));
                    }
                }
            }
            // Claimed, a turn is what it is, until it settles (given up with nothing
            // posted, `redeliver` may open it again, to be composed anew).
            let what = (turn.carries.clone(), turn.text.clone());
            if turn.is_follow_up() {
                // A follow-up's turn is one block, fixed when it opens: never composed.
                if turn.carries.len() != 1 || turn.text.is_none() {
                    self.fail(&format!(
                        "follow-up turn {} carries {} blocks (text kept: {})",
                        turn.turn_id,
                        turn.carries.len(),
                        turn.text.is_some()
                    ));
                }
                match self.claimed.get(&turn.turn_id) {
                    Some(before) if *before != what => self.fail(&format!(
                        "follow-up turn {} changed what it carries or says: {:?} → {:?}",
                        turn.turn_id, before, what
                    )),
                    None => {
                        self.claimed.insert(turn.turn_id.clone(), what);
                    }
                    _ => {}
                }
            } else if turn.is_open() {
                self.claimed.remove(&turn.turn_id);
            } else if turn.state == TurnState::Claimed || turn.state == TurnState::Unconfirmed {
                match self.claimed.get(&turn.turn_id) {
                    Some(before) if *before != what => self.fail(&format!(
                        "claimed turn {} changed what it carries: {:?} → {:?}",
                        turn.turn_id, before, what
                    )),
                    None => {
                        self.claimed.insert(turn.turn_id.clone(), what);
                    }
                    _ => {}
                }
            }
            if turn.delivery.last_http_status == Some(409) && turn.delivery.attempts > 0 {
                self.busy_after_claim.insert(turn.turn_id.clone());
            }
            let before = self.last_turns.get(&turn.turn_id);
            let newly = |state| turn.state == state && before.is_none_or(|b| b.state != state);
            if newly(TurnState::Delivered) {
                if turn.carries.len() > 1 && turn.delivery.confirmed.is_some() {
                    self.sometimes.batch_read_back += 1;
                }
                if self.busy_after_claim.contains(&turn.turn_id) {
                    self.sometimes.busy_then_delivered += 1;
                }
                if turn.chat_archived {
                    self.sometimes.archived_delivered += 1;
                }
            }
            if newly(TurnState::Delivered) && !self.env.config_broken() {
                let mut n = self.env.notes();
                for block in &turn.carries {
                    if block.kind == BlockKind::Result && n.broken_watches.remove(&block.job_id) {
                        self.sometimes.config_fixed_delivered += 1;
                    }
                }
            }
            if newly(TurnState::Refused) && turn.carries.len() > 1 {
                self.sometimes.refused_batch += 1;
            }
            if newly(TurnState::Delivered)
                && turn.is_follow_up()
                && turn.delivery.confirmed.is_some()
            {
                self.sometimes.follow_up_read_back += 1;
            }
            // A woken reply newly kept down, by why.
            let down = |t: &Turn, because: &str| {
                t.up.as_ref()
                    .and_then(|u| u.not.as_deref())
                    .is_some_and(|why| why.contains(because))
            };
            let newly_down =
                |because: &str| down(turn, because) && !before.is_some_and(|b| down(b, because));
            if newly_down("follow-up-depth") {
                self.sometimes.depth_limit += 1;
            }
            if newly_down("its own child's chat") {
                self.sometimes.own_chat += 1;
            }
            let states = self.turn_states.entry(turn.turn_id.clone()).or_default();
            if states.last() != Some(&turn.state) {
                states.push(turn.state);
            }
            self.last_turns.insert(turn.turn_id.clone(), turn.clone());
        }
        self.jobs = jobs;
        self.turns = turns;
    }

    fn fail(&self, what: &str) -> ! {
        panic!(
            "{what}\nhistory so far:\n  {}\njobs: {}\nturns: {}",
            self.trail.join("\n  "),
            serde_json::to_string_pretty(&self.jobs).unwrap_or_default(),
            serde_json::to_string_pretty(&self.turns).unwrap_or_default()
        )
    }

    /// Server up, no faults, chats idle, and enough simulated time for every deadline.
    pub fn drain(&mut self) {
        // What other processes still had queued lands first: the drain then makes the
        // world quiet.
        self.leftovers();
        // The config file is fixed before the drain (issue 36 M2): its ticks run.
        if self.env.config_broken() {
            self.apply(&Op::FixConfig);
        }
        {
            let mut s = self.env.server.lock();
            s.down = false;
            s.post_fault = None;
            s.flaky = false;
            s.stop_fault = false;
            s.crash = None;
            s.quiet = true;
            for c in s.chats.iter_mut() {
                c.busy = false;
            }
        }
        self.trail.push("-- drain --".into());
        self.drained_at = self.env.clock.secs();
        self.drain_seq = self.env.server.next_seq();
        self.quiet_ticks();
    }

    /// After the drain, a person runs the `atc redeliver` of every task `atc doctor` and
    /// `atc status` show waiting for them (`status::stuck`: each given up, the follow-ups of
    /// a delegation tree among them, checked to be all there), with `--create-session` (a
    /// chat that went is started again); then the world goes quiet again. Returns how many
    /// tasks were redelivered.
    pub fn mend(&mut self) -> usize {
        let file = self.env.store().load().expect("the file loads");
        // What a person is shown (`atc doctor`'s deliveries, `atc status`): every job's own
        // block given up, and every follow-up given up, whose task's result landed.
        let listed = atc::status::stuck(&file.jobs, &file.turns);
        let shown = |task: &str| listed.iter().any(|s| s.task_id == task);
        for job in &file.jobs {
            let state = atc::status::delivery(job, file.turn_of(job)).map(|(_, state)| state);
            if state.is_some_and(TurnState::is_given_up) && !shown(&job.task_id) {
                self.fail(&format!("{}'s given-up delivery is not shown", job.task_id));
            }
        }
        for turn in file
            .turns
            .iter()
            .filter(|t| t.is_follow_up() && t.state.is_given_up())
        {
            if let Some(hidden) = turn.carries.iter().find(|b| !shown(&b.task_id)) {
                self.fail(&format!(
                    "{}'s given-up follow-up {} is not shown",
                    hidden.task_id, turn.turn_id
                ));
            }
        }
        let tasks = stuck_tasks(&file);
        if tasks.is_empty() {
            return 0;
        }
        self.trail.push("-- mend --".into());
        // Quiet: the drain left a follow-up's fault armed (one may meet the drain's own).
        self.env.server.lock().up_fault = None;
        // All at once, as `atc status` lists them; one by one if that is refused (all or
        // none: one of them delivered since, or sent again with another's turn).
        let create_session = true;
        let all = tasks.iter().fold(0u8, |set, t| set | 1 << t);
        let refused = |world: &mut World, op: Op| {
            let at = world.trail.len();
            world.apply(&op);
            world.trail[at].contains(" → refused: ")
        };
        let mut sent: Vec<u8> = tasks.clone();
        let many = Op::RedeliverMany {
            tasks: all,
            create_session,
        };
        if refused(self, many) {
            sent.clear();
            for &task in &tasks {
                let one = Op::Redeliver {
                    task,
                    create_session,
                };
                if !refused(self, one) {
                    sent.push(task);
                }
            }
        }
        // A timer's ticks, 20 s apart (each moves the clock so), long enough for a turn of
        // unknown outcome to be read back for sure (two looks `--settle` apart, `--settle`
        // after it became unknown) and posted: the drain's jumps would close its window.
        let file = self.env.store().load().expect("the file loads");
        if file.turns.iter().any(|t| t.state == TurnState::Unconfirmed) {
            let settle = self.env.limits().settle.as_secs();
            for _ in 0..=3 * settle / 20 {
                self.apply(&Op::Tick);
            }
        }
        self.quiet_ticks();
        // On a quiet server, with the chats started again, what went again landed.
        let file = self.env.store().load().expect("the file loads");
        for task in sent.iter().map(|&t| task_id(t)) {
            let Some(job) = file.find(&task) else {
                continue;
            };
            let landed = atc::status::delivery(job, file.turn_of(job)).map(|(_, state)| state);
            let up = file
                .turns
                .iter()
                .filter(|t| t.is_follow_up() && t.carries_job(&job.job_id))
                .find(|t| t.state != TurnState::Delivered);
            if landed.is_some_and(|state| state != TurnState::Delivered) || up.is_some() {
                self.fail(&format!(
                    "{task} was sent again after the drain and did not land: its block {landed:?}, a follow-up {:?}",
                    up.map(|t| (&t.turn_id, t.state))
                ));
            }
        }
        sent.len()
    }

    /// The drain's ticks: the clock past every limit, then ticks while a turn is due or
    /// a delivered one waits to be followed.
    fn quiet_ticks(&mut self) {
        let l = *self.env.limits();
        // Each tick also moves the clock 20 s on. A ceiling after the drain began, a
        // scheduled tick polls every watch on its back-off (a kick the drain never sends:
        // `judge_polls` checks that it did).
        let jumps = [
            Duration::ZERO,
            l.settle,
            l.poll_ceiling,
            l.busy_deadline + l.settle,
            l.max_age,
            l.settle,
            l.busy_deadline + l.settle,
        ];
        for jump in jumps {
            self.env.clock.advance(jump);
            for _ in 0..2 {
                self.apply(&Op::Tick);
            }
        }
        // A delegation tree's follow-ups go up one level a tick, and one turn a tick goes
        // into each chat: tick on (20 s apart) while a turn is due or a delivered one waits
        // to be followed.
        for _ in 0..60 {
            let file = self.env.store().load().expect("the file loads");
            let now = self.now();
            let waiting = file.turns.iter().any(|t| !atc::turn::is_settled(t))
                || !atc::turn::to_follow(&file.turns, now, &l).is_empty();
            if !waiting {
                break;
            }
            self.apply(&Op::Tick);
        }
    }

    /// The promises, checked over everything the history did. Returns the delivered
    /// turns it checked, and how many of them were batches.
    pub fn check(&mut self) -> (u64, u64) {
        let s = self.env.server.lock();
        let notes = self.env.notes();
        let mut turns = 0u64;
        let mut batches = 0u64;
        let heard: BTreeSet<&str> = notes
            .heard
            .iter()
            .flat_map(|line| {
                let named = line
                    .strip_prefix("atc: gave up on ")
                    .and_then(|rest| rest.split(' ').next())
                    .into_iter();
                let with = line
                    .split("turn also carries ")
                    .nth(1)
                    .and_then(|rest| rest.split(')').next())
                    .into_iter()
                    .flat_map(|list| list.split(", "));
                named.chain(with).collect::<Vec<_>>()
            })
            .collect();
        // The oracle's verdict, from the world alone.
        {
            let facts = notes.facts.clone();
            let ends: BTreeMap<String, End> = s
                .tasks
                .iter()
                .filter_map(|(id, t)| t.end.clone().map(|e| (id.clone(), e)))
                .collect();
            let drained_at = self.drained_at;
            let max_age = limits().max_age.as_secs();
            let first_watch: BTreeMap<&str, u64> =
                facts.iter().fold(BTreeMap::new(), |mut first, (at, f)| {
                    if let Fact::Watched { task, .. } = f {
                        first.entry(task.as_str()).or_insert(*at);
                    }
                    first
                });
            let (verdict, wrong) =
                crate::oracle::judge(&facts, &s.chats, &s.gone, &ends, &heard, |task| {
                    // Short of --max-age when the drain's first polls ran (from the task's
                    // first watch: a watch that moved it keeps its age).
                    first_watch
                        .get(task)
                        .is_some_and(|at| drained_at.saturating_sub(*at) + 120 < max_age)
                });
            if let Some(first) = wrong.first() {
                self.fail(&format!("the oracle: {first}"));
            }
            self.verdict = verdict;
            // Delegation trees: the follow-ups, judged from the same world.
            let l = limits();
            let gone: BTreeSet<String> = s.gone.iter().map(|c| c.id.clone()).collect();
            let (follow_ups, wrong) = crate::oracle::judge_follow_ups(&crate::oracle::Tree {
                facts: &notes.facts,
                seqs: &notes.fact_seqs,
                woken: &s.woken,
                served: &s.served,
                gone: &gone,
                crashed: &notes.crashed,
                stopped: &s.stopped,
                heard: &notes.heard_at,
                drain_seq: self.drain_seq,
                drain_tick_at: self.drained_at + 20,
                keep: l.keep.as_secs(),
                busy_deadline: l.busy_deadline.as_secs(),
                depth: l.follow_up_depth,
            });
            if let Some(first) = wrong.first() {
                self.fail(&format!("the oracle: {first}"));
            }
            self.verdict.follow_ups = follow_ups;
        }
        let all: Vec<(String, String)> =
            s.chats.iter().chain(&s.gone).flat_map(delivered).collect();
        let live: Vec<(String, String)> = s.chats.iter().flat_map(delivered).collect();
        // An archived chat is said: a turn records `chat_archived` only for a chat a person
        // had archived by the time it was stored there, and always for one archived since
        // before the turn was composed until it was stored (every look saw it archived).
        for chat in s.chats.iter().chain(&s.gone) {
            for m in chat.messages.iter().filter(|m| m["role"] == "user") {
                let id = m["metadata"]["metadata"]["qwenpaw_client_message_id"]
                    .as_str()
                    .unwrap_or("");
                let stored_at = m["sim_stored_at"].as_u64().unwrap_or(0);
                let Some(turn) = self.last_turns.get(id) else {
                    continue;
                };
                if turn.state != TurnState::Delivered
                    || turn.chat_id.as_deref() != Some(chat.id.as_str())
                {
                    continue;
                }
                let created = Timestamp::from_unix(0)
                    .elapsed_at(turn.created_at)
                    .as_secs();
                let ever = chat.archived.iter().any(|(at, on)| *on && *at <= stored_at);
                let throughout = chat
                    .archived
                    .iter()
                    .rev()
                    .find(|(at, _)| *at < created)
                    .is_some_and(|(_, on)| *on)
                    && !chat
                        .archived
                        .iter()
                        .any(|(at, _)| (created..=stored_at).contains(at));
                if turn.chat_archived && !ever {
                    self.fail(&format!(
                        "turn {id} says its chat {} is archived; nobody archived it",
                        chat.id
                    ));
                }
                if throughout && !turn.chat_archived {
                    self.fail(&format!(
                        "turn {id} went into chat {}, archived throughout, and does not say so",
                        chat.id
                    ));
                }
            }
        }
        // Never twice: no chat holds a delivery (by its id) twice.
        for chat in s.chats.iter().chain(&s.gone) {
            let mut ids: BTreeMap<String, usize> = BTreeMap::new();
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
                    // "other" counts a result QwenPaw 2.2 does not produce (a block of no
                    // known kind): never in a turn atc composed.
                    let header = rest.lines().next().unwrap_or("");
                    if header.contains(" other") {
                        self.fail(&format!("a batch counts a block as other: {header:?}"));
                    }
                }
            }
            for (id, n) in &ids {
                if *n > 1 {
                    self.fail(&format!("delivery {id} is in chat {} {n} times", chat.id));
                }
            }
        }
        // The blocks of every task, across every chat: results, notices, check-ins.
        let mut results: BTreeMap<String, usize> = BTreeMap::new();
        let mut live_results: BTreeMap<String, usize> = BTreeMap::new();
        let mut notices: BTreeMap<String, usize> = BTreeMap::new();
        let mut check_ins: BTreeMap<(String, u32), usize> = BTreeMap::new();
        // Copies are counted in the chats that are there: a chat deleted after a POST of
        // unknown outcome may hold a copy the read-back could no longer find.
        let mut live_check_ins: BTreeMap<(String, u32), usize> = BTreeMap::new();
        for (_, text) in &live {
            for block in blocks(text) {
                let task = block
                    .strip_prefix("[TASK_ID: ")
                    .and_then(|rest| rest.split(']').next())
                    .unwrap_or("")
                    .to_owned();
                if block.contains("[STATUS: finished]") {
                    *live_results.entry(task).or_default() += 1;
                } else if block.contains("[STATUS: running]") {
                    let n: u32 = block
                        .split("(check-in ")
                        .nth(1)
                        .and_then(|rest| rest.split(' ').next())
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(u32::MAX);
                    *live_check_ins.entry((task, n)).or_default() += 1;
                }
            }
        }
        for (_, text) in &all {
            // A follow-up (issue 37) is no result, notice or check-in: the oracle judges it.
            for block in blocks(text).filter(|b| crate::oracle::follow_up_of(b).is_none()) {
                let task = block
                    .strip_prefix("[TASK_ID: ")
                    .and_then(|rest| rest.split(']').next())
                    .unwrap_or("")
                    .to_owned();
                if block.contains("[STATUS: running]") {
                    let n: u32 = block
                        .split("(check-in ")
                        .nth(1)
                        .and_then(|rest| rest.split(' ').next())
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(u32::MAX);
                    if n > atc::lifecycle::MAX_CHECK_INS {
                        self.fail(&format!("check-in {n} went out: {block:?}"));
                    }
                    *check_ins.entry((task, n)).or_default() += 1;
                } else if block.contains("[STATUS: finished]") {
                    *results.entry(task).or_default() += 1;
                } else {
                    *notices.entry(task).or_default() += 1;
                }
            }
        }
        // Always heard, once: each give-up the job file recorded was said exactly once by a
        // tick a person hears (kicked ticks say nothing), and after the drain (ticks a
        // person hears) none is left unsaid.
        let file = self.env.store().load().expect("the file loads");
        if let Some(r) = file.give_ups.iter().find(|r| r.is_unsaid()) {
            self.fail(&format!(
                "after the drain a give-up is still unsaid: {}",
                r.line
            ));
        }
        let mut recorded: BTreeMap<&str, usize> = BTreeMap::new();
        for ((_, line), (said, _)) in &self.give_ups {
            if *said > 0 {
                *recorded.entry(line.as_str()).or_default() += said;
            }
        }
        let mut told: BTreeMap<&str, usize> = BTreeMap::new();
        for line in &notes.heard {
            *told.entry(line.as_str()).or_default() += 1;
        }
        if recorded != told {
            self.fail(&format!(
                "give-ups recorded said {recorded:#?}, lines said {told:#?}"
            ));
        }
        let mut queue = Queue::default();
        // Each registration's last state decides what its blocks must have come to.
        for (job_id, job) in &self.last {
            let task = &job.task_id;
            if self.forgotten.contains(task) {
                continue;
            }
            // A later registration of the same task answers for it.
            if self.replaced.contains(job_id) {
                continue;
            }
            let turn = job.turn.as_deref().and_then(|id| self.last_turns.get(id));
            let owed_result =
                self.owed
                    .contains(&(job_id.clone(), task.clone(), BlockKind::Result));
            let owed_notice =
                self.owed
                    .contains(&(job_id.clone(), task.clone(), BlockKind::Notice));
            // Any registration of the task, earlier ones included: at most one copy in the
            // chats that are there (one deleted may hold another, posted before it went).
            let copies = results.get(task).copied().unwrap_or(0);
            let live_copies = live_results.get(task).copied().unwrap_or(0);
            if live_copies > 1 {
                self.fail(&format!(
                    "the result of {task} is in the chats {live_copies} times"
                ));
            }
            if owed_result {
                queue.owed += 1;
                let may_have_landed = turn.is_some_and(Turn::may_have_landed);
                match job.shown() {
                    Status::Done => {
                        if copies == 0 {
                            self.fail(&format!(
                                "{task} says delivered, and no chat has its result"
                            ));
                        }
                        queue.delivered_once += 1;
                    }
                    Status::Unconfirmed => {
                        queue.given_up += 1;
                        queue.heard += u64::from(heard.contains(task.as_str()));
                        if !heard.contains(task.as_str()) {
                            self.fail(&format!(
                                "{task} ended of unknown outcome, and no give-up said so"
                            ));
                        }
                    }
                    Status::Undelivered | Status::Misrouted | Status::Error => {
                        queue.given_up += 1;
                        if live_copies > 0 {
                            self.fail(&format!(
                                "{task} was given up ({}) as never posted, and a chat has its result",
                                job.shown()
                            ));
                        }
                        queue.heard += u64::from(heard.contains(task.as_str()));
                        if !heard.contains(task.as_str()) {
                            self.fail(&format!(
                                "{task} was given up ({}), and no give-up said so",
                                job.shown()
                            ));
                        }
                    }
                    Status::Cancelled => {
                        queue.withdrawn += 1;
                        if live_copies > 0 && !may_have_landed {
                            self.fail(&format!(
                                "{task} was cancelled before its turn was claimed, and a chat has its result"
                            ));
                        }
                    }
                    // At most once, and exactly once unless the parent read it itself.
                    Status::Skipped if job.read_by_parent_at.is_some() => {
                        queue.read += 1;
                        if live_copies > 0 {
                            self.fail(&format!(
                                "the parent read {task} itself before atc posted it, and a chat has its result"
                            ));
                        }
                    }
                    other => {
                        self.fail(&format!("{task} owed its result and ended {other}"));
                    }
                }
            }
            if owed_notice {
                queue.owed += 1;
                let told = notices.get(task).copied().unwrap_or(0);
                match job.notice.then(|| landed(job, turn)).flatten() {
                    Some(TurnState::Delivered) => {
                        if told == 0 {
                            self.fail(&format!(
                                "{task}'s parent was told, and no chat has the notice"
                            ));
                        }
                        queue.delivered_once += 1;
                    }
                    Some(
                        TurnState::Unconfirmed
                        | TurnState::Undelivered
                        | TurnState::Misrouted
                        | TurnState::Refused,
                    ) => {
                        queue.given_up += 1;
                        queue.heard += u64::from(heard.contains(task.as_str()));
                        if !heard.contains(task.as_str()) {
                            self.fail(&format!(
                                "{task}'s notice was given up, and no give-up said so"
                            ));
                        }
                    }
                    other => {
                        self.fail(&format!("{task} owed a notice and it ended {other:?}"));
                    }
                }
            }
        }
        // Check-ins: each at most once per registration that asked for them (one may be
        // born, sent and its record replaced between two looks at the file).
        let mut owed_check_ins: BTreeMap<(String, u32), usize> = BTreeMap::new();
        for (_, task, kind) in &self.owed {
            if let BlockKind::CheckIn { n } = kind {
                *owed_check_ins.entry((task.clone(), *n)).or_default() += 1;
            }
        }
        for ((task, n), copies) in &live_check_ins {
            let owed = self.checking_in.get(task).map_or(0, BTreeSet::len);
            if *copies > owed && !self.forgotten.contains(task) {
                self.fail(&format!(
                    "check-in {n} of {task} is in the chats {copies} times, owed {owed} times"
                ));
            }
        }
        queue.check_ins = owed_check_ins.values().map(|n| *n as u64).sum();
        queue.checked_in = check_ins.values().map(|n| *n as u64).sum();
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
            if open(
                job,
                self.turn_when_last.get(job_id),
                &self.turns,
                self.now(),
            ) {
                self.fail(&format!(
                    "{} is still {} (its block {:?}) after every deadline passed",
                    job.task_id,
                    job.shown(),
                    landed(job, self.turn_when_last.get(job_id))
                ));
            }
            let marker = format!("[TASK_ID: {}]", job.task_id);
            let turn = self.turn_when_last.get(job_id);
            match landed(job, turn) {
                // Always heard: a delivered turn is in exactly its target chat.
                Some(TurnState::Delivered) => {
                    let turns = turns_in(job);
                    if !turns.iter().any(|(_, t)| {
                        blocks(t).any(|b| {
                            b.starts_with(&marker)
                                && !b.contains("[STATUS: running]")
                                && crate::oracle::follow_up_of(b).is_none()
                        })
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
                Some(
                    TurnState::Undelivered
                    | TurnState::Misrouted
                    | TurnState::Unconfirmed
                    | TurnState::Refused,
                ) => {
                    let why = turn.and_then(|t| t.delivery.error.clone());
                    if why.is_none() && job.last_error.is_none() {
                        self.fail(&format!(
                            "{} gave up ({}) without a reason",
                            job.task_id,
                            job.shown()
                        ));
                    }
                }
                _ => {}
            }
            // Stops: only a watch that asked for one stops its child; a result of a child atc
            // stopped says so, once, and one it did not stop never does.
            let stopped = s.stopped.contains(&job.task_id);
            if stopped && !notes.stop_asked.contains(&job.task_id) {
                self.fail(&format!(
                    "{} was stopped, but no watch of it asked for --stop-after, and no cancel for --stop",
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
                let want = usize::from(job.stopped_at.is_some());
                if lines != want {
                    self.fail(&format!(
                        "{}'s result has {lines} stop lines, {want} expected",
                        job.task_id
                    ));
                }
            }
            if job.shown() == Status::Error
                && job.last_error.is_none()
                && turn.is_none_or(|t| t.delivery.error.is_none())
            {
                self.fail(&format!("{} is error without a reason", job.task_id));
            }
            if job.shown().watch().ends_without_answer()
                && job.options.on_no_answer == OnNoAnswer::Notify
                && !job.notice
            {
                self.fail(&format!(
                    "{} ended {} and its parent was never told",
                    job.task_id,
                    job.shown()
                ));
            }
        }
        let mut sometimes = notes.sometimes;
        sometimes.stored_late += s.stored_late;
        sometimes.child_running += self.verdict.follow_ups.early;
        sometimes.follow_up += self.verdict.follow_ups.stored;
        sometimes.three_levels += self.verdict.follow_ups.deep;
        sometimes.landed_later += self
            .env
            .server
            .deferred
            .load(std::sync::atomic::Ordering::SeqCst);
        drop(notes);
        drop(s);
        self.sometimes.add(&sometimes);
        self.queue = queue;
        (turns, batches)
    }
}

/// What a tick said is what its reports say it should: for a tick a person hears, each
/// pass's give-ups of earlier ticks nobody heard, then its own, in order; for one nobody
/// hears, nothing (its give-ups are left unsaid in the job file).
fn said_as_reported(
    reports: &[atc::report::Report],
    heard: bool,
    said: &[String],
) -> Result<(), String> {
    let expected: Vec<String> = if heard {
        reports
            .iter()
            .flat_map(|r| {
                r.said_late()
                    .iter()
                    .cloned()
                    .chain(r.gave_up().iter().map(|g| g.line()))
            })
            .collect()
    } else {
        if reports.iter().any(|r| !r.said_late().is_empty()) {
            return Err("a tick nobody hears said earlier give-ups (to /dev/null)".into());
        }
        Vec::new()
    };
    if said != expected {
        return Err(format!(
            "the passes said {said:?}, their reports say {expected:?} (heard: {heard})"
        ));
    }
    Ok(())
}

/// The texts of the atc turns a chat holds, in order.
pub fn delivered_texts(chat: &crate::server::Chat) -> Vec<String> {
    delivered(chat).into_iter().map(|(_, text)| text).collect()
}

/// The blocks of a turn, each from its `[TASK_ID: …]` line (a batch holds several).
pub fn blocks(text: &str) -> impl Iterator<Item = &str> {
    text.match_indices("[TASK_ID: ").map(move |(at, _)| {
        let rest = &text[at..];
        let end = rest[1..].find("[TASK_ID: ").map_or(rest.len(), |n| n + 1);
        &rest[..end]
    })
}

/// Still live: watched, its block on its way, a turn carrying it due or with a forward due.
/// `turn`: the one it pointed at, as it was when the job was last seen.
fn open(job: &Job, turn: Option<&Turn>, turns: &[Turn], now: Timestamp) -> bool {
    job.shown() == Status::Pending
        || atc::status::owes(job, turn).is_some()
        || turns.iter().any(|t| {
            t.carries_job(&job.job_id)
                && (atc::turn::is_due(t, now, &limits()) || atc::turn::forward_due(t))
        })
}

/// Ended without delivering: the result or the notice given up, as the file says.
fn gave_up(job: &Job) -> bool {
    matches!(
        job.shown(),
        Status::Error
            | Status::Lost
            | Status::Expired
            | Status::Abandoned
            | Status::Undelivered
            | Status::Misrouted
            | Status::Unconfirmed
    )
}

/// Where the block `job` has on its way stands, in `turn` (the one it points at).
fn landed(job: &Job, turn: Option<&Turn>) -> Option<TurnState> {
    atc::status::delivery(job, turn).map(|(_, state)| state)
}

/// Holds its rendered result, not yet (certainly) delivered.
fn holds_result(job: &Job) -> bool {
    job.final_text.is_some()
        && job.outcome.is_some()
        && match job.shown() {
            Status::Delivering | Status::Undelivered | Status::Misrouted | Status::Error => true,
            Status::Skipped => job.read_by_parent_at.is_some(),
            _ => false,
        }
}

/// Whether `step`s can take a job from `from` to `to` (the statuses `lifecycle` moves
/// between; a job follows the turn that carries it wherever it goes).
/// Whether one step may take a job from `from` to `to`.
fn one_step(from: Status, to: Status) -> bool {
    use Status::*;
    let outbound = [Delivering, Done, Unconfirmed, Undelivered, Misrouted, Error];
    match from {
        Pending => to != Pending,
        Delivering | Unconfirmed | Undelivered | Misrouted | Error => {
            outbound.contains(&to)
                || to == Cancelled && matches!(from, Delivering | Unconfirmed)
                // The parent read it itself before it was claimed (`parent-read`).
                || to == Skipped && from != Unconfirmed
        }
        // `redeliver` of a result the parent read itself: the one held, or polled again.
        Skipped => matches!(to, Delivering | Pending),
        Done | Cancelled | Lost | Expired | Abandoned => false,
    }
}

/// Whether some steps may take a job from `from` to `to`: between two looks at the file,
/// several may have run (a tick's passes, and what other processes did between its
/// phases: `redeliver` of an error, then `cancel` of the delivering job it made).
fn reachable(from: Status, to: Status) -> bool {
    let mut seen = vec![from];
    let mut next = 0;
    while next < seen.len() {
        let at = seen[next];
        next += 1;
        for s in Status::ALL {
            if one_step(at, s) && !seen.contains(&s) {
                seen.push(s);
            }
        }
    }
    seen.contains(&to)
}

fn kind(r: &atc::lifecycle::Registered) -> String {
    let name = format!("{r:?}");
    let name = name.split([' ', '(', '{']).next().unwrap_or("");
    format!("{} {}", r.job().task_id, name)
}

/// Why a watch was refused, in a few words (the trail's).
fn refused(why: &atc::lifecycle::WatchRefused) -> String {
    use atc::lifecycle::WatchRefused as R;
    match why {
        R::GroupWentOut { group } => format!("GroupWentOut {group}"),
        R::Task { job, turn, was } => format!(
            "Task {} was {was} (turn {})",
            job.task_id,
            turn.as_ref().map_or("none", |t| t.state.as_str())
        ),
        R::OtherChildSession { task_id, .. } => format!("OtherChildSession of {task_id}"),
        R::OwnChildSession { task_id, .. } => format!("OwnChildSession of {task_id}"),
        R::ChildSessionTaken { task_id, of, .. } => {
            format!("ChildSessionTaken of {task_id} (by {of})")
        }
    }
}

fn short(text: &str) -> String {
    text.chars().take(80).collect()
}
