//! What people and parent agents are told, derived from a job's typed fields (strikes,
//! `last_error`, the delivery record), so it can never disagree with them: the sentence
//! `atc status` shows, its short form in the list, the notice turn of a watch that ended
//! without an answer, and a group's one turn. The one stored note (`Job::note`) records
//! what no field can: how a cancel met a POST.

use crate::job::{ForwardStatus, Job, Outbound, Status, TaskOutcome};
use crate::report::{GiveUp, Outcome, failure_kind};
use crate::text::plural;
use crate::time::{Timestamp, age, human};

/// Longest text a forward sends on to the person (as a delivery's cap).
pub const MAX_FORWARD_CHARS: usize = 8000;

/// Longest note in the `atc status` list (on a terminal it is cut further, to fit).
const BRIEF_CHARS: usize = 400;

/// The text of the one notice turn a watch that ended without an answer posts: QwenPaw's
/// own two framing lines, then what happened and what the parent can do.
pub fn notice_text(job: &Job) -> String {
    let error = job.last_error.as_deref().unwrap_or("no detail");
    let what = match job.status {
        Status::Lost => "atc was watching this task for you, but the QwenPaw server no longer has any record of it (a server restart loses every task record), so its answer cannot be delivered.".to_owned(),
        Status::Expired => format!(
            "atc stopped watching this task: it had not finished {} after it was delegated.",
            human(job.registered_at.elapsed_at(job.updated_at))
        ),
        _ => format!(
            "atc stopped watching this task after {} in a row (last: {error}).",
            plural(job.strikes, "failed check", "failed checks")
        ),
    };
    format!(
        "[TASK_ID: {}]\n[STATUS: {}]\n\n{what} Check on it with check_agent_task, or delegate the work again.",
        job.task_id, job.status
    )
}

/// How a member is counted in a group's header: its child's outcome, or why its watch
/// ended without one.
fn label(job: &Job) -> &'static str {
    if job.status.ends_without_answer() {
        job.status.as_str()
    } else {
        job.outcome.unwrap_or(TaskOutcome::Other).as_str()
    }
}

/// A group's one turn: `[ATC_GROUP: name] 3 tasks: 2 completed, 1 failed`, then each
/// member's block (its rendered result or its notice) in registration order.
pub fn group_text(name: &str, members: &[&Job]) -> String {
    turn_of(&format!("[ATC_GROUP: {name}]"), members, block)
}

/// A batch's one turn, everything due for one chat: `[ATC_RESULTS] 3 tasks: 2 completed,
/// 1 failed`, then each job's block (its rendered result or its notice) in the order given
/// (the order the tasks finished).
pub fn batch_text(members: &[&Job]) -> String {
    turn_of("[ATC_RESULTS]", members, |job| {
        job.final_text.clone().unwrap_or_default()
    })
}

/// The length in characters of [`batch_text`]'s first line, at most: what a batch spends
/// before its blocks.
pub const BATCH_HEADER_MAX: usize = 200;

fn turn_of(head: &str, members: &[&Job], block: impl Fn(&Job) -> String) -> String {
    let mut counts: Vec<(&str, u32)> = Vec::new();
    for job in members {
        let label = label(job);
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
    for job in members {
        text.push_str("\n\n");
        text.push_str(&block(job));
    }
    text
}

/// One member's block in a group's turn: its rendered result, or its notice.
fn block(job: &Job) -> String {
    if job.status.ends_without_answer() {
        notice_text(job)
    } else {
        job.final_text.clone().unwrap_or_default()
    }
}

/// What the parent was told of a watch that ended without an answer.
fn told(job: &Job) -> String {
    let why = job
        .delivery
        .as_ref()
        .and_then(|d| d.error.as_deref())
        .map(|e| format!(" ({e})"))
        .unwrap_or_default();
    match job.notice {
        None if job.options.group.is_some() => String::new(),
        None => "; the parent was not told (--on-no-answer silent)".to_owned(),
        Some(Outbound::Delivering) => format!("; telling the parent{why}"),
        Some(Outbound::Delivered) => "; the parent was told".to_owned(),
        Some(Outbound::Unconfirmed) => format!("; whether the parent was told is unknown{why}"),
        Some(Outbound::Undelivered | Outbound::Misrouted) => {
            format!("; the parent could not be told{why}")
        }
    }
}

/// The text of check-in `job.check_ins + 1` of a child still running (`--check-in`): what
/// it is, how long it has run, and the commands that stop it or the check-ins.
pub fn check_in_text(job: &Job, now: Timestamp) -> String {
    let task = &job.task_id;
    let ran = job
        .started_at
        .map(|at| age(at.elapsed_at(now)))
        .unwrap_or_else(|| "a while".to_owned());
    let n = job.check_ins + 1;
    let max = crate::lifecycle::MAX_CHECK_INS;
    let stop = if job.child_session.is_some() {
        format!("Stop the task: atc cancel {task} --stop")
    } else {
        format!("Stop waiting for it (the task keeps running): atc cancel {task}")
    };
    format!(
        "[TASK_ID: {task}]\n[STATUS: running]\n\nStill running after {ran} (check-in {n} of at most {max}). Its result comes into this chat by itself when it finishes: nothing to do now.\n{stop}\nStop these check-ins: atc cancel {task} --check-ins"
    )
}

/// When the next check-in is due, if one is still to come: `None` without `--check-in`,
/// after the last one, or while one is on its way.
pub fn next_check_in(job: &Job, now: Timestamp) -> Option<Timestamp> {
    let secs = job.options.check_in_secs?;
    if job.status != Status::Pending
        || job.check_in.is_some()
        || job.check_ins >= crate::lifecycle::MAX_CHECK_INS
        || job.stopped_at.is_some()
    {
        return None;
    }
    let since = job.last_check_in_at.or(job.started_at).unwrap_or(now);
    Some(since.saturating_add(std::time::Duration::from_secs(secs)))
}

/// "; check-in in 2m" (or "; check-in on its way") for a watch with `--check-in`.
fn check_in_note(job: &Job, now: Timestamp) -> String {
    if job.check_in.is_some() {
        return "; check-in on its way".to_owned();
    }
    match next_check_in(job, now) {
        Some(at) if at > now => format!("; check-in in {}", age(now.elapsed_at(at))),
        Some(_) => "; check-in due".to_owned(),
        None => String::new(),
    }
}

/// "; stops in 4m" (or "; stop due", "; stopped") for a watch with `--stop-after`.
pub fn deadline(job: &Job, now: Timestamp) -> String {
    let Some(secs) = job.options.stop_after_secs else {
        return String::new();
    };
    if job.stopped_at.is_some() {
        return "; stopped".to_owned();
    }
    let due = job
        .started_at
        .map(|at| at.saturating_add(std::time::Duration::from_secs(secs)));
    match due {
        Some(due) if due > now && job.stop_asked_at.is_none() => {
            format!("; stops in {}", age(now.elapsed_at(due)))
        }
        Some(_) => "; stop due".to_owned(),
        None => String::new(),
    }
}

/// The line a result of a child atc stopped (`--stop-after`) ends with, or `None` when atc
/// did not stop it.
pub fn stop_line(job: &Job) -> Option<String> {
    job.stopped_at?;
    let after = job
        .options
        .stop_after_secs
        .map(|secs| humantime::format_duration(std::time::Duration::from_secs(secs)).to_string())
        .unwrap_or_else(|| "its deadline".to_owned());
    Some(format!(
        "[atc: stopped this task after {after} at the watch's request (--stop-after {after})]"
    ))
}

/// The cause of an error without the request it came from: `GET http://…/task/t:
/// connection refused (is QwenPaw running?)` → `connection refused (is QwenPaw running?)`.
pub fn short_cause(error: &str) -> String {
    let rest = ["GET ", "POST "]
        .iter()
        .find_map(|method| error.strip_prefix(method))
        .and_then(|rest| rest.split_once(": "))
        .map_or(error, |(_, cause)| cause);
    crate::text::one_line(rest, 200)
}

/// The toast a console parent's person gets once the woken turn has ended (`status`: how
/// it ended, `unknown` when its record is gone): what arrived, for which session, and to
/// open the chat (an open page does not show it until then).
pub fn toast_text(job: &Job, status: &str) -> String {
    let n = job.group_tasks.as_ref().map_or(1, Vec::len);
    let what = match n {
        1 if job.status.ends_without_answer() => "A notice".to_owned(),
        1 => "A result".to_owned(),
        n => format!("{n} results"),
    };
    let how = match status {
        "completed" => "the agent answered; open the chat to read it".to_owned(),
        "unknown" => "open the chat to read it".to_owned(),
        other => format!("the agent's turn {other}; open the chat to see it"),
    };
    format!("{what} for {}: {how}", job.target.session_id)
}

/// Where sending the parent's reply on to the person stands, in a sentence (for a console
/// parent: the toast that says something arrived).
pub fn forward(job: &Job) -> Option<String> {
    let f = job.forward.as_ref()?;
    if job.target.channel == "console" {
        let reason = f
            .reason
            .as_deref()
            .map(|r| format!(": {r}"))
            .unwrap_or_default();
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
    let reason = f
        .reason
        .as_deref()
        .map(|r| format!(": {r}"))
        .unwrap_or_default();
    Some(match f.status {
        ForwardStatus::Pending if f.attempt_started_at.is_some() => {
            "the parent's reply is being sent to the person now".to_owned()
        }
        ForwardStatus::Pending => {
            format!("the parent's reply waits to be sent to the person{reason}")
        }
        ForwardStatus::Sent => format!(
            "the parent's reply was sent to the person on {}",
            job.target.channel
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

/// Why the job is where it is, in a sentence, or `None` when its status says it all.
pub fn explain(job: &Job) -> Option<String> {
    if let Some(note) = &job.note {
        return Some(note.clone());
    }
    let error = job.last_error.as_deref().unwrap_or("no detail recorded");
    let delivery = job.delivery.clone().unwrap_or_default();
    let deferrals = delivery.deferrals();
    let fork = match (job.outcome, &job.options.fork_branch) {
        (Some(TaskOutcome::ForkNotFinalized), Some(branch)) => format!(
            "; the child failed to finalize its fork worktree: branch {branch} is not ready to merge"
        ),
        (Some(TaskOutcome::ForkNotFinalized), None) => {
            "; the child failed to finalize its fork worktree: its branch is not ready to merge"
                .to_owned()
        }
        _ => String::new(),
    };
    Some(match job.status {
        Status::Pending if job.strikes > 0 => format!(
            "{} in a row; last: {error}",
            plural(job.strikes, "failed check", "failed checks")
        ),
        Status::Pending => return None,
        Status::Delivering if job.in_flight() => "its result is being posted now".to_owned(),
        Status::Delivering if job.carried_by.is_some() && job.options.group.is_none() => {
            "finished; goes out in one turn with the other results due for its chat (`atc status` shows the batch's carrier)".to_owned()
        }
        Status::Delivering if job.carried_by.is_some() => {
            "finished; goes out in its group's one turn".to_owned()
        }
        Status::Delivering if job.options.group.is_some() && job.group_tasks.is_none() => {
            format!(
                "finished; held until every task of group {} has finished",
                job.options.group.as_deref().unwrap_or_default()
            )
        }
        Status::Delivering if deferrals > 0 => format!(
            "{error}; trying again on the next ticks (until --busy-deadline), {} so far",
            plural(deferrals, "wait", "waits")
        ),
        Status::Delivering => format!("the task finished; its result is being delivered{fork}"),
        Status::Done => {
            let how = if delivery.confirmed.is_some() {
                " (confirmed by reading the parent chat back)"
            } else {
                ""
            };
            let turn = match job.parent_turn.as_deref() {
                Some("unknown") => "; how the parent's turn ended is not known".to_owned(),
                Some(status) => format!("; the parent's turn {status}"),
                None if job.turn_task_id.is_some() => "; the parent's turn is running".to_owned(),
                None => String::new(),
            };
            let forward = forward(job).map(|f| format!("; {f}")).unwrap_or_default();
            format!("delivered{how}{turn}{forward}{fork}")
        }
        Status::Unconfirmed if delivery.read_back_closed_at.is_some() => format!(
            "delivery outcome unknown ({error}); atc read the parent chat back until --busy-deadline and stopped: look in the parent chat; `atc redeliver {}` reads it back once more and posts only if the turn is not there; the text is kept in `final`",
            job.task_id
        ),
        Status::Unconfirmed => format!(
            "delivery outcome unknown ({error}); atc reads the parent chat back and posts again only if it is not there; the text is kept in `final`"
        ),
        Status::Undelivered => format!(
            "not delivered{} ({error}); the text is kept in `final`; `atc redeliver` tries again",
            if deferrals == 0 {
                String::new()
            } else {
                format!(" after {}", plural(deferrals, "wait", "waits"))
            }
        ),
        Status::Misrouted => format!(
            "not delivered: {error}; posting would start a chat nobody reads. Check --session, --user and --channel (watch again to correct them), or `atc redeliver {} --create-session` to start that chat",
            job.task_id
        ),
        Status::Lost => format!(
            "the server has no record of the task ({error}): QwenPaw keeps task records in memory only, so it was restarted, or the task id or base URL {} is wrong{}",
            job.base_url,
            told(job)
        ),
        Status::Abandoned => format!(
            "abandoned after {} in a row; last: {error}{}",
            plural(job.strikes, "failed check", "failed checks"),
            told(job)
        ),
        Status::Expired => format!(
            "still not finished {} after registration (--max-age){}",
            human(job.registered_at.elapsed_at(job.updated_at)),
            told(job)
        ),
        Status::Cancelled if job.in_flight() => {
            "cancelled while its result was being posted; it may already have arrived".to_owned()
        }
        Status::Cancelled if delivery.unknown_since.is_some() => {
            "cancelled while it was unknown whether its result had arrived".to_owned()
        }
        Status::Cancelled => "cancelled; the child task keeps running".to_owned(),
        Status::Error => format!("the server refused the delivery ({error})"),
        Status::Skipped => {
            "the child's answer was empty and the watch said --on-empty skip: nothing was posted"
                .to_owned()
        }
    })
}

/// What the line a tick prints when it gives a job up says: where the job stands, why in
/// a few words (failure kinds only: this line goes to cron mail and the journal, so it
/// carries no server text, session or user ids), and the commands that help.
pub fn give_up(job: &Job, outcome: Outcome) -> GiveUp {
    let t = &job.task_id;
    // ` (<kind of failure>)`, or the HTTP status when the kind says no more than
    // "other"; nothing when neither says anything.
    let kind =
        |error: Option<&str>, http: Option<u16>| match (failure_kind(error.unwrap_or("")), http) {
            (kind, Some(code)) if kind == "other" => format!(" (HTTP {code})"),
            (kind, None) if kind == "other" => String::new(),
            (kind, _) => format!(" ({kind})"),
        };
    let delivery_error = job.delivery.as_ref().and_then(|d| d.error.as_deref());
    let delivery_http = job.delivery.as_ref().and_then(|d| d.last_http_status);
    let status = match job.notice {
        _ if outcome == Outcome::ForwardFailed => format!("{}, forward failed", job.status),
        Some(notice) if job.status.ends_without_answer() && outcome != Outcome::Abandoned => {
            format!("{}, notice {}", job.status, notice.as_str())
        }
        _ => job.status.to_string(),
    };
    let (reason, next) = match outcome {
        Outcome::Abandoned => (
            format!(
                "{} in a row{}",
                plural(job.strikes, "failed check", "failed checks"),
                kind(job.last_error.as_deref(), None)
            ),
            format!(
                "`atc status {t}` says more; the task may still run: `atc wait {t}` asks the server"
            ),
        ),
        Outcome::Undelivered => {
            let what = match kind(delivery_error, None).as_str() {
                " (chat busy)" => "the parent chat stayed busy past --busy-deadline".to_owned(),
                other => format!("the server stayed out of reach past --busy-deadline{other}"),
            };
            (
                what,
                format!("`atc status {t}` says more; `atc redeliver {t}` tries again"),
            )
        }
        Outcome::Misrouted => (
            "the parent chat does not exist, so nothing was posted".to_owned(),
            format!(
                "`atc status {t}` names the chat; watch again with the right --session, --user and --channel, or `atc redeliver {t} --create-session`"
            ),
        ),
        Outcome::Error => (
            format!(
                "the server refused the delivery{}",
                kind(delivery_error, delivery_http)
            ),
            format!("`atc status {t}` shows its answer; `atc redeliver {t}` tries again once that is fixed"),
        ),
        Outcome::ReadBackClosed => (
            "whether the turn arrived is unknown, and its read-back window (--busy-deadline) closed".to_owned(),
            format!(
                "look in the parent chat; `atc status {t}` says more; `atc redeliver {t}` reads it back once more and posts only if the turn is not there"
            ),
        ),
        Outcome::ForwardFailed => (
            format!(
                "the parent's reply was delivered but could not be sent on to the person on {}{}",
                job.target.channel,
                kind(
                    job.forward.as_ref().and_then(|f| f.reason.as_deref()),
                    job.forward.as_ref().and_then(|f| f.last_http_status)
                )
            ),
            format!("`atc status {t}` says more"),
        ),
        other => (other.as_str().replace('_', " "), format!("`atc status {t}` says more")),
    };
    let with = job
        .group_tasks
        .iter()
        .flatten()
        .filter(|task| *task != t)
        .cloned()
        .collect();
    GiveUp {
        task_id: t.clone(),
        status,
        reason,
        with,
        batch: job.carries_batch(),
        next,
    }
}

/// One short phrase for the `atc status` list: what is happening to the job now.
pub fn brief(job: &Job, now: Timestamp) -> String {
    let delivery = job.delivery.clone().unwrap_or_default();
    let outcome = job
        .outcome
        .filter(|o| *o != TaskOutcome::Completed)
        .map(|o| format!("{}; ", o.as_str()))
        .unwrap_or_default();
    let note = match job.status {
        Status::Pending if job.strikes > 0 => format!(
            "{}: {}",
            plural(job.strikes, "failed check", "failed checks"),
            short_cause(job.last_error.as_deref().unwrap_or(""))
        ),
        Status::Pending => match job.started_at {
            None => "not polled yet".to_owned(),
            Some(at) => format!(
                "running for {}{}{}",
                age(at.elapsed_at(now)),
                deadline(job, now),
                check_in_note(job, now)
            ),
        },
        Status::Delivering if job.options.group.is_some() && job.group_tasks.is_none() => {
            let group = job.options.group.as_deref().unwrap_or_default();
            if job.carried_by.is_some() {
                format!("{outcome}in group {group}'s turn")
            } else {
                format!("{outcome}held for group {group}")
            }
        }
        Status::Delivering if job.carried_by.is_some() => format!("{outcome}in a batch's turn"),
        Status::Delivering => match delivery.next_attempt_at {
            _ if job.in_flight() => "posting now".to_owned(),
            Some(at) if at > now => format!(
                "chat busy ×{}; next try in {}",
                delivery.deferrals(),
                age(now.elapsed_at(at))
            ),
            _ if delivery.deferrals() > 0 => {
                format!("{outcome}waiting for the chat ×{}", delivery.deferrals())
            }
            _ => format!("{outcome}finished; delivers on the next tick"),
        },
        Status::Done => {
            let when = match job.delivered_at {
                Some(at) => format!("delivered {} ago", age(at.elapsed_at(now))),
                None => "delivered".to_owned(),
            };
            let turn = job
                .parent_turn
                .as_deref()
                .map(|t| format!("; parent turn {t}"))
                .unwrap_or_default();
            let forward = job
                .forward
                .as_ref()
                .map(|f| match f.status {
                    ForwardStatus::Sent => "; forwarded".to_owned(),
                    other => format!("; forward {}", other.as_str()),
                })
                .unwrap_or_default();
            format!("{outcome}{when}{turn}{forward}")
        }
        status if status.ends_without_answer() => {
            let short = match status {
                Status::Lost => "no record on the server",
                Status::Expired => "not finished within --max-age",
                _ => "too many failed checks",
            };
            let told = match job.notice {
                Some(Outbound::Delivered) => ", parent told",
                Some(Outbound::Delivering) => ", telling parent",
                Some(Outbound::Unconfirmed) => ", parent told?",
                Some(Outbound::Undelivered | Outbound::Misrouted) => ", parent not told",
                None => "",
            };
            format!("{short}{told}")
        }
        _ => explain(job).unwrap_or_default(),
    };
    crate::text::one_line(&note, BRIEF_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::Delivery;

    fn job(status: Status) -> Job {
        Job::sample(status)
    }

    #[test]
    fn explanations_come_from_the_fields() {
        let mut lost = job(Status::Lost);
        lost.last_error = Some("Task not found: task-1".into());
        lost.notice = Some(Outbound::Delivered);
        let said = explain(&lost).unwrap();
        assert!(
            said.contains("Task not found: task-1")
                && said.contains("restarted")
                && said.ends_with("the parent was told"),
            "{said}"
        );

        let mut abandoned = job(Status::Abandoned);
        abandoned.strikes = 90;
        abandoned.last_error = Some("HTTP 502: bad gateway".into());
        assert_eq!(
            explain(&abandoned).unwrap(),
            "abandoned after 90 failed checks in a row; last: HTTP 502: bad gateway; the parent was not told (--on-no-answer silent)"
        );

        let mut undelivered = job(Status::Undelivered);
        undelivered.delivery = Some(Delivery {
            busy: 29,
            unreachable: 1,
            ..Delivery::default()
        });
        undelivered.last_error = Some("parent chat busy (409: x)".into());
        assert!(
            explain(&undelivered)
                .unwrap()
                .starts_with("not delivered after 30 waits")
        );
        undelivered.delivery = Some(Delivery::default());
        assert!(
            explain(&undelivered)
                .unwrap()
                .starts_with("not delivered (parent chat busy (409: x));"),
            "no \"after 0 waits\""
        );

        let mut striking = job(Status::Pending);
        striking.strikes = 1;
        striking.last_error = Some("HTTP 503: down".into());
        assert_eq!(
            brief(&striking, Timestamp::from_unix(1_800_000_000)),
            "1 failed check: HTTP 503: down"
        );
        assert_eq!(explain(&job(Status::Pending)), None);

        let mut cancelled = job(Status::Cancelled);
        assert!(explain(&cancelled).unwrap().contains("keeps running"));
        cancelled.note = Some(
            "cancelled while its result was being posted; the result was delivered anyway".into(),
        );
        assert!(
            explain(&cancelled).unwrap().contains("delivered anyway"),
            "the stored fact wins"
        );

        let mut confirmed = job(Status::Done);
        confirmed.delivery = Some(Delivery {
            confirmed: Some("read-back".into()),
            ..Delivery::default()
        });
        confirmed.parent_turn = Some("completed".into());
        assert_eq!(
            explain(&confirmed).unwrap(),
            "delivered (confirmed by reading the parent chat back); the parent's turn completed"
        );

        let mut fork = job(Status::Done);
        fork.outcome = Some(TaskOutcome::ForkNotFinalized);
        fork.options.fork_branch = Some("fork/a".into());
        assert!(
            explain(&fork)
                .unwrap()
                .contains("branch fork/a is not ready to merge")
        );
    }

    #[test]
    fn briefs_are_short_and_name_the_outcome() {
        let mut lost = job(Status::Lost);
        lost.last_error = Some("x".repeat(200));
        lost.notice = Some(Outbound::Delivered);
        let now = Timestamp::from_unix(1_800_000_000);
        assert_eq!(brief(&lost, now), "no record on the server, parent told");
        let mut done = job(Status::Done);
        done.outcome = Some(TaskOutcome::Failed);
        done.delivered_at = Some(now);
        assert_eq!(brief(&done, now), "failed; delivered 0s ago");
        // The list is cut to the terminal, not here: the whole cause, on one line.
        let mut long = job(Status::Error);
        long.last_error = Some(format!("{}\n{}", "y".repeat(200), "z".repeat(10)));
        let said = brief(&long, now);
        assert!(
            said.contains(&"y".repeat(200)) && !said.contains('\n'),
            "{said}"
        );
        let mut absurd = job(Status::Error);
        absurd.last_error = Some("y".repeat(5000));
        assert_eq!(brief(&absurd, now).chars().count(), BRIEF_CHARS);
    }

    #[test]
    fn notices_frame_like_qwenpaw_and_say_what_to_do() {
        let mut lost = job(Status::Lost);
        lost.task_id = "task-3f9a0c1b2d4e".into();
        let text = notice_text(&lost);
        assert!(
            text.starts_with("[TASK_ID: task-3f9a0c1b2d4e]\n[STATUS: lost]\n\natc was watching"),
            "{text}"
        );
        assert!(text.contains("restart") && text.ends_with("delegate the work again."));
        let mut expired = job(Status::Expired);
        expired.updated_at = expired
            .registered_at
            .saturating_add(std::time::Duration::from_secs(90000));
        assert!(notice_text(&expired).contains("had not finished 1day 1h"));
        let mut abandoned = job(Status::Abandoned);
        abandoned.strikes = 3;
        abandoned.last_error = Some("HTTP 500: x".into());
        assert!(
            notice_text(&abandoned).contains("after 3 failed checks in a row (last: HTTP 500: x)")
        );
    }
}
