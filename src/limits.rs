//! The caps and back-off a tick works within (defaults in `settings`): read by the job's
//! state machine (`lifecycle`) and the turn's (`turn`) alike.

use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_strikes: u32,
    pub max_age: Duration,
    /// Wait after a 409 before posting again.
    pub busy_retry: Duration,
    /// How long a turn may wait for a busy or unreachable parent chat before it is given
    /// up as undelivered, and how long a turn of unknown outcome is read back.
    pub busy_deadline: Duration,
    /// How long after an attempt of unknown outcome before the same turn may be posted
    /// again (the server has had the whole request timeout to act on the first).
    pub settle: Duration,
    pub keep: Duration,
    /// How many levels a follow-up goes up a delegation tree (`--follow-up-depth`; 0:
    /// none). A reply past it stays in the child's chat, and its turn says why.
    pub follow_up_depth: u32,
    /// The longest wait between two polls of a watch on its back-off (`--poll-ceiling`):
    /// a child whose turn's end atc's plugin kicks is polled then, and otherwise at 20 s,
    /// 40 s, 80 s… up to this (`lifecycle::backoff`).
    pub poll_ceiling: Duration,
}
