//! `atc cancel`: stop watching a task. The child task itself keeps running.

use anyhow::Result;

use crate::Output;
use crate::cli::CancelArgs;
use crate::cmd::{describe_chat, print_json};
use crate::exit::Exit;
use crate::fail;
use crate::ids::parse_task_id;
use crate::job::Status;
use crate::lifecycle::{Cancellation, cancel};
use crate::store::Store;
use crate::time::Timestamp;

pub fn run(store: &Store, args: &CancelArgs, out: Output) -> Result<()> {
    let task_id = parse_task_id(&args.task_id)?;
    let now = Timestamp::now();
    let (job, message) = store.update(|file| {
        let Some(job) = file.find_mut(&task_id) else {
            fail!(Exit::Refused, "no watch for {task_id} in {}", store.path().display());
        };
        let message = match cancel(job, now) {
            Cancellation::Cancelled => format!(
                "Cancelled the watch on {task_id}; the child task keeps running (check_agent_task still shows its result)."
            ),
            Cancellation::CancelledInFlight => format!(
                "Cancelled the watch on {task_id}, but its result was being posted to {} at that moment: it may already be on its way.",
                describe_chat(job)
            ),
            Cancellation::AlreadyCancelled => format!("{task_id} was already cancelled."),
            Cancellation::Refused { was: Status::Done } => {
                let when = job.delivered_at.map(|t| format!(" at {t}")).unwrap_or_default();
                fail!(
                    Exit::Refused,
                    "{task_id} was already delivered to {}{when}; nothing to cancel",
                    describe_chat(job)
                );
            }
            Cancellation::Refused { was } => {
                fail!(Exit::Refused, "the watch on {task_id} already ended ({was}); nothing to cancel");
            }
        };
        Ok((job.clone(), message))
    })?;
    if out.json {
        print_json(&job)?;
    } else if !out.quiet {
        crate::cmd::emit(&format!("{message}\n"))?;
    }
    Ok(())
}
