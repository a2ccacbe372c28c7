//! `atc redeliver`: put a given-up delivery (undelivered, unconfirmed, misrouted, refused)
//! back in line. The next tick runs every check again before posting.

use anyhow::Result;

use crate::cmd::report_job;
use crate::exit::Exit;
use crate::fail;
use crate::job::Outbound;
use crate::lifecycle::{self, Event};
use crate::report::LogEntry;
use crate::settings::{Output, Redeliver};
use crate::state::Store;
use crate::time::Timestamp;

pub fn run(redeliver: &Redeliver, out: Output) -> Result<()> {
    let store = Store::new(redeliver.state.value.clone());
    let task_id = &redeliver.task_id;
    let now = Timestamp::now();
    let (job, message) = store.update(|file| {
        // A group member's result travels in its carrier's turn: that is what goes again.
        let Some(i) = lifecycle::redelivery(&file.jobs, task_id) else {
            fail!(Exit::Refused, "no watch for {task_id} in {}", store.path().display());
        };
        let event = Event::Redeliver {
            create_session: redeliver.create_session,
        };
        let transition = lifecycle::step(&file.jobs[i], event, now, &redeliver.limits);
        let job = &transition.job;
        if transition.is_ignored() {
            let current = &file.jobs[i];
            let what = match current.outbound() {
                Some(Outbound::Delivered) => "was already delivered".to_owned(),
                Some(Outbound::Delivering) => "is being delivered already".to_owned(),
                _ => format!("is {}", current.status),
            };
            fail!(
                Exit::Refused,
                "{} {what}; only an undelivered, unconfirmed, misrouted or refused (error) delivery can be tried again",
                current.task_id
            );
        }
        let carried = if job.task_id == *task_id {
            String::new()
        } else {
            format!(" (its group's turn, carried by {})", job.task_id)
        };
        let message = match job.outbound() {
            Some(Outbound::Unconfirmed) => format!(
                "{task_id}{carried}: the next atc tick reads {} back and posts the result only if it is not there.",
                job.target.describe_chat()
            ),
            _ => format!(
                "{task_id}{carried} goes to {} again on the next atc tick, once the chat exists and is idle.",
                job.target.describe_chat()
            ),
        };
        let job = job.clone();
        file.jobs[i] = transition.job;
        Ok((job, message))
    })?;
    store.log(&[LogEntry::of("requeued", &job, now)])?;
    report_job(&job, &message, out)
}
