//! What the parent agent reads: the text of each block (a result, a notice, a check-in),
//! of a turn that carries several (a group's, a batch's), and what is sent on to the person
//! (the toast, the forward).

use super::*;

/// The text of the one notice turn a watch that ended without an answer posts: QwenPaw's
/// own two framing lines, then what happened and what the parent can do.
pub fn notice_text(job: &Job) -> String {
    let error = job.last_error.as_deref().unwrap_or("no detail");
    let what = match job.watch.shown() {
        // Never seen running: the server never had it (a wrong id, or another server), as
        // far as atc can tell, rather than lost it.
        Status::Lost if job.started_at.is_none() => "atc was asked to watch this task for you, but the QwenPaw server has no record of it and never had one while atc asked (is the task id right, and was it submitted to this server?), so there is no answer to deliver.".to_owned(),
        Status::Lost => "atc was watching this task for you, but the QwenPaw server no longer has any record of it (a server restart loses every task record), so its answer cannot be delivered.".to_owned(),
        Status::Expired => format!(
            "atc stopped watching this task: it had not finished {} after it was delegated.",
            human(job.registered_at.elapsed_at(job.finished_at.unwrap_or(job.updated_at)))
        ),
        _ => format!(
            "atc stopped watching this task after {} in a row (last: {error}).",
            plural(job.strikes, "failed check", "failed checks")
        ),
    };
    format!(
        "[TASK_ID: {}]\n[STATUS: {}]\n\n{what} Check on it with check_agent_task, or delegate the work again.",
        job.task_id,
        job.watch.shown()
    )
}

/// How a block is counted in a turn's header: its child's outcome, why its watch ended
/// without one, or `running` for a check-in.
pub(super) fn label(job: &Job, kind: BlockKind) -> &'static str {
    match kind {
        BlockKind::CheckIn { .. } => "running",
        BlockKind::Notice => job.watch.shown().as_str(),
        BlockKind::Result => job.outcome.unwrap_or(TaskOutcome::Other).as_str(),
        BlockKind::FollowUp { .. } => "follow-up",
    }
}

/// The text of one block: the rendered result byte for byte, the notice of a watch that
/// ended without an answer, or a check-in.
pub fn block_text(job: &Job, kind: BlockKind) -> String {
    match kind {
        BlockKind::Result => job.final_text.clone().unwrap_or_default(),
        BlockKind::Notice => notice_text(job),
        BlockKind::CheckIn { n } => {
            check_in_text(job, n, job.last_check_in_at.unwrap_or(job.updated_at))
        }
        // Its text is fixed in its own turn when it opens (`follow_up_text`); never
        // composed with others.
        BlockKind::FollowUp { .. } => follow_up_line(&job.task_id, "a task of its own"),
    }
}

/// The line a follow-up block starts with after its `[TASK_ID: …]`: stable, for agents
/// and prompts to match.
fn follow_up_line(task: &str, after: &str) -> String {
    format!(
        "[TASK_ID: {task}]\n[atc: follow-up to this task's earlier answer, after {after} finished]"
    )
}

/// A follow-up block (issue 37): the child task `task`'s agent replied again after its own
/// task `after` finished and its result reached the child's chat; that reply goes up to
/// the child's parent, under the child's task id.
pub fn follow_up_text(task: &str, after: &str, reply: &str) -> String {
    let reply = crate::text::truncate_chars(reply.to_owned(), crate::qwenpaw::render::MAX_CHARS);
    format!("{}\n\n{reply}", follow_up_line(task, after))
}

/// A group's one turn: `[ATC_GROUP: name] 3 tasks: 2 completed, 1 failed`, then each
/// member's block (its rendered result or its notice) in registration order.
pub fn group_text(name: &str, members: &[(&Job, BlockKind)]) -> String {
    turn_of(&format!("[ATC_GROUP: {name}]"), members)
}

/// A batch's one turn, everything due for one chat: `[ATC_RESULTS] 3 tasks: 2 completed,
/// 1 running`, then each block in the order given (the order they became due).
pub fn batch_text(members: &[(&Job, BlockKind)]) -> String {
    turn_of("[ATC_RESULTS]", members)
}

/// The length in characters of [`batch_text`]'s first line, at most: what a batch spends
/// before its blocks.
pub const BATCH_HEADER_MAX: usize = 200;

pub(super) fn turn_of(head: &str, members: &[(&Job, BlockKind)]) -> String {
    let mut counts: Vec<(&str, u32)> = Vec::new();
    for (job, kind) in members {
        let label = label(job, *kind);
        match counts.iter_mut().find(|(l, _)| *l == label) {
            Some((_, n)) => *n += 1,
            None => counts.push((label, 1)),
        }
    }
    let counts: Vec<String> = counts.iter().map(|(l, n)| format!("{n} {l}")).collect();
    let mut text = format!(
        "{head} {}: {}",
        plural(members.len() as u64, "task", "tasks"),
        counts.join(", ")
    );
    for (job, kind) in members {
        text.push_str("\n\n");
        text.push_str(&block_text(job, *kind));
    }
    text
}

/// The text of check-in `n` of a child still running (`--check-in`), as of `at`: what it
/// is, how long it has run, and the commands that stop it or the check-ins.
pub fn check_in_text(job: &Job, n: u32, at: Timestamp) -> String {
    let task = &job.task_id;
    let ran = job
        .started_at
        .map(|start| age(start.elapsed_at(at)))
        .unwrap_or_else(|| "a while".to_owned());
    let max = crate::lifecycle::MAX_CHECK_INS;
    // In the words the watch was made with: the plugin's tools, or atc's commands.
    let (stop, keep_waiting, quiet) = match job.origin {
        Origin::Plugin | Origin::Auto => (
            format!("cancel_task_callback(task_id=\"{task}\", stop=True)"),
            format!("cancel_task_callback(task_id=\"{task}\")"),
            format!("cancel_task_callback(task_id=\"{task}\", check_ins=True)"),
        ),
        Origin::Cli => (
            format!("atc cancel {task} --stop"),
            format!("atc cancel {task}"),
            format!("atc cancel {task} --check-ins"),
        ),
    };
    let stop = if job.child_session.is_some() {
        format!("Stop the task: {stop}")
    } else {
        format!("Stop waiting for it (the task keeps running): {keep_waiting}")
    };
    format!(
        "[TASK_ID: {task}]\n[STATUS: running]\n\nStill running after {ran} (check-in {n} of at most {max}). Its result comes into this chat by itself when it finishes: nothing to do now.\n{stop}\nStop these check-ins: {quiet}"
    )
}

/// The option a watch's deadline was given with, in the words of whoever made the watch:
/// `--stop-after 20s` on a command line, `stop_after="20s"` through the plugin's tool.
pub(super) fn stop_option(job: &Job, after: &str) -> String {
    match job.origin {
        Origin::Cli => format!("--stop-after {after}"),
        Origin::Plugin | Origin::Auto => format!("stop_after=\"{after}\""),
    }
}

/// The line a result ends with when the watch asked atc to stop the child
/// (`--stop-after`): atc stopped it, or gave up trying to (and why, in a few words);
/// `None` otherwise.
pub fn stop_line(job: &Job) -> Option<String> {
    let after = job
        .options
        .stop_after_secs
        .map(|secs| human(std::time::Duration::from_secs(secs)));
    if job.stopped_at.is_some() {
        let after = after.unwrap_or_else(|| "its deadline".to_owned());
        return Some(format!(
            "[atc: stopped this task after {after} at the watch's request ({})]",
            stop_option(job, &after)
        ));
    }
    let after = after.filter(|_| crate::lifecycle::stop_given_up(job))?;
    Some(format!(
        "[atc: the watch asked to stop this task after {after} ({}), but {} stops did not stop it{}; it ran to its end]",
        stop_option(job, &after),
        job.stop_tries,
        kind(job.stop_error.as_deref(), None)
    ))
}

/// The toast a console parent's person gets once the woken turn has ended (`status`: how
/// it ended, `unknown` when its record is gone): what arrived, for which session, and to
/// open the chat (an open page does not show it until then).
pub fn toast_text(turn: &Turn, status: &str) -> String {
    let answers: Vec<_> = turn.answers().collect();
    let what = match answers.as_slice() {
        [] => "A check-in".to_owned(),
        [one] if one.kind == BlockKind::Notice => "A notice".to_owned(),
        [one] if one.kind.is_follow_up() => "A follow-up".to_owned(),
        [_] => "A result".to_owned(),
        many => format!("{} results", many.len()),
    };
    let how = match status {
        "completed" => "the agent answered; open the chat to read it".to_owned(),
        "unknown" => "open the chat to read it".to_owned(),
        other => format!("the agent's turn {other}; open the chat to see it"),
    };
    format!("{what} for {}: {how}", turn.chat.session_id)
}

/// Where sending the parent's reply on to the person stands, in a sentence (for a console
/// parent: the toast that says something arrived).
pub fn forward(turn: &Turn) -> Option<String> {
    let f = turn.forward.as_ref()?;
    let reason = f
        .reason
        .as_deref()
        .map(|r| format!(": {r}"))
        .unwrap_or_default();
    if turn.chat.channel == "console" {
        return Some(match f.status {
            ForwardStatus::Pending => format!("the console toast waits to be shown{reason}"),
            ForwardStatus::Sent => "the web console showed a toast".to_owned(),
            ForwardStatus::Skipped => format!("no console toast{reason}"),
            ForwardStatus::Failed => format!("the console toast could not be shown{reason}"),
            ForwardStatus::Unconfirmed => {
                format!("whether the console toast was shown is unknown{reason}")
            }
        });
    }
    Some(match f.status {
        ForwardStatus::Pending if f.attempt_started_at.is_some() => {
            "the parent's reply is being sent to the person now".to_owned()
        }
        ForwardStatus::Pending => {
            format!("the parent's reply waits to be sent to the person{reason}")
        }
        ForwardStatus::Sent => format!(
            "the parent's reply was sent to the person on {}",
            turn.chat.channel
        ),
        ForwardStatus::Skipped => format!("nothing was sent to the person{reason}"),
        ForwardStatus::Failed => {
            format!("the parent's reply could not be sent to the person{reason}")
        }
        ForwardStatus::Unconfirmed => {
            format!("whether the parent's reply reached the person is unknown{reason}")
        }
    })
}
