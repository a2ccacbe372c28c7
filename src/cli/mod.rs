//! The command line, as clap-derive types, and what is generated from it (man pages,
//! completions). Together with `lib.rs`, the only code that names clap. Flags stay
//! `Option`s here: `settings` applies the environment and the defaults, so every value
//! knows where it came from.

pub mod generate;

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

const ABOUT: &str =
    "Watch QwenPaw background tasks and post each result back into the session that asked for it.";

const LONG_ABOUT: &str = "\
Watch QwenPaw background tasks and post each result back into the session that asked for it.

An agent's submit_to_agent returns a task id and stops there; the answer waits on the server
until somebody polls check_agent_task. `atc watch` records the task and exactly where its
answer must go; `atc tick`, run every ~20 s by a systemd timer or cron, polls each watched
task once and posts finished results into the asking session as a new user turn, so the
parent agent wakes up. No daemon.";

const AFTER_HELP: &str = "\
Settings: a flag beats its environment variable, which beats the config file
($XDG_CONFIG_HOME/atc/config.toml, or the file ATC_CONFIG names: `atc config show`), which
beats the default. Every command reads the config file: the timer's ticks and the plugin's
kicks use the same settings as yours. Tokens never go in it.
Tokens are read from the environment on every request and never stored:
  QWENPAW_RUNTIME_INTERNAL_TOKEN  sent as X-QwenPaw-Runtime-Token
  ATC_BEARER_TOKEN                sent as Authorization: Bearer
Values are checked where they enter: ids at most 256 characters, no control characters;
ports 1-65535; durations at most 3650d; environment values UTF-8; tokens printable ASCII.

";

/// The end of `atc --help`, as gh's help ends: a few commands to copy (tests/it/commands/cli.rs parses
/// each `$ atc` line). atc(1) has more, with what each does (`generate::EXAMPLES`).
const HELP_EXAMPLES: &str = "\
Examples:
  # Watch a task for the chat that asked (the values its agent's prompt shows)
  $ atc watch task-3f9a0c1b2d4e --session s-77 --user default --channel console
  # One pass now, saying what it did (a timer runs it every 20 s)
  $ atc tick -v
  # Wait for one task in the foreground and print its result
  $ atc wait task-3f9a0c1b2d4e --timeout 10m
  # Nothing arrived? Check every link from atc to the parent chat
  $ atc doctor";

#[derive(Debug, Parser)]
#[command(
    name = "atc",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = format!("{AFTER_HELP}{}\n\n{HELP_EXAMPLES}", crate::exit::help_table()),
    propagate_version = true,
    disable_help_subcommand = true,
    max_term_width = 100
)]
pub struct Cli {
    /// Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json,
    /// i.e. ~/.local/state/atc/jobs.json]
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        help_heading = "Global options"
    )]
    pub state: Option<PathBuf>,

    /// QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default:
    /// QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else
    /// last_api in QwenPaw's config.json, else http://127.0.0.1:8088]; /api is appended
    /// unless present
    #[arg(
        long,
        global = true,
        value_name = "URL",
        help_heading = "Global options"
    )]
    pub base_url: Option<String>,

    /// Print one JSON document on stdout instead of text
    #[arg(long, global = true, help_heading = "Global options")]
    pub json: bool,

    /// Send tokens over plain http:// to a host that is not this machine (refused
    /// otherwise: use https://); a watch records it for its tick [env:
    /// ATC_ALLOW_INSECURE_REMOTE=1]
    #[arg(long, global = true, help_heading = "Global options")]
    pub allow_insecure_remote: bool,

    /// Print nothing on success
    #[arg(
        short,
        long,
        global = true,
        conflicts_with = "verbose",
        help_heading = "Global options"
    )]
    pub quiet: bool,

    /// Say more on stderr (repeat for more)
    #[arg(short, long, global = true, action = ArgAction::Count, help_heading = "Global options")]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Record tasks and where their results must go
    ///
    /// The session, user and channel must be the asking chat's exact values (an agent's
    /// prompt shows them as Session ID, User ID and Channel): QwenPaw silently starts a new
    /// chat for any other combination, so watch asks the server and refuses a chat that
    /// does not exist, naming the chats that have that session id (--create-session
    /// allows a new chat on purpose; an unreachable server is no reason to refuse). It
    /// also asks the server for each task, and refuses (exit 6, nothing watched) a task id
    /// the server never had (--no-task-check skips that). Several task ids with --group are delivered together, as one turn, once none is
    /// still running. Watching a task again for the same target does nothing; for another
    /// target it replaces the watch; once the result was delivered (done) or may have been
    /// (unconfirmed) it is refused. ACP sessions are refused: results travel through the
    /// console API, which cannot reach them. With atc's QwenPaw plugin there is nothing to
    /// run: at the end of every turn it watches each background task the turn's
    /// submit_to_agent calls started (auto-watch; `atc config set auto-watch false`, or
    /// ATC_AUTO_WATCH=0 in the server's environment, turns it off).
    Watch(WatchArgs),
    /// Show watched tasks (the 20 most recent, newest first)
    ///
    /// The list shows each job's task, status, age, agent → session and what is happening to
    /// it; `atc status TASK_ID…` shows each job named in full, with the start of its result
    /// text.
    /// A status marked * was given up by a tick nobody heard (a QwenPaw kick): the next
    /// `atc tick` says why. With --json: {"jobs": [...], "turns": [...], "give_ups":
    /// [...], "stuck": [...], "chains": {...}, "config_skipped": [...]}, the records as
    /// they are in the job file ("chain" for one task); "stuck" lists what waits for a
    /// person, as `atc doctor` counts it ({"task_id", "turn_id", "what", "follow_up"}:
    /// given up, or unconfirmed past its read-back window). A config file with a wrong tick knob does not stop
    /// it: each such line is a warning (and in config_skipped), since every tick refuses
    /// the file until it is fixed. Watches that have waited over two minutes with no
    /// scheduled tick for as long (or ever) get a warning too: nothing moves until one runs.
    Status(StatusArgs),
    /// Stop watching tasks (each child task keeps running)
    ///
    /// A cancel that lands while the result is being posted still cancels, and says the
    /// result may already be on its way. A delivered task cannot be cancelled.
    Cancel(CancelArgs),
    /// One pass: poll each watched task once and deliver finished results
    ///
    /// Run it every ~20 s from a systemd timer or cron, with no flags: each knob below is
    /// also a key of the config file (`atc config set max-age 3d`), so the timer's ticks and
    /// the kicks of atc's QwenPaw plugin run with the same settings. Each pending task is
    /// polled once (GET /console/chat/task/ID as the agent it runs on); finished ones are rendered
    /// exactly as check_agent_task shows them and posted into the asking session as a new
    /// user turn, at most one per chat per pass, and only once the chat exists and is idle
    /// (a busy parent is asked again each tick, until --busy-deadline). A POST whose
    /// outcome is unknown is settled by reading the parent chat back: found, it is done;
    /// absent from an idle chat, it is posted again with the same delivery id. A watch
    /// that ends without an answer (lost, expired, abandoned) posts one notice instead.
    /// A second tick started while one runs exits at once. Silent on success; each
    /// give-up gets one line on stderr, once; a tick nobody hears (--kicked, or stderr to
    /// /dev/null) leaves its give-ups unsaid in the job file, and the next tick says them.
    /// -v prints a summary line, --json one report of every pass (with "passes"). Exits 0
    /// whenever the pass ran: the jobs' fates are in the job file (atc status).
    Tick(TickArgs),
    /// Try given-up deliveries again: undelivered, unconfirmed, misrouted or error
    ///
    /// The next tick runs every check again before posting: the chat must exist (unless
    /// --create-session) and be idle, and a delivery of unknown outcome is first looked for
    /// in the parent chat, so nothing is posted twice. Several task ids: all or none, and
    /// tasks whose results shared a turn go again in it together. A task whose result
    /// landed and whose follow-ups up a delegation tree were given up: every one of those
    /// goes again, the oldest first, never the result.
    Redeliver(RedeliverArgs),
    /// Wait in the foreground until tasks end, and print their results
    ///
    /// Polls each task (no job file needed) until it finishes, then prints exactly what a
    /// delivery would carry. Tasks watched here are polled on the server their watches
    /// recorded, unless --base-url or ATC_BASE_URL names one. Exit status: 0 completed, 1 failed (or timed out, cancelled,
    /// fork not finalized), 6 lost (the server has no record of it), 124 still running
    /// after --timeout (the line says whether it is watched), 5 the server could not be reached (also when --timeout passes
    /// while polls fail) or refused the credentials. With several tasks: 0 when every one
    /// completed, else the status of the first (in the order given) that did not, and one
    /// line saying each.
    Wait(WaitArgs),
    /// Check the setup and say what to fix: server, token, agents, job file, timer
    ///
    /// One line per check, ✓ or ✗, each ✗ with what to do. Starts from "nothing arrived":
    /// where the base URL comes from, whether the server answers, whether it wants a token
    /// and takes this one, whether the agents the watches name exist, whether the job file
    /// is sound and private, whether the config file holds a wrong tick knob (every tick
    /// refuses it meanwhile), and whether a tick has run lately; then the give-ups of the
    /// last day, marking those no tick has said to a person yet. Exit status 0 when all is
    /// well, 1 otherwise; --json for scripts.
    Doctor,
    /// Show what happened to the watches, from the event log beside the job file
    ///
    /// Registered, polled, strikes, busy parents, deliveries, read-backs, notices… with
    /// times, task and job ids. The log never holds message text, session or user ids, or
    /// tokens. --json prints {"events": [...]}.
    Log(LogArgs),
    /// Print where atc keeps its files, as every command finds them in this environment
    ///
    /// The job file and its directory, the config file (and whether it exists), the job
    /// file's lock, the tick lock (with the last tick's heartbeat), the marks a kicked tick
    /// leaves for the running one, the cadence file of atc's QwenPaw plugin and the event
    /// log: resolved as every command resolves them (--state, ATC_STATE, `state` in the
    /// config file, the default), so what a tick in this shell would use. Creates nothing.
    /// One `name: path` line each; --json prints one
    /// object with the same keys (what atc's QwenPaw plugin reads instead of working them
    /// out itself).
    Paths,
    /// Import the jobs of the Agent Task Callback plugin (atc's Python predecessor)
    ///
    /// Pending jobs are watched from now on (one older than the age cap, 24h, becomes
    /// expired history, as the plugin would not have re-armed it); ended ones become
    /// history; an unconfirmed one is never posted again on its own (`atc redeliver` does).
    /// Stop the plugin first, so that only one of them delivers. Tasks atc already watches
    /// are left alone, so running it twice changes nothing. The plugin's file is only read;
    /// records it cannot use are named on stderr. Jobs get the base URL atc resolves.
    ImportPluginState(ImportArgs),
    /// Print systemd units or crontab lines that run `atc tick` on a schedule
    Timer(TimerArgs),
    /// Show or change the settings in atc's config file (read by every command)
    ///
    /// $XDG_CONFIG_HOME/atc/config.toml (~/.config/atc/config.toml), or the file ATC_CONFIG
    /// names: `key = value` lines with the flags' names, `max-age = "3d"`. Every command
    /// reads it, so the timer's ticks, the plugin's kicks and yours use the same settings:
    /// a flag beats its environment variable (ATC_MAX_AGE), which beats the file, which
    /// beats the default. Tokens never go in it: they stay in the environment. A file with
    /// an unknown key or a bad value is refused by every command that needs it (exit 78),
    /// naming the file and the key; `config show` shows the rest and says each such line.
    Config(ConfigArgs),
    /// Set atc up inside QwenPaw: its plugin (the Agent Task Callback tools), per agent
    Qwenpaw(QwenpawArgs),
    /// Print a man page or shell completions (for packagers)
    Generate(GenerateArgs),
    /// The parent read these tasks' finished results itself: do not post them (what atc's
    /// QwenPaw plugin runs when a check_agent_task call answers a finished task)
    ///
    /// For each task watched for this chat (--session, --user, --channel, --agent): a result
    /// atc has not claimed for posting yet is not posted (the job ends skipped, its status
    /// saying the parent read it; `atc redeliver` still sends it); one whose turn was
    /// already claimed goes out as it is (the status says both). A task delivered already,
    /// watched for another chat, or not watched is left alone. Exits 0 whatever each task
    /// was; --json says, per task.
    #[command(hide = true)]
    ParentRead(ParentReadArgs),
}

#[derive(Debug, Args)]
pub struct ParentReadArgs {
    /// The tasks whose finished result the parent's check_agent_task showed it
    #[arg(required = true, value_name = "TASK_ID")]
    pub task_ids: Vec<String>,

    /// Session of the chat that read them [env: ATC_SESSION_ID]
    #[arg(long, value_name = "SID")]
    pub session: Option<String>,

    /// User of that chat [env: ATC_USER_ID] [default: default]
    #[arg(long, value_name = "UID")]
    pub user: Option<String>,

    /// Channel of that chat [env: ATC_CHANNEL] [default: console]
    #[arg(long, value_name = "CH")]
    pub channel: Option<String>,

    /// Agent of that chat [env: ATC_AGENT_ID] [default: default]
    #[arg(long, value_name = "AID")]
    pub agent: Option<String>,
}

#[derive(Debug, Args)]
pub struct WaitArgs {
    /// The task ids submit_to_agent returned; with several, each result is printed as its
    /// task ends (a blank line between two), and the wait ends when the last one does
    #[arg(required = true, value_name = "TASK_ID")]
    pub task_ids: Vec<String>,

    /// Agent the task runs on [env: ATC_AGENT_ID] [default: default]
    #[arg(long, value_name = "AID")]
    pub agent: Option<String>,

    /// Give up after this long (exit 124; 5 if the last poll failed) [default: no limit]
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub timeout: Option<Duration>,

    /// Time between polls [default: 3s]
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub interval: Option<Duration>,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// Only these tasks' events (several: interleaved, as they happened)
    #[arg(value_name = "TASK_ID")]
    pub task_ids: Vec<String>,

    /// Every event kept, not just the last 50
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The plugin's state file [default: ~/.qwenpaw/agent-task-callback.json]
    #[arg(value_name = "PATH")]
    pub path: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct QwenpawArgs {
    #[command(subcommand)]
    pub what: QwenpawCommand,
}

#[derive(Debug, Subcommand)]
pub enum QwenpawCommand {
    /// Install atc's QwenPaw plugin and enable its tools for agents
    ///
    /// Writes the plugin (embedded in this atc, so the two always match) into
    /// <working dir>/plugins/atc/, enables its tools (watch_agent_task, watch_agent_tasks,
    /// callback_task_status, cancel_task_callback) in each chosen agent's agent.json, and
    /// puts the atc-callback skill into the skill pool. A QwenPaw running on that working
    /// dir loads the plugin at once (no restart); otherwise it loads at its next start: the
    /// last line says which. Refuses while another copy of the tools is installed (the
    /// Agent Task Callback plugin: `atc import-plugin-state` first, then remove it), and
    /// never touches another plugin's files. Running it again changes only what differs.
    Install {
        /// QwenPaw's working dir [env: QWENPAW_WORKING_DIR] [default: ~/.copaw if it
        /// exists, else ~/.qwenpaw]
        #[arg(long, value_name = "DIR")]
        working_dir: Option<PathBuf>,

        /// Enable the tools for these agents [default: the active agent]
        #[arg(
            long,
            value_name = "A,B",
            value_delimiter = ',',
            conflicts_with = "all"
        )]
        agents: Vec<String>,

        /// Enable the tools for every agent
        #[arg(long)]
        all: bool,

        /// Print what would change, change nothing
        #[arg(long)]
        dry_run: bool,

        /// Move from the Agent Task Callback plugin in one step: note which agents have its
        /// tools enabled; under atc's job-file lock, merge its jobs into the job file and
        /// prove the save, remove the old plugin (through the running server's API, no
        /// prompt; else from disk), then save; mark the jobs handed over in its state file
        /// (a copy beside it first, so a reinstalled old plugin cannot deliver them again);
        /// install atc's plugin with its tools enabled for exactly those agents, and have
        /// the server load it again (every tool offered, no restart). A task is never
        /// watched by both or by nobody: a removal that fails imports nothing; run again
        /// after a save that failed, it imports what the old state file still holds
        #[arg(long, conflicts_with_all = ["agents", "all"])]
        replace_agent_task_callback: bool,
    },
    /// Write the plugin zip that QwenPaw's own installer takes, and print its path
    ///
    /// atc-qwenpaw-plugin-<version>-<os>-<arch>.zip holds one folder: the plugin, this very
    /// atc (bin/atc, with bin/atc.platform naming its platform) and the atc-callback
    /// skill. QwenPaw installs it with no package index, no pip and no Rust: the plugin
    /// runs the atc it carries, on a server of the same platform (on another, it says so
    /// in QwenPaw's log and in `atc doctor`). Install it with `qwenpaw plugin install
    /// <zip>` or the plugin screen, then enable its tools with the atc it carries:
    /// `<working dir>/plugins/atc/bin/atc qwenpaw install --all`. The same atc gives the
    /// same bytes, every time.
    Zip {
        /// Where to write it [default: the current directory]
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,

        /// Carry no atc: atc-qwenpaw-plugin-<version>.zip with a requirements.txt pinning
        /// this atc (atc-qwenpaw==<version>), which QwenPaw's loader pip-installs into the
        /// server's environment (it needs the package on an index QwenPaw's pip reaches,
        /// and pip 26.2.2 or newer there). For the plugin Market, and for any platform
        /// once a release's wheels are published
        #[arg(long)]
        thin: bool,
    },
}

#[derive(Debug, Args)]
pub struct ConfigArgs {
    #[command(subcommand)]
    pub what: ConfigCommand,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the config file's path (whether or not it exists yet)
    Path,
    /// Every setting, its value and where it came from (flag, environment, file, default)
    ///
    /// One line per key: the value in effect for this shell, and its source. With --json:
    /// {"file": {...}, "settings": {"max-age": {"value": "3d", "source": "file", ...}}}.
    /// Tokens are never shown. A line of the file every tick refuses (an unknown key, a bad
    /// value) is left out, its key's row marked, and said on stderr (in --json,
    /// config_skipped); a file that is not TOML is refused (exit 78).
    Show,
    /// Print the value one setting has here (what `config show` shows for it)
    Get {
        /// A key: state, base-url, max-age, busy-deadline, busy-retry, keep, max-strikes,
        /// concurrency, http-timeout, turn-timeout, no-batch, auto-watch
        #[arg(value_name = "KEY")]
        key: String,
    },
    /// Write KEY = VALUE into the config file, keeping the rest of it (comments included)
    ///
    /// The value is checked by the validator its flag uses (`atc config set max-age 3d`,
    /// `atc config set max-strikes 180`, `atc config set no-batch true`); a bad one changes
    /// nothing. The file is replaced atomically, private (0600, its directory 0700). A
    /// relative `state` path is made absolute first: the timer and the plugin's kicks run
    /// in other directories.
    Set {
        /// A key (see `atc config get --help`)
        #[arg(value_name = "KEY")]
        key: String,
        /// Its value: a duration (30s, 5m, 24h, 3d), a number, true or false, a path, a URL
        #[arg(value_name = "VALUE")]
        value: String,
        /// Set `state` even though the job file it replaces still watches tasks (nothing
        /// ticks that file afterwards: their results are not delivered)
        #[arg(long)]
        force: bool,
    },
    /// Remove KEY from the config file (it falls back to its environment variable or
    /// default); an unknown key too, to mend a typo
    Unset {
        #[arg(value_name = "KEY")]
        key: String,
        /// Unset `state` even though the job file it names still watches tasks
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Args)]
pub struct TimerArgs {
    #[command(subcommand)]
    pub what: TimerCommand,
}

#[derive(Debug, Subcommand)]
pub enum TimerCommand {
    /// Print the units (systemd), crontab lines (cron) or a LaunchAgent (launchd, macOS),
    /// naming this atc binary
    Print {
        #[arg(value_enum, value_name = "systemd|cron|launchd")]
        kind: TimerKind,

        /// How often to tick [default: 20s]
        #[arg(long, value_name = "D", value_parser = parse_duration)]
        interval: Option<Duration>,

        /// Print only this systemd unit (to redirect it into its file)
        #[arg(long, value_enum, value_name = "UNIT")]
        unit: Option<TimerUnit>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TimerUnit {
    /// atc-tick.service
    Service,
    /// atc-tick.timer
    Timer,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TimerKind {
    /// A user service and timer (systemctl --user)
    Systemd,
    /// Crontab lines (cron has minute resolution: one line per tick within a minute)
    Cron,
    /// A macOS LaunchAgent (~/Library/LaunchAgents/atc-tick.plist, `launchctl load`)
    Launchd,
}

#[derive(Debug, Args)]
pub struct RedeliverArgs {
    /// The watched task ids; with several, none is requeued when one cannot be, and tasks
    /// whose results shared a turn go again in it together
    #[arg(required = true, value_name = "TASK_ID")]
    pub task_ids: Vec<String>,

    /// Allow the delivery to start the parent chat if it does not exist
    #[arg(long)]
    pub create_session: bool,
}

/// `--on-no-answer`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum NoAnswer {
    /// Post one notice turn into the parent chat
    Notify,
    /// Post nothing
    Silent,
}

/// `--forward`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ForwardArg {
    /// The reply for a parent on an IM channel, a toast for a console parent
    Auto,
    /// Never
    Never,
}

/// `--origin` (hidden: the plugin's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OriginArg {
    /// A command line
    Cli,
    /// atc's QwenPaw plugin's tools (watch_agent_task), called by the model
    Plugin,
    /// atc's QwenPaw plugin by itself, at the end of the turn whose submit_to_agent started
    /// the tasks
    Auto,
}

/// `--on-empty`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Empty {
    /// Deliver it like any result ('(No text content in response)')
    Deliver,
    /// Record the job as skipped and post nothing
    Skip,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    #[command(subcommand)]
    pub what: Generated,
}

#[derive(Debug, Subcommand)]
pub enum Generated {
    /// The man page of atc, or of one command (man/ holds them all)
    Man {
        /// watch, status, cancel, tick, redeliver, wait, doctor, log, paths, import-plugin-state,
        /// timer, config, qwenpaw or generate [default: the atc(1) page]
        #[arg(value_name = "COMMAND")]
        command: Option<String>,
    },
    /// Completions for a shell (completions/ holds bash, zsh and fish)
    Completions {
        #[arg(value_enum)]
        shell: Shell,
    },
}

/// The shells completions are generated for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "lower")]
pub enum Shell {
    Bash,
    Elvish,
    Fish,
    Powershell,
    Zsh,
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Where the result goes")]
pub struct WatchArgs {
    /// The task ids submit_to_agent returned (e.g. task-3f9a0c1b2d4e)
    #[arg(required_unless_present = "from", value_name = "TASK_ID")]
    pub task_ids: Vec<String>,

    /// Also watch every task named by a `[TASK_ID: …]` line in FILE (`-`: standard input),
    /// as submit_to_agent and `qwenpaw agents chat --background` print them; a
    /// `[TARGET_AGENT: AID]` line under one says the agent it runs on (as --target-agent,
    /// for that task)
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,

    /// The child's own session ("[SESSION: …]" in submit_to_agent's answer; --from reads it
    /// from the line after each [TASK_ID: …]): what `cancel --stop` and --stop-after stop.
    /// Only with one task id
    #[arg(long, value_name = "SID", help_heading = "The child")]
    pub child_session: Option<String>,

    /// Stop the child (POST /console/chat/stop) when a tick finds it still running this
    /// long after it started; its "Task cancelled" result is delivered with a line saying
    /// atc stopped it. Needs the child's session
    #[arg(long, value_name = "D", value_parser = parse_duration, help_heading = "The child")]
    pub stop_after: Option<Duration>,

    /// While the child runs, post a short notice into the parent chat every D (at most 5
    /// times): how long it has run, and how to stop it or the check-ins. Not with --group
    /// (a group reports together, in its one turn)
    #[arg(long, value_name = "D", value_parser = parse_duration, help_heading = "The child")]
    pub check_in: Option<Duration>,

    /// Session the result goes to: the asking agent's "Session ID" [env: ATC_SESSION_ID]
    #[arg(long, value_name = "SID")]
    pub session: Option<String>,

    /// User of that session ("User ID" in the agent's prompt) [env: ATC_USER_ID] [default:
    /// default]
    #[arg(long, value_name = "UID")]
    pub user: Option<String>,

    /// Channel of that session ("Channel" in the agent's prompt) [env: ATC_CHANNEL]
    /// [default: console]
    #[arg(long, value_name = "CH")]
    pub channel: Option<String>,

    /// Agent that owns the session (the one asking) [env: ATC_AGENT_ID] [default: default]
    #[arg(long, value_name = "AID")]
    pub agent: Option<String>,

    /// Agent the task runs on, when it is not --agent (polls go out as this agent, as
    /// check_agent_task does)
    #[arg(long, value_name = "AID")]
    pub target_agent: Option<String>,

    /// Deliver even if the parent chat does not exist yet: QwenPaw starts it
    #[arg(long)]
    pub create_session: bool,

    /// Do not ask the server whether it has each task (a script that watches many tasks at
    /// once and wants one request less each). Without it, a task id the server has never
    /// heard of (QwenPaw's "Task not found") is refused with exit 6, nothing watched
    #[arg(long)]
    pub no_task_check: bool,

    /// Who is watching, recorded as the job's origin: atc's QwenPaw plugin passes `plugin`
    /// from its tools, so that what the parent is told names the tool's options
    /// (stop_after) rather than atc's flags, and `auto` at the end of the turn whose
    /// submit_to_agent started the tasks (nothing while auto-watch is off, and a record the
    /// file holds is never taken over) [default: cli]
    #[arg(long, value_enum, value_name = "WHO", hide = true)]
    pub origin: Option<OriginArg>,

    /// Deliver the results of all these tasks together, as one turn, once none is still
    /// running (fan-in), under `[ATC_GROUP: NAME]` (so NAME holds no `]`)
    #[arg(
        long,
        value_name = "NAME",
        help_heading = "How the result is delivered"
    )]
    pub group: Option<String>,

    /// When the watch ends without an answer (lost, expired, abandoned) [default: notify]
    #[arg(
        long,
        value_name = "WHAT",
        value_enum,
        help_heading = "How the result is delivered"
    )]
    pub on_no_answer: Option<NoAnswer>,

    /// When the child succeeds with an empty answer [default: deliver]
    #[arg(
        long,
        value_name = "WHAT",
        value_enum,
        help_heading = "How the result is delivered"
    )]
    pub on_empty: Option<Empty>,

    /// The fork branch the child works on: a completed delivery ends with
    /// [FORK_BRANCH: BRANCH]
    #[arg(
        long,
        value_name = "BRANCH",
        help_heading = "How the result is delivered"
    )]
    pub fork_branch: Option<String>,

    /// Send the parent's final reply on to the person on an IM channel (QwenPaw runs the
    /// woken turn through the console, so it never reaches them otherwise); for a console
    /// parent, show one toast in the web console once the woken turn ended [default: auto]
    #[arg(
        long,
        value_name = "WHEN",
        value_enum,
        help_heading = "How the result is delivered"
    )]
    pub forward: Option<ForwardArg>,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Show these tasks' jobs in full, one after the other
    #[arg(value_name = "TASK_ID")]
    pub task_ids: Vec<String>,

    /// List every job, not just the 20 most recent
    #[arg(long, conflicts_with = "task_ids")]
    pub all: bool,
}

#[derive(Debug, Args)]
pub struct CancelArgs {
    /// The watched task ids; with several, none is cancelled (and no child stopped) when
    /// one cannot be, and a child --stop cannot stop keeps its watch (the others are
    /// cancelled; exit as for that child)
    #[arg(required = true, value_name = "TASK_ID")]
    pub task_ids: Vec<String>,

    /// Also stop the child itself (POST /console/chat/stop on its chat, on the agent that
    /// holds it: --target-agent, else found among the server's agents), then end the
    /// watch; tried up to 3 times, then refused (the watch kept): exit 1 when the child's
    /// session is unknown or the child still runs after the stops, 5 when the server cannot
    /// be reached or refuses
    #[arg(long)]
    pub stop: bool,

    /// Only stop the check-ins (--check-in); keep watching
    #[arg(long, conflicts_with = "stop")]
    pub check_ins: bool,
}

#[derive(Debug, Args)]
pub struct TickArgs {
    /// Polls and deliveries in flight at once [env: ATC_CONCURRENCY] [config: concurrency]
    /// [default: 8]
    #[arg(long, value_name = "N", value_parser = parse_concurrency)]
    pub concurrency: Option<u32>,

    /// Timeout of each HTTP phase (connect, send, wait for the answer, read it) [env:
    /// ATC_HTTP_TIMEOUT] [config: http-timeout] [default: 30s]
    #[arg(long, value_name = "D", value_parser = parse_timeout)]
    pub http_timeout: Option<Duration>,

    /// Consecutive failed checks before a job is abandoned [env: ATC_MAX_STRIKES] [config:
    /// max-strikes] [default: 90]
    #[arg(long, value_name = "N", value_parser = parse_strikes)]
    pub max_strikes: Option<u32>,

    /// A task not finished this long after `watch` expires [env: ATC_MAX_AGE] [config:
    /// max-age] [default: 24h]
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub max_age: Option<Duration>,

    /// Wait before retrying a delivery the parent chat refused as busy anyway (409) [env:
    /// ATC_BUSY_RETRY] [config: busy-retry] [default: 20s]
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub busy_retry: Option<Duration>,

    /// How long a delivery waits for a busy or unreachable parent chat before it is given
    /// up as undelivered (and how long an unknown one is read back) [env: ATC_BUSY_DEADLINE]
    /// [config: busy-deadline] [default: 6h]
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub busy_deadline: Option<Duration>,

    /// Keep finished jobs in the file this long after their last change [env: ATC_KEEP]
    /// [config: keep] [default: 7d]
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub keep: Option<Duration>,

    /// How many levels a child's later reply goes up a delegation tree: a result delivered
    /// into a watched child's chat (its own answer already delivered) wakes it, and its
    /// reply goes to the child's parent as a follow-up; 0 keeps it there [env:
    /// ATC_FOLLOW_UP_DEPTH] [config: follow-up-depth] [default: 5]
    #[arg(long, value_name = "N", value_parser = parse_follow_up_depth)]
    pub follow_up_depth: Option<u32>,

    /// The longest wait between two polls of a child whose turn's end atc's QwenPaw plugin
    /// kicks (it is polled when that turn ends; otherwise at 20s, 40s, 80s… up to this);
    /// other watches are polled every tick [env: ATC_POLL_CEILING] [config: poll-ceiling]
    /// [default: 5m]
    #[arg(long, value_name = "D", value_parser = parse_timeout)]
    pub poll_ceiling: Option<Duration>,

    /// Ask QwenPaw to stop the parent's resumed turn after this long [env: ATC_TURN_TIMEOUT]
    /// [config: turn-timeout] [default: QwenPaw's own, 1h]
    #[arg(long, value_name = "D", value_parser = parse_timeout)]
    pub turn_timeout: Option<Duration>,

    /// Started because a QwenPaw turn just ended (atc's plugin does this, naming the turn
    /// in ATC_KICK): only the watches that turn may concern are polled, and only what
    /// waits for its chat is delivered (without ATC_KICK, everything, each watch polled
    /// once); a task still reading running (named in ATC_KICK), or a parent still busy, is
    /// looked at again for up to 2 s; when another
    /// tick is running, leave it a mark to make one more pass instead. Nobody reads its
    /// stderr: its give-ups are left for the next tick to say
    #[arg(long)]
    pub kicked: bool,
    /// One result per parent turn: do not gather everything due for a chat into one turn
    /// [env: ATC_NO_BATCH=1] [config: no-batch = true]
    #[arg(long)]
    pub no_batch: bool,
}

/// A duration flag: humantime syntax, at most ten years (`validate::duration`), so no
/// deadline computed from it can overflow.
fn parse_duration(text: &str) -> Result<Duration, String> {
    crate::validate::parse_duration(text)
}

/// `--http-timeout`, `--turn-timeout`: the validator the environment and the config file
/// use too.
fn parse_timeout(text: &str) -> Result<Duration, String> {
    crate::validate::parse_timeout(text)
}

/// `--concurrency`: the validator the environment and the config file use too.
fn parse_concurrency(text: &str) -> Result<u32, String> {
    crate::validate::count(text, &crate::validate::CONCURRENCY)
}

/// `--max-strikes`: the validator the environment and the config file use too.
fn parse_strikes(text: &str) -> Result<u32, String> {
    crate::validate::count(text, &crate::validate::STRIKES)
}

fn parse_follow_up_depth(text: &str) -> Result<u32, String> {
    crate::validate::count(text, &crate::validate::FOLLOW_UP_DEPTH)
}

/// Parses the process's arguments; on a usage error (or `--help`, `--version`) prints
/// clap's message and returns the exit code it asks for.
pub fn parse() -> Result<Cli, u8> {
    Cli::try_parse().map_err(|err| {
        let _ = err.print();
        u8::try_from(err.exit_code()).unwrap_or(2)
    })
}

/// Parses `args` (without the program name), for tests; a usage error as clap prints it.
pub fn parse_from<'a>(args: impl IntoIterator<Item = &'a str>) -> Result<Cli, String> {
    Cli::try_parse_from(std::iter::once("atc").chain(args)).map_err(|err| err.to_string())
}
