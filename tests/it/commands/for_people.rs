//! The commands for people and schedulers: `wait`, `doctor`, `log`, `import-plugin-state`,
//! `watch --from` and `timer print`, through the real binary against the fake QwenPaw.
//! Each documented exit code of each command is produced here.

use crate::support;

use std::path::Path;

use serde_json::{Value, json};
use support::atc::{TestEnv, stderr, stdout};
use support::bodies;
use support::fake::Reply;
use support::hermetic::NOWHERE;
use support::scene::Scene;

const TASK: &str = "task-3f9a0c1b2d4e";

fn task_path(task: &str) -> String {
    Scene::task_path(task)
}

// ---------------------------------------------------------------------------------------
// wait

#[test]
fn wait_prints_exactly_what_a_delivery_carries_and_exits_0() {
    let s = Scene::new();
    s.poll_replies(
        TASK,
        vec![
            Reply::json(200, bodies::RUNNING),
            Reply::json(200, bodies::FINISHED_COMPLETED),
        ],
    );
    // With -v it says first which server it asks, and why that one.
    let waited = s
        .atc(["wait", TASK, "--interval", "100ms", "-v"])
        .stdout_inspected()
        .stderr(format!(
            "atc: QwenPaw API {} (from ATC_BASE_URL)\n",
            s.server.api()
        ))
        .no_file()
        .run();
    let printed = stdout(&waited);
    assert!(printed.contains("ECHO: hello"), "{printed}");
    assert_eq!(
        s.server.hits("GET", &task_path(TASK)),
        2,
        "polled until finished"
    );
    // The same task, watched and ticked: the delivered turn is the text wait printed.
    s.watch(TASK, &[]);
    s.tick(&[]).run();
    assert_eq!(s.delivered("s-77"), [printed.trim_end_matches('\n')]);
}

/// Found by hand: with two servers, `wait` of a task watched on the second polled the
/// first (the config file's base URL, or the default) and failed. The watch's server is
/// asked, unless a person named one.
#[test]
fn wait_of_a_watched_task_asks_the_server_its_watch_recorded() {
    let s = watched_and_unnamed();
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.env
        .atc(["wait", TASK, "-v"])
        .env_remove("ATC_BASE_URL")
        .stdout_contains("ECHO: hello")
        .stderr(format!(
            "atc: QwenPaw API {} (from the watch of {TASK} in {})\n",
            s.server.api(),
            s.env.state.display()
        ))
        .file_unchanged()
        .run();
    // Named by a person (here ATC_BASE_URL), the named one is asked.
    s.env
        .atc(["wait", TASK, "--interval", "10ms"])
        .env("ATC_BASE_URL", NOWHERE)
        .status(5)
        .stderr_contains(format!("GET {NOWHERE}/api/console/chat/task/{TASK}"))
        .file_unchanged()
        .run();
}

/// A scene whose TASK is watched on the fake, and whose config file's base URL (one
/// nobody names for a command run without `ATC_BASE_URL`) is where nothing runs.
fn watched_and_unnamed() -> Scene {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.env
        .atc(["config", "set", "base-url", NOWHERE])
        .env_remove("ATC_BASE_URL")
        .stdout_inspected()
        .run();
    s
}

/// Found by hand: `atc watch T --check-in 5m` from a shell whose base URL nobody named
/// (a config file's, or the default) moved a watch of a second server to where nothing
/// runs ("Re-targeted …: base URL A → B"); every tick then failed its checks. A re-watch
/// stays on its watch's server unless a person names one.
#[test]
fn a_rewatch_stays_on_the_server_its_watch_recorded_unless_one_is_named() {
    let s = watched_and_unnamed();
    let api = s.server.api();
    // The re-watch checks the task where the watch is: the fake (port 9 would refuse).
    s.poll_replies(TASK, vec![Reply::json(200, bodies::RUNNING)]);
    s.env
        .atc(["watch", TASK, "--session", "s-77", "--check-in", "5m", "-v"])
        .env_remove("ATC_BASE_URL")
        .stdout_contains(format!("Already watching {TASK} for agent 'default'"))
        .stdout_contains("; now with --check-in 5m; ")
        .stderr_contains(format!(
            "atc: QwenPaw API {api} (from the watch of {TASK} in {})",
            s.env.state.display()
        ))
        .run();
    assert_eq!(s.job(TASK)["base_url"], api.as_str());
    assert_eq!(s.job(TASK)["check_in_secs"], 300);
    // Named (ATC_BASE_URL), the watch moves, and says so.
    s.env
        .atc(["watch", TASK, "--session", "s-77", "--check-in", "5m"])
        .env("ATC_BASE_URL", NOWHERE)
        .stdout_contains(format!("Re-targeted {TASK}"))
        .stderr_contains("the chat check was skipped")
        .run();
    assert_eq!(s.job(TASK)["base_url"], format!("{NOWHERE}/api"));
}

#[test]
fn wait_exits_1_for_a_failed_task_and_prints_the_failure() {
    let s = Scene::new();
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_FAILED_LLM)]);
    let out = s
        .atc(["wait", TASK])
        .status(1)
        .stdout_inspected()
        .stderr(format!(
            "atc: {TASK} finished but did not succeed (failed)\n"
        ))
        .no_file()
        .run();
    assert_eq!(
        stdout(&out),
        format!(
            "[TASK_ID: {TASK}]\n[STATUS: finished]\n\nTask failed.\n\nError: Model 'mock-model' execution failed. Reason: …\n"
        )
    );
}

/// Found by hand: after `atc watch A B C`, `atc wait A B C` was clap's "unexpected
/// argument". Each result is printed as its task ends (the first to end first), and the
/// exit is that of the first task, in the order given, that did not complete, with one
/// line saying each.
#[test]
fn wait_takes_several_tasks_and_prints_each_result_as_it_ends() {
    let s = Scene::new();
    let (a, b, c) = (
        "task-00000000000a",
        "task-00000000000b",
        "task-00000000000c",
    );
    let running = || Reply::json(200, bodies::RUNNING);
    s.poll_replies(
        a,
        vec![
            running(),
            running(),
            Reply::json(200, &bodies::finished_completed("s-a", "A done")),
        ],
    );
    s.poll_replies(
        b,
        vec![
            running(),
            Reply::json(200, &bodies::finished_completed("s-b", "B done")),
        ],
    );
    s.poll_replies(c, vec![running()]);
    let out = s
        .atc(["wait", a, b, "--interval", "100ms"])
        .stdout_inspected()
        .stderr("")
        .no_file()
        .run();
    assert_eq!(
        stdout(&out),
        format!(
            "[TASK_ID: {b}]\n[STATUS: finished]\n\nTask completed.\n\n[SESSION: s-b]\n\nB done\n\n[TASK_ID: {a}]\n[STATUS: finished]\n\nTask completed.\n\n[SESSION: s-a]\n\nA done\n"
        )
    );
    // Each task polled until it ended, and no more.
    assert_eq!((s.polls(a), s.polls(b)), (3, 2));

    // A failed one and a lost one: the exit is the first's in the order given (the lost
    // one, 6), one line says both; the completed one's result is printed all the same.
    s.poll_replies(b, vec![Reply::json(200, bodies::FINISHED_FAILED_LLM)]);
    s.poll_replies(c, vec![Reply::json(404, &bodies::not_found(c))]);
    let out = s
        .atc(["wait", c, a, b, "--interval", "100ms"])
        .status(6)
        .stdout_inspected()
        .stderr_inspected()
        .no_file()
        .run();
    let said = stderr(&out);
    assert!(
        said.starts_with(&format!("atc: {c} is lost: the server has no record of it"))
            && said.ends_with(&format!(
                "; also {b} finished but did not succeed (failed)\n"
            ))
            && said.lines().count() == 1,
        "{said:?}"
    );
    assert!(
        stdout(&out).contains(&format!("[TASK_ID: {a}]"))
            && stdout(&out).contains(&format!("[TASK_ID: {b}]"))
    );

    // --json: one object a task, in the order given, whatever the order they ended in;
    // the one still running at --timeout is said watched (the job file read, not written).
    s.watch(c, &[]);
    s.poll_replies(c, vec![running()]);
    let out = s
        .atc([
            "wait",
            c,
            a,
            "--json",
            "--timeout",
            "1s",
            "--interval",
            "200ms",
        ])
        .status(124)
        .stdout_inspected()
        .stderr_inspected()
        .file_unchanged()
        .run();
    let printed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let tasks = printed["tasks"].as_array().unwrap();
    assert_eq!(
        tasks
            .iter()
            .map(|t| (
                t["task_id"].as_str().unwrap(),
                t["outcome"].as_str().unwrap(),
                t["exit"].as_i64().unwrap()
            ))
            .collect::<Vec<_>>(),
        [(c, "still_running", 124), (a, "completed", 0)]
    );
    assert_eq!(
        stderr(&out),
        format!(
            "atc: {c} is still running after 1s (--timeout); it is watched: a tick delivers its result to session s-77 (user default, channel console) when it ends (`atc status {c}`)\n"
        )
    );
    // The same id twice is waited for once.
    let out = s
        .atc(["wait", a, a, "--json"])
        .stdout_inspected()
        .file_unchanged()
        .run();
    let printed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(printed["task_id"], a, "one task: one object, as ever");
}

#[test]
fn wait_exits_6_for_a_lost_task() {
    let s = Scene::new();
    s.poll_replies(TASK, vec![Reply::json(404, &bodies::not_found(TASK))]);
    s.atc(["wait", TASK])
        .status(6)
        .stderr_contains(format!(
            "atc: {TASK} is lost: the server has no record of it"
        ))
        .stderr_contains("restarted")
        .no_file();
}

#[test]
fn wait_exits_124_when_the_timeout_passes() {
    let s = Scene::new();
    s.poll_replies(TASK, vec![Reply::json(200, bodies::RUNNING)]);
    s.atc(["wait", TASK, "--timeout", "1s", "--interval", "200ms"])
        .status(124)
        .stderr(format!(
            "atc: {TASK} is still running after 1s (--timeout); `atc watch` it to have the result delivered when it ends\n"
        ))
        .no_file();
    assert!(s.server.hits("GET", &task_path(TASK)) >= 2);
    // Watched, it is said so (the job file read, not written); cancelled, it is not.
    s.watch(TASK, &[]);
    let args = ["wait", TASK, "--timeout", "1s", "--interval", "200ms"];
    s.atc(args)
        .status(124)
        .stderr(format!(
            "atc: {TASK} is still running after 1s (--timeout); it is watched: a tick delivers its result to session s-77 (user default, channel console) when it ends (`atc status {TASK}`)\n"
        ))
        .file_unchanged();
    s.atc(["cancel", TASK]).stdout_inspected().run();
    s.atc(args)
        .status(124)
        .stderr_contains("; `atc watch` it to have the result delivered when it ends\n")
        .file_unchanged();
}

/// A `--timeout` that passes while the polls fail is a server out of reach (exit 5), not
/// a child still running: atc does not know that it runs. A poll that answers clears it.
/// (With no server at all: `wait_exits_5_when_the_server_is_unreachable_or_refuses_the_token`.)
#[test]
fn wait_that_times_out_while_its_polls_fail_says_so_not_still_running() {
    let s = Scene::new();
    let bad_gateway = Reply::json(502, r#"{"detail":"bad gateway"}"#);
    let args = ["wait", TASK, "--timeout", "1s", "--interval", "200ms"];
    s.poll_replies(
        TASK,
        vec![Reply::json(200, bodies::RUNNING), bad_gateway.clone()],
    );
    s.atc(args)
        .status(5)
        .stderr_inspected()
        .stderr_contains(" failed, and --timeout (1s) passed; last: HTTP 502: bad gateway\n")
        .no_file();
    s.poll_replies(TASK, vec![bad_gateway, Reply::json(200, bodies::RUNNING)]);
    s.atc(args)
        .status(124)
        .stderr(format!(
            "atc: {TASK} is still running after 1s (--timeout); `atc watch` it to have the result delivered when it ends\n"
        ))
        .no_file();
}

/// A poll that fails on the way is said with -v (and only then), and the wait goes on.
#[test]
fn wait_says_a_failed_poll_with_v_and_goes_on() {
    let s = Scene::new();
    for verbose in [false, true] {
        s.poll_replies(
            TASK,
            vec![
                Reply::json(502, r#"{"detail":"bad gateway"}"#),
                Reply::json(200, bodies::FINISHED_COMPLETED),
            ],
        );
        let args = ["wait", TASK, "--interval", "100ms"];
        let run = if verbose {
            s.atc(args.iter().chain(&["-v"])).stderr(format!(
                "atc: QwenPaw API {api} (from ATC_BASE_URL)\natc: poll failed (1 in a row): HTTP 502: bad gateway\n",
                api = s.server.api()
            ))
        } else {
            s.atc(args).stderr("")
        };
        let out = run.stdout_inspected().no_file().run();
        assert!(stdout(&out).contains("ECHO: hello"));
    }
    // Waiting for several, the line names the task whose poll failed.
    let other = "task-0000000000b2";
    s.poll_replies(
        TASK,
        vec![
            Reply::json(502, r#"{"detail":"bad gateway"}"#),
            Reply::json(200, bodies::FINISHED_COMPLETED),
        ],
    );
    s.poll_replies(
        other,
        vec![Reply::json(200, &bodies::finished_completed("s-b", "B"))],
    );
    let out = s
        .atc(["wait", TASK, other, "--interval", "100ms", "-v"])
        .stderr(format!(
            "atc: QwenPaw API {api} (from ATC_BASE_URL)\natc: {TASK}: poll failed (1 in a row): HTTP 502: bad gateway\n",
            api = s.server.api()
        ))
        .stdout_inspected()
        .no_file()
        .run();
    assert!(stdout(&out).contains("ECHO: hello") && stdout(&out).contains("\n\nB\n"));
}

#[test]
fn wait_exits_5_when_the_server_is_unreachable_or_refuses_the_token() {
    // Five failed polls in a row, or a --timeout that passes after a failed one.
    let env = TestEnv::new();
    for (flags, said) in [
        (["--interval", "100ms"], "5 polls in a row failed"),
        (
            ["--timeout", "0s"],
            "1 poll failed, and --timeout (0s) passed",
        ),
    ] {
        env.atc(["wait", TASK].into_iter().chain(flags))
            .status(5)
            .stderr(format!(
                "atc: {TASK}: {said}; last: GET {NOWHERE}/api/console/chat/task/{TASK}: connection refused (is QwenPaw running?)\n"
            ))
            .no_file();
    }

    let s = Scene::new();
    s.poll_replies(TASK, vec![Reply::json(401, bodies::AUTH_401_RUNTIME)]);
    s.atc(["wait", TASK])
        .env("QWENPAW_RUNTIME_INTERNAL_TOKEN", "tok-wrong-123")
        .status(5)
        .stderr_contains("HTTP 401 Invalid runtime boundary token")
        .never_shows("tok-wrong-123")
        .no_file();
    assert_eq!(
        s.server.hits("GET", &task_path(TASK)),
        1,
        "a refused token is not retried"
    );
}

#[test]
fn wait_json_has_one_shape_for_every_exit_and_tells_a_child_timeout_from_ours() {
    // (exit, the fake's answer, outcome, extra args)
    let unreachable = TestEnv::new();
    let cases: Vec<(i32, Option<Reply>, &str, Vec<&str>)> = vec![
        (
            0,
            Some(Reply::json(200, bodies::FINISHED_COMPLETED)),
            "completed",
            vec![],
        ),
        (
            1,
            Some(Reply::json(200, bodies::FINISHED_FAILED_LLM)),
            "failed",
            vec![],
        ),
        (
            6,
            Some(Reply::json(404, &bodies::not_found(TASK))),
            "lost",
            vec![],
        ),
        (
            124,
            Some(Reply::json(200, bodies::RUNNING)),
            "still_running",
            vec!["--timeout", "1s", "--interval", "200ms"],
        ),
        (
            5,
            Some(Reply::json(401, bodies::AUTH_401_RUNTIME)),
            "refused",
            vec![],
        ),
        (5, None, "unreachable", vec!["--interval", "100ms"]),
        (5, None, "unreachable", vec!["--timeout", "0s"]),
    ];
    let mut shapes = Vec::new();
    for (exit, reply, outcome, extra) in cases {
        let s = Scene::new();
        let mut args = vec!["wait", TASK, "--json"];
        args.extend(extra);
        let run = match reply {
            Some(reply) => {
                s.poll_replies(TASK, vec![reply]);
                s.atc(args)
            }
            None => unreachable.atc(args),
        };
        let out = run
            .status(exit)
            .stdout_inspected()
            .stderr_inspected()
            .no_file()
            .run();
        let printed: Value = serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| {
            panic!(
                "exit {exit}: not one JSON document ({e}): {:?}",
                stdout(&out)
            )
        });
        assert_eq!(printed["task_id"], TASK, "{printed}");
        assert_eq!(printed["outcome"], outcome, "{printed}");
        assert_eq!(printed["exit"], exit, "{printed}");
        match exit {
            0 | 1 => {
                assert_eq!(printed["status"], "finished", "{printed}");
                assert!(
                    printed["text"]
                        .as_str()
                        .unwrap()
                        .starts_with(&format!("[TASK_ID: {TASK}]"))
                );
                assert!(printed["detail"].is_null(), "{printed}");
            }
            _ => {
                assert!(
                    printed["status"].is_null() && printed["text"].is_null(),
                    "{printed}"
                );
                assert!(printed["detail"].is_string(), "{printed}");
            }
        }
        let mut keys: Vec<String> = printed.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        shapes.push(keys);
    }
    shapes.dedup();
    assert_eq!(
        shapes,
        [["detail", "exit", "outcome", "status", "task_id", "text"]],
        "one shape for every exit"
    );

    // The child's own timeout is `timed_out`, never confused with ours.
    let s = Scene::new();
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_TIMEOUT)]);
    let out = s
        .atc(["wait", TASK, "--json"])
        .status(1)
        .stdout_inspected()
        .stderr_inspected()
        .no_file()
        .run();
    let printed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(printed["outcome"], "timed_out", "{printed}");
}

// ---------------------------------------------------------------------------------------
// doctor

#[test]
fn doctor_passes_every_check_on_a_sound_setup() {
    let s = Scene::new();
    s.healthy();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::RUNNING)]);
    s.tick(&[]).run();
    // A watch cancelled long since names an agent the server no longer has: only the
    // agents of live watches are asked about.
    let mut file = s.env.file();
    let mut retired = support::atc::job("task-retired", "cancelled", &s.server.api());
    retired["agent_id"] = json!("retired");
    file["jobs"].as_array_mut().unwrap().push(retired);
    s.env.write_file(&file);
    let out = s.atc(["doctor"]).stdout_inspected().run();
    let said = stdout(&out);
    let lines: Vec<&str> = said.lines().collect();
    for start in [
        &format!(
            "✓ job file: {} holds 2 jobs (from ATC_STATE)",
            s.env.state.display()
        ),
        "✓ privacy: file 600, directory 700",
        &format!("✓ base URL: {} (from ATC_BASE_URL)", s.server.api()),
        &format!(
            "✓ server: QwenPaw 2.2.2.post1 answers at {}",
            s.server.api()
        ),
        "✓ token: none needed",
        "✓ health: ok, up 6s",
        "✓ agents: the watches name agents the server has: default",
        "✓ timer: the last atc tick that was no kick ran ",
        "✓ watches: 1 task watched, none failing its checks",
        "✓ deliveries: none stuck",
        "✓ give-ups: none in the last day",
        "✓ tick saves: the last atc tick finished its pass ",
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(start)),
            "no {start:?} in\n{said}"
        );
    }
    assert!(!said.contains('✗'), "{said}");
    assert!(
        lines.contains(&"✓ agents: the watches name agents the server has: default"),
        "{said}"
    );
    // -q: a doctor whose checks all pass prints nothing.
    s.atc(["doctor", "-q"])
        .stdout("")
        .stderr("")
        .file_unchanged()
        .run();
}

/// No tick has ever run, and none is needed: every job in the file is settled.
#[test]
fn doctor_wants_no_tick_while_nothing_waits_for_one() {
    let s = Scene::new();
    s.healthy();
    s.env.write_file(&json!({
        "version": 2,
        "jobs": [support::atc::job(TASK, "cancelled", &s.server.api())],
        "turns": []
    }));
    let said = s.atc(["doctor"]).doctor_said(0);
    doctor_says(&said, "✓ timer: no atc tick has run yet", None);
    doctor_says(
        &said,
        "✓ agents: no live watch names an agent on this server",
        None,
    );
    // A tick is owed, and none came: the watch still pending, or its result delivered
    // but its outcome unknown (read back until the window closes), or delivered with the
    // reply still to forward to the person.
    let unknown = json!({"attempts": 1, "busy": 0, "unknown_since": support::ago(60), "error": "POST: timed out"});
    let forward = json!({"status": "pending", "attempts": 0, "since": support::ago(60)});
    for (status, state, delivery, forward) in [
        ("pending", None, None, None),
        ("unconfirmed", Some("unconfirmed"), Some(&unknown), None),
        ("done", Some("delivered"), None, Some(&forward)),
    ] {
        let mut job = support::atc::job(TASK, status, &s.server.api());
        job["final"] = json!("T");
        let mut turns = Vec::new();
        if let Some(state) = state {
            let mut turn = support::atc::turn_for(&mut job, state);
            if let Some(delivery) = delivery {
                turn["delivery"] = delivery.clone();
            }
            if let Some(forward) = forward {
                turn["forward"] = forward.clone();
                turn["channel"] = json!("feishu");
            }
            turns.push(turn);
        }
        s.env
            .write_file(&json!({"version": 2, "jobs": [job], "turns": turns}));
        // Found by hand: a watch made a moment ago, before the plugin's cadence woke to
        // it, is no failure; one waiting longer than a tick may take to come is.
        let said = s.atc(["doctor"]).doctor_said(0);
        doctor_says(
            &said,
            "✓ timer: no atc tick has run yet; 1 watch waits for less than 2m: no tick is overdue yet",
            None,
        );
        s.env.age_everything(600);
        let said = s.atc(["doctor"]).doctor_said(1);
        doctor_says(
            &said,
            "✗ timer: 1 watch waits, and no atc tick has run yet",
            Some("load atc's QwenPaw plugin"),
        );
    }
}

#[test]
fn doctor_exits_1_naming_each_failed_check_and_its_fix() {
    let env = TestEnv::new();
    env.atc(["watch", TASK, "--session", "s-77"])
        .stdout_inspected()
        .chat_check_skipped()
        .run();
    env.age_everything(600);
    let out = env
        .atc(["doctor"])
        .status(1)
        .stdout_inspected()
        .stderr("atc: 2 of 11 checks failed\n")
        .file_unchanged()
        .run();
    let said = stdout(&out);
    assert!(
        said.contains(&format!(
            "✗ server: cannot reach it: GET {NOWHERE}/api/version"
        )),
        "{said}"
    );
    assert!(said.contains("  → start QwenPaw (`qwenpaw app`), or point atc at it with --base-url or ATC_BASE_URL (now from ATC_BASE_URL)"), "{said}");
    assert!(
        said.contains("✗ timer: 1 watch waits, and no atc tick has run yet"),
        "{said}"
    );
    assert!(
        said.contains("  → load atc's QwenPaw plugin (it ticks by itself while QwenPaw runs), or install a timer: `atc timer print systemd` (or `cron`, `launchd`) prints one"),
        "{said}"
    );
    assert!(
        said.contains("✓ cadence: no atc QwenPaw plugin ticks for this job file, so its ticks come from a system timer, cron or you (`atc timer print` prints a timer)"),
        "{said}"
    );
    // -q keeps quiet only when all is well: a check failed, so every line is said.
    env.atc(["doctor", "-q"])
        .status(1)
        .stdout(said)
        .stderr("atc: 2 of 11 checks failed\n")
        .file_unchanged()
        .run();
}

/// What atc's QwenPaw plugin wrote into `<job file>.cadence`: doctor says which cadence
/// is in effect, and forgets a plugin that went quiet.
#[test]
fn doctor_says_which_cadence_is_in_effect() {
    let env = TestEnv::new();
    env.atc(["watch", "task-1", "--session", "s-1"])
        .chat_check_skipped()
        .stdout_inspected()
        .run();
    let cadence = env.state.with_file_name("jobs.json.cadence");
    let ago = support::ago;
    for (said, line) in [
        (
            serde_json::json!({"by": "atc's QwenPaw plugin", "pid": 4242, "every_secs": 20, "at": ago(3), "ticking": true, "timer_seen_at": null}),
            "✓ cadence: atc's QwenPaw plugin (server pid 4242) starts `atc tick` every 20s while watches wait; no system timer seen".to_owned(),
        ),
        (
            // Two hours: an age read a few seconds later still says "2h" (for a minute).
            serde_json::json!({"by": "atc's QwenPaw plugin", "pid": 4242, "every_secs": 20, "at": ago(3), "ticking": false, "timer_seen_at": ago(7200)}),
            "✓ cadence: a system timer: a tick atc's QwenPaw plugin did not start ran 2h ago, so the plugin (server pid 4242) stands by".to_owned(),
        ),
        (
            serde_json::json!({"by": "atc's QwenPaw plugin", "pid": 4242, "every_secs": 20, "at": ago(600), "ticking": true, "timer_seen_at": null}),
            "✓ cadence: no atc QwenPaw plugin ticks for this job file, so its ticks come from a system timer, cron or you (`atc timer print` prints a timer)".to_owned(),
        ),
        // Said lately is within three periods and five seconds (65 s for 20 s): a minute
        // ago still holds, two minutes ago does not.
        (
            serde_json::json!({"by": "atc's QwenPaw plugin", "pid": 4242, "every_secs": 20, "at": ago(60), "ticking": true, "timer_seen_at": null}),
            "✓ cadence: atc's QwenPaw plugin (server pid 4242) starts `atc tick` every 20s while watches wait; no system timer seen".to_owned(),
        ),
        (
            serde_json::json!({"by": "atc's QwenPaw plugin", "pid": 4242, "every_secs": 20, "at": ago(120), "ticking": true, "timer_seen_at": null}),
            "✓ cadence: no atc QwenPaw plugin ticks for this job file, so its ticks come from a system timer, cron or you (`atc timer print` prints a timer)".to_owned(),
        ),
        // A period of nothing is no cadence.
        (
            serde_json::json!({"by": "atc's QwenPaw plugin", "pid": 4242, "every_secs": 0, "at": ago(0), "ticking": true, "timer_seen_at": null}),
            "✓ cadence: no atc QwenPaw plugin ticks for this job file, so its ticks come from a system timer, cron or you (`atc timer print` prints a timer)".to_owned(),
        ),
    ] {
        std::fs::write(&cadence, said.to_string()).unwrap();
        let text = env.atc(["doctor"]).doctor_said(1);
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
}

/// The check of doctor's output: one line starting with `start`, and the fix under it.
#[test]
fn doctor_tells_a_timer_from_the_kicks_of_turns_ending() {
    let s = Scene::new();
    s.healthy();
    s.watch(TASK, &[]);
    s.env.age_everything(600);
    // What kicked ticks leave (the plugin's end-of-turn hook), no timer installed: the
    // last tick was a kick, and no other tick ever ran.
    let now = atc::time::Timestamp::now().to_string();
    let tick_lock = s.env.state.with_file_name("jobs.json.tick.lock");
    support::atc::write_private(
        &tick_lock,
        format!(
            "{}\n",
            serde_json::json!({"last_tick_at": now, "last_kick_at": now, "finished": true, "finished_at": now})
        )
        .as_bytes(),
    );
    let said = s.atc(["doctor"]).doctor_said(1);
    doctor_says(
        &said,
        "✗ timer: 1 watch waits, and no atc tick but kicks has run yet (kicks, the ticks a turn's end starts, are apart: the last ran ",
        Some(
            "load atc's QwenPaw plugin (it ticks by itself while QwenPaw runs), or install a timer",
        ),
    );
    // A tick that is no kick (a timer's): the timer line says when, the kicks apart.
    s.poll_replies(TASK, vec![Reply::json(200, bodies::RUNNING)]);
    s.tick(&[]).run();
    let out = s.atc(["doctor"]).stdout_inspected().run();
    let said = stdout(&out);
    doctor_says(
        &said,
        "✓ timer: the last atc tick that was no kick ran ",
        None,
    );
    assert!(
        said.contains("(kicks, the ticks a turn's end starts, are apart: the last ran "),
        "{said}"
    );
    let beat: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(&tick_lock)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(beat["last_kick_at"], now.as_str(), "kept: {beat}");
    assert!(beat["last_unkicked_at"].is_string(), "{beat}");
}

/// Issue 36 (M5): a tick a QwenPaw plugin's cadence started (`ATC_CADENCE_TICK=1`) is no
/// timer: the heartbeat keeps it apart (`last_cadence_at`), so another server's plugin on
/// the same job file ticks on, and doctor does not call it a system timer.
#[test]
fn a_plugins_cadence_tick_is_kept_apart_from_a_timers() {
    let s = Scene::new();
    s.healthy();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::RUNNING)]);
    let tick_lock = format!("{}.tick.lock", s.env.state.display());
    let beat = || -> serde_json::Value {
        serde_json::from_str(
            std::fs::read_to_string(&tick_lock)
                .unwrap()
                .lines()
                .next()
                .unwrap(),
        )
        .unwrap()
    };
    s.tick(&[]).env("ATC_CADENCE_TICK", "1").run();
    let first = beat();
    assert!(first["last_cadence_at"].is_string(), "{first}");
    assert!(
        first.get("last_unkicked_at").is_none(),
        "a cadence is no timer: {first}"
    );
    let out = s.atc(["doctor"]).stdout_inspected().run();
    doctor_says(
        &stdout(&out),
        "✓ timer: the last atc tick a QwenPaw plugin's cadence started ran ",
        None,
    );
    // A timer's tick then: both are kept.
    s.tick(&[]).run();
    let second = beat();
    assert_eq!(
        second["last_cadence_at"], first["last_cadence_at"],
        "{second}"
    );
    assert!(second["last_unkicked_at"].is_string(), "{second}");
}

/// With both a timer's tick and a plugin's cadence tick in the heartbeat, doctor names
/// the later; a tie is the timer's. Either is stale past two minutes while a watch waits.
#[test]
fn doctor_names_the_later_of_a_timers_tick_and_a_cadences() {
    let s = Scene::new();
    s.healthy();
    s.watch(TASK, &[]);
    s.env.age_everything(3600);
    let tick_lock = s.env.state.with_file_name("jobs.json.tick.lock");
    for (timer, cadence, said) in [
        (
            60,
            30,
            "✓ timer: the last atc tick a QwenPaw plugin's cadence started ran ",
        ),
        (30, 60, "✓ timer: the last atc tick that was no kick ran "),
        (30, 30, "✓ timer: the last atc tick that was no kick ran "),
        // Ten minutes: an age read a few seconds later says "10m 2s" (the line is matched
        // by its start).
        (
            600,
            900,
            "✗ timer: 1 watch waits, and the last atc tick that was no kick ran 10m",
        ),
    ] {
        // The ages of one case from one reading of the clock: two equal ages read a second
        // apart would name the later tick (seen once under load, in the (30, 30) case).
        let now = support::unix_secs_ago(0);
        let ago = |secs: u64| ::atc::time::Timestamp::from_unix(now - secs).to_string();
        support::atc::write_private(
            &tick_lock,
            format!(
                "{}\n",
                json!({"last_tick_at": ago(30), "last_unkicked_at": ago(timer),
                       "last_cadence_at": ago(cadence), "finished": true, "finished_at": ago(30)})
            )
            .as_bytes(),
        );
        let status = if said.starts_with('✓') { 0 } else { 1 };
        doctor_says(&s.atc(["doctor"]).doctor_said(status), said, None);
    }
}

/// Issue 36: a systemd timer installed for a while that never ran is no ✓ (doctor said
/// "no atc tick has run yet" and ✓ while no watch waited).
#[test]
fn doctor_marks_an_installed_timer_that_never_ran() {
    let s = Scene::new();
    s.healthy();
    let units = s.env.home.join(".config/systemd/user");
    std::fs::create_dir_all(&units).unwrap();
    std::fs::write(
        units.join("atc-tick.timer"),
        "[Timer]\nOnUnitActiveSec=20s\n",
    )
    .unwrap();
    // Installed an hour ago (one installed a moment ago has not had time to tick).
    std::fs::File::options()
        .write(true)
        .open(units.join("atc-tick.timer"))
        .unwrap()
        .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(3600))
        .unwrap();
    let said = s.atc(["doctor"]).doctor_said(1);
    doctor_says(
        &said,
        &format!(
            "✗ timer: {} is installed, and no atc tick has run yet",
            units.join("atc-tick.timer").display()
        ),
        Some("`systemctl --user enable --now atc-tick.timer` starts it"),
    );
    // Once it ticks, it is fine.
    s.tick(&[]).run();
    let out = s
        .atc(["doctor"])
        .stdout_inspected()
        .stderr_inspected()
        .run();
    doctor_says(
        &stdout(&out),
        "✓ timer: the last atc tick that was no kick ran ",
        None,
    );
}

/// Found by hand: after `state` moved (`config set state --force`, an edited config
/// file, a shell's `ATC_STATE`), the job file the ticks read before still watched a task
/// and doctor said all was well. Doctor looks at the config file's `state` and the
/// default too: one that still watches tasks is fine while ticks read it, a failure when
/// none has for longer than a tick may take; one that watches nothing is not named.
/// `TASK` watched in the default job file (not the test's, `ATC_STATE`): its path and its
/// bytes then.
fn watched_in_the_default_job_file(env: &TestEnv) -> (std::path::PathBuf, Vec<u8>) {
    let default = env.home.join(".local/state/atc/jobs.json");
    env.atc_default_state(["watch", TASK, "--session", "s-9"])
        .chat_check_skipped()
        .stdout_inspected()
        .run();
    let left = std::fs::read(&default).unwrap();
    (default, left)
}

#[test]
fn doctor_names_another_job_file_that_still_watches_and_nothing_ticks() {
    let s = Scene::new();
    s.healthy();
    let env = &s.env;
    let (default, left) = watched_in_the_default_job_file(env);
    let shown = default.display();
    // Doctor here reads the test's job file (ATC_STATE), not the default.
    let said = s.atc(["doctor"]).doctor_said(1);
    doctor_says(
        &said,
        &format!(
            "✗ other job file: {shown} still watches 1 task ({TASK}), and no atc tick has read it at all: its result waits there for nobody"
        ),
        Some(&format!(
            "tick it until they end (`atc --state {shown} tick`, or a timer of its own), or make it the job file again (`atc config set state {shown}`); `atc --state {shown} status` lists them"
        )),
    );
    assert_eq!(std::fs::read(&default).unwrap(), left, "only read");
    // A tick of its own read it a moment ago: named, and fine.
    let beat = default.with_file_name("jobs.json.tick.lock");
    support::atc::write_private(
        &beat,
        format!(
            "{}\n",
            json!({"last_tick_at": support::ago(30), "finished": true})
        )
        .as_bytes(),
    );
    let said = s.atc(["doctor"]).doctor_said(0);
    doctor_says(
        &said,
        &format!(
            "✓ other job file: {shown} still watches 1 task ({TASK}), and a tick read it 30s ago (a timer or plugin of its own)"
        ),
        None,
    );
    // Watching nothing, it is not named.
    env.atc_default_state(["cancel", TASK])
        .stdout_inspected()
        .run();
    let said = s.atc(["doctor"]).doctor_said(0);
    assert!(!said.contains("other job file"), "{said}");
}

/// Found by hand: a shell holding the demo's `ATC_STATE` asked `atc status T` of a task
/// atc's plugin had watched in the default job file: "no watch for T", as if the id were
/// wrong. `status`, `cancel`, `redeliver` and `log` name the job file that watches it,
/// and only read it.
#[test]
fn a_task_watched_in_another_job_file_is_named_with_that_file() {
    let s = Scene::new();
    let env = &s.env;
    let (default, left) = watched_in_the_default_job_file(env);
    let said = format!(
        "atc: no watch for {TASK} in {} (from ATC_STATE), but {} watches it: pass --state {} to this command\n",
        env.state.display(),
        default.display(),
        default.display()
    );
    for args in [
        vec!["status", TASK],
        vec!["cancel", TASK],
        vec!["cancel", TASK, "--check-ins"],
        vec!["cancel", TASK, "--stop"],
        vec!["redeliver", TASK],
        vec!["log", TASK],
    ] {
        s.atc(args).status(1).stdout("").stderr(said.clone()).run();
    }
    assert_eq!(std::fs::read(&default).unwrap(), left, "only read");
    // A task no job file watches: refused as before.
    s.atc(["status", "task-0000000000ff"])
        .status(1)
        .stdout("")
        .stderr(format!(
            "atc: no watch for task-0000000000ff in {}: `atc status` lists the watched tasks (a watch made with another job file, by --state, ATC_STATE or the config's `state`, is in that one)\n",
            env.state.display()
        ))
        .run();
    // A job file here that cannot be read is said as such, never passed over.
    support::atc::write_private(&env.state, br#"{"version":2,"jobs":[{"bad":1}]}"#);
    s.atc(["status", TASK])
        .status(3)
        .stdout("")
        .stderr_contains("does not match the v2 schema")
        .run();
}

/// Found by hand: `atc watch` from a shell whose `ATC_STATE` (or `--state`) names
/// another job file than the one atc's QwenPaw plugin ticks was recorded without a
/// word; nothing ever polled it. It warns now, naming both files, while the plugin ticks
/// the other one and nothing ticks this one; not while a tick of its own reads it.
#[test]
fn a_watch_into_a_job_file_the_plugin_does_not_tick_says_so() {
    let s = Scene::new();
    let env = &s.env;
    let default = env.home.join(".local/state/atc/jobs.json");
    std::fs::create_dir_all(default.parent().unwrap()).unwrap();
    support::atc::write_private(
        &default.with_file_name("jobs.json.cadence"),
        format!(
            "{}\n",
            json!({"by": "atc's QwenPaw plugin", "pid": 4242, "every_secs": 20, "at": support::ago(5), "ticking": true, "timer_seen_at": null})
        )
        .as_bytes(),
    );
    s.chats.add("default", "s-77", "default", "console");
    let warned = |from: &str| {
        format!(
            "atc: warning: atc's QwenPaw plugin (server pid 4242) ticks {}, not {} (the job file from {from}): nothing polls this watch unless a timer of its own ticks that file; watch into the plugin's job file instead (without {from})\n",
            default.display(),
            env.state.display()
        )
    };
    s.checked(&[TASK], || {
        s.atc(["watch", TASK, "--session", "s-77"])
            .stdout_contains("Watching ")
            .stderr(warned("ATC_STATE"))
            .run()
    });
    s.checked(&[TASK], || {
        s.atc(["watch", TASK, "--session", "s-77", "--state"])
            .args([&env.state])
            .env_remove("ATC_STATE")
            .stdout_contains("Already watching ")
            .stderr(warned("--state"))
            .run()
    });
    // A tick of its own read this file a moment ago: nothing to say.
    support::atc::write_private(
        &env.state.with_file_name("jobs.json.tick.lock"),
        format!(
            "{}\n",
            json!({"last_tick_at": support::ago(10), "finished": true})
        )
        .as_bytes(),
    );
    s.checked(&[TASK], || {
        s.atc(["watch", TASK, "--session", "s-77"])
            .stdout_contains("Already watching ")
            .run()
    });
}

/// A person's first watch on a terminal, with no tick ever having read the job file and
/// no plugin ticking it, says how to get one: "on the next atc tick" promised a tick that
/// nothing would bring. Once a tick ran, and off a terminal (an agent's shell), nothing.
#[test]
fn a_first_watch_on_a_terminal_with_nothing_ticking_says_how_to_get_ticks() {
    let s = Scene::new();
    s.chats.add("default", "s-77", "default", "console");
    let note = "atc: note: no atc tick has read this job file yet, so nothing polls it until one does: load atc's QwenPaw plugin (`atc qwenpaw install`: it ticks while QwenPaw runs), install a timer (`atc timer print`), or run `atc tick` yourself";
    let url = s.server.url();
    let Some(said) = s.checked(&[TASK], || {
        s.env.on_a_terminal(
            400,
            Some("400"),
            &[("ATC_BASE_URL", url.as_str())],
            &format!("watch {TASK} --session s-77"),
        )
    }) else {
        return; // no `script` here
    };
    assert!(said.iter().any(|l| l == note), "{said:?}");
    // Off a terminal: not a word (an agent's shell reads stderr as part of the answer).
    s.checked(&[TASK], || {
        s.atc(["watch", TASK, "--session", "s-77"])
            .stdout_contains("Already watching ")
            .run()
    });
    // A tick ran: nothing to say on a terminal either.
    s.poll_replies(TASK, vec![Reply::json(200, bodies::RUNNING)]);
    s.tick(&[]).run();
    let said = s
        .checked(&[TASK], || {
            s.env.on_a_terminal(
                400,
                Some("400"),
                &[("ATC_BASE_URL", url.as_str())],
                &format!("watch {TASK} --session s-77"),
            )
        })
        .expect("script ran above");
    assert!(!said.iter().any(|l| l.contains("atc: note")), "{said:?}");
}

fn doctor_says(said: &str, line: &str, fix: Option<&str>) {
    let lines: Vec<&str> = said.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with(line))
        .unwrap_or_else(|| panic!("no {line:?} in\n{said}"));
    if let Some(fix) = fix {
        assert!(
            lines
                .get(at + 1)
                .is_some_and(|l| l.starts_with(&format!("  → {fix}"))),
            "no fix {fix:?} under {line:?} in\n{said}"
        );
    }
}

#[test]
fn doctor_reads_the_jobs_a_token_the_timer_lacks_a_dead_base_url_and_results_given_up() {
    let s = Scene::new();
    s.healthy();
    // The timer's environment has no token: every poll is refused, while doctor (run with
    // the token, by a person) sees the server take it.
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(401, bodies::AUTH_401_RUNTIME)]);
    s.tick(&[]).run();
    let mut file = s.env.file();
    let jobs = file["jobs"].as_array_mut().unwrap();
    // Two watches recorded with a base URL where nothing answers any more, and one
    // ended there (not counted).
    for (task, status) in [
        ("task-elsewhere", "pending"),
        ("task-elsewhere-2", "pending"),
        ("task-ended-elsewhere", "cancelled"),
    ] {
        jobs.push(support::atc::job(task, status, &format!("{NOWHERE}/api")));
    }
    // A result whose delivery is unknown and whose read-back window closed.
    let mut unknown = support::atc::job("task-unknown", "unconfirmed", &s.server.api());
    unknown["final"] = json!("T");
    let mut turn = support::atc::turn_for(&mut unknown, "unconfirmed");
    turn["delivery"] = json!({
        "attempts": 1, "busy": 0,
        "unknown_since": "2026-11-30T20:15:00Z",
        "read_back_closed_at": "2026-11-30T20:30:00Z",
        "error": "POST: timed out"
    });
    jobs.push(unknown);
    file["turns"].as_array_mut().unwrap().push(turn);
    s.env.write_file(&file);

    let out = s
        .atc(["doctor"])
        .env("QWENPAW_RUNTIME_INTERNAL_TOKEN", "tok-doctor-7")
        .never_shows("tok-doctor-7")
        .status(1)
        .stdout_inspected()
        .stderr("atc: 3 of 15 checks failed\n")
        .file_unchanged()
        .run();
    let said = stdout(&out);
    doctor_says(&said, "✓ token: accepted", None);
    doctor_says(
        &said,
        &format!("✗ watches: 1 watch is failing checks with HTTP 401: {TASK}"),
        Some(
            "the timer's environment lacks the token (or holds a stale one): put QWENPAW_RUNTIME_INTERNAL_TOKEN=<the server's value> (or ATC_BEARER_TOKEN=…) in ~/.config/atc/env, chmod 600 — the unit `atc timer print systemd` prints reads it (EnvironmentFile=-%h/.config/atc/env)",
        ),
    );
    doctor_says(
        &said,
        &format!(
            "✗ job base URL: 2 live watches are recorded with base URL {NOWHERE}/api, which does not answer (connection refused"
        ),
        Some(&format!(
            "start QwenPaw there, or watch those tasks again with --base-url {}",
            s.server.api()
        )),
    );
    doctor_says(
        &said,
        "✗ deliveries: results that need a person: 1 unconfirmed past the read-back window",
        Some("`atc status` shows each one and why; `atc redeliver TASK` tries a delivery again"),
    );
    doctor_says(
        &said,
        "✓ tick saves: the last atc tick finished its pass ",
        None,
    );

    // The same, as JSON: each check, and ok false.
    let report = s
        .atc(["doctor", "--json"])
        .status(1)
        .stdout_inspected()
        .stderr_inspected()
        .json();
    assert_eq!(report["ok"], false);
    let failed: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["ok"] == false)
        .map(|c| c["check"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["job base URL", "watches", "deliveries"]);
}

/// Live watches whose checks fail are grouped by cause, each with its own fix; a watch
/// that ended, or has not failed since its last good check, is not counted.
#[test]
fn doctor_groups_the_watches_failing_their_checks_by_cause() {
    let s = Scene::new();
    s.healthy();
    let base = s.server.api();
    let mut jobs = Vec::new();
    for (task, status, strikes, error) in [
        (
            "task-refused-1",
            "pending",
            2,
            "GET /api/agent-task: connection refused",
        ),
        (
            "task-refused-2",
            "pending",
            1,
            "GET /api/agent-task: connection refused",
        ),
        ("task-slow", "pending", 3, "GET /api/agent-task: timed out"),
        ("task-500", "pending", 1, "HTTP 500 Internal Server Error"),
        (
            "task-good-again",
            "pending",
            0,
            "GET /api/agent-task: timed out",
        ),
        (
            "task-ended",
            "abandoned",
            5,
            "GET /api/agent-task: timed out",
        ),
    ] {
        let mut job = support::atc::job(task, status, &base);
        job["strikes"] = json!(strikes);
        job["last_error"] = json!(error);
        jobs.push(job);
    }
    s.env
        .write_file(&json!({"version": 2, "jobs": jobs, "turns": []}));
    let said = s.atc(["doctor"]).doctor_said(1);
    let running = "is QwenPaw running where those watches point? `atc status TASK` shows the base URL and the last error";
    for (line, fix) in [
        (
            "✗ watches: 1 watch is failing checks with HTTP 500: task-500",
            "`atc status TASK` shows the last error; `atc log TASK` the history; after --max-strikes failures in a row the watch is abandoned",
        ),
        (
            "✗ watches: 2 watches are failing checks with connection refused: task-refused-1, task-refused-2",
            running,
        ),
        (
            "✗ watches: 1 watch is failing checks with timed out: task-slow",
            running,
        ),
    ] {
        let lines: Vec<&str> = said.lines().collect();
        let at = lines.iter().position(|l| *l == line);
        assert!(
            at.is_some_and(|at| lines.get(at + 1) == Some(&format!("  → {fix}").as_str())),
            "no {line:?} with {fix:?} in\n{said}"
        );
    }
}

/// Watches on a base URL that does not answer are that check's: the watches line never
/// calls them "none failing" (found by hand: `2 tasks watched, none failing its checks`
/// under the ✗ that named both, their strikes in `atc status`).
#[test]
fn doctor_counts_watches_on_a_dead_base_url_under_that_check_only() {
    let s = Scene::new();
    s.healthy();
    let base = s.server.api();
    let mut jobs = Vec::new();
    for (task, url) in [
        ("task-elsewhere", format!("{NOWHERE}/api")),
        ("task-elsewhere-2", format!("{NOWHERE}/api")),
        ("task-here", base.clone()),
    ] {
        let mut job = support::atc::job(task, "pending", &url);
        if url != base {
            job["strikes"] = json!(2);
            job["last_error"] = json!("GET /api/agent-task: connection refused");
        }
        jobs.push(job);
    }
    // Each file, the watches line, and whether the job base URL check fails (doctor's
    // exit 1).
    for (jobs, line, dead) in [
        (
            jobs.clone(),
            "✓ watches: 3 tasks watched, none failing its checks but the 2 on a base URL that does not answer (job base URL, above)",
            true,
        ),
        (
            jobs[1..].to_vec(),
            "✓ watches: 2 tasks watched, none failing its checks but the one on a base URL that does not answer (job base URL, above)",
            true,
        ),
        (
            jobs[..1].to_vec(),
            "✓ watches: 1 task watched, on a base URL that does not answer (job base URL, above)",
            true,
        ),
        (
            jobs[2..].to_vec(),
            "✓ watches: 1 task watched, none failing its checks",
            false,
        ),
    ] {
        s.env
            .write_file(&json!({"version": 2, "jobs": jobs, "turns": []}));
        let said = s.atc(["doctor"]).doctor_said(i32::from(dead));
        assert!(said.lines().any(|l| l == line), "no {line:?} in\n{said}");
        let job_base = said.lines().any(|l| l.starts_with("✗ job base URL: "));
        assert_eq!(job_base, dead, "{said}");
    }
}

/// A job of `status` whose block (`result` or `notice`) a turn in `state` carries: the
/// job and its turn, for seeding files.
fn carried(task: &str, status: &str, block: &str, state: &str, base: &str) -> (Value, Value) {
    let mut job = support::atc::job(task, status, base);
    job["final"] = json!("T");
    if block == "notice" {
        job["notice"] = json!(state);
    }
    let mut turn = support::atc::turn_for(&mut job, state);
    turn["carries"][0]["block"] = json!(block);
    (job, turn)
}

/// The deliveries check counts the results only a person can move, by what happened to
/// them, and the turns they are in when a turn holds more than one.
#[test]
fn doctor_counts_the_results_that_need_a_person_and_their_turns() {
    let s = Scene::new();
    s.healthy();
    let base = s.server.api();
    let seeded = |cases: &[(&str, &str, &str, &str)]| {
        let (mut jobs, mut turns) = (Vec::new(), Vec::new());
        for (task, status, block, state) in cases {
            let (job, mut turn) = carried(task, status, block, state, &base);
            if *state == "unconfirmed" {
                turn["delivery"] = json!({"attempts": 1, "busy": 0, "unknown_since": support::ago(60), "error": "POST: timed out"});
                if task.ends_with("-closed") {
                    turn["delivery"]["read_back_closed_at"] = json!(support::ago(30));
                }
            }
            jobs.push(job);
            turns.push(turn);
        }
        (jobs, turns)
    };
    let (mut jobs, mut turns) = seeded(&[
        ("task-refused", "error", "result", "refused"),
        ("task-group-1", "undelivered", "result", "undelivered"),
        ("task-lost", "lost", "notice", "refused"),
        ("task-misrouted", "misrouted", "result", "misrouted"),
        (
            "task-unknown-closed",
            "unconfirmed",
            "result",
            "unconfirmed",
        ),
        // Still read back: a tick moves it, no person.
        ("task-unknown-open", "unconfirmed", "result", "unconfirmed"),
    ]);
    // Two delivered turns whose forward failed: to an IM channel the person has nothing;
    // a console toast that failed leaves the chat holding the turn.
    for (task, channel) in [("task-feishu", "feishu"), ("task-console", "console")] {
        let (job, mut turn) = carried(task, "done", "result", "delivered", &base);
        turn["channel"] = json!(channel);
        turn["forward"] = json!({"status": "failed", "attempts": 3, "reason": "HTTP 500"});
        jobs.push(job);
        turns.push(turn);
    }
    // A group's turn that was not delivered carries a second result.
    let mut second = support::atc::job("task-group-2", "undelivered", &base);
    second["final"] = json!("T");
    second["turn"] = turns[1]["turn_id"].clone();
    let carry = json!({"job_id": second["job_id"], "task_id": "task-group-2", "block": "result"});
    turns[1]["carries"].as_array_mut().unwrap().push(carry);
    jobs.push(second);
    let write = |jobs: &[Value], turns: &[Value]| {
        s.env
            .write_file(&json!({"version": 2, "jobs": jobs, "turns": turns}));
    };
    write(&jobs, &turns);
    let line = "✗ deliveries: results that need a person: 1 refused (error), 3 undelivered, 1 misrouted, 1 unconfirmed past the read-back window, 1 not forwarded to the person (in 5 turns)";
    let said = s.atc(["doctor"]).doctor_said(1);
    assert!(said.lines().any(|l| l == line), "{said}");
    doctor_says(
        &said,
        line,
        Some(
            "`atc status` shows each one and why; `atc redeliver TASK` tries a delivery again (an unconfirmed one is read back first)",
        ),
    );
    // A task whose result landed, and whose follow-ups up a delegation tree did not: two
    // misrouted, one refused (said undelivered, as its give-up line says), one delivered.
    let (up_job, up_result) = carried("task-up", "done", "result", "delivered", &base);
    let mut ups = vec![up_result];
    for (n, state) in ["misrouted", "refused", "misrouted", "delivered"]
        .iter()
        .enumerate()
    {
        let mut up = ups[0].clone();
        up["turn_id"] = json!(format!("{}-{n}-up", ups[0]["turn_id"].as_str().unwrap()));
        up["carries"][0]["block"] = json!("follow_up");
        up["carries"][0]["depth"] = json!(1);
        up["state"] = json!(state);
        ups.push(up);
    }
    let n = jobs.len();
    jobs.push(up_job);
    turns.extend(ups);
    // One turn each: no count of turns; nor for a forward alone (it is no result's turn).
    for (keep, more, said) in [
        (&[0, 3][..], 0, "1 refused (error), 1 misrouted"),
        (&[6][..], 0, "1 not forwarded to the person"),
        (
            &[][..],
            1,
            "2 follow-ups misrouted, 1 follow-up undelivered",
        ),
    ] {
        let mut kept: Vec<Value> = keep.iter().map(|&i| jobs[i].clone()).collect();
        let mut seeded: Vec<Value> = keep.iter().map(|&i| turns[i].clone()).collect();
        if more > 0 {
            kept.push(jobs[n].clone());
            seeded.extend_from_slice(&turns[n..]);
        }
        let (jobs, turns) = (kept, seeded);
        write(&jobs, &turns);
        let out = s.atc(["doctor"]).doctor_said(1);
        assert!(
            out.lines()
                .any(|l| l == format!("✗ deliveries: results that need a person: {said}")),
            "{out}"
        );
    }
}

#[test]
fn doctor_sees_a_tick_that_beats_but_cannot_save_and_trusts_an_old_heartbeat() {
    let s = Scene::new();
    s.healthy();
    s.watch(TASK, &[]);
    let mut file = s.env.file();
    // Enough jobs that the file outgrows `ulimit -f 1` when the tick saves it.
    for i in 0..6 {
        file["jobs"].as_array_mut().unwrap().push(support::atc::job(
            &format!("task-{i:012x}"),
            "done",
            &s.server.api(),
        ));
    }
    s.env.write_file(&file);
    s.poll_replies(TASK, vec![Reply::json(500, r#"{"detail":"boom"}"#)]);
    s.env
        .sh("ulimit -f 1; exec \"$ATC\" tick")
        .env("ATC_BASE_URL", s.server.url())
        .status(4)
        .stderr_contains("atc: cannot write the job file")
        .file_unchanged()
        .run();
    let out = s
        .atc(["doctor"])
        .status(1)
        .stdout_inspected()
        .stderr("atc: 1 of 14 checks failed\n")
        .file_unchanged()
        .run();
    let said = stdout(&out);
    doctor_says(
        &said,
        "✓ timer: the last atc tick that was no kick ran ",
        None,
    );
    doctor_says(
        &said,
        "✗ tick saves: the last atc tick (",
        Some("run `atc tick -v` to see why: a job directory it cannot write"),
    );
    assert!(
        said.contains("did not finish its pass; none has since this atc was installed"),
        "{said}"
    );
    // A tick that finishes clears it.
    s.poll_replies(TASK, vec![Reply::json(200, bodies::RUNNING)]);
    let started = std::time::Instant::now();
    s.tick(&[]).run();
    let out = s.atc(["doctor"]).stdout_inspected().run();
    doctor_says(
        &stdout(&out),
        "✓ tick saves: the last atc tick finished its pass ",
        None,
    );
    // An age, computed at two moments: a range.
    support::atc::assert_age(
        &stdout(&out),
        "the last atc tick finished its pass ",
        started.elapsed(),
    );
    // An older atc's heartbeat (a bare timestamp) says nothing about saves: no alarm.
    std::fs::write(
        s.env.state.with_file_name("jobs.json.tick.lock"),
        format!(
            "{}\n",
            humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        ),
    )
    .unwrap();
    let out = s.atc(["doctor"]).stdout_inspected().run();
    doctor_says(&stdout(&out), "✓ tick saves: no unfinished tick", None);
}

#[test]
fn doctor_names_a_refused_token_an_unknown_agent_and_a_readable_file() {
    let s = Scene::new();
    s.server.on(
        "GET",
        "/api/version",
        vec![Reply::json(401, bodies::AUTH_401_RUNTIME)],
    );
    let out = s
        .atc(["doctor"])
        .env("QWENPAW_RUNTIME_INTERNAL_TOKEN", "tok-doctor-9")
        .status(1)
        .stdout_inspected()
        .stderr_inspected()
        .never_shows("tok-doctor-9")
        .no_file()
        .run();
    assert!(
        stdout(&out)
            .contains("✗ token: the server refused the token (401 Invalid runtime boundary token)")
    );

    let s = Scene::new();
    s.healthy();
    s.watch(TASK, &["--agent", "ghost"]);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&s.env.state, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let out = s
        .atc(["doctor", "--json"])
        .status(1)
        .stdout_inspected()
        .stderr_inspected()
        .run();
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(report["ok"], false);
    let check = |name: &str| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["check"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} check in {report}"))
    };
    assert_eq!(check("agents")["ok"], false);
    assert!(
        check("agents")["detail"]
            .as_str()
            .unwrap()
            .contains("ghost")
    );
    #[cfg(unix)]
    {
        assert_eq!(check("privacy")["ok"], false);
        assert!(
            check("privacy")["fix"]
                .as_str()
                .unwrap()
                .starts_with("chmod 600 ")
        );
    }
    assert_eq!(check("server")["ok"], true);
    assert_eq!(report["last_tick_at"], Value::Null);
    assert!(stderr(&out).ends_with("checks failed\n"));
}

// ---------------------------------------------------------------------------------------
// log

#[test]
fn log_tells_each_job_s_history_in_order() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.watch("task-other", &[]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s.poll_replies(
        "task-other",
        vec![
            Reply::json(200, bodies::RUNNING),
            Reply::json(200, bodies::RUNNING),
        ],
    );
    s.tick(&[]).run();
    s.tick(&[]).run();
    s.atc(["cancel", "task-other"]).stdout_inspected().run();

    // Each job's history in order, what the file held after each event: a task polled
    // while it runs is logged at its first poll only; a job's turn logs where its job
    // stands (its own job's, not another's).
    let job_id = |task: &str| s.job(task)["job_id"].as_str().unwrap().to_owned();
    let (mine, other) = (job_id(TASK), job_id("task-other"));
    let turn = format!("atc-{mine}");
    assert_eq!(
        s.env.logged(&[]),
        [
            json!({"event": "registered", "task_id": TASK, "job_id": mine, "status": "pending"}),
            json!({"event": "registered", "task_id": "task-other", "job_id": other, "status": "pending"}),
            json!({"event": "polled", "task_id": TASK, "job_id": mine, "status": "delivering",
                "task_status": "finished", "outcome": "completed"}),
            json!({"event": "polled", "task_id": "task-other", "job_id": other, "status": "pending",
                "task_status": "running"}),
            json!({"event": "delivered", "task_id": TASK, "job_id": mine, "turn_id": turn,
                "status": "done", "http_status": 200}),
            json!({"event": "toast_shown", "task_id": TASK, "job_id": mine, "turn_id": turn,
                "status": "done", "http_status": 200}),
            json!({"event": "cancelled", "task_id": "task-other", "job_id": other, "status": "cancelled"}),
        ]
    );

    let one = s.atc(["log", TASK]).stdout_inspected().run();
    let lines = stdout(&one);
    assert!(
        lines.lines().all(|l| l.contains(&format!("  {TASK}  "))),
        "{lines}"
    );
    assert!(
        lines
            .lines()
            .next()
            .unwrap()
            .contains("  registered  → pending  job "),
        "{lines}"
    );
    s.atc(["log", "task-nothing"])
        .status(1)
        .stderr_contains("has no events for task-nothing");
    // Several: their events interleaved, as they happened (the --json list above, less
    // nothing but the others' events).
    let both = s.env.logged(&["task-other", TASK]);
    assert_eq!(both, s.env.logged(&[]));
    assert_eq!(
        s.env.logged(&["task-other"]),
        s.env
            .logged(&[])
            .into_iter()
            .filter(|e| e["task_id"] == "task-other")
            .collect::<Vec<_>>()
    );
    s.atc(["log", TASK, "task-nothing"])
        .status(1)
        .stdout("")
        .stderr_contains("has no events for task-nothing");
}

#[test]
fn the_log_never_holds_message_text_session_ids_user_ids_or_tokens() {
    let s = Scene::new();
    let (text, session, user, token) = (
        "PLANTED-ANSWER-7c1e",
        "PLANTED-SESSION-4a2b",
        "PLANTED-USER-9d3f",
        "PLANTED-TOKEN-5e6a",
    );
    let body = bodies::FINISHED_COMPLETED.replace("ECHO: hello", text);
    s.watch(TASK, &["--session", session, "--user", user]);
    s.watch("task-second", &["--session", session, "--user", user]);
    s.poll_replies(TASK, vec![Reply::json(200, &body)]);
    // A failing check whose error body quotes the planted values.
    s.poll_replies(
        "task-second",
        vec![Reply::json(
            500,
            &format!(r#"{{"detail":"boom {text} {session} {user} {token}"}}"#),
        )],
    );
    s.tick(&["-v"])
        .env("QWENPAW_RUNTIME_INTERNAL_TOKEN", token)
        .env("ATC_BEARER_TOKEN", token)
        .stderr_inspected()
        .run();
    assert_eq!(s.delivered(session).len(), 1, "the answer was delivered");
    s.atc(["cancel", "task-second"]).stdout_inspected().run();
    s.atc(["redeliver", TASK])
        .status(1)
        .stderr_inspected()
        .run();

    let log = std::fs::read_to_string(s.env.state.with_file_name("jobs.json.log")).unwrap();
    assert!(
        log.contains(TASK) && log.contains("delivered") && log.contains("HTTP 500"),
        "{log}"
    );
    for planted in [text, session, user, token] {
        assert!(!log.contains(planted), "the log holds {planted}:\n{log}");
    }
    let shown = s.atc(["log", "--all", "--json"]).json().to_string();
    for planted in [text, session, user, token] {
        assert!(!shown.contains(planted), "atc log shows {planted}");
    }
}

// ---------------------------------------------------------------------------------------
// import-plugin-state

fn plugin_state(dir: &Path) -> std::path::PathBuf {
    let recent = support::unix_secs_ago(600) as f64;
    let state = json!({"jobs": [
        {"task_id": "task-aaaaaaaaaaaa", "job_id": "pj1", "agent_id": "default", "target_agent": "researcher",
         "session_id": "s-1", "user_id": "alice", "channel": "console", "registered_at": recent, "status": "pending"},
        {"task_id": "task-bbbbbbbbbbbb", "job_id": "pj2", "agent_id": "default", "session_id": "s-1",
         "user_id": "alice", "channel": "console", "registered_at": recent - 100.0, "status": "done",
         "final": "[TASK_ID: task-bbbbbbbbbbbb]\n[STATUS: finished]\n\nTask completed.", "completed_at": recent - 50.0},
        {"task_id": "task-cccccccccccc", "job_id": "pj3", "agent_id": "default", "session_id": "s-2",
         "user_id": "bob", "channel": "console", "registered_at": recent, "status": "unconfirmed", "final": "the text"},
        {"task_id": "task-dddddddddddd", "job_id": "pj4", "agent_id": "default", "session_id": "s-2",
         "user_id": "bob", "channel": "console", "registered_at": recent, "status": "lost", "note": "HTTP 404"},
        {"task_id": "bad/id", "session_id": "s", "status": "pending"}
    ]});
    let path = dir.join("agent-task-callback.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&state).unwrap()).unwrap();
    path
}

#[test]
fn import_brings_the_plugin_jobs_in_once_and_never_touches_the_source() {
    let env = TestEnv::new();
    let source = plugin_state(&env.home);
    let before = std::fs::read(&source).unwrap();
    env.atc(["import-plugin-state", source.to_str().unwrap()])
        .stdout(format!(
            "Imported 4 jobs from {} (1 still watched, 3 as history); 1 record skipped (each is named below, with why).\nThe next atc tick polls the pending ones; stop the plugin first so only one of them delivers.\n",
            source.display()
        ))
        .stderr_contains("atc: warning: skipped \"bad/id\": it has an unusable task id")
        .file(|file| assert_eq!(file["jobs"].as_array().unwrap().len(), 4));
    let statuses: Vec<(String, String)> = env
        .jobs()
        .iter()
        .map(|j| {
            (
                j["task_id"].as_str().unwrap().into(),
                j["status"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            ("task-aaaaaaaaaaaa".into(), "pending".into()),
            ("task-bbbbbbbbbbbb".into(), "done".into()),
            ("task-cccccccccccc".into(), "unconfirmed".into()),
            ("task-dddddddddddd".into(), "lost".into()),
        ]
    );
    // The log says what came in, each with the status it came in as.
    let log = env.logged(&["--all"]);
    let imported: Vec<(String, String)> = log
        .iter()
        .filter(|e| e["event"] == "imported")
        .map(|e| {
            (
                e["task_id"].as_str().unwrap().into(),
                e["status"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(imported, statuses);
    let pending = env.job("task-aaaaaaaaaaaa");
    assert_eq!(
        (pending["job_id"].as_str(), pending["target_agent"].as_str()),
        (Some("pj1"), Some("researcher"))
    );
    assert_eq!(pending["base_url"], format!("{NOWHERE}/api"));
    assert_eq!(
        std::fs::read(&source).unwrap(),
        before,
        "the source is only read"
    );

    env.atc(["import-plugin-state", source.to_str().unwrap()])
        .stdout(format!(
            "Imported 0 jobs from {} (0 still watched, 0 as history); 4 already in the job file, left as they are; 1 record skipped (each is named below, with why).\n",
            source.display()
        ))
        .stderr_inspected()
        .file_unchanged();

    // A tick polls the pending one and leaves the unconfirmed one alone (never re-posted):
    // the plugin's attempt is long past any read-back window, so a person is told to look.
    let s = Scene::new();
    let source = plugin_state(&s.env.home);
    s.atc(["import-plugin-state", source.to_str().unwrap(), "-q"])
        .stderr_inspected()
        .run();
    s.poll_replies("task-aaaaaaaaaaaa", vec![Reply::json(200, bodies::RUNNING)]);
    s.tick(&[])
        .stderr(
            "atc: gave up on task-cccccccccccc (unconfirmed): the agent-task-callback plugin posted it and never learned whether it arrived; look in the parent chat; `atc status task-cccccccccccc` says more; `atc redeliver task-cccccccccccc` posts it again if it never arrived\n",
        )
        .run();
    assert_eq!(s.server.hits("GET", &task_path("task-aaaaaaaaaaaa")), 1);
    assert!(s.posts().is_empty());
    assert_eq!(s.status("task-cccccccccccc"), "unconfirmed");

    // What the plugin left unknown waits for a person, and `atc status` says what to do;
    // the import's mark (it keeps the turn from being read back) is no time anyone saw.
    const C: &str = "task-cccccccccccc";
    let turn = s.turn(C);
    assert_eq!(
        (&turn["delivery"]["attempts"], &turn["delivery"]["error"]),
        (
            &json!(1),
            &json!(
                "the plugin posted it and never learned whether it arrived; its turn carries no atc marker to read back"
            )
        )
    );
    let shown = stdout(&s.atc(["status", C]).stdout_inspected().run());
    assert!(
        shown.contains(&format!(
            "imported from the agent-task-callback plugin; delivery outcome unknown (the plugin posted it and never learned whether it arrived; its turn carries no atc marker to read back): look in the parent chat; `atc redeliver {C}` posts it again if it never arrived; the text is kept in the turn\n"
        )),
        "{shown}"
    );
    assert!(!shown.contains("unknown since"), "{shown}");
    // `atc redeliver` posts it once: a read-back finds nothing (no atc marker), twice.
    s.add_chat("s-2", "bob", "console");
    s.atc(["redeliver", C]).stdout_inspected().run();
    s.tick(&[]).run();
    assert!(s.posts().is_empty(), "not on the first look");
    assert!(
        stdout(&s.atc(["status", C]).stdout_inspected().run())
            .contains("atc reads the parent chat back and posts again only if it is not there"),
    );
    s.env.settle_passed(C);
    s.tick(&[]).run();
    s.env.absent_long_ago(C);
    s.tick(&[]).run();
    assert_eq!(s.status(C), "done");
    assert_eq!(s.delivered("s-2").len(), 1);
    s.tick(&[]).run();
    assert_eq!(s.posts().len(), 1, "once");
}

#[test]
fn import_refuses_a_missing_or_unreadable_source_and_changes_nothing() {
    let env = TestEnv::new();
    env.atc_default_state(["import-plugin-state"])
        .status(1)
        .stderr_contains(format!(
            "atc: cannot read the plugin's state file {}/.qwenpaw/agent-task-callback.json",
            env.home.display()
        ))
        .no_file();
    let bad = env.home.join("broken.json");
    std::fs::write(&bad, "{\"jobs\": [").unwrap();
    env.atc(["import-plugin-state", bad.to_str().unwrap()])
        .status(1)
        .stderr_contains("is not valid JSON")
        .stderr_contains("nothing was imported")
        .no_file();
    // Whole or not at all: 64 MiB is read (and parsed: no JSON), one byte more is refused
    // for its size, never cut to a part that might parse; bytes that are not UTF-8 are
    // refused by name.
    let big = env.home.join("big.json");
    let file = std::fs::File::create(&big).unwrap();
    file.set_len(64 * 1024 * 1024).unwrap();
    env.atc(["import-plugin-state", big.to_str().unwrap()])
        .status(1)
        .stderr_contains("is not valid JSON")
        .no_file();
    file.set_len(64 * 1024 * 1024 + 1).unwrap();
    env.atc(["import-plugin-state", big.to_str().unwrap()])
        .status(1)
        .stderr(format!(
            "atc: cannot read the plugin's state file {}: longer than 64 MiB; name the plugin's state file (the plugin keeps it in ~/.qwenpaw/agent-task-callback.json)\n",
            big.display()
        ))
        .no_file();
    std::fs::write(&bad, b"{\"jobs\": [\"\xff\"]}").unwrap();
    env.atc(["import-plugin-state", bad.to_str().unwrap()])
        .status(1)
        .stderr(format!(
            "atc: cannot read the plugin's state file {}: not UTF-8 text; name the plugin's state file (the plugin keeps it in ~/.qwenpaw/agent-task-callback.json)\n",
            bad.display()
        ))
        .no_file();
}

// ---------------------------------------------------------------------------------------
// watch --from

const BACKGROUND_OUTPUT: &str = "\
Submitted to agent researcher in the background.
[TASK_ID: task-111111111111]
[SESSION: 1764550000_abc]
Use check_agent_task to see the result.
[TASK_ID: task-222222222222]
";

#[test]
fn watch_from_a_file_or_stdin_takes_every_task_id_marker() {
    let s = Scene::new();
    let file = s.env.home.join("submitted.txt");
    std::fs::write(&file, BACKGROUND_OUTPUT).unwrap();
    s.chats.add("default", "s-77", "default", "console");
    let both = ["task-111111111111", "task-222222222222"];
    s.checked(&both, || {
        s.atc([
            "watch",
            "--from",
            file.to_str().unwrap(),
            "--session",
            "s-77",
        ])
        .stdout_contains("Watching task-111111111111 for agent 'default'")
        .stdout_contains("Watching task-222222222222 for agent 'default'")
        .file(|file| assert_eq!(file["jobs"].as_array().unwrap().len(), 2))
        .run()
    });

    let s = Scene::new();
    s.chats.add("default", "s-77", "default", "console");
    s.checked(&both, || {
        s.atc(["watch", "--from", "-", "--session", "s-77", "--json"])
            .stdin(BACKGROUND_OUTPUT)
            .stdout_inspected()
            .run()
    });
    let ids: Vec<String> = s
        .env
        .jobs()
        .iter()
        .map(|j| j["task_id"].as_str().unwrap().into())
        .collect();
    assert_eq!(ids, ["task-111111111111", "task-222222222222"]);

    let env = TestEnv::new();
    env.atc(["watch", "--from", "-", "--session", "s-77"])
        .stdin("no markers here\n")
        .status(2)
        .stderr("atc: --from - (standard input): no [TASK_ID: …] line in it (submit_to_agent and `qwenpaw agents chat --background` print one per task)\n")
        .no_file();
    env.atc(["watch", "--from", "-", "--session", "s-77"])
        .stdin("[TASK_ID: ../../version]\n")
        .status(2)
        .stderr_contains("contains '.'")
        .no_file();
    // Over 1 MiB is refused whole, not cut (a cut could end inside a task id); 1 MiB is
    // read.
    let mut big = "[TASK_ID: task-111111111111]\n".to_owned();
    big.push_str(&"x".repeat(1024 * 1024 - big.len()));
    env.atc(["watch", "--from", "-", "--session", "s-77", "--no-task-check"])
        .stdin(format!("{big}\n"))
        .status(2)
        .stderr("atc: --from - (standard input): longer than 1 MiB; give atc the part with the [TASK_ID: …] lines (or the task ids as arguments)\n")
        .no_file();
    env.atc(["watch", "--from", "-", "--session", "s-77"])
        .stdin(b"[TASK_ID: task-111111111111]\ncaf\xe9\n".to_vec())
        .status(2)
        .stderr("atc: --from - (standard input): is not UTF-8 text; give atc the text submit_to_agent printed\n")
        .no_file();
    let file = env.path("submitted.txt");
    std::fs::write(&file, &big).unwrap();
    env.atc([
        "watch",
        "--from",
        file.to_str().unwrap(),
        "--session",
        "s-77",
        "--no-task-check",
    ])
    .chat_check_skipped()
    .stdout_contains("Watching task-111111111111")
    .run();
}

// ---------------------------------------------------------------------------------------
// timer print

fn binary() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("atc").canonicalize().unwrap()
}

/// The LaunchAgent is a property list Python's plistlib reads (what launchd reads), with
/// this binary, `tick`, the interval and, for a job file of its own, ATC_STATE.
#[test]
fn timer_print_launchd_is_a_valid_plist() {
    let env = TestEnv::new();
    let read = |text: &str| -> Value {
        let out = std::process::Command::new("python3")
            .args([
                "-c",
                "import json,plistlib,sys\nprint(json.dumps(plistlib.loads(sys.stdin.buffer.read())))",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write;
                child.stdin.take().unwrap().write_all(text.as_bytes())?;
                child.wait_with_output()
            })
            .expect("python3 runs");
        assert!(
            out.status.success(),
            "plistlib refused it: {}\n{text}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let out = env
        .atc_default_state(["timer", "print", "launchd", "--interval", "30s"])
        .stdout_inspected()
        .no_file()
        .run();
    let plist = read(&stdout(&out));
    assert_eq!(
        plist,
        serde_json::json!({
            "Label": "atc-tick",
            "ProgramArguments": [binary().display().to_string(), "tick"],
            "StartInterval": 30,
            "RunAtLoad": true,
            "ProcessType": "Background"
        })
    );
    let out = env
        .atc(["timer", "print", "launchd"])
        .stdout_inspected()
        .stderr_contains("atc: note: the units name the job file")
        .no_file()
        .run();
    let plist = read(&stdout(&out));
    assert_eq!(plist["StartInterval"], 20);
    assert_eq!(
        plist["EnvironmentVariables"],
        serde_json::json!({"ATC_STATE": env.state.display().to_string()})
    );
    env.atc_default_state(["timer", "print", "launchd", "--unit", "timer"])
        .status(2)
        .stderr("atc: --unit names a systemd unit; launchd has one property list (drop --unit)\n")
        .no_file()
        .run();
}

#[test]
fn timer_print_systemd_names_this_binary_and_the_units_verify() {
    let env = TestEnv::new();
    let exec = format!("ExecStart={} tick\n", binary().display());
    let service = env
        .atc_default_state(["timer", "print", "systemd", "--unit", "service"])
        .stdout_contains(exec.clone())
        .no_file()
        .run();
    let service = stdout(&service);
    assert!(service.starts_with("[Unit]\n") && service.contains("Type=oneshot\n"));
    assert!(
        !service.contains("ATC_STATE"),
        "the default job file needs no setting"
    );
    let timer = env
        .atc_default_state([
            "timer",
            "print",
            "systemd",
            "--unit",
            "timer",
            "--interval",
            "30s",
        ])
        .stdout_contains("OnUnitActiveSec=30s\n")
        .no_file()
        .run();
    let timer = stdout(&timer);
    let both = env
        .atc_default_state(["timer", "print", "systemd"])
        .stdout_inspected()
        .no_file()
        .run();
    // Both at once: each headed by where it goes, as comments; --quiet, the units alone.
    let both = stdout(&both);
    const SERVICE: &str = "# ~/.config/systemd/user/atc-tick.service\n";
    const TIMER: &str = "# ~/.config/systemd/user/atc-tick.timer\n";
    let (first, second) = both
        .split_once(&format!("\n{TIMER}"))
        .unwrap_or_else(|| panic!("{both}"));
    assert_eq!(first, format!("{SERVICE}{service}"));
    assert!(second.starts_with("[Unit]\n") && second.contains("OnBootSec=20s\n"));
    let quiet = env
        .atc_default_state(["--quiet", "timer", "print", "systemd"])
        .stdout_inspected()
        .no_file()
        .run();
    assert_eq!(stdout(&quiet), both.replace(SERVICE, "").replace(TIMER, ""));

    // A job file of its own is named in the unit.
    env.atc(["timer", "print", "systemd", "--unit", "service"])
        .stdout_contains(format!("Environment=ATC_STATE={}\n", env.state.display()))
        .stderr(format!("atc: note: the units name the job file ({s}, from ATC_STATE); the kicks of atc's QwenPaw plugin do not see it: `atc config set state {s}` gives every tick the same job file\n", s = env.state.display()))
        .no_file();

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("atc-tick.service"), &service).unwrap();
    std::fs::write(dir.path().join("atc-tick.timer"), &timer).unwrap();
    match std::process::Command::new("systemd-analyze")
        .args(["verify", "--user", "--man=no"])
        .arg(dir.path().join("atc-tick.service"))
        .arg(dir.path().join("atc-tick.timer"))
        .env("XDG_RUNTIME_DIR", dir.path())
        .output()
    {
        Ok(out) => {
            let said = String::from_utf8_lossy(&out.stderr);
            // Without a user manager, verify cannot connect; anything it says about our
            // units themselves is a failure.
            let about_units: Vec<&str> = said
                .lines()
                .filter(|l| {
                    l.contains("atc-tick.")
                        && !l.contains("Failed to connect")
                        && !l.contains("bus")
                })
                .collect();
            assert!(about_units.is_empty(), "systemd-analyze verify:\n{said}");
        }
        Err(_) => eprintln!("systemd-analyze not available: structural checks only"),
    }
}

#[test]
fn timer_print_cron_staggers_lines_and_refuses_what_cron_cannot_do() {
    let env = TestEnv::new();
    let bin = binary();
    env.atc_default_state(["timer", "print", "cron"])
        .stdout(format!(
            "# atc: run `atc tick` every 20s (cron has minute resolution: one line per tick in a minute).\n# Tokens: add NAME=value lines above these (QWENPAW_RUNTIME_INTERNAL_TOKEN=…).\n# Settings: ~/.config/atc/config.toml (`atc config set`), which the plugin's kicks read too.\n* * * * * {b} tick\n* * * * * sleep 20; {b} tick\n* * * * * sleep 40; {b} tick\n",
            b = bin.display()
        ))
        .no_file();
    env.atc_default_state(["timer", "print", "cron", "--interval", "7s"])
        .status(2)
        .stderr("atc: cron cannot run every 7s: pick an interval that divides a minute (10s, 15s, 20s, 30s…) or whole minutes that divide an hour (1m, 5m, 15m…), or use systemd\n")
        .no_file();
    env.atc_default_state(["timer", "print", "cron", "--unit", "timer"])
        .status(2)
        .stderr_contains("--unit names a systemd unit")
        .no_file();
    env.atc_default_state(["timer", "print", "systemd", "--interval", "1500ms"])
        .status(2)
        .stderr("atc: --interval 1s 500ms is not a whole number of seconds: write 1s or 2s\n")
        .no_file();
}

#[test]
fn wait_is_patient_with_a_server_that_restarts() {
    // Two failed polls, then an answer: fewer than five strikes in a row is no reason to
    // give up.
    let s = Scene::new();
    s.poll_replies(
        TASK,
        vec![
            Reply::json(503, r#"{"status":"starting"}"#),
            Reply::dropped(),
            Reply::json(200, bodies::FINISHED_COMPLETED),
        ],
    );
    s.atc(["wait", TASK, "--interval", "100ms", "-q"]).no_file();
    assert_eq!(s.server.hits("GET", &task_path(TASK)), 3);
}

// ---------------------------------------------------------------------------------------
// status

#[test]
fn status_fits_a_narrow_terminal_without_cutting_the_notes_fact() {
    let env = TestEnv::new();
    let base = format!("{NOWHERE}/api");
    let mut striking = support::atc::job(TASK, "pending", &base);
    striking["strikes"] = json!(2);
    striking["last_error"] = json!(format!(
        "GET {base}/console/chat/task/{TASK}: connection refused (is QwenPaw running?)"
    ));
    striking["session_id"] = json!("a-rather-long-session-name-77");
    let mut grouped = support::atc::job("task-000000000002", "pending", &base);
    grouped["group"] = json!("nightly");
    grouped["started_at"] = json!("2025-12-01T09:00:00Z");
    // Registered 2h 30m 30s ago: the AGE column ("2h 30m") holds for 30 s, so the runs
    // below show the same table.
    for job in [&mut striking, &mut grouped] {
        job["registered_at"] = json!(support::ago(9030));
        job["updated_at"] = job["registered_at"].clone();
    }
    env.write_file(&json!({"version": 2, "jobs": [striking, grouped]}));
    env.ticked_just_now();
    let Some(lines) = env.on_a_terminal(80, Some("40"), &[], "status") else {
        eprintln!("no `script` here: the terminal check is skipped");
        return;
    };
    for line in &lines {
        assert!(
            line.chars().count() <= 40,
            "{line:?} in\n{}",
            lines.join("\n")
        );
    }
    // Without COLUMNS (or with one that is no width) the window says how wide it is; a
    // window of no width (a terminal nobody sized) is taken as 80.
    for columns in [None, Some("0"), Some("wide")] {
        assert_eq!(
            env.on_a_terminal(40, columns, &[], "status").unwrap(),
            lines,
            "COLUMNS {columns:?}"
        );
    }
    assert_eq!(
        env.on_a_terminal(0, None, &[], "status").unwrap(),
        env.on_a_terminal(80, Some("80"), &[], "status").unwrap()
    );
    assert_ne!(
        env.on_a_terminal(80, Some("80"), &[], "status").unwrap(),
        lines
    );
    let shown = lines.join("\n");
    assert!(
        shown.contains("\n  2 failed checks: connection refused"),
        "the note keeps its fact:\n{shown}"
    );
    assert!(
        !shown.contains("running fo…") && shown.contains("running for "),
        "{shown}"
    );
    // Piped: every column and the whole note, the group shown, ages in two units.
    let out = env.atc(["status"]).stdout_inspected().run();
    let piped = stdout(&out);
    let header = piped.lines().next().unwrap();
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        [
            "TASK",
            "STATUS",
            "AGE",
            "GROUP/BATCH",
            "AGENT",
            "→",
            "SESSION",
            "NOTE"
        ],
        "{piped}"
    );
    let row = piped
        .lines()
        .find(|l| l.starts_with("task-000000000002"))
        .unwrap();
    assert!(row.contains("  nightly  "), "{row}");
    let running_for = row.split("running for ").nth(1).unwrap();
    // Started long ago: days first, then at most one more unit, as every age is written.
    let units: Vec<&str> = running_for.split_whitespace().collect();
    assert!(
        units.len() <= 2
            && units[0].ends_with('d')
            && humantime::parse_duration(running_for).is_ok(),
        "at most two units, in atc's one format: {running_for:?}"
    );
    assert!(
        piped.contains("2 failed checks: connection refused (is QwenPaw running?)"),
        "{piped}"
    );
}

/// The detail view shows the first 12 lines of a result and says how many more there are.
#[test]
fn status_shows_the_start_of_a_long_result() {
    let s = Scene::new();
    let lines = |n: usize| {
        (1..=n)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    // The rendered block has seven lines above the answer: 12 and 14 lines in all.
    for (task, n) in [("task-a", 5), ("task-b", 7)] {
        s.watch(task, &[]);
        s.poll_replies(
            task,
            vec![Reply::json(
                200,
                &bodies::finished_completed("x", &lines(n)),
            )],
        );
    }
    s.tick(&[]);
    for (task, n) in [("task-a", 12), ("task-b", 14)] {
        let text = s.job(task)["final"].as_str().unwrap().to_owned();
        assert_eq!(text.lines().count(), n, "{text}");
    }
    let shown = |task: &str| stdout(&s.atc(["status", task]).stdout_inspected().run());
    let twelve = shown("task-a");
    assert!(twelve.ends_with("\n  line 5\n"), "{twelve}");
    let fourteen = shown("task-b");
    assert!(
        fourteen.ends_with("\n  line 5\n  … 2 more lines (--json shows all)\n"),
        "{fourteen}"
    );
}

/// One column too narrow for the whole list, the chat is shortened first, not dropped.
#[test]
fn status_shortens_the_chat_before_it_drops_it() {
    let env = TestEnv::new();
    let mut job = support::atc::job(TASK, "pending", &format!("{NOWHERE}/api"));
    job["session_id"] = json!("a-rather-long-session-name-77");
    env.write_file(&json!({"version": 2, "jobs": [job]}));
    let piped = stdout(&env.atc(["status"]).stdout_inspected().run());
    let chat = "default → a-rather-long-session-name-77";
    assert!(piped.contains(chat), "{piped}");
    let width = piped.lines().map(|l| l.chars().count()).max().unwrap() - 1;
    let Some(lines) = env.on_a_terminal(80, Some(&width.to_string()), &[], "status") else {
        eprintln!("no `script` here: the terminal check is skipped");
        return;
    };
    let shown = lines.join("\n");
    assert!(lines.iter().all(|l| l.chars().count() <= width), "{shown}");
    assert!(lines[0].contains("  AGENT → SESSION  "), "{shown}");
    let short: String = chat.chars().take(19).collect::<String>() + "…";
    assert!(lines[1].contains(&format!("  {short}  ")), "{shown}");
}

#[test]
fn a_done_job_imported_without_a_timestamp_does_not_claim_it_was_delivered_just_now() {
    let env = TestEnv::new();
    let source = env.home.join("agent-task-callback.json");
    std::fs::write(
        &source,
        serde_json::to_vec(&json!({"jobs": [
            {"task_id": "task-eeeeeeeeeeee", "job_id": "pj9", "session_id": "s-1",
             "status": "done", "final": "the text"}
        ]}))
        .unwrap(),
    )
    .unwrap();
    env.atc(["import-plugin-state", source.to_str().unwrap()])
        .stdout_inspected()
        .stderr_inspected()
        .run();
    let job = env.job("task-eeeeeeeeeeee");
    assert_eq!(job["status"], "done");
    assert!(job.get("delivered_at").is_none(), "{job}");
    // Nor on a turn: when it was delivered is not known.
    for turn in env.turns() {
        assert!(turn.get("delivered_at").is_none(), "{turn}");
    }
    let out = env.atc(["status"]).stdout_inspected().run();
    let said = stdout(&out);
    let row = said
        .lines()
        .find(|l| l.starts_with("task-eeeeeeeeeeee"))
        .unwrap();
    assert!(row.ends_with("  delivered"), "{row}");
    assert!(!said.contains("ago"), "{said}");
}

/// The detail view's `updated` is the last change to the watch or to the turn that
/// carries its result: a delivery that landed after the job last changed is a change
/// (found by hand: "updated 19s ago" above "delivered 10s ago").
#[test]
fn status_updated_counts_the_delivery_of_its_turn() {
    let s = Scene::new();
    let (mut job, mut turn) = carried("task-late", "done", "result", "delivered", &s.server.api());
    job["updated_at"] = json!("2026-01-01T10:00:00Z");
    turn["updated_at"] = json!("2026-01-01T10:05:00Z");
    turn["delivery"] = json!({"attempts": 1, "busy": 0, "last_http_status": 200, "delivered_at": "2026-01-01T10:05:00Z"});
    s.env
        .write_file(&json!({"version": 2, "jobs": [job], "turns": [turn]}));
    let shown = stdout(&s.atc(["status", "task-late"]).stdout_inspected().run());
    assert!(
        shown.contains("\nupdated         2026-01-01T10:05:00Z ("),
        "{shown}"
    );
}
