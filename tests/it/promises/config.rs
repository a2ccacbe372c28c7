//! The config file (`$XDG_CONFIG_HOME/atc/config.toml`, or `ATC_CONFIG`): every command
//! reads it, below the flags and the environment; `atc config` shows and changes it; a
//! bad one is refused by every command (exit 78) naming the file and the key. Issue 27's
//! "one configuration": the timer's ticks and the plugin's kicks run with the same
//! settings because both read the file, not flags.

use crate::support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use support::ago;
use support::atc::{TestEnv, stderr, stdout, write_private};
use support::bodies;
use support::fake::Reply;
use support::hermetic::NOWHERE;
use support::scene::Scene;

const TASK: &str = "task-0123456789ab";

/// Where every command of `env` finds the config file: inside the test's own HOME
/// (`XDG_CONFIG_HOME` is set there by the hermetic environment, `ATC_CONFIG` cleared).
fn config_path(env: &TestEnv) -> PathBuf {
    env.home.join(".config/atc/config.toml")
}

fn write_config(env: &TestEnv, text: &str) {
    write_private(&config_path(env), text.as_bytes());
}

fn read_config(env: &TestEnv) -> String {
    fs::read_to_string(config_path(env)).unwrap()
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// A watch of a still-running child registered two days ago.
fn two_days_old(s: &Scene) {
    s.watch(TASK, &[]);
    s.env.edit_job(TASK, |job| {
        job.insert("registered_at".into(), json!(ago(2 * 24 * 3600)));
    });
    s.poll_replies(TASK, vec![Reply::json(200, bodies::RUNNING)]);
}

/// Issue 27, defect 1: the plugin runs `atc tick --kicked` with no flags, so a kick
/// expired a 2-day-old watch at the default 24 h while the timer ran `--max-age 3d`. Now
/// `max-age = "3d"` in the config file governs the kicked tick, the timer's and yours (and
/// a kick decides no expiry at all for the watches its turn's end concerns: their child
/// may just have finished; `the_files_strikes_and_batching_govern_a_kicked_tick` shows a
/// kick reading the file).
#[test]
fn a_kicked_tick_takes_max_age_from_the_config_file() {
    let s = Scene::new();
    two_days_old(&s);
    write_config(&s.env, "max-age = \"3d\"\n");
    for args in [&["--kicked"][..], &[]] {
        s.tick(args).run();
        assert_eq!(s.status(TASK), "pending", "tick {args:?}");
    }
    assert!(s.posts().is_empty(), "no expired notice was posted");
    assert!(s.polls(TASK) >= 2, "each tick polled it");

    // Without the file, the default 24 h: a kick still leaves it (a poll right after a
    // turn's end decides nothing on time, issue 27 defect 4: the child may just have
    // finished), and the next timer's tick expires it.
    let s = Scene::new();
    two_days_old(&s);
    s.tick(&["--kicked"]).run();
    assert_eq!(s.status(TASK), "pending");
    s.tick(&[]).run();
    assert_eq!(s.status(TASK), "expired");
    let notice = s.delivered("s-77");
    assert!(notice[0].contains("[STATUS: expired]"), "{notice:?}");
}

/// Every layer of the precedence for one knob: `--max-age` beats `ATC_MAX_AGE`, which
/// beats `max-age` in the file, which beats the default (24 h), each judged by what the
/// tick does to a 2-day-old watch.
#[test]
fn a_flag_beats_the_environment_beats_the_file_beats_the_default() {
    for (flag, env, file, expired) in [
        (Some("1d"), Some("3d"), Some("3d"), true),
        (Some("3d"), Some("1d"), Some("1d"), false),
        (None, Some("1d"), Some("3d"), true),
        (None, Some("3d"), Some("1d"), false),
        (None, None, Some("3d"), false),
        (None, None, Some("1d"), true),
        (None, None, None, true),
    ] {
        let s = Scene::new();
        two_days_old(&s);
        if let Some(age) = file {
            write_config(&s.env, &format!("max-age = \"{age}\"\n"));
        }
        let mut args = vec!["tick"];
        if let Some(age) = flag {
            args.extend(["--max-age", age]);
        }
        let mut run = s.atc(args);
        if let Some(age) = env {
            run = run.env("ATC_MAX_AGE", age);
        }
        run.run();
        let want = if expired { "expired" } else { "pending" };
        assert_eq!(
            s.status(TASK),
            want,
            "flag {flag:?}, ATC_MAX_AGE {env:?}, file {file:?}"
        );
    }
}

/// Other knobs from the file govern a kicked tick too: `max-strikes` (abandoned after one
/// failed check instead of 90) and `no-batch` (two results due for one chat go in two
/// turns, one per tick, instead of one).
#[test]
fn the_files_strikes_and_batching_govern_a_kicked_tick() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    write_config(&s.env, "max-strikes = 1\n");
    s.poll_replies(TASK, vec![Reply::json(502, r#"{"detail":"bad gateway"}"#)]);
    // Nobody reads a kick's stderr: it leaves the give-up unsaid, the next tick says it.
    let line = format!("atc: gave up on {TASK} (abandoned): 1 failed check in a row (HTTP 502)");
    s.tick(&["--kicked"]).run();
    assert_eq!(s.status(TASK), "abandoned");
    s.tick(&[]).stderr_contains(line).run();

    let s = Scene::new();
    s.watch("task-a", &[]);
    s.watch("task-b", &[]);
    for task in ["task-a", "task-b"] {
        s.poll_replies(task, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    }
    write_config(&s.env, "# one result per turn\nno-batch = true\n");
    s.tick(&["--kicked"]).run();
    assert_eq!(s.delivered("s-77").len(), 1, "one result per tick");
    s.tick(&["--kicked"]).run();
    let delivered = s.delivered("s-77");
    assert_eq!(delivered.len(), 2);
    assert!(
        delivered
            .iter()
            .all(|d| d.matches("[TASK_ID: ").count() == 1),
        "{delivered:?}"
    );
}

/// The test environment's config file is its own: nothing a developer keeps in
/// ~/.config/atc/config.toml reaches a test.
#[test]
fn the_test_environment_has_a_config_file_of_its_own() {
    let env = TestEnv::new();
    env.atc(["config", "path"])
        .stdout(format!("{}\n", config_path(&env).display()))
        .no_file()
        .run();
    let out = env
        .atc(["config", "path", "--json"])
        .stdout_inspected()
        .no_file()
        .run();
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        doc,
        json!({"path": config_path(&env), "exists": false, "located_by": "XDG_CONFIG_HOME"})
    );
}

#[test]
fn config_path_is_atc_config_else_xdg_config_home_else_home() {
    let env = TestEnv::new();
    let named = env.path("elsewhere/atc.toml");
    env.atc(["config", "path"])
        .env("ATC_CONFIG", &named)
        .stdout(format!("{}\n", named.display()))
        .no_file()
        .run();
    env.atc(["config", "path"])
        .env_remove("XDG_CONFIG_HOME")
        .stdout(format!(
            "{}\n",
            env.home.join(".config/atc/config.toml").display()
        ))
        .no_file()
        .run();
    // A relative XDG_CONFIG_HOME is ignored, as the XDG spec says.
    env.atc(["config", "path"])
        .env("XDG_CONFIG_HOME", "relative/dir")
        .stdout(format!(
            "{}\n",
            env.home.join(".config/atc/config.toml").display()
        ))
        .no_file()
        .run();
    let xdg = env.path("xdg");
    env.atc(["config", "path"])
        .env("XDG_CONFIG_HOME", &xdg)
        .stdout(format!("{}\n", xdg.join("atc/config.toml").display()))
        .no_file()
        .run();
}

/// `config show`: every key, its value and where it came from; a flag, the environment,
/// the file and the default each named; never a token.
#[test]
fn config_show_names_where_each_value_came_from() {
    let env = TestEnv::new();
    let state = env.path("mine/jobs.json");
    write_config(
        &env,
        &format!(
            "max-age = \"72h\"\nstate = \"{}\"\nbase-url = \"http://127.0.0.1:9\"\nno-batch = true\n",
            state.display()
        ),
    );
    let file = config_path(&env).display().to_string();
    let out = env
        .atc_default_state(["config", "show"])
        .env("ATC_KEEP", "30d")
        .env("QWENPAW_RUNTIME_INTERNAL_TOKEN", "tok-secret-1")
        .env_remove("ATC_BASE_URL")
        .never_shows("tok-secret-1")
        .stdout_inspected()
        .run();
    let lines: Vec<String> = stdout(&out)
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        lines,
        [
            format!("# config file: {file} (XDG_CONFIG_HOME)"),
            format!("state {} config file", state.display()),
            "base-url http://127.0.0.1:9/api config file".to_owned(),
            "max-age 3d config file".to_owned(),
            "busy-deadline 6h default".to_owned(),
            "busy-retry 20s default".to_owned(),
            "keep 30d ATC_KEEP".to_owned(),
            "max-strikes 90 default".to_owned(),
            "follow-up-depth 5 default".to_owned(),
            "poll-ceiling 5m default".to_owned(),
            "concurrency 8 default".to_owned(),
            "http-timeout 30s default".to_owned(),
            "turn-timeout (QwenPaw's own, 1h) default".to_owned(),
            "no-batch true config file".to_owned(),
            "auto-watch true default".to_owned(),
        ]
    );

    // The flags beat the file; --json for scripts.
    let flag_state = env.path("flag/jobs.json");
    let out = env
        .atc_default_state([
            "--state",
            flag_state.to_str().unwrap(),
            "--base-url",
            "http://127.0.0.1:10",
            "config",
            "show",
            "--json",
        ])
        .env("ATC_NO_BATCH", "0")
        .stdout_inspected()
        .judging(&flag_state)
        .no_file()
        .run();
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        doc["file"],
        json!({"path": file, "exists": true, "located_by": "XDG_CONFIG_HOME"})
    );
    let settings = &doc["settings"];
    assert_eq!(settings.as_object().unwrap().len(), 14);
    assert_eq!(settings["state"]["value"], json!(flag_state));
    assert_eq!(settings["state"]["source"], "flag");
    assert_eq!(settings["base-url"]["value"], "http://127.0.0.1:10/api");
    assert_eq!(settings["base-url"]["source"], "flag");
    assert_eq!(
        settings["max-age"],
        json!({"value": "3d", "source": "file", "from": format!("max-age in {file}"),
               "env": "ATC_MAX_AGE", "flag": "--max-age",
               "about": "a task not finished this long after `watch` expires"})
    );
    assert_eq!(settings["no-batch"]["value"], false);
    assert_eq!(settings["no-batch"]["source"], "env");
    assert_eq!(settings["max-strikes"]["value"], 90);
    assert_eq!(settings["turn-timeout"]["value"], Value::Null);
    assert_eq!(settings["auto-watch"]["value"], true);
    assert_eq!(settings["auto-watch"]["flag"], Value::Null);

    env.atc(["config", "get", "max-age"])
        .stdout("3d\n")
        .no_file()
        .run();
    env.atc(["config", "get", "turn-timeout"]).no_file().run();
    env.atc(["config", "get", "max_age"])
        .status(2)
        .stderr("atc: unknown key \"max_age\" (did you mean \"max-age\"?)\n")
        .no_file()
        .run();
}

/// `config set`: checked by the flag's own validator, written atomically and privately,
/// the rest of the file (comments, order, other keys) kept; a refused value changes
/// nothing, byte for byte.
#[test]
fn config_set_checks_writes_privately_and_keeps_the_rest_of_the_file() {
    let env = TestEnv::new();
    let path = config_path(&env);
    // A first set makes the file (0600) and its directory (0700).
    env.atc(["config", "set", "max-age", "3d"]).no_file().run();
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(path.parent().unwrap()), 0o700);
    let text = read_config(&env);
    assert!(text.starts_with("# atc's settings"), "{text}");
    assert!(text.ends_with("beats this file. `atc config show` lists every key; tokens never go here.\nmax-age = \"3d\"\n"), "{text}");

    let hand = "# my settings\nmax-age = \"1d\"   # the day job\n\n# deliveries\nkeep = \"30d\"\n";
    write_config(&env, hand);
    env.atc(["config", "set", "max-age", "72h"]).no_file().run();
    env.atc(["config", "set", "max-strikes", "180"])
        .no_file()
        .run();
    env.atc(["config", "set", "no-batch", "yes"])
        .no_file()
        .run();
    assert_eq!(
        read_config(&env),
        "# my settings\nmax-age = \"3d\"   # the day job\n\n# deliveries\nkeep = \"30d\"\nmax-strikes = 180\nno-batch = true\n"
    );
    // The values are what every command then uses.
    let out = env
        .atc(["config", "show", "--json"])
        .stdout_inspected()
        .no_file()
        .run();
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["settings"]["max-strikes"]["value"], 180);
    assert_eq!(doc["settings"]["max-strikes"]["source"], "file");

    // Refused values: exit 2, one line, the file as it was (and no temp file left).
    let before = fs::read(&path).unwrap();
    for (args, said) in [
        (
            vec!["max-age", "3x"],
            "atc: max-age \"3x\": unknown time unit \"x\", supported units: ns, us/µs, ms, sec, min, hours, days, weeks, months, years (and few variations) (write durations like 30s, 5m, 24h, 7d)\n",
        ),
        (
            vec!["max-age", "4000d"],
            "atc: max-age \"4000d\": longer than 3650d (ten years), the most atc takes\n",
        ),
        (
            vec!["concurrency", "0"],
            "atc: concurrency \"0\": 0 is not from 1 to 256\n",
        ),
        // Issue 36 (L6): a zero timeout failed every request until the watches were
        // abandoned.
        (
            vec!["http-timeout", "0s"],
            "atc: http-timeout \"0s\": 0s is no timeout: every request would fail at once (give one like 30s)\n",
        ),
        (
            vec!["max-strikes", "lots"],
            "atc: max-strikes \"lots\": \"lots\" is not a whole number\n",
        ),
        (
            vec!["no-batch", "maybe"],
            "atc: no-batch \"maybe\": \"maybe\" is neither true nor false (write true or false, 1 or 0)\n",
        ),
        (
            vec!["base-url", "ftp://h"],
            "atc: base-url \"ftp://h\": base URL \"ftp://h\" uses ftp://; only http:// and https:// are supported\n",
        ),
        (
            vec!["maxage", "3d"],
            "atc: unknown key \"maxage\" (did you mean \"max-age\"?)\n",
        ),
        (
            vec!["bearer-token", "abc"],
            "atc: unknown key \"bearer-token\": tokens never go in the config file; keep QWENPAW_RUNTIME_INTERNAL_TOKEN or ATC_BEARER_TOKEN in the environment (~/.config/atc/env for the timer)\n",
        ),
    ] {
        let mut all = vec!["config", "set"];
        all.extend(args);
        env.atc(all).status(2).stderr(said).no_file().run();
        assert_eq!(fs::read(&path).unwrap(), before);
    }
    let mut leftovers: Vec<_> = fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    leftovers.sort();
    assert_eq!(
        leftovers,
        [
            std::ffi::OsString::from("config.toml"),
            std::ffi::OsString::from("config.toml.lock")
        ],
        "no temp file; the edits' lock"
    );

    // A relative job file is made absolute (the timer and the kicks run elsewhere).
    env.atc_default_state(["config", "set", "state", "jobs/mine.json"])
        .no_file()
        .run();
    assert!(read_config(&env).contains(&format!(
        "state = \"{}\"\n",
        env.home.join("jobs/mine.json").display()
    )));
    env.atc_default_state(["config", "set", "state", env.home.to_str().unwrap()])
        .status(2)
        .stderr(format!(
            "atc: state {:?} must name a file, not a directory\n",
            env.home.display().to_string()
        ))
        .no_file()
        .run();

    // Through a symbolic link (a dotfiles checkout), the file it points to is edited and
    // the link stays.
    let dotfiles = env.path("dotfiles/atc.toml");
    write_private(&dotfiles, b"# kept in git\nkeep = \"2d\"\n");
    fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink(&dotfiles, &path).unwrap();
    env.atc(["config", "set", "keep", "3d"]).no_file().run();
    assert!(
        fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        fs::read_to_string(&dotfiles).unwrap(),
        "# kept in git\nkeep = \"3d\"\n"
    );

    // The environment still beats the file: set says so.
    env.atc(["config", "set", "keep", "14d"])
        .env("ATC_KEEP", "1d")
        .stderr("atc: note: ATC_KEEP is set in this environment and beats the config file here (unset it to use the file's keep)\n")
        .no_file()
        .run();
    assert!(
        fs::read_to_string(&dotfiles)
            .unwrap()
            .contains("keep = \"14d\"\n")
    );
}

/// Found by hand: `atc config set state NEW` while the job file the ticks read held a
/// pending watch said nothing; the timer's ticks and the plugin's kicks read NEW from
/// then on, and the watch's result was never delivered. A change of `state` that leaves a
/// file still watching tasks is refused (exit 1, the config file and both job files as
/// they were) unless `--force`, which warns; `unset state` too.
#[test]
fn changing_state_away_from_a_file_that_still_watches_is_refused() {
    let s = Scene::new();
    let env = &s.env;
    let live = env.state.clone();
    let other = env.path("other/jobs.json");
    let shown = |p: &Path| p.display().to_string();
    // From the default (no job file there) to the test's file: nothing is left behind.
    env.atc_default_state(["config", "set", "state", &shown(&live)])
        .no_file()
        .run();
    s.watch(TASK, &[]);
    let before = fs::read(&live).unwrap();
    let refusal = |to: &Path| {
        format!(
            "atc: {from} still watches 1 task ({TASK}): once the ticks read {to} instead, nothing delivers its result; wait until `atc --state {from} status` shows it ended (or `atc --state {from} cancel` it), or pass --force to change it anyway\n",
            from = shown(&live),
            to = shown(to)
        )
    };
    env.atc_default_state(["config", "set", "state", &shown(&other)])
        .judging(&live)
        .status(1)
        .stderr(refusal(&other))
        .file_unchanged()
        .run();
    let default = env.home.join(".local/state/atc/jobs.json");
    env.atc_default_state(["config", "unset", "state"])
        .judging(&live)
        .status(1)
        .stderr(refusal(&default))
        .file_unchanged()
        .run();
    assert_eq!(
        read_config(env).lines().last(),
        Some(format!("state = \"{}\"", shown(&live)).as_str()),
        "the config file as it was"
    );
    assert_eq!(fs::read(&live).unwrap(), before);
    assert!(!other.exists() && !default.exists());
    // The same file by another spelling moves nothing.
    env.atc_default_state([
        "config",
        "set",
        "state",
        &format!(
            "{}/../{}/jobs.json",
            shown(live.parent().unwrap()),
            live.parent()
                .unwrap()
                .file_name()
                .unwrap()
                .to_string_lossy()
        ),
    ])
    .judging(&live)
    .file_unchanged()
    .run();
    env.atc_default_state(["config", "set", "state", &shown(&live)])
        .judging(&live)
        .file_unchanged()
        .run();
    // --force sets it, and says what it leaves behind.
    env.atc_default_state(["config", "set", "state", &shown(&other), "--force"])
        .judging(&live)
        .stderr(format!(
            "atc: warning: {from} still watches 1 task ({TASK}), and the ticks read {to} now: nothing delivers its result (`atc --state {from} status` lists it)\n",
            from = shown(&live),
            to = shown(&other)
        ))
        .file_unchanged()
        .run();
    assert!(read_config(env).contains(&format!("state = \"{}\"\n", shown(&other))));
    // A file whose watches all ended is left without a word.
    env.atc_default_state(["config", "set", "state", &shown(&live)])
        .judging(&live)
        .file_unchanged()
        .run();
    env.atc(["cancel", TASK]).stdout_inspected().run();
    env.atc_default_state(["config", "unset", "state"])
        .judging(&live)
        .file_unchanged()
        .run();
    assert!(!read_config(env).contains("state ="));
}

/// `config unset`: the key leaves the file (the rest stays); an unknown key too (a typo
/// every command refuses must be removable); a key the file lacks is no error.
#[test]
fn config_unset_removes_a_key_and_mends_a_typo() {
    let env = TestEnv::new();
    write_config(
        &env,
        "max-age = \"3d\"\nmax_strikes = 5   # a typo\nkeep = \"9d\"\n",
    );
    let said = format!(
        "config file {}: unknown key \"max_strikes\" (did you mean \"max-strikes\"?): fix the key or remove it (`atc config unset max_strikes`); `atc config show` lists the keys",
        config_path(&env).display()
    );
    env.atc(["tick"])
        .status(78)
        .stderr(format!("atc: {said}\n"))
        .no_file()
        .run();
    // `status` shows the jobs past a tick knob's typo, and says it (issue 36).
    env.atc(["status"])
        .stdout(no_file_yet(&env))
        .stderr(format!("atc: warning: {said}. Every atc tick refuses that file until it is fixed: nothing is polled or posted meanwhile\n"))
        .no_file()
        .run();
    // (The server is never there: its check fails too.)
    let config_check = |env: &TestEnv, failed: usize| {
        let doctor = env
            .atc(["--json", "doctor", "--base-url", NOWHERE])
            .status(1)
            .stderr(format!("atc: {failed} of 10 checks failed\n"))
            .no_file()
            .json();
        doctor["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["check"] == "config")
            .unwrap()
            .clone()
    };
    // `doctor` marks it, in the same words (issue 36).
    let config = config_check(&env, 2);
    assert_eq!(config["ok"], false, "{config}");
    let stated = said
        .strip_prefix(&format!("config file {}: ", config_path(&env).display()))
        .unwrap();
    assert_eq!(
        config["detail"],
        format!(
            "{} (from XDG_CONFIG_HOME): every atc tick refuses it (a watch is still recorded): {stated}",
            config_path(&env).display()
        ),
        "{config}"
    );
    // An edit of another key is saved, and says at once that the typo is still there.
    env.atc(["config", "set", "keep", "8d"])
        .stderr(format!("atc: note: saved, but {said}\n"))
        .no_file()
        .run();
    env.atc(["config", "unset", "max_strikes"]).no_file().run();
    assert_eq!(read_config(&env), "max-age = \"3d\"\nkeep = \"8d\"\n");
    env.atc(["status"])
        .stdout(no_file_yet(&env))
        .no_file()
        .run();
    let config = config_check(&env, 1);
    assert_eq!(config["ok"], true, "{config}");
    env.atc(["config", "unset", "keep"]).no_file().run();
    env.atc(["config", "unset", "keep"]).no_file().run();
    assert_eq!(read_config(&env), "max-age = \"3d\"\n");
    env.atc(["config", "unset", "colour"])
        .status(2)
        .stderr("atc: unknown key \"colour\" (the keys: state, base-url, max-age, busy-deadline, busy-retry, keep, max-strikes, follow-up-depth, poll-ceiling, concurrency, http-timeout, turn-timeout, no-batch, auto-watch)\n")
        .no_file()
        .run();
}

/// With `-v`, `config set` and `config unset` say what they did to which file, and an
/// unset of a key the file lacks says so; without it they are silent (above).
#[test]
fn config_edits_say_what_they_did_with_verbose() {
    let env = TestEnv::new();
    let path = config_path(&env);
    env.atc(["config", "set", "keep", "3d", "-v"])
        .stderr(format!("config: keep = 3d in {}\n", path.display()))
        .no_file()
        .run();
    env.atc(["config", "unset", "keep", "-v"])
        .stderr(format!("config: keep removed from {}\n", path.display()))
        .no_file()
        .run();
    env.atc(["config", "unset", "keep", "-v"])
        .stderr(format!("config: keep was not set in {}\n", path.display()))
        .no_file()
        .run();
    assert_eq!(read_config(&env), "");
}

/// The plugin's word that a parent read a result itself (`parent-read`) is heard past a
/// tick knob's typo, as a watch is: refused, the result would be posted after the fix all
/// the same (issue 36).
#[test]
fn a_parent_read_is_recorded_past_a_tick_knobs_typo() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    write_config(&s.env, "kep = \"3d\"\n");
    let job_id = s.job(TASK)["job_id"].clone();
    s.atc(["--json", "parent-read", TASK, "--session", "s-77"])
        .stdout(format!(
            "{}\n",
            serde_json::to_string_pretty(&json!({"tasks": [
                {"task_id": TASK, "outcome": "read_by_parent", "status": "skipped", "job_id": job_id}
            ]}))
            .unwrap()
        ))
        .file(|file| {
            let job = support::atc::job_of(file, TASK);
            assert_eq!(job["status"], "skipped", "{job}");
            assert!(job["read_by_parent_at"].is_string(), "{job}");
        })
        .run();
    s.tick(&[])
        .status(78)
        .stderr_inspected()
        .file_unchanged()
        .run();
    write_config(&s.env, "keep = \"3d\"\n");
    s.tick(&[]).run();
    assert_eq!((s.polls(TASK), s.posts().len()), (0, 0), "polled or posted");
    assert_eq!(s.status(TASK), "skipped");
}

/// A config file no command can use is refused by every command that reads it, in one
/// line naming the file, the key and what to do (exit 78), and nothing else happens: the
/// job file is untouched, no request is made.
#[test]
fn a_bad_config_file_is_refused_by_every_command_naming_the_file_and_the_key() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    let file = config_path(&s.env).display().to_string();
    let cases = [
        (
            "maxage = \"3d\"\n",
            format!(
                "config file {file}: unknown key \"maxage\" (did you mean \"max-age\"?): fix the key or remove it (`atc config unset maxage`); `atc config show` lists the keys"
            ),
        ),
        (
            "max-age = 3\n",
            format!(
                "config file {file}: max-age = 3: is an integer, and it must be a string holding a duration (\"30s\", \"5m\", \"24h\", \"3d\"); fix it (`atc config set max-age VALUE` checks a value before writing it)"
            ),
        ),
        (
            "max-age = \"soon\"\n",
            format!(
                "config file {file}: max-age = \"soon\": expected number at 0 (write durations like 30s, 5m, 24h, 7d); fix it (`atc config set max-age VALUE` checks a value before writing it)"
            ),
        ),
        (
            "concurrency = 1000\n",
            format!(
                "config file {file}: concurrency = 1000: 1000 is not from 1 to 256; fix it (`atc config set concurrency VALUE` checks a value before writing it)"
            ),
        ),
        (
            "no-batch = \"yes\"\n",
            format!(
                "config file {file}: no-batch = \"yes\": is a string, and it must be true or false (no quotes); fix it (`atc config set no-batch VALUE` checks a value before writing it)"
            ),
        ),
        (
            "state = \"jobs.json\"\n",
            format!(
                "config file {file}: state = \"jobs.json\": \"jobs.json\" is a relative path: write it absolute (or from ~/), since the timer, the plugin's kicks and your shell each run in another directory; fix it (`atc config set state VALUE` checks a value before writing it)"
            ),
        ),
        (
            "[tick]\nmax-age = \"3d\"\n",
            format!(
                "config file {file}: [tick] is a table, and atc's config file has none: write its keys at the top of the file, before any [table] (max-age = …)"
            ),
        ),
        (
            "max-age = \"3d\n",
            format!(
                "config file {file}: line 1, column 14 (key max-age): invalid basic string, expected `\"`: fix the file (TOML: one `key = value` per line, `max-age = \"3d\"`)"
            ),
        ),
        (
            // Found by hand: "line 6, column 1: duplicate key" named no key.
            "keep = \"3d\"\nmax-age = \"2d\"\nkeep = 3\n",
            format!(
                "config file {file}: line 3, column 1 (key keep): duplicate key: fix the file (TOML: one `key = value` per line, `max-age = \"3d\"`)"
            ),
        ),
    ];
    for (i, (text, said)) in cases.iter().enumerate() {
        write_config(&s.env, text);
        // Issue 36 (M2): a watch is recorded whatever is wrong with a key it does not read
        // (it says so); only a file that is not TOML, or a wrong `state`, refuses it.
        let task = format!("task-0000000000{i:02}");
        let not_toml = said.contains(": line ");
        if text.starts_with("state") || not_toml {
            s.atc(["watch", &task, "--session", "s-77"])
                .status(78)
                .stderr(format!("atc: {said}\n"))
                .file_unchanged()
                .run();
        } else {
            let owned = task.clone();
            s.atc(["watch", &task, "--session", "s-77", "--no-task-check"])
                .stdout_inspected()
                .stderr_contains(format!(
                    "atc: warning: {said}. The watch is recorded all the same; every atc tick refuses that file until it is fixed\n"
                ))
                .file(move |file| {
                    assert!(
                        file["jobs"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|j| j["task_id"] == owned.as_str()),
                        "{file}"
                    );
                })
                .run();
        }
        // `status` reads past what a watch reads past, and says it (issue 36; `doctor`
        // marks it: config_unset_removes_a_key_and_mends_a_typo).
        let read_past = !(text.starts_with("state") || not_toml);
        if read_past {
            s.atc(["status"])
                .stdout_inspected()
                .stderr(format!("atc: warning: {said}. Every atc tick refuses that file until it is fixed: nothing is polled or posted meanwhile\n"))
                .file_unchanged()
                .run();
        }
        // `config show` reads past any wrong line (it is how a person sees the file the
        // ticks refuse), the row of a known key marked; `config get` of that key refuses.
        // A file that is not TOML is refused: none of its lines can be told.
        let warned = format!(
            "atc: warning: {said}. Every atc tick refuses that file until it is fixed: nothing is polled or posted meanwhile\n"
        );
        let known = ["max-age", "concurrency", "no-batch", "state"]
            .into_iter()
            .find(|key| text.starts_with(&format!("{key} =")));
        if !not_toml {
            let shown = s
                .atc(["config", "show"])
                .stdout_inspected()
                .stderr(warned.clone())
                .file_unchanged()
                .run();
            let refused: Vec<String> = support::atc::stdout(&shown)
                .lines()
                .filter(|l| l.ends_with(" (the file's line is refused: see below)"))
                .map(|l| l.split_whitespace().next().unwrap().to_owned())
                .collect();
            assert_eq!(refused, Vec::from_iter(known.map(str::to_owned)), "{text}");
            let shown = s
                .atc(["--json", "config", "show"])
                .stdout_inspected()
                .stderr(warned.clone())
                .file_unchanged()
                .run();
            let json: serde_json::Value =
                serde_json::from_str(&support::atc::stdout(&shown)).unwrap();
            assert_eq!(json["config_skipped"], serde_json::json!([said]), "{text}");
            if let Some(key) = known {
                s.atc(["config", "get", key])
                    .status(78)
                    .stderr(format!("atc: {said}\n"))
                    .file_unchanged()
                    .run();
            }
            s.atc(["config", "get", "http-timeout"])
                .stdout("30s\n")
                .stderr(warned)
                .file_unchanged()
                .run();
        }
        for args in [
            vec!["status"],
            vec!["tick", "--kicked"],
            vec!["tick", "--max-age", "3d"],
            vec!["cancel", TASK],
            vec!["doctor"],
            vec!["config", "show"],
        ]
        .into_iter()
        .filter(|args| !read_past || !matches!(args[0], "status" | "doctor"))
        .filter(|args| not_toml || args[0] != "config")
        {
            s.atc(args.clone())
                .status(78)
                .stderr(format!("atc: {said}\n"))
                .file_unchanged()
                .run();
        }
    }
    // Nothing was asked of the server by a refused command.
    assert_eq!(s.polls(TASK), 0);
    // What needs no setting still works, and `config` can mend the file.
    s.atc(["generate", "man", "tick"])
        .stdout_inspected()
        .file_unchanged()
        .run();
    s.atc(["config", "path"])
        .stdout(format!("{file}\n"))
        .file_unchanged()
        .run();

    // Writable by others: refused, never read.
    write_config(&s.env, "max-age = \"3d\"\n");
    fs::set_permissions(config_path(&s.env), fs::Permissions::from_mode(0o666)).unwrap();
    s.atc(["status"])
        .status(78)
        .stderr(format!("atc: config file {file}: is writable by others (mode 666): whoever can write it decides where your tokens go; `chmod 600 {file}`\n"))
        .file_unchanged()
        .run();
    // Nor edited: `config set` does not write over a file it cannot trust.
    s.atc(["config", "set", "keep", "2d"])
        .status(78)
        .stderr(format!("atc: config file {file}: is writable by others (mode 666): whoever can write it decides where your tokens go; `chmod 600 {file}`\n"))
        .file_unchanged()
        .run();
    assert_eq!(read_config(&s.env), "max-age = \"3d\"\n");
    assert_eq!(mode(&config_path(&s.env)), 0o666);
    fs::set_permissions(config_path(&s.env), fs::Permissions::from_mode(0o644)).unwrap();
    s.atc(["status"]).stdout_inspected().file_unchanged().run();

    // ATC_CONFIG naming a file that is not there is a mistake, not a default.
    let missing = s.env.path("nowhere/atc.toml");
    s.atc(["status"])
        .env("ATC_CONFIG", &missing)
        .status(78)
        .stderr(format!("atc: config file {}: does not exist, and ATC_CONFIG names it: create it (`atc config set KEY VALUE` does) or unset ATC_CONFIG\n", missing.display()))
        .file_unchanged()
        .run();
    s.atc(["config", "set", "max-age", "2d"])
        .env("ATC_CONFIG", &missing)
        .file_unchanged()
        .run();
    assert_eq!(
        fs::read_to_string(&missing).unwrap().lines().last(),
        Some("max-age = \"2d\"")
    );
    s.atc(["status"])
        .env("ATC_CONFIG", &missing)
        .stdout_inspected()
        .file_unchanged()
        .run();
}

/// The timer units run bare `atc tick` whatever the settings: a job file named in the
/// config file needs nothing in them; a config file a timer would not find by itself
/// (`ATC_CONFIG`) is named in them; a job file from `ATC_STATE` is named, with a note that
/// the plugin's kicks do not see it.
#[test]
fn timer_units_carry_no_tick_flags_and_name_only_what_a_timer_would_miss() {
    let env = TestEnv::new();
    let state = env.path("kept/jobs.json");
    write_config(
        &env,
        &format!(
            "state = \"{}\"\nmax-age = \"3d\"\nkeep = \"30d\"\n",
            state.display()
        ),
    );
    let out = env
        .atc_default_state(["timer", "print", "systemd", "--unit", "service"])
        .stdout_inspected()
        .judging(&state)
        .no_file()
        .run();
    let unit = stdout(&out);
    assert!(unit.contains(" tick\n") && !unit.contains("--"), "{unit}");
    assert!(
        !unit.contains("Environment="),
        "the config file says it all: {unit}"
    );

    let named = env.path("elsewhere/atc.toml");
    write_private(&named, b"max-age = \"3d\"\n");
    for (kind, line) in [
        (
            "systemd",
            format!("Environment=ATC_CONFIG={}\n", named.display()),
        ),
        ("cron", format!("ATC_CONFIG={} ", named.display())),
        (
            "launchd",
            format!(
                "<key>ATC_CONFIG</key>\n        <string>{}</string>",
                named.display()
            ),
        ),
    ] {
        let out = env
            .atc_default_state(["timer", "print", kind])
            .env("ATC_CONFIG", &named)
            .stdout_inspected()
            .no_file()
            .run();
        let text = stdout(&out);
        assert!(text.contains(&line), "{kind}: no {line:?} in {text}");
        assert!(
            !text.contains("--max-age") && !text.contains("ATC_STATE"),
            "{text}"
        );
    }
    let out = env
        .atc(["timer", "print", "cron"])
        .stdout_inspected()
        .stderr_inspected()
        .no_file()
        .run();
    assert!(stdout(&out).contains(&format!("ATC_STATE={} ", env.state.display())));
    assert!(
        stderr(&out).contains("`atc config set state"),
        "{}",
        stderr(&out)
    );
}

/// The examples in examples/ are the units `atc timer print` prints: no tick flags.
#[test]
fn the_example_units_run_bare_atc_tick() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    for file in ["systemd/atc-tick.service", "cron/atc.crontab"] {
        let text = fs::read_to_string(root.join(file)).unwrap();
        let runs: Vec<&str> = text.lines().filter(|l| l.contains("/atc tick")).collect();
        assert!(!runs.is_empty(), "{file}");
        for line in runs {
            assert!(line.ends_with("/atc tick"), "{file}: {line}");
        }
    }
}

/// `atc doctor` says which config file this shell reads, and warns when the timer's unit
/// or env file would tick with other settings (another job file, an `ATC_MAX_AGE` that
/// beats the file there, an `ATC_KEEP` that beats it here).
#[test]
fn doctor_names_the_config_file_and_warns_of_a_timer_with_other_settings() {
    let s = Scene::new();
    s.healthy();
    write_config(&s.env, "max-age = \"3d\"\nkeep = \"30d\"\n");
    let out = s
        .atc(["doctor"])
        .stdout_inspected()
        .stderr_inspected()
        .run();
    let said = stdout(&out);
    assert!(
        said.lines().any(|l| l
            == format!(
                "✓ config: {} (from XDG_CONFIG_HOME) sets 2 keys (`atc config show` lists every setting and its source)",
                config_path(&s.env).display()
            )),
        "{said}"
    );
    assert!(
        !said.contains("timer settings"),
        "no timer unit, no env file: {said}"
    );

    let env_file = s.env.home.join(".config/atc/env");
    write_private(
        &env_file,
        b"QWENPAW_RUNTIME_INTERNAL_TOKEN=tok-x\nATC_MAX_AGE=1d\n",
    );
    let out = s
        .atc(["doctor"])
        .env("ATC_KEEP", "2d")
        .stdout_inspected()
        .stderr_inspected()
        .status(1)
        .never_shows("tok-x")
        .run();
    let said = stdout(&out);
    let bad = said
        .lines()
        .position(|l| l.starts_with("✗ timer settings: "))
        .unwrap_or_else(|| panic!("{said}"));
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(
        lines[bad],
        format!(
            "✗ timer settings: the timer ({}) does not tick with this shell's settings: its ticks use the job file {} (from the default), this shell's is {} (from ATC_STATE): watches made here are never ticked there; ATC_MAX_AGE=1d there, unset here (it beats the config file's max-age); unset there, ATC_KEEP=2d here (it beats the config file's keep)",
            env_file.display(),
            s.env.home.join(".local/state/atc/jobs.json").display(),
            s.env.state.display()
        )
    );
    assert_eq!(
        lines[bad + 1],
        format!(
            "  → use one job file: `atc config set state {}`, and no ATC_STATE in the timer's environment; set max-age in the config file (`atc config set max-age VALUE`) and ATC_MAX_AGE in no environment; set keep in the config file (`atc config set keep VALUE`) and ATC_KEEP in no environment; then restart it",
            s.env.state.display()
        )
    );
}

/// `atc doctor` reads the environment of the QwenPaw server whose kicks run `atc tick`
/// (`/proc/<pid>/environ` of its `qwenpaw app` process) and warns when they would tick
/// another job file or read another config file than this shell.
#[cfg(target_os = "linux")]
#[test]
fn doctor_warns_when_the_servers_kicks_use_another_job_file_or_config() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.healthy();
    s.server
        .answer("GET", "/api/plugins/atc/status", 200, r#"{"loaded": true}"#);
    s.server.on(
        "GET",
        "/api/frontend_plugin",
        vec![Reply::json(
            200,
            &format!("[{}]", bodies::FRONTEND_PLUGIN_ATC),
        )],
    );
    // atc's plugin installed in a QwenPaw working dir (doctor looks at the server only then).
    let wd = s.env.path("qwenpaw");
    fs::create_dir_all(wd.join("workspaces/default")).unwrap();
    fs::write(
        wd.join("config.json"),
        json!({"agents": {"active_agent": "default", "profiles": {"default": {"id": "default", "workspace_dir": wd.join("workspaces/default")}}}}).to_string(),
    )
    .unwrap();
    fs::write(
        wd.join("workspaces/default/agent.json"),
        json!({"id": "default", "tools": {"builtin_tools": {}}}).to_string(),
    )
    .unwrap();
    s.env
        .atc(["qwenpaw", "install", "--working-dir", wd.to_str().unwrap()])
        .env_remove("ATC_BASE_URL")
        .stdout_inspected()
        .run();
    // A `qwenpaw app` process serving the fake's port, with an environment of its own.
    let bin = s.env.path("venv/bin");
    fs::create_dir_all(&bin).unwrap();
    fs::write(bin.join("qwenpaw"), "import time\ntime.sleep(60)\n").unwrap();
    let port = s
        .server
        .url()
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_owned();
    // The server runs with `env` (and PATH) alone; returns its pid and what doctor said.
    let doctor_beside = |env: &[(&str, &Path)]| {
        let mut server = support::spawn_seen(
            std::process::Command::new("python3")
                .arg(bin.join("qwenpaw"))
                .args(["app", "--port", &port])
                .env_clear()
                .env("PATH", "/usr/bin:/bin")
                .envs(env.iter().copied()),
        );
        let out = s
            .atc(["doctor"])
            .env("QWENPAW_WORKING_DIR", &wd)
            .stdout_inspected()
            .stderr_inspected()
            .status(1)
            .run();
        let _ = server.kill();
        let _ = server.wait();
        (server.id(), stdout(&out))
    };
    let other_state = s.env.path("server/jobs.json");
    let other_config = s.env.path("server/config.toml");
    write_private(&other_config, b"keep = \"1d\"\n");
    let (pid, said) = doctor_beside(&[
        ("HOME", &s.env.home),
        ("ATC_STATE", &other_state),
        ("ATC_CONFIG", &other_config),
    ]);
    let line = said
        .lines()
        .find(|l| l.starts_with("✗ server settings: "))
        .unwrap_or_else(|| panic!("{said}"));
    assert_eq!(
        line,
        format!(
            "✗ server settings: the QwenPaw server (pid {}) does not tick with this shell's settings: its settings come from {} (ATC_CONFIG: keep = 1d), this shell's from {} (no such file: the defaults); its ticks use the job file {} (from ATC_STATE), this shell's is {} (from ATC_STATE): watches made here are never ticked there",
            pid,
            other_config.display(),
            config_path(&s.env).display(),
            other_state.display(),
            s.env.state.display()
        )
    );

    // A server with another HOME but the same job file, and no config file at either
    // place: nothing differs that a tick would notice.
    let other_home = s.env.path("server-home");
    fs::create_dir_all(&other_home).unwrap();
    let (pid, said) = doctor_beside(&[("HOME", &other_home), ("ATC_STATE", &s.env.state)]);
    assert!(
        said.lines().any(|l| l == format!("✓ server settings: the kicks of the QwenPaw server (pid {}) tick this job file with this shell's settings (the same config file values, no setting variables of their own)", pid)),
        "{said}"
    );
}

/// The guide's full example is a config file atc takes, every key from the file.
#[test]
fn the_guides_example_is_a_config_file_atc_takes() {
    let guide = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("GUIDE.md")).unwrap();
    let section = &guide[guide.find("### The config file").expect("the section")..];
    let start = section.find("```toml\n").expect("a toml block") + "```toml\n".len();
    let example = &section[start..start + section[start..].find("```").unwrap()];
    let env = TestEnv::new();
    write_config(&env, example);
    let out = env
        .atc_default_state(["config", "show", "--json"])
        .env_remove("ATC_BASE_URL")
        .stdout_inspected()
        .judging(&env.home.join(".local/state/atc/jobs.json"))
        .no_file()
        .run();
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    for (key, setting) in doc["settings"].as_object().unwrap() {
        assert_eq!(setting["source"], "file", "{key}: {setting}");
    }
    assert_eq!(
        doc["settings"]["state"]["value"],
        json!(env.home.join(".local/state/atc/jobs.json"))
    );
    assert_eq!(doc["settings"]["max-age"]["value"], "3d");
    assert_eq!(doc["settings"]["max-strikes"]["value"], 180);
}

/// Every file below `dir`, for "nothing was created".
fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut left = vec![dir.to_path_buf()];
    while let Some(next) = left.pop() {
        for entry in fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                left.push(path.clone());
            }
            found.push(path);
        }
    }
    found.sort();
    found
}

/// `atc paths`: where every command finds its files in this environment (the plugin reads
/// it instead of working them out), the job file from `ATC_STATE`, else `state` in the
/// config file, else the default; it creates nothing.
#[test]
fn paths_names_the_files_every_command_uses_and_creates_nothing() {
    let env = TestEnv::new();
    let before = tree(env.dir.path());
    let jobs = env.state.display().to_string();
    let config = config_path(&env);
    env.atc(["paths"])
        .stdout(format!(
            "job_file: {jobs}\njob_dir: {}\nconfig_file: {}\nconfig_file_exists: false\n\
             lock: {jobs}.lock\ntick_lock: {jobs}.tick.lock\nmarks: {jobs}.tick.again\n\
             cadence: {jobs}.cadence\nlog: {jobs}.log\nauto_watch: true\n",
            env.state.parent().unwrap().display(),
            config.display(),
        ))
        .no_file()
        .run();
    let doc = env
        .atc(["paths", "--json"])
        .stdout_inspected()
        .no_file()
        .json();
    assert_eq!(
        doc,
        json!({
            "job_file": jobs,
            "job_dir": env.state.parent().unwrap(),
            "config_file": config,
            "config_file_exists": false,
            "lock": format!("{jobs}.lock"),
            "tick_lock": format!("{jobs}.tick.lock"),
            "marks": format!("{jobs}.tick.again"),
            "cadence": format!("{jobs}.cadence"),
            "log": format!("{jobs}.log"),
            "config_skipped": [],
            "auto_watch": true,
        })
    );
    assert_eq!(tree(env.dir.path()), before, "atc paths created a file");
    // Whether automatic watches watch here: atc's plugin tells the model so only then.
    let off = env
        .atc(["paths", "--json"])
        .env("ATC_AUTO_WATCH", "0")
        .stdout_inspected()
        .no_file()
        .json();
    assert_eq!(off["auto_watch"], json!(false), "{off}");

    // The config file's `state`, when ATC_STATE is not set; the default without either.
    let kept = env.path("kept/jobs.json");
    write_config(&env, &format!("state = {:?}\n", kept.display().to_string()));
    let doc = env
        .atc_default_state(["paths", "--json"])
        .stdout_inspected()
        .no_file()
        .json();
    assert_eq!(doc["job_file"], json!(kept));
    assert_eq!(doc["config_file_exists"], json!(true));
    fs::remove_file(config_path(&env)).unwrap();
    let default = env.home.join(".local/state/atc/jobs.json");
    let doc = env
        .atc_default_state(["paths", "--json"])
        .stdout_inspected()
        .no_file()
        .json();
    assert_eq!(doc["job_file"], json!(default));
    assert_eq!(
        doc["tick_lock"],
        json!(format!("{}.tick.lock", default.display()))
    );
    assert!(!kept.parent().unwrap().exists() && !default.parent().unwrap().exists());
}

/// Issue 36 M2: a config typo in a tick's knob does not hide where atc keeps its files
/// (the plugin asks `atc paths` before every automatic watch; refused, it recorded
/// nothing): the files are answered, the typo named; a tick still refuses the file; a
/// `state` that cannot be read is refused (which job file it means is unknown).
#[test]
fn paths_answers_past_a_typo_in_a_ticks_knob_and_names_it() {
    let env = TestEnv::new();
    write_config(&env, "busy-deadlne = \"10m\"\n");
    let doc = env
        .atc(["paths", "--json"])
        .stdout_inspected()
        .no_file()
        .json();
    assert_eq!(doc["job_file"], json!(env.state));
    let skipped = doc["config_skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{doc}");
    assert!(
        skipped[0]
            .as_str()
            .unwrap()
            .contains("unknown key \"busy-deadlne\" (did you mean \"busy-deadline\"?)"),
        "{doc}"
    );
    env.atc(["paths"])
        .stdout_contains("\nconfig_skipped: config file ")
        .no_file()
        .run();
    env.atc(["tick"])
        .status(78)
        .stderr_contains("unknown key \"busy-deadlne\"")
        .no_file()
        .run();
    write_config(&env, "state = 3\n");
    env.atc_default_state(["paths", "--json"])
        .status(78)
        .stderr_contains("state = 3: is an integer")
        .no_file()
        .run();
}

/// Issue 36 (L6): a zero timeout is refused wherever it is given (it failed every request
/// until the watches were abandoned); nothing is written.
#[test]
fn a_zero_timeout_is_refused_from_the_flag_and_the_environment() {
    let env = TestEnv::new();
    env.atc(["tick", "--http-timeout", "0s"])
        .status(2)
        .stderr_contains("invalid value '0s' for '--http-timeout <D>': 0s is no timeout: every request would fail at once (give one like 30s)")
        .no_file()
        .run();
    env.atc(["tick", "--turn-timeout", "0s"])
        .status(2)
        .stderr_contains("invalid value '0s' for '--turn-timeout <D>'")
        .no_file()
        .run();
    env.atc(["tick"])
        .env("ATC_HTTP_TIMEOUT", "0s")
        .status(2)
        .stderr("atc: ATC_HTTP_TIMEOUT: 0s is no timeout: every request would fail at once (give one like 30s)\n")
        .no_file()
        .run();
}

/// Issue 36 (L2): `atc config set` of different keys at once keeps every key (each edit
/// reads, changes and writes the file under its lock; they lost each other's keys, all
/// exiting 0).
#[test]
fn config_sets_of_different_keys_at_once_keep_every_key() {
    let env = TestEnv::new();
    let sets = [
        ("max-age", "3d"),
        ("keep", "30d"),
        ("busy-deadline", "20m"),
        ("busy-retry", "30s"),
        ("max-strikes", "50"),
        ("concurrency", "4"),
        ("http-timeout", "20s"),
        ("turn-timeout", "2h"),
        ("no-batch", "true"),
        ("auto-watch", "false"),
    ];
    let children: Vec<_> = sets
        .iter()
        .map(|(key, value)| {
            env.std_cmd()
                .args(["config", "set", key, value])
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let text = read_config(&env);
    for (key, _) in sets {
        assert!(
            text.lines().any(|l| l.starts_with(&format!("{key} = "))),
            "{key} lost: {text}"
        );
    }
}

/// What `atc status` says when the job file it reads does not exist.
fn no_file_yet(env: &TestEnv) -> String {
    format!(
        "No watches: no job file at {} yet (`atc watch` starts it).\n",
        env.state.display()
    )
}
