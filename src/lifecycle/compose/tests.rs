//! The composer's rules: which blocks share a turn, in what order, and what leaves it.

use super::*;
use crate::job::{Status, TaskOutcome, Watch};
use crate::turn::TurnState;

fn at(secs: u64) -> Timestamp {
    Timestamp::from_unix(1_800_000_000 + secs)
}

/// A result due for the sample chat, its task `task`, finished at `finished`.
fn due(task: &str, finished: u64) -> Job {
    let mut job = Job::sample(Watch::Finished);
    job.job_id = format!("job-{task}");
    job.task_id = task.to_owned();
    job.final_text = Some(format!("[TASK_ID: {task}]\nresult"));
    job.outcome = Some(TaskOutcome::Completed);
    job.finished_at = Some(at(finished));
    job.registered_at = at(finished);
    job
}

fn file(jobs: Vec<Job>) -> JobFile {
    JobFile {
        version: crate::job_file::VERSION,
        jobs,
        ..JobFile::default()
    }
}

fn compose_all(file: &mut JobFile, batch: bool) {
    let limits = crate::settings::default_limits();
    compose(file, batch, at(100), &limits, &mut |_| {});
}

fn tasks(turn: &Turn) -> Vec<&str> {
    turn.carries.iter().map(|b| b.task_id.as_str()).collect()
}

#[test]
fn one_result_is_its_own_turn_byte_for_byte_and_two_are_one_turn_in_finishing_order() {
    let mut f = file(vec![due("t1", 5)]);
    compose_all(&mut f, true);
    assert_eq!(f.turns.len(), 1);
    assert_eq!(f.turns[0].text.as_deref(), Some("[TASK_ID: t1]\nresult"));
    assert_eq!(f.turns[0].turn_id, "atc-job-t1");
    assert_eq!(f.jobs[0].turn.as_deref(), Some("atc-job-t1"));
    // Another result due for the same chat joins the open turn.
    f.jobs.push(due("t0", 1));
    compose_all(&mut f, true);
    assert_eq!(f.turns.len(), 1, "one open turn a chat");
    assert_eq!(tasks(&f.turns[0]), ["t0", "t1"]);
    let text = f.turns[0].text.as_deref().unwrap();
    assert!(
        text.starts_with("[ATC_RESULTS] 2 tasks: 2 completed\n\n[TASK_ID: t0]"),
        "{text}"
    );
    assert!(
        f.jobs
            .iter()
            .all(|j| j.turn.as_deref() == Some("atc-job-t1"))
    );
    assert!(
        plan(&f.jobs, &f.turns, true, at(100)).is_empty(),
        "composed: nothing more to do"
    );
}

#[test]
fn no_batch_gives_each_its_own_turn_and_other_chats_and_groups_stay_apart() {
    let mut f = file(vec![due("t1", 1), due("t2", 2)]);
    compose_all(&mut f, false);
    assert_eq!(f.turns.len(), 2);
    assert!(f.turns.iter().all(|t| t.carries.len() == 1));
    let mut f = file(vec![due("t1", 1), due("t2", 2)]);
    f.jobs[1].target.session_id = "other".into();
    compose_all(&mut f, true);
    assert_eq!(f.turns.len(), 2, "one per chat");
    let mut f = file(vec![due("t1", 1), due("t2", 2)]);
    f.jobs[1].options.group = Some("g".into());
    compose_all(&mut f, true);
    assert_eq!(f.turns.len(), 2);
    assert!(f.turns.iter().any(|t| t.group.as_deref() == Some("g")));
}

#[test]
fn a_cancelled_member_leaves_an_open_turn_and_the_last_one_out_drops_it() {
    let mut f = file(vec![due("t1", 1), due("t2", 2), due("t3", 3)]);
    compose_all(&mut f, true);
    let limits = crate::settings::default_limits();
    for i in [1, 0, 2] {
        let turn = f.turn_of(&f.jobs[i]).cloned();
        let cancel = lifecycle::Event::Cancelled;
        f.jobs[i] = lifecycle::step(&f.jobs[i], turn.as_ref(), cancel, at(50), &limits).job;
        tidy(&mut f, at(50), &limits);
        match i {
            1 => {
                assert_eq!(tasks(&f.turns[0]), ["t1", "t3"]);
                assert!(!f.turns[0].text.as_deref().unwrap().contains("t2"));
            }
            0 => {
                assert_eq!(tasks(&f.turns[0]), ["t3"]);
                assert_eq!(
                    f.turns[0].text.as_deref(),
                    Some("[TASK_ID: t3]\nresult"),
                    "alone: its own block again"
                );
            }
            _ => assert!(f.turns.is_empty(), "nothing left to carry"),
        }
    }
}

#[test]
fn a_claimed_turn_is_what_it_is_and_later_results_form_the_next() {
    let mut f = file(vec![due("t1", 1), due("t2", 2)]);
    compose_all(&mut f, true);
    f.turns[0].state = TurnState::Claimed;
    f.turns[0].delivery.attempts = 1;
    f.turns[0].delivery.attempt_started_at = Some(at(50));
    let limits = crate::settings::default_limits();
    // A member cancelled after the claim stays in it.
    let turn = f.turn_of(&f.jobs[1]).cloned();
    let cancel = lifecycle::Event::Cancelled;
    f.jobs[1] = lifecycle::step(&f.jobs[1], turn.as_ref(), cancel, at(60), &limits).job;
    f.jobs.push(due("t3", 3));
    f.jobs.push(due("t4", 4));
    compose_all(&mut f, true);
    assert_eq!(tasks(&f.turns[0]), ["t1", "t2"], "claimed: immutable");
    assert_eq!(tasks(&f.turns[1]), ["t3", "t4"]);
    assert_eq!(f.jobs[1].turn.as_deref(), Some(f.turns[0].turn_id.as_str()));
}

fn checking_in(task: &str, at_secs: u64) -> Job {
    let mut job = Job::sample(Watch::Pending);
    job.job_id = format!("job-{task}");
    job.task_id = task.to_owned();
    job.check_in = true;
    job.last_check_in_at = Some(at(at_secs));
    job.started_at = Some(at(0));
    job
}

#[test]
fn a_check_in_and_a_result_due_together_are_one_turn_each_block_once() {
    let mut f = file(vec![checking_in("c1", 2), due("t1", 5)]);
    compose_all(&mut f, true);
    assert_eq!(f.turns.len(), 1);
    let turn = &f.turns[0];
    assert_eq!(tasks(turn), ["c1", "t1"]);
    assert_eq!(turn.carries[0].kind, BlockKind::CheckIn { n: 1 });
    assert_eq!(turn.turn_id, "atc-job-c1-c1");
    let text = turn.text.as_deref().unwrap();
    assert!(
        text.starts_with("[ATC_RESULTS] 2 tasks: 1 running, 1 completed"),
        "{text}"
    );
    // The turn lands: the check-in owes nothing more, the result is delivered.
    f.turns[0].state = TurnState::Delivered;
    let shown = |j: &Job| crate::status::status(j, f.turn_of(j));
    assert_eq!(crate::status::owes(&f.jobs[0], f.turn_of(&f.jobs[0])), None);
    assert_eq!(
        crate::status::check_in(&f.jobs[0], f.turn_of(&f.jobs[0])),
        Some("delivered")
    );
    assert_eq!(shown(&f.jobs[1]), Status::Done);
}

/// A batch's blocks go in the order each became due: a check-in at its own time,
/// among results and other check-ins, whatever the order of the file.
#[test]
fn a_batch_orders_check_ins_and_results_by_when_each_became_due() {
    let mut f = file(vec![
        due("t5", 5),
        checking_in("c4", 4),
        checking_in("c2", 2),
        due("t1", 1),
    ]);
    compose_all(&mut f, true);
    assert_eq!(f.turns.len(), 1);
    assert_eq!(tasks(&f.turns[0]), ["t1", "c2", "c4", "t5"]);
}

#[test]
fn a_turn_holds_at_most_its_cap() {
    let jobs: Vec<Job> = (0..5)
        .map(|i| {
            let mut job = due(&format!("t{i}"), i);
            job.final_text = Some("x".repeat(8_000));
            job
        })
        .collect();
    let mut f = file(jobs);
    compose_all(&mut f, true);
    assert_eq!(f.turns.len(), 1, "the rest waits for the next turn");
    assert_eq!(tasks(&f.turns[0]), ["t0", "t1", "t2"]);
    assert!(f.turns[0].text.as_deref().unwrap().chars().count() <= TURN_CHARS);
    assert_eq!(f.jobs[3].turn, None);
}

fn member(task: &str, watch: Watch, registered: u64) -> Job {
    let mut job = due(task, registered);
    job.watch = watch;
    job.options.group = Some("g".into());
    if watch == Watch::Pending {
        job.final_text = None;
        job.outcome = None;
    }
    job
}

#[test]
fn a_group_is_held_until_none_is_pending_then_sealed_in_registration_order() {
    let mut f = file(vec![
        member("t2", Watch::Finished, 2),
        member("t1", Watch::Pending, 1),
    ]);
    compose_all(&mut f, true);
    assert!(f.turns.is_empty(), "held while a member runs");
    f.jobs[1] = member("t1", Watch::Finished, 1);
    let mut lost = member("t3", Watch::Lost, 3);
    lost.last_error = Some("Task not found: t3".into());
    lost.notice = true;
    f.jobs.push(lost);
    let mut cancelled = member("t4", Watch::Cancelled, 0);
    cancelled.turn = None;
    f.jobs.push(cancelled);
    compose_all(&mut f, true);
    assert_eq!(f.turns.len(), 1);
    let turn = &f.turns[0];
    assert_eq!(turn.group.as_deref(), Some("g"));
    assert_eq!(tasks(turn), ["t1", "t2", "t3"]);
    assert_eq!(turn.carries[2].kind, BlockKind::Notice);
    let text = turn.text.as_deref().unwrap();
    assert!(
        text.starts_with("[ATC_GROUP: g] 3 tasks: 2 completed, 1 lost\n\n[TASK_ID: t1]"),
        "{text}"
    );
    assert_eq!(turn.turn_id, "atc-job-t1");
}

#[test]
fn a_group_member_cancelled_before_the_claim_leaves_its_turn_and_one_after_stays() {
    let mut f = file(vec![
        member("t1", Watch::Finished, 1),
        member("t2", Watch::Finished, 2),
        member("t3", Watch::Finished, 3),
    ]);
    compose_all(&mut f, true);
    let limits = crate::settings::default_limits();
    let turn = f.turn_of(&f.jobs[1]).cloned();
    let cancel = lifecycle::Event::Cancelled;
    f.jobs[1] = lifecycle::step(&f.jobs[1], turn.as_ref(), cancel, at(50), &limits).job;
    tidy(&mut f, at(50), &limits);
    assert_eq!(tasks(&f.turns[0]), ["t1", "t3"]);
    assert!(
        f.turns[0]
            .text
            .as_deref()
            .unwrap()
            .starts_with("[ATC_GROUP: g] 2 tasks")
    );
    f.turns[0].state = TurnState::Claimed;
    let turn = f.turn_of(&f.jobs[2]).cloned();
    let cancel = lifecycle::Event::Cancelled;
    f.jobs[2] = lifecycle::step(&f.jobs[2], turn.as_ref(), cancel, at(60), &limits).job;
    tidy(&mut f, at(60), &limits);
    assert_eq!(tasks(&f.turns[0]), ["t1", "t3"], "claimed: it stays");
}

#[test]
fn a_turn_given_up_and_redelivered_is_composed_anew_with_the_jobs_that_follow_it() {
    let mut f = file(vec![due("t1", 1), due("t2", 2)]);
    compose_all(&mut f, true);
    let limits = crate::settings::default_limits();
    f.turns[0].state = TurnState::Misrouted;
    assert!(
        f.jobs
            .iter()
            .all(|j| crate::status::status(j, f.turn_of(j)) == Status::Misrouted)
    );
    // One of them is watched again elsewhere: its record is replaced.
    f.jobs.remove(1);
    let reopen = TurnEvent::Redeliver {
        create_session: false,
    };
    f.turns[0] = turn::step(&f.turns[0], reopen, at(20), &limits).turn;
    compose_all(&mut f, true);
    assert_eq!(
        tasks(&f.turns[0]),
        ["t1"],
        "the job gone is not posted in it"
    );
    assert_eq!(f.turns[0].text.as_deref(), Some("[TASK_ID: t1]\nresult"));
    assert_eq!(
        crate::status::status(&f.jobs[0], f.turn_of(&f.jobs[0])),
        Status::Delivering
    );
}

#[test]
fn a_redelivered_turn_and_one_still_waiting_become_one() {
    let mut f = file(vec![due("t1", 1)]);
    compose_all(&mut f, true);
    let limits = crate::settings::default_limits();
    f.turns[0].state = TurnState::Undelivered;
    f.jobs.push(due("t2", 2));
    compose_all(&mut f, true);
    assert_eq!(f.turns.len(), 2);
    let reopen = TurnEvent::Redeliver {
        create_session: false,
    };
    f.turns[0] = turn::step(&f.turns[0], reopen, at(20), &limits).turn;
    compose_all(&mut f, true);
    assert_eq!(f.turns.len(), 1, "merged into the oldest");
    assert_eq!(tasks(&f.turns[0]), ["t1", "t2"]);
    assert!(
        f.jobs
            .iter()
            .all(|j| j.turn.as_deref() == Some("atc-job-t1"))
    );
}

/// The cap counts each block with its separator, the blocks already in the open turn
/// included: a block that brings the turn to the cap exactly joins; one character more
/// waits for the next turn.
#[test]
fn a_block_joins_an_open_turn_up_to_the_cap_to_the_character() {
    let sized = |task: &str, finished: u64, len: usize| {
        let mut job = due(task, finished);
        job.final_text = Some("x".repeat(len));
        assert_eq!(chars(&job, BlockKind::Result), len);
        job
    };
    for (extra, joins) in [(0, true), (1, false)] {
        let mut f = file((0..4).map(|i| sized(&format!("t{i}"), i, 7_000)).collect());
        compose_all(&mut f, true);
        assert_eq!(tasks(&f.turns[0]), ["t0", "t1", "t2", "t3"]);
        let used = describe::BATCH_HEADER_MAX + 4 * (7_000 + 2);
        f.jobs.push(sized("t4", 4, TURN_CHARS - used - 2 + extra));
        compose_all(&mut f, true);
        let first = tasks(&f.turns[0]);
        assert_eq!(first.contains(&"t4"), joins, "{extra}: {first:?}");
        assert_eq!(f.turns.len(), 1, "what does not fit waits");
        assert_eq!(f.jobs[4].turn.is_some(), joins);
    }
}

/// A cancelled job whose turn is opened again (`redeliver` of another block it carried)
/// leaves it: the turn goes on without its block, and the job no longer names the turn
/// (its status would otherwise say the result went out with it).
#[test]
fn a_cancelled_job_leaves_a_turn_opened_again_and_names_it_no_more() {
    let limits = crate::settings::default_limits();
    let mut f = file(vec![due("t1", 1), due("t2", 2), due("t3", 3)]);
    compose_all(&mut f, true);
    assert_eq!(tasks(&f.turns[0]), ["t1", "t2", "t3"]);
    f.jobs[1].watch = Watch::Cancelled;
    tidy(&mut f, at(60), &limits);
    assert_eq!(tasks(&f.turns[0]), ["t1", "t3"]);
    assert_eq!(f.jobs[1].turn, None);
    assert!(f.jobs[0].turn.is_some() && f.jobs[2].turn.is_some());
}

/// A job that names a turn which does not carry what it owes now (a landed check-in's
/// turn, its result due since) is free: its result goes in a turn of its own.
#[test]
fn a_job_naming_a_landed_turn_that_lacks_its_block_is_composed_again() {
    let mut f = file(vec![checking_in("c1", 2)]);
    compose_all(&mut f, true);
    f.turns[0].state = TurnState::Delivered;
    let landed = f.turns[0].turn_id.clone();
    let mut finished = due("c1", 5);
    finished.turn = Some(landed.clone());
    f.jobs[0] = finished;
    compose_all(&mut f, true);
    assert_eq!(f.turns.len(), 2);
    assert_eq!(f.turns[1].carries[0].kind, BlockKind::Result);
    assert_eq!(f.jobs[0].turn.as_ref(), Some(&f.turns[1].turn_id));
    assert_ne!(f.jobs[0].turn, Some(landed));
}

/// `redeliver --create-session` of a block waiting in an open turn: it leaves and joins
/// again, the turn's blocks and text unchanged, and the turn takes the leave to start
/// the chat (else its POST would be misrouted again).
#[test]
fn a_member_given_leave_to_start_the_chat_gives_it_to_its_open_turn() {
    let mut f = file(vec![due("t1", 1), due("t2", 2)]);
    compose_all(&mut f, true);
    let before = f.turns[0].clone();
    assert!(!before.create_session);
    f.jobs[1].options.create_session = true;
    f.jobs[1].turn = None;
    compose_all(&mut f, true);
    assert_eq!(f.turns.len(), 1);
    assert_eq!(
        (&f.turns[0].carries, &f.turns[0].text),
        (&before.carries, &before.text)
    );
    assert!(f.turns[0].create_session);
    assert_eq!(f.jobs[1].turn.as_ref(), Some(&before.turn_id));
}
