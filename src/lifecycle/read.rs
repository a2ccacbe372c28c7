//! The core of `atc parent-read` (the simulation runs it too): the parent chat read these
//! tasks' results itself, so atc does not post them too. What that means for each job is
//! `Event::ReadByParent`; a block in an open turn leaves it (`compose::tidy`); a turn
//! already claimed goes out as it is.

use serde::Serialize;

use super::compose;
use super::{Event, Limits};
use crate::job::{Job, Status};
use crate::job_file::JobFile;
use crate::outcome::Outcome;
use crate::time::Timestamp;

/// The chat that read the results: (agent, session, user, channel).
pub type Reader<'a> = (&'a str, &'a str, &'a str, &'a str);

/// What `parent-read` did with one task.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Read {
    pub task_id: String,
    /// `read_by_parent` (not posted), `read_in_flight` (its turn was claimed: it goes out
    /// as it is) or `left_alone`.
    pub outcome: &'static str,
    /// Why it was left alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The job's status afterwards, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
}

impl Read {
    fn left_alone(task_id: &str, job: Option<(&Job, Status)>, reason: impl Into<String>) -> Read {
        Read {
            task_id: task_id.to_owned(),
            outcome: "left_alone",
            reason: Some(reason.into()),
            status: job.map(|(_, status)| status),
            job_id: job.map(|(j, _)| j.job_id.clone()),
        }
    }

    /// One line for people.
    pub fn line(&self) -> String {
        let t = &self.task_id;
        match (self.outcome, &self.reason) {
            ("read_by_parent", _) => format!(
                "{t}: not posted: the parent read its result itself; `atc redeliver {t}` still sends it."
            ),
            ("read_in_flight", _) => format!(
                "{t}: the parent read its result itself, but its turn was already claimed: it goes out as it is."
            ),
            (_, Some(reason)) => format!("{t}: {reason}; nothing to do."),
            _ => format!("{t}: nothing to do."),
        }
    }
}

/// What `parent-read` does to the file (the simulation runs it too): each task watched for
/// `reader`'s chat takes `Event::ReadByParent` (a turn already claimed goes out as it is);
/// an open turn goes on without the blocks that left it. A task not watched, or watched for another chat, is
/// left alone.
pub fn parent_read_in(
    file: &mut JobFile,
    task_ids: &[String],
    reader: Reader<'_>,
    now: Timestamp,
    limits: &Limits,
) -> Vec<Read> {
    let (agent, session, user, channel) = reader;
    let mut reads = Vec::new();
    for task_id in task_ids {
        let Some(i) = file.jobs.iter().position(|j| j.task_id == *task_id) else {
            reads.push(Read::left_alone(task_id, None, "not watched"));
            continue;
        };
        let job = &file.jobs[i];
        let turn = file.turn_of(job);
        let shown = crate::status::status(job, turn);
        let t = &job.target;
        if (
            t.agent_id.as_str(),
            t.session_id.as_str(),
            t.user_id.as_str(),
            t.channel.as_str(),
        ) != (agent, session, user, channel)
        {
            reads.push(Read::left_alone(
                task_id,
                Some((job, shown)),
                "watched for another chat",
            ));
            continue;
        }
        let transition = super::step(job, turn, Event::ReadByParent, now, limits);
        let outcome = match transition.outcomes.as_slice() {
            [Outcome::ReadByParent] => "read_by_parent",
            [Outcome::ReadInFlight] => "read_in_flight",
            _ => {
                let reason = match shown {
                    Status::Done => "already delivered".to_owned(),
                    Status::Skipped if job.read_by_parent_at.is_some() => {
                        "already read by the parent".to_owned()
                    }
                    _ if job.read_by_parent_at.is_some() => {
                        "already read by the parent (its turn goes out as it is)".to_owned()
                    }
                    other => format!("the watch already ended ({other})"),
                };
                reads.push(Read::left_alone(task_id, Some((job, shown)), reason));
                continue;
            }
        };
        file.jobs[i] = transition.job;
        let job = &file.jobs[i];
        reads.push(Read {
            task_id: task_id.clone(),
            outcome,
            reason: None,
            status: Some(crate::status::status(job, file.turn_of(job))),
            job_id: Some(job.job_id.clone()),
        });
    }
    // An open turn goes on without the blocks that left it.
    compose::tidy(file, now, limits);
    reads
}
