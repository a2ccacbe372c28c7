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
Settings: a flag beats its environment variable, which beats the default.
Tokens are read from the environment on every request and never stored:
  QWENPAW_RUNTIME_INTERNAL_TOKEN  sent as X-QwenPaw-Runtime-Token
  ATC_BEARER_TOKEN                sent as Authorization: Bearer

";

#[derive(Debug, Parser)]
#[command(
    name = "atc",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = format!("{AFTER_HELP}{}", crate::exit::HELP_TABLE),
    propagate_version = true,
    disable_help_subcommand = true,
    max_term_width = 100
)]
pub struct Cli {
    /// Job file [env: ATC_STATE] [default: $XDG_STATE_HOME/atc/jobs.json, i.e.
    /// ~/.local/state/atc/jobs.json]
    #[arg(long, global = true, value_name = "FILE")]
    pub state: Option<PathBuf>,

    /// QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default:
    /// QWENPAW_RUNTIME_API_URL (managed runtime), else last_api in QwenPaw's config.json, else
    /// http://127.0.0.1:8088]; /api is appended unless present
    #[arg(long, global = true, value_name = "URL")]
    pub base_url: Option<String>,

    /// Print one JSON document on stdout instead of text
    #[arg(long, global = true)]
    pub json: bool,

    /// Print nothing on success
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,

    /// Say more on stderr (repeat for more)
    #[arg(short, long, global = true, action = ArgAction::Count)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Record a task and where its result must go
    ///
    /// The session, user and channel must be the asking chat's exact values (an agent's
    /// prompt shows them as Session ID, User ID and Channel): QwenPaw silently starts a new
    /// chat for any other combination; watch warns when the server has no such chat.
    /// Watching a task again for the same target does nothing; for another target it
    /// replaces the watch; once the result was delivered (done) or may have been
    /// (unconfirmed) it is refused. ACP sessions are refused: results travel through the
    /// console API, which cannot reach them.
    Watch(WatchArgs),
    /// Show watched tasks (the 20 most recent, newest first)
    ///
    /// The list shows each job's task, status, age, agent → session and what is happening to
    /// it; `atc status TASK_ID` shows one job in full, with the start of its result text.
    /// With --json: {"jobs": [...]}, the records as they are in the job file.
    Status(StatusArgs),
    /// Stop watching a task (the child task keeps running)
    ///
    /// A cancel that lands while the result is being posted still cancels, and says the
    /// result may already be on its way. A delivered task cannot be cancelled.
    Cancel(CancelArgs),
    /// One pass: poll each watched task once and deliver finished results
    ///
    /// Run it every ~20 s from a systemd timer or cron. Each pending task is polled once
    /// (GET /console/chat/task/ID as the agent it runs on); finished ones are rendered
    /// exactly as check_agent_task shows them and posted into the asking session as a new
    /// user turn, at most one per chat per pass. A 409 "chat busy" is retried after
    /// --busy-retry; a POST whose outcome is unknown is never re-posted (unconfirmed).
    /// A second tick started while one runs exits at once. Silent on success; -v prints a
    /// summary line, --json a report. Exits 0 whenever the pass ran: the jobs' fates are in
    /// the job file (atc status).
    Tick(TickArgs),
    /// Print a man page or shell completions (for packagers)
    Generate(GenerateArgs),
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
        /// watch, status, cancel, tick or generate [default: the atc(1) page]
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
pub struct WatchArgs {
    /// The task id submit_to_agent returned (e.g. task-3f9a0c1b2d4e)
    pub task_id: String,

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
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Show this task's job in full
    pub task_id: Option<String>,

    /// List every job, not just the 20 most recent
    #[arg(long, conflicts_with = "task_id")]
    pub all: bool,
}

#[derive(Debug, Args)]
pub struct CancelArgs {
    /// The watched task id
    pub task_id: String,
}

#[derive(Debug, Args)]
pub struct TickArgs {
    /// Polls and deliveries in flight at once [default: 8]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub concurrency: Option<u32>,

    /// Timeout of each HTTP phase (connect, send, wait for the answer, read it) [default:
    /// 30s]
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub http_timeout: Option<Duration>,

    /// Consecutive failed checks before a job is abandoned [default: 90]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_strikes: Option<u32>,

    /// A task not finished this long after `watch` expires [default: 24h]
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub max_age: Option<Duration>,

    /// Wait before retrying a delivery the parent chat refused as busy (409) [default: 20s]
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub busy_retry: Option<Duration>,

    /// Busy (or unreachable) answers before a delivery is given up as undelivered [default:
    /// 30]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_busy: Option<u32>,

    /// Keep finished jobs in the file this long after their last change [default: 7d]
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub keep: Option<Duration>,

    /// Ask QwenPaw to stop the parent's resumed turn after this long [default: QwenPaw's own, 1h]
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub turn_timeout: Option<Duration>,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text)
        .map_err(|err| format!("{err} (write durations like 30s, 5m, 24h, 7d)"))
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
