//! `atc cancel`: stop watching a task. The child task itself keeps running, unless
//! `--stop` stops it first (`POST /console/chat/stop` on the child's chat).

use std::time::Duration;

use anyhow::Result;

use crate::exit::Exit;
use crate::fail;
use crate::job::{Job, Watch};
use crate::lifecycle;
use crate::lifecycle::cancel::{cancel_each_in, check_ins_off_in};
use crate::lifecycle::stop::Stopped;
use crate::pass::{self, StopFailed};
use crate::qwenpaw::Client;
use crate::report::LogEntry;
use crate::settings::{Auth, Cancel, Output};
use crate::state::Store;
use crate::time::Timestamp;

/// How long each request of `--stop` may take: a person is waiting.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// The pause between two tries of a stop that failed (`lifecycle::STOP_TRIES` in all): a
/// child that has just started may not be running in its chat yet.
const STOP_PAUSE: Duration = Duration::from_secs(1);

pub fn run(cancel: &Cancel, out: Output) -> Result<()> {
    let store = Store::new(cancel.state.value.clone());
    let (state, others) = (&cancel.state, &cancel.other_job_files);
    let task_ids = &cancel.task_ids;
    for task_id in task_ids {
        crate::cmd::watched_elsewhere(task_id, &store, &state.source, others)?;
    }
    if cancel.check_ins {
        return check_ins_off(cancel, &store, out);
    }
    let path = store.path().to_owned();
    let stop_asked = cancel.stop.is_some();
    if task_ids.len() > 1 {
        // Several: each would be cancelled, on a copy, or nothing is stopped or changed (a
        // typo, or one delivered already, must not leave the others half done).
        let asked: Vec<_> = task_ids.iter().map(|id| (id.as_str(), None)).collect();
        store.peek(|file| {
            let mut copy = file.clone();
            let tried = cancel_each_in(
                &mut copy,
                &asked,
                stop_asked,
                &path,
                Timestamp::now(),
                &cancel.limits,
            );
            tried.into_iter().try_for_each(|one| one.map(drop))
        })??;
    }
    // The stops go out before the lock is taken: the lock is never held across the
    // network. A child that cannot be stopped keeps its watch; the others go on.
    let mut stopped = Vec::new();
    let mut not_stopped = Vec::new();
    if let Some(auth) = &cancel.stop {
        let file = store.load()?;
        for task_id in task_ids {
            let job = &file.jobs[file.watched(task_id, store.path())?];
            if matches!(job.watch, Watch::Pending | Watch::Cancelled) {
                match stop_child(job, auth, &store) {
                    Ok(s) => stopped.push((task_id, job.job_id.clone(), s)),
                    Err(err) => not_stopped.push((task_id.as_str(), err)),
                }
            }
        }
    }
    let cancelled: Vec<&String> = task_ids
        .iter()
        .filter(|id| !not_stopped.iter().any(|(n, _)| n == id))
        .collect();
    let now = Timestamp::now();
    let (done, refused) = if cancelled.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        store.update(|file| {
            // `cancel_in` takes a stop's findings only for the registration it was sent for.
            let asked: Vec<_> = cancelled
                .iter()
                .map(|task_id| {
                    let stopped = stopped
                        .iter()
                        .find(|(id, _, _)| id == task_id)
                        .map(|(_, job_id, s)| (job_id.as_str(), s));
                    (task_id.as_str(), stopped)
                })
                .collect();
            let tried = cancel_each_in(file, &asked, stop_asked, &path, now, &cancel.limits);
            let (mut done, mut refused) = (Vec::new(), Vec::new());
            for ((task_id, _), one) in asked.iter().zip(tried) {
                // Of several, one a tick ended since the check above is kept out.
                match one {
                    Ok(one) => done.push(one),
                    Err(err) if task_ids.len() > 1 => refused.push((*task_id, err)),
                    Err(err) => return Err(err),
                }
            }
            Ok((done, refused))
        })?
    };
    // A second cancel changes nothing, and logs nothing.
    let entries: Vec<LogEntry> = done
        .iter()
        .filter(|(job, _, changed)| *changed && job.watch == Watch::Cancelled)
        .map(|(job, _, _)| LogEntry::of("cancelled", job, now))
        .collect();
    if !entries.is_empty() {
        store.log(&entries)?;
    }
    report(&done, task_ids.len(), out)?;
    not_stopped.extend(refused);
    not_cancelled(not_stopped, done.len())
}

/// What each cancel (or `--check-ins`) did.
fn report(done: &[(Job, String, bool)], asked: usize, out: Output) -> Result<()> {
    let each = done.iter().map(|(job, message, _)| (job, message.as_str()));
    crate::cmd::report_jobs(each, asked, out)
}

/// The children `--stop` could not stop (their watches kept), and how many watches were
/// cancelled all the same: one line, each saying why, the exit the first one's.
fn not_cancelled(mut failed: Vec<(&str, anyhow::Error)>, cancelled: usize) -> Result<()> {
    if failed.is_empty() {
        return Ok(());
    }
    if failed.len() == 1 && cancelled == 0 {
        return Err(failed.remove(0).1);
    }
    let exit = crate::exit::exit_for(&failed[0].1);
    let each: Vec<String> = failed.iter().map(|(_, err)| format!("{err:#}")).collect();
    let rest = match cancelled {
        0 => "",
        1 => " (the other watch is cancelled)",
        _ => " (the other watches are cancelled)",
    };
    fail!(exit, "{}{rest}", each.join("; also "))
}

/// `cancel --check-ins`: the watches go on, without check-ins.
fn check_ins_off(cancel: &Cancel, store: &Store, out: Output) -> Result<()> {
    let now = Timestamp::now();
    let path = store.path().to_owned();
    let done = store.update(|file| {
        cancel
            .task_ids
            .iter()
            .map(|task_id| {
                check_ins_off_in(file, task_id, &path, now, &cancel.limits)
                    .map(|(job, claimed)| (task_id, job, claimed))
            })
            .collect::<Result<Vec<_>>>()
    })?;
    let entries: Vec<LogEntry> = done
        .iter()
        .map(|(_, job, _)| LogEntry::of("check_ins_off", job, now))
        .collect();
    store.log(&entries)?;
    let done: Vec<(Job, String, bool)> = done
        .into_iter()
        .map(|(task_id, job, claimed)| {
            let message = if claimed {
                format!(
                    "No more check-ins for {task_id}; the one being posted now still arrives. Still watching it (its result comes back as usual)."
                )
            } else {
                format!(
                    "No more check-ins for {task_id}; still watching it (its result comes back as usual)."
                )
            };
            (job, message, true)
        })
        .collect();
    report(&done, cancel.task_ids.len(), out)
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
                "cannot stop the child of {task_id}: its session is not known; `{}` watches it with its session (SID: the [SESSION: …] line submit_to_agent printed), or stop it from QwenPaw's console; the watch is kept",
                crate::describe::watch_again(job, "--child-session SID")
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
