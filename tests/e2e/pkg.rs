//! Issue 28 on the real server: atc at home in QwenPaw in one step.
//!
//! - **plugin-zip**: a server started by its absolute path, whose PATH has no atc, whose
//!   environment serves the locally built wheel to pip (`PIP_FIND_LINKS`, `PIP_NO_INDEX`);
//!   `qwenpaw plugin install <the zip>` (QwenPaw's own CLI) makes its loader pip-install
//!   atc into the server's own venv; the tools are enabled by the documented step; no
//!   timer and no tick by the test: the model's `watch_agent_task` gets the child's result
//!   into the parent chat exactly once; `atc doctor` (the pip-installed one) is green; the
//!   plugin's own cadence delivers a watch on another server within two periods, and
//!   starts no periodic tick while a timer ticks; `qwenpaw plugin uninstall` removes the
//!   plugin and its skill and leaves the job file.
//! - **seed-migration**: a stand-in for the Agent Task Callback plugin
//!   (tests/e2e/seed/agent-task-callback: its id, tools, state file and watcher threads),
//!   its tools enabled for one agent of two, a pending and a done job → `atc qwenpaw
//!   install --replace-agent-task-callback` → the old plugin is gone, atc's tools are
//!   enabled for that agent only, the pending job is delivered once, the done one never.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::R;
use crate::atc::{Atc, logging_wrapper};
use crate::ensure;
use crate::plugin::{ATC_TOOLS, builtin_tools, call_tool, watch_by_tool, watched_child};
use crate::procs::Output;
use crate::qwenpaw::{Server, ServerOptions, e2e_dir};
use crate::scenarios::{Ctx, delivered_into};

const TURN_WAIT: Duration = Duration::from_secs(60);
/// The plugin's cadence on the zip server (ATC_CADENCE; 20 s by default).
const PERIOD: Duration = Duration::from_secs(5);
/// A PATH with the system's directories only: no atc, no venv bin/.
const CLEAN_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The wheel .ci/run built (ATC_E2E_WHEEL), else one built now by tests/wheel.sh.
fn wheel() -> R<PathBuf> {
    if let Some(path) = std::env::var_os("ATC_E2E_WHEEL").map(PathBuf::from) {
        ensure!(
            path.is_file(),
            "ATC_E2E_WHEEL={} is no file",
            path.display()
        );
        return Ok(path);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/wheel.sh");
    eprintln!("e2e: building the wheel (tests/wheel.sh; .ci/run passes ATC_E2E_WHEEL instead)");
    let out = Command::new("bash")
        .arg(&script)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    ensure!(
        out.status.success(),
        "tests/wheel.sh failed ({})",
        out.status
    );
    let path = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or("")
        .trim()
        .to_string();
    Ok(PathBuf::from(path))
}

/// The job file `<dir>/state/jobs.json`, its directory made (private, 0700).
fn private_state(dir: &Path) -> R<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let state_dir = dir.join("state");
    fs::create_dir_all(&state_dir).map_err(|e| e.to_string())?;
    fs::set_permissions(&state_dir, fs::Permissions::from_mode(0o700))
        .map_err(|e| e.to_string())?;
    Ok(state_dir.join("jobs.json"))
}

/// A server started by its absolute path, PATH [`CLEAN_PATH`], its job file `state`, pip
/// offline (`PIP_NO_INDEX`), the plugin's cadence [`PERIOD`]; `python` and `more` as given.
fn offline_server(
    ctx: &Ctx,
    name: &str,
    state: &Path,
    python: Option<PathBuf>,
    more: Vec<(String, String)>,
) -> R<Server> {
    let mut env = vec![
        ("ATC_STATE".into(), state.display().to_string()),
        ("PIP_NO_INDEX".into(), "1".into()),
        ("ATC_CADENCE".into(), format!("{}s", PERIOD.as_secs())),
    ];
    env.extend(more);
    let options = ServerOptions {
        python,
        path: Some(CLEAN_PATH.into()),
        by_absolute_path: true,
        env,
        ..ServerOptions::default()
    };
    Server::create(name, &ctx.venv, &ctx.llm, options)
}

/// A server for the Agent Task Callback stand-in (it polls every 2 s), its job file
/// `state`, the plugin's cadence 5 s; the rest as `options` say.
fn seed_server(ctx: &Ctx, name: &str, state: &Path, mut options: ServerOptions) -> R<Server> {
    options.env.extend([
        ("ATC_STATE".into(), state.display().to_string()),
        ("SEED_POLL_SECONDS".into(), "2".into()),
        ("ATC_CADENCE".into(), "5s".into()),
    ]);
    Server::create(name, &ctx.venv, &ctx.llm, options)
}

/// `result`, with the tail of `server`'s log on stderr when it is an error.
fn with_log(server: &Server, result: R<()>) -> R<()> {
    if result.is_err() {
        eprintln!("e2e: {} server log: {}", server.name, server.log_tail());
    }
    result
}

/// Enables the Agent Task Callback plugin's tools for `default` in working dir `wd`.
fn enable_seed_tools(wd: &Path) -> R<()> {
    let agent_json = wd.join("workspaces/default/agent.json");
    let mut agent: Value =
        serde_json::from_str(&fs::read_to_string(&agent_json).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    for tool in [
        "watch_agent_task",
        "callback_task_status",
        "cancel_task_callback",
    ] {
        agent["tools"]["builtin_tools"][tool]["enabled"] = json!(true);
        agent["tools"]["builtin_tools"][tool]["name"] = json!(tool);
    }
    fs::write(&agent_json, agent.to_string()).map_err(|e| e.to_string())
}

/// The model in (`user`, `session`) has the old plugin's `watch_agent_task` watch `task`
/// on `target`: it must say it watches it.
fn seed_watch(server: &Server, user: &str, session: &str, task: &str, target: &str) -> R<()> {
    let said = watch_by_tool(server, session, user, task, target)?;
    ensure!(
        said.starts_with(&format!("Watching task {task}")),
        "the old plugin's watch_agent_task answered {said:?}"
    );
    Ok(())
}

/// `atc qwenpaw install --replace-agent-task-callback` for working dir `wd`: it must
/// print a line starting with each of `lines`.
fn replace_seed(atc: &Atc, wd: &Path, lines: &[String]) -> R<Output> {
    let wd_shown = wd.display().to_string();
    let out = atc.ok(&[
        "qwenpaw",
        "install",
        "--replace-agent-task-callback",
        "--working-dir",
        &wd_shown,
    ])?;
    for line in lines {
        ensure!(
            out.stdout.lines().any(|l| l.starts_with(line.as_str())),
            "no {line:?} in: {}",
            out.describe()
        );
    }
    Ok(out)
}

/// Waits until the job of `task` in `atc`'s file is `done`.
fn until_done(atc: &Atc, task: &str, timeout: Duration) -> R<Value> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(job) = atc.job(task)
            && job["status"] == "done"
        {
            return Ok(job);
        }
        ensure!(
            Instant::now() < deadline,
            "job {task} not done after {timeout:?}: {:?}",
            atc.job(task)
        );
        sleep(Duration::from_millis(200));
    }
}

/// The user turns of a chat that carry `task`'s result.
fn turns_of(server: &Server, user: &str, session: &str, task: &str) -> R<usize> {
    let marker = format!("[TASK_ID: {task}]");
    Ok(server
        .api()
        .history("default", user, session, TURN_WAIT)?
        .iter()
        .filter(|m| m.role == "user" && m.text.starts_with(&marker))
        .count())
}

/// `atc qwenpaw zip` (`--thin` too when `thin`) into `dir`, by the atc under test: the
/// zip's path.
fn make_zip(ctx: &Ctx, dir: &Path, thin: bool) -> R<PathBuf> {
    let maker = Atc::new(
        &ctx.atc_bin,
        dir,
        dir.join("unused.json"),
        "http://127.0.0.1:9",
    )?;
    let out = dir.to_str().unwrap_or("");
    let args: &[&str] = if thin {
        &["qwenpaw", "zip", "--thin", "--out", out]
    } else {
        &["qwenpaw", "zip", "--out", out]
    };
    let made = maker.ok(args)?;
    let zip = PathBuf::from(made.stdout.trim());
    ensure!(
        zip.is_file(),
        "atc {} printed {:?}",
        args.join(" "),
        made.stdout
    );
    Ok(zip)
}

/// QwenPaw's own `qwenpaw plugin install <source>` with the server's python and
/// environment (it finds the running server and hot-loads): it must say so.
fn plugin_install(server: &Server, bin: &Path, source: &Path, timeout: Duration) -> R<()> {
    let out = server.python(
        "qwenpaw plugin install",
        &[
            bin.join("qwenpaw").into(),
            "plugin".into(),
            "install".into(),
            source.into(),
        ],
        None,
        timeout,
    )?;
    ensure!(
        out.status.success() && out.stdout.contains("installed and loaded (hot reload)"),
        "qwenpaw plugin install {}: {}",
        source.display(),
        out.describe()
    );
    Ok(())
}

/// The README's one step that enables the tools, with the atc the plugin carries: its
/// line, as written there (a test runs what the README says).
fn readme_enable_line() -> R<String> {
    let readme = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .map_err(|e| e.to_string())?;
    readme
        .lines()
        .find(|l| l.contains("/plugins/atc/bin/atc\" qwenpaw install --all"))
        .map(|l| l.split("  #").next().unwrap_or(l).trim().to_string())
        .ok_or_else(|| {
            "README.md has no `…/plugins/atc/bin/atc\" qwenpaw install --all` line".into()
        })
}

/// Waits for `task`'s result in the parent chat, then a little longer: exactly once.
fn arrives_once(server: &Server, user: &str, session: &str, task: &str) -> R<()> {
    let api = server.api();
    let deadline = Instant::now() + TURN_WAIT;
    while api.results_in(user, session, task)? == 0 {
        ensure!(
            Instant::now() < deadline,
            "the result of {task} never arrived in the parent chat"
        );
        sleep(Duration::from_millis(200));
    }
    sleep(Duration::from_secs(4));
    let n = api.results_in(user, session, task)?;
    ensure!(
        n == 1,
        "the result of {task} is in the parent chat {n} times"
    );
    Ok(())
}

/// The model's turn in (`user`, `session`) on `default` that calls `submit_to_agent` (the
/// fake LLM's `CALLTOOL:`) with `child` for agent `target`. Returns the task it submitted.
fn submitting_turn(
    server: &Server,
    user: &str,
    session: &str,
    target: &str,
    child: &str,
) -> R<String> {
    let api = server.api();
    let text =
        format!(r#"CALLTOOL: submit_to_agent {{"to_agent": "{target}", "text": "{child}"}}"#);
    // A result delivered a moment ago may still be running its turn: wait for idle.
    api.history("default", user, session, TURN_WAIT)?;
    let turn = api.submit(Some("default"), session, user, &text, None)?;
    let (payload, _) = api.wait_finished(&turn, TURN_WAIT)?;
    ensure!(
        payload["result"]["status"] == "completed",
        "the parent's turn did not complete: {payload}"
    );
    // This turn's own output (submit_to_agent's answer), not a result delivered earlier.
    let output = payload["result"]["output"].to_string();
    output
        .split("[TASK_ID:")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .map(|t| t.trim().to_string())
        .ok_or_else(|| format!("no [TASK_ID: …] in the turn's output: {output}"))
}

/// Issue 33: the zip as any user can have it today. `atc qwenpaw zip` (it carries the atc
/// that made it), then QwenPaw's own `qwenpaw plugin install <zip>` on a server whose pip
/// reaches **no** package index (`PIP_NO_INDEX=1`, no find-links) and is the venv's own
/// old one, with no atc anywhere (not next to its interpreter, not on its PATH, no
/// ATC_BIN, no ~/.cargo/bin): the plugin runs the atc it carries. The README's step
/// enables the tools with that atc; a parent's background `submit_to_agent` comes back
/// into its chat exactly once with no tick by the test; `atc doctor` names the atc the
/// plugin carries; the plugin's cadence works; QwenPaw's uninstall leaves the job file.
pub fn plugin_zip(ctx: &Ctx) -> R<()> {
    let dir = ctx.fresh_dir("zip")?;
    let zip = make_zip(ctx, &dir, false)?;
    ensure!(
        zip.file_name()
            .is_some_and(|n| n.to_string_lossy().ends_with(&format!(
                "-{}-{}.zip",
                std::env::consts::OS,
                std::env::consts::ARCH
            ))),
        "atc qwenpaw zip named it {}",
        zip.display()
    );

    // No atc anywhere the plugin could find one but in the zip.
    let bin = ctx.venv.bin();
    ensure!(
        !bin.join("atc").exists(),
        "the e2e venv has an atc of its own: {}",
        bin.join("atc").display()
    );
    let found = Command::new("sh")
        .args(["-c", "command -v atc"])
        .env_clear()
        .env("PATH", CLEAN_PATH)
        .output()
        .map_err(|e| e.to_string())?;
    ensure!(
        !found.status.success(),
        "atc is on the clean PATH already: {}",
        String::from_utf8_lossy(&found.stdout)
    );
    let state = private_state(&dir)?;
    let mut server = offline_server(ctx, "zip", &state, None, Vec::new())?;
    let result = zip_route(ctx, &mut server, &zip, &bin, &state, &dir);
    with_log(&server, result)
}

fn zip_route(
    ctx: &Ctx,
    server: &mut Server,
    zip: &Path,
    bin: &Path,
    state: &Path,
    dir: &Path,
) -> R<()> {
    let wd = server.dir.path().join("home/.qwenpaw");
    let api = server.api();
    let old_pip = server.python(
        "pip --version",
        &["-m".into(), "pip".into(), "--version".into()],
        None,
        Duration::from_secs(60),
    )?;
    eprintln!("e2e: plugin-zip: the server's {}", old_pip.stdout.trim());

    // QwenPaw's own CLI installs the zip: nothing for pip to fetch.
    plugin_install(server, bin, zip, Duration::from_secs(300))?;
    let carried = wd.join("plugins/atc/bin/atc");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(&carried)
            .map_err(|e| format!("{}: {e}", carried.display()))?
            .permissions()
            .mode();
        ensure!(
            mode & 0o100 != 0,
            "the plugin did not make the atc it carries executable (mode {mode:o})"
        );
    }
    let status = api.get("/api/plugins/atc/status", None)?;
    ensure!(
        status.status == 200 && status.json()?["loaded"] == true,
        "plugin not loaded: {} {}",
        status.status,
        status.body
    );
    let skill_of = |agent: &str| {
        wd.join("workspaces")
            .join(agent)
            .join("skills/atc-callback/SKILL.md")
    };
    for agent in &server.agents {
        ensure!(
            skill_of(agent).is_file(),
            "no atc-callback skill in {}",
            skill_of(agent).display()
        );
    }

    // The README's step, as written there, with the atc the plugin carries.
    let line = readme_enable_line()?;
    let home = server.dir.path().join("home");
    let enabled = Command::new("sh")
        .args(["-c", &line])
        .env_clear()
        .env("PATH", CLEAN_PATH)
        .env("HOME", &home)
        .env("ATC_STATE", state)
        .output()
        .map_err(|e| e.to_string())?;
    let said = String::from_utf8_lossy(&enabled.stdout);
    ensure!(
        enabled.status.success() && said.contains("has this plugin loaded."),
        "the README's `{line}` (rc {:?}): {said} {}",
        enabled.status.code(),
        String::from_utf8_lossy(&enabled.stderr)
    );

    // The model submits a background task; nobody watches it by hand, nothing ticks.
    let target = server.second_agent()?;
    let (user, parent) = ("zoe", "zip-parent");
    api.make_parent("default", user, parent)?;
    let child = submitting_turn(
        server,
        user,
        parent,
        &target,
        "child of the zip's plugin SLEEP=3",
    )?;
    arrives_once(server, user, parent, &child)?;
    let atc = Atc::new(&carried, dir, state.to_path_buf(), &server.root())?;
    let job = atc.job(&child)?;
    ensure!(
        job["origin"] == "auto" && job["status"] == "done",
        "the job: {job}"
    );

    // atc doctor, the carried one: it names itself as the server's atc.
    let wd_shown = wd.display().to_string();
    let doctor = atc.run_env(&["doctor"], &[("QWENPAW_WORKING_DIR", &wd_shown)])?;
    ensure!(
        doctor.stdout.contains(&format!(
            "✓ atc for the server: the server finds {} (the atc its plugin carries, first in its order)",
            carried.display()
        )),
        "atc doctor does not name the carried atc: {}",
        doctor.describe()
    );

    // The cadence: a wrapper in the carried atc's place logs what the plugin starts.
    let real = carried.with_file_name("atc.real");
    let starts = dir.join("plugin-starts.log");
    fs::rename(&carried, &real).map_err(|e| e.to_string())?;
    logging_wrapper(&carried, &starts, &real)?;
    let by_hand = Atc::new(&ctx.atc_bin, dir, state.to_path_buf(), &server.root())?;
    let cadence = cadence_part(ctx, &by_hand, state, &starts);
    fs::rename(&real, &carried).map_err(|e| e.to_string())?;
    cadence?;

    uninstall(server, bin, state, &wd)
}

/// QwenPaw's own uninstall removes the plugin and its skill, and leaves the job file.
fn uninstall(server: &mut Server, bin: &Path, state: &Path, wd: &Path) -> R<()> {
    let api = server.api();
    let out = server.python(
        "qwenpaw plugin uninstall atc",
        &[
            bin.join("qwenpaw").into(),
            "plugin".into(),
            "uninstall".into(),
            "atc".into(),
        ],
        Some(b"y\n"),
        Duration::from_secs(120),
    )?;
    ensure!(
        out.stdout.contains("uninstalled"),
        "qwenpaw plugin uninstall: {}",
        out.describe()
    );
    let status = api.get("/api/plugins/atc/status", None)?;
    ensure!(
        status.status == 404,
        "after uninstall: {} {}",
        status.status,
        status.body
    );
    for agent in &server.agents {
        let skill = wd
            .join("workspaces")
            .join(agent)
            .join("skills/atc-callback/SKILL.md");
        ensure!(!skill.exists(), "the skill is still in {}", skill.display());
    }
    ensure!(state.is_file(), "the job file went with the plugin");
    server.stop();
    Ok(())
}

/// The thin zip (`atc qwenpaw zip --thin`), the route once a release's wheels are on the
/// index: a server started by its absolute path, whose PATH has no atc, whose environment
/// serves the locally built wheel to pip (`PIP_FIND_LINKS`, `PIP_NO_INDEX`), its pip new
/// enough for QwenPaw's loader; `qwenpaw plugin install <the zip>` makes the loader
/// pip-install atc into the server's own venv; the pip-installed atc enables the tools;
/// the model's `watch_agent_task` gets the child's result into the parent chat exactly
/// once; `atc doctor` (the pip-installed one) is green.
pub fn plugin_zip_thin(ctx: &Ctx) -> R<()> {
    let dir = ctx.fresh_dir("thin")?;
    let wheel = wheel()?;
    let zip = make_zip(ctx, &dir, true)?;

    // The server's own venv, by absolute path, nothing of atc on its PATH.
    let python = ctx.venv.layered(&dir.join("venv"))?;
    let bin = python.parent().ok_or("no bin")?.to_path_buf();
    let state = private_state(&dir)?;
    let wheels = wheel.parent().ok_or("no wheel dir")?;
    let links = ("PIP_FIND_LINKS".into(), wheels.display().to_string());
    let mut server = offline_server(ctx, "thin", &state, Some(python), vec![links])?;
    let result = thin_route(ctx, &mut server, &zip, &bin, &state, &dir);
    with_log(&server, result)
}

fn thin_route(
    ctx: &Ctx,
    server: &mut Server,
    zip: &Path,
    bin: &Path,
    state: &Path,
    dir: &Path,
) -> R<()> {
    let wd = server.dir.path().join("home/.qwenpaw");
    let api = server.api();

    // QwenPaw's own CLI installs the zip; its loader pip-installs atc from the wheel.
    plugin_install(server, bin, zip, Duration::from_secs(400))?;
    let atc_bin = bin.join("atc");
    ensure!(
        atc_bin.is_file(),
        "the loader did not put atc next to the server's python ({})",
        atc_bin.display()
    );
    ensure!(
        !wd.join("plugins/atc/bin").exists(),
        "the thin zip carried an atc"
    );

    // The pip-installed atc enables the tools.
    let home = dir.join("pip-atc");
    fs::create_dir_all(&home).map_err(|e| e.to_string())?;
    let atc = Atc::new(&atc_bin, &home, state.to_path_buf(), &server.root())?;
    let wd_shown = wd.display().to_string();
    let enabled = atc.ok(&["qwenpaw", "install", "--all", "--working-dir", &wd_shown])?;
    ensure!(
        enabled.stdout.contains("has this plugin loaded.")
            && !wd.join("skill_pool/atc-callback").exists(),
        "enabling the tools: {} (skill pool written: {})",
        enabled.describe(),
        wd.join("skill_pool/atc-callback").exists()
    );

    // The model watches a child through the tool; no timer, no tick by the test.
    let target = server.second_agent()?;
    let (user, parent) = ("zoe", "thin-parent");
    api.make_parent("default", user, parent)?;
    let child_text = "child watched from the thin zip's plugin";
    let text = format!("{child_text} SLEEP=4");
    let child = watched_child(ctx, server, (parent, user), &target, "thin-child", &text)?;
    let before = api.history("default", user, parent, TURN_WAIT)?.len();
    let job = until_done(&atc, &child, TURN_WAIT)?;
    let text = job["final"].as_str().unwrap_or_default().to_string();
    ensure!(text.contains(child_text), "delivered {text:?}");
    delivered_into(&api, user, parent, before, &text, &atc.turn_of(&job)?)?;
    // The schema the model was offered: every list has typed items.
    let offered: Vec<Value> = ctx
        .llm
        .requests()
        .into_iter()
        .flat_map(|r| r["tools"].as_array().cloned().unwrap_or_default())
        .filter(|t| t["function"]["name"] == "watch_agent_tasks")
        .collect();
    ensure!(!offered.is_empty(), "no request offered watch_agent_tasks");
    for tool in &offered {
        let items = &tool["function"]["parameters"]["properties"]["task_ids"]["items"];
        ensure!(items["type"] == "string", "task_ids items untyped: {tool}");
    }

    // atc doctor, the pip-installed one, is green: it finds atc next to the server's
    // interpreter (the server has no ATC_BIN and no atc on its PATH).
    let doctor = atc.run_env(&["doctor"], &[("QWENPAW_WORKING_DIR", &wd_shown)])?;
    ensure!(
        doctor.status.success()
            && doctor.stdout.contains(&format!(
                "✓ atc for the server: the server (pid {}) finds {} (next to its interpreter)",
                server.pid().unwrap_or(0),
                atc_bin.display()
            )),
        "atc doctor is not green: {}",
        doctor.describe()
    );
    uninstall(server, bin, state, &wd)
}

/// The plugin's own cadence on a watch no turn's end here announces (its child and
/// parent live on the main server), then standing by while a timer ticks.
fn cadence_part(ctx: &Ctx, atc: &Atc, state: &Path, starts: &Path) -> R<()> {
    let main = &ctx.main;
    let api = main.api();
    let (user, parent) = ("yan", "zip-cadence");
    let chat = api.parent_chat("default", user, parent)?;
    let by_hand = Atc::new(&ctx.atc_bin, &atc.home, state.to_path_buf(), &main.root())?;
    let child = ctx.child(
        &api,
        "default",
        "cadence-child",
        "default",
        "cadence child SLEEP=2",
    )?;
    by_hand.ok(&["watch", &child, "--session", parent, "--user", user])?;
    let took = crate::kick::latency(main, &chat, &child, Duration::from_secs(60))?;
    eprintln!(
        "e2e: plugin-zip: the cadence delivered {:.1} s after the child finished",
        took.as_secs_f64()
    );
    ensure!(
        took <= 2 * PERIOD,
        "delivered {took:?} after the child finished (want within two periods, {:?})",
        2 * PERIOD
    );
    let seen = fs::read_to_string(starts).unwrap_or_default();
    ensure!(
        // The cadence's tick: `--json`, so the plugin can log its give-ups.
        seen.lines().any(|l| l == "tick --json"),
        "the plugin started no periodic tick: {seen:?}"
    );
    ensure!(
        turns_of(main, user, parent, &child)? == 1,
        "not exactly one delivered turn"
    );

    // A timer ticks (every 2 s, the test's): the plugin stands by, with work waiting.
    let long = ctx.child(
        &api,
        "default",
        "cadence-long",
        "default",
        "long child SLEEP=40",
    )?;
    by_hand.ok(&["watch", &long, "--session", parent, "--user", user])?;
    let stop = std::sync::atomic::AtomicBool::new(false);
    let result = std::thread::scope(|scope| -> R<()> {
        let (ticker, stop_ref) = (by_hand.clone(), &stop);
        scope.spawn(move || {
            while !stop_ref.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = ticker.run_env(&["tick"], &[]);
                sleep(Duration::from_secs(2));
            }
        });
        let outcome = (|| -> R<()> {
            // One period for the plugin to see the timer, then three of standing by.
            sleep(PERIOD + Duration::from_secs(1));
            fs::write(starts, "").map_err(|e| e.to_string())?;
            sleep(3 * PERIOD);
            let seen = fs::read_to_string(starts).unwrap_or_default();
            ensure!(
                !seen.lines().any(|l| l == "tick --json"),
                "the plugin started periodic ticks while a timer ticked: {seen:?}"
            );
            let doctor = by_hand.run_env(&["doctor"], &[])?;
            ensure!(
                doctor.stdout.contains(
                    "✓ cadence: a system timer: a tick atc's QwenPaw plugin did not start ran"
                ),
                "doctor does not say a timer ticks: {}",
                doctor.describe()
            );
            Ok(())
        })();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        outcome
    });
    by_hand.ok(&["cancel", &long])?;
    result
}

pub fn seed_migration(ctx: &Ctx) -> R<()> {
    let dir = ctx.fresh_dir("seed")?;
    let state = private_state(&dir)?;
    let atc_bin = ("ATC_BIN".into(), ctx.atc_bin.display().to_string());
    let options = ServerOptions {
        env: vec![atc_bin],
        ..ServerOptions::default()
    };
    let server = seed_server(ctx, "seed", &state, options)?;
    with_log(&server, migrate(ctx, &server, &dir, &state))
}

fn migrate(ctx: &Ctx, server: &Server, dir: &Path, state: &Path) -> R<()> {
    let api = server.api();
    let wd = server.dir.path().join("home/.qwenpaw");
    let target = server.second_agent()?;
    let (user, parent) = ("sam", "seed-parent");
    api.make_parent("default", user, parent)?;

    // A job the old plugin delivered already (its child really finished).
    let done = ctx.child(
        &api,
        &target,
        "seed-done",
        "default",
        "seed child already delivered",
    )?;
    api.wait_finished(&done, TURN_WAIT)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_secs_f64();
    let seed_state = wd.join("agent-task-callback.json");
    fs::write(
        &seed_state,
        json!({"jobs": {done.clone(): {
            "task_id": done, "status": "done", "agent_id": "default", "target_agent": target,
            "session_id": parent, "user_id": user, "channel": "console", "registered_at": now,
            "base": format!("{}/api", server.root()), "final": "(delivered by the old plugin)",
            "completed_at": now
        }}})
        .to_string(),
    )
    .map_err(|e| e.to_string())?;

    // The old plugin, installed by QwenPaw's CLI; its tools enabled for `default` only.
    let seed = e2e_dir().join("seed/agent-task-callback");
    plugin_install(server, &ctx.venv.bin(), &seed, Duration::from_secs(120))?;
    enable_seed_tools(&wd)?;

    // A pending job: the model watches a running child through the old tool.
    let text = "seed child still running SLEEP=12";
    let pending = ctx.child(&api, &target, "seed-pending", "default", text)?;
    seed_watch(server, user, parent, &pending, &target)?;

    // The one command.
    let atc = Atc::new(&ctx.atc_bin, dir, state.to_path_buf(), &server.root())?;
    let out = replace_seed(
        &atc,
        &wd,
        &[
            "Its tools are enabled for: default".to_owned(),
            format!(
                "Removed: through the QwenPaw at {}/api: it no longer watches or delivers",
                server.root()
            ),
            "Marked 1 job handed over to atc in".to_owned(),
            "Tools enabled for: default (".to_owned(),
            format!(
                "No restart needed: the QwenPaw at {}/api loaded the plugin.",
                server.root()
            ),
        ],
    )?;
    ensure!(
        out.stdout.contains("(1 still watched)"),
        "the pending job was not imported as watched: {}",
        out.stdout
    );
    let gone = api.get("/api/plugins/agent-task-callback/status", None)?;
    ensure!(
        gone.status == 404,
        "the old plugin is still there: {}",
        gone.body
    );
    let default_tools = builtin_tools(&wd, "default")?;
    for tool in ATC_TOOLS {
        ensure!(
            default_tools[tool]["enabled"] == true,
            "default: {tool} not enabled: {default_tools}"
        );
        ensure!(
            builtin_tools(&wd, &target)?[tool]["enabled"] != true,
            "{target}: {tool} enabled, but it never had the old tools"
        );
    }
    let marked: Value =
        serde_json::from_str(&fs::read_to_string(&seed_state).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    ensure!(
        marked["jobs"][&pending]["handed_over_to"] == "atc"
            && marked["jobs"][&done]["status"] == "done",
        "the old state file: {marked}"
    );

    // The pending result arrives once (atc delivers it), the done one never again; the
    // old plugin's watcher (polling every 2 s) is gone.
    until_done(&atc, &pending, TURN_WAIT)?;
    sleep(Duration::from_secs(6));
    let once = turns_of(server, user, parent, &pending)?;
    let never = turns_of(server, user, parent, &done)?;
    ensure!(
        once == 1 && never == 0,
        "the pending result arrived {once} times (want 1), the done one {never} times (want 0)"
    );
    Ok(())
}

/// Issue 33: atc's zip installed as the README says while the Agent Task Callback plugin
/// (the stand-in) is installed and watching. atc's plugin stands by (QwenPaw's log says
/// so): the turn that submits a child is watched by nobody but the seed's tool, so every
/// child the seed watches arrives once (atc posting it too was the double delivery).
/// Then the README's replacement, run with the atc the plugin carries: the child still
/// running moves to atc, atc's tools are offered without a restart, and every result,
/// before and after the move, is in the parent chat exactly once.
pub fn seed_beside_zip(ctx: &Ctx) -> R<()> {
    let dir = ctx.fresh_dir("beside")?;
    let zip = make_zip(ctx, &dir, false)?;
    let state = private_state(&dir)?;
    let options = ServerOptions {
        path: Some(CLEAN_PATH.into()),
        ..ServerOptions::default()
    };
    let server = seed_server(ctx, "beside", &state, options)?;
    with_log(&server, beside(ctx, &server, &zip, &state))
}

fn beside(ctx: &Ctx, server: &Server, zip: &Path, state: &Path) -> R<()> {
    let api = server.api();
    let wd = server.dir.path().join("home/.qwenpaw");
    let bin = ctx.venv.bin();
    let target = server.second_agent()?;
    let (user, parent) = ("kim", "beside-parent");
    api.make_parent("default", user, parent)?;

    // The old plugin, its tools enabled for `default`.
    plugin_install(
        server,
        &bin,
        &e2e_dir().join("seed/agent-task-callback"),
        Duration::from_secs(120),
    )?;
    enable_seed_tools(&wd)?;
    // A result delivered a moment ago may still be running its turn: wait for idle.
    let watch = |task: &str| -> R<()> {
        api.history("default", user, parent, TURN_WAIT)?;
        seed_watch(server, user, parent, task, &target)
    };

    // A child the seed watches, then atc's zip, as the README installs it.
    let a = ctx.child(
        &api,
        &target,
        "beside-a",
        "default",
        "child A, the seed's SLEEP=6",
    )?;
    watch(&a)?;
    plugin_install(server, &bin, zip, Duration::from_secs(300))?;
    ensure!(
        server
            .log_text()
            .contains("atc plugin: standing by, delivering nothing"),
        "QwenPaw's log does not say atc stands by"
    );

    // The model submits B in the background (atc's turn end watches nothing) and has the
    // seed watch it.
    let b = submitting_turn(server, user, parent, &target, "child B SLEEP=2")?;
    watch(&b)?;
    arrives_once(server, user, parent, &a)?;
    arrives_once(server, user, parent, &b)?;
    let carried = wd.join("plugins/atc/bin/atc");
    let atc = Atc::new(
        &carried,
        &ctx.scratch.path().join(ctx.uniq("beside-atc")),
        state.to_path_buf(),
        &server.root(),
    )?;
    ensure!(
        !state.exists() || atc.jobs()?.is_empty(),
        "atc watched something while it stood by: {:?}",
        atc.jobs()
    );

    // C still runs, the seed's, when the move happens.
    let c = ctx.child(
        &api,
        &target,
        "beside-c",
        "default",
        "child C, moved to atc SLEEP=20",
    )?;
    watch(&c)?;
    let moved = replace_seed(
        &atc,
        &wd,
        &[
            "Tools enabled for: default (".to_owned(),
            format!(
                "No restart needed: the QwenPaw at {}/api loaded the plugin.",
                server.root()
            ),
        ],
    )?;
    ensure!(
        moved.stdout.contains("(1 still watched)"),
        "C was not moved to atc as watched: {}",
        moved.stdout
    );
    // atc's own tools now, without a restart: once the server has reloaded the agents
    // (QwenPaw does that after a plugin install, a moment after it answers), the tool
    // list offers them and a turn calls atc's.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let tools = api.get("/api/tools", Some("default"))?;
        let offered = tools.json().ok().is_some_and(|v| {
            v.as_array().is_some_and(|list| {
                list.iter()
                    .any(|t| t["name"] == "callback_task_status" && t["enabled"] == true)
            })
        });
        if offered {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "GET /api/tools does not offer callback_task_status: {}",
            tools.body
        );
        sleep(Duration::from_millis(500));
    }
    sleep(Duration::from_secs(3));
    api.history("default", user, parent, TURN_WAIT)?;
    let listed = call_tool(server, parent, user, "callback_task_status", &json!({}))?;
    ensure!(
        listed.contains(&format!("{c} | pending |")) && listed.contains("| registered="),
        "callback_task_status is not atc's: {listed:?}"
    );
    arrives_once(server, user, parent, &c)?;
    // A child submitted after the move: atc watches it by itself.
    let d = submitting_turn(server, user, parent, &target, "child D SLEEP=2")?;
    arrives_once(server, user, parent, &d)?;
    for task in [&a, &b] {
        let n = api.results_in(user, parent, task)?;
        ensure!(
            n == 1,
            "the result of {task} is in the parent chat {n} times"
        );
    }
    Ok(())
}
