//! What a person reads in `atc status`: the sentence that explains a job, and its short
//! form in the list.

use super::*;

/// Longest note in the `atc status` list (on a terminal it is cut further, to fit).
pub(super) const BRIEF_CHARS: usize = 400;

/// The delivery record of the turn, or an empty one when there is none.
pub(super) fn delivery_of(turn: Option<&Turn>) -> crate::turn::Delivery {
    turn.map(|t| t.delivery.clone()).unwrap_or_default()
}

/// What went wrong delivering: the turn's own word, else the job's.
pub(super) fn delivery_error<'a>(job: &'a Job, turn: Option<&'a Turn>) -> &'a str {
    turn.and_then(|t| t.delivery.error.as_deref())
        .or(job.last_error.as_deref())
        .unwrap_or("no detail recorded")
}

/// What the parent was told of a watch that ended without an answer.
pub(super) fn told(job: &Job, turn: Option<&Turn>) -> String {
    let why = turn
        .and_then(|t| t.delivery.error.as_deref())
        .map(|e| format!(" ({e})"))
        .unwrap_or_default();
    match crate::status::delivery(job, turn).map(|(_, state)| state) {
        None => "; the parent was not told (--on-no-answer silent)".to_owned(),
        Some(TurnState::Open | TurnState::Claimed)
            if turn.is_none() && job.options.group.is_some() =>
        {
            format!(
                "; the parent is told in group {}'s turn",
                job.options.group.as_deref().unwrap_or_default()
            )
        }
        Some(TurnState::Open | TurnState::Claimed) => format!("; telling the parent{why}"),
        Some(TurnState::Delivered) => "; the parent was told".to_owned(),
        Some(TurnState::Unconfirmed) => format!("; whether the parent was told is unknown{why}"),
        Some(TurnState::Undelivered | TurnState::Misrouted | TurnState::Refused) => {
            format!("; the parent could not be told{why}")
        }
    }
}

/// "; check-in in 2m" (or "; check-in on its way") for a watch with `--check-in`.
pub(super) fn check_in_note(job: &Job, now: Timestamp) -> String {
    if job.check_in {
        return "; check-in on its way".to_owned();
    }
    match crate::lifecycle::next_check_in(job, now) {
        Some(at) if at > now => format!("; check-in in {}", age(now.elapsed_at(at))),
        Some(_) => "; check-in due".to_owned(),
        None => String::new(),
    }
}

/// What else a turn carries besides `job`'s block: ", with task-2 and task-3".
pub(super) fn with_others(job: &Job, turn: &Turn) -> String {
    let others = turn.tasks_besides(&job.job_id);
    match others.as_slice() {
        [] => String::new(),
        [one] => format!(", with {one}"),
        [rest @ .., last] => format!(", with {} and {last}", rest.join(", ")),
    }
}

/// How the turn that carried a cancelled job's block ended up, for that job.
pub(super) fn cancelled_note(job: &Job, turn: &Turn) -> String {
    let what = match turn.carries.iter().find(|b| b.job_id == job.job_id) {
        Some(b) if b.kind.is_check_in() => "its check-in",
        _ => "its result",
    };
    let with = with_others(job, turn);
    match turn.state {
        TurnState::Claimed if turn.in_flight() => format!(
            "cancelled while {what} was being posted (turn {}{with}); it may already have arrived",
            turn.turn_id
        ),
        TurnState::Claimed => format!(
            "cancelled after {what}'s turn {} was claimed{with}: that turn still goes out as it is",
            turn.turn_id
        ),
        TurnState::Unconfirmed => format!(
            "cancelled while it was unknown whether {what} had arrived (turn {}{with})",
            turn.turn_id
        ),
        TurnState::Delivered => format!(
            "cancelled while {what} was being posted; it was delivered anyway (turn {}{with})",
            turn.turn_id
        ),
        _ => format!(
            "cancelled while {what} was being posted; it was not delivered (turn {} {}{with})",
            turn.turn_id, turn.state
        ),
    }
}

/// What a cancelled watch knows of its child, as of the cancel (atc asks nothing after
/// it): stopped by atc, already finished, or still running when atc last looked.
pub(super) fn cancelled_child(job: &Job) -> String {
    let t = &job.task_id;
    if job.stopped_at.is_some() {
        return "cancelled; atc stopped the child".to_owned();
    }
    match job.outcome {
        Some(outcome) => format!(
            "cancelled after the child had finished ({}); its result was not delivered",
            outcome.as_str()
        ),
        None if job.started_at.is_some() => format!(
            "cancelled while the child was still running (as of atc's last poll); atc no longer watches it: `atc wait {t}` or check_agent_task says how it ended"
        ),
        None => format!(
            "cancelled before atc polled the child; atc no longer watches it: `atc wait {t}` or check_agent_task says how it ended"
        ),
    }
}

/// Why the job is where it is, in a sentence, or `None` when its status says it all. `turn`
/// is the turn that carries (or carried) its block.
pub fn explain(job: &Job, turn: Option<&Turn>) -> Option<String> {
    if let Some(note) = &job.note {
        // Of unknown outcome, it waits for a person (an import of the seed plugin's
        // `unconfirmed`): what to do follows where it came from.
        if crate::status::status(job, turn) == Status::Unconfirmed
            && let Some(said) = explain_status(job, turn)
        {
            return Some(format!("{note}; {said}"));
        }
        return Some(note.clone());
    }
    let Some(_) = job.read_by_parent_at else {
        return explain_status(job, turn);
    };
    let t = &job.task_id;
    if job.watch == Watch::Skipped {
        let before = if job.final_text.is_some() {
            "before atc posted it"
        } else {
            "before atc saw it finish"
        };
        return Some(format!(
            "the parent read its result itself (check_agent_task) {before}: nothing was posted; `atc redeliver {t}` sends it"
        ));
    }
    let how = if crate::status::status(job, turn) == Status::Done {
        "it was posted anyway"
    } else {
        "that turn goes out as it is"
    };
    let read = format!(
        "the parent read its result itself (check_agent_task) after its turn was claimed: {how}"
    );
    Some(match explain_status(job, turn) {
        Some(said) => format!("{said}; {read}"),
        None => read,
    })
}

pub(super) fn explain_status(job: &Job, turn: Option<&Turn>) -> Option<String> {
    let error = delivery_error(job, turn);
    let delivery = delivery_of(turn);
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
    let several = turn.is_some_and(|t| t.carries.len() > 1);
    Some(match crate::status::status(job, turn) {
        Status::Pending if job.strikes > 0 => format!(
            "{} in a row; last: {}",
            plural(job.strikes, "failed check", "failed checks"),
            job.last_error.as_deref().unwrap_or("no detail recorded")
        ),
        Status::Pending if crate::lifecycle::stop_given_up(job) => format!(
            "atc gave up stopping the child (--stop-after): {} did not stop it (last: {}); still watching it: its result comes back when it ends",
            plural(job.stop_tries, "stop", "stops"),
            job.stop_error.as_deref().unwrap_or("no detail recorded")
        ),
        Status::Pending if job.stop_tries > 0 && job.stopped_at.is_none() => {
            // A session the stop proved another task's child is forgotten: no stop is sent
            // until the watch is given this task's own.
            let next = if job.child_session.is_none() {
                "no stop is sent until the watch is given this task's own session (watch it again with --child-session SID)".to_owned()
            } else {
                format!(
                    "the next tick that finds it running tries again ({} tries in all)",
                    crate::lifecycle::STOP_TRIES
                )
            };
            format!(
                "{} did not stop the child (last: {}); {next}",
                plural(job.stop_tries, "stop", "stops"),
                job.stop_error
                    .as_deref()
                    .unwrap_or("QwenPaw found nothing running to stop")
            )
        }
        Status::Pending => return None,
        Status::Delivering if turn.is_some_and(Turn::in_flight) => {
            "its result is being posted now".to_owned()
        }
        Status::Delivering if turn.is_none() && job.options.group.is_some() => format!(
            "finished; held until every task of group {} has finished",
            job.options.group.as_deref().unwrap_or_default()
        ),
        Status::Delivering if turn.is_some_and(|t| t.group.is_some()) => {
            "finished; goes out in its group's one turn".to_owned()
        }
        Status::Delivering if several => format!(
            "finished; goes out in one turn with the other results due for its chat (turn {}{})",
            turn.map_or("", |t| t.turn_id.as_str()),
            turn.map_or(String::new(), |t| with_others(job, t))
        ),
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
            let parent = turn.and_then(|t| t.parent_turn.as_deref());
            let started = turn.is_some_and(|t| t.turn_task_id.is_some());
            let parent = match parent {
                Some("unknown") => "; how the parent's turn ended is not known".to_owned(),
                Some(status) => format!("; the parent's turn {status}"),
                // What the last tick saw: with no tick since, it may have ended.
                None if started => "; the parent's turn was running at atc's last look".to_owned(),
                None => String::new(),
            };
            let forward = turn
                .and_then(forward)
                .map(|f| format!("; {f}"))
                .unwrap_or_default();
            let with = turn.map_or(String::new(), |t| with_others(job, t));
            let with = if with.is_empty() {
                with
            } else {
                format!(" in one turn{with}")
            };
            // Its --session was the child's: the agent that asked never had it.
            let own = if job.into_own_child_chat() {
                format!(
                    " into its own child's chat (its --session is the child's session): the agent that asked never had it; `atc wait {}` prints the result",
                    job.task_id
                )
            } else {
                String::new()
            };
            // Found by hand: a chat archived after the watch got its result without a
            // word; a person who looked for it in the console's list found no chat.
            let archived = if turn.is_some_and(|t| t.chat_archived) {
                "; its chat was archived when it was posted (QwenPaw's console lists archived chats apart: unarchive it there to have it back among the others)"
            } else {
                ""
            };
            format!("delivered{own}{with}{how}{archived}{parent}{forward}{fork}")
        }
        Status::Unconfirmed if turn.is_some_and(Turn::unknown_before_atc) => format!(
            "delivery outcome unknown ({error}): look in the parent chat; `atc redeliver {}` posts it again if it never arrived; the text is kept in the turn",
            job.task_id
        ),
        Status::Unconfirmed if delivery.read_back_closed_at.is_some() => format!(
            "delivery outcome unknown ({error}); atc read the parent chat back until --busy-deadline and stopped: look in the parent chat; `atc redeliver {}` reads it back once more and posts only if the turn is not there; the text is kept in the turn",
            job.task_id
        ),
        Status::Unconfirmed => format!(
            "delivery outcome unknown ({error}); atc reads the parent chat back and posts again only if it is not there; the text is kept in the turn"
        ),
        Status::Undelivered => format!(
            "not delivered{} ({error}); the text is kept in `final`; `atc redeliver` tries again",
            if deferrals == 0 {
                String::new()
            } else {
                format!(" after {}", plural(deferrals, "wait", "waits"))
            }
        ),
        // The watch found the chat: it was deleted since, not named wrong.
        Status::Misrouted if job.chat_id.is_some() => format!(
            "not delivered: {error}; the chat {} was there when the task was watched, so it was deleted since, and posting would start a new chat nobody reads. `atc redeliver {} --create-session` starts that chat anew, or watch again for another chat",
            job.chat_id.as_deref().unwrap_or_default(),
            job.task_id
        ),
        Status::Misrouted => format!(
            "not delivered: {error}; posting would start a chat nobody reads. Check --session, --user and --channel (watch again to correct them), or `atc redeliver {} --create-session` to start that chat",
            job.task_id
        ),
        Status::Lost => format!(
            "the server has no record of the task ({}): QwenPaw keeps task records in memory only, so it was restarted, or the task id or base URL {} is wrong{}",
            job.last_error.as_deref().unwrap_or("no detail recorded"),
            job.base_url,
            told(job, turn)
        ),
        Status::Abandoned => format!(
            "abandoned after {} in a row; last: {}{}",
            plural(job.strikes, "failed check", "failed checks"),
            job.last_error.as_deref().unwrap_or("no detail recorded"),
            told(job, turn)
        ),
        Status::Expired => format!(
            "still not finished {} after registration (--max-age){}",
            human(
                job.registered_at
                    .elapsed_at(job.finished_at.unwrap_or(job.updated_at))
            ),
            told(job, turn)
        ),
        Status::Cancelled => match turn {
            Some(t) if t.carries_job(&job.job_id) => cancelled_note(job, t),
            _ => cancelled_child(job),
        },
        Status::Error => format!("the server refused the delivery ({error})"),
        Status::Skipped => {
            "the child's answer was empty and the watch said --on-empty skip: nothing was posted"
                .to_owned()
        }
    })
}

/// One short phrase for the `atc status` list: what is happening to the job now. `turn`
/// is the turn that carries its block.
pub fn brief(job: &Job, turn: Option<&Turn>, now: Timestamp) -> String {
    let delivery = delivery_of(turn);
    // How the child ended, when not completed: it is the child's, not the watch's.
    let outcome = match job.outcome {
        None | Some(TaskOutcome::Completed) => String::new(),
        Some(TaskOutcome::Cancelled) if job.stopped_at.is_some() => {
            "child stopped by atc; ".to_owned()
        }
        Some(TaskOutcome::ForkNotFinalized) => "fork not finalized; ".to_owned(),
        Some(other) => format!("child {}; ", other.as_str()),
    };
    let note = match crate::status::status(job, turn) {
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
        Status::Delivering if job.options.group.is_some() && turn.is_none() => format!(
            "{outcome}held for group {}",
            job.options.group.as_deref().unwrap_or_default()
        ),
        Status::Delivering if turn.is_some_and(|t| t.group.is_some() && !t.in_flight()) => format!(
            "{outcome}in group {}'s turn",
            job.options.group.as_deref().unwrap_or_default()
        ),
        Status::Delivering
            if turn.is_some_and(|t| t.carries.len() > 1 && !t.in_flight())
                && delivery.deferrals() == 0 =>
        {
            format!("{outcome}in a batch's turn")
        }
        Status::Delivering => match delivery.next_attempt_at {
            _ if turn.is_some_and(Turn::in_flight) => "posting now".to_owned(),
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
            let when = match turn.and_then(|t| t.delivered_at) {
                Some(at) => format!("delivered {} ago", age(at.elapsed_at(now))),
                None => "delivered".to_owned(),
            };
            let parent = turn
                .and_then(|t| t.parent_turn.as_deref())
                .map(|t| format!("; parent turn {t}"))
                .unwrap_or_default();
            // A console parent's forward is a toast; an IM parent's, its reply sent on.
            let console = turn.is_some_and(|t| t.chat.channel == "console");
            let forward = turn
                .and_then(|t| t.forward.as_ref())
                .map(|f| match (console, f.status) {
                    (true, ForwardStatus::Sent) => "; toast shown".to_owned(),
                    (true, other) => format!("; toast {}", other.as_str()),
                    (false, ForwardStatus::Sent) => "; reply forwarded".to_owned(),
                    (false, other) => format!("; forward {}", other.as_str()),
                })
                .unwrap_or_default();
            let own = if job.into_own_child_chat() {
                " into its own child's chat"
            } else if turn.is_some_and(|t| t.chat_archived) {
                " into an archived chat"
            } else {
                ""
            };
            format!("{outcome}{when}{own}{parent}{forward}")
        }
        status if status.watch().ends_without_answer() => {
            let short = match status {
                Status::Lost => "no record on the server",
                Status::Expired => "not finished within --max-age",
                _ => "too many failed checks",
            };
            let told = match crate::status::delivery(job, turn).map(|(_, state)| state) {
                Some(TurnState::Delivered) => ", parent told",
                Some(TurnState::Open | TurnState::Claimed)
                    if turn.is_none() && job.options.group.is_some() =>
                {
                    ", held for its group"
                }
                Some(TurnState::Open | TurnState::Claimed) => ", telling parent",
                Some(TurnState::Unconfirmed) => ", parent told?",
                Some(TurnState::Undelivered | TurnState::Misrouted | TurnState::Refused) => {
                    ", parent not told"
                }
                None => "",
            };
            format!("{short}{told}")
        }
        _ => explain(job, turn).unwrap_or_default(),
    };
    let note = match job.origin {
        Origin::Auto if note.is_empty() => "watched automatically".to_owned(),
        Origin::Auto => format!("{note} (watched automatically)"),
        _ => note,
    };
    crate::text::one_line(&note, BRIEF_CHARS)
}

/// What the list's note says first of a task whose follow-ups up a delegation tree (issue
/// 37) wait for a person (`status::stuck`): `follow-up misrouted`, `2 follow-ups given
/// up`. `None` when none does.
pub fn follow_ups_stuck(task_id: &str, stuck: &[crate::status::Stuck]) -> Option<String> {
    match follow_ups_of(task_id, stuck).as_slice() {
        [] => None,
        [one] => Some(format!("follow-up {}", one.what)),
        many => Some(format!("{} follow-ups given up", many.len())),
    }
}

/// What the `follow-ups` line of `atc status T` adds when some of them wait for a person:
/// what to do. Empty when none does.
pub fn follow_ups_waiting(task_id: &str, stuck: &[crate::status::Stuck]) -> String {
    match follow_ups_of(task_id, stuck).len() {
        0 => String::new(),
        1 => format!("; 1 waits for a person: `atc redeliver {task_id}` sends it again"),
        n => format!("; {n} wait for a person: `atc redeliver {task_id}` sends them again"),
    }
}

/// `task_id`'s follow-ups among what waits for a person.
fn follow_ups_of<'a, 's>(
    task_id: &str,
    stuck: &'s [crate::status::Stuck<'a>],
) -> Vec<&'s crate::status::Stuck<'a>> {
    stuck
        .iter()
        .filter(|s| s.follow_up && s.task_id == task_id)
        .collect()
}

/// The command that watches `job`'s task again as its watch was made, for the chat it
/// records, with `more` (further flags) at its end: `atc watch T --session S --user U
/// --stop-after 1h` (a flag at its default left out; not `--group`, whose turn may have
/// gone out), each value quoted for a shell when it needs it. What a hint to "watch it
/// again" gives a person, who would otherwise be told "no session to deliver to", or
/// drop the options the watch had (a re-watch names its whole watch).
pub fn watch_again(job: &Job, more: &str) -> String {
    use crate::settings::defaults;
    let t = &job.target;
    let o = &job.options;
    let word = |value: &str| format!(" {}", crate::text::shell_word(value));
    let mut line = format!(
        "atc watch {} --session {}",
        job.task_id,
        crate::text::shell_word(&t.session_id)
    );
    let secs = |s: u64| word(&crate::time::human(std::time::Duration::from_secs(s)));
    let flags: [(&str, Option<String>); 8] = [
        (
            "--user",
            (t.user_id != defaults::USER).then(|| word(&t.user_id)),
        ),
        (
            "--channel",
            (t.channel != defaults::CHANNEL).then(|| word(&t.channel)),
        ),
        (
            "--agent",
            (t.agent_id != defaults::AGENT).then(|| word(&t.agent_id)),
        ),
        ("--target-agent", t.target_agent.as_deref().map(word)),
        ("--child-session", job.child_session.as_deref().map(word)),
        ("--stop-after", o.stop_after_secs.map(secs)),
        ("--check-in", o.check_in_secs.map(secs)),
        ("--fork-branch", o.fork_branch.as_deref().map(word)),
    ];
    for (flag, value) in flags {
        if let Some(value) = value {
            line.push_str(&format!(" {flag}{value}"));
        }
    }
    for flag in delivery_flags(o) {
        line.push(' ');
        line.push_str(flag);
    }
    if o.allow_insecure_remote {
        line.push_str(" --allow-insecure-remote");
    }
    if !more.is_empty() {
        line.push(' ');
        line.push_str(more);
    }
    line
}

/// The delivery options a watch asked for, as their flags (those at their default left
/// out): what `atc status T` lists as its options, and a watch-again command repeats.
pub fn delivery_flags(o: &crate::job::Options) -> Vec<&'static str> {
    use crate::job::{ForwardMode, OnEmpty, OnNoAnswer};
    let mut asked = Vec::new();
    if o.create_session {
        asked.push("--create-session");
    }
    if o.on_no_answer == OnNoAnswer::Silent {
        asked.push("--on-no-answer silent");
    }
    if o.on_empty == OnEmpty::Skip {
        asked.push("--on-empty skip");
    }
    if o.forward == ForwardMode::Never {
        asked.push("--forward never");
    }
    asked
}
