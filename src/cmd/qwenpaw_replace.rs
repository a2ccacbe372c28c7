//! `atc qwenpaw install --replace-agent-task-callback`: the move from the seed plugin
//! (Agent Task Callback) in one step, in an order that never leaves a task watched by
//! nobody or by both:
//!
//! 1. note which agents have the seed's tools enabled (removing it removes its tool
//!    entries from every agent, and atc's tools have the same names);
//! 2. read and check its state file; nothing has changed yet;
//! 3. under atc's job-file lock (no tick can see or deliver the imported jobs until it is
//!    released): merge its jobs into atc's job file in memory, prove that the merged file
//!    can be saved (the same bytes written beside it), then remove the seed:
//!    `DELETE /plugins/agent-task-callback` on the running server (its shutdown hooks
//!    stop its threads, no prompt), else its folder from disk (no server: nothing runs
//!    it); then save. A removal that fails saves nothing (the import is rolled back, the
//!    seed keeps delivering); a save that fails after it leaves the jobs pending in the
//!    seed's state file, which a second run imports (the seed need not be installed);
//! 4. mark them handed over in its state file, a copy of the file beside it first, so
//!    that the old plugin, reinstalled (a rollback), does not deliver them again, and
//!    atc's plugin (which stands by while the seed is installed or its state file holds
//!    pending jobs nobody moved) starts delivering;
//! 5. the caller installs atc's plugin with its tools enabled for exactly those agents,
//!    and has the server load it again (the seed held the tool names until now).

use std::cell::Cell;

use anyhow::Result;
use serde_json::{Value, json};

use crate::exit::{Exit, Failure};
use crate::install::{self, SEED_ID};
use crate::plugin;
use crate::qwenpaw::Client;
use crate::settings::{QwenpawInstall, Replace};
use crate::state::Store;
use crate::text::plural;
use crate::time::Timestamp;

/// What the replacement did, for people and for `--json`.
pub struct Replaced {
    pub text: String,
    pub json: Value,
}

/// Steps 1-4; returns the agents to enable atc's tools for (None: the seed was gone
/// already, and with it the record of which agents had its tools: the usual choice).
pub fn run(
    install: &QwenpawInstall,
    replace: &Replace,
    client: &Client,
    server: &Option<String>,
) -> Result<(Option<Vec<String>>, Replaced)> {
    let wd = &install.working_dir.value;
    let dry = install.dry_run;
    let seed = install::rivals(wd).into_iter().find(|r| r.id == SEED_ID);

    // The state file is read (and checked) before anything changes.
    let source = &replace.seed_state;
    let seed_text = match super::import::read_plugin_state(source) {
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
    // The tasks the seed still watches (imported as watched, or as expired history when
    // older than the age cap): each is marked handed over once atc has it.
    let owed: Vec<String> = records
        .iter()
        .filter_map(|r| match r {
            plugin::Record::Job(job, _)
                if matches!(
                    job.watch,
                    crate::job::Watch::Pending | crate::job::Watch::Expired
                ) =>
            {
                Some(job.task_id.clone())
            }
            _ => None,
        })
        .collect();

    let Some(seed) = seed else {
        if owed.is_empty() {
            return Err(Failure::new(
                Exit::Refused,
                format!(
                    "the Agent Task Callback plugin is not installed in {} (no plugins/ folder with id {SEED_ID:?}) and its state file {} holds no job it still watches: nothing to replace; `atc qwenpaw install` installs atc's plugin",
                    wd.display(),
                    source.display()
                ),
            )
            .into());
        }
        // Removed already (by hand, or by a run whose save failed): its jobs are owed.
        let mut text = format!(
            "The Agent Task Callback plugin is not installed in {}, but its state file {} still holds {} nobody moved to atc\n",
            wd.display(),
            source.display(),
            plural(owed.len() as u64, "job", "jobs")
        );
        let (said, json) = import(
            replace,
            records,
            &owed,
            seed_text.as_deref().unwrap_or_default(),
            dry,
            now,
            None,
        )?;
        text.push_str(&said);
        return Ok((None, Replaced { text, json }));
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
    let removal = Removal {
        client,
        server,
        dir: &seed.dir,
    };
    let (said, json) = import(
        replace,
        records,
        &owed,
        seed_text.as_deref().unwrap_or_default(),
        dry,
        now,
        Some(&removal),
    )?;
    text.push_str(&said);
    let mut json = json;
    json["agents"] = json!(agents);
    Ok((Some(agents), Replaced { text, json }))
}

/// How to remove the seed (step 3), when it is installed.
struct Removal<'a> {
    client: &'a Client,
    server: &'a Option<String>,
    dir: &'a std::path::Path,
}

/// Steps 3 and 4: import `records` (removing the seed under the lock, when `removal`),
/// then mark `owed` handed over in the seed's state file.
#[allow(clippy::too_many_arguments)]
fn import(
    replace: &Replace,
    records: Vec<plugin::Record>,
    owed: &[String],
    seed_text: &str,
    dry: bool,
    now: Timestamp,
    removal: Option<&Removal>,
) -> Result<(String, Value)> {
    let source = &replace.seed_state;
    let mut text = String::new();
    if dry {
        if !seed_text.is_empty() {
            // The import on a copy of atc's job file as it is now: the counts the real run
            // will say, in its words.
            let mut file = Store::new(replace.state.value.clone()).load()?;
            let imported = plugin::merge(&mut file, records);
            let marked = plugin::hand_over(seed_text, owed, now)
                .map_or(owed.len(), |(_, names)| names.len());
            text.push_str(&summary(&imported, replace, Tense::Future));
            if marked > 0 {
                text.push_str(&format!(
                    "Would mark {} handed over to atc in {}, a copy of it beside it first.\n",
                    plural(marked as u64, "job", "jobs"),
                    source.display()
                ));
            }
        } else {
            text.push_str(&format!(
                "No state file at {}: no jobs to import.\n",
                source.display()
            ));
        }
        let removed = removal.map(|r| match r.server {
            Some(base) => {
                format!("remove it through the QwenPaw at {base} (DELETE /plugins/{SEED_ID})")
            }
            None => format!("remove its folder {}", r.dir.display()),
        });
        if let Some(removed) = &removed {
            text.push_str(&format!("Would then {removed}\n"));
        }
        return Ok((
            text,
            json!({"removed": removed, "imported": [], "handed_over": []}),
        ));
    }

    // 3. Import under the lock, proved before the seed goes; the seed goes before the save.
    let store = Store::new(replace.state.value.clone());
    let removed_it = Cell::new(false);
    let done = store.update(|file| {
        let imported = plugin::merge(file, records);
        store.prove_save(file)?;
        let removed = match removal {
            Some(r) => {
                let said = remove(r.client, r.server, r.dir)?;
                removed_it.set(true);
                Some(said)
            }
            None => None,
        };
        Ok((imported, removed))
    });
    let (imported, removed) = match done {
        Ok(done) => done,
        Err(err) if removed_it.get() => {
            return Err(Failure::new(
                Exit::StateUnwritable,
                format!(
                    "{err:#}; the Agent Task Callback plugin is removed already and its jobs are still pending in {}: run this command again once the job file can be written, it imports them then",
                    source.display()
                ),
            )
            .into());
        }
        Err(err) => return Err(err),
    };
    store.log(&imported.log_entries(now))?;
    if seed_text.is_empty() {
        text.push_str(&format!(
            "No state file at {}: no jobs to import.\n",
            source.display()
        ));
    } else {
        text.push_str(&summary(&imported, replace, Tense::Past));
    }
    if let Some(removed) = &removed {
        text.push_str(&format!("Removed: {removed}\n"));
    }

    // 4. Mark them handed over, a copy of the file beside it first.
    let mut backup = None;
    let mut marked = Vec::new();
    if !seed_text.is_empty() {
        let (marked_text, names) = plugin::hand_over(seed_text, owed, now)
            .map_err(|why| Failure::new(Exit::Refused, format!("{} {why}", source.display())))?;
        marked = names;
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
                        "cannot mark the imported jobs handed over in {} ({e}): atc watches them now and the old plugin is gone, but reinstalling it would deliver them again, and atc's plugin stands by until they are marked; run this command again once the file can be written",
                        source.display()
                    ),
                )
                .into());
            }
            text.push_str(&format!(
                "Marked {} handed over to atc in {} (as it was before: {}): the old plugin, reinstalled, does not deliver them again.\n",
                plural(marked.len() as u64, "job", "jobs"),
                source.display(),
                copy.display()
            ));
            backup = Some(copy);
        }
    }
    let json = json!({
        "removed": removed,
        "imported": imported.added.iter().map(|(t, s, _)| json!({"task_id": t, "status": s})).collect::<Vec<_>>(),
        "skipped": imported.skipped.iter().map(|(t, why)| json!({"task_id": t, "why": why})).collect::<Vec<_>>(),
        "handed_over": marked,
        "backup": backup,
    });
    Ok((text, json))
}

/// "0 skipped", or each skipped task with its reason.
/// Whether the import is done or what a dry run would do.
enum Tense {
    Past,
    Future,
}

/// What the import did (or would do), one line, in the same counts either way.
fn summary(imported: &plugin::Imported, replace: &Replace, tense: Tense) -> String {
    let (verb, watched) = match tense {
        Tense::Past => ("Imported", "still watched"),
        Tense::Future => ("Would import", "to be watched"),
    };
    format!(
        "{verb} {} from {} into {} ({} {watched}); {} already there, {}.\n",
        plural(imported.added.len() as u64, "job", "jobs"),
        replace.seed_state.display(),
        replace.state.value.display(),
        imported
            .added
            .iter()
            .filter(|(_, s, _)| *s == crate::job::Status::Pending)
            .count(),
        imported.already.len(),
        skipped(&imported.skipped)
    )
}

fn skipped(skipped: &[(String, String)]) -> String {
    if skipped.is_empty() {
        return "0 skipped".to_owned();
    }
    let listed: Vec<String> = skipped
        .iter()
        .map(|(task, why)| format!("{task} {why}"))
        .collect();
    format!("{} skipped ({})", skipped.len(), listed.join("; "))
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
