//! Delegation trees (issue 37): a result delivered into a chat that is itself a watched
//! child's (a background task's chat, whose own result already reached its parent) wakes
//! that child's agent, and its reply goes up to the child's parent as a **follow-up**
//! block of the child's task. It is one more turn, read back like any other, level by
//! level up to `--follow-up-depth`. Pure: the tick applies what [`up`] says under the
//! lock, in the same save as the woken turn's end, so a reply goes up at most once.

use crate::describe;
use crate::job::{Job, Watch};
use crate::time::Timestamp;
use crate::turn::{Block, BlockKind, ParentTurn, Turn, TurnState, Up};

use super::{Limits, Turns};

/// The watch whose child's chat `chat` is: a finished watch of this server whose child
/// session is that chat's, on that agent when the watch knows its child's agent. The
/// newest such watch wins (a session a model named twice belongs to its latest task).
pub fn child_of<'a>(jobs: &'a [Job], chat: &crate::turn::Chat) -> Option<&'a Job> {
    jobs.iter()
        .filter(|j| {
            j.base_url == chat.base_url
                && j.child_session.as_deref() == Some(chat.session_id.as_str())
                && j.target
                    .target_agent
                    .as_deref()
                    .or(j.child_agent.as_deref())
                    .is_none_or(|agent| agent == chat.agent_id)
        })
        .max_by_key(|j| j.registered_at)
}

/// The chain of watches above `job`: the watch whose child's chat `job` delivers into,
/// then the one above that, and so on (at most `max` levels; a loop ends it).
pub fn chain<'a>(jobs: &'a [Job], job: &Job, max: usize) -> Vec<&'a Job> {
    let mut up: Vec<&Job> = Vec::new();
    let mut chat = crate::compose::chat_of(job);
    while up.len() < max {
        let Some(parent) = child_of(jobs, &chat) else {
            break;
        };
        if parent.job_id == job.job_id || up.iter().any(|j| j.job_id == parent.job_id) {
            break;
        }
        chat = crate::compose::chat_of(parent);
        up.push(parent);
    }
    up
}

/// What becomes of the reply of the turn `woken` (a delivered turn) woke, now that it
/// ended: `None` when its chat is no watched child's; otherwise where it goes up (the
/// follow-up's new turn) or why it does not.
pub fn up(
    jobs: &[Job],
    turns: &Turns,
    woken: &Turn,
    ended: &ParentTurn,
    now: Timestamp,
    limits: &Limits,
) -> Option<(Up, Option<Turn>)> {
    if woken.state != TurnState::Delivered || woken.parent_turn.is_some() {
        return None;
    }
    let job = child_of(jobs, &woken.chat)?;
    // Its own result must have reached its parent: a child still running (or whose result
    // is still on its way) gets the result in its chat, and its final answer goes up as
    // usual.
    let result_landed = job.watch == Watch::Finished
        && turns
            .of_job(job)
            .is_some_and(|t| t.state == TurnState::Delivered && t.carries_job(&job.job_id));
    if !result_landed {
        return None;
    }
    let not = |why: String| {
        Some((
            Up {
                job_id: job.job_id.clone(),
                task_id: job.task_id.clone(),
                turn: None,
                not: Some(why),
            },
            None,
        ))
    };
    let reply = match ended {
        ParentTurn::Ended { status, reply } if status == "completed" && !reply.is_empty() => reply,
        ParentTurn::Ended { status, .. } if status == "completed" => {
            return not("the reply it woke was empty".to_owned());
        }
        ParentTurn::Ended { status, .. } => {
            return not(format!("the turn it woke {status}: there is no reply"));
        }
        ParentTurn::Gone => {
            return not("the turn it woke has no record (the server restarted?)".to_owned());
        }
        ParentTurn::Running => return None,
    };
    let depth = woken.depth() + 1;
    if depth > limits.follow_up_depth {
        return not(format!(
            "the follow-up depth limit is reached ({} levels, follow-up-depth)",
            limits.follow_up_depth
        ));
    }
    let after = woken
        .carries
        .first()
        .map_or(String::new(), |b| b.task_id.clone());
    let mut turn = Turn::new(
        format!("{}-up", woken.turn_id),
        crate::compose::chat_of(job),
        now,
    );
    turn.forward_mode = job.options.forward;
    turn.carries = vec![Block {
        job_id: job.job_id.clone(),
        task_id: job.task_id.clone(),
        kind: BlockKind::FollowUp { depth },
    }];
    turn.text = Some(describe::follow_up_text(&job.task_id, &after, reply));
    Some((
        Up {
            job_id: job.job_id.clone(),
            task_id: job.task_id.clone(),
            turn: Some(turn.turn_id.clone()),
            not: None,
        },
        Some(turn),
    ))
}
