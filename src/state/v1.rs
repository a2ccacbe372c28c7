//! Reading a version-1 job file, and the one migration to version 2.
//!
//! Version 1 kept a turn on the job that carried it (the *carrier*: `delivery`,
//! `delivered_at`, `turn_task_id`, `parent_turn`, `forward`, the blocks it carried in
//! `group_tasks` and a batch's text in `turn_text`), with the other jobs it carried
//! pointing at it (`carried_by`) and mirroring where it landed. Version 2 keeps each turn
//! as a record of its own (`turns`); [`migrate`] makes one from each carrier (or each job
//! with a turn of its own), with the same delivery id (`atc-<carrier's job id>`, or
//! `…-c<n>` for a check-in) so that a turn of unknown outcome is still read back where
//! version 1 posted it, and a carrier whose write-ahead record was saved becomes a
//! claimed turn in flight: the next tick recovers it as unconfirmed and reads it back,
//! never posting it blind. Nothing is lost: a member whose carrier's record is gone gets
//! a turn from what it mirrored; fields this atc does not know stay in `extra`.
//!
//! The migration is a pure function of the file's bytes: the same v1 file always reads as
//! the same v2 file, and it is written as version 2 on the first save.

use std::collections::HashMap;

use serde::Deserialize;

use crate::job::{Job, OnNoAnswer, Outbound, Status};
use crate::time::Timestamp;
use crate::turn::{Block, BlockKind, Chat, Delivery, Forward, Turn, TurnState};

/// A job as version 1 wrote it: the version-2 fields, and the turn's fields a carrier
/// held.
#[derive(Debug, Deserialize)]
pub struct V1Job {
    #[serde(default)]
    pub delivery: Option<Delivery>,
    #[serde(default)]
    pub delivered_at: Option<Timestamp>,
    #[serde(default)]
    pub turn_task_id: Option<String>,
    #[serde(default)]
    pub parent_turn: Option<String>,
    #[serde(default)]
    pub forward: Option<Forward>,
    #[serde(default)]
    pub group_tasks: Option<Vec<String>>,
    #[serde(default)]
    pub turn_text: Option<String>,
    #[serde(default)]
    pub carried_by: Option<String>,
    #[serde(flatten)]
    pub job: Job,
}

#[derive(Debug, Deserialize)]
pub struct V1File {
    pub jobs: Vec<V1Job>,
}

/// Where a version-1 job's outbound turn stood (`Job::outbound` of version 1).
fn outbound(old: &V1Job) -> Option<Outbound> {
    let job = &old.job;
    match job.status {
        Status::Delivering => Some(Outbound::Delivering),
        Status::Done => Some(Outbound::Delivered),
        Status::Unconfirmed => Some(Outbound::Unconfirmed),
        Status::Undelivered => Some(Outbound::Undelivered),
        Status::Misrouted => Some(Outbound::Misrouted),
        Status::Lost | Status::Expired | Status::Abandoned => job.notice,
        Status::Pending => job.check_in,
        Status::Cancelled | Status::Skipped | Status::Error => None,
    }
}

/// The block a version-1 job had in a turn.
fn block_of(old: &V1Job) -> BlockKind {
    let job = &old.job;
    if job.status == Status::Pending && job.check_in.is_some() {
        BlockKind::CheckIn {
            n: job.check_ins + 1,
        }
    } else if job.status.ends_without_answer() {
        BlockKind::Notice
    } else {
        BlockKind::Result
    }
}

/// Version 1's delivery id of a carrier's turn.
fn delivery_id(old: &V1Job) -> String {
    match block_of(old) {
        BlockKind::CheckIn { n } => format!("atc-{}-c{n}", old.job.job_id),
        _ => format!("atc-{}", old.job.job_id),
    }
}

/// Where the turn a version-1 job carried (or mirrored) stands, if it has one: `None` for
/// a job with nothing on its way, and for a cancelled carrier whose POST never went out.
fn state_of(old: &V1Job) -> Option<TurnState> {
    let d = old.delivery.clone().unwrap_or_default();
    if old.job.status == Status::Cancelled {
        // The cancel met its POST: where that POST may have landed.
        return if d.attempt_started_at.is_some() {
            Some(TurnState::Claimed)
        } else if old.delivered_at.is_some()
            || d.last_http_status.is_some_and(|s| (200..300).contains(&s))
        {
            Some(TurnState::Delivered)
        } else if d.unknown_since.is_some() {
            Some(TurnState::Unconfirmed)
        } else {
            None
        };
    }
    if old.job.status == Status::Error {
        return Some(TurnState::Refused);
    }
    Some(match outbound(old)? {
        Outbound::Delivering if d.attempts > 0 || d.attempt_started_at.is_some() => {
            TurnState::Claimed
        }
        Outbound::Delivering => TurnState::Open,
        Outbound::Delivered => TurnState::Delivered,
        Outbound::Unconfirmed => TurnState::Unconfirmed,
        Outbound::Undelivered => TurnState::Undelivered,
        Outbound::Misrouted => TurnState::Misrouted,
    })
}

fn chat_of(job: &Job) -> Chat {
    crate::compose::chat_of(job)
}

/// A turn from a version-1 carrier's (or a mirroring member's) fields.
fn turn_from(old: &V1Job, turn_id: String, state: TurnState, text: Option<String>) -> Turn {
    let job = &old.job;
    let mut turn = Turn::new(
        turn_id,
        chat_of(job),
        job.finished_at.unwrap_or(job.updated_at),
    );
    turn.updated_at = job.updated_at;
    turn.group = job.options.group.clone();
    turn.create_session = job.options.create_session;
    turn.forward_mode = job.options.forward;
    turn.state = state;
    turn.text = text;
    turn.chat_id = job.chat_id.clone();
    turn.delivery = old.delivery.clone().unwrap_or_default();
    turn.delivered_at = old.delivered_at;
    turn.turn_task_id = old.turn_task_id.clone();
    turn.parent_turn = old.parent_turn.clone();
    turn.forward = old.forward.clone();
    if state == TurnState::Delivered
        && turn.delivered_at.is_none()
        && job.status == Status::Cancelled
    {
        turn.delivered_at = Some(job.updated_at);
    }
    turn
}

/// The version-1 jobs as version 2 keeps them: the jobs, and a turn for each turn they
/// carried.
pub fn migrate(old: Vec<V1Job>) -> (Vec<Job>, Vec<Turn>) {
    let by_id: HashMap<&str, usize> = old
        .iter()
        .enumerate()
        .map(|(i, o)| (o.job.job_id.as_str(), i))
        .collect();
    let mut turns: Vec<Turn> = Vec::new();
    let mut pointer: Vec<Option<String>> = vec![None; old.len()];
    let block = |o: &V1Job| Block {
        job_id: o.job.job_id.clone(),
        task_id: o.job.task_id.clone(),
        kind: block_of(o),
    };
    // Carriers, and jobs whose turn carried only themselves.
    for (i, o) in old.iter().enumerate() {
        if o.carried_by.is_some() {
            continue;
        }
        let Some(state) = state_of(o) else { continue };
        // A held group member has nothing on its way until its group is sealed.
        if o.job.options.group.is_some() && o.group_tasks.is_none() {
            continue;
        }
        let mut carries = Vec::new();
        match &o.group_tasks {
            Some(tasks) => {
                for task in tasks {
                    if *task == o.job.task_id {
                        carries.push(block(o));
                    } else if let Some(member) = old.iter().find(|m| {
                        m.job.task_id == *task && m.carried_by.as_deref() == Some(&o.job.job_id)
                    }) {
                        carries.push(block(member));
                    }
                }
                if !carries.iter().any(|b| b.job_id == o.job.job_id) {
                    carries.insert(0, block(o));
                }
            }
            None => carries.push(block(o)),
        }
        let text = o.turn_text.clone().or_else(|| o.job.final_text.clone());
        let mut turn = turn_from(o, delivery_id(o), state, text);
        turn.carries = carries;
        for b in &turn.carries {
            if let Some(&m) = by_id.get(b.job_id.as_str()) {
                pointer[m] = Some(turn.turn_id.clone());
            }
        }
        pointer[i] = Some(turn.turn_id.clone());
        turns.push(turn);
    }
    // Members whose carrier's record is gone: what they mirrored of its turn.
    for (i, o) in old.iter().enumerate() {
        let Some(carrier) = o.carried_by.as_deref() else {
            continue;
        };
        // A carrier that is there made its turn above. One cancelled made none: its member
        // waits to be composed again, or, if it followed where the turn landed before the
        // carrier was cancelled, keeps that from what it mirrored, as for a carrier gone.
        if let Some(&c) = by_id.get(carrier)
            && pointer[c].is_some()
        {
            continue;
        }
        let Some(state) = state_of(o).filter(|s| *s != TurnState::Open) else {
            continue;
        };
        let id = format!("atc-{carrier}");
        if let Some(existing) = turns.iter_mut().find(|t| t.turn_id == id) {
            existing.carries.push(block(o));
        } else {
            // Its text went with the carrier: it cannot be read back or posted again, only
            // looked at by a person.
            let mut turn = turn_from(o, id, state, None);
            turn.carries = vec![block(o)];
            if state == TurnState::Unconfirmed && turn.delivery.read_back_closed_at.is_none() {
                turn.delivery.read_back_closed_at =
                    turn.delivery.unknown_since.or(Some(o.job.updated_at));
            }
            turns.push(turn);
        }
        pointer[i] = Some(format!("atc-{carrier}"));
    }
    let jobs = old
        .into_iter()
        .zip(pointer)
        .map(|(o, turn)| {
            let mut job = o.job;
            // A check-in's or a notice's text is its turn's now; `final` is a result only.
            let notice = job.status.ends_without_answer();
            let checking_in = job.status == Status::Pending && job.check_in.is_some();
            if notice || checking_in {
                job.final_text = None;
            }
            // An old-format group carrier kept the whole group's turn in `final`.
            if o.group_tasks.is_some() && o.turn_text.is_none() && job.options.group.is_some() {
                job.final_text = None;
            }
            // A group member that ended without an answer owes its group a notice.
            if notice
                && job.options.group.is_some()
                && job.options.on_no_answer == OnNoAnswer::Notify
                && job.notice.is_none()
            {
                job.notice = Some(Outbound::Delivering);
            }
            job.turn = turn;
            job
        })
        .collect();
    (jobs, turns)
}
