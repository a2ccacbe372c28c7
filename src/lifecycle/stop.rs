//! What a stop of the child found (`--stop-after`, `cancel --stop`), as facts the job
//! machine and `cancel` take; asking the server is `pass::stop`'s.

use super::StopAnswer;

/// What a stop of the child did: where its chat was found (the agent and the chat's uuid,
/// both recorded on the job), and what came of it.
pub struct Stopped {
    /// The agent whose chats hold the child's chat, when a lookup found it there.
    pub agent: Option<String>,
    pub chat_id: Option<String>,
    pub said: StopSaid,
}

impl Stopped {
    /// The answer as the state machine takes it.
    pub fn answer(&self) -> StopAnswer {
        match self.said {
            StopSaid::Stopped => StopAnswer::Stopped,
            StopSaid::NotRunning(_) => StopAnswer::NotRunning,
        }
    }
}

/// What a stop found: it stopped the child, or there was nothing to stop, and what says so.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopSaid {
    Stopped,
    NotRunning(NotRunning),
}

/// What says the child is not running, besides QwenPaw's `{"stopped": false}` (which only
/// says nothing runs in the chat the stop went to).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotRunning {
    /// Its task record says it finished.
    Finished,
    /// The server has no record of the task (nothing of it runs there).
    NoRecord,
    /// Its chat says no turn runs there.
    ChatIdle,
}
