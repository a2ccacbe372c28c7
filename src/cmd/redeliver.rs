//! `atc redeliver`: put a given-up delivery (undelivered, unconfirmed, misrouted, refused)
//! back in line. The parent chat is looked up first, as `watch` does: a result that
//! would only be misrouted again is refused, naming `--create-session`; then it says what
//! the next tick will do. The next tick runs every check again before posting.

use std::time::Duration;

use anyhow::Result;

use crate::cmd::report_job;
use crate::exit::Exit;
use crate::fail;
use crate::job::{Job, Outbound};
use crate::lifecycle::{self, Event};
use crate::qwenpaw::{Client, chat};
use crate::report::LogEntry;
use crate::settings::{Output, Redeliver};
use crate::state::Store;
use crate::time::Timestamp;

/// The chat check must not make `redeliver` slow when the server is away.
const CHAT_CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// What the server said about the parent chat.
enum Chat {
    Found,
    /// Absent: the next tick would misroute the result again, unless a new chat is allowed.
    Absent,
    /// The server could not be asked; the tick checks again before delivering.
    Unknown(String),
}

pub fn run(redeliver: &Redeliver, out: Output) -> Result<()> {
    let store = Store::new(redeliver.state.value.clone());
    let task_id = &redeliver.task_id;
    // The chat is looked up before the lock is taken: no lock across network I/O. The
    // update below acts on the job as it is then.
    let jobs = store.load()?.jobs;
    let chat = match lifecycle::redelivery(&jobs, task_id).map(|i| &jobs[i]) {
        Some(job) if job.outbound() != Some(Outbound::Unconfirmed) => {
            Some(check_chat(job, redeliver))
        }
        _ => None,
    };
    let now = Timestamp::now();
    let (job, message) = store.update(|file| {
        // A group member's result travels in its carrier's turn: that is what goes again.
        let Some(i) = lifecycle::redelivery(&file.jobs, task_id) else {
            fail!(Exit::Refused, "no watch for {task_id} in {}", store.path().display());
        };
        let create = redeliver.create_session || file.jobs[i].options.create_session;
        if matches!(chat, Some(Chat::Absent)) && !create {
            let job = &file.jobs[i];
            fail!(
                Exit::Refused,
                "{} has no chat with {} for agent '{}': redelivering would only misroute the result again. Watch again with the right --session, --user and --channel, or run `atc redeliver {task_id} --create-session` to start that chat on purpose",
                job.base_url,
                job.target.describe_chat(),
                job.target.agent_id
            );
        }
        let event = Event::Redeliver {
            create_session: redeliver.create_session,
        };
        let transition = lifecycle::step(&file.jobs[i], event, now, &redeliver.limits);
        let job = &transition.job;
        if transition.is_ignored() {
            let current = &file.jobs[i];
            let what = match current.outbound() {
                Some(Outbound::Delivered) => "was already delivered".to_owned(),
                Some(Outbound::Delivering) => "is queued for delivery already".to_owned(),
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
        let where_to = job.target.describe_chat();
        let message = match (job.outbound(), &chat) {
            (Some(Outbound::Unconfirmed), _) => format!(
                "{task_id}{carried}: the next atc tick reads {where_to} back and posts the result only if it is not there."
            ),
            (_, Some(Chat::Absent)) => format!(
                "{task_id}{carried} goes to {where_to} on the next atc tick, starting that chat (--create-session)."
            ),
            (_, Some(Chat::Unknown(why))) => format!(
                "{task_id}{carried} goes to {where_to} again on the next atc tick, once the chat is idle; the chat could not be checked now ({why}): the tick checks it before posting."
            ),
            _ => format!(
                "{task_id}{carried} goes to {where_to} again on the next atc tick, once the chat is idle."
            ),
        };
        let job = job.clone();
        file.jobs[i] = transition.job;
        Ok((job, message))
    })?;
    store.log(&[LogEntry::of("requeued", &job, now)])?;
    report_job(&job, &message, out)
}

/// Looks the job's exact chat up on its own server, as `watch` does.
fn check_chat(job: &Job, redeliver: &Redeliver) -> Chat {
    let mut client = Client::new(CHAT_CHECK_TIMEOUT, redeliver.auth.clone());
    if job.options.allow_insecure_remote {
        client.allow_insecure(&job.base_url);
    }
    let t = &job.target;
    let listed = client.list_chats(&job.base_url, &t.agent_id, Some((&t.user_id, &t.channel)));
    match chat::chats(listed) {
        Ok(chats) if chat::find(&chats, &t.session_id, &t.user_id, &t.channel).is_some() => {
            Chat::Found
        }
        Ok(_) => Chat::Absent,
        Err(unusable) => Chat::Unknown(unusable.message().to_owned()),
    }
}
