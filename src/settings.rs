//! Resolved settings: [`resolve`] turns the parsed command line and the environment into
//! one [`Settings`], every value plain and checked, each with the [`Source`] it came from
//! (flag > environment > QwenPaw's own configuration > default), so that every message
//! names the real origin of a bad value. The only reader of the process environment
//! (tokens included); nothing below it sees the command line.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cli::{self, Cli, Command, Generated};
use crate::exit::{Exit, Failure};
use crate::ids::parse_task_id;
use crate::job::{ForwardMode, OnEmpty, OnNoAnswer, Options, Origin, Target};
use crate::lifecycle::Limits;
use crate::time::human;

/// The defaults, in one place (`--help` shows them; a test keeps the two in step).
pub mod defaults {
    use std::time::Duration;

    /// Where QwenPaw's `qwenpaw app` listens by default.
    pub const BASE_URL: &str = "http://127.0.0.1:8088";
    pub const USER: &str = "default";
    pub const CHANNEL: &str = "console";
    pub const AGENT: &str = "default";
    pub const CONCURRENCY: u32 = 8;
    pub const HTTP_TIMEOUT: Duration = Duration::from_secs(30);
    /// The seed's MAX_STRIKES: ~30 min of 20 s ticks.
    pub const MAX_STRIKES: u32 = 90;
    /// The seed's MAX_JOB_AGE.
    pub const MAX_AGE: Duration = Duration::from_secs(24 * 3600);
    pub const BUSY_RETRY: Duration = Duration::from_secs(20);
    /// Long enough for a parent agent's longest turns; the seed gave up after 10 minutes.
    pub const BUSY_DEADLINE: Duration = Duration::from_secs(6 * 3600);
    pub const KEEP: Duration = Duration::from_secs(7 * 24 * 3600);
    /// `atc wait` polls this often.
    pub const WAIT_INTERVAL: Duration = Duration::from_secs(3);
    /// `atc doctor` gives each request this long.
    pub const DOCTOR_TIMEOUT: Duration = Duration::from_secs(5);
    /// How often the timer units run `atc tick`.
    pub const TICK_INTERVAL: Duration = Duration::from_secs(20);
}

/// A source of environment variables and the home directory (the process, or a test's map).
pub trait Environment {
    fn var(&self, name: &str) -> Option<String>;
    fn home(&self) -> Option<PathBuf>;
    /// Whether the variable is unset or holds UTF-8 (what `var` can return).
    fn is_unicode(&self, _name: &str) -> bool {
        true
    }
    /// A path from the environment, taken as bytes: a path need not be UTF-8.
    fn path(&self, name: &str) -> Option<PathBuf> {
        self.var(name).map(PathBuf::from)
    }
}

/// The variables atc reads as text. One that is not UTF-8 is refused (exit 2), never
/// taken as unset: an `ATC_BASE_URL` in Latin-1 must not quietly become the default.
/// (`ATC_STATE` and `QWENPAW_WORKING_DIR` are paths, taken as bytes.)
pub const TEXT_VARS: [&str; 12] = [
    "ATC_BASE_URL",
    "ATC_NO_BATCH",
    "ATC_AUTO_WATCH",
    "ATC_SESSION_ID",
    "ATC_USER_ID",
    "ATC_CHANNEL",
    "ATC_AGENT_ID",
    "ATC_BEARER_TOKEN",
    "ATC_ALLOW_INSECURE_REMOTE",
    "QWENPAW_RUNTIME_INTERNAL_TOKEN",
    "QWENPAW_RUNTIME_API_URL",
    "QWENPAW_RUNTIME_ID",
];

/// Refuses (exit 2) the first text variable whose value is not UTF-8, naming it.
fn check_unicode(env: &dyn Environment) -> Result<(), Failure> {
    match TEXT_VARS.iter().find(|name| !env.is_unicode(name)) {
        Some(name) => Err(Failure::new(
            Exit::Usage,
            format!("{name} is not valid UTF-8; set it to plain text (or unset it)"),
        )),
        None => Ok(()),
    }
}

/// The real process environment. Empty variables count as unset.
pub struct ProcessEnv;

impl Environment for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.trim().is_empty())
    }

    fn home(&self) -> Option<PathBuf> {
        directories::BaseDirs::new().map(|dirs| dirs.home_dir().to_path_buf())
    }

    fn is_unicode(&self, name: &str) -> bool {
        !matches!(std::env::var(name), Err(std::env::VarError::NotUnicode(_)))
    }

    fn path(&self, name: &str) -> Option<PathBuf> {
        std::env::var_os(name)
            .filter(|v| !v.to_string_lossy().trim().is_empty())
            .map(PathBuf::from)
    }
}

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
    Default,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Flag(name) | Source::Env(name) => f.write_str(name),
            Source::ManagedRuntime => f.write_str("QWENPAW_RUNTIME_API_URL"),
            Source::QwenPawConfig(path) => write!(f, "last_api in {}", path.display()),
            Source::Default => f.write_str("the default"),
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
    Import(Import),
    Timer(Timer),
    QwenpawInstall(QwenpawInstall),
    /// `atc qwenpaw zip`: the folder the plugin zip goes into.
    QwenpawZip(std::path::PathBuf),
    Generate(Generate),
    ParentRead(ParentRead),
}

/// `atc parent-read`: the parent chat that read the tasks' results itself.
#[derive(Debug)]
pub struct ParentRead {
    pub state: Setting<PathBuf>,
    pub task_ids: Vec<String>,
    pub agent: Setting<String>,
    pub session: Setting<String>,
    pub user: Setting<String>,
    pub channel: Setting<String>,
    pub limits: Limits,
}

/// `atc qwenpaw install`.
#[derive(Debug)]
pub struct QwenpawInstall {
    pub working_dir: Setting<PathBuf>,
    pub agents: crate::install::Agents,
    pub dry_run: bool,
    /// The server running on that working dir, where one could be: it loads the plugin.
    pub base_url: Option<Setting<String>>,
    pub auth: Auth,
    pub http_timeout: Duration,
    /// `--replace-agent-task-callback`: move from the seed plugin first.
    pub replace: Option<Replace>,
}

/// Moving from the seed plugin: its state file, and where its jobs go.
#[derive(Debug)]
pub struct Replace {
    /// `<working dir>/agent-task-callback.json`, else `~/.qwenpaw/agent-task-callback.json`.
    pub seed_state: PathBuf,
    /// atc's job file.
    pub state: Setting<PathBuf>,
    /// The base URL the imported jobs get.
    pub base_url: String,
    pub max_age: Duration,
}

/// `atc wait`: one task, polled in the foreground; no job file.
#[derive(Debug)]
pub struct Wait {
    pub task_id: String,
    pub agent: Setting<String>,
    pub base_url: Setting<String>,
    pub auth: Auth,
    pub timeout: Option<Duration>,
    pub interval: Duration,
    pub http_timeout: Duration,
}

/// `atc doctor`: every setting with its source, to check them.
#[derive(Debug)]
pub struct Doctor {
    pub state: Setting<PathBuf>,
    pub base_url: Setting<String>,
    pub auth: Auth,
    pub http_timeout: Duration,
    /// QwenPaw's working dir (`QWENPAW_WORKING_DIR`, `~/.copaw`, `~/.qwenpaw`): its plugins.
    pub qwenpaw_working_dir: Option<PathBuf>,
}

/// `atc log`.
#[derive(Debug)]
pub struct Log {
    pub state: Setting<PathBuf>,
    pub task_id: Option<String>,
    pub all: bool,
}

/// `atc import-plugin-state`.
#[derive(Debug)]
pub struct Import {
    pub state: Setting<PathBuf>,
    pub source: Setting<PathBuf>,
    pub base_url: Setting<String>,
    /// Plugin watches older than this are imported as expired history, not polled.
    pub max_age: Duration,
}

/// `atc timer print`.
#[derive(Debug)]
pub struct Timer {
    pub schedule: Schedule,
    pub interval: Duration,
    /// The atc binary the units run.
    pub binary: PathBuf,
    /// The job file, when it is not the default one (the units must name it).
    pub state: Option<Setting<PathBuf>>,
}

/// What `atc timer print` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Both systemd units, or only the service or the timer.
    Systemd {
        service: bool,
        timer: bool,
    },
    Cron,
    /// A macOS LaunchAgent property list.
    Launchd,
}

#[derive(Debug)]
pub struct Watch {
    pub state: Setting<PathBuf>,
    /// Validated, in the order given, each once.
    pub task_ids: Vec<String>,
    /// The child sessions known, by task id (`--child-session`, `[SESSION: …]` lines).
    pub child_sessions: Vec<(String, String)>,
    pub options: Options,
    pub session: Setting<String>,
    pub user: Setting<String>,
    pub channel: Setting<String>,
    pub agent: Setting<String>,
    /// The agent the task runs on, when it is not `agent`.
    pub target_agent: Option<Setting<String>>,
    /// The agents tasks run on, by task id (`[TARGET_AGENT: …]` lines of `--from`).
    pub target_agents: Vec<(String, String)>,
    /// Who asks (`--origin`).
    pub origin: Origin,
    /// Whether an automatic watch (`--origin auto`) watches: see [`auto_watch`].
    pub auto_watch: Setting<bool>,
    /// The QwenPaw API root recorded into the job (ends in `/api`).
    pub base_url: Setting<String>,
    pub auth: Auth,
    /// Ask the server whether it has each task before watching it (not `--no-task-check`).
    pub check_tasks: bool,
}

impl Watch {
    pub fn target(&self) -> Target {
        Target {
            agent_id: self.agent.value.clone(),
            target_agent: self.target_agent.as_ref().map(|a| a.value.clone()),
            session_id: self.session.value.clone(),
            user_id: self.user.value.clone(),
            channel: self.channel.value.clone(),
        }
    }
}

#[derive(Debug)]
pub struct Status {
    pub state: Setting<PathBuf>,
    pub task_id: Option<String>,
    pub all: bool,
}

#[derive(Debug)]
pub struct Cancel {
    pub state: Setting<PathBuf>,
    pub task_id: String,
    pub limits: Limits,
    /// `--stop`: stop the child too (through the job's own base URL), with this auth.
    pub stop: Option<Auth>,
    /// `--check-ins`: only turn the check-ins off.
    pub check_ins: bool,
}

#[derive(Debug)]
pub struct Redeliver {
    pub state: Setting<PathBuf>,
    pub task_id: String,
    pub create_session: bool,
    pub limits: Limits,
    /// For the chat check (the job's own base URL is asked).
    pub auth: Auth,
}

/// Everything one tick needs besides the job file's contents.
#[derive(Clone, Debug)]
pub struct Tick {
    pub state: Setting<PathBuf>,
    pub limits: Limits,
    pub concurrency: usize,
    pub http_timeout: Duration,
    pub turn_timeout: Option<Duration>,
    pub auth: Auth,
    /// `--kicked`: started by the QwenPaw plugin as a turn ended.
    pub kicked: bool,
    /// Gather everything due for one parent chat into one turn (off: `--no-batch`,
    /// `ATC_NO_BATCH=1`).
    pub batch: bool,
}

#[derive(Debug)]
pub enum Generate {
    Man(Option<String>),
    Completions(cli::Shell),
}

/// Credentials, read from the environment; never stored or printed.
#[derive(Clone, Default)]
pub struct Auth {
    pub runtime_token: Option<String>,
    pub bearer_token: Option<String>,
    /// `--allow-insecure-remote`: tokens may go over plain http to another machine.
    pub allow_insecure_remote: bool,
}

impl Auth {
    /// The tokens in the environment. A malformed one (a control character, a space,
    /// non-ASCII) is refused (exit 2) naming the variable, never shown: sent as it is,
    /// it would fail every request as if the server were down.
    pub fn from_env(env: &dyn Environment) -> Result<Auth, Failure> {
        let token = |name: &str| match env.var(name) {
            Some(value) => crate::validate::token(&value)
                .map(|()| Some(value))
                .map_err(|why| Failure::new(Exit::Usage, format!("{name} {why}"))),
            None => Ok(None),
        };
        Ok(Auth {
            runtime_token: token("QWENPAW_RUNTIME_INTERNAL_TOKEN")?,
            bearer_token: token("ATC_BEARER_TOKEN")?,
            allow_insecure_remote: false,
        })
    }

    pub fn has_token(&self) -> bool {
        self.runtime_token.is_some() || self.bearer_token.is_some()
    }

    /// Refuses (exit 2) a base URL the tokens must not travel to, unless allowed.
    fn check_transport(&self, base_url: &Setting<String>) -> Result<(), Failure> {
        if !self.has_token() || self.allow_insecure_remote {
            return Ok(());
        }
        match insecure_remote_host(&base_url.value) {
            Some(host) => Err(Failure::new(
                Exit::Usage,
                format!(
                    "{} {}: {}",
                    base_url.source,
                    base_url.value,
                    insecure_refusal(host)
                ),
            )),
            None => Ok(()),
        }
    }
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |t: &Option<String>| if t.is_some() { "<set>" } else { "<unset>" };
        f.debug_struct("Auth")
            .field("runtime_token", &set(&self.runtime_token))
            .field("bearer_token", &set(&self.bearer_token))
            .field("allow_insecure_remote", &self.allow_insecure_remote)
            .finish()
    }
}

/// The command line and the environment, resolved and checked. Only the settings the
/// command uses are resolved (`generate` needs no job file).
pub fn resolve(cli: Cli, env: &dyn Environment) -> Result<Settings, Failure> {
    let output = Output {
        json: cli.json,
        quiet: cli.quiet,
        verbose: cli.verbose,
    };
    check_unicode(env)?;
    let state = || state_path(cli.state.clone(), env);
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
    let action = match cli.command {
        Command::Watch(args) => Action::Watch(Box::new(watch(
            args,
            cli.base_url.as_deref(),
            env,
            state,
            auth()?,
        )?)),
        Command::Status(args) => Action::Status(Status {
            task_id: args.task_id.as_deref().map(parse_task_id).transpose()?,
            all: args.all,
            state: state()?,
        }),
        Command::Cancel(args) => Action::Cancel(Cancel {
            task_id: parse_task_id(&args.task_id)?,
            state: state()?,
            limits: default_limits(),
            stop: if args.stop { Some(auth()?) } else { None },
            check_ins: args.check_ins,
        }),
        Command::Tick(args) => {
            let no_batch = args.no_batch
                || env
                    .var("ATC_NO_BATCH")
                    .is_some_and(|v| matches!(v.trim(), "1" | "true" | "yes"));
            Action::Tick(Tick {
                batch: !no_batch,
                ..tick(args, state()?, auth()?)
            })
        }
        Command::Wait(args) => Action::Wait(Wait {
            task_id: parse_task_id(&args.task_id)?,
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
                let url = base_url(cli.base_url.as_deref(), env)?;
                auth()?.check_transport(&url)?;
                url
            },
            auth: auth()?,
            timeout: args.timeout,
            interval: args.interval.unwrap_or(defaults::WAIT_INTERVAL),
            http_timeout: defaults::HTTP_TIMEOUT,
        }),
        Command::Doctor => Action::Doctor(Doctor {
            base_url: base_url(cli.base_url.as_deref(), env)?,
            auth: auth()?,
            http_timeout: defaults::DOCTOR_TIMEOUT,
            state: state()?,
            qwenpaw_working_dir: qwenpaw_working_dir(env),
        }),
        Command::Log(args) => Action::Log(Log {
            task_id: args.task_id.as_deref().map(parse_task_id).transpose()?,
            all: args.all,
            state: state()?,
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
            base_url: base_url(cli.base_url.as_deref(), env)?,
            max_age: defaults::MAX_AGE,
            state: state()?,
        }),
        Command::Timer(args) => {
            let cli::TimerCommand::Print {
                kind,
                interval,
                unit,
            } = args.what;
            let schedule = match (kind, unit) {
                (cli::TimerKind::Systemd, unit) => Schedule::Systemd {
                    service: unit != Some(cli::TimerUnit::Timer),
                    timer: unit != Some(cli::TimerUnit::Service),
                },
                (cli::TimerKind::Cron, None) => Schedule::Cron,
                (cli::TimerKind::Launchd, None) => Schedule::Launchd,
                (cli::TimerKind::Cron, Some(_)) => {
                    return Err(Failure::new(
                        Exit::Usage,
                        "--unit names a systemd unit; cron has one crontab (drop --unit)",
                    ));
                }
                (cli::TimerKind::Launchd, Some(_)) => {
                    return Err(Failure::new(
                        Exit::Usage,
                        "--unit names a systemd unit; launchd has one property list (drop --unit)",
                    ));
                }
            };
            Action::Timer(Timer {
                schedule,
                interval: timer_interval(schedule, interval.unwrap_or(defaults::TICK_INTERVAL))?,
                binary: std::env::current_exe()
                    .and_then(|p| p.canonicalize())
                    .map_err(|e| {
                        Failure::new(
                            Exit::Refused,
                            format!("cannot tell where this atc binary is: {e}"),
                        )
                    })?,
                state: Some(state()?).filter(|s| s.source != Source::Default),
            })
        }
        Command::Qwenpaw(args) => match args.what {
            cli::QwenpawCommand::Install {
                working_dir,
                agents,
                all,
                dry_run,
                replace_agent_task_callback,
            } => {
                let mut install = qwenpaw_install(
                    working_dir,
                    agents,
                    all,
                    dry_run,
                    cli.base_url.as_deref(),
                    env,
                    auth()?,
                )?;
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
                        None => base_url(cli.base_url.as_deref(), env)?.value,
                    };
                    install.replace = Some(Replace {
                        seed_state,
                        state: state()?,
                        base_url,
                        max_age: defaults::MAX_AGE,
                    });
                }
                Action::QwenpawInstall(install)
            }
            cli::QwenpawCommand::Zip { out } => {
                Action::QwenpawZip(out.unwrap_or_else(|| PathBuf::from(".")))
            }
        },
        Command::Redeliver(args) => Action::Redeliver(Redeliver {
            task_id: parse_task_id(&args.task_id)?,
            create_session: args.create_session,
            state: state()?,
            limits: default_limits(),
            auth: auth()?,
        }),
        Command::Generate(args) => Action::Generate(match args.what {
            Generated::Man { command } => Generate::Man(command),
            Generated::Completions { shell } => Generate::Completions(shell),
        }),
        Command::ParentRead(args) => {
            let mut task_ids: Vec<String> = Vec::new();
            for raw in &args.task_ids {
                let id = parse_task_id(raw)?;
                if !task_ids.contains(&id) {
                    task_ids.push(id);
                }
            }
            let (agent, session, user, channel) = chat_of(
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
                limits: default_limits(),
            })
        }
    };
    Ok(Settings { output, action })
}

fn watch(
    args: cli::WatchArgs,
    base_url_flag: Option<&str>,
    env: &dyn Environment,
    state: impl FnOnce() -> Result<Setting<PathBuf>, Failure>,
    auth: Auth,
) -> Result<Watch, Failure> {
    let mut task_ids: Vec<String> = Vec::new();
    for raw in &args.task_ids {
        let id = parse_task_id(raw)?;
        if !task_ids.contains(&id) {
            task_ids.push(id);
        }
    }
    let mut child_sessions: Vec<(String, String)> = Vec::new();
    let mut target_agents: Vec<(String, String)> = Vec::new();
    if let Some(from) = &args.from {
        let (text, shown) = read_from(from)?;
        let found = crate::ids::task_ids_in(&text)?;
        child_sessions = crate::ids::child_sessions_in(&text)?;
        target_agents = crate::ids::target_agents_in(&text)?;
        if found.is_empty() {
            return Err(Failure::new(
                Exit::Usage,
                format!(
                    "--from {shown}: no [TASK_ID: …] line in it (submit_to_agent and `qwenpaw agents chat --background` print one per task)"
                ),
            ));
        }
        for id in found {
            if !task_ids.contains(&id) {
                task_ids.push(id);
            }
        }
    }
    if let Some(value) = args.child_session {
        let session = checked(Setting {
            value,
            source: Source::Flag("--child-session"),
        })?;
        let [task] = task_ids.as_slice() else {
            return Err(Failure::new(
                Exit::Usage,
                format!(
                    "--child-session names one child's session, but {} tasks are watched; watch each with its own --child-session, or pass --from with the [SESSION: …] line under each [TASK_ID: …]",
                    task_ids.len()
                ),
            ));
        };
        child_sessions.retain(|(t, _)| t != task);
        child_sessions.push((task.clone(), session.value));
    }
    let label = |flag: &'static str, value: Option<String>| {
        value
            .map(|value| {
                checked(Setting {
                    value,
                    source: Source::Flag(flag),
                })
                .map(|s| s.value)
            })
            .transpose()
    };
    let options = Options {
        create_session: args.create_session,
        on_no_answer: match args.on_no_answer {
            Some(cli::NoAnswer::Silent) => OnNoAnswer::Silent,
            Some(cli::NoAnswer::Notify) | None => OnNoAnswer::Notify,
        },
        on_empty: match args.on_empty {
            Some(cli::Empty::Skip) => OnEmpty::Skip,
            Some(cli::Empty::Deliver) | None => OnEmpty::Deliver,
        },
        fork_branch: label("--fork-branch", args.fork_branch)?,
        group: label("--group", args.group)?,
        forward: match args.forward {
            Some(cli::ForwardArg::Never) => ForwardMode::Never,
            Some(cli::ForwardArg::Auto) | None => ForwardMode::Auto,
        },
        allow_insecure_remote: false,
        stop_after_secs: match args.stop_after {
            None => None,
            Some(d) if d.as_secs() == 0 || d.subsec_nanos() != 0 => {
                return Err(Failure::new(
                    Exit::Usage,
                    format!(
                        "--stop-after {} is not a whole number of seconds (at least 1s)",
                        humantime::format_duration(d)
                    ),
                ));
            }
            Some(d) => Some(d.as_secs()),
        },
        check_in_secs: match args.check_in {
            None => None,
            Some(d) if d.as_secs() == 0 || d.subsec_nanos() != 0 => {
                return Err(Failure::new(
                    Exit::Usage,
                    format!(
                        "--check-in {} is not a whole number of seconds (at least 1s)",
                        humantime::format_duration(d)
                    ),
                ));
            }
            Some(d) => Some(d.as_secs()),
        },
    };
    if let (Some(group), Some(_)) = (&options.group, options.check_in_secs) {
        return Err(Failure::new(
            Exit::Usage,
            format!(
                "--check-in does not work with --group: the members of group {group} report together, in its one turn once none is running, so none would ever check in; drop --check-in, or watch each task without --group"
            ),
        ));
    }
    if options.stop_after_secs.is_some()
        && let Some(task) = task_ids
            .iter()
            .find(|t| !child_sessions.iter().any(|(c, _)| c == *t))
    {
        return Err(Failure::new(
            Exit::Usage,
            format!(
                "--stop-after needs the child's session to stop it, and {task} has none: pass --child-session SID (the [SESSION: …] line submit_to_agent printed), or --from with that line under its [TASK_ID: …]"
            ),
        ));
    }
    let (agent, session, user, channel) = chat_of(
        (args.agent, args.session, args.user, args.channel),
        env,
        "no session to deliver to: pass --session SID or set ATC_SESSION_ID (an agent's prompt shows it as \"Session ID\")",
    )?;
    let target_agent = args
        .target_agent
        .map(|value| {
            checked(Setting {
                value,
                source: Source::Flag("--target-agent"),
            })
        })
        .transpose()?
        .filter(|on| on.value != agent.value);
    if channel.value.eq_ignore_ascii_case("acp") {
        return Err(Failure::new(
            Exit::Refused,
            format!(
                "channel {:?} ({}) is an ACP session: atc posts results through QwenPaw's console API, which can never route back into an ACP session; poll check_agent_task (at most every 30 s) instead, or watch from a console session",
                channel.value, channel.source
            ),
        ));
    }
    let base_url = base_url(base_url_flag, env)?;
    auth.check_transport(&base_url)?;
    let options = Options {
        allow_insecure_remote: auth.allow_insecure_remote
            && insecure_remote_host(&base_url.value).is_some(),
        ..options
    };
    let origin = match args.origin {
        None | Some(cli::OriginArg::Cli) => Origin::Cli,
        Some(cli::OriginArg::Plugin) => Origin::Plugin,
        Some(cli::OriginArg::Auto) => Origin::Auto,
    };
    Ok(Watch {
        state: state()?,
        task_ids,
        child_sessions,
        options,
        session,
        user,
        channel,
        agent,
        target_agent,
        target_agents,
        origin,
        auto_watch: auto_watch(env)?,
        base_url,
        auth,
        check_tasks: !args.no_task_check,
    })
}

/// One chat's (agent, session, user, channel), as `watch` takes them: each flag, else its
/// environment variable, else its default (`missing`: what to say without a session).
type ChatFlags = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

#[allow(clippy::type_complexity)]
fn chat_of(
    (agent, session, user, channel): ChatFlags,
    env: &dyn Environment,
    missing: &str,
) -> Result<
    (
        Setting<String>,
        Setting<String>,
        Setting<String>,
        Setting<String>,
    ),
    Failure,
> {
    let part = |flag, var, default| text(flag, var, default, env).map(checked).transpose();
    let session = part((session, "--session"), "ATC_SESSION_ID", None)?
        .ok_or_else(|| Failure::new(Exit::Usage, missing))?;
    let user = part((user, "--user"), "ATC_USER_ID", Some(defaults::USER))?.expect("a default");
    let channel = part(
        (channel, "--channel"),
        "ATC_CHANNEL",
        Some(defaults::CHANNEL),
    )?
    .expect("a default");
    let agent =
        part((agent, "--agent"), "ATC_AGENT_ID", Some(defaults::AGENT))?.expect("a default");
    Ok((agent, session, user, channel))
}

/// `auto-watch`: whether atc's QwenPaw plugin watches, by itself, every background task a
/// turn's `submit_to_agent` started (`watch --origin auto`). On unless turned off; read
/// from `ATC_AUTO_WATCH` (`0`, `false`, `no`, `off`; `1`, `true`, `yes`, `on`) in the
/// server's environment. The one reader of the setting: atc's config file's `auto-watch`
/// key comes in here, under the environment variable.
pub fn auto_watch(env: &dyn Environment) -> Result<Setting<bool>, Failure> {
    const VAR: &str = "ATC_AUTO_WATCH";
    let Some(raw) = env.var(VAR) else {
        return Ok(Setting {
            value: true,
            source: Source::Default,
        });
    };
    let value = match raw.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => true,
        "0" | "false" | "no" | "off" => false,
        _ => {
            return Err(Failure::new(
                Exit::Usage,
                format!(
                    "{VAR} is {}: set it to 0 (off) or 1 (on), or unset it (on)",
                    crate::validate::preview(&raw)
                ),
            ));
        }
    };
    Ok(Setting {
        value,
        source: Source::Env(VAR),
    })
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
        Err(why) => Err(Failure::new(
            Exit::Usage,
            format!("{} {why}", setting.source),
        )),
    }
}

/// A tick interval the schedule can express: whole seconds, at least one; for cron (one
/// line per minute at most) one that divides a minute, or whole minutes that divide an hour.
fn timer_interval(schedule: Schedule, interval: Duration) -> Result<Duration, Failure> {
    let secs = interval.as_secs();
    if secs == 0 || interval.subsec_nanos() != 0 {
        return Err(Failure::new(
            Exit::Usage,
            format!(
                "--interval {} is not a whole number of seconds (at least 1s)",
                human(interval)
            ),
        ));
    }
    let cron_ok = if secs < 60 {
        60 % secs == 0
    } else {
        secs.is_multiple_of(60) && 60 % (secs / 60) == 0
    };
    if schedule == Schedule::Cron && !cron_ok {
        return Err(Failure::new(
            Exit::Usage,
            format!(
                "cron cannot run every {}: pick an interval that divides a minute (10s, 15s, 20s, 30s…) or whole minutes that divide an hour (1m, 5m, 15m…), or use systemd",
                human(interval)
            ),
        ));
    }
    Ok(interval)
}

/// The text `--from` names: a file, or standard input for `-` (at most 1 MiB).
fn read_from(from: &Path) -> Result<(String, String), Failure> {
    use std::io::Read;
    const MAX: u64 = 1024 * 1024;
    let mut text = String::new();
    let (result, shown) = if from.as_os_str() == "-" {
        (
            std::io::stdin().take(MAX).read_to_string(&mut text),
            "- (standard input)".to_owned(),
        )
    } else {
        let shown = format!("{:?}", from.display().to_string());
        (
            std::fs::File::open(from).and_then(|f| f.take(MAX).read_to_string(&mut text)),
            shown,
        )
    };
    result.map_err(|e| Failure::new(Exit::Usage, format!("--from {shown}: {e}")))?;
    Ok((text, shown))
}

/// The job file: `--state`, else `ATC_STATE`, else the platform state dir
/// (`~/.local/state/atc/jobs.json` on Linux; the local data dir where there is none).
fn state_path(flag: Option<PathBuf>, env: &dyn Environment) -> Result<Setting<PathBuf>, Failure> {
    let given = match flag {
        Some(path) => Some((path, Source::Flag("--state"))),
        None => env
            .path("ATC_STATE")
            .map(|path| (path, Source::Env("ATC_STATE"))),
    };
    if let Some((path, source)) = given {
        if path.as_os_str().is_empty() || path.is_dir() {
            return Err(Failure::new(
                Exit::Usage,
                format!(
                    "{source} {:?} must name a file, not a directory",
                    path.display().to_string()
                ),
            ));
        }
        return Ok(Setting {
            value: path,
            source,
        });
    }
    let dirs = directories::ProjectDirs::from("", "", "atc").ok_or_else(|| {
        Failure::new(
            Exit::StateUnwritable,
            "cannot find a home directory for the job file; pass --state FILE or set ATC_STATE",
        )
    })?;
    let dir = dirs.state_dir().unwrap_or_else(|| dirs.data_local_dir());
    Ok(Setting {
        value: dir.join("jobs.json"),
        source: Source::Default,
    })
}

/// The QwenPaw API root new watches talk to, resolved as QwenPaw's own clients do:
/// `--base-url` > `ATC_BASE_URL` > managed runtime (`QWENPAW_RUNTIME_API_URL`, only with
/// `QWENPAW_RUNTIME_ID` and `QWENPAW_RUNTIME_INTERNAL_TOKEN`) > `last_api` in the working
/// dir's `config.json` > `http://127.0.0.1:8088`. Always ends in `/api`.
pub fn base_url(flag: Option<&str>, env: &dyn Environment) -> Result<Setting<String>, Failure> {
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

fn qwenpaw_install(
    working_dir: Option<PathBuf>,
    agents: Vec<String>,
    all: bool,
    dry_run: bool,
    base_url_flag: Option<&str>,
    env: &dyn Environment,
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
        || (env.var("QWENPAW_RUNTIME_API_URL").is_some()
            && working_dir.source != Source::Flag("--working-dir"))
    {
        Some(base_url(base_url_flag, env)?)
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
        dry_run,
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

/// The host of `url` when it is plain `http://` to a host that is not this machine (an
/// address in 127.0.0.0/8 or `::1`, or a name that resolves only to such addresses:
/// `qwenpaw::loopback`). Tokens never go there unless allowed.
pub fn insecure_remote_host(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("http://").or_else(|| {
        url.get(..7)
            .filter(|p| p.eq_ignore_ascii_case("http://"))
            .map(|_| &url[7..])
    })?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    (!crate::qwenpaw::loopback::is_loopback(&host.to_ascii_lowercase())).then_some(host)
}

/// Why a token will not go to `host`, and what to do.
pub fn insecure_refusal(host: &str) -> String {
    format!(
        "refusing to send the token (QWENPAW_RUNTIME_INTERNAL_TOKEN / ATC_BEARER_TOKEN) over plain http:// to {host}, which is not this machine: use https://, or pass --allow-insecure-remote on a network you trust"
    )
}

/// The tick's caps and back-off when no flag changes them.
pub fn default_limits() -> Limits {
    Limits {
        max_strikes: defaults::MAX_STRIKES,
        max_age: defaults::MAX_AGE,
        busy_retry: defaults::BUSY_RETRY,
        busy_deadline: defaults::BUSY_DEADLINE,
        settle: defaults::HTTP_TIMEOUT,
        keep: defaults::KEEP,
    }
}

fn tick(args: cli::TickArgs, state: Setting<PathBuf>, auth: Auth) -> Tick {
    let limits = default_limits();
    let http_timeout = args.http_timeout.unwrap_or(defaults::HTTP_TIMEOUT);
    Tick {
        state,
        limits: Limits {
            max_strikes: args.max_strikes.unwrap_or(limits.max_strikes),
            max_age: args.max_age.unwrap_or(limits.max_age),
            busy_retry: args.busy_retry.unwrap_or(limits.busy_retry),
            busy_deadline: args.busy_deadline.unwrap_or(limits.busy_deadline),
            // A POST that may have reached the server has had the whole request timeout to
            // start its turn before the same turn is posted again.
            settle: http_timeout,
            keep: args.keep.unwrap_or(limits.keep),
        },
        concurrency: args.concurrency.unwrap_or(defaults::CONCURRENCY) as usize,
        http_timeout,
        turn_timeout: args.turn_timeout,
        auth,
        kicked: args.kicked,
        batch: !args.no_batch,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct MapEnv(HashMap<&'static str, String>, Option<PathBuf>);

    impl Environment for MapEnv {
        fn var(&self, name: &str) -> Option<String> {
            self.0.get(name).cloned()
        }
        fn home(&self) -> Option<PathBuf> {
            self.1.clone()
        }
    }

    fn env(vars: &[(&'static str, &str)], home: Option<&Path>) -> MapEnv {
        MapEnv(
            vars.iter().map(|(k, v)| (*k, (*v).to_owned())).collect(),
            home.map(Path::to_path_buf),
        )
    }

    fn resolve_args(args: &[&str], env: &MapEnv) -> Result<Settings, Failure> {
        let cli = crate::cli::parse_from(args.iter().copied()).expect("valid arguments");
        resolve(cli, env)
    }

    fn watch_of(settings: Settings) -> Watch {
        match settings.action {
            Action::Watch(watch) => *watch,
            other => panic!("not a watch: {other:?}"),
        }
    }

    #[test]
    fn normalises_base_urls() {
        for (raw, want) in [
            ("http://127.0.0.1:8088", "http://127.0.0.1:8088/api"),
            (" http://h:1/ ", "http://h:1/api"),
            ("http://h:1/api/", "http://h:1/api"),
            ("HTTPS://h/prefix", "https://h/prefix/api"),
            ("http://[::1]:8088", "http://[::1]:8088/api"),
        ] {
            assert_eq!(crate::validate::base_url(raw).unwrap(), want);
        }
        for raw in [
            "ftp://h",
            "h:8088",
            "http://user:pw@h",
            "http://tok@h/api",
            "http://",
            "http://h/?x=1",
            "file:///etc",
        ] {
            assert!(crate::validate::base_url(raw).is_err(), "{raw}");
        }
    }

    #[test]
    fn base_url_precedence_and_sources() {
        let home = tempfile::tempdir().unwrap();
        let work = home.path().join(".qwenpaw");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::write(
            work.join("config.json"),
            r#"{"last_api": {"host": "0.0.0.0", "port": 9001}}"#,
        )
        .unwrap();
        let managed = [
            ("QWENPAW_RUNTIME_API_URL", "http://runtime:7000"),
            ("QWENPAW_RUNTIME_ID", "r1"),
            ("QWENPAW_RUNTIME_INTERNAL_TOKEN", "secret"),
        ];
        let setting = |value: &str, source| Setting {
            value: value.to_owned(),
            source,
        };

        let mut vars = managed.to_vec();
        vars.push(("ATC_BASE_URL", "http://env:2"));
        let e = env(&vars, Some(home.path()));
        assert_eq!(
            base_url(Some("http://flag:1"), &e).unwrap(),
            setting("http://flag:1/api", Source::Flag("--base-url"))
        );
        assert_eq!(
            base_url(None, &e).unwrap(),
            setting("http://env:2/api", Source::Env("ATC_BASE_URL"))
        );
        let e = env(&managed, Some(home.path()));
        assert_eq!(
            base_url(None, &e).unwrap(),
            setting("http://runtime:7000/api", Source::ManagedRuntime)
        );
        // The managed URL alone is not enough: QwenPaw also wants the id and the token.
        let e = env(&managed[..2], Some(home.path()));
        assert_eq!(
            base_url(None, &e).unwrap(),
            setting(
                "http://127.0.0.1:9001/api",
                Source::QwenPawConfig(work.join("config.json"))
            )
        );
        // ~/.copaw wins when it exists.
        std::fs::create_dir_all(home.path().join(".copaw")).unwrap();
        let e = env(&[], Some(home.path()));
        assert_eq!(
            base_url(None, &e).unwrap(),
            setting("http://127.0.0.1:8088/api", Source::Default)
        );
        let other = home.path().join("elsewhere");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(
            other.join("config.json"),
            r#"{"last_api": {"host": "127.0.0.2", "port": 9002}}"#,
        )
        .unwrap();
        let e = env(
            &[("QWENPAW_WORKING_DIR", other.to_str().unwrap())],
            Some(home.path()),
        );
        assert_eq!(
            base_url(None, &e).unwrap().value,
            "http://127.0.0.2:9002/api"
        );
        let e = env(&[], None);
        assert_eq!(
            base_url(None, &e).unwrap().value,
            "http://127.0.0.1:8088/api"
        );
    }

    #[test]
    fn errors_name_the_source_of_the_bad_value() {
        let e = env(&[("ATC_BASE_URL", "ftp://h")], None);
        let err = base_url(None, &e).unwrap_err();
        assert_eq!(err.exit, Exit::Usage);
        assert!(err.message.starts_with("ATC_BASE_URL: base URL"), "{err}");
        let err = base_url(Some("h:1"), &e).unwrap_err();
        assert!(err.message.starts_with("--base-url: "), "{err}");

        let dir = tempfile::tempdir().unwrap();
        let e = env(&[("ATC_STATE", dir.path().to_str().unwrap())], None);
        let err = resolve_args(&["status"], &e).unwrap_err();
        assert!(err.message.starts_with("ATC_STATE \""), "{err}");
        let err =
            resolve_args(&["--state", dir.path().to_str().unwrap(), "status"], &e).unwrap_err();
        assert!(err.message.starts_with("--state \""), "{err}");

        let e = env(&[("ATC_USER_ID", " ")], None);
        let err = resolve_args(&["watch", "task-1", "--session", "s"], &e).unwrap_err();
        assert_eq!(err.message, "ATC_USER_ID must not be empty");
        let err = resolve_args(&["watch", "task-1", "--session", "s\n"], &e).unwrap_err();
        assert!(
            err.message.starts_with("--session \"s\\n\" contains"),
            "{err}"
        );
    }

    #[test]
    fn watch_settings_know_where_each_value_came_from() {
        let e = env(
            &[
                ("ATC_SESSION_ID", "env-session"),
                ("ATC_CHANNEL", "env-channel"),
            ],
            None,
        );
        let w = watch_of(
            resolve_args(
                &[
                    "watch",
                    "'task-1'",
                    "--user",
                    "alice",
                    "--target-agent",
                    "SE",
                ],
                &e,
            )
            .unwrap(),
        );
        assert_eq!(w.task_ids, ["task-1"]);
        assert_eq!(w.session.source, Source::Env("ATC_SESSION_ID"));
        assert_eq!(w.user.source, Source::Flag("--user"));
        assert_eq!(w.channel.value, "env-channel");
        assert_eq!(
            (w.agent.value.as_str(), &w.agent.source),
            ("default", &Source::Default)
        );
        assert_eq!(w.target().target_agent.as_deref(), Some("SE"));
        let same =
            watch_of(resolve_args(&["watch", "task-1", "--target-agent", "default"], &e).unwrap());
        assert_eq!(same.target().target_agent, None, "the asking agent itself");

        let none = env(&[], None);
        let err = resolve_args(&["watch", "task-1"], &none).unwrap_err();
        assert_eq!(err.exit, Exit::Usage);
        assert!(err.message.contains("ATC_SESSION_ID"), "{err}");
        let err = resolve_args(
            &["watch", "task-1", "--session", "s", "--channel", "ACP"],
            &none,
        )
        .unwrap_err();
        assert_eq!(err.exit, Exit::Refused);
    }

    #[test]
    fn auto_watch_is_on_unless_atc_auto_watch_turns_it_off() {
        let w = |vars: &[(&'static str, &str)]| {
            resolve_args(
                &["watch", "task-1", "--session", "s", "--origin", "auto"],
                &env(vars, None),
            )
        };
        let on = watch_of(w(&[]).unwrap());
        assert_eq!(
            (on.auto_watch.value, &on.auto_watch.source, on.origin),
            (true, &Source::Default, Origin::Auto)
        );
        for (raw, want) in [
            ("0", false),
            ("off", false),
            ("False", false),
            ("1", true),
            ("yes", true),
        ] {
            let got = watch_of(w(&[("ATC_AUTO_WATCH", raw)]).unwrap()).auto_watch;
            assert_eq!(
                (got.value, got.source),
                (want, Source::Env("ATC_AUTO_WATCH")),
                "{raw}"
            );
        }
        let err = w(&[("ATC_AUTO_WATCH", "sometimes")]).unwrap_err();
        assert_eq!(err.exit, Exit::Usage);
        assert_eq!(
            err.message,
            "ATC_AUTO_WATCH is \"sometimes\": set it to 0 (off) or 1 (on), or unset it (on)"
        );
        let plain = watch_of(
            resolve_args(&["watch", "task-1", "--session", "s"], &env(&[], None)).unwrap(),
        );
        assert_eq!(plain.origin, Origin::Cli);
    }

    #[test]
    fn parent_read_names_the_chat_that_read_the_tasks() {
        let e = env(&[("ATC_USER_ID", "carol")], None);
        let read = match resolve_args(
            &[
                "parent-read",
                "task-1",
                "'task-2'",
                "task-1",
                "--session",
                "s-1",
            ],
            &e,
        )
        .unwrap()
        .action
        {
            Action::ParentRead(read) => read,
            other => panic!("{other:?}"),
        };
        assert_eq!(read.task_ids, ["task-1", "task-2"]);
        assert_eq!(
            (
                read.agent.value.as_str(),
                read.session.value.as_str(),
                read.user.value.as_str(),
                read.channel.value.as_str()
            ),
            ("default", "s-1", "carol", "console")
        );
        let err = resolve_args(&["parent-read", "task-1"], &env(&[], None)).unwrap_err();
        assert_eq!(err.exit, Exit::Usage);
        assert!(err.message.contains("ATC_SESSION_ID"), "{err}");
        let err = resolve_args(&["parent-read", "task/1", "--session", "s"], &e).unwrap_err();
        assert_eq!(err.exit, Exit::Usage);
    }

    #[test]
    fn tick_knobs_default_as_documented() {
        let tick = match resolve_args(&["tick", "--busy-deadline", "3m"], &env(&[], None))
            .unwrap()
            .action
        {
            Action::Tick(tick) => tick,
            other => panic!("{other:?}"),
        };
        assert_eq!(tick.limits.busy_deadline, Duration::from_secs(180));
        assert_eq!(tick.limits.settle, tick.http_timeout);
        assert_eq!(tick.limits.max_strikes, defaults::MAX_STRIKES);
        assert_eq!(tick.concurrency, 8);
        assert_eq!(tick.http_timeout, Duration::from_secs(30));
    }

    #[test]
    fn auth_debug_never_shows_tokens() {
        let auth =
            Auth::from_env(&env(&[("QWENPAW_RUNTIME_INTERNAL_TOKEN", "s3cr3t")], None)).unwrap();
        let shown = format!("{auth:?}");
        assert!(!shown.contains("s3cr3t"));
        assert!(shown.contains("<set>"));
    }
}
