//! `atc cancel`: stop watching a task. The child task itself keeps running, unless
//! `--stop` stops it first (`POST /console/chat/stop` on the child's chat).

use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use crate::cmd::report_job;
use crate::compose;
use crate::exit::Exit;
use crate::fail;
use crate::job::{Job, Status, Watch};
use crate::lifecycle::{self, Event, Limits};
use crate::pass::{self, NotRunning, StopFailed, StopSaid, Stopped};
use crate::qwenpaw::Client;
use crate::report::{LogEntry, Outcome};
use crate::settings::{Auth, Cancel, Output};
use crate::state::{JobFile, Store};
use crate::time::Timestamp;
use crate::turn::TurnState;

/// How long each request of `--stop` may take: a person is waiting.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// The pause between two tries of a stop that failed (`lifecycle::STOP_TRIES` in all): a
/// child that has just started may not be running in its chat yet.
const STOP_PAUSE: Duration = Duration::from_secs(1);

pub fn run(cancel: &Cancel, out: Output) -> Result<()> {
    if cancel.check_ins {
        return check_ins_off(cancel, out);
    }
    let store = Store::new(cancel.state.value.clone());
    let task_id = &cancel.task_id;
    // The stop goes out before the lock is taken: the lock is never held across the network.
    let stopped = match &cancel.stop {
        Some(auth) => {
            let file = store.load()?;
            let Some(job) = file.find(task_id) else {
                fail!(
                    Exit::Refused,
                    "no watch for {task_id} in {}",
                    store.path().display()
                );
            };
            if matches!(job.watch, Watch::Pending | Watch::Cancelled) {
                Some((job.job_id.clone(), stop_child(job, auth, &store)?))
            } else {
                None
            }
        }
        None => None,
    };
    let now = Timestamp::now();
    let path = store.path().to_owned();
    let (job, message, changed) = store.update(|file| {
        let stopped = stopped.as_ref().map(|(id, s)| (id.as_str(), s));
        cancel_in(
            file,
            task_id,
            cancel.stop.is_some(),
            stopped,
            &path,
            now,
            &cancel.limits,
        )
    })?;
    // A second cancel changes nothing, and logs nothing.
    if changed && job.watch == Watch::Cancelled {
        store.log(&[LogEntry::of("cancelled", &job, now)])?;
    }
    report_job(&job, &message, out)
}

/// What `cancel` does to the file (the simulation runs it too): the watch of `task_id`
/// cancelled, its block taken out of an open turn (a claimed one keeps it). `stopped`: what
/// the stop asked for before (`--stop`) said, for the registration it was sent for.
/// Returns the job, the message, and whether anything changed.
pub fn cancel_in(
    file: &mut JobFile,
    task_id: &str,
    stop_asked: bool,
    stopped: Option<(&str, &Stopped)>,
    path: &Path,
    now: Timestamp,
    limits: &Limits,
) -> Result<(Job, String, bool)> {
    let Some(i) = file.jobs.iter().position(|j| j.task_id == *task_id) else {
        fail!(
            Exit::Refused,
            "no watch for {task_id} in {}",
            path.display()
        );
    };
    // Its block travels in a turn that was claimed (being posted, or may have been):
    // once claimed, a turn is what it is, and the cancel cannot take the block out.
    let turn = file.turn_of(&file.jobs[i]).cloned();
    let job = &mut file.jobs[i];
    // What the stop learned belongs to the registration it was sent for (a re-watch
    // meanwhile is another child's record).
    let stop = stopped
        .filter(|(job_id, _)| *job_id == job.job_id)
        .map(|(_, stop)| stop);
    let finished = job.outcome.is_some();
    let transition = lifecycle::step(job, turn.as_ref(), Event::Cancelled, now, limits);
    let chat = transition.job.target.describe_chat();
    let keeps_running = match stop.map(|s| s.said) {
        Some(StopSaid::Stopped) => "the child was stopped",
        Some(StopSaid::NotRunning(NotRunning::Finished)) => "the child had already finished",
        Some(StopSaid::NotRunning(NotRunning::NoRecord)) => {
            "the child was not running (the server has no record of the task)"
        }
        Some(StopSaid::NotRunning(NotRunning::ChatIdle)) => {
            "the child was not running (its chat is idle)"
        }
        None if finished => {
            "the child had already finished; its result is not delivered (check_agent_task still shows it)"
        }
        None if stop_asked => "the child had already finished",
        None => "the child task keeps running (check_agent_task still shows its result)",
    };
    // What of it is on its way: its result, or a check-in (then the result itself never
    // comes: the watch is cancelled), and with what else.
    let on_its_way = || {
        let t = turn.as_ref().expect("a claimed turn");
        let check_in = t
            .carries
            .iter()
            .find(|b| b.job_id == job.job_id)
            .is_some_and(|b| b.kind.is_check_in());
        let (what, may) = if check_in {
            (
                "its check-in",
                "that check-in may already be on its way; its result will not come, the watch is cancelled",
            )
        } else {
            ("its result", "it may already be on its way")
        };
        let how = if t.in_flight() || t.state == TurnState::Unconfirmed {
            "was being posted"
        } else {
            "is claimed to be posted (it goes out as it is)"
        };
        match t.carries.len() {
            1 => format!("{what} {how} to {chat} at that moment: {may}"),
            n => format!(
                "{what} travels in a turn of {n} blocks ({}) that {how} to {chat} at that moment: {may}",
                t.turn_id
            ),
        }
    };
    let message = match transition.outcomes.as_slice() {
        [Outcome::CancelledInFlight] => {
            format!("Cancelled the watch on {task_id}, but {}.", on_its_way())
        }
        [Outcome::Cancelled] => {
            format!("Cancelled the watch on {task_id}; {keeps_running}.")
        }
        [Outcome::AlreadyCancelled] if stop.is_some() => {
            format!("{task_id} was already cancelled; {keeps_running}.")
        }
        [Outcome::AlreadyCancelled] => format!("{task_id} was already cancelled."),
        _ if crate::status::status(job, turn.as_ref()) == Status::Done => {
            let when = turn
                .as_ref()
                .and_then(|t| t.delivered_at)
                .map(|t| format!(" at {t}"))
                .unwrap_or_default();
            fail!(
                Exit::Refused,
                "{task_id} was already delivered to {chat}{when}; nothing to cancel"
            );
        }
        _ => fail!(
            Exit::Refused,
            "the watch on {task_id} already ended ({}); nothing to cancel",
            crate::status::status(job, turn.as_ref())
        ),
    };
    let mut changed = !transition.is_ignored()
        && !matches!(transition.outcomes.as_slice(), [Outcome::AlreadyCancelled]);
    *job = transition.job;
    // Where the stop found the child's chat, and that it stopped it, are facts the job
    // keeps (the next stop goes straight there; `status` says atc stopped it).
    if let Some(stop) = stop {
        let mut next = job.clone();
        if stop.chat_id.is_some() {
            next.child_chat_id = stop.chat_id.clone();
        }
        if stop.agent.is_some() && next.target.target_agent.is_none() {
            next.child_agent = stop.agent.clone();
        }
        if stop.said == StopSaid::Stopped && next.stopped_at.is_none() {
            next.stopped_at = Some(now);
        }
        if next != *job {
            next.updated_at = now;
            *job = next;
            changed = true;
        }
    }
    // An open turn goes on without it.
    compose::tidy(file, now, limits);
    Ok((file.shown(&file.jobs[i]), message, changed))
}

/// `cancel --check-ins`: the watch goes on, without check-ins.
fn check_ins_off(cancel: &Cancel, out: Output) -> Result<()> {
    let store = Store::new(cancel.state.value.clone());
    let task_id = &cancel.task_id;
    let now = Timestamp::now();
    let path = store.path().to_owned();
    let (job, claimed) =
        store.update(|file| check_ins_off_in(file, task_id, &path, now, &cancel.limits))?;
    store.log(&[LogEntry::of("check_ins_off", &job, now)])?;
    let message = if claimed {
        format!(
            "No more check-ins for {task_id}; the one being posted now still arrives. Still watching it (its result comes back as usual)."
        )
    } else {
        format!(
            "No more check-ins for {task_id}; still watching it (its result comes back as usual)."
        )
    };
    report_job(&job, &message, out)
}

/// What `cancel --check-ins` does to the file (the simulation runs it too): no more
/// check-ins; one not yet claimed leaves its turn. Returns the job, and whether the current
/// one was claimed (it still arrives).
pub fn check_ins_off_in(
    file: &mut JobFile,
    task_id: &str,
    path: &Path,
    now: Timestamp,
    limits: &Limits,
) -> Result<(Job, bool)> {
    let Some(i) = file.jobs.iter().position(|j| j.task_id == *task_id) else {
        fail!(
            Exit::Refused,
            "no watch for {task_id} in {}",
            path.display()
        );
    };
    let turn = file.turn_of(&file.jobs[i]).cloned();
    let claimed =
        crate::turn::claimed(turn.as_ref(), &file.jobs[i].job_id) && file.jobs[i].check_in;
    let job = &mut file.jobs[i];
    let transition = lifecycle::step(job, turn.as_ref(), Event::CheckInsOff, now, limits);
    if transition.is_ignored() {
        if job.watch != Watch::Pending {
            fail!(
                Exit::Refused,
                "the watch on {task_id} already ended ({}); no check-ins to stop",
                crate::status::status(job, turn.as_ref())
            );
        }
        fail!(
            Exit::Refused,
            "{task_id} has no check-ins to stop (it was watched without --check-in)"
        );
    }
    *job = transition.job;
    // A check-in not yet claimed leaves its turn.
    compose::tidy(file, now, limits);
    Ok((file.shown(&file.jobs[i]), claimed))
}

/// Stops the child of `job` through its own base URL, trying up to
/// `lifecycle::STOP_TRIES` times; any failure leaves the watch as it is.
/// Drops `session` from the registration `job_id`, if it still holds it.
fn forget_session(store: &Store, job_id: &str, session: &str) -> Result<()> {
    store.update(|file| {
        if let Some(job) = file.jobs.iter_mut().find(|j| j.job_id == job_id)
            && job.child_session.as_deref() == Some(session)
        {
            lifecycle::forget_child(job);
        }
        Ok(())
    })
}

fn stop_child(job: &Job, auth: &Auth, store: &Store) -> Result<Stopped> {
    let task_id = &job.task_id;
    let mut client = Client::new(STOP_TIMEOUT, auth.clone());
    if job.options.allow_insecure_remote {
        client.allow_insecure(&job.base_url);
    }
    if job.child_session.is_some()
        && let Some(ended) = pass::already_ended(&client, job)
    {
        return Ok(ended);
    }
    let mut tries = 0;
    loop {
        let why = match pass::stop_child(&client, job) {
            Ok(stopped) => return Ok(stopped),
            Err(StopFailed::NoSession) => fail!(
                Exit::Refused,
                "cannot stop the child of {task_id}: its session is not known; watch it again with --child-session SID (the [SESSION: …] line submit_to_agent printed), or stop it from QwenPaw's console; the watch is kept"
            ),
            Err(StopFailed::OtherChild(why)) => {
                // A session proven another task's is forgotten (the right one, given
                // later, is then taken); the watch is otherwise kept as it was.
                if let Some(session) = &job.child_session {
                    forget_session(store, &job.job_id, session)?;
                }
                fail!(
                    Exit::Refused,
                    "cannot stop the child of {task_id}: {why}; the watch is kept, without that session"
                )
            }
            Err(why) => why,
        };
        tries += 1;
        if lifecycle::stop_again(tries) {
            std::thread::sleep(STOP_PAUSE);
            continue;
        }
        let exit = match why {
            StopFailed::StillRunning(_) => Exit::Refused,
            _ => Exit::Server,
        };
        fail!(
            exit,
            "cannot stop the child of {task_id} ({tries} tries): {}; the watch is kept, try again",
            why.message()
        );
    }
}
