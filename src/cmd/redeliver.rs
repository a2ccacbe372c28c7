//! `atc redeliver`: put a given-up delivery (undelivered, unconfirmed, misrouted, refused)
//! back in line. The parent chat is looked up first, as `watch` does: a result that
//! would only be misrouted again is refused, naming `--create-session`; then it says what
//! the next tick will do. The next tick runs every check again before posting.

use std::time::Duration;

use anyhow::Result;

use crate::cmd::report_job;
use crate::job::Job;
use crate::lifecycle::redeliver::{ChatLookup, redeliver_in};
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
    let task_id = &redeliver.task_id;
    // The chat is looked up before the lock is taken: no lock across network I/O. The
    // update below acts on the job as it is then.
    let before = store.load()?;
    if before.find(task_id).is_none() {
        let (source, others) = (&redeliver.state.source, &redeliver.other_job_files);
        crate::cmd::watched_elsewhere(task_id, &store, source, others)?;
    }
    let chat = match before.find(task_id) {
        Some(job)
            if before
                .turn_of(job)
                .is_none_or(|t| t.state != TurnState::Unconfirmed) =>
        {
            Some(check_chat(job, redeliver))
        }
        _ => None,
    };
    let now = Timestamp::now();
    let limits = &redeliver.limits;
    let path = store.path().to_owned();
    let (job, message) = store.update(|file| {
        redeliver_in(
            file,
            task_id,
            chat.as_ref(),
            redeliver.create_session,
            &path,
            now,
            limits,
        )
    })?;
    store.log(&[LogEntry::of("requeued", &job, now)])?;
    report_job(&job, &message, out)
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
