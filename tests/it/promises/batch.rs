//! Batches: everything due for one parent chat goes out as one turn (`[ATC_RESULTS] …`),
//! a single result as it always did; a busy parent gets them together; a cancel before the
//! claim recomposes the turn; a batch of unknown outcome is read back as one; the turn is
//! capped; `--no-batch` and `ATC_NO_BATCH=1` keep one result per turn.

use crate::support;

use serde_json::{Value, json};
use support::atc::{carried_tasks, listed_statuses, stdout, turn_of};
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

fn fails(s: &Scene, task: &str) {
    s.poll_replies(task, vec![Reply::json(200, bodies::FINISHED_FAILED_LLM)]);
}

/// The first line, then one block per task, in the order they finished (here: one poll,
/// so registration order).
#[test]
fn everything_due_for_one_chat_goes_out_as_one_turn() {
    let s = Scene::new();
    for task in ["task-a", "task-b", "task-c"] {
        s.watch(task, &[]);
    }
    s.watch("task-d", &["--session", "s-other"]);
    finishes(&s, "task-a", "answer A");
    fails(&s, "task-b");
    finishes(&s, "task-c", "answer C");
    finishes(&s, "task-d", "answer D");
    s.tick(&[]);
    assert_eq!(s.posts().len(), 2, "one turn per chat");
    let turn = s.delivered("s-77");
    assert_eq!(turn.len(), 1);
    let text = &turn[0];
    assert!(
        text.starts_with("[ATC_RESULTS] 3 tasks: 2 completed, 1 failed\n\n[TASK_ID: task-a]"),
        "{text}"
    );
    let (a, b, c) = (
        text.find("[TASK_ID: task-a]").unwrap(),
        text.find("[TASK_ID: task-b]").unwrap(),
        text.find("[TASK_ID: task-c]").unwrap(),
    );
    assert!(a < b && b < c, "{text}");
    assert!(text.contains("answer A") && text.contains("answer C"));
    // Each block is the job's own rendered result, unchanged.
    for task in ["task-a", "task-b", "task-c"] {
        let job = s.job(task);
        assert_eq!(job["status"], "done", "{job}");
        assert!(text.contains(job["final"].as_str().unwrap()), "{task}");
    }
    // One delivery id for the turn: the turn's own; every job it carries points at it.
    let record = s.turn("task-a");
    assert_eq!(s.turn_tasks("task-a"), ["task-a", "task-b", "task-c"]);
    assert_eq!(record["text"].as_str().unwrap(), text);
    for task in ["task-b", "task-c"] {
        assert_eq!(s.job(task)["turn"], record["turn_id"]);
    }
    let ids: Vec<Value> = s
        .posts()
        .iter()
        .map(|p| p.json()["input"][0]["metadata"]["qwenpaw_client_message_id"].clone())
        .collect();
    assert!(ids.contains(&record["turn_id"]), "{ids:?}");
    // The other chat's single result is posted as its own block, byte for byte.
    let other = s.delivered("s-other");
    assert_eq!(other, [s.job("task-d")["final"].as_str().unwrap()]);
    assert_eq!(s.turn_tasks("task-d"), ["task-d"]);
}

#[test]
fn no_batch_keeps_one_result_per_turn_by_flag_or_environment() {
    for how in ["flag", "env"] {
        let s = Scene::new();
        s.watch("task-a", &[]);
        s.watch("task-b", &[]);
        finishes(&s, "task-a", "answer A");
        finishes(&s, "task-b", "answer B");
        let tick = |s: &Scene| match how {
            "flag" => s.tick(&["--no-batch"]).run(),
            _ => s.tick(&[]).env("ATC_NO_BATCH", "1").run(),
        };
        tick(&s);
        assert_eq!(s.posts().len(), 1, "{how}: one per chat per tick");
        assert_eq!(s.status("task-a"), "done", "{how}: oldest first");
        assert_eq!(s.status("task-b"), "delivering", "{how}");
        tick(&s);
        assert_eq!(s.status("task-b"), "done", "{how}");
        let turns = s.delivered("s-77");
        assert_eq!(
            turns,
            [
                s.job("task-a")["final"].as_str().unwrap(),
                s.job("task-b")["final"].as_str().unwrap()
            ],
            "{how}"
        );
    }
}

/// A result that arrives while the parent is busy waits with the one already waiting; both
/// go in one turn when the chat is idle.
#[test]
fn results_due_while_the_parent_is_busy_go_together() {
    let s = Scene::new();
    s.watch("task-a", &[]);
    s.watch("task-b", &[]);
    finishes(&s, "task-a", "answer A");
    s.poll_replies(
        "task-b",
        vec![
            Reply::json(200, bodies::RUNNING),
            Reply::json(200, &bodies::finished_completed("x", "answer B")),
        ],
    );
    s.chats.busy_for("s-77", 2);
    s.tick(&[]);
    assert_eq!(s.status("task-a"), "delivering");
    assert_eq!(s.status("task-b"), "pending");
    s.tick(&[]);
    assert_eq!(s.job("task-b")["turn"], s.job("task-a")["turn"]);
    assert_eq!(s.turn_tasks("task-a"), ["task-a", "task-b"]);
    assert!(s.posts().is_empty(), "nothing into a busy chat");
    s.tick(&[]);
    let turns = s.delivered("s-77");
    assert_eq!(turns.len(), 1, "{turns:?}");
    assert!(
        turns[0].starts_with("[ATC_RESULTS] 2 tasks: 2 completed\n\n[TASK_ID: task-a]"),
        "{}",
        turns[0]
    );
    assert!(turns[0].contains("answer B"));
    assert_eq!(s.status("task-a"), "done");
    assert_eq!(s.status("task-b"), "done");
}

/// A batch composed but not claimed (the parent was busy) is composed again without a
/// cancelled member; cancelling the carrier hands the turn to the others.
#[test]
fn a_cancel_before_the_claim_recomposes_the_turn() {
    for cancelled in ["task-a", "task-b"] {
        let s = Scene::new();
        for task in ["task-a", "task-b", "task-c"] {
            s.watch(task, &[]);
        }
        finishes(&s, "task-a", "answer A");
        finishes(&s, "task-b", "answer B");
        finishes(&s, "task-c", "answer C");
        s.chats.busy_for("s-77", 1);
        s.tick(&[]);
        assert_eq!(s.turn_tasks("task-a"), ["task-a", "task-b", "task-c"]);
        s.atc(["cancel", cancelled])
            .stdout_contains("Cancelled the watch")
            .run();
        s.tick(&[]);
        let turns = s.delivered("s-77");
        assert_eq!(turns.len(), 1, "{cancelled}: {turns:?}");
        assert!(
            turns[0].starts_with("[ATC_RESULTS] 2 tasks: 2 completed"),
            "{cancelled}: {}",
            turns[0]
        );
        assert!(
            !turns[0].contains(&format!("[TASK_ID: {cancelled}]")),
            "{cancelled} left the turn"
        );
        assert_eq!(s.status(cancelled), "cancelled");
        for task in ["task-a", "task-b", "task-c"] {
            if task != cancelled {
                assert_eq!(s.status(task), "done", "{cancelled}: {task}");
                assert!(turns[0].contains(&format!("[TASK_ID: {task}]")));
            }
        }
    }
}

/// A batch whose POST outcome is unknown is read back by its one delivery id: found, every
/// job it carries is done, and nothing is posted again.
#[test]
fn a_batch_of_unknown_outcome_is_read_back_as_one() {
    let s = Scene::new();
    s.watch("task-a", &[]);
    s.watch("task-b", &[]);
    finishes(&s, "task-a", "answer A");
    finishes(&s, "task-b", "answer B");
    s.chats.fault(PostFault::DropAfterStore);
    s.tick(&[]);
    assert_eq!(s.status("task-a"), "unconfirmed");
    assert_eq!(s.status("task-b"), "unconfirmed", "follows its turn");
    s.env.edit_turn("task-a", |turn| {
        turn["delivery"]["last_attempt_at"] = json!("2026-01-01T00:00:00Z");
    });
    s.tick(&[]);
    for task in ["task-a", "task-b"] {
        let job = s.job(task);
        assert_eq!(job["status"], "done", "{job}");
    }
    assert_eq!(s.turn("task-a")["delivery"]["confirmed"], "read-back");
    assert_eq!(s.turn_tasks("task-b"), ["task-a", "task-b"]);
    assert_eq!(s.posts().len(), 1, "never posted again");
    let turns = s.delivered("s-77");
    assert_eq!(turns.len(), 1);
    assert!(turns[0].contains("answer A") && turns[0].contains("answer B"));
}

/// At most 32,000 characters a turn: what does not fit goes in the next one.
#[test]
fn a_turn_is_capped_and_the_rest_goes_in_the_next() {
    let s = Scene::new();
    let tasks = ["task-a", "task-b", "task-c", "task-d", "task-e"];
    for task in tasks {
        s.watch(task, &[]);
        finishes(&s, task, &"x".repeat(9_000));
    }
    s.tick(&[]);
    s.tick(&[]);
    let turns = s.delivered("s-77");
    assert_eq!(
        turns.len(),
        2,
        "{:?}",
        turns.iter().map(String::len).collect::<Vec<_>>()
    );
    assert!(
        turns[0].starts_with("[ATC_RESULTS] 3 tasks"),
        "{}",
        &turns[0][..40]
    );
    assert!(
        turns[1].starts_with("[ATC_RESULTS] 2 tasks"),
        "{}",
        &turns[1][..40]
    );
    for turn in &turns {
        assert!(turn.chars().count() <= 32_000, "{}", turn.chars().count());
    }
    for task in tasks {
        assert_eq!(s.status(task), "done", "{task}");
        let marker = format!("[TASK_ID: {task}]");
        assert_eq!(
            turns.iter().filter(|t| t.contains(&marker)).count(),
            1,
            "{task} in exactly one turn"
        );
    }
}

/// A member watched again for another chat before the batch is claimed leaves it: the
/// batch goes without it, and it goes to its new chat on its own.
#[test]
fn a_member_retargeted_before_the_claim_leaves_the_batch() {
    let s = Scene::new();
    for task in ["task-a", "task-b", "task-c"] {
        s.watch(task, &[]);
    }
    finishes(&s, "task-a", "answer A");
    finishes(&s, "task-b", "answer B");
    finishes(&s, "task-c", "answer C");
    s.chats.busy_for("s-77", 1);
    s.tick(&[]);
    assert_eq!(s.job("task-b")["turn"], s.job("task-a")["turn"]);
    s.watch("task-b", &["--session", "s-new"]);
    s.tick(&[]);
    let turns = s.delivered("s-77");
    assert_eq!(turns.len(), 1, "{turns:?}");
    assert!(
        turns[0].starts_with("[ATC_RESULTS] 2 tasks"),
        "{}",
        turns[0]
    );
    assert!(!turns[0].contains("answer B"));
    let moved = s.delivered("s-new");
    assert_eq!(moved.len(), 1);
    assert!(moved[0].starts_with("[TASK_ID: task-b]") && moved[0].contains("answer B"));
    for task in ["task-a", "task-b", "task-c"] {
        assert_eq!(s.status(task), "done", "{task}");
    }
}

/// Once the batch's POST is out, the turn is what it is: a cancel of a member says its
/// result may be on its way, and a re-watch elsewhere is refused.
#[test]
fn once_claimed_the_batch_is_what_it_is() {
    let s = Scene::new();
    s.watch("task-a", &[]);
    s.watch("task-b", &[]);
    finishes(&s, "task-a", "answer A");
    finishes(&s, "task-b", "answer B");
    s.chats
        .fault(PostFault::SlowAfterStore(std::time::Duration::from_secs(2)));
    s.add_chat("s-new", "default", "console");
    let tick = s.tick_until_posted(&[]);
    s.atc(["watch", "task-b", "--session", "s-new"])
        .status(1)
        .stderr("atc: task-b's result travels in a turn of several results that is being posted to session s-77 (user default, channel console) (or may have been); watching it again could post it twice (`atc status task-b` shows what is known)\n")
        .file_unchanged()
        .run();
    let id = s.turn("task-b")["turn_id"].as_str().unwrap().to_owned();
    s.atc(["cancel", "task-b"])
        .stdout(format!("Cancelled the watch on task-b, but its result travels in a turn of 2 blocks ({id}) that was being posted to session s-77 (user default, channel console) at that moment: it may already be on its way.\n"))
        .run();
    tick.wait();
    assert_eq!(s.status("task-a"), "done");
    assert_eq!(s.status("task-b"), "cancelled");
    let turns = s.delivered("s-77");
    assert_eq!(turns.len(), 1);
    assert!(turns[0].contains("answer A") && turns[0].contains("answer B"));
    assert!(s.delivered("s-new").is_empty());
}

/// `atc status` says which batch a job travels in: in the list and in the detail view.
#[test]
fn status_shows_the_batch_a_job_travels_in() {
    let s = Scene::new();
    for task in ["task-a", "task-b", "task-c"] {
        s.watch(task, &[]);
        finishes(&s, task, "answer");
    }
    s.watch("task-g", &["--group", "nightly"]);
    s.poll_replies("task-g", vec![Reply::json(200, bodies::RUNNING)]);
    s.chats.busy_for("s-77", 1);
    s.tick(&[]);
    let out = s.atc(["status"]).stdout_inspected().file_unchanged().run();
    let list = String::from_utf8_lossy(&out.stdout).into_owned();
    let header: Vec<&str> = list.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        &header[..4],
        ["TASK", "STATUS", "AGE", "GROUP/BATCH"],
        "{list}"
    );
    for task in ["task-a", "task-b", "task-c"] {
        let row = list.lines().find(|l| l.starts_with(task)).unwrap();
        assert!(row.contains("  batch of 3  "), "{row}");
    }
    let row = list.lines().find(|l| l.starts_with("task-g")).unwrap();
    assert!(row.contains("  nightly  "), "{row}");
    // The turn is the batch's one record: every job it carries shows where it stands.
    for task in ["task-a", "task-b", "task-c"] {
        let row = list.lines().find(|l| l.starts_with(task)).unwrap();
        assert!(row.ends_with("waiting for the chat ×1"), "{row}");
    }
    let id = s.turn("task-b")["turn_id"].as_str().unwrap().to_owned();
    s.atc(["status", "task-b"])
        .stdout_contains(
            "batch           its turn carries task-a, task-b, task-c (3 blocks, one turn)\n",
        )
        .stdout_contains(format!("note            finished; goes out in one turn with the other results due for its chat (turn {id}, with task-a and task-c)\n"))
        .stdout_contains(format!("turn            {id} (open; carries task-a (result), task-b (result), task-c (result))\n"))
        .file_unchanged()
        .run();
    s.atc(["status", "task-a"])
        .stdout_contains(
            "batch           its turn carries task-a, task-b, task-c (3 blocks, one turn)\n",
        )
        .stdout_contains(format!("turn            {id} (open; carries task-a (result), task-b (result), task-c (result))\n"))
        .file_unchanged()
        .run();
}

/// A turn that carries one job alone is no batch: the list has no GROUP/BATCH column.
#[test]
fn a_turn_of_one_job_is_no_batch() {
    let s = Scene::new();
    s.watch("task-a", &[]);
    finishes(&s, "task-a", "answer");
    s.tick(&[]);
    assert_eq!(s.turn("task-a")["carries"].as_array().unwrap().len(), 1);
    let list = stdout(&s.atc(["status"]).stdout_inspected().file_unchanged().run());
    let header: Vec<&str> = list.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(&header[..3], ["TASK", "STATUS", "AGE"], "{list}");
    assert!(
        !list.contains("GROUP/BATCH") && !list.contains("batch of"),
        "{list}"
    );
    let full = stdout(&s.atc(["status", "task-a"]).stdout_inspected().run());
    assert!(
        full.contains("\nturn  ") && !full.contains("\nbatch "),
        "{full}"
    );
    // Posted at once and confirmed: no busy chat, no unreachable server, no unknown
    // outcome, no follow-up (its own turn is none).
    for absent in ["busy", "unreachable", "unknown since", "follow-ups"] {
        assert!(!full.contains(&format!("\n{absent} ")), "{absent}: {full}");
    }
    // Where the record counts them, they are said; an unknown outcome only while it is one.
    s.env.edit_turn("task-a", |turn| {
        turn["delivery"]["unreachable"] = json!(2);
        turn["delivery"]["unknown_since"] = json!("2026-01-01T00:00:00Z");
    });
    let full = stdout(&s.atc(["status", "task-a"]).stdout_inspected().run());
    assert!(full.contains("\nunreachable     2\n"), "{full}");
    assert!(!full.contains("\nunknown since "), "{full}");
}

/// A batch given up is one line, on its carrier, naming the tasks it also carries; every
/// job it carries is undelivered with it, and `redeliver` sends the whole turn again.
#[test]
fn a_batch_given_up_is_one_line_and_redelivered_whole() {
    let s = Scene::new();
    s.watch("task-a", &[]);
    s.watch("task-b", &[]);
    finishes(&s, "task-a", "answer A");
    finishes(&s, "task-b", "answer B");
    s.chats.busy_for("s-77", 1);
    s.tick(&[]);
    s.env.edit_turn("task-a", |turn| {
        turn["delivery"]["waiting_since"] = json!("2026-01-01T00:00:00Z");
    });
    s.chats.busy_for("s-77", 1);
    s.tick(&["--busy-deadline", "1h"]).stderr(
        "atc: gave up on task-a (undelivered; the same turn also carries task-b): the parent chat stayed busy past --busy-deadline; `atc status task-a` says more; `atc redeliver task-a` tries again\n",
    );
    assert_eq!(s.status("task-a"), "undelivered");
    assert_eq!(s.status("task-b"), "undelivered");
    s.atc(["redeliver", "task-b"]).stdout_inspected().run();
    s.tick(&[]);
    assert_eq!(s.status("task-a"), "done");
    assert_eq!(s.status("task-b"), "done");
    let turns = s.delivered("s-77");
    assert_eq!(turns.len(), 1);
    assert!(
        turns[0].starts_with("[ATC_RESULTS] 2 tasks"),
        "{}",
        turns[0]
    );
}

/// Found by hand: `atc redeliver A B` was clap's "unexpected argument", so a person with
/// results given up in several chats redelivered them one command each. Each goes again,
/// all or none; tasks whose results shared a turn go again in it together (the second
/// would be "queued already" on its own).
#[test]
fn redeliver_of_several_sends_each_again_and_a_shared_turn_once() {
    // task-a and task-b given up in one turn, task-c in another chat.
    let given_up = || {
        let s = Scene::new();
        s.watch("task-a", &[]);
        s.watch("task-b", &[]);
        s.watch("task-c", &["--session", "s-88", "--user", "bob"]);
        s.watch("task-d", &[]);
        for task in ["task-a", "task-b", "task-c"] {
            finishes(&s, task, &format!("answer {task}"));
        }
        s.poll_replies("task-d", vec![Reply::json(200, bodies::RUNNING)]);
        s.chats.busy_for("s-77", 1);
        s.chats.busy_for("s-88", 1);
        s.tick(&[]);
        for task in ["task-a", "task-c"] {
            s.env.edit_turn(task, |turn| {
                turn["delivery"]["waiting_since"] = json!("2026-01-01T00:00:00Z");
            });
        }
        s.chats.busy_for("s-77", 1);
        s.chats.busy_for("s-88", 1);
        s.tick(&["--busy-deadline", "1h"]).stderr_inspected().run();
        for task in ["task-a", "task-b", "task-c"] {
            assert_eq!(s.status(task), "undelivered", "{task}");
        }
        s
    };
    let s = given_up();
    let shared = s.turn("task-a")["turn_id"].as_str().unwrap().to_owned();
    // A typo in one: nothing is requeued, the one not watched is named.
    s.atc(["redeliver", "task-a", "task-nope", "task-c"])
        .status(1)
        .stderr_contains("atc: no watch for task-nope in ")
        .file_unchanged();
    // One that cannot be (still pending) after one that can: neither is requeued.
    s.atc(["redeliver", "task-c", "task-d"])
        .status(1)
        .stderr_contains("atc: task-d is pending: atc still watches it")
        .file_unchanged();
    s.atc(["redeliver", "task-a", "task-b", "task-c"])
        .stdout(format!(
            "task-a (its turn {shared} goes again, with task-b) goes to session s-77 (user default, channel console) again on the next atc tick, once the chat is idle.\n\
             task-b goes again with task-a, in its turn {shared}.\n\
             task-c goes to session s-88 (user bob, channel console) again on the next atc tick, once the chat is idle.\n"
        ))
        .run();
    assert_eq!(
        s.env.logged_tasks("requeued"),
        ["task-a", "task-b", "task-c"]
    );
    s.tick(&[]);
    for task in ["task-a", "task-b", "task-c"] {
        assert_eq!(s.status(task), "done", "{task}");
    }
    let texts: Vec<String> = [s.delivered("s-77"), s.delivered("s-88")].concat();
    for task in ["task-a", "task-b", "task-c"] {
        let copies = texts
            .iter()
            .filter(|t| t.contains(&format!("answer {task}")))
            .count();
        assert_eq!(copies, 1, "{task}: {texts:?}");
    }
    // Delivered: refused, all of them, and nothing changes.
    s.atc(["redeliver", "task-c", "task-a"])
        .status(1)
        .stderr_contains("atc: task-c was already delivered")
        .file_unchanged();
    // --json: the jobs, in the order given, as `cancel` of several prints them.
    let s = given_up();
    let out = s
        .atc(["--json", "redeliver", "task-c", "task-b", "task-a"])
        .json();
    let delivering = |t: &str| (t.to_owned(), "delivering".to_owned());
    assert_eq!(
        listed_statuses(&out),
        [
            delivering("task-c"),
            delivering("task-b"),
            delivering("task-a")
        ]
    );
}

/// Issue 19: a check-in due with another job's result for the same chat travels in that
/// result's turn (carried, never carrying), once; its job is plain pending again, and its
/// own result later goes alone.
#[test]
fn a_check_in_rides_in_a_results_batch_once_and_the_job_keeps_running() {
    let s = Scene::new();
    s.watch("task-a", &["--check-in", "1h"]);
    s.watch("task-b", &[]);
    s.poll_replies(
        "task-a",
        vec![
            Reply::json(200, bodies::RUNNING),
            Reply::json(200, bodies::RUNNING),
            Reply::json(200, &bodies::finished_completed("x", "answer A")),
        ],
    );
    finishes(&s, "task-b", "answer B");
    // The record's started_at is long past: the first tick checks in, with B's result.
    s.tick(&[]).file(|file| {
        let a = &file["jobs"][0];
        assert_eq!(a["status"], "pending", "{a}");
        assert_eq!(a["check_ins"], 1, "{a}");
        for field in ["check_in", "final", "carried_by", "delivery"] {
            assert!(a.get(field).is_none(), "{field}: {a}");
        }
        let b = &file["jobs"][1];
        assert_eq!(b["status"], "done", "{b}");
        let turn = turn_of(file, "task-b");
        assert_eq!(carried_tasks(turn), ["task-a", "task-b"], "{turn}");
        assert_eq!(turn["carries"][0]["block"], "check_in", "{turn}");
        assert_eq!(turn["carries"][0]["n"], 1, "{turn}");
        assert_eq!(turn["carries"][1]["block"], "result", "{turn}");
    });
    assert_eq!(s.posts().len(), 1, "one turn");
    let turns = s.delivered("s-77");
    assert_eq!(turns.len(), 1, "{turns:?}");
    let text = &turns[0];
    assert!(
        text.starts_with("[ATC_RESULTS] 2 tasks: "),
        "a result carries the check-in: {text}"
    );
    assert_eq!(
        text.matches("[TASK_ID: task-a]\n[STATUS: running]").count(),
        1,
        "{text}"
    );
    assert_eq!(
        text.matches("(check-in 1 of at most 5)").count(),
        1,
        "{text}"
    );
    assert_eq!(text.matches("answer B").count(), 1, "{text}");
    // The turn went by its own delivery id: the one record both jobs point at.
    let id = |post: &support::fake::Recorded| {
        post.json()["input"][0]["metadata"]["qwenpaw_client_message_id"].clone()
    };
    assert_eq!(id(&s.posts()[0]), s.turn("task-b")["turn_id"]);
    // Still running, checked in within the hour: nothing goes.
    s.tick(&[]).run();
    assert_eq!(s.status("task-a"), "pending");
    assert_eq!(s.delivered("s-77").len(), 1);
    // Its result goes alone, by its own id; B's never again.
    s.tick(&[]).run();
    assert_eq!(s.status("task-a"), "done");
    let turns = s.delivered("s-77");
    assert_eq!(turns.len(), 2, "{turns:?}");
    assert_eq!(turns[1], s.job("task-a")["final"].as_str().unwrap());
    assert!(turns[1].contains("answer A") && !turns[1].contains("answer B"));
    let a = s.job("task-a");
    assert_eq!(
        id(&s.posts()[1]),
        json!(format!("atc-{}", a["job_id"].as_str().unwrap()))
    );
    assert_eq!(s.turn("task-a")["turn_id"], id(&s.posts()[1]));
    assert_eq!(s.turn_tasks("task-a"), ["task-a"]);
}
