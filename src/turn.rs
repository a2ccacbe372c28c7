//! A turn: one POST into one parent chat, a record of its own in the job file (`turns`,
//! beside `jobs`). It has its own id (the delivery id QwenPaw keeps on the stored user
//! message, which read-back finds), the chat it goes to, what it carries in order (which
//! job, which block: a result, a notice, check-in *n*), its text once composed, and its
//! delivery state: the write-ahead record, attempts, busy answers, read-back, the last
//! HTTP status, the error, the parent turn it started and the IM forward (or console
//! toast) of that turn's reply.
//!
//! [`step`]`(&Turn, TurnEvent, now, &Limits) -> TurnTransition` is the one place that
//! changes a turn, as `lifecycle::step` is for a job; the table test (`turn/tests.rs`)
//! has a row for every (state × event) pair. Whether a job's block was delivered, when
//! and how is read from here (`status`), never copied onto the job.
//!
//! ```text
//!  open ──probe: chat idle──▶ claimed (write-ahead) ──POST 2xx──▶ delivered
//!   │  ▲      ▲                     │
//!   │  │      └── 409, not sent ────┤ (a definite no: open again, until --busy-deadline:
//!   │  └─probe: busy, unreachable   │  undelivered)
//!   │                               ├─timeout, reset, 5xx─▶ unconfirmed ──found──▶ delivered
//!   └─probe: no such chat─▶ misrouted └─4xx─▶ refused        │
//!                               claimed ◀──read back: absent, chat idle, settled──┘
//!  undelivered, misrouted, refused ──redeliver──▶ open (nothing of it is in the chat)
//! ```
//!
//! While a turn is **open** (composed, not claimed) its members may change: `compose`
//! takes out a job that was cancelled, watched again or re-targeted, adds a new block
//! due for the same chat, and writes the text again. Once **claimed** (its write-ahead
//! record saved: the POST may be out, or in the chat) it is what it is, whatever happens
//! to its jobs, until it settles. A definite no from the server (409, nothing sent) lets
//! the claim go: nothing of the turn is in the chat. Once a POST of it had an unknown
//! outcome, though, it is never open again until it is given up: it may be in a chat.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::job::{ChatKey, ForwardMode, is_default, is_false, is_zero};
use crate::limits::Limits;
use crate::outcome::Outcome;
use crate::time::Timestamp;

mod forward;
mod read_back;
mod select;

pub use forward::{FORWARD_ATTEMPTS, Forward, ForwardStatus, MAX_FORWARD_CHARS, forward_due};
use forward::{channel_checked, forward_mut, forwarded, parent_polled};
use read_back::{Absent, absent, misrouted, read_back_closed, read_back_over, recovered};
pub use select::*;

/// Which of a job's blocks a turn carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "block", rename_all = "snake_case")]
pub enum BlockKind {
    /// The child's rendered result.
    Result,
    /// The notice of a watch that ended without an answer (lost, expired, abandoned).
    Notice,
    /// Check-in `n` of a child still running (`--check-in`).
    CheckIn { n: u32 },
    /// A follow-up of a child whose result was delivered: the reply its agent wrote when
    /// a task of its own (a grandchild) finished later, sent up to the child's parent
    /// (issue 37). `depth` counts the levels it went up (1: a grandchild's, 2: a
    /// great-grandchild's…). Its text is fixed when its turn opens (`lifecycle::tree`).
    FollowUp { depth: u32 },
}

impl BlockKind {
    pub fn is_check_in(self) -> bool {
        matches!(self, BlockKind::CheckIn { .. })
    }

    pub fn is_follow_up(self) -> bool {
        matches!(self, BlockKind::FollowUp { .. })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            BlockKind::Result => "result",
            BlockKind::Notice => "notice",
            BlockKind::CheckIn { .. } => "check-in",
            BlockKind::FollowUp { .. } => "follow-up",
        }
    }
}

/// One job's block in a turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    pub job_id: String,
    pub task_id: String,
    #[serde(flatten)]
    pub kind: BlockKind,
}

/// Where a turn stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TurnState {
    /// Composed, never claimed: waiting for its chat; its members may still change.
    Open,
    /// Its write-ahead record was saved: in flight, or (once a POST of it had an unknown
    /// outcome) waiting to be posted again. It may be in the chat: it is what it is.
    Claimed,
    /// A POST's outcome is unknown: the chat is read back (by the turn's id) to find out.
    Unconfirmed,
    /// In the parent chat (the server said so, or read-back found it).
    Delivered,
    /// The parent chat stayed busy or unreachable past `--busy-deadline`: nothing was sent.
    Undelivered,
    /// The parent chat does not exist (and `--create-session` was not given).
    Misrouted,
    /// The server refused it (a 4xx other than 409).
    Refused,
}

impl TurnState {
    pub const ALL: [TurnState; 7] = [
        TurnState::Open,
        TurnState::Claimed,
        TurnState::Unconfirmed,
        TurnState::Delivered,
        TurnState::Undelivered,
        TurnState::Misrouted,
        TurnState::Refused,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TurnState::Open => "open",
            TurnState::Claimed => "claimed",
            TurnState::Unconfirmed => "unconfirmed",
            TurnState::Delivered => "delivered",
            TurnState::Undelivered => "undelivered",
            TurnState::Misrouted => "misrouted",
            TurnState::Refused => "refused",
        }
    }

    /// Still on its way: open or claimed.
    pub fn is_on_its_way(self) -> bool {
        matches!(self, TurnState::Open | TurnState::Claimed)
    }

    /// Given up with nothing of it in the chat: the chat was missing, stayed busy or out of
    /// reach, or the server refused it. `redeliver` may compose it again.
    pub fn is_given_up(self) -> bool {
        matches!(
            self,
            TurnState::Undelivered | TurnState::Misrouted | TurnState::Refused
        )
    }
}

impl std::fmt::Display for TurnState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The parent chat a turn goes to: (base URL, agent, session, user, channel), recorded
/// exactly as the watch gave it (QwenPaw starts a ghost chat for any triple it does not
/// know).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chat {
    pub base_url: String,
    pub agent_id: String,
    pub session_id: String,
    pub user_id: String,
    pub channel: String,
}

impl Chat {
    pub fn key(&self) -> ChatKey<'_> {
        (
            &self.base_url,
            &self.agent_id,
            &self.session_id,
            &self.user_id,
            &self.channel,
        )
    }

    /// "session s-77 (user default, channel console)", for people.
    pub fn describe(&self) -> String {
        format!(
            "session {} (user {}, channel {})",
            self.session_id, self.user_id, self.channel
        )
    }
}

/// Delivery bookkeeping: the write-ahead record and the back-off state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    /// POSTs started (write-ahead: counted before the request goes out).
    #[serde(default)]
    pub attempts: u32,
    /// 409 "chat busy" answers so far (and looks that found the chat running).
    #[serde(default)]
    pub busy: u32,
    /// Attempts that could not reach the server (nothing was sent).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unreachable: u32,
    #[serde(default)]
    pub last_http_status: Option<u16>,
    /// When the next attempt is due (after a 409).
    #[serde(default)]
    pub next_attempt_at: Option<Timestamp>,
    /// Set while a POST is in flight. Found set by a later tick, it means the tick died
    /// mid-POST: the outcome is unknown.
    #[serde(default)]
    pub attempt_started_at: Option<Timestamp>,
    /// The first busy or unreachable answer since the turn became due: `--busy-deadline`
    /// counts from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_since: Option<Timestamp>,
    /// When the last POST was claimed (it may have reached the server from then on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempt_at: Option<Timestamp>,
    /// When atc learned an attempt's outcome was unknown: the read-back window counts
    /// from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown_since: Option<Timestamp>,
    /// When a read-back first found the turn absent from its chat, the chat idle and the
    /// settle window over: the turn is posted again only when a look at least `--settle`
    /// later finds it absent too (a server may store a POST late).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub absent_since: Option<Timestamp>,
    /// When a tick found the read-back window (`--busy-deadline` from `unknown_since`)
    /// closed: atc stopped looking; whether the turn arrived is for a person to see.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_back_closed_at: Option<Timestamp>,
    /// The last thing that went wrong delivering (a busy or missing chat, an unknown or
    /// refused POST).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `read-back` when the delivery was confirmed by finding it in the parent chat rather
    /// than by the server's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmed: Option<String>,
}

impl Delivery {
    /// Busy and unreachable answers so far.
    pub fn deferrals(&self) -> u32 {
        self.busy + self.unreachable
    }
}

/// One POST into one parent chat. Fields this version does not know are kept as they are
/// (`extra`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// The delivery id QwenPaw keeps on the stored message (`qwenpaw_client_message_id`).
    pub turn_id: String,
    #[serde(flatten)]
    pub chat: Chat,
    /// A group's turn (`--group`): the group's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The POST may start the chat (`--create-session` of the jobs it carries).
    #[serde(default, skip_serializing_if = "is_false")]
    pub create_session: bool,
    /// `--forward` of the jobs it carries.
    #[serde(default, skip_serializing_if = "is_default")]
    pub forward_mode: ForwardMode,
    pub state: TurnState,
    /// What it carries, in its order.
    pub carries: Vec<Block>,
    /// The exact text it posts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// The parent chat's id on the server, once looked up (read-back looks there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_id: Option<String>,
    /// A person had archived that chat at atc's last look before posting: the turn lands
    /// there all the same, where QwenPaw's console lists it under archived chats.
    #[serde(default, skip_serializing_if = "is_false")]
    pub chat_archived: bool,
    #[serde(default)]
    pub delivery: Delivery,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<Timestamp>,
    /// The task id of the parent turn the delivery started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_task_id: Option<String>,
    /// How that parent turn ended (completed, failed…), once the server says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_turn: Option<String>,
    /// Sending the parent's reply on to the person (IM parents), or the console toast.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward: Option<Forward>,
    /// For a turn into a child's chat (a background task's, whose own result was
    /// delivered): where the reply it woke went up, or why it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up: Option<Up>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Turn {
    /// A new open turn into `chat`, carrying nothing yet.
    pub fn new(turn_id: String, chat: Chat, now: Timestamp) -> Turn {
        Turn {
            turn_id,
            chat,
            group: None,
            create_session: false,
            forward_mode: ForwardMode::default(),
            state: TurnState::Open,
            carries: Vec::new(),
            text: None,
            created_at: now,
            updated_at: now,
            chat_id: None,
            chat_archived: false,
            delivery: Delivery::default(),
            delivered_at: None,
            turn_task_id: None,
            parent_turn: None,
            forward: None,
            up: None,
            extra: Map::new(),
        }
    }

    /// A follow-up's turn (`BlockKind::FollowUp`): its one block and text are fixed when
    /// it opens, so `compose` never joins, splits or writes it again.
    pub fn is_follow_up(&self) -> bool {
        self.carries.iter().any(|b| b.kind.is_follow_up())
    }

    /// How many levels the blocks it carries went up already (0: a child's own).
    pub fn depth(&self) -> u32 {
        self.carries
            .iter()
            .map(|b| match b.kind {
                BlockKind::FollowUp { depth } => depth,
                _ => 0,
            })
            .max()
            .unwrap_or(0)
    }

    /// The tasks whose blocks it carries besides `job_id`'s, in its order.
    pub fn tasks_besides(&self, job_id: &str) -> Vec<&str> {
        self.carries
            .iter()
            .filter(|b| b.job_id != job_id)
            .map(|b| b.task_id.as_str())
            .collect()
    }

    /// Composed, never claimed: its members may change.
    pub fn is_open(&self) -> bool {
        self.state == TurnState::Open
    }

    /// Of unknown outcome since before atc had it: posted by another (the seed plugin, its
    /// `unconfirmed` imported), never by atc, and marked so as not to be read back; until
    /// `atc redeliver` asks, atc neither reads it back nor knows since when.
    pub fn unknown_before_atc(&self) -> bool {
        self.state == TurnState::Unconfirmed
            && self.delivery.last_attempt_at.is_none()
            && self
                .delivery
                .unknown_since
                .is_some_and(|at| at < self.created_at)
    }

    /// True while a POST is claimed and its outcome not yet recorded (or the tick that
    /// claimed it died).
    pub fn in_flight(&self) -> bool {
        self.delivery.attempt_started_at.is_some()
    }

    /// True while a forward is claimed and its outcome not yet recorded.
    pub fn forward_in_flight(&self) -> bool {
        self.forward
            .as_ref()
            .is_some_and(|f| f.attempt_started_at.is_some())
    }

    /// Whether it may be in the parent chat: claimed (in flight, or it may have been sent
    /// before a 409), of unknown outcome, or delivered. Such a turn is never composed
    /// again, and a job it carries is never watched again into another turn.
    pub fn may_have_landed(&self) -> bool {
        matches!(
            self.state,
            TurnState::Claimed | TurnState::Unconfirmed | TurnState::Delivered
        )
    }

    /// Whether the parent's reply goes on to the person: a parent on an IM channel (not
    /// `console`, whose UI already shows the turn), unless the watch said `--forward never`.
    pub fn forwards(&self) -> bool {
        self.forward_mode == ForwardMode::Auto && self.chat.channel != "console"
    }

    /// Whether the person at the web console is told, once the woken turn has ended, that
    /// something arrived: an open console page does not show a turn posted from outside
    /// until it is reloaded.
    pub fn toasts(&self) -> bool {
        self.forward_mode == ForwardMode::Auto && self.chat.channel == "console"
    }

    /// The blocks it carries of results and notices (not check-ins).
    pub fn answers(&self) -> impl Iterator<Item = &Block> {
        self.carries.iter().filter(|b| !b.kind.is_check_in())
    }

    /// Whether it carries `job_id`'s block `kind`.
    pub fn carries_block(&self, job_id: &str, kind: BlockKind) -> bool {
        self.carries
            .iter()
            .any(|b| b.job_id == job_id && b.kind == kind)
    }

    /// Whether it carries any block of `job_id`.
    pub fn carries_job(&self, job_id: &str) -> bool {
        self.carries.iter().any(|b| b.job_id == job_id)
    }

    /// A turn in `state` for tests: one result of job `j1` (task `task-1`), composed.
    #[cfg(test)]
    pub fn sample(state: TurnState) -> Turn {
        let mut turn = Turn::new(
            "atc-j1".into(),
            Chat {
                base_url: "http://h/api".into(),
                agent_id: "default".into(),
                session_id: "s".into(),
                user_id: "u".into(),
                channel: "console".into(),
            },
            Timestamp::from_unix(1_800_000_000),
        );
        turn.carries = vec![Block {
            job_id: "j1".into(),
            task_id: "task-1".into(),
            kind: BlockKind::Result,
        }];
        turn.text = Some("T".into());
        turn.state = state;
        turn
    }
}

/// Where the reply a delivery into a child's chat woke went (issue 37): up to the parent
/// of the watch whose child that chat is, as a follow-up of its task, or not, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Up {
    /// The watch whose child's chat it is (its job and task).
    pub job_id: String,
    pub task_id: String,
    /// The follow-up's turn, when it went up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<String>,
    /// Why it did not go up (the depth limit, an empty reply…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not: Option<String>,
}

/// What a look at the parent chat found, just before a turn goes out (or to learn whether
/// one of unknown outcome arrived).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    /// No chat has the turn's exact (session, user, channel): posting would start a new one.
    NoChat,
    /// The chat exists; whether a turn is running in it, and whether a person archived it
    /// (a POST still lands there, out of the console's main list).
    Chat {
        chat_id: String,
        running: bool,
        archived: bool,
    },
    /// Read back: the turn is in the chat; how the parent turn it started ended, if stamped.
    Found {
        chat_id: String,
        turn: Option<String>,
    },
    /// Read back: the turn is not in the chat.
    NotFound { chat_id: String, running: bool },
    /// Could not tell (server unreachable, an error answer, a body that is no use).
    Unknown { error: String },
    /// A definite no: the server does not know (or will not serve) the parent agent.
    Refused { error: String },
}

/// How one delivery POST ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Posted {
    /// 2xx: the parent turn started.
    Accepted { turn_task_id: Option<String> },
    /// 409: the parent chat is running a turn.
    Busy { detail: String },
    /// Nothing was sent (connection refused, DNS failure, connect timeout).
    NotSent { error: String },
    /// The request may have been received: timeout or reset after sending, a 5xx, or a
    /// 2xx we cannot read.
    Unknown {
        error: String,
        http_status: Option<u16>,
    },
    /// Any other 4xx: the server will not take this delivery.
    Rejected { http_status: u16, detail: String },
}

/// What the parent turn a delivery started is doing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParentTurn {
    Running,
    /// It ended: `completed`, `failed`…, with its final tool-free reply ("" if none).
    Ended {
        status: String,
        reply: String,
    },
    /// The server has no record of it (it restarted).
    Gone,
}

/// What the parent's channel says, before a forward goes out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Health {
    Healthy,
    /// Running but not able to send (a disconnected broker, say): hold the forward.
    Unhealthy {
        detail: String,
    },
    /// Not configured or not running for the agent: a definite no.
    Missing {
        detail: String,
    },
    /// Could not tell.
    Unknown {
        error: String,
    },
}

/// How one forward (`POST /messages/send`) ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sent {
    /// 2xx: the server sent it.
    Accepted,
    /// The server said sending failed (5xx), or nothing was sent: try again.
    Failed {
        http_status: Option<u16>,
        detail: String,
    },
    /// Any other 4xx (an unconfigured channel, an unknown agent): never sent.
    Rejected { http_status: u16, detail: String },
    /// Timeout or reset after sending: it may have been sent.
    Unknown { error: String },
}

/// Something that happened to a turn.
#[derive(Clone, Debug, PartialEq)]
pub enum TurnEvent {
    /// `compose` wrote its members and text again (only an open turn takes it), and
    /// whether one of them allows it to start the chat.
    Composed {
        carries: Vec<Block>,
        text: String,
        create_session: bool,
    },
    /// A tick looked at the parent chat before posting (or read it back).
    Probed(Probe),
    /// The POST ended.
    Posted(Posted),
    /// A tick polled the parent turn the delivery started. `toast` is what a console
    /// parent's person is told once it ended (`describe::toast_text`, worded by the shell);
    /// `up`, where its reply goes up (`lifecycle::tree::up`), when the chat is a child's:
    /// a reply sent up is neither forwarded nor toasted here (the follow-up is, at the top).
    ParentPolled {
        turn: ParentTurn,
        toast: String,
        up: Option<Up>,
    },
    /// A tick asked the parent's channel whether it can send (before a forward).
    ChannelChecked(Health),
    /// The forward's send ended.
    Forwarded(Sent),
    /// A tick found a POST (or a forward) left in flight by a tick that died.
    Recovered,
    /// A tick found the read-back window of a turn of unknown outcome closed: atc stops
    /// looking, and a person decides.
    ReadBackClosed,
    /// A person ran `atc redeliver`; `create_session` allows a new chat from now on.
    Redeliver { create_session: bool },
}

/// What the shell must do after saving the new turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    None,
    /// POST `text` into the turn's parent chat. Only ever returned with the write-ahead
    /// record (the attempt counted, `attempt_started_at` set) in the new turn.
    Post {
        text: String,
    },
    /// Send `text` to the person on the parent's channel, with the forward's write-ahead
    /// record in the new turn.
    Forward {
        text: String,
    },
}

/// The turn after an event, what to do next, and what happened.
#[derive(Clone, Debug, PartialEq)]
pub struct TurnTransition {
    pub turn: Turn,
    pub effect: Effect,
    pub outcomes: Vec<Outcome>,
}

impl TurnTransition {
    fn ignored(turn: &Turn) -> TurnTransition {
        TurnTransition {
            turn: turn.clone(),
            effect: Effect::None,
            outcomes: vec![Outcome::Ignored],
        }
    }

    fn to(turn: Turn, outcomes: Vec<Outcome>) -> TurnTransition {
        TurnTransition {
            turn,
            effect: Effect::None,
            outcomes,
        }
    }

    /// The event did not apply; the turn is unchanged.
    pub fn is_ignored(&self) -> bool {
        self.outcomes == [Outcome::Ignored]
    }
}

/// Applies one event to one turn.
pub fn step(turn: &Turn, event: TurnEvent, now: Timestamp, limits: &Limits) -> TurnTransition {
    match event {
        TurnEvent::Composed {
            carries,
            text,
            create_session,
        } => composed(turn, carries, text, create_session, now),
        TurnEvent::Probed(probe) => probed(turn, probe, now, limits),
        TurnEvent::Posted(posted) => posted_outcome(turn, posted, now, limits),
        TurnEvent::ParentPolled {
            turn: parent,
            toast,
            up,
        } => parent_polled(turn, parent, toast, up, now),
        TurnEvent::ChannelChecked(health) => channel_checked(turn, health, now, limits),
        TurnEvent::Forwarded(sent) => forwarded(turn, sent, now),
        TurnEvent::Recovered => recovered(turn, now),
        TurnEvent::ReadBackClosed => read_back_closed(turn, now, limits),
        TurnEvent::Redeliver { create_session } => read_back::redeliver(turn, create_session, now),
    }
}

/// Only an open turn is composed again; one with the same members and text is unchanged.
fn composed(
    turn: &Turn,
    carries: Vec<Block>,
    text: String,
    create_session: bool,
    now: Timestamp,
) -> TurnTransition {
    if !turn.is_open()
        || (turn.carries == carries
            && turn.text.as_deref() == Some(&text)
            && turn.create_session == create_session)
    {
        return TurnTransition::ignored(turn);
    }
    let mut next = turn.clone();
    next.carries = carries;
    next.text = Some(text);
    next.create_session = create_session;
    next.updated_at = now;
    TurnTransition::to(next, vec![Outcome::Batched])
}

/// What the chat check found decides what happens to a due turn: post it (the claim, with
/// its write-ahead record), wait for a busy chat, give up on a chat that does not exist,
/// or settle an unknown delivery by reading the chat back.
fn probed(turn: &Turn, probe: Probe, now: Timestamp, limits: &Limits) -> TurnTransition {
    // A look made now answers for the chat now: a busy chat's back-off (which only the
    // pass that chose to look, a kick for a chat whose turn just ended, may cut short) is
    // not asked again.
    if !is_due_when(turn, now, limits, true) {
        return TurnTransition::ignored(turn);
    }
    let unknown = turn.state == TurnState::Unconfirmed;
    let mut next = turn.clone();
    next.updated_at = now;
    match probe {
        // Of unknown outcome, its chat not there yet: the POST that starts it may not have
        // been stored yet either; absent, like a chat without it.
        // Of unknown outcome, its chat not there: the POST (which starts a chat QwenPaw
        // does not know) may not have been stored yet; absent, like a chat without it.
        Probe::NoChat if unknown => {
            next.chat_id = None;
            match absent(next, false, now, limits) {
                Absent::Sure(next) if next.create_session => claim(next, now),
                Absent::Sure(next) => misrouted(next),
                Absent::Waiting(waiting) => waiting,
            }
        }
        Probe::NoChat if next.create_session => {
            // The POST starts a new chat: a chat id found before (of a chat since deleted)
            // is not where a read-back must look for it, nor is that chat's archive its.
            next.chat_id = None;
            next.chat_archived = false;
            claim(next, now)
        }
        Probe::NoChat => {
            // The chat that id named is gone: the next look goes by the triple again.
            next.chat_id = None;
            next.chat_archived = false;
            misrouted(next)
        }
        Probe::Chat {
            chat_id,
            running,
            archived,
        } if !unknown => {
            next.chat_id = Some(chat_id);
            next.chat_archived = archived;
            if running {
                let why = "the parent chat is running a turn".to_owned();
                let outcome = defer(&mut next, now, limits, why, None, Outcome::Busy);
                TurnTransition::to(next, vec![outcome])
            } else {
                claim(next, now)
            }
        }
        Probe::Found { chat_id, turn } if unknown => {
            next.chat_archived &= next.chat_id.as_deref() == Some(chat_id.as_str());
            next.chat_id = Some(chat_id);
            next.state = TurnState::Delivered;
            next.delivered_at = Some(now);
            next.parent_turn = turn;
            next.delivery.error = None;
            next.delivery.confirmed = Some("read-back".to_owned());
            next.delivery.next_attempt_at = None;
            TurnTransition::to(next, vec![Outcome::Confirmed])
        }
        Probe::NotFound { chat_id, running } if unknown => {
            // Another chat than the one last looked at (that one was deleted): whether a
            // person archived this one is not known, so it is not said.
            next.chat_archived &= next.chat_id.as_deref() == Some(chat_id.as_str());
            next.chat_id = Some(chat_id);
            match absent(next, running, now, limits) {
                Absent::Sure(next) => claim(next, now),
                Absent::Waiting(waiting) => waiting,
            }
        }
        Probe::Unknown { error } if unknown => {
            next.delivery.error = Some(format!("reading the parent chat back failed: {error}"));
            TurnTransition::to(next, vec![Outcome::Unconfirmed])
        }
        Probe::Unknown { error } => {
            let why = format!("could not check the parent chat: {error}");
            let outcome = defer(&mut next, now, limits, why, None, Outcome::Unreachable);
            TurnTransition::to(next, vec![outcome])
        }
        Probe::Refused { error } => {
            next.delivery.error = Some(error);
            next.state = TurnState::Refused;
            TurnTransition::to(next, vec![Outcome::Error])
        }
        // A read-back answer for a turn that is not unknown, or a status for one that is:
        // the probe does not fit the turn any more.
        Probe::Chat { .. } | Probe::Found { .. } | Probe::NotFound { .. } => {
            TurnTransition::ignored(turn)
        }
    }
}

/// The write-ahead record: the attempt is counted and marked in flight before the POST.
/// From here on the turn is what it is.
fn claim(mut next: Turn, now: Timestamp) -> TurnTransition {
    let text = next.text.clone().unwrap_or_default();
    next.state = TurnState::Claimed;
    let d = &mut next.delivery;
    d.attempts += 1;
    d.attempt_started_at = Some(now);
    d.last_attempt_at = Some(now);
    d.next_attempt_at = None;
    TurnTransition {
        turn: next,
        effect: Effect::Post { text },
        outcomes: vec![Outcome::Claimed],
    }
}

/// Records a POST's outcome and clears the write-ahead mark.
fn posted_outcome(turn: &Turn, posted: Posted, now: Timestamp, limits: &Limits) -> TurnTransition {
    if !turn.in_flight() || turn.state != TurnState::Claimed {
        return TurnTransition::ignored(turn);
    }
    let mut next = turn.clone();
    next.updated_at = now;
    next.delivery.attempt_started_at = None;
    let outcome = match posted {
        Posted::Accepted { turn_task_id } => {
            next.delivery.last_http_status = Some(200);
            next.delivery.next_attempt_at = None;
            next.delivery.error = None;
            next.state = TurnState::Delivered;
            next.delivered_at = Some(now);
            next.turn_task_id = turn_task_id;
            Outcome::Delivered
        }
        // A definite no: nothing of it reached the chat, so the claim is let go and the
        // turn is open again (a cancel still takes a job out of it) — unless a POST of it
        // had an unknown outcome once: then it may be in a chat already, and stays what
        // it is.
        Posted::Busy { detail } => {
            release(&mut next);
            let why = format!("parent chat busy (409: {detail})");
            defer(&mut next, now, limits, why, Some(409), Outcome::Busy)
        }
        Posted::NotSent { error } => {
            release(&mut next);
            let why = format!("could not reach the server: {error}");
            defer(&mut next, now, limits, why, None, Outcome::Unreachable)
        }
        Posted::Unknown { error, http_status } => {
            next.delivery.last_http_status = http_status;
            next.delivery.unknown_since = Some(now);
            next.delivery.error = Some(error);
            next.state = TurnState::Unconfirmed;
            Outcome::Unconfirmed
        }
        Posted::Rejected {
            http_status,
            detail,
        } => {
            next.delivery.last_http_status = Some(http_status);
            next.delivery.error = Some(format!("{http_status}: {detail}"));
            next.state = TurnState::Refused;
            Outcome::Error
        }
    };
    TurnTransition::to(next, vec![outcome])
}

/// After a POST that definitely did not reach the chat: open again, unless a POST of it
/// had an unknown outcome once.
fn release(turn: &mut Turn) {
    if turn.delivery.unknown_since.is_none() {
        turn.state = TurnState::Open;
    }
}

/// Busy or unreachable: try again on a later tick (after `--busy-retry` for a 409, the
/// next one otherwise), until `--busy-deadline` after the first such answer.
fn defer(
    turn: &mut Turn,
    now: Timestamp,
    limits: &Limits,
    why: String,
    http_status: Option<u16>,
    outcome: Outcome,
) -> Outcome {
    let d = &mut turn.delivery;
    d.error = Some(why);
    if outcome == Outcome::Busy {
        d.busy += 1;
    } else {
        d.unreachable += 1;
    }
    if http_status.is_some() || outcome == Outcome::Unreachable {
        d.last_http_status = http_status;
    }
    let since = *d.waiting_since.get_or_insert(now);
    if since.elapsed_at(now) > limits.busy_deadline {
        d.next_attempt_at = None;
        turn.state = TurnState::Undelivered;
        return Outcome::Undelivered;
    }
    d.next_attempt_at = match http_status {
        Some(409) => Some(now.saturating_add(limits.busy_retry)),
        _ => None,
    };
    outcome
}

#[cfg(test)]
mod tests;
