//! `atc watch`: record a task and exactly where its result must go.

use std::time::Duration;

use anyhow::Result;

use crate::cmd::{emit, print_json};
use crate::exit::Exit;
use crate::fail;
use crate::ids::new_job_id;
use crate::job::{Job, Status};
use crate::lifecycle::{Registration, register};
use crate::qwenpaw::{Client, chat};
use crate::settings::{Output, Watch};
use crate::state::Store;
use crate::time::Timestamp;

/// The chat check must not make `watch` slow when the server is away.
const GHOST_CHECK_TIMEOUT: Duration = Duration::from_secs(3);

pub fn run(watch: &Watch, out: Output) -> Result<()> {
    let store = Store::new(watch.state.value.clone());
    let task_id = &watch.task_id;
    let target = watch.target();
    let base_url = &watch.base_url.value;
    if out.verbose > 0 {
        eprintln!(
            "atc: QwenPaw API {base_url} (from {})",
            watch.base_url.source
        );
    }

    let now = Timestamp::now();
    let (job, message) = store.update(|file| {
        let existing = file.find(task_id);
        let fresh = || Job::new(new_job_id(), task_id.clone(), base_url.clone(), target.clone(), now);
        let (job, message) = match register(existing, &target, base_url) {
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
                    job.target.describe_chat()
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
                    job.target.describe_chat()
                );
            }
        };
        file.jobs.retain(|j| j.task_id != *task_id);
        file.jobs.push(job.clone());
        Ok((job, message))
    })?;

    if out.json {
        print_json(&job)?;
    } else if !out.quiet {
        emit(&format!("{message}\n"))?;
    }
    if !out.quiet {
        warn_if_ghost(&job, watch, out);
    }
    Ok(())
}

/// QwenPaw silently starts a new chat for a (session, user, channel) it does not know, and
/// the parent would never see the result there. Check, briefly, that the chat exists; say
/// so if it does not. Never fails the watch: the server may simply be down right now.
fn warn_if_ghost(job: &Job, watch: &Watch, out: Output) {
    let client = Client::new(GHOST_CHECK_TIMEOUT, watch.auth.clone());
    let t = &job.target;
    let chats = client.list_chats(&job.base_url, &t.agent_id, &t.user_id, &t.channel);
    match chat::has_chat(chats, &t.session_id, &t.user_id, &t.channel) {
        Some(false) => eprintln!(
            "atc: warning: {} has no chat with {} for agent '{}'; delivering there would start a new chat the asking agent never sees. Check --session, --user and --channel against the agent's prompt (re-run watch to correct them)",
            job.base_url,
            t.describe_chat(),
            t.agent_id
        ),
        None if out.verbose > 0 => eprintln!(
            "atc: could not check that the chat exists on {} (server unreachable?)",
            job.base_url
        ),
        _ => {}
    }
}

/// "task-1 for agent 'default'" or "task-1 (running on agent 'SE') for agent 'default'".
fn subject(job: &Job) -> String {
    match &job.target.target_agent {
        Some(on) => format!(
            "{} (running on agent '{on}') for agent '{}'",
            job.task_id, job.target.agent_id
        ),
        None => format!("{} for agent '{}'", job.task_id, job.target.agent_id),
    }
}

/// What a re-registration changed: "session s-77 → s-78, user default → alice".
fn changes(old: &Job, new: &Job) -> String {
    let none = || "(none)".to_owned();
    let (o, n) = (&old.target, &new.target);
    let parts = [
        ("agent", o.agent_id.clone(), n.agent_id.clone()),
        (
            "target agent",
            o.target_agent.clone().unwrap_or_else(none),
            n.target_agent.clone().unwrap_or_else(none),
        ),
        ("session", o.session_id.clone(), n.session_id.clone()),
        ("user", o.user_id.clone(), n.user_id.clone()),
        ("channel", o.channel.clone(), n.channel.clone()),
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
        job.target.describe_chat()
    )
}
