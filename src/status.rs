//! What a job shows: one pure projection of the watch (the job) and the delivery (the turn
//! that carries what it owes, the one `Job::turn` names). `atc status`, its `--json`, the
//! file's `status` key (written at save for outside readers), `doctor`, `redeliver` and the
//! wording of a job's line read it here, never from a copy of the turn.
//!
//! The external words stay as they are (`pending`, `delivering`, `done`, `unconfirmed`,
//! `undelivered`, `misrouted`, `error`, and the watch's own: `lost`, `expired`,
//! `abandoned`, `cancelled`, `skipped`): scripts read them.

use crate::job::{Job, Status, Watch};
use crate::turn::{BlockKind, Turn, TurnState};

pub use crate::turn::claimed;

/// The block `job` owes or owed its parent, if any (on its way, or landed): its result,
/// its notice, or its current check-in. Where it stands is the turn's ([`delivery`]).
pub fn block(job: &Job) -> Option<BlockKind> {
    match job.watch {
        Watch::Pending => job.check_in.then_some(BlockKind::CheckIn {
            n: job.check_ins + 1,
        }),
        Watch::Lost | Watch::Expired | Watch::Abandoned => job.notice.then_some(BlockKind::Notice),
        Watch::Finished => Some(BlockKind::Result),
        Watch::Cancelled | Watch::Skipped => None,
    }
}

/// Where the block a job has on its way stands, read from the turn that carries it: a
/// block no turn carries yet is waiting, as in an open turn (`TurnState::Open`).
pub fn delivery(job: &Job, turn: Option<&Turn>) -> Option<(BlockKind, TurnState)> {
    let block = block(job)?;
    let state = carrier(job, turn, block).map_or(TurnState::Open, |t| t.state);
    Some((block, state))
}

/// `turn`, when it is the one `job` points at and carries its `block`.
fn carrier<'a>(job: &Job, turn: Option<&'a Turn>, block: BlockKind) -> Option<&'a Turn> {
    turn.filter(|t| job.turn.as_deref() == Some(t.turn_id.as_str()))
        .filter(|t| t.carries_block(&job.job_id, block))
}

/// What `atc status`, `--json` and the file's `status` key show for `job`: the watch's own
/// standing, and for a finished child, where the turn that carries its result stands
/// (`delivering` until a turn carries it).
pub fn status(job: &Job, turn: Option<&Turn>) -> Status {
    if job.watch != Watch::Finished {
        return job.watch.shown();
    }
    match carrier(job, turn, BlockKind::Result).map(|t| t.state) {
        None | Some(TurnState::Open | TurnState::Claimed) => Status::Delivering,
        Some(TurnState::Unconfirmed) => Status::Unconfirmed,
        Some(TurnState::Delivered) => Status::Done,
        Some(TurnState::Undelivered) => Status::Undelivered,
        Some(TurnState::Misrouted) => Status::Misrouted,
        Some(TurnState::Refused) => Status::Error,
    }
}

/// The block `job` owes its parent now: one on its way (no turn carries it yet, or an open
/// or claimed one does), nothing once it landed, is being read back, or was given up.
pub fn owes(job: &Job, turn: Option<&Turn>) -> Option<BlockKind> {
    delivery(job, turn)
        .filter(|(_, state)| state.is_on_its_way())
        .map(|(block, _)| block)
}

/// Where the notice of a watch that ended without an answer stands, in the file's words
/// for it (`delivering`, `delivered`, `unconfirmed`, `undelivered`, `misrouted`); `None`
/// when the parent is not told (`--on-no-answer silent`) or the watch did not end so.
pub fn notice(job: &Job, turn: Option<&Turn>) -> Option<&'static str> {
    if !job.watch.ends_without_answer() {
        return None;
    }
    delivery(job, turn).map(|(_, state)| word(state))
}

/// Where the current check-in of a pending job stands, in the same words.
pub fn check_in(job: &Job, turn: Option<&Turn>) -> Option<&'static str> {
    if job.watch != Watch::Pending {
        return None;
    }
    delivery(job, turn).map(|(_, state)| word(state))
}

fn word(state: TurnState) -> &'static str {
    match state {
        TurnState::Open | TurnState::Claimed => "delivering",
        TurnState::Delivered => "delivered",
        TurnState::Unconfirmed => "unconfirmed",
        TurnState::Undelivered | TurnState::Refused => "undelivered",
        TurnState::Misrouted => "misrouted",
    }
}

/// A delivery only a person can move now, as `atc doctor` counts it and `atc status`
/// marks it: given up (undelivered, misrouted, refused) or of unknown outcome with its
/// read-back window closed. `atc redeliver` of its task sends it again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Stuck<'a> {
    pub task_id: &'a str,
    pub turn_id: Option<&'a str>,
    /// How it was given up, in `doctor`'s words: `refused (error)`, `undelivered`,
    /// `misrouted`, `unconfirmed past the read-back window` (a refused notice or
    /// follow-up is `undelivered`, as its give-up line says).
    pub what: &'static str,
    /// A follow-up up a delegation tree (issue 37): the task's own result landed.
    pub follow_up: bool,
}

/// Every delivery that waits for a person ([`Stuck`]): each job's own block where its
/// turn stands so, then each follow-up up a delegation tree (issue 37) that does, whose
/// task's result landed before it.
pub fn stuck<'a>(jobs: &'a [Job], turns: &'a [Turn]) -> Vec<Stuck<'a>> {
    let at: std::collections::HashMap<&str, &Turn> =
        turns.iter().map(|t| (t.turn_id.as_str(), t)).collect();
    // Given up, in the file's words, or of unknown outcome past its read-back window.
    let waits = |state: TurnState, turn: &Turn| match state {
        s if s.is_given_up() => Some(word(s)),
        TurnState::Unconfirmed if turn.delivery.read_back_closed_at.is_some() => {
            Some("unconfirmed past the read-back window")
        }
        _ => None,
    };
    let mut stuck = Vec::new();
    for job in jobs {
        let turn = job.turn.as_deref().and_then(|id| at.get(id).copied());
        let (Some((block, state)), Some(turn)) = (delivery(job, turn), turn) else {
            continue;
        };
        let what = match (block, state) {
            (BlockKind::Result, TurnState::Refused) => Some("refused (error)"),
            _ => waits(state, turn),
        };
        if let Some(what) = what {
            stuck.push(Stuck {
                task_id: &job.task_id,
                turn_id: Some(&turn.turn_id),
                what,
                follow_up: false,
            });
        }
    }
    for turn in turns.iter().filter(|t| t.is_follow_up()) {
        let Some(what) = waits(turn.state, turn) else {
            continue;
        };
        for block in &turn.carries {
            stuck.push(Stuck {
                task_id: &block.task_id,
                turn_id: Some(&turn.turn_id),
                what,
                follow_up: true,
            });
        }
    }
    stuck
}

/// What a save writes of every job for outside readers: its words as projected here.
pub fn show(jobs: &mut [Job], turns: &[Turn]) {
    let at: std::collections::HashMap<&str, &Turn> =
        turns.iter().map(|t| (t.turn_id.as_str(), t)).collect();
    for job in jobs.iter_mut() {
        let turn = job.turn.as_deref().and_then(|id| at.get(id).copied());
        job.shown = status(job, turn);
        job.shown_notice = notice(job, turn).map(str::to_owned);
        job.shown_check_in = check_in(job, turn).map(str::to_owned);
    }
}

/// What a load makes of the words a file shows: where each watch stands, and whether it
/// owes a notice or a check-in. Where a delivery stands is its turn's, never these words.
pub fn rebuild(jobs: &mut [Job]) {
    for job in jobs.iter_mut() {
        job.watch = job.shown.watch();
        job.notice = job.watch.ends_without_answer() && job.shown_notice.is_some();
        job.check_in = job.watch == Watch::Pending && job.shown_check_in.is_some();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What waits for a person: a job's own given-up block, and each given-up follow-up of
    /// a task whose result landed (a refused one said `undelivered`, as its give-up line
    /// says); nothing on its way, landed, or still being read back.
    #[test]
    fn stuck_lists_given_up_blocks_and_follow_ups_and_nothing_on_its_way() {
        let mut job = Job::sample(Watch::Finished);
        let mut own = Turn::sample(TurnState::Delivered);
        own.carries[0].job_id.clone_from(&job.job_id);
        job.turn = Some(own.turn_id.clone());
        let up = |n: u32, state: TurnState| {
            let mut turn = own.clone();
            turn.turn_id = format!("atc-j1-{n}-up");
            turn.carries[0].kind = BlockKind::FollowUp { depth: 1 };
            turn.state = state;
            turn
        };
        let jobs = std::slice::from_ref(&job);
        let mut turns = vec![own.clone()];
        for (n, state) in TurnState::ALL.into_iter().enumerate() {
            turns.push(up(n as u32, state));
        }
        let mut closed = up(9, TurnState::Unconfirmed);
        closed.delivery.read_back_closed_at = Some(closed.created_at);
        turns.push(closed);
        let found: Vec<(&str, Option<&str>, bool)> = stuck(jobs, &turns)
            .iter()
            .map(|s| (s.what, s.turn_id, s.follow_up))
            .collect();
        assert_eq!(
            found,
            [
                ("undelivered", Some("atc-j1-4-up"), true),
                ("misrouted", Some("atc-j1-5-up"), true),
                ("undelivered", Some("atc-j1-6-up"), true),
                (
                    "unconfirmed past the read-back window",
                    Some("atc-j1-9-up"),
                    true
                ),
            ]
        );
        assert!(stuck(jobs, &turns).iter().all(|s| s.task_id == "task-1"));
        // The job's own result given up: before its follow-ups. One of unknown outcome
        // waits for a person once its read-back window closed, not before.
        for (state, closed, what) in [
            (TurnState::Refused, false, Some("refused (error)")),
            (TurnState::Undelivered, false, Some("undelivered")),
            (TurnState::Misrouted, false, Some("misrouted")),
            (
                TurnState::Unconfirmed,
                true,
                Some("unconfirmed past the read-back window"),
            ),
            (TurnState::Unconfirmed, false, None),
            (TurnState::Open, false, None),
            (TurnState::Claimed, false, None),
        ] {
            turns[0].state = state;
            turns[0].delivery.read_back_closed_at = closed.then_some(turns[0].created_at);
            let listed = stuck(jobs, &turns);
            let own: Vec<_> = listed.iter().filter(|s| !s.follow_up).collect();
            let said = own.first().map(|s| (s.what, s.turn_id));
            assert_eq!(said, what.map(|w| (w, Some("atc-j1"))), "{state:?}");
            assert_eq!(listed.len(), 4 + own.len(), "{state:?}: its follow-ups too");
            assert!(
                !listed[0].follow_up || own.is_empty(),
                "the job's own first"
            );
        }
    }

    /// A finished child's status is where the turn carrying its result stands; the watch's
    /// own statuses are the job's.
    #[test]
    fn a_result_shows_where_its_turn_stands() {
        let mut job = Job::sample(Watch::Finished);
        assert_eq!(status(&job, None), Status::Delivering);
        assert_eq!(owes(&job, None), Some(BlockKind::Result));
        let mut turn = Turn::sample(TurnState::Open);
        turn.carries[0].job_id.clone_from(&job.job_id);
        job.turn = Some(turn.turn_id.clone());
        for (state, shown) in [
            (TurnState::Open, Status::Delivering),
            (TurnState::Claimed, Status::Delivering),
            (TurnState::Unconfirmed, Status::Unconfirmed),
            (TurnState::Delivered, Status::Done),
            (TurnState::Undelivered, Status::Undelivered),
            (TurnState::Misrouted, Status::Misrouted),
            (TurnState::Refused, Status::Error),
        ] {
            turn.state = state;
            assert_eq!(status(&job, Some(&turn)), shown, "{state:?}");
            assert_eq!(
                owes(&job, Some(&turn)).is_some(),
                state.is_on_its_way(),
                "{state:?}"
            );
        }
        for own in [
            Watch::Pending,
            Watch::Lost,
            Watch::Expired,
            Watch::Abandoned,
            Watch::Cancelled,
            Watch::Skipped,
        ] {
            job.watch = own;
            assert_eq!(status(&job, Some(&turn)), own.shown());
            assert_eq!(status(&job, Some(&turn)).watch(), own);
        }
    }
}
