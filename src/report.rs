//! What a tick did, typed: each job event yields [`Outcome`]s; a [`Report`] counts them and
//! prints them as text or JSON. Only task ids are recorded, never message text.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::text::plural;
use serde_json::{Value, json};

use crate::job::{Job, Status, TaskOutcome};
use crate::time::Timestamp;

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
    /// A group member lost its carrier and waits to be sealed again (or a batched job
    /// left its chat's batch).
    Unsealed,
    /// A job's turn was composed as a batch with the other turns due for its chat.
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
    /// `--check-in` came round while the child runs: a check-in notice is queued.
    CheckInDue,
    /// A check-in notice was posted into the parent chat.
    CheckedIn,
    /// A check-in notice could not be delivered (busy too long, no chat, refused): dropped.
    CheckInDropped,
    /// `atc cancel --check-ins` turned the check-ins off.
    CheckInsOff,
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
            Outcome::CheckInDue => "check_in_due",
            Outcome::CheckedIn => "checked_in",
            Outcome::CheckInDropped => "check_in_dropped",
            Outcome::CheckInsOff => "check_ins_off",
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

    /// atc gave up: nothing more happens to the job (or its turn) until a person acts.
    pub fn is_give_up(self) -> bool {
        matches!(
            self,
            Outcome::Abandoned
                | Outcome::Undelivered
                | Outcome::Misrouted
                | Outcome::Error
                | Outcome::ReadBackClosed
                | Outcome::ForwardFailed
        )
    }

    /// The outcomes a group member takes over from its carrier's turn (`Event::Followed`):
    /// the carrier's own outcome counts that turn.
    fn mirrors_a_carrier(self) -> bool {
        matches!(
            self,
            Outcome::Delivered | Outcome::Unconfirmed | Outcome::Undelivered | Outcome::Misrouted
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

/// One line of the event log: only typed facts, never message text, session ids, user
/// ids or tokens (`reason` is a category from a fixed vocabulary).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    pub at: Timestamp,
    /// An outcome name, or what a command did (`registered`, `replaced`, `cancelled`…).
    pub event: String,
    pub task_id: String,
    pub job_id: String,
    /// The job's status afterwards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// For `polled`: the child task's status on the server (`running`, `finished`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_status: Option<String>,
    /// For a finished child: how it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<TaskOutcome>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl LogEntry {
    /// What a tick as a whole did (no job): `kicked`, a tick started by a QwenPaw turn's end.
    pub fn tick(event: &str, reason: Option<String>, at: Timestamp) -> LogEntry {
        LogEntry {
            at,
            event: event.to_owned(),
            task_id: String::new(),
            job_id: String::new(),
            status: None,
            task_status: None,
            outcome: None,
            http_status: None,
            reason,
        }
    }

    /// What a command did to `job` (the status is the job's after it).
    pub fn of(event: &str, job: &Job, at: Timestamp) -> LogEntry {
        LogEntry {
            at,
            event: event.to_owned(),
            task_id: job.task_id.clone(),
            job_id: job.job_id.clone(),
            status: Some(job.status),
            task_status: None,
            outcome: None,
            http_status: None,
            reason: None,
        }
    }
}

/// The kind of a failure, from a fixed vocabulary: what a log may say about an error
/// without quoting anything a server sent.
pub fn failure_kind(error: &str) -> String {
    if let Some(rest) = error.find("HTTP ").map(|i| &error[i + 5..]) {
        let code: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if code.len() == 3 {
            return format!("HTTP {code}");
        }
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

/// A job the pass gave up on: one line for a person (`atc tick` prints it on stderr,
/// whatever the verbosity), once, by the tick that gave up. Only typed facts: no server
/// text, no session or user ids.
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

/// What happened to which task in one pass.
#[derive(Debug, Default)]
pub struct Report {
    entries: BTreeMap<Outcome, Vec<String>>,
    /// What the summary counts: as `entries`, without a group member's copy of its
    /// carrier's outcome (one group turn is one delivery, or one give-up).
    counts: BTreeMap<Outcome, usize>,
    /// Parent turns whose end the pass learned.
    followed: usize,
    /// Of the forwards sent, the console toasts (a console parent's person told that
    /// something arrived).
    toasts: usize,
    /// The jobs given up in this pass.
    gave_up: Vec<GiveUp>,
    /// How many of `gave_up` the pass has announced (saved, so a person must hear of them).
    announced: usize,
    /// Why each task that failed something did, one line (for `-v`).
    reasons: BTreeMap<String, String>,
    /// Event-log lines not yet written.
    log: Vec<LogEntry>,
    /// How long each phase of the pass took (`-vvv`).
    timings: Vec<(&'static str, std::time::Duration)>,
    /// The pass did not read the job file: it is as the last tick found it, settled.
    unchanged: bool,
}

impl Report {
    pub fn add(&mut self, outcome: Outcome, task_id: &str) {
        if outcome == Outcome::Followed {
            self.followed += 1;
        }
        if outcome.is_internal() {
            return;
        }
        *self.counts.entry(outcome).or_default() += 1;
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

    /// Counts what an event did to `job` (the job as it is afterwards), keeps the reason
    /// of anything that went wrong and what was given up, and queues the event-log lines.
    pub fn record(&mut self, job: &Job, changed: bool, outcomes: &[Outcome], at: Timestamp) {
        let member = job.carried_by.is_some();
        for outcome in outcomes {
            if *outcome == Outcome::Forwarded && job.target.channel == "console" {
                self.toasts += 1;
            }
            if member && outcome.mirrors_a_carrier() {
                // Listed with its task id, counted once: by the carrier's turn.
                self.entries
                    .entry(*outcome)
                    .or_default()
                    .push(job.task_id.clone());
            } else {
                self.add(*outcome, &job.task_id);
            }
            if outcome.is_give_up() && !member {
                self.gave_up.push(crate::describe::give_up(job, *outcome));
            }
        }
        let error = job
            .last_error
            .clone()
            .or_else(|| job.delivery.as_ref().and_then(|d| d.error.clone()))
            .or_else(|| job.forward.as_ref().and_then(|f| f.reason.clone()));
        if outcomes.iter().any(|o| o.is_error())
            && let Some(error) = &error
        {
            self.reasons
                .insert(job.task_id.clone(), crate::describe::short_cause(error));
        }
        for outcome in outcomes.iter().filter(|o| !o.is_internal()) {
            // A job polled while it runs is logged once, at its first poll; then only
            // what changes.
            let Some(event) = outcome.log_name() else {
                continue;
            };
            if *outcome == Outcome::Running && !changed {
                continue;
            }
            let (task_status, task_outcome) = match outcome {
                Outcome::Running => (Some("running"), None),
                Outcome::Finished => (Some("finished"), job.outcome),
                _ => (None, None),
            };
            let http_status = match outcome {
                Outcome::Forwarded | Outcome::ForwardFailed => {
                    job.forward.as_ref().and_then(|f| f.last_http_status)
                }
                Outcome::Delivered | Outcome::Busy | Outcome::Unconfirmed | Outcome::Error => {
                    job.delivery.as_ref().and_then(|d| d.last_http_status)
                }
                _ => None,
            };
            let reason = outcome
                .is_error()
                .then(|| error.as_deref().map(failure_kind))
                .flatten();
            self.log.push(LogEntry {
                at,
                event: event.to_owned(),
                task_id: job.task_id.clone(),
                job_id: job.job_id.clone(),
                status: Some(job.status),
                task_status: task_status.map(str::to_owned),
                outcome: task_outcome,
                http_status,
                reason,
            });
        }
    }

    /// Adds a log line for something done outside a transition (pruning).
    pub fn log(&mut self, entry: LogEntry) {
        self.log.push(entry);
    }

    /// A report of a pass that found the job file as the last tick left it, settled.
    pub fn unchanged() -> Report {
        Report {
            unchanged: true,
            ..Report::default()
        }
    }

    pub fn is_unchanged(&self) -> bool {
        self.unchanged
    }

    /// Notes how long a phase took.
    pub fn time(&mut self, phase: &'static str, took: std::time::Duration) {
        self.timings.push((phase, took));
    }

    /// `tick: prepare 1.2 ms, poll 15.0 ms, …`: where the pass spent its time.
    pub fn timing(&self) -> String {
        let phases: Vec<String> = self
            .timings
            .iter()
            .map(|(phase, took)| format!("{phase} {:.1} ms", took.as_secs_f64() * 1e3))
            .collect();
        format!("tick: {}", phases.join(", "))
    }

    /// The event-log lines queued so far (and forgets them).
    pub fn take_log(&mut self) -> Vec<LogEntry> {
        std::mem::take(&mut self.log)
    }

    /// How many of `outcome` the summary counts.
    pub fn count(&self, outcome: Outcome) -> usize {
        self.counts.get(&outcome).copied().unwrap_or(0)
    }

    /// Turns posted: the server said so, or reading the chat back found one.
    pub fn delivered(&self) -> usize {
        self.count(Outcome::Delivered) + self.count(Outcome::Confirmed)
    }

    /// Turns whose outcome became unknown.
    fn unconfirmed(&self) -> usize {
        self.count(Outcome::Unconfirmed) + self.count(Outcome::RecoveredUnconfirmed)
    }

    /// What the pass gave up on, one entry per job (a group's turn: its carrier).
    pub fn gave_up(&self) -> &[GiveUp] {
        &self.gave_up
    }

    /// The give-ups recorded since the last call. The pass calls it right after each save,
    /// so every give-up in the job file is announced even when a later save of the same
    /// pass fails (and one whose save failed is not: the next tick gives it up again).
    pub fn take_saved_give_ups(&mut self) -> &[GiveUp] {
        let from = std::mem::replace(&mut self.announced, self.gave_up.len());
        &self.gave_up[from..]
    }

    /// `tick: 12 polled, 2 delivered, 1 busy, 0 lost, 1 failed check, 1 given up`, and,
    /// when there are any, the turns of unknown outcome, the parent turns followed and
    /// the replies forwarded.
    pub fn summary(&self) -> String {
        let failed = self.count(Outcome::FailedCheck);
        let mut said = format!(
            "tick: {} polled, {} delivered, {} busy, {} lost, {}, {} given up",
            self.count(Outcome::Polled),
            self.delivered(),
            self.count(Outcome::Busy),
            self.count(Outcome::Lost),
            plural(failed as u64, "failed check", "failed checks"),
            self.gave_up.len(),
        );
        for (n, one, many) in [
            (self.unconfirmed(), "unconfirmed", "unconfirmed"),
            (
                self.followed,
                "parent turn followed",
                "parent turns followed",
            ),
            (
                self.count(Outcome::Forwarded) - self.toasts,
                "forwarded",
                "forwarded",
            ),
            (self.toasts, "console toast", "console toasts"),
        ] {
            if n > 0 {
                said.push_str(&format!(", {}", plural(n as u64, one, many)));
            }
        }
        said
    }

    /// `tick: <task id>: <what went wrong>: <why>`, one line per task that failed
    /// something (`failed check, abandoned: HTTP 500: …`).
    pub fn failures(&self) -> Vec<String> {
        self.reasons
            .iter()
            .map(|(task, why)| {
                let what: Vec<String> = self
                    .entries
                    .iter()
                    .filter(|(o, tasks)| {
                        (o.is_error() || matches!(o, Outcome::Abandoned | Outcome::Expired))
                            && tasks.contains(task)
                    })
                    .map(|(o, _)| o.as_str().replace('_', " "))
                    .collect();
                format!("tick: {task}: {}: {why}", what.join(", "))
            })
            .collect()
    }

    /// One `tick: <outcome>: <task ids>` line per outcome, by name.
    pub fn detail(&self) -> Vec<String> {
        self.by_name()
            .into_iter()
            .map(|(name, tasks)| format!("tick: {name}: {}", tasks.join(" ")))
            .collect()
    }

    /// The counts, per outcome the task ids, the failures and what was given up.
    pub fn to_json(&self) -> Value {
        json!({
            "polled": self.count(Outcome::Polled),
            "delivered": self.delivered(),
            "busy": self.count(Outcome::Busy),
            "lost": self.count(Outcome::Lost),
            "failed_checks": self.count(Outcome::FailedCheck),
            "given_up": self.gave_up.len(),
            "unconfirmed": self.unconfirmed(),
            "followed": self.followed,
            "tasks": self.by_name(),
            "failures": self.reasons,
            "gave_up": self.gave_up,
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
    fn failures_are_named_by_kind_only() {
        for (error, kind) in [
            (
                "GET http://h/api/console/chat/task/t: connection refused (is QwenPaw running?)",
                "connection refused",
            ),
            ("HTTP 503: Service Unavailable", "HTTP 503"),
            (
                "HTTP 200 with text/html instead of JSON: is the base URL right?",
                "HTTP 200",
            ),
            (
                "reading the parent chat back failed: HTTP 500: boom",
                "HTTP 500",
            ),
            (
                "POST http://h/api/console/chat/task: timed out (recv response)",
                "timed out",
            ),
            (
                "parent chat busy (409: A task is already running)",
                "chat busy",
            ),
            ("something the server said about alice", "other"),
        ] {
            assert_eq!(failure_kind(error), kind, "{error}");
        }
    }

    #[test]
    fn counts_are_typed_and_an_abandoned_job_is_a_failed_check_and_a_give_up() {
        let mut report = Report::default();
        let mut abandoned = Job::sample(Status::Abandoned);
        abandoned.task_id = "task-a".into();
        abandoned.strikes = 3;
        abandoned.last_error = Some("HTTP 500: boom".into());
        report.record(
            &abandoned,
            true,
            &[Outcome::Polled, Outcome::FailedCheck, Outcome::Abandoned],
            Timestamp::from_unix(5),
        );
        report.add_all(&[Outcome::Polled, Outcome::Finished], "task-b");
        report.add(Outcome::Delivered, "task-b");
        report.add(Outcome::Claimed, "task-b");
        assert_eq!(report.count(Outcome::Polled), 2);
        assert_eq!(
            report.summary(),
            "tick: 2 polled, 1 delivered, 0 busy, 0 lost, 1 failed check, 1 given up"
        );
        assert_eq!(
            report.gave_up()[0].line(),
            "atc: gave up on task-a (abandoned): 3 failed checks in a row (HTTP 500); `atc status task-a` says more; the task may still run: `atc wait task-a` asks the server"
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
            [
                "polled",
                "delivered",
                "busy",
                "lost",
                "failed_checks",
                "given_up",
                "unconfirmed",
                "followed",
                "tasks",
                "failures",
                "gave_up"
            ]
        );
    }

    #[test]
    fn a_failure_keeps_its_reason_for_v_and_only_its_kind_for_the_log() {
        let mut job = Job::sample(Status::Pending);
        job.last_error =
            Some("GET http://h/api/x: connection refused (is QwenPaw running?)".into());
        let mut report = Report::default();
        report.record(
            &job,
            true,
            &[Outcome::Polled, Outcome::FailedCheck],
            Timestamp::from_unix(5),
        );
        assert_eq!(
            report.failures(),
            [format!(
                "tick: {}: failed check: connection refused (is QwenPaw running?)",
                job.task_id
            )]
        );
        assert_eq!(
            report.summary(),
            "tick: 1 polled, 0 delivered, 0 busy, 0 lost, 1 failed check, 0 given up",
            "a failed poll is a strike, not an error: the job is fine, still pending"
        );
        assert!(report.gave_up().is_empty());
        let log = report.take_log();
        assert!(
            log.iter()
                .any(|e| e.reason.as_deref() == Some("connection refused")),
            "{log:?}"
        );
        assert!(report.take_log().is_empty(), "taken once");
    }

    #[test]
    fn a_group_turn_given_up_is_one_give_up_and_a_read_back_delivery_counts_as_delivered() {
        let mut carrier = Job::sample(Status::Undelivered);
        carrier.task_id = "task-a".into();
        carrier.options.group = Some("g".into());
        carrier.group_tasks = Some(vec!["task-a".into(), "task-b".into()]);
        carrier.delivery = Some(crate::job::Delivery {
            error: Some("parent chat busy (409: A task is already running)".into()),
            ..Default::default()
        });
        let mut member = carrier.clone();
        member.task_id = "task-b".into();
        member.group_tasks = None;
        member.carried_by = Some(carrier.job_id.clone());
        let at = Timestamp::from_unix(5);
        let mut report = Report::default();
        report.record(&carrier, true, &[Outcome::Undelivered], at);
        report.record(&member, true, &[Outcome::Undelivered], at);
        let mut confirmed = Job::sample(Status::Done);
        confirmed.task_id = "task-c".into();
        report.record(&confirmed, true, &[Outcome::Confirmed], at);
        let mut followed = Job::sample(Status::Done);
        followed.task_id = "task-d".into();
        report.record(&followed, true, &[Outcome::Followed], at);
        assert_eq!(
            report.summary(),
            "tick: 0 polled, 1 delivered, 0 busy, 0 lost, 0 failed checks, 1 given up, 1 parent turn followed"
        );
        assert_eq!(
            report
                .gave_up()
                .iter()
                .map(GiveUp::line)
                .collect::<Vec<_>>(),
            [
                "atc: gave up on task-a (undelivered; its group's turn also carries task-b): the parent chat stayed busy past --busy-deadline; `atc status task-a` says more; `atc redeliver task-a` tries again"
            ]
        );
        let json = report.to_json();
        assert_eq!(json["tasks"]["undelivered"], json!(["task-a", "task-b"]));
        assert_eq!(json["given_up"], 1);
        assert_eq!(json["gave_up"][0]["with"], json!(["task-b"]));
    }

    #[test]
    fn give_up_lines_carry_no_server_text_or_ids_of_people() {
        let mut misrouted = Job::sample(Status::Misrouted);
        misrouted.last_error =
            Some("no chat with session secret-session (user alice, channel console)".into());
        misrouted.delivery = Some(crate::job::Delivery {
            error: misrouted.last_error.clone(),
            ..Default::default()
        });
        let mut refused = Job::sample(Status::Error);
        refused.delivery = Some(crate::job::Delivery {
            error: Some("404: alice's agent is not here".into()),
            ..Default::default()
        });
        let mut report = Report::default();
        let at = Timestamp::from_unix(5);
        report.record(&misrouted, true, &[Outcome::Misrouted], at);
        report.record(&refused, true, &[Outcome::Error], at);
        for line in report.gave_up().iter().map(GiveUp::line) {
            assert!(
                !line.contains("alice") && !line.contains("secret-session"),
                "{line}"
            );
            assert!(line.contains("`atc status task-1`"), "{line}");
        }
    }
}
