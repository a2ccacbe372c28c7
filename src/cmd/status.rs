//! `atc status`: the watched tasks, for people (or as JSON).

use std::fmt::Write as _;

use anyhow::Result;
use serde_json::json;

use crate::describe::{brief, explain};
use crate::job::{Job, Watch};
use crate::job_file::JobFile;
use crate::settings::{self, Output};
use crate::state::Store;
use crate::text::{columns, fit, pad, plural};
use crate::time::{Timestamp, age, human};
use crate::turn::{Turn, TurnState};

/// How many jobs `status` lists without `--all`.
pub const RECENT: usize = 20;

/// The `next poll` line of a pending watch (issue 38): on its back-off (when, and whether
/// for its own time), or by every tick, and why; by the configured `poll-ceiling` (a
/// tick's own flag may differ).
fn next_poll(
    job: &Job,
    beat: &crate::pass::Heartbeat,
    now: Timestamp,
    limits: &crate::lifecycle::Limits,
) -> Option<String> {
    use crate::lifecycle::backoff::{Polling, polling};
    if job.watch != crate::job::Watch::Pending {
        return None;
    }
    let ceiling = limits.poll_ceiling;
    let kicking = beat.kicking(&job.base_url, now, ceiling);
    let said = match polling(job, kicking, beat.last_swept_at, now, limits) {
        Polling::EveryTick(why) => format!("by every tick: {}", why.says()),
        Polling::BackOff { next, own } => {
            let when = if next <= now {
                "by the next tick".to_owned()
            } else {
                format!("at {next} (in {})", age(now.elapsed_at(next)))
            };
            let why = if own {
                "its own time (a check-in, its stop or its expiry)"
            } else {
                "its back-off: atc's plugin kicks when the child's turn ends, so a tick polls it only now and then"
            };
            format!(
                "{when}, for {why}; at the latest {} after the last",
                human(ceiling)
            )
        }
    };
    Some(format!("{:<15} {said}", "next poll"))
}

/// Levels of a delegation tree `status` names above a watch.
const CHAIN_MAX: usize = 16;

/// Lines of a finished job's text shown in the full view.
const FINAL_LINES: usize = 12;

pub fn run(args: &settings::Status, out: Output) -> Result<()> {
    let shown = shown(args, out);
    // After what it shows (or refuses): a typo in a tick's knob never hides the jobs, and
    // is said.
    crate::cmd::warn_config_skipped(&args.config_skipped, out);
    shown
}

/// `atc status T…`: each task's job in full, in the order given (`--json`: the jobs,
/// their turns and give-ups, and each one's chain of watches above it: `chain` for one
/// task, `chains` by task for several, as the list has them).
fn shown_in_full(
    args: &settings::Status,
    store: &Store,
    file: &JobFile,
    now: Timestamp,
    out: Output,
) -> Result<()> {
    let (source, others) = (&args.state.source, &args.other_job_files);
    let mut jobs: Vec<&Job> = Vec::new();
    for task_id in &args.task_ids {
        if file.find(task_id).is_none() {
            crate::cmd::watched_elsewhere(task_id, store, source, others)?;
        }
        jobs.push(&file.jobs[file.watched(task_id, store.path())?]);
    }
    let chain = |job: &Job| -> Vec<String> {
        crate::lifecycle::tree::chain(&file.jobs, job, CHAIN_MAX)
            .iter()
            .map(|j| j.task_id.clone())
            .collect()
    };
    if out.json {
        let (turns, give_ups) = (turns_of(file, &jobs), give_ups_of(file, &jobs));
        let stuck = stuck_of(file, &jobs);
        let skipped = &args.config_skipped;
        let shown = match jobs.as_slice() {
            [job] => json!({ "jobs": jobs, "turns": turns, "give_ups": give_ups,
                "stuck": stuck, "chain": chain(job), "config_skipped": skipped }),
            _ => {
                let chains: serde_json::Map<String, serde_json::Value> = jobs
                    .iter()
                    .map(|job| (job.task_id.clone(), chain(job)))
                    .filter(|(_, above)| !above.is_empty())
                    .map(|(task, above)| (task, json!(above)))
                    .collect();
                json!({ "jobs": jobs, "turns": turns, "give_ups": give_ups,
                    "stuck": stuck, "chains": chains, "config_skipped": skipped })
            }
        };
        return crate::cmd::print_json(&shown);
    }
    let beat = crate::pass::Heartbeat::read(&store.tick_lock_path());
    let turns = crate::lifecycle::Turns::of(&file.turns);
    let texts: Vec<String> = jobs
        .iter()
        .map(|job| {
            let text = full(job, file, &turns, now);
            match next_poll(job, &beat, now, &args.limits) {
                Some(line) => text.replacen("\nregistered ", &format!("\n{line}\nregistered "), 1),
                None => text,
            }
        })
        .collect();
    crate::cmd::emit(&texts.join("\n"))?;
    if !out.quiet
        && jobs
            .iter()
            .any(|job| !crate::lifecycle::settled_job(job, &turns))
        && let Some(line) = no_tick_lately(file, &turns, &beat, now)
    {
        crate::term::say(&line);
    }
    Ok(())
}

fn shown(args: &settings::Status, out: Output) -> Result<()> {
    let store = Store::new(args.state.value.clone());
    let file = store.load()?;
    let now = Timestamp::now();
    if !args.task_ids.is_empty() {
        return shown_in_full(args, &store, &file, now, out);
    }

    // Newest first; the file keeps registrations in order, so ties keep file order reversed.
    let mut jobs: Vec<&Job> = file.jobs.iter().rev().collect();
    jobs.sort_by_key(|job| std::cmp::Reverse(job.registered_at));
    let total = jobs.len();
    if !args.all {
        jobs.truncate(RECENT);
    }
    if out.json {
        let turns = turns_of(&file, &jobs);
        let give_ups = give_ups_of(&file, &jobs);
        let stuck = stuck_of(&file, &jobs);
        // Each watch for a child's chat, with the tasks above it (nearest first): the
        // plugin lets a top parent's model watch a task of its own tree (issue 37).
        let chains: serde_json::Map<String, serde_json::Value> = jobs
            .iter()
            .filter_map(|job| {
                let chain = crate::lifecycle::tree::chain(&file.jobs, job, CHAIN_MAX);
                (!chain.is_empty()).then(|| {
                    let above: Vec<&str> = chain.iter().map(|j| j.task_id.as_str()).collect();
                    (job.task_id.clone(), json!(above))
                })
            })
            .collect();
        return crate::cmd::print_json(
            &json!({ "jobs": jobs, "turns": turns, "give_ups": give_ups, "stuck": stuck,
                "chains": chains, "config_skipped": args.config_skipped }),
        );
    }
    if jobs.is_empty() {
        // Which file was read: a watch made with another job file is in that one.
        let path = store.path().display();
        return crate::cmd::emit(&if store.path().exists() {
            format!(
                "No watches in {path} (an ended one is pruned {} after its last change).\n",
                human(args.limits.keep)
            )
        } else {
            format!("No watches: no job file at {path} yet (`atc watch` starts it).\n")
        });
    }
    if !out.quiet
        && let Some(line) = no_tick_lately(
            &file,
            &crate::lifecycle::Turns::of(&file.turns),
            &crate::pass::Heartbeat::read(&store.tick_lock_path()),
            now,
        )
    {
        crate::term::say(&line);
    }
    let mut text = table(&jobs, &file, now, crate::term::stdout_width());
    if jobs
        .iter()
        .any(|job| crate::heard::unsaid_for(&file, &job.task_id).is_some())
    {
        let _ = writeln!(text, "{UNSAID_NOTE}");
    }
    if jobs.len() < total {
        let _ = writeln!(
            text,
            "({} of {total} jobs shown; --all lists every one)",
            jobs.len()
        );
    }
    crate::cmd::emit(&text)
}

/// The warning `atc status` gives when watches wait and no scheduled tick (a timer's, a
/// person's, a plugin's cadence: kicks come only when a turn ends) has run for longer
/// than `atc doctor` allows, or ever, while a watch has been waiting that long: nothing is
/// polled or posted until one runs, whatever the list says of the children.
fn no_tick_lately(
    file: &JobFile,
    turns: &crate::lifecycle::Turns,
    beat: &crate::pass::Heartbeat,
    now: Timestamp,
) -> Option<String> {
    let waiting = beat.overdue(&file.jobs, turns, now)?;
    let when = match beat.last_scheduled() {
        Some(at) => format!("the last atc tick ran {} ago", age(at.elapsed_at(now))),
        None => "no atc tick has run yet".to_owned(),
    };
    Some(format!(
        "atc: warning: {} and {when}: nothing is polled or posted until one runs; `atc doctor` says why (`atc timer print` sets up a timer)",
        plural(waiting as u64, "watch waits", "watches wait")
    ))
}

/// Under a list that marks a status with `*`.
const UNSAID_NOTE: &str = "* given up by a tick nobody heard (a QwenPaw kick, or a tick whose stderr goes to /dev/null): the next `atc tick` says why; `atc status TASK` shows it now";

/// The give-ups that name `jobs`, in the file's order.
fn give_ups_of<'a>(file: &'a JobFile, jobs: &[&Job]) -> Vec<&'a crate::job_file::GiveUpRecord> {
    file.give_ups
        .iter()
        .filter(|r| jobs.iter().any(|j| r.names(&j.task_id)))
        .collect()
}

/// What of `jobs` waits for a person (`status::stuck`: a block given up, or unconfirmed
/// past its read-back window; a follow-up up a delegation tree among them), for `--json`:
/// the plugin's `callback_task_status` says a follow-up that never reached its chat.
fn stuck_of<'a>(file: &'a JobFile, jobs: &[&Job]) -> Vec<crate::status::Stuck<'a>> {
    crate::status::stuck(&file.jobs, &file.turns)
        .into_iter()
        .filter(|s| jobs.iter().any(|j| j.task_id == s.task_id))
        .collect()
}

/// The turns that carry (or carried) a block of `jobs`, in the file's order.
fn turns_of<'a>(file: &'a JobFile, jobs: &[&Job]) -> Vec<&'a Turn> {
    file.turns
        .iter()
        .filter(|t| jobs.iter().any(|j| t.carries_job(&j.job_id)))
        .collect()
}

/// How the AGENT → SESSION column is shown.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Chat {
    Full,
    /// Cut to [`CHAT_CHARS`], with `…`.
    Short,
    Hidden,
}

/// The AGENT → SESSION column, shortened.
const CHAT_CHARS: usize = 20;

/// Which columns the list shows, and where the note goes.
#[derive(Clone, Copy)]
struct Layout {
    chat: Chat,
    group: bool,
    /// The note on a line of its own under its row, indented.
    note_below: bool,
}

/// One job in the list.
struct Row {
    task: String,
    status: String,
    age: String,
    group: String,
    chat: String,
    note: String,
}

/// The list. Piped, every column and the whole note. On a terminal `width` columns wide,
/// what says least goes first: the chat is shortened, then dropped, then the group; then
/// the note moves to a line of its own under its row; only what still does not fit is
/// cut, with `…`. The GROUP/BATCH column is there when a listed job travels in a group
/// (its name) or a batch (`batch of N`, N the blocks its turn carries); `file` holds the
/// turns.
fn table(jobs: &[&Job], file: &JobFile, now: Timestamp, width: Option<usize>) -> String {
    let travels_in = |job: &Job| match (&job.options.group, file.turn_of(job)) {
        (Some(group), _) => group.clone(),
        (None, Some(turn)) if turn.carries.len() > 1 => {
            format!("batch of {}", turn.carries.len())
        }
        _ => String::new(),
    };
    let grouped = jobs.iter().any(|job| !travels_in(job).is_empty());
    let stuck = crate::status::stuck(&file.jobs, &file.turns);
    // A given-up follow-up first: the job's own delivery landed.
    let note = |job: &Job| {
        let own = brief(job, file.turn_of(job), now);
        match crate::describe::follow_ups_stuck(&job.task_id, &stuck) {
            Some(up) => format!("{up}; {own}"),
            None => own,
        }
    };
    let rows: Vec<Row> = jobs
        .iter()
        .map(|job| Row {
            task: job.task_id.clone(),
            // `*`: given up by a tick nobody heard (the note under the list says so).
            status: match crate::heard::unsaid_for(file, &job.task_id) {
                Some(_) => format!("{}*", crate::status::status(job, file.turn_of(job))),
                None => crate::status::status(job, file.turn_of(job)).to_string(),
            },
            age: age(job.registered_at.elapsed_at(now)),
            group: travels_in(job),
            chat: format!("{} → {}", job.target.agent_id, job.target.session_id),
            note: note(job),
        })
        .collect();
    let full = Layout {
        chat: Chat::Full,
        group: grouped,
        note_below: false,
    };
    let Some(width) = width else {
        return render(&rows, full, None);
    };
    let mut layouts = Vec::new();
    for note_below in [false, true] {
        for (chat, group) in [
            (Chat::Full, grouped),
            (Chat::Short, grouped),
            (Chat::Hidden, grouped),
            (Chat::Hidden, false),
        ] {
            layouts.push(Layout {
                chat,
                group,
                note_below,
            });
        }
    }
    let last = *layouts.last().expect("layouts");
    let chosen = layouts
        .into_iter()
        .find(|layout| {
            render(&rows, *layout, None)
                .lines()
                .all(|line| columns(line) <= width)
        })
        .unwrap_or(last);
    render(&rows, chosen, Some(width))
}

/// The list in `layout`; with a `width`, each line cut to it.
fn render(rows: &[Row], layout: Layout, width: Option<usize>) -> String {
    let chat = |row: &Row| match layout.chat {
        Chat::Short => fit(&row.chat, CHAT_CHARS),
        _ => row.chat.clone(),
    };
    let cells = |row: &Row| {
        let mut cells = vec![row.task.clone(), row.status.clone(), row.age.clone()];
        if layout.group {
            cells.push(row.group.clone());
        }
        if layout.chat != Chat::Hidden {
            cells.push(chat(row));
        }
        if !layout.note_below {
            cells.push(row.note.clone());
        }
        cells
    };
    let mut header = vec!["TASK", "STATUS", "AGE"];
    if layout.group {
        header.push("GROUP/BATCH");
    }
    if layout.chat != Chat::Hidden {
        header.push("AGENT → SESSION");
    }
    if !layout.note_below {
        header.push("NOTE");
    }
    let header: Vec<String> = header.into_iter().map(str::to_owned).collect();
    let table: Vec<Vec<String>> = rows.iter().map(cells).collect();
    let mut widths: Vec<usize> = header.iter().map(|h| columns(h)).collect();
    for cells in &table {
        for (width, cell) in widths.iter_mut().zip(cells) {
            *width = (*width).max(columns(cell));
        }
    }
    let line = |cells: &[String]| {
        let mut line = String::new();
        for (cell, &width) in cells.iter().zip(&widths) {
            line.push_str(&pad(cell, width));
            line.push_str("  ");
        }
        let line = line.trim_end().to_owned();
        match width {
            Some(width) => fit(&line, width),
            None => line,
        }
    };
    let mut out = line(&header);
    out.push('\n');
    for (row, cells) in rows.iter().zip(&table) {
        out.push_str(&line(cells));
        out.push('\n');
        if layout.note_below && !row.note.is_empty() {
            let note = format!("  {}", row.note);
            out.push_str(&match width {
                Some(width) => fit(&note, width),
                None => note,
            });
            out.push('\n');
        }
    }
    out
}

/// Every field of one job and of the turn that carries its block, then the start of its
/// result text (or, with none, of its turn's).
fn full(job: &Job, file: &JobFile, turns: &crate::lifecycle::Turns, now: Timestamp) -> String {
    let turn = file.turn_of(job);
    let mut out = String::new();
    let mut field = |name: &str, value: String| {
        let _ = writeln!(out, "{name:<15} {value}");
    };
    field("task", job.task_id.clone());
    field("status", crate::status::status(job, turn).to_string());
    if let Some(outcome) = job.outcome {
        field("outcome", outcome.as_str().to_owned());
    }
    if let Some(notice) = crate::status::notice(job, turn) {
        field("notice", notice.to_owned());
    }
    if let Some(note) = explain(job, turn) {
        field("note", note);
    }
    if let Some(unsaid) = crate::heard::unsaid_for(file, &job.task_id) {
        field(
            "not yet said",
            format!(
                "given up at {} by a tick nobody heard (a QwenPaw kick, or stderr to /dev/null); the next `atc tick` says: {}",
                unsaid.at, unsaid.line
            ),
        );
    }
    field("job", job.job_id.clone());
    if let Some(how) = crate::describe::origin_note(job) {
        field("watched", format!("{how} ({})", job.origin.as_str()));
    }
    if let Some(at) = job.read_by_parent_at {
        field(
            "parent read",
            format!("{at} (its check_agent_task showed the result)"),
        );
    }
    field("agent", job.target.agent_id.clone());
    if let Some(on) = &job.target.target_agent {
        field("runs on", on.clone());
    }
    if let Some(session) = &job.child_session {
        let on = job
            .child_agent
            .as_deref()
            .map(|a| format!(" of agent '{a}'"))
            .unwrap_or_default();
        let chat = match &job.child_chat_id {
            Some(id) => format!(" (chat {id}{on})"),
            // Looked up only to stop the child; a watch that ended never looks.
            None if job.watch == crate::job::Watch::Pending => {
                " (its chat is looked up when the child is to be stopped)".to_owned()
            }
            None => String::new(),
        };
        field("child session", format!("{session}{chat}"));
    }
    if let Some(secs) = job.options.stop_after_secs {
        let after = human(std::time::Duration::from_secs(secs));
        let when = match (job.stopped_at, job.started_at) {
            (Some(at), _) => format!(" (stopped at {at})"),
            (None, _) if crate::lifecycle::stop_given_up(job) => format!(
                " (given up: {} stops did not stop the child)",
                job.stop_tries
            ),
            // Ended unstopped: the time it was due is no stop that happened.
            (None, _) if job.outcome.is_some() => {
                " (not stopped: the child had finished when a tick looked)".to_owned()
            }
            (None, _) if job.watch != Watch::Pending => {
                " (not stopped: the watch ended first)".to_owned()
            }
            (None, Some(start)) => format!(
                " (at {}{})",
                start.saturating_add(std::time::Duration::from_secs(secs)),
                if job.stop_asked_at.is_some() {
                    "; a stop is due"
                } else {
                    ""
                }
            ),
            (None, None) => " (after the child starts)".to_owned(),
        };
        field("stop after", format!("{after}{when}"));
    }
    if let Some(secs) = job.options.check_in_secs {
        let every = human(std::time::Duration::from_secs(secs));
        let max = crate::lifecycle::MAX_CHECK_INS;
        let next = match (
            crate::status::check_in(job, turn),
            crate::lifecycle::next_check_in(job, now),
        ) {
            (Some(state), _) => format!("; one is {state}"),
            (None, Some(at)) => format!("; next at {at}"),
            (None, None) => String::new(),
        };
        field(
            "check-ins",
            format!(
                "every {every}, {} of at most {max} sent{next}",
                job.check_ins
            ),
        );
    }
    field("delivers to", job.target.describe_chat());
    // A watch for a child's chat (a task a child delegated further): the chain up to the
    // chat that asked, where follow-ups go (issue 37).
    let chain = crate::lifecycle::tree::chain(&file.jobs, job, CHAIN_MAX);
    if let Some(top) = chain.last() {
        let mut said = job.task_id.clone();
        for above in &chain {
            let _ = write!(said, " → {}'s chat", above.task_id);
        }
        let _ = write!(said, " → {}", top.target.describe_chat());
        field("chain", said);
    }
    if let Some(id) = &job.chat_id {
        field("chat id", id.clone());
    }
    field("base url", job.base_url.clone());
    let o = &job.options;
    if let Some(group) = &o.group {
        let members = match turn {
            Some(t) if t.group.is_some() => format!(
                " (its turn carries {})",
                t.carries
                    .iter()
                    .map(|b| b.task_id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => String::new(),
        };
        field("group", format!("{group}{members}"));
    }
    if let Some(t) = turn.filter(|t| t.group.is_none() && t.carries.len() > 1) {
        let tasks: Vec<&str> = t.carries.iter().map(|b| b.task_id.as_str()).collect();
        field(
            "batch",
            format!(
                "its turn carries {} ({} blocks, one turn)",
                tasks.join(", "),
                tasks.len()
            ),
        );
    }
    if let Some(branch) = &o.fork_branch {
        field("fork branch", branch.clone());
    }
    let asked = crate::describe::delivery_flags(o);
    if !asked.is_empty() {
        field("options", asked.join(" "));
    }
    let ago = |t: Timestamp| format!("{t} ({} ago)", age(t.elapsed_at(now)));
    field("registered", ago(job.registered_at));
    // The watch's or its turn's last change: a delivery landing is one.
    field("updated", ago(crate::lifecycle::last_change(job, turns)));
    if let Some(t) = job.started_at {
        field("task started", ago(t));
    }
    if job.strikes > 0 {
        field("strikes", job.strikes.to_string());
    }
    if let Some(error) = &job.last_error {
        field("last error", error.clone());
    }
    if let Some(error) = &job.stop_error {
        field(
            "stop error",
            format!(
                "{error} ({} of {})",
                plural(job.stop_tries, "try", "tries"),
                crate::lifecycle::STOP_TRIES
            ),
        );
    }
    if let Some(t) = turn {
        let what: Vec<String> = t
            .carries
            .iter()
            .map(|b| match b.kind {
                crate::turn::BlockKind::CheckIn { n } => format!("{} (check-in {n})", b.task_id),
                kind => format!("{} ({})", b.task_id, kind.as_str()),
            })
            .collect();
        field(
            "turn",
            format!("{} ({}; carries {})", t.turn_id, t.state, what.join(", ")),
        );
        match &t.chat_id {
            Some(id) if t.chat_archived => field("turn chat id", format!("{id} (archived)")),
            Some(id) => field("turn chat id", id.clone()),
            None => {}
        }
        let d = &t.delivery;
        field("attempts", d.attempts.to_string());
        if d.busy > 0 {
            field("busy", format!("{} (parent chat busy)", d.busy));
        }
        if d.unreachable > 0 {
            field("unreachable", d.unreachable.to_string());
        }
        if let Some(status) = d.last_http_status {
            field("last http", status.to_string());
        }
        if let Some(at) = d.next_attempt_at.filter(|_| t.state.is_on_its_way()) {
            field(
                "next attempt",
                format!("{at} (in {})", age(now.elapsed_at(at))),
            );
        }
        if let Some(at) = d.attempt_started_at {
            field("posting since", ago(at));
        }
        if let Some(at) = d.waiting_since {
            field("waiting since", ago(at));
        }
        if let Some(at) = d
            .unknown_since
            .filter(|_| t.state == TurnState::Unconfirmed && !t.unknown_before_atc())
        {
            field("unknown since", ago(at));
        }
        if let Some(how) = &d.confirmed {
            field("confirmed by", how.clone());
        }
        if let Some(at) = t.delivered_at {
            field("delivered", ago(at));
        }
        if let Some(parent) = &t.turn_task_id {
            let ended = t
                .parent_turn
                .as_deref()
                .map_or(" (running at atc's last look)".to_owned(), |status| {
                    format!(" ({status})")
                });
            field("parent turn", format!("{parent}{ended}"));
        }
        if let Some(up) = &t.up {
            let said = match (&up.turn, &up.not) {
                (Some(id), _) => format!(
                    "the reply it woke went up as a follow-up of {} (turn {id})",
                    up.task_id
                ),
                (None, not) => format!(
                    "the reply it woke stayed in this chat: {}",
                    not.as_deref().unwrap_or("no reason recorded")
                ),
            };
            field("went up", said);
        }
        if let Some(f) = &t.forward {
            let sends = if f.attempts == 1 { "send" } else { "sends" };
            let mut said = format!("{} ({} {sends}", f.status.as_str(), f.attempts);
            if let Some(status) = f.last_http_status {
                let _ = write!(said, ", last http {status}");
            }
            if let Some(at) = f.at {
                let _ = write!(said, ", {}", ago(at));
            }
            said.push(')');
            field("forward", said);
            if let Some(reason) = &f.reason {
                field("forward note", reason.clone());
            }
        }
    }
    let follow_ups: Vec<String> = file
        .turns
        .iter()
        .filter(|t| t.is_follow_up() && t.carries_job(&job.job_id))
        .map(|t| format!("{} ({})", t.turn_id, t.state))
        .collect();
    if !follow_ups.is_empty() {
        let stuck = crate::status::stuck(&file.jobs, &file.turns);
        let hint = crate::describe::follow_ups_waiting(&job.task_id, &stuck);
        field("follow-ups", format!("{}{hint}", follow_ups.join(", ")));
    }
    let shown = match (&job.final_text, turn.and_then(|t| t.text.as_ref())) {
        (Some(text), _) => Some(("result", text)),
        (None, Some(text)) => Some(("turn", text)),
        (None, None) => None,
    };
    if let Some((what, text)) = shown {
        let lines: Vec<&str> = text.lines().collect();
        let _ = writeln!(out, "\n{what} ({} characters):", text.chars().count());
        for line in lines.iter().take(FINAL_LINES) {
            let _ = writeln!(out, "  {line}");
        }
        if lines.len() > FINAL_LINES {
            let _ = writeln!(
                out,
                "  … {} more lines (--json shows all)",
                lines.len() - FINAL_LINES
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::Watch;

    #[test]
    fn a_terminal_cuts_the_note_to_fit_and_a_pipe_does_not() {
        let mut job = Job::sample(Watch::Pending);
        job.strikes = 2;
        job.last_error = Some(
            "GET http://127.0.0.1:8088/api/console/chat/task/task-1: connection refused (is QwenPaw running?)"
                .into(),
        );
        let now = job.registered_at;
        let file = JobFile::default();
        let piped = table(&[&job], &file, now, None);
        let row = piped.lines().nth(1).unwrap();
        assert!(
            row.ends_with("2 failed checks: connection refused (is QwenPaw running?)"),
            "the list shows the cause in its short form: {row}"
        );
        let fitted = table(&[&job], &file, now, Some(60));
        for line in fitted.lines() {
            assert!(columns(line) <= 60, "{line}");
        }
        assert!(
            fitted.contains("\n  2 failed checks: connection refused (is QwenPaw running?)\n"),
            "the columns give way, then the note takes a line of its own, whole:\n{fitted}"
        );
        assert!(!fitted.contains('…'), "{fitted}");
        let narrow = table(&[&job], &file, now, Some(30));
        for line in narrow.lines() {
            assert!(columns(line) <= 30, "{line}");
        }
        assert!(
            narrow.ends_with("…\n"),
            "only what cannot fit is cut:\n{narrow}"
        );
        let wide = table(&[&job], &file, now, Some(300));
        assert_eq!(wide, piped, "nothing is cut when it fits");
    }

    /// Found by hand: a session id in Chinese (an IM chat's) pushed the NOTE column two
    /// terminal columns right of its header, one per CJK character.
    #[test]
    fn columns_line_up_on_a_terminal_whatever_the_script() {
        let mut cjk = Job::sample(Watch::Pending);
        cjk.target.session_id = "会话-1".into();
        let mut latin = Job::sample(Watch::Pending);
        latin.task_id = "task-2".into();
        let now = cjk.registered_at;
        let file = JobFile::default();
        for width in [None, Some(200), Some(70)] {
            let list = table(&[&cjk, &latin], &file, now, width);
            let at = |line: &str, word: &str| columns(&line[..line.find(word).unwrap()]);
            let lines: Vec<&str> = list.lines().collect();
            let note = at(lines[0], "NOTE");
            assert_eq!(at(lines[1], "not polled"), note, "{list}");
            assert_eq!(at(lines[2], "not polled"), note, "{list}");
            if let Some(width) = width {
                assert!(lines.iter().all(|l| columns(l) <= width), "{list}");
            }
        }
    }
}
