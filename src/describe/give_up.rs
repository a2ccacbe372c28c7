//! The line a give-up gets, on the tick's stderr and in the give-up records.

use super::*;

/// A job or a turn the pass gave up on: one line for a person (`atc tick` prints it on
/// stderr, whatever the verbosity), once, by the tick that gave up. Only typed facts: no
/// server text, no session or user ids.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GiveUp {
    pub task_id: String,
    /// Where the job stands now (`undelivered`, `abandoned`, `lost, notice misrouted`…).
    pub status: String,
    /// Why, in a few words of a fixed vocabulary.
    pub reason: String,
    /// The other tasks of a group's or a batch's one turn, given up with this one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub with: Vec<String>,
    /// That turn was a batch (everything due for the chat), not a group's.
    #[serde(skip)]
    pub batch: bool,
    /// The commands that help.
    pub next: String,
}

impl GiveUp {
    /// `atc: gave up on task-1 (undelivered): why; what to run`
    pub fn line(&self) -> String {
        let with = if self.with.is_empty() {
            String::new()
        } else {
            let whose = if self.batch {
                "the same"
            } else {
                "its group's"
            };
            format!("; {whose} turn also carries {}", self.with.join(", "))
        };
        format!(
            "atc: gave up on {} ({}{with}): {}; {}",
            self.task_id, self.status, self.reason, self.next
        )
    }
}

/// ` (<kind of failure>)`, or the HTTP status when the kind says no more than "other";
/// nothing when neither says anything.
pub(super) fn kind(error: Option<&str>, http: Option<u16>) -> String {
    match (failure_kind(error.unwrap_or("")), http) {
        (kind, Some(code)) if kind == "other" => format!(" (HTTP {code})"),
        (kind, None) if kind == "other" => String::new(),
        (kind, _) => format!(" ({kind})"),
    }
}

/// The give-up of a watch that ended with too many failed checks.
pub fn give_up_job(job: &Job) -> GiveUp {
    let t = &job.task_id;
    GiveUp {
        task_id: t.clone(),
        status: job.watch.shown().to_string(),
        reason: format!(
            "{} in a row{}",
            plural(job.strikes, "failed check", "failed checks"),
            kind(job.last_error.as_deref(), None)
        ),
        with: Vec::new(),
        batch: false,
        next: format!(
            "`atc status {t}` says more; the task may still run: `atc wait {t}` asks the server"
        ),
    }
}

/// The give-up of a turn (`outcome`: how it was given up), named after the first result or
/// notice it carries, with the others; `None` for a turn of check-ins only (a check-in
/// that cannot be delivered is dropped, not given up). `first` is the job of that block.
pub fn give_up_turn(turn: &Turn, first: Option<&Job>, outcome: Outcome) -> Option<GiveUp> {
    let lead = turn.answers().next()?;
    let t = &lead.task_id;
    let d = &turn.delivery;
    let state = match turn.state {
        TurnState::Refused if lead.kind == BlockKind::Result => "error".to_owned(),
        TurnState::Refused => "undelivered".to_owned(),
        other => other.to_string(),
    };
    let status = match (outcome, lead.kind, first) {
        (Outcome::ForwardFailed, _, Some(job)) => {
            format!("{}, forward failed", crate::status::status(job, Some(turn)))
        }
        (Outcome::ForwardFailed, _, None) => "done, forward failed".to_owned(),
        (_, BlockKind::Notice, Some(job)) => {
            format!("{}, notice {state}", crate::status::status(job, Some(turn)))
        }
        // The task's own result landed before: what was given up is the reply that
        // followed it (issue 37).
        (_, BlockKind::FollowUp { .. }, _) => format!("done, follow-up {state}"),
        _ => state,
    };
    let (reason, next) = match outcome {
        Outcome::Undelivered => {
            let what = match kind(d.error.as_deref(), None).as_str() {
                " (chat busy)" => "the parent chat stayed busy past --busy-deadline".to_owned(),
                other => format!("the server stayed out of reach past --busy-deadline{other}"),
            };
            (
                what,
                format!("`atc status {t}` says more; `atc redeliver {t}` tries again"),
            )
        }
        Outcome::Misrouted if first.is_some_and(|j| j.chat_id.is_some()) => (
            "the parent chat is gone (it was there when the task was watched: deleted since?), so nothing was posted".to_owned(),
            format!(
                "`atc redeliver {t} --create-session` starts that chat anew, or watch again for another chat; `atc status {t}` says more"
            ),
        ),
        Outcome::Misrouted => (
            "the parent chat does not exist, so nothing was posted".to_owned(),
            format!(
                "`atc status {t}` names the chat; watch again with the right --session, --user and --channel, or `atc redeliver {t} --create-session`"
            ),
        ),
        Outcome::Error => (
            format!(
                "the server refused the delivery{}",
                kind(d.error.as_deref(), d.last_http_status)
            ),
            format!("`atc status {t}` shows its answer; `atc redeliver {t}` tries again once that is fixed"),
        ),
        Outcome::ReadBackClosed if turn.unknown_before_atc() => (
            "the agent-task-callback plugin posted it and never learned whether it arrived"
                .to_owned(),
            format!(
                "look in the parent chat; `atc status {t}` says more; `atc redeliver {t}` posts it again if it never arrived"
            ),
        ),
        Outcome::ReadBackClosed => (
            "whether the turn arrived is unknown, and its read-back window (--busy-deadline) closed".to_owned(),
            format!(
                "look in the parent chat; `atc status {t}` says more; `atc redeliver {t}` reads it back once more and posts only if the turn is not there"
            ),
        ),
        Outcome::ForwardFailed => (
            format!(
                "the parent's reply was delivered but could not be sent on to the person on {}{}",
                turn.chat.channel,
                kind(
                    turn.forward.as_ref().and_then(|f| f.reason.as_deref()),
                    turn.forward.as_ref().and_then(|f| f.last_http_status)
                )
            ),
            format!("`atc status {t}` says more"),
        ),
        other => (other.as_str().replace('_', " "), format!("`atc status {t}` says more")),
    };
    let with = turn
        .answers()
        .filter(|b| b.task_id != *t)
        .map(|b| b.task_id.clone())
        .collect();
    Some(GiveUp {
        task_id: t.clone(),
        status,
        reason,
        with,
        batch: turn.group.is_none(),
        next,
    })
}

/// The give-up of the stops of a child (`--stop-after`): [`crate::lifecycle::STOP_TRIES`]
/// did not stop it. The watch goes on.
pub fn give_up_stop(job: &Job) -> GiveUp {
    let t = &job.task_id;
    GiveUp {
        task_id: t.clone(),
        status: format!("{}, stop given up", job.watch.shown()),
        reason: format!(
            "{} did not stop its child{}",
            plural(job.stop_tries, "stop", "stops"),
            kind(job.stop_error.as_deref(), None)
        ),
        with: Vec::new(),
        batch: false,
        next: format!(
            "still watching it (its result comes back when it ends); `atc status {t}` says why; `atc cancel {t} --stop` tries again, or stop it from QwenPaw's console"
        ),
    }
}
