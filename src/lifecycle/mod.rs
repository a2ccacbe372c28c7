//! The state machine of a job: [`step`]`(&Job, Event, now, &Limits) -> Transition`.
//!
//! Pure: no I/O, no clock, no randomness. The shell (`pass`, the commands) reads the world,
//! turns what it saw into an [`Event`], calls [`step`] and saves the new job. Guards live
//! here, not in callers: an event that does not apply to the job as it is now changes
//! nothing and yields [`Outcome::Ignored`]. `step` is the only place a job's status
//! changes; the table test (`tests.rs`) has a row for every (status × event) pair, and
//! does not compile when one is missing.
//!
//! A job is a watch: pending while its child runs (polled each tick, with a check-in now
//! and then, a stop when `--stop-after` passes), then it *owes* its parent one block: its
//! rendered result, or the notice of a watch that ended without one (lost, expired,
//! abandoned). A block goes out in a turn (`turn`), composed by `compose`; the job points
//! at that turn (`Job::turn`) and follows where it lands ([`Event::TurnMoved`]): the
//! delivery itself (attempts, read-back, when and how it landed) is the turn's record,
//! not the job's.
//!
//! Also here, because they are decisions about jobs: which jobs a tick polls and stops
//! ([`to_poll`], [`to_stop`]), which ended jobs are pruned ([`prunable`]); and, in
//! `register`, what `watch` does with the records the file already holds.

pub mod kick;
mod register;

use std::time::Duration;

use crate::job::{Job, OnEmpty, OnNoAnswer, Outbound, Status, TaskOutcome};
pub use crate::limits::Limits;
use crate::outcome::Outcome;
use crate::time::Timestamp;
use crate::turn::{BlockKind, Turn, TurnState};

pub use register::{
    LeftAlone, Registered, Registration, WatchRefused, WatchRequest, holds_result, register, watch,
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
    /// A person ran `atc cancel`. `claimed`: the turn carrying its block was claimed (it is
    /// on its way, or may be in the chat already), so it is not taken out of it.
    Cancelled { claimed: bool },
    /// A person ran `atc cancel --check-ins`: no more check-ins for this watch. `claimed`:
    /// the turn carrying the current one was claimed (it finishes; it may be in the chat).
    CheckInsOff { claimed: bool },
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
    /// The turn that carries its block `block` is now `state` (`read_back_closed`: one of
    /// unknown outcome whose read-back window closed).
    TurnMoved {
        turn: String,
        block: BlockKind,
        state: TurnState,
        read_back_closed: bool,
    },
    /// `atc redeliver` of a job whose block goes out in a new turn: a given-up result or
    /// notice, or a result the parent read itself, is on its way again; `create_session`
    /// allows a new chat from now on.
    Requeued { create_session: bool },
    /// The parent read the task's finished result itself (its `check_agent_task` answered
    /// it: `atc parent-read`). `claimed`: the turn carrying the job's block was claimed (it
    /// is on its way, or may be in the chat already), so it goes out as it is.
    ReadByParent { claimed: bool },
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

/// Applies one event to one job.
pub fn step(job: &Job, event: Event, now: Timestamp, limits: &Limits) -> Transition {
    let mut transition = match event {
        Event::Polled(check) => polled(job, check, now, limits),
        Event::Cancelled { claimed } => cancelled(job, claimed, now),
        Event::CheckInsOff { claimed } => check_ins_off(job, claimed, now),
        Event::StopAnswered {
            agent,
            chat_id,
            answer,
        } => stop_answered(job, agent, chat_id, answer, now),
        Event::Joined { turn } => joined(job, turn, now),
        Event::Left => left(job, now),
        Event::TurnMoved {
            turn,
            block,
            state,
            read_back_closed,
        } => turn_moved(job, &turn, block, state, read_back_closed, now),
        Event::Requeued { create_session } => requeued(job, create_session, now),
        Event::ReadByParent { claimed } => read_by_parent(job, claimed, now),
    };
    // A check-in belongs to a pending job only: once the watch moves on, its result or
    // notice is what it owes. A check-in's turn not claimed yet goes on without it (its
    // block no longer belongs there); one claimed finishes by itself, and the job no longer
    // follows it.
    let next = &mut transition.job;
    if next.status != Status::Pending && job.status == Status::Pending && job.check_in.is_some() {
        next.check_in = None;
        if next.status != Status::Cancelled {
            next.turn = None;
        }
    }
    // A note records only what no field can (an import's origin, how a cancel met a POST
    // in an earlier atc); once the job moves on, the fields and its turn say the rest.
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
    next.updated_at = now;
    let mut outcomes = vec![Outcome::Polled];
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
            {
                next.updated_at = job.updated_at;
            }
            outcomes.push(Outcome::Running);
            if turn_ended {
                return Transition::to(next, outcomes);
            }
            if stop_due(&next, now) {
                next.stop_asked_at = Some(now);
                next.updated_at = now;
                outcomes.push(Outcome::StopDue);
            }
            if check_in_due(&next, now) {
                next.check_in = Some(Outbound::Delivering);
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
            next.child_session = next.child_session.or(child_session);
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
                next.status = Status::Skipped;
                outcomes.push(Outcome::Skipped);
            } else {
                next.status = Status::Delivering;
            }
            return Transition::to(next, outcomes);
        }
        Check::Lost { detail } => {
            next.status = Status::Lost;
            next.last_error = Some(detail);
            outcomes.push(Outcome::Lost);
            return Transition::to(end_without_answer(next, &mut outcomes), outcomes);
        }
        Check::Failed { error } => {
            next.strikes += 1;
            next.last_error = Some(error);
            outcomes.push(Outcome::FailedCheck);
            if next.strikes >= limits.max_strikes {
                next.status = Status::Abandoned;
                outcomes.push(Outcome::Abandoned);
                return Transition::to(end_without_answer(next, &mut outcomes), outcomes);
            }
        }
    }
    if next.registered_at.elapsed_at(now) > limits.max_age {
        // A running poll above kept the old `updated_at` (nothing had changed): the watch
        // ends now, and its notice and `--keep` count from now.
        next.updated_at = now;
        next.status = Status::Expired;
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
    job.check_in.is_none()
        && job.check_ins < MAX_CHECK_INS
        && job.options.group.is_none()
        && job.stopped_at.is_none()
        && since.is_some_and(|at| at.elapsed_at(now) >= Duration::from_secs(secs))
}

/// When the next check-in is due, if one is still to come: `None` without `--check-in`,
/// after the last one, or while one is on its way.
pub fn next_check_in(job: &Job, now: Timestamp) -> Option<Timestamp> {
    let secs = job.options.check_in_secs?;
    if job.status != Status::Pending
        || job.check_in.is_some()
        || job.check_ins >= MAX_CHECK_INS
        || job.stopped_at.is_some()
    {
        return None;
    }
    let since = job.last_check_in_at.or(job.started_at).unwrap_or(now);
    Some(since.saturating_add(Duration::from_secs(secs)))
}

/// A check-in that went out (or was given up) is done: the job is plain pending again,
/// one check-in further.
fn check_in_done(next: &mut Job, outcome: Outcome) -> Outcome {
    next.check_in = None;
    next.check_ins += 1;
    next.turn = None;
    outcome
}

/// `atc cancel --check-ins`: the watch goes on without check-ins. One not yet claimed is
/// dropped (its turn goes on without it); one claimed finishes (it may already be in the
/// chat), and the job still follows it.
fn check_ins_off(job: &Job, claimed: bool, now: Timestamp) -> Transition {
    if job.status != Status::Pending || job.options.check_in_secs.is_none() {
        return Transition::ignored(job);
    }
    let mut next = job.clone();
    next.updated_at = now;
    next.options.check_in_secs = None;
    if next.check_in == Some(Outbound::Delivering) && !claimed {
        next.check_in = None;
        next.turn = None;
    }
    Transition::to(next, vec![Outcome::CheckInsOff])
}

/// Whether a tick that finds the child still running must stop it now: `--stop-after`
/// has passed since it started, its session is known, no stop is out already, and atc has
/// not given up stopping it ([`STOP_TRIES`]).
fn stop_due(job: &Job, now: Timestamp) -> bool {
    let Some(secs) = job.options.stop_after_secs else {
        return false;
    };
    job.child_session.is_some()
        && job.stop_asked_at.is_none()
        && job.stopped_at.is_none()
        && stop_again(job.stop_tries)
        && job
            .started_at
            .is_some_and(|at| at.elapsed_at(now) >= Duration::from_secs(secs))
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
    if job.status != Status::Pending || job.stop_asked_at.is_none() {
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
    };
    let mut outcomes = vec![outcome];
    if outcome != Outcome::Stopped && !stop_again(next.stop_tries) {
        if next.stop_error.is_none() {
            next.stop_error = Some("QwenPaw found nothing running to stop".to_owned());
        }
        outcomes.push(Outcome::StopGaveUp);
    }
    Transition::to(next, outcomes)
}

/// The jobs whose child a tick stops now (`--stop-after` passed).
pub fn to_stop(jobs: &[Job]) -> Vec<&Job> {
    jobs.iter()
        .filter(|job| job.status == Status::Pending && job.stop_asked_at.is_some())
        .collect()
}

/// A watch that ended without an answer owes the parent one notice, unless it was asked
/// to stay silent. A group member's notice travels in its group's turn.
fn end_without_answer(mut job: Job, outcomes: &mut Vec<Outcome>) -> Job {
    job.finished_at = Some(job.updated_at);
    if job.options.on_no_answer == OnNoAnswer::Notify {
        job.notice = Some(Outbound::Delivering);
        if job.options.group.is_none() {
            outcomes.push(Outcome::Noticed);
        }
    }
    job
}

/// A cancel stops a live watch; the child task keeps running. A block in an open turn
/// leaves it; one whose turn was claimed stays in it (it may already be on its way:
/// `describe` says so, from the turn) and the job points at that turn still.
fn cancelled(job: &Job, claimed: bool, now: Timestamp) -> Transition {
    let outcome = match job.status {
        Status::Cancelled => {
            return Transition::to(job.clone(), vec![Outcome::AlreadyCancelled]);
        }
        Status::Unconfirmed => Outcome::CancelledInFlight,
        Status::Pending | Status::Delivering if claimed => Outcome::CancelledInFlight,
        Status::Pending | Status::Delivering => Outcome::Cancelled,
        _ => return Transition::ignored(job),
    };
    let mut next = job.clone();
    if !claimed && next.status != Status::Unconfirmed {
        next.turn = None;
    }
    next.check_in = None;
    next.status = Status::Cancelled;
    next.note = None;
    next.updated_at = now;
    Transition::to(next, vec![outcome])
}

/// Its owed block went into `turn`.
fn joined(job: &Job, turn: String, now: Timestamp) -> Transition {
    if job.owes().is_none() || job.turn.as_deref() == Some(turn.as_str()) {
        return Transition::ignored(job);
    }
    let mut next = job.clone();
    next.turn = Some(turn);
    next.updated_at = now;
    Transition::to(next, vec![Outcome::Batched])
}

/// Its block left the open turn it was in: it waits to be composed into another (a
/// cancelled job no longer names a turn that does not carry it).
fn left(job: &Job, now: Timestamp) -> Transition {
    if job.turn.is_none() || (job.owes().is_none() && job.status != Status::Cancelled) {
        return Transition::ignored(job);
    }
    let mut next = job.clone();
    next.turn = None;
    next.updated_at = now;
    Transition::to(next, vec![Outcome::Unsealed])
}

/// Follows the turn that carries its block: only the turn it points at, and only for the
/// block it has on its way there (a check-in's turn that lands after the child finished
/// says nothing about the result).
fn turn_moved(
    job: &Job,
    turn: &str,
    block: BlockKind,
    state: TurnState,
    read_back_closed: bool,
    now: Timestamp,
) -> Transition {
    if job.turn.as_deref() != Some(turn) || job.block() != Some(block) {
        return Transition::ignored(job);
    }
    let landed = match state {
        TurnState::Open | TurnState::Claimed => Outbound::Delivering,
        TurnState::Unconfirmed => Outbound::Unconfirmed,
        TurnState::Delivered => Outbound::Delivered,
        TurnState::Undelivered | TurnState::Refused => Outbound::Undelivered,
        TurnState::Misrouted => Outbound::Misrouted,
    };
    let mut next = job.clone();
    let outcome = if block.is_check_in() {
        match landed {
            Outbound::Delivered => check_in_done(&mut next, Outcome::CheckedIn),
            Outbound::Undelivered | Outbound::Misrouted => {
                check_in_done(&mut next, Outcome::CheckInDropped)
            }
            Outbound::Unconfirmed if read_back_closed => {
                check_in_done(&mut next, Outcome::CheckInDropped)
            }
            other => {
                next.check_in = Some(other);
                Outcome::Carried
            }
        }
    } else if block == BlockKind::Result && state == TurnState::Refused {
        next.status = Status::Error;
        Outcome::Carried
    } else {
        next.set_outbound(landed);
        Outcome::Carried
    };
    if next == *job {
        return Transition::ignored(job);
    }
    next.updated_at = now;
    Transition::to(next, vec![outcome])
}

/// The parent has the result already: what atc was to post is not posted. A watch still
/// pending, or a result not yet in a claimed turn (waiting for its chat, in an open turn,
/// or given up), ends `skipped` (its block leaves an open turn); one whose turn was
/// claimed goes out as it is, and the job only records the read. Anything delivered,
/// ended or cancelled already is left alone.
fn read_by_parent(job: &Job, claimed: bool, now: Timestamp) -> Transition {
    let outcome = match job.status {
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
        next.status = Status::Skipped;
        next.stop_asked_at = None;
    }
    Transition::to(next, vec![outcome])
}

/// `atc redeliver` of a job whose block goes in a new turn (it has none, or its turn was
/// for another chat): a given-up result or notice is on its way again. A result the parent
/// read itself goes out after all: the one atc holds, or (read before atc polled it) the
/// watch polls again for it.
fn requeued(job: &Job, create_session: bool, now: Timestamp) -> Transition {
    if job.status == Status::Skipped && job.read_by_parent_at.is_some() {
        let mut next = job.clone();
        next.status = if job.final_text.is_some() && job.outcome.is_some() {
            Status::Delivering
        } else {
            Status::Pending
        };
        next.read_by_parent_at = None;
        next.options.create_session |= create_session;
        next.turn = None;
        next.updated_at = now;
        return Transition::to(next, vec![Outcome::Requeued]);
    }
    let given_up = job.status == Status::Error
        || matches!(
            job.outbound(),
            Some(Outbound::Undelivered | Outbound::Misrouted)
        );
    let needs_leave = job.outbound() == Some(Outbound::Delivering)
        && create_session
        && !job.options.create_session;
    if !(given_up || needs_leave) || job.block().is_none_or(BlockKind::is_check_in) {
        return Transition::ignored(job);
    }
    let mut next = job.clone();
    if next.status == Status::Error {
        next.status = Status::Delivering;
    } else {
        next.set_outbound(Outbound::Delivering);
    }
    next.options.create_session |= create_session;
    next.turn = None;
    next.updated_at = now;
    Transition::to(next, vec![Outcome::Requeued])
}

/// The jobs a tick polls: every pending one.
pub fn to_poll(jobs: &[Job]) -> Vec<&Job> {
    jobs.iter()
        .filter(|job| job.status == Status::Pending)
        .collect()
}

/// Whether some turn that is not settled carries a block of `job` (it may still land
/// there, and the job's record says for whom).
pub fn in_unsettled_turn(job: &Job, turns: &[Turn]) -> bool {
    turns
        .iter()
        .any(|t| !crate::turn::is_settled(t) && t.carries_job(&job.job_id))
}

/// True when no job or turn can change in this tick unless the server says something new:
/// nothing is watched, no block is owed, no turn is on its way or being read back, no
/// forward is due. (Turns to follow are chosen separately, by `turn::to_follow`.) A tick
/// over such a file has nothing to do after its first phase.
pub fn settled(jobs: &[Job], turns: &[Turn]) -> bool {
    jobs.iter().all(|job| settled_job(job, turns)) && turns.iter().all(crate::turn::is_settled)
}

/// One job of [`settled`]: ended, owing nothing that no settled turn answers for.
pub fn settled_job(job: &Job, turns: &[Turn]) -> bool {
    job.status.is_terminal() && job.owes().is_none() && !in_unsettled_turn(job, turns)
}

/// Ended jobs are kept for `keep` after their last change, then pruned; never while they
/// owe their parent something, or a turn that is not settled carries them.
pub fn prunable(job: &Job, turns: &[Turn], now: Timestamp, limits: &Limits) -> bool {
    settled_job(job, turns) && job.updated_at.elapsed_at(now) > limits.keep
}

#[cfg(test)]
mod tests;
