//! `atc import-plugin-state`: bring the seed plugin's jobs into the job file. The source
//! is only read, never written; a task the job file already holds is left as it is, so
//! running the import twice changes nothing.

use anyhow::Result;
use serde_json::json;

use crate::cmd::{emit, print_json};
use crate::exit::{Exit, Failure};
use crate::job::Status;
use crate::plugin;
use crate::settings::{Import, Output};
use crate::state::Store;
use crate::text::plural;
use crate::time::Timestamp;

/// The plugin's file is small; anything bigger is not it.
const MAX_SOURCE: u64 = 64 * 1024 * 1024;

pub fn run(import: &Import, out: Output) -> Result<()> {
    let source = &import.source.value;
    let shown = source.display();
    let text = read_plugin_state(source).map_err(|e| {
        let hint = match e.kind() {
            std::io::ErrorKind::NotFound
            | std::io::ErrorKind::FileTooLarge
            | std::io::ErrorKind::InvalidData => {
                "; name the plugin's state file (the plugin keeps it in ~/.qwenpaw/agent-task-callback.json)"
            }
            _ => "",
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
    let done = store.update(|file| Ok(plugin::merge(file, records)))?;
    store.log(&done.log_entries(now))?;
    let plugin::Imported {
        added: imported,
        already,
        skipped,
    } = done;

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
            plural(imported.len() as u64, "job", "jobs"),
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
                plural(skipped.len() as u64, "record", "records")
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

/// The seed plugin's state file, whole: over 64 MiB (far more than the plugin writes) or
/// not UTF-8, it is refused by what is wrong, never read in part.
pub(super) fn read_plugin_state(path: &std::path::Path) -> std::io::Result<String> {
    let bytes = crate::state::fsutil::read_at_most(std::fs::File::open(path)?, MAX_SOURCE)?;
    String::from_utf8(bytes)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}
