//! The core of `atc cancel` (the simulation runs it too): what a cancel, or a
//! `cancel --check-ins`, does to the job file once the stop (`--stop`) has said what it
//! found. The command (`cmd::cancel`) sends the stop and takes the lock.

use std::path::Path;

use anyhow::Result;

use super::compose;
use super::stop::{NotRunning, StopSaid, Stopped};
use super::{Event, Limits};
use crate::exit::Exit;
use crate::fail;
use crate::job::{ChatKey, Job, Status, Watch};
use crate::job_file::JobFile;
use crate::outcome::Outcome;
use crate::time::Timestamp;
use crate::turn::TurnState;

/// What a cancel of job `i` leaves of its group (`--group`): a sentence for the message,
/// or nothing for a watch in no group or the last of its group. The group's turn waits
/// until no member is pending; the cancelled one is no longer one of them (`them`: nor
/// the members the same command cancelled before it).
fn group_left(file: &JobFile, i: usize, them: bool) -> String {
    let me = &file.jobs[i];
    let Some(name) = me.options.group.as_deref() else {
        return String::new();
    };
    let it = if them { "them" } else { "it" };
    let others: Vec<&Job> = file
        .jobs
        .iter()
        .filter(|j| {
            j.job_id != me.job_id
                && j.options.group.as_deref() == Some(name)
                && j.chat_key() == me.chat_key()
        })
        .collect();
    let running = others.iter().filter(|j| j.watch == Watch::Pending).count();
    let waiting = others
        .iter()
        .filter(|j| crate::status::status(j, file.turn_of(j)) == Status::Delivering)
        .count();
    if running == 1 {
        format!(
            " Group {name} still comes back as one message, without {it}, once its other task ends."
        )
    } else if running > 1 {
        format!(
            " Group {name} still comes back as one message, without {it}, once its other {running} tasks end."
        )
    } else if waiting > 0 {
        format!(" Group {name} goes out without {it} on the next atc tick.")
    } else {
        String::new()
    }
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
    let stop = (stop_asked, stopped);
    cancel_member_in(file, task_id, stop, path, now, limits, Speaks::OfIt)
}

/// `atc cancel A B …` in one change of the file: each as [`cancel_in`], in the order
/// given, but a group is spoken of once, by the last of its members cancelled here, as
/// the file stands after the others (each line would otherwise say the group waits for
/// the ones the same command cancels next). `asked`: each task, and what the stop sent
/// for it found. A refusal changes nothing of its own watch; the others go on.
pub fn cancel_each_in(
    file: &mut JobFile,
    asked: &[(&str, Option<(&str, &Stopped)>)],
    stop_asked: bool,
    path: &Path,
    now: Timestamp,
    limits: &Limits,
) -> Vec<Result<(Job, String, bool)>> {
    fn group_of<'f>(file: &'f JobFile, task_id: &str) -> Option<(&'f str, ChatKey<'f>)> {
        let job = file.find(task_id)?;
        Some((job.options.group.as_deref()?, job.chat_key()))
    }
    (0..asked.len())
        .map(|n| {
            let (task_id, stopped) = asked[n];
            let mine = group_of(file, task_id);
            let same = |(other, _): &(&str, _)| mine.is_some() && group_of(file, other) == mine;
            let says = if asked[n + 1..].iter().any(same) {
                Speaks::Not
            } else if asked[..n].iter().any(same) {
                Speaks::OfThem
            } else {
                Speaks::OfIt
            };
            let stop = (stop_asked, stopped);
            cancel_member_in(file, task_id, stop, path, now, limits, says)
        })
        .collect()
}

/// What a cancel's line says of the watch's group (`--group`).
#[derive(Clone, Copy)]
enum Speaks {
    /// What is left of it, without this member.
    OfIt,
    /// What is left of it, without this member and others the same command cancelled.
    OfThem,
    /// Nothing: a member the same command cancels next says it.
    Not,
}

/// [`cancel_in`], saying of the watch's group what `says` says.
fn cancel_member_in(
    file: &mut JobFile,
    task_id: &str,
    (stop_asked, stopped): (bool, Option<(&str, &Stopped)>),
    path: &Path,
    now: Timestamp,
    limits: &Limits,
    says: Speaks,
) -> Result<(Job, String, bool)> {
    let i = file.watched(task_id, path)?;
    let group = match says {
        Speaks::OfIt => group_left(file, i, false),
        Speaks::OfThem => group_left(file, i, true),
        Speaks::Not => String::new(),
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
    let transition = super::step(job, turn.as_ref(), Event::Cancelled, now, limits);
    let chat = transition.job.target.describe_chat();
    let keeps_running = match stop.map(|s| s.said) {
        Some(StopSaid::Stopped) => "the child was stopped",
        // Ended by atc's own stop (an earlier `cancel --stop`, `--stop-after`): as
        // `status` says it.
        Some(StopSaid::NotRunning(NotRunning::Finished)) if job.stopped_at.is_some() => {
            "atc had already stopped the child"
        }
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
        // Not stopped, and atc says no more than it knew: the child may have ended since.
        None if job.started_at.is_some() => &format!(
            "the child was still running at atc's last poll and is not stopped: `atc wait {task_id}` or check_agent_task says how it ends"
        ),
        None => &format!(
            "atc had not polled the child yet, and it is not stopped: `atc wait {task_id}` or check_agent_task says how it ends"
        ),
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
            format!("Cancelled the watch on {task_id}; {keeps_running}.{group}")
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
    let i = file.watched(task_id, path)?;
    let turn = file.turn_of(&file.jobs[i]).cloned();
    let claimed =
        crate::turn::claimed(turn.as_ref(), &file.jobs[i].job_id) && file.jobs[i].check_in;
    let job = &mut file.jobs[i];
    let transition = super::step(job, turn.as_ref(), Event::CheckInsOff, now, limits);
    if transition.is_ignored() {
        if job.watch != Watch::Pending {
            fail!(
                Exit::Refused,
                "the watch on {task_id} already ended ({}); no check-ins to stop",
                crate::status::status(job, turn.as_ref())
            );
        }
        // A group's members report together: no check-ins to start for one.
        if let Some(group) = &job.options.group {
            fail!(
                Exit::Refused,
                "{task_id} has no check-ins to stop: it is in group {group}, whose members report together, without check-ins"
            );
        }
        fail!(
            Exit::Refused,
            "{task_id} has no check-ins to stop (watched without --check-in, or they were stopped already): `{}` starts them",
            crate::describe::watch_again(job, "--check-in D")
        );
    }
    *job = transition.job;
    // A check-in not yet claimed leaves its turn.
    compose::tidy(file, now, limits);
    Ok((file.shown(&file.jobs[i]), claimed))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cancel --stop` sends no stop to a watch that had ended when the command looked
    /// (its child had finished); watched again before the lock, the watch is cancelled
    /// and the line says the child had finished, not that it keeps running.
    #[test]
    fn a_stop_asked_but_not_sent_says_the_child_had_finished() {
        let limits = crate::settings::default_limits();
        let now = Timestamp::from_unix(1_800_000_100);
        for (stop_asked, said) in [
            (true, "the child had already finished"),
            (
                false,
                "atc had not polled the child yet, and it is not stopped: `atc wait task-1` or check_agent_task says how it ends",
            ),
        ] {
            let mut file = JobFile {
                jobs: vec![Job::sample(Watch::Pending)],
                ..JobFile::default()
            };
            let (job, message, changed) = cancel_in(
                &mut file,
                "task-1",
                stop_asked,
                None,
                Path::new("j"),
                now,
                &limits,
            )
            .unwrap();
            assert_eq!(message, format!("Cancelled the watch on task-1; {said}."));
            assert_eq!((job.watch, changed), (Watch::Cancelled, true));
        }
    }

    /// Found by hand: a second `cancel --stop` said "the child had already finished" of
    /// the child the first had stopped (`status`: "atc stopped the child").
    #[test]
    fn a_stop_that_finds_the_child_ended_says_who_ended_it() {
        let limits = crate::settings::default_limits();
        let now = Timestamp::from_unix(1_800_000_100);
        let ended = Stopped {
            agent: None,
            chat_id: None,
            said: StopSaid::NotRunning(NotRunning::Finished),
        };
        for (stopped_at, watch, said) in [
            (
                None,
                Watch::Pending,
                "Cancelled the watch on task-1; the child had already finished.",
            ),
            (
                Some(Timestamp::from_unix(1_800_000_000)),
                Watch::Pending,
                "Cancelled the watch on task-1; atc had already stopped the child.",
            ),
            (
                Some(Timestamp::from_unix(1_800_000_000)),
                Watch::Cancelled,
                "task-1 was already cancelled; atc had already stopped the child.",
            ),
        ] {
            let mut job = Job::sample(watch);
            job.stopped_at = stopped_at;
            let job_id = job.job_id.clone();
            let mut file = JobFile {
                jobs: vec![job],
                ..JobFile::default()
            };
            let (_, message, _) = cancel_in(
                &mut file,
                "task-1",
                true,
                Some((&job_id, &ended)),
                Path::new("j"),
                now,
                &limits,
            )
            .unwrap();
            assert_eq!(message, said);
        }
    }

    /// Found by hand: cancelling one task of a group said nothing of the group, whose one
    /// message then came with a task fewer than the model asked for.
    #[test]
    fn a_cancel_in_a_group_says_what_becomes_of_the_group() {
        let limits = crate::settings::default_limits();
        let now = Timestamp::from_unix(1_800_000_100);
        let member = |task: &str, job_id: &str, group: Option<&str>, watch: Watch| {
            let mut job = Job::sample(watch);
            job.task_id = task.into();
            job.job_id = job_id.into();
            job.options.group = group.map(Into::into);
            job
        };
        let cancelled = |jobs: Vec<Job>| {
            let mut file = JobFile {
                jobs,
                ..JobFile::default()
            };
            let (_, message, _) = cancel_in(
                &mut file,
                "task-1",
                false,
                None,
                Path::new("j"),
                now,
                &limits,
            )
            .unwrap();
            message
        };
        let said = cancelled(vec![
            member("task-1", "j1", Some("g"), Watch::Pending),
            member("task-2", "j2", Some("g"), Watch::Pending),
            member("task-3", "j3", Some("g"), Watch::Pending),
            member("task-4", "j4", Some("h"), Watch::Pending),
        ]);
        assert!(
            said.ends_with(
                ". Group g still comes back as one message, without it, once its other 2 tasks end."
            ),
            "{said}"
        );
        // Found by hand: one other member read "once its other 1 task end".
        let said = cancelled(vec![
            member("task-1", "j1", Some("g"), Watch::Pending),
            member("task-2", "j2", Some("g"), Watch::Pending),
        ]);
        assert!(
            said.ends_with(
                ". Group g still comes back as one message, without it, once its other task ends."
            ),
            "{said}"
        );
        let said = cancelled(vec![
            member("task-1", "j1", Some("g"), Watch::Pending),
            member("task-2", "j2", Some("g"), Watch::Finished),
        ]);
        assert!(
            said.ends_with(". Group g goes out without it on the next atc tick."),
            "{said}"
        );
        for jobs in [
            vec![member("task-1", "j1", Some("g"), Watch::Pending)],
            vec![
                member("task-1", "j1", None, Watch::Pending),
                member("task-2", "j2", Some("g"), Watch::Pending),
            ],
        ] {
            let said = cancelled(jobs);
            assert!(!said.contains("Group"), "{said}");
        }
    }

    /// Only a stop that stopped the child records that atc stopped it, and only the first
    /// such stop: one that found nothing running leaves no mark, and a second keeps the
    /// first's time (`atc status` says "atc stopped the child" from it).
    #[test]
    fn only_a_stop_that_stopped_the_child_marks_it_stopped_once() {
        use crate::lifecycle::stop::NotRunning;
        let limits = crate::settings::default_limits();
        let (before, now) = (
            Timestamp::from_unix(1_800_000_000),
            Timestamp::from_unix(1_800_000_100),
        );
        for (said, was, want) in [
            (StopSaid::NotRunning(NotRunning::Finished), None, None),
            (StopSaid::Stopped, None, Some(now)),
            (StopSaid::Stopped, Some(before), Some(before)),
        ] {
            let mut job = Job::sample(Watch::Pending);
            job.stopped_at = was;
            let job_id = job.job_id.clone();
            let mut file = JobFile {
                jobs: vec![job],
                ..JobFile::default()
            };
            let stop = Stopped {
                agent: None,
                chat_id: Some("chat-1".into()),
                said,
            };
            let (job, _, _) = cancel_in(
                &mut file,
                "task-1",
                true,
                Some((&job_id, &stop)),
                Path::new("j"),
                now,
                &limits,
            )
            .unwrap();
            assert_eq!(job.stopped_at, want, "{said:?}");
            assert_eq!(job.child_chat_id.as_deref(), Some("chat-1"));
        }
    }
}
