//! `atc parent-read` (plumbing, hidden from `--help`): the parent chat read these tasks'
//! finished results itself (its `check_agent_task` answered them; atc's QwenPaw plugin
//! sees that and runs this), so atc does not post them too. What that means for each
//! job is `lifecycle`'s `Event::ReadByParent`; a block in an open turn leaves it
//! (`compose::tidy`); a turn already claimed goes out as it is.

use anyhow::Result;
use serde::Serialize;

use crate::cmd::{emit, print_json};
use crate::compose;
use crate::job::{Job, Status};
use crate::lifecycle::{self, Event, Limits};
use crate::outcome::Outcome;
use crate::report::LogEntry;
use crate::settings::{Output, ParentRead};
use crate::state::{JobFile, Store};
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

pub fn run(args: &ParentRead, out: Output) -> Result<()> {
    let store = Store::new(args.state.value.clone());
    let reader = (
        args.agent.value.as_str(),
        args.session.value.as_str(),
        args.user.value.as_str(),
        args.channel.value.as_str(),
    );
    let now = Timestamp::now();
    // Most reads are of tasks atc does not watch: those need no lock and no save.
    let before = store.load()?;
    let watched = args.task_ids.iter().any(|t| before.find(t).is_some());
    let reads = if watched {
        store.update(|file| {
            Ok(parent_read_in(
                file,
                &args.task_ids,
                reader,
                now,
                &args.limits,
            ))
        })?
    } else {
        parent_read_in(
            &mut before.clone(),
            &args.task_ids,
            reader,
            now,
            &args.limits,
        )
    };
    if watched {
        let file = store.load()?;
        let entries: Vec<LogEntry> = reads
            .iter()
            .filter(|r| r.outcome != "left_alone")
            .filter_map(|r| {
                file.find(&r.task_id)
                    .map(|job| LogEntry::of(r.outcome, job, now))
            })
            .collect();
        store.log(&entries)?;
    }
    if out.json {
        print_json(&serde_json::json!({ "tasks": reads }))
    } else if out.quiet {
        Ok(())
    } else {
        let lines: Vec<String> = reads.iter().map(Read::line).collect();
        emit(&format!("{}\n", lines.join("\n")))
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
        let transition = lifecycle::step(job, turn, Event::ReadByParent, now, limits);
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
