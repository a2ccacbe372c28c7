//! The state machine of a job: [`step`]`(&Job, Event, now, &Limits) -> Transition`.
//!
//! Pure: no I/O, no clock, no randomness. The shell (`pass`, the commands) reads the world,
//! turns what it saw into an [`Event`], calls [`step`], saves the new job and carries out
//! the [`Effect`]. Guards live here, not in callers: an event that does not apply to the
//! job as it is now changes nothing and yields [`Outcome::Ignored`]. `step` is the only
//! place a job's status changes; the table test at the bottom has a row for every
//! (status × event) pair, and does not compile when one is missing.
//!
//! Also here, because they are decisions about jobs: what `watch` does with an existing
//! record ([`register`]), which jobs a tick polls and delivers ([`to_poll`],
//! [`deliveries`]), and which ended jobs are pruned ([`prunable`]).

use std::collections::HashSet;
use std::time::Duration;

use crate::job::{Delivery, Job, Status, Target};
use crate::report::Outcome;
use crate::time::Timestamp;

/// The caps and back-off of a tick (defaults in `settings`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_strikes: u32,
    pub max_age: Duration,
    pub busy_retry: Duration,
    pub max_busy: u32,
    pub keep: Duration,
}

/// What one poll of the task saw, with a finished result already rendered.
#[derive(Clone, Debug, PartialEq)]
pub enum Check {
    /// 200 with a non-terminal status.
    Running { started_at: Option<Timestamp> },
    /// 200 with a terminal status; `text` is the rendered result.
    Finished {
        text: String,
        started_at: Option<Timestamp>,
    },
    /// QwenPaw's 404 for the task: the server has no record of it.
    Lost { detail: String },
    /// Anything else: a strike. `error` says what went wrong and what to suspect.
    Failed { error: String },
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

/// Something that happened to a job.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A tick polled the task.
    Polled(Check),
    /// A tick is about to POST the result: the write-ahead record.
    Claimed,
    /// The delivery POST ended.
    Posted(Posted),
    /// A person ran `atc cancel`.
    Cancelled,
    /// A tick found a POST left in flight by a tick that died.
    Recovered,
}

/// What the shell must do after saving the new job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    None,
    /// POST `text` into the job's parent chat. Only ever returned once the write-ahead
    /// record (the attempt counted, `attempt_started_at` set) is in the new job.
    Post {
        text: String,
    },
}

/// The job after an event, what to do next, and what happened (for reports and messages).
#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    pub job: Job,
    pub effect: Effect,
    pub outcomes: Vec<Outcome>,
}

impl Transition {
    fn ignored(job: &Job) -> Transition {
        Transition {
            job: job.clone(),
            effect: Effect::None,
            outcomes: vec![Outcome::Ignored],
        }
    }

    fn to(job: Job, outcomes: Vec<Outcome>) -> Transition {
        Transition {
            job,
            effect: Effect::None,
            outcomes,
        }
    }

    /// The event did not apply; the job is unchanged.
    pub fn is_ignored(&self) -> bool {
        self.outcomes == [Outcome::Ignored]
    }
}

/// Applies one event to one job.
pub fn step(job: &Job, event: Event, now: Timestamp, limits: &Limits) -> Transition {
    let mut transition = match event {
        Event::Polled(check) => polled(job, check, now, limits),
        Event::Claimed => claimed(job, now),
        Event::Posted(posted) => posted_outcome(job, posted, now, limits),
        Event::Cancelled => cancelled(job, now),
        Event::Recovered => recovered(job, now),
    };
    // A note records only what no field can (how a cancel met a POST); anything else,
    // including a note an older atc wrote, would only repeat the fields (`describe`
    // derives what people see from them).
    if !transition.is_ignored() && transition.job.status != Status::Cancelled {
        transition.job.note = None;
    }
    transition
}

/// Only a pending job takes a poll: one cancelled or re-registered while the poll was out
/// is left alone.
fn polled(job: &Job, check: Check, now: Timestamp, limits: &Limits) -> Transition {
    if job.status != Status::Pending {
        return Transition::ignored(job);
    }
    let mut next = job.clone();
    next.polls += 1;
    next.last_polled_at = Some(now);
    next.updated_at = now;
    let mut outcomes = vec![Outcome::Polled];
    match check {
        Check::Running { started_at } => {
            next.strikes = 0;
            next.last_error = None;
            next.started_at = started_at.or(next.started_at);
            outcomes.push(Outcome::Running);
        }
        // A finished result is delivered even past the age cap: it is here now.
        Check::Finished { text, started_at } => {
            next.strikes = 0;
            next.last_error = None;
            next.started_at = started_at.or(next.started_at);
            next.status = Status::Delivering;
            next.final_text = Some(text);
            next.delivery = Some(Delivery::default());
            outcomes.push(Outcome::Finished);
            return Transition::to(next, outcomes);
        }
        Check::Lost { detail } => {
            next.status = Status::Lost;
            next.last_error = Some(detail);
            outcomes.push(Outcome::Lost);
            return Transition::to(next, outcomes);
        }
        Check::Failed { error } => {
            next.strikes += 1;
            next.last_error = Some(error);
            outcomes.push(Outcome::FailedCheck);
            if next.strikes >= limits.max_strikes {
                next.status = Status::Abandoned;
                outcomes.push(Outcome::Abandoned);
                return Transition::to(next, outcomes);
            }
        }
    }
    if next.registered_at.elapsed_at(now) > limits.max_age {
        next.status = Status::Expired;
        outcomes.push(Outcome::Expired);
    }
    Transition::to(next, outcomes)
}

/// True when a delivering job may be posted now: its text is there, no POST is in flight
/// and any back-off is over.
pub fn is_due(job: &Job, now: Timestamp) -> bool {
    job.status == Status::Delivering
        && job.final_text.is_some()
        && !job.in_flight()
        && job
            .delivery
            .as_ref()
            .is_none_or(|d| d.next_attempt_at.is_none_or(|at| at <= now))
}

/// The write-ahead record: the attempt is counted and marked in flight before the POST.
fn claimed(job: &Job, now: Timestamp) -> Transition {
    let Some(text) = job.final_text.clone().filter(|_| is_due(job, now)) else {
        return Transition::ignored(job);
    };
    let mut next = job.clone();
    let delivery = next.delivery.get_or_insert_with(Delivery::default);
    delivery.attempts += 1;
    delivery.attempt_started_at = Some(now);
    next.updated_at = now;
    Transition {
        job: next,
        effect: Effect::Post { text },
        outcomes: vec![Outcome::Claimed],
    }
}

/// Records a POST's outcome and clears the write-ahead mark. A job cancelled while its
/// POST was out stays cancelled; what the POST did goes into its note.
fn posted_outcome(job: &Job, posted: Posted, now: Timestamp, limits: &Limits) -> Transition {
    if !job.in_flight() {
        return Transition::ignored(job);
    }
    let mut next = job.clone();
    next.updated_at = now;
    let delivery = next.delivery.get_or_insert_with(Delivery::default);
    delivery.attempt_started_at = None;
    match next.status {
        Status::Delivering => {}
        Status::Cancelled => {
            let what = match &posted {
                Posted::Accepted { .. } => "the result was delivered anyway",
                Posted::Unknown { .. } => "whether the result arrived is unknown",
                _ => "the result was not delivered",
            };
            next.note = Some(format!(
                "cancelled while its result was being posted; {what}"
            ));
            return Transition::to(next, vec![Outcome::CancelledInFlight]);
        }
        // Nothing else is ever in flight; clearing the stale mark is all there is to do.
        _ => return Transition::to(next, vec![Outcome::Ignored]),
    }
    let outcome = match posted {
        Posted::Accepted { turn_task_id } => {
            delivery.last_http_status = Some(200);
            delivery.next_attempt_at = None;
            next.status = Status::Done;
            next.delivered_at = Some(now);
            next.turn_task_id = turn_task_id;
            next.last_error = None;
            Outcome::Delivered
        }
        Posted::Busy { detail } => {
            delivery.busy += 1;
            delivery.last_http_status = Some(409);
            defer(
                &mut next,
                now,
                limits,
                format!("parent chat busy (409: {detail})"),
                Outcome::Busy,
            )
        }
        Posted::NotSent { error } => {
            delivery.unreachable += 1;
            delivery.last_http_status = None;
            defer(
                &mut next,
                now,
                limits,
                format!("could not reach the server: {error}"),
                Outcome::Unreachable,
            )
        }
        Posted::Unknown { error, http_status } => {
            delivery.last_http_status = http_status;
            next.status = Status::Unconfirmed;
            next.last_error = Some(error);
            Outcome::Unconfirmed
        }
        Posted::Rejected {
            http_status,
            detail,
        } => {
            delivery.last_http_status = Some(http_status);
            next.status = Status::Error;
            next.last_error = Some(format!("{http_status}: {detail}"));
            Outcome::Error
        }
    };
    Transition::to(next, vec![outcome])
}

/// Busy or unreachable: try again after the back-off, at most `max_busy` times in all.
fn defer(job: &mut Job, now: Timestamp, limits: &Limits, why: String, outcome: Outcome) -> Outcome {
    job.last_error = Some(why);
    let delivery = job.delivery.get_or_insert_with(Delivery::default);
    if delivery.deferrals() >= limits.max_busy {
        delivery.next_attempt_at = None;
        job.status = Status::Undelivered;
        Outcome::Undelivered
    } else {
        delivery.next_attempt_at = Some(now.saturating_add(limits.busy_retry));
        outcome
    }
}

/// A cancel stops a live watch; the child task keeps running. One that meets a POST in
/// flight still cancels (the result may already be on its way: `explain` says so).
fn cancelled(job: &Job, now: Timestamp) -> Transition {
    let outcome = match job.status {
        Status::Cancelled => {
            return Transition {
                job: job.clone(),
                effect: Effect::None,
                outcomes: vec![Outcome::AlreadyCancelled],
            };
        }
        Status::Delivering if job.in_flight() => Outcome::CancelledInFlight,
        Status::Pending | Status::Delivering => Outcome::Cancelled,
        _ => return Transition::ignored(job),
    };
    let mut next = job.clone();
    next.status = Status::Cancelled;
    next.note = None;
    next.updated_at = now;
    Transition::to(next, vec![outcome])
}

/// A job left `delivering` with a POST in flight by a tick that died: the outcome is
/// unknown, so it is never posted blind.
fn recovered(job: &Job, now: Timestamp) -> Transition {
    let started = job.delivery.as_ref().and_then(|d| d.attempt_started_at);
    let (Status::Delivering, Some(started)) = (job.status, started) else {
        return Transition::ignored(job);
    };
    let mut next = job.clone();
    next.status = Status::Unconfirmed;
    if let Some(d) = next.delivery.as_mut() {
        d.attempt_started_at = None;
    }
    next.updated_at = now;
    next.last_error = Some(format!(
        "an atc tick stopped while posting the result (attempt started {started})"
    ));
    Transition::to(next, vec![Outcome::RecoveredUnconfirmed])
}

/// What `watch` should do, given the record the file already holds for the task.
#[derive(Debug, PartialEq, Eq)]
pub enum Registration {
    /// No record: add one.
    New,
    /// Same task, same target, still live: keep the existing job and its id.
    AlreadyWatching,
    /// Replace the existing record with a fresh pending job. `was` says what it replaced.
    Replace { was: Status, same_target: bool },
    /// Refuse: the result already went out, or may have, or is going out right now.
    Refuse { was: Status },
}

/// A different base URL is a different target too: it names another QwenPaw instance (and
/// re-watching with a corrected URL is how a wrong one is fixed).
pub fn register(existing: Option<&Job>, target: &Target, base_url: &str) -> Registration {
    let Some(job) = existing else {
        return Registration::New;
    };
    let same_target = job.target == *target && job.base_url == base_url;
    match job.status {
        Status::Done | Status::Unconfirmed => Registration::Refuse { was: job.status },
        Status::Pending | Status::Delivering if same_target => Registration::AlreadyWatching,
        // A POST to the old chat is under way: retargeting now could deliver twice.
        Status::Delivering if job.in_flight() => Registration::Refuse { was: job.status },
        was => Registration::Replace { was, same_target },
    }
}

/// The jobs a tick recovers first (by position): delivering with a POST in flight. The
/// tick lock says no other tick is running, so the tick that claimed them died.
pub fn interrupted(jobs: &[Job]) -> Vec<usize> {
    jobs.iter()
        .enumerate()
        .filter(|(_, job)| job.status == Status::Delivering && job.in_flight())
        .map(|(i, _)| i)
        .collect()
}

/// The jobs a tick polls: every pending one.
pub fn to_poll(jobs: &[Job]) -> Vec<&Job> {
    jobs.iter()
        .filter(|job| job.status == Status::Pending)
        .collect()
}

/// The deliveries due now: the oldest registration per parent chat. A second POST into
/// the same chat would only meet 409 behind the turn the first one starts.
pub fn deliveries(jobs: &[Job], now: Timestamp) -> Vec<&Job> {
    let mut due: Vec<&Job> = jobs.iter().filter(|job| is_due(job, now)).collect();
    due.sort_by_key(|job| job.registered_at);
    let mut chats = HashSet::new();
    due.retain(|job| chats.insert(job.chat_key()));
    due
}

/// Ended jobs are kept for `keep` after their last change, then pruned.
pub fn prunable(job: &Job, now: Timestamp, keep: Duration) -> bool {
    job.status.is_terminal() && job.updated_at.elapsed_at(now) > keep
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_strikes: 3,
        max_age: Duration::from_secs(3600),
        busy_retry: Duration::from_secs(20),
        max_busy: 2,
        keep: Duration::from_secs(7 * 86400),
    };

    fn t(secs: u64) -> Timestamp {
        Timestamp::from_unix(1_800_000_000 + secs)
    }

    fn target() -> Target {
        Target {
            agent_id: "default".into(),
            target_agent: Some("SE".into()),
            session_id: "s-77".into(),
            user_id: "default".into(),
            channel: "console".into(),
        }
    }

    fn pending() -> Job {
        let mut job = Job::sample(Status::Pending);
        job.target = target();
        job.registered_at = t(0);
        job.updated_at = t(0);
        job
    }

    /// A job in `status` as a tick would leave it: delivering jobs have their text and are
    /// due; ended jobs have what their ending recorded.
    fn job(status: Status) -> Job {
        let mut job = pending();
        if status != Status::Pending {
            job.final_text = Some("T".into());
            job.delivery = Some(Delivery::default());
        }
        job.status = status;
        job
    }

    fn apply(job: &Job, event: Event, now: Timestamp) -> Transition {
        step(job, event, now, &LIMITS)
    }

    fn in_flight() -> Job {
        apply(&job(Status::Delivering), Event::Claimed, t(6)).job
    }

    fn running() -> Check {
        Check::Running {
            started_at: Some(t(1)),
        }
    }

    fn finished() -> Check {
        Check::Finished {
            text: "T2".into(),
            started_at: None,
        }
    }

    fn accepted() -> Posted {
        Posted::Accepted {
            turn_task_id: Some("task-p".into()),
        }
    }

    /// The kinds of event, one representative each.
    #[derive(Clone, Copy, Debug)]
    enum Kind {
        Running,
        Finished,
        Lost,
        Failed,
        Claimed,
        Accepted,
        Busy,
        NotSent,
        Unknown,
        Rejected,
        Cancelled,
        Recovered,
    }

    const KINDS: [Kind; 12] = [
        Kind::Running,
        Kind::Finished,
        Kind::Lost,
        Kind::Failed,
        Kind::Claimed,
        Kind::Accepted,
        Kind::Busy,
        Kind::NotSent,
        Kind::Unknown,
        Kind::Rejected,
        Kind::Cancelled,
        Kind::Recovered,
    ];

    fn event(kind: Kind) -> Event {
        match kind {
            Kind::Running => Event::Polled(running()),
            Kind::Finished => Event::Polled(finished()),
            Kind::Lost => Event::Polled(Check::Lost {
                detail: "Task not found: task-1".into(),
            }),
            Kind::Failed => Event::Polled(Check::Failed {
                error: "HTTP 500".into(),
            }),
            Kind::Claimed => Event::Claimed,
            Kind::Accepted => Event::Posted(accepted()),
            Kind::Busy => Event::Posted(Posted::Busy {
                detail: "busy".into(),
            }),
            Kind::NotSent => Event::Posted(Posted::NotSent {
                error: "refused".into(),
            }),
            Kind::Unknown => Event::Posted(Posted::Unknown {
                error: "timed out".into(),
                http_status: None,
            }),
            Kind::Rejected => Event::Posted(Posted::Rejected {
                http_status: 404,
                detail: "Agent 'x' not found".into(),
            }),
            Kind::Cancelled => Event::Cancelled,
            Kind::Recovered => Event::Recovered,
        }
    }

    /// What a row expects: the status afterwards, whether a POST is due, what happened.
    type Row = (Status, bool, &'static [Outcome]);

    const IGNORED: &[Outcome] = &[Outcome::Ignored];

    /// The table: every (status × event) pair, for a job in that status that is not in
    /// flight (a POST's outcome applies only to a job in flight: see `posted_rows`).
    /// Exhaustive by construction: a new status or event kind does not compile here until
    /// it has its rows.
    fn row(status: Status, kind: Kind) -> Row {
        use Kind as K;
        use Outcome as O;
        use Status as S;
        match (status, kind) {
            (S::Pending, K::Running) => (S::Pending, false, &[O::Polled, O::Running]),
            (S::Pending, K::Finished) => (S::Delivering, false, &[O::Polled, O::Finished]),
            (S::Pending, K::Lost) => (S::Lost, false, &[O::Polled, O::Lost]),
            (S::Pending, K::Failed) => (S::Pending, false, &[O::Polled, O::FailedCheck]),
            (S::Pending | S::Delivering, K::Cancelled) => (S::Cancelled, false, &[O::Cancelled]),
            (S::Delivering, K::Claimed) => (S::Delivering, true, &[O::Claimed]),
            (S::Cancelled, K::Cancelled) => (S::Cancelled, false, &[O::AlreadyCancelled]),
            // Everything else changes nothing: polls apply to pending jobs only, claims to
            // due ones, POST outcomes and recovery to jobs in flight (`posted_rows`); an
            // ended job is only ever pruned.
            (
                status @ (S::Pending
                | S::Delivering
                | S::Done
                | S::Unconfirmed
                | S::Undelivered
                | S::Lost
                | S::Abandoned
                | S::Expired
                | S::Cancelled
                | S::Skipped
                | S::Misrouted
                | S::Error),
                K::Running
                | K::Finished
                | K::Lost
                | K::Failed
                | K::Claimed
                | K::Accepted
                | K::Busy
                | K::NotSent
                | K::Unknown
                | K::Rejected
                | K::Cancelled
                | K::Recovered,
            ) => (status, false, IGNORED),
        }
    }

    /// The pairs whose outcome depends on a POST being in flight: a delivering job whose
    /// write-ahead record is saved, and one cancelled in that state.
    fn posted_rows(status: Status, kind: Kind) -> Row {
        use Kind as K;
        use Outcome as O;
        use Status as S;
        match (status, kind) {
            (S::Delivering, K::Accepted) => (S::Done, false, &[O::Delivered]),
            (S::Delivering, K::Busy) => (S::Delivering, false, &[O::Busy]),
            (S::Delivering, K::NotSent) => (S::Delivering, false, &[O::Unreachable]),
            (S::Delivering, K::Unknown) => (S::Unconfirmed, false, &[O::Unconfirmed]),
            (S::Delivering, K::Rejected) => (S::Error, false, &[O::Error]),
            (S::Delivering, K::Recovered) => (S::Unconfirmed, false, &[O::RecoveredUnconfirmed]),
            (S::Delivering, K::Cancelled) => (S::Cancelled, false, &[O::CancelledInFlight]),
            (S::Delivering, K::Claimed) => (S::Delivering, false, IGNORED),
            (S::Cancelled, K::Accepted | K::Busy | K::NotSent | K::Unknown | K::Rejected) => {
                (S::Cancelled, false, &[O::CancelledInFlight])
            }
            (S::Cancelled, K::Cancelled) => (S::Cancelled, false, &[O::AlreadyCancelled]),
            (_, kind) => row(status, kind),
        }
    }

    fn check(job: &Job, kind: Kind, (status, posts, outcomes): Row, case: &str) {
        let tr = apply(job, event(kind), t(10));
        assert_eq!(tr.job.status, status, "{case}");
        assert_eq!(tr.outcomes, outcomes, "{case}");
        assert_eq!(
            matches!(tr.effect, Effect::Post { .. }),
            posts,
            "{case}: effect {:?}",
            tr.effect
        );
        if tr.is_ignored() {
            assert_eq!(tr.job, *job, "{case}: an ignored event changes nothing");
        } else if tr.outcomes != [Outcome::AlreadyCancelled] {
            assert_eq!(tr.job.updated_at, t(10), "{case}: a change is dated");
        }
    }

    #[test]
    fn every_status_and_event_pair_has_a_row() {
        for status in Status::ALL {
            for kind in KINDS {
                check(
                    &job(status),
                    kind,
                    row(status, kind),
                    &format!("{status} × {kind:?}"),
                );
            }
        }
        let flying = in_flight();
        let mut cancelled_flying = flying.clone();
        cancelled_flying.status = Status::Cancelled;
        for job in [flying, cancelled_flying] {
            for kind in KINDS {
                check(
                    &job,
                    kind,
                    posted_rows(job.status, kind),
                    &format!("{} in flight × {kind:?}", job.status),
                );
            }
        }
    }

    #[test]
    fn polls_update_the_record() {
        let mut j = pending();
        j.strikes = 2;
        j.note = Some("check failed (2 in a row)".into());
        let tr = apply(&j, Event::Polled(running()), t(10));
        let n = &tr.job;
        assert_eq!(
            (n.strikes, n.polls, n.started_at, n.last_polled_at),
            (0, 1, Some(t(1)), Some(t(10)))
        );
        assert_eq!(
            n.note, None,
            "an older atc's note does not outlive the poll"
        );

        let n = apply(&pending(), Event::Polled(finished()), t(5)).job;
        assert_eq!(n.final_text.as_deref(), Some("T2"));
        assert!(is_due(&n, t(5)));

        let n = apply(
            &pending(),
            Event::Polled(Check::Lost {
                detail: "Task not found: task-1".into(),
            }),
            t(5),
        )
        .job;
        assert_eq!(n.last_error.as_deref(), Some("Task not found: task-1"));
    }

    #[test]
    fn strikes_abandon_at_the_cap_and_keep_the_last_error() {
        let mut j = pending();
        for n in 1..LIMITS.max_strikes {
            j = apply(
                &j,
                Event::Polled(Check::Failed {
                    error: "500".into(),
                }),
                t(n.into()),
            )
            .job;
            assert_eq!((j.status, j.strikes), (Status::Pending, n));
        }
        let tr = apply(
            &j,
            Event::Polled(Check::Failed {
                error: "boom".into(),
            }),
            t(9),
        );
        assert_eq!(tr.job.status, Status::Abandoned);
        assert_eq!(
            tr.outcomes,
            [Outcome::Polled, Outcome::FailedCheck, Outcome::Abandoned]
        );
        assert_eq!(tr.job.last_error.as_deref(), Some("boom"));
    }

    #[test]
    fn the_age_cap_expires_a_task_that_is_not_finished() {
        let j = pending();
        let at_cap = apply(&j, Event::Polled(running()), t(3600));
        assert_eq!(
            at_cap.job.status,
            Status::Pending,
            "exactly at the cap is not over it"
        );
        let over = apply(&j, Event::Polled(running()), t(3601));
        assert_eq!(over.job.status, Status::Expired);
        assert_eq!(
            over.outcomes,
            [Outcome::Polled, Outcome::Running, Outcome::Expired]
        );
        let failed = apply(
            &j,
            Event::Polled(Check::Failed { error: "x".into() }),
            t(3601),
        );
        assert_eq!(
            failed.outcomes,
            [Outcome::Polled, Outcome::FailedCheck, Outcome::Expired]
        );
        let done = apply(&j, Event::Polled(finished()), t(99_999));
        assert_eq!(
            done.job.status,
            Status::Delivering,
            "a result that is here is delivered"
        );
    }

    #[test]
    fn a_claim_is_the_write_ahead_record_and_carries_the_text() {
        let tr = apply(&job(Status::Delivering), Event::Claimed, t(6));
        assert_eq!(tr.effect, Effect::Post { text: "T".into() });
        let d = tr.job.delivery.clone().unwrap();
        assert_eq!((d.attempts, d.attempt_started_at), (1, Some(t(6))));
        assert!(tr.job.in_flight());
        assert!(!is_due(&tr.job, t(6)));
        assert!(
            apply(&tr.job, Event::Claimed, t(7)).is_ignored(),
            "one POST at a time"
        );
        let mut no_text = job(Status::Delivering);
        no_text.final_text = None;
        assert!(apply(&no_text, Event::Claimed, t(6)).is_ignored());
    }

    #[test]
    fn busy_and_unreachable_back_off_and_share_one_cap() {
        let tr = apply(
            &in_flight(),
            Event::Posted(Posted::Busy {
                detail: "busy".into(),
            }),
            t(7),
        );
        let j = tr.job;
        let d = j.delivery.clone().unwrap();
        assert_eq!(
            (
                d.busy,
                d.last_http_status,
                d.next_attempt_at,
                d.attempt_started_at
            ),
            (1, Some(409), Some(t(27)), None)
        );
        assert!(j.last_error.as_deref().unwrap().contains("409: busy"));
        assert!(!is_due(&j, t(26)));
        assert!(is_due(&j, t(27)));

        let delivered = apply(
            &apply(&j, Event::Claimed, t(27)).job,
            Event::Posted(accepted()),
            t(28),
        )
        .job;
        assert_eq!(
            (
                delivered.status,
                delivered.delivered_at,
                delivered.last_error
            ),
            (Status::Done, Some(t(28)), None),
            "a delivery clears the busy error"
        );
        assert_eq!(delivered.turn_task_id.as_deref(), Some("task-p"));

        // Nothing sent counts against the same cap: the second deferral of max_busy = 2.
        let tr = apply(
            &apply(&j, Event::Claimed, t(27)).job,
            Event::Posted(Posted::NotSent {
                error: "refused".into(),
            }),
            t(28),
        );
        assert_eq!(tr.outcomes, [Outcome::Undelivered]);
        let d = tr.job.delivery.clone().unwrap();
        assert_eq!(
            (d.attempts, d.busy, d.unreachable, d.next_attempt_at),
            (2, 1, 1, None)
        );
        assert_eq!(tr.job.final_text.as_deref(), Some("T"), "the text is kept");
    }

    #[test]
    fn refused_and_unknown_posts_keep_the_reason() {
        let rejected = apply(
            &in_flight(),
            Event::Posted(Posted::Rejected {
                http_status: 404,
                detail: "Agent 'x' not found".into(),
            }),
            t(7),
        )
        .job;
        assert_eq!(
            rejected.last_error.as_deref(),
            Some("404: Agent 'x' not found")
        );
        let unknown = apply(
            &in_flight(),
            Event::Posted(Posted::Unknown {
                error: "HTTP 502".into(),
                http_status: Some(502),
            }),
            t(7),
        )
        .job;
        assert_eq!(unknown.delivery.unwrap().last_http_status, Some(502));
        assert_eq!(unknown.final_text.as_deref(), Some("T"));
    }

    #[test]
    fn a_cancel_during_the_post_is_not_clobbered() {
        for (posted, says) in [
            (accepted(), "delivered anyway"),
            (
                Posted::Busy { detail: "b".into() },
                "the result was not delivered",
            ),
            (
                Posted::Unknown {
                    error: "e".into(),
                    http_status: Some(502),
                },
                "unknown",
            ),
        ] {
            let cancelled = apply(&in_flight(), Event::Cancelled, t(7));
            assert_eq!(cancelled.outcomes, [Outcome::CancelledInFlight]);
            let after = apply(&cancelled.job, Event::Posted(posted), t(8)).job;
            assert_eq!(after.status, Status::Cancelled);
            assert_eq!(after.delivered_at, None);
            assert!(!after.in_flight());
            assert!(after.note.as_deref().unwrap().contains(says), "{after:?}");
        }
    }

    #[test]
    fn recovery_turns_an_interrupted_post_into_unconfirmed() {
        let tr = apply(&in_flight(), Event::Recovered, t(9));
        assert_eq!(tr.job.status, Status::Unconfirmed);
        assert!(!tr.job.in_flight());
        let why = tr.job.last_error.unwrap();
        assert!(
            why.contains("stopped while posting") && why.contains(&t(6).to_string()),
            "{why}"
        );
    }

    #[test]
    fn registration_rules() {
        let other = Target {
            session_id: "s-78".into(),
            ..target()
        };
        let replace = |was, same_target| Registration::Replace { was, same_target };
        for status in Status::ALL {
            let existing = job(status);
            let (same, different) = match status {
                Status::Done | Status::Unconfirmed => (
                    Registration::Refuse { was: status },
                    Registration::Refuse { was: status },
                ),
                Status::Pending | Status::Delivering => {
                    (Registration::AlreadyWatching, replace(status, false))
                }
                _ => (replace(status, true), replace(status, false)),
            };
            assert_eq!(register(Some(&existing), &target(), "http://h/api"), same);
            assert_eq!(register(Some(&existing), &other, "http://h/api"), different);
        }
        assert_eq!(register(None, &target(), "http://h/api"), Registration::New);
        let flying = in_flight();
        assert_eq!(
            register(Some(&flying), &other, "http://h/api"),
            Registration::Refuse {
                was: Status::Delivering
            }
        );
        assert_eq!(
            register(Some(&flying), &target(), "http://h/api"),
            Registration::AlreadyWatching
        );
        assert_eq!(
            register(Some(&pending()), &target(), "http://other:8088/api"),
            replace(Status::Pending, false),
            "another base URL is another target"
        );
    }

    #[test]
    fn one_delivery_per_chat_oldest_first() {
        let mut a = job(Status::Delivering);
        a.job_id = "a".into();
        a.registered_at = t(2);
        let mut b = a.clone();
        b.job_id = "b".into();
        b.registered_at = t(1);
        let mut c = a.clone();
        c.job_id = "c".into();
        c.target.session_id = "s-other".into();
        let mut waiting = c.clone();
        waiting.job_id = "w".into();
        waiting.target.session_id = "s-third".into();
        waiting.delivery.as_mut().unwrap().next_attempt_at = Some(t(100));
        let jobs = [a, b, c, waiting, pending(), in_flight()];
        let ids: Vec<&str> = deliveries(&jobs, t(10))
            .iter()
            .map(|j| j.job_id.as_str())
            .collect();
        assert_eq!(ids, ["b", "c"]);
        assert_eq!(to_poll(&jobs).len(), 1);
        assert_eq!(interrupted(&jobs), [5]);
    }

    #[test]
    fn pruning_keeps_live_and_recent_jobs() {
        let keep = LIMITS.keep;
        let week = keep.as_secs();
        for status in Status::ALL {
            assert!(!prunable(&job(status), t(week), keep), "{status}");
            let old = prunable(&job(status), t(week + 1), keep);
            assert_eq!(old, status.is_terminal(), "{status}");
        }
    }
}
