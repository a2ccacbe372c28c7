//! `atc watch`: the tasks, the options and the chat the result goes to.

use std::path::PathBuf;

use super::auth::insecure_remote_host;
use super::env::Environment;
use super::file::ConfigFile;
use super::from::read_from;
use super::qwenpaw::base_url;
use super::tick::Knobs;
use super::{Auth, Setting, Source, Watch, checked, defaults, text};
use crate::cli;
use crate::exit::{Exit, Failure};
use crate::job::{ForwardMode, OnEmpty, OnNoAnswer, Options, Origin};

pub(super) fn watch(
    args: cli::WatchArgs,
    base_url_flag: Option<&str>,
    env: &dyn Environment,
    file: &ConfigFile,
    state: impl FnOnce() -> Result<Setting<PathBuf>, Failure>,
    auth: Auth,
    knobs: &Knobs,
) -> Result<Watch, Failure> {
    let mut task_ids = crate::ids::parse_task_ids(&args.task_ids)?;
    let mut child_sessions: Vec<(String, String)> = Vec::new();
    let mut target_agents: Vec<(String, String)> = Vec::new();
    if let Some(from) = &args.from {
        let (text, shown) = read_from(from)?;
        // A bad value says which input held it.
        let within = |f: Failure| Failure::new(f.exit, format!("--from {shown}: {}", f.message));
        let found = crate::ids::task_ids_in(&text).map_err(within)?;
        child_sessions = crate::ids::child_sessions_in(&text).map_err(within)?;
        target_agents = crate::ids::target_agents_in(&text).map_err(within)?;
        if found.is_empty() {
            return Err(Failure::new(
                Exit::Usage,
                format!(
                    "--from {shown}: no [TASK_ID: …] line in it (submit_to_agent and `qwenpaw agents chat --background` print one per task)"
                ),
            ));
        }
        for id in found {
            if !task_ids.contains(&id) {
                task_ids.push(id);
            }
        }
    }
    if let Some(value) = args.child_session {
        let session = checked(Setting {
            value,
            source: Source::Flag("--child-session"),
        })?;
        // Found by hand: the whole `[SESSION: …]` line was taken as the session, and
        // the stop it was for found no such chat.
        if let Some((inner, true)) = crate::ids::labelled_session(&session.value) {
            return Err(Failure::new(
                Exit::Usage,
                format!(
                    "--child-session {} is QwenPaw's whole [SESSION: …] line: pass its value alone (--child-session {inner}), or the whole text submit_to_agent printed with --from",
                    crate::text::preview(&session.value)
                ),
            ));
        }
        let [task] = task_ids.as_slice() else {
            return Err(Failure::new(
                Exit::Usage,
                format!(
                    "--child-session names one child's session, but {} tasks are watched; watch each with its own --child-session, or pass --from with the [SESSION: …] line under each [TASK_ID: …]",
                    task_ids.len()
                ),
            ));
        };
        child_sessions.retain(|(t, _)| t != task);
        child_sessions.push((task.clone(), session.value));
    }
    let label = |flag: &'static str, value: Option<String>| {
        value
            .map(|value| {
                checked(Setting {
                    value,
                    source: Source::Flag(flag),
                })
                .map(|s| s.value)
            })
            .transpose()
    };
    let options = Options {
        create_session: args.create_session,
        on_no_answer: match args.on_no_answer {
            Some(cli::NoAnswer::Silent) => OnNoAnswer::Silent,
            Some(cli::NoAnswer::Notify) | None => OnNoAnswer::Notify,
        },
        on_empty: match args.on_empty {
            Some(cli::Empty::Skip) => OnEmpty::Skip,
            Some(cli::Empty::Deliver) | None => OnEmpty::Deliver,
        },
        fork_branch: label("--fork-branch", args.fork_branch)?,
        group: label("--group", args.group)?
            .map(|name| match crate::validate::group(&name) {
                Err(why) => Err(Failure::new(Exit::Usage, format!("--group {why}"))),
                Ok(()) => Ok(name),
            })
            .transpose()?,
        forward: match args.forward {
            Some(cli::ForwardArg::Never) => ForwardMode::Never,
            Some(cli::ForwardArg::Auto) | None => ForwardMode::Auto,
        },
        allow_insecure_remote: false,
        stop_after_secs: args
            .stop_after
            .map(|d| whole_secs("--stop-after", d))
            .transpose()?,
        check_in_secs: args
            .check_in
            .map(|d| whole_secs("--check-in", d))
            .transpose()?,
    };
    if let (Some(group), Some(_)) = (&options.group, options.check_in_secs) {
        return Err(Failure::new(
            Exit::Usage,
            format!(
                "--check-in does not work with --group: the members of group {group} report together, in its one turn once none is running, so none would ever check in; drop --check-in, or watch each task without --group"
            ),
        ));
    }
    if options.stop_after_secs.is_some()
        && let Some(task) = task_ids
            .iter()
            .find(|t| !child_sessions.iter().any(|(c, _)| c == *t))
    {
        return Err(Failure::new(
            Exit::Usage,
            format!(
                "--stop-after needs the child's session to stop it, and {task} has none: pass --child-session SID (the [SESSION: …] line submit_to_agent printed), or --from with that line under its [TASK_ID: …]"
            ),
        ));
    }
    let (agent, session, user, channel) = chat_of(
        (args.agent, args.session, args.user, args.channel),
        env,
        "no session to deliver to: pass --session SID or set ATC_SESSION_ID (an agent's prompt shows it as \"Session ID\")",
    )?;
    let target_agent = args
        .target_agent
        .map(|value| {
            checked(Setting {
                value,
                source: Source::Flag("--target-agent"),
            })
        })
        .transpose()?
        .filter(|on| on.value != agent.value);
    if channel.value.eq_ignore_ascii_case("acp") {
        return Err(Failure::new(
            Exit::Refused,
            format!(
                "channel {:?} ({}) is an ACP session: atc posts results through QwenPaw's console API, which can never route back into an ACP session; poll check_agent_task (at most every 30 s) instead, or watch from a console session",
                channel.value, channel.source
            ),
        ));
    }
    let base_url = base_url(base_url_flag, env, file)?;
    auth.check_transport(&base_url)?;
    let options = Options {
        allow_insecure_remote: auth.allow_insecure_remote
            && insecure_remote_host(&base_url.value).is_some(),
        ..options
    };
    let state = state()?;
    Ok(Watch {
        other_job_files: super::other_job_files(&state.value, env, file),
        state,
        task_ids,
        child_sessions,
        options,
        session,
        user,
        channel,
        agent,
        target_agent,
        target_agents,
        auto_watch: knobs.auto_watch.clone(),
        base_url,
        auth,
        limits: knobs.limits(),
        check_tasks: !args.no_task_check,
        origin: match args.origin {
            Some(cli::OriginArg::Plugin) => Origin::Plugin,
            Some(cli::OriginArg::Auto) => Origin::Auto,
            Some(cli::OriginArg::Cli) | None => Origin::Cli,
        },
        config_skipped: file.skipped.clone(),
    })
}

/// One chat's (agent, session, user, channel) flags, as `watch` and `parent-read` take them.
type ChatFlags = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// One chat's (agent, session, user, channel): each flag, else its environment variable,
/// else its default (`missing`: what to say without a session).
#[allow(clippy::type_complexity)]
pub(super) fn chat_of(
    (agent, session, user, channel): ChatFlags,
    env: &dyn Environment,
    missing: &str,
) -> Result<
    (
        Setting<String>,
        Setting<String>,
        Setting<String>,
        Setting<String>,
    ),
    Failure,
> {
    let part = |flag, var, default| text(flag, var, default, env).map(checked).transpose();
    let session = part((session, "--session"), "ATC_SESSION_ID", None)?
        .ok_or_else(|| Failure::new(Exit::Usage, missing))?;
    let user = part((user, "--user"), "ATC_USER_ID", Some(defaults::USER))?.expect("a default");
    let channel = part(
        (channel, "--channel"),
        "ATC_CHANNEL",
        Some(defaults::CHANNEL),
    )?
    .expect("a default");
    let agent =
        part((agent, "--agent"), "ATC_AGENT_ID", Some(defaults::AGENT))?.expect("a default");
    Ok((agent, session, user, channel))
}

/// A duration flag that must be a whole number of seconds, at least one. Refused, it
/// says what to write instead: `1s` for less than a second, the two whole seconds either
/// side of a fraction.
pub(super) fn whole_secs(flag: &str, d: std::time::Duration) -> Result<u64, Failure> {
    let shown = humantime::format_duration(d);
    let why = if d.as_secs() == 0 {
        format!(
            "{flag} {shown} is less than a second: give at least 1s (durations are written like 30s, 5m, 24h)"
        )
    } else if d.subsec_nanos() != 0 {
        format!(
            "{flag} {shown} is not a whole number of seconds: write {} or {}",
            humantime::format_duration(std::time::Duration::from_secs(d.as_secs())),
            humantime::format_duration(std::time::Duration::from_secs(d.as_secs() + 1))
        )
    } else {
        return Ok(d.as_secs());
    };
    Err(Failure::new(Exit::Usage, why))
}
