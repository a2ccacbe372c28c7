//! Long children (issue 19): the child's session (`watch --child-session`, `--from`'s
//! `[SESSION: …]` lines), `cancel --stop` and each of its refusals. Through the real
//! binary against the fake QwenPaw, whose stop route is pinned to contract §12.

use crate::support;

use support::atc::TestEnv;
use support::hermetic::NOWHERE;
use support::scene::Scene;

const TASK: &str = "task-3f9a0c1b2d4e";
const CHILD: &str = "default:to:worker:1774516703206:ec02e542";

#[test]
fn child_session_is_recorded_on_the_job() {
    let s = Scene::new();
    s.watch(
        TASK,
        &["--target-agent", "worker", "--child-session", CHILD],
    );
    let job = s.job(TASK);
    assert_eq!(job["child_session"], CHILD);
    assert!(
        job.get("child_chat_id").is_none(),
        "looked up when first needed"
    );
    s.atc(["status", TASK])
        .stdout_contains(format!(
            "child session   {CHILD} (its chat is looked up when the child is to be stopped)\n"
        ))
        .file_unchanged();
    // Found by hand: a watch that ended said "(chat not looked up yet)", a look that
    // never comes.
    s.atc(["cancel", TASK])
        .status(0)
        .stdout_contains("Cancelled the watch");
    s.atc(["status", TASK])
        .stdout_contains(format!("child session   {CHILD}\n"))
        .file_unchanged();
}

#[test]
fn from_pairs_each_session_line_with_the_task_id_above_it() {
    let env = TestEnv::new();
    let printed = "[TASK_ID: task-a]\n[SESSION: me:to:w:1:aa]\n\n[TASK_ID: task-b]\n";
    env.atc(["watch", "--from", "-", "--session", "s-77"])
        .stdin(printed)
        .chat_check_skipped()
        .stdout_inspected()
        .file(|file| {
            assert_eq!(file["jobs"][0]["task_id"], "task-a");
            assert_eq!(file["jobs"][0]["child_session"], "me:to:w:1:aa");
            assert_eq!(file["jobs"][1]["task_id"], "task-b");
            assert!(file["jobs"][1].get("child_session").is_none());
        });
    // --child-session, given too, names the one task's child in place of the line.
    let env = TestEnv::new();
    env.atc([
        "watch",
        "--from",
        "-",
        "--session",
        "s-77",
        "--child-session",
        CHILD,
    ])
    .stdin("[TASK_ID: task-a]\n[SESSION: me:to:w:1:aa]\n")
    .chat_check_skipped()
    .stdout_inspected()
    .file(|file| {
        assert_eq!(file["jobs"][0]["task_id"], "task-a");
        assert_eq!(file["jobs"][0]["child_session"], CHILD);
    });
}

#[test]
fn child_session_is_refused_for_several_tasks_and_when_it_is_no_label() {
    let env = TestEnv::new();
    env.atc([
        "watch",
        "task-a",
        "task-b",
        "--session",
        "s-77",
        "--child-session",
        CHILD,
    ])
    .status(2)
    .stderr("atc: --child-session names one child's session, but 2 tasks are watched; watch each with its own --child-session, or pass --from with the [SESSION: …] line under each [TASK_ID: …]\n")
    .no_file();
    let with_child =
        |child: &str| env.atc(["watch", TASK, "--session", "s-77", "--child-session", child]);
    with_child("a\u{1b}b")
        .status(2)
        .stderr_contains("--child-session")
        .stderr_contains("control character")
        .no_file();
    env.atc(["watch", "--from", "-", "--session", "s-77"])
        .stdin("[TASK_ID: task-a] [SESSION:  ]")
        .status(2)
        .stderr("atc: --from - (standard input): the [SESSION: …] line after [TASK_ID: task-a] must not be empty\n")
        .no_file();
    // A bad task id there is named as atc read it (trimmed, unquoted), and where.
    env.atc(["watch", "--from", "-", "--session", "s-77"])
        .stdin("[TASK_ID: 'task-bad id']")
        .status(2)
        .stderr("atc: --from - (standard input): task id \"task-bad id\" contains ' '; only letters, digits, '-' and '_' are allowed (e.g. task-3f9a0c1b2d4e)\n")
        .no_file();
    // Found by hand: QwenPaw's whole line was taken as the session (and a stop found no
    // such chat); a task id passed with its label names the id in it.
    with_child("[SESSION: me:to:SE:1:ab]")
    .status(2)
    .stderr("atc: --child-session \"[SESSION: me:to:SE:1:ab]\" is QwenPaw's whole [SESSION: …] line: pass its value alone (--child-session me:to:SE:1:ab), or the whole text submit_to_agent printed with --from\n")
    .no_file();
    env.atc(["watch", &format!("[TASK_ID: {TASK}]"), "--session", "s-77"])
        .status(2)
        .stderr(format!("atc: task id \"[TASK_ID: {TASK}]\" contains '['; only letters, digits, '-' and '_' are allowed: did you mean {TASK}? Pass the id alone\n"))
        .no_file();
}

#[test]
fn a_hand_edited_child_session_is_refused_by_the_loader() {
    let env = TestEnv::new();
    env.atc(["watch", TASK, "--session", "s-77"])
        .chat_check_skipped()
        .stdout_inspected()
        .run();
    env.edit_job(TASK, |job| {
        job.insert("child_session".into(), "\u{7}".into());
    });
    env.atc(["status"])
        .status(3)
        .stderr_contains("bad child_session")
        .file_unchanged();
}

#[test]
fn cancel_stop_stops_the_running_child_by_its_chat_then_cancels() {
    let s = Scene::new();
    let chat = s.chats.add_child("worker", CHILD);
    s.watch(
        TASK,
        &["--target-agent", "worker", "--child-session", CHILD],
    );
    // Running before the stop; as QwenPaw does (contract §12), cancelled at once after.
    s.poll_replies(
        TASK,
        vec![
            support::fake::Reply::json(200, support::bodies::RUNNING),
            support::fake::Reply::json(200, support::bodies::FINISHED_CANCELLED),
        ],
    );
    s.atc(["cancel", TASK, "--stop"])
        .stdout(format!(
            "Cancelled the watch on {TASK}; the child was stopped.\n"
        ))
        .file(move |file| {
            assert_eq!(file["jobs"][0]["status"], "cancelled");
            assert_eq!(file["jobs"][0]["child_chat_id"], chat.as_str());
            // Where it runs is --target-agent's to say: the stop learns no agent.
            assert!(file["jobs"][0].get("child_agent").is_none(), "{file}");
        });
    let stops: Vec<_> = s
        .server
        .requests()
        .into_iter()
        .filter(|r| r.path == "/api/console/chat/stop")
        .collect();
    assert_eq!(stops.len(), 1);
    assert_eq!(stops[0].method, "POST");
    assert_eq!(stops[0].header("x-agent-id"), Some("worker"));
    assert_eq!(
        s.chats.stops(),
        [s.job(TASK)["child_chat_id"].as_str().unwrap()]
    );
    // A second `cancel --stop`: the task record says the child ended (stopped), so no
    // stop goes out (one would reach whatever runs in that session now), no lookup.
    let lookups = s.server.hits("GET", "/api/chats");
    s.poll_replies(
        TASK,
        vec![support::fake::Reply::json(
            200,
            support::bodies::FINISHED_CANCELLED,
        )],
    );
    s.atc(["cancel", TASK, "--stop"])
        .stdout(format!(
            "{TASK} was already cancelled; atc had already stopped the child.\n"
        ))
        .file_unchanged();
    assert_eq!(s.server.hits("GET", "/api/chats"), lookups);
    assert_eq!(s.chats.stops().len(), 1, "no stop for a child that ended");
}

#[test]
fn cancel_stop_says_the_child_was_not_running_only_when_its_record_or_its_chat_says_so() {
    use support::bodies;
    use support::fake::Reply;
    // Nothing running in its chat, and its task record says it finished.
    let s = Scene::new();
    s.chats.add("default", CHILD, "default", "console");
    s.watch(TASK, &["--child-session", CHILD]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.atc(["cancel", TASK, "--stop"])
        .stdout(format!(
            "Cancelled the watch on {TASK}; the child had already finished.\n"
        ))
        .file(|file| assert_eq!(file["jobs"][0]["status"], "cancelled"));
    // The record tells nothing (the server answers 500): the chat, idle, says so.
    let s = Scene::new();
    s.chats.add("default", CHILD, "default", "console");
    s.watch(TASK, &["--child-session", CHILD]);
    s.poll_replies(
        TASK,
        vec![Reply::json(500, r#"{"detail":"Internal Server Error"}"#)],
    );
    s.atc(["cancel", TASK, "--stop"])
        .stdout(format!(
            "Cancelled the watch on {TASK}; the child was not running (its chat is idle).\n"
        ))
        .file(|file| assert_eq!(file["jobs"][0]["status"], "cancelled"));
}

/// Issue 36 H1, met by the simulation's stray: the watch named another task's child
/// session (nothing else held it). The stop ends that other child's turn; this task's
/// record still runs, so atc says what happened, records no stop and keeps the watch.
#[test]
fn cancel_stop_that_ends_another_tasks_child_says_so_and_records_no_stop() {
    use support::bodies;
    use support::fake::Reply;
    let s = Scene::new();
    let chat = s.chats.add_child("default", CHILD);
    s.watch(TASK, &["--child-session", CHILD]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::RUNNING)]);
    s.atc(["cancel", TASK, "--stop"])
        .status(1)
        .stderr_contains(format!(
            "the stop ended the turn running in chat {chat} of agent 'default', but this task still runs: that session is another task's child (that task was stopped); pass the session submit_to_agent printed for this task ([SESSION: …])"
        ))
        .file(|file| {
            let job = &file["jobs"][0];
            assert_eq!(job["status"], "pending", "{job}");
            assert!(job.get("stopped_at").is_none(), "{job}");
            assert!(job.get("child_session").is_none(), "forgotten: {job}");
        })
        .run();
    assert_eq!(
        s.chats.stops().len(),
        1,
        "one stop: the other child is idle now"
    );
    // The right session, given now, is taken.
    s.atc([
        "watch",
        TASK,
        "--session",
        "s-77",
        "--child-session",
        "the-right-one",
    ])
    .stdout_contains("now with --child-session")
    .run();
}

#[test]
fn cancel_stop_that_finds_nothing_while_the_record_says_it_runs_keeps_the_watch_after_three_tries()
{
    use support::bodies;
    use support::fake::Reply;
    let s = Scene::new();
    let chat = s.chats.add("default", CHILD, "default", "console");
    s.watch(TASK, &["--child-session", CHILD]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::RUNNING)]);
    s.atc(["cancel", TASK, "--stop"])
        .status(1)
        .stderr(format!(
            "atc: cannot stop the child of {TASK} (3 tries): QwenPaw found nothing running to stop in chat {chat} of agent 'default', but the task record says the child still runs; the watch is kept, try again\n"
        ))
        .file_unchanged();
    assert_eq!(s.status(TASK), "pending");
    assert_eq!(s.chats.stops().len(), 3, "a bounded number of tries");
}

const QA: &str = "QwenPaw_QA_Agent_0.2";

#[test]
fn cancel_stop_of_a_child_watched_without_its_agent_finds_it_where_it_runs_and_records_it() {
    use support::bodies;
    use support::fake::Reply;
    let s = Scene::new();
    let chat = s.chats.add_child(QA, CHILD);
    s.server
        .on("GET", "/api/agents", vec![Reply::json(200, bodies::AGENTS)]);
    // No --target-agent: its polls work anyway (the poll route ignores the agent), but
    // its chat is one of QA's.
    s.watch(TASK, &["--child-session", CHILD]);
    let recorded = chat.clone();
    s.poll_replies(
        TASK,
        vec![
            Reply::json(200, bodies::RUNNING),
            Reply::json(200, bodies::FINISHED_CANCELLED),
        ],
    );
    s.atc(["cancel", TASK, "--stop"])
        .stdout(format!(
            "Cancelled the watch on {TASK}; the child was stopped.\n"
        ))
        .file(move |file| {
            let job = &file["jobs"][0];
            assert_eq!(job["status"], "cancelled");
            assert_eq!(job["child_agent"], QA);
            assert_eq!(job["child_chat_id"], recorded.as_str());
            assert!(job["stopped_at"].is_string(), "{job}");
            assert!(job.get("target_agent").is_none_or(|a| a.is_null()));
        });
    let stops: Vec<_> = s
        .server
        .requests()
        .into_iter()
        .filter(|r| r.path == "/api/console/chat/stop")
        .collect();
    assert_eq!(stops.len(), 1);
    assert_eq!(stops[0].header("x-agent-id"), Some(QA));
    assert_eq!(s.chats.stops(), std::slice::from_ref(&chat));
    s.atc(["status", TASK])
        .stdout_contains(format!(
            "child session   {CHILD} (chat {chat} of agent '{QA}')"
        ))
        .stdout_contains("note            cancelled; atc stopped the child\n")
        .file_unchanged();
    // The next stop goes straight there: no agent list, no chat search.
    let (agents, lists) = (
        s.server.hits("GET", "/api/agents"),
        s.server.hits("GET", "/api/chats"),
    );
    s.poll_replies(
        TASK,
        vec![
            Reply::json(200, bodies::RUNNING),
            Reply::json(200, bodies::FINISHED_CANCELLED),
        ],
    );
    s.atc(["cancel", TASK, "--stop"])
        .stdout(format!(
            "{TASK} was already cancelled; atc had already stopped the child.\n"
        ))
        .file_unchanged();
    assert_eq!(s.server.hits("GET", "/api/agents"), agents);
    assert_eq!(s.server.hits("GET", "/api/chats"), lists);
}

#[test]
fn cancel_stop_without_a_child_session_is_refused_and_keeps_the_watch() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.atc(["cancel", TASK, "--stop"])
        .status(1)
        .stderr(format!(
            "atc: cannot stop the child of {TASK}: its session is not known; `atc watch {TASK} --session s-77 --child-session SID` watches it with its session (SID: the [SESSION: …] line submit_to_agent printed), or stop it from QwenPaw's console; the watch is kept\n"
        ))
        .file_unchanged();
    assert_eq!(s.status(TASK), "pending");
    assert!(s.chats.stops().is_empty());
}

#[test]
fn cancel_stop_with_the_server_unreachable_exits_5_and_keeps_the_watch() {
    let env = TestEnv::new();
    env.atc(["watch", TASK, "--session", "s-77", "--child-session", CHILD])
        .chat_check_skipped()
        .stdout_inspected()
        .run();
    assert!(
        env.job(TASK)["base_url"]
            .as_str()
            .unwrap()
            .starts_with(NOWHERE)
    );
    env.atc(["cancel", TASK, "--stop"])
        .status(5)
        .stderr_contains(format!(
            "atc: cannot stop the child of {TASK} (3 tries): its chat could not be looked up ("
        ))
        .stderr_contains("the watch is kept, try again\n")
        .file_unchanged();
    assert_eq!(env.job(TASK)["status"], "pending");
}

#[test]
fn cancel_stop_refused_by_the_server_exits_5_and_keeps_the_watch() {
    let s = Scene::new();
    s.chats.add_child("default", CHILD);
    s.watch(TASK, &["--child-session", CHILD]);
    s.poll_replies(
        TASK,
        vec![support::fake::Reply::json(200, support::bodies::RUNNING)],
    );
    s.server.on(
        "POST",
        "/api/console/chat/stop",
        vec![support::fake::Reply::json(
            500,
            r#"{"detail":"Internal Server Error"}"#,
        )],
    );
    s.atc(["cancel", TASK, "--stop"])
        .status(5)
        .stderr(format!(
            "atc: cannot stop the child of {TASK} (3 tries): HTTP 500: Internal Server Error; the watch is kept, try again\n"
        ))
        .file_unchanged();
    assert_eq!(s.status(TASK), "pending");
    assert_eq!(s.server.hits("POST", "/api/console/chat/stop"), 3);
}

#[test]
fn cancel_without_stop_sends_nothing() {
    let s = Scene::new();
    s.chats.add_child("default", CHILD);
    s.watch(TASK, &["--child-session", CHILD]);
    let before = s.server.requests().len();
    s.atc(["cancel", TASK])
        .stdout_contains("and it is not stopped")
        .file(|file| assert_eq!(file["jobs"][0]["status"], "cancelled"));
    assert_eq!(s.server.requests().len(), before);
    assert!(s.chats.stops().is_empty());
}

#[test]
fn stop_after_stops_a_child_still_running_and_its_result_says_so() {
    use support::bodies;
    use support::fake::Reply;
    let s = Scene::new();
    let chat = s.chats.add_child("worker", CHILD);
    s.watch(
        TASK,
        &[
            "--target-agent",
            "worker",
            "--child-session",
            CHILD,
            "--stop-after",
            "3s",
        ],
    );
    assert_eq!(s.job(TASK)["stop_after_secs"], 3);
    s.atc(["status", TASK])
        .stdout_contains("\nstop after      3s (after the child starts)\n")
        .file_unchanged();
    // The record's started_at is long past: the first tick that finds it running stops it.
    s.poll_replies(
        TASK,
        vec![
            Reply::json(200, bodies::RUNNING),
            Reply::json(200, bodies::FINISHED_CANCELLED),
        ],
    );
    s.tick(&[]).file(move |file| {
        let job = &file["jobs"][0];
        assert_eq!(job["status"], "pending");
        assert_eq!(job["child_chat_id"], chat.as_str());
        assert!(job["stopped_at"].is_string());
        assert!(job.get("stop_asked_at").is_none());
    });
    assert_eq!(s.chats.stops().len(), 1);
    let shown = s
        .atc(["status", TASK])
        .stdout_inspected()
        .file_unchanged()
        .run();
    let shown = support::atc::stdout(&shown);
    assert!(
        shown.contains("\nstop after      3s (stopped at "),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("child session   {CHILD} (chat 6f1c0e1a-")),
        "{shown}"
    );
    let listed = s.atc(["status"]).stdout_inspected().file_unchanged().run();
    let listed = support::atc::stdout(&listed);
    assert!(listed.contains("; stopped"), "{listed}");
    s.tick(&[]).run();
    assert_eq!(s.status(TASK), "done");
    let delivered = s.delivered("s-77");
    assert_eq!(delivered.len(), 1);
    assert!(
        delivered[0].contains("Task failed.\n\nError: Task cancelled"),
        "{}",
        delivered[0]
    );
    assert!(
        delivered[0].ends_with(
            "\n\n[atc: stopped this task after 3s at the watch's request (--stop-after 3s)]"
        ),
        "{}",
        delivered[0]
    );
    assert_eq!(s.chats.stops().len(), 1, "stopped once");
}

#[test]
fn stop_after_a_failed_stop_is_asked_again_on_the_next_tick() {
    use support::bodies;
    use support::fake::Reply;
    let s = Scene::new();
    s.chats.add_child("default", CHILD);
    s.watch(TASK, &["--child-session", CHILD, "--stop-after", "1s"]);
    // Running, running; once stopped, cancelled at once (contract §12).
    s.poll_replies(
        TASK,
        vec![
            Reply::json(200, bodies::RUNNING),
            Reply::json(200, bodies::RUNNING),
            Reply::json(200, bodies::FINISHED_CANCELLED),
        ],
    );
    s.server.answer(
        "POST",
        "/api/console/chat/stop",
        500,
        r#"{"detail":"Internal Server Error"}"#,
    );
    s.tick(&[])
        .file(|file| assert!(file["jobs"][0].get("stopped_at").is_none()));
    s.server.off("POST", "/api/console/chat/stop");
    s.tick(&[])
        .file(|file| assert!(file["jobs"][0]["stopped_at"].is_string()));
    assert_eq!(
        s.chats.stops().len(),
        1,
        "the fake's own route saw the second"
    );
}

#[test]
fn stop_after_a_stop_that_keeps_failing_is_tried_three_times_then_given_up_in_one_line() {
    use support::bodies;
    use support::fake::Reply;
    let s = Scene::new();
    s.chats.add_child("default", CHILD);
    s.watch(TASK, &["--child-session", CHILD, "--stop-after", "1s"]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::RUNNING)]);
    s.server.answer(
        "POST",
        "/api/console/chat/stop",
        500,
        r#"{"detail":"Internal Server Error"}"#,
    );
    // Two ticks try, silently (the next tick tries again); the third gives up, saying so.
    s.tick(&[]).run();
    s.tick(&[]).run();
    s.tick(&[])
        .stderr(format!(
            "atc: gave up on {TASK} (pending, stop given up): 3 stops did not stop its child (HTTP 500); still watching it (its result comes back when it ends); `atc status {TASK}` says why; `atc cancel {TASK} --stop` tries again, or stop it from QwenPaw's console\n"
        ))
        .run();
    // Then never again, and nothing more is said.
    for _ in 0..3 {
        s.tick(&[]).run();
    }
    assert_eq!(s.server.hits("POST", "/api/console/chat/stop"), 3);
    s.atc(["status", TASK])
        .stdout_contains("\nstop after      1s (given up: 3 stops did not stop the child)\n")
        .stdout_contains("\nstop error      HTTP 500: Internal Server Error (3 tries of 3)\n")
        .file_unchanged();
    s.atc(["status"])
        .stdout_contains("; stop given up")
        .file_unchanged();
    // The child ends by itself: its result says the stop was given up, once.
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.tick(&[]).run();
    assert_eq!(s.status(TASK), "done");
    let delivered = s.delivered("s-77");
    assert_eq!(delivered.len(), 1);
    assert!(
        delivered[0].ends_with(
            "ECHO: hello\n\n[atc: the watch asked to stop this task after 1s (--stop-after 1s), but 3 stops did not stop it (HTTP 500); it ran to its end]"
        ),
        "{}",
        delivered[0]
    );
}

#[test]
fn stop_after_finds_a_child_on_another_agent_and_says_it_in_the_words_of_the_plugin() {
    use support::bodies;
    use support::fake::Reply;
    let s = Scene::new();
    s.chats.add_child(QA, CHILD);
    s.server
        .on("GET", "/api/agents", vec![Reply::json(200, bodies::AGENTS)]);
    // As the plugin's watch_agent_task(…, stop_after="3s") runs it, without --target-agent.
    s.watch(
        TASK,
        &[
            "--child-session",
            CHILD,
            "--stop-after",
            "3s",
            "--origin",
            "plugin",
        ],
    );
    assert_eq!(s.job(TASK)["origin"], "plugin");
    s.poll_replies(
        TASK,
        vec![
            Reply::json(200, bodies::RUNNING),
            Reply::json(200, bodies::FINISHED_CANCELLED),
        ],
    );
    s.tick(&[]).file(|file| {
        let job = &file["jobs"][0];
        assert_eq!(job["child_agent"], QA);
        assert!(job["stopped_at"].is_string(), "{job}");
        assert!(job.get("stop_tries").is_none(), "{job}");
    });
    assert_eq!(s.chats.stops().len(), 1);
    // Delivered, then (the woken turn ended) the console toast.
    for _ in 0..3 {
        s.tick(&[]).run();
    }
    let delivered = s.delivered("s-77");
    assert_eq!(delivered.len(), 1);
    assert!(
        delivered[0].ends_with(
            "\n\n[atc: stopped this task after 3s at the watch's request (stop_after=\"3s\")]"
        ),
        "{}",
        delivered[0]
    );
    // The list says the child was stopped, and that the toast was shown.
    s.atc(["status"])
        .stdout_contains("child stopped by atc; delivered ")
        .stdout_contains("; toast shown\n")
        .file_unchanged();
    assert_eq!(s.chats.stops().len(), 1, "stopped once");
}

#[test]
fn check_in_is_refused_with_a_group_whose_members_never_check_in() {
    let env = TestEnv::new();
    env.atc([
        "watch",
        "task-a",
        "task-b",
        "--session",
        "s-77",
        "--group",
        "g",
        "--check-in",
        "1m",
    ])
    .status(2)
    .stderr("atc: --check-in does not work with --group: the members of group g report together, in its one turn once none is running, so none would ever check in; drop --check-in, or watch each task without --group\n")
    .no_file();
}

/// A --stop-after whose watch ended before a stop says so, not a time a stop was due as if
/// one happened then: the child finished when a tick looked (no timer between), or the
/// watch was cancelled first.
#[test]
fn a_stop_after_of_a_watch_that_ended_unstopped_says_it_was_not_stopped() {
    use support::bodies;
    use support::fake::Reply;
    let s = Scene::new();
    let args = ["--child-session", CHILD, "--stop-after", "1s"];
    s.watch(TASK, &args);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.tick(&[]).run();
    assert_eq!(s.status(TASK), "done");
    s.atc(["status", TASK])
        .stdout_contains(
            "\nstop after      1s (not stopped: the child had finished when a tick looked)\n",
        )
        .file_unchanged();
    assert!(s.chats.stops().is_empty());
    let other = "task-00000000000b";
    s.watch(other, &args);
    s.atc(["cancel", other]).stdout_inspected().run();
    s.atc(["status", other])
        .stdout_contains("\nstop after      1s (not stopped: the watch ended first)\n")
        .file_unchanged();
}

#[test]
fn durations_are_written_in_one_format() {
    let s = Scene::new();
    s.watch(
        TASK,
        &[
            "--child-session",
            CHILD,
            "--stop-after",
            "25h",
            "--check-in",
            "90s",
        ],
    );
    s.atc(["status", TASK])
        .stdout_contains("\nstop after      1d 1h (after the child starts)\n")
        .stdout_contains("\ncheck-ins       every 1m 30s, 0 of at most 5 sent")
        .file_unchanged();
}

#[test]
fn a_cancel_meeting_a_check_in_being_posted_says_it_is_the_check_in_that_may_arrive() {
    use support::bodies;
    use support::chats::PostFault;
    use support::fake::Reply;
    let s = Scene::new();
    s.watch(TASK, &["--check-in", "1s"]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::RUNNING)]);
    s.chats
        .fault(PostFault::SlowAfterStore(std::time::Duration::from_secs(2)));
    let tick = s.tick_until_posted(&[]);
    s.atc(["cancel", TASK])
        .stdout(format!(
            "Cancelled the watch on {TASK}, but its check-in was being posted to session s-77 (user default, channel console) at that moment: that check-in may already be on its way; its result will not come, the watch is cancelled.\n"
        ))
        .run();
    tick.wait();
    assert_eq!(s.status(TASK), "cancelled");
}

#[test]
fn status_of_a_cancelled_watch_says_what_was_true_of_its_child_at_the_cancel() {
    use support::bodies;
    use support::fake::Reply;
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::RUNNING)]);
    s.tick(&[]).run();
    s.atc(["cancel", TASK])
        .stdout(format!(
            "Cancelled the watch on {TASK}; the child was still running at atc's last poll and is not stopped: `atc wait {TASK}` or check_agent_task says how it ends.\n"
        ))
        .run();
    // Later the child may have finished: atc no longer asks, so it says what it knew.
    s.atc(["status", TASK])
        .stdout_contains(format!("\nnote            cancelled while the child was still running (as of atc's last poll); atc no longer watches it: `atc wait {TASK}` or check_agent_task says how it ended\n"))
        .file_unchanged();
    let listed = s.atc(["status"]).stdout_inspected().file_unchanged().run();
    assert!(
        !support::atc::stdout(&listed).contains("keeps running"),
        "{}",
        support::atc::stdout(&listed)
    );
    // A watch whose child had finished (its result waiting for a busy parent).
    s.watch("task-done", &["--session", "s-2"]);
    s.poll_replies(
        "task-done",
        vec![Reply::json(200, bodies::FINISHED_COMPLETED)],
    );
    s.chats.busy_for("s-2", 100);
    s.tick(&[]).run();
    assert_eq!(s.status("task-done"), "delivering");
    s.atc(["cancel", "task-done"])
        .stdout("Cancelled the watch on task-done; the child had already finished; its result is not delivered (check_agent_task still shows it).\n")
        .run();
    s.atc(["status", "task-done"])
        .stdout_contains("\nnote            cancelled after the child had finished (completed); its result was not delivered\n")
        .file_unchanged();
}

#[test]
fn stop_after_is_refused_without_a_child_session_or_whole_seconds() {
    let env = TestEnv::new();
    env.atc(["watch", TASK, "--session", "s-77", "--stop-after", "5m"])
        .status(2)
        .stderr(format!("atc: --stop-after needs the child's session to stop it, and {TASK} has none: pass --child-session SID (the [SESSION: …] line submit_to_agent printed), or --from with that line under its [TASK_ID: …]\n"))
        .no_file();
    // Under a second, a bare 0 included (no time at all, not "not a whole number").
    for (given, shown) in [("500ms", "500ms"), ("0", "0s")] {
        env.atc([
            "watch",
            TASK,
            "--session",
            "s-77",
            "--child-session",
            CHILD,
            "--stop-after",
            given,
        ])
        .status(2)
        .stderr(format!("atc: --stop-after {shown} is less than a second: give at least 1s (durations are written like 30s, 5m, 24h)\n"))
        .no_file();
    }
}

#[test]
fn cancel_stop_of_a_finished_child_sends_no_stop_and_cancels() {
    use support::bodies;
    use support::fake::Reply;
    let s = Scene::new();
    s.watch(TASK, &["--child-session", CHILD]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    // The parent chat is busy: the result waits, delivering.
    s.chats.busy_for("s-77", 10);
    s.tick(&[]).run();
    assert_eq!(s.status(TASK), "delivering");
    s.atc(["cancel", TASK, "--stop"])
        .stdout(format!(
            "Cancelled the watch on {TASK}; the child had already finished; its result is not delivered (check_agent_task still shows it).\n"
        ))
        .file(|file| assert_eq!(file["jobs"][0]["status"], "cancelled"));
    assert!(s.chats.stops().is_empty());
}

#[test]
fn a_stop_is_logged_without_the_child_session() {
    use support::bodies;
    use support::fake::Reply;
    let s = Scene::new();
    s.chats.add_child("default", CHILD);
    s.watch(TASK, &["--child-session", CHILD, "--stop-after", "1s"]);
    s.poll_replies(
        TASK,
        vec![
            Reply::json(200, bodies::RUNNING),
            Reply::json(200, bodies::FINISHED_CANCELLED),
        ],
    );
    s.tick(&[]).run();
    let log = s
        .atc(["log", TASK])
        .stdout_inspected()
        .file_unchanged()
        .run();
    let log = support::atc::stdout(&log);
    assert!(log.contains("stopped"), "{log}");
    let raw = std::fs::read_to_string(format!("{}.log", s.env.state.display())).unwrap();
    assert!(raw.contains("\"event\":\"stopped\""), "{raw}");
    assert!(!raw.contains(CHILD), "the log holds no session ids: {raw}");
}

#[test]
fn check_in_tells_a_waiting_parent_then_the_result_arrives_once() {
    use support::bodies;
    use support::fake::Reply;
    let s = Scene::new();
    s.watch(TASK, &["--child-session", CHILD, "--check-in", "2s"]);
    assert_eq!(s.job(TASK)["check_in_secs"], 2);
    s.poll_replies(
        TASK,
        vec![
            Reply::json(200, bodies::RUNNING),
            Reply::json(200, bodies::FINISHED_COMPLETED),
        ],
    );
    // The record's started_at is long past: the first tick checks in.
    s.tick(&[]).file(|file| {
        let job = &file["jobs"][0];
        assert_eq!(job["status"], "pending");
        assert_eq!(job["check_ins"], 1);
        assert!(job.get("check_in").is_none(), "done with, not on its way");
        assert!(job.get("final").is_none());
    });
    let turns = s.delivered("s-77");
    assert_eq!(turns.len(), 1, "{turns:?}");
    let text = &turns[0];
    assert!(
        text.starts_with(&format!(
            "[TASK_ID: {TASK}]\n[STATUS: running]\n\nStill running after "
        )),
        "{text}"
    );
    assert!(text.contains("(check-in 1 of at most 5)"), "{text}");
    assert!(
        text.contains(&format!("Stop the task: atc cancel {TASK} --stop")),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "Stop these check-ins: atc cancel {TASK} --check-ins"
        )),
        "{text}"
    );
    s.atc(["status", TASK])
        .stdout_contains("\ncheck-ins       every 2s, 1 of at most 5 sent; next at ")
        .file_unchanged();
    let ids: Vec<String> = s
        .posts()
        .iter()
        .map(|p| p.json()["input"][0]["metadata"]["qwenpaw_client_message_id"].to_string())
        .collect();
    // The result: delivered once, with the job's own delivery id.
    s.tick(&[]).run();
    assert_eq!(s.status(TASK), "done");
    let turns = s.delivered("s-77");
    assert_eq!(turns.len(), 2, "{turns:?}");
    assert!(turns[1].contains("[STATUS: finished]"), "{}", turns[1]);
    let all: Vec<String> = s
        .posts()
        .iter()
        .map(|p| p.json()["input"][0]["metadata"]["qwenpaw_client_message_id"].to_string())
        .collect();
    assert_eq!(all.len(), 2);
    assert_eq!(all[0], ids[0]);
    assert!(all[0].ends_with("-c1\""), "{all:?}");
    // The result's is `atc-<job id>` (hex: one dash), a check-in's `atc-<job id>-c<n>`.
    assert_eq!(all[1].matches('-').count(), 1, "{all:?}");
}

#[test]
fn a_check_in_waits_for_a_busy_parent_and_goes_once() {
    use support::bodies;
    use support::fake::Reply;
    let s = Scene::new();
    s.watch(TASK, &["--check-in", "1s"]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::RUNNING)]);
    s.chats.busy_for("s-77", 1);
    s.tick(&[])
        .file(|file| assert_eq!(file["jobs"][0]["check_in"], "delivering"));
    assert!(s.delivered("s-77").is_empty());
    s.atc(["status"])
        .stdout_contains("check-in on its way")
        .file_unchanged();
    s.tick(&[])
        .file(|file| assert_eq!(file["jobs"][0]["check_ins"], 1));
    let turns = s.delivered("s-77");
    assert_eq!(turns.len(), 1, "{turns:?}");
    // Without the child's session the notice cannot offer --stop.
    assert!(
        turns[0].contains(&format!(
            "Stop waiting for it (the task keeps running): atc cancel {TASK}\n"
        )),
        "{}",
        turns[0]
    );
}

#[test]
fn cancel_check_ins_stops_them_and_keeps_watching() {
    let s = Scene::new();
    s.watch(TASK, &["--check-in", "1m"]);
    s.atc(["cancel", TASK, "--check-ins"])
        .stdout(format!(
            "No more check-ins for {TASK}; still watching it (its result comes back as usual).\n"
        ))
        .file(|file| {
            assert_eq!(file["jobs"][0]["status"], "pending");
            assert!(file["jobs"][0].get("check_in_secs").is_none());
        });
    s.atc(["cancel", TASK, "--check-ins"])
        .status(1)
        .stderr(format!(
            "atc: {TASK} has no check-ins to stop (watched without --check-in, or they were stopped already): `atc watch {TASK} --session s-77 --check-in D` starts them\n"
        ))
        .file_unchanged();
    s.atc(["cancel", TASK, "--check-ins", "--stop"])
        .status(2)
        .stderr_contains("cannot be used with")
        .file_unchanged();
    // Found by hand: a group member was told to watch again with --check-in, which a
    // group refuses.
    s.watch("task-in-a-group", &["--group", "g"]);
    s.atc(["cancel", "task-in-a-group", "--check-ins"])
        .status(1)
        .stderr("atc: task-in-a-group has no check-ins to stop: it is in group g, whose members report together, without check-ins\n")
        .file_unchanged();
    let env = TestEnv::new();
    env.atc(["watch", TASK, "--session", "s-77", "--check-in", "1500ms"])
        .status(2)
        .stderr("atc: --check-in 1s 500ms is not a whole number of seconds: write 1s or 2s\n")
        .no_file();
}

#[test]
fn cancel_stop_of_several_cancels_those_it_stopped_and_keeps_the_one_it_could_not() {
    let s = Scene::new();
    s.chats.add_child("default", CHILD);
    s.watch(TASK, &["--child-session", CHILD]);
    s.watch("task-unknown-child", &[]);
    s.poll_replies(
        TASK,
        vec![
            support::fake::Reply::json(200, support::bodies::RUNNING),
            support::fake::Reply::json(200, support::bodies::FINISHED_CANCELLED),
        ],
    );
    s.atc(["cancel", "task-unknown-child", TASK, "--stop"])
        .status(1)
        .stdout(format!(
            "Cancelled the watch on {TASK}; the child was stopped.\n"
        ))
        .stderr("atc: cannot stop the child of task-unknown-child: its session is not known; `atc watch task-unknown-child --session s-77 --child-session SID` watches it with its session (SID: the [SESSION: …] line submit_to_agent printed), or stop it from QwenPaw's console; the watch is kept (the other watch is cancelled)\n")
        .file(|file| {
            assert_eq!(file["jobs"][0]["status"], "cancelled");
            assert_eq!(file["jobs"][1]["status"], "pending");
        });
    assert_eq!(s.chats.stops().len(), 1);
    // None stopped: each says why, in one line; nothing is cancelled.
    s.watch("task-unknown-too", &[]);
    s.atc(["cancel", "task-unknown-child", "task-unknown-too", "--stop"])
        .status(1)
        .stdout("")
        .stderr("atc: cannot stop the child of task-unknown-child: its session is not known; `atc watch task-unknown-child --session s-77 --child-session SID` watches it with its session (SID: the [SESSION: …] line submit_to_agent printed), or stop it from QwenPaw's console; the watch is kept; also cannot stop the child of task-unknown-too: its session is not known; `atc watch task-unknown-too --session s-77 --child-session SID` watches it with its session (SID: the [SESSION: …] line submit_to_agent printed), or stop it from QwenPaw's console; the watch is kept\n")
        .file_unchanged();
}

#[test]
fn cancel_check_ins_of_several_stops_each_or_none() {
    let s = Scene::new();
    s.watch(TASK, &["--check-in", "1m"]);
    s.watch("task-b", &["--check-in", "5m"]);
    s.watch("task-quiet", &[]);
    // One without check-ins: none is changed.
    s.atc(["cancel", TASK, "task-quiet", "--check-ins"])
        .status(1)
        .stderr_contains("atc: task-quiet has no check-ins to stop")
        .file_unchanged();
    s.atc(["cancel", TASK, "task-b", "--check-ins"])
        .stdout(format!(
            "No more check-ins for {TASK}; still watching it (its result comes back as usual).\nNo more check-ins for task-b; still watching it (its result comes back as usual).\n"
        ))
        .file(|file| {
            for job in &file["jobs"].as_array().unwrap()[..2] {
                assert_eq!(job["status"], "pending");
                assert!(job.get("check_in_secs").is_none(), "{job}");
            }
        });
}

/// Found by hand: `atc redeliver` of a cancelled watch said "`atc watch T` again", which
/// is refused ("no session to deliver to"), and a re-watch with fewer options turns the
/// others off. The command it now gives watches the task again as it was.
#[test]
fn the_watch_again_command_a_hint_gives_remakes_the_watch_as_it_was() {
    let s = Scene::new();
    let session = "lena's chat 1";
    s.chats.add("SE", session, "lena", "console");
    let flags = [
        "--session",
        session,
        "--user",
        "lena",
        "--agent",
        "SE",
        "--target-agent",
        "worker",
        "--child-session",
        CHILD,
        "--stop-after",
        "1h 30m",
        "--check-in",
        "10m",
        "--on-empty",
        "skip",
        "--on-no-answer",
        "silent",
        "--forward",
        "never",
        "--fork-branch",
        "b-1",
    ];
    s.watch(TASK, &flags);
    let before = s.job(TASK);
    s.atc(["cancel", TASK]).stdout_inspected().run();
    let out = s
        .atc(["redeliver", TASK])
        .status(1)
        .stderr_inspected()
        .run();
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    let command = said
        .split('`')
        .nth(1)
        .and_then(|c| c.strip_prefix("atc "))
        .unwrap_or_else(|| panic!("no `atc …` command in {said:?}"));
    assert_eq!(
        command,
        format!(
            "watch {TASK} --session 'lena'\\''s chat 1' --user lena --agent SE --target-agent worker --child-session {CHILD} --stop-after '1h 30m' --check-in 10m --fork-branch b-1 --on-no-answer silent --on-empty skip --forward never"
        )
    );
    // Run as a person pastes it (in a shell aimed at the fake, as `Scene::atc` is).
    s.checked(&[TASK], || {
        s.env
            .sh(&format!("exec \"$ATC\" {command}"))
            .env("ATC_BASE_URL", s.server.url())
            .stdout_contains(format!("Watching {TASK} (running on agent 'worker') for agent 'SE' again (the previous watch ended cancelled)"))
            .stderr_inspected()
            .run()
    });
    let after = s.job(TASK);
    // The same watch, but for its ids, its status and its times: the re-watch registers
    // when it runs (a second after the first, under load).
    let times = ["registered_at", "updated_at"];
    for field in before.as_object().unwrap().keys() {
        if !["job_id", "created_at", "status"].contains(&field.as_str())
            && !times.contains(&field.as_str())
        {
            assert_eq!(after[field], before[field], "{field}");
        }
    }
    for field in times {
        let at =
            |job: &serde_json::Value| atc::time::Timestamp::parse(job[field].as_str().unwrap());
        assert!(at(&after).is_some() && at(&after) >= at(&before), "{field}");
    }
    assert_eq!(after["status"], "pending");
}
