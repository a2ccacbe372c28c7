//! A watch registration and its record in the job file: `Job`, where the watch stands
//! (`Watch`), the chat `Target` it delivers to, and the words a person or a script reads
//! (`Status`, projected by `status`). Field names are a stable interface (other tools read
//! the file); only `lifecycle::step` changes where a watch stands.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::time::Timestamp;

/// What `atc status`, its `--json` and the file's `status` key say of a job: where the
/// watch stands and, for a finished child, where the turn that carries its result stands
/// (`status::status`). A projection: no decision reads it. Only `pending` and
/// `delivering` are live; everything else is final and only ever pruned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Watching: the task has not finished yet.
    Pending,
    /// The task finished; its rendered result (`final`) is being posted, or waits for the
    /// parent chat to become free.
    Delivering,
    /// The result was posted into the parent session.
    Done,
    /// A POST was attempted but its outcome is unknown; never re-posted automatically.
    Unconfirmed,
    /// The parent chat stayed busy (or unreachable) too long; the result was never sent.
    Undelivered,
    /// The server has no record of the task (404).
    Lost,
    /// Too many consecutive failed checks.
    Abandoned,
    /// The task did not finish within the age cap.
    Expired,
    /// Cancelled by a person; the child task itself keeps running.
    Cancelled,
    /// Nothing posted, on purpose: the child's answer was empty and the watch said
    /// `--on-empty skip`, or the parent read the result itself (`read_by_parent_at`).
    Skipped,
    /// The parent chat does not exist: delivering would start a chat nobody reads.
    Misrouted,
    /// The server refused the delivery (4xx other than 409).
    Error,
}

impl Status {
    /// Every status, in declaration order (`ordinal` keeps the list complete).
    pub const ALL: [Status; 12] = [
        Status::Pending,
        Status::Delivering,
        Status::Done,
        Status::Unconfirmed,
        Status::Undelivered,
        Status::Lost,
        Status::Abandoned,
        Status::Expired,
        Status::Cancelled,
        Status::Skipped,
        Status::Misrouted,
        Status::Error,
    ];

    /// Position in [`Status::ALL`]. Exhaustive, so a new status cannot be forgotten there.
    pub const fn ordinal(self) -> usize {
        match self {
            Status::Pending => 0,
            Status::Delivering => 1,
            Status::Done => 2,
            Status::Unconfirmed => 3,
            Status::Undelivered => 4,
            Status::Lost => 5,
            Status::Abandoned => 6,
            Status::Expired => 7,
            Status::Cancelled => 8,
            Status::Skipped => 9,
            Status::Misrouted => 10,
            Status::Error => 11,
        }
    }

    /// The child finished and its result goes to the parent: where it stands is the turn
    /// that carries it (`status::status`).
    pub fn is_result(self) -> bool {
        matches!(
            self,
            Status::Delivering
                | Status::Done
                | Status::Unconfirmed
                | Status::Undelivered
                | Status::Misrouted
                | Status::Error
        )
    }

    /// Where the watch of a job shown so stands.
    pub fn watch(self) -> Watch {
        match self {
            Status::Pending => Watch::Pending,
            Status::Lost => Watch::Lost,
            Status::Abandoned => Watch::Abandoned,
            Status::Expired => Watch::Expired,
            Status::Cancelled => Watch::Cancelled,
            Status::Skipped => Watch::Skipped,
            _ => Watch::Finished,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Delivering => "delivering",
            Status::Done => "done",
            Status::Unconfirmed => "unconfirmed",
            Status::Undelivered => "undelivered",
            Status::Lost => "lost",
            Status::Abandoned => "abandoned",
            Status::Expired => "expired",
            Status::Cancelled => "cancelled",
            Status::Skipped => "skipped",
            Status::Misrouted => "misrouted",
            Status::Error => "error",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a watch stands: the job's own record (the delivery of what it owes is its turn's).
/// Only `lifecycle::step` changes it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Watch {
    /// Watching: the task has not finished yet.
    #[default]
    Pending,
    /// The task finished: its rendered result (`final`, with `outcome`) goes to the parent
    /// in a turn.
    Finished,
    /// The server has no record of the task (404).
    Lost,
    /// Too many consecutive failed checks.
    Abandoned,
    /// The task did not finish within the age cap.
    Expired,
    /// Cancelled by a person; the child task itself keeps running.
    Cancelled,
    /// Nothing posted, on purpose: the child's answer was empty and the watch said
    /// `--on-empty skip`, or the parent read the result itself (`read_by_parent_at`).
    Skipped,
}

impl Watch {
    /// No more polls.
    pub fn is_terminal(self) -> bool {
        self != Watch::Pending
    }

    /// The watch ended without the child's answer: the parent is owed a notice.
    pub fn ends_without_answer(self) -> bool {
        matches!(self, Watch::Lost | Watch::Expired | Watch::Abandoned)
    }

    /// What a person reads of a watch that is not a finished child's (whose word is where
    /// its result's turn stands: `status::status`).
    pub fn shown(self) -> Status {
        match self {
            Watch::Pending => Status::Pending,
            Watch::Finished => Status::Delivering,
            Watch::Lost => Status::Lost,
            Watch::Abandoned => Status::Abandoned,
            Watch::Expired => Status::Expired,
            Watch::Cancelled => Status::Cancelled,
            Watch::Skipped => Status::Skipped,
        }
    }
}

/// How the child task ended, as far as its record tells: finished is not succeeded, and a
/// fork child that finished may still not be ready to merge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskOutcome {
    Completed,
    Failed,
    TimedOut,
    Cancelled,
    /// "Failed to finalize fork worktree": the fork branch is not ready to merge.
    ForkNotFinalized,
    /// A result status QwenPaw 2.2 does not produce.
    Other,
}

impl TaskOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskOutcome::Completed => "completed",
            TaskOutcome::Failed => "failed",
            TaskOutcome::TimedOut => "timed out",
            TaskOutcome::Cancelled => "cancelled",
            TaskOutcome::ForkNotFinalized => "fork not finalized",
            TaskOutcome::Other => "other",
        }
    }
}

/// What to do when a watch ends without an answer (lost, expired, abandoned).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnNoAnswer {
    /// Post one notice turn into the parent chat.
    #[default]
    Notify,
    Silent,
}

/// What to do with a successful child whose final answer is empty.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnEmpty {
    #[default]
    Deliver,
    /// Record `skipped`; post nothing.
    Skip,
}

/// `--forward`: whether the parent's reply is sent on to the person (IM parents).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum ForwardMode {
    /// For parents on a channel other than `console`.
    #[default]
    Auto,
    Never,
}

/// How a watch was asked to behave (`atc watch` options). All default to off.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Options {
    /// Deliver even when the parent chat does not exist (QwenPaw then starts it).
    #[serde(default, skip_serializing_if = "is_false")]
    pub create_session: bool,
    #[serde(default, skip_serializing_if = "is_default")]
    pub on_no_answer: OnNoAnswer,
    #[serde(default, skip_serializing_if = "is_default")]
    pub on_empty: OnEmpty,
    /// The fork branch the child works on; a completed delivery names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork_branch: Option<String>,
    /// Fan-in: every member's result goes out together, as one turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// `--forward` (the `forward` field is the forward's record).
    #[serde(rename = "forward_mode", default, skip_serializing_if = "is_default")]
    pub forward: ForwardMode,
    /// `--allow-insecure-remote` at watch time: the tick may send tokens to this job's
    /// plain-http, non-loopback base URL.
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_insecure_remote: bool,
    /// `--stop-after`, in seconds: a tick that finds the child still running this long
    /// after it started stops it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_after_secs: Option<u64>,
    /// `--check-in`, in seconds: while the child runs, the parent gets a short notice this
    /// often (at most `lifecycle::MAX_CHECK_INS` times).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_in_secs: Option<u64>,
}

/// Who made the watch (`atc watch --origin`): what the parent is told names what it was
/// made with (`--stop-after 20s`, or the plugin tool's `stop_after`), and `atc status`
/// says a watch was made automatically.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// `atc watch` on a command line (a person, a script, an agent's shell).
    #[default]
    Cli,
    /// atc's QwenPaw plugin (`watch_agent_task`, `watch_agent_tasks`).
    Plugin,
    /// atc's QwenPaw plugin by itself, at the end of the turn whose `submit_to_agent`
    /// started the task (auto-watch). Its parent has the plugin's tools: it is told in
    /// their words, as for `Plugin`.
    Auto,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Cli => "cli",
            Origin::Plugin => "plugin",
            Origin::Auto => "auto",
        }
    }
}

// What the job file leaves out (`skip_serializing_if`): a value that is its default is
// not written, so the file every tick reads stays small. For jobs and turns alike.

pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}

pub(crate) fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

pub(crate) fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Where a result must go: the exact chat triple plus the agent that owns it, and the agent
/// the child task runs on. QwenPaw silently creates a new ("ghost") chat for any triple it
/// does not know, so every part is recorded exactly as given.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    pub agent_id: String,
    #[serde(default)]
    pub target_agent: Option<String>,
    pub session_id: String,
    pub user_id: String,
    pub channel: String,
}

impl Target {
    /// The agent whose task registry holds the child task: the same identity QwenPaw's own
    /// `check_agent_task` polls as.
    pub fn poll_agent(&self) -> &str {
        self.target_agent.as_deref().unwrap_or(&self.agent_id)
    }

    /// The parent chat on the server at `base_url`.
    pub fn chat_key<'a>(&'a self, base_url: &'a str) -> ChatKey<'a> {
        (
            base_url,
            &self.agent_id,
            &self.session_id,
            &self.user_id,
            &self.channel,
        )
    }

    /// "session s-77 (user default, channel console)": where a result goes, for people.
    pub fn describe_chat(&self) -> String {
        format!(
            "session {} (user {}, channel {})",
            self.session_id, self.user_id, self.channel
        )
    }
}

/// A parent chat: (base URL, agent, session, user, channel).
pub type ChatKey<'a> = (&'a str, &'a str, &'a str, &'a str, &'a str);

/// One watch registration. Fields this version does not know are kept as they are
/// (`extra`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub job_id: String,
    pub task_id: String,
    pub base_url: String,
    #[serde(flatten)]
    pub target: Target,
    pub registered_at: Timestamp,
    pub updated_at: Timestamp,
    /// Where the watch stands.
    #[serde(skip)]
    pub watch: Watch,
    /// What the file says of it for outside readers (`status::status`): written at save,
    /// read at load only to rebuild `watch`; never read by a decision.
    #[serde(rename = "status")]
    pub(crate) shown: Status,
    #[serde(flatten)]
    pub options: Options,
    /// What happened that no other field records (how a cancel met a delivery), for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Consecutive failed checks.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub strikes: u32,
    /// When the child task started, as the server reports it (or, when it does not say,
    /// when atc first saw it running).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    /// The last thing that went wrong with the watch: a failed check, the server's 404 for
    /// a lost task, a stop that failed. (What went wrong with a delivery is its turn's
    /// `delivery.error`.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// How the child ended (from its record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<TaskOutcome>,
    /// The child's rendered result, exactly as QwenPaw's `check_agent_task` shows it (at
    /// most 8000 characters), once it finished: the block this job's turn carries.
    #[serde(rename = "final", default, skip_serializing_if = "Option::is_none")]
    pub final_text: Option<String>,
    /// The watch ended without an answer and owes its parent a notice saying so (where it
    /// stands is the turn's).
    #[serde(skip)]
    pub notice: bool,
    /// Where that notice stands, for outside readers (`status::notice`): written at save,
    /// read at load only to rebuild `notice`.
    #[serde(rename = "notice", default, skip_serializing_if = "Option::is_none")]
    pub(crate) shown_notice: Option<String>,
    /// The parent chat's id on the server, as `watch` looked it up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_id: Option<String>,
    /// When atc saw the task end (finished, or ended without an answer): a batch carries
    /// its blocks in this order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
    /// The turn (`turns[].turn_id`) that carries this job's block now, once composed:
    /// where it stands, when it landed and how are that turn's, never copied here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<String>,
    /// The child's own session id (`--child-session`, or the `[SESSION: …]` line after
    /// its `[TASK_ID: …]`): what `cancel --stop` and `--stop-after` stop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_session: Option<String>,
    /// The child's chat uuid on the agent it runs on, once looked up (`GET /chats`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_chat_id: Option<String>,
    /// The agent the child runs on, when the watch did not say (`--target-agent`) and a
    /// stop found its chat there: where the next stop goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_agent: Option<String>,
    /// When a tick found `--stop-after` passed: the stop is due (cleared once answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_asked_at: Option<Timestamp>,
    /// When QwenPaw said it stopped the child at atc's request (`--stop-after`, or
    /// `cancel --stop`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_at: Option<Timestamp>,
    /// Stops of the child (`--stop-after`) that did not stop it; at
    /// `lifecycle::STOP_TRIES` atc gives up stopping it (the watch goes on).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stop_tries: u32,
    /// Why the last of those stops did not stop the child.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_error: Option<String>,
    /// A pending job owes its parent check-in `check_ins + 1` (its turn composes its text,
    /// and says where it stands).
    #[serde(skip)]
    pub check_in: bool,
    /// Where that check-in stands, for outside readers (`status::check_in`): written at
    /// save, read at load only to rebuild `check_in`.
    #[serde(rename = "check_in", default, skip_serializing_if = "Option::is_none")]
    pub(crate) shown_check_in: Option<String>,
    /// Check-ins done (delivered, or dropped when they could not be).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub check_ins: u32,
    /// When the last check-in became due: the next one is due `--check-in` later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_check_in_at: Option<Timestamp>,
    /// Who made the watch (its current options).
    #[serde(default, skip_serializing_if = "is_default")]
    pub origin: Origin,
    /// When atc learned that the parent read the task's finished result itself (its
    /// `check_agent_task` answered it: `atc parent-read`, which atc's plugin runs). The
    /// job is then `skipped` (nothing posted), unless its turn was already claimed: that
    /// turn goes out as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_by_parent_at: Option<Timestamp>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
    /// Counts copies of jobs in the tests that keep the tick's hot path to its budget
    /// (`pass`'s tests); nothing in other builds, and never in the file.
    #[serde(skip)]
    pub(crate) copies: Copies,
}

/// See [`Job::copies`].
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Copies;

#[cfg(test)]
thread_local! {
    pub(crate) static JOB_COPIES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl Clone for Copies {
    fn clone(&self) -> Copies {
        #[cfg(test)]
        JOB_COPIES.with(|n| n.set(n.get() + 1));
        Copies
    }
}

impl Job {
    /// Its chat is its own child's (its --session was the child's session, on the agent
    /// the child runs on): what it delivers goes back to the child, not to who asked.
    pub fn into_own_child_chat(&self) -> bool {
        self.child_session.as_deref() == Some(self.target.session_id.as_str())
            && self.target.poll_agent() == self.target.agent_id
    }

    pub fn new(
        job_id: String,
        task_id: String,
        base_url: String,
        target: Target,
        now: Timestamp,
    ) -> Job {
        Job {
            job_id,
            task_id,
            base_url,
            target,
            registered_at: now,
            updated_at: now,
            watch: Watch::Pending,
            shown: Status::Pending,
            options: Options::default(),
            note: None,
            strikes: 0,
            started_at: None,
            last_error: None,
            outcome: None,
            final_text: None,
            notice: false,
            shown_notice: None,
            chat_id: None,
            finished_at: None,
            turn: None,
            child_session: None,
            child_chat_id: None,
            child_agent: None,
            stop_asked_at: None,
            stopped_at: None,
            stop_tries: 0,
            stop_error: None,
            check_in: false,
            shown_check_in: None,
            check_ins: 0,
            last_check_in_at: None,
            origin: Origin::Cli,
            read_by_parent_at: None,
            extra: Map::new(),
            copies: Copies,
        }
    }

    /// What the file says of it (`status` key), as of the last save or load, or of
    /// `JobFile::shown`: for outside readers (a test reading what a person would). Decisions
    /// read `watch` and the turn (`status::status`).
    pub fn shown(&self) -> Status {
        self.shown
    }

    /// A job whose watch is `watch`, for tests: task `task-1`, session `s` of user `u` on
    /// `console`.
    #[cfg(test)]
    pub fn sample(watch: Watch) -> Job {
        let mut job = Job::new(
            "a1b2c3d4e5f6".into(),
            "task-1".into(),
            "http://h/api".into(),
            Target {
                agent_id: "default".into(),
                target_agent: None,
                session_id: "s".into(),
                user_id: "u".into(),
                channel: "console".into(),
            },
            Timestamp::from_unix(1_800_000_000),
        );
        job.watch = watch;
        job
    }

    /// The parent chat the result goes to. Two jobs with the same key must never be
    /// delivered concurrently: the second POST would only meet 409.
    pub fn chat_key(&self) -> ChatKey<'_> {
        self.target.chat_key(&self.base_url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_status_once_in_order() {
        for (i, status) in Status::ALL.iter().enumerate() {
            assert_eq!(status.ordinal(), i, "{status}");
            let json = serde_json::to_value(status).unwrap();
            assert_eq!(json, status.as_str());
        }
    }

    #[test]
    fn the_target_is_flattened_into_the_job_layout() {
        let job = Job::sample(Watch::Pending);
        let value = serde_json::to_value(&job).unwrap();
        let keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "job_id",
                "task_id",
                "base_url",
                "agent_id",
                "target_agent",
                "session_id",
                "user_id",
                "channel",
                "registered_at",
                "updated_at",
                "status"
            ]
        );
        let back: Job = serde_json::from_value(value).unwrap();
        assert_eq!(back, job);
        assert!(
            back.extra.is_empty(),
            "target fields are not also kept as extra"
        );

        let mut full = job.clone();
        full.options.forward = ForwardMode::Never;
        full.options.group = Some("g".into());
        full.turn = Some("atc-a1b2c3d4e5f6".into());
        let value = serde_json::to_value(&full).unwrap();
        assert_eq!(value["forward_mode"], "never");
        assert_eq!(value["turn"], "atc-a1b2c3d4e5f6");
        assert_eq!(value["group"], "g");
        let back: Job = serde_json::from_value(value).unwrap();
        assert_eq!(back, full, "every field has a key of its own");
    }
}
