//! `atc log`: the event log beside the job file, oldest first: the last 50 events (or
//! `--all`), of the tasks named when some are. Human lines, or `{"events": [...]}` with
//! `--json`. The log holds typed facts only, so nothing here can leak a message.

use anyhow::Result;
use serde_json::json;

use crate::cmd::{emit, print_json};
use crate::exit::Exit;
use crate::fail;
use crate::report::LogEntry;
use crate::settings::{Log, Output};
use crate::state::journal;

/// Events shown without `--all`.
pub const RECENT: usize = 50;

pub fn run(log: &Log, out: Output) -> Result<()> {
    let path = &log.state.value;
    let (mut events, skipped) = journal::read(path)?;
    if skipped > 0 && !out.quiet {
        crate::term::say(&format!(
            "atc: warning: skipped {} of the event log {} that {} not an event (a torn or edited line)",
            if skipped == 1 {
                "1 line".to_owned()
            } else {
                format!("{skipped} lines")
            },
            journal::path(path).display(),
            if skipped == 1 { "is" } else { "are" },
        ));
    }
    if !log.task_ids.is_empty() {
        events.retain(|e| log.task_ids.contains(&e.task_id));
        let store = crate::state::Store::new(log.state.value.clone());
        for task_id in &log.task_ids {
            if !events.iter().any(|e| &e.task_id == task_id) {
                let (source, others) = (&log.state.source, &log.other_job_files);
                crate::cmd::watched_elsewhere(task_id, &store, source, others)?;
                fail!(
                    Exit::Refused,
                    "the event log {} has no events for {task_id}",
                    journal::path(path).display()
                );
            }
        }
    }
    if !log.all && events.len() > RECENT {
        events.drain(..events.len() - RECENT);
    }
    if out.json {
        return print_json(&json!({ "events": events }));
    }
    if out.quiet {
        return Ok(());
    }
    if events.is_empty() {
        return emit(&format!(
            "No events yet in {} (`atc watch` starts one).\n",
            journal::path(path).display()
        ));
    }
    let mut text = String::new();
    for event in &events {
        text.push_str(&line(event));
        text.push('\n');
    }
    emit(&text)
}

/// `2026-12-01T08:00:00Z  task-1  polled (finished, completed)  → delivering  job 3f…`, and
/// `  turn atc-3f…` for what happened to the turn that carries it.
fn line(e: &LogEntry) -> String {
    let task = if e.task_id.is_empty() {
        "(tick)"
    } else {
        e.task_id.as_str()
    };
    let mut line = format!("{}  {task}  {}", e.at, e.event);
    match (&e.task_status, e.outcome) {
        (Some(status), Some(outcome)) => {
            line.push_str(&format!(" ({status}, {})", outcome.as_str()))
        }
        (Some(status), None) => line.push_str(&format!(" ({status})")),
        _ => {}
    }
    if let Some(status) = e.status {
        line.push_str(&format!("  → {status}"));
    }
    if let Some(code) = e.http_status {
        line.push_str(&format!("  HTTP {code}"));
    }
    if let Some(reason) = &e.reason {
        line.push_str(&format!("  ({reason})"));
    }
    if !e.job_id.is_empty() {
        line.push_str(&format!("  job {}", e.job_id));
    }
    if let Some(turn) = &e.turn_id {
        line.push_str(&format!("  turn {turn}"));
    }
    line
}
