//! `atc watch`: record tasks and exactly where their results must go. The parent chat is
//! looked up first: a (session, user, channel) QwenPaw does not know would get a new chat
//! nobody reads, so it is refused unless `--create-session` says so.

use std::time::Duration;

use anyhow::Result;

use crate::cmd::{emit, print_json};
use crate::exit::{Exit, Failure};
use crate::fail;
use crate::ids::new_job_id;
use crate::job::{Job, Origin, Status};
use crate::lifecycle::compose;
use crate::lifecycle::{self, LeftAlone, Registered, WatchRefused, WatchRequest};
use crate::qwenpaw::{Client, chat, task};
use crate::report::LogEntry;
use crate::settings::{Output, Watch};
use crate::state::Store;
use crate::time::Timestamp;
use crate::turn::Turn;

/// The chat check must not make `watch` slow when the server is away.
const CHAT_CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// What the server said about the parent chat.
enum ChatCheck {
    Found {
        chat_id: String,
        /// A person archived it: the result goes there all the same.
        archived: bool,
    },
    /// Absent, and `--create-session` allows that.
    New,
    /// The server could not be asked; the tick checks again before delivering.
    Skipped { why: String },
}

pub fn run(watch: &Watch, out: Output) -> Result<()> {
    let auto = watch.origin == Origin::Auto;
    if auto && !watch.auto_watch.value {
        // Asked by the plugin at a turn's end, while auto-watch is off: nothing at all.
        return auto_watch_off(watch, out);
    }
    let store = Store::new(watch.state.value.clone());
    // A re-watch nobody named a server for stays on the one its watch recorded (found by
    // hand: `atc watch T --check-in 5m` from a shell whose base URL was the default moved
    // a watch of a second server to a port where nothing runs).
    let chosen = crate::settings::base_for_watched(&watch.base_url, || {
        crate::cmd::recorded_base(&store, &watch.task_ids)
    });
    let rebased;
    let watch = if chosen == watch.base_url {
        watch
    } else {
        rebased = Watch {
            base_url: chosen,
            ..watch.clone()
        };
        &rebased
    };
    let target = watch.target();
    let base_url = &watch.base_url.value;
    if out.verbose > 0 {
        crate::term::say(&format!(
            "atc: QwenPaw API {base_url} (from {})",
            watch.base_url.source
        ));
    }
    let check = check_chat(watch)?;
    let chat_id = match &check {
        ChatCheck::Found { chat_id, .. } => Some(chat_id.clone()),
        ChatCheck::New | ChatCheck::Skipped { .. } => None,
    };
    // A server that could not be asked about the chat is not asked about the tasks either.
    let unchecked = match &check {
        ChatCheck::Skipped { .. } => Vec::new(),
        _ if watch.check_tasks => check_tasks(watch, &store)?,
        _ => Vec::new(),
    };

    let now = Timestamp::now();
    let request = WatchRequest {
        task_ids: watch.task_ids.clone(),
        target: target.clone(),
        base_url: base_url.clone(),
        options: watch.options.clone(),
        chat_id,
        child_sessions: watch.child_sessions.clone(),
        target_agents: watch.target_agents.clone(),
        origin: watch.origin,
    };
    let (jobs, left_alone, messages, events) = store.update(|file| {
        // The group's name already went out to this chat: a watch it takes is its next
        // round (`lifecycle::watch` refuses a late member while that turn may be posted).
        let next_round = request.options.group.clone().filter(|g| {
            let chat = request.target.chat_key(&request.base_url);
            !lifecycle::group_turns(&file.turns, g, chat).is_empty()
        });
        let watched = lifecycle::watch(&mut file.jobs, &file.turns, &request, new_job_id, now);
        let registered = match watched {
            Ok(registered) => registered,
            Err(WatchRefused::GroupWentOut { group }) => fail!(
                Exit::Refused,
                "group {group:?} of {} already went out (or is going out right now); give these tasks another --group name",
                target.describe_chat()
            ),
            Err(WatchRefused::OtherChildSession {
                task_id,
                known,
                asked,
            }) => fail!(
                Exit::Refused,
                "{task_id}'s child session is {known} (QwenPaw's [SESSION: …] line, or an earlier watch's); --child-session {asked} names another child: watch without --child-session, or pass the session QwenPaw printed for {task_id}"
            ),
            Err(WatchRefused::OwnChildSession { task_id, session }) => fail!(
                Exit::Refused,
                "--session {session} is {task_id}'s own child session (QwenPaw's [SESSION: …] line for it): its result would go back to the child, not to the chat that asked; pass the Session ID the asking agent's prompt shows"
            ),
            Err(WatchRefused::ChildSessionTaken {
                task_id,
                session,
                of,
            }) => fail!(
                Exit::Refused,
                "child session {session} is the child of {of}, which atc watches on the same agent: {task_id} runs in a session of its own (pass the [SESSION: …] line QwenPaw printed for {task_id}, or none)"
            ),
            Err(WatchRefused::Task { job, turn, was }) => {
                return Err(refusal(&job.task_id, &job, turn.as_deref(), was).into());
            }
        };
        // A job replaced, re-targeted or re-optioned leaves the open turn it was in.
        compose::tidy(file, now, &watch.limits);
        let mut jobs = Vec::new();
        let mut left_alone = Vec::new();
        let mut messages = Vec::new();
        let mut events = Vec::new();
        let next_round = next_round
            .filter(|_| registered.iter().any(|r| matches!(r, Registered::New(_))))
            .map(|group| {
                format!(
                    "Group {group} already went out to {}: these tasks are its next round, and come back together as a message of their own.",
                    target.describe_chat()
                )
            });
        for registered in registered {
            let (message, event) = match &registered {
                Registered::LeftAlone { job, why } => {
                    let why = match why {
                        LeftAlone::OtherChat => format!(
                            "it is watched for {} (agent '{}')",
                            job.target.describe_chat(),
                            job.target.agent_id
                        ),
                        LeftAlone::Ended(status) => format!("its watch already ended ({status})"),
                    };
                    messages.push(format!("Left {} alone: {why}.", job.task_id));
                    left_alone.push(serde_json::json!({
                        "task_id": job.task_id,
                        "reason": why,
                        "status": crate::status::status(job, file.turn_of(job)),
                    }));
                    continue;
                }
                Registered::New(job) => (
                    format!(
                        "Watching {}{}; {}",
                        subject(job),
                        crate::describe::origin_note(job)
                            .map(|how| format!(" ({how})"))
                            .unwrap_or_default(),
                        destination(job)
                    ),
                    Some("registered"),
                ),
                Registered::AlreadyWatching(job) => (
                    format!(
                        "Already watching {} (job {}); {}",
                        subject(job),
                        job.job_id,
                        destination(job)
                    ),
                    None,
                ),
                Registered::Updated {
                    job,
                    applied,
                    not_applied,
                } => {
                    let mut message = format!("Already watching {} (job {})", subject(job), job.job_id);
                    if !applied.is_empty() {
                        // What is on now, then what is off ("no --check-in"): one list
                        // mixing them would read as all off.
                        let (off, on): (Vec<&str>, Vec<&str>) =
                            applied.iter().partition(|f| f.starts_with("no "));
                        let off: Vec<String> = off.iter().map(|f| f[3..].to_owned()).collect();
                        // A duration is said with its value: a changed deadline reads as one.
                        let on: Vec<String> = on.iter().map(|f| with_value(f, job)).collect();
                        let said: Vec<String> = [("with", on), ("without", off)]
                            .into_iter()
                            .filter(|(_, flags)| !flags.is_empty())
                            .map(|(how, flags)| format!("{how} {}", flags.join(", ")))
                            .collect();
                        message.push_str(&format!("; now {}", said.join(" and ")));
                    }
                    if !not_applied.is_empty() {
                        let why = if not_applied
                            .iter()
                            .any(|f| *f == "--create-session" || *f == "--forward")
                        {
                            "its turn was already claimed"
                        } else {
                            "its result is already rendered"
                        };
                        message.push_str(&format!(
                            "; not applied: {} ({why})",
                            not_applied.join(", ")
                        ));
                    }
                    message.push_str(&format!("; {}", destination(job)));
                    (message, Some("updated"))
                }
                Registered::Kept {
                    old,
                    job,
                    not_applied,
                } => {
                    let moved = changes(old, job);
                    let moved = if moved.is_empty() {
                        String::new()
                    } else {
                        format!(" ({moved})")
                    };
                    let kept = if not_applied.is_empty() {
                        String::new()
                    } else {
                        let said: Vec<String> = not_applied
                            .iter()
                            .map(|flag| match *flag {
                                "--target-agent" => format!(
                                    "--target-agent (its result came from agent {})",
                                    job.target.poll_agent()
                                ),
                                other => format!("{other} (its result is already rendered)"),
                            })
                            .collect();
                        format!("; not applied: {}", said.join(", "))
                    };
                    (
                        format!(
                            "Watching {} again{moved}: its result, already received, is kept and not asked for again{kept}; {}",
                            subject(job),
                            destination(job)
                        ),
                        Some("retargeted"),
                    )
                }
                Registered::Retargeted { old, job } => (
                    // Where, in full: "there" read as the old chat when only the group
                    // or the agent changed.
                    format!(
                        "Re-targeted {}: {}; {}",
                        subject(job),
                        changes(old, job),
                        destination(job)
                    ),
                    Some("retargeted"),
                ),
                Registered::Rewatched { was, job } => (
                    format!(
                        "Watching {} again (the previous watch ended {was}); {}",
                        subject(job),
                        destination(job)
                    ),
                    Some("rewatched"),
                ),
            };
            let job = file.shown(registered.job());
            if let Some(event) = event {
                let mut entry = LogEntry::of(event, &job, now);
                if matches!(registered, Registered::New(_)) || job.origin != Origin::Cli {
                    entry.reason = crate::describe::origin_note(&job).map(str::to_owned);
                }
                events.push(entry);
            }
            jobs.push(job);
            messages.push(message);
        }
        messages.extend(next_round);
        Ok((jobs, left_alone, messages, events))
    })?;
    store.log(&events)?;

    if out.json {
        match jobs.as_slice() {
            _ if auto => print_json(&serde_json::json!({
                "auto_watch": {"on": true, "from": watch.auto_watch.source.to_string()},
                "jobs": jobs,
                "left_alone": left_alone,
            }))?,
            [one] => print_json(one)?,
            all => print_json(&serde_json::json!({ "jobs": all }))?,
        }
    } else if !out.quiet {
        emit(&format!("{}\n", messages.join("\n")))?;
    }
    if !out.quiet {
        for line in &watch.config_skipped {
            crate::term::say(&format!(
                "atc: warning: {line}. The watch is recorded all the same; every atc tick refuses that file until it is fixed"
            ));
        }
        for (task_id, why) in &unchecked {
            crate::term::say(&format!(
                "atc: warning: could not check that the server has {task_id} ({why}); watching it anyway: the next atc tick polls it"
            ));
        }
        if !jobs.is_empty() {
            // Who ticks this file: the plugin's cadence, and the ticks' heartbeat.
            let now = Timestamp::now();
            let cadence = crate::pass::Cadence::read(&store.cadence_path(), now);
            let beat = crate::pass::Heartbeat::read(&store.tick_lock_path());
            if let Some(line) = unticked(watch, &store, cadence.is_some(), &beat, now) {
                crate::term::say(&line);
            } else if crate::term::stderr_is_terminal()
                && cadence.is_none()
                && beat.last_tick_at.is_none()
            {
                // A person's first watch: "on the next atc tick" promises a tick.
                crate::term::say(
                    "atc: note: no atc tick has read this job file yet, so nothing polls it until one does: load atc's QwenPaw plugin (`atc qwenpaw install`: it ticks while QwenPaw runs), install a timer (`atc timer print`), or run `atc tick` yourself",
                );
            }
        }
    }
    match check {
        ChatCheck::Skipped { why } if !out.quiet => crate::term::say(&format!(
            "atc: warning: could not check that the parent chat exists ({why}); the chat check was skipped (and the task check): the next atc tick checks again before delivering"
        )),
        // Found by hand: a result went into a chat the person had archived, and the
        // agent answered there, out of the console's list, without a word.
        ChatCheck::Found { archived: true, .. } if !out.quiet => crate::term::say(&format!(
            "atc: note: the chat of {} is archived: the result goes there all the same and its agent answers there, where QwenPaw's console lists it under archived chats (unarchive it to have it back among the others)",
            target.describe_chat()
        )),
        ChatCheck::New if out.verbose > 0 => crate::term::say(&format!(
            "atc: {base_url} has no chat with {} yet; the first delivery starts it (--create-session)",
            target.describe_chat()
        )),
        _ => {}
    }
    Ok(())
}

/// `watch --origin auto` while auto-watch is off: no network, no job file; says so.
fn auto_watch_off(watch: &Watch, out: Output) -> Result<()> {
    let from = watch.auto_watch.source.to_string();
    if out.json {
        print_json(&serde_json::json!({
            "auto_watch": {"on": false, "from": from},
            "jobs": [],
            "left_alone": [],
        }))
    } else if out.quiet {
        Ok(())
    } else {
        emit(&format!(
            "Not watching {}: auto-watch is off ({from}); the model's own watch_agent_task (or `atc watch`) still watches.\n",
            watch.task_ids.join(", ")
        ))
    }
}

/// Looks the exact triple up in the parent agent's chats. A chat that does not exist is
/// refused (exit 1), naming the chats that share the session id, unless the watch allows
/// a new one; a server that cannot be asked is no reason to refuse.
fn check_chat(watch: &Watch) -> Result<ChatCheck, Failure> {
    let client = Client::new(CHAT_CHECK_TIMEOUT, watch.auth.clone());
    let t = watch.target();
    let base = &watch.base_url.value;
    let listed = chat::chats(client.list_chats(base, &t.agent_id, Some((&t.user_id, &t.channel))));
    let chats = match listed {
        Ok(chats) => chats,
        Err(chat::Unusable::Refused(why)) => {
            return Err(Failure::new(
                Exit::Refused,
                format!(
                    "{base} will not serve agent '{}' ({why}); check --agent (the agent's prompt shows its id)",
                    t.agent_id
                ),
            ));
        }
        // A path other than QwenPaw's `/api` is taken only when the server answers
        // there as QwenPaw (a reverse proxy's prefix): `/api/api` reaches nothing.
        Err(chat::Unusable::Unknown(why)) => {
            if let Some(problem) = crate::validate::api_path_problem(base) {
                return Err(Failure::new(
                    Exit::Usage,
                    format!(
                        "{} {problem}; nothing answered there as QwenPaw ({why})",
                        watch.base_url.source
                    ),
                ));
            }
            return Ok(ChatCheck::Skipped { why });
        }
    };
    // The agents the tasks run on are checked as the asking one is: QwenPaw answers 404
    // "Agent '…' not found" for an id it does not have.
    let mut runs_on: Vec<&str> = t.target_agent.as_deref().into_iter().collect();
    for (_, on) in &watch.target_agents {
        if *on != t.agent_id && !runs_on.contains(&on.as_str()) {
            runs_on.push(on);
        }
    }
    for on in runs_on {
        if let Err(chat::Unusable::Refused(why)) =
            chat::chats(client.list_chats(base, on, Some((&t.user_id, &t.channel))))
        {
            return Err(Failure::new(
                Exit::Refused,
                format!(
                    "{base} will not serve agent '{on}' ({why}); check --target-agent (the agent submit_to_agent ran the task on)"
                ),
            ));
        }
    }
    if let Some(found) = chat::find(&chats, &t.session_id, &t.user_id, &t.channel) {
        return Ok(ChatCheck::Found {
            chat_id: found.id.clone(),
            archived: found.archived,
        });
    }
    if watch.options.create_session {
        return Ok(ChatCheck::New);
    }
    let all = chat::chats(client.list_chats(base, &t.agent_id, None)).unwrap_or_default();
    let same_session: Vec<String> = all
        .iter()
        .filter(|c| c.session_id == t.session_id)
        .map(chat::ChatRef::describe)
        .collect();
    // A value pasted with spaces around it, or in another case: the session id it meant.
    let meant = all.iter().map(|c| c.session_id.as_str()).find(|id| {
        *id != t.session_id
            && (*id == t.session_id.trim() || id.eq_ignore_ascii_case(t.session_id.trim()))
    });
    let hint = if let Some((inner, child)) = crate::ids::labelled_session(&t.session_id) {
        // A model copied the line with its label.
        if child {
            format!(
                "--session holds QwenPaw's [SESSION: {inner}] line, which names a submitted task's own chat (the child's), not the chat that asked"
            )
        } else {
            format!(
                "--session holds a label with its value (--session {inner} passes the value alone)"
            )
        }
    } else if let Some(id) = meant.filter(|_| same_session.is_empty()) {
        format!(
            "agent '{}' has no chat with session id {:?}, but one with {id:?} (session ids are exact: no spaces around them, the case as given)",
            t.agent_id, t.session_id
        )
    } else if same_session.is_empty() {
        format!(
            "agent '{}' has no chat with session id {} at all (is --agent right?)",
            t.agent_id, t.session_id
        )
    } else {
        format!(
            "chats with session id {}: {}",
            t.session_id,
            same_session.join("; ")
        )
    };
    Err(Failure::new(
        Exit::Refused,
        format!(
            "{base} has no chat with {} for agent '{}': delivering there would start a new chat the asking agent never sees; {hint}. Pass the Session ID, User ID and Channel the agent's prompt shows, or --create-session to start a new chat on purpose",
            t.describe_chat(),
            t.agent_id
        ),
    ))
}

/// Asks the server for each task, as a tick would poll it: a task id QwenPaw answers with
/// its own "Task not found" is refused (exit 6), nothing watched, so that no tick later
/// tells the parent a task it never had was lost. A task whose result the file already
/// holds is not asked for (a re-watch sends that result elsewhere; the server may have
/// lost the record since). Returns the tasks that could not be checked, and why.
fn check_tasks(watch: &Watch, store: &Store) -> Result<Vec<(String, String)>, Failure> {
    let held = store.load().ok();
    let client = Client::new(CHAT_CHECK_TIMEOUT, watch.auth.clone());
    let base = &watch.base_url.value;
    let target = watch.target();
    // The agent each task runs on: a `[TARGET_AGENT: …]` line's, else the watch's.
    let agent_of = |task_id: &str| {
        watch
            .target_agents
            .iter()
            .find(|(t, _)| t == task_id)
            .map_or(target.poll_agent(), |(_, on)| on.as_str())
    };
    let mut unknown = Vec::new();
    let mut unchecked = Vec::new();
    for task_id in &watch.task_ids {
        let holds = held
            .as_ref()
            .and_then(|file| file.find(task_id).map(|job| (job, file.turn_of(job))))
            .is_some_and(|(job, turn)| lifecycle::holds_result(job, turn));
        if holds {
            continue;
        }
        match task::classify(
            client.get_task(base, task_id, agent_of(task_id)),
            task_id,
            base,
            &watch.auth,
        ) {
            task::Poll::Record(_) => {}
            task::Poll::NotFound { .. } => unknown.push(task_id.as_str()),
            task::Poll::Failed { error } | task::Poll::Denied { error } => {
                unchecked.push((task_id.clone(), crate::describe::short_cause(&error)));
            }
        }
    }
    match unknown.as_slice() {
        [] => Ok(unchecked),
        [one] => Err(Failure::new(
            Exit::Lost,
            format!(
                "{base} has no task {one} (QwenPaw answers \"Task not found\"): is the id the one submit_to_agent printed, and was it submitted to this server (the base URL from {})? Nothing was watched (--no-task-check skips this check)",
                watch.base_url.source
            ),
        )),
        many => Err(Failure::new(
            Exit::Lost,
            format!(
                "{base} has no task {} (QwenPaw answers \"Task not found\"): are the ids the ones submit_to_agent printed, and were they submitted to this server (the base URL from {})? Nothing was watched (--no-task-check skips this check)",
                many.join(", "),
                watch.base_url.source
            ),
        )),
    }
}

fn refusal(task_id: &str, job: &Job, turn: Option<&Turn>, was: Status) -> Failure {
    let chat = job.target.describe_chat();
    let several = turn.is_some_and(|t| t.carries.len() > 1);
    let message = match was {
        Status::Done => {
            let when = turn
                .and_then(|t| t.delivered_at)
                .map(|t| format!(" at {t}"))
                .unwrap_or_default();
            format!(
                "{task_id} was already delivered to {chat}{when}; watching it again would only post the result twice (`atc status {task_id}` shows what was sent)"
            )
        }
        Status::Unconfirmed => format!(
            "{task_id}'s result may already have been delivered (an attempt's outcome is unknown; atc is reading the chat back); watching it again could post it twice. `atc status {task_id}` shows the text; `atc redeliver {task_id}` tries again safely"
        ),
        Status::Cancelled if turn.is_some_and(|t| t.group.is_some()) => format!(
            "{task_id}'s watch was cancelled after its result was claimed into group {}'s turn, which carries it to {chat}; watching it again could post it twice (`atc status {task_id}` shows where that turn stands)",
            job.options.group.as_deref().unwrap_or("?")
        ),
        Status::Cancelled => format!(
            "{task_id}'s watch was cancelled while its result was being posted to {chat}, so it may be there already; watching it again could post it twice (`atc status {task_id}` shows what is known)"
        ),
        _ if turn.is_some_and(Turn::in_flight) && !several => format!(
            "{task_id}'s result is being posted to {chat} right now ({was}); try again after the next atc tick"
        ),
        _ if job.options.group.is_some() => format!(
            "{task_id}'s result travels in group {}'s turn, which was claimed to be posted to {chat} ({}); watched again alone it could go out twice (`atc status {task_id}` shows where that turn stands)",
            job.options.group.as_deref().unwrap_or_default(),
            turn.map_or("claimed", |t| t.state.as_str())
        ),
        _ if several => format!(
            "{task_id}'s result travels in a turn of several results that is being posted to {chat} (or may have been); watching it again could post it twice (`atc status {task_id}` shows what is known)"
        ),
        // Claimed, between POSTs: one of them had an unknown outcome, and the read-back
        // found nothing (yet); it is posted there again, never elsewhere.
        _ => format!(
            "{task_id}'s result was claimed to be posted to {chat} and waits to be posted there again (an earlier attempt's outcome was unknown); watching it again could post it twice (`atc status {task_id}` shows what is known)"
        ),
    };
    Failure::new(Exit::Refused, message)
}

/// A flag a re-watch turned on, with the value it now has where that is a duration
/// (`--stop-after 1h 30m`).
fn with_value(flag: &str, job: &Job) -> String {
    let secs = match flag {
        "--stop-after" => job.options.stop_after_secs,
        "--check-in" => job.options.check_in_secs,
        _ => None,
    };
    match secs {
        Some(secs) => format!("{flag} {}", crate::time::human(Duration::from_secs(secs))),
        None => flag.to_owned(),
    }
}

/// "task-1 for agent 'default'" or "task-1 (running on agent 'SE') for agent 'default'".
fn subject(job: &Job) -> String {
    let group = job
        .options
        .group
        .as_deref()
        .map(|g| format!(" in group {g}"))
        .unwrap_or_default();
    match &job.target.target_agent {
        Some(on) => format!(
            "{} (running on agent '{on}'){group} for agent '{}'",
            job.task_id, job.target.agent_id
        ),
        None => format!("{}{group} for agent '{}'", job.task_id, job.target.agent_id),
    }
}

/// What a re-registration changed: "session s-77 → s-78, user default → alice".
fn changes(old: &Job, new: &Job) -> String {
    let none = || "(none)".to_owned();
    let (o, n) = (&old.target, &new.target);
    let parts = [
        ("agent", o.agent_id.clone(), n.agent_id.clone()),
        (
            "target agent",
            o.target_agent.clone().unwrap_or_else(none),
            n.target_agent.clone().unwrap_or_else(none),
        ),
        ("session", o.session_id.clone(), n.session_id.clone()),
        ("user", o.user_id.clone(), n.user_id.clone()),
        ("channel", o.channel.clone(), n.channel.clone()),
        ("base URL", old.base_url.clone(), new.base_url.clone()),
        (
            "group",
            old.options.group.clone().unwrap_or_else(none),
            new.options.group.clone().unwrap_or_else(none),
        ),
    ];
    parts
        .iter()
        .filter(|(_, a, b)| a != b)
        .map(|(what, a, b)| format!("{what} {a} → {b}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn destination(job: &Job) -> String {
    format!(
        "the result goes to {} {}.",
        job.target.describe_chat(),
        when(job)
    )
}

/// When a watch's result goes: a group member's with the rest of its group.
fn when(job: &Job) -> &'static str {
    if job.options.group.is_some() {
        "with the rest of its group"
    } else {
        "on the next atc tick"
    }
}

/// The warning for a watch into a job file no tick reads while atc's QwenPaw plugin
/// ticks another (the config file's `state` or the default): a shell's `ATC_STATE` or a
/// `--state` the server's plugin never sees. `None` while a plugin or a timer ticks this
/// file, or no plugin ticks any (`atc status` and `atc doctor` say when ticks are late),
/// or the file is the config file's (the plugin reads that file too).
fn unticked(
    watch: &Watch,
    store: &Store,
    plugin_ticks_it: bool,
    beat: &crate::pass::Heartbeat,
    now: Timestamp,
) -> Option<String> {
    // The config file's `state` the plugin reads too: its next beat ticks that file.
    if !matches!(
        watch.state.source,
        crate::settings::Source::Flag(_) | crate::settings::Source::Env(_)
    ) {
        return None;
    }
    if plugin_ticks_it
        || beat
            .last_scheduled()
            .is_some_and(|at| at.elapsed_at(now) <= crate::pass::TICK_STALE)
    {
        return None;
    }
    let (other, plugin) = watch.other_job_files.iter().find_map(|other| {
        let path = Store::new(other.clone()).cadence_path();
        crate::pass::Cadence::read(&path, now).map(|c| (other, c))
    })?;
    Some(format!(
        "atc: warning: atc's QwenPaw plugin (server pid {}) ticks {}, not {} (the job file from {}): nothing polls this watch unless a timer of its own ticks that file; watch into the plugin's job file instead (without {})",
        plugin.pid,
        other.display(),
        store.path().display(),
        watch.state.source,
        watch.state.source
    ))
}
