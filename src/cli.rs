//! The command line, as clap-derive types. Nothing else in the crate imports clap;
//! `settings` turns these into plain structs.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args, Parser, Subcommand};

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
    /// Job file [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]
    #[arg(long, global = true, value_name = "FILE", env = "ATC_STATE")]
    pub state: Option<PathBuf>,

    /// QwenPaw URL recorded into new watches [default: QWENPAW_RUNTIME_API_URL (managed
    /// runtime), else last_api in QwenPaw's config.json, else http://127.0.0.1:8088]; /api is
    /// appended unless present
    #[arg(long, global = true, value_name = "URL", env = "ATC_BASE_URL")]
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
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The task id submit_to_agent returned (e.g. task-3f9a0c1b2d4e)
    pub task_id: String,

    /// Session the result goes to: the asking agent's "Session ID"
    #[arg(long, value_name = "SID", env = "ATC_SESSION_ID")]
    pub session: String,

    /// User of that session ("User ID" in the agent's prompt)
    #[arg(
        long,
        value_name = "UID",
        env = "ATC_USER_ID",
        default_value = "default"
    )]
    pub user: String,

    /// Channel of that session ("Channel" in the agent's prompt)
    #[arg(
        long,
        value_name = "CH",
        env = "ATC_CHANNEL",
        default_value = "console"
    )]
    pub channel: String,

    /// Agent that owns the session (the one asking)
    #[arg(
        long,
        value_name = "AID",
        env = "ATC_AGENT_ID",
        default_value = "default"
    )]
    pub agent: String,

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
    /// Polls and deliveries in flight at once
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub concurrency: u32,

    /// Timeout of each HTTP phase (connect, send, wait for the answer, read it)
    #[arg(long, value_name = "D", default_value = "30s", value_parser = parse_duration)]
    pub http_timeout: Duration,

    /// Consecutive failed checks before a job is abandoned
    #[arg(long, value_name = "N", default_value_t = 90, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_strikes: u32,

    /// A task not finished this long after `watch` expires
    #[arg(long, value_name = "D", default_value = "24h", value_parser = parse_duration)]
    pub max_age: Duration,

    /// Wait before retrying a delivery the parent chat refused as busy (409)
    #[arg(long, value_name = "D", default_value = "20s", value_parser = parse_duration)]
    pub busy_retry: Duration,

    /// Busy (or unreachable) answers before a delivery is given up as undelivered
    #[arg(long, value_name = "N", default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_busy: u32,

    /// Keep finished jobs in the file this long after their last change
    #[arg(long, value_name = "D", default_value = "7d", value_parser = parse_duration)]
    pub keep: Duration,

    /// Ask QwenPaw to stop the parent's resumed turn after this long [default: QwenPaw's own, 1h]
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub turn_timeout: Option<Duration>,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text)
        .map_err(|err| format!("{err} (write durations like 30s, 5m, 24h, 7d)"))
}
