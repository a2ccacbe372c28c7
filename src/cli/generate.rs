//! `atc generate`: the man pages and shell completions, from the same clap definition as
//! `--help` (the copies in man/ and completions/ are checked against these by a test).

use std::io::{self, Write};

use anyhow::Result;
use clap::CommandFactory;

use super::{Cli, Shell};
use crate::exit::Exit;
use crate::fail;

/// The commands that get a page of their own, and its name.
pub const PAGES: [(&str, &str); 6] = [
    ("watch", "atc-watch"),
    ("status", "atc-status"),
    ("cancel", "atc-cancel"),
    ("tick", "atc-tick"),
    ("redeliver", "atc-redeliver"),
    ("generate", "atc-generate"),
];

/// Writes atc(1) (`command` None), or atc-COMMAND(1) for one of [`PAGES`], to stdout.
pub fn man_to_stdout(command: Option<&str>) -> Result<()> {
    let mut out = io::stdout().lock();
    man(command, &mut out)?;
    out.flush()?;
    Ok(())
}

/// Writes atc(1), or atc-COMMAND(1) for one of [`PAGES`].
pub fn man(command: Option<&str>, out: &mut dyn Write) -> Result<()> {
    let mut cli = Cli::command();
    cli.build();
    let page = match command {
        None => cli,
        Some(name) => {
            let Some((_, title)) = PAGES.iter().find(|(command, _)| *command == name) else {
                let names: Vec<&str> = PAGES.iter().map(|(command, _)| *command).collect();
                fail!(
                    Exit::Usage,
                    "there is no man page for {name:?}; pages: atc, {}",
                    names.join(", ")
                );
            };
            let sub = cli
                .find_subcommand(name)
                .expect("every page is a subcommand")
                .clone();
            sub.name(*title)
        }
    };
    clap_mangen::Man::new(page).render(out)?;
    Ok(())
}

/// Writes the completions for `shell` to stdout.
pub fn completions(shell: Shell) -> Result<()> {
    let shell = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Elvish => clap_complete::Shell::Elvish,
        Shell::Fish => clap_complete::Shell::Fish,
        Shell::Powershell => clap_complete::Shell::PowerShell,
        Shell::Zsh => clap_complete::Shell::Zsh,
    };
    let mut out = io::stdout().lock();
    clap_complete::generate(shell, &mut Cli::command(), "atc", &mut out);
    out.flush()?;
    Ok(())
}
