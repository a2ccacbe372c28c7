//! `atc redeliver`: put given-up deliveries (undelivered, unconfirmed, misrouted, refused)
//! back in line, all or none. The parent chat is looked up first, as `watch` does: a result that
//! would only be misrouted again is refused, naming `--create-session`; then it says what
//! the next tick will do. The next tick runs every check again before posting.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Result;

use crate::job::{ChatKey, Job};
use crate::lifecycle::redeliver::{ChatLookup, redeliver_each_in};
use crate::qwenpaw::{Client, chat};
use crate::report::LogEntry;
use crate::settings::{Output, Redeliver};
use crate::state::Store;
use crate::time::Timestamp;
use crate::turn::TurnState;

/// The chat check must not make `redeliver` slow when the server is away.
const CHAT_CHECK_TIMEOUT: Duration = Duration::from_secs(3);

pub fn run(redeliver: &Redeliver, out: Output) -> Result<()> {
    let store = Store::new(redeliver.state.value.clone());
    let task_ids = &redeliver.task_ids;
    // The chats are looked up before the lock is taken (each once): no lock across
    // network I/O. The update below acts on the jobs as they are then.
    let before = store.load()?;
    for task_id in task_ids {
        if before.find(task_id).is_none() {
            let (source, others) = (&redeliver.state.source, &redeliver.other_job_files);
            crate::cmd::watched_elsewhere(task_id, &store, source, others)?;
        }
    }
    let mut looked: HashMap<ChatKey, ChatLookup> = HashMap::new();
    let chats: Vec<Option<ChatLookup>> = task_ids
        .iter()
        .map(|task_id| match before.find(task_id) {
            Some(job)
                if before
                    .turn_of(job)
                    .is_none_or(|t| t.state != TurnState::Unconfirmed) =>
            {
                let found = looked
                    .entry(job.chat_key())
                    .or_insert_with(|| check_chat(job, redeliver));
                Some(found.clone())
            }
            _ => None,
        })
        .collect();
    let now = Timestamp::now();
    let limits = &redeliver.limits;
    let path = store.path().to_owned();
    // All or none: a refusal of one leaves the file as it was.
    let asked: Vec<(&str, Option<&ChatLookup>)> = task_ids
        .iter()
        .zip(&chats)
        .map(|(task_id, chat)| (task_id.as_str(), chat.as_ref()))
        .collect();
    let create_session = redeliver.create_session;
    let done =
        store.update(|file| redeliver_each_in(file, &asked, create_session, &path, now, limits))?;
    let entries: Vec<LogEntry> = done
        .iter()
        .map(|(job, _)| LogEntry::of("requeued", job, now))
        .collect();
    store.log(&entries)?;
    let each = done.iter().map(|(job, message)| (job, message.as_str()));
    crate::cmd::report_jobs(each, task_ids.len(), out)
}

/// Looks the job's exact chat up on its own server, as `watch` does.
fn check_chat(job: &Job, redeliver: &Redeliver) -> ChatLookup {
    let mut client = Client::new(CHAT_CHECK_TIMEOUT, redeliver.auth.clone());
    if job.options.allow_insecure_remote {
        client.allow_insecure(&job.base_url);
    }
    let t = &job.target;
    let listed = client.list_chats(&job.base_url, &t.agent_id, Some((&t.user_id, &t.channel)));
    match chat::chats(listed) {
        Ok(chats) if chat::find(&chats, &t.session_id, &t.user_id, &t.channel).is_some() => {
            ChatLookup::Found
        }
        Ok(_) => ChatLookup::Absent,
        Err(unusable) => ChatLookup::Unknown(unusable.message().to_owned()),
    }
}
