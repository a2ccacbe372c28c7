//! The core commands (`watch`, `status`, `cancel`) and the job file, through the real
//! binary in a hermetic environment. Every invocation goes through `Run`, which checks
//! exit status, stdout, stderr and the job file left on disk.

use crate::support;

use std::io::Read;
use std::time::Duration;

use serde_json::{Value, json};
use support::atc::{TestEnv, job, job_of, listed_statuses, mode, stderr, stdout, turn_for};
use support::bodies;
use support::fake::{FakeQwenPaw, Reply};
use support::hermetic::NOWHERE;

const TASK: &str = "task-3f9a0c1b2d4e";

fn is_hex12(v: &Value) -> bool {
    v.as_str().is_some_and(|s| {
        s.len() == 12
            && s.chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    })
}

/// A fake QwenPaw whose `GET {prefix}/api/chats` lists session `s` of user `default` on
/// `console`, and must be asked exactly `hits` times.
fn chat_server(prefix: &str, hits: usize) -> FakeQwenPaw {
    let server = FakeQwenPaw::start();
    let chats = r#"[{"id":"6f1c0e1a-0000-4000-8000-000000000001","session_id":"s","user_id":"default","channel":"console","status":"idle"}]"#;
    let path = format!("{prefix}/api/chats");
    server.answer("GET", &path, 200, chats);
    server.expect_hits("GET", &path, hits);
    // It has every task asked for (`watch` checks).
    server.on_prefix(
        "GET",
        &format!("{prefix}/api/console/chat/task/"),
        vec![Reply::json(200, bodies::RUNNING)],
    );
    server
}

#[test]
fn nowhere_is_nowhere() {
    // The hermetic default base URL must refuse connections, or tests would talk to
    // whatever listens there.
    let addr = NOWHERE.trim_start_matches("http://");
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "something listens on {addr}; the hermetic tests need it free"
    );
}

#[test]
fn watch_records_a_pending_job_and_says_where_the_result_goes() {
    let env = TestEnv::new();
    env.atc(["watch", TASK, "--session", "s-77"])
        .chat_check_skipped().stdout(format!(
        "Watching {TASK} for agent 'default'; the result goes to session s-77 (user default, channel console) on the next atc tick.\n"
    )).file(|file| assert_eq!(file["version"], 2));
    let job = env.job(TASK);
    assert!(is_hex12(&job["job_id"]), "{job}");
    for (key, want) in [
        ("task_id", json!(TASK)),
        ("base_url", json!(format!("{NOWHERE}/api"))),
        ("agent_id", json!("default")),
        ("target_agent", Value::Null),
        ("session_id", json!("s-77")),
        ("user_id", json!("default")),
        ("channel", json!("console")),
        ("status", json!("pending")),
    ] {
        assert_eq!(job[key], want, "{key}");
    }
    let registered = job["registered_at"].as_str().unwrap();
    assert!(
        registered.ends_with('Z') && registered.len() == 20,
        "{registered}"
    );
    assert_eq!(job["updated_at"], job["registered_at"]);
}

#[test]
fn watch_json_prints_the_record_as_stored() {
    let env = TestEnv::new();
    let printed = env
        .atc([
            "--json",
            "watch",
            TASK,
            "--session",
            "s-77",
            "--target-agent",
            "SE",
        ])
        .chat_check_skipped()
        .json();
    assert_eq!(printed, env.job(TASK));
    assert_eq!(printed["target_agent"], "SE");
}

#[test]
fn flags_beat_environment_which_beats_defaults() {
    let env = TestEnv::new();
    let vars = [
        ("ATC_SESSION_ID", "env-session"),
        ("ATC_USER_ID", "env-user"),
        ("ATC_CHANNEL", "env-channel"),
        ("ATC_AGENT_ID", "env-agent"),
    ];
    let mut run = env.atc(["watch", "task-a"]).chat_check_skipped();
    for (name, value) in vars {
        run = run.env(name, value);
    }
    run.stdout("Watching task-a for agent 'env-agent'; the result goes to session env-session (user env-user, channel env-channel) on the next atc tick.\n").run();
    let mut run = env
        .atc([
            "watch",
            "task-b",
            "--session",
            "s",
            "--user",
            "u",
            "--channel",
            "c",
            "--agent",
            "a",
        ])
        .chat_check_skipped();
    for (name, value) in vars {
        run = run.env(name, value);
    }
    run.stdout_contains("session s (user u, channel c)").run();
    let b = env.job("task-b");
    assert_eq!(
        (
            &b["session_id"],
            &b["user_id"],
            &b["channel"],
            &b["agent_id"]
        ),
        (&json!("s"), &json!("u"), &json!("c"), &json!("a"))
    );
}

#[test]
fn watch_without_a_session_says_where_to_find_one() {
    let env = TestEnv::new();
    env.atc(["watch", TASK])
        .status(2)
        .stderr_contains("atc: no session")
        .stderr_contains("--session")
        .stderr_contains("ATC_SESSION_ID")
        .stderr_contains("Session ID")
        .no_file();
}

/// A missing choice names the choices, not a placeholder the user must look up.
#[test]
fn timer_print_without_a_kind_names_the_kinds() {
    let env = TestEnv::new();
    env.atc(["timer", "print"])
        .status(2)
        .stderr("error: the following required arguments were not provided:\n  <systemd|cron|launchd>\n\nUsage: atc timer print <systemd|cron|launchd>\n\nFor more information, try '--help'.\n")
        .no_file();
}

#[test]
fn an_empty_value_names_where_it_came_from() {
    let env = TestEnv::new();
    env.atc(["watch", TASK, "--session", "s"])
        .env("ATC_USER_ID", "a\tb")
        .status(2)
        .stderr("atc: ATC_USER_ID \"a\\tb\" contains a control character\n")
        .no_file();
    env.atc(["watch", TASK, "--session", "s", "--user", ""])
        .env("ATC_USER_ID", "u")
        .status(2)
        .stderr("atc: --user must not be empty: give the value (an agent's prompt shows its session id, user id and channel), or leave it out\n")
        .no_file();
}

/// Found by hand: `--group 'trio [x]'` went out as `[ATC_GROUP: trio [x]]`, whose name an
/// agent or a script reading the marker to its first `]` takes for `trio [x`.
#[test]
fn a_group_name_with_a_closing_bracket_is_refused() {
    let env = TestEnv::new();
    env.atc(["watch", TASK, "--session", "s", "--group", "trio [x]"])
        .status(2)
        .stderr("atc: --group \"trio [x]\" contains ']', which would end the name in its message's [ATC_GROUP: …] line early; pick a name without it\n")
        .no_file();
    env.atc(["watch", TASK, "--session", "s", "--group", "trio [x"])
        .chat_check_skipped()
        .stdout_contains(format!("Watching {TASK} in group trio [x "))
        .run();
}

#[test]
fn a_directory_as_job_file_names_the_setting_it_came_from() {
    let env = TestEnv::new();
    let dir = env.path("a-dir");
    std::fs::create_dir_all(&dir).unwrap();
    env.atc(["status"])
        .env("ATC_STATE", &dir)
        .status(2)
        .stderr(format!(
            "atc: ATC_STATE {:?} must name a file, not a directory\n",
            dir.display().to_string()
        ))
        .judging(&dir.join("jobs.json"));
    env.atc(["--state", dir.to_str().unwrap(), "status"])
        .status(2)
        .stderr_contains("atc: --state ")
        .judging(&dir.join("jobs.json"));
}

fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `atc --help` (and `-h`) ends as gh's does: a few examples, each a command that parses.
#[test]
fn help_ends_with_examples_that_parse() {
    let env = TestEnv::new();
    for flag in ["--help", "-h"] {
        let out = env.atc([flag]).stdout_inspected().run();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let at = text
            .rfind("\nExamples:\n")
            .unwrap_or_else(|| panic!("atc {flag} has no Examples:\n{text}"));
        let examples: Vec<&str> = text[at..].lines().skip(2).collect();
        let commands: Vec<&str> = examples
            .iter()
            .filter_map(|l| l.trim().strip_prefix("$ atc "))
            .collect();
        assert!(
            (3..=4).contains(&commands.len()),
            "atc {flag}: {examples:?}"
        );
        for line in &examples {
            let line = line.trim();
            assert!(
                line.starts_with("$ atc ") || line.starts_with("# "),
                "atc {flag} goes on after its examples: {line:?}"
            );
        }
        for command in commands {
            atc::cli::parse_from(command.split_whitespace())
                .unwrap_or_else(|err| panic!("atc {command}: {err}"));
        }
    }
}

#[test]
fn help_names_the_environment_fallback_and_the_default_of_every_setting() {
    use atc::settings::defaults;
    let env = TestEnv::new();
    let top = env.atc(["--help"]).stdout_inspected().run();
    let top = squeeze(&String::from_utf8_lossy(&top.stdout));
    for needle in [
        "[env: ATC_STATE]",
        "[env: ATC_BASE_URL]",
        "QWENPAW_RUNTIME_INTERNAL_TOKEN",
        "ATC_BEARER_TOKEN",
        "Exit codes:",
        "75",
        "124",
    ] {
        assert!(top.contains(needle), "atc --help lacks {needle}:\n{top}");
    }
    let watch = env.atc(["watch", "--help"]).stdout_inspected().run();
    let watch = squeeze(&String::from_utf8_lossy(&watch.stdout));
    for needle in [
        "[env: ATC_SESSION_ID]".to_owned(),
        "[env: ATC_USER_ID]".into(),
        "[env: ATC_CHANNEL]".into(),
        "[env: ATC_AGENT_ID]".into(),
        format!("[default: {}]", defaults::USER),
        format!("[default: {}]", defaults::CHANNEL),
    ] {
        assert!(
            watch.contains(&needle),
            "atc watch --help lacks {needle}:\n{watch}"
        );
    }
    let tick = env.atc(["tick", "--help"]).stdout_inspected().run();
    let tick = squeeze(&String::from_utf8_lossy(&tick.stdout));
    let shown_default = |flag: &str| -> String {
        let start = tick.find(&format!("{flag} <")).expect(flag);
        let rest = &tick[start + flag.len()..];
        let rest = &rest[..rest.find(" --").unwrap_or(rest.len())];
        let at = rest
            .find("[default: ")
            .unwrap_or_else(|| panic!("{flag}: {rest}"));
        let value = &rest[at + "[default: ".len()..];
        value[..value.find(']').unwrap()].to_owned()
    };
    let duration = |flag: &str| humantime::parse_duration(&shown_default(flag)).unwrap();
    let number = |flag: &str| shown_default(flag).parse::<u32>().unwrap();
    assert_eq!(number("--concurrency"), defaults::CONCURRENCY);
    assert_eq!(duration("--http-timeout"), defaults::HTTP_TIMEOUT);
    assert_eq!(number("--max-strikes"), defaults::MAX_STRIKES);
    assert_eq!(duration("--max-age"), defaults::MAX_AGE);
    assert_eq!(duration("--busy-retry"), defaults::BUSY_RETRY);
    assert_eq!(duration("--busy-deadline"), defaults::BUSY_DEADLINE);
    assert_eq!(duration("--keep"), defaults::KEEP);
}

#[test]
fn task_ids_are_normalised_like_qwenpaw() {
    let env = TestEnv::new();
    env.atc(["watch", &format!("  '{TASK}' "), "--session", "s-77"])
        .chat_check_skipped()
        .stdout_contains(format!("Watching {TASK} "));
    assert_eq!(env.jobs().len(), 1);
    assert_eq!(env.jobs()[0]["task_id"], TASK);
}

#[test]
fn bad_task_ids_are_refused_before_anything_is_touched() {
    let env = TestEnv::new();
    let long = "a".repeat(129);
    for bad in [
        "task/x",
        "../../version",
        "task%2Fx",
        "task 1",
        "täsk-1",
        "",
        "''",
        long.as_str(),
    ] {
        for args in [
            vec!["watch", bad, "--session", "s"],
            vec!["status", bad],
            vec!["cancel", bad],
        ] {
            env.atc(&args)
                .status(2)
                .stderr_contains("atc: task id")
                .no_file();
        }
    }
    assert!(
        !env.state.parent().unwrap().exists(),
        "nothing may be created"
    );
}

#[test]
fn base_url_resolution_order() {
    let env = TestEnv::new();
    let base = |task: &str| env.job(task)["base_url"].as_str().unwrap().to_owned();
    let config = |dir: &std::path::Path, port: u16| {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(
            dir.join("config.json"),
            format!(r#"{{"last_api": {{"host": "0.0.0.0", "port": {port}}}}}"#),
        )
        .unwrap();
    };
    let watch = |task: &str| {
        env.atc(["watch", task, "--session", "s"])
            .env_remove("ATC_BASE_URL")
            .stdout_contains(format!("Watching {task} "))
    };

    // last_api in ~/.qwenpaw/config.json (a 0.0.0.0 bind is reached on loopback).
    let from_config = chat_server("", 2);
    config(&env.home.join(".qwenpaw"), from_config.port());
    watch("t-config").run();
    assert_eq!(base("t-config"), from_config.api());

    // The managed runtime URL counts only with its id and token, as in QwenPaw.
    let runtime = chat_server("", 1);
    let half = FakeQwenPaw::start();
    watch("t-half-runtime")
        .env("QWENPAW_RUNTIME_API_URL", half.url())
        .stdout_contains("Watching");
    assert_eq!(base("t-half-runtime"), from_config.api());
    assert!(half.requests().is_empty());
    watch("t-runtime")
        .env("QWENPAW_RUNTIME_API_URL", format!("{}/", runtime.url()))
        .env("QWENPAW_RUNTIME_ID", "rt-1")
        .env("QWENPAW_RUNTIME_INTERNAL_TOKEN", "tok-secret-1")
        .never_shows("tok-secret-1")
        .run();
    assert_eq!(base("t-runtime"), runtime.api());

    let from_env = chat_server("", 1);
    watch("t-env")
        .env("ATC_BASE_URL", format!("{}/api/", from_env.url()))
        .env("QWENPAW_RUNTIME_API_URL", runtime.url())
        .env("QWENPAW_RUNTIME_ID", "rt-1")
        .env("QWENPAW_RUNTIME_INTERNAL_TOKEN", "tok-secret-1")
        .run();
    assert_eq!(base("t-env"), from_env.api());

    let from_flag = chat_server("/root", 1);
    env.atc([
        "--base-url",
        &format!("{}/root", from_flag.url()),
        "watch",
        "t-flag",
        "--session",
        "s",
    ])
    .env("ATC_BASE_URL", from_env.url())
    .stdout_contains("Watching t-flag ")
    .run();
    assert_eq!(base("t-flag"), format!("{}/root/api", from_flag.url()));

    // QWENPAW_WORKING_DIR, then ~/.copaw when it exists, then ~/.qwenpaw. (The last
    // fallback, 127.0.0.1:8088, is not run here: a test must not reach a server it did not
    // start. `settings` tests it without a network.)
    let from_workdir = chat_server("", 1);
    let custom = env.path("custom-work");
    config(&custom, from_workdir.port());
    watch("t-workdir").env("QWENPAW_WORKING_DIR", &custom).run();
    assert_eq!(base("t-workdir"), from_workdir.api());
    let from_copaw = chat_server("", 1);
    config(&env.home.join(".copaw"), from_copaw.port());
    watch("t-copaw").run();
    assert_eq!(base("t-copaw"), from_copaw.api());
}

#[test]
fn bad_base_urls_are_usage_errors_that_name_their_source_and_touch_nothing() {
    let env = TestEnv::new();
    for (url, says) in [
        ("ftp://127.0.0.1:8088", "only http:// and https://"),
        ("http://admin:pw@127.0.0.1:8088", "user name or password"),
        ("127.0.0.1:8088", "no scheme"),
    ] {
        env.atc(["--base-url", url, "watch", TASK, "--session", "s"])
            .status(2)
            .stderr_contains("atc: --base-url: ")
            .stderr_contains(says)
            .never_shows("admin:pw")
            .no_file();
        env.atc(["watch", TASK, "--session", "s"])
            .env("ATC_BASE_URL", url)
            .status(2)
            .stderr_contains("atc: ATC_BASE_URL: ")
            .stderr_contains(says)
            .never_shows("admin:pw")
            .no_file();
    }
}

#[test]
fn acp_sessions_are_refused_in_any_case() {
    let env = TestEnv::new();
    for channel in ["acp", "ACP", "Acp"] {
        env.atc(["watch", TASK, "--session", "s", "--channel", channel])
            .status(1)
            .stderr_contains("check_agent_task")
            .no_file();
    }
}

#[test]
fn watching_the_same_task_for_the_same_target_is_idempotent() {
    let env = TestEnv::new();
    env.atc(["watch", TASK, "--session", "s-77"])
        .chat_check_skipped()
        .stdout_contains("Watching")
        .run();
    let first = env.job(TASK);
    env.atc(["watch", TASK, "--session", "s-77"])
        .chat_check_skipped()
        .stdout_contains(format!("Already watching {TASK}"))
        .stdout_contains(first["job_id"].as_str().unwrap())
        .file_unchanged();
}

#[test]
fn watching_the_same_task_for_another_target_replaces_the_registration() {
    let env = TestEnv::new();
    env.atc(["watch", TASK, "--session", "s-77"])
        .chat_check_skipped()
        .stdout_contains("Watching")
        .run();
    let first = env.job(TASK);
    env.atc(["watch", TASK, "--session", "s-78", "--user", "alice"])
        .chat_check_skipped()
        .stdout(format!(
            "Re-targeted {TASK} for agent 'default': session s-77 → s-78, user default → alice; the result goes to session s-78 (user alice, channel console) on the next atc tick.\n"
        ))
        .run();
    let second = env.job(TASK);
    assert_ne!(second["job_id"], first["job_id"]);
    assert_eq!(
        (&second["session_id"], &second["user_id"]),
        (&json!("s-78"), &json!("alice"))
    );
    assert_eq!(second["status"], "pending");
    // Found by hand: a member moved to another group was told its result goes "on the
    // next atc tick"; it goes with the rest of that group.
    env.atc(["watch", TASK, "--session", "s-78", "--user", "alice", "--group", "g2"])
        .chat_check_skipped()
        .stdout(format!(
            "Re-targeted {TASK} in group g2 for agent 'default': group (none) → g2; the result goes to session s-78 (user alice, channel console) with the rest of its group.\n"
        ))
        .run();
    assert_eq!(env.job(TASK)["group"], "g2");
}

#[test]
fn watching_again_with_another_base_url_fixes_a_wrong_one() {
    let env = TestEnv::new();
    env.atc(["watch", TASK, "--session", "s"])
        .chat_check_skipped()
        .stdout_contains("Watching")
        .run();
    let first = env.job(TASK);
    let right = chat_server("", 1);
    env.atc(["--base-url", &right.url(), "watch", TASK, "--session", "s"])
        .stdout_contains(format!("base URL {NOWHERE}/api → {}", right.api()))
        .run();
    let second = env.job(TASK);
    assert_ne!(second["job_id"], first["job_id"]);
    assert_eq!(second["base_url"], right.api());
}

#[test]
fn a_delivered_or_maybe_delivered_task_is_not_watched_again() {
    for (status, state) in [("done", "delivered"), ("unconfirmed", "unconfirmed")] {
        let env = TestEnv::new();
        let mut seeded = job(TASK, status, NOWHERE);
        let turn = turn_for(&mut seeded, state);
        env.write_file(&json!({"version": 2, "jobs": [seeded], "turns": [turn]}));
        env.atc(["watch", TASK, "--session", "s-77"])
            .status(1)
            .stderr_contains("twice")
            .file_unchanged();
    }
}

#[test]
fn other_ended_watches_are_replaced_by_a_fresh_pending_job() {
    for status in [
        "lost",
        "abandoned",
        "expired",
        "cancelled",
        "undelivered",
        "error",
        "skipped",
        "misrouted",
    ] {
        let env = TestEnv::new();
        let mut old = job(TASK, status, "http://127.0.0.2:9/api");
        old["final"] = json!("old text");
        // The delivery that ended these is their turn's.
        let turns: Vec<Value> = match status {
            "undelivered" | "misrouted" => vec![turn_for(&mut old, status)],
            "error" => vec![turn_for(&mut old, "refused")],
            _ => vec![],
        };
        env.write_file(&json!({"version": 2, "jobs": [old.clone()], "turns": turns}));
        env.atc(["watch", TASK, "--session", "s-77"])
            .chat_check_skipped()
            .stdout_contains(format!("ended {status}"))
            .run();
        let new = env.job(TASK);
        assert_eq!(new["status"], "pending", "{status}");
        assert_ne!(new["job_id"], old["job_id"]);
        assert!(new.get("final").is_none());
        assert_eq!(
            new["base_url"],
            format!("{NOWHERE}/api"),
            "the new registration's URL"
        );
    }
}

#[test]
fn status_lists_the_20_most_recent_newest_first() {
    let env = TestEnv::new();
    let jobs: Vec<Value> = (0..25)
        .map(|i| {
            let mut j = job(&format!("task-{i:02}"), "pending", NOWHERE);
            j["registered_at"] = json!(format!("2026-11-30T10:{i:02}:00Z"));
            j
        })
        .collect();
    env.write_file(&json!({"version": 2, "jobs": jobs}));
    // Watches waiting for days, and no tick ever: whatever the list says, nothing moves.
    let out = env
        .atc(["status"])
        .stdout_inspected()
        .stderr("atc: warning: 25 watches wait and no atc tick has run yet: nothing is polled or posted until one runs; `atc doctor` says why (`atc timer print` sets up a timer)\n")
        .file_unchanged()
        .run();
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("TASK"), "{text}");
    assert!(lines[1].starts_with("task-24 "), "{text}");
    assert!(lines[20].starts_with("task-05 "), "{text}");
    assert!(!text.contains("task-04"), "{text}");
    assert!(lines[21].contains("20 of 25"), "{text}");
    assert!(lines[1].contains("default → s-77"), "{text}");
    env.atc(["status", "-q"])
        .stdout_inspected()
        .file_unchanged();
    env.atc(["status", "task-24"])
        .stdout_inspected()
        .stderr_contains("atc: warning: 25 watches wait and no atc tick has run yet")
        .file_unchanged();

    // A timer's tick just now: no warning.
    env.ticked_just_now();
    let all = env.atc(["status", "--all"]).stdout_inspected().run();
    assert_eq!(
        String::from_utf8_lossy(&all.stdout)
            .lines()
            .filter(|l| l.starts_with("task-"))
            .count(),
        25
    );

    let listed = env.atc(["--json", "status"]).json();
    let ids: Vec<&str> = listed["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["task_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 20);
    assert_eq!((ids[0], ids[19]), ("task-24", "task-05"));
    let listed = env.atc(["--json", "status", "--all"]).json();
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 25);
    assert_eq!(
        listed["jobs"][24],
        env.job("task-00"),
        "records as in the file"
    );
}

#[test]
fn status_of_one_task_shows_it_in_full() {
    let env = TestEnv::new();
    env.atc(["watch", TASK, "--session", "s-77", "--target-agent", "SE"])
        .chat_check_skipped()
        .stdout_contains("Watching")
        .run();
    let job_id = env.job(TASK)["job_id"].as_str().unwrap().to_owned();
    env.atc(["status", TASK])
        .stdout_contains(&job_id)
        .stdout_contains("runs on         SE")
        .stdout_contains("session s-77 (user default, channel console)")
        .stdout_contains(format!("{NOWHERE}/api"))
        .run();
    let shown = env.atc(["--json", "status", TASK]).json();
    assert_eq!(
        shown,
        json!({"jobs": [env.job(TASK)], "turns": [], "give_ups": [], "stuck": [], "chain": [], "config_skipped": []})
    );
    // Not watched here: where it looked, and where else a watch may be.
    env.atc(["status", "task-unknown"])
        .status(1)
        .stderr(format!(
            "atc: no watch for task-unknown in {}: `atc status` lists the watched tasks (a watch made with another job file, by --state, ATC_STATE or the config's `state`, is in that one)\n",
            env.state.display()
        ));
}

/// Several task ids, as `watch` and `cancel` take them: each in full, in the order given.
#[test]
fn status_of_several_tasks_shows_each_in_full_in_order() {
    let env = TestEnv::new();
    env.atc(["watch", TASK, "task-b", "--session", "s-77"])
        .chat_check_skipped()
        .stdout_inspected()
        .run();
    let out = env
        .atc(["status", "task-b", TASK, "task-b"])
        .stdout_inspected()
        .run();
    let said = stdout(&out);
    let starts: Vec<usize> = said
        .match_indices("\ntask            ")
        .map(|(i, _)| i)
        .collect();
    assert!(said.starts_with("task            task-b\n"), "{said}");
    assert_eq!(starts.len(), 1, "two views, each once: {said}");
    assert!(
        said[starts[0]..].starts_with(&format!("\ntask            {TASK}\n")),
        "{said}"
    );
    // A blank line between the two, as between a view's parts.
    assert!(said[..starts[0]].ends_with('\n'), "{said}");
    let shown = env.atc(["--json", "status", "task-b", TASK]).json();
    assert_eq!(
        shown,
        json!({"jobs": [env.job("task-b"), env.job(TASK)], "turns": [], "give_ups": [], "stuck": [],
            "chains": {}, "config_skipped": []})
    );
    // One not watched: refused, naming it; nothing shown.
    env.atc(["status", TASK, "task-unknown"])
        .status(1)
        .stdout("")
        .stderr_contains("atc: no watch for task-unknown in ");
    env.atc(["status", TASK, "--all"])
        .status(2)
        .stderr_contains("cannot be used with");
}

/// The detail view names the delivery options a watch asked for, and only those.
#[test]
fn status_of_one_task_names_the_options_it_asked_for() {
    let env = TestEnv::new();
    let other = "task-000000000002";
    for (task, options) in [
        (TASK, &[][..]),
        (
            other,
            &[
                "--create-session",
                "--on-no-answer",
                "silent",
                "--on-empty",
                "skip",
                "--forward",
                "never",
            ],
        ),
    ] {
        env.atc(["watch", task, "--session", "s-77"].iter().chain(options))
            .stdout_contains("Watching")
            .stderr_inspected()
            .run();
    }
    let plain = stdout(&env.atc(["status", TASK]).stdout_inspected().run());
    // Nor a count of failed checks where there is none.
    assert!(
        !plain.contains("\noptions ") && !plain.contains("\nstrikes "),
        "{plain}"
    );
    env.atc(["status", other])
        .stdout_contains("\noptions         --create-session --on-no-answer silent --on-empty skip --forward never\n")
        .run();
}

#[test]
fn status_with_no_jobs_says_so_and_creates_nothing() {
    let env = TestEnv::new();
    // Which file it read: a watch made with another job file is in that one.
    env.atc(["status"])
        .stdout(format!(
            "No watches: no job file at {} yet (`atc watch` starts it).\n",
            env.state.display()
        ))
        .no_file();
    env.atc(["--json", "status"])
        .stdout("{\n  \"jobs\": [],\n  \"turns\": [],\n  \"give_ups\": [],\n  \"stuck\": [],\n  \"chains\": {},\n  \"config_skipped\": []\n}\n")
        .no_file();
    assert!(!env.state.parent().unwrap().exists());
    // A file whose watches were all pruned says how long ended ones stay.
    env.write_file(&serde_json::json!({"version": 2, "jobs": [], "turns": []}));
    env.atc(["status"])
        .stdout(format!(
            "No watches in {} (an ended one is pruned 7d after its last change).\n",
            env.state.display()
        ))
        .file_unchanged()
        .run();
}

#[test]
fn cancel_marks_the_job_cancelled_and_the_child_keeps_running() {
    let env = TestEnv::new();
    env.atc(["watch", TASK, "--session", "s-77"])
        .chat_check_skipped()
        .stdout_contains("Watching")
        .run();
    // It says no more than atc knew: it never polled the child, which may have ended.
    env.atc(["cancel", TASK])
        .stdout(format!("Cancelled the watch on {TASK}; atc had not polled the child yet, and it is not stopped: `atc wait {TASK}` or check_agent_task says how it ends.\n"))
        .file(|file| assert_eq!(file["jobs"][0]["status"], "cancelled"));
    env.atc(["cancel", TASK])
        .stdout_contains("already cancelled")
        .file_unchanged();
    // What was true at the cancel (atc asks nothing afterwards): it had not polled it.
    env.atc(["status", TASK])
        .stdout_contains("cancelled before atc polled the child; atc no longer watches it");
}

#[test]
fn cancel_of_several_tasks_cancels_each_or_none() {
    let env = TestEnv::new();
    env.atc(["watch", TASK, "task-b", "--session", "s-77"])
        .chat_check_skipped()
        .stdout_inspected()
        .run();
    // A typo in one: nothing is cancelled, the one not watched is named.
    env.atc(["cancel", TASK, "task-nope", "task-b"])
        .status(1)
        .stderr_contains("atc: no watch for task-nope in ")
        .file_unchanged();
    // Each once, in the order given, each saying what it did; each logged.
    let not_polled = |t: &str| {
        format!(
            "Cancelled the watch on {t}; atc had not polled the child yet, and it is not stopped: `atc wait {t}` or check_agent_task says how it ends.\n"
        )
    };
    env.atc(["cancel", "task-b", TASK, "task-b"])
        .stdout(not_polled("task-b") + &not_polled(TASK))
        .file(|file| {
            assert_eq!(file["jobs"][0]["status"], "cancelled");
            assert_eq!(file["jobs"][1]["status"], "cancelled");
        });
    assert_eq!(env.logged_tasks("cancelled"), ["task-b", TASK]);
    // --json: the jobs, as `watch` of several prints them.
    let out = env
        .atc(["--json", "cancel", TASK, "task-b"])
        .file_unchanged()
        .json();
    let cancelled = |t: &str| (t.to_owned(), "cancelled".to_owned());
    assert_eq!(
        listed_statuses(&out),
        [cancelled(TASK), cancelled("task-b")]
    );
    env.atc(["--quiet", "cancel", TASK, "task-b"])
        .stdout("")
        .file_unchanged();
    // One delivered already: refused before anything is stopped (the pending one's
    // child, of no known session, would be refused a stop otherwise).
    let env = TestEnv::new();
    let mut done = job(TASK, "done", NOWHERE);
    let turn = turn_for(&mut done, "delivered");
    let mut pending = job("task-pending", "pending", NOWHERE);
    pending["job_id"] = json!("0123456789ab");
    env.write_file(&json!({"version": 2, "jobs": [pending, done], "turns": [turn]}));
    env.atc(["cancel", "task-pending", TASK, "--stop"])
        .status(1)
        .stderr_contains(format!("atc: {TASK} was already delivered to "))
        .file_unchanged();
}

/// Found by hand: `atc cancel B C` of a group of three said of B "Group trio still comes
/// back … once its other 2 tasks end", C being one of them, cancelled by the same command.
#[test]
fn cancel_of_several_members_speaks_of_their_group_once_as_it_is_left() {
    let env = TestEnv::new();
    env.atc([
        "watch",
        "task-a",
        "task-b",
        "task-c",
        "--session",
        "s-77",
        "--group",
        "trio",
    ])
    .chat_check_skipped()
    .stdout_inspected()
    .run();
    env.atc(["watch", "task-d", "--session", "s-77"])
        .chat_check_skipped()
        .stdout_inspected()
        .run();
    let not_polled = |t: &str| {
        format!(
            "Cancelled the watch on {t}; atc had not polled the child yet, and it is not stopped: `atc wait {t}` or check_agent_task says how it ends."
        )
    };
    env.atc(["cancel", "task-b", "task-d", "task-c"])
        .stdout(format!(
            "{}\n{}\n{} Group trio still comes back as one message, without them, once its other task ends.\n",
            not_polled("task-b"),
            not_polled("task-d"),
            not_polled("task-c")
        ))
        .file(|file| {
            let status: Vec<_> = file["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|j| j["status"].as_str().unwrap().to_owned())
                .collect();
            assert_eq!(status, ["pending", "cancelled", "cancelled", "cancelled"]);
        });
    // One member alone: "without it", as a cancel of one says.
    env.atc([
        "watch",
        "task-e",
        "task-f",
        "--session",
        "s-77",
        "--group",
        "duo",
    ])
    .chat_check_skipped()
    .stdout_inspected()
    .run();
    env.atc(["cancel", "task-e", "task-a"])
        .stdout_contains(format!(
            "{} Group duo still comes back as one message, without it, once its other task ends.\n",
            not_polled("task-e")
        ))
        .stdout_contains(format!("{}\n", not_polled("task-a")))
        .file(|file| {
            assert_eq!(job_of(file, "task-a")["status"], "cancelled");
            assert_eq!(job_of(file, "task-e")["status"], "cancelled");
            assert_eq!(job_of(file, "task-f")["status"], "pending");
        });
}

#[test]
fn cancel_refuses_unknown_and_delivered_tasks() {
    let env = TestEnv::new();
    let mut done = job(TASK, "done", NOWHERE);
    let turn = turn_for(&mut done, "delivered");
    env.write_file(&json!({"version": 2, "jobs": [done], "turns": [turn]}));
    env.atc(["cancel", TASK])
        .status(1)
        .stderr_contains("already delivered");
    env.atc(["cancel", "task-nope"])
        .status(1)
        .stderr_contains("no watch for task-nope");
    let mut lost = job("task-lost", "lost", NOWHERE);
    lost["job_id"] = json!("0123456789ab");
    env.write_file(&json!({"version": 2, "jobs": [lost]}));
    env.atc(["cancel", "task-lost"])
        .status(1)
        .stderr("atc: the watch on task-lost already ended (lost); nothing to cancel\n");
}

#[test]
fn doubtful_job_files_are_refused_with_exit_3_and_left_untouched() {
    let newer = json!({"version": 3, "jobs": [], "turns": []}).to_string();
    let wrong_type = json!({"version": 2, "jobs": [{"task_id": 7}]}).to_string();
    let cases: [(&str, &[u8], &str); 5] = [
        ("empty", b"", "empty"),
        (
            "truncated",
            b"{\"version\": 2, \"jobs\": [{\"job_id\": \"9f2c",
            "truncated",
        ),
        ("not json", b"version=1\n", "not valid JSON"),
        ("wrongly typed", wrong_type.as_bytes(), "schema"),
        ("newer", newer.as_bytes(), "newer"),
    ];
    for (name, bytes, says) in cases {
        let env = TestEnv::new();
        env.write_bytes(bytes);
        for args in [
            vec!["watch", TASK, "--session", "s"],
            vec!["status"],
            vec!["cancel", TASK],
            vec!["tick"],
        ] {
            // The default check of a failed run: the file is exactly as before.
            let out = env
                .atc(&args)
                .status(3)
                .stderr_contains(env.state.to_str().unwrap())
                .stderr_contains(says)
                .stderr_inspected()
                .run();
            assert!(
                stderr(&out).starts_with("atc: the job file"),
                "{name}: {}",
                stderr(&out)
            );
            assert_eq!(env.bytes(), bytes, "{name}: {args:?} changed the file");
        }
    }
}

#[test]
fn fields_from_a_newer_atc_are_kept_when_the_file_is_rewritten() {
    let env = TestEnv::new();
    let mut old = job("task-old", "pending", NOWHERE);
    old["future_field"] = json!({"nested": [1, 2.5, "x"]});
    env.write_file(&json!({"version": 2, "jobs": [old.clone()]}));
    env.atc(["watch", "task-new", "--session", "s"])
        .chat_check_skipped()
        .stdout_contains("Watching task-new")
        .run();
    assert_eq!(env.job("task-old"), old);
}

#[test]
fn twenty_concurrent_watches_lose_nothing() {
    let env = TestEnv::new();
    let running: Vec<_> = (0..20)
        .map(|i| {
            env.atc([
                "watch".to_owned(),
                format!("task-{i:012x}"),
                "--session".into(),
                format!("s-{i}"),
            ])
            .chat_check_skipped()
            .stdout_contains(format!("Watching task-{i:012x} "))
            .spawn()
        })
        .collect();
    for run in running {
        run.wait();
    }
    let leftovers: Vec<_> = std::fs::read_dir(env.state.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let jobs = env.jobs();
    assert_eq!(jobs.len(), 20);
    for i in 0..20 {
        let job = env.job(&format!("task-{i:012x}"));
        assert_eq!(job["session_id"], format!("s-{i}"));
    }
}

#[test]
fn the_default_job_file_is_private_and_holds_no_token() {
    let env = TestEnv::new();
    env.atc_default_state(["watch", TASK, "--session", "s-77"])
        .chat_check_skipped()
        .env("QWENPAW_RUNTIME_INTERNAL_TOKEN", "runtime-secret-123")
        .env("ATC_BEARER_TOKEN", "bearer-secret-456")
        .stdout_contains("Watching")
        .never_shows("runtime-secret-123")
        .never_shows("bearer-secret-456")
        .run();
    let dir = env.home.join(".local/state/atc");
    let file = dir.join("jobs.json");
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&file), 0o600);
    assert!(std::fs::read_to_string(&file).unwrap().contains(TASK));
    // Rewrites keep it private, even if someone loosened it, and say so.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    env.atc_default_state(["cancel", TASK])
        .stdout_contains("Cancelled")
        .stderr(format!(
            "atc: warning: the job file {} was readable by group and others (mode 644), and it holds session ids and answers: atc has made it private (0600)\n",
            file.display()
        ))
        .run();
    assert_eq!(mode(&file), 0o600);
}

/// `atc --state STATE watch TASK --session s`, judged by that job file.
fn watch_into<'a>(env: &'a TestEnv, state: &std::path::Path) -> support::atc::Run<'a> {
    env.atc([
        "--state",
        state.to_str().unwrap(),
        "watch",
        TASK,
        "--session",
        "s",
    ])
    .judging(state)
}

#[test]
fn an_existing_directory_keeps_its_permissions() {
    let env = TestEnv::new();
    let dir = env.path("shared-dir");
    std::fs::create_dir_all(&dir).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let state = dir.join("jobs.json");
    watch_into(&env, &state)
        .stdout_contains("Watching")
        .chat_check_skipped()
        .run();
    assert_eq!(mode(&dir), 0o755);
    assert_eq!(mode(&state), 0o600);
}

#[test]
fn an_unwritable_location_exits_4() {
    let env = TestEnv::new();
    let blocker = env.path("a-file");
    std::fs::write(&blocker, "not a directory").unwrap();
    let state = blocker.join("jobs.json");
    watch_into(&env, &state).status(4).stderr_contains("a-file");
}

#[test]
fn a_held_lock_makes_writers_wait_then_exit_75_naming_the_lock_file() {
    let env = TestEnv::new();
    env.atc(["watch", TASK, "--session", "s"])
        .chat_check_skipped()
        .stdout_contains("Watching")
        .run();
    let lock_path = env.state.with_file_name("jobs.json.lock");
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .open(&lock_path)
        .unwrap();
    lock.lock().unwrap();
    let started = std::time::Instant::now();
    env.atc(["cancel", TASK])
        .status(75)
        .stderr_contains(lock_path.to_str().unwrap())
        .run();
    assert!(
        started.elapsed() >= Duration::from_secs(9),
        "it waits for the lock first"
    );
    // Readers do not need the lock.
    env.atc(["status"]).stdout_contains(TASK).run();
    drop(lock);
    env.atc(["cancel", TASK]).stdout_contains("Cancelled");
}

#[test]
fn two_job_files_do_not_share_a_lock() {
    let env = TestEnv::new();
    let other = env.path("other/other.json");
    std::fs::create_dir_all(other.parent().unwrap()).unwrap();
    env.atc(["watch", TASK, "--session", "s"])
        .chat_check_skipped()
        .stdout_contains("Watching")
        .run();
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .open(env.state.with_file_name("jobs.json.lock"))
        .unwrap();
    lock.lock().unwrap();
    watch_into(&env, &other)
        .stdout_contains("Watching")
        .chat_check_skipped()
        .run();
    assert!(other.with_file_name("other.json.lock").exists());
}

#[test]
fn a_closed_pipe_ends_output_quietly() {
    let env = TestEnv::new();
    let jobs: Vec<Value> = (0..3000)
        .map(|i| job(&format!("task-{i:012x}"), "pending", NOWHERE))
        .collect();
    env.write_file(&json!({"version": 2, "jobs": jobs}));
    let mut child = env
        .std_cmd()
        .args(["status", "--all"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 4];
    let mut stdout = child.stdout.take().unwrap();
    stdout.read_exact(&mut first).unwrap();
    drop(stdout); // like `atc status --all | head -c 4`
    let out = child.wait_with_output().unwrap();
    assert_eq!(&first, b"TASK");
    assert_eq!(stderr(&out), "", "no panic, no error message");
    assert!(out.status.success());
}
