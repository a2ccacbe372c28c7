//! Batches: everything due for one parent chat (same base URL, agent, session, user,
//! channel) that no group holds goes out as one turn. Pure, like `group`: [`plan`] looks
//! at the whole file and says which events to give which jobs; `pass` applies them
//! through `lifecycle::step`.
//!
//! A batch is a turn like any other, carried by one job (the *carrier*, which has
//! `group_tasks` and the turn's text in `turn_text`) with the others pointing at it
//! (`carried_by`); the delivery protocol runs on the carrier alone, and the others follow
//! where its turn lands (`Followed`), as a group's members do.
//!
//! - Until the carrier's turn is claimed, the batch is composed again whenever what is due
//!   for the chat changes: a result that finished while the parent was busy joins it, a
//!   member cancelled or watched elsewhere leaves it, a carrier cancelled hands the batch
//!   to the next job. Once claimed, the turn is what it is; what is due after that forms
//!   the next batch.
//! - The blocks go in the order their tasks finished; a turn holds at most
//!   [`TURN_CHARS`] characters, and what does not fit waits for the next turn.
//! - A single job is posted as its own block, byte for byte.
//! - A due `--check-in` (a pending job's own turn) joins a batch as a member only: a
//!   batch needs a carrier with a finished result (or notice). When the carrier's turn
//!   lands, the check-in is done as if it had gone alone (`check_in_done`), and its job
//!   is plain pending again. Check-ins with nothing else due go alone.

use std::collections::BTreeMap;

use crate::describe;
use crate::job::{ChatKey, Job, Outbound, Status};
use crate::lifecycle::{CancelledTurn, Event, batchable, can_carry, cancelled_turn};

/// The most characters one turn carries (each block is still at most 8,000).
pub const TURN_CHARS: usize = 32_000;

/// The events the batches in `jobs` need now, by position in `jobs`, in the order they
/// must be applied. With `compose` false (`--no-batch`) no batch is composed, but the
/// members of batches already composed still follow their carrier, or are freed.
pub fn plan(jobs: &[Job], compose: bool) -> Vec<(usize, Event)> {
    let mut chats: BTreeMap<ChatKey, Vec<usize>> = BTreeMap::new();
    for (i, job) in jobs.iter().enumerate() {
        if job.options.group.is_none() {
            chats.entry(job.chat_key()).or_default().push(i);
        }
    }
    let mut events = Vec::new();
    for jobs_of_chat in chats.into_values() {
        plan_chat(jobs, &jobs_of_chat, compose, &mut events);
    }
    events
}

fn plan_chat(jobs: &[Job], chat: &[usize], compose: bool, events: &mut Vec<(usize, Event)>) {
    let live_carrier = |id: &str| {
        chat.iter()
            .copied()
            .find(|&i| jobs[i].job_id == id && jobs[i].carries_batch())
            .filter(|&i| jobs[i].status != Status::Cancelled)
    };
    let mut free: Vec<usize> = Vec::new();
    let mut carrier: Option<usize> = None;
    let mut members: Vec<usize> = Vec::new();
    // One batch a chat is composed at a time: of the carriers whose turn is not claimed,
    // the first to finish keeps carrying; any other hands its jobs over (a batch given up
    // and redelivered while a later one waits).
    let mut open: Vec<usize> = chat
        .iter()
        .copied()
        .filter(|&i| {
            let job = &jobs[i];
            job.carries_batch()
                && job.status != Status::Cancelled
                && job.carried_by.is_none()
                && can_carry(job)
        })
        .collect();
    open.sort_by_key(|&i| (jobs[i].finished_at, jobs[i].registered_at));
    if let Some(&main) = open.first() {
        carrier = Some(main);
    }
    for &i in chat {
        let job = &jobs[i];
        if let Some(by) = job.carried_by.as_deref() {
            let cancelled = chat
                .iter()
                .copied()
                .find(|&c| jobs[c].job_id == by && jobs[c].status == Status::Cancelled);
            let turn = cancelled.map(|c| cancelled_turn(&jobs[c]));
            match (live_carrier(by), turn) {
                (Some(c), _) => {
                    let theirs = jobs[c].outbound();
                    if theirs.is_some_and(|o| o != Outbound::Delivering) {
                        events.push((i, Event::Followed(Box::new(jobs[c].clone()))));
                    } else if can_carry(&jobs[c]) && job.status != Status::Cancelled {
                        if Some(c) == carrier {
                            members.push(i);
                        } else if job.outbound() == Some(Outbound::Delivering) {
                            events.push((i, Event::Unsealed));
                            free.push(i);
                        }
                    }
                }
                (None, Some(CancelledTurn::Wait)) => {}
                (None, Some(CancelledTurn::Follow(turn))) => {
                    if job.outbound() == Some(Outbound::Delivering) {
                        events.push((i, Event::Followed(turn)));
                    }
                }
                // Its carrier was cancelled or watched again before its turn went out.
                (None, _) if job.outbound() == Some(Outbound::Delivering) => {
                    events.push((i, Event::Unsealed));
                    free.push(i);
                }
                (None, _) => {}
            }
        } else if job.carries_batch() && job.status != Status::Cancelled {
            if can_carry(job) && Some(i) != carrier {
                events.push((
                    i,
                    Event::Batched {
                        text: None,
                        tasks: vec![job.task_id.clone()],
                    },
                ));
                free.push(i);
            }
        } else if batchable(job) {
            free.push(i);
        }
    }
    if !compose && carrier.is_none() {
        return;
    }
    let mut candidates: Vec<usize> = carrier.iter().copied().collect();
    candidates.extend(&members);
    if compose {
        candidates.extend(&free);
    }
    candidates.sort_by_key(|&i| (jobs[i].finished_at, jobs[i].registered_at));
    // A check-in never carries: its job is pending again once its turn is out, and each
    // later check-in would post the batch again. Check-ins alone go alone.
    let Some(first) = carrier.or_else(|| candidates.iter().copied().find(|&i| can_carry(&jobs[i])))
    else {
        return;
    };
    if carrier.is_none() && candidates.len() < 2 {
        return;
    }
    // The carrier always travels; the others in the order they finished, while they fit.
    let mut used = describe::BATCH_HEADER_MAX + chars(&jobs[first]);
    let mut chosen = Vec::new();
    for &i in &candidates {
        if i == first {
            chosen.push(i);
            continue;
        }
        let more = chars(&jobs[i]) + 2;
        if used + more <= TURN_CHARS {
            used += more;
            chosen.push(i);
        }
    }
    let turn: Vec<&Job> = chosen.iter().map(|&i| &jobs[i]).collect();
    let tasks: Vec<String> = turn.iter().map(|job| job.task_id.clone()).collect();
    let text = (turn.len() > 1).then(|| describe::batch_text(&turn));
    let carrier_id = jobs[first].job_id.clone();
    let now_carries = (turn.len() > 1).then_some(&tasks);
    if jobs[first].group_tasks.as_ref() != now_carries || jobs[first].turn_text != text {
        events.push((first, Event::Batched { text, tasks }));
    }
    for &i in &members {
        if !chosen.contains(&i) {
            events.push((i, Event::Unsealed));
        }
    }
    for &i in &chosen {
        if i != first && jobs[i].carried_by.as_deref() != Some(carrier_id.as_str()) {
            events.push((
                i,
                Event::Carried {
                    carrier: carrier_id.clone(),
                },
            ));
        }
    }
}

/// The job whose turn carries `job`'s block in a batch (itself, for the carrier), if it
/// travels in one.
pub fn carrier_of<'a>(jobs: &'a [Job], job: &'a Job) -> Option<&'a Job> {
    if job.options.group.is_some() {
        return None;
    }
    if job.carries_batch() {
        return Some(job);
    }
    let by = job.carried_by.as_deref()?;
    jobs.iter().find(|j| j.job_id == by && j.carries_batch())
}

fn chars(job: &Job) -> usize {
    job.final_text.as_deref().map_or(0, |t| t.chars().count())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{Delivery, TaskOutcome};
    use crate::time::Timestamp;

    fn due(task: &str, finished: u64) -> Job {
        let mut job = Job::sample(Status::Delivering);
        job.job_id = format!("job-{task}");
        job.task_id = task.to_owned();
        job.final_text = Some(format!("[TASK_ID: {task}]\nresult"));
        job.outcome = Some(TaskOutcome::Completed);
        job.delivery = Some(Delivery::default());
        job.finished_at = Some(Timestamp::from_unix(1_800_000_000 + finished));
        job
    }

    fn apply(jobs: &mut [Job], compose: bool) {
        let limits = crate::settings::default_limits();
        let now = Timestamp::from_unix(1_800_000_100);
        for (i, event) in plan(jobs, compose) {
            jobs[i] = crate::lifecycle::step(&jobs[i], event, now, &limits).job;
        }
    }

    #[test]
    fn one_due_job_is_left_as_it_is_and_two_are_one_turn_in_finishing_order() {
        let mut jobs = vec![due("t1", 5)];
        assert!(
            plan(&jobs, true).is_empty(),
            "a single result is its own turn"
        );
        jobs.push(due("t0", 1));
        apply(&mut jobs, true);
        let carrier = &jobs[1];
        assert_eq!(carrier.group_tasks, Some(vec!["t0".into(), "t1".into()]));
        let text = carrier.turn_text.as_deref().unwrap();
        assert!(
            text.starts_with("[ATC_RESULTS] 2 tasks: 2 completed\n\n[TASK_ID: t0]"),
            "{text}"
        );
        assert_eq!(carrier.final_text.as_deref(), Some("[TASK_ID: t0]\nresult"));
        assert_eq!(jobs[0].carried_by.as_deref(), Some("job-t0"));
        assert!(plan(&jobs, true).is_empty(), "composed: nothing more to do");
    }

    #[test]
    fn no_batch_composes_nothing_and_other_chats_and_groups_stay_apart() {
        let mut jobs = vec![due("t1", 1), due("t2", 2)];
        assert!(plan(&jobs, false).is_empty());
        jobs[1].target.session_id = "other".into();
        assert!(plan(&jobs, true).is_empty(), "one per chat");
        jobs[1].target.session_id = "s".into();
        jobs[1].options.group = Some("g".into());
        assert!(
            plan(&jobs, true).is_empty(),
            "a group member is its group's"
        );
    }

    #[test]
    fn a_cancelled_member_leaves_and_a_cancelled_carrier_hands_the_turn_on() {
        let mut jobs = vec![due("t1", 1), due("t2", 2), due("t3", 3)];
        apply(&mut jobs, true);
        jobs[1].status = Status::Cancelled;
        apply(&mut jobs, true);
        assert_eq!(jobs[0].group_tasks, Some(vec!["t1".into(), "t3".into()]));
        assert!(!jobs[0].turn_text.as_deref().unwrap().contains("t2"));
        jobs[0].status = Status::Cancelled;
        apply(&mut jobs, true);
        assert_eq!(
            jobs[2].carried_by, None,
            "freed, and alone: its own turn again"
        );
        assert_eq!(jobs[2].group_tasks, None);
        assert_eq!(jobs[2].outbound(), Some(Outbound::Delivering));
    }

    #[test]
    fn a_claimed_batch_is_what_it_is_and_later_results_form_the_next() {
        let mut jobs = vec![due("t1", 1), due("t2", 2)];
        apply(&mut jobs, true);
        jobs[0].delivery.as_mut().unwrap().attempt_started_at =
            Some(Timestamp::from_unix(1_800_000_050));
        jobs.push(due("t3", 3));
        jobs.push(due("t4", 4));
        apply(&mut jobs, true);
        assert_eq!(jobs[0].group_tasks, Some(vec!["t1".into(), "t2".into()]));
        assert_eq!(jobs[2].group_tasks, Some(vec!["t3".into(), "t4".into()]));
        assert_eq!(jobs[3].carried_by.as_deref(), Some("job-t3"));
    }

    fn checking_in(task: &str) -> Job {
        let mut job = due(task, 0);
        job.status = Status::Pending;
        job.outcome = None;
        job.finished_at = None;
        job.check_in = Some(Outbound::Delivering);
        job.final_text = Some(format!("[TASK_ID: {task}]\n[STATUS: running]"));
        job
    }

    #[test]
    fn a_check_in_is_carried_by_a_result_and_never_carries() {
        let mut jobs = vec![checking_in("c1"), checking_in("c2")];
        assert!(
            plan(&jobs, true).is_empty(),
            "check-ins alone go alone: none may carry"
        );
        jobs.push(due("t1", 5));
        apply(&mut jobs, true);
        assert_eq!(
            jobs[2].group_tasks,
            Some(vec!["c1".into(), "c2".into(), "t1".into()])
        );
        assert_eq!(jobs[0].carried_by.as_deref(), Some("job-t1"));
        assert_eq!(jobs[1].carried_by.as_deref(), Some("job-t1"));
        // The carrier's turn lands: each check-in is done, its job plain pending again.
        jobs[2].status = Status::Done;
        jobs[2].delivered_at = Some(Timestamp::from_unix(1_800_000_090));
        apply(&mut jobs, true);
        for job in &jobs[..2] {
            assert_eq!(job.status, Status::Pending);
            assert_eq!((job.check_in, job.check_ins), (None, 1));
            assert_eq!((&job.carried_by, &job.final_text), (&None, &None));
            assert!(job.delivery.is_none());
        }
    }

    #[test]
    fn a_turn_holds_at_most_its_cap() {
        let mut jobs: Vec<Job> = (0..5)
            .map(|i| {
                let mut job = due(&format!("t{i}"), i);
                job.final_text = Some("x".repeat(8_000));
                job
            })
            .collect();
        apply(&mut jobs, true);
        let tasks = jobs[0].group_tasks.clone().unwrap();
        assert_eq!(tasks, ["t0", "t1", "t2"]);
        assert!(jobs[0].turn_text.as_deref().unwrap().chars().count() <= TURN_CHARS);
        assert_eq!(jobs[3].carried_by, None, "the rest waits for the next turn");
    }
}
