//! Which turns a tick acts on (due, followed, interrupted, read back, forwarded), the
//! turn ids, and which settled turns are pruned: reads of the turn records, no changes.

use super::*;

/// The one answer to "was the block of job `job_id` claimed?": `turn` (the turn the job
/// points at) carries it and may be in the parent chat (claimed, of unknown outcome, or
/// delivered; a turn given up has nothing in it). Once claimed, a turn is what it is: a
/// cancel, a read by the parent or a re-watch cannot take the block out of it or change
/// how it goes, and the job follows where it lands.
pub fn claimed(turn: Option<&Turn>, job_id: &str) -> bool {
    turn.is_some_and(|t| t.may_have_landed() && t.carries_job(job_id))
}

/// The read-back window of a turn of unknown outcome is open.
pub(super) fn reading_back(turn: &Turn, now: Timestamp, limits: &Limits) -> bool {
    turn.delivery
        .unknown_since
        .is_none_or(|since| since.elapsed_at(now) <= limits.busy_deadline)
}

/// True when the turn should be looked at (and perhaps posted) now: composed, nothing in
/// flight, any back-off over; one of unknown outcome only while its read-back window is
/// open.
pub fn is_due(turn: &Turn, now: Timestamp, limits: &Limits) -> bool {
    is_due_when(turn, now, limits, false)
}

/// [`is_due`]; `freed`: a turn of its chat just ended (a kick said so), so a POST that
/// waits out a busy chat's back-off goes now instead of at its next try.
pub fn is_due_when(turn: &Turn, now: Timestamp, limits: &Limits, freed: bool) -> bool {
    if turn.text.is_none() || turn.carries.is_empty() || turn.in_flight() {
        return false;
    }
    let backed_off = freed || turn.delivery.next_attempt_at.is_none_or(|at| at <= now);
    match turn.state {
        TurnState::Open | TurnState::Claimed => backed_off,
        TurnState::Unconfirmed => reading_back(turn, now, limits),
        _ => false,
    }
}

/// Nothing more can happen to it unless a person acts: given up, delivered (its forward
/// done), or of unknown outcome with its read-back window closed.
pub fn is_settled(turn: &Turn) -> bool {
    let waiting = match turn.state {
        TurnState::Open | TurnState::Claimed => true,
        TurnState::Unconfirmed => turn.delivery.read_back_closed_at.is_none(),
        _ => false,
    };
    !waiting && !forward_due(turn) && !turn.forward_in_flight()
}

/// The turns due now: the oldest per parent chat, a claimed one before an open one. A
/// second POST into the same chat would only meet a busy chat behind the turn the first
/// one starts.
pub fn deliveries<'a>(
    turns: &'a [Turn],
    now: Timestamp,
    limits: &Limits,
    freed: impl Fn(&Turn) -> bool,
) -> Vec<&'a Turn> {
    let mut due: Vec<&Turn> = turns
        .iter()
        .filter(|t| is_due_when(t, now, limits, freed(t)))
        .collect();
    due.sort_by_key(|t| (t.is_open(), t.created_at));
    let mut chats = std::collections::HashSet::new();
    due.retain(|t| chats.insert(t.chat.key()));
    due
}

/// The delivered turns whose end a tick asks about (the parent turn's own task), for
/// `--busy-deadline` after delivery.
pub fn to_follow<'a>(turns: &'a [Turn], now: Timestamp, limits: &Limits) -> Vec<&'a Turn> {
    turns
        .iter()
        .filter(|t| still_followed(t, now, limits))
        .collect()
}

/// One turn of [`to_follow`]: delivered, its woken turn's end not known yet, and within
/// `--busy-deadline` of its delivery.
pub fn still_followed(turn: &Turn, now: Timestamp, limits: &Limits) -> bool {
    turn.state == TurnState::Delivered
        && turn.turn_task_id.is_some()
        && turn.parent_turn.is_none()
        && turn
            .delivered_at
            .is_some_and(|at| at.elapsed_at(now) <= limits.busy_deadline)
}

/// The turns (by position) a tick recovers first: a POST or a forward in flight. The tick
/// lock says no other tick is running, so the tick that claimed them died.
pub fn interrupted(turns: &[Turn]) -> Vec<usize> {
    turns
        .iter()
        .enumerate()
        .filter(|(_, t)| t.in_flight() || t.forward_in_flight())
        .map(|(i, _)| i)
        .collect()
}

/// The turns (by position) whose read-back window has closed since the last tick.
pub fn read_backs_closed(turns: &[Turn], now: Timestamp, limits: &Limits) -> Vec<usize> {
    turns
        .iter()
        .enumerate()
        .filter(|(_, t)| read_back_over(t, now, limits))
        .map(|(i, _)| i)
        .collect()
}

/// The turns whose forward is due now.
pub fn forwards(turns: &[Turn]) -> Vec<&Turn> {
    turns.iter().filter(|t| forward_due(t)).collect()
}

/// A new turn's id: `atc-<job id>` for a job's result or notice, `atc-<job id>-c<n>` for
/// its check-in *n*; `-2`, `-3`… after it while another turn has that id (ids must tell
/// turns apart in the chat, where read-back looks for them).
pub fn new_id(first: &Block, taken: impl Fn(&str) -> bool) -> String {
    let base = match first.kind {
        BlockKind::CheckIn { n } => format!("atc-{}-c{n}", first.job_id),
        _ => format!("atc-{}", first.job_id),
    };
    if !taken(&base) {
        return base;
    }
    (2..)
        .map(|k| format!("{base}-{k}"))
        .find(|id| !taken(id))
        .expect("an unused id")
}

/// Settled turns none of whose jobs remain are removed (their record said all it could),
/// once the job whose block named the turn (`atc-<job id>…`, [`new_id`]) is gone too: a
/// block that left the open turn named for it (the parent read it) and was redelivered
/// later must not get the same id again, which is in the chat already. A delivered turn
/// whose woken turn is still followed stays until that ends (its reply may go up a tree,
/// or on to the person), or `--busy-deadline` after delivery.
pub fn prunable(
    turn: &Turn,
    now: Timestamp,
    limits: &Limits,
    job_exists: impl Fn(&str) -> bool,
) -> bool {
    is_settled(turn)
        && !still_followed(turn, now, limits)
        && !turn.carries.iter().any(|b| job_exists(&b.job_id))
        && !named_for(&turn.turn_id).is_some_and(&job_exists)
}

/// The job whose block a turn id was made for ([`new_id`]): `atc-<job id>`, with `-c<n>`
/// or `-<k>` after it.
fn named_for(turn_id: &str) -> Option<&str> {
    turn_id.strip_prefix("atc-")?.split('-').next()
}
