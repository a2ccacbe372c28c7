//! Parents on IM channels: the woken turn runs through QwenPaw's console, so atc sends the
//! parent's final reply on to the person (`POST /api/messages/send`), final-only, once.

use crate::support;

use serde_json::json;
use support::bodies;
use support::chats::{ParentReply, SendFault};
use support::fake::Reply;
use support::scene::Scene;

const TASK: &str = "task-3f9a0c1b2d4e";
const IM: [&str; 6] = [
    "--session",
    "mqtt:alice",
    "--user",
    "alice",
    "--channel",
    "mqtt",
];

/// A scene with a healthy MQTT channel, a watch from alice's MQTT chat, and a child that
/// finished.
fn im_scene(reply: ParentReply) -> Scene {
    let s = Scene::new();
    s.chats.channel("mqtt", true);
    s.chats.reply("mqtt:alice", reply);
    s.watch(TASK, &IM);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s
}

/// The task's last event in the log, without its time.
fn last_logged(s: &Scene) -> serde_json::Value {
    s.env.logged(&[TASK]).pop().expect("the task's events")
}

#[test]
fn only_the_parents_final_tool_free_reply_reaches_the_person_once() {
    let s = im_scene(ParentReply::ToolThenFinal("FINAL: here it is".into()));
    s.tick(&[]);
    assert_eq!(s.status(TASK), "done");
    assert!(
        s.chats.received("mqtt").is_empty(),
        "not before the turn ended"
    );
    s.tick(&["-vv"])
        .stderr_contains("tick: forwarded: task-3f9a0c1b2d4e")
        .run();
    assert_eq!(
        s.chats.sends("mqtt"),
        [(
            "alice".to_owned(),
            "mqtt:alice".to_owned(),
            "FINAL: here it is".to_owned()
        )],
        "the final reply only: no \"I will inspect\", no tool output"
    );
    let turn = s.turn(TASK);
    assert_eq!(turn["forward"]["status"], "sent");
    assert_eq!(turn["forward"]["attempts"], 1);
    assert_eq!(turn["forward"]["last_http_status"], 200);
    assert!(turn["forward"]["at"].is_string());
    // Not a console toast: a forward, with the send's status.
    assert_eq!(
        last_logged(&s),
        json!({"event": "forwarded", "task_id": TASK, "job_id": s.job(TASK)["job_id"],
            "turn_id": turn["turn_id"], "status": "done", "http_status": 200})
    );
    for _ in 0..2 {
        s.tick(&[]).file_unchanged();
    }
    assert_eq!(s.chats.received("mqtt").len(), 1, "never sent again");
    let send = s
        .server
        .requests()
        .into_iter()
        .find(|r| r.path == "/api/messages/send")
        .unwrap();
    assert_eq!(send.header("x-agent-id"), Some("default"));
    let health = s
        .server
        .requests()
        .into_iter()
        .position(|r| r.path == "/api/config/channels/mqtt/health");
    let sent = s
        .server
        .requests()
        .into_iter()
        .position(|r| r.path == "/api/messages/send");
    assert!(health < sent, "the channel's health is asked first");
    s.atc(["status", TASK])
        .stdout_contains("forward         sent (1 send, last http 200")
        .stdout_contains("the parent's reply was sent to the person on mqtt");
    s.atc(["status"])
        .stdout_contains("parent turn completed; reply forwarded");
}

#[test]
fn an_empty_final_reply_forwards_nothing_and_says_skipped() {
    let s = im_scene(ParentReply::Empty);
    s.tick(&[]);
    s.tick(&["-vv"])
        .stderr_contains("tick: forward_skipped: task-3f9a0c1b2d4e")
        .run();
    let turn = s.turn(TASK);
    assert_eq!(turn["forward"]["status"], "skipped");
    assert_eq!(
        turn["forward"]["reason"],
        "the parent's final reply was empty"
    );
    assert!(s.chats.received("mqtt").is_empty());
    assert_eq!(s.server.hits("POST", "/api/messages/send"), 0);
}

#[test]
fn a_failed_parent_turn_forwards_nothing_and_says_why() {
    let s = im_scene(ParentReply::Fails);
    s.tick(&[]);
    s.tick(&[]);
    let turn = s.turn(TASK);
    assert_eq!(turn["parent_turn"], "failed");
    assert_eq!(turn["forward"]["status"], "skipped");
    assert!(
        turn["forward"]["reason"]
            .as_str()
            .unwrap()
            .contains("the parent's turn failed")
    );
    assert_eq!(s.server.hits("POST", "/api/messages/send"), 0);
}

#[test]
fn a_console_parent_gets_one_toast_and_forward_never_gets_nothing() {
    let s = Scene::new();
    s.chats.channel("mqtt", true);
    s.watch("task-console", &[]);
    s.watch(
        "task-quiet",
        &["--session", "s-quiet", "--forward", "never"],
    );
    s.watch(
        "task-never",
        &[
            "--session",
            "mqtt:bob",
            "--user",
            "bob",
            "--channel",
            "mqtt",
            "--forward",
            "never",
        ],
    );
    for task in ["task-console", "task-quiet", "task-never"] {
        s.poll_replies(task, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    }
    for _ in 0..3 {
        s.tick(&[]);
    }
    for task in ["task-console", "task-quiet", "task-never"] {
        assert_eq!(
            (
                s.job(task)["status"].as_str(),
                s.turn(task)["parent_turn"].as_str()
            ),
            (Some("done"), Some("completed"))
        );
    }
    // The console parent's person: one toast, once the woken turn ended, never the reply.
    assert_eq!(
        s.chats.sends("console"),
        [(
            "default".to_owned(),
            "s-77".to_owned(),
            "A result for s-77: the agent answered; open the chat to read it".to_owned()
        )]
    );
    let toast = &s.turn("task-console")["forward"];
    assert_eq!(toast["status"], "sent", "{toast}");
    s.atc(["status", "task-console"])
        .stdout_contains("the web console showed a toast")
        .run();
    // The log says it in the same words (it said `forwarded`).
    let events = s.env.logged(&["task-console"]);
    let names: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert!(names.contains(&"toast_shown"), "{names:?}");
    assert!(!names.contains(&"forwarded"), "{names:?}");
    for task in ["task-quiet", "task-never"] {
        assert!(s.turn(task).get("forward").is_none(), "{task}");
    }
    assert_eq!(s.job("task-never")["forward_mode"], json!("never"));
    assert_eq!(s.turn("task-never")["forward_mode"], json!("never"));
    assert_eq!(s.server.hits("POST", "/api/messages/send"), 1);
}

#[test]
fn an_unconfigured_channel_fails_the_forward_at_once() {
    let s = im_scene(ParentReply::Echo);
    s.tick(&[]);
    // The channel went away after the watch.
    s.server.answer(
        "GET",
        "/api/config/channels/mqtt/health",
        404,
        r#"{"detail":"Channel 'mqtt' not available"}"#,
    );
    s.tick(&[]).stderr(format!(
        "atc: gave up on {TASK} (done, forward failed): the parent's reply was delivered but could not be sent on to the person on mqtt; `atc status {TASK}` says more\n"
    ));
    s.tick(&[]);
    let turn = s.turn(TASK);
    assert_eq!(turn["forward"]["status"], "failed");
    assert!(
        turn["forward"]["reason"]
            .as_str()
            .unwrap()
            .contains("Channel 'mqtt' not available")
    );
    assert_eq!(s.server.hits("POST", "/api/messages/send"), 0);
}

#[test]
fn a_404_from_the_send_fails_it_and_a_500_is_retried_a_few_times() {
    let s = im_scene(ParentReply::Echo);
    s.tick(&[]);
    s.server.answer(
        "POST",
        "/api/messages/send",
        404,
        r#"{"detail":"Channel not found: mqtt"}"#,
    );
    s.tick(&[]).stderr(format!(
        "atc: gave up on {TASK} (done, forward failed): the parent's reply was delivered but could not be sent on to the person on mqtt (HTTP 404); `atc status {TASK}` says more\n"
    ));
    let turn = s.turn(TASK);
    assert_eq!(turn["forward"]["status"], "failed");
    assert_eq!(turn["forward"]["last_http_status"], 404);
    assert_eq!(turn["forward"]["reason"], "404: Channel not found: mqtt");
    assert_eq!(
        last_logged(&s),
        json!({"event": "forward_failed", "task_id": TASK, "job_id": s.job(TASK)["job_id"],
            "turn_id": turn["turn_id"], "status": "done", "http_status": 404,
            "reason": "HTTP 404"})
    );

    let s = im_scene(ParentReply::Echo);
    s.tick(&[]);
    for _ in 0..6 {
        s.chats.send_fault("mqtt", SendFault::Error500);
    }
    let said = s.ticks_said(6);
    assert_eq!(
        said,
        format!(
            "atc: gave up on {TASK} (done, forward failed): the parent's reply was delivered but could not be sent on to the person on mqtt (HTTP 500); `atc status {TASK}` says more\n"
        ),
        "said once, by the tick that gave up"
    );
    let turn = s.turn(TASK);
    assert_eq!(turn["forward"]["status"], "failed");
    assert_eq!(turn["forward"]["attempts"], 5, "bounded");
    assert!(
        turn["forward"]["reason"]
            .as_str()
            .unwrap()
            .contains("gave up after 5 sends")
    );
    assert_eq!(s.server.hits("POST", "/api/messages/send"), 5);
}

#[test]
fn a_500_then_success_sends_once() {
    let s = im_scene(ParentReply::Echo);
    s.tick(&[]);
    s.chats.send_fault("mqtt", SendFault::Error500);
    s.tick(&[]);
    assert_eq!(s.turn(TASK)["forward"]["status"], "pending");
    s.tick(&[]);
    let turn = s.turn(TASK);
    assert_eq!(
        (
            turn["forward"]["status"].as_str(),
            turn["forward"]["attempts"].as_u64()
        ),
        (Some("sent"), Some(2))
    );
    assert_eq!(s.chats.received("mqtt").len(), 1);
}

#[test]
fn an_unhealthy_channel_holds_the_forward_until_it_recovers() {
    let s = im_scene(ParentReply::Echo);
    s.tick(&[]);
    s.chats.channel("mqtt", false);
    s.tick(&["-vv"])
        .stderr_contains("tick: forward_held: task-3f9a0c1b2d4e")
        .run();
    let turn = s.turn(TASK);
    assert_eq!(turn["forward"]["status"], "pending");
    assert!(
        turn["forward"]["reason"]
            .as_str()
            .unwrap()
            .contains("not connected to broker")
    );
    assert_eq!(
        s.server.hits("POST", "/api/messages/send"),
        0,
        "QwenPaw would answer 200 and send nothing"
    );
    s.atc(["status", TASK]).stdout_contains(
        "the parent's reply waits to be sent to the person: the channel is not healthy",
    );
    s.chats.channel("mqtt", true);
    s.tick(&[]);
    assert_eq!(s.turn(TASK)["forward"]["status"], "sent");
    assert_eq!(s.chats.received("mqtt").len(), 1);
}

#[test]
fn a_send_whose_answer_is_lost_is_never_repeated() {
    let s = im_scene(ParentReply::Echo);
    s.tick(&[]);
    s.chats.send_fault("mqtt", SendFault::DropAfterSend);
    s.tick(&[]);
    let turn = s.turn(TASK);
    assert_eq!(turn["forward"]["status"], "unconfirmed");
    for _ in 0..2 {
        s.tick(&[]);
    }
    assert_eq!(s.server.hits("POST", "/api/messages/send"), 1);
    assert_eq!(s.chats.received("mqtt").len(), 1);
}

#[test]
fn the_ghost_session_guard_works_for_im_chats() {
    let s = Scene::new();
    s.add_chat("mqtt:alice", "alice", "mqtt");
    s.atc([
        "watch",
        TASK,
        "--session",
        "alice",
        "--user",
        "alice",
        "--channel",
        "mqtt",
    ])
    .status(1)
    .stderr_contains("no chat with session alice (user alice, channel mqtt)")
    .no_file();
    s.chats.add("default", "mqtt:alice", "alice", "mqtt");
    s.checked(&[TASK], || {
        s.atc([
            "watch",
            TASK,
            "--session",
            "mqtt:alice",
            "--user",
            "alice",
            "--channel",
            "mqtt",
        ])
        .stdout_contains("the result goes to session mqtt:alice (user alice, channel mqtt)")
        .run()
    });
}
