//! What the job file holds, and its keyed lookups: the watches (`job`), the turns that
//! carry what they owe (`turn`), the give-ups and whether a person heard them (`heard`),
//! and the chats a kick has seen (`lifecycle::kick`). How it is read, checked and saved is
//! `state::store`'s.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::exit::Exit;
use crate::fail;
use crate::job::Job;
use crate::time::Timestamp;
use crate::turn::Turn;

/// The schema version this atc reads and writes. Version 1 (turns kept on the job that
/// carried them), written only by development builds before 0.2, is refused.
pub const VERSION: u32 = 2;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobFile {
    pub version: u32,
    pub jobs: Vec<Job>,
    /// The turns: one POST into one parent chat each, carrying the jobs' blocks.
    #[serde(default)]
    pub turns: Vec<Turn>,
    /// Every give-up of the last `--keep`, and whether a person has heard it (`heard`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub give_ups: Vec<GiveUpRecord>,
    /// The chats whose turn's end kicks polled watches of unknown child session for
    /// (`lifecycle::kick`): their later turns do not concern those watches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kick_chats: Vec<ChatSeen>,
}

impl JobFile {
    /// The turn with id `turn_id`.
    pub fn turn(&self, turn_id: &str) -> Option<&Turn> {
        self.turns.iter().find(|t| t.turn_id == turn_id)
    }

    /// The turn `job` points at.
    pub fn turn_of(&self, job: &Job) -> Option<&Turn> {
        job.turn.as_deref().and_then(|id| self.turn(id))
    }

    /// A copy of `job` as the file would show it now (`--json`): its words projected from
    /// its turn (`status::show`).
    pub fn shown(&self, job: &Job) -> Job {
        let mut job = job.clone();
        crate::status::show(std::slice::from_mut(&mut job), &self.turns);
        job
    }

    pub fn find(&self, task_id: &str) -> Option<&Job> {
        self.jobs.iter().find(|job| job.task_id == task_id)
    }

    /// Where the watch of `task_id` is in `jobs`, or the refusal every command gives for a
    /// task it does not watch (`path`: the job file, which the line names).
    pub fn watched(&self, task_id: &str, path: &Path) -> anyhow::Result<usize> {
        match self.jobs.iter().position(|job| job.task_id == task_id) {
            Some(i) => Ok(i),
            None => fail!(
                Exit::Refused,
                "no watch for {task_id} in {}: `atc status` lists the watched tasks (a watch made with another job file, by --state, ATC_STATE or the config's `state`, is in that one)",
                path.display()
            ),
        }
    }
}

/// One give-up, as the job file keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GiveUpRecord {
    /// When the tick gave up.
    pub at: Timestamp,
    /// The task it is named after (a group's or a batch's turn: its first block's).
    pub task_id: String,
    /// The other tasks that turn carried, given up with it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub with: Vec<String>,
    /// The line, exactly as the tick that decided it says it (no server text, no session
    /// or user ids: `describe::GiveUp`).
    pub line: String,
    /// When a tick said it on a stderr a person reads. `None`: nobody has heard it yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub said_at: Option<Timestamp>,
}

impl GiveUpRecord {
    pub fn is_unsaid(&self) -> bool {
        self.said_at.is_none()
    }

    /// Whether it names `task_id` (as its own, or as one its turn also carried).
    pub fn names(&self, task_id: &str) -> bool {
        self.task_id == task_id || self.with.iter().any(|t| t == task_id)
    }
}

/// A chat whose turn's end a kick has polled its agent's watches of unknown child session
/// for: its later turns do not concern the watches registered before `at` (they were
/// waiting then, and were polled). Kept while such a watch waits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatSeen {
    pub agent_id: String,
    pub session_id: String,
    pub at: Timestamp,
}
