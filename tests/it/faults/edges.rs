//! Every input checked where it enters (issue 16, part B): ports, environment values that
//! are not UTF-8, malformed tokens, huge durations, hand-edited job files, length caps,
//! the importer's records, bad event-log lines, base URL paths and target agents, the
//! redelivery that would only be misrouted again (`tests/it/promises/delivery.rs`), a second cancel.
//! Each through the real binary: exit status, stdout, stderr and the job file.

use crate::support;

use std::os::unix::ffi::{OsStrExt, OsStringExt};

use serde_json::{Value, json};
use support::atc::TestEnv;
use support::bodies;
use support::fake::Reply;
use support::hermetic::NOWHERE;
use support::scene::Scene;

const TASK: &str = "task-3f9a0c1b2d4e";

fn bytes(b: &[u8]) -> &std::ffi::OsStr {
    std::ffi::OsStr::from_bytes(b)
}

fn watched(env: &TestEnv) -> Value {
    env.atc(["watch", TASK, "--session", "s-77"])
        .chat_check_skipped()
        .stdout_inspected()
        .run();
    env.job(TASK)
}

// ---------------------------------------------------------------------------------------
// 3. Ports: 1–65535, wherever a URL is read

#[test]
fn ports_out_of_range_are_refused_wherever_a_url_is_read() {
    let env = TestEnv::new();
    for port in ["99999", "65536", "0"] {
        let url = format!("http://127.0.0.1:{port}");
        env.atc(["watch", TASK, "--session", "s-77", "--base-url", &url])
            .status(2)
            .stderr(format!(
                "atc: --base-url: base URL \"{url}\" has port {port}, which is not a port (1 to 65535)\n"
            ))
            .no_file()
            .run();
        env.atc(["watch", TASK, "--session", "s-77"])
            .env("ATC_BASE_URL", &url)
            .status(2)
            .stderr(format!(
                "atc: ATC_BASE_URL: base URL \"{url}\" has port {port}, which is not a port (1 to 65535)\n"
            ))
            .no_file()
            .run();
        env.atc(["wait", TASK, "--base-url", &url])
            .status(2)
            .stderr_contains("which is not a port (1 to 65535)")
            .no_file()
            .run();
    }
    // QwenPaw's own config.json.
    let work = env.path("qwenpaw");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(
        work.join("config.json"),
        r#"{"last_api": {"host": "127.0.0.1", "port": 99999}}"#,
    )
    .unwrap();
    env.atc(["watch", TASK, "--session", "s-77"])
        .env_remove("ATC_BASE_URL")
        .env("QWENPAW_WORKING_DIR", &work)
        .status(2)
        .stderr(format!(
            "atc: last_api in {}: base URL \"http://127.0.0.1:99999\" has port 99999, which is not a port (1 to 65535)\n",
            work.join("config.json").display()
        ))
        .no_file()
        .run();
    // The importer records the base URL it resolves.
    let source = env.path("plugin.json");
    std::fs::write(&source, "[]").unwrap();
    env.atc([
        "import-plugin-state",
        source.to_str().unwrap(),
        "--base-url",
        "http://127.0.0.1:0",
    ])
    .status(2)
    .stderr_contains("has port 0, which is not a port")
    .no_file()
    .run();
    // A job file edited by hand.
    let job = watched(&env);
    env.edit_job(TASK, |job| {
        job.insert("base_url".into(), json!("http://127.0.0.1:65536/api"));
    });
    env.atc(["status"])
        .status(3)
        .stderr(format!(
            "atc: the job file {} has job {} (task {TASK}) with a bad base_url: base URL \"http://127.0.0.1:65536/api\" has port 65536, which is not a port (1 to 65535); it was left untouched: fix or move it aside (atc starts a new one where none exists)\n",
            env.state.display(),
            job["job_id"].as_str().unwrap()
        ))
        .file_unchanged()
        .run();
}

/// Issue 36 (L4): a job edited by hand to say its result is `unconfirmed` (or delivered),
/// with no turn record: it is loaded as a turn of that standing, not re-posted; a cancel
/// says the result may be on its way (it used to panic), and `redeliver` puts it back in
/// line, read back first.
#[test]
fn a_result_called_settled_by_hand_with_no_turn_is_never_posted_again_by_itself() {
    let env = TestEnv::new();
    watched(&env);
    env.edit_job(TASK, |job| {
        job.insert("status".into(), json!("unconfirmed"));
        job.insert("outcome".into(), json!("completed"));
        job.insert("final".into(), json!("[TASK_ID: x]\n[STATUS: finished]"));
    });
    env.atc(["status", TASK])
        .stdout_contains("\nstatus          unconfirmed\n")
        .stdout_contains("no turn record for it (edited by hand?)")
        .file_unchanged()
        .run();
    env.atc(["redeliver", TASK])
        .stdout_contains(format!(
            "{TASK}: the next atc tick reads session s-77 (user default, channel console) back and posts the result only if it is not there."
        ))
        .file(|file| {
            let turn = &file["turns"][0];
            assert_eq!(turn["state"], "unconfirmed", "{turn}");
            assert_eq!(file["jobs"][0]["turn"], turn["turn_id"], "{file}");
        })
        .run();
    env.atc(["cancel", TASK])
        .stdout_contains(format!(
            "Cancelled the watch on {TASK}, but its result was being posted"
        ))
        .file(|file| assert_eq!(file["jobs"][0]["status"], "cancelled", "{file}"))
        .run();
    // Called delivered: nothing owed, and nothing to cancel.
    let env = TestEnv::new();
    watched(&env);
    env.edit_job(TASK, |job| {
        job.insert("status".into(), json!("done"));
        job.insert("final".into(), json!("x"));
    });
    env.atc(["cancel", TASK])
        .status(1)
        .stderr_contains("was already delivered to session s-77")
        .file_unchanged()
        .run();
}

// ---------------------------------------------------------------------------------------
// 5. Environment values that are not UTF-8

#[test]
fn environment_values_that_are_not_utf8_are_refused_naming_the_variable() {
    let env = TestEnv::new();
    for name in [
        "ATC_BASE_URL",
        "ATC_SESSION_ID",
        "ATC_USER_ID",
        "QWENPAW_RUNTIME_INTERNAL_TOKEN",
        "ATC_BEARER_TOKEN",
    ] {
        env.atc(["watch", TASK, "--session", "s-77"])
            .env(name, bytes(b"http://127.0.0.1:8088\xff"))
            .status(2)
            .stderr(format!(
                "atc: {name} is not valid UTF-8; set it to plain text (or unset it)\n"
            ))
            .no_file()
            .run();
    }
    // A path is taken as bytes: the job file goes where ATC_STATE says, not to the
    // default one.
    let mut raw = env.path("").into_os_string().into_vec();
    raw.extend_from_slice(b"/latin1-\xe9/jobs.json");
    let state = std::path::PathBuf::from(std::ffi::OsString::from_vec(raw));
    env.atc(["watch", TASK, "--session", "s-77"])
        .env("ATC_STATE", state.as_os_str())
        .judging(&state)
        .chat_check_skipped()
        .stdout_inspected()
        .file(|file| assert_eq!(file["jobs"][0]["task_id"], TASK))
        .run();
    assert!(!env.exists(), "nothing went to another job file");
    assert!(!env.home.join(".local/state/atc/jobs.json").exists());
}

// ---------------------------------------------------------------------------------------
// 6. A malformed token

#[test]
fn a_malformed_token_is_a_usage_error_never_a_network_diagnosis() {
    let s = Scene::new();
    for (name, value, what) in [
        (
            "QWENPAW_RUNTIME_INTERNAL_TOKEN",
            "s3cr3t\r",
            "a carriage return (\\r: a CRLF line ending?) at position 7",
        ),
        ("ATC_BEARER_TOKEN", "s3cr3t x", "a space at position 7"),
    ] {
        let said = format!(
            "atc: {name} contains {what}; a token is printable ASCII only: fix the value (the token itself is not shown)\n"
        );
        // `wait` must not wait until --timeout as if the task were running.
        s.atc(["wait", TASK, "--timeout", "1h"])
            .env(name, value)
            .status(2)
            .stderr(&said)
            .never_shows("s3cr3t")
            .no_file()
            .run();
        s.atc(["watch", TASK, "--session", "s-77"])
            .env(name, value)
            .status(2)
            .stderr(&said)
            .no_file()
            .run();
        s.atc(["tick"])
            .env(name, value)
            .status(2)
            .stderr(&said)
            .no_file()
            .run();
    }
    assert!(s.server.requests().is_empty(), "nothing was sent");
}

// ---------------------------------------------------------------------------------------
// 7. Durations bounded

#[test]
fn huge_durations_are_refused_never_a_panic() {
    let env = TestEnv::new();
    let huge = "18446744073709551615s";
    let runs: Vec<Vec<&str>> = vec![
        vec!["tick", "--http-timeout", huge],
        vec!["tick", "--max-age", huge],
        vec!["tick", "--busy-retry", huge],
        vec!["tick", "--busy-deadline", huge],
        vec!["tick", "--keep", "3651d"],
        vec!["tick", "--turn-timeout", huge],
        vec!["wait", TASK, "--timeout", huge],
        vec!["wait", TASK, "--interval", huge],
        vec!["timer", "print", "systemd", "--interval", huge],
    ];
    for args in runs {
        env.atc(args)
            .status(2)
            .stderr_contains("longer than 3650d (ten years), the most atc takes")
            .no_file()
            .run();
    }
    // Ten years is still taken.
    env.atc(["tick", "--http-timeout", "3650d", "--max-age", "3650d"])
        .no_file()
        .run();
}

// ---------------------------------------------------------------------------------------
// 8. The importer checks what watch checks, record by record

#[test]
fn import_refuses_bad_records_one_by_one_and_gives_fresh_job_ids() {
    let env = TestEnv::new();
    let now = support::unix_secs_ago(60) as f64;
    let long = "s".repeat(300);
    let record = |task: &str, session: &str| {
        json!({"task_id": task, "job_id": "same", "session_id": session,
               "registered_at": now, "status": "pending"})
    };
    let mut future = record("task-eeeeeeeeeeee", "s-1");
    future["registered_at"] = json!("5138-01-01T00:00:00Z");
    let source = env.path("plugin.json");
    std::fs::write(
        &source,
        serde_json::to_vec(&json!([
            record("task-aaaaaaaaaaaa", "s-1"),
            record("task-bbbbbbbbbbbb", "s-1"),
            record("task-cccccccccccc", "s-1\nx"),
            record("task-dddddddddddd", "s-\u{1b}[31m"),
            future,
            record("task-ffffffffffff", &long),
        ]))
        .unwrap(),
    )
    .unwrap();
    env.atc(["import-plugin-state", source.to_str().unwrap()])
        .stdout(format!(
            "Imported 2 jobs from {} (2 still watched, 0 as history); 4 records skipped (each is named below, with why).\nThe next atc tick polls the pending ones; stop the plugin first so only one of them delivers.\n",
            source.display()
        ))
        .stderr(concat!(
            "atc: warning: skipped task-cccccccccccc: it has an unusable session_id: it \"s-1\\nx\" contains a control character\n",
            "atc: warning: skipped task-dddddddddddd: it has an unusable session_id: it \"s-\\u{1b}[31m\" contains a control character\n",
            "atc: warning: skipped task-eeeeeeeeeeee: it has an unusable registered_at: 5138-01-01T00:00:00Z is after the year 2199\n",
            "atc: warning: skipped task-ffffffffffff: it has an unusable session_id: it is 300 characters long; at most 256 are accepted\n",
        ))
        .file(|file| {
            let jobs = file["jobs"].as_array().unwrap();
            let ids: Vec<&str> = jobs.iter().map(|j| j["job_id"].as_str().unwrap()).collect();
            assert_eq!(ids.len(), 2);
            assert_eq!(ids[0], "same");
            assert_ne!(ids[0], ids[1], "a fresh id for the second");
        })
        .run();
    // The file it wrote loads.
    env.atc(["status"]).stdout_inspected().run();
}

#[test]
fn import_of_a_file_without_records_says_it_may_not_be_the_plugins() {
    let env = TestEnv::new();
    let source = env.path("empty.json");
    std::fs::write(&source, "{}").unwrap();
    env.atc(["import-plugin-state", source.to_str().unwrap()])
        .stdout(format!(
            "Imported 0 jobs from {} (0 still watched, 0 as history).\n",
            source.display()
        ))
        .stderr(format!(
            "atc: warning: {} holds no job records: it may not be the plugin's state file (the plugin keeps it in ~/.qwenpaw/agent-task-callback.json)\n",
            source.display()
        ))
        .run();
}

// ---------------------------------------------------------------------------------------
// 9. A hand-edited job file

#[test]
fn a_hand_edited_job_file_is_refused_naming_the_job_and_the_field() {
    let env = TestEnv::new();
    let job = watched(&env);
    let job_id = job["job_id"].as_str().unwrap().to_owned();
    let good = env.file();
    let refused = |file: &Value, says: String| {
        env.write_file(file);
        for run in [
            env.atc(["status"]),
            env.atc(["tick"]),
            env.atc(["cancel", TASK]),
        ] {
            run.status(3)
                .stderr(format!(
                    "atc: the job file {} {says}; it was left untouched: fix or move it aside (atc starts a new one where none exists)\n",
                    env.state.display()
                ))
                .file_unchanged()
                .run();
        }
    };
    // The good file with one field of its job set to `value`.
    let with = |field: &str, value: Value| {
        let mut file = good.clone();
        file["jobs"][0][field] = value;
        file
    };
    refused(
        &with("task_id", json!("../../etc")),
        format!(
            "has job {job_id} with a bad task_id: task id \"../../etc\" contains '.'; only letters, digits, '-' and '_' are allowed (e.g. task-3f9a0c1b2d4e)"
        ),
    );
    refused(
        &with("base_url", json!("http://user:pw@127.0.0.1:8088/api")),
        format!(
            "has job {job_id} (task {TASK}) with a bad base_url: base URL contains a user name or password ('@'); remove it (tokens go in QWENPAW_RUNTIME_INTERNAL_TOKEN or ATC_BEARER_TOKEN, never in the URL or the job file)"
        ),
    );
    // Each base URL is checked once: a bad one after a good one is still found.
    let mut second = good.clone();
    let mut other = good["jobs"][0].clone();
    other["job_id"] = json!("0123456789ab");
    other["task_id"] = json!("task-0123456789ab");
    other["base_url"] = json!("http://user:pw@127.0.0.1:8088/api");
    second["jobs"].as_array_mut().unwrap().push(other);
    refused(
        &second,
        "has job 0123456789ab (task task-0123456789ab) with a bad base_url: base URL contains a user name or password ('@'); remove it (tokens go in QWENPAW_RUNTIME_INTERNAL_TOKEN or ATC_BEARER_TOKEN, never in the URL or the job file)"
            .to_owned(),
    );
    refused(
        &with("strikes", json!("3")),
        format!(
            "does not match the v2 schema: job {job_id} (task {TASK}) field \"strikes\": invalid type: string \"3\", expected u32"
        ),
    );
    let mut nested = good.clone();
    let mut turn = support::atc::turn_for(&mut nested["jobs"][0], "open");
    turn["delivery"] = json!({"attempts": "x"});
    nested["turns"] = json!([turn]);
    refused(
        &nested,
        format!(
            "does not match the v2 schema: turn atc-{job_id} field \"delivery.attempts\": invalid type: string \"x\", expected u32"
        ),
    );
    refused(
        &with("session_id", json!("s-77\u{1b}]0;owned\u{7}")),
        format!(
            "has job {job_id} (task {TASK}) with a bad session_id: \"s-77\\u{{1b}}]0;owned\\u{{7}}\" contains a control character"
        ),
    );
    refused(
        &with("registered_at", json!("5138-01-01T00:00:00Z")),
        format!(
            "has job {job_id} (task {TASK}) with a bad registered_at: 5138-01-01T00:00:00Z is after the year 2199"
        ),
    );
}

// ---------------------------------------------------------------------------------------
// 10. Length caps, never echoed in full

#[test]
fn ids_have_length_caps_and_are_never_echoed_in_full() {
    let env = TestEnv::new();
    let huge = "s".repeat(100 * 1024);
    for (flag, name) in [
        ("--session", "--session"),
        ("--user", "--user"),
        ("--channel", "--channel"),
        ("--agent", "--agent"),
        ("--target-agent", "--target-agent"),
        ("--group", "--group"),
        ("--fork-branch", "--fork-branch"),
    ] {
        let session: &[&str] = if flag == "--session" {
            &[]
        } else {
            &["--session", "s-77"]
        };
        env.atc(
            ["watch", TASK]
                .iter()
                .chain(session)
                .chain(&[flag, huge.as_str()]),
        )
        .status(2)
        .stderr(format!(
            "atc: {name} is 102400 characters long; at most 256 are accepted\n"
        ))
        .no_file()
        .run();
    }
    env.atc(["watch", TASK, "--session", "s-77"])
        .env("ATC_USER_ID", &huge)
        .status(2)
        .stderr("atc: ATC_USER_ID is 102400 characters long; at most 256 are accepted\n")
        .no_file()
        .run();
    let long_id = format!("task-{huge}");
    env.atc(["watch", &long_id, "--session", "s-77"])
        .status(2)
        .stderr("atc: task id is 102405 characters long; at most 128 are accepted\n")
        .no_file()
        .run();
    // A control character in a long value: a short preview, escaped.
    let mut evil = "x".repeat(200);
    evil.push('\n');
    env.atc(["watch", TASK, "--session", &evil])
        .status(2)
        .stderr(format!(
            "atc: --session \"{}…\" (201 characters) contains a control character\n",
            "x".repeat(40)
        ))
        .no_file()
        .run();
}

// ---------------------------------------------------------------------------------------
// 11. `atc log` skips a bad line

#[test]
fn log_skips_lines_that_are_not_events_and_says_how_many() {
    let env = TestEnv::new();
    watched(&env);
    let log = env.state.with_extension("json.log");
    let mut text = std::fs::read(&log).unwrap();
    text.extend_from_slice(
        b"{\"at\": \"2026-12-01T00:00:00Z\", \"event\": \"caf\xe9\"}\nnot json\n",
    );
    std::fs::write(&log, &text).unwrap();
    let out = env
        .atc(["log"])
        .stdout_inspected()
        .stderr(format!(
            "atc: warning: skipped 2 lines of the event log {} that are not an event (a torn or edited line)\n",
            log.display()
        ))
        .run();
    let shown = String::from_utf8(out.stdout).unwrap();
    assert!(shown.contains(&format!("{TASK}  registered")), "{shown}");
    let listed = env.atc(["--json", "log"]).stderr_inspected().json();
    assert_eq!(listed["events"].as_array().unwrap().len(), 1);
}

/// The last 50 events, or `--all`; a poll says what the server said of the child.
#[test]
fn log_shows_the_last_fifty_events_unless_told_all() {
    use std::io::Write;
    let env = TestEnv::new();
    watched(&env);
    let log = env.state.with_extension("json.log");
    let at = |i: usize| format!("2026-12-01T01:{:02}:{:02}Z", i / 60, i % 60);
    let mut text = String::new();
    for i in 0..51 {
        text.push_str(&format!(
            "{{\"at\":\"{}\",\"event\":\"polled\",\"task_id\":\"{TASK}\",\"job_id\":\"j\",\"task_status\":\"running\"}}\n",
            at(i)
        ));
    }
    text.push_str(&format!(
        "{{\"at\":\"{}\",\"event\":\"polled\",\"task_id\":\"{TASK}\",\"job_id\":\"j\",\"task_status\":\"finished\",\"outcome\":\"completed\",\"status\":\"delivering\"}}\n",
        at(51)
    ));
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let lines = |args: &[&str]| {
        let out = env.atc(args).stdout_inspected().file_unchanged().run();
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let recent = lines(&["log"]);
    assert_eq!(recent.len(), 50, "{recent:?}");
    assert_eq!(
        recent[0],
        format!("{}  {TASK}  polled (running)  job j", at(2))
    );
    assert_eq!(
        recent[49],
        format!(
            "{}  {TASK}  polled (finished, completed)  → delivering  job j",
            at(51)
        )
    );
    let all = lines(&["log", "--all"]);
    assert_eq!(all.len(), 53, "the watch's own event and the 52 written");
    assert!(all[0].contains("  registered"), "{}", all[0]);
}

// ---------------------------------------------------------------------------------------
// 12. Base URL paths and the target agent

#[test]
fn watch_refuses_a_path_that_is_not_qwenpaws_api() {
    let env = TestEnv::new();
    for (given, root) in [
        (format!("{NOWHERE}/api/api"), NOWHERE.to_owned()),
        (format!("{NOWHERE}/prefix"), NOWHERE.to_owned()),
    ] {
        let normal = if given.ends_with("/api") {
            given.clone()
        } else {
            format!("{given}/api")
        };
        env.atc(["watch", TASK, "--session", "s-77", "--base-url", &given])
            .status(2)
            .stderr(format!(
                "atc: --base-url \"{normal}\" is not QwenPaw's API: QwenPaw serves it at /api (write {root}, or {root}/api); nothing answered there as QwenPaw (GET {normal}/chats?user_id=default&channel=console: connection refused (is QwenPaw running?))\n"
            ))
            .no_file()
            .run();
    }
}

#[test]
fn watch_checks_the_target_agent_as_it_checks_the_agent() {
    let s = Scene::new();
    let chat = json!([{"id": "c1", "name": "New Chat", "session_id": "s-77", "user_id": "default",
                       "channel": "console", "status": "idle"}]);
    s.server.on(
        "GET",
        "/api/chats",
        vec![
            Reply::json(200, &chat.to_string()),
            Reply::json(404, &bodies::unknown_agent("SE")),
        ],
    );
    s.atc(["watch", TASK, "--session", "s-77", "--target-agent", "SE"])
        .status(1)
        .stderr(format!(
            "atc: {} will not serve agent 'SE' (HTTP 404: Agent 'SE' not found); check --target-agent (the agent submit_to_agent ran the task on)\n",
            s.server.api()
        ))
        .no_file()
        .run();
    let asked: Vec<Option<String>> = s
        .server
        .requests()
        .iter()
        .map(|r| r.header("x-agent-id").map(str::to_owned))
        .collect();
    assert_eq!(asked, [Some("default".into()), Some("SE".into())]);
}

/// Each agent the tasks of `--from` run on is asked once, and the asking agent (whose
/// chats were just listed) not again; each task is checked on its own agent.
#[test]
fn watch_asks_each_agent_the_tasks_run_on_once() {
    let s = Scene::new();
    s.add_chat("s-77", "default", "console");
    let tasks = [
        "task-00000000000a",
        "task-00000000000b",
        "task-00000000000c",
    ];
    let on = ["SE", "default", "SE"];
    let from: String = tasks
        .iter()
        .zip(on)
        .map(|(task, on)| format!("[TASK_ID: {task}]\n[TARGET_AGENT: {on}]\n"))
        .collect();
    s.checked(&tasks, || {
        s.atc(["watch", "--from", "-", "--session", "s-77"])
            .stdin(from)
            .stdout_inspected()
            .run()
    });
    let asked = |path: &str| -> Vec<String> {
        s.server
            .requests()
            .iter()
            .filter(|r| r.path == path)
            .map(|r| r.header("x-agent-id").unwrap_or("").to_owned())
            .collect()
    };
    assert_eq!(asked("/api/chats"), ["default", "SE"]);
    for (task, on) in tasks.iter().zip(on) {
        assert_eq!(asked(&Scene::task_path(task)), [on], "{task}");
    }
}

// ---------------------------------------------------------------------------------------
// 22. A second cancel

#[test]
fn a_second_cancel_logs_nothing() {
    let env = TestEnv::new();
    watched(&env);
    env.atc(["cancel", TASK]).stdout_inspected().run();
    env.atc(["cancel", TASK])
        .stdout(format!("{TASK} was already cancelled.\n"))
        .file_unchanged()
        .run();
    assert_eq!(env.logged_tasks("cancelled").len(), 1);
}

// ---------------------------------------------------------------------------------------
// 20. `examples/demo.sh --keep` (the run itself needs QwenPaw: the `demo-keep` scenario of
// tests/e2e runs it and every command it prints; these check the flag is documented,
// anything else is refused before anything starts, and the stop command it writes stops)

#[test]
fn the_demo_takes_keep_and_refuses_other_arguments() {
    let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/demo.sh");
    let help = std::process::Command::new("bash")
        .arg(&demo)
        .arg("--help")
        .output()
        .unwrap();
    assert!(help.status.success());
    let text = String::from_utf8(help.stdout).unwrap();
    assert!(
        text.contains("examples/demo.sh --keep   # leaves the server, the job file"),
        "{text}"
    );
    let bad = std::process::Command::new("bash")
        .arg(&demo)
        .arg("--kep")
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&bad.stderr),
        "usage: examples/demo.sh [--keep]\n"
    );
    assert!(bad.stdout.is_empty());
}

/// The `stop.sh` that `--keep` writes, made from demo.sh's own template for two running
/// process groups, stops both and removes the demo's directory when run as written: by
/// `/bin/sh` (dash on Debian, whose `kill` took no `kill -TERM -- -PGID`).
#[test]
fn the_demos_stop_command_stops_its_process_groups_and_removes_its_files() {
    use std::os::unix::process::ExitStatusExt;
    let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/demo.sh");
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("atc-demo.test");
    std::fs::create_dir(&work).unwrap();
    std::fs::write(work.join("jobs.json"), "{}").unwrap();
    // As the demo starts its server and fake LLM: each in its own session.
    let mut groups: Vec<std::process::Child> = (0..2)
        .map(|_| {
            std::process::Command::new("setsid")
                .args(["sleep", "300"])
                .spawn()
                .unwrap()
        })
        .collect();
    let pgids: Vec<String> = groups.iter().map(|c| c.id().to_string()).collect();
    // Each a group of its own before the stop runs (found under load: a TERM sent before
    // `setsid` had run reached no group, and the KILL a second later ended it).
    for pgid in &pgids {
        let leads = || {
            std::fs::read_to_string(format!("/proc/{pgid}/stat")).is_ok_and(|stat| {
                let after = &stat[stat.rfind(')').map_or(0, |i| i + 1)..];
                after.split_whitespace().nth(2) == Some(pgid.as_str())
            })
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !leads() {
            assert!(
                std::time::Instant::now() < deadline,
                "setsid {pgid} never ran"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
    let made = std::process::Command::new("bash")
        .arg("-c")
        .arg(
            r#"set -eu; demo=$1 work=$2; shift 2; groups=("$@")
eval "$(sed -n '/^cat >"\$work\/stop.sh" <<STOP$/,/^STOP$/p' "$demo")"
chmod +x "$work/stop.sh""#,
        )
        .arg("make-stop")
        .arg(&demo)
        .arg(&work)
        .args(&pgids)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let script = std::fs::read_to_string(work.join("stop.sh")).unwrap();
    assert!(script.starts_with("#!/bin/sh\n"), "{script}");
    let stopped = std::process::Command::new(work.join("stop.sh"))
        .output()
        .unwrap();
    for child in &mut groups {
        let _ = child.kill();
    }
    let ends: Vec<Option<i32>> = groups
        .iter_mut()
        .map(|c| c.wait().unwrap().signal())
        .collect();
    assert_eq!(stopped.status.code(), Some(0), "{stopped:?}");
    assert_eq!(
        String::from_utf8_lossy(&stopped.stdout),
        format!("stopped; {} removed\n", work.display())
    );
    assert_eq!(String::from_utf8_lossy(&stopped.stderr), "");
    assert_eq!(ends, [Some(15), Some(15)], "each group ends by its SIGTERM");
    assert!(!work.exists());
}

// ---------------------------------------------------------------------------------------
// 18. `redeliver` says what it will do when the chat cannot be checked now

#[test]
fn redeliver_says_when_it_could_not_check_the_chat() {
    let env = TestEnv::new();
    let mut job = support::atc::job(TASK, "misrouted", &format!("{NOWHERE}/api"));
    job["final"] = json!("the text");
    let turn = support::atc::turn_for(&mut job, "misrouted");
    env.write_file(&json!({"version": 2, "jobs": [job], "turns": [turn]}));
    env.atc(["redeliver", TASK])
        .stdout(format!(
            "{TASK} goes to session s-77 (user default, channel console) again on the next atc tick, once the chat is idle; the chat could not be checked now (GET {NOWHERE}/api/chats?user_id=default&channel=console: connection refused (is QwenPaw running?)): the tick checks it before posting.\n"
        ))
        .file(|file| assert_eq!(file["jobs"][0]["status"], "delivering"))
        .run();
}

/// A watch with nothing to try again says what a person can do instead, by where it stands.
#[test]
fn redeliver_of_a_watch_with_nothing_to_retry_says_what_to_do_instead() {
    let env = TestEnv::new();
    for (status, what) in [
        (
            "pending",
            "is pending: atc still watches it and posts its result when it ends".to_owned(),
        ),
        (
            "cancelled",
            format!(
                "is cancelled: `atc watch {TASK} --session s-77` watches it again, to have its result delivered"
            ),
        ),
        ("lost", "is lost: there is no result to send".to_owned()),
        (
            "abandoned",
            "is abandoned: there is no result to send".to_owned(),
        ),
        (
            "expired",
            "is expired: there is no result to send".to_owned(),
        ),
    ] {
        let job = support::atc::job(TASK, status, &format!("{NOWHERE}/api"));
        env.write_file(&json!({"version": 2, "jobs": [job]}));
        env.atc(["redeliver", TASK])
            .status(1)
            .stderr(format!(
                "atc: {TASK} {what}; only an undelivered, unconfirmed, misrouted or refused (error) delivery, or a result the parent read itself, can be tried again\n"
            ))
            .file_unchanged();
    }
}

// ---------------------------------------------------------------------------------------
// 4. "This machine" by the addresses a name resolves to

/// In a private network and mount namespace whose /etc/hosts maps `foo.localhost` to
/// 10.123.0.1 (an address of the namespace's own interface, but not loopback) and
/// `box.localhost` to 127.0.0.1: the token goes to neither by the name's spelling.
#[test]
fn a_localhost_name_mapped_elsewhere_does_not_get_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts");
    std::fs::write(
        &hosts,
        "127.0.0.1 localhost box.localhost\n10.123.0.1 foo.localhost\n",
    )
    .unwrap();
    let probe = std::process::Command::new("unshare")
        .args(["-rnm", "sh", "-c"])
        .arg(format!(
            "ip link set lo up && ip addr add 10.123.0.1/32 dev lo && mount --bind {} /etc/hosts",
            hosts.display()
        ))
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!(
            "no private network and mount namespace here (unshare -rnm): not checked at the command level (the unit tests in src/qwenpaw/loopback.rs are)"
        );
        return;
    }
    let atc = assert_cmd::cargo::cargo_bin("atc");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let run = |name: &str, url: &str| {
        format!(
            "env -i PATH=/usr/bin:/bin HOME={home} ATC_STATE={home}/jobs.json QWENPAW_RUNTIME_INTERNAL_TOKEN=s3cr3t-token {atc} wait {TASK} --interval 100ms --timeout 2s --base-url {url} >{out}.out 2>{out}.err; echo $? >{out}.code",
            home = home.display(),
            atc = atc.display(),
            out = dir.path().join(name).display(),
        )
    };
    let script = format!(
        "ip link set lo up && ip addr add 10.123.0.1/32 dev lo && mount --bind {} /etc/hosts && {} && {}",
        hosts.display(),
        run("elsewhere", "http://foo.localhost:18080"),
        run("here", "http://box.localhost:9"),
    );
    let out = std::process::Command::new("unshare")
        .args(["-rnm", "sh", "-c", &script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    assert_eq!(read("elsewhere.code"), "2\n", "{}", read("elsewhere.err"));
    assert_eq!(
        read("elsewhere.err"),
        "atc: --base-url http://foo.localhost:18080/api: refusing to send the token (QWENPAW_RUNTIME_INTERNAL_TOKEN / ATC_BEARER_TOKEN) over plain http:// to foo.localhost, which is not this machine: use https://, or pass --allow-insecure-remote on a network you trust\n"
    );
    // A name that resolves to loopback only is this machine: polled (nothing listens).
    assert_eq!(read("here.code"), "5\n", "{}", read("here.err"));
    assert!(
        read("here.err").contains("connection refused"),
        "{}",
        read("here.err")
    );
    for name in ["elsewhere", "here"] {
        assert!(read(&format!("{name}.out")).is_empty());
        assert!(!read(&format!("{name}.err")).contains("s3cr3t"));
    }
}

/// Issue 36 (H1): `--child-session` naming another live watch's child is refused with one
/// line (a stop of it would stop the other task), and so is a second, different session
/// for a task; nothing is written.
#[test]
fn a_child_session_of_another_task_is_refused() {
    let env = TestEnv::new();
    env.atc([
        "watch",
        "task-2",
        "--session",
        "s-77",
        "--child-session",
        "kid-2",
    ])
    .chat_check_skipped()
    .stdout_inspected()
    .run();
    env.atc(["watch", TASK, "--session", "s-77", "--child-session", "kid-2"])
        .status(1)
        .stderr(format!(
            "atc: child session kid-2 is the child of task-2, which atc watches on the same agent: {TASK} runs in a session of its own (pass the [SESSION: …] line QwenPaw printed for {TASK}, or none)\n"
        ))
        .file_unchanged()
        .run();
    env.atc(["watch", "task-2", "--session", "s-77", "--child-session", "kid-9"])
        .status(1)
        .stderr("atc: task-2's child session is kid-2 (QwenPaw's [SESSION: …] line, or an earlier watch's); --child-session kid-9 names another child: watch without --child-session, or pass the session QwenPaw printed for task-2\n")
        .file_unchanged()
        .run();
}
