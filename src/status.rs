//! What a job shows: one pure projection of the watch (the job) and the delivery (the turn
//! that carries what it owes, the one `Job::turn` names). `atc status`, its `--json`, the
//! file's `status` key (written at save for outside readers), `doctor`, `redeliver` and the
//! wording of a job's line read it here, never from a copy of the turn.
//!
//! The external words stay as they are (`pending`, `delivering`, `done`, `unconfirmed`,
//! `undelivered`, `misrouted`, `error`, and the watch's own: `lost`, `expired`,
//! `abandoned`, `cancelled`, `skipped`): scripts read them.

use crate::job::{Job, Status};
use crate::turn::{BlockKind, Turn, TurnState};

pub use crate::turn::claimed;

/// Where the block a job has on its way stands, read from the turn that carries it: a
/// block no turn carries yet is waiting, as in an open turn (`TurnState::Open`).
pub fn delivery(job: &Job, turn: Option<&Turn>) -> Option<(BlockKind, TurnState)> {
    let block = job.block()?;
    let state = carrier(job, turn, block).map_or(TurnState::Open, |t| t.state);
    Some((block, state))
}

/// `turn`, when it is the one `job` points at and carries its `block`.
fn carrier<'a>(job: &Job, turn: Option<&'a Turn>, block: BlockKind) -> Option<&'a Turn> {
    turn.filter(|t| job.turn.as_deref() == Some(t.turn_id.as_str()))
        .filter(|t| t.carries_block(&job.job_id, block))
}

/// What `atc status`, `--json` and the file's `status` key show for `job`: the watch's own
/// standing, and for a finished child whose result goes to the parent, where the turn that
/// carries it stands. Before any turn carries it, the job's own word stands (`delivering`
/// for a result no turn took yet; whatever a file from an older atc says of one whose turn
/// is gone, so that nothing delivered is posted again).
pub fn status(job: &Job, turn: Option<&Turn>) -> Status {
    if !job.status.is_result() {
        return job.status;
    }
    match carrier(job, turn, BlockKind::Result).map(|t| t.state) {
        None => job.status,
        Some(TurnState::Open | TurnState::Claimed) => Status::Delivering,
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
    let (block, state) = delivery(job, turn)?;
    let on_its_way = match block {
        BlockKind::Result => status(job, turn) == Status::Delivering,
        BlockKind::Notice | BlockKind::CheckIn { .. } => state.is_on_its_way(),
    };
    on_its_way.then_some(block)
}

/// Every job's `status` as [`status`] shows it, for a whole file's `jobs` and `turns`: what
/// the loader makes of the stored key (derived again, not trusted) and what a save writes.
pub fn derive(jobs: &mut [Job], turns: &[Turn]) {
    if !jobs.iter().any(|job| job.status.is_result()) {
        return;
    }
    let at: std::collections::HashMap<&str, &Turn> =
        turns.iter().map(|t| (t.turn_id.as_str(), t)).collect();
    for job in jobs.iter_mut().filter(|job| job.status.is_result()) {
        let turn = job.turn.as_deref().and_then(|id| at.get(id).copied());
        let shown = status(job, turn);
        // While the job still keeps its delivery status, the two must agree: the
        // simulation and every test run with this check.
        debug_assert_eq!(shown, job.status, "{} and its turn disagree", job.task_id);
        job.status = shown;
    }
}

/// Where the notice of a watch that ended without an answer stands, in the file's words
/// for it (`delivering`, `delivered`, `unconfirmed`, `undelivered`, `misrouted`); `None`
/// when the parent is not told (`--on-no-answer silent`) or the watch did not end so.
pub fn notice(job: &Job, turn: Option<&Turn>) -> Option<&'static str> {
    if !job.status.ends_without_answer() {
        return None;
    }
    delivery(job, turn).map(|(_, state)| match state {
        TurnState::Open | TurnState::Claimed => "delivering",
        TurnState::Delivered => "delivered",
        TurnState::Unconfirmed => "unconfirmed",
        TurnState::Undelivered | TurnState::Refused => "undelivered",
        TurnState::Misrouted => "misrouted",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A finished child's status is where the turn carrying its result stands; the watch's
    /// own statuses are the job's.
    #[test]
    fn a_result_shows_where_its_turn_stands() {
        let mut job = Job::sample(Status::Delivering);
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
            Status::Pending,
            Status::Lost,
            Status::Expired,
            Status::Abandoned,
            Status::Cancelled,
            Status::Skipped,
        ] {
            job.status = own;
            assert_eq!(status(&job, Some(&turn)), own);
        }
    }
}
