//! `atc cancel`: stop watching a task. The child task itself keeps running, unless
//! `--stop` stops it first (`POST /console/chat/stop` on the child's chat).

use std::time::Duration;

use anyhow::Result;

use crate::cmd::report_job;
use crate::exit::Exit;
use crate::fail;
use crate::job::{Job, Outbound, Status};
use crate::lifecycle::{self, Event};
use crate::pass::{self, StopFailed, Stopped};
use crate::qwenpaw::Client;
use crate::qwenpaw::chat::Stop;
use crate::report::{LogEntry, Outcome};
use crate::settings::{Auth, Cancel, Output};
use crate::state::Store;
use crate::time::Timestamp;

/// How long each request of `--stop` may take: a person is waiting.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

pub fn run(cancel: &Cancel, out: Output) -> Result<()> {
    if cancel.check_ins {
        return check_ins_off(cancel, out);
    }
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
        // Its result travels in another job's turn (a group's or a batch's) that is being
        // posted, or may have been: once claimed, the turn is what it is.
        let carried_out = file
            .find(task_id)
            .and_then(|job| job.carried_by.as_deref())
            .and_then(|carrier| file.jobs.iter().find(|j| j.job_id == carrier))
            .is_some_and(|carrier| {
                carrier.in_flight() || carrier.outbound() == Some(Outbound::Unconfirmed)
            });
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
            [Outcome::Cancelled] if carried_out => format!(
                "Cancelled the watch on {task_id}, but its result travels in a turn that was being posted to {chat} at that moment: it may already be on its way."
            ),
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

/// `cancel --check-ins`: the watch goes on, without check-ins.
fn check_ins_off(cancel: &Cancel, out: Output) -> Result<()> {
    let store = Store::new(cancel.state.value.clone());
    let task_id = &cancel.task_id;
    let now = Timestamp::now();
    let job = store.update(|file| {
        let Some(job) = file.find_mut(task_id) else {
            fail!(
                Exit::Refused,
                "no watch for {task_id} in {}",
                store.path().display()
            );
        };
        let transition = lifecycle::step(job, Event::CheckInsOff, now, &cancel.limits);
        if transition.is_ignored() {
            if job.status != Status::Pending {
                fail!(
                    Exit::Refused,
                    "the watch on {task_id} already ended ({}); no check-ins to stop",
                    job.status
                );
            }
            fail!(
                Exit::Refused,
                "{task_id} has no check-ins to stop (it was watched without --check-in)"
            );
        }
        *job = transition.job;
        Ok(job.clone())
    })?;
    store.log(&[LogEntry::of("check_ins_off", &job, now)])?;
    let message = format!(
        "No more check-ins for {task_id}; still watching it (its result comes back as usual)."
    );
    report_job(&job, &message, out)
}

/// Stops the child of `job` through its own base URL; any failure leaves the watch as it is.
fn stop_child(job: &Job, auth: &Auth) -> Result<Stopped> {
    let task_id = &job.task_id;
    let mut client = Client::new(STOP_TIMEOUT, auth.clone());
    if job.options.allow_insecure_remote {
        client.allow_insecure(&job.base_url);
    }
    match pass::stop_child(&client, job) {
        Ok(stopped) => Ok(stopped),
        Err(StopFailed::NoSession) => fail!(
            Exit::Refused,
            "cannot stop the child of {task_id}: its session is not known; watch it again with --child-session SID (the [SESSION: …] line submit_to_agent printed), or stop it from QwenPaw's console; the watch is kept"
        ),
        Err(why) => fail!(
            Exit::Server,
            "cannot stop the child of {task_id}: {}; the watch is kept, try again",
            why.message()
        ),
    }
}
