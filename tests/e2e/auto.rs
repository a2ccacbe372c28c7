//! Issue 29 on the real server: every delegated task comes back by itself. A server of its
//! own ("auto") with atc's plugin installed by `atc qwenpaw install`, its atc a wrapper
//! (ATC_BIN) that logs every start, the plugin's cadence off: the test runs **no tick and
//! no timer** unless it says so. The parent's model (the fake LLM's `CALLTOOL:` and
//! `CALLTOOLS:` lines) calls `submit_to_agent` itself, and no watch tool; what delivers is
//! what the plugin started at the turn's end.

use std::fs;
use std::path::PathBuf;
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::R;
use crate::api::Api;
use crate::atc::Atc;
use crate::ensure;
use crate::qwenpaw::Server;
use crate::scenarios::Ctx;

const TURN_WAIT: Duration = Duration::from_secs(60);
const USER: &str = "ana";
const AUTOMATIC: &str = "automatically, at the end of the turn that submitted it";
/// The line atc's plugin ends a background submission's result with (issue 37).
const TOLD: &str = "[atc: this task's result will be posted into this chat when it finishes; you need not call check_agent_task]";

pub struct Auto {
    pub server: Server,
    /// The wrapper's log: one line per atc start, its arguments.
    starts: PathBuf,
    state: PathBuf,
    dir: PathBuf,
}

impl Auto {
    pub(crate) fn starts(&self) -> Vec<String> {
        fs::read_to_string(&self.starts)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The atc the server's plugin starts (`ATC_BIN`): a shell script that logs its
    /// arguments, then runs the built atc.
    pub(crate) fn wrapper(&self) -> PathBuf {
        self.dir.join("atc-wrapper")
    }

    pub(crate) fn atc(&self, ctx: &Ctx) -> R<Atc> {
        let dir = self.dir.join(ctx.uniq("reader"));
        fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        Atc::new(&ctx.atc_bin, &dir, self.state.clone(), &self.server.root())
    }

    pub(crate) fn jobs(&self, ctx: &Ctx) -> R<Vec<Value>> {
        if !self.state.exists() {
            return Ok(Vec::new());
        }
        self.atc(ctx)?.jobs()
    }

    /// The jobs of `task`.
    pub(crate) fn jobs_of(&self, ctx: &Ctx, task: &str) -> R<Vec<Value>> {
        Ok(self
            .jobs(ctx)?
            .into_iter()
            .filter(|j| j["task_id"] == task)
            .collect())
    }

    /// The model's turn in (session, `USER`) on `default`: `text` is what the fake LLM
    /// obeys. Returns the turn's final text.
    fn turn(&self, session: &str, text: &str) -> R<String> {
        let api = self.server.api();
        let turn = api.submit(Some("default"), session, USER, text, None)?;
        let (payload, _) = api.wait_finished(&turn, TURN_WAIT)?;
        ensure!(
            payload["result"]["status"] == "completed",
            "the parent's turn did not complete: {payload}"
        );
        Ok(crate::api::answer_of(&payload))
    }

    /// The atc turns in the parent chat carrying `task`'s result.
    fn results_in(&self, session: &str, task: &str) -> R<usize> {
        self.server.api().results_in(USER, session, task)
    }

    /// Waits until the parent chat holds `task`'s result, then a little longer: it must be
    /// there exactly once.
    fn delivered_once(&self, session: &str, task: &str) -> R<()> {
        let deadline = Instant::now() + TURN_WAIT;
        while self.results_in(session, task)? == 0 {
            ensure!(
                Instant::now() < deadline,
                "the result of {task} never arrived in the parent chat; atc started: {:?}",
                self.starts()
            );
            sleep(Duration::from_millis(200));
        }
        sleep(Duration::from_secs(3));
        let n = self.results_in(session, task)?;
        ensure!(
            n == 1,
            "the result of {task} is in the parent chat {n} times"
        );
        Ok(())
    }

    /// Whether the tool output of the `submit_to_agent` call that started `task`, as the
    /// parent chat's history stores it, ends with atc's line (issue 37); an error when no
    /// such output is stored.
    fn told(&self, session: &str, task: &str) -> R<bool> {
        let api = self.server.api();
        let chat = api
            .chat_id("default", USER, session)?
            .ok_or_else(|| format!("no chat for {session}"))?;
        let (msgs, _) = api.chat(&chat)?;
        let marker = format!("[TASK_ID: {task}]");
        let outputs: Vec<String> = msgs
            .iter()
            .filter(|m| m.kind.ends_with("_output"))
            .map(|m| m.raw.to_string())
            .filter(|raw| raw.contains(&marker))
            .collect();
        ensure!(
            outputs.len() == 1,
            "{} tool outputs of {task}'s submission in {session}'s history; kinds: {:?}",
            outputs.len(),
            msgs.iter().map(|m| m.kind.as_str()).collect::<Vec<_>>()
        );
        Ok(outputs[0].contains(TOLD))
    }

    /// No line of the server log says the plugin failed.
    pub(crate) fn no_plugin_warnings(&self) -> R<()> {
        let log = self.server.log_text();
        let said: Vec<&str> = log.lines().filter(|l| l.contains("atc plugin:")).collect();
        ensure!(said.is_empty(), "the plugin warned: {said:?}");
        Ok(())
    }
}

/// A server with atc's plugin, its atc a logging wrapper.
fn server(ctx: &Ctx, name: &str) -> R<Auto> {
    server_with(ctx, name, Vec::new())
}

/// [`server`], with more of the server's environment.
pub(crate) fn server_with(ctx: &Ctx, name: &str, more: Vec<(String, String)>) -> R<Auto> {
    let (server, dir) = crate::kick::wrapped_server(ctx, name, more)?;
    Ok(Auto {
        server,
        starts: dir.join("atc-starts.log"),
        state: dir.join("jobs.json"),
        dir,
    })
}

/// The server the auto-watch scenarios share (`Ctx::auto` makes it once).
pub fn shared(ctx: &Ctx) -> R<Auto> {
    server(ctx, "auto")
}

fn task_of(text: &str) -> R<String> {
    text.split("[TASK_ID:")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .map(|t| t.trim().to_string())
        .ok_or_else(|| format!("no [TASK_ID: …] in {text:?}"))
}

fn auto_watch_line(session: &str) -> String {
    format!(
        "watch --origin auto --json --from - --session {session} --user {USER} --channel console --agent default"
    )
}

/// The model submits two background tasks and calls no watch tool: each result is in the
/// parent chat exactly once, delivered by what the plugin started at the turn's end.
pub fn delivers(ctx: &Ctx) -> R<()> {
    let auto = ctx.auto()?;
    let target = auto.server.second_agent()?;
    let session = "auto-parent";
    auto.server.api().make_parent("default", USER, session)?;
    let before = auto.starts().len();
    // One child done within the parent's turn, one long after it.
    auto.turn(
        session,
        &format!(
            r#"CALLTOOLS: [["submit_to_agent", {{"to_agent": "{target}", "text": "quick child"}}], ["submit_to_agent", {{"to_agent": "{target}", "text": "slow child SLEEP=4"}}]]"#
        ),
    )?;
    let deadline = Instant::now() + Duration::from_secs(20);
    let jobs = loop {
        let jobs = auto.jobs(ctx)?;
        if jobs.len() >= 2 {
            break jobs;
        }
        ensure!(
            Instant::now() < deadline,
            "the turn's end watched {} tasks, not 2; atc started: {:?}",
            jobs.len(),
            auto.starts()
        );
        sleep(Duration::from_millis(100));
    };
    for job in &jobs {
        ensure!(
            job["origin"] == "auto"
                && job["target_agent"] == target.as_str()
                && job["session_id"] == session
                && job["user_id"] == USER
                && job["child_session"]
                    .as_str()
                    .is_some_and(|c| c.starts_with(&format!("default:to:{target}:"))),
            "the automatic watch recorded {job}"
        );
    }
    for job in &jobs {
        auto.delivered_once(session, job["task_id"].as_str().unwrap_or(""))?;
        // The model read, in the submission's own result, that it need not poll.
        ensure!(
            auto.told(session, job["task_id"].as_str().unwrap_or(""))?,
            "the submit_to_agent result stored for {} lacks atc's line",
            job["task_id"]
        );
    }
    let starts = auto.starts()[before..].to_vec();
    ensure!(
        starts
            .iter()
            .filter(|s| **s == auto_watch_line(session))
            .count()
            == 1
            && starts
                .iter()
                .all(|s| *s == auto_watch_line(session) || s == "tick --kicked --json"),
        "atc was started with {starts:?}: one automatic watch and kicked ticks expected"
    );
    let atc = auto.atc(ctx)?;
    let status = atc.ok(&["status"])?;
    ensure!(
        status.stdout.matches("(watched automatically)").count() >= 2,
        "atc status does not say the watches were automatic: {}",
        status.stdout
    );
    let log = atc.ok(&["log"])?;
    ensure!(
        log.stdout
            .matches(&format!("registered  → pending  ({AUTOMATIC})"))
            .count()
            == 2,
        "atc log does not say the watches were automatic: {}",
        log.stdout
    );
    auto.no_plugin_warnings()
}

/// The task id a tool's answer `said` names right after `prefix`, up to `end`.
fn task_after(said: &str, prefix: &str, end: char, tool: &str) -> R<String> {
    said.strip_prefix(prefix)
        .and_then(|rest| rest.split(end).next())
        .map(str::to_string)
        .ok_or_else(|| format!("{tool} answered {said:?}"))
}

/// The model submits and also calls watch_agent_task with a deadline, in the same turn,
/// leaving out the child's session and agent (found by hand: it was refused, "needs the
/// child's session", and told to poll): the plugin fills them from the turn's submission.
/// One watch (the tool's, options kept), one delivery.
pub fn with_the_tool(ctx: &Ctx) -> R<()> {
    let auto = ctx.auto()?;
    let target = auto.server.second_agent()?;
    let session = "auto-tool";
    auto.server.api().make_parent("default", USER, session)?;
    let before = auto.starts().len();
    let said = auto.turn(
        session,
        &format!(
            r#"CALLTOOLS: [["submit_to_agent", {{"to_agent": "{target}", "text": "tool child SLEEP=3"}}], ["watch_agent_task", {{"task_id": "$TASK_ID", "stop_after": "10m"}}]]"#
        ),
    )?;
    let task = task_after(&said, "Watching ", ' ', "watch_agent_task")?;
    ensure!(
        said.starts_with(&format!("Watching {task} (polled as agent {target}")),
        "watch_agent_task answered {said:?}"
    );
    auto.delivered_once(session, &task)?;
    let jobs = auto.jobs_of(ctx, &task)?;
    ensure!(
        jobs.len() == 1
            && jobs[0]["origin"] == "plugin"
            && jobs[0]["stop_after_secs"] == 600
            && jobs[0]["target_agent"] == target.as_str()
            && jobs[0]["child_session"]
                .as_str()
                .is_some_and(|c| c.contains(":to:"))
            && jobs[0]["status"] == "done",
        "one watch, the tool's with its deadline, expected: {jobs:?}"
    );
    let starts = auto.starts()[before..].to_vec();
    let watches: Vec<&String> = starts.iter().filter(|s| s.starts_with("watch ")).collect();
    ensure!(
        watches.len() == 2
            && watches[0].starts_with(&format!("watch {task} --json --origin plugin"))
            && *watches[1] == auto_watch_line(session),
        "expected the tool's watch, then the turn's end's: {starts:?}"
    );
    auto.no_plugin_warnings()
}

/// The model submits and, in the same turn, wants the task gone:
/// `cancel_task_callback(task, stop=True)`. Found by hand: it said "Not cancelled: this
/// chat watches no such task" and stopped nothing. The child is stopped through atc (the
/// submission names its session), the watch is cancelled, the turn's end watches nothing,
/// and nothing is posted into the parent chat.
pub fn cancel_in_the_same_turn(ctx: &Ctx) -> R<()> {
    let auto = ctx.auto()?;
    let target = auto.server.second_agent()?;
    let session = "auto-cancel-same-turn";
    let api = auto.server.api();
    api.make_parent("default", USER, session)?;
    let said = auto.turn(
        session,
        &format!(
            r#"CALLTOOLS: [["submit_to_agent", {{"to_agent": "{target}", "text": "unwanted child SLEEP=60"}}], ["cancel_task_callback", {{"task_id": "$TASK_ID", "stop": true}}]]"#
        ),
    )?;
    let task = task_after(
        &said,
        "Cancelled the watch on ",
        ';',
        "cancel_task_callback",
    )?;
    ensure!(
        said == format!("Cancelled the watch on {task}; the child was stopped."),
        "cancel_task_callback answered {said:?}"
    );
    let (record, raw) = api.wait_finished(&task, Duration::from_secs(20))?;
    ensure!(
        raw.contains("Task cancelled"),
        "the child was not stopped: {record}"
    );
    let jobs = auto.jobs_of(ctx, &task)?;
    ensure!(
        jobs.len() == 1 && jobs[0]["status"] == "cancelled" && jobs[0]["stopped_at"].is_string(),
        "one watch, cancelled with its child stopped, expected: {jobs:?}"
    );
    // A tick posts nothing for it.
    auto.atc(ctx)?.ok(&["tick"])?;
    ensure!(
        api.results_in(USER, session, &task)? == 0,
        "a result of {task} was posted into the chat that cancelled it"
    );
    // Found by hand: two cancelled in one call ("task-a, task-b") were said not to be
    // watched at the turn's end, which watched and posted them all the same.
    let said = auto.turn(
        session,
        &format!(
            r#"CALLTOOLS: [["submit_to_agent", {{"to_agent": "{target}", "text": "unwanted one SLEEP=2"}}], ["submit_to_agent", {{"to_agent": "{target}", "text": "unwanted two SLEEP=2"}}], ["cancel_task_callback", {{"task_id": "$TASK_ID1, $TASK_ID2"}}]]"#
        ),
    )?;
    let lines: Vec<&str> = said.lines().collect();
    ensure!(
        lines.len() == 2
            && lines
                .iter()
                .all(|l| l.starts_with("Cancelled the watch on task-")
                    && l.contains(" before it began: ")),
        "cancel_task_callback of two answered {said:?}"
    );
    for line in lines {
        let task = task_after(line, "Cancelled the watch on ", ' ', "cancel_task_callback")?;
        api.wait_finished(&task, Duration::from_secs(20))?;
        auto.atc(ctx)?.ok(&["tick"])?;
        let jobs = auto.jobs_of(ctx, &task)?;
        ensure!(jobs.is_empty(), "{task} was watched after all: {jobs:?}");
        ensure!(
            api.results_in(USER, session, &task)? == 0,
            "a result of {task} was posted into the chat that cancelled it"
        );
    }
    auto.no_plugin_warnings()
}

/// The model submits; in its next turn it reads the finished result with
/// check_agent_task while atc waits for the busy chat: nothing is posted, and `atc
/// status` says the parent read it.
pub fn parent_read(ctx: &Ctx) -> R<()> {
    let auto = ctx.auto()?;
    let target = auto.server.second_agent()?;
    let session = "auto-read";
    auto.server.api().make_parent("default", USER, session)?;
    let submitted = auto.turn(
        session,
        &format!(
            r#"CALLTOOL: submit_to_agent {{"to_agent": "{target}", "text": "read child SLEEP=3"}}"#
        ),
    )?;
    let task = task_of(&submitted)?;
    // The child finishes while this turn sleeps; then the parent reads its result itself.
    auto.turn(
        session,
        &format!(
            r#"CALLTOOLS: [["execute_shell_command", {{"command": "sleep 7"}}], ["check_agent_task", {{"task_id": "{task}"}}], ["execute_shell_command", {{"command": "sleep 1"}}]]"#
        ),
    )?;
    let api = auto.server.api();
    let (payload, _) = api.wait_finished(&task, TURN_WAIT)?;
    ensure!(
        payload["result"]["status"] == "completed",
        "the child did not complete: {payload}"
    );
    // The turn's end kicked a tick; this one is the test's, to be sure.
    let atc = auto.atc(ctx)?;
    sleep(Duration::from_secs(2));
    atc.ok(&["tick"])?;
    let n = auto.results_in(session, &task)?;
    ensure!(
        n == 0,
        "the result the parent read itself was posted {n} times"
    );
    let job = atc.job(&task)?;
    ensure!(
        job["status"] == "skipped" && job["read_by_parent_at"].is_string(),
        "the job does not say the parent read it: {job}"
    );
    let status = atc.ok(&["status", &task])?;
    ensure!(
        status
            .stdout
            .contains("the parent read its result itself (check_agent_task)"),
        "atc status does not say the parent read it: {}",
        status.stdout
    );
    let read = format!(
        "parent-read {task} --json --session {session} --user {USER} --channel console --agent default"
    );
    ensure!(
        auto.starts().contains(&read),
        "the plugin did not report the read: {:?}",
        auto.starts()
    );
    auto.no_plugin_warnings()
}

/// A foreground chat_with_agent: its answer is in the same turn, and nothing is watched.
pub fn foreground(ctx: &Ctx) -> R<()> {
    let auto = ctx.auto()?;
    let target = auto.server.second_agent()?;
    let session = "auto-fg";
    auto.server.api().make_parent("default", USER, session)?;
    let jobs = auto.jobs(ctx)?.len();
    let before = auto.starts().len();
    let said = auto.turn(
        session,
        &format!(
            r#"CALLTOOL: chat_with_agent {{"to_agent": "{target}", "text": "a foreground question"}}"#
        ),
    )?;
    ensure!(
        said.contains("ECHO: [Agent default requesting] a foreground question"),
        "chat_with_agent answered {said:?}"
    );
    sleep(Duration::from_secs(2));
    let starts = auto.starts()[before..].to_vec();
    ensure!(
        !starts.iter().any(|s| s.starts_with("watch ")),
        "a foreground call was watched: {starts:?}"
    );
    ensure!(auto.jobs(ctx)?.len() == jobs, "a job was added");
    auto.no_plugin_warnings()
}

/// Auto-watch off by atc's config file: `atc config set auto-watch false` run as the
/// server's user (its HOME, its `~/.config/atc/config.toml`, which every atc the plugin
/// starts reads), the plugin asks at the turn's end, atc watches nothing and nothing comes
/// back by itself; `atc config unset auto-watch` afterwards (the server is shared).
pub fn off(ctx: &Ctx) -> R<()> {
    let auto = ctx.auto()?;
    let home = auto.server.dir.path().join("home");
    let config = home.join(".config");
    let (home, config) = (home.display().to_string(), config.display().to_string());
    let as_server = [
        ("HOME", home.as_str()),
        ("XDG_CONFIG_HOME", config.as_str()),
    ];
    let atc = auto.atc(ctx)?;
    atc.ok_env(&["config", "set", "auto-watch", "false"], &as_server)?;
    let shown = atc.ok_env(&["config", "show"], &as_server)?.stdout;
    let line: Vec<&str> = shown
        .lines()
        .find(|l| l.starts_with("auto-watch "))
        .map(|l| l.split_whitespace().collect())
        .unwrap_or_default();
    let result = if line == ["auto-watch", "false", "config", "file"] {
        off_with(ctx, &auto)
    } else {
        Err(format!("atc config show as the server: {shown}"))
    };
    atc.ok_env(&["config", "unset", "auto-watch"], &as_server)?;
    result
}

/// Auto-watch off by the server's environment (`ATC_AUTO_WATCH=0` where QwenPaw starts,
/// which every atc the plugin starts inherits): a server of its own, and the same as
/// [`off`]: the plugin asks at the turn's end, atc watches nothing, the `submit_to_agent`
/// result the model read carries no line from atc, and nothing comes back by itself.
pub fn off_by_env(ctx: &Ctx) -> R<()> {
    let auto = server_with(
        ctx,
        "auto-env-off",
        vec![("ATC_AUTO_WATCH".to_string(), "0".to_string())],
    )?;
    off_with(ctx, &auto)
}

fn off_with(ctx: &Ctx, auto: &Auto) -> R<()> {
    let target = auto.server.second_agent()?;
    let session = "auto-off";
    let api: Api = auto.server.api();
    api.make_parent("default", USER, session)?;
    let said = auto.turn(
        session,
        &format!(
            r#"CALLTOOL: submit_to_agent {{"to_agent": "{target}", "text": "unwatched child"}}"#
        ),
    )?;
    let task = task_of(&said)?;
    api.wait_finished(&task, TURN_WAIT)?;
    sleep(Duration::from_secs(3));
    ensure!(
        auto.starts().contains(&auto_watch_line(session)),
        "the plugin did not ask: {:?}",
        auto.starts()
    );
    let jobs = auto.jobs_of(ctx, &task)?;
    ensure!(jobs.is_empty(), "auto-watch off, and atc watched: {jobs:?}");
    ensure!(
        !auto.told(session, &task)?,
        "auto-watch off, and the model was told atc posts {task}'s result"
    );
    let n = auto.results_in(session, &task)?;
    ensure!(
        n == 0,
        "auto-watch off, and the result was posted {n} times"
    );
    auto.no_plugin_warnings()
}

/// Issue 36 M2 on the real server: a typo in `config.toml` (a tick's knob) while a turn
/// delegates. The automatic watch is recorded all the same (`atc paths` and `atc watch`
/// answer past the typo), QwenPaw's log names the typo and the refused tick (atc's own
/// line); nothing is delivered while every tick refuses the file. Fixed, the next tick (a
/// timer's) delivers the result, exactly once.
pub fn config_typo(ctx: &Ctx) -> R<()> {
    let config = ctx
        .scratch
        .path()
        .join(ctx.uniq("typo-config"))
        .join("config.toml");
    fs::create_dir_all(config.parent().unwrap_or(ctx.scratch.path())).map_err(|e| e.to_string())?;
    fs::write(&config, "busy-deadlne = \"10m\"\n").map_err(|e| e.to_string())?;
    let auto = server_with(
        ctx,
        "auto-typo",
        vec![("ATC_CONFIG".to_string(), config.display().to_string())],
    )?;
    let target = auto.server.second_agent()?;
    let session = "typo-parent";
    auto.server.api().make_parent("default", USER, session)?;
    auto.turn(
        session,
        &format!(
            r#"CALLTOOL: submit_to_agent {{"to_agent": "{target}", "text": "typo child SLEEP=3"}}"#
        ),
    )?;
    let task = first_auto_watch(&auto, ctx, "a config typo lost the automatic watch")?;
    // The child ends (its turn's end kicks a tick, which refuses the file): nothing yet.
    let (record, _) = auto
        .server
        .api()
        .wait_finished(&task, Duration::from_secs(30))?;
    ensure!(record["status"] == "finished", "the child: {record}");
    log_says(
        &auto,
        &["exited 78: atc: config file"],
        "no refused tick in QwenPaw's log",
    )?;
    let log = auto.server.log_text();
    ensure!(
        log.contains("atc plugin: atc left part of its config file out")
            && log.contains("unknown key \"busy-deadlne\""),
        "QwenPaw's log does not name the typo: {log}"
    );
    ensure!(
        auto.results_in(session, &task)? == 0,
        "delivered while every tick refuses the config file"
    );
    // Fixed: a timer's tick delivers it, once.
    fs::write(&config, "busy-deadline = \"10m\"\n").map_err(|e| e.to_string())?;
    let atc = auto
        .atc(ctx)?
        .with_env("ATC_CONFIG", &config.display().to_string());
    atc.ok(&["tick"])?;
    auto.delivered_once(session, &task)?;
    atc.ok(&["tick"])?;
    sleep(Duration::from_secs(1));
    ensure!(
        auto.results_in(session, &task)? == 1,
        "the result of {task} went twice"
    );
    Ok(())
}

/// Issue 36 M2 on a real server, the file not even TOML: the automatic watch itself is
/// refused (exit 78, which job file it names is unknown). The plugin says so once, keeps
/// it, and tries it again at each beat of its cadence: fixed, the watch lands and the
/// result is delivered once.
pub fn config_broken(ctx: &Ctx) -> R<()> {
    let config = ctx
        .scratch
        .path()
        .join(ctx.uniq("broken-config"))
        .join("config.toml");
    fs::create_dir_all(config.parent().unwrap_or(ctx.scratch.path())).map_err(|e| e.to_string())?;
    fs::write(&config, "busy-deadline = \"10m\n").map_err(|e| e.to_string())?;
    let auto = server_with(
        ctx,
        "auto-broken",
        vec![
            ("ATC_CONFIG".to_string(), config.display().to_string()),
            ("ATC_CADENCE".to_string(), "2s".to_string()),
        ],
    )?;
    let target = auto.server.second_agent()?;
    let session = "broken-parent";
    auto.server.api().make_parent("default", USER, session)?;
    auto.turn(
        session,
        &format!(
            r#"CALLTOOL: submit_to_agent {{"to_agent": "{target}", "text": "broken child SLEEP=3"}}"#
        ),
    )?;
    log_says(
        &auto,
        &[
            "(from the end of a turn) exited 78: atc: config file",
            "tried again at each beat of the cadence",
        ],
        "no refused automatic watch in QwenPaw's log",
    )?;
    ensure!(
        auto.jobs(ctx)?.is_empty(),
        "a watch recorded under a config file atc cannot read"
    );
    // The child ends meanwhile; nothing is posted while the file is broken.
    sleep(Duration::from_secs(5));
    ensure!(
        auto.results_in(session, &find_task(&auto, session)?)? == 0,
        "delivered while every command refuses the config file"
    );
    // Fixed: a beat of the cadence lands the watch, and its result comes, once.
    fs::write(&config, "busy-deadline = \"10m\"\n").map_err(|e| e.to_string())?;
    let task = first_auto_watch(
        &auto,
        ctx,
        "the refused automatic watch never landed after the fix",
    )?;
    log_says(
        &auto,
        &[&format!(
            "atc watch of {task} (from the end of a turn) landed on try"
        )],
        "the landing is not in QwenPaw's log",
    )?;
    auto.delivered_once(session, &task)?;
    sleep(Duration::from_secs(5));
    ensure!(
        auto.results_in(session, &task)? == 1,
        "the result of {task} went twice"
    );
    Ok(())
}

/// The first watch recorded in `auto`'s job file, waited for up to 20 s: it must be an
/// automatic one. Returns its task id.
fn first_auto_watch(auto: &Auto, ctx: &Ctx, missing: &str) -> R<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let job = loop {
        if let Some(job) = auto.jobs(ctx)?.into_iter().next() {
            break job;
        }
        ensure!(
            Instant::now() < deadline,
            "{missing}; atc started: {:?}; the log: {}",
            auto.starts(),
            auto.server.log_text()
        );
        sleep(Duration::from_millis(100));
    };
    ensure!(job["origin"] == "auto", "the watch recorded {job}");
    Ok(job["task_id"].as_str().unwrap_or("").to_string())
}

/// Waits up to 20 s for QwenPaw's log to hold every one of `needles`.
fn log_says(auto: &Auto, needles: &[&str], missing: &str) -> R<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let log = auto.server.log_text();
        if needles.iter().all(|n| log.contains(n)) {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "{missing}; atc started: {:?}",
            auto.starts()
        );
        sleep(Duration::from_millis(200));
    }
}

/// The task the parent's turn submitted, as its chat shows it (`[TASK_ID: …]`).
fn find_task(auto: &Auto, session: &str) -> R<String> {
    let api = auto.server.api();
    let chat = api
        .chat_id("default", USER, session)?
        .ok_or_else(|| format!("no chat {session}"))?;
    let (msgs, _) = api.chat(&chat)?;
    let text: String = msgs.iter().map(|m| m.raw.to_string()).collect();
    let at = text
        .find("[TASK_ID: ")
        .ok_or_else(|| format!("no task id in the parent's chat: {text}"))?;
    let rest = &text[at + "[TASK_ID: ".len()..];
    Ok(rest.split(']').next().unwrap_or("").trim().to_string())
}

/// Issue 36 M5 on real servers: two QwenPaw servers with atc's plugin share one job file,
/// no system timer. Each plugin's cadence ticks on (neither takes the other's cadence or
/// kicks for a timer and stands by), while a watch waits.
pub fn two_servers_cadence(ctx: &Ctx) -> R<()> {
    let every = ("ATC_CADENCE".to_string(), "2s".to_string());
    let a = server_with(ctx, "cadence-a", vec![every.clone()])?;
    let b = server_with(
        ctx,
        "cadence-b",
        vec![
            every,
            ("ATC_STATE".to_string(), a.state.display().to_string()),
        ],
    )?;
    let api = a.server.api();
    api.make_parent("default", USER, "two-parent")?;
    let child = api.submit(
        Some("default"),
        "two-child",
        USER,
        "long child SLEEP=40",
        None,
    )?;
    let atc = a.atc(ctx)?;
    atc.watch(
        &child,
        "two-parent",
        USER,
        &["--child-session", "two-child"],
    )?;
    let ticks = |auto: &Auto| {
        auto.starts()
            .iter()
            .filter(|s| s.as_str() == "tick --json")
            .count()
    };
    let (a0, b0) = (ticks(&a), ticks(&b));
    sleep(Duration::from_secs(14));
    let (a1, b1) = (ticks(&a) - a0, ticks(&b) - b0);
    ensure!(
        a1 >= 3 && b1 >= 3,
        "in 14 s on a 2 s cadence, server A's plugin started {a1} ticks and B's {b1} (each must tick on)"
    );
    let doctor = atc.run_env(&["doctor"], &[])?;
    ensure!(
        doctor
            .stdout
            .contains("✓ timer: the last atc tick a QwenPaw plugin's cadence started ran "),
        "doctor on two cadences: {}",
        doctor.stdout
    );
    atc.ok(&["cancel", &child, "--stop"])?;
    Ok(())
}
