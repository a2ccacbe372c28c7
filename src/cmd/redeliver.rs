//! `atc redeliver`: put a given-up delivery (undelivered, unconfirmed, misrouted, refused)
//! back in line. The parent chat is looked up first, as `watch` does: a result that
//! would only be misrouted again is refused, naming `--create-session`; then it says what
//! the next tick will do. The next tick runs every check again before posting.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use crate::cmd::report_job;
use crate::compose;
use crate::exit::Exit;
use crate::fail;
use crate::job::Job;
use crate::lifecycle::{self, Event, Limits};
use crate::qwenpaw::{Client, chat};
use crate::report::LogEntry;
use crate::settings::{Output, Redeliver};
use crate::state::{JobFile, Store};
use crate::time::Timestamp;
use crate::turn::{self, Turn, TurnEvent, TurnState};

/// The chat check must not make `redeliver` slow when the server is away.
const CHAT_CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// What the server said about the parent chat.
pub enum Chat {
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
    let before = store.load()?;
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

/// What `redeliver` does to the file (the simulation runs it too): the job's own turn
/// goes again when it went to the job's chat (open again if nothing of it was posted, read
/// back first if that is unknown), otherwise its block goes in a new turn. `chat` is what
/// the look before the lock found. Returns the job and the message.
pub fn redeliver_in(
    file: &mut JobFile,
    task_id: &str,
    chat: Option<&Chat>,
    create_session: bool,
    path: &Path,
    now: Timestamp,
    limits: &Limits,
) -> Result<(Job, String)> {
    let Some(i) = file.jobs.iter().position(|j| j.task_id == *task_id) else {
        fail!(
            Exit::Refused,
            "no watch for {task_id} in {}",
            path.display()
        );
    };
    let job = &file.jobs[i];
    // Its own turn goes again, when that turn went to its chat and carries its block;
    // otherwise its block goes in a new turn.
    let own = job.turn.as_deref().and_then(|id| {
        file.turns.iter().position(|t| {
            t.turn_id == id
                && t.chat.key() == job.chat_key()
                && crate::status::block(job).is_some_and(|b| t.carries_block(&job.job_id, b))
        })
    });
    let create = create_session
        || job.options.create_session
        || own.is_some_and(|t| file.turns[t].create_session);
    if matches!(chat, Some(Chat::Absent)) && !create {
        fail!(
            Exit::Refused,
            "{} has no chat with {} for agent '{}': redelivering would only misroute the result again. Watch again with the right --session, --user and --channel, or run `atc redeliver {task_id} --create-session` to start that chat on purpose",
            job.base_url,
            job.target.describe_chat(),
            job.target.agent_id
        );
    }
    // Where its block stands is its turn's (the one it points at).
    let landed = crate::status::delivery(job, file.turn_of(job)).map(|(_, state)| state);
    let shown = crate::status::status(job, file.turn_of(job));
    let refuse = |job: &Job, turn: Option<&Turn>| -> anyhow::Error {
        let what = match (landed, turn.map(|t| t.state)) {
            (Some(TurnState::Delivered), _) => "was already delivered".to_owned(),
            (_, Some(TurnState::Claimed)) => "is being posted (its turn was claimed)".to_owned(),
            (Some(TurnState::Open | TurnState::Claimed), _) => {
                "is queued for delivery already".to_owned()
            }
            _ => format!("is {shown}"),
        };
        crate::exit::Failure::new(
                Exit::Refused,
                format!(
                    "{} {what}; only an undelivered, unconfirmed, misrouted or refused (error) delivery, or a result the parent read itself, can be tried again",
                    job.task_id
                ),
            )
            .into()
    };
    let where_to = job.target.describe_chat();
    // Its result landed, and a follow-up of it (issue 37) was given up: that turn goes
    // again (the newest such).
    let follow_up = (landed == Some(TurnState::Delivered))
        .then(|| {
            file.turns.iter().rposition(|t| {
                t.is_follow_up()
                    && t.carries_job(&job.job_id)
                    && !turn::step(t, TurnEvent::Redeliver { create_session }, now, limits)
                        .is_ignored()
            })
        })
        .flatten();
    let own = follow_up.or(own);
    let (unknown, which) = match own {
        Some(t) => {
            let turn = &file.turns[t];
            if turn.text.is_none() {
                fail!(
                    Exit::Refused,
                    "{task_id}'s turn {} has no text kept (an earlier atc kept it on another job's record, since gone): look in the parent chat for it",
                    turn.turn_id
                );
            }
            let event = TurnEvent::Redeliver { create_session };
            let transition = turn::step(turn, event, now, limits);
            if transition.is_ignored() {
                return Err(refuse(job, Some(turn)));
            }
            let others = turn.tasks_besides(&job.job_id);
            let which = if follow_up.is_some() {
                format!("'s follow-up (turn {})", turn.turn_id)
            } else if others.is_empty() {
                String::new()
            } else {
                format!(
                    " (its turn {} goes again, with {})",
                    turn.turn_id,
                    others.join(", ")
                )
            };
            let unknown = transition.turn.state == TurnState::Unconfirmed;
            file.turns[t] = transition.turn;
            // Open again, it carries only what still belongs there (a job watched again
            // elsewhere meanwhile has left it).
            compose::tidy(file, now, limits);
            (unknown, which)
        }
        None => {
            let event = Event::Requeued { create_session };
            let transition = lifecycle::step(job, file.turn_of(job), event, now, limits);
            if transition.is_ignored() {
                return Err(refuse(job, file.turn_of(job)));
            }
            let which = if job.turn.is_some() {
                " (in a new turn: its last one went to another chat)".to_owned()
            } else {
                String::new()
            };
            file.jobs[i] = transition.job;
            (false, which)
        }
    };
    let polls_again = file.jobs[i].watch == crate::job::Watch::Pending;
    let message = match (unknown, &chat) {
        _ if polls_again => format!(
            "{task_id} is watched again (the parent read its result before atc fetched it): the next atc tick fetches the result and posts it to {where_to}, once the chat is idle."
        ),
        (true, _) => format!(
            "{task_id}{which}: the next atc tick reads {where_to} back and posts the result only if it is not there."
        ),
        (_, Some(Chat::Absent)) => format!(
            "{task_id}{which} goes to {where_to} on the next atc tick, starting that chat (--create-session)."
        ),
        (_, Some(Chat::Unknown(why))) => format!(
            "{task_id}{which} goes to {where_to} again on the next atc tick, once the chat is idle; the chat could not be checked now ({why}): the tick checks it before posting."
        ),
        _ => format!(
            "{task_id}{which} goes to {where_to} again on the next atc tick, once the chat is idle."
        ),
    };
    Ok((file.shown(&file.jobs[i]), message))
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
