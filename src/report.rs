//! What a tick did, typed: each event a job or a turn takes yields [`Outcome`]s; a
//! [`Report`] counts them and prints them as text or JSON (a turn counts once, however
//! many blocks it carries; each task it carries is listed). Only task and turn ids are
//! recorded, never message text.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::text::plural;
use serde_json::{Value, json};

pub use crate::describe::GiveUp;
use crate::job::{Job, Status, TaskOutcome};
pub use crate::outcome::{Outcome, failure_kind};
use crate::time::Timestamp;
use crate::turn::Turn;

/// One line of the event log: only typed facts, never message text, session ids, user
/// ids or tokens (`reason` is a category from a fixed vocabulary).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    pub at: Timestamp,
    /// An outcome name, or what a command did (`registered`, `replaced`, `cancelled`…).
    pub event: String,
    pub task_id: String,
    pub job_id: String,
    /// The turn the event was about, when it was one (a delivery, a read-back, a forward).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
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
    /// An event about one task (or none: empty ids), nothing else said.
    pub fn about(event: &str, task_id: &str, job_id: &str, at: Timestamp) -> LogEntry {
        LogEntry {
            at,
            event: event.to_owned(),
            task_id: task_id.to_owned(),
            job_id: job_id.to_owned(),
            turn_id: None,
            status: None,
            task_status: None,
            outcome: None,
            http_status: None,
            reason: None,
        }
    }

    /// What a tick as a whole did (no job): `kicked`, a tick started by a QwenPaw turn's end.
    pub fn tick(event: &str, reason: Option<String>, at: Timestamp) -> LogEntry {
        LogEntry {
            reason,
            ..LogEntry::about(event, "", "", at)
        }
    }

    /// What a command did to `job`, as the file shows it after (`JobFile::shown`).
    pub fn of(event: &str, job: &Job, at: Timestamp) -> LogEntry {
        LogEntry {
            status: Some(job.shown),
            ..LogEntry::about(event, &job.task_id, &job.job_id, at)
        }
    }
}

/// What happened to which task in one pass.
#[derive(Debug, Default)]
pub struct Report {
    entries: BTreeMap<Outcome, Vec<String>>,
    /// What the summary counts: one per turn for a turn's outcomes (one turn of three
    /// results is one delivery, or one give-up), one per job for a job's.
    counts: BTreeMap<Outcome, usize>,
    /// Parent turns whose end the pass learned.
    followed: usize,
    /// Of the forwards sent, the console toasts (a console parent's person told that
    /// something arrived).
    toasts: usize,
    /// The jobs given up in this pass.
    gave_up: Vec<GiveUp>,
    /// How many of `gave_up` are recorded in the job file (`heard::record`).
    recorded: usize,
    /// Lines to say once the save in progress is made: this pass's give-ups, when a
    /// person hears the tick, and earlier ones nobody heard.
    to_say: Vec<String>,
    /// The lines of give-ups earlier ticks decided, nobody heard, and this pass said.
    said_late: Vec<String>,
    /// A kicked pass: something the ended turn concerns is still on its way (a child it may
    /// be still reads running, its parent chat is still busy): worth another look soon.
    again: bool,
    /// How many passes this report covers (`absorb`).
    passes: usize,
    /// Why each task that failed something did, one line (for `-v`).
    reasons: BTreeMap<String, String>,
    /// Event-log lines not yet written.
    log: Vec<LogEntry>,
    /// How long each phase of the pass took (`-vvv`).
    timings: Vec<(&'static str, std::time::Duration)>,
    /// The pass did not read the job file: it is as the last tick found it, settled.
    unchanged: bool,
    /// A kicked pass whose ended turns concern nothing in the job file.
    unconcerned: bool,
}

impl Report {
    /// Counts and lists a job's outcome (a turn's, `Followed` among them, are
    /// [`Report::record_turn`]'s); bookkeeping is left out.
    pub fn add(&mut self, outcome: Outcome, task_id: &str) {
        if outcome.is_internal() {
            return;
        }
        *self.counts.entry(outcome).or_default() += 1;
        self.entries
            .entry(outcome)
            .or_default()
            .push(task_id.to_owned());
    }

    /// Counts what an event did to `job` (the job as it is afterwards), keeps the reason
    /// of anything that went wrong and what was given up, and queues the event-log lines.
    pub fn record(&mut self, job: &Job, changed: bool, outcomes: &[Outcome], at: Timestamp) {
        for outcome in outcomes {
            self.add(*outcome, &job.task_id);
            match outcome {
                Outcome::Abandoned => self.gave_up.push(crate::describe::give_up_job(job)),
                Outcome::StopGaveUp => self.gave_up.push(crate::describe::give_up_stop(job)),
                _ => {}
            }
        }
        let error = job.last_error.clone();
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
            let reason = outcome
                .is_error()
                .then(|| error.as_deref().map(failure_kind))
                .flatten();
            self.log.push(LogEntry {
                // A job's own event: where its watch stands (a result's turn, if any, logs
                // where the result stands).
                status: Some(crate::status::status(job, None)),
                task_status: task_status.map(str::to_owned),
                outcome: task_outcome,
                reason,
                ..LogEntry::about(event, &job.task_id, &job.job_id, at)
            });
        }
    }

    /// Counts what an event did to `turn` (as it is afterwards) once, however many blocks
    /// it carries, lists each task it carries, keeps the reason of anything that went
    /// wrong and a give-up, and queues an event-log line per block. `jobs` are the file's
    /// jobs (after they followed the turn): the status each line records.
    pub fn record_turn(&mut self, turn: &Turn, jobs: &[Job], outcomes: &[Outcome], at: Timestamp) {
        let answers: Vec<&crate::turn::Block> = turn.answers().collect();
        // A check-in's landing is its job's to say (checked in, or dropped): a turn of
        // check-ins only counts nothing of that kind itself.
        let mirrored = |o: Outcome| {
            matches!(
                o,
                Outcome::Delivered
                    | Outcome::Confirmed
                    | Outcome::Undelivered
                    | Outcome::Misrouted
                    | Outcome::Error
                    | Outcome::ReadBackClosed
            )
        };
        let job_of = |job_id: &str| jobs.iter().find(|j| j.job_id == job_id);
        for outcome in outcomes {
            if *outcome == Outcome::Followed {
                self.followed += 1;
            }
            if outcome.is_internal() || (answers.is_empty() && mirrored(*outcome)) {
                continue;
            }
            if *outcome == Outcome::Forwarded && turn.chat.channel == "console" {
                self.toasts += 1;
            }
            *self.counts.entry(*outcome).or_default() += 1;
            let listed = self.entries.entry(*outcome).or_default();
            for block in &turn.carries {
                if !(block.kind.is_check_in() && mirrored(*outcome)) {
                    listed.push(block.task_id.clone());
                }
            }
            if outcome.is_give_up() {
                let lead = answers.first().and_then(|b| job_of(&b.job_id));
                if let Some(gave_up) = crate::describe::give_up_turn(turn, lead, *outcome) {
                    self.gave_up.push(gave_up);
                }
            }
        }
        let error = turn
            .delivery
            .error
            .clone()
            .or_else(|| turn.forward.as_ref().and_then(|f| f.reason.clone()));
        // Each task the turn carries that an error is counted for says why (`-v`), as a
        // job of its own would.
        if let Some(error) = &error {
            let why = crate::describe::short_cause(error);
            for block in &turn.carries {
                let listed = outcomes.iter().any(|o| {
                    o.is_error()
                        && !(answers.is_empty() && mirrored(*o))
                        && !(block.kind.is_check_in() && mirrored(*o))
                });
                if listed {
                    self.reasons.insert(block.task_id.clone(), why.clone());
                }
            }
        }
        for outcome in outcomes.iter().filter(|o| !o.is_internal()) {
            let Some(event) = outcome.log_name() else {
                continue;
            };
            // A console parent's forward is the toast: the log says so, as `status` does.
            let event = match outcome {
                Outcome::Forwarded if turn.chat.channel == "console" => "toast_shown",
                _ => event,
            };
            let http_status = match outcome {
                Outcome::Forwarded | Outcome::ForwardFailed => {
                    turn.forward.as_ref().and_then(|f| f.last_http_status)
                }
                Outcome::Delivered | Outcome::Busy | Outcome::Unconfirmed | Outcome::Error => {
                    turn.delivery.last_http_status
                }
                _ => None,
            };
            let reason = outcome
                .is_error()
                .then(|| error.as_deref().map(failure_kind))
                .flatten();
            for block in &turn.carries {
                if block.kind.is_check_in() && mirrored(*outcome) {
                    continue;
                }
                self.log.push(LogEntry {
                    turn_id: Some(turn.turn_id.clone()),
                    // A follow-up's job stands where its result landed (done).
                    status: job_of(&block.job_id)
                        .filter(|_| !block.kind.is_follow_up())
                        .map(|j| crate::status::status(j, Some(turn))),
                    http_status,
                    reason: reason.clone(),
                    ..LogEntry::about(event, &block.task_id, &block.job_id, at)
                });
            }
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

    /// A report of a kicked pass whose ended turns concern nothing in the job file: no
    /// request, no write.
    pub fn unconcerned() -> Report {
        Report {
            unconcerned: true,
            ..Report::default()
        }
    }

    pub fn is_unconcerned(&self) -> bool {
        self.unconcerned
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

    /// The give-ups decided since the last call: the pass records them in the job file
    /// (`heard::record`) in the save that records the decisions.
    pub fn unrecorded_give_ups(&mut self) -> &[GiveUp] {
        let from = std::mem::replace(&mut self.recorded, self.gave_up.len());
        &self.gave_up[from..]
    }

    /// Lines to say once the save in progress is made; `late`: give-ups earlier ticks
    /// decided and nobody heard.
    pub fn say(&mut self, lines: Vec<String>, late: bool) {
        if late {
            self.said_late.extend(lines.iter().cloned());
        }
        self.to_say.extend(lines);
    }

    /// The lines to say now that the save that recorded them is made. The pass calls it
    /// right after each save, so every give-up the job file marks said is said even when a
    /// later save of the same pass fails (and one whose save failed is not: the next tick
    /// gives it up again, or says it then).
    pub fn take_to_say(&mut self) -> Vec<String> {
        std::mem::take(&mut self.to_say)
    }

    /// The lines of give-ups earlier ticks decided, nobody heard, and this pass said.
    pub fn said_late(&self) -> &[String] {
        &self.said_late
    }

    /// Notes that something the ended turn concerns is still on its way.
    pub fn look_again(&mut self) {
        self.again = true;
    }

    /// Whether a kicked pass found something the ended turn concerns still on its way.
    pub fn wants_another_look(&self) -> bool {
        self.again
    }

    /// Adds what a later pass of the same tick did: counts summed, each task listed once
    /// per outcome, every give-up and every line said.
    pub fn absorb(&mut self, later: Report) {
        for (outcome, n) in later.counts {
            *self.counts.entry(outcome).or_default() += n;
        }
        for (outcome, tasks) in later.entries {
            let listed = self.entries.entry(outcome).or_default();
            for task in tasks {
                if !listed.contains(&task) {
                    listed.push(task);
                }
            }
        }
        self.followed += later.followed;
        self.toasts += later.toasts;
        self.gave_up.extend(later.gave_up);
        self.said_late.extend(later.said_late);
        self.reasons.extend(later.reasons);
        self.timings.extend(later.timings);
        self.unchanged &= later.unchanged;
        self.unconcerned &= later.unconcerned;
        self.again = later.again;
        self.passes = self.passes.max(1) + later.passes.max(1);
    }

    /// How many passes it covers.
    pub fn passes(&self) -> usize {
        self.passes.max(1)
    }

    /// `tick: 12 polled, 2 delivered, 1 busy, 0 lost, 1 failed check, 1 given up`, and,
    /// when there are any, the turns of unknown outcome, the parent turns followed, the
    /// replies forwarded, the check-ins that landed and the children atc stopped.
    pub fn summary(&self) -> String {
        let failed = self.count(Outcome::FailedCheck);
        // Deliveries are turns; a batch or group carries several tasks in one.
        let turns = self.delivered();
        let tasks: usize = [Outcome::Delivered, Outcome::Confirmed]
            .iter()
            .filter_map(|o| self.entries.get(o))
            .map(Vec::len)
            .sum();
        let delivered = if tasks > turns {
            format!(
                "{turns} delivered ({tasks} tasks in {})",
                plural(turns as u64, "turn", "turns")
            )
        } else {
            format!("{turns} delivered")
        };
        let mut said = format!(
            "tick: {} polled, {delivered}, {} busy, {} lost, {}, {} given up",
            self.count(Outcome::Polled),
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
            (self.count(Outcome::CheckedIn), "check-in", "check-ins"),
            (
                self.count(Outcome::Stopped),
                "child stopped",
                "children stopped",
            ),
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
            "gave_up": self
                .gave_up
                .iter()
                .map(|g| {
                    let mut entry = json!(g);
                    entry["line"] = json!(g.line());
                    entry
                })
                .collect::<Vec<_>>(),
            "said_late": self.said_late,
            "passes": self.passes(),
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
            ("404: Channel not found: mqtt", "HTTP 404"),
            ("422: {\"detail\": \"bad\"}", "HTTP 422"),
            ("2024 was a year", "other"),
            ("500 things went wrong", "other"),
            ("", "other"),
        ] {
            assert_eq!(failure_kind(error), kind, "{error}");
        }
    }

    #[test]
    fn counts_are_typed_and_an_abandoned_job_is_a_failed_check_and_a_give_up() {
        let mut report = Report::default();
        let mut abandoned = Job::sample(crate::job::Watch::Abandoned);
        abandoned.task_id = "task-a".into();
        abandoned.strikes = 3;
        abandoned.last_error = Some("HTTP 500: boom".into());
        report.record(
            &abandoned,
            true,
            &[Outcome::Polled, Outcome::FailedCheck, Outcome::Abandoned],
            Timestamp::from_unix(5),
        );
        report.add(Outcome::Polled, "task-b");
        report.add(Outcome::Finished, "task-b");
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
        // A check-in that landed and a child atc stopped are said too (posted, but no
        // result delivered).
        report.add(Outcome::CheckedIn, "task-c");
        report.add(Outcome::Stopped, "task-d");
        report.add(Outcome::Stopped, "task-e");
        assert_eq!(
            report.summary(),
            "tick: 2 polled, 1 delivered, 0 busy, 0 lost, 1 failed check, 1 given up, 1 check-in, 2 children stopped"
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
                "gave_up",
                "said_late",
                "passes"
            ]
        );
    }

    #[test]
    fn a_failure_keeps_its_reason_for_v_and_only_its_kind_for_the_log() {
        let mut job = Job::sample(crate::job::Watch::Pending);
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
    fn a_tick_of_several_passes_sums_them_and_is_settled_only_if_each_was() {
        use crate::turn::TurnState;
        let at = Timestamp::from_unix(5);
        let pass = |task: &str| {
            let mut report = Report::default();
            let turn = turn(TurnState::Delivered, &[task]);
            report.record_turn(&turn, &[], &[Outcome::Followed, Outcome::Forwarded], at);
            report
        };
        let mut all = pass("task-a");
        all.absorb(pass("task-b"));
        all.absorb(pass("task-a"));
        assert_eq!(
            all.summary(),
            "tick: 0 polled, 0 delivered, 0 busy, 0 lost, 0 failed checks, 0 given up, 3 parent turns followed, 3 console toasts"
        );
        let json = all.to_json();
        assert_eq!(json["followed"], 3);
        assert_eq!(json["passes"], 3);
        assert_eq!(json["tasks"]["forwarded"], json!(["task-a", "task-b"]));
        // Settled (or unconcerned) only if every pass was.
        type Kind = (fn() -> Report, fn(&Report) -> bool);
        let kinds: [Kind; 2] = [
            (Report::unchanged, Report::is_unchanged),
            (Report::unconcerned, Report::is_unconcerned),
        ];
        for (kind, is) in kinds {
            for (first, later, want) in [
                (kind(), kind(), true),
                (kind(), Report::default(), false),
                (Report::default(), kind(), false),
            ] {
                let mut all = first;
                all.absorb(later);
                assert_eq!(is(&all), want);
            }
        }
    }

    /// Found by hand: a batch of three in one turn said "3 polled, 1 delivered".
    #[test]
    fn a_turn_of_several_tasks_says_how_many_it_delivered() {
        use crate::turn::TurnState;
        let at = Timestamp::from_unix(5);
        let mut report = Report::default();
        let batch = turn(TurnState::Delivered, &["task-a", "task-b", "task-c"]);
        report.record_turn(&batch, &[], &[Outcome::Delivered], at);
        assert_eq!(
            report.summary(),
            "tick: 0 polled, 1 delivered (3 tasks in 1 turn), 0 busy, 0 lost, 0 failed checks, 0 given up"
        );
        let one = turn(TurnState::Delivered, &["task-d"]);
        report.record_turn(&one, &[], &[Outcome::Confirmed], at);
        assert_eq!(
            report.summary(),
            "tick: 0 polled, 2 delivered (4 tasks in 2 turns), 0 busy, 0 lost, 0 failed checks, 0 given up"
        );
    }

    /// A turn in `state` carrying the results of `tasks` (job ids `job-<task>`).
    fn turn(state: crate::turn::TurnState, tasks: &[&str]) -> Turn {
        let mut turn = Turn::sample(state);
        turn.carries = tasks
            .iter()
            .map(|t| crate::turn::Block {
                job_id: format!("job-{t}"),
                task_id: (*t).to_owned(),
                kind: crate::turn::BlockKind::Result,
            })
            .collect();
        turn
    }

    #[test]
    fn a_turn_given_up_is_one_give_up_and_a_read_back_delivery_counts_as_delivered() {
        use crate::turn::TurnState;
        let mut group = turn(TurnState::Undelivered, &["task-a", "task-b"]);
        group.group = Some("g".into());
        group.delivery.error = Some("parent chat busy (409: A task is already running)".into());
        let at = Timestamp::from_unix(5);
        let mut report = Report::default();
        report.record_turn(&group, &[], &[Outcome::Undelivered], at);
        let confirmed = turn(TurnState::Delivered, &["task-c"]);
        report.record_turn(&confirmed, &[], &[Outcome::Confirmed], at);
        let followed = turn(TurnState::Delivered, &["task-d"]);
        report.record_turn(&followed, &[], &[Outcome::Followed], at);
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
        let log = report.take_log();
        assert_eq!(
            log.iter()
                .filter(|e| e.event == "undelivered")
                .map(|e| (e.task_id.as_str(), e.turn_id.as_deref()))
                .collect::<Vec<_>>(),
            [("task-a", Some("atc-j1")), ("task-b", Some("atc-j1"))],
            "one log line per block, naming the turn"
        );
    }

    #[test]
    fn a_turn_of_check_ins_only_gives_nothing_up_and_counts_no_delivery() {
        use crate::turn::{BlockKind, TurnState};
        let mut check_in = turn(TurnState::Delivered, &["task-a"]);
        check_in.carries[0].kind = BlockKind::CheckIn { n: 1 };
        let mut report = Report::default();
        report.record_turn(
            &check_in,
            &[],
            &[Outcome::Delivered],
            Timestamp::from_unix(5),
        );
        check_in.state = TurnState::Refused;
        report.record_turn(&check_in, &[], &[Outcome::Error], Timestamp::from_unix(5));
        assert_eq!(report.delivered(), 0, "its job says it checked in");
        assert!(
            report.gave_up().is_empty(),
            "a check-in is dropped, not given up"
        );
    }

    #[test]
    fn give_up_lines_carry_no_server_text_or_ids_of_people() {
        use crate::turn::TurnState;
        let mut misrouted = turn(TurnState::Misrouted, &["task-1"]);
        misrouted.delivery.error =
            Some("no chat with session secret-session (user alice, channel console)".into());
        let mut refused = turn(TurnState::Refused, &["task-1"]);
        refused.delivery.error = Some("404: alice's agent is not here".into());
        let mut report = Report::default();
        let at = Timestamp::from_unix(5);
        report.record_turn(&misrouted, &[], &[Outcome::Misrouted], at);
        report.record_turn(&refused, &[], &[Outcome::Error], at);
        assert_eq!(report.gave_up().len(), 2);
        for line in report.gave_up().iter().map(GiveUp::line) {
            assert!(
                !line.contains("alice") && !line.contains("secret-session"),
                "{line}"
            );
            assert!(line.contains("`atc status task-1`"), "{line}");
        }
    }
}
