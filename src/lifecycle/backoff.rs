//! When a watch is polled (issue 38). A child whose turn's end atc's QwenPaw plugin kicks
//! (its server's plugin is ticking, and the watch knows the child's session) is polled when
//! that turn ends, by the kick; a tick polls it otherwise only on a **back-off**: 20 s after
//! the last sign of life, then 40 s, 80 s… up to `--poll-ceiling`. A missed kick costs at
//! most the ceiling. Check-ins, `--stop-after` and `--max-age` keep their own times: a
//! watch whose one comes due is polled then. Every other watch (another server, no plugin
//! kicking, unknown child session, a watch whose checks fail) is polled by every tick, as
//! before. Pure: the tick says which servers' plugins tick and when the last scheduled
//! pass that polled every watch due finished (`Heartbeat::last_swept_at`).

use std::time::Duration;

use crate::job::{Job, Watch};
use crate::time::Timestamp;

use super::Limits;

/// The first wait of a back-off: the tick cadence the plugin and the timer keep.
pub const FIRST: Duration = Duration::from_secs(20);

/// How a watch is polled, for the tick and for `atc status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Polling {
    /// By every tick.
    EveryTick(Why),
    /// On its back-off: next at `next` (its own time, or the back-off's).
    BackOff { next: Timestamp, own: bool },
}

/// Why a watch is polled by every tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// Its child's session is not known: no kick can name it.
    NoChildSession,
    /// No plugin of its server ticks this job file (no kick or cadence tick from it lately).
    NoPlugin,
    /// Its last checks failed: it is polled until one succeeds (`--max-strikes` counts
    /// ticks).
    Failing,
    /// Not seen running yet.
    NotStarted,
}

impl Why {
    pub fn says(self) -> &'static str {
        match self {
            Why::NoChildSession => "its child's session is not known, so no kick names it",
            Why::NoPlugin => "no atc plugin on its server kicks this job file",
            Why::Failing => "its last check failed",
            Why::NotStarted => "it has not been seen running yet",
        }
    }
}

/// The back-off's anchor: the last sign of life the job records (the child seen
/// starting, its last check-in). A kick that finds the child still running is no sign:
/// its record says `finished` a few ms after the hook, or the plugin kicked as it watched
/// a child that had just started.
fn anchor(job: &Job) -> Option<Timestamp> {
    job.started_at.max(job.last_check_in_at)
}

/// The first back-off time after `after`: anchor + 20 s, + 60 s, + 140 s… (waits doubling
/// up to the ceiling, then the ceiling).
pub fn next_after(anchor: Timestamp, after: Timestamp, ceiling: Duration) -> Timestamp {
    let ceiling = ceiling.max(FIRST);
    let mut wait = FIRST;
    let mut at = anchor.saturating_add(wait);
    while at <= after {
        wait = (wait * 2).min(ceiling);
        at = at.saturating_add(wait);
    }
    at
}

/// The watch's own next time, if it has one: a check-in, its stop, its expiry.
fn own_time(job: &Job, now: Timestamp, limits: &Limits) -> Option<Timestamp> {
    let check_in = super::next_check_in(job, now);
    let stop = super::stop_at(job);
    let expiry = job
        .registered_at
        .saturating_add(limits.max_age)
        .saturating_add(Duration::from_secs(1));
    [check_in, stop, Some(expiry)].into_iter().flatten().min()
}

/// How `job` is polled: `kicking` says whether a plugin of its server ticks this job file;
/// `since` is when the last scheduled pass that polled every watch due (no kick) started,
/// of those that finished; `None` if none did (every watch is polled).
pub fn polling(
    job: &Job,
    kicking: bool,
    since: Option<Timestamp>,
    now: Timestamp,
    limits: &Limits,
) -> Polling {
    let why = if job.child_session.is_none() {
        Some(Why::NoChildSession)
    } else if !kicking {
        Some(Why::NoPlugin)
    } else if job.strikes > 0 {
        Some(Why::Failing)
    } else if job.started_at.is_none() {
        Some(Why::NotStarted)
    } else {
        None
    };
    let (Some(anchor), None) = (anchor(job), why) else {
        return Polling::EveryTick(why.unwrap_or(Why::NotStarted));
    };
    let after = since.unwrap_or(anchor).max(anchor);
    let backed = next_after(anchor, after, limits.poll_ceiling);
    match own_time(job, now, limits) {
        Some(own) if own <= backed => Polling::BackOff {
            next: own,
            own: true,
        },
        _ => Polling::BackOff {
            next: backed,
            own: false,
        },
    }
}

/// Whether a scheduled tick at `now` polls `job` (a pending watch): every tick unless it is
/// on its back-off; then when its next time (the back-off's or its own) has come since the
/// last scheduled pass that polled every watch due and finished.
pub fn due(
    job: &Job,
    kicking: bool,
    since: Option<Timestamp>,
    now: Timestamp,
    limits: &Limits,
) -> bool {
    if job.watch != Watch::Pending {
        return false;
    }
    match polling(job, kicking, since, now, limits) {
        Polling::EveryTick(_) => true,
        Polling::BackOff { next, .. } => since.is_none() || next <= now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: u64) -> Timestamp {
        Timestamp::from_unix(1_800_000_000 + secs)
    }

    const LIMITS: Limits = Limits {
        max_strikes: 3,
        max_age: Duration::from_secs(86_400),
        busy_retry: Duration::from_secs(20),
        busy_deadline: Duration::from_secs(600),
        settle: Duration::from_secs(30),
        keep: Duration::from_secs(86_400),
        follow_up_depth: 5,
        poll_ceiling: Duration::from_secs(300),
    };

    fn running() -> Job {
        let mut job = Job::sample(Watch::Pending);
        job.registered_at = t(0);
        job.started_at = Some(t(0));
        job.child_session = Some("s-child".into());
        job
    }

    /// The polls a 20 s cadence makes of `job` over `secs` (a tick at 20, 40, …).
    fn polls(job: &Job, kicking: bool, secs: u64) -> Vec<u64> {
        let mut since = Some(t(0));
        let mut at = Vec::new();
        for now in (20..=secs).step_by(20) {
            if due(job, kicking, since, t(now), &LIMITS) {
                at.push(now);
            }
            since = Some(t(now));
        }
        at
    }

    #[test]
    fn a_kicked_child_is_polled_at_20_40_80_s_then_every_ceiling() {
        let job = running();
        assert_eq!(
            polls(&job, true, 1800),
            [20, 60, 140, 300, 600, 900, 1200, 1500, 1800]
        );
        // 30 minutes: 9 polls instead of 90.
        assert_eq!(polls(&job, false, 1800).len(), 90);
        assert_eq!(next_after(t(0), t(0), Duration::from_secs(300)), t(20));
        assert_eq!(next_after(t(0), t(140), Duration::from_secs(300)), t(300));
        assert_eq!(
            next_after(t(0), t(10_000), Duration::from_secs(300)),
            t(10_200)
        );
    }

    #[test]
    fn its_own_times_come_first_and_a_sign_of_life_starts_the_back_off_again() {
        let mut job = running();
        job.options.check_in_secs = Some(100);
        assert_eq!(
            polling(&job, true, Some(t(60)), t(60), &LIMITS),
            Polling::BackOff {
                next: t(100),
                own: true
            }
        );
        job.options.check_in_secs = None;
        job.options.stop_after_secs = Some(90);
        assert!(polls(&job, true, 200).contains(&100), "the stop at 90 s");
        job.options.stop_after_secs = None;
        // A check-in at 1,000 s: 20 s, 40 s, 80 s from there.
        job.last_check_in_at = Some(t(1000));
        assert_eq!(polls(&job, true, 1200), [1020, 1060, 1140]);
    }

    #[test]
    fn without_a_session_a_plugin_or_good_checks_every_tick_polls() {
        let mut job = running();
        assert_eq!(
            polling(&job, false, None, t(5), &LIMITS),
            Polling::EveryTick(Why::NoPlugin)
        );
        job.strikes = 1;
        assert_eq!(
            polling(&job, true, None, t(5), &LIMITS),
            Polling::EveryTick(Why::Failing)
        );
        job.strikes = 0;
        job.started_at = None;
        assert_eq!(
            polling(&job, true, None, t(5), &LIMITS),
            Polling::EveryTick(Why::NotStarted)
        );
        job.child_session = None;
        assert_eq!(polls(&job, true, 200).len(), 10);
        // No scheduled tick before: this one polls.
        assert!(due(&running(), true, None, t(5), &LIMITS));
    }
}
