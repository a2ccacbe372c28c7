//! `atc doctor`'s "one configuration" checks: which config file this shell reads, and
//! whether the ticks started elsewhere (the QwenPaw server's kicks, run in the server's
//! environment; the timer's, run in its unit's) would tick the same job file with the same
//! config file and the same setting variables. A kick that ticks another job file never
//! delivers the watches made here, and one with another `ATC_MAX_AGE` expires them at
//! another age: both silently.

use std::path::{Path, PathBuf};

use super::check::Check;
use crate::settings::file::{self, ConfigFile};
use crate::settings::{Doctor, Environment, Source, VarsEnv, keys, state_path};

/// The config file this shell reads, and how many keys it sets; ✗ when it holds a wrong
/// tick knob (a watch is recorded past it, but every tick refuses the file).
pub fn config_line(config: &ConfigFile) -> Check {
    if let (Some(path), false) = (&config.path, config.skipped.is_empty()) {
        let prefix = format!("config file {}: ", path.display());
        let lines: Vec<&str> = config
            .skipped
            .iter()
            .map(|line| line.strip_prefix(prefix.as_str()).unwrap_or(line))
            .collect();
        return Check {
            name: "config",
            ok: false,
            detail: format!(
                "{path}{by}: every atc tick refuses it (a watch is still recorded): {lines}",
                path = path.display(),
                by = located(config),
                lines = lines.join("; "),
            ),
            fix: Some(
                "fix what it says (`atc config unset KEY`, `atc config set KEY VALUE`): until then nothing is polled or posted".to_owned(),
            ),
        };
    }
    let detail = match (&config.path, config.exists) {
        (None, _) => {
            "none: no home directory (ATC_CONFIG names one); every setting is a flag's, the environment's or the default".to_owned()
        }
        (Some(path), false) => format!(
            "no config file at {path}{by}: every setting is a flag's, the environment's or the default (`atc config show` lists them)",
            path = path.display(),
            by = located(config),
        ),
        (Some(path), true) => format!(
            "{path}{by} sets {n} (`atc config show` lists every setting and its source)",
            path = path.display(),
            by = located(config),
            n = crate::text::plural(config.values().count() as u64, "key", "keys"),
        ),
    };
    Check {
        name: "config",
        ok: true,
        detail,
        fix: None,
    }
}

fn located(config: &ConfigFile) -> String {
    match &config.located {
        Some(Source::Env(var)) => format!(" (from {var})"),
        _ => String::new(),
    }
}

/// What a tick run in `theirs` would use, compared with this shell's: each difference as
/// one phrase, and its fix.
fn differences(doctor: &Doctor, who: &str, theirs: &dyn Environment) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let their_file = file::load(theirs, true);
    let ours = &doctor.config;
    // Another config file that says the same (none at either place, say: another HOME)
    // changes nothing; one that says something else does.
    if let Ok(their_file) = &their_file
        && their_file.path != ours.path
        && !same_values(their_file, ours)
    {
        let by = match &their_file.located {
            Some(Source::Env(var)) => format!("{var}: "),
            _ => String::new(),
        };
        found.push((
            format!(
                "its settings come from {} ({by}{}), this shell's from {} ({})",
                shown_path(their_file),
                summary(their_file),
                shown_path(ours),
                summary(ours)
            ),
            format!(
                "give {who} this config file: ATC_CONFIG={} in its environment",
                shown_path(ours)
            ),
        ));
    }
    // Its job file, as a tick there resolves it: ATC_STATE, else its config file's
    // `state`, else its default.
    match their_file.and_then(|file| state_path(None, theirs, &file)) {
        Ok(state) if state.value != doctor.state.value => found.push((
            format!(
                "its ticks use the job file {} (from {}), this shell's is {} (from {}): watches made here are never ticked there",
                state.value.display(),
                state.source,
                doctor.state.value.display(),
                doctor.state.source
            ),
            format!(
                "use one job file: `atc config set state {}`, and no ATC_STATE in {who}'s environment",
                doctor.state.value.display()
            ),
        )),
        Ok(_) => {}
        Err(why) => found.push((
            format!("its ticks refuse to start: {why}"),
            "fix what the message says (`atc tick -v` in that environment shows it too)"
                .to_owned(),
        )),
    }
    for key in keys::KEYS
        .iter()
        .filter(|k| !matches!(k.name, "state" | "base-url"))
    {
        let mine = doctor
            .knob_vars
            .iter()
            .find(|(var, _)| *var == key.env)
            .map(|(_, v)| v.as_str());
        let there = theirs.var(key.env);
        if mine != there.as_deref() {
            let shown =
                |v: Option<&str>| v.map_or("unset".to_owned(), |v| format!("{}={v}", key.env));
            found.push((
                format!(
                    "{} there, {} here (it beats the config file's {})",
                    shown(there.as_deref()),
                    shown(mine),
                    key.name
                ),
                format!(
                    "set {} in the config file (`atc config set {} VALUE`) and {} in no environment",
                    key.name, key.name, key.env
                ),
            ));
        }
    }
    found
}

fn same_values(a: &ConfigFile, b: &ConfigFile) -> bool {
    a.values().eq(b.values())
}

fn shown_path(file: &ConfigFile) -> String {
    file.path
        .as_ref()
        .map_or("none".to_owned(), |p| p.display().to_string())
}

/// What a config file sets, in a few words: `max-age = 3d, keep = 30d`.
fn summary(file: &ConfigFile) -> String {
    if !file.exists {
        return "no such file: the defaults".to_owned();
    }
    let set: Vec<String> = file
        .values()
        .map(|(key, value)| format!("{key} = {}", value.shown()))
        .collect();
    if set.is_empty() {
        "no keys".to_owned()
    } else {
        set.join(", ")
    }
}

fn finding(name: &'static str, who: &str, agree: String, found: Vec<(String, String)>) -> Check {
    if found.is_empty() {
        return Check {
            name,
            ok: true,
            detail: agree,
            fix: None,
        };
    }
    let (what, fixes): (Vec<String>, Vec<String>) = found.into_iter().unzip();
    let mut fixes = fixes;
    fixes.dedup();
    Check {
        name,
        ok: false,
        detail: format!(
            "{who} does not tick with this shell's settings: {}",
            what.join("; ")
        ),
        fix: Some(format!("{}; then restart it", fixes.join("; "))),
    }
}

/// The QwenPaw server's kicks: its environment (`/proc/<pid>/environ`) against this shell's.
pub fn server(doctor: &Doctor, pid: u32, environ: &[String]) -> Check {
    let theirs = VarsEnv::new(environ);
    let who = format!("the QwenPaw server (pid {pid})");
    let found = differences(doctor, "the QwenPaw server", &theirs);
    finding(
        "server settings",
        &who,
        format!(
            "the kicks of {who} tick this job file with this shell's settings (the same config file values, no setting variables of their own)"
        ),
        found,
    )
}

/// The timer's ticks: its unit's `Environment=` lines and its env file
/// (`~/.config/atc/env`) over this user's HOME, against this shell's. None without either.
pub fn timer(doctor: &Doctor, home: Option<&Path>) -> Option<Check> {
    let home = home?;
    let unit = home.join(".config/systemd/user/atc-tick.service");
    let env_file = home.join(".config/atc/env");
    let unit_text = std::fs::read_to_string(&unit).ok();
    let env_text = std::fs::read_to_string(&env_file).ok();
    if unit_text.is_none() && env_text.is_none() {
        return None;
    }
    let mut vars = vec![format!("HOME={}", home.display())];
    if let Some(text) = &env_text {
        vars.extend(text.lines().filter_map(env_line));
    }
    if let Some(text) = &unit_text {
        vars.extend(
            text.lines()
                .filter_map(|l| l.trim().strip_prefix("Environment="))
                .filter_map(env_line),
        );
    }
    let theirs = VarsEnv::new(&vars);
    let shown: Vec<String> = [
        unit_text.as_ref().map(|_| unit),
        env_text.as_ref().map(|_| env_file),
    ]
    .into_iter()
    .flatten()
    .map(|p: PathBuf| p.display().to_string())
    .collect();
    let who = format!("the timer ({})", shown.join(", "));
    let found = differences(doctor, "the timer", &theirs);
    Some(finding(
        "timer settings",
        &who,
        format!(
            "{who} ticks this job file with this shell's settings (the same config file values, no setting variables of their own)"
        ),
        found,
    ))
}

/// One `NAME=value` line of an env file (systemd's `EnvironmentFile`, its `Environment=`),
/// quotes removed; comments and blank lines are none.
fn env_line(line: &str) -> Option<String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
        return None;
    }
    let line = line.strip_prefix("export ").unwrap_or(line);
    let (name, value) = line.split_once('=')?;
    let value = value.trim();
    let value = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
        .unwrap_or(value);
    Some(format!("{}={value}", name.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_lines_as_systemd_reads_them() {
        assert_eq!(env_line("ATC_STATE=/a/b"), Some("ATC_STATE=/a/b".into()));
        assert_eq!(
            env_line("  ATC_STATE=\"/a b\"  "),
            Some("ATC_STATE=/a b".into())
        );
        assert_eq!(env_line("export ATC_KEEP='3d'"), Some("ATC_KEEP=3d".into()));
        assert_eq!(env_line("# ATC_STATE=/x"), None);
        assert_eq!(env_line("; ATC_STATE=/x"), None);
        assert_eq!(env_line(""), None);
        assert_eq!(env_line("junk"), None);
    }
}
