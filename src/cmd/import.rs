//! `atc import-plugin-state`: bring the seed plugin's jobs into the job file. The source
//! is only read, never written; a task the job file already holds is left as it is, so
//! running the import twice changes nothing.

use anyhow::Result;
use serde_json::json;

use crate::cmd::{emit, print_json};
use crate::exit::{Exit, Failure};
use crate::job::Status;
use crate::plugin;
use crate::report::LogEntry;
use crate::settings::{Import, Output};
use crate::state::Store;
use crate::time::Timestamp;

/// The plugin's file is small; anything bigger is not it.
const MAX_SOURCE: u64 = 64 * 1024 * 1024;

pub fn run(import: &Import, out: Output) -> Result<()> {
    let source = &import.source.value;
    let shown = source.display();
    let text = read(source).map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::NotFound {
            "; name the plugin's state file (the plugin keeps it in ~/.qwenpaw/agent-task-callback.json)"
        } else {
            ""
        };
        Failure::new(Exit::Refused, format!("cannot read the plugin's state file {shown}: {e}{hint}"))
    })?;
    let now = Timestamp::now();
    let records: Vec<plugin::Record> =
        plugin::records(&text, &import.base_url.value, import.max_age, now).map_err(|why| {
            Failure::new(
                Exit::Refused,
                format!("the plugin's state file {shown} {why}; nothing was imported"),
            )
        })?;

    let total = records.len();
    let store = Store::new(import.state.value.clone());
    let plugin::Imported {
        added: imported,
        already,
        skipped,
    } = store.update(|file| Ok(plugin::merge(file, records)))?;
    let entries: Vec<LogEntry> = imported
        .iter()
        .map(|(task_id, status, job_id)| LogEntry {
            status: Some(*status),
            ..LogEntry::about("imported", task_id, job_id, now)
        })
        .collect();
    store.log(&entries)?;

    if out.json {
        return print_json(&json!({
            "source": source,
            "imported": imported.iter().map(|(t, s, _)| json!({"task_id": t, "status": s})).collect::<Vec<_>>(),
            "already": already,
            "skipped": skipped.iter().map(|(t, w)| json!({"task_id": t, "why": w})).collect::<Vec<_>>(),
        }));
    }
    let mut text = String::new();
    if !out.quiet {
        let pending = imported
            .iter()
            .filter(|(_, s, _)| *s == Status::Pending)
            .count();
        text.push_str(&format!(
            "Imported {} from {shown} ({pending} still watched, {} as history)",
            plural(imported.len(), "job"),
            imported.len() - pending
        ));
        if !already.is_empty() {
            text.push_str(&format!(
                "; {} already in the job file, left as they are",
                already.len()
            ));
        }
        if !skipped.is_empty() {
            text.push_str(&format!(
                "; {} skipped (each is named below, with why)",
                plural(skipped.len(), "record")
            ));
        }
        text.push_str(".\n");
        if pending > 0 {
            text.push_str("The next atc tick polls the pending ones; stop the plugin first so only one of them delivers.\n");
        }
    }
    emit(&text)?;
    if !out.quiet {
        for (task_id, why) in &skipped {
            crate::term::say(&format!("atc: warning: skipped {task_id}: it {why}"));
        }
        if total == 0 {
            crate::term::say(&format!(
                "atc: warning: {shown} holds no job records: it may not be the plugin's state file (the plugin keeps it in ~/.qwenpaw/agent-task-callback.json)"
            ));
        }
    }
    Ok(())
}

fn read(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(MAX_SOURCE)
        .read_to_string(&mut text)?;
    Ok(text)
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}
