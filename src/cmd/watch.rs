//! `atc watch`: record a task and exactly where its result must go.

use std::time::Duration;

use anyhow::Result;

use crate::Output;
use crate::cli::WatchArgs;
use crate::cmd::{describe_chat, print_json};
use crate::exit::Exit;
use crate::fail;
use crate::http::Client;
use crate::ids::{new_job_id, parse_task_id};
use crate::job::{Job, Status};
use crate::lifecycle::{Registration, register};
use crate::settings::{self, Auth, Environment};
use crate::store::Store;
use crate::time::Timestamp;

/// The chat check must not make `watch` slow when the server is away.
const GHOST_CHECK_TIMEOUT: Duration = Duration::from_secs(3);

pub fn run(
    store: &Store,
    args: &WatchArgs,
    base_url: Option<&str>,
    env: &dyn Environment,
    out: Output,
) -> Result<()> {
    let task_id = parse_task_id(&args.task_id)?;
    let target = settings::target(
        &args.session,
        &args.user,
        &args.channel,
        &args.agent,
        args.target_agent.as_deref(),
    )?;
    if target.channel.eq_ignore_ascii_case("acp") {
        fail!(
            Exit::Refused,
            "channel {:?} is an ACP session: atc posts results through QwenPaw's console API, which can never route back into an ACP session; poll check_agent_task (at most every 30 s) instead, or watch from a console session",
            target.channel
        );
    }
    let (base_url, source) = settings::base_url(base_url, env)?;
    if out.verbose > 0 {
        eprintln!("atc: QwenPaw API {base_url} (from {source})");
    }

    let now = Timestamp::now();
    let (job, message) = store.update(|file| {
        let existing = file.find(&task_id);
        let decision = register(existing, &target, &base_url);
        let fresh = || Job::new(new_job_id(), task_id.clone(), base_url.clone(), target.clone(), now);
        let (job, message) = match decision {
            Registration::New => {
                let job = fresh();
                let message = format!("Watching {}; {}", subject(&job), destination(&job));
                (job, message)
            }
            Registration::AlreadyWatching => {
                let job = existing.cloned().expect("a live record exists");
                let message = format!(
                    "Already watching {} (job {}); {}",
                    subject(&job),
                    job.job_id,
                    destination(&job)
                );
                return Ok((job, message));
            }
            Registration::Replace { was, same_target } => {
                let old = existing.expect("a record exists");
                let job = fresh();
                let message = if !same_target && !was.is_terminal() {
                    format!(
                        "Re-targeted {}: {}; the result goes there on the next atc tick.",
                        subject(&job),
                        changes(old, &job)
                    )
                } else {
                    format!(
                        "Watching {} again (the previous watch ended {was}); {}",
                        subject(&job),
                        destination(&job)
                    )
                };
                (job, message)
            }
            Registration::Refuse { was: Status::Done } => {
                let job = existing.expect("a record exists");
                let when = job.delivered_at.map(|t| format!(" at {t}")).unwrap_or_default();
                fail!(
                    Exit::Refused,
                    "{task_id} was already delivered to {}{when}; watching it again would only post the result twice (`atc status {task_id}` shows what was sent)",
                    describe_chat(job)
                );
            }
            Registration::Refuse { was: Status::Unconfirmed } => {
                fail!(
                    Exit::Refused,
                    "{task_id}'s result may already have been delivered (an attempt's outcome is unknown); watching it again could post it twice. `atc status {task_id}` shows the text; check_agent_task fetches it too"
                );
            }
            Registration::Refuse { was } => {
                let job = existing.expect("a record exists");
                fail!(
                    Exit::Refused,
                    "{task_id}'s result is being posted to {} right now ({was}); try again after the next atc tick",
                    describe_chat(job)
                );
            }
        };
        file.jobs.retain(|j| j.task_id != task_id);
        file.jobs.push(job.clone());
        Ok((job, message))
    })?;

    if out.json {
        print_json(&job)?;
    } else if !out.quiet {
        crate::cmd::emit(&format!("{message}\n"))?;
    }
    if !out.quiet {
        warn_if_ghost(&job, env, out);
    }
    Ok(())
}

/// QwenPaw silently starts a new chat for a (session, user, channel) it does not know, and
/// the parent would never see the result there. Check, briefly, that the chat exists; say
/// so if it does not. Never fails the watch: the server may simply be down right now.
fn warn_if_ghost(job: &Job, env: &dyn Environment, out: Output) {
    let client = Client::new(GHOST_CHECK_TIMEOUT, Auth::from_env(env));
    match client.chat_exists(&job.base_url, &job.target()) {
        Some(false) => eprintln!(
            "atc: warning: {} has no chat with {} for agent '{}'; delivering there would start a new chat the asking agent never sees. Check --session, --user and --channel against the agent's prompt (re-run watch to correct them)",
            job.base_url,
            describe_chat(job),
            job.agent_id
        ),
        None if out.verbose > 0 => eprintln!(
            "atc: could not check that the chat exists on {} (server unreachable?)",
            job.base_url
        ),
        _ => {}
    }
}

/// "task-1 for agent 'default'" or "task-1 (on agent 'SE') for agent 'default'".
fn subject(job: &Job) -> String {
    match &job.target_agent {
        Some(on) => format!(
            "{} (running on agent '{on}') for agent '{}'",
            job.task_id, job.agent_id
        ),
        None => format!("{} for agent '{}'", job.task_id, job.agent_id),
    }
}

/// What a re-registration changed: "session s-77 → s-78, user default → alice".
fn changes(old: &Job, new: &Job) -> String {
    let none = || "(none)".to_owned();
    let parts = [
        ("agent", old.agent_id.clone(), new.agent_id.clone()),
        (
            "target agent",
            old.target_agent.clone().unwrap_or_else(none),
            new.target_agent.clone().unwrap_or_else(none),
        ),
        ("session", old.session_id.clone(), new.session_id.clone()),
        ("user", old.user_id.clone(), new.user_id.clone()),
        ("channel", old.channel.clone(), new.channel.clone()),
        ("base URL", old.base_url.clone(), new.base_url.clone()),
    ];
    parts
        .iter()
        .filter(|(_, a, b)| a != b)
        .map(|(what, a, b)| format!("{what} {a} → {b}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn destination(job: &Job) -> String {
    format!(
        "the result goes to {} on the next atc tick.",
        describe_chat(job)
    )
}
