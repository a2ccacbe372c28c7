//! A watch registration and its record in the job file.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::time::Timestamp;

/// Where a job stands. Only `pending` and `delivering` are live; everything else is final
/// and only ever pruned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
    /// Nothing to deliver (reserved).
    Skipped,
    /// The result could not be routed to the asking session (reserved).
    Misrouted,
    /// The server refused the delivery (4xx other than 409).
    Error,
}

impl Status {
    pub fn is_terminal(self) -> bool {
        !matches!(self, Status::Pending | Status::Delivering)
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

/// Where a result must go: the exact chat triple plus the agent that owns it, and the agent
/// the child task runs on. QwenPaw silently creates a new ("ghost") chat for any triple it
/// does not know, so every part is recorded exactly as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub agent_id: String,
    pub target_agent: Option<String>,
    pub session_id: String,
    pub user_id: String,
    pub channel: String,
}

/// Delivery bookkeeping: the write-ahead record and the back-off state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    /// POSTs started (write-ahead: counted before the request goes out).
    #[serde(default)]
    pub attempts: u32,
    /// 409 "chat busy" answers so far.
    #[serde(default)]
    pub busy: u32,
    /// Attempts that could not reach the server (nothing was sent).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unreachable: u32,
    #[serde(default)]
    pub last_http_status: Option<u16>,
    /// When the next attempt is due (after a busy or unreachable answer).
    #[serde(default)]
    pub next_attempt_at: Option<Timestamp>,
    /// Set while a POST is in flight. Found set by a later tick, it means the tick died
    /// mid-POST: the outcome is unknown.
    #[serde(default)]
    pub attempt_started_at: Option<Timestamp>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One watch registration. Field names are a stable interface: other tools read the file.
/// Fields added after v1 are optional so v1 files keep loading; fields this version does
/// not know are kept as they are (`extra`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub job_id: String,
    pub task_id: String,
    pub base_url: String,
    pub agent_id: String,
    #[serde(default)]
    pub target_agent: Option<String>,
    pub session_id: String,
    pub user_id: String,
    pub channel: String,
    pub registered_at: Timestamp,
    pub updated_at: Timestamp,
    pub status: Status,
    /// One line for people: why the job is where it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Consecutive failed checks.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub strikes: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub polls: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_polled_at: Option<Timestamp>,
    /// When the child task started, as the server reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The exact text delivered, or to be delivered (at most 8000 characters).
    #[serde(rename = "final", default, skip_serializing_if = "Option::is_none")]
    pub final_text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<Timestamp>,
    /// The task id of the parent turn the delivery started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_task_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<Delivery>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Job {
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
            agent_id: target.agent_id,
            target_agent: target.target_agent,
            session_id: target.session_id,
            user_id: target.user_id,
            channel: target.channel,
            registered_at: now,
            updated_at: now,
            status: Status::Pending,
            note: None,
            strikes: 0,
            polls: 0,
            last_polled_at: None,
            started_at: None,
            last_error: None,
            final_text: None,
            delivered_at: None,
            turn_task_id: None,
            delivery: None,
            extra: Map::new(),
        }
    }

    pub fn target(&self) -> Target {
        Target {
            agent_id: self.agent_id.clone(),
            target_agent: self.target_agent.clone(),
            session_id: self.session_id.clone(),
            user_id: self.user_id.clone(),
            channel: self.channel.clone(),
        }
    }

    /// The agent whose task registry holds the child task: the same identity QwenPaw's own
    /// `check_agent_task` polls as.
    pub fn poll_agent(&self) -> &str {
        self.target_agent.as_deref().unwrap_or(&self.agent_id)
    }

    /// The parent chat the result goes to. Two jobs with the same key must never be
    /// delivered concurrently: the second POST would only meet 409.
    pub fn chat_key(&self) -> (&str, &str, &str, &str, &str) {
        (
            &self.base_url,
            &self.agent_id,
            &self.session_id,
            &self.user_id,
            &self.channel,
        )
    }
}
