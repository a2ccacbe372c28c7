//! What each command gets: one plain struct per command, every value resolved and checked.

use std::path::PathBuf;
use std::time::Duration;

use super::file::ConfigFile;
use super::keys::{Key, Value};
use super::{Auth, Setting, Source};
use crate::cli;
use crate::job::{Options, Origin, Target};
use crate::lifecycle::Limits;

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
    /// In the order given, each once.
    pub task_ids: Vec<String>,
    pub agent: Setting<String>,
    pub base_url: Setting<String>,
    pub auth: Auth,
    pub timeout: Option<Duration>,
    pub interval: Duration,
    pub http_timeout: Duration,
    /// The job file, read (never written) to say whether a task still running at
    /// `--timeout` is watched; `None` when no job file can be named here.
    pub state: Option<PathBuf>,
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
    /// atc's config file, as this process found it.
    pub config: ConfigFile,
    /// The config keys' variables set in this process's environment (`ATC_MAX_AGE=3d`,
    /// …), to compare with a timer's or the QwenPaw server's (the doctor picks which).
    pub knob_vars: Vec<(&'static str, String)>,
    /// The home directory: where the timer's unit and env file are.
    pub home: Option<PathBuf>,
    /// The job files a tick might read but this doctor does not: the config file's
    /// `state` and the default, where they are not `state` here (a shell's `ATC_STATE`, a
    /// `state` changed while the old file still watched).
    pub other_job_files: Vec<PathBuf>,
}

/// `atc paths`: the job file, and the config file as this process found it.
#[derive(Debug)]
pub struct Paths {
    pub state: Setting<PathBuf>,
    /// None only without a home directory and without `XDG_CONFIG_HOME` or `ATC_CONFIG`.
    pub config_file: Option<PathBuf>,
    pub config_file_exists: bool,
    /// What of the config file was left out (a wrong key or value other than `state`):
    /// every tick refuses the file until it is fixed.
    pub config_skipped: Vec<String>,
    /// Whether automatic watches watch here (the `auto-watch` knob): atc's plugin tells the
    /// model its result will come only when they do.
    pub auto_watch: bool,
}

/// `atc log`.
#[derive(Debug)]
pub struct Log {
    pub state: Setting<PathBuf>,
    /// Each once; none: every task's events.
    pub task_ids: Vec<String>,
    pub all: bool,
    /// The job files other than `state` a tick here might read: a task with no events
    /// here is looked for there, to name.
    pub other_job_files: Vec<PathBuf>,
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
    /// The job file, when a flag or the environment chose it (the units must name it).
    pub state: Option<Setting<PathBuf>>,
    /// The config file, when a timer would not find it by itself (`ATC_CONFIG`, or this
    /// shell's own `XDG_CONFIG_HOME`): the units name it.
    pub config: Option<PathBuf>,
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

#[derive(Clone, Debug)]
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
    /// Whether an automatic watch (`--origin auto`) watches: the `auto-watch` knob
    /// (`ATC_AUTO_WATCH`, else the config file, else on).
    pub auto_watch: Setting<bool>,
    /// The QwenPaw API root recorded into the job (ends in `/api`).
    pub base_url: Setting<String>,
    pub auth: Auth,
    /// Under which ended jobs are tidied away while the file is open anyway.
    pub limits: Limits,
    /// Ask the server whether it has each task before watching it (not `--no-task-check`).
    pub check_tasks: bool,
    /// Who is watching (`--origin`).
    pub origin: Origin,
    /// What of the config file this watch left out (a wrong tick knob), one line each:
    /// said as warnings; the watch is recorded all the same.
    pub config_skipped: Vec<String>,
    /// The job files other than `state` a tick here might read (as doctor's): a watch
    /// into a file no plugin ticks, while one ticks another, says so.
    pub other_job_files: Vec<PathBuf>,
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

#[derive(Debug)]
pub struct Status {
    pub state: Setting<PathBuf>,
    /// Each once, in the order given; none: the list.
    pub task_ids: Vec<String>,
    pub all: bool,
    /// The tick's limits from the environment and the config file (`next poll` counts by
    /// its `poll-ceiling`).
    pub limits: Limits,
    /// What of the config file was left out (a wrong tick knob): said as warnings, and in
    /// `--json` as `config_skipped`; every tick refuses the file until it is fixed.
    pub config_skipped: Vec<String>,
    /// The job files other than `state` a tick here might read (the config file's
    /// `state`, the default): a task `state` does not watch is looked for there, to name.
    pub other_job_files: Vec<PathBuf>,
}

#[derive(Debug)]
pub struct Cancel {
    pub state: Setting<PathBuf>,
    /// Each once, in the order given.
    pub task_ids: Vec<String>,
    pub limits: Limits,
    /// `--stop`: stop the child too (through the job's own base URL), with this auth.
    pub stop: Option<Auth>,
    /// `--check-ins`: only turn the check-ins off.
    pub check_ins: bool,
    /// The job files other than `state` a tick here might read (the config file's
    /// `state`, the default): a task `state` does not watch is looked for there, to name.
    pub other_job_files: Vec<PathBuf>,
}

#[derive(Debug)]
pub struct Redeliver {
    pub state: Setting<PathBuf>,
    /// In the order given, each once.
    pub task_ids: Vec<String>,
    pub create_session: bool,
    pub limits: Limits,
    /// For the chat check (the job's own base URL is asked).
    pub auth: Auth,
    /// The job files other than `state` a tick here might read (the config file's
    /// `state`, the default): a task `state` does not watch is looked for there, to name.
    pub other_job_files: Vec<PathBuf>,
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
    /// `ATC_CADENCE_TICK=1`: started by a QwenPaw plugin's cadence (not a timer's, not a
    /// person's): another server's plugin on the same job file must not stand by for it.
    pub cadence: bool,
    /// The server whose atc plugin started this tick (a kick's or a cadence's
    /// `ATC_BASE_URL`): its children are polled on a back-off.
    pub server: Option<String>,
    /// Gather everything due for one parent chat into one turn (off: `--no-batch`,
    /// `ATC_NO_BATCH=1`).
    pub batch: bool,
}

/// `atc config`.
#[derive(Debug)]
pub struct Config {
    /// The config file (not read for `path`, `set` and `unset`: they must work on any).
    pub file: ConfigFile,
    pub what: ConfigAction,
}

#[derive(Debug)]
pub enum ConfigAction {
    Path,
    /// Every key in its order, its value here (None: unset, the server's own) and source.
    Show(Vec<Shown>),
    Get(Shown),
    Set {
        key: &'static Key,
        value: Value,
        /// The environment variable that beats the file here, set in this environment.
        shadowed_by: Option<&'static str>,
        home: Option<PathBuf>,
        /// A `state` change: the job file the ticks read until now (the timer's, the
        /// plugin's kicks: no flag, no `ATC_STATE`), and the one they read after.
        moves: Option<JobFileMove>,
    },
    /// The key as given (an unknown one too: a typo to remove).
    Unset {
        key: String,
        home: Option<PathBuf>,
        moves: Option<JobFileMove>,
    },
}

/// `atc config set state` or `unset state`: the job file the ticks leave behind, and
/// whether a person said to leave it even while it still watches tasks (`--force`).
#[derive(Debug)]
pub struct JobFileMove {
    pub from: PathBuf,
    pub to: PathBuf,
    pub force: bool,
}

/// One line of `config show`.
#[derive(Debug)]
pub struct Shown {
    pub key: &'static Key,
    pub value: Option<Value>,
    pub source: Source,
}

#[derive(Debug)]
pub enum Generate {
    Man(Option<String>),
    Completions(cli::Shell),
}
