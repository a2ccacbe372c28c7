//! Resolved settings: [`resolve`] turns the parsed command line, the environment and
//! atc's config file into one [`Settings`], every value plain and checked, each with the
//! [`Source`] it came from (flag > environment > config file > default; the base URL also
//! looks at QwenPaw's own configuration), so that every message names the real origin of
//! a bad value. The only reader of the process environment (tokens included) and of the
//! config file; nothing below it sees the command line.
//!
//! One file per concern: `env` (the variables), `file` (the config file: where, read,
//! checked, edited) and `keys` (what it may hold, with the one validator per kind the flags
//! share), `auth` (tokens and where they may go), `qwenpaw` (QwenPaw's own configuration:
//! the base URL, the working dir, `qwenpaw install`), `job_file`, `from` (`watch --from`),
//! one file per command that needs more than a few lines (`watch`, `tick` with the knobs
//! every command shares, `timer`, `config`), and `commands` (what each command gets).

mod auth;
mod commands;
mod config;
pub mod defaults;
mod env;
pub mod file;
mod from;
mod job_file;
pub mod keys;
mod qwenpaw;
mod tick;
mod timer;
mod watch;

#[cfg(test)]
mod tests;

use std::fmt;
use std::path::{Path, PathBuf};

pub use auth::{Auth, insecure_refusal, insecure_remote_host};
pub use commands::{
    Cancel, Config, ConfigAction, Doctor, Generate, Import, JobFileMove, Log, ParentRead, Paths,
    QwenpawInstall, Redeliver, Replace, Schedule, Shown, Status, Tick, Timer, Wait, Watch,
};
pub use env::{Environment, ProcessEnv, TEXT_VARS, VarsEnv};
pub use file::ConfigFile;
pub use job_file::state_path;
pub use qwenpaw::{base_url, qwenpaw_working_dir};
pub use tick::{Knobs, default_limits};

use crate::cli::{self, Cli, Command, Generated};
use crate::exit::{Exit, Failure};
use crate::ids::parse_task_ids;
use env::check_unicode;

/// Where a value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A command-line flag (`--session`).
    Flag(&'static str),
    /// An environment variable (`ATC_SESSION_ID`).
    Env(&'static str),
    /// `QWENPAW_RUNTIME_API_URL`, honoured with `QWENPAW_RUNTIME_ID` and the runtime token.
    ManagedRuntime,
    /// `last_api` in QwenPaw's `config.json` at this path.
    QwenPawConfig(PathBuf),
    /// `key` in atc's config file at `path`.
    File {
        path: PathBuf,
        key: &'static str,
    },
    Default,
    /// The base URL the job file's watch of this task recorded (`wait`, a re-watch).
    Watched {
        task_id: String,
        file: PathBuf,
    },
}

impl Source {
    /// One word for scripts (`config show --json`): flag, env, file, qwenpaw, default or
    /// watch.
    pub fn kind(&self) -> &'static str {
        match self {
            Source::Flag(_) => "flag",
            Source::Env(_) | Source::ManagedRuntime => "env",
            Source::File { .. } => "file",
            Source::QwenPawConfig(_) => "qwenpaw",
            Source::Default => "default",
            Source::Watched { .. } => "watch",
        }
    }

    /// Named by a person for this command: a flag, the environment, a managed runtime's
    /// variable; not a file or a default.
    pub fn named(&self) -> bool {
        matches!(
            self,
            Source::Flag(_) | Source::Env(_) | Source::ManagedRuntime
        )
    }
}

/// The base URL a command about watched tasks asks: the one a person named
/// ([`Source::named`]), else the one the job file's watches of those tasks recorded (one
/// server for all of them), else the resolved one. With two servers, a task watched on
/// the second is never looked for on, nor moved to, the first because a config file or
/// the default says so.
/// `recorded` (the job file's read) runs only when nobody named one.
pub fn base_for_watched(
    resolved: &Setting<String>,
    recorded: impl FnOnce() -> Option<(String, Source)>,
) -> Setting<String> {
    match (resolved.source.named(), recorded) {
        (false, recorded) => match recorded() {
            Some((value, source)) => Setting { value, source },
            None => resolved.clone(),
        },
        (true, _) => resolved.clone(),
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Flag(name) | Source::Env(name) => f.write_str(name),
            Source::ManagedRuntime => f.write_str("QWENPAW_RUNTIME_API_URL"),
            Source::QwenPawConfig(path) => write!(f, "last_api in {}", path.display()),
            Source::File { path, key } => write!(f, "{key} in {}", path.display()),
            Source::Default => f.write_str("the default"),
            Source::Watched { task_id, file } => {
                write!(f, "the watch of {task_id} in {}", file.display())
            }
        }
    }
}

/// A resolved value and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting<T> {
    pub value: T,
    pub source: Source,
}

/// How much to print, and in which form.
#[derive(Clone, Copy, Debug, Default)]
pub struct Output {
    pub json: bool,
    pub quiet: bool,
    pub verbose: u8,
}

/// Everything a run needs: what to print, and what to do.
#[derive(Debug)]
pub struct Settings {
    pub output: Output,
    pub action: Action,
}

#[derive(Debug)]
pub enum Action {
    Watch(Box<Watch>),
    Status(Status),
    Cancel(Cancel),
    Tick(Tick),
    Redeliver(Redeliver),
    Wait(Wait),
    Doctor(Doctor),
    Log(Log),
    Paths(Paths),
    Import(Import),
    Timer(Timer),
    Config(Config),
    QwenpawInstall(QwenpawInstall),
    /// `atc qwenpaw zip`: the folder the plugin zip goes into.
    /// `atc qwenpaw zip`: where to write it, and whether thin (requirements, no atc).
    QwenpawZip {
        out: std::path::PathBuf,
        thin: bool,
    },
    Generate(Generate),
    ParentRead(ParentRead),
}

/// The command line, the environment and the config file, resolved and checked. Only the
/// settings the command uses are resolved (`generate` needs no job file).
pub fn resolve(cli: Cli, env: &dyn Environment) -> Result<Settings, Failure> {
    let output = Output {
        json: cli.json,
        quiet: cli.quiet,
        verbose: cli.verbose,
    };
    check_unicode(env)?;
    // Every command reads the config file and refuses a bad one, but those that need
    // none of its values: `generate`, `qwenpaw zip`, and `config`, which must be able to
    // mend a broken file (it reads the file itself where it needs to).
    let file = match &cli.command {
        Command::Generate(_)
        | Command::Config(_)
        | Command::Qwenpaw(cli::QwenpawArgs {
            what: cli::QwenpawCommand::Zip { .. },
        }) => ConfigFile::default(),
        // A watch is recorded whatever is wrong with the tick's knobs (it says what); `paths`
        // answers (the plugin asks it before it records an automatic watch), and so does
        // `parent-read` (the plugin's word that a parent read a result: refused, the result
        // would be posted all the same); `status` and `doctor` show the job file and say
        // what is wrong with the config file instead of refusing to (issue 36).
        Command::Watch(_)
        | Command::Paths
        | Command::ParentRead(_)
        | Command::Status(_)
        | Command::Doctor => file::load_for_watch(env)?,
        _ => file::load(env, true)?,
    };
    let file = &file;
    let state = || state_path(cli.state.clone(), env, file);
    let knobs = || Knobs::resolve(None, env, file);
    let allow_insecure = cli.allow_insecure_remote
        || env
            .var("ATC_ALLOW_INSECURE_REMOTE")
            .is_some_and(|v| matches!(v.trim(), "1" | "true" | "yes"));
    let auth = || -> Result<Auth, Failure> {
        Ok(Auth {
            allow_insecure_remote: allow_insecure,
            ..Auth::from_env(env)?
        })
    };
    let base_url_flag = cli.base_url.as_deref();
    let action = match cli.command {
        Command::Watch(args) => Action::Watch(Box::new(watch::watch(
            args,
            base_url_flag,
            env,
            file,
            state,
            auth()?,
            &knobs()?,
        )?)),
        Command::Status(args) => Action::Status(Status {
            task_ids: parse_task_ids(&args.task_ids)?,
            all: args.all,
            other_job_files: other_job_files(&state()?.value, env, file),
            state: state()?,
            // Only for its `next poll` line: a typo in a tick's knob never stops `status`.
            limits: knobs().map_or_else(|_| default_limits(), |k| k.limits()),
            config_skipped: file.skipped.clone(),
        }),
        Command::Cancel(args) => Action::Cancel(Cancel {
            task_ids: parse_task_ids(&args.task_ids)?,
            other_job_files: other_job_files(&state()?.value, env, file),
            state: state()?,
            limits: knobs()?.limits(),
            stop: if args.stop { Some(auth()?) } else { None },
            check_ins: args.check_ins,
        }),
        Command::Tick(args) => {
            let knobs = Knobs::resolve(Some(&args), env, file)?;
            let cadence = env
                .var("ATC_CADENCE_TICK")
                .is_some_and(|v| matches!(v.trim(), "1" | "true" | "yes"));
            // The plugin names its server (`ATC_BASE_URL`) to the ticks it starts.
            let server = env
                .var("ATC_BASE_URL")
                .and_then(|url| crate::validate::base_url(&url).ok());
            Action::Tick(tick::tick(
                &args,
                state()?,
                auth()?,
                &knobs,
                cadence,
                server,
            ))
        }
        Command::Wait(args) => Action::Wait(Wait {
            task_ids: parse_task_ids(&args.task_ids)?,
            agent: text(
                (args.agent, "--agent"),
                "ATC_AGENT_ID",
                Some(defaults::AGENT),
                env,
            )
            .map(checked)
            .transpose()?
            .expect("a default"),
            base_url: {
                let url = base_url(base_url_flag, env, file)?;
                auth()?.check_transport(&url)?;
                url
            },
            auth: auth()?,
            timeout: args.timeout,
            interval: args.interval.unwrap_or(defaults::WAIT_INTERVAL),
            http_timeout: knobs()?.http_timeout.value,
            state: state().ok().map(|s| s.value),
        }),
        Command::Doctor => Action::Doctor(Doctor {
            base_url: base_url(base_url_flag, env, file)?,
            auth: auth()?,
            http_timeout: defaults::DOCTOR_TIMEOUT,
            other_job_files: other_job_files(&state()?.value, env, file),
            state: state()?,
            qwenpaw_working_dir: qwenpaw_working_dir(env),
            config: file.clone(),
            home: env.home(),
            knob_vars: keys::KEYS
                .iter()
                .filter_map(|k| env.var(k.env).map(|v| (k.env, v)))
                .collect(),
        }),
        Command::Log(args) => Action::Log(Log {
            task_ids: parse_task_ids(&args.task_ids)?,
            all: args.all,
            other_job_files: other_job_files(&state()?.value, env, file),
            state: state()?,
        }),
        Command::Paths => Action::Paths(Paths {
            state: state()?,
            config_file: file.path.clone(),
            config_file_exists: file.exists,
            config_skipped: file.skipped.clone(),
            // The knob a watch reads (a bad knob elsewhere fails every tick, not this).
            auto_watch: knobs().map_or(true, |k| k.auto_watch.value),
        }),
        Command::ImportPluginState(args) => Action::Import(Import {
            source: match args.path {
                Some(path) => Setting {
                    value: path,
                    source: Source::Flag("PATH"),
                },
                None => Setting {
                    value: env
                        .home()
                        .ok_or_else(|| {
                            Failure::new(
                                Exit::Usage,
                                "cannot find a home directory; name the plugin's state file",
                            )
                        })?
                        .join(".qwenpaw/agent-task-callback.json"),
                    source: Source::Default,
                },
            },
            base_url: base_url(base_url_flag, env, file)?,
            max_age: knobs()?.max_age.value,
            state: state()?,
        }),
        Command::Timer(args) => Action::Timer(timer::timer(args, state, env)?),
        Command::Qwenpaw(args) => {
            qwenpaw::qwenpaw(args, base_url_flag, env, file, state, auth, knobs)?
        }
        Command::Redeliver(args) => Action::Redeliver(Redeliver {
            task_ids: parse_task_ids(&args.task_ids)?,
            create_session: args.create_session,
            other_job_files: other_job_files(&state()?.value, env, file),
            state: state()?,
            limits: knobs()?.limits(),
            auth: auth()?,
        }),
        Command::Config(args) => {
            Action::Config(config::config(args, cli.state, base_url_flag, env)?)
        }
        Command::Generate(args) => Action::Generate(match args.what {
            Generated::Man { command } => Generate::Man(command),
            Generated::Completions { shell } => Generate::Completions(shell),
        }),
        Command::ParentRead(args) => {
            let task_ids = parse_task_ids(&args.task_ids)?;
            let (agent, session, user, channel) = watch::chat_of(
                (args.agent, args.session, args.user, args.channel),
                env,
                "no chat that read them: pass --session SID or set ATC_SESSION_ID",
            )?;
            Action::ParentRead(ParentRead {
                state: state()?,
                task_ids,
                agent,
                session,
                user,
                channel,
                limits: knobs()?.limits(),
            })
        }
    };
    Ok(Settings { output, action })
}

/// A text value: the flag, else the environment variable, else the default.
fn text(
    (flag, flag_name): (Option<String>, &'static str),
    var: &'static str,
    default: Option<&'static str>,
    env: &dyn Environment,
) -> Option<Setting<String>> {
    if let Some(value) = flag {
        Some(Setting {
            value,
            source: Source::Flag(flag_name),
        })
    } else if let Some(value) = env.var(var) {
        Some(Setting {
            value,
            source: Source::Env(var),
        })
    } else {
        default.map(|value| Setting {
            value: value.to_owned(),
            source: Source::Default,
        })
    }
}

/// One part of a chat target, kept exactly as given (QwenPaw matches the triple byte for
/// byte) but never empty and free of control characters.
fn checked(setting: Setting<String>) -> Result<Setting<String>, Failure> {
    match crate::validate::label(&setting.value) {
        Ok(()) => Ok(setting),
        // An empty `$VAR` in a script or a prompt's blank: say where the value comes from,
        // and where the value is found.
        Err(why) if setting.value.trim().is_empty() => {
            let name = match &setting.source {
                Source::Flag(name) | Source::Env(name) => *name,
                _ => "",
            };
            let found = match name {
                "--child-session" => " (the [SESSION: …] line submit_to_agent printed)",
                "--target-agent" => " (the agent submit_to_agent ran the task on)",
                "--group" | "--fork-branch" => "",
                _ => " (an agent's prompt shows its session id, user id and channel)",
            };
            Err(Failure::new(
                Exit::Usage,
                format!(
                    "{} {why}: give the value{found}, or leave it out",
                    setting.source
                ),
            ))
        }
        Err(why) => Err(Failure::new(
            Exit::Usage,
            format!("{} {why}", setting.source),
        )),
    }
}

/// The job files other than `in_use` a tick here might read: the config file's `state`,
/// then the default; each once, the same file by another spelling left out.
fn other_job_files(in_use: &Path, env: &dyn Environment, file: &ConfigFile) -> Vec<PathBuf> {
    let same = job_file::same_file;
    let mut others: Vec<PathBuf> = Vec::new();
    let candidates = job_file::configured_job_file(file)
        .into_iter()
        .chain(job_file::default_job_file(env));
    for path in candidates {
        if !same(&path, in_use) && !others.iter().any(|o| same(o, &path)) {
            others.push(path);
        }
    }
    others
}
