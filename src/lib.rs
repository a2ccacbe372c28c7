//! atc: watch QwenPaw background tasks and post each result back into the session that
//! asked for it. `ARCHITECTURE.md` is the map.
//!
//! One run, as a straight line: `cli` parses → `settings::resolve` checks and resolves
//! every value → one `cmd` runs (for a tick: `pass`, which drives `lifecycle` over the
//! job file in `state`, talking to QwenPaw through `qwenpaw`) → `main` prints
//! `atc: <error chain>` once and exits with the documented code (`exit`).

pub mod cli;
pub mod cmd;
pub mod crash;
pub mod describe;
pub mod exit;
pub mod heard;
pub mod ids;
pub mod install;
pub mod job;
pub mod job_file;
pub mod lifecycle;
pub mod limits;
pub mod outcome;
pub mod pass;
pub mod plugin;
pub mod qwenpaw;
pub mod report;
pub mod settings;
pub mod state;
pub mod status;
pub mod term;
pub mod text;
pub mod time;
pub mod turn;
pub mod validate;
pub mod zip;

use std::process::ExitCode;

use crate::settings::{Action, Generate, ProcessEnv};

/// The whole program: parse, resolve, run, print `atc: <error chain>` once, exit with the
/// documented code.
pub fn main() -> ExitCode {
    state::fsutil::ignore_file_size_signal();
    let cli = match cli::parse() {
        Ok(cli) => cli,
        Err(code) => return ExitCode::from(code),
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`atc status | head -1`): nothing left to say to anyone.
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            crate::term::say(&format!("atc: {err:#}"));
            ExitCode::from(exit::exit_for(&err).code())
        }
    }
}

fn run(cli: cli::Cli) -> anyhow::Result<()> {
    let settings = settings::resolve(cli, &ProcessEnv)?;
    let out = settings.output;
    match settings.action {
        Action::Watch(watch) => cmd::watch::run(&watch, out),
        Action::Status(status) => cmd::status::run(&status, out),
        Action::Cancel(cancel) => cmd::cancel::run(&cancel, out),
        Action::Tick(tick) => cmd::tick::run(&tick, out),
        Action::Redeliver(redeliver) => cmd::redeliver::run(&redeliver, out),
        Action::Wait(wait) => cmd::wait::run(&wait, out),
        Action::Doctor(doctor) => cmd::doctor::run(&doctor, out),
        Action::Log(log) => cmd::log::run(&log, out),
        Action::Paths(paths) => cmd::paths::run(&paths, out),
        Action::Import(import) => cmd::import::run(&import, out),
        Action::Timer(timer) => cmd::timer::run(&timer, out),
        Action::Config(config) => cmd::config::run(&config, out),
        Action::QwenpawInstall(install) => cmd::qwenpaw::run(&install, out),
        Action::QwenpawZip { out: dir, thin } => cmd::qwenpaw::zip(&dir, thin, out),
        Action::Generate(Generate::Man(page)) => cli::generate::man_to_stdout(page.as_deref()),
        Action::Generate(Generate::Completions(shell)) => cli::generate::completions(shell),
        Action::ParentRead(read) => cmd::parent_read::run(&read, out),
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
