//! `atc timer print`: which schedule, how often, which binary and job file.

use std::path::PathBuf;
use std::time::Duration;

use super::env::Environment;
use super::file::locate;
use super::{Schedule, Setting, Timer, defaults};
use crate::cli;
use crate::exit::{Exit, Failure};
use crate::time::human;

/// The units run bare `atc tick`: its settings come from the config file, which the plugin's
/// kicks read too. They name the job file only when a flag or this shell's environment
/// chose it (not the config file), and the config file only when it is not where a timer
/// finds it anyway, `~/.config/atc/config.toml` (`ATC_CONFIG`, or an `XDG_CONFIG_HOME` of
/// this shell's own).
pub(super) fn timer(
    args: cli::TimerArgs,
    state: impl FnOnce() -> Result<Setting<PathBuf>, Failure>,
    env: &dyn Environment,
) -> Result<Timer, Failure> {
    let cli::TimerCommand::Print {
        kind,
        interval,
        unit,
    } = args.what;
    let schedule = match (kind, unit) {
        (cli::TimerKind::Systemd, unit) => Schedule::Systemd {
            service: unit != Some(cli::TimerUnit::Timer),
            timer: unit != Some(cli::TimerUnit::Service),
        },
        (cli::TimerKind::Cron, None) => Schedule::Cron,
        (cli::TimerKind::Launchd, None) => Schedule::Launchd,
        (cli::TimerKind::Cron, Some(_)) => {
            return Err(Failure::new(
                Exit::Usage,
                "--unit names a systemd unit; cron has one crontab (drop --unit)",
            ));
        }
        (cli::TimerKind::Launchd, Some(_)) => {
            return Err(Failure::new(
                Exit::Usage,
                "--unit names a systemd unit; launchd has one property list (drop --unit)",
            ));
        }
    };
    Ok(Timer {
        schedule,
        interval: timer_interval(schedule, interval.unwrap_or(defaults::TICK_INTERVAL))?,
        binary: std::env::current_exe()
            .and_then(|p| p.canonicalize())
            .map_err(|e| {
                Failure::new(
                    Exit::Refused,
                    format!("cannot tell where this atc binary is: {e}"),
                )
            })?,
        state: Some(state()?).filter(|s| s.source.named()),
        config: locate(env).map(|(path, _)| path).filter(|path| {
            Some(path)
                != env
                    .home()
                    .map(|h| h.join(".config/atc/config.toml"))
                    .as_ref()
        }),
    })
}

/// A tick interval the schedule can express: whole seconds, at least one; for cron (one
/// line per minute at most) one that divides a minute, or whole minutes that divide an hour.
fn timer_interval(schedule: Schedule, interval: Duration) -> Result<Duration, Failure> {
    let secs = super::watch::whole_secs("--interval", interval)?;
    let cron_ok = if secs < 60 {
        60 % secs == 0
    } else {
        secs.is_multiple_of(60) && 60 % (secs / 60) == 0
    };
    if schedule == Schedule::Cron && !cron_ok {
        return Err(Failure::new(
            Exit::Usage,
            format!(
                "cron cannot run every {}: pick an interval that divides a minute (10s, 15s, 20s, 30s…) or whole minutes that divide an hour (1m, 5m, 15m…), or use systemd",
                human(interval)
            ),
        ));
    }
    Ok(interval)
}
