//! The delivery guarantees, against the fake QwenPaw's chats (`support::chats`): the right
//! chat, never dropped while the parent is busy, exactly once (read-back), the parent
//! always hears (notices), what is delivered (empty answers, fork branches), fan-in groups,
//! and `atc redeliver`.

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::atc::turn_of;
use support::bodies;
use support::chats::PostFault;
use support::fake::Reply;
use support::scene::Scene;

const TASK: &str = "task-3f9a0c1b2d4e";

fn finished(s: &Scene, task: &str) {
    s.poll_replies(task, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
}

// ---------------------------------------------------------------------------------------
// 1. The right chat

#[test]
fn a_wrong_user_is_refused_at_watch_and_names_the_right_one() {
    let s = Scene::new();
    s.add_chat("s-77", "alice", "console");
    s.add_chat("s-77", "alice", "discord");
    s.atc(["watch", TASK, "--session", "s-77", "--user", "bob"])
        .status(1)
        .stderr_contains("no chat with session s-77 (user bob, channel console)")
        .stderr_contains("chats with session id s-77: user alice on console; user alice on discord")
        .no_file();
    s.atc(["watch", TASK, "--session", "s-99"])
        .status(1)
        .stderr_contains(
            "agent 'default' has no chat with session id s-99 at all (is --agent right?)",
        )
        .no_file();
    s.atc([
        "watch",
        TASK,
        "--session",
        "s-77",
        "--user",
        "alice",
        "--agent",
        "nobody",
    ])
    .status(1)
    .stderr_contains("no chat with session s-77 (user alice, channel console) for agent 'nobody'")
    .no_file();
}

/// Found by hand: a session id pasted with a space before it, or in another case, was
/// told "no chat with session id  s-77 at all (is --agent right?)", the space unseen.
#[test]
fn a_session_with_spaces_around_it_or_in_another_case_names_the_one_meant() {
    let s = Scene::new();
    s.add_chat("s-77", "default", "console");
    for given in [" s-77", "s-77 ", "S-77"] {
        s.atc(["watch", TASK, "--session", given])
            .status(1)
            .stderr_contains(format!(
                "; agent 'default' has no chat with session id {given:?}, but one with \"s-77\" (session ids are exact: no spaces around them, the case as given). Pass the Session ID"
            ))
            .no_file();
    }
}

/// Found by hand: a model that copies a line with its label (`[SESSION: …]`, `Session ID:
/// …`) as --session was told only that no such chat exists.
#[test]
fn a_session_copied_with_its_label_says_what_to_pass() {
    let s = Scene::new();
    s.add_chat("s-77", "default", "console");
    s.atc(["watch", TASK, "--session", "Session ID: s-77"])
        .status(1)
        .stderr_contains("; --session holds a label with its value (--session s-77 passes the value alone). Pass the Session ID")
        .no_file();
    s.atc(["watch", TASK, "--session", "[SESSION: me:to:SE:1:ab]"])
        .status(1)
        .stderr_contains("; --session holds QwenPaw's [SESSION: me:to:SE:1:ab] line, which names a submitted task's own chat (the child's), not the chat that asked. Pass the Session ID, User ID and Channel the agent's prompt shows")
        .no_file();
}

#[test]
fn create_session_allows_a_new_chat_on_purpose() {
    let s = Scene::new();
    s.checked(&[TASK], || {
        s.atc(["watch", TASK, "--session", "fresh", "--create-session", "-v"])
            .stdout_contains(format!("Watching {TASK}"))
            .stderr_contains("has no chat with session fresh (user default, channel console) yet; the first delivery starts it")
            .stderr_contains("atc: QwenPaw API")
            .run()
    });
    assert_eq!(s.job(TASK)["create_session"], true);
    finished(&s, TASK);
    s.tick(&[]);
    assert_eq!(s.status(TASK), "done");
    assert_eq!(
        s.chats.ghosts(),
        [("fresh".into(), "default".into(), "console".into())],
        "the new chat, as asked"
    );
    // Without -v, a new chat asked for is no news: nothing on stderr.
    const OTHER: &str = "task-0123456789ab";
    s.checked(&[OTHER], || {
        s.atc(["watch", OTHER, "--session", "fresh-2", "--create-session"])
            .stdout_contains(format!("Watching {OTHER}"))
            .stderr("")
            .run()
    });
}

#[test]
fn an_unknown_agent_is_refused_at_watch_and_ends_a_delivery_as_error() {
    let s = Scene::new();
    s.server.on(
        "GET",
        "/api/chats",
        vec![Reply::json(404, &bodies::unknown_agent("ghost"))],
    );
    s.atc(["watch", TASK, "--session", "s-77", "--agent", "ghost"])
        .status(1)
        .stderr_contains(
            "will not serve agent 'ghost' (HTTP 404: Agent 'ghost' not found); check --agent",
        )
        .no_file();
    // An agent removed after the watch: the delivery is refused, not retried forever.
    let mut seeded = support::atc::job(TASK, "delivering", &s.server.api());
    seeded["agent_id"] = json!("ghost");
    seeded["final"] = json!("T");
    let turn = support::atc::turn_for(&mut seeded, "open");
    s.env
        .write_file(&json!({"version": 2, "jobs": [seeded], "turns": [turn]}));
    s.tick(&[]).stderr(format!(
        "atc: gave up on {TASK} (error): the server refused the delivery (HTTP 404); `atc status {TASK}` shows its answer; `atc redeliver {TASK}` tries again once that is fixed\n"
    ));
    s.tick(&[]).file_unchanged();
    s.assert_refused(TASK, "Agent 'ghost' not found");
    assert!(s.posts().is_empty());
}

/// Found by hand: a chat the watch found, deleted by its user before the result came,
/// was given up with "check --session, --user and --channel", as if named wrong; it says
/// the chat is gone since. A chat never looked up (no chat id recorded) is told as before.
#[test]
fn a_chat_that_vanished_before_delivery_is_misrouted_and_nothing_is_posted() {
    let never_looked_up = Scene::new();
    never_looked_up.watch(TASK, &[]);
    never_looked_up.env.edit_job(TASK, |job| {
        job.remove("chat_id");
    });
    never_looked_up.chats.delete("s-77");
    finished(&never_looked_up, TASK);
    never_looked_up.tick(&[]).stderr(format!(
        "atc: gave up on {TASK} (misrouted): the parent chat does not exist, so nothing was posted; `atc status {TASK}` names the chat; watch again with the right --session, --user and --channel, or `atc redeliver {TASK} --create-session`\n"
    ));
    never_looked_up
        .atc(["status", TASK])
        .stdout_contains("Check --session, --user and --channel");

    let s = Scene::new();
    s.watch(TASK, &[]);
    let chat_id = s.job(TASK)["chat_id"].as_str().unwrap().to_owned();
    s.chats.delete("s-77");
    finished(&s, TASK);
    s.tick(&["-v"])
        .stderr(format!(
            "atc: gave up on {TASK} (misrouted): the parent chat is gone (it was there when the task was watched: deleted since?), so nothing was posted; `atc redeliver {TASK} --create-session` starts that chat anew, or watch again for another chat; `atc status {TASK}` says more\ntick: {TASK}: misrouted: no chat with session s-77 (user default, channel console) for agent 'default' on {}\ntick: 1 polled, 0 delivered, 0 busy, 0 lost, 0 failed checks, 1 given up\n",
            s.server.api()
        ))
        .run();
    s.atc(["status", TASK]).stdout_contains(format!(
        "; the chat {chat_id} was there when the task was watched, so it was deleted since"
    ));
    s.tick(&["-v"])
        .stderr("tick: 0 polled, 0 delivered, 0 busy, 0 lost, 0 failed checks, 0 given up\n")
        .file_unchanged();
    let job = s.job(TASK);
    assert_eq!(job["status"], "misrouted");
    assert!(
        job["final"].as_str().unwrap().ends_with("ECHO: hello"),
        "the text is kept"
    );
    assert!(s.posts().is_empty());
    assert!(s.chats.ghosts().is_empty(), "no chat nobody reads");
    s.atc(["status", TASK])
        .stdout_contains("no chat with session s-77 (user default, channel console)")
        .stdout_contains(format!("`atc redeliver {TASK} --create-session`"));

    // Without leave to start the chat, a redelivery would only be misrouted again: it
    // is refused, saying what would help, and nothing changes.
    s.atc(["redeliver", TASK])
        .status(1)
        .stderr(format!(
            "atc: {} has no chat with session s-77 (user default, channel console) for agent 'default': redelivering would only misroute the result again. Watch again with the right --session, --user and --channel, or run `atc redeliver {TASK} --create-session` to start that chat on purpose\n",
            s.server.api()
        ))
        .file_unchanged()
        .run();
    // Requeued by an earlier atc's plain redeliver (delivering, no leave): not refused
    // as "being delivered already".
    s.env.edit_job(TASK, |job| {
        job.insert("status".into(), json!("delivering"));
    });
    s.env.edit_turn(TASK, |turn| {
        turn.insert("state".into(), json!("open"));
    });

    // Corrected on purpose: the same text goes out, into a chat started for it.
    s.atc(["redeliver", TASK, "--create-session"])
        .stdout(format!(
            "{TASK} goes to session s-77 (user default, channel console) on the next atc tick, starting that chat (--create-session).\n"
        ))
        .file(|file| assert_eq!(turn_of(file, TASK)["create_session"], true))
        .run();
    // The leave stays with its turn: a plain redeliver now is not refused as a misroute
    // (that turn starts the chat), only as queued already.
    s.atc(["redeliver", TASK])
        .status(1)
        .stderr(format!(
            "atc: {TASK} is queued for delivery already: the next atc tick posts it; only an undelivered, unconfirmed, misrouted or refused (error) delivery, or a result the parent read itself, can be tried again\n"
        ))
        .file_unchanged()
        .run();
    s.tick(&[]);
    assert_eq!(s.status(TASK), "done");
    assert_eq!(s.chats.ghosts().len(), 1);
}

// ---------------------------------------------------------------------------------------
// 2. Never dropped while the parent is busy

#[test]
fn a_busy_parent_gets_no_post_and_the_result_lands_within_one_tick_of_idle() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    finished(&s, TASK);
    // Busy for the lookups of three ticks.
    s.chats.busy_for("s-77", 3);
    for n in 1..=3 {
        s.tick(&[]);
        assert_eq!(s.status(TASK), "delivering", "tick {n}");
        let turn = s.turn(TASK);
        assert_eq!(turn["delivery"]["busy"], n, "tick {n}");
        assert_eq!(turn["delivery"]["attempts"], 0, "tick {n}");
    }
    assert!(
        s.posts().is_empty(),
        "not a single POST (so no 409) while busy"
    );
    s.tick(&[]);
    assert_eq!(s.status(TASK), "done", "the first idle tick delivers");
    assert_eq!(s.posts().len(), 1);
    assert_eq!(s.delivered("s-77").len(), 1);
    let lookups = s
        .server
        .requests()
        .iter()
        .filter(|r| r.path.starts_with("/api/chats"))
        .count();
    assert!(lookups >= 4, "asked before every attempt");
}

#[test]
fn the_busy_deadline_ends_in_undelivered_and_redeliver_tries_again() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    finished(&s, TASK);
    s.chats.busy_for("s-77", 1);
    s.tick(&[]);
    s.env.edit_turn(TASK, |turn| {
        turn["delivery"]["waiting_since"] = json!("2026-01-01T00:00:00Z");
    });
    s.chats.busy_for("s-77", 1);
    s.tick(&["--busy-deadline", "1h"]).stderr(format!(
        "atc: gave up on {TASK} (undelivered): the parent chat stayed busy past --busy-deadline; `atc status {TASK}` says more; `atc redeliver {TASK}` tries again\n"
    ));
    assert_eq!(s.status(TASK), "undelivered");
    s.tick(&["--busy-deadline", "1h"]).file_unchanged();
    s.atc(["redeliver", TASK])
        .stdout(format!(
            "{TASK} goes to session s-77 (user default, channel console) again on the next atc tick, once the chat is idle.\n"
        ))
        .file(|file| {
            assert_eq!(file["jobs"][0]["status"], "delivering");
            assert!(turn_of(file, TASK)["delivery"].get("waiting_since").is_none());
        });
    s.tick(&[]);
    assert_eq!(s.status(TASK), "done");
    assert_eq!(s.delivered("s-77").len(), 1);
    s.atc(["redeliver", TASK])
        .status(1)
        .stderr_contains("was already delivered");
    s.atc(["redeliver", "task-nope"])
        .status(1)
        .stderr_contains("no watch for task-nope");
}

// ---------------------------------------------------------------------------------------
// 3. Exactly once

/// Every way a POST's outcome can be lost ends with the parent holding exactly one copy.
#[test]
fn exactly_one_copy_whatever_happens_to_the_post() {
    for (name, fault, stored) in [
        (
            "connection dropped after the POST was received",
            PostFault::DropAfterStore,
            true,
        ),
        ("500 after storing", PostFault::Error500AfterStore, true),
        (
            "no answer within --http-timeout",
            PostFault::SlowAfterStore(Duration::from_secs(3)),
            true,
        ),
        ("500 without storing", PostFault::Error500, false),
    ] {
        let s = Scene::new();
        s.watch(TASK, &[]);
        finished(&s, TASK);
        s.chats.fault(fault);
        let report = s.atc(["--json", "tick", "--http-timeout", "1s"]).json();
        assert_eq!(
            (&report["delivered"], &report["unconfirmed"]),
            (&json!(0), &json!(1)),
            "{name}: {report}"
        );
        assert_eq!(s.status(TASK), "unconfirmed", "{name}");
        // Let the settle time (--http-timeout) pass since the attempt.
        s.env.settle_passed(TASK);
        s.tick(&["--http-timeout", "1s"]);
        if !stored {
            // Absent once: looked at again a settle window later before it goes again.
            assert_eq!(s.posts().len(), 1, "{name}: not posted on one absent look");
            s.env.absent_long_ago(TASK);
        }
        s.tick(&["--http-timeout", "1s"]);
        s.tick(&["--http-timeout", "1s"]);
        let job = s.job(TASK);
        assert_eq!(job["status"], "done", "{name}: {job}");
        assert_eq!(s.delivered("s-77").len(), 1, "{name}: exactly one copy");
        let posts = s.posts();
        assert_eq!(posts.len(), if stored { 1 } else { 2 }, "{name}");
        let ids: Vec<_> = posts
            .iter()
            .map(|p| p.json()["input"][0]["metadata"]["qwenpaw_client_message_id"].clone())
            .collect();
        assert!(
            ids.iter().all(|id| *id == ids[0]),
            "{name}: one delivery id"
        );
        assert_eq!(
            s.turn(TASK)["delivery"]["confirmed"],
            if stored {
                json!("read-back")
            } else {
                serde_json::Value::Null
            },
            "{name}"
        );
    }
}

#[test]
fn a_tick_killed_between_post_and_save_is_settled_by_read_back() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    finished(&s, TASK);
    s.chats
        .fault(PostFault::SlowAfterStore(Duration::from_secs(30)));
    s.tick_until_posted(&[]).kill();
    s.tick(&["-vv"])
        .stderr_contains("tick: recovered_unconfirmed: task-3f9a0c1b2d4e")
        .stderr_contains("tick: confirmed: task-3f9a0c1b2d4e")
        .stderr_contains(" 1 delivered, 0 busy, 0 lost, 0 failed checks, 0 given up, 1 unconfirmed")
        .run();
    assert_eq!(s.status(TASK), "done");
    assert_eq!(s.posts().len(), 1);
    assert_eq!(s.delivered("s-77").len(), 1);
}

#[test]
fn while_the_chat_runs_a_turn_an_unknown_delivery_waits_instead_of_posting_again() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    finished(&s, TASK);
    s.chats.fault(PostFault::Error500);
    s.tick(&[]);
    // Let the settle time (--http-timeout) pass since the attempt.
    s.env.settle_passed(TASK);
    // A turn is running: it may be ours, whose message is stored when it ends.
    s.chats.busy_for("s-77", 1);
    s.tick(&["-vv"]).stderr_contains("tick: waiting: ").run();
    assert_eq!(s.status(TASK), "unconfirmed");
    assert_eq!(s.posts().len(), 1);
    // Idle now, absent: one look is not proof; a second, a settle window later, is.
    s.tick(&[]);
    assert_eq!(s.posts().len(), 1);
    s.env.absent_long_ago(TASK);
    s.tick(&[]);
    assert_eq!(s.status(TASK), "done");
    assert_eq!(s.delivered("s-77").len(), 1);
}

#[test]
fn an_unreadable_chat_keeps_it_unconfirmed_until_the_deadline() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    finished(&s, TASK);
    s.chats.fault(PostFault::DropAfterStore);
    s.tick(&[]);
    let chat = s.turn(TASK)["chat_id"].as_str().unwrap().to_owned();
    s.server.answer(
        "GET",
        &format!("/api/chats/{chat}"),
        500,
        r#"{"detail":"Internal Server Error"}"#,
    );
    s.tick(&[]);
    assert_eq!(s.status(TASK), "unconfirmed");
    let turn = s.turn(TASK);
    assert!(
        turn["delivery"]["error"]
            .as_str()
            .unwrap()
            .contains("reading the parent chat back failed: HTTP 500"),
        "{turn}"
    );
    s.atc(["status", TASK])
        .stdout_contains("atc reads the parent chat back and posts again only if it is not there")
        .stdout_contains("\nunknown since   ");
    s.env.edit_turn(TASK, |turn| {
        turn["delivery"]["unknown_since"] = json!("2026-01-01T00:00:00Z");
    });
    // The tick that finds the read-back window closed says so, once, and records it.
    s.tick(&[])
        .stderr(format!(
            "atc: gave up on {TASK} (unconfirmed): whether the turn arrived is unknown, and its read-back window (--busy-deadline) closed; look in the parent chat; `atc status {TASK}` says more; `atc redeliver {TASK}` reads it back once more and posts only if the turn is not there\n"
        ))
        .file(|file| {
            assert_eq!(file["jobs"][0]["status"], "unconfirmed");
            assert!(turn_of(file, TASK)["delivery"]["read_back_closed_at"].is_string());
        });
    s.tick(&[]).file_unchanged();
    assert_eq!(s.posts().len(), 1, "never posted blind");
    // The note no longer promises a read-back.
    let shown = s.atc(["status", TASK]).stdout_inspected().run();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains(&format!("atc read the parent chat back until --busy-deadline and stopped: look in the parent chat; `atc redeliver {TASK}` reads it back once more")),
        "{shown}"
    );
    assert!(!shown.contains("atc reads the parent chat back"), "{shown}");
    // `redeliver` opens a new read-back window; the chat reads again, the turn is there.
    s.server.answer(
        "GET",
        &format!("/api/chats/{chat}"),
        200,
        r#"{"status":"idle","messages":[]}"#,
    );
    // The read-back is the check: no chat is looked up first.
    let listed = s.server.hits("GET", "/api/chats");
    s.atc(["redeliver", TASK])
        .stdout_contains("reads session s-77 (user default, channel console) back");
    assert_eq!(s.server.hits("GET", "/api/chats"), listed);
}

#[test]
fn the_parent_turn_is_recorded_from_the_turns_own_record() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    finished(&s, TASK);
    s.tick(&[]);
    assert_eq!(s.status(TASK), "done");
    let record = s.turn(TASK);
    assert!(
        record.get("parent_turn").is_none(),
        "not known yet: {record}"
    );
    let turn = record["turn_task_id"].as_str().unwrap().to_owned();
    // Until a tick learns how it ended, status says what atc last saw, not what is now.
    s.atc(["status", TASK])
        .stdout_contains(format!(
            "parent turn     {turn} (running at atc's last look)"
        ))
        .stdout_contains("delivered; the parent's turn was running at atc's last look")
        .file_unchanged();
    s.tick(&[]);
    assert_eq!(s.turn(TASK)["parent_turn"], "completed");
    assert_eq!(s.server.hits("GET", &Scene::task_path(&turn)), 1);
    s.tick(&[]).file_unchanged();
    assert_eq!(
        s.server.hits("GET", &Scene::task_path(&turn)),
        1,
        "asked until known"
    );
    s.atc(["status", TASK])
        .stdout_contains(format!("parent turn     {turn} (completed)"))
        .stdout_contains("delivered; the parent's turn completed");
}

// ---------------------------------------------------------------------------------------
// 4. The parent always hears, once

#[test]
fn a_lost_task_posts_one_notice_and_says_so() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    // Seen running, then the server restarted: the record is gone.
    s.poll_replies(
        TASK,
        vec![
            Reply::json(200, bodies::RUNNING),
            Reply::json(404, &bodies::not_found(TASK)),
        ],
    );
    s.tick(&[]);
    s.tick(&["-vv"])
        .stderr_contains("tick: noticed: task-3f9a0c1b2d4e")
        .stderr_contains("tick: delivered: task-3f9a0c1b2d4e")
        .run();
    for _ in 0..2 {
        s.tick(&[]);
    }
    let job = s.job(TASK);
    assert_eq!(
        (job["status"].as_str(), job["notice"].as_str()),
        (Some("lost"), Some("delivered"))
    );
    let told = s.delivered("s-77");
    assert_eq!(told.len(), 1);
    let lines: Vec<&str> = told[0].lines().collect();
    assert_eq!(
        lines[..3],
        [format!("[TASK_ID: {TASK}]").as_str(), "[STATUS: lost]", ""]
    );
    assert!(
        lines[3].contains("restart") && lines[3].contains("check_agent_task"),
        "{}",
        lines[3]
    );
    s.atc(["status"])
        .stdout_contains("no record on the server, parent told");
}

#[test]
fn only_qwenpaws_own_404_for_this_task_means_lost() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(
        TASK,
        vec![Reply::json(
            404,
            r#"{"detail":"Task not found: task-000000000000"}"#,
        )],
    );
    s.tick(&[]);
    let job = s.job(TASK);
    assert_eq!(
        (job["status"].as_str(), job["strikes"].as_u64()),
        (Some("pending"), Some(1))
    );
    assert!(
        job["last_error"]
            .as_str()
            .unwrap()
            .contains("not QwenPaw's answer for this task")
    );
    s.poll_replies(TASK, vec![Reply::json(404, r#"{"error":"no such page"}"#)]);
    s.tick(&[]);
    assert_eq!(s.job(TASK)["strikes"], 2);
    assert!(s.posts().is_empty());
}

#[test]
fn expired_and_abandoned_watches_notice_too_and_silent_ones_do_not() {
    let s = Scene::new();
    s.watch("task-old", &[]);
    s.watch("task-broken", &["--session", "s-2"]);
    s.watch(
        "task-quiet",
        &["--session", "s-3", "--on-no-answer", "silent"],
    );
    s.env.edit_job("task-old", |job| {
        job.insert("registered_at".into(), json!("2020-01-01T00:00:00Z"));
    });
    s.poll_replies("task-old", vec![Reply::json(200, bodies::RUNNING)]);
    s.poll_replies(
        "task-broken",
        vec![Reply::json(502, r#"{"detail":"bad gateway"}"#)],
    );
    s.poll_replies(
        "task-quiet",
        vec![Reply::json(404, &bodies::not_found("task-quiet"))],
    );
    s.tick(&["--max-strikes", "1"]).stderr(
        "atc: gave up on task-broken (abandoned): 1 failed check in a row (HTTP 502); `atc status task-broken` says more; the task may still run: `atc wait task-broken` asks the server\n",
    );
    let old = s.delivered("s-77");
    assert_eq!(old.len(), 1);
    assert!(old[0].starts_with("[TASK_ID: task-old]\n[STATUS: expired]\n\natc stopped watching this task: it had not finished"), "{}", old[0]);
    let broken = s.delivered("s-2");
    assert!(
        broken[0].contains("[STATUS: abandoned]") && broken[0].contains("bad gateway"),
        "{broken:?}"
    );
    assert!(s.delivered("s-3").is_empty(), "--on-no-answer silent");
    let quiet = s.job("task-quiet");
    assert_eq!(quiet["status"], "lost");
    assert!(quiet.get("notice").is_none());
    s.atc(["status", "task-quiet"])
        .stdout_contains("the parent was not told (--on-no-answer silent)");
}

/// Issue 15: the age came from an `updated_at` that running polls leave alone, so every
/// expired notice said the task "had not finished 20s after it was delegated" (and
/// `--keep` counted from then).
#[test]
fn an_expired_notice_states_the_real_age_and_keep_counts_from_the_end() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    let two_days_ago = "2020-01-01T00:00:00Z";
    s.env.edit_job(TASK, |job| {
        job.insert("registered_at".into(), json!(two_days_ago));
        job.insert("updated_at".into(), json!("2020-01-01T00:00:20Z"));
        job.insert("started_at".into(), json!("2020-01-01T00:00:00Z"));
    });
    s.poll_replies(TASK, vec![Reply::json(200, bodies::RUNNING)]);
    s.tick(&["--max-age", "1d"]);
    let said = s.delivered("s-77");
    assert_eq!(said.len(), 1, "{said:?}");
    let age = said[0]
        .split("had not finished ")
        .nth(1)
        .and_then(|rest| rest.split(" after it was delegated").next())
        .expect("the notice states an age");
    let age = humantime::parse_duration(age).expect("a duration");
    assert!(age > Duration::from_secs(5 * 365 * 86400), "{said:?}");
    let job = s.job(TASK);
    assert_eq!(job["status"], "expired");
    assert!(
        job["updated_at"].as_str().unwrap() > "2026-01-01",
        "the watch ended now: {job}"
    );
}

#[test]
fn a_notice_waits_for_a_busy_parent_like_a_result() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(404, &bodies::not_found(TASK))]);
    s.chats.busy_for("s-77", 1);
    s.tick(&[]);
    let job = s.job(TASK);
    assert_eq!(
        (job["status"].as_str(), job["notice"].as_str()),
        (Some("lost"), Some("delivering"))
    );
    assert_eq!(
        job["last_error"],
        format!("Task not found: {TASK}"),
        "why it ended is kept"
    );
    s.atc(["status"])
        .stdout_contains("no record on the server, telling parent");
    s.tick(&[]);
    assert_eq!(s.job(TASK)["notice"], "delivered");
    assert_eq!(s.delivered("s-77").len(), 1);
}

// ---------------------------------------------------------------------------------------
// 5. Deliver what matters

#[test]
fn an_empty_answer_is_skipped_only_when_asked() {
    let s = Scene::new();
    let empty = bodies::finished_completed("c", "   ");
    s.watch("task-skip", &["--on-empty", "skip"]);
    s.watch("task-keep", &["--session", "s-2"]);
    s.poll_replies("task-skip", vec![Reply::json(200, &empty)]);
    s.poll_replies("task-keep", vec![Reply::json(200, &empty)]);
    s.tick(&[]);
    assert_eq!(s.status("task-skip"), "skipped");
    assert!(s.delivered("s-77").is_empty());
    assert_eq!(s.status("task-keep"), "done");
    assert!(s.delivered("s-2")[0].ends_with("(No text content in response)"));
    s.atc(["status", "task-skip"])
        .stdout_contains("--on-empty skip: nothing was posted");
}

#[test]
fn a_fork_child_names_its_branch_or_says_it_is_not_ready_to_merge() {
    let s = Scene::new();
    s.watch("task-ok", &["--fork-branch", "fork/audit-1"]);
    s.watch(
        "task-unready",
        &["--session", "s-2", "--fork-branch", "fork/audit-2"],
    );
    finished(&s, "task-ok");
    s.poll_replies(
        "task-unready",
        vec![Reply::json(
            200,
            &bodies::finished_failed("Failed to finalize fork worktree"),
        )],
    );
    s.tick(&[]);
    let ok = &s.delivered("s-77")[0];
    assert!(
        ok.ends_with("ECHO: hello\n\n[FORK_BRANCH: fork/audit-1]"),
        "{ok}"
    );
    let unready = &s.delivered("s-2")[0];
    assert!(
        unready.ends_with("Error: Failed to finalize fork worktree"),
        "{unready}"
    );
    assert!(!unready.contains("FORK_BRANCH"));
    assert_eq!(s.job("task-unready")["outcome"], "fork_not_finalized");
    s.atc(["status", "task-unready"])
        .stdout_contains("outcome         fork not finalized")
        .stdout_contains("branch fork/audit-2 is not ready to merge");
    s.atc(["status"])
        .stdout_contains("fork not finalized; delivered");
}

// ---------------------------------------------------------------------------------------
// 6. Fan-in

#[test]
fn a_group_is_delivered_as_one_turn_once_every_member_is_done() {
    let s = Scene::new();
    s.add_chat("s-77", "default", "console");
    s.checked(&["task-a", "task-b", "task-c"], || {
        s.atc(["watch", "task-a", "task-b", "task-c", "--session", "s-77", "--group", "audit"])
            .stdout_contains("Watching task-a in group audit for agent 'default'; the result goes to session s-77 (user default, channel console) with the rest of its group.")
            .stdout_contains("Watching task-c in group audit")
            .run()
    });
    finished(&s, "task-a");
    s.poll_replies(
        "task-b",
        vec![
            Reply::json(200, bodies::RUNNING),
            Reply::json(200, bodies::FINISHED_TIMEOUT),
        ],
    );
    s.poll_replies(
        "task-c",
        vec![
            Reply::json(200, bodies::RUNNING),
            Reply::json(404, &bodies::not_found("task-c")),
        ],
    );
    s.tick(&[]);
    assert!(s.posts().is_empty(), "held while two still run");
    s.atc(["status"]).stdout_contains("held for group audit");
    let report = s.atc(["--json", "tick"]).json();
    assert_eq!(
        report["tasks"]["sealed"],
        json!(["task-a", "task-b", "task-c"]),
        "the tick says it sealed the group's turn: {report:#}"
    );
    let turns = s.delivered("s-77");
    assert_eq!(turns.len(), 1, "one turn for the group: {turns:?}");
    let turn = &turns[0];
    assert!(
        turn.starts_with(
            "[ATC_GROUP: audit] 3 tasks: 1 completed, 1 timed out, 1 lost\n\n[TASK_ID: task-a]"
        ),
        "{turn}"
    );
    let (a, b, c) = (
        turn.find("[TASK_ID: task-a]").unwrap(),
        turn.find("[TASK_ID: task-b]").unwrap(),
        turn.find("[TASK_ID: task-c]").unwrap(),
    );
    assert!(a < b && b < c, "registration order");
    assert!(turn.contains("Error: Task timed out after 1s") && turn.contains("[STATUS: lost]"));
    for (task, status) in [("task-a", "done"), ("task-b", "done"), ("task-c", "lost")] {
        assert_eq!(s.status(task), status, "{task}");
    }
    assert_eq!(s.job("task-c")["notice"], "delivered");
    assert_eq!(s.turn_tasks("task-a"), ["task-a", "task-b", "task-c"]);
    for task in ["task-b", "task-c"] {
        assert_eq!(s.job(task)["turn"], s.job("task-a")["turn"], "{task}");
    }
    assert_eq!(s.turn("task-a")["group"], "audit");
    let id = s.turn("task-b")["turn_id"].as_str().unwrap().to_owned();
    s.atc(["status", "task-b"])
        .stdout_contains("group           audit (its turn carries task-a, task-b, task-c)\n")
        .stdout_contains("note            delivered in one turn, with task-a and task-c;")
        .stdout_contains(format!("turn            {id} (delivered; carries task-a (result), task-b (result), task-c (notice))\n"));
    s.tick(&[]);
    assert_eq!(s.delivered("s-77").len(), 1);
}

#[test]
fn a_cancelled_member_drops_out_of_its_group() {
    let s = Scene::new();
    s.add_chat("s-77", "default", "console");
    s.checked(&["task-a", "task-b"], || {
        s.atc([
            "watch",
            "task-a",
            "task-b",
            "--session",
            "s-77",
            "--group",
            "g",
        ])
        .stdout_contains("Watching task-b")
        .run()
    });
    finished(&s, "task-a");
    s.poll_replies("task-b", vec![Reply::json(200, bodies::RUNNING)]);
    s.tick(&[]);
    assert!(s.posts().is_empty());
    s.atc(["cancel", "task-b"]).stdout_contains("Cancelled");
    s.tick(&[]);
    let turns = s.delivered("s-77");
    assert_eq!(turns.len(), 1);
    assert!(
        turns[0].starts_with("[ATC_GROUP: g] 1 task: 1 completed\n\n[TASK_ID: task-a]"),
        "{}",
        turns[0]
    );
    assert!(!turns[0].contains("task-b"));
    // A group that went out takes no new members into that turn: a late one is its
    // next round, and comes back in a group turn of its own.
    s.checked(&["task-late"], || {
        s.atc(["watch", "task-late", "--session", "s-77", "--group", "g"])
            .stdout_contains("Group g already went out to session s-77 (user default, channel console): these tasks are its next round")
            .run()
    });
    finished(&s, "task-late");
    s.tick(&[]);
    let turns = s.delivered("s-77");
    assert_eq!(turns.len(), 2);
    assert!(
        turns[1].starts_with("[ATC_GROUP: g] 1 task: 1 completed\n\n[TASK_ID: task-late]"),
        "{}",
        turns[1]
    );
    assert!(!turns[1].contains("task-a]"));
}

#[test]
fn each_group_member_block_is_capped_like_a_single_delivery() {
    let s = Scene::new();
    s.add_chat("s-77", "default", "console");
    s.checked(&["task-a", "task-b"], || {
        s.atc([
            "watch",
            "task-a",
            "task-b",
            "--session",
            "s-77",
            "--group",
            "big",
        ])
        .stdout_contains("Watching")
        .run()
    });
    let long = bodies::finished_completed("c", &"x".repeat(20_000));
    s.poll_replies("task-a", vec![Reply::json(200, &long)]);
    s.poll_replies("task-b", vec![Reply::json(200, &long)]);
    s.tick(&[]);
    let turn = &s.delivered("s-77")[0];
    let blocks: Vec<&str> = turn.split("\n\n[TASK_ID: ").skip(1).collect();
    assert_eq!(blocks.len(), 2);
    for block in blocks {
        assert_eq!(block.chars().count() + "[TASK_ID: ".len(), 8000);
    }
}

#[test]
fn a_group_turn_given_up_is_one_give_up_said_once() {
    let s = Scene::new();
    s.add_chat("s-77", "default", "console");
    s.checked(&["task-a", "task-b"], || {
        s.atc([
            "watch",
            "task-a",
            "task-b",
            "--session",
            "s-77",
            "--group",
            "audit",
        ])
        .stdout_inspected()
        .run()
    });
    finished(&s, "task-a");
    finished(&s, "task-b");
    s.chats.busy_for("s-77", 1000);
    s.tick(&[]);
    // One turn, both jobs pointing at it.
    assert_eq!(s.turn_tasks("task-a"), ["task-a", "task-b"]);
    assert_eq!(s.job("task-b")["turn"], s.job("task-a")["turn"]);
    let (carrier_task, other) = ("task-a", "task-b");
    s.env.edit_turn(carrier_task, |turn| {
        turn["delivery"]["waiting_since"] = json!("2026-01-01T00:00:00Z");
    });
    s.tick(&["-v", "--busy-deadline", "1h"]).stderr(format!(
        "atc: gave up on {carrier_task} (undelivered; its group's turn also carries {other}): the parent chat stayed busy past --busy-deadline; `atc status {carrier_task}` says more; `atc redeliver {carrier_task}` tries again\n\
         tick: task-a: undelivered: the parent chat is running a turn\n\
         tick: task-b: undelivered: the parent chat is running a turn\n\
         tick: 0 polled, 0 delivered, 0 busy, 0 lost, 0 failed checks, 1 given up\n"
    ));
    assert_eq!(s.status("task-a"), "undelivered");
    assert_eq!(s.status("task-b"), "undelivered");
    s.tick(&["--busy-deadline", "1h"]).file_unchanged();
    assert!(s.posts().is_empty());
}
