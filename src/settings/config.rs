//! `atc config`: which file, and for `show` and `get` every value in effect here with its
//! source; for `set`, the value checked by the validator its flag uses.

use std::path::PathBuf;

use super::env::Environment;
use super::file::{self, ConfigFile};
use super::keys::{self, Kind, Value};
use super::{Config, ConfigAction, JobFileMove, Knobs, Shown, base_url, state_path};
use crate::cli::{self, ConfigCommand};
use crate::exit::{Exit, Failure};

pub(super) fn config(
    args: cli::ConfigArgs,
    state_flag: Option<PathBuf>,
    base_url_flag: Option<&str>,
    env: &dyn Environment,
) -> Result<Config, Failure> {
    let key = |name: &str| keys::known(name).map_err(|why| Failure::new(Exit::Usage, why));
    let shown = |file: &ConfigFile| -> Result<Vec<Shown>, Failure> {
        let state = state_path(state_flag.clone(), env, file)?;
        let url = base_url(base_url_flag, env, file)?;
        let mut rows = vec![
            ("state", Some(Value::Path(state.value)), state.source),
            ("base-url", Some(Value::Url(url.value)), url.source),
        ];
        rows.extend(Knobs::resolve(None, env, file)?.rows());
        Ok(rows
            .into_iter()
            .map(|(name, value, source)| Shown {
                key: keys::key(name).expect("a known key"),
                value,
                source,
            })
            .collect())
    };
    let what = match args.what {
        ConfigCommand::Path => {
            return Ok(Config {
                file: file::located(env),
                what: ConfigAction::Path,
            });
        }
        ConfigCommand::Show => {
            let file = file::load_for_show(env)?;
            let rows = shown(&file)?;
            return Ok(Config {
                file,
                what: ConfigAction::Show(rows),
            });
        }
        ConfigCommand::Get { key: name } => {
            let key = key(&name)?;
            let file = file::load_for_show(env)?;
            // Its own line refused: what the ticks would use cannot be told.
            if let Some(why) = file.skipped_line(key.name) {
                return Err(Failure::new(Exit::Config, why));
            }
            let row = shown(&file)?
                .into_iter()
                .find(|row| row.key.name == key.name)
                .expect("every key is shown");
            return Ok(Config {
                file,
                what: ConfigAction::Get(row),
            });
        }
        ConfigCommand::Set {
            key: name,
            value,
            force,
        } => {
            let key = key(&name)?;
            let home = env.home();
            let text = match key.kind {
                // A relative path means the directory this shell is in now.
                Kind::Path if !value.is_empty() && !value.starts_with("~/") => {
                    std::path::absolute(&value)
                        .map_err(|e| {
                            Failure::new(Exit::Usage, format!("{} {value:?}: {e}", key.name))
                        })?
                        .to_string_lossy()
                        .into_owned()
                }
                _ => value,
            };
            let checked = key.kind.parse(&text, home.as_deref()).map_err(|why| {
                Failure::new(
                    Exit::Usage,
                    format!("{} {}: {why}", key.name, crate::text::preview(&text)),
                )
            })?;
            if let Value::Path(path) = &checked
                && path.is_dir()
            {
                return Err(Failure::new(
                    Exit::Usage,
                    format!(
                        "{} {:?} must name a file, not a directory",
                        key.name,
                        path.display().to_string()
                    ),
                ));
            }
            let moves = match (&checked, key.name) {
                (Value::Path(to), "state") => job_file_move(env, to.clone(), force),
                _ => None,
            };
            ConfigAction::Set {
                key,
                value: checked,
                shadowed_by: env.path(key.env).is_some().then_some(key.env),
                home,
                moves,
            }
        }
        ConfigCommand::Unset { key, force } => ConfigAction::Unset {
            moves: (key == "state")
                .then(|| super::job_file::default_job_file(env))
                .flatten()
                .and_then(|to| job_file_move(env, to, force)),
            key,
            home: env.home(),
        },
    };
    Ok(Config {
        file: file::located(env),
        what,
    })
}

/// The job file the ticks read now (the config file's `state`, else the default: a tick
/// from the timer or the plugin names no `--state` and, as a rule, no `ATC_STATE`) when a
/// change of `state` makes them read `to` instead. `None` when it stays the same file, or
/// which file they read now cannot be told (no home directory; a config file that is not
/// TOML, which every tick refuses anyway).
fn job_file_move(env: &dyn Environment, to: PathBuf, force: bool) -> Option<JobFileMove> {
    use super::job_file::{configured_job_file, default_job_file, same_file};
    let file = file::load_for_watch(env).ok()?;
    let from = configured_job_file(&file).or_else(|| default_job_file(env))?;
    (!same_file(&from, &to)).then_some(JobFileMove { from, to, force })
}
