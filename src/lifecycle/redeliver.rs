//! The core of `atc redeliver` (the simulation runs it too): a given-up delivery put back
//! in line, its own turn again or its block in a new one, once the command
//! (`cmd::redeliver`) has looked the parent chat up.

use std::path::Path;

use anyhow::Result;

use super::compose;
use super::{Event, Limits};
use crate::exit::Exit;
use crate::fail;
use crate::job::{Job, Status};
use crate::job_file::JobFile;
use crate::time::Timestamp;
use crate::turn::{self, Turn, TurnEvent, TurnState};

/// What the server said about the parent chat.
#[derive(Clone)]
pub enum ChatLookup {
    Found,
    /// Absent: the next tick would misroute the result again, unless a new chat is allowed.
    Absent,
    /// The server could not be asked; the tick checks again before delivering.
    Unknown(String),
}

/// `redeliver` of several tasks, in the order given: each as [`redeliver_in`] does it, but
/// a task whose block is in a turn an earlier one sent again goes with it (a batch's or a
/// group's tasks share one turn), and is said so. The first refusal is the result (the
/// caller saves nothing then). Returns each job and its message.
pub fn redeliver_each_in(
    file: &mut JobFile,
    asked: &[(&str, Option<&ChatLookup>)],
    create_session: bool,
    path: &Path,
    now: Timestamp,
    limits: &Limits,
) -> Result<Vec<(Job, String)>> {
    let mut done: Vec<(Job, String)> = Vec::new();
    // The turns this call sent again, with the task that sent each.
    let mut again: Vec<(String, &str)> = Vec::new();
    for &(task_id, chat) in asked {
        let with = file.find(task_id).and_then(|job| {
            // Sent again: open, or to be read back first. Not a delivered turn: a
            // follow-up sent again leaves its result's turn as it was, and that is the
            // turn `again` records for it (another task whose result shared it still
            // owes its own follow-up).
            let turn = file.turn_of(job).filter(|t| {
                t.carries_job(&job.job_id)
                    && matches!(t.state, TurnState::Open | TurnState::Unconfirmed)
            })?;
            let (_, first) = again.iter().find(|(id, _)| *id == turn.turn_id)?;
            Some((file.shown(job), turn.turn_id.clone(), *first))
        });
        if let Some((job, turn, first)) = with {
            let said = format!("{task_id} goes again with {first}, in its turn {turn}.");
            done.push((job, said));
            continue;
        }
        let (job, message) = redeliver_in(file, task_id, chat, create_session, path, now, limits)?;
        if let Some(turn) = &job.turn {
            again.push((turn.clone(), task_id));
        }
        done.push((job, message));
    }
    Ok(done)
}

/// What `redeliver` does to the file (the simulation runs it too): the job's own turn
/// goes again when it went to the job's chat (open again if nothing of it was posted, read
/// back first if that is unknown), otherwise its block goes in a new turn. `chat` is what
/// the look before the lock found. Returns the job and the message.
pub fn redeliver_in(
    file: &mut JobFile,
    task_id: &str,
    chat: Option<&ChatLookup>,
    create_session: bool,
    path: &Path,
    now: Timestamp,
    limits: &Limits,
) -> Result<(Job, String)> {
    let i = file.watched(task_id, path)?;
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
    if matches!(chat, Some(ChatLookup::Absent)) && !create {
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
                "is queued for delivery already: the next atc tick posts it".to_owned()
            }
            // What else a person can do, by where the watch stands.
            _ => match shown {
                Status::Pending => {
                    "is pending: atc still watches it and posts its result when it ends".to_owned()
                }
                Status::Cancelled => format!(
                    "is cancelled: `{}` watches it again, to have its result delivered",
                    crate::describe::watch_again(job, "")
                ),
                Status::Lost | Status::Abandoned | Status::Expired => {
                    format!("is {shown}: there is no result to send")
                }
                _ => format!("is {shown}"),
            },
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
    // Its result landed, and follow-ups of it (issue 37) were given up: each of those
    // turns goes again, the oldest first (they go out in that order).
    let follow_ups: Vec<usize> = if landed == Some(TurnState::Delivered) {
        (0..file.turns.len())
            .filter(|&t| {
                let t = &file.turns[t];
                t.is_follow_up()
                    && t.carries_job(&job.job_id)
                    && !turn::step(t, TurnEvent::Redeliver { create_session }, now, limits)
                        .is_ignored()
            })
            .collect()
    } else {
        Vec::new()
    };
    let sent = if follow_ups.is_empty() {
        own.into_iter().collect()
    } else {
        follow_ups
    };
    let (unknown, which) = match sent.as_slice() {
        [] => {
            let event = Event::Requeued { create_session };
            let transition = super::step(job, file.turn_of(job), event, now, limits);
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
        sent => {
            let mut unknown = false;
            for &t in sent {
                let turn = &file.turns[t];
                if turn.text.is_none() {
                    fail!(
                        Exit::Refused,
                        "{task_id}'s turn {} has no text kept (an earlier atc kept it on another job's record, since gone): look in the parent chat for it",
                        turn.turn_id
                    );
                }
                let transition =
                    turn::step(turn, TurnEvent::Redeliver { create_session }, now, limits);
                if transition.is_ignored() {
                    return Err(refuse(job, Some(turn)));
                }
                unknown |= transition.turn.state == TurnState::Unconfirmed;
                file.turns[t] = transition.turn;
            }
            let ids: Vec<&str> = sent
                .iter()
                .map(|&t| file.turns[t].turn_id.as_str())
                .collect();
            let others = file.turns[sent[0]].tasks_besides(&file.jobs[i].job_id);
            let which = if file.turns[sent[0]].is_follow_up() {
                match ids.as_slice() {
                    [one] => format!("'s follow-up (turn {one})"),
                    many => format!("'s {} follow-ups (turns {})", many.len(), many.join(", ")),
                }
            } else if others.is_empty() {
                String::new()
            } else {
                format!(
                    " (its turn {} goes again, with {})",
                    ids[0],
                    others.join(", ")
                )
            };
            // Open again, it carries only what still belongs there (a job watched again
            // elsewhere meanwhile has left it).
            compose::tidy(file, now, limits);
            (unknown, which)
        }
    };
    let polls_again = file.jobs[i].watch == crate::job::Watch::Pending;
    let goes = if sent.len() > 1 { "go" } else { "goes" };
    let message = match (unknown, &chat) {
        _ if polls_again => format!(
            "{task_id} is watched again (the parent read its result before atc fetched it): the next atc tick fetches the result and posts it to {where_to}, once the chat is idle."
        ),
        (true, _) => format!(
            "{task_id}{which}: the next atc tick reads {where_to} back and posts the result only if it is not there."
        ),
        (_, Some(ChatLookup::Absent)) => format!(
            "{task_id}{which} {goes} to {where_to} on the next atc tick, starting that chat (--create-session)."
        ),
        (_, Some(ChatLookup::Unknown(why))) => format!(
            "{task_id}{which} {goes} to {where_to} again on the next atc tick, once the chat is idle; the chat could not be checked now ({why}): the tick checks it before posting."
        ),
        _ => format!(
            "{task_id}{which} {goes} to {where_to} again on the next atc tick, once the chat is idle."
        ),
    };
    Ok((file.shown(&file.jobs[i]), message))
}
