//! The forward of a turn: the parent's reply sent on to the person on its IM channel, or
//! for a console parent the one toast that says something arrived. Its record
//! (`Forward`) and the steps of the turn machine that move it.

use serde::{Deserialize, Serialize};

use super::*;

/// Longest text a forward sends on to the person (as a delivery's cap).
pub const MAX_FORWARD_CHARS: usize = 8000;

/// Sends of one forward before it is given up (5xx and unreachable answers).
pub const FORWARD_ATTEMPTS: u32 = 5;

/// Where sending the parent's reply on to the person stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ForwardStatus {
    /// To be sent: waiting for a healthy channel, or retrying.
    Pending,
    /// The server said it sent it (2xx): never sent again.
    Sent,
    /// Nothing to send (an empty reply, a failed parent turn…): `reason` says which.
    Skipped,
    /// Refused by the server, or retries used up: `reason` says why.
    Failed,
    /// A send whose outcome is unknown; never repeated (a person would get it twice).
    Unconfirmed,
}

impl ForwardStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ForwardStatus::Pending => "pending",
            ForwardStatus::Sent => "sent",
            ForwardStatus::Skipped => "skipped",
            ForwardStatus::Failed => "failed",
            ForwardStatus::Unconfirmed => "unconfirmed",
        }
    }
}

/// Sending the parent's final reply to the person on the parent's IM channel
/// (`POST /messages/send`), or, for a console parent, the one toast that says something
/// arrived: the woken turn runs through the console, so QwenPaw itself never sends it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Forward {
    pub status: ForwardStatus,
    #[serde(default)]
    pub attempts: u32,
    #[serde(default)]
    pub last_http_status: Option<u16>,
    /// When it was sent (or given up).
    #[serde(default)]
    pub at: Option<Timestamp>,
    /// Why it was skipped, failed or is held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What is sent: the parent's final reply, or the toast.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// When it became pending: `--busy-deadline` counts from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Timestamp>,
    /// Set while a send is in flight (write-ahead, like a delivery's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt_started_at: Option<Timestamp>,
}

/// How the parent turn a delivery started ended, once it did. For a parent on an IM
/// channel that is also when its reply is known: the forward is queued (or skipped, and
/// why); a console parent's person gets one toast.
pub(super) fn parent_polled(
    turn: &Turn,
    parent: ParentTurn,
    toast: String,
    up: Option<Up>,
    now: Timestamp,
) -> TurnTransition {
    if turn.state != TurnState::Delivered || turn.parent_turn.is_some() {
        return TurnTransition::ignored(turn);
    }
    let (status, reply) = match parent {
        ParentTurn::Running => return TurnTransition::ignored(turn),
        ParentTurn::Ended { status, reply } => (status, Some(reply)),
        ParentTurn::Gone => ("unknown".to_owned(), None),
    };
    let mut next = turn.clone();
    let mut outcomes = vec![Outcome::Followed];
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
    let pending = |text: String| Forward {
        status: ForwardStatus::Pending,
        attempts: 0,
        last_http_status: None,
        at: None,
        reason: None,
        text: Some(text),
        since: Some(now),
        attempt_started_at: None,
    };
    // A turn into a child's chat (a background task's) is neither forwarded nor toasted:
    // nobody reads that chat; a reply that goes up is heard at the top, where it lands.
    if let Some(up) = &up {
        outcomes.push(if up.turn.is_some() {
            Outcome::WentUp
        } else {
            Outcome::StayedDown
        });
    } else if next.forwards() && next.forward.is_none() {
        let forward = match (status.as_str(), reply) {
            ("completed", Some(reply)) if !reply.is_empty() => {
                pending(crate::text::truncate_chars(reply, MAX_FORWARD_CHARS))
            }
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
        next.forward = Some(pending(toast));
        outcomes.push(Outcome::Claimed);
    }
    next.parent_turn = Some(status);
    next.up = up;
    next.updated_at = now;
    TurnTransition::to(next, outcomes)
}

/// A forward that may go now: pending, not in flight.
pub fn forward_due(turn: &Turn) -> bool {
    turn.forward
        .as_ref()
        .is_some_and(|f| f.status == ForwardStatus::Pending && f.attempt_started_at.is_none())
}

pub(super) fn forward_mut(turn: &mut Turn) -> &mut Forward {
    turn.forward.as_mut().expect("a forward to update")
}

/// A healthy channel: claim the send (write-ahead). Otherwise hold it, until
/// `--busy-deadline` after it became pending; a channel that is not there at all fails it.
pub(super) fn channel_checked(
    turn: &Turn,
    health: Health,
    now: Timestamp,
    limits: &Limits,
) -> TurnTransition {
    if !forward_due(turn) {
        return TurnTransition::ignored(turn);
    }
    let mut next = turn.clone();
    next.updated_at = now;
    let forward = forward_mut(&mut next);
    let held = match health {
        Health::Healthy => {
            forward.attempts += 1;
            forward.attempt_started_at = Some(now);
            let text = forward.text.clone().unwrap_or_default();
            return TurnTransition {
                turn: next,
                effect: Effect::Forward { text },
                outcomes: vec![Outcome::Claimed],
            };
        }
        Health::Missing { detail } => {
            forward.status = ForwardStatus::Failed;
            forward.at = Some(now);
            forward.reason = Some(format!("the channel cannot send: {detail}"));
            return TurnTransition::to(next, vec![Outcome::ForwardFailed]);
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
        return TurnTransition::to(next, vec![Outcome::ForwardFailed]);
    }
    forward.reason = Some(held);
    TurnTransition::to(next, vec![Outcome::ForwardHeld])
}

/// Records a send's outcome. Never sent twice once the server said 2xx; an unknown
/// outcome is never retried (the person would get it twice).
pub(super) fn forwarded(turn: &Turn, sent: Sent, now: Timestamp) -> TurnTransition {
    if !turn.forward_in_flight() {
        return TurnTransition::ignored(turn);
    }
    let mut next = turn.clone();
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
    TurnTransition::to(next, vec![outcome])
}
