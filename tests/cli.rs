//! The core commands (`watch`, `status`, `cancel`) and the job file, through the real
//! binary in a hermetic environment: each test checks exit status, stdout, stderr and the
//! job file left on disk.

mod support;

use std::io::Read;
use std::time::Duration;

use predicates::prelude::*;
use serde_json::{Value, json};
use support::atc::{TestEnv, job, mode, stderr, stdout};

const TASK: &str = "task-3f9a0c1b2d4e";

fn is_hex12(v: &Value) -> bool {
    v.as_str().is_some_and(|s| {
        s.len() == 12
            && s.chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    })
}

#[test]
fn watch_records_a_pending_job_and_says_where_the_result_goes() {
    let env = TestEnv::new();
    env.cmd()
        .args(["watch", TASK, "--session", "s-77"])
        .assert()
        .success()
        .stdout(format!(
            "Watching {TASK} for agent 'default'; the result goes to session s-77 (user default, channel console) on the next atc tick.\n"
        ))
        .stderr("");
    let file = env.file();
    assert_eq!(file["version"], 1);
    let job = env.job(TASK);
    assert!(is_hex12(&job["job_id"]), "{job}");
    for (key, want) in [
        ("task_id", json!(TASK)),
        ("base_url", json!("http://127.0.0.1:8088/api")),
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
    let out = env
        .cmd()
        .args([
            "--json",
            "watch",
            TASK,
            "--session",
            "s-77",
            "--target-agent",
            "SE",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed, env.job(TASK));
    assert_eq!(printed["target_agent"], "SE");
    assert_eq!(stderr(&out), "");
}

#[test]
fn flags_beat_environment_which_beats_defaults() {
    let env = TestEnv::new();
    env.cmd()
        .args(["watch", "task-a"])
        .env("ATC_SESSION_ID", "env-session")
        .env("ATC_USER_ID", "env-user")
        .env("ATC_CHANNEL", "env-channel")
        .env("ATC_AGENT_ID", "env-agent")
        .assert()
        .success();
    let a = env.job("task-a");
    assert_eq!(
        (
            &a["session_id"],
            &a["user_id"],
            &a["channel"],
            &a["agent_id"]
        ),
        (
            &json!("env-session"),
            &json!("env-user"),
            &json!("env-channel"),
            &json!("env-agent")
        )
    );
    env.cmd()
        .args([
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
        .env("ATC_SESSION_ID", "env-session")
        .env("ATC_USER_ID", "env-user")
        .env("ATC_CHANNEL", "env-channel")
        .env("ATC_AGENT_ID", "env-agent")
        .assert()
        .success();
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
fn watch_without_a_session_is_a_usage_error() {
    let env = TestEnv::new();
    env.cmd()
        .args(["watch", TASK])
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains("--session"));
    assert!(!env.exists());
}

#[test]
fn help_names_the_environment_fallback_of_every_setting_and_the_exit_codes() {
    let env = TestEnv::new();
    let top = env.cmd().arg("--help").output().unwrap();
    let top = stdout(&top);
    for needle in [
        "ATC_STATE",
        "ATC_BASE_URL",
        "QWENPAW_RUNTIME_INTERNAL_TOKEN",
        "ATC_BEARER_TOKEN",
        "Exit codes:",
        "75",
        "124",
    ] {
        assert!(top.contains(needle), "atc --help lacks {needle}:\n{top}");
    }
    let watch = env.cmd().args(["watch", "--help"]).output().unwrap();
    let watch = stdout(&watch);
    for needle in [
        "ATC_SESSION_ID",
        "ATC_USER_ID",
        "ATC_CHANNEL",
        "ATC_AGENT_ID",
        "[default: default]",
        "[default: console]",
    ] {
        assert!(
            watch.contains(needle),
            "atc watch --help lacks {needle}:\n{watch}"
        );
    }
}

#[test]
fn task_ids_are_normalised_like_qwenpaw() {
    let env = TestEnv::new();
    env.cmd()
        .args(["watch", &format!("  '{TASK}' "), "--session", "s-77"])
        .assert()
        .success();
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
            env.cmd()
                .args(&args)
                .assert()
                .code(2)
                .stdout("")
                .stderr(predicate::str::starts_with("atc: task id"));
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
    let work = env.home.join(".qwenpaw");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(
        work.join("config.json"),
        r#"{"last_api": {"host": "127.0.0.1", "port": 9100}}"#,
    )
    .unwrap();
    let base = |task: &str| env.job(task)["base_url"].as_str().unwrap().to_owned();

    env.cmd()
        .args(["watch", "t-config", "--session", "s"])
        .assert()
        .success();
    assert_eq!(base("t-config"), "http://127.0.0.1:9100/api");

    // The managed runtime URL counts only with its id and token, as in QwenPaw.
    env.cmd()
        .args(["watch", "t-half-runtime", "--session", "s"])
        .env("QWENPAW_RUNTIME_API_URL", "http://127.0.0.1:9200")
        .assert()
        .success();
    assert_eq!(base("t-half-runtime"), "http://127.0.0.1:9100/api");
    env.cmd()
        .args(["watch", "t-runtime", "--session", "s"])
        .env("QWENPAW_RUNTIME_API_URL", "http://127.0.0.1:9200/")
        .env("QWENPAW_RUNTIME_ID", "rt-1")
        .env("QWENPAW_RUNTIME_INTERNAL_TOKEN", "tok-secret-1")
        .assert()
        .success();
    assert_eq!(base("t-runtime"), "http://127.0.0.1:9200/api");

    env.cmd()
        .args(["watch", "t-env", "--session", "s"])
        .env("ATC_BASE_URL", "http://127.0.0.1:9300/api/")
        .env("QWENPAW_RUNTIME_API_URL", "http://127.0.0.1:9200")
        .env("QWENPAW_RUNTIME_ID", "rt-1")
        .env("QWENPAW_RUNTIME_INTERNAL_TOKEN", "tok-secret-1")
        .assert()
        .success();
    assert_eq!(base("t-env"), "http://127.0.0.1:9300/api");

    env.cmd()
        .args([
            "--base-url",
            "https://127.0.0.1:9443/root",
            "watch",
            "t-flag",
            "--session",
            "s",
        ])
        .env("ATC_BASE_URL", "http://127.0.0.1:9300")
        .assert()
        .success();
    assert_eq!(base("t-flag"), "https://127.0.0.1:9443/root/api");

    // QWENPAW_WORKING_DIR, then ~/.copaw when it exists, then ~/.qwenpaw, then the default.
    let custom = env.path("custom-work");
    std::fs::create_dir_all(&custom).unwrap();
    std::fs::write(
        custom.join("config.json"),
        r#"{"last_api": {"host": "0.0.0.0", "port": 9400}}"#,
    )
    .unwrap();
    env.cmd()
        .args(["watch", "t-workdir", "--session", "s"])
        .env("QWENPAW_WORKING_DIR", &custom)
        .assert()
        .success();
    assert_eq!(base("t-workdir"), "http://127.0.0.1:9400/api");
    std::fs::create_dir_all(env.home.join(".copaw")).unwrap();
    env.cmd()
        .args(["watch", "t-default", "--session", "s"])
        .assert()
        .success();
    assert_eq!(base("t-default"), "http://127.0.0.1:8088/api");
}

#[test]
fn bad_base_urls_are_usage_errors_that_touch_nothing() {
    let env = TestEnv::new();
    for (url, says) in [
        ("ftp://127.0.0.1:8088", "only http:// and https://"),
        ("http://admin:pw@127.0.0.1:8088", "user name or password"),
        ("127.0.0.1:8088", "no scheme"),
    ] {
        env.cmd()
            .args(["--base-url", url, "watch", TASK, "--session", "s"])
            .assert()
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains(says))
            .stderr(predicate::str::contains("pw").not());
    }
    assert!(!env.exists());
}

#[test]
fn acp_sessions_are_refused_in_any_case() {
    let env = TestEnv::new();
    for channel in ["acp", "ACP", "Acp"] {
        env.cmd()
            .args(["watch", TASK, "--session", "s", "--channel", channel])
            .assert()
            .code(1)
            .stdout("")
            .stderr(predicate::str::contains("check_agent_task"));
    }
    assert!(!env.exists());
}

#[test]
fn watching_the_same_task_for_the_same_target_is_idempotent() {
    let env = TestEnv::new();
    env.cmd()
        .args(["watch", TASK, "--session", "s-77"])
        .assert()
        .success();
    let before = env.bytes();
    let first = env.job(TASK);
    env.cmd()
        .args(["watch", TASK, "--session", "s-77"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with(format!(
            "Already watching {TASK}"
        )))
        .stdout(predicate::str::contains(first["job_id"].as_str().unwrap()));
    assert_eq!(env.bytes(), before, "an idempotent watch changes nothing");
}

#[test]
fn watching_the_same_task_for_another_target_replaces_the_registration() {
    let env = TestEnv::new();
    env.cmd()
        .args(["watch", TASK, "--session", "s-77"])
        .assert()
        .success();
    let first = env.job(TASK);
    env.cmd()
        .args(["watch", TASK, "--session", "s-78", "--user", "alice"])
        .assert()
        .success()
        .stdout(format!(
            "Re-targeted {TASK} for agent 'default': session s-77 → s-78, user default → alice; the result goes there on the next atc tick.\n"
        ));
    let second = env.job(TASK);
    assert_ne!(second["job_id"], first["job_id"]);
    assert_eq!(
        (&second["session_id"], &second["user_id"]),
        (&json!("s-78"), &json!("alice"))
    );
    assert_eq!(second["status"], "pending");
}

#[test]
fn watching_again_with_another_base_url_fixes_a_wrong_one() {
    let env = TestEnv::new();
    env.cmd()
        .args([
            "--base-url",
            "http://127.0.0.1:1",
            "watch",
            TASK,
            "--session",
            "s-77",
        ])
        .assert()
        .success();
    let first = env.job(TASK);
    env.cmd()
        .args([
            "--base-url",
            "http://127.0.0.1:8088",
            "watch",
            TASK,
            "--session",
            "s-77",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "base URL http://127.0.0.1:1/api → http://127.0.0.1:8088/api",
        ));
    let second = env.job(TASK);
    assert_ne!(second["job_id"], first["job_id"]);
    assert_eq!(second["base_url"], "http://127.0.0.1:8088/api");
}

#[test]
fn a_delivered_or_maybe_delivered_task_is_not_watched_again() {
    for status in ["done", "unconfirmed"] {
        let env = TestEnv::new();
        env.write_file(
            &json!({"version": 1, "jobs": [job(TASK, status, "http://127.0.0.1:8088/api")]}),
        );
        let before = env.bytes();
        env.cmd()
            .args(["watch", TASK, "--session", "s-77"])
            .assert()
            .code(1)
            .stdout("")
            .stderr(predicate::str::contains("twice"));
        assert_eq!(env.bytes(), before, "{status}: the file must not change");
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
        let mut old = job(TASK, status, "http://127.0.0.1:1/api");
        old["final"] = json!("old text");
        env.write_file(&json!({"version": 1, "jobs": [old.clone()]}));
        env.cmd()
            .args(["watch", TASK, "--session", "s-77"])
            .assert()
            .success()
            .stdout(predicate::str::contains(format!("ended {status}")));
        let new = env.job(TASK);
        assert_eq!(new["status"], "pending", "{status}");
        assert_ne!(new["job_id"], old["job_id"]);
        assert!(new.get("final").is_none());
        assert_eq!(
            new["base_url"], "http://127.0.0.1:8088/api",
            "the new registration's URL"
        );
    }
}

#[test]
fn status_lists_the_20_most_recent_newest_first() {
    let env = TestEnv::new();
    let jobs: Vec<Value> = (0..25)
        .map(|i| {
            let mut j = job(
                &format!("task-{i:02}"),
                "pending",
                "http://127.0.0.1:8088/api",
            );
            j["registered_at"] = json!(format!("2026-11-30T10:{i:02}:00Z"));
            j
        })
        .collect();
    env.write_file(&json!({"version": 1, "jobs": jobs}));
    let out = env.cmd().arg("status").output().unwrap();
    assert!(out.status.success());
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("TASK"), "{text}");
    assert!(lines[1].starts_with("task-24 "), "{text}");
    assert!(lines[20].starts_with("task-05 "), "{text}");
    assert!(!text.contains("task-04"), "{text}");
    assert!(lines[21].contains("20 of 25"), "{text}");
    assert!(lines[1].contains("default → s-77"), "{text}");

    let all = env.cmd().args(["status", "--all"]).output().unwrap();
    assert_eq!(
        stdout(&all)
            .lines()
            .filter(|l| l.starts_with("task-"))
            .count(),
        25
    );

    let json_out = env.cmd().args(["--json", "status"]).output().unwrap();
    let listed: Value = serde_json::from_slice(&json_out.stdout).unwrap();
    let ids: Vec<&str> = listed["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["task_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 20);
    assert_eq!((ids[0], ids[19]), ("task-24", "task-05"));
    let json_all = env
        .cmd()
        .args(["--json", "status", "--all"])
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&json_all.stdout).unwrap();
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
    env.cmd()
        .args(["watch", TASK, "--session", "s-77", "--target-agent", "SE"])
        .assert()
        .success();
    let job_id = env.job(TASK)["job_id"].as_str().unwrap().to_owned();
    env.cmd()
        .args(["status", TASK])
        .assert()
        .success()
        .stdout(predicate::str::contains(&job_id))
        .stdout(predicate::str::contains("runs on         SE"))
        .stdout(predicate::str::contains(
            "session s-77 (user default, channel console)",
        ))
        .stdout(predicate::str::contains("http://127.0.0.1:8088/api"));
    let out = env.cmd().args(["--json", "status", TASK]).output().unwrap();
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown, json!({"jobs": [env.job(TASK)]}));
    env.cmd()
        .args(["status", "task-unknown"])
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::contains("no watch for task-unknown"));
}

#[test]
fn status_with_no_jobs_says_so_and_creates_nothing() {
    let env = TestEnv::new();
    env.cmd()
        .arg("status")
        .assert()
        .success()
        .stdout("No jobs.\n")
        .stderr("");
    env.cmd()
        .args(["--json", "status"])
        .assert()
        .success()
        .stdout(predicate::str::contains("\"jobs\": []"));
    assert!(!env.state.parent().unwrap().exists());
}

#[test]
fn cancel_marks_the_job_cancelled_and_the_child_keeps_running() {
    let env = TestEnv::new();
    env.cmd()
        .args(["watch", TASK, "--session", "s-77"])
        .assert()
        .success();
    env.cmd()
        .args(["cancel", TASK])
        .assert()
        .success()
        .stdout(predicate::str::contains("keeps running"));
    assert_eq!(env.job(TASK)["status"], "cancelled");
    let before = env.bytes();
    env.cmd()
        .args(["cancel", TASK])
        .assert()
        .success()
        .stdout(predicate::str::contains("already cancelled"));
    assert_eq!(env.bytes(), before);
}

#[test]
fn cancel_refuses_unknown_and_delivered_tasks() {
    let env = TestEnv::new();
    env.write_file(
        &json!({"version": 1, "jobs": [job(TASK, "done", "http://127.0.0.1:8088/api")]}),
    );
    let before = env.bytes();
    env.cmd()
        .args(["cancel", TASK])
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::contains("already delivered"));
    env.cmd()
        .args(["cancel", "task-nope"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no watch for task-nope"));
    assert_eq!(env.bytes(), before);
}

#[test]
fn doubtful_job_files_are_refused_with_exit_3_and_left_untouched() {
    let newer = json!({"version": 2, "jobs": []}).to_string();
    let wrong_type = json!({"version": 1, "jobs": [{"task_id": 7}]}).to_string();
    let cases: [(&str, &[u8], &str); 5] = [
        ("empty", b"", "empty"),
        (
            "truncated",
            b"{\"version\": 1, \"jobs\": [{\"job_id\": \"9f2c",
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
            env.cmd()
                .args(&args)
                .assert()
                .code(3)
                .stdout("")
                .stderr(predicate::str::contains(env.state.to_str().unwrap()))
                .stderr(predicate::str::contains(says));
            assert_eq!(env.bytes(), bytes, "{name}: {args:?} changed the file");
        }
        let leftovers: Vec<_> = std::fs::read_dir(env.state.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}

#[test]
fn the_v1_fixture_keeps_loading_and_survives_a_rewrite() {
    let env = TestEnv::new();
    let fixture = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/jobs.v1.json"
    ))
    .unwrap();
    env.write_bytes(&fixture);
    let out = env
        .cmd()
        .args(["--json", "status", "--all"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let original: Value = serde_json::from_slice(&fixture).unwrap();
    let mut want = original["jobs"].as_array().unwrap().clone();
    want.sort_by(|a, b| {
        b["registered_at"]
            .as_str()
            .cmp(&a["registered_at"].as_str())
    });
    assert_eq!(listed["jobs"].as_array().unwrap(), &want);

    env.cmd()
        .args(["watch", "task-new", "--session", "s-1"])
        .assert()
        .success();
    let jobs = env.jobs();
    assert_eq!(jobs.len(), 4);
    assert_eq!(
        &jobs[..3],
        original["jobs"].as_array().unwrap().as_slice(),
        "old records are kept as they were"
    );
}

#[test]
fn fields_from_a_newer_atc_are_kept_when_the_file_is_rewritten() {
    let env = TestEnv::new();
    let mut old = job("task-old", "pending", "http://127.0.0.1:8088/api");
    old["future_field"] = json!({"nested": [1, 2.5, "x"]});
    env.write_file(&json!({"version": 1, "jobs": [old.clone()]}));
    env.cmd()
        .args(["watch", "task-new", "--session", "s"])
        .assert()
        .success();
    assert_eq!(env.job("task-old"), old);
}

#[test]
fn twenty_concurrent_watches_lose_nothing() {
    let env = TestEnv::new();
    let children: Vec<_> = (0..20)
        .map(|i| {
            env.std_cmd()
                .args([
                    "watch",
                    &format!("task-{i:012x}"),
                    "--session",
                    &format!("s-{i}"),
                ])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(child.wait().unwrap().success(), "{err}");
    }
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
    env.bare()
        .args(["watch", TASK, "--session", "s-77"])
        .env("QWENPAW_RUNTIME_INTERNAL_TOKEN", "runtime-secret-123")
        .env("ATC_BEARER_TOKEN", "bearer-secret-456")
        .assert()
        .success()
        .stdout(predicate::str::contains("secret").not());
    let dir = env.home.join(".local/state/atc");
    let file = dir.join("jobs.json");
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&file), 0o600);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains(TASK));
    assert!(!text.contains("secret"), "{text}");
    // Rewrites keep it private, even if someone loosened it.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    env.bare().args(["cancel", TASK]).assert().success();
    assert_eq!(mode(&file), 0o600);
}

#[test]
fn an_existing_directory_keeps_its_permissions() {
    let env = TestEnv::new();
    let dir = env.path("shared-dir");
    std::fs::create_dir_all(&dir).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    env.cmd()
        .args([
            "--state",
            dir.join("jobs.json").to_str().unwrap(),
            "watch",
            TASK,
            "--session",
            "s",
        ])
        .assert()
        .success();
    assert_eq!(mode(&dir), 0o755);
    assert_eq!(mode(&dir.join("jobs.json")), 0o600);
}

#[test]
fn an_unwritable_location_exits_4() {
    let env = TestEnv::new();
    let blocker = env.path("a-file");
    std::fs::write(&blocker, "not a directory").unwrap();
    env.cmd()
        .args([
            "--state",
            blocker.join("jobs.json").to_str().unwrap(),
            "watch",
            TASK,
            "--session",
            "s",
        ])
        .assert()
        .code(4)
        .stdout("")
        .stderr(predicate::str::contains("a-file"));
}

#[test]
fn a_held_lock_makes_writers_wait_then_exit_75_naming_the_lock_file() {
    let env = TestEnv::new();
    env.cmd()
        .args(["watch", TASK, "--session", "s"])
        .assert()
        .success();
    let before = env.bytes();
    let lock_path = env.state.with_file_name("jobs.json.lock");
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .open(&lock_path)
        .unwrap();
    lock.lock().unwrap();
    let started = std::time::Instant::now();
    env.cmd()
        .args(["cancel", TASK])
        .assert()
        .code(75)
        .stdout("")
        .stderr(predicate::str::contains(lock_path.to_str().unwrap()));
    assert!(
        started.elapsed() >= Duration::from_secs(9),
        "it waits for the lock first"
    );
    // Readers do not need the lock.
    env.cmd().arg("status").assert().success();
    drop(lock);
    assert_eq!(env.bytes(), before);
    env.cmd().args(["cancel", TASK]).assert().success();
}

#[test]
fn two_job_files_do_not_share_a_lock() {
    let env = TestEnv::new();
    let other = env.path("other/other.json");
    std::fs::create_dir_all(other.parent().unwrap()).unwrap();
    env.cmd()
        .args(["watch", TASK, "--session", "s"])
        .assert()
        .success();
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .open(env.state.with_file_name("jobs.json.lock"))
        .unwrap();
    lock.lock().unwrap();
    env.cmd()
        .args([
            "--state",
            other.to_str().unwrap(),
            "watch",
            TASK,
            "--session",
            "s",
        ])
        .assert()
        .success();
    assert!(other.with_file_name("other.json.lock").exists());
}

#[test]
fn a_closed_pipe_ends_output_quietly() {
    let env = TestEnv::new();
    let jobs: Vec<Value> = (0..3000)
        .map(|i| {
            job(
                &format!("task-{i:012x}"),
                "pending",
                "http://127.0.0.1:8088/api",
            )
        })
        .collect();
    env.write_file(&json!({"version": 1, "jobs": jobs}));
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
