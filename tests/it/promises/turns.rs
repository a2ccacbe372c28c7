//! Turns as records (issue 25): the three defects of the bookkeeping that kept a turn on
//! the job that carried it, each reproduced against the fake QwenPaw as a person would
//! meet it, and what the turn's own record does instead.

use crate::support;

use std::time::Duration;

use support::bodies;
use support::chats::PostFault;
use support::fake::Reply;
use support::scene::Scene;

fn finishes(s: &Scene, task: &str, text: &str) {
    s.poll_replies(
        task,
        vec![Reply::json(200, &bodies::finished_completed("x", text))],
    );
}

/// How many of the chat's turns hold `text`, and how many times in all.
fn copies(s: &Scene, session: &str, text: &str) -> usize {
    s.delivered(session)
        .iter()
        .map(|turn| turn.matches(text).count())
        .sum()
}

/// Defect 1: three results for one idle chat go out as one turn; the server stores it but
/// answers slowly; meanwhile its first job is cancelled (it says the result may already be
/// on its way). The turn was claimed: it is what it is, the other two follow it, and no
/// later tick posts them again (the old carrier's members were composed into a new batch
/// and each result went in twice).
#[test]
fn a_cancel_while_a_batch_is_being_posted_posts_nothing_twice() {
    let s = Scene::new();
    for (task, answer) in [
        ("task-a", "answer A"),
        ("task-b", "answer B"),
        ("task-c", "answer C"),
    ] {
        s.watch(task, &[]);
        finishes(&s, task, answer);
    }
    s.chats
        .fault(PostFault::SlowAfterStore(Duration::from_secs(2)));
    let tick = s.tick_until_posted(&[]);
    s.atc(["cancel", "task-a"])
        .stdout_contains(
            "Cancelled the watch on task-a, but its result travels in a turn of 3 blocks",
        )
        .stdout_contains("it may already be on its way")
        .run();
    tick.wait();
    for _ in 0..3 {
        s.tick(&[]);
    }
    assert_eq!(s.posts().len(), 1, "one POST: the claimed turn");
    for answer in ["answer A", "answer B", "answer C"] {
        assert_eq!(
            copies(&s, "s-77", answer),
            1,
            "{answer} is in the chat once"
        );
    }
    assert_eq!(s.status("task-a"), "cancelled");
    assert_eq!(s.status("task-b"), "done");
    assert_eq!(s.status("task-c"), "done");
    let turn = s.turn("task-b");
    assert_eq!(turn["state"], "delivered");
    assert_eq!(s.turn_tasks("task-a"), ["task-a", "task-b", "task-c"]);
    s.atc(["status", "task-a"])
        .stdout_contains("it was delivered anyway")
        .run();
    s.atc(["watch", "task-a", "--session", "s-77"])
        .status(1)
        .stderr_contains("watching it again could post it twice")
        .run();
}

/// Defect 2: a pending job's check-in rides in another job's turn, waiting for a busy
/// parent; `cancel --check-ins` turns it off; that turn goes out; then the child finishes.
/// Its result goes out (it became `done` with no attempt, in no chat, following the turn
/// its check-in had left, which went out with an empty block counted as "1 other").
#[test]
fn a_batched_check_in_turned_off_leaves_its_turn_and_the_result_still_arrives() {
    let s = Scene::new();
    s.watch("task-t", &["--check-in", "1s"]);
    s.watch("task-r", &[]);
    s.poll_replies(
        "task-t",
        vec![
            Reply::json(200, bodies::RUNNING),
            Reply::json(200, bodies::RUNNING),
            Reply::json(200, &bodies::finished_completed("x", "answer T")),
        ],
    );
    finishes(&s, "task-r", "answer R");
    // The parent is busy: the turn composed of R's result and T's check-in waits.
    s.chats.busy_for("s-77", 1);
    s.tick(&[]);
    assert_eq!(s.turn_tasks("task-r"), ["task-t", "task-r"]);
    assert_eq!(s.turn("task-r")["carries"][0]["block"], "check_in");
    s.atc(["cancel", "task-t", "--check-ins"])
        .stdout(
            "No more check-ins for task-t; still watching it (its result comes back as usual).\n",
        )
        .file(|file| {
            let turn = support::atc::turn_of(file, "task-r");
            assert_eq!(support::atc::carried_tasks(turn), ["task-r"], "{turn}");
            assert!(
                !turn["text"].as_str().unwrap().contains("[STATUS: running]"),
                "{turn}"
            );
        })
        .run();
    // R's turn goes out without the check-in; T is still running.
    s.tick(&[]);
    assert_eq!(s.status("task-r"), "done");
    assert_eq!(s.status("task-t"), "pending");
    assert_eq!(copies(&s, "s-77", "answer T"), 0);
    // T finishes: its result is owed, and goes out in a turn of its own.
    s.tick(&[]);
    s.tick(&[]);
    assert_eq!(s.status("task-t"), "done");
    assert_eq!(s.status("task-r"), "done");
    assert_eq!(
        copies(&s, "s-77", "answer T"),
        1,
        "T's result is in the chat"
    );
    assert_eq!(copies(&s, "s-77", "answer R"), 1);
    assert_eq!(
        copies(&s, "s-77", "[STATUS: running]"),
        0,
        "no check-in went out"
    );
    for turn in s.delivered("s-77") {
        let header = turn.lines().next().unwrap_or("");
        assert!(!header.contains("other"), "{header}");
    }
    let t = s.turn("task-t");
    assert_eq!(t["state"], "delivered");
    assert!(t["delivery"]["attempts"].as_u64().unwrap() >= 1, "{t}");
}

/// Defect 3: a turn of two results refused by the server: both results are `error` (the
/// second stayed `delivering`, "in a batch's turn", until someone ran `redeliver`), one
/// give-up line names both, and `doctor` counts two results in one turn.
#[test]
fn a_refused_batch_gives_up_every_result_it_carries() {
    let s = Scene::new();
    s.watch("task-a", &[]);
    s.watch("task-b", &[]);
    finishes(&s, "task-a", "answer A");
    finishes(&s, "task-b", "answer B");
    s.chats.fault(PostFault::UnknownAgent);
    s.tick(&[]).stderr(
        "atc: gave up on task-a (error; the same turn also carries task-b): the server refused the delivery (HTTP 404); `atc status task-a` shows its answer; `atc redeliver task-a` tries again once that is fixed\n",
    );
    assert_eq!(s.status("task-a"), "error");
    assert_eq!(s.status("task-b"), "error");
    assert_eq!(s.turn("task-b")["state"], "refused");
    s.tick(&[]).file_unchanged();
    s.healthy();
    let said = s.atc(["doctor"]).doctor_said(1);
    assert!(
        said.contains("results that need a person: 2 refused (error) (in 1 turn)"),
        "{said}"
    );
    // Redelivered, the turn goes again whole, once.
    s.atc(["redeliver", "task-b"])
        .stdout_contains("its turn")
        .stdout_contains("goes again, with task-a")
        .run();
    s.tick(&[]);
    assert_eq!(s.status("task-a"), "done");
    assert_eq!(s.status("task-b"), "done");
    assert_eq!(copies(&s, "s-77", "answer A"), 1);
    assert_eq!(copies(&s, "s-77", "answer B"), 1);
}
