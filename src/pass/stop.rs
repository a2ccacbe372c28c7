//! Stopping a child (`--stop-after`, `cancel --stop`): find the child's chat on the agent
//! it runs on, ask QwenPaw to stop the turn running there, and tell what came of it from
//! the chat and the task's own record.

use super::*;
use crate::lifecycle::stop::{NotRunning, StopSaid, Stopped};

/// Why the child could not be stopped.
pub enum StopFailed {
    /// The watch does not know the child's session.
    NoSession,
    /// The child's chat could not be looked up.
    Lookup(String),
    /// The stop could not be sent, or what came back tells nothing.
    Stop(String),
    /// QwenPaw found nothing to stop, but nothing says the child is not running (its task
    /// record says it runs, or cannot tell): why, and where to look.
    StillRunning(String),
    /// The stop ended a turn, but this task still runs: the session named was another
    /// task's child (that one was stopped). Trying again would not stop this one.
    OtherChild(String),
}

impl StopFailed {
    pub fn message(&self) -> String {
        match self {
            StopFailed::NoSession => "the child's session is not known".to_owned(),
            StopFailed::Lookup(why) => format!("its chat could not be looked up ({why})"),
            StopFailed::Stop(why) | StopFailed::StillRunning(why) | StopFailed::OtherChild(why) => {
                why.clone()
            }
        }
    }
}

/// Where a child's chat is: the agent whose chats hold it, and the chat when it is listed
/// (or was recorded).
struct ChildChat {
    agent: String,
    chat: Option<String>,
    /// Whether a lookup found it (so the agent is worth recording).
    found: bool,
    /// The agents whose chats were looked through, when the agent was not known.
    searched: Vec<String>,
}

/// Finds the child's chat: on the agent it is known to run on (`--target-agent`, or where
/// an earlier stop found it), else on the asking agent, else on every other agent the
/// server lists. A watch without `--target-agent` is polled fine (the poll route ignores
/// the agent), but a stop goes to one agent's chats: sent to the wrong one, it finds
/// nothing running.
fn child_chat(
    client: &(impl Server + ?Sized),
    job: &Job,
    session: &str,
) -> Result<ChildChat, StopFailed> {
    let base = &job.base_url;
    let look = |agent: &str| {
        chat::chats(client.list_chats(base, agent, None))
            .map(|chats| chat::child_chat(&chats, session).map(|c| c.id.clone()))
    };
    let known = job
        .target
        .target_agent
        .as_deref()
        .or(job.child_agent.as_deref());
    if let Some(agent) = known {
        let chat = match &job.child_chat_id {
            Some(id) => Some(id.clone()),
            None => look(agent).map_err(|u| StopFailed::Lookup(u.message().to_owned()))?,
        };
        return Ok(ChildChat {
            agent: agent.to_owned(),
            found: chat.is_some(),
            chat,
            searched: Vec::new(),
        });
    }
    let asking = &job.target.agent_id;
    // Recorded by an atc that looked only on the asking agent.
    if let Some(id) = &job.child_chat_id {
        return Ok(ChildChat {
            agent: asking.clone(),
            chat: Some(id.clone()),
            found: false,
            searched: Vec::new(),
        });
    }
    let mut searched = vec![asking.clone()];
    if let Some(id) = look(asking).map_err(|u| StopFailed::Lookup(u.message().to_owned()))? {
        return Ok(ChildChat {
            agent: asking.clone(),
            chat: Some(id),
            found: true,
            searched,
        });
    }
    let agents = chat::agents(client.list_agents(base)).map_err(|why| {
        StopFailed::Lookup(format!("the server's agents could not be listed: {why}"))
    })?;
    for agent in agents.iter().filter(|a| *a != asking) {
        searched.push(agent.clone());
        // An agent whose chats cannot be read (disabled: 403) holds no running child.
        if let Ok(Some(id)) = look(agent) {
            return Ok(ChildChat {
                agent: agent.clone(),
                chat: Some(id),
                found: true,
                searched,
            });
        }
    }
    Ok(ChildChat {
        agent: asking.clone(),
        chat: None,
        found: false,
        searched,
    })
}

/// Stops the child of `job` (`cancel --stop`, `--stop-after`): finds its chat
/// ([`child_chat`]), then `POST /console/chat/stop` as the agent that holds it (by the
/// chat's uuid; when no chat is listed, by its session id, which QwenPaw finds among
/// `console` chats). QwenPaw's `{"stopped": false}` says only that nothing runs in the chat
/// the stop reached: the child is said not to be running only when its task record (or,
/// when that tells nothing, its chat) says so too.
/// Whether the task's record says its child already ended (finished, or the server has no
/// record of it): then a stop is not sent at all. A stop sent anyway would reach whatever
/// runs in that session now, and the record could not tell this stop's doing from an
/// earlier end (`cancel --stop` asks this first; a tick stops only a child it just found
/// running).
pub fn already_ended(client: &(impl Server + ?Sized), job: &Job) -> Option<Stopped> {
    let poll = task::classify(
        client.get_task(&job.base_url, &job.task_id, job.target.poll_agent()),
        &job.task_id,
        &job.base_url,
        client.auth(),
    );
    let said = match poll {
        Poll::Record(record) if record.is_finished() => NotRunning::Finished,
        Poll::NotFound { .. } => NotRunning::NoRecord,
        _ => return None,
    };
    Some(Stopped {
        agent: None,
        chat_id: None,
        said: StopSaid::NotRunning(said),
    })
}

pub fn stop_child(client: &(impl Server + ?Sized), job: &Job) -> Result<Stopped, StopFailed> {
    let Some(session) = &job.child_session else {
        return Err(StopFailed::NoSession);
    };
    let base = &job.base_url;
    let place = child_chat(client, job, session)?;
    let target = place.chat.as_deref().unwrap_or(session);
    let said =
        chat::stopped(client.stop_chat(base, &place.agent, target)).map_err(StopFailed::Stop)?;
    let stopped = |said| Stopped {
        agent: place.found.then(|| place.agent.clone()),
        chat_id: place.chat.clone(),
        said,
    };
    let poll = task::classify(
        client.get_task(base, &job.task_id, job.target.poll_agent()),
        &job.task_id,
        base,
        client.auth(),
    );
    let reached = match &place.chat {
        Some(id) => format!("chat {id} of agent '{}'", place.agent),
        None => format!("session {session} of agent '{}'", place.agent),
    };
    if said == chat::Stop::Stopped {
        // QwenPaw marks a stopped task cancelled at once (contract §12): a record that
        // still runs, or that finished otherwise, says the stop ended another task's turn
        // (issue 36 H1: a watch named another task's child session).
        return match poll {
            Poll::Record(record) if !record.is_finished() => Err(StopFailed::OtherChild(format!(
                "the stop ended the turn running in {reached}, but this task still runs: that session is another task's child (that task was stopped); pass the session submit_to_agent printed for this task ([SESSION: …])"
            ))),
            Poll::Record(record) if record.outcome() != crate::job::TaskOutcome::Cancelled => {
                Err(StopFailed::OtherChild(format!(
                    "the stop ended the turn running in {reached}, but this task had already finished by itself: that session is another task's child (that task was stopped); pass the session submit_to_agent printed for this task ([SESSION: …])"
                )))
            }
            Poll::Record(_) => Ok(stopped(StopSaid::Stopped)),
            Poll::NotFound { .. } => Err(StopFailed::OtherChild(format!(
                "the stop ended the turn running in {reached}, but the server has no record of this task: that session is another task's child (that task was stopped); pass the session submit_to_agent printed for this task ([SESSION: …])"
            ))),
            // The record cannot be read now: the stop is taken at its word (a tick's next
            // poll that finds this task still running corrects it).
            Poll::Failed { .. } | Poll::Denied { .. } => Ok(stopped(StopSaid::Stopped)),
        };
    }
    let nowhere = if place.chat.is_none() && !place.searched.is_empty() {
        format!(
            "; its chat (session {session}) is on none of the agents the server lists ({}): watch it again with --target-agent AID, the agent submit_to_agent ran it on",
            place.searched.join(", ")
        )
    } else {
        String::new()
    };
    match poll {
        Poll::Record(record) if record.is_finished() => {
            Ok(stopped(StopSaid::NotRunning(NotRunning::Finished)))
        }
        Poll::Record(_) => Err(StopFailed::StillRunning(format!(
            "QwenPaw found nothing running to stop in {reached}, but the task record says the child still runs{nowhere}"
        ))),
        Poll::NotFound { .. } => Ok(stopped(StopSaid::NotRunning(NotRunning::NoRecord))),
        Poll::Failed { error } | Poll::Denied { error } => {
            let idle = place
                .chat
                .as_deref()
                .map(|id| chat::running(client.chat_status(base, &place.agent, id)));
            match idle {
                Some(Ok(false)) => Ok(stopped(StopSaid::NotRunning(NotRunning::ChatIdle))),
                _ => Err(StopFailed::StillRunning(format!(
                    "QwenPaw found nothing running to stop in {reached}, and neither the task record ({error}) nor the chat says whether the child still runs{nowhere}"
                ))),
            }
        }
    }
}
