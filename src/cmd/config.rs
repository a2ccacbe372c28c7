//! `atc config`: print where the config file is and what every setting is here (with its
//! source), or change one key of the file (`settings::file::edit` keeps the rest).

use anyhow::Result;
use serde_json::{Map, Value as Json, json};

use crate::cmd::{emit, print_json};
use crate::exit::{Exit, Failure};
use crate::settings::file::{self, ConfigFile, Edited};
use crate::settings::keys;
use crate::settings::{Config, ConfigAction, JobFileMove, Output, Shown, Source};

pub fn run(config: &Config, out: Output) -> Result<()> {
    let file = &config.file;
    let path = || {
        file.path.clone().ok_or_else(|| {
            Failure::new(
                Exit::Config,
                "cannot find a home directory for the config file: name one with ATC_CONFIG",
            )
        })
    };
    match &config.what {
        ConfigAction::Path => {
            let path = path()?;
            if out.json {
                print_json(
                    &json!({"path": path, "exists": file.exists, "located_by": located_by(file)}),
                )
            } else {
                emit(&format!("{}\n", path.display()))
            }
        }
        ConfigAction::Show(rows) => {
            if out.json {
                let mut settings = Map::new();
                for row in rows {
                    settings.insert(row.key.name.to_owned(), row_json(row));
                }
                print_json(&json!({
                    "file": {"path": file.path, "exists": file.exists, "located_by": located_by(file)},
                    "settings": settings,
                    "config_skipped": file.skipped,
                }))?;
            } else {
                emit(&show(file, rows))?;
            }
            crate::cmd::warn_config_skipped(&file.skipped, out);
            Ok(())
        }
        ConfigAction::Get(row) => {
            if out.json {
                print_json(&row_json(row))?;
            } else if let Some(value) = &row.value {
                emit(&format!("{}\n", value.shown()))?;
            }
            crate::cmd::warn_config_skipped(&file.skipped, out);
            Ok(())
        }
        ConfigAction::Set {
            key,
            value,
            shadowed_by,
            home,
            moves,
        } => {
            let path = path()?;
            let left = moves.as_ref().map(left_watching).transpose()?.flatten();
            file::edit(&path, key.name, Some(value))?;
            if out.verbose > 0 {
                crate::term::say(&format!(
                    "config: {} = {} in {}",
                    key.name,
                    value.shown(),
                    path.display()
                ));
            }
            if let Some(var) = shadowed_by
                && !out.quiet
            {
                crate::term::say(&format!(
                    "atc: note: {var} is set in this environment and beats the config file here (unset it to use the file's {})",
                    key.name
                ));
            }
            say_left(left, out);
            after_edit(&path, home.as_deref(), out)
        }
        ConfigAction::Unset { key, home, moves } => {
            let path = path()?;
            let left = moves.as_ref().map(left_watching).transpose()?.flatten();
            match file::edit(&path, key, None)? {
                Edited::WasNotSet if keys::key(key).is_none() => {
                    Err(Failure::new(Exit::Usage, keys::unknown(key)).into())
                }
                Edited::WasNotSet => {
                    if out.verbose > 0 {
                        crate::term::say(&format!(
                            "config: {key} was not set in {}",
                            path.display()
                        ));
                    }
                    Ok(())
                }
                Edited::Unset | Edited::Set => {
                    if out.verbose > 0 {
                        crate::term::say(&format!("config: {key} removed from {}", path.display()));
                    }
                    say_left(left, out);
                    after_edit(&path, home.as_deref(), out)
                }
            }
        }
    }
}

/// A change of `state` leaves the job file the ticks read until now: refused while that
/// file still watches tasks (nothing would tick it, and their results would be lost),
/// unless `--force`; then the warning. A file that cannot be read is not looked into.
fn left_watching(moves: &JobFileMove) -> Result<Option<String>> {
    let Some((live, what)) = crate::cmd::still_watching(&moves.from) else {
        return Ok(None);
    };
    let from = moves.from.display();
    let (them, their) = if live == 1 {
        ("it", "its result")
    } else {
        ("them", "their results")
    };
    if !moves.force {
        return Err(Failure::new(
            Exit::Refused,
            format!(
                "{what}: once the ticks read {} instead, nothing delivers {their}; wait until `atc --state {from} status` shows {them} ended (or `atc --state {from} cancel` {them}), or pass --force to change it anyway",
                moves.to.display()
            ),
        )
        .into());
    }
    Ok(Some(format!(
        "atc: warning: {what}, and the ticks read {} now: nothing delivers {their} (`atc --state {from} status` lists {them})",
        moves.to.display()
    )))
}

fn say_left(left: Option<String>, out: Output) {
    if let Some(line) = left
        && !out.quiet
    {
        crate::term::say(&line);
    }
}

/// An edit that leaves the file still unusable for another reason (another key's typo)
/// says so at once, rather than at the next tick.
fn after_edit(path: &std::path::Path, home: Option<&std::path::Path>, out: Output) -> Result<()> {
    if let Err(still) = file::recheck(path, home)
        && !out.quiet
    {
        crate::term::say(&format!("atc: note: saved, but {still}"));
    }
    Ok(())
}

fn located_by(file: &ConfigFile) -> &'static str {
    match &file.located {
        Some(Source::Env(var)) => var,
        _ => "default",
    }
}

fn row_json(row: &Shown) -> Json {
    json!({
        "value": row.value.as_ref().map_or(Json::Null, keys::Value::json),
        "source": row.source.kind(),
        "from": row.source.to_string(),
        "env": row.key.env,
        "flag": row.key.flag,
        "about": row.key.about,
    })
}

/// The text of `config show`: the file, then one aligned line per key.
fn show(file: &ConfigFile, rows: &[Shown]) -> String {
    let mut text = match &file.path {
        Some(path) => format!(
            "# config file: {}{}{}\n",
            path.display(),
            match &file.located {
                Some(Source::Env(var)) => format!(" ({var})"),
                _ => String::new(),
            },
            if file.exists {
                String::new()
            } else {
                " (none yet: `atc config set KEY VALUE` starts it)".to_owned()
            }
        ),
        None => "# config file: none (no home directory; ATC_CONFIG names one)\n".to_owned(),
    };
    let values: Vec<String> = rows
        .iter()
        .map(|row| match &row.value {
            Some(value) => value.shown(),
            None => "(QwenPaw's own, 1h)".to_owned(),
        })
        .collect();
    let width = values.iter().map(|v| v.chars().count()).max().unwrap_or(0);
    let key_width = rows.iter().map(|r| r.key.name.len()).max().unwrap_or(0);
    for (row, value) in rows.iter().zip(&values) {
        let from = match &row.source {
            Source::File { .. } => "config file".to_owned(),
            Source::Default => "default".to_owned(),
            other => other.to_string(),
        };
        let from = match file.skipped_line(row.key.name) {
            Some(_) => format!("{from} (the file's line is refused: see below)"),
            None => from,
        };
        text.push_str(&format!(
            "{:<key_width$}  {value:<width$}  {from}\n",
            row.key.name
        ));
    }
    text
}
