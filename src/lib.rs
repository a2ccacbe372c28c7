//! atc: watch QwenPaw background tasks and post each result back into the session that
//! asked for it.
//!
//! One tick, as a straight line: `cli` → `settings` → `lock` → `store` (load) → `cmd::tick`
//! (poll → `lifecycle` → `render` → deliver, over `http`) → `store` (save) → report.

pub mod cli;
pub mod cmd;
pub mod exit;
pub mod http;
pub mod ids;
pub mod job;
pub mod lifecycle;
pub mod lock;
pub mod render;
pub mod settings;
pub mod store;
pub mod time;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::settings::ProcessEnv;
use crate::store::Store;

/// How much to print, and in which form.
#[derive(Clone, Copy, Debug, Default)]
pub struct Output {
    pub json: bool,
    pub quiet: bool,
    pub verbose: u8,
}

/// The whole program: parse, run, print `atc: <error chain>` once, exit with the
/// documented code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(2));
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`atc status | head -1`): nothing left to say to anyone.
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("atc: {err:#}");
            ExitCode::from(exit::exit_for(&err).code())
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let out = Output {
        json: cli.json,
        quiet: cli.quiet,
        verbose: cli.verbose,
    };
    let env = ProcessEnv;
    // Resolved only by the commands that use the job file (`generate` does not).
    let state = cli.state;
    let store = || settings::state_path(state.clone()).map(Store::new);
    match cli.command {
        Command::Watch(args) => {
            cmd::watch::run(&store()?, &args, cli.base_url.as_deref(), &env, out)
        }
        Command::Status(args) => cmd::status::run(&store()?, &args, out),
        Command::Cancel(args) => cmd::cancel::run(&store()?, &args, out),
        Command::Tick(args) => cmd::tick::run(&store()?, &settings::tick(&args, &env), out),
        Command::Generate(args) => cmd::generate::run(&args.what),
    }
}
