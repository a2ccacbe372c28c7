//! Reading a turn of unknown outcome back: absent once is not proof, a turn recovered
//! from a tick that died mid-POST, a read-back window that closed, and `atc redeliver`
//! (which reads one of unknown outcome back again before anything is posted).

use super::*;

/// A turn of unknown outcome that a read-back did not find (`running`: the chat runs a
/// turn, which may be ours). Absent once is not proof: a server may store a POST long after
/// the client gave up (QwenPaw awaits the agent, the chat and its tracker first). Sure
/// (absent for sure) only when a second look, `--settle` after the first, finds it absent
/// too, the chat idle, the settle window since the attempt over; otherwise the turn waits.
pub(super) fn absent(mut next: Turn, running: bool, now: Timestamp, limits: &Limits) -> Absent {
    // The settle window counts from the later of the claim and the moment atc learned
    // the outcome was unknown: a tick that stalled between its write-ahead save and the
    // POST sent it late, and the server's clock for it starts then.
    let d = &next.delivery;
    let since = match (d.last_attempt_at, d.unknown_since) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    let settled = since.is_none_or(|at| at.elapsed_at(now) >= limits.settle);
    let confirmed = next
        .delivery
        .absent_since
        .is_some_and(|first| first.elapsed_at(now) >= limits.settle);
    if running || !settled {
        // A turn in the chat may be ours, still running (its message is stored when it
        // ends); a request that reached the server may not have started yet.
        next.delivery.absent_since = None;
        Absent::Waiting(TurnTransition::to(next, vec![Outcome::Waiting]))
    } else if !confirmed {
        next.delivery.absent_since = next.delivery.absent_since.or(Some(now));
        Absent::Waiting(TurnTransition::to(next, vec![Outcome::Waiting]))
    } else {
        next.delivery.absent_since = None;
        Absent::Sure(next)
    }
}

/// What [`absent`] makes of a look that did not find a turn of unknown outcome.
pub(super) enum Absent {
    /// Absent for sure: what next is the caller's.
    Sure(Turn),
    /// Not yet sure: the turn waits for another look.
    Waiting(TurnTransition),
}

/// The parent chat is not there, and the turn may not start it: given up, nothing posted.
pub(super) fn misrouted(mut next: Turn) -> TurnTransition {
    let why = format!(
        "no chat with {} for agent '{}' on {}",
        next.chat.describe(),
        next.chat.agent_id,
        next.chat.base_url
    );
    next.state = TurnState::Misrouted;
    next.delivery.error = Some(why);
    TurnTransition::to(next, vec![Outcome::Misrouted])
}

/// A turn left with a POST (or a forward) in flight by a tick that died: the outcome is
/// unknown, so it is read back before anything is posted again (a forward is never sent
/// again).
pub(super) fn recovered(turn: &Turn, now: Timestamp) -> TurnTransition {
    let Some(started) = turn.delivery.attempt_started_at else {
        if turn.forward_in_flight() {
            let mut next = turn.clone();
            next.updated_at = now;
            let forward = forward_mut(&mut next);
            forward.attempt_started_at = None;
            forward.status = ForwardStatus::Unconfirmed;
            forward.at = Some(now);
            forward.reason = Some(
                "an atc tick stopped while sending it; not sent again, so the person never gets it twice"
                    .to_owned(),
            );
            return TurnTransition::to(next, vec![Outcome::ForwardUnconfirmed]);
        }
        return TurnTransition::ignored(turn);
    };
    let mut next = turn.clone();
    next.updated_at = now;
    let d = &mut next.delivery;
    d.attempt_started_at = None;
    d.unknown_since = Some(now);
    d.last_attempt_at = Some(started);
    d.error = Some(format!(
        "an atc tick stopped while posting the turn (attempt started {started})"
    ));
    next.state = TurnState::Unconfirmed;
    TurnTransition::to(next, vec![Outcome::RecoveredUnconfirmed])
}

/// The read-back window of a turn of unknown outcome closed (`--busy-deadline` after its
/// outcome became unknown): recorded once, so the tick that sees it says so once, and the
/// turn says a person must look now, not that atc will.
pub(super) fn read_back_closed(turn: &Turn, now: Timestamp, limits: &Limits) -> TurnTransition {
    if !read_back_over(turn, now, limits) {
        return TurnTransition::ignored(turn);
    }
    let mut next = turn.clone();
    next.updated_at = now;
    next.delivery.read_back_closed_at = Some(now);
    TurnTransition::to(next, vec![Outcome::ReadBackClosed])
}

/// A turn of unknown outcome whose read-back window has closed and is not yet recorded
/// as such.
pub(super) fn read_back_over(turn: &Turn, now: Timestamp, limits: &Limits) -> bool {
    turn.state == TurnState::Unconfirmed
        && !turn.in_flight()
        && turn.delivery.read_back_closed_at.is_none()
        && !reading_back(turn, now, limits)
}

/// `atc redeliver`: a turn given up with nothing of it in the chat (busy, unreachable, no
/// such chat, refused) is open again, composed anew from the jobs that still follow it
/// and through every check again; one of unknown outcome is read back again first, so it
/// is never posted twice; an open one without leave to start its chat gets it.
pub(super) fn redeliver(turn: &Turn, create_session: bool, now: Timestamp) -> TurnTransition {
    let state = match turn.state {
        s if s.is_given_up() => TurnState::Open,
        TurnState::Unconfirmed => TurnState::Unconfirmed,
        TurnState::Open | TurnState::Claimed if create_session && !turn.create_session => {
            turn.state
        }
        _ => return TurnTransition::ignored(turn),
    };
    if turn.in_flight() {
        return TurnTransition::ignored(turn);
    }
    let mut next = turn.clone();
    next.state = state;
    next.create_session |= create_session;
    next.updated_at = now;
    let d = &mut next.delivery;
    d.waiting_since = None;
    d.next_attempt_at = None;
    if state == TurnState::Unconfirmed {
        d.unknown_since = Some(now);
        d.read_back_closed_at = None;
    }
    TurnTransition::to(next, vec![Outcome::Requeued])
}
