//! What people and parent agents are told, derived from the typed fields of a job and of
//! the turn that carries it (strikes, `last_error`, the turn's delivery record), so it can
//! never disagree with them: the sentence `atc status` shows, its short form in the list,
//! the text of each block (a result, a notice, a check-in) and of a turn that carries
//! several (a group's, a batch's), the toast, the line a give-up gets. Decisions
//! (`lifecycle`, `turn`, `compose`) record facts; this module alone words them.

use serde::Serialize;

use crate::job::{Job, Origin, Status, TaskOutcome, Watch};
use crate::outcome::{Outcome, failure_kind};
use crate::text::plural;
use crate::time::{Timestamp, age, human};
use crate::turn::{BlockKind, ForwardStatus, Turn, TurnState};

mod give_up;
mod parent;
mod person;
pub use give_up::*;
pub use parent::*;
pub use person::*;

/// "; stops in 4m" (or "; stop due", "; stopped") for a watch with `--stop-after`.
pub fn deadline(job: &Job, now: Timestamp) -> String {
    let Some(secs) = job.options.stop_after_secs else {
        return String::new();
    };
    if job.stopped_at.is_some() {
        return "; stopped".to_owned();
    }
    if crate::lifecycle::stop_given_up(job) {
        return "; stop given up".to_owned();
    }
    let due = job
        .started_at
        .map(|at| at.saturating_add(std::time::Duration::from_secs(secs)));
    match due {
        Some(due) if due > now && job.stop_asked_at.is_none() => {
            format!("; stops in {}", age(now.elapsed_at(due)))
        }
        Some(_) => "; stop due".to_owned(),
        None => String::new(),
    }
}

/// The cause of an error without the request it came from: `GET http://…/task/t:
/// connection refused (is QwenPaw running?)` → `connection refused (is QwenPaw running?)`.
pub fn short_cause(error: &str) -> String {
    let rest = ["GET ", "POST "]
        .iter()
        .find_map(|method| error.strip_prefix(method))
        .and_then(|rest| rest.split_once(": "))
        .map_or(error, |(_, cause)| cause);
    crate::text::one_line(rest, 200)
}

/// How a watch was made, when not by a person: `None` for `cli`. The plugin's group
/// tool is the only way a model makes a group.
pub fn origin_note(job: &Job) -> Option<&'static str> {
    match job.origin {
        Origin::Cli => None,
        Origin::Plugin if job.options.group.is_some() => {
            Some("by the model, with watch_agent_tasks")
        }
        Origin::Plugin => Some("by the model, with watch_agent_task"),
        Origin::Auto => Some("automatically, at the end of the turn that submitted it"),
    }
}

#[cfg(test)]
mod tests;
