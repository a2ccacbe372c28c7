//! `atc cancel`: stop watching a task. The child task itself keeps running.

use anyhow::Result;

use crate::cmd::report_job;
use crate::exit::Exit;
use crate::fail;
use crate::job::{Outbound, Status};
use crate::lifecycle::{self, Event};
use crate::report::{LogEntry, Outcome};
use crate::settings::{Cancel, Output};
use crate::state::Store;
use crate::time::Timestamp;

pub fn run(cancel: &Cancel, out: Output) -> Result<()> {
    let store = Store::new(cancel.state.value.clone());
    let task_id = &cancel.task_id;
    let now = Timestamp::now();
    let (job, message) = store.update(|file| {
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
        let transition = lifecycle::step(job, Event::Cancelled, now, &cancel.limits);
        let chat = transition.job.target.describe_chat();
        let message = match transition.outcomes.as_slice() {
            [Outcome::Cancelled] if carried_out => format!(
                "Cancelled the watch on {task_id}, but its result travels in a turn that was being posted to {chat} at that moment: it may already be on its way."
            ),
            [Outcome::Cancelled] => format!(
                "Cancelled the watch on {task_id}; the child task keeps running (check_agent_task still shows its result)."
            ),
            [Outcome::CancelledInFlight] => format!(
                "Cancelled the watch on {task_id}, but its result was being posted to {chat} at that moment: it may already be on its way."
            ),
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
        *job = transition.job;
        Ok((job.clone(), message))
    })?;
    if job.status == Status::Cancelled {
        store.log(&[LogEntry::of("cancelled", &job, now)])?;
    }
    report_job(&job, &message, out)
}
