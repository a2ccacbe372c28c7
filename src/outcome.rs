//! What happened, typed: every event a job or a turn takes yields [`Outcome`]s, which the
//! report counts and the event log records, and [`failure_kind`], the fixed vocabulary a
//! log may use to say what went wrong (never the server's own words). Below `lifecycle`,
//! `turn`, `describe` and `report`, so the decisions and the wording import it one way.

/// One thing that happened to one job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    /// The task was polled (every poll that was applied).
    Polled,
    /// The poll said the task is still running.
    Running,
    /// The poll said the task finished: its result is rendered and due for delivery.
    Finished,
    /// The server has no record of the task.
    Lost,
    /// The poll failed: a strike.
    FailedCheck,
    /// A strike that reached `--max-strikes`.
    Abandoned,
    /// Not finished `--max-age` after the watch.
    Expired,
    /// A delivery's write-ahead record was saved: its POST may go out.
    Claimed,
    /// The parent chat does not exist: nothing was posted.
    Misrouted,
    /// The child's answer was empty and the watch said `--on-empty skip`.
    Skipped,
    /// A watch ended without an answer: a notice for the parent is queued.
    Noticed,
    /// A group's results are all in: its one turn is composed.
    Sealed,
    /// Reading the parent chat back found a delivery whose outcome was unknown.
    Confirmed,
    /// An unknown delivery is not in the parent chat (yet): read back again later.
    Waiting,
    /// How the parent turn a delivery started ended is now known.
    Followed,
    /// The reply a delivery into a child's chat woke goes up to that child's parent, as a
    /// follow-up of the child's task (issue 37).
    WentUp,
    /// A follow-up of a child's task was queued for its parent (its own turn).
    FollowUp,
    /// The reply a delivery into a child's chat woke stays there: the depth limit, an
    /// empty reply, a failed turn (its turn's `up` says which).
    StayedDown,
    /// The parent's reply was sent on to the person.
    Forwarded,
    /// A forward waits for a healthy channel (or a retry).
    ForwardHeld,
    /// Nothing to forward (empty reply, failed parent turn).
    ForwardSkipped,
    /// A forward was refused, or retries ran out.
    ForwardFailed,
    /// A forward's send may or may not have gone out.
    ForwardUnconfirmed,
    /// `atc redeliver` put a given-up turn back in line.
    Requeued,
    /// A job's block left an open turn (it was cancelled, watched again, or its turn
    /// was composed without it).
    Unsealed,
    /// An open turn was composed (again): a block joined it or left it. For a job: its
    /// block went into a turn.
    Batched,
    /// The result was posted into the parent chat.
    Delivered,
    /// The parent chat was busy (409); retried later.
    Busy,
    /// The server could not be reached for the delivery; retried later.
    Unreachable,
    /// A POST's outcome is unknown.
    Unconfirmed,
    /// The server refused the delivery.
    Error,
    /// Busy or unreachable too often: given up.
    Undelivered,
    /// The POST ended after the watch had been cancelled.
    CancelledInFlight,
    /// The registration was replaced (re-watched) while its POST was out.
    Replaced,
    /// A POST left in flight by a tick that died became unconfirmed.
    RecoveredUnconfirmed,
    /// The read-back window of an unknown delivery closed: given up.
    ReadBackClosed,
    /// An ended job older than `--keep` was removed.
    Pruned,
    /// `atc cancel` stopped the watch.
    Cancelled,
    /// `atc cancel` found it already cancelled.
    AlreadyCancelled,
    /// `--stop-after` passed while the child runs: a stop is due.
    StopDue,
    /// QwenPaw stopped the child at the watch's request (`--stop-after`).
    Stopped,
    /// The stop found nothing running in the child's chat.
    StopNotRunning,
    /// The stop could not be sent or was refused; asked again on the next tick.
    StopFailed,
    /// `lifecycle::STOP_TRIES` stops did not stop the child: atc stops trying (the watch
    /// goes on, and a person is told why).
    StopGaveUp,
    /// `--check-in` came round while the child runs: a check-in notice is queued.
    CheckInDue,
    /// A check-in notice was posted into the parent chat.
    CheckedIn,
    /// A check-in notice could not be delivered (busy too long, no chat, refused): dropped.
    CheckInDropped,
    /// `atc cancel --check-ins` turned the check-ins off.
    CheckInsOff,
    /// The parent read the finished result itself (`check_agent_task`) before atc
    /// delivered it: nothing is posted.
    ReadByParent,
    /// The parent read the finished result itself, but the turn carrying it was already
    /// claimed: it goes out as it is.
    ReadInFlight,
    /// The event does not apply to the job as it is now; nothing changed.
    Ignored,
}

impl Outcome {
    /// The name in `--json` reports and `-vv` lines.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Polled => "polled",
            Outcome::Running => "running",
            Outcome::Finished => "finished",
            Outcome::Lost => "lost",
            Outcome::FailedCheck => "failed_check",
            Outcome::Abandoned => "abandoned",
            Outcome::Expired => "expired",
            Outcome::Claimed => "claimed",
            Outcome::Misrouted => "misrouted",
            Outcome::Skipped => "skipped",
            Outcome::Noticed => "noticed",
            Outcome::Sealed => "sealed",
            Outcome::Confirmed => "confirmed",
            Outcome::Waiting => "waiting",
            Outcome::Followed => "followed",
            Outcome::WentUp => "went_up",
            Outcome::FollowUp => "follow_up",
            Outcome::StayedDown => "stayed_down",
            Outcome::Forwarded => "forwarded",
            Outcome::ForwardHeld => "forward_held",
            Outcome::ForwardSkipped => "forward_skipped",
            Outcome::ForwardFailed => "forward_failed",
            Outcome::ForwardUnconfirmed => "forward_unconfirmed",
            Outcome::Requeued => "requeued",
            Outcome::Unsealed => "unsealed",
            Outcome::Batched => "batched",
            Outcome::Delivered => "delivered",
            Outcome::Busy => "busy",
            Outcome::Unreachable => "unreachable",
            Outcome::Unconfirmed => "unconfirmed",
            Outcome::Error => "error",
            Outcome::Undelivered => "undelivered",
            Outcome::CancelledInFlight => "cancelled_in_flight",
            Outcome::Replaced => "replaced",
            Outcome::RecoveredUnconfirmed => "recovered_unconfirmed",
            Outcome::ReadBackClosed => "read_back_closed",
            Outcome::Pruned => "pruned",
            Outcome::Cancelled => "cancelled",
            Outcome::AlreadyCancelled => "already_cancelled",
            Outcome::StopDue => "stop_due",
            Outcome::Stopped => "stopped",
            Outcome::StopNotRunning => "stop_not_running",
            Outcome::StopFailed => "stop_failed",
            Outcome::StopGaveUp => "stop_gave_up",
            Outcome::CheckInDue => "check_in_due",
            Outcome::CheckedIn => "checked_in",
            Outcome::CheckInDropped => "check_in_dropped",
            Outcome::CheckInsOff => "check_ins_off",
            Outcome::ReadByParent => "read_by_parent",
            Outcome::ReadInFlight => "read_in_flight",
            Outcome::Ignored => "ignored",
        }
    }

    /// The event's name in the event log, if it goes there: a poll is `polled` (with the
    /// task's status), a failed check a `strike`, a read-back that found the turn
    /// `read-back`, a queued notice `notice`. Bookkeeping and "not yet" stay out.
    pub fn log_name(self) -> Option<&'static str> {
        match self {
            Outcome::Polled
            | Outcome::Waiting
            | Outcome::Ignored
            | Outcome::Claimed
            | Outcome::StopDue
            | Outcome::CheckInDue => None,
            Outcome::Running | Outcome::Finished => Some("polled"),
            Outcome::FailedCheck => Some("strike"),
            Outcome::Confirmed => Some("read-back"),
            Outcome::Noticed => Some("notice"),
            other => Some(other.as_str()),
        }
    }

    /// Something went wrong that `-v` explains with its reason (and the event log names
    /// by kind): a failed check, a delivery or forward that failed or may have.
    pub fn is_error(self) -> bool {
        matches!(
            self,
            Outcome::FailedCheck
                | Outcome::StopFailed
                | Outcome::Unconfirmed
                | Outcome::Error
                | Outcome::Undelivered
                | Outcome::Misrouted
                | Outcome::ReadBackClosed
                | Outcome::ForwardFailed
                | Outcome::ForwardUnconfirmed
        )
    }

    /// atc gave up: nothing more happens to the job (or its turn, or the stop of its
    /// child) until a person acts.
    pub fn is_give_up(self) -> bool {
        matches!(
            self,
            Outcome::Abandoned
                | Outcome::StopGaveUp
                | Outcome::Undelivered
                | Outcome::Misrouted
                | Outcome::Error
                | Outcome::ReadBackClosed
                | Outcome::ForwardFailed
        )
    }

    /// Bookkeeping that says nothing about the job to a reader of the report.
    pub fn is_internal(self) -> bool {
        matches!(
            self,
            Outcome::Claimed
                | Outcome::Ignored
                | Outcome::Cancelled
                | Outcome::AlreadyCancelled
                | Outcome::Followed
                | Outcome::Requeued
                | Outcome::Unsealed
                | Outcome::Batched
        )
    }
}

/// The kind of a failure, from a fixed vocabulary: what a log may say about an error
/// without quoting anything a server sent.
pub fn failure_kind(error: &str) -> String {
    let status = |text: &str| {
        let code: String = text.chars().take_while(char::is_ascii_digit).collect();
        (code.len() == 3).then_some(code)
    };
    let code = match error.find("HTTP ") {
        Some(at) => status(&error[at + 5..]),
        // A refusal's own record says its status first: `404: Channel not found: mqtt`.
        None => status(error).filter(|_| error[3..].starts_with(": ")),
    };
    if let Some(code) = code {
        return format!("HTTP {code}");
    }
    let kind = if error.contains("instead of JSON") {
        "not JSON"
    } else if error.contains("refused") {
        "connection refused"
    } else if error.contains("timed out") {
        "timed out"
    } else if error.contains("stopped while posting") || error.contains("stopped while sending") {
        "tick interrupted"
    } else if error.contains("no chat with") {
        "no such chat"
    } else if error.contains("running a turn") || error.contains("busy") {
        "chat busy"
    } else {
        "other"
    };
    kind.to_owned()
}
