//! `atc wait`: poll one task in the foreground until it ends and print what a delivery
//! would carry. It writes no job file (it reads one only to say, at `--timeout`, whether the
//! task is watched). Exit status from the shared table: 0 completed, 1 failed,
//! 6 lost, 124 still running after `--timeout`, 5 server unreachable or token refused.
//! `--json` prints one object of the same shape for every one of them ([`Said`]).

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

/// A wait that ends without the task's result: `--json` prints how ([`said`], `detail`
/// the server's words or how long atc waited); the error says it in `words`.
fn unfinished(
    out: Output,
    task_id: &str,
    outcome: &str,
    exit: Exit,
    detail: &str,
    words: String,
) -> Result<()> {
    if out.json {
        print_json(&said(task_id, outcome, exit, None, None, Some(detail)))?;
    }
    Err(Failure::new(exit, words).into())
}

pub fn run(wait: &Wait, out: Output) -> Result<()> {
    let client = Client::new(wait.http_timeout, wait.auth.clone());
    let (task_id, agent) = (&wait.task_id, &wait.agent.value);
    let chosen = crate::settings::base_for_watched(&wait.base_url, || recorded_base(wait));
    let base = &chosen.value;
    if out.verbose > 0 {
        crate::term::say(&format!("atc: QwenPaw API {base} (from {})", chosen.source));
    }
    let started = Instant::now();
    let mut strikes = 0;
    loop {
        let answer = client.get_task(base, task_id, agent);
        // This poll's failure: a `--timeout` that passes after one is a server out of
        // reach, not a child still running.
        let failing = match task::classify(answer, task_id, base, client.auth()) {
            Poll::Record(record) if record.is_finished() => {
                let outcome = record.outcome();
                let text = render::render_delivery(task_id, &record, None);
                if out.json {
                    let exit = if outcome == TaskOutcome::Completed {
                        Exit::Ok
                    } else {
                        Exit::Refused
                    };
                    let name = serde_json::to_value(outcome)?;
                    print_json(&said(
                        task_id,
                        name.as_str().unwrap_or("other"),
                        exit,
                        Some(record.status.as_str()),
                        Some(&text),
                        None,
                    ))?;
                } else if !out.quiet {
                    emit(&format!("{text}\n"))?;
                }
                if outcome == TaskOutcome::Completed {
                    return Ok(());
                }
                return Err(Failure::new(
                    Exit::Refused,
                    format!(
                        "{task_id} finished but did not succeed ({})",
                        outcome.as_str()
                    ),
                )
                .into());
            }
            Poll::Record(_) => {
                strikes = 0;
                None
            }
            Poll::NotFound { detail } => {
                let words = format!(
                    "{task_id} is lost: the server has no record of it ({detail}); QwenPaw keeps task records in memory only, so it restarted, or the id or base URL {base} is wrong"
                );
                return unfinished(out, task_id, "lost", Exit::Lost, &detail, words);
            }
            Poll::Denied { error } => {
                let words = format!("{task_id}: {error}");
                return unfinished(out, task_id, "refused", Exit::Server, &error, words);
            }
            Poll::Failed { error } => {
                strikes += 1;
                if strikes >= MAX_STRIKES {
                    let words =
                        format!("{task_id}: {strikes} polls in a row failed; last: {error}");
                    return unfinished(out, task_id, "unreachable", Exit::Server, &error, words);
                }
                if out.verbose > 0 {
                    crate::term::say(&format!("atc: poll failed ({strikes} in a row): {error}"));
                }
                Some(error)
            }
        };
        let waited = started.elapsed();
        if let Some(timeout) = wait.timeout
            && waited + wait.interval > timeout
        {
            if let Some(error) = failing {
                let words = format!(
                    "{task_id}: {} failed, and --timeout ({}) passed; last: {error}",
                    crate::text::plural(strikes, "poll", "polls in a row"),
                    human(timeout)
                );
                return unfinished(out, task_id, "unreachable", Exit::Server, &error, words);
            }
            let detail = format!("still running after {} (--timeout)", human(timeout));
            let words = format!(
                "{task_id} is still running after {} (--timeout); {}",
                human(timeout),
                match watched(wait, task_id) {
                    Some(chat) => format!(
                        "it is watched: a tick delivers its result to {chat} when it ends (`atc status {task_id}`)"
                    ),
                    None => "`atc watch` it to have the result delivered when it ends".to_owned(),
                }
            );
            return unfinished(
                out,
                task_id,
                "still_running",
                Exit::TimedOut,
                &detail,
                words,
            );
        }
        if out.verbose > 1 {
            crate::term::say(&format!(
                "atc: {task_id} still running after {}",
                human(waited)
            ));
        }
        std::thread::sleep(wait.interval.max(Duration::from_millis(100)));
    }
}

/// The base URL the job file's watch of the task recorded.
fn recorded_base(wait: &Wait) -> Option<(String, crate::settings::Source)> {
    crate::cmd::recorded_base(
        &Store::new(wait.state.clone()?),
        std::slice::from_ref(&wait.task_id),
    )
}

/// The chat a pending watch of `task_id` delivers to, if the job file (read, never
/// written or created) has one.
fn watched(wait: &Wait, task_id: &str) -> Option<String> {
    let store = Store::new(wait.state.clone()?);
    store
        .peek(|file| {
            file.find(task_id)
                .filter(|job| job.watch == Watch::Pending)
                .map(|job| job.target.describe_chat())
        })
        .ok()
        .flatten()
}
