//! What a tick did, typed: each job event yields [`Outcome`]s; a [`Report`] counts them and
//! prints them as text or JSON. Only task ids are recorded, never message text.

use std::collections::BTreeMap;

use serde_json::{Value, json};

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
    /// A group member lost its carrier and waits to be sealed again.
    Unsealed,
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
    /// An ended job older than `--keep` was removed.
    Pruned,
    /// `atc cancel` stopped the watch.
    Cancelled,
    /// `atc cancel` found it already cancelled.
    AlreadyCancelled,
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
            Outcome::Forwarded => "forwarded",
            Outcome::ForwardHeld => "forward_held",
            Outcome::ForwardSkipped => "forward_skipped",
            Outcome::ForwardFailed => "forward_failed",
            Outcome::ForwardUnconfirmed => "forward_unconfirmed",
            Outcome::Requeued => "requeued",
            Outcome::Unsealed => "unsealed",
            Outcome::Delivered => "delivered",
            Outcome::Busy => "busy",
            Outcome::Unreachable => "unreachable",
            Outcome::Unconfirmed => "unconfirmed",
            Outcome::Error => "error",
            Outcome::Undelivered => "undelivered",
            Outcome::CancelledInFlight => "cancelled_in_flight",
            Outcome::Replaced => "replaced",
            Outcome::RecoveredUnconfirmed => "recovered_unconfirmed",
            Outcome::Pruned => "pruned",
            Outcome::Cancelled => "cancelled",
            Outcome::AlreadyCancelled => "already_cancelled",
            Outcome::Ignored => "ignored",
        }
    }

    /// Failed checks and failed deliveries: what `errors` counts. (An abandoned job is also
    /// a failed check of the same pass, so it is counted once.)
    pub fn is_error(self) -> bool {
        matches!(
            self,
            Outcome::FailedCheck
                | Outcome::Unconfirmed
                | Outcome::Error
                | Outcome::Undelivered
                | Outcome::Misrouted
                | Outcome::ForwardFailed
                | Outcome::ForwardUnconfirmed
        )
    }

    /// Bookkeeping that says nothing about the job to a reader of the report.
    fn is_internal(self) -> bool {
        matches!(
            self,
            Outcome::Claimed
                | Outcome::Ignored
                | Outcome::Cancelled
                | Outcome::AlreadyCancelled
                | Outcome::Followed
                | Outcome::Requeued
                | Outcome::Unsealed
        )
    }
}

/// What happened to which task in one pass.
#[derive(Debug, Default)]
pub struct Report {
    entries: BTreeMap<Outcome, Vec<String>>,
}

impl Report {
    pub fn add(&mut self, outcome: Outcome, task_id: &str) {
        if outcome.is_internal() {
            return;
        }
        self.entries
            .entry(outcome)
            .or_default()
            .push(task_id.to_owned());
    }

    pub fn add_all(&mut self, outcomes: &[Outcome], task_id: &str) {
        for outcome in outcomes {
            self.add(*outcome, task_id);
        }
    }

    pub fn count(&self, outcome: Outcome) -> usize {
        self.entries.get(&outcome).map_or(0, Vec::len)
    }

    pub fn errors(&self) -> usize {
        self.entries
            .iter()
            .filter(|(outcome, _)| outcome.is_error())
            .map(|(_, tasks)| tasks.len())
            .sum()
    }

    /// `tick: 12 polled, 2 delivered, 1 busy, 0 lost, 0 errors`
    pub fn summary(&self) -> String {
        format!(
            "tick: {} polled, {} delivered, {} busy, {} lost, {} errors",
            self.count(Outcome::Polled),
            self.count(Outcome::Delivered),
            self.count(Outcome::Busy),
            self.count(Outcome::Lost),
            self.errors()
        )
    }

    /// One `tick: <outcome>: <task ids>` line per outcome, by name.
    pub fn detail(&self) -> Vec<String> {
        self.by_name()
            .into_iter()
            .map(|(name, tasks)| format!("tick: {name}: {}", tasks.join(" ")))
            .collect()
    }

    /// The counts and, per outcome, the task ids.
    pub fn to_json(&self) -> Value {
        json!({
            "polled": self.count(Outcome::Polled),
            "delivered": self.count(Outcome::Delivered),
            "busy": self.count(Outcome::Busy),
            "lost": self.count(Outcome::Lost),
            "errors": self.errors(),
            "tasks": self.by_name(),
        })
    }

    fn by_name(&self) -> BTreeMap<&'static str, &Vec<String>> {
        self.entries
            .iter()
            .map(|(outcome, tasks)| (outcome.as_str(), tasks))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_typed_and_errors_count_an_abandoned_job_once() {
        let mut report = Report::default();
        report.add_all(
            &[Outcome::Polled, Outcome::FailedCheck, Outcome::Abandoned],
            "task-a",
        );
        report.add_all(&[Outcome::Polled, Outcome::Finished], "task-b");
        report.add(Outcome::Delivered, "task-b");
        report.add(Outcome::Claimed, "task-b");
        assert_eq!(report.count(Outcome::Polled), 2);
        assert_eq!(report.errors(), 1);
        assert_eq!(
            report.summary(),
            "tick: 2 polled, 1 delivered, 0 busy, 0 lost, 1 errors"
        );
        let json = report.to_json();
        assert_eq!(json["tasks"]["abandoned"], json!(["task-a"]));
        assert_eq!(json["tasks"]["polled"], json!(["task-a", "task-b"]));
        assert!(
            json["tasks"].get("claimed").is_none(),
            "bookkeeping is not reported"
        );
        let names: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            names,
            ["polled", "delivered", "busy", "lost", "errors", "tasks"]
        );
    }
}
