//! `atc qwenpaw install --replace-agent-task-callback`: the move from the seed plugin
//! (Agent Task Callback) in one step, in an order in which the two never both deliver:
//!
//! 1. note which agents have the seed's tools enabled (removing it removes its tool
//!    entries from every agent, and atc's tools have the same names);
//! 2. remove the seed: `DELETE /plugins/agent-task-callback` on the running server (its
//!    shutdown hooks run, no prompt), else its folder from disk (no server: nothing runs
//!    it). From here on it delivers nothing; nothing has been imported yet;
//! 3. import its jobs into atc's job file (its pending ones are watched from now on);
//! 4. mark them handed over in its state file, a copy of the file beside it first, so
//!    that the old plugin, reinstalled (a rollback), does not deliver them again;
//! 5. the caller installs atc's plugin with its tools enabled for exactly those agents.
//!
//! A failure before step 3 leaves the jobs with the seed's state file, untouched; a
//! failure at 4 leaves them watched by atc (the seed is gone), and says so.

use anyhow::Result;
use serde_json::{Value, json};

use crate::exit::{Exit, Failure};
use crate::install::{self, SEED_ID};
use crate::plugin;
use crate::qwenpaw::Client;
use crate::report::LogEntry;
use crate::settings::{QwenpawInstall, Replace};
use crate::state::Store;
use crate::time::Timestamp;

/// What the replacement did, for people and for `--json`.
pub struct Replaced {
    pub text: String,
    pub json: Value,
}

/// Steps 1-4; returns the agents to enable atc's tools for.
pub fn run(
    install: &QwenpawInstall,
    replace: &Replace,
    client: &Client,
    server: &Option<String>,
) -> Result<(Vec<String>, Replaced)> {
    let wd = &install.working_dir.value;
    let dry = install.dry_run;
    let would = |done: &str, would: &str| if dry { would } else { done }.to_owned();
    let seed = install::rivals(wd).into_iter().find(|r| r.id == SEED_ID);
    let Some(seed) = seed else {
        return Err(Failure::new(
            Exit::Refused,
            format!(
                "the Agent Task Callback plugin is not installed in {} (no plugins/ folder with id {SEED_ID:?}): nothing to replace; `atc qwenpaw install` installs atc's plugin",
                wd.display()
            ),
        )
        .into());
    };
    // 1. Which agents had the old tools: read before removing it removes its entries.
    let agents = install::agents_with_seed_tools(wd)?;
    let mut text = format!(
        "Replacing the Agent Task Callback plugin at {}\n",
        seed.dir.display()
    );
    text.push_str(&format!(
        "Its tools are enabled for: {}\n",
        if agents.is_empty() {
            "no agent".to_owned()
        } else {
            agents.join(", ")
        }
    ));

    // The state file is read (and checked) before anything changes.
    let source = &replace.seed_state;
    let seed_text = match std::fs::read_to_string(source) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(Failure::new(
                Exit::Refused,
                format!(
                    "cannot read the plugin's state file {}: {e}; nothing was changed",
                    source.display()
                ),
            )
            .into());
        }
    };
    let now = Timestamp::now();
    let records = match &seed_text {
        Some(text) => {
            plugin::records(text, &replace.base_url, replace.max_age, now).map_err(|why| {
                Failure::new(
                    Exit::Refused,
                    format!(
                        "the plugin's state file {} {why}; nothing was changed",
                        source.display()
                    ),
                )
            })?
        }
        None => Vec::new(),
    };

    // 2. Remove it: from here on it watches and delivers nothing.
    let removed = if dry {
        match server {
            Some(base) => {
                format!("remove it through the QwenPaw at {base} (DELETE /plugins/{SEED_ID})")
            }
            None => format!("remove its folder {}", seed.dir.display()),
        }
    } else {
        remove(client, server, &seed.dir)?
    };
    text.push_str(&format!("{}: {removed}\n", would("Removed", "Would")));

    // 3. Import its jobs.
    let Some(seed_text) = seed_text else {
        text.push_str(&format!(
            "No state file at {}: no jobs to import.\n",
            source.display()
        ));
        return Ok((
            agents.clone(),
            Replaced {
                json: json!({"removed": removed, "agents": agents, "imported": [], "handed_over": []}),
                text,
            },
        ));
    };
    let pending: Vec<String> = records
        .iter()
        .filter_map(|r| match r {
            plugin::Record::Job(job, _) if job.status == crate::job::Status::Pending => {
                Some(job.task_id.clone())
            }
            _ => None,
        })
        .collect();
    if dry {
        text.push_str(&format!(
            "Would import {} from {} ({} still watched) and mark those handed over there, a copy of it beside it first.\n",
            plural(records.len(), "record"),
            source.display(),
            pending.len()
        ));
        return Ok((
            agents.clone(),
            Replaced {
                json: json!({"removed": removed, "agents": agents, "imported": [], "handed_over": []}),
                text,
            },
        ));
    }
    let store = Store::new(replace.state.value.clone());
    let imported = store.update(|file| Ok(plugin::merge(file, records)))?;
    let entries: Vec<LogEntry> = imported
        .added
        .iter()
        .map(|(task_id, status, job_id)| LogEntry {
            at: now,
            event: "imported".into(),
            task_id: task_id.clone(),
            job_id: job_id.clone(),
            turn_id: None,
            status: Some(*status),
            task_status: None,
            outcome: None,
            http_status: None,
            reason: None,
        })
        .collect();
    store.log(&entries)?;
    text.push_str(&format!(
        "Imported {} from {} into {} ({} still watched); {} already there, {} skipped.\n",
        plural(imported.added.len(), "job"),
        source.display(),
        replace.state.value.display(),
        imported
            .added
            .iter()
            .filter(|(_, s, _)| *s == crate::job::Status::Pending)
            .count(),
        imported.already.len(),
        imported.skipped.len()
    ));

    // 4. Mark them handed over, a copy of the file beside it first.
    let (marked_text, marked) = plugin::hand_over(&seed_text, &pending, now)
        .map_err(|why| Failure::new(Exit::Refused, format!("{} {why}", source.display())))?;
    let mut backup = None;
    if !marked.is_empty() {
        let copy = source.with_file_name(format!(
            "{}.before-atc-{}",
            source
                .file_name()
                .map_or("state".into(), |n| n.to_string_lossy()),
            now.to_string().replace(':', "")
        ));
        let written = crate::state::fsutil::write_atomic(&copy, seed_text.as_bytes())
            .and_then(|()| crate::state::fsutil::write_atomic(source, marked_text.as_bytes()));
        if let Err(e) = written {
            return Err(Failure::new(
                Exit::StateUnwritable,
                format!(
                    "cannot mark the imported jobs handed over in {} ({e}): atc watches them now and the old plugin is gone, but reinstalling it would deliver them again; mark them by hand or keep it uninstalled",
                    source.display()
                ),
            )
            .into());
        }
        text.push_str(&format!(
            "Marked {} handed over to atc in {} (as it was before: {}): the old plugin, reinstalled, does not deliver them again.\n",
            plural(marked.len(), "job"),
            source.display(),
            copy.display()
        ));
        backup = Some(copy);
    }
    let json = json!({
        "removed": removed,
        "agents": agents,
        "imported": imported.added.iter().map(|(t, s, _)| json!({"task_id": t, "status": s})).collect::<Vec<_>>(),
        "handed_over": marked,
        "backup": backup,
    });
    Ok((agents, Replaced { text, json }))
}

/// Removes the seed: through the running server's API, else from disk.
fn remove(client: &Client, server: &Option<String>, dir: &std::path::Path) -> Result<String> {
    if let Some(base) = server {
        let answer = client.uninstall_plugin(base, SEED_ID).map_err(|e| {
            Failure::new(
                Exit::Server,
                format!(
                    "cannot remove the Agent Task Callback plugin: {}; nothing was changed",
                    e.message
                ),
            )
        })?;
        match answer.status {
            200 => {
                // QwenPaw deletes the folder itself; one left behind would load again.
                if dir.exists() {
                    let _ = std::fs::remove_dir_all(dir);
                }
                return Ok(format!(
                    "through the QwenPaw at {base}: it no longer watches or delivers"
                ));
            }
            // Installed but not loaded (it failed to load): nothing runs it.
            404 => {}
            status => {
                return Err(Failure::new(
                    Exit::Refused,
                    format!(
                        "the QwenPaw at {base} did not remove the Agent Task Callback plugin (HTTP {status} {}); nothing was changed",
                        crate::text::fit(answer.body.as_deref().unwrap_or(""), 300)
                    ),
                )
                .into());
            }
        }
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| {
            Failure::new(
                Exit::StateUnwritable,
                format!("cannot remove {}: {e}; nothing was imported", dir.display()),
            )
        })?;
    }
    Ok(format!(
        "its folder {} (no running server had it loaded)",
        dir.display()
    ))
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}
