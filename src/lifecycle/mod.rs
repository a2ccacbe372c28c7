//! The state machine of a job: [`step`]`(&Job, Option<&Turn>, Event, now, &Limits) ->
//! Transition`.
//!
//! Pure: no I/O, no clock, no randomness. The shell (`pass`, the commands) reads the world,
//! turns what it saw into an [`Event`], calls [`step`] and saves the new job. Guards live
//! here, not in callers: an event that does not apply to the job as it is now changes
//! nothing and yields [`Outcome::Ignored`]. `step` is the only place where a watch stands
//! changes; the table test (`tests.rs`) has a row for every (standing × event) pair,
//! and does not compile when one is missing.
//!
//! A job is a watch: pending while its child runs (polled each tick, with a check-in now
//! and then, a stop when `--stop-after` passes), then it *owes* its parent one block: its
//! rendered result, or the notice of a watch that ended without one (lost, expired,
//! abandoned). A block goes out in a turn (`turn`), composed by `compose`; the job points
//! at that turn (`Job::turn`), and where the block stands is that turn's record, never
//! copied onto the job: `step` is given the turn and reads it (`status`).
//!
//! Also here, because they are decisions about jobs: which jobs a tick polls and stops
//! ([`to_poll`], [`to_stop`]), which ended jobs are pruned ([`prunable`]); in `register`,
//! what `watch` does with the records the file already holds; in `cancel`, `redeliver`
//! and `read`, what those commands (and `parent-read`) do to the file; in `compose`, which
//! turn carries which block; in `stop`, what a stop of the child found; in `tree`,
//! `backoff` and `kick`, delegation trees, when a watch is polled, and what a turn's end
//! concerns.

pub mod backoff;
pub mod cancel;
pub mod compose;
pub mod kick;
pub mod read;
pub mod redeliver;
mod register;
pub mod stop;
pub mod tree;

use std::time::Duration;

use crate::job::{Job, OnEmpty, OnNoAnswer, Status, TaskOutcome, Watch};
pub use crate::limits::Limits;
use crate::outcome::Outcome;
use crate::time::Timestamp;
use crate::turn::{Turn, TurnState};

pub use register::{
    LeftAlone, Registered, Registration, WatchRefused, WatchRequest, group_turns, holds_result,
    register, watch,
};

/// What one poll of the task saw, with a finished result already rendered.
#[derive(Clone, Debug, PartialEq)]
pub enum Check {
    /// 200 with a non-terminal status. `turn_ended`: polled right after a QwenPaw turn
    /// ended that may be this child's (a kick). The record says `finished` a few ms after
    /// the hook runs, so `running` may be stale: nothing is decided on time then (no
    /// check-in, no stop, no expiry); the next poll does that.
    Running {
        started_at: Option<Timestamp>,
        turn_ended: bool,
    },
    /// 200 with a terminal status; `text` is what its block carries.
    Finished {
        text: String,
        started_at: Option<Timestamp>,
        outcome: TaskOutcome,
        /// The child's final answer is empty.
        empty: bool,
        /// The child's own session, when the record names it (`result.session_id`).
        child_session: Option<String>,
    },
    /// QwenPaw's 404 for the task: the server has no record of it.
    Lost { detail: String },
    /// Anything else: a strike. `error` says what went wrong and what to suspect.
    Failed { error: String },
}

/// Something that happened to a job.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A tick polled the task.
    Polled(Check),
    /// A person ran `atc cancel`. A block in a claimed turn (on its way, or maybe in the
    /// chat already) is not taken out of it.
    Cancelled,
    /// A person ran `atc cancel --check-ins`: no more check-ins for this watch (one in a
    /// claimed turn finishes; it may be in the chat).
    CheckInsOff,
    /// The stop `--stop-after` asked for was answered: where the child's chat was found
    /// (its agent, when the watch did not name it, and its uuid), and what the stop did.
    StopAnswered {
        agent: Option<String>,
        chat_id: Option<String>,
        answer: StopAnswer,
    },
    /// `compose` put the block it owes into turn `turn`.
    Joined { turn: String },
    /// `compose` took its block out of the open turn it was in.
    Left,
    /// The turn that carries its current check-in moved on: if it settled (landed, or
    /// given up), that check-in is done and the next one is scheduled. (The check-in's own
    /// standing stays the turn's; this records the watch's schedule.)
    CheckInSettled,
    /// `atc redeliver` of a job whose block goes out in a new turn: a given-up result or
    /// notice, or a result the parent read itself, is on its way again; `create_session`
    /// allows a new chat from now on.
    Requeued { create_session: bool },
    /// The parent read the task's finished result itself (its `check_agent_task` answered
    /// it: `atc parent-read`). A result in a claimed turn (on its way, or maybe in the chat
    /// already) goes out as it is.
    ReadByParent,
}

/// What a stop of the child did (`cancel --stop`, `--stop-after`), as the shell found out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopAnswer {
    /// QwenPaw stopped the turn running in the child's chat.
    Stopped,
    /// Nothing to stop: QwenPaw found nothing running in the child's chat, and the task
    /// record (it finished) or the chat itself (idle) says so too.
    NotRunning,
    /// The stop could not be made, or what came back does not say the child is not
    /// running (the task record still says it runs): why.
    Failed(String),
    /// The stop ended a turn, but this task still runs: the session the watch named was
    /// another task's child (issue 36 H1). Why.
    OtherChild(String),
}

/// How many stops of one child atc makes before it gives up stopping it: `cancel --stop`
/// tries this often in a row, `--stop-after` once a tick. A stop that keeps failing ends
/// in one line that says why, never in a stop sent on every tick.
pub const STOP_TRIES: u32 = 3;

/// Whether a stop that failed `tries` times in a row may be tried again.
pub fn stop_again(tries: u32) -> bool {
    tries < STOP_TRIES
}

/// The job after an event, and what happened (for reports and messages).
#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    pub job: Job,
    pub outcomes: Vec<Outcome>,
}

impl Transition {
    fn ignored(job: &Job) -> Transition {
        Transition {
            job: job.clone(),
            outcomes: vec![Outcome::Ignored],
        }
    }

    fn to(job: Job, outcomes: Vec<Outcome>) -> Transition {
        Transition { job, outcomes }
    }

    /// The event did not apply; the job is unchanged.
    pub fn is_ignored(&self) -> bool {
        self.outcomes == [Outcome::Ignored]
    }
}

/// Applies one event to one job; `turn` is the turn the job points at (`Job::turn`), if
/// the file has it: where the block the job owes stands is read there.
pub fn step(
    job: &Job,
    turn: Option<&Turn>,
    event: Event,
    now: Timestamp,
    limits: &Limits,
) -> Transition {
    let turn = turn.filter(|t| job.turn.as_deref() == Some(t.turn_id.as_str()));
    let mut transition = match event {
        Event::Polled(check) => polled(job, turn, check, now, limits),
        Event::Cancelled => cancelled(job, turn, now),
        Event::CheckInsOff => check_ins_off(job, turn, now),
        Event::StopAnswered {
            agent,
            chat_id,
            answer,
        } => stop_answered(job, agent, chat_id, answer, now),
        Event::Joined { turn: into } => joined(job, turn, into, now),
        Event::Left => left(job, turn, now),
        Event::CheckInSettled => match check_in_settled(job, turn) {
            Some(done) if job.watch == Watch::Pending => {
                let mut next = job.clone();
                next.check_in = false;
                next.check_ins += 1;
                next.turn = None;
                next.updated_at = now;
                Transition::to(next, vec![done])
            }
            _ => Transition::ignored(job),
        },
        Event::Requeued { create_session } => requeued(job, turn, create_session, now),
        Event::ReadByParent => read_by_parent(job, turn, now),
    };
    // A check-in belongs to a pending job only: once the watch moves on, its result or
    // notice is what it owes. A check-in's turn not claimed yet goes on without it (its
    // block no longer belongs there); one claimed finishes by itself, and the job no longer
    // follows it.
    let next = &mut transition.job;
    if next.watch != Watch::Pending && job.watch == Watch::Pending && job.check_in {
        next.check_in = false;
        if next.watch != Watch::Cancelled {
            next.turn = None;
        }
    }
    // A note records only what no field can (an import's origin, how a cancel met a POST
    // in an earlier atc); once the job moves on, the fields and its turn say the rest.
    if !transition.is_ignored() && transition.job.watch != Watch::Cancelled {
        transition.job.note = None;
    }
    transition
}

/// Only a pending job takes a poll: one cancelled or re-registered while the poll was out
/// is left alone. A check-in whose turn settled since is done first.
fn polled(
    job: &Job,
    turn: Option<&Turn>,
    check: Check,
    now: Timestamp,
    limits: &Limits,
) -> Transition {
    if job.watch != Watch::Pending {
        return Transition::ignored(job);
    }
    let mut next = job.clone();
    next.updated_at = now;
    let mut outcomes = vec![Outcome::Polled];
    if let Some(done) = check_in_settled(job, turn) {
        next.check_in = false;
        next.check_ins += 1;
        next.turn = None;
        outcomes.push(done);
    }
    match check {
        // Still running: only what changed is recorded (the first sight of it, the end of
        // a run of strikes), so a tick over running tasks rewrites nothing.
        Check::Running {
            started_at,
            turn_ended,
        } => {
            next.strikes = 0;
            next.last_error = None;
            next.started_at = next.started_at.or(started_at).or(Some(now));
            if next.strikes == job.strikes
                && next.last_error == job.last_error
                && next.started_at == job.started_at
                && next.check_ins == job.check_ins
            {
                next.updated_at = job.updated_at;
            }
            outcomes.push(Outcome::Running);
            // A stop answered "stopped" a settle ago, and this task still runs: the stop
            // ended another child (the session a watch named was another task's, issue 36
            // H1). It did not stop this one; atc stops no more by that session, and the
            // tick says why.
            if let Some(at) = next.stopped_at
                && at.elapsed_at(now) >= limits.settle
            {
                let session = next.child_session.clone().unwrap_or_default();
                forget_child(&mut next);
                next.stopped_at = None;
                next.stop_tries += 1;
                next.stop_error = Some(format!(
                    "a stop sent to the child session {session} was answered 'stopped', but this task kept running: that session is another task's; atc stops nothing more for this watch until QwenPaw names its own"
                ));
                next.updated_at = now;
                outcomes.push(Outcome::StopGaveUp);
            }
            if turn_ended {
                return Transition::to(next, outcomes);
            }
            if stop_due(&next, now) {
                next.stop_asked_at = Some(now);
                next.updated_at = now;
                outcomes.push(Outcome::StopDue);
            }
            if check_in_due(&next, now) {
                next.check_in = true;
                next.last_check_in_at = Some(now);
                next.turn = None;
                next.updated_at = now;
                outcomes.push(Outcome::CheckInDue);
            }
        }
        // A finished result is delivered even past the age cap: it is here now.
        Check::Finished {
            text,
            started_at,
            outcome,
            empty,
            child_session,
        } => {
            // The record's own session is the child's, whatever a watch named.
            next.child_session = child_session.or(next.child_session);
            // A stop answered "stopped" stopped this task only if its record says so: one
            // sent to another child's session (issue 36 H1) did not.
            if outcome != TaskOutcome::Cancelled {
                next.stopped_at = None;
            }
            next.strikes = 0;
            next.last_error = None;
            next.started_at = started_at.or(next.started_at);
            next.outcome = Some(outcome);
            next.final_text = Some(text);
            next.stop_asked_at = None;
            next.finished_at = Some(now);
            outcomes.push(Outcome::Finished);
            if empty && outcome == TaskOutcome::Completed && next.options.on_empty == OnEmpty::Skip
            {
                next.watch = Watch::Skipped;
                outcomes.push(Outcome::Skipped);
            } else {
                next.watch = Watch::Finished;
            }
            return Transition::to(next, outcomes);
        }
        Check::Lost { detail } => {
            next.watch = Watch::Lost;
            next.last_error = Some(detail);
            outcomes.push(Outcome::Lost);
            return Transition::to(end_without_answer(next, &mut outcomes), outcomes);
        }
        Check::Failed { error } => {
            next.strikes += 1;
            next.last_error = Some(error);
            outcomes.push(Outcome::FailedCheck);
            if next.strikes >= limits.max_strikes {
                next.watch = Watch::Abandoned;
                outcomes.push(Outcome::Abandoned);
                return Transition::to(end_without_answer(next, &mut outcomes), outcomes);
            }
        }
    }
    if next.registered_at.elapsed_at(now) > limits.max_age {
        // A running poll above kept the old `updated_at` (nothing had changed): the watch
        // ends now, and its notice and `--keep` count from now.
        next.updated_at = now;
        next.watch = Watch::Expired;
        outcomes.push(Outcome::Expired);
        return Transition::to(end_without_answer(next, &mut outcomes), outcomes);
    }
    Transition::to(next, outcomes)
}

/// At most this many check-ins per watch (`--check-in`): a child that runs for an hour
/// does not fill its parent's chat.
pub const MAX_CHECK_INS: u32 = 5;

/// Whether a poll that finds the child still running queues a check-in: `--check-in`
/// has passed since it started (or since the last check-in), fewer than
/// [`MAX_CHECK_INS`] went out, none is on its way, and the job is no group member (a
/// group's members report together, in its one turn).
fn check_in_due(job: &Job, now: Timestamp) -> bool {
    let Some(secs) = job.options.check_in_secs else {
        return false;
    };
    let since = job.last_check_in_at.or(job.started_at);
    !job.check_in
        && job.check_ins < MAX_CHECK_INS
        && job.options.group.is_none()
        && job.stopped_at.is_none()
        && since.is_some_and(|at| at.elapsed_at(now) >= Duration::from_secs(secs))
}

/// When the next check-in is due, if one is still to come: `None` without `--check-in`,
/// after the last one, or while one is on its way.
pub fn next_check_in(job: &Job, now: Timestamp) -> Option<Timestamp> {
    let secs = job.options.check_in_secs?;
    if job.watch != Watch::Pending
        || job.check_in
        || job.check_ins >= MAX_CHECK_INS
        || job.stopped_at.is_some()
    {
        return None;
    }
    let since = job.last_check_in_at.or(job.started_at).unwrap_or(now);
    Some(since.saturating_add(Duration::from_secs(secs)))
}

/// A check-in whose turn settled is done (the job is plain pending again, one check-in
/// further): landed, or given up (nothing sent, or its read-back window closed).
fn check_in_settled(job: &Job, turn: Option<&Turn>) -> Option<Outcome> {
    if !job.check_in {
        return None;
    }
    let closed = turn.is_some_and(|t| t.delivery.read_back_closed_at.is_some());
    match crate::status::delivery(job, turn)?.1 {
        TurnState::Delivered => Some(Outcome::CheckedIn),
        TurnState::Undelivered | TurnState::Misrouted | TurnState::Refused => {
            Some(Outcome::CheckInDropped)
        }
        TurnState::Unconfirmed if closed => Some(Outcome::CheckInDropped),
        TurnState::Open | TurnState::Claimed | TurnState::Unconfirmed => None,
    }
}

/// `atc cancel --check-ins`: the watch goes on without check-ins. One not yet claimed is
/// dropped (its turn goes on without it); one claimed finishes (it may already be in the
/// chat), and the job still points at it.
fn check_ins_off(job: &Job, turn: Option<&Turn>, now: Timestamp) -> Transition {
    if job.watch != Watch::Pending || job.options.check_in_secs.is_none() {
        return Transition::ignored(job);
    }
    let mut next = job.clone();
    next.updated_at = now;
    next.options.check_in_secs = None;
    if crate::status::owes(job, turn).is_some() && !crate::turn::claimed(turn, &job.job_id) {
        next.check_in = false;
        next.turn = None;
    }
    Transition::to(next, vec![Outcome::CheckInsOff])
}

/// Whether a tick that finds the child still running must stop it now: `--stop-after`
/// has passed since it started, its session is known, no stop is out already, and atc has
/// not given up stopping it ([`STOP_TRIES`]).
fn stop_due(job: &Job, now: Timestamp) -> bool {
    stop_at(job).is_some_and(|at| at <= now)
}

/// When `--stop-after` stops the child: that long after it started, once its session is
/// known, unless a stop is out, it was stopped, or atc gave up stopping it. The tick's
/// stop and the back-off's own times both read it.
pub fn stop_at(job: &Job) -> Option<Timestamp> {
    let secs = job.options.stop_after_secs?;
    let stoppable = job.child_session.is_some()
        && job.stop_asked_at.is_none()
        && job.stopped_at.is_none()
        && stop_again(job.stop_tries);
    let started = job.started_at.filter(|_| stoppable)?;
    Some(started.saturating_add(Duration::from_secs(secs)))
}

/// Whether atc gave up stopping the child (`--stop-after`): [`STOP_TRIES`] stops did not
/// stop it. The watch goes on; its result says so.
pub fn stop_given_up(job: &Job) -> bool {
    job.stopped_at.is_none() && !stop_again(job.stop_tries)
}

/// The answer to a stop `--stop-after` asked for. Only a pending job with a stop out takes
/// it. Where the child's chat was found is recorded (the next stop goes straight there).
/// A stop that did not stop the child counts: the next poll that finds the child running
/// asks again, until [`STOP_TRIES`] did not, and then atc gives up stopping it
/// ([`Outcome::StopGaveUp`]: one line on the tick's stderr says why).
fn stop_answered(
    job: &Job,
    agent: Option<String>,
    chat_id: Option<String>,
    answer: StopAnswer,
    now: Timestamp,
) -> Transition {
    if job.watch != Watch::Pending || job.stop_asked_at.is_none() {
        return Transition::ignored(job);
    }
    let mut next = job.clone();
    next.updated_at = now;
    next.stop_asked_at = None;
    if chat_id.is_some() {
        next.child_chat_id = chat_id;
    }
    if agent.is_some() && next.target.target_agent.is_none() {
        next.child_agent = agent;
    }
    let other = matches!(answer, StopAnswer::OtherChild(_));
    let outcome = match answer {
        StopAnswer::Stopped => {
            next.stopped_at = Some(now);
            next.stop_error = None;
            Outcome::Stopped
        }
        StopAnswer::NotRunning => {
            next.stop_tries += 1;
            Outcome::StopNotRunning
        }
        StopAnswer::Failed(error) => {
            next.stop_tries += 1;
            next.stop_error = Some(error.clone());
            next.last_error = Some(error);
            Outcome::StopFailed
        }
        // That session is not this child's: atc stops nothing more by it (a session
        // QwenPaw names later, or a watch with the right one, starts over), and says so.
        StopAnswer::OtherChild(error) => {
            next.stop_tries += 1;
            forget_child(&mut next);
            next.stop_error = Some(error);
            Outcome::StopFailed
        }
    };
    let mut outcomes = vec![outcome];
    if other {
        outcomes.push(Outcome::StopGaveUp);
        return Transition::to(next, outcomes);
    }
    if outcome != Outcome::Stopped && !stop_again(next.stop_tries) {
        if next.stop_error.is_none() {
            next.stop_error = Some("QwenPaw found nothing running to stop".to_owned());
        }
        outcomes.push(Outcome::StopGaveUp);
    }
    Transition::to(next, outcomes)
}

/// A child session proven another task's (a stop it answered ended that task's turn, issue
/// 36 H1): the job forgets it, and where its chat was found; a session QwenPaw names later,
/// or a watch given the right one, starts the stops over.
pub fn forget_child(job: &mut Job) {
    job.child_session = None;
    job.child_chat_id = None;
    job.child_agent = None;
}

/// The jobs whose child a tick stops now (`--stop-after` passed).
pub fn to_stop(jobs: &[Job]) -> Vec<&Job> {
    jobs.iter()
        .filter(|job| job.watch == Watch::Pending && job.stop_asked_at.is_some())
        .collect()
}

/// A watch that ended without an answer owes the parent one notice, unless it was asked
/// to stay silent. A group member's notice travels in its group's turn.
fn end_without_answer(mut job: Job, outcomes: &mut Vec<Outcome>) -> Job {
    job.finished_at = Some(job.updated_at);
    // A stop answered "stopped" stopped this task only if its record then read cancelled;
    // it never will now (issue 36 H1).
    job.stopped_at = None;
    if job.options.on_no_answer == OnNoAnswer::Notify {
        job.notice = true;
        if job.options.group.is_none() {
            outcomes.push(Outcome::Noticed);
        }
    }
    job
}

/// A cancel stops a live watch; the child task keeps running. A block in an open turn
/// leaves it; one whose turn was claimed stays in it (it may already be on its way:
/// `describe` says so, from the turn) and the job points at that turn still.
fn cancelled(job: &Job, turn: Option<&Turn>, now: Timestamp) -> Transition {
    let claimed = crate::turn::claimed(turn, &job.job_id);
    let shown = crate::status::status(job, turn);
    let outcome = match shown {
        Status::Cancelled => {
            return Transition::to(job.clone(), vec![Outcome::AlreadyCancelled]);
        }
        Status::Unconfirmed => Outcome::CancelledInFlight,
        Status::Pending | Status::Delivering if claimed => Outcome::CancelledInFlight,
        Status::Pending | Status::Delivering => Outcome::Cancelled,
        _ => return Transition::ignored(job),
    };
    let mut next = job.clone();
    if !claimed && shown != Status::Unconfirmed {
        next.turn = None;
    }
    next.check_in = false;
    next.watch = Watch::Cancelled;
    next.note = None;
    next.updated_at = now;
    Transition::to(next, vec![outcome])
}

/// Its owed block went into the turn `into` (from `turn`, the open one it was in, if any).
fn joined(job: &Job, turn: Option<&Turn>, into: String, now: Timestamp) -> Transition {
    if crate::status::owes(job, turn).is_none() || job.turn.as_deref() == Some(into.as_str()) {
        return Transition::ignored(job);
    }
    let mut next = job.clone();
    next.turn = Some(into);
    next.updated_at = now;
    Transition::to(next, vec![Outcome::Batched])
}

/// Its block left the open turn it was in: it waits to be composed into another (a
/// cancelled job no longer names a turn that does not carry it).
fn left(job: &Job, turn: Option<&Turn>, now: Timestamp) -> Transition {
    if job.turn.is_none()
        || (crate::status::owes(job, turn).is_none() && job.watch != Watch::Cancelled)
    {
        return Transition::ignored(job);
    }
    let mut next = job.clone();
    next.turn = None;
    next.updated_at = now;
    Transition::to(next, vec![Outcome::Unsealed])
}

/// The parent has the result already: what atc was to post is not posted. A watch still
/// pending, or a result not yet in a claimed turn (waiting for its chat, in an open turn,
/// or given up), ends `skipped` (its block leaves an open turn); one whose turn was
/// claimed goes out as it is, and the job only records the read. Anything delivered,
/// ended or cancelled already is left alone.
fn read_by_parent(job: &Job, turn: Option<&Turn>, now: Timestamp) -> Transition {
    let claimed = crate::turn::claimed(turn, &job.job_id);
    let outcome = match crate::status::status(job, turn) {
        Status::Delivering | Status::Unconfirmed if claimed => Outcome::ReadInFlight,
        Status::Unconfirmed => Outcome::ReadInFlight,
        Status::Pending
        | Status::Delivering
        | Status::Undelivered
        | Status::Misrouted
        | Status::Error => Outcome::ReadByParent,
        Status::Done
        | Status::Lost
        | Status::Abandoned
        | Status::Expired
        | Status::Cancelled
        | Status::Skipped => return Transition::ignored(job),
    };
    if job.read_by_parent_at.is_some() && outcome == Outcome::ReadInFlight {
        return Transition::ignored(job);
    }
    let mut next = job.clone();
    next.read_by_parent_at = Some(now);
    next.updated_at = now;
    if outcome == Outcome::ReadByParent {
        // It follows no turn any more: an open one goes on without its block, and one given
        // up that `redeliver` opens again for the others it carries leaves it out.
        next.turn = None;
        next.watch = Watch::Skipped;
        next.stop_asked_at = None;
    }
    Transition::to(next, vec![outcome])
}

/// `atc redeliver` of a job whose block goes in a new turn (it has none, or its turn was
/// for another chat): a given-up result or notice is on its way again. A result the parent
/// read itself goes out after all: the one atc holds, or (read before atc polled it) the
/// watch polls again for it.
fn requeued(job: &Job, turn: Option<&Turn>, create_session: bool, now: Timestamp) -> Transition {
    if job.watch == Watch::Skipped && job.read_by_parent_at.is_some() {
        let mut next = job.clone();
        // The text is what goes out (one imported from the seed plugin has no outcome).
        next.watch = if job.final_text.is_some() {
            Watch::Finished
        } else {
            Watch::Pending
        };
        next.read_by_parent_at = None;
        next.options.create_session |= create_session;
        next.turn = None;
        next.updated_at = now;
        return Transition::to(next, vec![Outcome::Requeued]);
    }
    let Some((block, state)) = crate::status::delivery(job, turn) else {
        return Transition::ignored(job);
    };
    let given_up = state.is_given_up();
    let needs_leave = state.is_on_its_way() && create_session && !job.options.create_session;
    if !(given_up || needs_leave) || block.is_check_in() {
        return Transition::ignored(job);
    }
    let mut next = job.clone();
    next.options.create_session |= create_session;
    next.turn = None;
    next.updated_at = now;
    Transition::to(next, vec![Outcome::Requeued])
}

/// The jobs a tick polls: every pending one.
pub fn to_poll(jobs: &[Job]) -> Vec<&Job> {
    jobs.iter()
        .filter(|job| job.watch == Watch::Pending)
        .collect()
}

/// A file's turns, looked up by id, and the turns that carry each job's blocks: built once
/// per pass (or command), so that the questions below cost one lookup a job, not a scan of
/// every turn.
pub struct Turns<'a> {
    pub all: &'a [Turn],
    by_id: std::collections::HashMap<&'a str, &'a Turn>,
    /// Every turn that carries a block of a job, by job id: its result or notice, its
    /// check-ins, and the follow-ups that went up for it.
    carrying: std::collections::HashMap<&'a str, Vec<&'a Turn>>,
}

impl<'a> Turns<'a> {
    pub fn of(all: &'a [Turn]) -> Turns<'a> {
        let mut carrying: std::collections::HashMap<&str, Vec<&Turn>> =
            std::collections::HashMap::new();
        for turn in all {
            for block in &turn.carries {
                let of_job = carrying.entry(block.job_id.as_str()).or_default();
                if !of_job.iter().any(|t| std::ptr::eq(*t, turn)) {
                    of_job.push(turn);
                }
            }
        }
        Turns {
            all,
            by_id: all.iter().map(|t| (t.turn_id.as_str(), t)).collect(),
            carrying,
        }
    }

    /// The turn `job` points at.
    pub fn of_job(&self, job: &Job) -> Option<&'a Turn> {
        job.turn
            .as_deref()
            .and_then(|id| self.by_id.get(id).copied())
    }

    /// Every turn that carries a block of `job`.
    fn carrying(&self, job: &Job) -> impl Iterator<Item = &'a Turn> + '_ {
        self.carrying
            .get(job.job_id.as_str())
            .into_iter()
            .flatten()
            .copied()
    }
}

/// Whether some turn that is not settled carries a block of `job` (it may still land
/// there, and the job's record says for whom).
pub fn in_unsettled_turn(job: &Job, turns: &Turns) -> bool {
    turns.carrying(job).any(|t| !crate::turn::is_settled(t))
}

/// True when no job or turn can change in this tick unless the server says something new:
/// nothing is watched, no block is owed, no turn is on its way or being read back, no
/// forward is due. (Turns to follow are chosen separately, by `turn::to_follow`.) A tick
/// over such a file has nothing to do after its first phase.
pub fn settled(jobs: &[Job], turns: &Turns) -> bool {
    turns.all.iter().all(crate::turn::is_settled) && jobs.iter().all(|job| settled_job(job, turns))
}

/// One job of [`settled`]: ended, owing nothing that no settled turn answers for.
pub fn settled_job(job: &Job, turns: &Turns) -> bool {
    job.watch.is_terminal()
        && crate::status::owes(job, turns.of_job(job)).is_none()
        && !in_unsettled_turn(job, turns)
}

/// Ended jobs are kept for `keep` after their last change, then pruned; never while they
/// owe their parent something, a turn that is not settled carries them, or a delivered
/// turn that carries them is still followed (what its woken turn does may go up a tree or
/// on to the person, and the job's record says for whom).
pub fn prunable(job: &Job, turns: &Turns, now: Timestamp, limits: &Limits) -> bool {
    settled_job(job, turns)
        && last_change(job, turns).elapsed_at(now) > limits.keep
        && !turns
            .carrying(job)
            .any(|t| crate::turn::still_followed(t, now, limits))
}

/// When the job or a turn that carries one of its blocks last changed (a delivery landing
/// is its turn's change; a follow-up that went up for the job long after its result is
/// one): `--keep` counts from there.
pub fn last_change(job: &Job, turns: &Turns) -> Timestamp {
    turns
        .carrying(job)
        .fold(job.updated_at, |at, t| at.max(t.updated_at))
}

#[cfg(test)]
mod tests;
