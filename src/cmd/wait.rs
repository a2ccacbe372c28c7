//! `atc wait`: poll tasks in the foreground until they end and print what a delivery
//! would carry, each as it comes. It writes no job file (it reads one only to say, at
//! `--timeout`, whether a task is watched). Exit status from the shared table: 0 completed,
//! 1 failed, 6 lost, 124 still running after `--timeout`, 5 server unreachable or token
//! refused; for several tasks, 0 when every one completed, else the first (in the order
//! given) that did not. `--json` prints one object of the same shape for every one of them
//! ([`said`]; `{"tasks": […]}` for several).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::json;

use crate::cmd::{emit, print_json};
use crate::exit::{Exit, Failure};
use crate::job::{TaskOutcome, Watch};
use crate::qwenpaw::task::{self, Poll};
use crate::qwenpaw::{Client, render};
use crate::settings::{Output, Wait};
use crate::state::store::Store;
use crate::time::human;

/// Failed polls in a row (unreachable, 5xx) before `wait` gives up with exit 5: a server
/// restarting takes a few seconds.
const MAX_STRIKES: u32 = 5;

/// What `wait --json` prints, whatever the exit: every key always there (`null` when it
/// does not apply). `outcome` tells every end apart: how a finished child ended
/// (`completed`, `failed`, `timed_out` — the child's own timeout —, `cancelled`,
/// `fork_not_finalized`, `other`), or `lost`, `still_running` (`--timeout` passed),
/// `unreachable`, `refused` (the token).
fn said(
    task_id: &str,
    outcome: &str,
    exit: Exit,
    status: Option<&str>,
    text: Option<&str>,
    detail: Option<&str>,
) -> serde_json::Value {
    json!({
        "task_id": task_id,
        "outcome": outcome,
        "exit": exit.code(),
        "status": status,
        "text": text,
        "detail": detail,
    })
}

/// How one task's wait ended.
enum End {
    /// It finished (well or not): its rendered result, printed when it came.
    Finished {
        outcome: TaskOutcome,
        status: String,
        text: String,
    },
    /// It ended without its result: `outcome` as `--json` names it, `detail` the server's
    /// words or how long atc waited, `words` the error line.
    Unfinished {
        outcome: &'static str,
        exit: Exit,
        detail: String,
        words: String,
    },
}

impl End {
    fn exit(&self) -> Exit {
        match self {
            End::Finished {
                outcome: TaskOutcome::Completed,
                ..
            } => Exit::Ok,
            End::Finished { .. } => Exit::Refused,
            End::Unfinished { exit, .. } => *exit,
        }
    }

    fn json(&self, task_id: &str) -> Result<serde_json::Value> {
        Ok(match self {
            End::Finished {
                outcome,
                status,
                text,
            } => {
                let name = serde_json::to_value(outcome)?;
                said(
                    task_id,
                    name.as_str().unwrap_or("other"),
                    self.exit(),
                    Some(status),
                    Some(text),
                    None,
                )
            }
            End::Unfinished {
                outcome,
                exit,
                detail,
                ..
            } => said(task_id, outcome, *exit, None, None, Some(detail)),
        })
    }

    /// The error line, for an end that is not a completed child.
    fn words(&self, task_id: &str) -> Option<String> {
        match self {
            End::Finished {
                outcome: TaskOutcome::Completed,
                ..
            } => None,
            End::Finished { outcome, .. } => Some(format!(
                "{task_id} finished but did not succeed ({})",
                outcome.as_str()
            )),
            End::Unfinished { words, .. } => Some(words.clone()),
        }
    }
}

/// One task waited for: failed polls in a row, the last one's error while it fails, and
/// how it ended.
struct Waited {
    task_id: String,
    strikes: u32,
    failing: Option<String>,
    end: Option<End>,
}

pub fn run(wait: &Wait, out: Output) -> Result<()> {
    let client = Client::new(wait.http_timeout, wait.auth.clone());
    let agent = &wait.agent.value;
    let chosen = crate::settings::base_for_watched(&wait.base_url, || recorded_base(wait));
    let base = &chosen.value;
    if out.verbose > 0 {
        crate::term::say(&format!("atc: QwenPaw API {base} (from {})", chosen.source));
    }
    let several = wait.task_ids.len() > 1;
    let mut tasks: Vec<Waited> = wait
        .task_ids
        .iter()
        .map(|task_id| Waited {
            task_id: task_id.clone(),
            strikes: 0,
            failing: None,
            end: None,
        })
        .collect();
    let started = Instant::now();
    let mut printed = 0;
    loop {
        for t in tasks.iter_mut().filter(|t| t.end.is_none()) {
            poll(&client, base, agent, t, several, out);
            // Each result as it comes (a blank line between two), not when the last ends.
            if let Some(End::Finished { text, .. }) = &t.end
                && !out.json
                && !out.quiet
            {
                let gap = if printed > 0 { "\n" } else { "" };
                emit(&format!("{gap}{text}\n"))?;
                printed += 1;
            }
        }
        let open: Vec<&mut Waited> = tasks.iter_mut().filter(|t| t.end.is_none()).collect();
        if open.is_empty() {
            break;
        }
        let waited = started.elapsed();
        if let Some(timeout) = wait.timeout
            && waited + wait.interval > timeout
        {
            let ids: Vec<&str> = open.iter().map(|t| t.task_id.as_str()).collect();
            let chats = watched(wait, &ids);
            for t in open {
                let chat = chats.get(t.task_id.as_str()).cloned();
                t.end = Some(timed_out(t, chat, timeout));
            }
            break;
        }
        if out.verbose > 1 {
            for t in &open {
                crate::term::say(&format!(
                    "atc: {} still running after {}",
                    t.task_id,
                    human(waited)
                ));
            }
        }
        std::thread::sleep(wait.interval.max(Duration::from_millis(100)));
    }
    finish(&tasks, out)
}

/// Polls `t` once: it ends (finished, lost, refused, or out of reach `MAX_STRIKES` times
/// in a row) or stays open.
fn poll(client: &Client, base: &str, agent: &str, t: &mut Waited, several: bool, out: Output) {
    let task_id = t.task_id.as_str();
    let unfinished = |outcome, exit, detail: &str, words| End::Unfinished {
        outcome,
        exit,
        detail: detail.to_owned(),
        words,
    };
    let answer = client.get_task(base, task_id, agent);
    // This poll's failure: a `--timeout` that passes after one is a server out of reach,
    // not a child still running.
    t.failing = None;
    match task::classify(answer, task_id, base, client.auth()) {
        Poll::Record(record) if record.is_finished() => {
            t.end = Some(End::Finished {
                outcome: record.outcome(),
                status: record.status.clone(),
                text: render::render_delivery(task_id, &record, None),
            });
        }
        Poll::Record(_) => t.strikes = 0,
        Poll::NotFound { detail } => {
            let words = format!(
                "{task_id} is lost: the server has no record of it ({detail}); QwenPaw keeps task records in memory only, so it restarted, or the id or base URL {base} is wrong"
            );
            t.end = Some(unfinished("lost", Exit::Lost, &detail, words));
        }
        Poll::Denied { error } => {
            let words = format!("{task_id}: {error}");
            t.end = Some(unfinished("refused", Exit::Server, &error, words));
        }
        Poll::Failed { error } => {
            t.strikes += 1;
            if t.strikes >= MAX_STRIKES {
                let words = format!(
                    "{task_id}: {} polls in a row failed; last: {error}",
                    t.strikes
                );
                t.end = Some(unfinished("unreachable", Exit::Server, &error, words));
                return;
            }
            if out.verbose > 0 {
                let which = if several {
                    format!("{task_id}: ")
                } else {
                    String::new()
                };
                crate::term::say(&format!(
                    "atc: {which}poll failed ({} in a row): {error}",
                    t.strikes
                ));
            }
            t.failing = Some(error);
        }
    }
}

/// How `t`, still open when `--timeout` passed, ended: out of reach if its last poll
/// failed, else still running (and whether a watch delivers it).
fn timed_out(t: &Waited, watched: Option<String>, timeout: Duration) -> End {
    let task_id = t.task_id.as_str();
    if let Some(error) = &t.failing {
        return End::Unfinished {
            outcome: "unreachable",
            exit: Exit::Server,
            detail: error.clone(),
            words: format!(
                "{task_id}: {} failed, and --timeout ({}) passed; last: {error}",
                crate::text::plural(t.strikes, "poll", "polls in a row"),
                human(timeout)
            ),
        };
    }
    End::Unfinished {
        outcome: "still_running",
        exit: Exit::TimedOut,
        detail: format!("still running after {} (--timeout)", human(timeout)),
        words: format!(
            "{task_id} is still running after {} (--timeout); {}",
            human(timeout),
            match watched {
                Some(chat) => format!(
                    "it is watched: a tick delivers its result to {chat} when it ends (`atc status {task_id}`)"
                ),
                None => "`atc watch` it to have the result delivered when it ends".to_owned(),
            }
        ),
    }
}

/// `--json` (one object for one task, `{"tasks": […]}` in the order given for several:
/// every task has ended by now), then the exit: 0 when every child completed, else the
/// first (in the order given) that did not, with one line saying each.
fn finish(tasks: &[Waited], out: Output) -> Result<()> {
    let ended: Vec<(&str, &End)> = tasks
        .iter()
        .filter_map(|t| Some((t.task_id.as_str(), t.end.as_ref()?)))
        .collect();
    if out.json {
        let each = ended
            .iter()
            .map(|(task_id, end)| end.json(task_id))
            .collect::<Result<Vec<_>>>()?;
        match each.as_slice() {
            [one] => print_json(one)?,
            _ => print_json(&json!({ "tasks": each }))?,
        }
    }
    let failed: Vec<(Exit, String)> = ended
        .iter()
        .filter_map(|(task_id, end)| Some((end.exit(), end.words(task_id)?)))
        .collect();
    match failed.first() {
        None => Ok(()),
        Some((exit, _)) => {
            let each: Vec<&str> = failed.iter().map(|(_, words)| words.as_str()).collect();
            Err(Failure::new(*exit, each.join("; also ")).into())
        }
    }
}

/// The base URL the job file's watch of the task recorded.
fn recorded_base(wait: &Wait) -> Option<(String, crate::settings::Source)> {
    crate::cmd::recorded_base(&Store::new(wait.state.clone()?), &wait.task_ids)
}

/// The chat a pending watch of each of `task_ids` delivers to, for those the job file
/// (read once, never written or created) has one.
fn watched(wait: &Wait, task_ids: &[&str]) -> HashMap<String, String> {
    let Some(path) = wait.state.clone() else {
        return HashMap::new();
    };
    Store::new(path)
        .peek(|file| {
            task_ids
                .iter()
                .filter_map(|task_id| {
                    let job = file.find(task_id)?;
                    (job.watch == Watch::Pending)
                        .then(|| ((*task_id).to_owned(), job.target.describe_chat()))
                })
                .collect()
        })
        .unwrap_or_default()
}
