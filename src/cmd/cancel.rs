//! `atc cancel`: stop watching a task. The child task itself keeps running, unless
//! `--stop` stops it first (`POST /console/chat/stop` on the child's chat).

use std::time::Duration;

use anyhow::Result;

use crate::cmd::report_job;
use crate::exit::Exit;
use crate::fail;
use crate::job::{Job, Status};
use crate::lifecycle::{self, Event};
use crate::qwenpaw::Client;
use crate::qwenpaw::chat::{self, Stop};
use crate::report::{LogEntry, Outcome};
use crate::settings::{Auth, Cancel, Output};
use crate::state::Store;
use crate::time::Timestamp;

/// How long each request of `--stop` may take: a person is waiting.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// What `--stop` did to the child.
struct Stopped {
    /// The chat it was sent to, when it is the child's uuid (recorded on the job).
    chat_id: Option<String>,
    said: Stop,
}

pub fn run(cancel: &Cancel, out: Output) -> Result<()> {
    let store = Store::new(cancel.state.value.clone());
    let task_id = &cancel.task_id;
    // The stop goes out before the lock is taken: the lock is never held across the network.
    let stopped = match &cancel.stop {
        Some(auth) => {
            let file = store.load()?;
            let Some(job) = file.find(task_id) else {
                fail!(
                    Exit::Refused,
                    "no watch for {task_id} in {}",
                    store.path().display()
                );
            };
            if matches!(job.status, Status::Pending | Status::Cancelled) {
                Some((job.job_id.clone(), stop_child(job, auth)?))
            } else {
                None
            }
        }
        None => None,
    };
    let now = Timestamp::now();
    let (job, message, changed) = store.update(|file| {
        let Some(job) = file.find_mut(task_id) else {
            fail!(Exit::Refused, "no watch for {task_id} in {}", store.path().display());
        };
        // What the stop learned belongs to the registration it was sent for (a re-watch
        // meanwhile is another child's record).
        let stop = stopped
            .as_ref()
            .filter(|(job_id, _)| *job_id == job.job_id)
            .map(|(_, stop)| stop);
        let transition = lifecycle::step(job, Event::Cancelled, now, &cancel.limits);
        let chat = transition.job.target.describe_chat();
        let keeps_running = match stop.map(|s| s.said) {
            Some(Stop::Stopped) => "the child was stopped",
            Some(Stop::NotRunning) => "the child was not running",
            None if cancel.stop.is_some() => "the child had already finished",
            None => "the child task keeps running (check_agent_task still shows its result)",
        };
        let message = match transition.outcomes.as_slice() {
            [Outcome::Cancelled] => {
                format!("Cancelled the watch on {task_id}; {keeps_running}.")
            }
            [Outcome::CancelledInFlight] => format!(
                "Cancelled the watch on {task_id}, but its result was being posted to {chat} at that moment: it may already be on its way."
            ),
            [Outcome::AlreadyCancelled] if stop.is_some() => {
                format!("{task_id} was already cancelled; {keeps_running}.")
            }
            [Outcome::AlreadyCancelled] => format!("{task_id} was already cancelled."),
            _ if job.status == Status::Done => {
                let when = job.delivered_at.map(|t| format!(" at {t}")).unwrap_or_default();
                fail!(Exit::Refused, "{task_id} was already delivered to {chat}{when}; nothing to cancel");
            }
            _ => fail!(
                Exit::Refused,
                "the watch on {task_id} already ended ({}); nothing to cancel",
                job.status
            ),
        };
        let mut changed = !transition.is_ignored()
            && !matches!(transition.outcomes.as_slice(), [Outcome::AlreadyCancelled]);
        *job = transition.job;
        if let Some(chat_id) = stop.and_then(|s| s.chat_id.clone())
            && job.child_chat_id.as_ref() != Some(&chat_id)
        {
            job.child_chat_id = Some(chat_id);
            job.updated_at = now;
            changed = true;
        }
        Ok((job.clone(), message, changed))
    })?;
    // A second cancel changes nothing, and logs nothing.
    if changed && job.status == Status::Cancelled {
        store.log(&[LogEntry::of("cancelled", &job, now)])?;
    }
    report_job(&job, &message, out)
}

/// Stops the child of `job`: finds its chat (recorded, or looked up by its session on the
/// agent it runs on), then asks QwenPaw to stop it. Any failure leaves the watch as it is.
fn stop_child(job: &Job, auth: &Auth) -> Result<Stopped> {
    let task_id = &job.task_id;
    let Some(session) = &job.child_session else {
        fail!(
            Exit::Refused,
            "cannot stop the child of {task_id}: its session is not known; watch it again with --child-session SID (the [SESSION: …] line submit_to_agent printed), or stop it from QwenPaw's console; the watch is kept"
        );
    };
    let mut client = Client::new(STOP_TIMEOUT, auth.clone());
    if job.options.allow_insecure_remote {
        client.allow_insecure(&job.base_url);
    }
    let agent = job.target.poll_agent();
    let chat_id = match &job.child_chat_id {
        Some(id) => Some(id.clone()),
        None => match chat::chats(client.list_chats(&job.base_url, agent, None)) {
            Ok(chats) => chat::child_chat(&chats, session).map(|c| c.id.clone()),
            Err(unusable) => fail!(
                Exit::Server,
                "cannot stop the child of {task_id}: its chat could not be looked up ({}); the watch is kept, try again",
                unusable.message()
            ),
        },
    };
    // Not listed (yet): QwenPaw also takes the session id, for chats on `console`.
    let target = chat_id.as_deref().unwrap_or(session);
    match chat::stopped(client.stop_chat(&job.base_url, agent, target)) {
        Ok(said) => Ok(Stopped { chat_id, said }),
        Err(why) => fail!(
            Exit::Server,
            "cannot stop the child of {task_id}: {why}; the watch is kept, try again"
        ),
    }
}
