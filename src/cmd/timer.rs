//! `atc timer print`: the systemd user units or crontab lines that run `atc tick`, with
//! this binary's real path filled in. The files in `examples/` are these same templates
//! (a test keeps them equal), with a placeholder path. The units pass `atc tick` no
//! flags: its settings are in the config file, which the plugin's kicks read too; they
//! name the config file (`ATC_CONFIG`) only when a timer would not find it by itself,
//! and the job file (`ATC_STATE`) only when a flag or the environment chose it.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use crate::cmd::emit;
use crate::settings::{Output, Schedule, Timer};

pub fn run(timer: &Timer, out: Output) -> Result<()> {
    if let Some(state) = &timer.state
        && !out.quiet
    {
        // The kicks of atc's QwenPaw plugin run `atc tick` in the server's environment,
        // which this ATC_STATE is not in: one job file for both is the config file's.
        crate::term::say(&format!(
            "atc: note: the units name the job file ({}, from {}); the kicks of atc's QwenPaw plugin do not see it: `atc config set state {}` gives every tick the same job file",
            state.value.display(),
            state.source,
            shell_quote(&state.value)
        ));
    }
    let vars: Vec<(&str, &Path)> = [
        timer.config.as_deref().map(|c| ("ATC_CONFIG", c)),
        timer
            .state
            .as_ref()
            .map(|s| ("ATC_STATE", s.value.as_path())),
    ]
    .into_iter()
    .flatten()
    .collect();
    let text = match timer.schedule {
        Schedule::Systemd {
            service,
            timer: unit,
        } => {
            let exec = systemd_quote(&timer.binary);
            let vars: Vec<(&str, String)> =
                vars.iter().map(|(n, p)| (*n, systemd_quote(p))).collect();
            let mut parts = Vec::new();
            if service {
                parts.push(systemd_service(&exec, &vars));
            }
            if unit {
                parts.push(systemd_timer(timer.interval));
            }
            if service && unit && !out.quiet {
                // Both at once: say where each goes (comments, so it stays valid per file).
                parts[0] = format!("# ~/.config/systemd/user/atc-tick.service\n{}", parts[0]);
                parts[1] = format!("# ~/.config/systemd/user/atc-tick.timer\n{}", parts[1]);
            }
            parts.join("\n")
        }
        Schedule::Cron => cron(
            &shell_quote(&timer.binary),
            &vars
                .iter()
                .map(|(n, p)| (*n, shell_quote(p)))
                .collect::<Vec<_>>(),
            timer.interval,
        ),
        Schedule::Launchd => launchd(&timer.binary, &vars, timer.interval),
    };
    emit(&text)
}

/// `atc-tick.service`; `exec` and the variables' values already quoted for systemd.
pub fn systemd_service(exec: &str, vars: &[(&str, String)]) -> String {
    let state: String = vars
        .iter()
        .map(|(name, value)| format!("Environment={name}={value}\n"))
        .collect();
    format!(
        "\
[Unit]
Description=atc tick: deliver finished QwenPaw background tasks
Documentation=man:atc-tick(1)

[Service]
Type=oneshot
# Tokens, one NAME=value per line (QWENPAW_RUNTIME_INTERNAL_TOKEN=…); optional. Settings
# go in ~/.config/atc/config.toml (`atc config set`), which the plugin's kicks read too.
EnvironmentFile=-%h/.config/atc/env
{state}ExecStart={exec} tick
"
    )
}

/// `atc-tick.timer`.
pub fn systemd_timer(interval: Duration) -> String {
    let secs = interval.as_secs();
    format!(
        "\
[Unit]
Description=Run atc tick every {secs}s

[Timer]
OnBootSec={secs}s
OnUnitActiveSec={secs}s
AccuracySec=1s

[Install]
WantedBy=timers.target
"
    )
}

/// The crontab lines; `exec` and the variables' values already quoted for sh. Cron starts
/// jobs at most once a minute, so a shorter interval is several lines, staggered with
/// `sleep`.
pub fn cron(exec: &str, vars: &[(&str, String)], interval: Duration) -> String {
    let secs = interval.as_secs();
    let state: String = vars
        .iter()
        .map(|(name, value)| format!("{name}={value} "))
        .collect();
    let command = format!("{state}{exec} tick");
    let mut text = format!(
        "\
# atc: run `atc tick` every {secs}s (cron has minute resolution: one line per tick in a minute).
# Tokens: add NAME=value lines above these (QWENPAW_RUNTIME_INTERNAL_TOKEN=…).
# Settings: ~/.config/atc/config.toml (`atc config set`), which the plugin's kicks read too.
"
    );
    if secs < 60 {
        for offset in (0..60).step_by(secs as usize) {
            if offset == 0 {
                text.push_str(&format!("* * * * * {command}\n"));
            } else {
                text.push_str(&format!("* * * * * sleep {offset}; {command}\n"));
            }
        }
    } else {
        let minutes = secs / 60;
        let field = if minutes == 1 {
            "*".to_owned()
        } else {
            format!("*/{minutes}")
        };
        text.push_str(&format!("{field} * * * * {command}\n"));
    }
    text
}

/// A LaunchAgent that runs `atc tick` every `interval` (launchd's `StartInterval`, whole
/// seconds) while the user is logged in.
pub fn launchd(binary: &Path, vars: &[(&str, &Path)], interval: Duration) -> String {
    let env = if vars.is_empty() {
        String::new()
    } else {
        let entries: String = vars
            .iter()
            .map(|(name, value)| {
                format!(
                    "        <key>{name}</key>\n        <string>{}</string>\n",
                    xml_escape(&value.to_string_lossy())
                )
            })
            .collect();
        format!("    <key>EnvironmentVariables</key>\n    <dict>\n{entries}    </dict>\n")
    };
    format!(
        "\
<?xml version=\"1.0\" encoding=\"UTF-8\"?>
<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">
<!-- ~/Library/LaunchAgents/atc-tick.plist; then: launchctl load ~/Library/LaunchAgents/atc-tick.plist
     Tokens (QWENPAW_RUNTIME_INTERNAL_TOKEN, ...) go into EnvironmentVariables: chmod 600 this file.
     Settings go in ~/.config/atc/config.toml (`atc config set`), which the plugin's kicks read too.
     A give-up is one line on stderr: add StandardErrorPath to keep it. -->
<plist version=\"1.0\">
<dict>
    <key>Label</key>
    <string>atc-tick</string>
    <key>ProgramArguments</key>
    <array>
        <string>{}</string>
        <string>tick</string>
    </array>
{env}    <key>StartInterval</key>
    <integer>{}</integer>
    <key>RunAtLoad</key>
    <true/>
    <key>ProcessType</key>
    <string>Background</string>
</dict>
</plist>
",
        xml_escape(&binary.to_string_lossy()),
        interval.as_secs()
    )
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A path as one systemd command-line word: `%` doubled, quoted when it has spaces or
/// quotes.
fn systemd_quote(path: &Path) -> String {
    let raw = path.to_string_lossy().replace('%', "%%");
    if raw
        .chars()
        .any(|c| c.is_whitespace() || c == '"' || c == '\'' || c == '\\')
    {
        format!("\"{}\"", raw.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        raw
    }
}

/// A path as one sh word inside a crontab line (`%` means newline to cron).
fn shell_quote(path: &Path) -> String {
    crate::text::shell_word(&path.to_string_lossy()).replace('%', "\\%")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECS_20: Duration = Duration::from_secs(20);

    /// The example files are the templates with a placeholder binary path.
    #[test]
    fn examples_are_the_templates() {
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
        let read = |p: &str| std::fs::read_to_string(examples.join(p)).unwrap();
        assert_eq!(
            read("systemd/atc-tick.service"),
            systemd_service("%h/.cargo/bin/atc", &[])
        );
        assert_eq!(read("systemd/atc-tick.timer"), systemd_timer(SECS_20));
        assert_eq!(
            read("cron/atc.crontab"),
            cron("$HOME/.cargo/bin/atc", &[], SECS_20)
        );
    }

    #[test]
    fn cron_staggers_within_a_minute() {
        let lines: Vec<String> = cron("/bin/atc", &[], SECS_20)
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_owned)
            .collect();
        assert_eq!(
            lines,
            [
                "* * * * * /bin/atc tick",
                "* * * * * sleep 20; /bin/atc tick",
                "* * * * * sleep 40; /bin/atc tick"
            ]
        );
        assert!(
            cron(
                "/bin/atc",
                &[("ATC_STATE", "/s/j.json".to_owned())],
                Duration::from_secs(300)
            )
            .contains("*/5 * * * * ATC_STATE=/s/j.json /bin/atc tick\n")
        );
    }

    #[test]
    fn paths_are_quoted_for_each_reader() {
        let odd = Path::new("/opt/my tools/100%/atc");
        assert_eq!(systemd_quote(odd), "\"/opt/my tools/100%%/atc\"");
        // Quotes and backslashes alone make it a quoted word too, escaped inside.
        assert_eq!(systemd_quote(Path::new("/a\"b")), r#""/a\"b""#);
        assert_eq!(systemd_quote(Path::new("/a'b")), r#""/a'b""#);
        assert_eq!(systemd_quote(Path::new("/a\\b")), r#""/a\\b""#);
        assert_eq!(systemd_quote(Path::new("/usr/bin/atc")), "/usr/bin/atc");
        assert_eq!(shell_quote(odd), "'/opt/my tools/100\\%/atc'");
        assert_eq!(shell_quote(Path::new("/usr/bin/atc")), "/usr/bin/atc");
        assert_eq!(shell_quote(Path::new("/a'b")), "'/a'\\''b'");
    }
}
