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
    let mut chat = crate::lifecycle::compose::chat_of(job);
    while up.len() < max {
        let Some(parent) = child_of(jobs, &chat) else {
            break;
        };
        if parent.job_id == job.job_id || up.iter().any(|j| j.job_id == parent.job_id) {
            break;
        }
        chat = crate::lifecycle::compose::chat_of(parent);
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
    // The watch delivers into its own child's chat (a --session that was the child's
    // [SESSION: …]): up is where the reply already is, and going there would wake the
    // child again, level after level. The asking agent never had the result.
    if crate::lifecycle::compose::chat_of(job) == woken.chat && *ended != ParentTurn::Running {
        return not(format!(
            "the watch of {} delivers into its own child's chat (its --session is the child's): its result and this reply went back to the child, not to the agent that asked; `atc wait {}` prints the result",
            job.task_id, job.task_id
        ));
    }
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
        crate::lifecycle::compose::chat_of(job),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::Status;
    use crate::turn::Chat;

    const LIMITS: Limits = Limits {
        max_strikes: 3,
        max_age: std::time::Duration::from_secs(86400),
        busy_retry: std::time::Duration::from_secs(20),
        busy_deadline: std::time::Duration::from_secs(600),
        settle: std::time::Duration::from_secs(30),
        keep: std::time::Duration::from_secs(86400),
        follow_up_depth: 2,
        poll_ceiling: std::time::Duration::from_secs(300),
    };

    fn t(secs: u64) -> Timestamp {
        Timestamp::from_unix(1_800_000_000 + secs)
    }

    /// A finished watch `task` from chat `parent`, its child in `child`, its result
    /// delivered in turn `atc-<job>` (returned beside it).
    fn finished(job_id: &str, task: &str, parent: &str, child: &str) -> (Job, Turn) {
        let mut job = Job::sample(Watch::Finished);
        job.job_id = job_id.into();
        job.task_id = task.into();
        job.target.session_id = parent.into();
        job.child_session = Some(child.into());
        job.shown = Status::Done;
        let mut turn = Turn::new(
            format!("atc-{job_id}"),
            crate::lifecycle::compose::chat_of(&job),
            t(0),
        );
        turn.carries = vec![Block {
            job_id: job_id.into(),
            task_id: task.into(),
            kind: BlockKind::Result,
        }];
        turn.state = TurnState::Delivered;
        turn.turn_task_id = Some("parent-turn".into());
        job.turn = Some(turn.turn_id.clone());
        (job, turn)
    }

    /// A delivered turn into `chat`'s session `session`, carrying `task`'s `kind`.
    fn woken(session: &str, task: &str, kind: BlockKind) -> Turn {
        let chat = Chat {
            base_url: "http://h/api".into(),
            agent_id: "default".into(),
            session_id: session.into(),
            user_id: "u".into(),
            channel: "console".into(),
        };
        let mut turn = Turn::new(format!("atc-w-{task}"), chat, t(0));
        turn.carries = vec![Block {
            job_id: format!("j-{task}"),
            task_id: task.into(),
            kind,
        }];
        turn.state = TurnState::Delivered;
        turn.turn_task_id = Some("woken-turn".into());
        turn
    }

    fn replied(text: &str) -> ParentTurn {
        ParentTurn::Ended {
            status: "completed".into(),
            reply: text.into(),
        }
    }

    #[test]
    fn a_reply_woken_in_a_finished_childs_chat_goes_up_once_under_its_task() {
        let (mut child, result) = finished("jc", "task-c", "s-p", "s-c");
        child.base_url = "http://h/api".into();
        let turns = [result];
        let jobs = [child];
        let g = woken("s-c", "task-g", BlockKind::Result);
        let (up_, opened) =
            up(&jobs, &Turns::of(&turns), &g, &replied("R"), t(9), &LIMITS).unwrap();
        let opened = opened.unwrap();
        assert_eq!(up_.turn.as_deref(), Some("atc-w-task-g-up"));
        assert_eq!(opened.turn_id, "atc-w-task-g-up");
        assert_eq!(opened.chat.session_id, "s-p");
        assert_eq!(opened.carries[0].kind, BlockKind::FollowUp { depth: 1 });
        assert_eq!(opened.carries[0].task_id, "task-c");
        assert_eq!(
            opened.text.as_deref(),
            Some(
                "[TASK_ID: task-c]\n[atc: follow-up to this task's earlier answer, after task-g finished]\n\nR"
            )
        );
        // Followed once: a turn whose end is recorded sends nothing up again.
        let mut again = g.clone();
        again.parent_turn = Some("completed".into());
        assert!(
            up(
                &jobs,
                &Turns::of(&turns),
                &again,
                &replied("R"),
                t(9),
                &LIMITS
            )
            .is_none()
        );
        // Not a child's chat, another server, another agent: nothing.
        for (session, base, agent) in [
            ("s-x", "http://h/api", "default"),
            ("s-c", "http://other/api", "default"),
        ] {
            let mut w = woken(session, "task-g", BlockKind::Result);
            w.chat.base_url = base.into();
            w.chat.agent_id = agent.into();
            assert!(up(&jobs, &Turns::of(&turns), &w, &replied("R"), t(9), &LIMITS).is_none());
        }
        let mut on = jobs.clone();
        on[0].child_agent = Some("QA".into());
        assert!(up(&on, &Turns::of(&turns), &g, &replied("R"), t(9), &LIMITS).is_none());
    }

    /// A watch whose --session was its child's own: its result woke the child, and the
    /// reply stays there, said (up is that very chat; going there would wake the child
    /// again, level after level), however it ended; a turn still running waits.
    #[test]
    fn a_reply_in_the_chat_its_watch_delivers_into_stays_and_says_why() {
        let (mut child, result) = finished("jc", "task-c", "s-c", "s-c");
        child.base_url = "http://h/api".into();
        child.target.user_id = "u".into();
        child.target.channel = "console".into();
        child.target.agent_id = "default".into();
        let jobs = [child];
        let turns = [result.clone()];
        let turns = Turns::of(&turns);
        let own = woken("s-c", "task-c", BlockKind::Result);
        assert_eq!(own.chat, crate::lifecycle::compose::chat_of(&jobs[0]));
        for ended in [replied("R"), replied(""), ParentTurn::Gone] {
            let (u, opened) = up(&jobs, &turns, &own, &ended, t(9), &LIMITS).unwrap();
            assert!(opened.is_none() && u.turn.is_none());
            assert_eq!(
                u.not.as_deref(),
                Some(
                    "the watch of task-c delivers into its own child's chat (its --session is the child's): its result and this reply went back to the child, not to the agent that asked; `atc wait task-c` prints the result"
                )
            );
        }
        assert!(up(&jobs, &turns, &own, &ParentTurn::Running, t(9), &LIMITS).is_none());
        // The same session as another user's chat is another chat: the reply goes up.
        let mut elsewhere = jobs.clone();
        elsewhere[0].target.user_id = "v".into();
        let (u, opened) = up(&elsewhere, &turns, &own, &replied("R"), t(9), &LIMITS).unwrap();
        assert!(u.not.is_none() && opened.is_some());
    }

    #[test]
    fn nothing_goes_up_from_a_child_whose_result_has_not_landed() {
        let (mut child, mut result) = finished("jc", "task-c", "s-p", "s-c");
        child.base_url = "http://h/api".into();
        let g = woken("s-c", "task-g", BlockKind::Result);
        for state in [TurnState::Open, TurnState::Claimed, TurnState::Unconfirmed] {
            result.state = state;
            let turns = [result.clone()];
            assert!(
                up(
                    &[child.clone()],
                    &Turns::of(&turns),
                    &g,
                    &replied("R"),
                    t(9),
                    &LIMITS
                )
                .is_none()
            );
        }
        result.state = TurnState::Delivered;
        child.watch = Watch::Pending;
        let turns = [result];
        assert!(
            up(
                &[child],
                &Turns::of(&turns),
                &g,
                &replied("R"),
                t(9),
                &LIMITS
            )
            .is_none()
        );
    }

    #[test]
    fn an_empty_or_failed_reply_or_the_depth_limit_stays_and_says_why() {
        let (mut child, result) = finished("jc", "task-c", "s-p", "s-c");
        child.base_url = "http://h/api".into();
        let jobs = [child];
        let turns = [result];
        let turns = Turns::of(&turns);
        let stays = |w: &Turn, ended: ParentTurn| {
            let (u, opened) = up(&jobs, &turns, w, &ended, t(9), &LIMITS).unwrap();
            assert!(opened.is_none() && u.turn.is_none());
            u.not.unwrap()
        };
        let g = woken("s-c", "task-g", BlockKind::Result);
        assert!(stays(&g, replied("")).contains("empty"));
        let failed = ParentTurn::Ended {
            status: "failed".into(),
            reply: "x".into(),
        };
        assert!(stays(&g, failed).contains("failed"));
        assert!(stays(&g, ParentTurn::Gone).contains("no record"));
        assert!(up(&jobs, &turns, &g, &ParentTurn::Running, t(9), &LIMITS).is_none());
        let deep = woken("s-c", "task-g", BlockKind::FollowUp { depth: 2 });
        assert!(stays(&deep, replied("R")).contains("depth limit is reached (2 levels"));
        let within = woken("s-c", "task-g", BlockKind::FollowUp { depth: 1 });
        let (_, opened) = up(&jobs, &turns, &within, &replied("R"), t(9), &LIMITS).unwrap();
        assert_eq!(
            opened.unwrap().carries[0].kind,
            BlockKind::FollowUp { depth: 2 }
        );
    }

    #[test]
    fn a_chain_names_each_watch_above_and_ends_at_a_loop() {
        let (c, _) = finished("jc", "task-c", "s-p", "s-c");
        let (g, _) = finished("jg", "task-g", "s-c", "s-g");
        let (mut gg, _) = finished("jgg", "task-gg", "s-g", "s-gg");
        let jobs = [c.clone(), g.clone(), gg.clone()];
        let above: Vec<&str> = chain(&jobs, &gg, 16)
            .iter()
            .map(|j| j.task_id.as_str())
            .collect();
        assert_eq!(above, ["task-g", "task-c"]);
        assert_eq!(chain(&jobs, &gg, 1).len(), 1);
        // A watch whose chat is its own child's: no endless chain.
        gg.child_session = Some("s-g".into());
        let jobs = [gg.clone()];
        assert!(chain(&jobs, &gg, 16).is_empty());
    }
}
