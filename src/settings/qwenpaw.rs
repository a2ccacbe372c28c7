//! QwenPaw's own configuration: its working dir, the `last_api` its `config.json` holds,
//! the base URL resolved as QwenPaw's clients resolve it, and `atc qwenpaw install`.

use std::path::{Path, PathBuf};

use super::env::Environment;
use super::file::ConfigFile;
use super::keys::Value;
use super::{Action, Auth, Knobs, QwenpawInstall, Replace, Setting, Source, checked, defaults};
use crate::cli;
use crate::exit::{Exit, Failure};

/// `atc qwenpaw install` (and `--replace-agent-task-callback`), `atc qwenpaw zip`.
pub(super) fn qwenpaw(
    args: cli::QwenpawArgs,
    base_url_flag: Option<&str>,
    env: &dyn Environment,
    file: &ConfigFile,
    state: impl FnOnce() -> Result<Setting<PathBuf>, Failure>,
    auth: impl FnOnce() -> Result<Auth, Failure>,
    knobs: impl Fn() -> Result<Knobs, Failure>,
) -> Result<Action, Failure> {
    Ok(match args.what {
        cli::QwenpawCommand::Install {
            working_dir,
            agents,
            all,
            dry_run,
            replace_agent_task_callback,
        } => {
            let mut install = QwenpawInstall {
                dry_run,
                http_timeout: knobs()?.http_timeout.value,
                ..qwenpaw_install(working_dir, agents, all, base_url_flag, env, file, auth()?)?
            };
            if replace_agent_task_callback {
                let wd = &install.working_dir.value;
                let beside = wd.join("agent-task-callback.json");
                let seed_state = match env.home() {
                    Some(home) if !beside.exists() => {
                        home.join(".qwenpaw/agent-task-callback.json")
                    }
                    _ => beside,
                };
                let base_url = match &install.base_url {
                    Some(url) => url.value.clone(),
                    None => base_url(base_url_flag, env, file)?.value,
                };
                install.replace = Some(Replace {
                    seed_state,
                    state: state()?,
                    base_url,
                    max_age: knobs()?.max_age.value,
                });
            }
            Action::QwenpawInstall(install)
        }
        cli::QwenpawCommand::Zip { out, thin } => Action::QwenpawZip {
            out: out.unwrap_or_else(|| PathBuf::from(".")),
            thin,
        },
    })
}

/// The QwenPaw API root new watches talk to, resolved as QwenPaw's own clients do:
/// `--base-url` > `ATC_BASE_URL` > managed runtime (`QWENPAW_RUNTIME_API_URL`, only with
/// `QWENPAW_RUNTIME_ID` and `QWENPAW_RUNTIME_INTERNAL_TOKEN`) > `last_api` in the working
/// dir's `config.json` > `http://127.0.0.1:8088`. Always ends in `/api`.
pub fn base_url(
    flag: Option<&str>,
    env: &dyn Environment,
    file: &ConfigFile,
) -> Result<Setting<String>, Failure> {
    let (raw, source) = if let Some(url) = flag.filter(|u| !u.trim().is_empty()) {
        (url.to_owned(), Source::Flag("--base-url"))
    } else if let Some(url) = env.var("ATC_BASE_URL") {
        (url, Source::Env("ATC_BASE_URL"))
    } else if let (Some(url), Some(_), Some(_)) = (
        env.var("QWENPAW_RUNTIME_API_URL"),
        env.var("QWENPAW_RUNTIME_ID"),
        env.var("QWENPAW_RUNTIME_INTERNAL_TOKEN"),
    ) {
        (url, Source::ManagedRuntime)
    } else if let Some(Setting {
        value: Value::Url(url),
        source,
    }) = file.get("base-url")
    {
        (url, source)
    } else if let Some(config) = qwenpaw_working_dir(env).map(|dir| dir.join("config.json"))
        && let Some(url) = last_api(&config)
    {
        (url, Source::QwenPawConfig(config))
    } else {
        (defaults::BASE_URL.to_owned(), Source::Default)
    };
    let value = crate::validate::base_url(&raw)
        .map_err(|why| Failure::new(Exit::Usage, format!("{source}: {why}")))?;
    Ok(Setting { value, source })
}

pub(super) fn qwenpaw_install(
    working_dir: Option<PathBuf>,
    agents: Vec<String>,
    all: bool,
    base_url_flag: Option<&str>,
    env: &dyn Environment,
    file: &ConfigFile,
    auth: Auth,
) -> Result<QwenpawInstall, Failure> {
    let working_dir = match working_dir {
        Some(dir) => Setting {
            value: dir,
            source: Source::Flag("--working-dir"),
        },
        None => Setting {
            source: if env.var("QWENPAW_WORKING_DIR").is_some() {
                Source::Env("QWENPAW_WORKING_DIR")
            } else {
                Source::Default
            },
            value: qwenpaw_working_dir(env).ok_or_else(|| {
                Failure::new(
                    Exit::Usage,
                    "cannot find a home directory; name QwenPaw's working dir with --working-dir",
                )
            })?,
        },
    };
    let mut named = Vec::new();
    for agent in agents {
        let agent = checked(Setting {
            value: agent,
            source: Source::Flag("--agents"),
        })?
        .value;
        if !named.contains(&agent) {
            named.push(agent);
        }
    }
    let agents = if all {
        crate::install::Agents::All
    } else if named.is_empty() {
        crate::install::Agents::Active
    } else {
        crate::install::Agents::Named(named)
    };
    // The server to load the plugin into: one named outright, else the one that last ran
    // on this working dir (its `last_api`); none when neither says where.
    let base_url = if base_url_flag.is_some_and(|u| !u.trim().is_empty())
        || env.var("ATC_BASE_URL").is_some()
        || file.get("base-url").is_some()
        || (env.var("QWENPAW_RUNTIME_API_URL").is_some()
            && working_dir.source != Source::Flag("--working-dir"))
    {
        Some(base_url(base_url_flag, env, file)?)
    } else {
        let config = working_dir.value.join("config.json");
        match last_api(&config) {
            Some(url) => Some(Setting {
                value: crate::validate::base_url(&url).map_err(|why| {
                    Failure::new(Exit::Usage, format!("{}: {why}", config.display()))
                })?,
                source: Source::QwenPawConfig(config),
            }),
            None => None,
        }
    };
    if let Some(url) = &base_url {
        auth.check_transport(url)?;
    }
    Ok(QwenpawInstall {
        working_dir,
        agents,
        dry_run: false,
        base_url,
        auth,
        http_timeout: defaults::HTTP_TIMEOUT,
        replace: None,
    })
}

/// `$QWENPAW_WORKING_DIR`, else `~/.copaw` if it exists (QwenPaw's former name), else
/// `~/.qwenpaw`.
pub fn qwenpaw_working_dir(env: &dyn Environment) -> Option<PathBuf> {
    if let Some(dir) = env.path("QWENPAW_WORKING_DIR") {
        return Some(dir);
    }
    let home = env.home()?;
    let legacy = home.join(".copaw");
    Some(if legacy.is_dir() {
        legacy
    } else {
        home.join(".qwenpaw")
    })
}

/// `"last_api": {"host": …, "port": …}` from QwenPaw's config.json, as a URL. A missing or
/// unreadable config is not an error: QwenPaw's resolver falls through the same way.
fn last_api(config: &Path) -> Option<String> {
    let text = std::fs::read_to_string(config).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    let api = value.get("last_api")?;
    let host = api.get("host")?.as_str()?.trim();
    let port = api.get("port")?.as_u64()?;
    let host = match host {
        "" | "0.0.0.0" => "127.0.0.1",
        "::" => "::1",
        other => other,
    };
    Some(if host.contains(':') {
        format!("http://[{host}]:{port}")
    } else {
        format!("http://{host}:{port}")
    })
}
