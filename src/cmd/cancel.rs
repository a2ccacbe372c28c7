//! `atc cancel`: stop watching a task. The child task itself keeps running, unless
//! `--stop` stops it first (`POST /console/chat/stop` on the child's chat).

use std::time::Duration;

use anyhow::Result;

use crate::cmd::report_job;
use crate::exit::Exit;
use crate::fail;
use crate::job::{Job, Watch};
use crate::lifecycle;
use crate::lifecycle::cancel::{cancel_in, check_ins_off_in};
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
    crate::cmd::watched_elsewhere(&cancel.task_id, &store, &state.source, others)?;
    if cancel.check_ins {
        return check_ins_off(cancel, &store, out);
    }
    let task_id = &cancel.task_id;
    // The stop goes out before the lock is taken: the lock is never held across the network.
    let stopped = match &cancel.stop {
        Some(auth) => {
            let file = store.load()?;
            let job = &file.jobs[file.watched(task_id, store.path())?];
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

/// `cancel --check-ins`: the watch goes on, without check-ins.
fn check_ins_off(cancel: &Cancel, store: &Store, out: Output) -> Result<()> {
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
