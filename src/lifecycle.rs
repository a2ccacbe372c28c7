//! What happens to a job, as pure functions of (job, observation, now, limits).
//!
//! No I/O, no clock, no randomness: the commands read the world, call these, and write the
//! result back. Every transition is covered by the table tests at the bottom.

use std::time::Duration;

use crate::job::{Delivery, Job, Status, Target};
use crate::time::{Timestamp, human};

/// The caps and back-off of a tick (seed defaults in `settings`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_strikes: u32,
    pub max_age: Duration,
    pub busy_retry: Duration,
    pub max_busy: u32,
    pub keep: Duration,
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
    /// Refuse: the result already went out, or may have.
    Refuse { was: Status },
}

/// A different base URL is a different target too: it names another QwenPaw instance (and
/// re-watching with a corrected URL is how a wrong one is fixed).
pub fn register(existing: Option<&Job>, target: &Target, base_url: &str) -> Registration {
    let Some(job) = existing else {
        return Registration::New;
    };
    let same_target = job.target() == *target && job.base_url == base_url;
    let in_flight = job
        .delivery
        .as_ref()
        .is_some_and(|d| d.attempt_started_at.is_some());
    match job.status {
        Status::Done | Status::Unconfirmed => Registration::Refuse { was: job.status },
        Status::Pending | Status::Delivering if same_target => Registration::AlreadyWatching,
        // A POST to the old chat is under way: retargeting now could deliver twice.
        Status::Delivering if in_flight => Registration::Refuse { was: job.status },
        was => Registration::Replace { was, same_target },
    }
}

/// What `cancel` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Cancellation {
    /// Cancelled; nothing had been sent.
    Cancelled,
    /// Cancelled while a POST was in flight: the result may already be on its way.
    CancelledInFlight,
    /// Was already cancelled.
    AlreadyCancelled,
    /// Refused: the job already ended with this status.
    Refused { was: Status },
}

pub fn cancel(job: &mut Job, now: Timestamp) -> Cancellation {
    let in_flight = job
        .delivery
        .as_ref()
        .is_some_and(|d| d.attempt_started_at.is_some());
    let outcome = match job.status {
        Status::Cancelled => return Cancellation::AlreadyCancelled,
        Status::Pending => Cancellation::Cancelled,
        Status::Delivering if in_flight => Cancellation::CancelledInFlight,
        Status::Delivering => Cancellation::Cancelled,
        was => return Cancellation::Refused { was },
    };
    let note = if outcome == Cancellation::CancelledInFlight {
        "cancelled while its result was being posted; it may already have arrived"
    } else {
        "cancelled; the child task keeps running"
    };
    job.status = Status::Cancelled;
    job.note = Some(note.to_owned());
    job.updated_at = now;
    outcome
}

/// What one poll of the task saw.
#[derive(Clone, Debug, PartialEq)]
pub enum Check {
    /// 200 with a non-terminal status.
    Running { started_at: Option<Timestamp> },
    /// 200 with a terminal status; `text` is the rendered result.
    Finished {
        text: String,
        started_at: Option<Timestamp>,
    },
    /// JSON 404: the server has no record of the task.
    Lost { detail: String },
    /// Anything else: a strike. `error` says what went wrong and what to suspect.
    Failed { error: String },
}

/// Applies one poll to a pending job. Returns true when the job is now ready to deliver.
pub fn apply_check(job: &mut Job, check: Check, now: Timestamp, limits: &Limits) -> bool {
    job.polls += 1;
    job.last_polled_at = Some(now);
    job.updated_at = now;
    match check {
        Check::Running { started_at } => {
            job.strikes = 0;
            job.last_error = None;
            job.started_at = started_at.or(job.started_at);
            job.note = None;
        }
        Check::Finished { text, started_at } => {
            job.strikes = 0;
            job.last_error = None;
            job.started_at = started_at.or(job.started_at);
            job.status = Status::Delivering;
            job.final_text = Some(text);
            job.delivery = Some(Delivery::default());
            job.note = Some("the task finished; its result is being delivered".to_owned());
            return true;
        }
        Check::Lost { detail } => {
            job.status = Status::Lost;
            job.note = Some(format!(
                "the server has no record of the task ({detail}): QwenPaw keeps task records in memory only, so it was restarted, or the task id or base URL {} is wrong",
                job.base_url
            ));
            return false;
        }
        Check::Failed { error } => {
            job.strikes += 1;
            job.last_error = Some(error.clone());
            if job.strikes >= limits.max_strikes {
                job.status = Status::Abandoned;
                job.note = Some(format!(
                    "abandoned after {} consecutive failed checks; last: {error}",
                    job.strikes
                ));
                return false;
            }
            job.note = Some(format!("check failed ({} in a row)", job.strikes));
        }
    }
    let age = job.registered_at.elapsed_at(now);
    if age > limits.max_age {
        job.status = Status::Expired;
        job.note = Some(format!(
            "still not finished {} after registration (cap {})",
            human(age),
            human(limits.max_age)
        ));
    }
    false
}

/// True when a delivering job may be posted now: no POST in flight and any back-off over.
pub fn is_due(job: &Job, now: Timestamp) -> bool {
    job.status == Status::Delivering
        && job.final_text.is_some()
        && job.delivery.as_ref().is_none_or(|d| {
            d.attempt_started_at.is_none() && d.next_attempt_at.is_none_or(|at| at <= now)
        })
}

/// The write-ahead record, saved before the POST goes out.
pub fn begin_attempt(job: &mut Job, now: Timestamp) {
    let delivery = job.delivery.get_or_insert_with(Delivery::default);
    delivery.attempts += 1;
    delivery.attempt_started_at = Some(now);
    job.updated_at = now;
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

/// Records a POST's outcome. Guarded: a job cancelled while the POST was in flight stays
/// cancelled (the outcome goes into its note); every recorded outcome clears the
/// write-ahead mark.
pub fn apply_posted(job: &mut Job, posted: Posted, now: Timestamp, limits: &Limits) {
    job.updated_at = now;
    let delivery = job.delivery.get_or_insert_with(Delivery::default);
    delivery.attempt_started_at = None;
    if job.status != Status::Delivering {
        if job.status == Status::Cancelled {
            let what = match &posted {
                Posted::Accepted { .. } => "the result was delivered anyway",
                Posted::Unknown { .. } => "whether the result arrived is unknown",
                _ => "the result was not delivered",
            };
            job.note = Some(format!(
                "cancelled while its result was being posted; {what}"
            ));
        }
        return;
    }
    match posted {
        Posted::Accepted { turn_task_id } => {
            delivery.last_http_status = Some(200);
            delivery.next_attempt_at = None;
            job.status = Status::Done;
            job.delivered_at = Some(now);
            job.turn_task_id = turn_task_id;
            job.last_error = None;
            job.note = None;
        }
        Posted::Busy { detail } => {
            delivery.busy += 1;
            delivery.last_http_status = Some(409);
            defer(
                job,
                now,
                limits,
                format!("parent chat busy (409: {detail})"),
            );
        }
        Posted::NotSent { error } => {
            delivery.unreachable += 1;
            delivery.last_http_status = None;
            defer(
                job,
                now,
                limits,
                format!("could not reach the server: {error}"),
            );
        }
        Posted::Unknown { error, http_status } => {
            delivery.last_http_status = http_status;
            job.status = Status::Unconfirmed;
            job.last_error = Some(error.clone());
            job.note = Some(format!(
                "delivery outcome unknown ({error}); not re-posted, to avoid a duplicate turn; the text is kept in `final`"
            ));
        }
        Posted::Rejected {
            http_status,
            detail,
        } => {
            delivery.last_http_status = Some(http_status);
            job.status = Status::Error;
            job.last_error = Some(format!("{http_status}: {detail}"));
            job.note = Some(format!(
                "the server refused the delivery ({http_status}: {detail})"
            ));
        }
    }
}

/// Busy or unreachable: try again after the back-off, at most `max_busy` times in all.
fn defer(job: &mut Job, now: Timestamp, limits: &Limits, why: String) {
    let delivery = job.delivery.get_or_insert_with(Delivery::default);
    let deferrals = delivery.busy + delivery.unreachable;
    if deferrals >= limits.max_busy {
        delivery.next_attempt_at = None;
        job.status = Status::Undelivered;
        job.last_error = Some(why.clone());
        job.note = Some(format!(
            "not delivered after {deferrals} tries ({why}); the text is kept in `final`"
        ));
    } else {
        delivery.next_attempt_at = Some(now.saturating_add(limits.busy_retry));
        job.last_error = Some(why.clone());
        job.note = Some(format!(
            "{why}; retrying ({deferrals} of {})",
            limits.max_busy
        ));
    }
}

/// A job left `delivering` with a POST in flight by a tick that died: the outcome is
/// unknown. Never post blind. Returns true if the job changed.
pub fn recover(job: &mut Job, now: Timestamp) -> bool {
    let Some(started) = job
        .delivery
        .as_ref()
        .and_then(|d| d.attempt_started_at)
        .filter(|_| job.status == Status::Delivering)
    else {
        return false;
    };
    job.status = Status::Unconfirmed;
    if let Some(d) = job.delivery.as_mut() {
        d.attempt_started_at = None;
    }
    job.updated_at = now;
    job.note = Some(format!(
        "an atc tick stopped while posting the result (attempt started {started}); it may or may not have arrived; not re-posted; the text is kept in `final`"
    ));
    true
}

/// Terminal jobs are kept for `keep` after their last update, then pruned.
pub fn is_expired_record(job: &Job, now: Timestamp, keep: Duration) -> bool {
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

    fn job(status: Status) -> Job {
        let mut job = Job::new(
            "a1b2c3d4e5f6".into(),
            "task-1".into(),
            "http://h/api".into(),
            target(),
            t(0),
        );
        job.status = status;
        job
    }

    fn delivering() -> Job {
        let mut j = job(Status::Pending);
        assert!(apply_check(
            &mut j,
            Check::Finished {
                text: "T".into(),
                started_at: None
            },
            t(5),
            &LIMITS
        ));
        j
    }

    #[test]
    fn registration_rules() {
        let other = Target {
            session_id: "s-78".into(),
            ..target()
        };
        let cases = [
            (None, target(), Registration::New),
            (
                Some(Status::Pending),
                target(),
                Registration::AlreadyWatching,
            ),
            (
                Some(Status::Delivering),
                target(),
                Registration::AlreadyWatching,
            ),
            (
                Some(Status::Pending),
                other.clone(),
                Registration::Replace {
                    was: Status::Pending,
                    same_target: false,
                },
            ),
            (
                Some(Status::Delivering),
                other.clone(),
                Registration::Replace {
                    was: Status::Delivering,
                    same_target: false,
                },
            ),
            (
                Some(Status::Done),
                target(),
                Registration::Refuse { was: Status::Done },
            ),
            (
                Some(Status::Done),
                other.clone(),
                Registration::Refuse { was: Status::Done },
            ),
            (
                Some(Status::Unconfirmed),
                target(),
                Registration::Refuse {
                    was: Status::Unconfirmed,
                },
            ),
            (
                Some(Status::Lost),
                target(),
                Registration::Replace {
                    was: Status::Lost,
                    same_target: true,
                },
            ),
            (
                Some(Status::Cancelled),
                other.clone(),
                Registration::Replace {
                    was: Status::Cancelled,
                    same_target: false,
                },
            ),
            (
                Some(Status::Abandoned),
                target(),
                Registration::Replace {
                    was: Status::Abandoned,
                    same_target: true,
                },
            ),
            (
                Some(Status::Expired),
                target(),
                Registration::Replace {
                    was: Status::Expired,
                    same_target: true,
                },
            ),
            (
                Some(Status::Undelivered),
                target(),
                Registration::Replace {
                    was: Status::Undelivered,
                    same_target: true,
                },
            ),
            (
                Some(Status::Error),
                target(),
                Registration::Replace {
                    was: Status::Error,
                    same_target: true,
                },
            ),
        ];
        for (status, new_target, want) in cases {
            let existing = status.map(job);
            assert_eq!(
                register(existing.as_ref(), &new_target, "http://h/api"),
                want,
                "{status:?}"
            );
        }
        let mut in_flight = delivering();
        begin_attempt(&mut in_flight, t(6));
        assert_eq!(
            register(Some(&in_flight), &other, "http://h/api"),
            Registration::Refuse {
                was: Status::Delivering
            }
        );
        assert_eq!(
            register(Some(&in_flight), &target(), "http://h/api"),
            Registration::AlreadyWatching
        );
    }

    #[test]
    fn another_base_url_is_another_target() {
        let pending = job(Status::Pending);
        assert_eq!(
            register(Some(&pending), &target(), "http://other:8088/api"),
            Registration::Replace {
                was: Status::Pending,
                same_target: false
            }
        );
    }

    #[test]
    fn cancel_rules() {
        let mut j = job(Status::Pending);
        assert_eq!(cancel(&mut j, t(1)), Cancellation::Cancelled);
        assert_eq!(j.status, Status::Cancelled);
        assert_eq!(cancel(&mut j, t(2)), Cancellation::AlreadyCancelled);
        assert_eq!(j.updated_at, t(1));

        let mut j = delivering();
        begin_attempt(&mut j, t(6));
        assert_eq!(cancel(&mut j, t(7)), Cancellation::CancelledInFlight);
        assert_eq!(j.status, Status::Cancelled);

        for status in [Status::Done, Status::Lost, Status::Unconfirmed] {
            let mut j = job(status);
            assert_eq!(cancel(&mut j, t(1)), Cancellation::Refused { was: status });
            assert_eq!(j.status, status);
        }
    }

    #[test]
    fn checks_move_pending_jobs() {
        let mut j = job(Status::Pending);
        j.strikes = 2;
        assert!(!apply_check(
            &mut j,
            Check::Running {
                started_at: Some(t(1))
            },
            t(10),
            &LIMITS
        ));
        assert_eq!(
            (j.status, j.strikes, j.polls, j.started_at),
            (Status::Pending, 0, 1, Some(t(1)))
        );
        assert_eq!(j.last_polled_at, Some(t(10)));

        let mut j = job(Status::Pending);
        assert!(!apply_check(
            &mut j,
            Check::Lost {
                detail: "Task not found: task-1".into()
            },
            t(10),
            &LIMITS
        ));
        assert_eq!(j.status, Status::Lost);
        assert!(j.note.as_deref().unwrap().contains("restarted"));

        let mut j = job(Status::Pending);
        for n in 1..LIMITS.max_strikes {
            apply_check(
                &mut j,
                Check::Failed {
                    error: "500".into(),
                },
                t(n as u64),
                &LIMITS,
            );
            assert_eq!((j.status, j.strikes), (Status::Pending, n));
        }
        apply_check(
            &mut j,
            Check::Failed {
                error: "boom".into(),
            },
            t(9),
            &LIMITS,
        );
        assert_eq!(j.status, Status::Abandoned);
        assert_eq!(j.last_error.as_deref(), Some("boom"));

        let mut j = job(Status::Pending);
        apply_check(
            &mut j,
            Check::Running { started_at: None },
            t(3600),
            &LIMITS,
        );
        assert_eq!(
            j.status,
            Status::Pending,
            "exactly at the cap is not over it"
        );
        apply_check(
            &mut j,
            Check::Running { started_at: None },
            t(3601),
            &LIMITS,
        );
        assert_eq!(j.status, Status::Expired);

        let j = delivering();
        assert_eq!(j.status, Status::Delivering);
        assert_eq!(j.final_text.as_deref(), Some("T"));
        assert!(is_due(&j, t(5)));
    }

    #[test]
    fn a_finished_task_is_delivered_even_past_the_age_cap() {
        let mut j = job(Status::Pending);
        assert!(apply_check(
            &mut j,
            Check::Finished {
                text: "T".into(),
                started_at: None
            },
            t(99_999),
            &LIMITS
        ));
        assert_eq!(j.status, Status::Delivering);
    }

    #[test]
    fn delivery_outcomes() {
        let mut j = delivering();
        begin_attempt(&mut j, t(6));
        assert!(!is_due(&j, t(6)), "in flight");
        apply_posted(
            &mut j,
            Posted::Accepted {
                turn_task_id: Some("task-p".into()),
            },
            t(7),
            &LIMITS,
        );
        assert_eq!(
            (j.status, j.delivered_at, j.turn_task_id.as_deref()),
            (Status::Done, Some(t(7)), Some("task-p"))
        );
        assert_eq!(j.delivery.as_ref().unwrap().attempt_started_at, None);

        let mut j = delivering();
        begin_attempt(&mut j, t(6));
        apply_posted(
            &mut j,
            Posted::Busy {
                detail: "busy".into(),
            },
            t(7),
            &LIMITS,
        );
        let d = j.delivery.clone().unwrap();
        assert_eq!(
            (j.status, d.busy, d.last_http_status, d.next_attempt_at),
            (Status::Delivering, 1, Some(409), Some(t(27)))
        );
        assert!(!is_due(&j, t(26)));
        assert!(is_due(&j, t(27)));
        let mut accepted = j.clone();
        begin_attempt(&mut accepted, t(27));
        apply_posted(
            &mut accepted,
            Posted::Accepted { turn_task_id: None },
            t(28),
            &LIMITS,
        );
        assert_eq!(
            (accepted.status, accepted.last_error, accepted.note),
            (Status::Done, None, None),
            "a delivery clears the busy error"
        );
        begin_attempt(&mut j, t(27));
        // Nothing sent counts against the same cap: the second deferral of max_busy = 2.
        apply_posted(
            &mut j,
            Posted::NotSent {
                error: "refused".into(),
            },
            t(28),
            &LIMITS,
        );
        assert_eq!(j.status, Status::Undelivered);
        assert_eq!(j.final_text.as_deref(), Some("T"));
        let d = j.delivery.clone().unwrap();
        assert_eq!(
            (d.attempts, d.busy, d.unreachable, d.next_attempt_at),
            (2, 1, 1, None)
        );

        let mut j = delivering();
        begin_attempt(&mut j, t(6));
        apply_posted(
            &mut j,
            Posted::Unknown {
                error: "timed out".into(),
                http_status: None,
            },
            t(7),
            &LIMITS,
        );
        assert_eq!(j.status, Status::Unconfirmed);
        assert_eq!(j.final_text.as_deref(), Some("T"));

        let mut j = delivering();
        begin_attempt(&mut j, t(6));
        apply_posted(
            &mut j,
            Posted::Rejected {
                http_status: 404,
                detail: "Agent 'x' not found".into(),
            },
            t(7),
            &LIMITS,
        );
        assert_eq!(j.status, Status::Error);
        assert!(
            j.last_error
                .as_deref()
                .unwrap()
                .contains("Agent 'x' not found")
        );
    }

    #[test]
    fn a_cancel_during_the_post_is_not_clobbered() {
        for posted in [
            Posted::Accepted { turn_task_id: None },
            Posted::Busy { detail: "b".into() },
            Posted::Unknown {
                error: "e".into(),
                http_status: Some(502),
            },
        ] {
            let mut j = delivering();
            begin_attempt(&mut j, t(6));
            cancel(&mut j, t(7));
            apply_posted(&mut j, posted, t(8), &LIMITS);
            assert_eq!(j.status, Status::Cancelled);
            assert_eq!(j.delivered_at, None);
            assert_eq!(j.delivery.as_ref().unwrap().attempt_started_at, None);
        }
    }

    #[test]
    fn recovery_turns_an_interrupted_post_into_unconfirmed() {
        let mut j = delivering();
        assert!(!recover(&mut j, t(9)), "nothing in flight");
        begin_attempt(&mut j, t(6));
        assert!(recover(&mut j, t(9)));
        assert_eq!(j.status, Status::Unconfirmed);
        assert!(!is_due(&j, t(9)));
        let mut done = job(Status::Done);
        assert!(!recover(&mut done, t(9)));
    }

    #[test]
    fn pruning_keeps_live_and_recent_jobs() {
        let keep = LIMITS.keep;
        let week = keep.as_secs();
        assert!(!is_expired_record(&job(Status::Pending), t(week * 3), keep));
        assert!(!is_expired_record(
            &job(Status::Delivering),
            t(week * 3),
            keep
        ));
        assert!(!is_expired_record(&job(Status::Done), t(week), keep));
        assert!(is_expired_record(&job(Status::Done), t(week + 1), keep));
        assert!(is_expired_record(&job(Status::Lost), t(week + 1), keep));
    }
}
