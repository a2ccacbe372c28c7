//! The settings' own tests: precedence, sources, the messages of bad values.

use super::*;
use crate::job::Origin;
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

struct MapEnv(HashMap<&'static str, String>, Option<PathBuf>);

impl Environment for MapEnv {
    fn var(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }
    fn home(&self) -> Option<PathBuf> {
        self.1.clone()
    }
}

fn env(vars: &[(&'static str, &str)], home: Option<&Path>) -> MapEnv {
    MapEnv(
        vars.iter().map(|(k, v)| (*k, (*v).to_owned())).collect(),
        home.map(Path::to_path_buf),
    )
}

fn resolve_args(args: &[&str], env: &MapEnv) -> Result<Settings, Failure> {
    let cli = crate::cli::parse_from(args.iter().copied()).expect("valid arguments");
    resolve(cli, env)
}

/// The config file at `path`, loaded as a tick loads it (`ATC_CONFIG` names it).
fn config_at(path: &Path) -> Result<ConfigFile, Failure> {
    file::load(&env(&[("ATC_CONFIG", path.to_str().unwrap())], None), true)
}

fn watch_of(settings: Settings) -> Watch {
    match settings.action {
        Action::Watch(watch) => *watch,
        other => panic!("not a watch: {other:?}"),
    }
}

#[test]
fn normalises_base_urls() {
    for (raw, want) in [
        ("http://127.0.0.1:8088", "http://127.0.0.1:8088/api"),
        (" http://h:1/ ", "http://h:1/api"),
        ("http://h:1/api/", "http://h:1/api"),
        ("HTTPS://h/prefix", "https://h/prefix/api"),
        ("http://[::1]:8088", "http://[::1]:8088/api"),
    ] {
        assert_eq!(crate::validate::base_url(raw).unwrap(), want);
    }
    for raw in [
        "ftp://h",
        "h:8088",
        "http://user:pw@h",
        "http://tok@h/api",
        "http://",
        "http://h/?x=1",
        "file:///etc",
    ] {
        assert!(crate::validate::base_url(raw).is_err(), "{raw}");
    }
}

#[test]
fn base_url_precedence_and_sources() {
    let home = tempfile::tempdir().unwrap();
    let work = home.path().join(".qwenpaw");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(
        work.join("config.json"),
        r#"{"last_api": {"host": "0.0.0.0", "port": 9001}}"#,
    )
    .unwrap();
    let managed = [
        ("QWENPAW_RUNTIME_API_URL", "http://runtime:7000"),
        ("QWENPAW_RUNTIME_ID", "r1"),
        ("QWENPAW_RUNTIME_INTERNAL_TOKEN", "secret"),
    ];
    let setting = |value: &str, source| Setting {
        value: value.to_owned(),
        source,
    };

    let mut vars = managed.to_vec();
    vars.push(("ATC_BASE_URL", "http://env:2"));
    let e = env(&vars, Some(home.path()));
    assert_eq!(
        base_url(Some("http://flag:1"), &e, &ConfigFile::default()).unwrap(),
        setting("http://flag:1/api", Source::Flag("--base-url"))
    );
    assert_eq!(
        base_url(None, &e, &ConfigFile::default()).unwrap(),
        setting("http://env:2/api", Source::Env("ATC_BASE_URL"))
    );
    let e = env(&managed, Some(home.path()));
    assert_eq!(
        base_url(None, &e, &ConfigFile::default()).unwrap(),
        setting("http://runtime:7000/api", Source::ManagedRuntime)
    );
    // The managed URL alone is not enough: QwenPaw also wants the id and the token.
    let e = env(&managed[..2], Some(home.path()));
    assert_eq!(
        base_url(None, &e, &ConfigFile::default()).unwrap(),
        setting(
            "http://127.0.0.1:9001/api",
            Source::QwenPawConfig(work.join("config.json"))
        )
    );
    // base-url in atc's config file: below the environment (the managed runtime
    // included), above QwenPaw's last_api.
    let config = home.path().join(".config/atc/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "base-url = \"http://file:3\"\n").unwrap();
    let file = super::file::load(&e, true).unwrap();
    assert_eq!(
        base_url(None, &e, &file).unwrap(),
        setting(
            "http://file:3/api",
            Source::File {
                path: config.clone(),
                key: "base-url"
            }
        )
    );
    let e = env(&managed, Some(home.path()));
    assert_eq!(
        base_url(None, &e, &file).unwrap().source,
        Source::ManagedRuntime
    );
    std::fs::remove_file(&config).unwrap();
    // ~/.copaw wins when it exists.
    std::fs::create_dir_all(home.path().join(".copaw")).unwrap();
    let e = env(&[], Some(home.path()));
    assert_eq!(
        base_url(None, &e, &ConfigFile::default()).unwrap(),
        setting("http://127.0.0.1:8088/api", Source::Default)
    );
    let other = home.path().join("elsewhere");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(
        other.join("config.json"),
        r#"{"last_api": {"host": "127.0.0.2", "port": 9002}}"#,
    )
    .unwrap();
    let e = env(
        &[("QWENPAW_WORKING_DIR", other.to_str().unwrap())],
        Some(home.path()),
    );
    assert_eq!(
        base_url(None, &e, &ConfigFile::default()).unwrap().value,
        "http://127.0.0.2:9002/api"
    );
    let e = env(&[], None);
    assert_eq!(
        base_url(None, &e, &ConfigFile::default()).unwrap().value,
        "http://127.0.0.1:8088/api"
    );
}

#[test]
fn errors_name_the_source_of_the_bad_value() {
    let e = env(&[("ATC_BASE_URL", "ftp://h")], None);
    let err = base_url(None, &e, &ConfigFile::default()).unwrap_err();
    assert_eq!(err.exit, Exit::Usage);
    assert!(err.message.starts_with("ATC_BASE_URL: base URL"), "{err}");
    let err = base_url(Some("h:1"), &e, &ConfigFile::default()).unwrap_err();
    assert!(err.message.starts_with("--base-url: "), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let e = env(&[("ATC_STATE", dir.path().to_str().unwrap())], None);
    let err = resolve_args(&["status"], &e).unwrap_err();
    assert!(err.message.starts_with("ATC_STATE \""), "{err}");
    let err = resolve_args(&["--state", dir.path().to_str().unwrap(), "status"], &e).unwrap_err();
    assert!(err.message.starts_with("--state \""), "{err}");

    let e = env(&[("ATC_USER_ID", " ")], None);
    let err = resolve_args(&["watch", "task-1", "--session", "s"], &e).unwrap_err();
    assert_eq!(
        err.message,
        "ATC_USER_ID must not be empty: give the value (an agent's prompt shows its session id, user id and channel), or leave it out"
    );
    // Found by hand: an empty --group was told to look in the agent's prompt.
    for (flag, said) in [
        (
            "--group",
            "--group must not be empty: give the value, or leave it out",
        ),
        (
            "--fork-branch",
            "--fork-branch must not be empty: give the value, or leave it out",
        ),
        (
            "--child-session",
            "--child-session must not be empty: give the value (the [SESSION: …] line submit_to_agent printed), or leave it out",
        ),
        (
            "--target-agent",
            "--target-agent must not be empty: give the value (the agent submit_to_agent ran the task on), or leave it out",
        ),
    ] {
        let args = ["watch", "task-1", "--session", "s", "--user", "u", flag, ""];
        assert_eq!(resolve_args(&args, &e).unwrap_err().message, said);
    }
    let err = resolve_args(&["watch", "task-1", "--session", "s\n"], &e).unwrap_err();
    assert!(
        err.message.starts_with("--session \"s\\n\" contains"),
        "{err}"
    );
}

#[test]
fn watch_settings_know_where_each_value_came_from() {
    let e = env(
        &[
            ("ATC_SESSION_ID", "env-session"),
            ("ATC_CHANNEL", "env-channel"),
        ],
        None,
    );
    let w = watch_of(
        resolve_args(
            &[
                "watch",
                "'task-1'",
                "--user",
                "alice",
                "--target-agent",
                "SE",
            ],
            &e,
        )
        .unwrap(),
    );
    assert_eq!(w.task_ids, ["task-1"]);
    assert_eq!(w.session.source, Source::Env("ATC_SESSION_ID"));
    assert_eq!(w.user.source, Source::Flag("--user"));
    assert_eq!(w.channel.value, "env-channel");
    assert_eq!(
        (w.agent.value.as_str(), &w.agent.source),
        ("default", &Source::Default)
    );
    assert_eq!(w.target().target_agent.as_deref(), Some("SE"));
    let same =
        watch_of(resolve_args(&["watch", "task-1", "--target-agent", "default"], &e).unwrap());
    assert_eq!(same.target().target_agent, None, "the asking agent itself");

    let none = env(&[], None);
    let err = resolve_args(&["watch", "task-1"], &none).unwrap_err();
    assert_eq!(err.exit, Exit::Usage);
    assert!(err.message.contains("ATC_SESSION_ID"), "{err}");
    let err = resolve_args(
        &["watch", "task-1", "--session", "s", "--channel", "ACP"],
        &none,
    )
    .unwrap_err();
    assert_eq!(err.exit, Exit::Refused);
}

#[test]
fn tick_knobs_default_as_documented() {
    let tick = match resolve_args(&["tick", "--busy-deadline", "3m"], &env(&[], None))
        .unwrap()
        .action
    {
        Action::Tick(tick) => tick,
        other => panic!("{other:?}"),
    };
    assert_eq!(tick.limits.busy_deadline, Duration::from_secs(180));
    assert_eq!(tick.limits.settle, tick.http_timeout);
    assert_eq!(tick.limits.max_strikes, defaults::MAX_STRIKES);
    assert_eq!(tick.concurrency, 8);
    assert_eq!(tick.http_timeout, Duration::from_secs(30));
}

#[test]
fn auth_debug_never_shows_tokens() {
    let auth = Auth::from_env(&env(&[("QWENPAW_RUNTIME_INTERNAL_TOKEN", "s3cr3t")], None)).unwrap();
    let shown = format!("{auth:?}");
    assert!(!shown.contains("s3cr3t"));
    assert!(shown.contains("<set>"));
}

fn tick_of(settings: Settings) -> Tick {
    match settings.action {
        Action::Tick(tick) => tick,
        other => panic!("not a tick: {other:?}"),
    }
}

/// Every tick knob at every layer: its flag beats its variable, which beats its key in
/// the config file, which beats the default.
#[test]
fn every_tick_knob_is_a_flag_a_variable_a_key_and_a_default_in_that_order() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join(".config/atc/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(
        &config,
        "concurrency = 3\nhttp-timeout = \"11s\"\nmax-strikes = 21\nmax-age = \"1d\"\nbusy-retry = \"31s\"\nbusy-deadline = \"1h\"\nkeep = \"8d\"\nturn-timeout = \"41m\"\nno-batch = true\n",
    )
    .unwrap();
    let vars = [
        ("ATC_CONCURRENCY", "4"),
        ("ATC_HTTP_TIMEOUT", "12s"),
        ("ATC_MAX_STRIKES", "22"),
        ("ATC_MAX_AGE", "2d"),
        ("ATC_BUSY_RETRY", "32s"),
        ("ATC_BUSY_DEADLINE", "2h"),
        ("ATC_KEEP", "9d"),
        ("ATC_TURN_TIMEOUT", "42m"),
        ("ATC_NO_BATCH", "false"),
    ];
    let flags = [
        "tick",
        "--concurrency",
        "5",
        "--http-timeout",
        "13s",
        "--max-strikes",
        "23",
        "--max-age",
        "3d",
        "--busy-retry",
        "33s",
        "--busy-deadline",
        "3h",
        "--keep",
        "10d",
        "--turn-timeout",
        "43m",
        "--no-batch",
    ];
    let s = Duration::from_secs;
    let shape = |t: &Tick| {
        (
            t.concurrency,
            t.http_timeout,
            t.limits.max_strikes,
            t.limits.max_age,
            t.limits.busy_retry,
            t.limits.busy_deadline,
            t.limits.keep,
            t.turn_timeout,
            t.batch,
            t.limits.settle,
        )
    };
    let with_file = env(&vars, Some(home.path()));
    let flagged = tick_of(resolve_args(&flags, &with_file).unwrap());
    assert_eq!(
        shape(&flagged),
        (
            5,
            s(13),
            23,
            s(3 * 86400),
            s(33),
            s(3 * 3600),
            s(10 * 86400),
            Some(s(43 * 60)),
            false,
            s(13)
        )
    );
    let from_env = tick_of(resolve_args(&["tick"], &with_file).unwrap());
    assert_eq!(
        shape(&from_env),
        (
            4,
            s(12),
            22,
            s(2 * 86400),
            s(32),
            s(2 * 3600),
            s(9 * 86400),
            Some(s(42 * 60)),
            true,
            s(12)
        )
    );
    let from_file = tick_of(resolve_args(&["tick"], &env(&[], Some(home.path()))).unwrap());
    assert_eq!(
        shape(&from_file),
        (
            3,
            s(11),
            21,
            s(86400),
            s(31),
            s(3600),
            s(8 * 86400),
            Some(s(41 * 60)),
            false,
            s(11)
        )
    );
    let defaults = tick_of(resolve_args(&["tick"], &env(&[], None)).unwrap());
    assert_eq!(
        shape(&defaults),
        (
            8,
            s(30),
            90,
            s(86400),
            s(20),
            s(6 * 3600),
            s(7 * 86400),
            None,
            true,
            s(30)
        )
    );
    // Every command that tidies the job file uses the same limits as the tick.
    for args in [&["cancel", "task-1"][..], &["redeliver", "task-1"]] {
        let limits = match resolve_args(args, &env(&[], Some(home.path())))
            .unwrap()
            .action
        {
            Action::Cancel(c) => c.limits,
            Action::Redeliver(r) => r.limits,
            other => panic!("{other:?}"),
        };
        assert_eq!(limits, from_file.limits, "{args:?}");
    }
    let watch = watch_of(
        resolve_args(
            &["watch", "task-1", "--session", "s"],
            &env(&[("ATC_KEEP", "9d")], Some(home.path())),
        )
        .unwrap(),
    );
    assert_eq!(watch.limits.keep, s(9 * 86400));
}

/// A bad value in a variable is refused naming the variable (exit 2); in the file, naming
/// the file and the key (exit 78).
#[test]
fn bad_knob_values_name_where_they_came_from() {
    let err = resolve_args(&["tick"], &env(&[("ATC_MAX_AGE", "soon")], None)).unwrap_err();
    assert_eq!(err.exit, Exit::Usage);
    assert!(
        err.message.starts_with("ATC_MAX_AGE: expected number"),
        "{err}"
    );
    let err = resolve_args(&["status"], &env(&[("ATC_NO_BATCH", "ture")], None));
    assert!(err.is_ok(), "status reads no tick knob");
    let err = resolve_args(&["tick"], &env(&[("ATC_NO_BATCH", "ture")], None)).unwrap_err();
    assert_eq!(
        err.message,
        "ATC_NO_BATCH: \"ture\" is neither true nor false (write true or false, 1 or 0)"
    );
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join(".config/atc/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "keep = \"7 parsecs\"\n").unwrap();
    let err = resolve_args(&["tick"], &env(&[], Some(home.path()))).unwrap_err();
    assert_eq!(err.exit, Exit::Config);
    assert!(
        err.message.starts_with(&format!(
            "config file {}: keep = \"7 parsecs\": ",
            config.display()
        )),
        "{err}"
    );
    // `status` shows the jobs past it, and carries the line to say (issue 36).
    match resolve_args(&["status"], &env(&[], Some(home.path())))
        .unwrap()
        .action
    {
        Action::Status(status) => {
            assert_eq!(status.config_skipped, std::slice::from_ref(&err.message))
        }
        other => panic!("{other:?}"),
    }
    // So does `config show`, and `config get` of another key; `get` of that key refuses.
    let config_of = |args: &[&str]| resolve_args(args, &env(&[], Some(home.path())));
    match config_of(&["config", "show"]).unwrap().action {
        Action::Config(config) => {
            assert_eq!(config.file.skipped, std::slice::from_ref(&err.message));
            assert_eq!(config.file.skipped_line("keep"), Some(&*err.message));
            assert_eq!(config.file.skipped_line("max-age"), None);
        }
        other => panic!("{other:?}"),
    }
    assert!(config_of(&["config", "get", "max-age"]).is_ok());
    let get = config_of(&["config", "get", "keep"]).unwrap_err();
    assert_eq!((get.exit, &get.message), (Exit::Config, &err.message));
    // A file ATC_CONFIG names beats the one in the config directory.
    let named = home.path().join("named.toml");
    std::fs::write(&named, "keep = \"2d\"\n").unwrap();
    let named_str = named.to_str().unwrap().to_owned();
    let e = MapEnv(
        [("ATC_CONFIG", named_str)].into_iter().collect(),
        Some(home.path().to_path_buf()),
    );
    let tick = tick_of(resolve_args(&["tick"], &e).unwrap());
    assert_eq!(tick.limits.keep, Duration::from_secs(2 * 86400));
}

/// `auto-watch`: on by default; the config file's `auto-watch = false` turns it off;
/// `ATC_AUTO_WATCH` beats the file; every watch carries it with its source.
#[test]
fn auto_watch_is_on_unless_the_config_file_or_atc_auto_watch_turns_it_off() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join(".config/atc/config.toml");
    let w = |vars: &[(&'static str, &str)]| {
        resolve_args(
            &["watch", "task-1", "--session", "s", "--origin", "auto"],
            &env(vars, Some(home.path())),
        )
    };
    let on = watch_of(w(&[]).unwrap());
    assert_eq!(
        (on.auto_watch.value, &on.auto_watch.source, on.origin),
        (true, &Source::Default, Origin::Auto)
    );
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "auto-watch = false\n").unwrap();
    let off = watch_of(w(&[]).unwrap()).auto_watch;
    assert_eq!(
        (off.value, off.source),
        (
            false,
            Source::File {
                path: config.clone(),
                key: "auto-watch"
            }
        )
    );
    for (raw, want) in [
        ("0", false),
        ("off", false),
        ("False", false),
        ("1", true),
        ("yes", true),
    ] {
        let got = watch_of(w(&[("ATC_AUTO_WATCH", raw)]).unwrap()).auto_watch;
        assert_eq!(
            (got.value, got.source),
            (want, Source::Env("ATC_AUTO_WATCH")),
            "{raw}"
        );
    }
    let err = w(&[("ATC_AUTO_WATCH", "sometimes")]).unwrap_err();
    assert_eq!(err.exit, Exit::Usage);
    assert_eq!(
        err.message,
        "ATC_AUTO_WATCH: \"sometimes\" is neither true nor false (write true or false, 1 or 0)"
    );
    let plain =
        watch_of(resolve_args(&["watch", "task-1", "--session", "s"], &env(&[], None)).unwrap());
    assert_eq!(plain.origin, Origin::Cli);
}

#[test]
fn parent_read_names_the_chat_that_read_the_tasks() {
    let e = env(&[("ATC_USER_ID", "carol")], None);
    let read = match resolve_args(
        &[
            "parent-read",
            "task-1",
            "'task-2'",
            "task-1",
            "--session",
            "s-1",
        ],
        &e,
    )
    .unwrap()
    .action
    {
        Action::ParentRead(read) => read,
        other => panic!("{other:?}"),
    };
    assert_eq!(read.task_ids, ["task-1", "task-2"]);
    assert_eq!(
        (
            read.agent.value.as_str(),
            read.session.value.as_str(),
            read.user.value.as_str(),
            read.channel.value.as_str()
        ),
        ("default", "s-1", "carol", "console")
    );
    let err = resolve_args(&["parent-read", "task-1"], &env(&[], None)).unwrap_err();
    assert_eq!(err.exit, Exit::Usage);
    assert!(err.message.contains("ATC_SESSION_ID"), "{err}");
    let err = resolve_args(&["parent-read", "task/1", "--session", "s"], &e).unwrap_err();
    assert_eq!(err.exit, Exit::Usage);
}

/// `atc config set` writes a path as the file will read it: one from `~/` under this
/// home, not under the directory this shell is in; an empty one is refused, not taken as
/// this directory.
#[test]
fn config_set_takes_a_path_from_home_and_refuses_an_empty_one() {
    let home = tempfile::tempdir().unwrap();
    let e = env(&[], Some(home.path()));
    let set = resolve_args(&["config", "set", "state", "~/jobs/mine.json"], &e).unwrap();
    let Action::Config(Config {
        what: ConfigAction::Set { value, .. },
        ..
    }) = set.action
    else {
        panic!("not a config set: {set:?}")
    };
    assert_eq!(value, keys::Value::Path(home.path().join("jobs/mine.json")));
    let err = resolve_args(&["config", "set", "state", ""], &e).unwrap_err();
    assert_eq!(err.exit, Exit::Usage);
    assert_eq!(err.message, "state \"\": is empty: name a file");
}

/// A config file atc cannot use is refused by what is wrong with it: a directory where
/// the file should be, text that is not UTF-8.
#[test]
fn an_unusable_config_file_is_refused_by_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |path: &Path| {
        let err = config_at(path).unwrap_err();
        assert_eq!(err.exit, Exit::Config);
        err.message
    };
    assert_eq!(
        refused(dir.path()),
        format!(
            "config file {}: is a directory: name a file",
            dir.path().display()
        )
    );
    let latin = dir.path().join("config.toml");
    std::fs::write(&latin, b"keep = \"3d\" # caf\xe9\n").unwrap();
    assert_eq!(
        refused(&latin),
        format!(
            "config file {}: is not UTF-8 text: a config file is TOML (key = value lines)",
            latin.display()
        )
    );
}

/// A config file's keys come out in the order of `KEYS`, whatever the file's order: two
/// files that set the same are the same to `atc doctor`.
#[test]
fn a_config_files_keys_come_in_the_order_of_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(&path, "keep = \"30d\"\nmax-age = \"3d\"\n").unwrap();
    let file = config_at(&path).unwrap();
    let names: Vec<&str> = file.values().map(|(name, _)| name).collect();
    assert_eq!(names, ["max-age", "keep"]);
}

/// A config file is read only when its owner is this user or root: whoever can write it
/// decides where tokens go. (Another user's file needs root to make; without root, a
/// root-owned file is read.)
#[cfg(unix)]
#[test]
fn a_config_file_of_another_user_is_refused_and_roots_is_read() {
    let me = crate::state::guard::euid();
    let dir = tempfile::tempdir().unwrap();
    let load = |path: &Path| config_at(path).map(|file| file.values().count());
    if me != 0 {
        // Root's own file is trusted: it is read (and found not to be TOML), not refused
        // for its owner.
        let err = load(Path::new("/etc/passwd")).unwrap_err();
        assert!(
            err.message.contains("line 1") && !err.message.contains("owned by"),
            "{err}"
        );
        return;
    }
    let path = dir.path().join("config.toml");
    std::fs::write(&path, "keep = \"30d\"\n").unwrap();
    assert_eq!(load(&path).unwrap(), 1);
    std::os::unix::fs::chown(&path, Some(4242), None).unwrap();
    assert_eq!(
        load(&path).unwrap_err().message,
        format!(
            "config file {}: is owned by uid 4242, not by you (uid 0): its owner decides where your tokens go; use a config file of your own",
            path.display()
        )
    );
}

/// `atc qwenpaw install` loads the plugin into the server named outright (a flag,
/// `ATC_BASE_URL`, the config file's `base-url`, a managed runtime unless `--working-dir`
/// names another QwenPaw), else the one that last ran on the working dir; it takes the
/// seed plugin's state from beside the working dir, else from `~/.qwenpaw`; its HTTP
/// timeout is the tick's.
#[test]
fn qwenpaw_install_loads_the_plugin_where_it_is_told_else_where_qwenpaw_last_ran() {
    let home = tempfile::tempdir().unwrap();
    let work = home.path().join(".qwenpaw");
    let other = home.path().join("elsewhere");
    for (dir, port) in [(&work, 9001), (&other, 9002)] {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(
            dir.join("config.json"),
            format!(r#"{{"last_api": {{"host": "0.0.0.0", "port": {port}}}}}"#),
        )
        .unwrap();
    }
    let config = home.path().join("atc.toml");
    std::fs::write(&config, "base-url = \"http://file:3\"\n").unwrap();
    let install = |vars: &[(&'static str, &str)], args: &[&str]| {
        let e = env(vars, Some(home.path()));
        let args = [&["qwenpaw", "install"][..], args].concat();
        match resolve_args(&args, &e).unwrap().action {
            Action::QwenpawInstall(install) => install,
            other => panic!("not an install: {other:?}"),
        }
    };
    let server = |vars: &[(&'static str, &str)], args: &[&str]| {
        install(vars, args).base_url.map(|url| url.value)
    };
    let managed = [
        ("QWENPAW_RUNTIME_API_URL", "https://runtime:7000"),
        ("QWENPAW_RUNTIME_ID", "r1"),
        ("QWENPAW_RUNTIME_INTERNAL_TOKEN", "secret"),
    ];
    let elsewhere = ["--working-dir", other.to_str().unwrap()];
    for (vars, args, want) in [
        (&[][..], &[][..], "http://127.0.0.1:9001/api"),
        (&[], &elsewhere[..], "http://127.0.0.1:9002/api"),
        (&[], &["--base-url", "http://flag:1"], "http://flag:1/api"),
        (&[("ATC_BASE_URL", "http://env:2")], &[], "http://env:2/api"),
        (
            &[("ATC_CONFIG", config.to_str().unwrap())],
            &elsewhere,
            "http://file:3/api",
        ),
        (&managed, &[], "https://runtime:7000/api"),
        (&managed, &elsewhere, "http://127.0.0.1:9002/api"),
    ] {
        assert_eq!(
            server(vars, args).as_deref(),
            Some(want),
            "{vars:?} {args:?}"
        );
    }
    assert_eq!(
        install(&[("ATC_HTTP_TIMEOUT", "7s")], &[]).http_timeout,
        Duration::from_secs(7)
    );
    let seed_state = |args: &[&str]| {
        let args = [&["--replace-agent-task-callback"][..], args].concat();
        install(&[], &args).replace.expect("a replace").seed_state
    };
    let seeds = work.join("agent-task-callback.json");
    assert_eq!(seed_state(&elsewhere), seeds);
    let beside = other.join("agent-task-callback.json");
    std::fs::write(&beside, "{}").unwrap();
    assert_eq!(seed_state(&elsewhere), beside);
}

/// `atc timer print cron` takes an interval cron can keep: one that divides a minute, or
/// whole minutes that divide an hour; systemd takes any whole number of seconds.
#[test]
fn a_cron_interval_divides_a_minute_or_an_hour() {
    let home = tempfile::tempdir().unwrap();
    let e = env(&[], Some(home.path()));
    let interval = |kind: &str, every: &str| match resolve_args(
        &["timer", "print", kind, "--interval", every],
        &e,
    ) {
        Ok(Settings {
            action: Action::Timer(timer),
            ..
        }) => Ok(timer.interval.as_secs()),
        Ok(other) => panic!("not a timer: {other:?}"),
        Err(err) => Err(err.message),
    };
    for (every, secs) in [
        ("15s", 15),
        ("30s", 30),
        ("1m", 60),
        ("2m", 120),
        ("15m", 900),
    ] {
        assert_eq!(interval("cron", every), Ok(secs), "{every}");
    }
    for every in ["7s", "45s", "90s", "7m", "2h"] {
        let said = interval("cron", every).unwrap_err();
        assert!(
            said.starts_with("cron cannot run every "),
            "{every}: {said}"
        );
    }
    for (every, secs) in [("7s", 7), ("90s", 90), ("7m", 420)] {
        assert_eq!(interval("systemd", every), Ok(secs), "{every}");
    }
}

#[test]
fn a_base_url_a_person_named_wins_over_a_watchs_and_a_watchs_over_the_rest() {
    let recorded = || {
        Some((
            "http://b/api".to_owned(),
            Source::Watched {
                task_id: "task-1".into(),
                file: "jobs.json".into(),
            },
        ))
    };
    let resolved = |source: Source| Setting {
        value: "http://a/api".to_owned(),
        source,
    };
    for source in [
        Source::Flag("--base-url"),
        Source::Env("ATC_BASE_URL"),
        Source::ManagedRuntime,
    ] {
        assert!(source.named());
        assert_eq!(
            base_for_watched(&resolved(source.clone()), || -> Option<(String, Source)> {
                panic!("the job file is read for a base URL a person named")
            }),
            resolved(source)
        );
    }
    for source in [
        Source::Default,
        Source::QwenPawConfig("c.json".into()),
        Source::File {
            path: "atc.toml".into(),
            key: "base-url",
        },
    ] {
        assert!(!source.named());
        let chosen = base_for_watched(&resolved(source.clone()), recorded);
        assert_eq!(chosen.value, "http://b/api");
        assert_eq!(
            chosen.source.to_string(),
            "the watch of task-1 in jobs.json"
        );
        assert_eq!(chosen.source.kind(), "watch");
        assert_eq!(
            base_for_watched(&resolved(source.clone()), || None),
            resolved(source)
        );
    }
}
