//! What people and parent agents are told, derived from the typed fields of a job and of
//! the turn that carries it (strikes, `last_error`, the turn's delivery record), so it can
//! never disagree with them: the sentence `atc status` shows, its short form in the list,
//! the text of each block (a result, a notice, a check-in) and of a turn that carries
//! several (a group's, a batch's), the toast, the line a give-up gets. Decisions
//! (`lifecycle`, `turn`, `compose`) record facts; this module alone words them.

use serde::Serialize;

use crate::job::{Job, Origin, Status, TaskOutcome, Watch};
use crate::outcome::{Outcome, failure_kind};
use crate::text::plural;
use crate::time::{Timestamp, age, human};
use crate::turn::{BlockKind, ForwardStatus, Turn, TurnState};

/// Longest note in the `atc status` list (on a terminal it is cut further, to fit).
const BRIEF_CHARS: usize = 400;

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
fn label(job: &Job, kind: BlockKind) -> &'static str {
    match kind {
        BlockKind::CheckIn { .. } => "running",
        BlockKind::Notice => job.watch.shown().as_str(),
        BlockKind::Result => job.outcome.unwrap_or(TaskOutcome::Other).as_str(),
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
    }
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

fn turn_of(head: &str, members: &[(&Job, BlockKind)]) -> String {
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

/// The delivery record of the turn, or an empty one when there is none.
fn delivery_of(turn: Option<&Turn>) -> crate::turn::Delivery {
    turn.map(|t| t.delivery.clone()).unwrap_or_default()
}

/// What went wrong delivering: the turn's own word, else the job's.
fn delivery_error<'a>(job: &'a Job, turn: Option<&'a Turn>) -> &'a str {
    turn.and_then(|t| t.delivery.error.as_deref())
        .or(job.last_error.as_deref())
        .unwrap_or("no detail recorded")
}

/// What the parent was told of a watch that ended without an answer.
fn told(job: &Job, turn: Option<&Turn>) -> String {
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

/// "; check-in in 2m" (or "; check-in on its way") for a watch with `--check-in`.
fn check_in_note(job: &Job, now: Timestamp) -> String {
    if job.check_in {
        return "; check-in on its way".to_owned();
    }
    match crate::lifecycle::next_check_in(job, now) {
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
    if crate::lifecycle::stop_given_up(job) {
        return "; stop given up".to_owned();
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

/// The option a watch's deadline was given with, in the words of whoever made the watch:
/// `--stop-after 20s` on a command line, `stop_after="20s"` through the plugin's tool.
fn stop_option(job: &Job, after: &str) -> String {
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

/// The give-up of the stops of a child (`--stop-after`): [`crate::lifecycle::STOP_TRIES`]
/// did not stop it. The watch goes on.
pub fn give_up_stop(job: &Job) -> GiveUp {
    let t = &job.task_id;
    GiveUp {
        task_id: t.clone(),
        status: format!("{}, stop given up", job.watch.shown()),
        reason: format!(
            "{} did not stop its child{}",
            plural(job.stop_tries, "stop", "stops"),
            kind(job.stop_error.as_deref(), None)
        ),
        with: Vec::new(),
        batch: false,
        next: format!(
            "still watching it (its result comes back when it ends); `atc status {t}` says why; `atc cancel {t} --stop` tries again, or stop it from QwenPaw's console"
        ),
    }
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
pub fn toast_text(turn: &Turn, status: &str) -> String {
    let answers: Vec<_> = turn.answers().collect();
    let what = match answers.as_slice() {
        [] => "A check-in".to_owned(),
        [one] if one.kind == BlockKind::Notice => "A notice".to_owned(),
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

/// What else a turn carries besides `job`'s block: ", with task-2 and task-3".
fn with_others(job: &Job, turn: &Turn) -> String {
    let others: Vec<&str> = turn
        .carries
        .iter()
        .filter(|b| b.job_id != job.job_id)
        .map(|b| b.task_id.as_str())
        .collect();
    match others.as_slice() {
        [] => String::new(),
        [one] => format!(", with {one}"),
        [rest @ .., last] => format!(", with {} and {last}", rest.join(", ")),
    }
}

/// How the turn that carried a cancelled job's block ended up, for that job.
fn cancelled_note(job: &Job, turn: &Turn) -> String {
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

/// How a watch was made, when not by a person: `None` for `cli`.
pub fn origin_note(origin: Origin) -> Option<&'static str> {
    match origin {
        Origin::Cli => None,
        Origin::Plugin => Some("by the model, with watch_agent_task"),
        Origin::Auto => Some("automatically, at the end of the turn that submitted it"),
    }
}

/// What a cancelled watch knows of its child, as of the cancel (atc asks nothing after
/// it): stopped by atc, already finished, or still running when atc last looked.
fn cancelled_child(job: &Job) -> String {
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

fn explain_status(job: &Job, turn: Option<&Turn>) -> Option<String> {
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
        Status::Pending if job.stop_tries > 0 && job.stopped_at.is_none() => format!(
            "{} did not stop the child (last: {}); the next tick that finds it running tries again ({} tries in all)",
            plural(job.stop_tries, "stop", "stops"),
            job.stop_error
                .as_deref()
                .unwrap_or("QwenPaw found nothing running to stop"),
            crate::lifecycle::STOP_TRIES
        ),
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
                None if started => "; the parent's turn is running".to_owned(),
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
            format!("delivered{with}{how}{parent}{forward}{fork}")
        }
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

/// A job or a turn the pass gave up on: one line for a person (`atc tick` prints it on
/// stderr, whatever the verbosity), once, by the tick that gave up. Only typed facts: no
/// server text, no session or user ids.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GiveUp {
    pub task_id: String,
    /// Where the job stands now (`undelivered`, `abandoned`, `lost, notice misrouted`…).
    pub status: String,
    /// Why, in a few words of a fixed vocabulary.
    pub reason: String,
    /// The other tasks of a group's or a batch's one turn, given up with this one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub with: Vec<String>,
    /// That turn was a batch (everything due for the chat), not a group's.
    #[serde(skip)]
    pub batch: bool,
    /// The commands that help.
    pub next: String,
}

impl GiveUp {
    /// `atc: gave up on task-1 (undelivered): why; what to run`
    pub fn line(&self) -> String {
        let with = if self.with.is_empty() {
            String::new()
        } else {
            let whose = if self.batch {
                "the same"
            } else {
                "its group's"
            };
            format!("; {whose} turn also carries {}", self.with.join(", "))
        };
        format!(
            "atc: gave up on {} ({}{with}): {}; {}",
            self.task_id, self.status, self.reason, self.next
        )
    }
}

/// ` (<kind of failure>)`, or the HTTP status when the kind says no more than "other";
/// nothing when neither says anything.
fn kind(error: Option<&str>, http: Option<u16>) -> String {
    match (failure_kind(error.unwrap_or("")), http) {
        (kind, Some(code)) if kind == "other" => format!(" (HTTP {code})"),
        (kind, None) if kind == "other" => String::new(),
        (kind, _) => format!(" ({kind})"),
    }
}

/// The give-up of a watch that ended with too many failed checks.
pub fn give_up_job(job: &Job) -> GiveUp {
    let t = &job.task_id;
    GiveUp {
        task_id: t.clone(),
        status: job.watch.shown().to_string(),
        reason: format!(
            "{} in a row{}",
            plural(job.strikes, "failed check", "failed checks"),
            kind(job.last_error.as_deref(), None)
        ),
        with: Vec::new(),
        batch: false,
        next: format!(
            "`atc status {t}` says more; the task may still run: `atc wait {t}` asks the server"
        ),
    }
}

/// The give-up of a turn (`outcome`: how it was given up), named after the first result or
/// notice it carries, with the others; `None` for a turn of check-ins only (a check-in
/// that cannot be delivered is dropped, not given up). `first` is the job of that block.
pub fn give_up_turn(turn: &Turn, first: Option<&Job>, outcome: Outcome) -> Option<GiveUp> {
    let lead = turn.answers().next()?;
    let t = &lead.task_id;
    let d = &turn.delivery;
    let state = match turn.state {
        TurnState::Refused if lead.kind == BlockKind::Result => "error".to_owned(),
        TurnState::Refused => "undelivered".to_owned(),
        other => other.to_string(),
    };
    let status = match (outcome, lead.kind, first) {
        (Outcome::ForwardFailed, _, Some(job)) => {
            format!("{}, forward failed", crate::status::status(job, Some(turn)))
        }
        (Outcome::ForwardFailed, _, None) => "done, forward failed".to_owned(),
        (_, BlockKind::Notice, Some(job)) => {
            format!("{}, notice {state}", crate::status::status(job, Some(turn)))
        }
        _ => state,
    };
    let (reason, next) = match outcome {
        Outcome::Undelivered => {
            let what = match kind(d.error.as_deref(), None).as_str() {
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
                kind(d.error.as_deref(), d.last_http_status)
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
                turn.chat.channel,
                kind(
                    turn.forward.as_ref().and_then(|f| f.reason.as_deref()),
                    turn.forward.as_ref().and_then(|f| f.last_http_status)
                )
            ),
            format!("`atc status {t}` says more"),
        ),
        other => (other.as_str().replace('_', " "), format!("`atc status {t}` says more")),
    };
    let with = turn
        .answers()
        .filter(|b| b.task_id != *t)
        .map(|b| b.task_id.clone())
        .collect();
    Some(GiveUp {
        task_id: t.clone(),
        status,
        reason,
        with,
        batch: turn.group.is_none(),
        next,
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
            format!("{outcome}{when}{parent}{forward}")
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

#[cfg(test)]
mod tests;
