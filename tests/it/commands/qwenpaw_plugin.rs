//! atc's QwenPaw plugin without QwenPaw: its Python, with plain python3 (the context
//! getters and the atc binary stubbed: tests/qwenpaw_plugin/test_plugin.py), and
//! `atc qwenpaw install` against a working dir made here, with a fake server where a
//! running one matters.

use crate::support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use support::atc::{Run, TestEnv};
use support::fake::{FakeQwenPaw, Reply};

#[test]
fn plugin_python_with_plain_python3() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/qwenpaw_plugin/test_plugin.py");
    // Hermetic: no ATC_*, XDG_* or QWENPAW_* of the developer's (a config file of theirs
    // must not steer the real atc the script runs).
    let home = tempfile::tempdir().unwrap();
    let out = Command::new("python3")
        .arg(&script)
        .env_clear()
        .envs(support::hermetic::vars(home.path()))
        .env("ATC_TEST_BIN", env!("CARGO_BIN_EXE_atc"))
        .output()
        .expect("python3 must be installed to test the QwenPaw plugin");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} failed:\n{stderr}",
        script.display()
    );
    // unittest's summary: every test ran, none was skipped.
    assert!(
        stderr.contains("\nOK\n") && !stderr.contains("skipped"),
        "{stderr}"
    );
}

/// A QwenPaw working dir as `qwenpaw init` leaves it: two agents, each with an agent.json
/// holding other tools; `last_api` pointing at `api_port` when given.
fn working_dir(env: &TestEnv, api_port: Option<u16>) -> PathBuf {
    let wd = env.dir.path().join("qwenpaw");
    for agent in ["default", "QA"] {
        let ws = wd.join("workspaces").join(agent);
        fs::create_dir_all(&ws).unwrap();
        fs::write(
            ws.join("agent.json"),
            json!({"id": agent, "tools": {"builtin_tools": {
                "execute_shell_command": {"name": "execute_shell_command", "enabled": true}
            }}})
            .to_string(),
        )
        .unwrap();
    }
    let mut config = json!({"agents": {"active_agent": "default", "profiles": {
        "default": {"id": "default", "workspace_dir": wd.join("workspaces/default")},
        "QA": {"id": "QA", "workspace_dir": wd.join("workspaces/QA")}
    }}});
    if let Some(port) = api_port {
        config["last_api"] = json!({"host": "127.0.0.1", "port": port});
    }
    fs::write(wd.join("config.json"), config.to_string()).unwrap();
    wd
}

/// Every file under `dir`, with its bytes.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push((p.clone(), fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn tools_of(wd: &Path, agent: &str) -> Value {
    let text = fs::read_to_string(wd.join("workspaces").join(agent).join("agent.json")).unwrap();
    serde_json::from_str::<Value>(&text).unwrap()["tools"]["builtin_tools"].clone()
}

const TOOLS: [&str; 4] = [
    "watch_agent_task",
    "watch_agent_tasks",
    "callback_task_status",
    "cancel_task_callback",
];

#[test]
fn the_plugin_carries_atcs_version() {
    let manifest: Value = serde_json::from_str(include_str!(
        "../../../examples/qwenpaw-plugin/atc/plugin.json"
    ))
    .unwrap();
    assert_eq!(manifest["version"], env!("CARGO_PKG_VERSION"));
}

#[test]
fn dry_run_says_what_it_would_change_and_changes_nothing() {
    let env = TestEnv::new();
    let wd = working_dir(&env, None);
    let before = snapshot(&wd);
    let shown = wd.display().to_string();
    env.atc(["qwenpaw", "install", "--dry-run", "--all", "--working-dir", &shown])
        .stdout(format!(
            "QwenPaw working dir {shown} (from --working-dir)\n\
             Would change: write the plugin's plugin.json ({shown}/plugins/atc/plugin.json)\n\
             Would change: write the plugin's plugin.py ({shown}/plugins/atc/plugin.py)\n\
             Would change: write the plugin's atc_plugin/__init__.py ({shown}/plugins/atc/atc_plugin/__init__.py)\n\
             Would change: write the plugin's atc_plugin/where.py ({shown}/plugins/atc/atc_plugin/where.py)\n\
             Would change: write the plugin's atc_plugin/tools.py ({shown}/plugins/atc/atc_plugin/tools.py)\n\
             Would change: write the plugin's atc_plugin/kick.py ({shown}/plugins/atc/atc_plugin/kick.py)\n\
             Would change: write the plugin's atc_plugin/auto_watch.py ({shown}/plugins/atc/atc_plugin/auto_watch.py)\n\
             Would change: write the plugin's frontend.mjs ({shown}/plugins/atc/frontend.mjs)\n\
             Would change: enable the tools for agent default ({shown}/workspaces/default/agent.json)\n\
             Would change: enable the tools for agent QA ({shown}/workspaces/QA/agent.json)\n\
             Would change: put the atc-callback skill into the skill pool ({shown}/skill_pool/atc-callback/SKILL.md)\n\
             Tools enabled for: default, QA (watch_agent_task, watch_agent_tasks, callback_task_status, cancel_task_callback)\n\
             Restart QwenPaw (or start it) to load the plugin: no QwenPaw has run on this working dir yet (no last_api in its config.json). The tools are enabled from its next start.\n"
        ))
        .env_remove("ATC_BASE_URL")
        .no_file()
        .run();
    assert_eq!(snapshot(&wd), before, "--dry-run changed the working dir");
}

#[test]
fn install_writes_the_embedded_plugin_enables_tools_and_is_idempotent() {
    let env = TestEnv::new();
    let wd = working_dir(&env, None);
    let shown = wd.display().to_string();
    let install = || {
        env.atc([
            "qwenpaw",
            "install",
            "--json",
            "--agents",
            "QA",
            "--working-dir",
            &shown,
        ])
        .stdout_inspected()
        .env_remove("ATC_BASE_URL")
        .no_file()
        .json()
    };
    let out = install();
    assert_eq!(out["agents"], json!(["QA"]));
    assert_eq!(out["restart_needed"], true);
    assert_eq!(out["changes"].as_array().unwrap().len(), 10, "{out}");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/qwenpaw-plugin/atc");
    for name in [
        "plugin.json",
        "plugin.py",
        "atc_plugin/__init__.py",
        "atc_plugin/where.py",
        "atc_plugin/tools.py",
        "atc_plugin/kick.py",
        "atc_plugin/auto_watch.py",
        "frontend.mjs",
    ] {
        assert_eq!(
            fs::read(wd.join("plugins/atc").join(name)).unwrap(),
            fs::read(root.join(name)).unwrap(),
            "{name} is not the embedded copy"
        );
    }
    let qa = tools_of(&wd, "QA");
    for tool in TOOLS {
        assert_eq!(qa[tool]["enabled"], true, "{tool}: {qa}");
    }
    assert_eq!(qa["execute_shell_command"]["enabled"], true);
    // Only the named agent.
    assert!(tools_of(&wd, "default").get("watch_agent_task").is_none());
    let skill =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/qwenpaw-skill/atc-callback/SKILL.md");
    assert_eq!(
        fs::read(wd.join("skill_pool/atc-callback/SKILL.md")).unwrap(),
        fs::read(skill).unwrap()
    );

    // Again: nothing to change.
    let before = snapshot(&wd);
    let again = install();
    assert_eq!(again["changes"], json!([]));
    assert_eq!(snapshot(&wd), before);
}

#[test]
fn the_seed_plugin_still_installed_is_refused_and_nothing_written() {
    let env = TestEnv::new();
    let wd = working_dir(&env, None);
    let seed = wd.join("plugins/agent-task-callback");
    fs::create_dir_all(&seed).unwrap();
    fs::write(
        seed.join("plugin.json"),
        json!({"id": "agent-task-callback", "name": "Agent Task Callback", "version": "0.1.5"})
            .to_string(),
    )
    .unwrap();
    let before = snapshot(&wd);
    // A dry run refuses it too: it plans past the seed only when it would replace it.
    for dry_run in [&[][..], &["--dry-run"]] {
        env.atc(
            ["qwenpaw", "install", "--working-dir", wd.to_str().unwrap()]
                .iter()
                .chain(dry_run),
        )
        .status(1)
        .stderr(format!(
            "atc: plugin \"agent-task-callback\" at {} registers the same tools (watch_agent_task…): two copies would both deliver; `atc qwenpaw install --replace-agent-task-callback` moves from it in one step, in an order in which the two never both deliver\n",
            seed.display(),
        ))
        .env_remove("ATC_BASE_URL")
        .no_file()
        .run();
    }
    assert_eq!(snapshot(&wd), before);
}

#[test]
fn an_unknown_agent_is_a_usage_error() {
    let env = TestEnv::new();
    let wd = working_dir(&env, None);
    env.atc([
        "qwenpaw",
        "install",
        "--agents",
        "default,nope",
        "--working-dir",
        wd.to_str().unwrap(),
    ])
    .status(2)
    .stderr(format!(
        "atc: --agents: QwenPaw at {} has no agent \"nope\"; it has: default, QA\n",
        wd.display()
    ))
    .env_remove("ATC_BASE_URL")
    .no_file()
    .run();
    assert!(!wd.join("plugins").exists());
}

#[test]
fn a_running_server_loads_the_plugin_without_a_restart() {
    let server = FakeQwenPaw::start();
    server.answer("GET", "/api/version", 200, r#"{"version":"2.2.2.post1"}"#);
    let not_loaded = || {
        server.answer(
            "GET",
            "/api/plugins/atc/status",
            404,
            r#"{"detail":"Plugin 'atc' not found."}"#,
        )
    };
    not_loaded();
    server.answer(
        "POST",
        "/api/plugins/install",
        200,
        r#"{"id":"atc","name":"atc (Agent Task Callback)","loaded":true}"#,
    );
    let env = TestEnv::new();
    let wd = working_dir(&env, Some(server.port()));
    let installing = |extra: &[&str], said: &str| {
        env.atc(
            ["qwenpaw", "install", "--working-dir", wd.to_str().unwrap()]
                .iter()
                .chain(extra),
        )
        .stdout_contains(format!("{said}\n"))
        .env_remove("ATC_BASE_URL")
        .no_file()
        .run()
    };
    // A dry run, the plugin not loaded yet: the server would load it, nothing is posted.
    installing(
        &["--dry-run"],
        &format!(
            "No restart needed: the QwenPaw at {} would load the plugin now.",
            server.api()
        ),
    );
    assert_eq!(server.hits("POST", "/api/plugins/install"), 0);
    let out = installing(
        &[],
        &format!(
            "No restart needed: the QwenPaw at {} loaded the plugin.",
            server.api()
        ),
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Tools enabled for: default ("));
    let install = server
        .requests()
        .into_iter()
        .find(|r| r.method == "POST")
        .expect("the install POST");
    assert_eq!(
        install.json(),
        json!({"source": wd.join("plugins/atc").display().to_string(), "force": false})
    );

    // Loaded and unchanged: a dry run and a real one ask, and post nothing.
    server.answer(
        "GET",
        "/api/plugins/atc/status",
        200,
        r#"{"id":"atc","loaded":true,"enabled":true,"version":"0.1.0"}"#,
    );
    let loaded = format!(
        "No restart needed: the QwenPaw at {} has this plugin loaded.",
        server.api()
    );
    installing(&["--dry-run"], &loaded);
    installing(&[], &loaded);
    assert_eq!(server.hits("POST", "/api/plugins/install"), 1);

    // A server that will not load it: a restart is needed, and the answer says why.
    not_loaded();
    server.answer(
        "POST",
        "/api/plugins/install",
        500,
        r#"{"detail":"Failed to load plugin"}"#,
    );
    installing(
        &[],
        &format!(
            "Restart QwenPaw to load the plugin: {}/plugins/install answered HTTP 500 {{\"detail\":\"Failed to load plugin\"}}",
            server.api()
        ),
    );
    let said = env
        .atc([
            "--json",
            "qwenpaw",
            "install",
            "--working-dir",
            wd.to_str().unwrap(),
        ])
        .env_remove("ATC_BASE_URL")
        .no_file()
        .json();
    assert_eq!(
        (&said["loaded"], &said["restart_needed"]),
        (&json!(false), &json!(true)),
        "{said}"
    );
    assert_eq!(server.hits("POST", "/api/plugins/install"), 3);
}

/// At the working dir's address, a server that wants a token or is not QwenPaw (another
/// service's page) gets no install: the plugin loads at QwenPaw's next start.
#[test]
fn a_server_that_does_not_answer_as_qwenpaw_gets_no_install() {
    let server = FakeQwenPaw::start();
    let env = TestEnv::new();
    let wd = working_dir(&env, Some(server.port()));
    for (reply, why) in [
        (
            Reply::json(401, r#"{"detail":"Not authenticated"}"#),
            "answers HTTP 401 (a token missing? see atc doctor)",
        ),
        (
            Reply::html(200, "<html><body>Welcome to nginx!</body></html>"),
            "answers HTTP 200 with text/html; charset=utf-8: that is not QwenPaw's API (see atc doctor)",
        ),
    ] {
        server.on("GET", "/api/version", vec![reply]);
        env.atc(["qwenpaw", "install", "--working-dir", wd.to_str().unwrap()])
            .stdout_contains(format!(
                "Restart QwenPaw (or start it) to load the plugin: {}/version {why}. The tools are enabled from its next start.\n",
                server.api()
            ))
            .env_remove("ATC_BASE_URL")
            .no_file()
            .run();
    }
    assert_eq!(server.hits("GET", "/api/plugins/atc/status"), 0);
    assert_eq!(server.hits("POST", "/api/plugins/install"), 0);
}

/// `atc qwenpaw install` into `wd`, no server asked.
fn install_offline(env: &TestEnv, wd: &Path) {
    env.atc(["qwenpaw", "install", "--working-dir", wd.to_str().unwrap()])
        .env_remove("ATC_BASE_URL")
        .stdout_inspected()
        .no_file()
        .run();
}

/// `atc doctor` of the QwenPaw working dir `wd`, its base URL `api` (none answers
/// when `None`): it must exit `status` and make no job file.
fn doctor_of(env: &TestEnv, wd: &Path, api: Option<&str>, status: i32) -> std::process::Output {
    let run = env.atc(["doctor"]).env("QWENPAW_WORKING_DIR", wd);
    let run = match api {
        Some(api) => run.env("ATC_BASE_URL", api),
        None => run,
    };
    run.status(status)
        .stdout_inspected()
        .stderr_inspected()
        .no_file()
        .run()
}

#[test]
fn doctor_names_the_plugin_its_tools_and_the_seed_plugin_still_installed() {
    let env = TestEnv::new();
    let wd = working_dir(&env, None);
    let wd_shown = wd.display().to_string();
    install_offline(&env, &wd);
    let seed = wd.join("plugins/agent-task-callback");
    fs::create_dir_all(&seed).unwrap();
    fs::write(
        seed.join("plugin.json"),
        json!({"id": "agent-task-callback"}).to_string(),
    )
    .unwrap();
    let out = doctor_of(&env, &wd, None, 1);
    said_each(
        &out,
        [
            format!("✓ plugin: atc's plugin is installed in {wd_shown} (the server does not say whether it loaded it)"),
            "✓ plugin tools: enabled for default; not for QA (`atc qwenpaw install --agents …` adds them)".to_owned(),
            "✓ kicks: the end-of-turn hook is installed; no turn's end has started a tick yet (it starts one only while watches wait, and needs atc where the server finds it: see the atc for the server line)".to_owned(),
            "✓ atc for the server: cannot tell: no `qwenpaw app` process serving http://127.0.0.1:9/api whose environment this user can read".to_owned(),
            format!("✗ seed plugin: the Agent Task Callback plugin is still installed at {}: it watches and delivers its tasks, and atc's plugin stands by (no auto-watch, no kicks, no cadence; its tools say so) so that nothing arrives twice", seed.display()),
            "  → `atc qwenpaw install --replace-agent-task-callback` removes it, moves its jobs to atc and enables atc's tools for the same agents, in an order in which the two never both deliver".to_owned(),
        ],
    );
}

/// doctor asks the server whether it loaded the plugin: a JSON 404 or `loaded: false` is
/// a plugin it has not loaded; another page (a proxy's 404) says nothing either way.
#[test]
fn doctor_tells_a_plugin_the_server_has_not_loaded_from_an_answer_that_says_nothing() {
    let env = TestEnv::new();
    let wd = working_dir(&env, None);
    let wd_shown = wd.display().to_string();
    install_offline(&env, &wd);
    let not_loaded = format!(
        "✗ plugin: atc's plugin is installed in {wd_shown} but the server has not loaded it"
    );
    let cannot_tell = format!(
        "✓ plugin: atc's plugin is installed in {wd_shown} (the server does not say whether it loaded it)"
    );
    for (status, said) in [
        (
            Reply::json(404, r#"{"detail":"Plugin 'atc' not found."}"#),
            &not_loaded,
        ),
        (
            Reply::json(200, r#"{"id":"atc","loaded":false}"#),
            &not_loaded,
        ),
        (Reply::html(404, "<html>Not Found</html>"), &cannot_tell),
    ] {
        let server = FakeQwenPaw::start();
        server.answer("GET", "/api/version", 200, bodies::VERSION);
        server.answer("GET", "/api/healthz", 200, bodies::HEALTH_OK);
        server.on("GET", "/api/plugins/atc/status", vec![status]);
        let out = doctor_of(
            &env,
            &wd,
            Some(&server.api()),
            if said.starts_with('✗') { 1 } else { 0 },
        );
        said_each(&out, [said.clone()]);
    }
}

/// A second copy of atc's plugin (a backup folder QwenPaw loads too) races ours; the
/// seed's state file is looked for in the working dir, then in ~/.qwenpaw.
#[test]
fn doctor_names_a_second_copy_of_the_plugin_and_the_seeds_state_in_home() {
    let env = TestEnv::new();
    let wd = working_dir(&env, None);
    install_offline(&env, &wd);
    let doctor = || doctor_of(&env, &wd, None, 1);
    let state = env.home.join(".qwenpaw/agent-task-callback.json");
    fs::create_dir_all(state.parent().unwrap()).unwrap();
    fs::write(
        &state,
        json!({"jobs": {
            "task-aaaaaaaaaaaa": {"task_id": "task-aaaaaaaaaaaa", "status": "pending"},
            "task-bbbbbbbbbbbb": {"task_id": "task-bbbbbbbbbbbb", "status": "pending"}
        }})
        .to_string(),
    )
    .unwrap();
    said_each(
        &doctor(),
        [format!(
            "✗ seed plugin: the Agent Task Callback plugin is gone, but its state file {} still holds 2 pending jobs nobody moved to atc: atc's plugin stands by (delivers nothing) until they are",
            state.display()
        )],
    );
    let backup = wd.join("plugins/atc-backup");
    fs::create_dir_all(&backup).unwrap();
    fs::copy(
        wd.join("plugins/atc/plugin.json"),
        backup.join("plugin.json"),
    )
    .unwrap();
    said_each(
        &doctor(),
        [
            format!(
                "✗ seed plugin: {} (plugin \"atc\") registers atc's tools too: two copies race",
                backup.display()
            ),
            format!(
                "  → move it out of {} (QwenPaw loads every folder there)",
                wd.join("plugins").display()
            ),
        ],
    );
}

/// Where a running `qwenpaw app` finds atc, in the plugin's order: next to its
/// interpreter, in the virtualenv its interpreter links into, under
/// `$QWENPAW_PLUGIN_SITE/bin`, `ATC_BIN` (an empty one is none), its PATH. Read from the
/// process's command line and environment, as doctor reads a real server's.
#[cfg(target_os = "linux")]
#[test]
fn doctor_finds_the_atc_a_running_server_finds_in_the_plugins_order() {
    use std::os::unix::fs::{PermissionsExt, symlink};
    let env = TestEnv::new();
    let wd = working_dir(&env, None);
    install_offline(&env, &wd);
    let server = FakeQwenPaw::start();
    server.answer("GET", "/api/version", 200, support::bodies::VERSION);
    server.answer("GET", "/api/healthz", 200, support::bodies::HEALTH_OK);
    server.answer(
        "GET",
        "/api/plugins/atc/status",
        404,
        r#"{"detail":"Plugin 'atc' not found."}"#,
    );
    // A virtualenv whose python links to the system's, reached through a relative link
    // from elsewhere (as a pipx or uv shim does).
    // The interpreter itself, not a launcher (pyenv's shims are shell scripts).
    let real = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3");
    let python3 = PathBuf::from(String::from_utf8(real.stdout).unwrap().trim());
    let venv = env.path("venv");
    fs::create_dir_all(venv.join("bin")).unwrap();
    fs::write(
        venv.join("pyvenv.cfg"),
        format!("home = {}\n", python3.parent().unwrap().display()),
    )
    .unwrap();
    symlink(&python3, venv.join("bin/python3")).unwrap();
    let shim = env.path("shim");
    fs::create_dir_all(&shim).unwrap();
    symlink("../venv/bin/python3", shim.join("python3")).unwrap();
    let script = env.path("app/qwenpaw");
    fs::create_dir_all(script.parent().unwrap()).unwrap();
    fs::write(&script, "import time\ntime.sleep(60)\n").unwrap();
    let atc_in = |dir: &Path| {
        fs::create_dir_all(dir).unwrap();
        let atc = dir.join("atc");
        fs::write(&atc, "#!/bin/sh\n").unwrap();
        fs::set_permissions(&atc, fs::Permissions::from_mode(0o755)).unwrap();
        atc
    };
    let port = server.port().to_string();
    // A `qwenpaw` command on the same port that is no server (started first: doctor reads
    // the processes in pid order).
    let mut decoy = Command::new(&python3)
        .arg(&script)
        .args(["shell", "--port", &port])
        .env_clear()
        .spawn()
        .unwrap();
    // The server runs `python3 qwenpaw app --port <port>` with `vars` alone; what doctor
    // says of it.
    let doctor_beside = |vars: &[(&str, &str)]| {
        let mut app = support::spawn_seen(
            Command::new(shim.join("python3"))
                .arg(&script)
                .args(["app", "--port", &port])
                .env_clear()
                .envs(vars.iter().copied()),
        );
        let out = doctor_of(&env, &wd, Some(&server.api()), 1);
        let _ = app.kill();
        let _ = app.wait();
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        // Its line, and the fix under it.
        let lines: Vec<&str> = said
            .lines()
            .skip_while(|l| !l[l.find(' ').unwrap_or(0)..].starts_with(" atc for the server"))
            .collect();
        let fix = lines.get(1).filter(|l| l.starts_with("  → "));
        let line = lines[..1 + usize::from(fix.is_some())].join("\n");
        (app.id(), line)
    };
    let site = env.path("site");
    let on_path = env.path("path-bin");
    let path = format!("{}:/usr/bin:/bin", on_path.display());
    // No atc it could run: a file that is not executable next to the interpreter, a
    // directory where cargo would put one.
    let home = env.path("server-home");
    fs::create_dir_all(home.join(".cargo/bin/atc")).unwrap();
    fs::write(shim.join("atc"), "#!/bin/sh\n").unwrap();
    fs::set_permissions(shim.join("atc"), fs::Permissions::from_mode(0o644)).unwrap();
    let bare = [("PATH", path.as_str()), ("HOME", home.to_str().unwrap())];

    let (pid, said) = doctor_beside(&bare);
    assert!(
        said.starts_with(&format!(
            "✗ atc for the server: the server (pid {pid}) cannot find atc: not where pip puts it for the server ({} (next to its interpreter), {} (the virtualenv its interpreter links into)), no ATC_BIN, not on its PATH ({path}), no ~/.cargo/bin/atc; its tools and kicks fail\n  → install the plugin zip made on this machine",
            shim.display(),
            shim.join("../venv/bin").display()
        )),
        "{said}"
    );
    let on_path_atc = atc_in(&on_path);
    let with = |name: &'static str, value: &str| {
        let mut vars = bare.map(|(k, v)| (k, v.to_owned())).to_vec();
        vars.push((name, value.to_owned()));
        vars
    };
    for (vars, found) in [
        (
            with("ATC_BIN", ""),
            format!("finds {} (its PATH)", on_path_atc.display()),
        ),
        (
            with("ATC_BIN", on_path_atc.to_str().unwrap()),
            format!("has ATC_BIN={}", on_path_atc.display()),
        ),
    ] {
        let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (pid, said) = doctor_beside(&vars);
        assert_eq!(
            said,
            format!("✓ atc for the server: the server (pid {pid}) {found}")
        );
    }
    let site_atc = atc_in(&site.join("bin"));
    let with_site = with("QWENPAW_PLUGIN_SITE", site.to_str().unwrap());
    let with_site: Vec<(&str, &str)> = with_site.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (pid, said) = doctor_beside(&with_site);
    assert_eq!(
        said,
        format!(
            "✓ atc for the server: the server (pid {pid}) finds {} ($QWENPAW_PLUGIN_SITE/bin)",
            site_atc.display()
        )
    );
    let venv_atc = shim.join("../venv/bin/atc");
    atc_in(&venv.join("bin"));
    let (pid, said) = doctor_beside(&with_site);
    assert_eq!(
        said,
        format!(
            "✓ atc for the server: the server (pid {pid}) finds {} (the virtualenv its interpreter links into)",
            venv_atc.display()
        )
    );
    let shim_atc = atc_in(&shim);
    let (pid, said) = doctor_beside(&with_site);
    assert_eq!(
        said,
        format!(
            "✓ atc for the server: the server (pid {pid}) finds {} (next to its interpreter)",
            shim_atc.display()
        )
    );
    let _ = decoy.kill();
    let _ = decoy.wait();
}

/// doctor names the atc the plugin carries (from the zip) first, says when it is built for
/// another platform (the plugin skips it), and says when the seed's state file still holds
/// jobs nobody moved to atc (the plugin stands by).
#[test]
fn doctor_names_the_atc_the_plugin_carries_its_platform_and_the_seeds_leftover_jobs() {
    let env = TestEnv::new();
    let wd = working_dir(&env, None);
    let bin = wd.join("plugins/atc/bin");
    fs::create_dir_all(&bin).unwrap();
    fs::write(bin.join("atc"), b"#!/bin/sh\n").unwrap();
    install_offline(&env, &wd);
    // The install replaced the carried atc with itself, and named its platform.
    assert_eq!(
        fs::read(bin.join("atc")).unwrap(),
        fs::read(env!("CARGO_BIN_EXE_atc")).unwrap()
    );
    let platform = fs::read_to_string(bin.join("atc.platform")).unwrap();
    assert_eq!(platform, format!("{}\n", python_platform()));
    let doctor = |status: i32| {
        let out = doctor_of(&env, &wd, None, status);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let said = doctor(1); // no server answers: ✗ server
    let line = format!(
        "✓ atc for the server: the server finds {} (the atc its plugin carries, first in its order)",
        bin.join("atc").display()
    );
    assert!(said.lines().any(|l| l == line), "no {line:?} in\n{said}");

    let other = if platform.trim() == "linux-x86_64" {
        "macos-aarch64"
    } else {
        "linux-x86_64"
    };
    fs::write(bin.join("atc.platform"), format!("{other}\n")).unwrap();
    let said = doctor(1);
    let line = format!(
        "✗ atc for the server: the atc the plugin carries ({}) is built for {other}, and this machine is {}: the plugin skips it (QwenPaw's log says so)",
        bin.join("atc").display(),
        platform.trim()
    );
    assert!(
        said.lines().any(|l| l.starts_with(&line)),
        "no {line:?} in\n{said}"
    );
    fs::write(bin.join("atc.platform"), &platform).unwrap();

    let state = wd.join("agent-task-callback.json");
    fs::write(
        &state,
        json!({"jobs": {"task-aaaaaaaaaaaa": {"task_id": "task-aaaaaaaaaaaa", "status": "pending"}}}).to_string(),
    )
    .unwrap();
    let said = doctor(1);
    for line in [
        format!("✗ seed plugin: the Agent Task Callback plugin is gone, but its state file {} still holds 1 pending job nobody moved to atc: atc's plugin stands by (delivers nothing) until they are", state.display()),
        "  → `atc qwenpaw install --replace-agent-task-callback` imports them and marks them handed over".to_owned(),
    ] {
        assert!(said.lines().any(|l| l == line), "no {line:?} in\n{said}");
    }
}

/// With the plugin loaded, doctor says whether the server offers its console frontend: the
/// list the web console imports bundles from (`GET /api/frontend_plugin`) names it, names
/// none for it (an older plugin.json loaded), or the QwenPaw has no such list.
#[test]
fn doctor_says_whether_the_console_frontend_is_loaded() {
    let atc_listed = bodies::FRONTEND_PLUGIN_ATC;
    let older = atc_listed.replace(
        r#""frontend_entry":"frontend.mjs""#,
        r#""frontend_entry":null"#,
    );
    assert_ne!(older, atc_listed);
    for (list, line, fix) in [
        (
            Reply::json(200, &format!("[{atc_listed}]")),
            "✓ console: atc's frontend is loaded (frontend.mjs, which every console page imports at start-up): an open chat shows a result atc delivers, and its reply, once that turn ends; reload console pages opened before the plugin loaded",
            None,
        ),
        (
            Reply::json(200, &format!("[{older}]")),
            "✗ console: the server loaded atc's plugin without its console frontend (frontend entry null): an open console chat shows a delivered result only after a reload",
            Some(
                "  → `atc qwenpaw install` (or this atc's plugin zip) installs the plugin with it; then reload open console pages",
            ),
        ),
        (
            Reply::json(404, bodies::NO_ROUTE),
            "✓ console: this QwenPaw loads no frontend plugins (GET /api/frontend_plugin: 404): an open console chat shows a delivered result after a reload",
            None,
        ),
    ] {
        let server = FakeQwenPaw::start();
        server.answer(
            "GET",
            "/api/plugins/atc/status",
            200,
            r#"{"id":"atc","loaded":true,"enabled":true,"version":"0.2.0"}"#,
        );
        server.on("GET", "/api/frontend_plugin", vec![list]);
        let env = TestEnv::new();
        let wd = working_dir(&env, None);
        install_offline(&env, &wd);
        let out = doctor_of(&env, &wd, Some(&server.api()), 1);
        let said = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = said.lines().collect();
        let at = lines
            .iter()
            .position(|l| *l == line)
            .unwrap_or_else(|| panic!("no {line:?} in\n{said}"));
        assert_eq!(
            lines.get(at + 1).filter(|l| l.starts_with("  → ")).copied(),
            fix,
            "{said}"
        );
        assert_eq!(server.hits("GET", "/api/frontend_plugin"), 1);
        // The rest of doctor's questions (version, health, agents) are not this test's.
        server.take_unscripted();
    }
}

// ---------------------------------------------------------------------------------------
// `atc tick --kicked`: what the plugin's end-of-turn hook starts.

use std::time::Duration;
use support::bodies;
use support::scene::Scene;

const TASK: &str = "task-0123456789ab";

#[test]
fn a_kicked_tick_polls_a_task_still_running_again_within_its_window() {
    let s = Scene::new();
    s.watch(TASK, &["--child-session", "kid"]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::RUNNING)]);
    s.tick(&[]).run();
    assert_eq!(s.polls(TASK), 1, "a plain tick polls once");
    // The child's own turn ended: its record may say running a moment longer.
    let kid = r#"[{"agent_id": "default", "session_id": "kid", "user_id": "default", "channel": "console"}]"#;
    s.tick(&["--kicked"]).env("ATC_KICK", kid).run();
    let kicked = s.polls(TASK) - 1;
    // One pass, then one per pause while the task still reads running (bounded).
    assert!(
        (2..=5).contains(&kicked),
        "a kicked tick polled a running task {kicked} times"
    );
    assert_eq!(s.status(TASK), "pending");
    let log = s.atc(["log"]).stdout_inspected().run();
    let said = String::from_utf8_lossy(&log.stdout);
    let kicks: Vec<&str> = said
        .lines()
        .filter(|l| l.contains("(tick)  kicked"))
        .collect();
    assert_eq!(kicks.len(), kicked, "{said}");
    assert!(kicks[0].ends_with("(a QwenPaw turn ended)"), "{said}");
    // doctor reads the last kick from the heartbeat.
    let beat = fs::read_to_string(s.env.state.with_file_name("jobs.json.tick.lock")).unwrap();
    let beat: Value = serde_json::from_str(beat.lines().next().unwrap()).unwrap();
    assert!(beat["last_kick_at"].is_string(), "{beat}");
}

#[test]
fn a_kicked_tick_finding_a_tick_running_leaves_a_mark_it_honours_with_one_more_pass() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    // The first tick's poll is held until the kicked tick has come and gone: it holds the
    // tick lock meanwhile (no clock: however slow the machine, the order is this one).
    let gate = support::fake::Gate::new();
    s.poll_replies(
        TASK,
        vec![
            Reply::json(200, bodies::RUNNING).held(&gate),
            Reply::json(200, bodies::RUNNING),
        ],
    );
    let first = s.tick(&["--json"]).stdout_inspected().spawn();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while s.polls(TASK) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the first tick never polled"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    s.tick(&["--kicked", "--json"])
        .stdout("{\n  \"skipped\": \"another atc tick is running\"\n}\n")
        .run();
    let mark = s.env.state.with_file_name("jobs.json.tick.again");
    assert!(mark.exists(), "no mark left for the running tick");
    gate.open();
    let out = first.wait();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    // One more pass for the mark (a kick that named no turn: it polls once), then the
    // kicked window's looks, which only deliver.
    let passes = report["passes"].as_u64().unwrap_or(1) as usize;
    assert!((2..=6).contains(&passes), "{report}");
    assert_eq!(
        s.polls(TASK),
        2,
        "the timer's pass and the mark's: {report}"
    );
    assert!(!mark.exists(), "the mark was not taken");
    let log = s.atc(["log"]).stdout_inspected().run();
    let said = String::from_utf8_lossy(&log.stdout);
    assert!(
        said.contains("(tick)  kicked  (another turn ended meanwhile: a mark)"),
        "{said}"
    );
}

// ---------------------------------------------------------------------------------------
// `atc qwenpaw zip`: the bundle QwenPaw's own installer takes.

/// What `python3 -c script args…` prints; it must succeed.
fn python(script: &str, args: &[&Path]) -> Vec<u8> {
    let out = Command::new("python3")
        .args(["-c", script])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Opens the zip with Python's zipfile: every CRC right, and every entry stored, made on
/// Unix by zip 2.0 (so `unzip` honours its mode) and needing 2.0, with no flags, and the
/// DOS folder bit on folders only.
const OPEN_ZIP: &str = "import hashlib,json,sys,zipfile\nz=zipfile.ZipFile(sys.argv[1])\nassert z.testzip() is None\nfor i in z.infolist():\n    got=(i.create_system,i.create_version,i.extract_version,i.compress_type,i.flag_bits,bool(i.external_attr&0x10))\n    assert got==(3,20,20,0,0,i.filename.endswith('/')),(i.filename,got)\n";

/// Python's zipfile reads the zip: (name, mode, date, bytes) of each entry, in order.
fn unzip(path: &Path) -> Vec<(String, u32, String, Vec<u8>)> {
    let script = OPEN_ZIP.to_owned()
        + "print(json.dumps([[i.filename, i.external_attr >> 16, '%04d-%02d-%02d %02d:%02d:%02d' % i.date_time, list(z.read(i))] for i in z.infolist()]))";
    serde_json::from_slice(&python(&script, &[path])).unwrap()
}

/// Python's zipfile reads a big zip: (name, mode, sha256 hex) of each entry, in order.
fn unzip_digests(path: &Path) -> Vec<(String, u32, String)> {
    let script = OPEN_ZIP.to_owned()
        + "print(json.dumps([[i.filename, i.external_attr >> 16, hashlib.sha256(z.read(i)).hexdigest()] for i in z.infolist()]))";
    serde_json::from_slice(&python(&script, &[path])).unwrap()
}

/// The file's sha256, in hex, as Python's hashlib computes it.
fn sha256_of(path: &Path) -> String {
    let script =
        "import hashlib,sys\nprint(hashlib.sha256(open(sys.argv[1],'rb').read()).hexdigest())";
    String::from_utf8(python(script, &[path]))
        .unwrap()
        .trim()
        .to_owned()
}

/// The platform as the zip names it: Python's view of this machine, mapped as the plugin
/// maps it (`plugin.py` `this_platform`).
fn python_platform() -> String {
    let script = "import platform,sys\nos_='macos' if sys.platform=='darwin' else sys.platform\nm=platform.machine().lower()\nm={'amd64':'x86_64','arm64':'aarch64'}.get(m,m)\nprint(os_+'-'+m)";
    String::from_utf8(python(script, &[]))
        .unwrap()
        .trim()
        .to_owned()
}

/// `atc qwenpaw zip [--thin]` twice, into two folders, the second with `--json`: both
/// print the zip named `name`, create no job file, and write the same bytes. Returns the
/// first zip's path and the second run's JSON.
fn zip_twice(env: &TestEnv, thin: bool, name: &str) -> (PathBuf, Value) {
    let flags: &[&str] = if thin { &["--thin"] } else { &[] };
    let first = env.dir.path().join("one");
    let shown = first.display().to_string();
    let mut args = vec!["qwenpaw", "zip"];
    args.extend(flags);
    args.extend(["--out", &shown]);
    env.atc(args)
        .stdout(format!("{shown}/{name}\n"))
        .no_file()
        .run();
    let second = env.dir.path().join("two");
    let mut args = vec!["--json", "qwenpaw", "zip"];
    args.extend(flags);
    args.extend(["--out", second.to_str().unwrap()]);
    let out = env.atc(args).stdout_inspected().no_file().json();
    assert_eq!(out["path"], second.join(name).display().to_string());
    assert_eq!(out["thin"], thin);
    assert_eq!(
        fs::read(first.join(name)).unwrap(),
        fs::read(second.join(name)).unwrap(),
        "not byte-identical"
    );
    (first.join(name), out)
}

/// The plugin's own entries, first in every zip.
const PLUGIN_FILES: [&str; 10] = [
    "atc/",
    "atc/plugin.json",
    "atc/plugin.py",
    "atc/atc_plugin/",
    "atc/atc_plugin/__init__.py",
    "atc/atc_plugin/where.py",
    "atc/atc_plugin/tools.py",
    "atc/atc_plugin/kick.py",
    "atc/atc_plugin/auto_watch.py",
    "atc/frontend.mjs",
];

/// The skill's entries, last in every zip.
const SKILL_FILES: [&str; 3] = [
    "atc/skills/",
    "atc/skills/atc-callback/",
    "atc/skills/atc-callback/SKILL.md",
];

#[test]
fn the_default_zip_carries_this_atc_for_this_platform_the_same_bytes_every_time() {
    let env = TestEnv::new();
    let version = env!("CARGO_PKG_VERSION");
    let platform = python_platform();
    let name = format!("atc-qwenpaw-plugin-{version}-{platform}.zip");
    let (zip, out) = zip_twice(&env, false, &name);
    assert_eq!(out["platform"], platform.as_str());
    let entries = unzip_digests(&zip);
    let names: Vec<&str> = entries.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(
        names,
        [
            &PLUGIN_FILES[..],
            &["atc/bin/", "atc/bin/atc", "atc/bin/atc.platform"],
            &SKILL_FILES
        ]
        .concat(),
        "no requirements.txt: nothing for pip to fetch"
    );
    let entry = |name: &str| entries.iter().find(|e| e.0 == name).unwrap();
    let bin = entry("atc/bin/atc");
    assert_eq!(bin.1, 0o100_755, "the bundled atc is a program");
    assert_eq!(
        bin.2,
        sha256_of(Path::new(env!("CARGO_BIN_EXE_atc"))),
        "the zip carries the atc that made it"
    );
    let platform_file = env.dir.path().join("platform");
    fs::write(&platform_file, format!("{platform}\n")).unwrap();
    assert_eq!(entry("atc/bin/atc.platform").2, sha256_of(&platform_file));
}

#[test]
fn the_thin_zip_is_one_folder_the_same_bytes_every_time_and_pins_this_atc() {
    let env = TestEnv::new();
    let version = env!("CARGO_PKG_VERSION");
    let name = format!("atc-qwenpaw-plugin-{version}.zip");
    let (zip, out) = zip_twice(&env, true, &name);
    assert_eq!(out["platform"], Value::Null);
    let entries = unzip(&zip);
    let names: Vec<&str> = entries.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(
        names,
        [&PLUGIN_FILES[..], &["atc/requirements.txt"], &SKILL_FILES].concat()
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (name, mode, date, bytes) in &entries {
        assert_eq!(date, "1980-01-01 00:00:00", "{name}");
        let want = if name.ends_with('/') {
            0o040_755
        } else {
            0o100_644
        };
        assert_eq!(*mode, want, "{name}: no symlinks, no odd modes");
        // Every file of the plugin is its source's bytes.
        let source = match name.as_str() {
            "atc/skills/atc-callback/SKILL.md" => {
                Some(root.join("examples/qwenpaw-skill/atc-callback/SKILL.md"))
            }
            "atc/requirements.txt" => None,
            plugin if !plugin.ends_with('/') => {
                Some(root.join("examples/qwenpaw-plugin").join(plugin))
            }
            _ => None,
        };
        if let Some(source) = source {
            assert_eq!(bytes, &fs::read(source).unwrap(), "{name}");
        }
    }
    let entry = |name: &str| entries.iter().find(|e| e.0 == name).unwrap();
    let requirements = String::from_utf8(entry("atc/requirements.txt").3.clone()).unwrap();
    let pins: Vec<&str> = requirements
        .lines()
        .filter(|l| !l.starts_with('#'))
        .collect();
    assert_eq!(pins, [format!("atc-qwenpaw=={version}")]);
    let manifest: Value = serde_json::from_slice(&entry("atc/plugin.json").3).unwrap();
    assert_eq!(manifest["version"], version);
    // QwenPaw's console imports the bundle the manifest names (`entry.frontend`).
    assert_eq!(manifest["entry"]["frontend"], "frontend.mjs");
    assert_eq!(manifest["entry"]["backend"], "plugin.py");
    // The QwenPaw the e2e suite runs (tests/e2e/provision.sh): >= min, < max; the
    // Market reads `min_version`, the same oldest tested QwenPaw.
    assert_eq!(
        manifest["qwenpaw_version"],
        json!({"min": "2.2.2", "max": "2.2.3"})
    );
    assert_eq!(manifest["min_version"], "2.2.2");
    assert_eq!(manifest["license"], "MIT OR Apache-2.0");
}

// ---------------------------------------------------------------------------------------
// `atc qwenpaw install --replace-agent-task-callback`

/// `atc qwenpaw install --replace-agent-task-callback --working-dir WD` and `extra`, the
/// server found from the working dir (no `ATC_BASE_URL`).
fn replacing<'a>(env: &'a TestEnv, wd: &Path, extra: &[&str]) -> Run<'a> {
    let wd = wd.display().to_string();
    let args = [
        "qwenpaw",
        "install",
        "--replace-agent-task-callback",
        "--working-dir",
        &wd,
    ];
    env.atc(args.iter().chain(extra).copied())
        .env_remove("ATC_BASE_URL")
}

/// Asserts that each of `lines` is a whole line of what atc printed.
fn said_each(out: &std::process::Output, lines: impl IntoIterator<Item = String>) {
    let said = String::from_utf8_lossy(&out.stdout);
    for line in lines {
        assert!(said.lines().any(|l| l == line), "no {line:?} in\n{said}");
    }
}

#[test]
fn replacing_the_seed_removes_it_imports_marks_and_enables_exactly_its_agents() {
    let (server, env, wd, seed, state) = seed_in_place(
        Reply::json(
            200,
            r#"{"id":"agent-task-callback","message":"Plugin 'agent-task-callback' uninstalled successfully."}"#,
        ),
        false,
    );
    // The seed's tools enabled for QA only.
    let qa = wd.join("workspaces/QA/agent.json");
    let mut agent: Value = serde_json::from_str(&fs::read_to_string(&qa).unwrap()).unwrap();
    for tool in [
        "watch_agent_task",
        "callback_task_status",
        "cancel_task_callback",
    ] {
        agent["tools"]["builtin_tools"][tool] = json!({"name": tool, "enabled": true});
    }
    fs::write(&qa, agent.to_string()).unwrap();
    let recent = support::unix_secs_ago(60);
    let seed_state = json!({"jobs": {
        "task-aaaaaaaaaaaa": {"task_id": "task-aaaaaaaaaaaa", "status": "pending", "agent_id": "QA", "session_id": "s-1", "user_id": "u", "channel": "console", "registered_at": recent},
        "task-bbbbbbbbbbbb": {"task_id": "task-bbbbbbbbbbbb", "status": "done", "agent_id": "QA", "session_id": "s-1", "user_id": "u", "channel": "console", "registered_at": recent, "final": "T", "completed_at": recent}
    }});
    fs::write(&state, seed_state.to_string()).unwrap();

    let shown = wd.display().to_string();
    let out = replacing(&env, &wd, &[]).stdout_inspected().run();
    let api = server.api();
    said_each(
        &out,
        [
            format!("Replacing the Agent Task Callback plugin at {}", seed.display()),
            "Its tools are enabled for: QA".to_owned(),
            format!("Removed: through the QwenPaw at {api}: it no longer watches or delivers"),
            format!(
                "Imported 2 jobs from {} into {} (1 still watched); 0 already there, 0 skipped.",
                state.display(),
                env.state.display()
            ),
            "Tools enabled for: QA (watch_agent_task, watch_agent_tasks, callback_task_status, cancel_task_callback)".to_owned(),
            format!("No restart needed: the QwenPaw at {api} loaded the plugin."),
        ],
    );
    assert!(!seed.exists(), "the seed's folder is still there");
    // The removal went out before the install.
    let methods: Vec<String> = server
        .requests()
        .into_iter()
        .filter(|r| r.method != "GET")
        .map(|r| r.method)
        .collect();
    assert_eq!(methods, ["DELETE", "POST"]);
    // atc's tools for QA only.
    assert_eq!(tools_of(&wd, "QA")["watch_agent_tasks"]["enabled"], true);
    assert!(tools_of(&wd, "default").get("watch_agent_task").is_none());
    // atc watches the pending job; the done one is history.
    let jobs = env.jobs();
    let status = |t: &str| {
        jobs.iter()
            .find(|j| j["task_id"] == t)
            .map(|j| j["status"].clone())
    };
    assert_eq!(status("task-aaaaaaaaaaaa"), Some(json!("pending")));
    assert_eq!(status("task-bbbbbbbbbbbb"), Some(json!("done")));
    // The old state file: the pending job handed over, the done one as it was; a copy of
    // the file as it was beside it.
    let marked: Value = serde_json::from_str(&fs::read_to_string(&state).unwrap()).unwrap();
    assert_eq!(marked["jobs"]["task-aaaaaaaaaaaa"]["status"], "cancelled");
    assert_eq!(marked["jobs"]["task-aaaaaaaaaaaa"]["handed_over_to"], "atc");
    assert_eq!(marked["jobs"]["task-bbbbbbbbbbbb"]["status"], "done");
    let backups: Vec<PathBuf> = fs::read_dir(&wd)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("agent-task-callback.json.before-atc-")
        })
        .collect();
    assert_eq!(backups.len(), 1, "{backups:?}");
    let backup: Value = serde_json::from_str(&fs::read_to_string(&backups[0]).unwrap()).unwrap();
    assert_eq!(backup, seed_state);

    // Again: nothing to replace (exit 1), nothing changed.
    replacing(&env, &wd, &[])
        .status(1)
        .stderr(format!(
            "atc: the Agent Task Callback plugin is not installed in {shown} (no plugins/ folder with id \"agent-task-callback\") and its state file {} holds no job it still watches: nothing to replace; `atc qwenpaw install` installs atc's plugin\n",
            state.display()
        ))
        .file_unchanged()
        .run();
}

/// A working dir with the seed installed and its state file holding one pending job (on
/// agent QA, chat s-1), and a fake server for it: (server, env, working dir, seed folder,
/// state file).
fn seed_in_place(
    delete: Reply,
    atc_loaded: bool,
) -> (FakeQwenPaw, TestEnv, PathBuf, PathBuf, PathBuf) {
    let server = FakeQwenPaw::start();
    server.answer("GET", "/api/version", 200, r#"{"version":"2.2.2.post1"}"#);
    server.on(
        "GET",
        "/api/plugins/atc/status",
        vec![if atc_loaded {
            Reply::json(200, r#"{"id":"atc","loaded":true}"#)
        } else {
            Reply::json(404, r#"{"detail":"Plugin 'atc' not found."}"#)
        }],
    );
    server.on("DELETE", "/api/plugins/agent-task-callback", vec![delete]);
    server.answer(
        "POST",
        "/api/plugins/install",
        200,
        r#"{"id":"atc","loaded":true}"#,
    );
    let env = TestEnv::new();
    let wd = working_dir(&env, Some(server.port()));
    let seed = wd.join("plugins/agent-task-callback");
    fs::create_dir_all(&seed).unwrap();
    fs::write(
        seed.join("plugin.json"),
        json!({"id": "agent-task-callback", "name": "Agent Task Callback", "version": "0.1.5"})
            .to_string(),
    )
    .unwrap();
    let recent = support::unix_secs_ago(60);
    let state = wd.join("agent-task-callback.json");
    fs::write(
        &state,
        json!({"jobs": {"task-aaaaaaaaaaaa": {"task_id": "task-aaaaaaaaaaaa", "status": "pending", "agent_id": "QA", "session_id": "s-1", "user_id": "u", "channel": "console", "registered_at": recent}}})
            .to_string(),
    )
    .unwrap();
    (server, env, wd, seed, state)
}

/// The seed cannot be removed (the server refuses): the import is rolled back, so its jobs
/// stay the seed's alone (never watched by both), its state file and folder untouched.
#[test]
fn a_seed_the_server_will_not_remove_leaves_its_jobs_with_it_and_atc_imports_nothing() {
    let (server, env, wd, seed, state) = seed_in_place(
        Reply::json(500, r#"{"detail":"Internal Server Error"}"#),
        false,
    );
    let before = fs::read(&state).unwrap();
    replacing(&env, &wd, &[])
        .status(1)
        .stderr(format!(
            "atc: the QwenPaw at {} did not remove the Agent Task Callback plugin (HTTP 500 {{\"detail\":\"Internal Server Error\"}}); nothing was changed\n",
            server.api()
        ))
        .no_file()
        .run();
    assert!(seed.join("plugin.json").is_file());
    assert_eq!(
        fs::read(&state).unwrap(),
        before,
        "the seed's state changed"
    );
    // Only the removal was tried: no install after it.
    let methods: Vec<String> = server
        .requests()
        .into_iter()
        .filter(|r| r.method != "GET")
        .map(|r| r.method)
        .collect();
    assert_eq!(methods, ["DELETE"]);
}

/// atc's job file cannot take the import (here: it is not a job file): the seed is never
/// removed, so its jobs are never watched by nobody (the old order removed it first).
#[test]
fn a_job_file_that_cannot_take_the_import_leaves_the_seed_in_place() {
    let (server, env, wd, seed, state) = seed_in_place(Reply::json(200, "{}"), false);
    fs::create_dir_all(env.state.parent().unwrap()).unwrap();
    fs::write(&env.state, b"{ not a job file").unwrap();
    let before = fs::read(&state).unwrap();
    replacing(&env, &wd, &[])
        .status(3)
        .stderr_inspected()
        .file_unchanged()
        .run();
    assert!(seed.join("plugin.json").is_file(), "the seed was removed");
    assert_eq!(fs::read(&state).unwrap(), before);
    assert!(
        server.requests().iter().all(|r| r.method == "GET"),
        "{:?}",
        server.requests()
    );
}

/// The seed gone (by hand, or by a run that could not save) while its state file still
/// holds a job it watched: the rerun imports it and marks it, instead of "nothing to
/// replace" (which left it watched by nobody).
#[test]
fn a_rerun_after_the_seed_is_gone_imports_the_jobs_its_state_file_still_owes() {
    let (server, env, wd, seed, state) = seed_in_place(Reply::json(200, "{}"), false);
    fs::remove_dir_all(&seed).unwrap();
    let shown = wd.display().to_string();
    let out = replacing(&env, &wd, &[]).stdout_inspected().run();
    said_each(
        &out,
        [
            format!(
                "The Agent Task Callback plugin is not installed in {shown}, but its state file {} still holds 1 job nobody moved to atc",
                state.display()
            ),
            format!(
                "Imported 1 job from {} into {} (1 still watched); 0 already there, 0 skipped.",
                state.display(),
                env.state.display()
            ),
        ],
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(!said.contains("Removed:"), "{said}");
    let jobs = env.jobs();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0]["status"], "pending");
    let marked: Value = serde_json::from_str(&fs::read_to_string(&state).unwrap()).unwrap();
    assert_eq!(marked["jobs"]["task-aaaaaaaaaaaa"]["handed_over_to"], "atc");
    // No DELETE: there was nothing to remove.
    assert!(
        server.requests().iter().all(|r| r.method != "DELETE"),
        "{:?}",
        server.requests()
    );
}

/// The seed's state file: absent, nothing to import and the seed still goes; there but
/// unusable (not UTF-8, a directory), refused before anything changes.
#[test]
fn a_seed_without_a_state_file_is_replaced_and_one_with_an_unusable_one_is_left() {
    for unusable in [&b"{\"jobs\": \"\xff\"}"[..], b"dir"] {
        let (server, env, wd, seed, state) = seed_in_place(Reply::json(200, "{}"), false);
        let why = if unusable == b"dir" {
            fs::remove_file(&state).unwrap();
            fs::create_dir(&state).unwrap();
            "Is a directory (os error 21)"
        } else {
            fs::write(&state, unusable).unwrap();
            "not UTF-8 text"
        };
        replacing(&env, &wd, &[])
            .status(1)
            .stderr(format!(
                "atc: cannot read the plugin's state file {}: {why}; nothing was changed\n",
                state.display()
            ))
            .no_file()
            .run();
        assert!(seed.join("plugin.json").is_file(), "the seed was removed");
        assert!(server.requests().iter().all(|r| r.method == "GET"));
    }

    let (server, env, wd, seed, state) = seed_in_place(Reply::json(200, "{}"), false);
    fs::remove_file(&state).unwrap();
    let out = replacing(&env, &wd, &[]).stdout_inspected().run();
    said_each(
        &out,
        [
            // None beside the working dir: the one in the home folder is looked for.
            format!(
                "No state file at {}: no jobs to import.",
                env.home.join(".qwenpaw/agent-task-callback.json").display()
            ),
            format!(
                "Removed: through the QwenPaw at {}: it no longer watches or delivers",
                server.api()
            ),
        ],
    );
    assert!(!seed.exists(), "the seed's folder is still there");
    assert!(!state.exists(), "a state file was made");
}

/// The job file cannot be saved once the seed is gone (here it lived in the seed's own
/// folder, which the removal took): atc says the seed is gone already and that running
/// the command again imports its jobs, which are still pending in its state file.
#[test]
fn a_save_that_fails_after_the_seed_is_removed_says_how_to_finish() {
    let (_server, env, wd, seed, state) = seed_in_place(Reply::json(200, "{}"), false);
    let before = fs::read(&state).unwrap();
    let job_file = seed.join("jobs.json");
    let out = replacing(&env, &wd, &[])
        .env("ATC_STATE", &job_file)
        .status(4)
        .stderr_inspected()
        .run();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.starts_with("atc: ")
            && said.ends_with(&format!(
                "; the Agent Task Callback plugin is removed already and its jobs are still pending in {}: run this command again once the job file can be written, it imports them then\n",
                state.display()
            )),
        "{said}"
    );
    assert!(!seed.exists() && !job_file.exists());
    assert_eq!(fs::read(&state).unwrap(), before, "nothing marked");
}

/// A newcomer's migration (issue 36): the dry run says the counts the real run then says,
/// in the future tense, from atc's job file as it is (a job atc already holds is "already
/// there" in both), and changes nothing.
#[test]
fn the_dry_run_of_a_replacement_counts_what_the_real_run_then_does() {
    let (_server, env, wd, _seed, state) = seed_in_place(Reply::json(200, "{}"), false);
    // A second job in the seed's state file, which atc already watches.
    let mut seed_state: Value = serde_json::from_str(&fs::read_to_string(&state).unwrap()).unwrap();
    let mut other = seed_state["jobs"]["task-aaaaaaaaaaaa"].clone();
    other["task_id"] = json!("task-cccccccccccc");
    seed_state["jobs"]["task-cccccccccccc"] = other;
    fs::write(&state, seed_state.to_string()).unwrap();
    env.atc(["watch", "task-cccccccccccc", "--session", "s-1"])
        .chat_check_skipped()
        .stdout_contains("Watching")
        .run();
    let counts = format!(
        "1 job from {} into {} (1 {{}}); 1 already there, 0 skipped.",
        state.display(),
        env.state.display()
    );
    let out = replacing(&env, &wd, &["--dry-run"])
        .stdout_inspected()
        .file_unchanged()
        .run();
    said_each(
        &out,
        [
            format!("Would import {}", counts.replace("{}", "to be watched")),
            format!(
                "Would mark 2 jobs handed over to atc in {}, a copy of it beside it first.",
                state.display()
            ),
        ],
    );
    assert_eq!(
        fs::read_to_string(&state).unwrap(),
        seed_state.to_string(),
        "a dry run marks nothing"
    );
    let out = replacing(&env, &wd, &[]).stdout_inspected().run();
    let said = String::from_utf8_lossy(&out.stdout);
    for line in [
        format!("Imported {}", counts.replace("{}", "still watched")),
        format!(
            "Marked 2 jobs handed over to atc in {} (as it was before: ",
            state.display()
        ),
    ] {
        assert!(
            said.lines().any(|l| l.starts_with(&line)),
            "no {line:?} in\n{said}"
        );
    }
    // Each import says what came in in the log, with the status it came in as.
    let log = env.logged(&["--all"]);
    let imported: Vec<(&str, &str)> = log
        .iter()
        .filter(|e| e["event"] == "imported")
        .map(|e| {
            (
                e["task_id"].as_str().unwrap(),
                e["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(imported, [("task-aaaaaaaaaaaa", "pending")]);

    // A state file that owes nothing: the dry run says nothing would be marked.
    let (_server, env, wd, _seed, state) = seed_in_place(Reply::json(200, "{}"), false);
    let mut done = seed_state["jobs"]["task-aaaaaaaaaaaa"].clone();
    done["status"] = json!("done");
    done["final"] = json!("T");
    fs::write(
        &state,
        json!({"jobs": {"task-aaaaaaaaaaaa": done}}).to_string(),
    )
    .unwrap();
    let out = replacing(&env, &wd, &["--dry-run"])
        .stdout_inspected()
        .run();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("Would import 1 job from"), "{said}");
    assert!(!said.contains("Would mark"), "{said}");
}

/// atc's plugin loaded beside the seed (its zip installed first) got none of the tool
/// names the seed held: after the replacement the server loads it again, whether or not a
/// file changed, so every tool is offered without a restart.
#[test]
fn after_the_replacement_the_server_loads_atcs_plugin_again_for_its_tools() {
    let (server, env, wd, _seed, _state) = seed_in_place(Reply::json(200, "{}"), true);
    // atc's plugin as the zip left it: its files in place already.
    let plugin = wd.join("plugins/atc");
    for (name, text) in atc::install::PLUGIN_FILES {
        let file = plugin.join(name);
        fs::create_dir_all(file.parent().unwrap()).unwrap();
        fs::write(file, text).unwrap();
    }
    let out = replacing(&env, &wd, &[]).stdout_inspected().run();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.lines().any(|l| l
            == format!(
                "No restart needed: the QwenPaw at {} loaded the plugin.",
                server.api()
            )),
        "{said}"
    );
    let installs: Vec<Value> = server
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == "/api/plugins/install")
        .map(|r| r.json())
        .collect();
    assert_eq!(
        installs,
        [json!({"source": plugin.display().to_string(), "force": true})],
        "the plugin is loaded again, by force"
    );
}
