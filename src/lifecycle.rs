//! The state machine of a job: [`step`]`(&Job, Event, now, &Limits) -> Transition`.
//!
//! Pure: no I/O, no clock, no randomness. The shell (`pass`, the commands) reads the world,
//! turns what it saw into an [`Event`], calls [`step`], saves the new job and carries out
//! the [`Effect`]. Guards live here, not in callers: an event that does not apply to the
//! job as it is now changes nothing and yields [`Outcome::Ignored`]. `step` is the only
//! place a job's status changes; the table test at the bottom has a row for every
//! (status × event) pair, and does not compile when one is missing.
//!
//! A job's outbound turn (its result, the notice of a watch that ended without one, or a
//! group's one turn) goes through the same protocol whatever it carries:
//!
//! ```text
//!  delivering ──probe: chat idle──▶ claimed (write-ahead) ──POST 2xx──▶ delivered
//!      │  ▲                                      │
//!      │  └──probe: busy / 409 / unreachable ────┤ (until --busy-deadline: undelivered)
//!      │                                         └─timeout, reset, 5xx─▶ unconfirmed
//!      └──probe: no such chat──▶ misrouted                                   │
//!                    unconfirmed ──read back: found──▶ delivered              │
//!                                ──read back: absent, chat idle──▶ claimed ◀──┘
//! ```
//!
//! Also here, because they are decisions about jobs: what `watch` does with an existing
//! record ([`register`]), which jobs a tick polls, follows up, recovers and delivers
//! ([`to_poll`], [`to_follow`], [`interrupted`], [`deliveries`]), and which ended jobs are
//! pruned ([`prunable`]). Fan-in groups are planned in `group`.

use std::collections::HashSet;
use std::time::Duration;

use crate::describe;
use crate::job::{
    Delivery, Forward, ForwardStatus, Job, OnEmpty, OnNoAnswer, Options, Outbound, Status, Target,
    TaskOutcome,
};
use crate::report::Outcome;
use crate::time::Timestamp;

/// The caps and back-off of a tick (defaults in `settings`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_strikes: u32,
    pub max_age: Duration,
    /// Wait after a 409 before posting again.
    pub busy_retry: Duration,
    /// How long a turn may wait for a busy or unreachable parent chat before it is given
    /// up as undelivered, and how long an unknown delivery is read back.
    pub busy_deadline: Duration,
    /// How long after an attempt of unknown outcome before the same turn may be posted
    /// again (the server has had the whole request timeout to act on the first).
    pub settle: Duration,
    pub keep: Duration,
}

/// What one poll of the task saw, with a finished result already rendered.
#[derive(Clone, Debug, PartialEq)]
pub enum Check {
    /// 200 with a non-terminal status.
    Running { started_at: Option<Timestamp> },
    /// 200 with a terminal status; `text` is what a delivery carries.
    Finished {
        text: String,
        started_at: Option<Timestamp>,
        outcome: TaskOutcome,
        /// The child's final answer is empty.
        empty: bool,
    },
    /// QwenPaw's 404 for the task: the server has no record of it.
    Lost { detail: String },
    /// Anything else: a strike. `error` says what went wrong and what to suspect.
    Failed { error: String },
}

/// What a look at the parent chat found, just before a turn goes out (or to learn whether
/// one of unknown outcome arrived).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    /// No chat has the job's exact (session, user, channel): posting would start a new one.
    NoChat,
    /// The chat exists; whether a turn is running in it.
    Chat { chat_id: String, running: bool },
    /// Read back: the delivery is in the chat; how the turn it started ended, if stamped.
    Found {
        chat_id: String,
        turn: Option<String>,
    },
    /// Read back: the delivery is not in the chat.
    NotFound { chat_id: String, running: bool },
    /// Could not tell (server unreachable, an error answer, a body that is no use).
    Unknown { error: String },
    /// A definite no: the server does not know (or will not serve) the parent agent.
    Refused { error: String },
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

/// What the parent turn a delivery started is doing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Turn {
    Running,
    /// It ended: `completed`, `failed`…, with its final tool-free reply ("" if none).
    Ended {
        status: String,
        reply: String,
    },
    /// The server has no record of it (it restarted).
    Gone,
}

/// What the parent's channel says, before a forward goes out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Health {
    Healthy,
    /// Running but not able to send (a disconnected broker, say): hold the forward.
    Unhealthy {
        detail: String,
    },
    /// Not configured or not running for the agent: a definite no.
    Missing {
        detail: String,
    },
    /// Could not tell.
    Unknown {
        error: String,
    },
}

/// How one forward (`POST /messages/send`) ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sent {
    /// 2xx: the server sent it.
    Accepted,
    /// The server said sending failed (5xx), or nothing was sent: try again.
    Failed {
        http_status: Option<u16>,
        detail: String,
    },
    /// Any other 4xx (an unconfigured channel, an unknown agent): never sent.
    Rejected { http_status: u16, detail: String },
    /// Timeout or reset after sending: it may have been sent.
    Unknown { error: String },
}

/// Sends of one forward before it is given up (5xx and unreachable answers).
pub const FORWARD_ATTEMPTS: u32 = 5;

/// Something that happened to a job.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A tick polled the task.
    Polled(Check),
    /// A tick looked at the parent chat before delivering (or read it back).
    Probed(Probe),
    /// The delivery POST ended.
    Posted(Posted),
    /// A tick polled the parent turn a delivery started.
    TurnPolled(Turn),
    /// A tick asked the parent's channel whether it can send (before a forward).
    ChannelChecked(Health),
    /// The forward's send ended.
    Forwarded(Sent),
    /// A person ran `atc cancel`.
    Cancelled,
    /// A person ran `atc redeliver`; `create_session` allows a new chat from now on.
    Redeliver { create_session: bool },
    /// A tick found a POST left in flight by a tick that died.
    Recovered,
    /// A tick found the read-back window of a delivery of unknown outcome closed: atc
    /// stops looking, and a person decides.
    ReadBackClosed,
    /// Its group is complete and this member carries the group's one turn.
    Sealed { text: String, tasks: Vec<String> },
    /// Its group is complete and member `carrier` carries this member's result.
    Carried { carrier: String },
    /// The group's carrier is gone before delivering: this member waits to be carried again.
    Unsealed,
    /// The carrier of its group's turn moved on; this member follows.
    Followed(Box<Job>),
    /// The stop `--stop-after` asked for was answered: the child's chat (when it was looked
    /// up), and whether a running turn was stopped, or why the stop told nothing.
    StopAnswered {
        chat_id: Option<String>,
        answer: Result<bool, String>,
    },
    /// A person ran `atc cancel --check-ins`: no more check-ins for this watch.
    CheckInsOff,
    /// Composes this job's turn as a batch: the turn carries `tasks` (its own first
    /// among them) and posts `text`; one task alone is its own block again (`text` None).
    Batched {
        text: Option<String>,
        tasks: Vec<String>,
    },
}

/// What the shell must do after saving the new job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    None,
    /// POST `text` into the job's parent chat. Only ever returned with the write-ahead
    /// record (the attempt counted, `attempt_started_at` set) in the new job.
    Post {
        text: String,
    },
    /// Send `text` to the person on the parent's channel, with the forward's write-ahead
    /// record in the new job.
    Forward {
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
        Event::Probed(probe) => probed(job, probe, now, limits),
        Event::Posted(posted) => posted_outcome(job, posted, now, limits),
        Event::TurnPolled(turn) => turn_polled(job, turn, now),
        Event::ChannelChecked(health) => channel_checked(job, health, now, limits),
        Event::Forwarded(sent) => forwarded(job, sent, now),
        Event::Cancelled => cancelled(job, now),
        Event::Redeliver { create_session } => redeliver(job, create_session, now),
        Event::Recovered => recovered(job, now),
        Event::ReadBackClosed => read_back_closed(job, now, limits),
        Event::Sealed { text, tasks } => sealed(job, text, tasks, now),
        Event::Carried { carrier } => carried(job, carrier, now),
        Event::Unsealed => unsealed(job, now),
        Event::Followed(carrier) => followed(job, &carrier, now),
        Event::StopAnswered { chat_id, answer } => stop_answered(job, chat_id, answer, now),
        Event::CheckInsOff => check_ins_off(job, now),
        Event::Batched { text, tasks } => batched(job, text, tasks, now),
    };
    // A check-in belongs to a pending job only: once the watch moves on, its result or
    // notice is the outbound turn. One that went out (or could not) is done: the job is a
    // plain pending job again, one check-in further.
    if transition.job.status != Status::Pending {
        // A check-in carried in a batch that has not gone out leaves it: the job's result
        // (or notice) is its own turn now, and the batch is composed again without it.
        if job.status == Status::Pending && job.check_in.is_some() {
            transition.job.carried_by = None;
        }
        transition.job.check_in = None;
    } else if matches!(
        transition.job.check_in,
        Some(Outbound::Delivered | Outbound::Undelivered | Outbound::Misrouted)
    ) || (transition.job.check_in == Some(Outbound::Unconfirmed)
        && transition
            .job
            .delivery
            .as_ref()
            .is_some_and(|d| d.read_back_closed_at.is_some()))
    {
        check_in_done(&mut transition);
    } else if transition.job.check_in == Some(Outbound::Unconfirmed)
        && transition.job.carried_by.is_some()
    {
        // Carried in a batch whose turn may have landed: atc cannot read it back by the
        // check-in's own id, and the carrier's record says the rest. It is done.
        for outcome in &mut transition.outcomes {
            if *outcome == Outcome::Unconfirmed {
                *outcome = Outcome::CheckInDropped;
            }
        }
        check_in_done(&mut transition);
    }
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
    next.updated_at = now;
    let mut outcomes = vec![Outcome::Polled];
    match check {
        // Still running: only what changed is recorded (the first sight of it, the end of
        // a run of strikes), so a tick over running tasks rewrites nothing.
        Check::Running { started_at } => {
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
            if stop_due(&next, now) {
                next.stop_asked_at = Some(now);
                next.updated_at = now;
                outcomes.push(Outcome::StopDue);
            }
            if check_in_due(&next, now) {
                next.check_in = Some(Outbound::Delivering);
                next.last_check_in_at = Some(now);
                next.delivery = Some(Delivery::default());
                next.final_text = Some(describe::check_in_text(&next, now));
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
        } => {
            next.strikes = 0;
            next.last_error = None;
            next.started_at = started_at.or(next.started_at);
            next.outcome = Some(outcome);
            next.final_text = Some(match describe::stop_line(&next) {
                Some(line) => format!("{text}\n\n{line}"),
                None => text,
            });
            next.stop_asked_at = None;
            next.finished_at = Some(now);
            outcomes.push(Outcome::Finished);
            if empty && outcome == TaskOutcome::Completed && next.options.on_empty == OnEmpty::Skip
            {
                next.status = Status::Skipped;
                outcomes.push(Outcome::Skipped);
            } else {
                next.status = Status::Delivering;
                next.delivery = Some(Delivery::default());
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

/// A check-in that went out (or was given up) is done: its text and bookkeeping go, the
/// count goes up, and its outcomes say what happened to a check-in (not to a result).
fn check_in_done(transition: &mut Transition) {
    let job = &mut transition.job;
    job.check_in = None;
    job.check_ins += 1;
    job.final_text = None;
    job.delivery = None;
    job.delivered_at = None;
    job.turn_task_id = None;
    job.parent_turn = None;
    job.carried_by = None;
    for outcome in &mut transition.outcomes {
        *outcome = match *outcome {
            Outcome::Delivered | Outcome::Confirmed => Outcome::CheckedIn,
            Outcome::Undelivered
            | Outcome::Misrouted
            | Outcome::Error
            | Outcome::ReadBackClosed => Outcome::CheckInDropped,
            other => other,
        };
    }
}

/// `atc cancel --check-ins`: the watch goes on without check-ins. One not yet claimed is
/// dropped; one in flight or being read back finishes (it may already be in the chat).
fn check_ins_off(job: &Job, now: Timestamp) -> Transition {
    if job.status != Status::Pending || job.options.check_in_secs.is_none() {
        return Transition::ignored(job);
    }
    let mut next = job.clone();
    next.updated_at = now;
    next.options.check_in_secs = None;
    if next.check_in == Some(Outbound::Delivering) && !next.in_flight() {
        next.check_in = None;
        next.final_text = None;
        next.delivery = None;
    }
    Transition::to(next, vec![Outcome::CheckInsOff])
}

/// Whether a tick that finds the child still running must stop it now: `--stop-after`
/// has passed since it started, its session is known, and no stop is out already.
fn stop_due(job: &Job, now: Timestamp) -> bool {
    let Some(secs) = job.options.stop_after_secs else {
        return false;
    };
    job.child_session.is_some()
        && job.stop_asked_at.is_none()
        && job.stopped_at.is_none()
        && job
            .started_at
            .is_some_and(|at| at.elapsed_at(now) >= Duration::from_secs(secs))
}

/// The answer to a stop `--stop-after` asked for. Only a pending job with a stop out takes
/// it; a stop that told nothing is asked again by the next poll that finds the child running.
fn stop_answered(
    job: &Job,
    chat_id: Option<String>,
    answer: Result<bool, String>,
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
    let outcome = match answer {
        Ok(true) => {
            next.stopped_at = Some(now);
            Outcome::Stopped
        }
        Ok(false) => Outcome::StopNotRunning,
        Err(error) => {
            next.last_error = Some(error);
            Outcome::StopFailed
        }
    };
    Transition::to(next, vec![outcome])
}

/// The jobs whose child a tick stops now (`--stop-after` passed).
pub fn to_stop(jobs: &[Job]) -> Vec<&Job> {
    jobs.iter()
        .filter(|job| job.status == Status::Pending && job.stop_asked_at.is_some())
        .collect()
}

/// A watch that ended without an answer owes the parent one notice, unless it was asked
/// to stay silent. A group member's notice travels in the group's turn instead.
fn end_without_answer(mut job: Job, outcomes: &mut Vec<Outcome>) -> Job {
    job.finished_at = Some(job.updated_at);
    if job.options.on_no_answer == OnNoAnswer::Notify && job.options.group.is_none() {
        job.final_text = Some(describe::notice_text(&job));
        job.notice = Some(Outbound::Delivering);
        job.delivery = Some(Delivery::default());
        outcomes.push(Outcome::Noticed);
    }
    job
}

/// The read-back window of an unknown delivery is open.
fn reading_back(job: &Job, now: Timestamp, limits: &Limits) -> bool {
    job.delivery
        .as_ref()
        .and_then(|d| d.unknown_since)
        .is_none_or(|since| since.elapsed_at(now) <= limits.busy_deadline)
}

/// True when the job's outbound turn should be looked at (and perhaps posted) now: its
/// text is there, no POST is in flight, any back-off is over; a group member only as its
/// group's carrier; an unknown delivery only while its read-back window is open.
pub fn is_due(job: &Job, now: Timestamp, limits: &Limits) -> bool {
    if job.turn().is_none() || job.in_flight() || job.carried_by.is_some() {
        return false;
    }
    if job.options.group.is_some() && job.group_tasks.is_none() {
        return false;
    }
    let backed_off = job
        .delivery
        .as_ref()
        .is_none_or(|d| d.next_attempt_at.is_none_or(|at| at <= now));
    match job.outbound() {
        Some(Outbound::Delivering) => backed_off,
        Some(Outbound::Unconfirmed) => reading_back(job, now, limits),
        _ => false,
    }
}

/// What the chat check found decides what happens to a due turn: post it (the claim, with
/// its write-ahead record), wait for a busy chat, give up on a chat that does not exist,
/// or settle an unknown delivery by reading the chat back.
fn probed(job: &Job, probe: Probe, now: Timestamp, limits: &Limits) -> Transition {
    if !is_due(job, now, limits) {
        return Transition::ignored(job);
    }
    let unknown = job.outbound() == Some(Outbound::Unconfirmed);
    let mut next = job.clone();
    next.updated_at = now;
    match probe {
        Probe::NoChat if next.options.create_session => {
            // The POST starts a new chat: a chat id found before (of a chat since deleted)
            // is not where a read-back must look for it.
            next.chat_id = None;
            claim(next, now)
        }
        Probe::NoChat => {
            // The chat that id named is gone: the next look goes by the triple again.
            next.chat_id = None;
            let why = format!(
                "no chat with {} for agent '{}' on {}",
                next.target.describe_chat(),
                next.target.agent_id,
                next.base_url
            );
            next.set_outbound(Outbound::Misrouted);
            delivery_error(&mut next, Some(why));
            Transition::to(next, vec![Outcome::Misrouted])
        }
        Probe::Chat { chat_id, running } if !unknown => {
            next.chat_id = Some(chat_id);
            if running {
                let why = "the parent chat is running a turn".to_owned();
                let outcome = defer(&mut next, now, limits, why, None, Outcome::Busy);
                Transition::to(next, vec![outcome])
            } else {
                claim(next, now)
            }
        }
        Probe::Found { chat_id, turn } if unknown => {
            next.chat_id = Some(chat_id);
            next.set_outbound(Outbound::Delivered);
            next.delivered_at = Some(now);
            next.parent_turn = turn;
            delivery_error(&mut next, None);
            let d = delivery(&mut next);
            d.confirmed = Some("read-back".to_owned());
            d.next_attempt_at = None;
            Transition::to(next, vec![Outcome::Confirmed])
        }
        Probe::NotFound { chat_id, running } if unknown => {
            next.chat_id = Some(chat_id);
            let settled = next
                .delivery
                .as_ref()
                .and_then(|d| d.last_attempt_at.or(d.unknown_since))
                .is_none_or(|at| at.elapsed_at(now) >= limits.settle);
            if running || !settled {
                // A turn in the chat may be ours, still running (its message is stored when
                // it ends); a request that reached the server may not have started yet.
                Transition::to(next, vec![Outcome::Waiting])
            } else {
                next.set_outbound(Outbound::Delivering);
                claim(next, now)
            }
        }
        Probe::Unknown { error } if unknown => {
            let why = format!("reading the parent chat back failed: {error}");
            delivery_error(&mut next, Some(why));
            Transition::to(next, vec![Outcome::Unconfirmed])
        }
        Probe::Unknown { error } => {
            let why = format!("could not check the parent chat: {error}");
            let outcome = defer(&mut next, now, limits, why, None, Outcome::Unreachable);
            Transition::to(next, vec![outcome])
        }
        Probe::Refused { error } => {
            delivery_error(&mut next, Some(error));
            if next.notice.is_some() || next.check_in.is_some() {
                next.set_outbound(Outbound::Undelivered);
            } else {
                next.status = Status::Error;
            }
            Transition::to(next, vec![Outcome::Error])
        }
        // A read-back answer for a turn that is not unknown, or a status for one that is:
        // the probe does not fit the job any more.
        Probe::Chat { .. } | Probe::Found { .. } | Probe::NotFound { .. } => {
            Transition::ignored(job)
        }
    }
}

/// The write-ahead record: the attempt is counted and marked in flight before the POST.
fn claim(mut next: Job, now: Timestamp) -> Transition {
    let text = next.turn().unwrap_or_default().to_owned();
    let delivery = next.delivery.get_or_insert_with(Delivery::default);
    delivery.attempts += 1;
    delivery.attempt_started_at = Some(now);
    delivery.last_attempt_at = Some(now);
    delivery.next_attempt_at = None;
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
    delivery(&mut next).attempt_started_at = None;
    if next.status == Status::Cancelled {
        let what = match &posted {
            Posted::Accepted { .. } => {
                delivery(&mut next).last_http_status = Some(200);
                "the result was delivered anyway"
            }
            Posted::Unknown { .. } => {
                delivery(&mut next).unknown_since = Some(now);
                "whether the result arrived is unknown"
            }
            _ => "the result was not delivered",
        };
        next.note = Some(format!(
            "cancelled while its result was being posted; {what}"
        ));
        return Transition::to(next, vec![Outcome::CancelledInFlight]);
    }
    if next.outbound() != Some(Outbound::Delivering) {
        // Nothing else is ever in flight.
        return Transition::ignored(job);
    }
    let outcome = match posted {
        Posted::Accepted { turn_task_id } => {
            let d = delivery(&mut next);
            d.last_http_status = Some(200);
            d.next_attempt_at = None;
            next.set_outbound(Outbound::Delivered);
            next.delivered_at = Some(now);
            next.turn_task_id = turn_task_id;
            delivery_error(&mut next, None);
            Outcome::Delivered
        }
        Posted::Busy { detail } => {
            let why = format!("parent chat busy (409: {detail})");
            defer(&mut next, now, limits, why, Some(409), Outcome::Busy)
        }
        Posted::NotSent { error } => {
            let why = format!("could not reach the server: {error}");
            defer(&mut next, now, limits, why, None, Outcome::Unreachable)
        }
        Posted::Unknown { error, http_status } => {
            let d = delivery(&mut next);
            d.last_http_status = http_status;
            d.unknown_since = Some(now);
            next.set_outbound(Outbound::Unconfirmed);
            delivery_error(&mut next, Some(error));
            Outcome::Unconfirmed
        }
        Posted::Rejected {
            http_status,
            detail,
        } => {
            delivery(&mut next).last_http_status = Some(http_status);
            delivery_error(&mut next, Some(format!("{http_status}: {detail}")));
            if next.notice.is_some() || next.check_in.is_some() {
                next.set_outbound(Outbound::Undelivered);
            } else {
                next.status = Status::Error;
            }
            Outcome::Error
        }
    };
    Transition::to(next, vec![outcome])
}

fn delivery(job: &mut Job) -> &mut Delivery {
    job.delivery.get_or_insert_with(Delivery::default)
}

/// Records (or clears) what went wrong delivering. A result's problem is its
/// `last_error` too; a notice's is not: that keeps why the watch ended.
fn delivery_error(job: &mut Job, why: Option<String>) {
    if !job.status.ends_without_answer() {
        job.last_error = why.clone();
    }
    delivery(job).error = why;
}

/// Busy or unreachable: try again on a later tick (after `--busy-retry` for a 409, the
/// next one otherwise), until `--busy-deadline` after the first such answer.
fn defer(
    job: &mut Job,
    now: Timestamp,
    limits: &Limits,
    why: String,
    http_status: Option<u16>,
    outcome: Outcome,
) -> Outcome {
    delivery_error(job, Some(why));
    let delivery = job.delivery.get_or_insert_with(Delivery::default);
    if outcome == Outcome::Busy {
        delivery.busy += 1;
    } else {
        delivery.unreachable += 1;
    }
    if http_status.is_some() || outcome == Outcome::Unreachable {
        delivery.last_http_status = http_status;
    }
    let since = *delivery.waiting_since.get_or_insert(now);
    if since.elapsed_at(now) > limits.busy_deadline {
        delivery.next_attempt_at = None;
        job.set_outbound(Outbound::Undelivered);
        return Outcome::Undelivered;
    }
    delivery.next_attempt_at = match http_status {
        Some(409) => Some(now.saturating_add(limits.busy_retry)),
        _ => None,
    };
    outcome
}

/// How the parent turn a delivery started ended, once it did. For a parent on an IM
/// channel that is also when its reply is known: the forward is queued (or skipped, and
/// why).
fn turn_polled(job: &Job, turn: Turn, now: Timestamp) -> Transition {
    if job.outbound() != Some(Outbound::Delivered) || job.parent_turn.is_some() {
        return Transition::ignored(job);
    }
    let (status, reply) = match turn {
        Turn::Running => return Transition::ignored(job),
        Turn::Ended { status, reply } => (status, Some(reply)),
        Turn::Gone => ("unknown".to_owned(), None),
    };
    let mut next = job.clone();
    let mut outcomes = vec![Outcome::Followed];
    if next.forwards() && next.forward.is_none() {
        let skipped = |reason: String| Forward {
            status: ForwardStatus::Skipped,
            attempts: 0,
            last_http_status: None,
            at: Some(now),
            reason: Some(reason),
            text: None,
            since: None,
            attempt_started_at: None,
        };
        let forward = match (status.as_str(), reply) {
            ("completed", Some(reply)) if !reply.is_empty() => Forward {
                status: ForwardStatus::Pending,
                at: None,
                reason: None,
                text: Some(crate::text::truncate_chars(reply, describe::MAX_FORWARD_CHARS)),
                since: Some(now),
                ..skipped(String::new())
            },
            ("completed", _) => skipped("the parent's final reply was empty".to_owned()),
            ("unknown", None) => skipped(
                "the parent's turn record is gone (the server restarted?), so its reply is not known"
                    .to_owned(),
            ),
            (other, _) => skipped(format!("the parent's turn {other}: there is no reply to send")),
        };
        outcomes.push(match forward.status {
            ForwardStatus::Pending => Outcome::Claimed,
            _ => Outcome::ForwardSkipped,
        });
        next.forward = Some(forward);
    } else if next.toasts() && next.forward.is_none() {
        // A console parent: one toast says what arrived, whatever the turn replied.
        next.forward = Some(Forward {
            status: ForwardStatus::Pending,
            attempts: 0,
            last_http_status: None,
            at: None,
            reason: None,
            text: Some(describe::toast_text(&next, &status)),
            since: Some(now),
            attempt_started_at: None,
        });
        outcomes.push(Outcome::Claimed);
    }
    next.parent_turn = Some(status);
    next.updated_at = now;
    Transition::to(next, outcomes)
}

/// A forward that may go now: pending, not in flight.
pub fn forward_due(job: &Job) -> bool {
    job.forward
        .as_ref()
        .is_some_and(|f| f.status == ForwardStatus::Pending && f.attempt_started_at.is_none())
}

fn forward_mut(job: &mut Job) -> &mut Forward {
    job.forward.as_mut().expect("a forward to update")
}

/// A healthy channel: claim the send (write-ahead). Otherwise hold it, until
/// `--busy-deadline` after it became pending; a channel that is not there at all fails it.
fn channel_checked(job: &Job, health: Health, now: Timestamp, limits: &Limits) -> Transition {
    if !forward_due(job) {
        return Transition::ignored(job);
    }
    let mut next = job.clone();
    next.updated_at = now;
    let forward = forward_mut(&mut next);
    let held = match health {
        Health::Healthy => {
            forward.attempts += 1;
            forward.attempt_started_at = Some(now);
            let text = forward.text.clone().unwrap_or_default();
            return Transition {
                job: next,
                effect: Effect::Forward { text },
                outcomes: vec![Outcome::Claimed],
            };
        }
        Health::Missing { detail } => {
            forward.status = ForwardStatus::Failed;
            forward.at = Some(now);
            forward.reason = Some(format!("the channel cannot send: {detail}"));
            return Transition::to(next, vec![Outcome::ForwardFailed]);
        }
        Health::Unhealthy { detail } => format!("the channel is not healthy ({detail})"),
        Health::Unknown { error } => format!("could not ask the channel's health: {error}"),
    };
    let expired = forward
        .since
        .is_some_and(|since| since.elapsed_at(now) > limits.busy_deadline);
    if expired {
        forward.status = ForwardStatus::Failed;
        forward.at = Some(now);
        forward.reason = Some(format!("{held}, for longer than --busy-deadline"));
        return Transition::to(next, vec![Outcome::ForwardFailed]);
    }
    forward.reason = Some(held);
    Transition::to(next, vec![Outcome::ForwardHeld])
}

/// Records a send's outcome. Never sent twice once the server said 2xx; an unknown
/// outcome is never retried (the person would get it twice).
fn forwarded(job: &Job, sent: Sent, now: Timestamp) -> Transition {
    if !job.forward_in_flight() {
        return Transition::ignored(job);
    }
    let mut next = job.clone();
    next.updated_at = now;
    let forward = forward_mut(&mut next);
    forward.attempt_started_at = None;
    let outcome = match sent {
        Sent::Accepted => {
            forward.status = ForwardStatus::Sent;
            forward.last_http_status = Some(200);
            forward.at = Some(now);
            forward.reason = None;
            Outcome::Forwarded
        }
        Sent::Failed {
            http_status,
            detail,
        } => {
            forward.last_http_status = http_status;
            if forward.attempts >= FORWARD_ATTEMPTS {
                forward.status = ForwardStatus::Failed;
                forward.at = Some(now);
                forward.reason = Some(format!(
                    "{detail}; gave up after {} sends",
                    forward.attempts
                ));
                Outcome::ForwardFailed
            } else {
                forward.reason = Some(format!("{detail}; trying again"));
                Outcome::ForwardHeld
            }
        }
        Sent::Rejected {
            http_status,
            detail,
        } => {
            forward.status = ForwardStatus::Failed;
            forward.last_http_status = Some(http_status);
            forward.at = Some(now);
            forward.reason = Some(format!("{http_status}: {detail}"));
            Outcome::ForwardFailed
        }
        Sent::Unknown { error } => {
            forward.status = ForwardStatus::Unconfirmed;
            forward.at = Some(now);
            forward.reason = Some(format!(
                "{error}; not sent again, so the person never gets it twice"
            ));
            Outcome::ForwardUnconfirmed
        }
    };
    Transition::to(next, vec![outcome])
}

/// A cancel stops a live watch; the child task keeps running. One that meets a POST in
/// flight, or a delivery of unknown outcome, still cancels (the result may already be on
/// its way: `describe` says so).
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
        Status::Unconfirmed => Outcome::CancelledInFlight,
        Status::Pending | Status::Delivering => Outcome::Cancelled,
        _ => return Transition::ignored(job),
    };
    let mut next = job.clone();
    if next.check_in.take().is_some() {
        // A check-in on its way is dropped with the watch; the answer to one in flight
        // finds nothing to record.
        next.final_text = None;
        next.delivery = None;
    }
    next.status = Status::Cancelled;
    next.note = None;
    next.updated_at = now;
    Transition::to(next, vec![outcome])
}

/// `atc redeliver`: a turn given up (busy, unreachable, no such chat, refused) goes back
/// to delivering and through every check again; one of unknown outcome is read back
/// again first, so it is never posted twice.
fn redeliver(job: &Job, create_session: bool, now: Timestamp) -> Transition {
    let outbound = match job.status {
        Status::Error => Outbound::Delivering,
        _ => match job.outbound() {
            Some(Outbound::Undelivered | Outbound::Misrouted) => Outbound::Delivering,
            Some(Outbound::Unconfirmed) => Outbound::Unconfirmed,
            // Queued again without leave to start the chat (a misrouted result requeued
            // by a plain `redeliver`): `--create-session` now gives that leave.
            Some(Outbound::Delivering) if create_session && !job.options.create_session => {
                Outbound::Delivering
            }
            _ => return Transition::ignored(job),
        },
    };
    if job.turn().is_none() || job.in_flight() {
        return Transition::ignored(job);
    }
    let mut next = job.clone();
    if next.status == Status::Error {
        next.status = Status::Delivering;
    } else {
        next.set_outbound(outbound);
    }
    next.options.create_session |= create_session;
    next.updated_at = now;
    let delivery = next.delivery.get_or_insert_with(Delivery::default);
    delivery.waiting_since = None;
    delivery.next_attempt_at = None;
    if outbound == Outbound::Unconfirmed {
        delivery.unknown_since = Some(now);
        delivery.read_back_closed_at = None;
    }
    Transition::to(next, vec![Outcome::Requeued])
}

/// A job left with a POST in flight by a tick that died: the outcome is unknown, so it
/// is read back before anything is posted again.
fn recovered(job: &Job, now: Timestamp) -> Transition {
    let Some(started) = job.delivery.as_ref().and_then(|d| d.attempt_started_at) else {
        if job.forward_in_flight() {
            let mut next = job.clone();
            next.updated_at = now;
            let forward = forward_mut(&mut next);
            forward.attempt_started_at = None;
            forward.status = ForwardStatus::Unconfirmed;
            forward.at = Some(now);
            forward.reason = Some(
                "an atc tick stopped while sending it; not sent again, so the person never gets it twice"
                    .to_owned(),
            );
            return Transition::to(next, vec![Outcome::ForwardUnconfirmed]);
        }
        return Transition::ignored(job);
    };
    let cancelled = job.status == Status::Cancelled;
    if !cancelled && job.outbound() != Some(Outbound::Delivering) {
        return Transition::ignored(job);
    }
    let mut next = job.clone();
    next.updated_at = now;
    delivery(&mut next).attempt_started_at = None;
    if cancelled {
        delivery(&mut next).unknown_since = Some(now);
        next.note = Some(
            "cancelled while its result was being posted; whether the result arrived is unknown"
                .to_owned(),
        );
        return Transition::to(next, vec![Outcome::RecoveredUnconfirmed]);
    }
    let d = delivery(&mut next);
    d.unknown_since = Some(now);
    d.last_attempt_at = Some(started);
    next.set_outbound(Outbound::Unconfirmed);
    let why = format!("an atc tick stopped while posting the result (attempt started {started})");
    delivery_error(&mut next, Some(why));
    Transition::to(next, vec![Outcome::RecoveredUnconfirmed])
}

/// The read-back window of an unknown delivery closed (`--busy-deadline` after its
/// outcome became unknown): recorded once, so the tick that sees it says so once, and the
/// job says a person must look now, not that atc will.
fn read_back_closed(job: &Job, now: Timestamp, limits: &Limits) -> Transition {
    if !read_back_over(job, now, limits) {
        return Transition::ignored(job);
    }
    let mut next = job.clone();
    next.updated_at = now;
    delivery(&mut next).read_back_closed_at = Some(now);
    Transition::to(next, vec![Outcome::ReadBackClosed])
}

/// An unknown delivery whose read-back window has closed and is not yet recorded as such.
fn read_back_over(job: &Job, now: Timestamp, limits: &Limits) -> bool {
    job.outbound() == Some(Outbound::Unconfirmed)
        && !job.in_flight()
        && job
            .delivery
            .as_ref()
            .is_some_and(|d| d.read_back_closed_at.is_none())
        && !reading_back(job, now, limits)
}

/// Becomes the carrier of its group's one turn (its text in `turn_text`, its own block
/// kept in `final`); a carrier whose turn is not claimed yet is sealed again when its
/// members change (one was cancelled).
fn sealed(job: &Job, text: String, tasks: Vec<String>, now: Timestamp) -> Transition {
    let reseal = job.group_tasks.is_some()
        && job.turn_text.is_some()
        && job.outbound() == Some(Outbound::Delivering)
        && job
            .delivery
            .as_ref()
            .is_none_or(|d| d.unknown_since.is_none());
    if !group_member_ready(job) || job.carried_by.is_some() || job.group_tasks.is_some() && !reseal
    {
        return Transition::ignored(job);
    }
    let mut next = job.clone();
    next.turn_text = Some(text);
    next.group_tasks = Some(tasks);
    if !reseal {
        if next.status.ends_without_answer() {
            next.notice = Some(Outbound::Delivering);
        }
        next.delivery = Some(Delivery::default());
    }
    if next == *job {
        return Transition::ignored(job);
    }
    next.updated_at = now;
    Transition::to(next, vec![Outcome::Sealed])
}

/// Its result travels in `carrier`'s turn.
fn carried(job: &Job, carrier: String, now: Timestamp) -> Transition {
    let ready = group_member_ready(job) || batchable(job);
    if !ready || job.group_tasks.is_some() || job.carried_by.is_some() || carrier == job.job_id {
        return Transition::ignored(job);
    }
    let mut next = job.clone();
    next.carried_by = Some(carrier);
    if next.status.ends_without_answer() {
        next.notice = Some(Outbound::Delivering);
    }
    next.updated_at = now;
    let outcome = if job.options.group.is_some() {
        Outcome::Sealed
    } else {
        Outcome::Batched
    };
    Transition::to(next, vec![outcome])
}

/// The carrier went away before delivering: wait to be sealed into a new turn.
fn unsealed(job: &Job, now: Timestamp) -> Transition {
    if job.carried_by.is_none() || job.outbound() != Some(Outbound::Delivering) {
        return Transition::ignored(job);
    }
    let mut next = job.clone();
    next.carried_by = None;
    // A group member's notice exists only in its group's turn; a batched one is its own.
    if next.status.ends_without_answer() && next.options.group.is_some() {
        next.notice = None;
    }
    next.updated_at = now;
    Transition::to(next, vec![Outcome::Unsealed])
}

/// What the jobs carried by a carrier that was cancelled do: its turn may have been
/// posted before the cancel (then they follow where it may have landed), or not.
#[derive(Debug)]
pub enum CancelledTurn {
    /// Nothing of the turn was posted: they go in another turn.
    Free,
    /// Its POST is still in flight: wait for its outcome.
    Wait,
    /// Follow this (the turn as it landed: delivered, or of unknown outcome, which a
    /// person settles: atc cannot read it back by another job's delivery id).
    Follow(Box<Job>),
}

/// See [`CancelledTurn`].
pub fn cancelled_turn(carrier: &Job) -> CancelledTurn {
    if carrier.in_flight() {
        return CancelledTurn::Wait;
    }
    let unknown = carrier.delivery.as_ref().and_then(|d| d.unknown_since);
    let mut turn = carrier.clone();
    if carrier.delivered_at.is_some() {
        turn.status = Status::Done;
    } else if let Some(since) = unknown {
        turn.status = Status::Unconfirmed;
        let d = delivery(&mut turn);
        d.read_back_closed_at = Some(since);
        d.error = Some(
            "the turn carrying it was cancelled while being posted; whether it arrived is unknown"
                .to_owned(),
        );
    } else {
        return CancelledTurn::Free;
    }
    CancelledTurn::Follow(Box::new(turn))
}

/// A job outside any group whose turn may still be composed into a batch (or out of
/// one): on its way, never claimed into a POST of unknown outcome, not in flight. A
/// `--check-in` (the turn of a job still pending) may travel in a batch as a member, never
/// as its carrier: see [`can_carry`].
pub fn batchable(job: &Job) -> bool {
    job.options.group.is_none()
        && job.final_text.is_some()
        && job.outbound() == Some(Outbound::Delivering)
        && !job.in_flight()
        && job
            .delivery
            .as_ref()
            .is_none_or(|d| d.unknown_since.is_none())
}

/// A batchable job that may carry a batch: not a check-in. A check-in's job goes back to
/// plain pending once its turn is out, so a batch it carried would go out again with each
/// later check-in.
pub fn can_carry(job: &Job) -> bool {
    batchable(job) && job.status != Status::Pending
}

/// Carries `tasks` in its turn, `text` (or, alone, its own block again). Its delivery
/// record stays: a busy chat's back-off holds the whole batch.
fn batched(job: &Job, text: Option<String>, tasks: Vec<String>, now: Timestamp) -> Transition {
    if !can_carry(job) || job.carried_by.is_some() {
        return Transition::ignored(job);
    }
    let mut next = job.clone();
    if tasks.len() > 1 && text.is_some() {
        next.turn_text = text;
        next.group_tasks = Some(tasks);
    } else {
        next.turn_text = None;
        next.group_tasks = None;
    }
    if next == *job {
        return Transition::ignored(job);
    }
    next.updated_at = now;
    Transition::to(next, vec![Outcome::Batched])
}

/// A group member with something for the turn: finished (delivering), or ended without
/// an answer with notices on.
fn group_member_ready(job: &Job) -> bool {
    job.options.group.is_some()
        && match job.status {
            Status::Delivering => !job.in_flight(),
            status if status.ends_without_answer() => {
                job.options.on_no_answer == OnNoAnswer::Notify
                    && job.notice.is_none_or(|n| n == Outbound::Delivering)
            }
            _ => false,
        }
}

/// Mirrors the carrier's turn: where it stands, and where and when it landed.
fn followed(job: &Job, carrier: &Job, now: Timestamp) -> Transition {
    let (Some(mine), Some(theirs)) = (job.outbound(), carrier.outbound()) else {
        return Transition::ignored(job);
    };
    if job.carried_by.as_deref() != Some(carrier.job_id.as_str())
        || mine == theirs
        || theirs == Outbound::Delivering
    {
        return Transition::ignored(job);
    }
    let mut next = job.clone();
    next.set_outbound(theirs);
    if let Some(closed) = carrier
        .delivery
        .as_ref()
        .and_then(|d| d.read_back_closed_at)
    {
        delivery(&mut next).read_back_closed_at = Some(closed);
    }
    next.delivered_at = carrier.delivered_at;
    next.turn_task_id = carrier.turn_task_id.clone();
    next.chat_id = carrier.chat_id.clone();
    let why = carrier.delivery.as_ref().and_then(|d| d.error.clone());
    delivery_error(&mut next, why);
    // Its result may be in the chat (in the carrier's turn), whatever becomes of the
    // carrier's record: a cancel and a re-watch must not post it again.
    let unknown = carrier.delivery.as_ref().and_then(|d| d.unknown_since);
    delivery(&mut next).unknown_since = match theirs {
        Outbound::Unconfirmed => unknown.or(Some(now)),
        _ => unknown,
    };
    next.updated_at = now;
    let outcome = match theirs {
        Outbound::Delivered => Outcome::Delivered,
        Outbound::Unconfirmed => Outcome::Unconfirmed,
        Outbound::Undelivered => Outcome::Undelivered,
        Outbound::Misrouted => Outcome::Misrouted,
        Outbound::Delivering => Outcome::Ignored,
    };
    Transition::to(next, vec![outcome])
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
/// re-watching with a corrected URL is how a wrong one is fixed). So is another group.
pub fn register(
    existing: Option<&Job>,
    target: &Target,
    base_url: &str,
    group: Option<&str>,
) -> Registration {
    let Some(job) = existing else {
        return Registration::New;
    };
    let same_target =
        job.target == *target && job.base_url == base_url && job.options.group.as_deref() == group;
    // Its result travels in a group's turn that has not gone out: watched again alone, the
    // result would go out twice (once alone, once in the group's turn).
    let in_group_turn = job.options.group.is_some()
        && (job.carried_by.is_some() || job.group_tasks.is_some())
        && job.status != Status::Cancelled
        && job.outbound().is_some_and(|o| o != Outbound::Delivered);
    match job.status {
        Status::Done | Status::Unconfirmed => Registration::Refuse { was: job.status },
        Status::Cancelled if may_have_gone_out(job) => Registration::Refuse { was: job.status },
        Status::Pending | Status::Delivering if same_target => Registration::AlreadyWatching,
        // A POST to the old chat is under way: retargeting now could deliver twice.
        Status::Delivering if job.in_flight() => Registration::Refuse { was: job.status },
        _ if in_group_turn => Registration::Refuse { was: job.status },
        was => Registration::Replace { was, same_target },
    }
}

/// A cancelled job whose turn may be in the chat already: the cancel met its POST (which
/// was accepted, or whose outcome is unknown).
pub fn may_have_gone_out(job: &Job) -> bool {
    job.delivered_at.is_some()
        || job.delivery.as_ref().is_some_and(|d| {
            d.unknown_since.is_some()
                || d.attempt_started_at.is_some()
                || d.last_http_status.is_some_and(|s| (200..300).contains(&s))
        })
}

/// True when the job holds its child's rendered result, not delivered: a re-watch keeps
/// it rather than poll a task whose record the server may have lost since.
pub fn holds_result(job: &Job) -> bool {
    job.final_text.is_some()
        && job.outcome.is_some()
        && (job.group_tasks.is_none() || job.carries_batch())
        && matches!(
            job.status,
            Status::Delivering | Status::Undelivered | Status::Misrouted | Status::Error
        )
}

/// A live job watched again with other options: what it takes (`applied`) and what it
/// cannot take any more, because its result is already rendered or travels in its
/// group's turn (`not_applied`), by flag name.
fn reoption(job: &Job, wanted: &Options) -> (Job, Vec<&'static str>, Vec<&'static str>) {
    let mut next = job.clone();
    let (mut applied, mut not_applied) = (Vec::new(), Vec::new());
    let have = job.options.clone();
    let rendered = job.status != Status::Pending;
    let carried = job.carried_by.is_some() || job.group_tasks.is_some();
    let mut take = |flag: &'static str, changed: bool, frozen: bool| {
        if changed {
            if frozen {
                not_applied.push(flag);
            } else {
                applied.push(flag);
            }
        }
        changed && !frozen
    };
    if take(
        "--on-no-answer",
        have.on_no_answer != wanted.on_no_answer,
        rendered,
    ) {
        next.options.on_no_answer = wanted.on_no_answer;
    }
    if take("--on-empty", have.on_empty != wanted.on_empty, rendered) {
        next.options.on_empty = wanted.on_empty;
    }
    if take(
        "--fork-branch",
        have.fork_branch != wanted.fork_branch,
        rendered,
    ) {
        next.options.fork_branch = wanted.fork_branch.clone();
    }
    if take(
        "--create-session",
        have.create_session != wanted.create_session,
        carried,
    ) {
        next.options.create_session = wanted.create_session;
    }
    if take("--forward", have.forward != wanted.forward, carried) {
        next.options.forward = wanted.forward;
    }
    if take(
        "--allow-insecure-remote",
        have.allow_insecure_remote != wanted.allow_insecure_remote,
        false,
    ) {
        next.options.allow_insecure_remote = wanted.allow_insecure_remote;
    }
    if take(
        "--check-in",
        have.check_in_secs != wanted.check_in_secs,
        rendered,
    ) {
        next.options.check_in_secs = wanted.check_in_secs;
    }
    if take(
        "--stop-after",
        have.stop_after_secs != wanted.stop_after_secs,
        rendered,
    ) {
        next.options.stop_after_secs = wanted.stop_after_secs;
    }
    (next, applied, not_applied)
}

/// One `atc watch` of one or more tasks, to one parent chat.
#[derive(Clone, Debug)]
pub struct WatchRequest {
    pub task_ids: Vec<String>,
    pub target: Target,
    pub base_url: String,
    pub options: Options,
    /// The parent chat's id, when `watch` looked it up.
    pub chat_id: Option<String>,
    /// The child sessions known, by task id (`--child-session`, `[SESSION: …]` lines).
    pub child_sessions: Vec<(String, String)>,
}

/// What a watch did with one task.
#[derive(Clone, Debug, PartialEq)]
pub enum Registered {
    /// A new record.
    New(Job),
    /// The live record for the same target, kept as it is.
    AlreadyWatching(Job),
    /// The live record for the same target, with the options that changed (`applied`), and
    /// those it could not take any more (`not_applied`: its result is already rendered, or
    /// travels in its group's turn).
    Updated {
        job: Job,
        applied: Vec<&'static str>,
        not_applied: Vec<&'static str>,
    },
    /// A record holding its result (not delivered), sent where the new watch says: the
    /// result is kept, never polled again. `old` is the record it replaced.
    Kept { old: Box<Job>, job: Job },
    /// A live record sent to another chat: the old record and the new.
    Retargeted { old: Box<Job>, job: Job },
    /// A record that had ended, replaced by a fresh watch.
    Rewatched { was: Status, job: Job },
}

impl Registered {
    /// The options of the watch that this registration did not take (flag names).
    pub fn not_applied(&self) -> &[&'static str] {
        match self {
            Registered::Updated { not_applied, .. } => not_applied,
            _ => &[],
        }
    }

    pub fn job(&self) -> &Job {
        match self {
            Registered::New(job)
            | Registered::AlreadyWatching(job)
            | Registered::Updated { job, .. }
            | Registered::Kept { job, .. }
            | Registered::Retargeted { job, .. }
            | Registered::Rewatched { job, .. } => job,
        }
    }
}

/// Why a watch was refused; nothing it registered is kept.
#[derive(Clone, Debug, PartialEq)]
pub enum WatchRefused {
    /// The group already went out (or is going out) to this chat.
    GroupWentOut { group: String },
    /// This task's result went out, may have, or is going out right now.
    Task { job: Box<Job>, was: Status },
}

/// Applies a watch to the jobs of the file (`new_id` names each new registration). On a
/// refusal the caller must not keep `jobs` (`store.update` does not save an error).
pub fn watch(
    jobs: &mut Vec<Job>,
    request: &WatchRequest,
    mut new_id: impl FnMut() -> String,
    now: Timestamp,
) -> Result<Vec<Registered>, WatchRefused> {
    let (target, base_url) = (&request.target, &request.base_url);
    let group = request.options.group.as_deref();
    // Groups are per parent chat, whichever agent each member runs on (the skill runs one
    // `atc watch … --group G` per `--target-agent`): a member joining after the group's
    // turn went out would be held for it forever.
    let chat = (
        base_url.as_str(),
        target.agent_id.as_str(),
        target.session_id.as_str(),
        target.user_id.as_str(),
        target.channel.as_str(),
    );
    let member = |j: &&Job| j.options.group.as_deref() == group && j.chat_key() == chat;
    // A task not in the group's sealed turn would be a late member, whether or not the
    // watch names the tasks already in it.
    let sealed: Vec<&String> = jobs
        .iter()
        .filter(member)
        .filter(|j| j.status != Status::Cancelled)
        .filter_map(|j| j.group_tasks.as_ref())
        .flatten()
        // A member cancelled has left the sealed turn (it is sealed again without it).
        .filter(|t| {
            !jobs
                .iter()
                .any(|j| j.task_id == **t && j.status == Status::Cancelled)
        })
        .collect();
    let late = !sealed.is_empty() && request.task_ids.iter().any(|t| !sealed.contains(&t));
    if let Some(name) = group
        && (late
            || jobs.iter().filter(member).any(|j| {
                !request.task_ids.contains(&j.task_id)
                    && (j.group_tasks.is_some() || j.carried_by.is_some())
            }))
    {
        return Err(WatchRefused::GroupWentOut {
            group: name.to_owned(),
        });
    }
    // The file as the watch found it: a carrier replaced earlier in this loop still says
    // which results its turn carries.
    let before = jobs.clone();
    let mut done = Vec::new();
    for task_id in &request.task_ids {
        let existing = jobs.iter().find(|j| j.task_id == *task_id);
        let mut fresh = Job::new(
            new_id(),
            task_id.clone(),
            base_url.clone(),
            target.clone(),
            now,
        );
        fresh.options = request.options.clone();
        fresh.chat_id = request.chat_id.clone();
        // Cancelled after its result was sealed into a group's turn: that turn carries it
        // (or carried it) still.
        if let Some(job) = existing
            && job.status == Status::Cancelled
            && let Some(carrier) = &job.carried_by
            && before.iter().any(|c| {
                c.job_id == *carrier
                    && (c.status != Status::Cancelled || may_have_gone_out(c))
                    && c.group_tasks.as_ref().is_some_and(|t| t.contains(task_id))
            })
        {
            return Err(WatchRefused::Task {
                job: Box::new(job.clone()),
                was: Status::Cancelled,
            });
        }
        // The same task is the same child, whoever watches it: a session already known is
        // kept (with its chat) unless this watch names another.
        let asked = request
            .child_sessions
            .iter()
            .find(|(t, _)| t == task_id)
            .map(|(_, s)| s.clone());
        let known = existing.and_then(|j| j.child_session.clone());
        fresh.child_session = asked.clone().or(known.clone());
        if fresh.child_session == known {
            fresh.child_chat_id = existing.and_then(|j| j.child_chat_id.clone());
        }
        // Its block travels in another job's turn that is being posted or may have been:
        // replaced, it could go out twice.
        let carried_out = existing
            .and_then(|j| j.carried_by.as_deref())
            .and_then(|c| before.iter().find(|j| j.job_id == c))
            .is_some_and(|c| {
                c.in_flight()
                    || matches!(
                        c.outbound(),
                        Some(Outbound::Unconfirmed | Outbound::Delivered)
                    )
                    || c.status == Status::Cancelled
                        && !matches!(cancelled_turn(c), CancelledTurn::Free)
                    // A POST of its turn had an unknown outcome once (it may be in a chat
                    // already): that turn is never composed again, and still carries it.
                    || c.delivery.as_ref().is_some_and(|d| d.unknown_since.is_some())
            });
        let registration = match register(existing, target, base_url, group) {
            Registration::Replace { was, .. } if carried_out => Registration::Refuse { was },
            other => other,
        };
        let registered = match registration {
            Registration::New => Registered::New(fresh),
            Registration::AlreadyWatching => {
                let job = existing.cloned().expect("a live record exists");
                let (mut next, mut applied, not_applied) = reoption(&job, &request.options);
                if asked.is_some() && asked != job.child_session {
                    next.child_session = asked;
                    next.child_chat_id = None;
                    applied.push("--child-session");
                }
                if applied.is_empty() && not_applied.is_empty() {
                    done.push(Registered::AlreadyWatching(job));
                    continue;
                }
                let mut next = next;
                if next != job {
                    next.updated_at = now;
                }
                Registered::Updated {
                    job: next,
                    applied,
                    not_applied,
                }
            }
            Registration::Replace { .. } if existing.is_some_and(holds_result) => {
                let old = existing.cloned().expect("a record exists");
                let mut job = fresh;
                job.status = Status::Delivering;
                job.final_text = old.final_text.clone();
                job.stopped_at = old.stopped_at;
                job.outcome = old.outcome;
                job.started_at = old.started_at;
                job.delivery = Some(Delivery::default());
                Registered::Kept {
                    old: Box::new(old),
                    job,
                }
            }
            Registration::Replace { was, same_target } => {
                let old = existing.cloned().expect("a record exists");
                if !same_target && !was.is_terminal() {
                    Registered::Retargeted {
                        old: Box::new(old),
                        job: fresh,
                    }
                } else {
                    Registered::Rewatched { was, job: fresh }
                }
            }
            Registration::Refuse { was } => {
                let job = existing.cloned().expect("a refusal is about a record");
                return Err(WatchRefused::Task {
                    job: Box::new(job),
                    was,
                });
            }
        };
        jobs.retain(|j| j.task_id != *task_id);
        jobs.push(registered.job().clone());
        done.push(registered);
    }
    Ok(done)
}

/// The job `atc redeliver <task>` acts on, by position: the task's own, or, for a group
/// member whose result travels in its carrier's turn, the carrier's.
pub fn redelivery(jobs: &[Job], task_id: &str) -> Option<usize> {
    let i = jobs.iter().position(|j| j.task_id == task_id)?;
    let carrier = jobs[i].carried_by.as_deref();
    Some(
        carrier
            .and_then(|c| jobs.iter().position(|j| j.job_id == c))
            .unwrap_or(i),
    )
}

/// The jobs a tick polls: every pending one.
pub fn to_poll(jobs: &[Job]) -> Vec<&Job> {
    jobs.iter()
        .filter(|job| job.status == Status::Pending)
        .collect()
}

/// The delivered turns whose end a tick asks about (the parent turn's own task), for
/// `--busy-deadline` after delivery.
pub fn to_follow<'a>(jobs: &'a [Job], now: Timestamp, limits: &Limits) -> Vec<&'a Job> {
    jobs.iter()
        .filter(|job| {
            job.outbound() == Some(Outbound::Delivered)
                && job.carried_by.is_none()
                && job.turn_task_id.is_some()
                && job.parent_turn.is_none()
                && job
                    .delivered_at
                    .is_some_and(|at| at.elapsed_at(now) <= limits.busy_deadline)
        })
        .collect()
}

/// The jobs a tick recovers first (by position): a POST or a forward in flight. The tick
/// lock says no other tick is running, so the tick that claimed them died.
pub fn interrupted(jobs: &[Job]) -> Vec<usize> {
    jobs.iter()
        .enumerate()
        .filter(|(_, job)| job.in_flight() || job.forward_in_flight())
        .map(|(i, _)| i)
        .collect()
}

/// The jobs (by position) whose read-back window has closed since the last tick.
pub fn read_backs_closed(jobs: &[Job], now: Timestamp, limits: &Limits) -> Vec<usize> {
    jobs.iter()
        .enumerate()
        .filter(|(_, job)| read_back_over(job, now, limits))
        .map(|(i, _)| i)
        .collect()
}

/// The forwards due now.
pub fn forwards(jobs: &[Job]) -> Vec<&Job> {
    jobs.iter().filter(|job| forward_due(job)).collect()
}

/// The turns due now: the oldest registration per parent chat. A second POST into the
/// same chat would only meet a busy chat behind the turn the first one starts.
pub fn deliveries<'a>(jobs: &'a [Job], now: Timestamp, limits: &Limits) -> Vec<&'a Job> {
    let mut due: Vec<&Job> = jobs.iter().filter(|job| is_due(job, now, limits)).collect();
    // A chat's batch before any job that did not fit in it.
    due.sort_by_key(|job| (!job.carries_batch(), job.registered_at));
    let mut chats = HashSet::new();
    due.retain(|job| chats.insert(job.chat_key()));
    due
}

/// True when no job can change in this tick unless the server says something new about
/// it: nothing is watched, no turn or notice is on its way or being read back, no forward
/// is due. (Turns to follow are chosen separately, by [`to_follow`].) A tick over such a
/// file has nothing to do after its first phase.
pub fn settled(jobs: &[Job]) -> bool {
    jobs.iter().all(settled_job)
}

/// One job of [`settled`]: ended, its turn not on its way (nor read back: an unknown
/// one whose window closed is a person's now), no forward due, not waiting for its
/// group's turn.
pub fn settled_job(job: &Job) -> bool {
    let on_its_way = match job.outbound() {
        Some(Outbound::Delivering) => true,
        Some(Outbound::Unconfirmed) => job
            .delivery
            .as_ref()
            .is_none_or(|d| d.read_back_closed_at.is_none()),
        _ => false,
    };
    job.status.is_terminal() && !on_its_way && !forward_due(job) && !awaits_group(job)
}

/// A group member that ended without an answer and whose notice waits to go out in its
/// group's turn (it has no outbound turn of its own until the group is sealed).
pub fn awaits_group(job: &Job) -> bool {
    job.options.group.is_some()
        && job.status.ends_without_answer()
        && job.options.on_no_answer == OnNoAnswer::Notify
        && job.notice.is_none()
}

/// Ended jobs are kept for `keep` after their last change, then pruned; never while
/// their outbound turn is still being delivered or read back.
pub fn prunable(job: &Job, now: Timestamp, limits: &Limits) -> bool {
    let settling = match job.outbound() {
        Some(Outbound::Delivering) => true,
        Some(Outbound::Unconfirmed) => reading_back(job, now, limits),
        _ => false,
    } || forward_due(job)
        || awaits_group(job);
    job.status.is_terminal() && !settling && job.updated_at.elapsed_at(now) > limits.keep
}

#[cfg(test)]
mod tests;
