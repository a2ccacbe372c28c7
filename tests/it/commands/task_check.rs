//! `watch` asks the server for each task before it records it (issue 27): a task id the
//! server never had (QwenPaw's own `Task not found`, contract §4) is refused with exit 6,
//! nothing watched, instead of a "lost" notice blaming a server restart posted into a real
//! chat by the next tick. `--from` gets the same check; `--no-task-check` skips it.

use crate::support;

use support::atc::TestEnv;
use support::bodies;
use support::fake::Reply;
use support::scene::Scene;

const TASK: &str = "task-3f9a0c1b2d4e";

fn unknown(s: &Scene, task: &str) {
    s.poll_replies(task, vec![Reply::json(404, &bodies::not_found(task))]);
}

#[test]
fn a_task_the_server_never_had_is_refused_with_exit_6_and_nothing_is_watched() {
    let s = Scene::new();
    s.add_chat("s-77", "default", "console");
    unknown(&s, TASK);
    let api = s.server.api();
    s.atc(["watch", TASK, "--session", "s-77"])
        .status(6)
        .stderr(format!(
            "atc: {api} has no task {TASK} (QwenPaw answers \"Task not found\"): is the id the one submit_to_agent printed, and was it submitted to this server (the base URL from ATC_BASE_URL)? Nothing was watched (--no-task-check skips this check)\n"
        ))
        .no_file();
    assert_eq!(s.server.hits("GET", &Scene::task_path(TASK)), 1);
}

#[test]
fn from_checks_every_task_it_names_and_watches_none_when_one_is_unknown() {
    let s = Scene::new();
    s.add_chat("s-77", "default", "console");
    s.poll_replies("task-aaaaaaaaaaaa", vec![Reply::json(200, bodies::RUNNING)]);
    unknown(&s, "task-bbbbbbbbbbbb");
    unknown(&s, "task-cccccccccccc");
    let api = s.server.api();
    s.atc(["watch", "--from", "-", "--session", "s-77"])
        .stdin("[TASK_ID: task-aaaaaaaaaaaa]\n[TASK_ID: task-bbbbbbbbbbbb]\n[TASK_ID: task-cccccccccccc]\n")
        .status(6)
        .stderr(format!(
            "atc: {api} has no task task-bbbbbbbbbbbb, task-cccccccccccc (QwenPaw answers \"Task not found\"): are the ids the ones submit_to_agent printed, and were they submitted to this server (the base URL from ATC_BASE_URL)? Nothing was watched (--no-task-check skips this check)\n"
        ))
        .no_file();
    // Every task was asked for, the known one too.
    for task in [
        "task-aaaaaaaaaaaa",
        "task-bbbbbbbbbbbb",
        "task-cccccccccccc",
    ] {
        assert_eq!(s.server.hits("GET", &Scene::task_path(task)), 1, "{task}");
    }
}

#[test]
fn a_task_the_server_has_is_watched_whatever_its_state() {
    let s = Scene::new();
    s.add_chat("s-77", "default", "console");
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.atc(["watch", TASK, "--session", "s-77"])
        .stdout_contains(format!("Watching {TASK} for agent 'default'"))
        .file(|file| assert_eq!(file["jobs"][0]["status"], "pending"))
        .run();
    // The check is a look, not a poll: the tick polls and delivers as usual.
    s.tick(&[]).run();
    assert_eq!(s.status(TASK), "done");
    assert_eq!(s.delivered("s-77").len(), 1);
}

#[test]
fn no_task_check_skips_it_and_a_task_never_seen_is_lost_without_blaming_a_restart() {
    let s = Scene::new();
    s.add_chat("s-77", "default", "console");
    unknown(&s, TASK);
    s.atc(["watch", TASK, "--session", "s-77", "--no-task-check"])
        .stdout_contains(format!("Watching {TASK}"))
        .file(|file| assert_eq!(file["jobs"][0]["status"], "pending"))
        .run();
    assert_eq!(
        s.server.hits("GET", &Scene::task_path(TASK)),
        0,
        "not asked"
    );
    s.tick(&[]).run();
    assert_eq!(s.status(TASK), "lost");
    let told = s.delivered("s-77");
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(
        told[0].starts_with(&format!("[TASK_ID: {TASK}]\n[STATUS: lost]\n\n")),
        "{}",
        told[0]
    );
    assert!(
        told[0].contains("has no record of it and never had one while atc asked")
            && !told[0].contains("restart"),
        "{}",
        told[0]
    );
}

#[test]
fn a_server_that_cannot_say_is_no_reason_to_refuse() {
    // Unreachable: neither the chat nor the task can be checked; one warning.
    let env = TestEnv::new();
    env.atc(["watch", TASK, "--session", "s-77"])
        .stdout_contains("Watching")
        .stderr_contains("the chat check was skipped (and the task check)")
        .run();
    // Answering the chats but not the task (500): watched, with a warning naming why.
    let s = Scene::new();
    s.add_chat("s-77", "default", "console");
    s.poll_replies(
        TASK,
        vec![Reply::json(500, r#"{"detail":"Internal Server Error"}"#)],
    );
    s.atc(["watch", TASK, "--session", "s-77"])
        .stdout_contains("Watching")
        .stderr(format!(
            "atc: warning: could not check that the server has {TASK} (HTTP 500: Internal Server Error); watching it anyway: the next atc tick polls it\n"
        ))
        .file(|file| assert_eq!(file["jobs"][0]["status"], "pending"))
        .run();
    // Answering the task but not the chats (500): the task is not asked for either (it
    // would be refused as unknown here), and the one warning says both were skipped.
    let s = Scene::new();
    s.server.on(
        "GET",
        "/api/chats",
        vec![Reply::json(500, r#"{"detail":"Internal Server Error"}"#)],
    );
    unknown(&s, TASK);
    s.atc(["watch", TASK, "--session", "s-77"])
        .stdout_contains("Watching")
        .stderr("atc: warning: could not check that the parent chat exists (HTTP 500: Internal Server Error); the chat check was skipped (and the task check): the next atc tick checks again before delivering\n")
        .file(|file| assert_eq!(file["jobs"][0]["status"], "pending"))
        .run();
    assert_eq!(s.server.hits("GET", &Scene::task_path(TASK)), 0);
}

#[test]
fn a_held_result_is_sent_elsewhere_without_asking_for_a_record_the_server_lost() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.chats.busy_for("s-77", 100);
    s.tick(&[]).run();
    assert_eq!(s.status(TASK), "delivering");
    // The server restarted since: the record is gone. The re-watch keeps the result.
    unknown(&s, TASK);
    let before = s.server.hits("GET", &Scene::task_path(TASK));
    s.add_chat("s-78", "default", "console");
    s.atc(["watch", TASK, "--session", "s-78"])
        .stdout_contains("its result, already received, is kept")
        .run();
    assert_eq!(s.server.hits("GET", &Scene::task_path(TASK)), before);
    s.tick(&[]).run();
    assert_eq!(s.delivered("s-78").len(), 1);
}
