//! `atc generate`: the man pages and shell completions, from the same clap definition as
//! `--help` (the copies in man/ and completions/ are checked against these by a test).

use std::io::{self, Write};

use anyhow::Result;
use clap::CommandFactory;

use super::{Cli, Shell};
use crate::exit::Exit;
use crate::fail;

/// The commands that get a page of their own, and its name.
pub const PAGES: [(&str, &str); 14] = [
    ("watch", "atc-watch"),
    ("status", "atc-status"),
    ("cancel", "atc-cancel"),
    ("tick", "atc-tick"),
    ("redeliver", "atc-redeliver"),
    ("wait", "atc-wait"),
    ("doctor", "atc-doctor"),
    ("log", "atc-log"),
    ("paths", "atc-paths"),
    ("import-plugin-state", "atc-import-plugin-state"),
    ("timer", "atc-timer"),
    ("config", "atc-config"),
    ("qwenpaw", "atc-qwenpaw"),
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
        None => return main_page(cli, out),
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
    let mut roff = Vec::new();
    clap_mangen::Man::new(page.clone()).render(&mut roff)?;
    let roff = synopsis_with_values(&page, variadic_marked(&page, String::from_utf8(roff)?));
    out.write_all(roff.as_bytes())?;
    Ok(())
}

/// clap_mangen 0.2 writes an option that takes a value as `[--state]` in the SYNOPSIS, as
/// if it were a switch: the page says `[--state FILE]`, as `--help` does.
fn synopsis_with_values(page: &clap::Command, roff: String) -> String {
    let Some(start) = roff
        .find(".SH SYNOPSIS\n")
        .map(|at| at + ".SH SYNOPSIS\n".len())
    else {
        return roff;
    };
    let end = roff[start..].find('\n').map_or(roff.len(), |at| start + at);
    let mut line = roff[start..end].to_owned();
    for arg in page.get_arguments() {
        let Some(long) = arg.get_long() else {
            continue;
        };
        if !arg.get_num_args().is_some_and(|n| n.takes_values()) {
            continue;
        }
        let names = arg.get_value_names().map_or_else(
            || arg.get_id().as_str().to_uppercase(),
            |names| names.join(" "),
        );
        let flag = format!("\\fB\\-\\-{}\\fR", long.replace('-', "\\-"));
        let value = format!("{flag} \\fI{names}\\fR");
        for close in ["]", ">"] {
            line = line.replace(&format!("{flag}{close}"), &format!("{value}{close}"));
        }
    }
    format!("{}{line}{}", &roff[..start], &roff[end..])
}

/// clap_mangen 0.2 shows a positional that takes many values as `[TASK_ID]`, like one
/// that takes one: the page says `[TASK_ID]...`, as `--help` does.
fn variadic_marked(page: &clap::Command, mut roff: String) -> String {
    for arg in page.get_positionals() {
        if arg.get_num_args().is_some_and(|n| n.max_values() > 1) {
            let name = arg
                .get_value_names()
                .map_or_else(|| arg.get_id().to_string(), |v| v.join(" "));
            for (open, close) in [("[", "]"), ("<", ">")] {
                let shown = format!("{open}\\fI{name}\\fR{close}");
                roff = roff.replace(&format!("{shown} "), &format!("{shown}... "));
                roff = roff.replace(&format!("{shown}\n"), &format!("{shown}...\n"));
            }
        }
    }
    roff
}

/// atc(1): clap's NAME, SYNOPSIS, DESCRIPTION, options and commands, then the sections a
/// reader comes for (what clap's EXTRA held, laid out as man pages lay them out).
fn main_page(cli: clap::Command, out: &mut dyn Write) -> Result<()> {
    use clap_mangen::roff::{Roff, bold, italic, roman};
    let man = clap_mangen::Man::new(cli.clone());
    man.render_title(out)?;
    man.render_name_section(out)?;
    let mut synopsis = Vec::new();
    man.render_synopsis_section(&mut synopsis)?;
    out.write_all(synopsis_with_values(&cli, String::from_utf8(synopsis)?).as_bytes())?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    man.render_subcommands_section(out)?;

    let mut roff = Roff::default();
    let item = |roff: &mut Roff, term: &str, text: &str| {
        roff.control("TP", [])
            .text([bold(term)])
            .text([roman(text)]);
    };
    roff.control("SH", ["ENVIRONMENT"]);
    roff.text([roman(
        "A flag beats its environment variable, which beats the config file (see FILES and atc-config(1)), which beats the default. Tokens are read from the environment on every request and never stored, printed or logged. A variable whose value is not UTF-8 is refused (exit 2, naming it), never taken as unset; ATC_STATE and QWENPAW_WORKING_DIR are paths and taken as bytes. A token must be printable ASCII without spaces (a trailing carriage return from a CRLF file is refused, exit 2).",
    )]);
    for (name, text) in ENVIRONMENT {
        item(&mut roff, name, text);
    }
    roff.control("SH", ["FILES"]);
    for (name, text) in FILES {
        item(&mut roff, name, text);
    }
    roff.control("SH", ["EXIT STATUS"]);
    roff.text([roman("Every command uses the same table:")]);
    for (exit, meaning) in crate::exit::MEANINGS {
        item(&mut roff, &exit.code().to_string(), meaning);
    }
    roff.control("SH", ["EXAMPLES"]);
    for (what, command) in EXAMPLES {
        roff.control("TP", []).text([roman(what)]);
        roff.control("EX", [])
            .text([roman(command)])
            .control("EE", []);
    }
    roff.control("SH", ["SEE ALSO"]);
    let pages: Vec<String> = PAGES
        .iter()
        .map(|(_, title)| format!("{title}(1)"))
        .collect();
    roff.text([italic(pages.join(", "))]);
    roff.control("SH", ["VERSION"]);
    roff.text([roman(format!("v{}", env!("CARGO_PKG_VERSION")))]);
    roff.to_writer(out)?;
    Ok(())
}

const ENVIRONMENT: [(&str, &str); 20] = [
    (
        "ATC_STATE",
        "The job file (--state; state in the config file).",
    ),
    (
        "ATC_CONFIG",
        "The config file, instead of $XDG_CONFIG_HOME/atc/config.toml. A file it names must exist (exit 78 otherwise; atc config set creates it).",
    ),
    (
        "XDG_CONFIG_HOME",
        "The config file is $XDG_CONFIG_HOME/atc/config.toml (default ~/.config/atc/config.toml).",
    ),
    (
        "ATC_BASE_URL",
        "The QwenPaw API recorded into new watches (--base-url).",
    ),
    (
        "QWENPAW_RUNTIME_API_URL",
        "Used as the base URL inside a managed QwenPaw runtime (with QWENPAW_RUNTIME_ID and QWENPAW_RUNTIME_INTERNAL_TOKEN set).",
    ),
    (
        "QWENPAW_WORKING_DIR",
        "Where QwenPaw keeps config.json, whose last_api is the base URL otherwise (default ~/.qwenpaw).",
    ),
    (
        "QWENPAW_RUNTIME_INTERNAL_TOKEN",
        "The server's runtime token, sent as X-QwenPaw-Runtime-Token.",
    ),
    (
        "ATC_BEARER_TOKEN",
        "A web login token, sent as Authorization: Bearer.",
    ),
    (
        "ATC_SESSION_ID",
        "watch --session: the asking chat's session id.",
    ),
    ("ATC_USER_ID", "watch --user (default: default)."),
    ("ATC_CHANNEL", "watch --channel (default: console)."),
    ("ATC_AGENT_ID", "watch and wait --agent (default: default)."),
    (
        "ATC_NO_BATCH",
        "tick --no-batch when 1 (or true, yes, on; 0, false, no, off for batching): one result per parent turn.",
    ),
    (
        "ATC_MAX_AGE, ATC_BUSY_DEADLINE, ATC_BUSY_RETRY, ATC_KEEP, ATC_MAX_STRIKES",
        "tick --max-age, --busy-deadline, --busy-retry, --keep, --max-strikes; they beat the config file's max-age, busy-deadline, busy-retry, keep, max-strikes. watch, cancel and redeliver tidy the job file by the same keep; import-plugin-state expires by the same max-age.",
    ),
    (
        "ATC_CONCURRENCY, ATC_HTTP_TIMEOUT, ATC_TURN_TIMEOUT",
        "tick --concurrency, --http-timeout, --turn-timeout (config: concurrency, http-timeout, turn-timeout).",
    ),
    (
        "ATC_AUTO_WATCH",
        "0 (or false, no, off) turns auto-watch off: atc's QwenPaw plugin then no longer watches, by itself, the background tasks a turn's submit_to_agent started (watch --origin auto does nothing). It beats the config file's auto-watch (atc config set auto-watch false); it is read where atc runs, so set it in the QwenPaw server's environment. Default: on.",
    ),
    (
        "ATC_KICK",
        "tick --kicked: the QwenPaw turns that ended, as a JSON list of {agent_id, session_id, user_id, channel} (atc's plugin sets it in the kicked tick's environment alone); the tick looks only at what they concern. Unset: every watch.",
    ),
    (
        "ATC_CADENCE_TICK",
        "1: this tick was started by a QwenPaw plugin's cadence (atc's plugin sets it in its cadence's ticks alone). The heartbeat keeps it apart from a timer's tick, so that another server's plugin on the same job file does not stand by for it, and atc doctor does not call it a system timer.",
    ),
    (
        "XDG_STATE_HOME",
        "The default job file is $XDG_STATE_HOME/atc/jobs.json.",
    ),
    (
        "COLUMNS",
        "The width atc status fits its list to on a terminal (piped output is never cut).",
    ),
];

const FILES: [(&str, &str); 7] = [
    (
        "~/.config/atc/config.toml",
        "The config file ($XDG_CONFIG_HOME/atc/config.toml, or ATC_CONFIG): key = value lines named like the flags (max-age = \"3d\"), read by every command, so the timer's ticks and the QwenPaw plugin's kicks use the same settings. Never tokens. atc config show lists every key with its value and source; atc config set KEY VALUE checks and writes one (0600). An unknown key or a bad value is refused by every command that needs it (exit 78), naming the file and the key; atc config show shows the rest and says each such line.",
    ),
    (
        "~/.local/state/atc/jobs.json",
        "The job file: every watch and where its result goes (mode 0600, directory 0700). It holds session ids and result text: keep it private.",
    ),
    (
        "jobs.json.log, jobs.json.log.1",
        "The event log (atc log): JSON lines, rotated at 1 MiB. Never message text, session ids, user ids or tokens.",
    ),
    (
        "jobs.json.lock, jobs.json.tick.lock",
        "Locks: one writer at a time, one tick at a time. The tick lock also holds the time of the last tick (atc doctor reads it).",
    ),
    (
        "jobs.json.tick.again",
        "The mark a kicked tick (or atc's plugin) leaves a running tick: the turns that ended meanwhile, one JSON line each (mode 0600: they name sessions). The running tick takes it and makes one more pass for them.",
    ),
    (
        "~/.config/atc/env",
        "Read by the systemd service (EnvironmentFile): the timer's tokens, NAME=value lines such as QWENPAW_RUNTIME_INTERNAL_TOKEN=.... Settings belong in the config file, where the plugin's kicks read them too.",
    ),
    (
        "~/.config/systemd/user/atc-tick.{service,timer}",
        "The units atc timer print systemd prints.",
    ),
];

const EXAMPLES: [(&str, &str); 7] = [
    (
        "Watch a task for the chat that asked (the values an agent's prompt shows):",
        "atc watch task-3f9a0c1b2d4e --session s-77 --user alice --channel console --agent default --target-agent researcher",
    ),
    (
        "Watch every task id a background chat prints:",
        "qwenpaw agents chat --background ... | atc watch --from - --session s-77",
    ),
    (
        "Give every tick (the timer's, the plugin's kicks, yours) a 3-day max age:",
        "atc config set max-age 3d\natc config show",
    ),
    (
        "Run the tick every 20 seconds as a systemd user timer:",
        "atc timer print systemd --unit service > ~/.config/systemd/user/atc-tick.service\natc timer print systemd --unit timer > ~/.config/systemd/user/atc-tick.timer\nsystemctl --user daemon-reload && systemctl --user enable --now atc-tick.timer",
    ),
    (
        "Wait for one task in the foreground, at most ten minutes:",
        "atc wait task-3f9a0c1b2d4e --timeout 10m",
    ),
    (
        "Nothing arrived? Check every link, then the task's history:",
        "atc doctor\natc status task-3f9a0c1b2d4e\natc log task-3f9a0c1b2d4e",
    ),
    (
        "Move from the agent-task-callback plugin:",
        "atc import-plugin-state ~/.qwenpaw/agent-task-callback.json",
    ),
];

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
