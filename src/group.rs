//! Fan-in: the members of a group (`atc watch T1 T2 T3 --group NAME`, one parent chat)
//! are delivered together, as one turn, once none of them is still running. Pure: [`plan`]
//! looks at the whole file and says which events to give which members; `pass` applies
//! them through `lifecycle::step`.
//!
//! - While any member is pending, the finished ones are held.
//! - When none is: the earliest-registered member with something to say becomes the
//!   carrier (`Sealed`: its `final` is the group's turn); the others are `Carried` by it.
//!   Cancelled members, skipped ones and silent ones without an answer are left out.
//! - When the carrier's turn moves on (delivered, unconfirmed, undelivered, misrouted),
//!   every carried member follows (`Followed`).
//! - A carrier cancelled before delivering leaves its members to be sealed again (without
//!   the members cancelled meanwhile); one cancelled while its turn was being posted keeps
//!   them, and they follow what that POST did (delivered, or unknown).

use std::collections::BTreeMap;

use crate::describe;
use crate::job::{ChatKey, Job, OnNoAnswer, Outbound, Status};
use crate::lifecycle::{self, CancelledTurn, Event, cancelled_turn};

/// The events the groups in `jobs` need now, by position in `jobs`.
pub fn plan(jobs: &[Job]) -> Vec<(usize, Event)> {
    let mut groups: BTreeMap<(&str, ChatKey), Vec<usize>> = BTreeMap::new();
    for (i, job) in jobs.iter().enumerate() {
        if let Some(name) = job.options.group.as_deref() {
            groups.entry((name, job.chat_key())).or_default().push(i);
        }
    }
    let mut events = Vec::new();
    for ((name, _), mut members) in groups {
        members.sort_by_key(|&i| jobs[i].registered_at);
        plan_one(name, jobs, &members, &mut events);
    }
    events
}

fn plan_one(name: &str, jobs: &[Job], members: &[usize], events: &mut Vec<(usize, Event)>) {
    // A carrier cancelled while its turn was being posted still carries the group: that
    // turn may be in the chat (sealing the others again would post them twice).
    let carrier = members.iter().copied().find(|&i| {
        jobs[i].group_tasks.is_some()
            && (jobs[i].status != Status::Cancelled || lifecycle::may_have_gone_out(&jobs[i]))
    });
    if let Some(c) = carrier {
        let carrier = &jobs[c];
        let moved_on = if carrier.status == Status::Cancelled {
            // Its members follow what its POST did, once that is known.
            (!carrier.in_flight()).then(|| {
                let mut turn = carrier.clone();
                let accepted = carrier.delivery.as_ref().and_then(|d| d.last_http_status);
                if accepted.is_some_and(|s| (200..300).contains(&s)) {
                    turn.status = Status::Done;
                    turn.delivered_at = turn.delivered_at.or(Some(carrier.updated_at));
                } else {
                    turn.status = Status::Unconfirmed;
                    turn.delivery.get_or_insert_with(Default::default).error = Some(format!(
                        "{} was cancelled while it posted the group's turn: whether that turn arrived is unknown",
                        carrier.task_id
                    ));
                }
                turn
            })
        } else {
            carrier
                .outbound()
                .is_some_and(|o| o != Outbound::Delivering)
                .then(|| carrier.clone())
        };
        if let Some(turn) = moved_on {
            for &i in members {
                if jobs[i].carried_by.as_deref() == Some(carrier.job_id.as_str()) {
                    events.push((i, Event::Followed(Box::new(turn.clone()))));
                }
            }
        } else if carrier.turn_text.is_some() && !carrier.in_flight() {
            // Not claimed yet: a member cancelled (or watched again) leaves the turn.
            let contributors: Vec<&Job> = members
                .iter()
                .map(|&i| &jobs[i])
                .filter(|job| {
                    job.job_id == carrier.job_id
                        || job.carried_by.as_deref() == Some(carrier.job_id.as_str())
                            && job.status != Status::Cancelled
                })
                .collect();
            let tasks: Vec<String> = contributors.iter().map(|j| j.task_id.clone()).collect();
            if carrier.group_tasks.as_ref() != Some(&tasks) {
                let text = describe::group_text(name, &contributors);
                events.push((c, Event::Sealed { text, tasks }));
            }
        }
        return;
    }
    // Only members still waiting for the carrier's turn are sealed again: one cancelled
    // (or whose turn already moved on) keeps its `carried_by` and takes no `Unsealed`, and
    // waiting for it would hold the others forever.
    // A carrier cancelled after its claim: its members follow where the turn may have
    // landed (or wait for its POST's outcome) instead.
    let mut held = false;
    let mut orphans = Vec::new();
    for &i in members {
        let job = &jobs[i];
        let Some(by) = job.carried_by.as_deref() else {
            continue;
        };
        let cancelled = members
            .iter()
            .find(|&&c| jobs[c].job_id == by && jobs[c].status == Status::Cancelled);
        match cancelled.map(|&c| cancelled_turn(&jobs[c])) {
            Some(CancelledTurn::Wait) => held = true,
            Some(CancelledTurn::Follow(turn)) if job.outbound() == Some(Outbound::Delivering) => {
                held = true;
                events.push((i, Event::Followed(turn)));
            }
            Some(CancelledTurn::Follow(_)) => {}
            _ if job.outbound() == Some(Outbound::Delivering) => orphans.push(i),
            _ => {}
        }
    }
    if !orphans.is_empty() || held {
        events.extend(orphans.into_iter().map(|i| (i, Event::Unsealed)));
        return;
    }
    let complete = members
        .iter()
        .all(|&i| jobs[i].status != Status::Pending && !jobs[i].in_flight());
    let contributors: Vec<&Job> = members
        .iter()
        .map(|&i| &jobs[i])
        .filter(|job| contributes(job))
        .collect();
    let Some(first) = contributors.first().filter(|_| complete) else {
        return;
    };
    let text = describe::group_text(name, &contributors);
    let tasks: Vec<String> = contributors.iter().map(|job| job.task_id.clone()).collect();
    for &i in members {
        let job = &jobs[i];
        if job.job_id == first.job_id {
            events.push((
                i,
                Event::Sealed {
                    text: text.clone(),
                    tasks: Vec::clone(&tasks),
                },
            ));
        } else if contributes(job) {
            events.push((
                i,
                Event::Carried {
                    carrier: first.job_id.clone(),
                },
            ));
        }
    }
}

/// Whether a member has something for the group's turn: its result, or (notices on) the
/// notice that it ended without one.
fn contributes(job: &Job) -> bool {
    match job.status {
        Status::Delivering => true,
        status if status.ends_without_answer() => job.options.on_no_answer == OnNoAnswer::Notify,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{Delivery, TaskOutcome};
    use crate::time::Timestamp;

    fn member(task: &str, status: Status, at: u64) -> Job {
        let mut job = Job::sample(status);
        job.job_id = format!("job-{task}");
        job.task_id = task.to_owned();
        job.options.group = Some("g".into());
        job.registered_at = Timestamp::from_unix(1_800_000_000 + at);
        if status == Status::Delivering {
            job.final_text = Some(format!("[TASK_ID: {task}]\nresult"));
            job.outcome = Some(TaskOutcome::Completed);
            job.delivery = Some(Delivery::default());
        }
        job
    }

    #[test]
    fn members_are_held_until_none_is_pending() {
        let jobs = [
            member("t1", Status::Delivering, 1),
            member("t2", Status::Pending, 2),
        ];
        assert!(plan(&jobs).is_empty());
    }

    #[test]
    fn a_complete_group_is_sealed_into_its_first_members_turn() {
        let mut lost = member("t3", Status::Lost, 3);
        lost.last_error = Some("Task not found: t3".into());
        let jobs = [
            member("t2", Status::Delivering, 2),
            member("t1", Status::Delivering, 1),
            lost,
            member("t4", Status::Cancelled, 0),
        ];
        let events = plan(&jobs);
        assert_eq!(events.len(), 3, "{events:?}");
        let (carrier, Event::Sealed { text, tasks }) = &events[0] else {
            panic!("{events:?}")
        };
        assert_eq!(*carrier, 1, "t1 registered first (t4 is cancelled)");
        assert_eq!(tasks, &["t1", "t2", "t3"]);
        assert!(
            text.starts_with("[ATC_GROUP: g] 3 tasks: 2 completed, 1 lost\n\n[TASK_ID: t1]"),
            "{text}"
        );
        assert_eq!(
            events[1],
            (
                0,
                Event::Carried {
                    carrier: "job-t1".into()
                }
            )
        );
        assert_eq!(
            events[2],
            (
                2,
                Event::Carried {
                    carrier: "job-t1".into()
                }
            )
        );
    }

    #[test]
    fn carried_members_follow_their_carrier_and_an_orphan_is_unsealed() {
        let mut carrier = member("t1", Status::Done, 1);
        carrier.group_tasks = Some(vec!["t1".into(), "t2".into()]);
        let mut other = member("t2", Status::Delivering, 2);
        other.carried_by = Some("job-t1".into());
        let jobs = [carrier.clone(), other.clone()];
        assert_eq!(
            plan(&jobs),
            [(1, Event::Followed(Box::new(carrier.clone())))]
        );

        carrier.status = Status::Delivering;
        assert!(
            plan(&[carrier.clone(), other.clone()]).is_empty(),
            "still on its way"
        );

        carrier.status = Status::Cancelled;
        assert_eq!(plan(&[carrier, other]), [(1, Event::Unsealed)]);
    }

    #[test]
    fn a_cancelled_carrier_and_member_leave_the_live_one_to_be_sealed_again() {
        let mut carrier = member("t1", Status::Cancelled, 1);
        carrier.group_tasks = Some(vec!["t1".into(), "t2".into(), "t3".into()]);
        let mut cancelled = member("t2", Status::Cancelled, 2);
        cancelled.carried_by = Some("job-t1".into());
        let mut live = member("t3", Status::Delivering, 3);
        live.carried_by = Some("job-t1".into());
        assert_eq!(
            plan(&[carrier.clone(), cancelled.clone(), live.clone()]),
            [(2, Event::Unsealed)]
        );
        live.carried_by = None;
        let events = plan(&[carrier, cancelled, live]);
        assert!(
            matches!(&events[..], [(2, Event::Sealed { tasks, .. })] if tasks == &["t3"]),
            "{events:?}"
        );
    }

    #[test]
    fn a_carrier_cancelled_during_its_post_keeps_its_members_who_follow_the_post() {
        let mut carrier = member("t1", Status::Cancelled, 1);
        carrier.group_tasks = Some(vec!["t1".into(), "t2".into()]);
        carrier.delivery = Some(Delivery {
            attempt_started_at: Some(Timestamp::from_unix(1_800_000_100)),
            ..Delivery::default()
        });
        let mut other = member("t2", Status::Delivering, 2);
        other.carried_by = Some("job-t1".into());
        assert!(
            plan(&[carrier.clone(), other.clone()]).is_empty(),
            "in flight: wait for the POST's outcome, never seal again"
        );
        let d = carrier.delivery.as_mut().unwrap();
        d.attempt_started_at = None;
        d.last_http_status = Some(200);
        let events = plan(&[carrier.clone(), other.clone()]);
        assert!(
            matches!(&events[..], [(1, Event::Followed(turn))] if turn.status == Status::Done),
            "{events:?}"
        );
        let d = carrier.delivery.as_mut().unwrap();
        d.last_http_status = None;
        d.unknown_since = Some(Timestamp::from_unix(1_800_000_200));
        let events = plan(&[carrier, other]);
        assert!(
            matches!(&events[..], [(1, Event::Followed(turn))] if turn.status == Status::Unconfirmed),
            "{events:?}"
        );
    }

    #[test]
    fn groups_are_per_parent_chat() {
        let a = member("t1", Status::Delivering, 1);
        let mut b = member("t2", Status::Pending, 2);
        b.target.session_id = "another".into();
        let events = plan(&[a, b]);
        assert!(
            matches!(events[..], [(0, Event::Sealed { .. })]),
            "{events:?}"
        );
    }
}
