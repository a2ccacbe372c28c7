//! `atc parent-read` (plumbing, hidden from `--help`): the parent chat read these tasks'
//! finished results itself (its `check_agent_task` answered them; atc's QwenPaw plugin
//! sees that and runs this), so atc does not post them too. What that means for the job
//! file is `lifecycle::read`'s; this reads it, takes the lock, logs and answers.

use crate::cmd::{emit, print_json};
use crate::lifecycle::read::{Read, parent_read_in};
use crate::report::LogEntry;
use crate::settings::{Output, ParentRead};
use crate::state::Store;
use crate::time::Timestamp;
use anyhow::Result;

pub fn run(args: &ParentRead, out: Output) -> Result<()> {
    let store = Store::new(args.state.value.clone());
    let reader = (
        args.agent.value.as_str(),
        args.session.value.as_str(),
        args.user.value.as_str(),
        args.channel.value.as_str(),
    );
    let now = Timestamp::now();
    // Most reads are of tasks atc does not watch: those need no lock and no save.
    let before = store.load()?;
    let watched = args.task_ids.iter().any(|t| before.find(t).is_some());
    let reads = if watched {
        store.update(|file| {
            Ok(parent_read_in(
                file,
                &args.task_ids,
                reader,
                now,
                &args.limits,
            ))
        })?
    } else {
        parent_read_in(
            &mut before.clone(),
            &args.task_ids,
            reader,
            now,
            &args.limits,
        )
    };
    if watched {
        let file = store.load()?;
        let entries: Vec<LogEntry> = reads
            .iter()
            .filter(|r| r.outcome != "left_alone")
            .filter_map(|r| {
                file.find(&r.task_id)
                    .map(|job| LogEntry::of(r.outcome, job, now))
            })
            .collect();
        store.log(&entries)?;
    }
    if out.json {
        print_json(&serde_json::json!({ "tasks": reads }))
    } else if out.quiet {
        Ok(())
    } else {
        let lines: Vec<String> = reads.iter().map(Read::line).collect();
        emit(&format!("{}\n", lines.join("\n")))
    }
}
