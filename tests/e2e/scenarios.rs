//! The scenarios of issue 4, each a plain function over the shared context.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::R;
use crate::api::{Api, Msg};
use crate::atc::{Atc, is_terminal};
use crate::ensure;
use crate::mqtt::{Broker, Person};
use crate::proxy::Proxy;
use crate::qwenpaw::{FakeLlm, Server, ServerOptions, Venv, e2e_dir};

type Scenario = fn(&Ctx) -> R<()>;

pub const ALL: &[(&str, Scenario)] = &[
    ("happy-path", happy_path),
    ("cross-agent", cross_agent),
    ("failed-and-timed-out-child", failed_and_timed_out_child),
    ("busy-parent", busy_parent),
    ("dropped-post-read-back", dropped_post_read_back),
    ("group-of-three", group_of_three),
    ("server-restart", server_restart),
    ("runtime-token", runtime_token),
    ("agent-registers-itself", agent_registers_itself),
    (
        "skill-agent-registers-callback",
        crate::skill::registers_callback,
    ),
    ("wait-and-doctor", wait_and_doctor),
    ("many-at-once", many_at_once),
    ("unknown-parent-agent", unknown_parent_agent),
    ("own-child-session", own_child_session),
    ("im-forward-final-only", im_forward_final_only),
    ("im-empty-reply-skipped", im_empty_reply_skipped),
    // Before contract-pinning: the console's plugin list is among the bodies it pins.
    ("console-bundle-logic", crate::console::bundle_logic),
    ("console-open-chat", crate::console::open_chat),
    ("console-other-chat", crate::console::other_chat),
    ("console-sidebar-folded", crate::console::sidebar_folded),
    ("console-own-turn", crate::console::own_turn),
    ("contract-pinning", contract_pinning),
    ("batch-of-three", batch_of_three),
    ("console-toast", console_toast),
    ("plugin-tools-console", crate::plugin::tools_console),
    ("plugin-tools-mqtt", crate::plugin::tools_mqtt),
    ("plugin-kick-delivers", crate::kick::kick_delivers),
    ("plugin-kick-without-atc", crate::kick::kick_without_atc),
    ("plugin-kick-give-up-heard", crate::kick::kick_give_up_heard),
    (
        "plugin-kick-unrelated-turns",
        crate::kick::kick_unrelated_turns_cost_nothing,
    ),
    (
        "plugin-kick-config",
        crate::config::kick_obeys_the_config_file,
    ),
    ("plugin-zip", crate::pkg::plugin_zip),
    ("plugin-zip-thin", crate::pkg::plugin_zip_thin),
    ("seed-beside-zip", crate::pkg::seed_beside_zip),
    ("seed-migration", crate::pkg::seed_migration),
    ("long-cancel-stop", crate::long::cancel_stop),
    (
        "long-cancel-stop-elsewhere",
        crate::long::cancel_stop_elsewhere,
    ),
    (
        "long-stop-after-elsewhere",
        crate::long::stop_after_elsewhere,
    ),
    ("long-stop-after", crate::long::stop_after),
    (
        "long-stop-another-session",
        crate::long::stop_another_session,
    ),
    ("long-check-in", crate::long::check_in),
    ("auto-watch-delivers", crate::auto::delivers),
    ("auto-watch-with-the-tool", crate::auto::with_the_tool),
    (
        "auto-watch-cancel-same-turn",
        crate::auto::cancel_in_the_same_turn,
    ),
    ("auto-watch-parent-read", crate::auto::parent_read),
    ("auto-watch-foreground", crate::auto::foreground),
    ("auto-watch-off", crate::auto::off),
    ("auto-watch-off-by-env", crate::auto::off_by_env),
    ("auto-watch-config-typo", crate::auto::config_typo),
    ("auto-watch-config-broken", crate::auto::config_broken),
    (
        "plugin-two-servers-cadence",
        crate::auto::two_servers_cadence,
    ),
    ("tree-two-levels", crate::tree::two_levels),
    ("tree-three-levels", crate::tree::three_levels),
    ("long-child-backoff", crate::backoff::long_child_backoff),
    ("demo-keep", crate::demo::demo_keep),
    // Benchmarks run only when a filter names them (`-- bench-kick`).
    ("bench-kick", crate::kick::bench_kick),
];

const SECS: fn(u64) -> Duration = Duration::from_secs;
const USER_TURN_WAIT: Duration = Duration::from_secs(60);

/// Bodies the fast suite's canned ones are pinned to (tests/support/bodies.rs).
const REQUIRED_BODIES: &[&str] = &[
    "running",
    "finished_completed",
    "finished_failed_llm",
    "finished_timeout",
    "not_found",
    "busy_409",
    "auth_401_runtime",
];

pub fn fixture_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/qwenpaw-2.2.2-bodies.json")
}

pub struct Ctx {
    pub venv: Venv,
    pub llm: FakeLlm,
    /// Serves every scenario but the restart and token ones. Its agents find the
    /// built atc on their PATH and `ATC_STATE` = `agent_state`.
    pub main: Server,
    pub atc_bin: PathBuf,
    pub agent_state: PathBuf,
    pub scratch: TempDir,
    bodies: RefCell<BTreeMap<String, Value>>,
    seq: Cell<u32>,
    /// The broker and the MQTT-enabled server, made by the first IM scenario.
    im: RefCell<Option<Rc<Im>>>,
    /// The server of the auto-watch scenarios, made by the first of them.
    auto: RefCell<Option<Rc<crate::auto::Auto>>>,
    /// The server of the delegation-tree scenarios, made by the first of them.
    tree: RefCell<Option<Rc<crate::auto::Auto>>>,
    /// The console page in Chromium and its server, made by the first console scenario.
    pub front: RefCell<Option<Rc<crate::console::Front>>>,
}

/// A broker and a real QwenPaw whose default agent has an MQTT channel on it.
pub struct Im {
    pub broker: Broker,
    pub server: Server,
    pub dir: PathBuf,
}

impl Ctx {
    pub fn new() -> R<Ctx> {
        let atc_bin = PathBuf::from(env!("CARGO_BIN_EXE_atc"));
        ensure!(
            atc_bin.is_file(),
            "atc binary missing at {}",
            atc_bin.display()
        );
        let venv = Venv::provision()?;
        let mut scratch = tempfile::Builder::new()
            .prefix("atc-e2e-run-")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?;
        if crate::keep_dirs() {
            scratch.disable_cleanup(true);
            eprintln!("e2e: keeping {}", scratch.path().display());
        }
        let llm = FakeLlm::start(&venv, scratch.path())?;
        // Only atc, not the rest of target/debug, goes on the agents' PATH.
        let bin = scratch.path().join("bin");
        fs::create_dir_all(&bin).map_err(|e| e.to_string())?;
        std::os::unix::fs::symlink(&atc_bin, bin.join("atc"))
            .map_err(|e| format!("symlink atc: {e}"))?;
        let agent_state = scratch.path().join("agent-jobs.json");
        let main = Server::create(
            "main",
            &venv,
            &llm,
            ServerOptions {
                token: None,
                path_prepend: Some(bin),
                env: vec![("ATC_STATE".into(), agent_state.display().to_string())],
                mqtt_port: None,
                ..ServerOptions::default()
            },
        )?;
        ensure!(
            main.agents.iter().any(|a| a == "default") && main.agents.len() >= 2,
            "expected the default agent and a second shipped agent, got {:?}",
            main.agents
        );
        Ok(Ctx {
            venv,
            llm,
            main,
            atc_bin,
            agent_state,
            scratch,
            bodies: RefCell::new(BTreeMap::new()),
            seq: Cell::new(0),
            im: RefCell::new(None),
            auto: RefCell::new(None),
            tree: RefCell::new(None),
            front: RefCell::new(None),
        })
    }

    /// The auto-watch scenarios' server (atc's plugin installed), started on first use.
    pub(crate) fn auto(&self) -> R<Rc<crate::auto::Auto>> {
        if let Some(auto) = self.auto.borrow().as_ref() {
            return Ok(Rc::clone(auto));
        }
        let auto = Rc::new(crate::auto::shared(self)?);
        *self.auto.borrow_mut() = Some(Rc::clone(&auto));
        Ok(auto)
    }

    /// The delegation-tree scenarios' server (atc's plugin, a short cadence), started on
    /// first use.
    pub(crate) fn tree(&self) -> R<Rc<crate::auto::Auto>> {
        if let Some(tree) = self.tree.borrow().as_ref() {
            return Ok(Rc::clone(tree));
        }
        let tree = Rc::new(crate::tree::shared(self)?);
        *self.tree.borrow_mut() = Some(Rc::clone(&tree));
        Ok(tree)
    }

    /// The MQTT broker and server, started on first use.
    pub(crate) fn im(&self) -> R<Rc<Im>> {
        if let Some(im) = self.im.borrow().as_ref() {
            return Ok(Rc::clone(im));
        }
        let dir = self.scratch.path().join("im");
        fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let broker = Broker::start(&dir)?;
        let server = Server::create(
            "im",
            &self.venv,
            &self.llm,
            ServerOptions {
                token: None,
                path_prepend: None,
                // For atc's QwenPaw plugin (tests/e2e/plugin.rs): atc by ATC_BIN, not PATH.
                env: vec![
                    ("ATC_BIN".into(), self.atc_bin.display().to_string()),
                    (
                        "ATC_STATE".into(),
                        self.im_agent_state().display().to_string(),
                    ),
                ],
                mqtt_port: Some(broker.port),
                ..ServerOptions::default()
            },
        )?;
        let health = server
            .api()
            .get("/api/config/channels/mqtt/health", Some("default"))?;
        ensure!(
            health.body.contains("\"healthy\""),
            "the MQTT channel is not healthy: HTTP {} {}",
            health.status,
            health.body
        );
        let im = Rc::new(Im {
            broker,
            server,
            dir,
        });
        *self.im.borrow_mut() = Some(Rc::clone(&im));
        Ok(im)
    }

    /// The job file of the IM server's agents (and atc's plugin in it).
    pub(crate) fn im_agent_state(&self) -> PathBuf {
        self.scratch.path().join("im-agent-jobs.json")
    }

    pub(crate) fn uniq(&self, prefix: &str) -> String {
        self.seq.set(self.seq.get() + 1);
        format!("{prefix}-{}", self.seq.get())
    }

    /// A fresh directory in the scratch space, named after `name`.
    pub(crate) fn fresh_dir(&self, name: &str) -> R<PathBuf> {
        let dir = self.scratch.path().join(self.uniq(name));
        fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        Ok(dir)
    }

    /// A fresh atc installation (own HOME and job file) aimed at `base_url`.
    pub(crate) fn atc(&self, name: &str, base_url: &str) -> R<Atc> {
        let dir = self.fresh_dir(name)?;
        Atc::new(&self.atc_bin, &dir, dir.join("jobs.json"), base_url)
    }

    /// Submits `text` as `user` to `agent` in a fresh session named after `prefix`: the task.
    pub(crate) fn child(
        &self,
        api: &Api,
        agent: &str,
        prefix: &str,
        user: &str,
        text: &str,
    ) -> R<String> {
        api.submit(Some(agent), &self.uniq(prefix), user, text, None)
    }

    /// The atc the main server's agents run (their `ATC_STATE`), to read their job file.
    pub(crate) fn agent_atc(&self) -> R<Atc> {
        let root = self.main.root();
        Atc::new(
            &self.atc_bin,
            self.scratch.path(),
            self.agent_state.clone(),
            &root,
        )
    }

    /// Keeps the first real body seen under `name` (for the fixture).
    pub(crate) fn record(&self, name: &str, raw: &str) {
        if let Ok(v) = serde_json::from_str::<Value>(raw) {
            self.bodies
                .borrow_mut()
                .entry(name.to_string())
                .or_insert(v);
        }
    }

    /// QwenPaw's own `format_background_status_text` for one GET payload, run in the
    /// venv: the oracle for what atc must deliver.
    fn oracle(&self, task_id: &str, raw_payload: &str) -> R<String> {
        let out = self.main.python(
            "oracle",
            &[
                e2e_dir().join("qwenpaw_setup.py").into(),
                "oracle".into(),
                task_id.into(),
            ],
            Some(raw_payload.as_bytes()),
            SECS(120),
        )?;
        ensure!(out.status.success(), "oracle failed: {}", out.describe());
        Ok(out.stdout)
    }

    fn oracle_batch(&self, items: &[(&str, &str)]) -> R<Vec<String>> {
        let input: Vec<Value> = items
            .iter()
            .map(|(tid, raw)| {
                Ok(json!({"task_id": tid, "payload": serde_json::from_str::<Value>(raw).map_err(|e| e.to_string())?}))
            })
            .collect::<R<_>>()?;
        let out = self.main.python(
            "oracle-batch",
            &[
                e2e_dir().join("qwenpaw_setup.py").into(),
                "oracle-batch".into(),
            ],
            Some(Value::Array(input).to_string().as_bytes()),
            SECS(120),
        )?;
        ensure!(
            out.status.success(),
            "oracle-batch failed: {}",
            out.describe()
        );
        serde_json::from_str(out.stdout.trim())
            .map_err(|e| format!("oracle-batch output: {e}: {:?}", out.stdout))
    }
}

// ---------------------------------------------------------------------------
// helpers

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or("")
}

/// The job's rendered result (`final`).
pub(crate) fn final_text(job: &Value) -> R<String> {
    job["final"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("job has no `final` text: {job}"))
}

/// The turn that carries `job`'s block and nothing else (its result or its notice): a
/// watch alone in its chat gets a turn of its own, `atc-<job id>`.
pub(crate) fn own_turn(atc: &Atc, job: &Value) -> R<Value> {
    let turn = atc.turn_of(job)?;
    ensure!(
        turn["carries"].as_array().map_or(0, Vec::len) == 1,
        "the turn of {} carries more than its block: {turn}",
        job["task_id"]
    );
    ensure!(
        turn["turn_id"] == format!("atc-{}", s(job, "job_id")),
        "the turn of {} alone is not atc-<its job id>: {turn}",
        job["task_id"]
    );
    Ok(turn)
}

/// The one delivered turn that every job of `jobs` points at (a group's or a batch's).
fn shared_turn(atc: &Atc, jobs: &[Value]) -> R<Value> {
    let turn = atc.turn_of(&jobs[0])?;
    for job in jobs {
        ensure!(
            job["turn"] == turn["turn_id"],
            "{} points at turn {}, not at {}",
            job["task_id"],
            job["turn"],
            turn["turn_id"]
        );
    }
    ensure!(
        turn["state"] == "delivered",
        "the shared turn is {}: {turn}",
        turn["state"]
    );
    Ok(turn)
}

/// Checks that `job`'s status is `want`.
pub(crate) fn require_status(job: &Value, want: &str) -> R<()> {
    ensure!(
        job["status"] == want,
        "job {} is {} (last_error: {}), expected {want}: {job}",
        job["task_id"],
        job["status"],
        job["last_error"]
    );
    Ok(())
}

/// Where two strings first differ, for a byte-exact comparison's failure message.
fn first_diff(a: &str, b: &str) -> String {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let i = a
        .iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    let ctx = |s: &[u8]| {
        String::from_utf8_lossy(&s[i.saturating_sub(20)..(i + 40).min(s.len())]).into_owned()
    };
    format!(
        "first difference at byte {i} (lengths {} vs {}): {:?} vs {:?}",
        a.len(),
        b.len(),
        ctx(a),
        ctx(b)
    )
}

fn ensure_same(what: &str, got: &str, want: &str) -> R<()> {
    ensure!(got == want, "{what} differs: {}", first_diff(got, want));
    Ok(())
}

/// Waits for the parent turn that atc's `turn` started (its `turn_task_id`) to finish.
pub(crate) fn wait_turn(api: &Api, turn: &Value) -> R<Value> {
    let task = turn["turn_task_id"]
        .as_str()
        .ok_or_else(|| format!("delivered turn without turn_task_id: {turn}"))?;
    ensure!(
        task.starts_with("task-"),
        "turn_task_id {task:?} is not a QwenPaw task id"
    );
    Ok(api.wait_finished(task, USER_TURN_WAIT)?.0)
}

/// Checks that `turn` is delivered with `text`, and that the parent history gained
/// exactly one user turn with that text (after `before`), carrying the turn's delivery
/// id, followed by an assistant reply.
pub(crate) fn check_delivered_once(
    after: &[Msg],
    before: usize,
    text: &str,
    turn: &Value,
) -> R<()> {
    ensure!(
        turn["state"] == "delivered",
        "turn {} is {}, expected delivered: {turn}",
        turn["turn_id"],
        turn["state"]
    );
    ensure_same("turn.text vs the text expected", s(turn, "text"), text)?;
    ensure!(
        after.len() > before,
        "parent history did not grow ({before} messages)"
    );
    let new = &after[before..];
    let users: Vec<(usize, &Msg)> = new
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == "user")
        .collect();
    ensure!(
        users.len() == 1,
        "expected exactly one new user turn in the parent, got {}: {:?}",
        users.len(),
        users.iter().map(|(_, m)| &m.text).collect::<Vec<_>>()
    );
    let (at, msg) = users[0];
    ensure_same("delivered user turn vs turn.text", &msg.text, text)?;
    let want_id = s(turn, "turn_id");
    ensure!(
        want_id.starts_with("atc-"),
        "turn id {want_id:?} is not atc's"
    );
    ensure!(
        msg.delivery_id() == Some(want_id),
        "stored turn lacks metadata qwenpaw_client_message_id={want_id}: {}",
        msg.raw["metadata"]
    );
    let reply = new[at + 1..]
        .iter()
        .find(|m| m.role == "assistant" && m.kind == "message");
    let reply =
        reply.ok_or_else(|| format!("no assistant reply after the delivered turn: {new:?}"))?;
    // The fake LLM echoes a delivered result back verbatim.
    ensure_same("assistant reply", &reply.text, &format!("ECHO: {text}"))?;
    // Anything from the child appears exactly once in the whole history.
    let copies = copies(after, text);
    ensure!(
        copies == 1,
        "the delivered text appears {copies} times in the parent history"
    );
    Ok(())
}

/// Waits for the parent turn `turn` started, reads the parent's history and checks it with
/// [`check_delivered_once`]: the history.
pub(crate) fn delivered_into(
    api: &Api,
    user: &str,
    parent: &str,
    before: usize,
    text: &str,
    turn: &Value,
) -> R<Vec<Msg>> {
    wait_turn(api, turn)?;
    let after = api.history("default", user, parent, USER_TURN_WAIT)?;
    check_delivered_once(&after, before, text, turn)?;
    Ok(after)
}

/// How many user turns of `msgs` are exactly `text`.
fn copies(msgs: &[Msg], text: &str) -> usize {
    msgs.iter()
        .filter(|m| m.role == "user" && m.text == text)
        .count()
}

/// The user turns of the parent's history after its first `before` messages.
fn new_user_msgs(after: &[Msg], before: usize) -> Vec<&Msg> {
    after
        .iter()
        .skip(before)
        .filter(|m| m.role == "user")
        .collect()
}

fn new_user_turns(after: &[Msg], before: usize) -> usize {
    new_user_msgs(after, before).len()
}

/// The one user turn the parent's history gained after `before` messages (`what` says
/// what it carries).
fn one_new_turn<'a>(after: &'a [Msg], before: usize, what: &str) -> R<&'a Msg> {
    let turns = new_user_msgs(after, before);
    ensure!(
        turns.len() == 1,
        "expected one turn for {what}, got {}",
        turns.len()
    );
    Ok(turns[0])
}

/// Checks each (field, value) of `want` against `job`.
pub(crate) fn job_fields(job: &Value, want: &[(&str, &str)]) -> R<()> {
    for (key, want) in want {
        ensure!(
            job[*key] == *want,
            "job {key} is {}, expected {want}: {job}",
            job[*key]
        );
    }
    Ok(())
}

/// Ticks until the turn that carries `task`'s result has settled its forward (sent or
/// skipped): the job and that turn.
pub(crate) fn until_forwarded(atc: &Atc, task: &str, timeout: Duration) -> R<(Value, Value)> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        atc.ok(&["tick"])?;
        let job = atc.job(task)?;
        if let Some(turn) = atc.turn_if_any(&job)?
            && turn["forward"]["status"]
                .as_str()
                .is_some_and(|s| s != "pending")
        {
            return Ok((job, turn));
        }
        ensure!(
            std::time::Instant::now() < deadline,
            "the forward did not settle within {timeout:?}: {job}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

// ---------------------------------------------------------------------------
// 1. happy path

fn happy_path(ctx: &Ctx) -> R<()> {
    let api = ctx.main.api();
    let (user, parent, child) = ("alice", ctx.uniq("happy-parent"), ctx.uniq("happy-child"));
    let before = api.make_parent("default", user, &parent)?;

    let submitted = api.submit_raw(Some("default"), &child, user, "child says hello", None)?;
    submitted.expect(200, "child submit")?;
    ctx.record("submit_ok", &submitted.body);
    let tid = s(&submitted.json()?, "task_id").to_string();

    let atc = ctx.atc("happy", &ctx.main.root())?;
    let watched = atc.watch(&tid, &parent, user, &[])?;
    ensure!(
        watched.stderr.is_empty(),
        "watch warned about an existing parent chat: {}",
        watched.stderr
    );
    // The same session under another user is a chat QwenPaw does not have: a ghost.
    // watch refuses it, names the chat that has the session id, and writes nothing.
    let ghost = ctx.atc("ghost", &ctx.main.root())?;
    let refused = ghost.run_env(
        &[
            "watch",
            &tid,
            "--session",
            &parent,
            "--user",
            "not-alice",
            "--channel",
            "console",
        ],
        &[],
    )?;
    ensure!(
        refused.status.code() == Some(1)
            && refused.stderr.contains("no chat with session")
            && refused.stderr.contains("user alice on console"),
        "watch did not refuse a chat that does not exist: {}",
        refused.describe()
    );
    ensure!(
        !ghost.state.exists(),
        "a refused watch wrote {}",
        ghost.state.display()
    );
    let job = atc.tick_one_until_terminal(&[], &tid, SECS(60))?;
    require_status(&job, "done")?;
    ensure!(
        job["base_url"] == format!("{}/api", ctx.main.root()),
        "job base_url {}",
        job["base_url"]
    );

    // Task records are never evicted: the same payload atc saw is still there.
    let (_, raw) = api.wait_finished(&tid, SECS(10))?;
    ctx.record("finished_completed", &raw);
    let oracle = ctx.oracle(&tid, &raw)?;
    ensure!(
        oracle.starts_with(&format!(
            "[TASK_ID: {tid}]\n[STATUS: finished]\n\nTask completed."
        )),
        "oracle said {oracle:?}"
    );
    ensure_same(
        "job.final vs QwenPaw's format_background_status_text",
        &final_text(&job)?,
        &oracle,
    )?;

    // Byte for byte: the stored user turn is exactly what QwenPaw's formatter says.
    let turn = own_turn(&atc, &job)?;
    let after = delivered_into(&api, user, &parent, before.len(), &oracle, &turn)?;
    for (a, b) in before.iter().zip(&after) {
        ensure!(
            a.text == b.text && a.role == b.role,
            "parent history was rewritten: {a:?} vs {b:?}"
        );
    }

    // A person archives the parent chat (QwenPaw still posts into it, out of the
    // console's list): a watch into it says so (found by hand), and still watches.
    let chat = api
        .chat_id("default", user, &parent)?
        .ok_or("the parent chat is gone")?;
    api.post(
        &format!("/api/chats/{chat}/archive"),
        Some("default"),
        &json!({}),
    )?
    .expect(200, "archive the parent chat")?;
    let archived = ctx.atc("archived", &ctx.main.root())?;
    let watched = archived.watch(&tid, &parent, user, &[])?;
    ensure!(
        watched.stderr.contains(&format!(
            "atc: note: the chat of session {parent} (user {user}, channel console) is archived: the result goes there all the same"
        )),
        "a watch into an archived chat said {:?}",
        watched.stderr
    );
    // It goes there, and the record and `atc status` say so (found by hand: "delivered",
    // and the person found no such chat in the console's list).
    let job = archived.tick_one_until_terminal(&[], &tid, SECS(60))?;
    require_status(&job, "done")?;
    let turn = archived.turn_of(&job)?;
    ensure!(
        turn["chat_archived"] == true && turn["chat_id"] == chat.as_str(),
        "the turn into the archived chat records {turn}"
    );
    let listed = archived.ok(&["status"])?;
    ensure!(
        listed.stdout.contains("into an archived chat"),
        "atc status said {:?}",
        listed.stdout
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// 2. cross-agent

fn cross_agent(ctx: &Ctx) -> R<()> {
    let api = ctx.main.api();
    let second = ctx.main.second_agent()?;
    let (user, parent, child) = ("carol", ctx.uniq("cross-parent"), ctx.uniq("cross-child"));
    let before = api.make_parent("default", user, &parent)?;
    let tid = api.submit(
        Some(&second),
        &child,
        user,
        "child on the second agent",
        None,
    )?;

    // atc talks to the server through a recorder: GET task records ignore X-Agent-Id,
    // so only the request itself shows whether --target-agent was honoured.
    let proxy = Proxy::start(ctx.main.port)?;
    let atc = ctx.atc("cross", &proxy.url())?;
    atc.watch(
        &tid,
        &parent,
        user,
        &["--agent", "default", "--target-agent", &second],
    )?;
    let job = atc.tick_one_until_terminal(&[], &tid, SECS(60))?;
    require_status(&job, "done")?;
    ensure!(
        job["target_agent"] == second.as_str(),
        "job target_agent is {}",
        job["target_agent"]
    );

    let seen = proxy.seen();
    let polls: Vec<_> = seen
        .iter()
        .filter(|r| r.method == "GET" && r.path.ends_with(&tid))
        .collect();
    ensure!(!polls.is_empty(), "atc never polled {tid}: {seen:?}");
    for p in &polls {
        ensure!(
            p.header("x-agent-id") == Some(second.as_str()),
            "poll {} went out with X-Agent-Id {:?}, expected {second}",
            p.path,
            p.header("x-agent-id")
        );
    }
    let posts = proxy.posts();
    ensure!(
        posts.len() == 1,
        "expected one delivery POST, saw {}: {posts:?}",
        posts.len()
    );
    ensure!(
        posts[0].path == "/api/console/chat/task",
        "delivery went to {}",
        posts[0].path
    );
    ensure!(
        posts[0].header("x-agent-id") == Some("default"),
        "delivery went out with X-Agent-Id {:?}, expected the parent's agent `default`",
        posts[0].header("x-agent-id")
    );
    ensure!(
        posts[0].status == 200,
        "delivery answered HTTP {}",
        posts[0].status
    );
    let body: Value =
        serde_json::from_str(&posts[0].body).map_err(|e| format!("delivery body: {e}"))?;
    for (key, want) in [
        ("session_id", parent.as_str()),
        ("user_id", user),
        ("channel", "console"),
    ] {
        ensure!(
            body[key] == want,
            "delivery body {key} is {}, expected {want}",
            body[key]
        );
    }
    ensure!(
        body.get("timeout").is_none(),
        "delivery sets a turn timeout without --turn-timeout: {body}"
    );
    let turn = own_turn(&atc, &job)?;
    let meta = &body["input"][0]["metadata"];
    ensure!(
        meta["qwenpaw_client_message_id"] == turn["turn_id"] && meta["atc_task_id"] == tid.as_str(),
        "delivery metadata is {meta}, the turn {}",
        turn["turn_id"]
    );

    let text = final_text(&job)?;
    ensure!(
        text.contains(&format!("[SESSION: {child}]"))
            && text.ends_with("ECHO: child on the second agent"),
        "unexpected delivered text {text:?}"
    );
    delivered_into(&api, user, &parent, before.len(), &text, &turn)?;
    // The child really ran on the second agent, and nothing landed there by mistake.
    ensure!(
        api.chat_id(&second, user, &child)?.is_some(),
        "child chat not found on {second}"
    );
    ensure!(
        api.chat_id("default", user, &child)?.is_none(),
        "child chat also exists on default"
    );
    ensure!(
        api.chat_id(&second, user, &parent)?.is_none(),
        "a ghost parent chat appeared on {second}"
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// 3. failed child and timed-out child

fn failed_and_timed_out_child(ctx: &Ctx) -> R<()> {
    let api = ctx.main.api();
    let user = "dave";
    let (p_fail, p_slow) = (ctx.uniq("fail-parent"), ctx.uniq("timeout-parent"));
    let before_fail = api.make_parent("default", user, &p_fail)?.len();
    let before_slow = api.make_parent("default", user, &p_slow)?.len();

    let t_fail = ctx.child(&api, "default", "fail-child", user, "please FAIL")?;
    let t_slow = api.submit(
        Some("default"),
        &ctx.uniq("timeout-child"),
        user,
        "slow child SLEEP=5",
        Some(1),
    )?;
    let running = api.task(&t_slow)?;
    if running.status == 200 && running.json()?["status"] == "running" {
        ctx.record("running", &running.body);
    }

    let atc = ctx.atc("failed", &ctx.main.root())?;
    atc.watch(&t_fail, &p_fail, user, &[])?;
    atc.watch(&t_slow, &p_slow, user, &[])?;
    let jobs = atc.tick_until_terminal(&[], &[t_fail.clone(), t_slow.clone()], SECS(60))?;

    let (v_fail, raw_fail) = api.wait_finished(&t_fail, SECS(5))?;
    let (v_slow, raw_slow) = api.wait_finished(&t_slow, SECS(5))?;
    ctx.record("finished_failed_llm", &raw_fail);
    ctx.record("finished_timeout", &raw_slow);
    let oracle = ctx.oracle_batch(&[(&t_fail, &raw_fail), (&t_slow, &raw_slow)])?;

    let cases = [
        (
            &jobs[0],
            &v_fail,
            &oracle[0],
            &p_fail,
            before_fail,
            "failure requested by the prompt",
        ),
        (
            &jobs[1],
            &v_slow,
            &oracle[1],
            &p_slow,
            before_slow,
            "Task timed out after 1s",
        ),
    ];
    for (job, payload, want, parent, before, needle) in cases {
        require_status(job, "done")?;
        ensure!(
            payload["result"]["status"] == "failed",
            "server says {payload}"
        );
        let message = payload["result"]["error"]["message"].as_str().unwrap_or("");
        ensure!(
            message.contains(needle),
            "server error message {message:?} lacks {needle:?}"
        );
        let text = final_text(job)?;
        ensure!(
            text.contains(&format!("Task failed.\n\nError: {message}")),
            "delivered text lacks `Task failed.` with the server's message: {text:?}"
        );
        ensure_same("job.final vs QwenPaw's formatter", &text, want)?;
        delivered_into(&api, user, parent, before, &text, &own_turn(&atc, job)?)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// 4. busy parent

fn busy_parent(ctx: &Ctx) -> R<()> {
    let api = ctx.main.api();
    let (user, parent, child) = ("erin", ctx.uniq("busy-parent"), ctx.uniq("busy-child"));
    let before = api.make_parent("default", user, &parent)?.len();
    let tid = api.submit(Some("default"), &child, user, "quick child", None)?;
    api.wait_finished(&tid, SECS(30))?;

    // atc talks to the server through a recorder, so every POST (and 409) is seen.
    let proxy = Proxy::start(ctx.main.port)?;
    let atc = ctx.atc("busy", &proxy.url())?;
    atc.watch(&tid, &parent, user, &[])?;

    // The parent is busy with a slow turn when atc comes to deliver.
    let slow = api.submit(
        Some("default"),
        &parent,
        user,
        "slow parent turn SLEEP=8",
        None,
    )?;
    let refused = api.submit_raw(Some("default"), &parent, user, "should be refused", None)?;
    refused.expect(409, "second turn into a busy chat")?;
    ctx.record("busy_409", &refused.body);

    for _ in 0..2 {
        atc.ok(&["tick"])?;
    }
    ensure!(
        api.task(&slow)?.json()?["status"] == "running",
        "the parent's slow turn ended before the ticks (machine too slow?)"
    );
    let job = atc.job(&tid)?;
    require_status(&job, "delivering")?;
    let turn = own_turn(&atc, &job)?;
    let d = &turn["delivery"];
    ensure!(
        turn["state"] == "open"
            && d["busy"].as_u64() >= Some(2)
            && d["attempts"] == 0
            && d["waiting_since"].is_string(),
        "a busy parent should be asked each tick and not posted to: {turn}"
    );

    api.wait_finished(&slow, SECS(30))?;
    // The first tick after the parent went idle delivers.
    atc.ok(&["tick"])?;
    let job = atc.job(&tid)?;
    require_status(&job, "done")?;
    let posts = proxy.posts();
    ensure!(
        posts.len() == 1 && posts[0].status == 200,
        "expected one POST, answered 200, and no 409 at all: {:?}",
        posts.iter().map(|p| p.status).collect::<Vec<_>>()
    );
    let turn = own_turn(&atc, &job)?;
    wait_turn(&api, &turn)?;
    // Two more passes must not deliver again.
    atc.ok(&["tick"])?;
    atc.ok(&["tick"])?;
    let after = api.history("default", user, &parent, USER_TURN_WAIT)?;
    // New user turns: the slow one, then the delivery (the refused one never landed).
    let text = final_text(&job)?;
    let slow_at = after
        .iter()
        .position(|m| m.role == "user" && m.text.contains("slow parent turn"))
        .ok_or("the slow parent turn is not in the history")?;
    ensure!(slow_at >= before, "the slow turn is older than expected");
    check_delivered_once(&after, slow_at + 1, &text, &own_turn(&atc, &job)?)?;
    ensure!(
        new_user_turns(&after, before) == 2,
        "expected 2 new user turns (slow turn + delivery), got {}",
        new_user_turns(&after, before)
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// 4b. a delivery whose answer is lost: settled by reading the chat back

fn dropped_post_read_back(ctx: &Ctx) -> R<()> {
    let api = ctx.main.api();
    let (user, parent, child) = (
        "olga",
        ctx.uniq("dropped-parent"),
        ctx.uniq("dropped-child"),
    );
    let before = api.make_parent("default", user, &parent)?.len();
    let tid = api.submit(
        Some("default"),
        &child,
        user,
        "child of a lost answer",
        None,
    )?;
    api.wait_finished(&tid, SECS(30))?;

    let proxy = Proxy::start(ctx.main.port)?;
    let atc = ctx.atc("dropped", &proxy.url())?;
    atc.watch(&tid, &parent, user, &[])?;
    // The server receives the POST and starts the parent's turn; atc never hears back.
    proxy.drop_next_posts(1);
    atc.ok(&["tick", "--http-timeout", "5s"])?;
    let job = atc.job(&tid)?;
    require_status(&job, "unconfirmed")?;
    let turn = own_turn(&atc, &job)?;
    ensure!(
        turn["state"] == "unconfirmed" && turn["delivery"]["attempts"] == 1,
        "a POST whose answer was lost leaves its turn unconfirmed: {turn}"
    );

    let job = atc.tick_one_until_terminal(&["--http-timeout", "1s"], &tid, SECS(60))?;
    require_status(&job, "done")?;
    let turn = own_turn(&atc, &job)?;
    ensure!(
        turn["state"] == "delivered"
            && turn["delivery"]["confirmed"] == "read-back"
            && turn["delivery"]["attempts"] == 1,
        "not confirmed by reading the chat back: {turn}"
    );
    let posts = proxy.posts().len();
    ensure!(posts == 1, "{posts} POSTs: the turn was posted again");
    let after = api.history("default", user, &parent, USER_TURN_WAIT)?;
    let text = final_text(&job)?;
    ensure_same("turn.text vs job.final", s(&turn, "text"), &text)?;
    let copies = copies(&after, &text);
    ensure!(copies == 1, "the parent holds {copies} copies");
    ensure!(
        new_user_turns(&after, before) == 1,
        "expected exactly one new user turn"
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// 4c. fan-in: three children, one turn

fn group_of_three(ctx: &Ctx) -> R<()> {
    let api = ctx.main.api();
    let (user, parent) = ("petra", ctx.uniq("group-parent"));
    let before = api.make_parent("default", user, &parent)?.len();
    let children: Vec<String> = ["first child", "second child SLEEP=3", "third child FAIL"]
        .iter()
        .map(|prompt| ctx.child(&api, "default", "group-child", user, prompt))
        .collect::<R<_>>()?;

    let atc = ctx.atc("group", &ctx.main.root())?;
    let mut args = vec!["watch"];
    args.extend(children.iter().map(String::as_str));
    args.extend([
        "--session",
        &parent,
        "--user",
        user,
        "--channel",
        "console",
        "--group",
        "trio",
    ]);
    atc.ok(&args)?;
    let jobs = atc.tick_until_terminal(&[], &children, SECS(90))?;
    for job in &jobs {
        require_status(job, "done")?;
    }
    let turn = shared_turn(&atc, &jobs)?;
    ensure!(
        Atc::carried_tasks(&turn) == children && turn["group"] == "trio",
        "the group's one turn should carry all three results, in order: {turn}"
    );
    ensure!(
        turn["turn_id"] == format!("atc-{}", s(&jobs[0], "job_id")),
        "the group's turn is not named after its first member: {}",
        turn["turn_id"]
    );
    wait_turn(&api, &turn)?;
    let after = api.history("default", user, &parent, USER_TURN_WAIT)?;
    let delivered = one_new_turn(&after, before, "the group")?;
    let text = &delivered.text;
    ensure!(
        text.starts_with("[ATC_GROUP: trio] 3 tasks: 2 completed, 1 failed\n\n"),
        "group header: {:?}",
        text.lines().next()
    );
    let at: Vec<usize> = children
        .iter()
        .map(|t| text.find(&format!("[TASK_ID: {t}]")).unwrap_or(usize::MAX))
        .collect();
    ensure!(
        at[0] < at[1] && at[1] < at[2] && at[2] != usize::MAX,
        "member blocks missing or out of order: {at:?}"
    );
    ensure_same("the group turn vs the turn's text", text, s(&turn, "text"))?;
    ensure!(
        delivered.delivery_id() == turn["turn_id"].as_str(),
        "the group carries one delivery id, {}",
        turn["turn_id"]
    );

    // `atc wait` of the three, as `watch` took them: each result as the delivery had it,
    // in the order given (`--json`), and the failed child's exit.
    let mut args = vec!["--json", "wait"];
    args.extend(children.iter().map(String::as_str));
    let waited = atc.run_env(&args, &[])?;
    let printed: Value = serde_json::from_str(&waited.stdout).map_err(|e| e.to_string())?;
    let tasks = printed["tasks"].as_array().cloned().unwrap_or_default();
    ensure!(
        waited.status.code() == Some(1)
            && tasks.len() == 3
            && tasks
                .iter()
                .zip(&children)
                .all(|(t, c)| t["task_id"] == c.as_str())
            && tasks
                .iter()
                .zip(&jobs)
                .all(|(t, job)| t["text"].as_str() == job["final"].as_str())
            && waited.stderr
                == format!(
                    "atc: {} finished but did not succeed (failed)\n",
                    children[2]
                ),
        "atc wait of the group's three: {}",
        waited.describe()
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// issue 17: one wake-up per parent

/// Three tasks delegated without `--group` that are all finished when the tick runs: the
/// parent receives them in one turn (`[ATC_RESULTS] …`, the blocks in order) and answers
/// once.
fn batch_of_three(ctx: &Ctx) -> R<()> {
    let api = ctx.main.api();
    let (user, parent) = ("bert", ctx.uniq("batch-parent"));
    let before = api.make_parent("default", user, &parent)?.len();
    let children: Vec<String> = ["first batched", "second batched FAIL", "third batched"]
        .iter()
        .map(|prompt| ctx.child(&api, "default", "batch-child", user, prompt))
        .collect::<R<_>>()?;
    for t in &children {
        api.wait_finished(t, USER_TURN_WAIT)?;
    }
    let atc = ctx.atc("batch", &ctx.main.root())?;
    for t in &children {
        atc.watch(t, &parent, user, &[])?;
    }
    // One tick: all three are finished, so all three go in its one turn.
    atc.ok(&["tick"])?;
    let jobs = children.iter().map(|t| atc.job(t)).collect::<R<Vec<_>>>()?;
    for job in &jobs {
        require_status(job, "done")?;
    }
    let turn = shared_turn(&atc, &jobs)?;
    ensure!(
        Atc::carried_tasks(&turn) == children && turn["group"].is_null(),
        "one turn should carry all three, in the order they finished: {turn}"
    );
    wait_turn(&api, &turn)?;
    let after = api.history("default", user, &parent, USER_TURN_WAIT)?;
    let delivered = one_new_turn(&after, before, "the three results")?;
    let text = &delivered.text;
    ensure!(
        text.starts_with("[ATC_RESULTS] 3 tasks: 2 completed, 1 failed\n\n"),
        "batch header: {:?}",
        text.lines().next()
    );
    ensure_same("the batch turn vs the turn's text", text, s(&turn, "text"))?;
    let mut at = 0;
    for job in &jobs {
        let block = final_text(job)?;
        let found = text[at..]
            .find(&block)
            .ok_or_else(|| format!("block of {} missing or out of order", s(job, "task_id")))?;
        at += found + block.len();
    }
    // The turn is named after the first block it carries.
    let want_id = format!("atc-{}", s(&jobs[0], "job_id"));
    ensure!(
        turn["turn_id"] == want_id.as_str(),
        "the batch's turn is {}, expected {want_id}",
        turn["turn_id"]
    );
    ensure!(
        delivered.delivery_id() == Some(want_id.as_str()),
        "the batch carries one delivery id, {want_id}"
    );
    let replies = after[before..]
        .iter()
        .filter(|m| m.role == "assistant" && m.kind == "message")
        .count();
    ensure!(
        replies == 1,
        "the parent answered {replies} times, not once"
    );
    Ok(())
}

/// A console parent: after the delivery and the woken turn, the person at the web console
/// gets exactly one toast, read from `/api/console/push-messages`.
fn console_toast(ctx: &Ctx) -> R<()> {
    let api = ctx.main.api();
    let (user, parent) = ("tina", ctx.uniq("toast-parent"));
    api.make_parent("default", user, &parent)?;
    let child = ctx.child(&api, "default", "toast-child", user, "toast child")?;
    let atc = ctx.atc("toast", &ctx.main.root())?;
    atc.watch(&child, &parent, user, &[])?;
    let jobs = atc.tick_until_terminal(&[], std::slice::from_ref(&child), SECS(60))?;
    require_status(&jobs[0], "done")?;
    wait_turn(&api, &own_turn(&atc, &jobs[0])?)?;
    // The next ticks learn the turn ended and send the toast; later ones never again.
    let path = format!("/api/console/push-messages?session_id={parent}");
    let mut toasts = Vec::new();
    for _ in 0..4 {
        atc.ok(&["tick"])?;
        let pushed = api.get(&path, Some("default"))?.json()?;
        for m in pushed["messages"].as_array().cloned().unwrap_or_default() {
            toasts.push(m["text"].as_str().unwrap_or("").to_owned());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let want = format!("A result for {parent}: the agent answered; open the chat to read it");
    ensure!(
        toasts == [want.clone()],
        "expected exactly one toast {want:?}, got {toasts:?}"
    );
    let turn = own_turn(&atc, &atc.job(&child)?)?;
    ensure!(
        turn["forward"]["status"] == "sent" && turn["forward"]["attempts"] == 1,
        "the toast is recorded once on the turn: {}",
        turn["forward"]
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// 5. server restart

fn server_restart(ctx: &Ctx) -> R<()> {
    let mut server = Server::create("restart", &ctx.venv, &ctx.llm, ServerOptions::default())?;
    let api = server.api();
    let before = api.make_parent("default", "frank", "restart-parent")?.len();
    let tid = api.submit(
        Some("default"),
        "restart-child",
        "frank",
        "long child SLEEP=20",
        None,
    )?;
    let running = api.task(&tid)?;
    running.expect(200, "GET running task")?;
    ctx.record("running", &running.body);

    let atc = ctx.atc("restart", &server.root())?;
    atc.watch(&tid, "restart-parent", "frank", &[])?;
    atc.ok(&["tick"])?;
    let job = atc.job(&tid)?;
    require_status(&job, "pending")?;

    server.restart()?;
    let gone = api.task(&tid)?;
    gone.expect(404, &format!("after restart GET {tid}"))?;
    ctx.record("not_found", &gone.body);

    atc.ok(&["tick"])?;
    let job = atc.job(&tid)?;
    require_status(&job, "lost")?;
    ensure!(
        s(&job, "last_error").starts_with("Task not found: task-"),
        "lost job does not keep the server's 404: {job}"
    );
    ensure!(
        job["notice"] == "delivered",
        "the parent was not told: notice is {}",
        job["notice"]
    );
    // What people are told about it names the likely cause, and that the parent knows.
    let shown = atc.ok(&["status", &tid])?.stdout;
    ensure!(
        shown.contains("restarted") && shown.contains("the parent was told"),
        "`atc status` of a lost job: {shown}"
    );
    // The notice is the turn's text: a job's `final` holds only a rendered result.
    ensure!(
        job["final"].is_null(),
        "a lost job has a rendered result: {job}"
    );
    let turn = own_turn(&atc, &job)?;
    ensure!(
        turn["carries"][0]["block"] == "notice",
        "the lost job's turn does not carry its notice: {turn}"
    );
    // The parent chat survived the restart and holds exactly one notice.
    wait_turn(&api, &turn)?;
    atc.ok(&["tick"])?;
    let after = api.history("default", "frank", "restart-parent", USER_TURN_WAIT)?;
    let notice = s(&turn, "text").to_string();
    ensure!(
        notice.starts_with(&format!("[TASK_ID: {tid}]\n[STATUS: lost]\n\n")),
        "notice text: {notice:?}"
    );
    check_delivered_once(&after, before, &notice, &own_turn(&atc, &atc.job(&tid)?)?)
}

// ---------------------------------------------------------------------------
// 6. runtime token

fn runtime_token(ctx: &Ctx) -> R<()> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let token = format!("atc-e2e-token-{}-{nanos:x}", std::process::id());
    let server = Server::create(
        "token",
        &ctx.venv,
        &ctx.llm,
        ServerOptions {
            token: Some(token.clone()),
            ..ServerOptions::default()
        },
    )?;
    let api = server.api();
    let denied = api.with_token(None).get("/api/version", None)?;
    denied.expect(401, "GET /api/version without the token")?;
    ensure!(
        denied.content_type.starts_with("application/json"),
        "401 content-type {}",
        denied.content_type
    );
    ctx.record("auth_401_runtime", &denied.body);

    let (user, parent) = ("grace", "token-parent");
    let before = api.make_parent("default", user, parent)?.len();
    let tid = api.submit(
        Some("default"),
        "token-child",
        user,
        "child behind a token",
        None,
    )?;
    api.wait_finished(&tid, SECS(30))?;

    let atc = ctx.atc("token", &server.root())?;
    atc.watch(&tid, parent, user, &[])?;
    atc.ok(&["tick"])?;
    let job = atc.job(&tid)?;
    require_status(&job, "pending")?;
    ensure!(
        job["strikes"] == 1,
        "strikes is {}, expected 1 after a 401: {job}",
        job["strikes"]
    );
    ensure!(
        s(&job, "last_error").contains("QWENPAW_RUNTIME_INTERNAL_TOKEN"),
        "the note does not say which variable supplies the token: {:?}",
        job["last_error"]
    );
    let now = api.history("default", user, parent, USER_TURN_WAIT)?;
    ensure!(
        new_user_turns(&now, before) == 0,
        "something was delivered without the token"
    );

    // Without the token, doctor and wait say so (exit 1 and 5); with it, doctor passes.
    let doctor = atc.run_env(&["doctor"], &[])?;
    ensure!(
        doctor.status.code() == Some(1)
            && doctor
                .stdout
                .contains("✗ token: the server wants a token (401 Invalid runtime boundary token)"),
        "doctor without the token: {}",
        doctor.describe()
    );
    let waited = atc.run_env(&["wait", &tid], &[])?;
    ensure!(
        waited.status.code() == Some(5) && waited.stderr.contains("HTTP 401"),
        "wait without the token: {}",
        waited.describe()
    );
    let with_token = atc.with_env("QWENPAW_RUNTIME_INTERNAL_TOKEN", &token);
    let doctor = with_token.run_env(&["doctor"], &[])?;
    ensure!(
        doctor.stdout.contains("✓ token: accepted") && !doctor.stdout.contains("✗ server"),
        "doctor with the token: {}",
        doctor.describe()
    );
    let job = with_token.tick_one_until_terminal(&["-v"], &tid, SECS(30))?;
    require_status(&job, "done")?;
    let turn = own_turn(&with_token, &job)?;
    delivered_into(&api, user, parent, before, &final_text(&job)?, &turn)?;

    let file = fs::read_to_string(&atc.state).map_err(|e| e.to_string())?;
    ensure!(
        !file.contains(&token),
        "the job file contains the runtime token"
    );
    ensure!(
        !with_token.transcript.borrow().contains(&token),
        "atc printed the runtime token"
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// wait and doctor against the real server

fn wait_and_doctor(ctx: &Ctx) -> R<()> {
    let api = ctx.main.api();
    let atc = ctx.atc("wait", &ctx.main.root())?;

    // wait prints exactly what QwenPaw's own formatter shows for the task, exit 0.
    let user = "wendy";
    let tid = ctx.child(
        &api,
        "default",
        "wait-child",
        user,
        "SLEEP=2 child for wait",
    )?;
    let waited = atc.run_env(
        &["wait", &tid, "--timeout", "60s", "--interval", "500ms"],
        &[],
    )?;
    ensure!(
        waited.status.code() == Some(0),
        "wait: {}",
        waited.describe()
    );
    let (_, raw) = api.wait_finished(&tid, SECS(10))?;
    let oracle = ctx.oracle(&tid, &raw)?;
    ensure_same(
        "atc wait vs format_background_status_text",
        waited.stdout.trim_end_matches('\n'),
        &oracle,
    )?;
    ensure!(!atc.state.exists(), "wait wrote a job file");

    // A slow child and a short --timeout: 124, and the task keeps running.
    let slow = ctx.child(&api, "default", "wait-slow", user, "SLEEP=8 slow child")?;
    let timed_out = atc.run_env(
        &["wait", &slow, "--timeout", "1s", "--interval", "300ms"],
        &[],
    )?;
    ensure!(
        timed_out.status.code() == Some(124)
            && timed_out.stderr.contains("is still running after 1s"),
        "wait --timeout: {}",
        timed_out.describe()
    );
    // An id the server never had: 6, from the real 404.
    let lost = atc.run_env(&["wait", "task-000000000000"], &[])?;
    ensure!(
        lost.status.code() == Some(6) && lost.stderr.contains("Task not found: task-000000000000"),
        "wait on an unknown task: {}",
        lost.describe()
    );
    // A failed child: 1, with QwenPaw's failure text.
    let failing = ctx.child(&api, "default", "wait-fail", user, "FAIL please")?;
    let failed = atc.run_env(
        &["wait", &failing, "--timeout", "60s", "--interval", "500ms"],
        &[],
    )?;
    let (_, raw) = api.wait_finished(&failing, SECS(10))?;
    ensure!(
        failed.status.code() == Some(1),
        "wait on a failed child: {}",
        failed.describe()
    );
    ensure_same(
        "atc wait on a failed child",
        failed.stdout.trim_end_matches('\n'),
        &ctx.oracle(&failing, &raw)?,
    )?;

    // doctor: every check passes once a watch is recorded and a tick ran.
    let parent = ctx.uniq("doctor-parent");
    api.make_parent("default", user, &parent)?;
    let watched = ctx.child(
        &api,
        "default",
        "doctor-child",
        user,
        "SLEEP=15 watched child",
    )?;
    atc.watch(&watched, &parent, user, &["--target-agent", "default"])?;
    atc.ok(&["tick"])?;
    // The harness made the job file's directory 0755: doctor finds that, with the fix.
    let dir = atc.state.parent().expect("a directory");
    let open = atc.run_env(&["doctor"], &[])?;
    ensure!(
        open.status.code() == Some(1)
            && open.stdout.contains(&format!(
                "✗ privacy: its directory {} is mode 755",
                dir.display()
            ))
            && open
                .stdout
                .contains(&format!("  → chmod 700 {}", dir.display())),
        "doctor on an open directory: {}",
        open.describe()
    );
    fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .map_err(|e| e.to_string())?;
    let doctor = atc.run_env(&["doctor"], &[])?;
    ensure!(
        doctor.status.code() == Some(0)
            && !doctor.stdout.contains('✗')
            && doctor
                .stdout
                .contains("✓ server: QwenPaw 2.2.2.post1 answers at")
            && doctor.stdout.contains("✓ health: ok, up ")
            && doctor
                .stdout
                .contains("✓ agents: the watches name agents the server has: default")
            && doctor
                .stdout
                .contains("✓ timer: the last atc tick that was no kick ran "),
        "doctor on a sound setup: {}",
        doctor.describe()
    );
    let json = atc.run_env(&["doctor", "--json"], &[])?;
    let report: Value = serde_json::from_str(&json.stdout)
        .map_err(|e| format!("doctor --json: {e}: {}", json.stdout))?;
    ensure!(
        report["ok"] == true && report["last_tick_at"].is_string(),
        "doctor --json: {report}"
    );

    // `watch` checks --target-agent as it checks --agent: QwenPaw answers 404 "Agent
    // '…' not found" for the chat list of an agent it does not have.
    let ghost = ctx.atc("doctor-ghost", &ctx.main.root())?;
    let watch = |target: &str| {
        ghost.run_env(
            &[
                "watch",
                &watched,
                "--session",
                &parent,
                "--user",
                user,
                "--create-session",
                "--target-agent",
                target,
            ],
            &[],
        )
    };
    let refused = watch("no-such-agent")?;
    ensure!(
        refused.status.code() == Some(1)
            && refused
                .stderr
                .contains("will not serve agent 'no-such-agent' (HTTP 404: Agent 'no-such-agent' not found); check --target-agent"),
        "watch --target-agent no-such-agent: {}",
        refused.describe()
    );
    // A watch whose agent went away afterwards (the file edited to say so): doctor says
    // so, exit 1.
    let second = ctx.main.second_agent()?;
    let ok = watch(&second)?;
    ensure!(ok.status.code() == Some(0), "watch: {}", ok.describe());
    let mut file = ghost.file()?;
    file["jobs"][0]["target_agent"] = json!("no-such-agent");
    fs::write(
        &ghost.state,
        serde_json::to_vec_pretty(&file).map_err(|e| e.to_string())?,
    )
    .map_err(|e| format!("{}: {e}", ghost.state.display()))?;
    let said = ghost.run_env(&["doctor"], &[])?;
    ensure!(
        said.status.code() == Some(1)
            && said
                .stdout
                .contains("✗ agents: watches name agents the server does not have: no-such-agent"),
        "doctor with an unknown agent: {}",
        said.describe()
    );
    let job = atc.tick_one_until_terminal(&[], &watched, SECS(60))?;
    require_status(&job, "done")
}

// ---------------------------------------------------------------------------
// 7. the agent registers itself

fn agent_registers_itself(ctx: &Ctx) -> R<()> {
    let api = ctx.main.api();
    let (user, parent, child) = ("heidi", ctx.uniq("self-parent"), ctx.uniq("self-child"));
    api.make_parent("default", user, &parent)?;
    let tid = api.submit(
        Some("default"),
        &child,
        user,
        "child of a self-registering agent",
        None,
    )?;
    api.wait_finished(&tid, SECS(30))?;

    // The values come from what the agent's prompt shows it (checked below).
    let command = format!(
        "atc watch {tid} --session {parent} --user {user} --channel console --agent default"
    );
    let turn = api.submit(
        Some("default"),
        &parent,
        user,
        &format!("RUNSHELL: {command}"),
        None,
    )?;
    let (payload, _) = api.wait_finished(&turn, USER_TURN_WAIT)?;
    let answer = payload["result"]["output"]
        .as_array()
        .and_then(|o| o.last())
        .map(|m| m["content"].to_string())
        .unwrap_or_default();

    let prompt_ok = ctx.llm.requests().iter().any(|req| {
        let msgs = req["messages"].as_array().cloned().unwrap_or_default();
        let asked = msgs
            .iter()
            .any(|m| m["role"] == "user" && m["content"].to_string().contains(&command));
        let system = msgs
            .first()
            .map(|m| m["content"].to_string())
            .unwrap_or_default();
        asked
            && system.contains(&format!("Session ID: {parent}"))
            && system.contains(&format!("User ID: {user}"))
            && system.contains("Channel: console")
            && system.contains(r#"Your agent id is \"default\""#)
    });
    ensure!(
        prompt_ok,
        "the agent's system prompt did not show the session/user/channel/agent used"
    );

    let atc = ctx.agent_atc()?;
    let job = atc
        .job(&tid)
        .map_err(|e| format!("{e}; the agent's turn answered {answer}"))?;
    require_status(&job, "pending")?;
    // The agent's atc found the server by itself (last_api in QwenPaw's config.json).
    let base_url = format!("{}/api", ctx.main.root());
    job_fields(
        &job,
        &[
            ("session_id", parent.as_str()),
            ("user_id", user),
            ("channel", "console"),
            ("agent_id", "default"),
            ("base_url", &base_url),
        ],
    )?;

    let before = api.history("default", user, &parent, USER_TURN_WAIT)?.len();
    let job = atc.tick_one_until_terminal(&[], &tid, SECS(60))?;
    require_status(&job, "done")?;
    let turn = own_turn(&atc, &job)?;
    delivered_into(&api, user, &parent, before, &final_text(&job)?, &turn)?;
    Ok(())
}

// ---------------------------------------------------------------------------
// 8. many at once

fn many_at_once(ctx: &Ctx) -> R<()> {
    const N: usize = 20;
    let api = ctx.main.api();
    let user = "ivan";
    let parents: Vec<String> = (0..N)
        .map(|i| ctx.uniq(&format!("many-parent-{i:02}")))
        .collect();
    let first: Vec<String> = parents
        .iter()
        .map(|p| {
            api.submit(
                Some("default"),
                p,
                user,
                &format!("hello from parent {p}"),
                None,
            )
        })
        .collect::<R<_>>()?;
    for t in &first {
        api.wait_finished(t, USER_TURN_WAIT)?;
    }
    let mut before = Vec::new();
    for p in &parents {
        before.push(api.history("default", user, p, USER_TURN_WAIT)?.len());
    }
    let children: Vec<String> = (0..N)
        .map(|i| {
            let text = format!("child {i:02} of many");
            ctx.child(&api, "default", &format!("many-child-{i:02}"), user, &text)
        })
        .collect::<R<_>>()?;

    let atc = ctx.atc("many", &ctx.main.root())?;
    for (tid, parent) in children.iter().zip(&parents) {
        atc.watch(tid, parent, user, &[])?;
    }
    let jobs = atc.tick_until_terminal(&["--busy-retry", "1s"], &children, SECS(180))?;
    let all = atc.jobs()?;
    ensure!(
        all.len() == N,
        "{} jobs in the file, expected {N}",
        all.len()
    );
    ensure!(
        all.iter().all(is_terminal),
        "non-terminal jobs left: {all:?}"
    );
    for (i, job) in jobs.iter().enumerate() {
        require_status(job, "done")?;
        let text = final_text(job)?;
        ensure!(
            text.starts_with(&format!("[TASK_ID: {}]", children[i]))
                && text.ends_with(&format!("ECHO: child {i:02} of many")),
            "parent {i} got {text:?}"
        );
        wait_turn(&api, &own_turn(&atc, job)?)?;
    }
    ensure!(
        atc.turns()?.len() == N,
        "{} turns in the file, expected one per parent ({N})",
        atc.turns()?.len()
    );
    for (i, job) in jobs.iter().enumerate() {
        let after = api.history("default", user, &parents[i], USER_TURN_WAIT)?;
        check_delivered_once(&after, before[i], &final_text(job)?, &own_turn(&atc, job)?)
            .map_err(|e| format!("parent {i}: {e}"))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// beyond the issue's eight: a parent agent that does not exist

/// An agent the server does not have: `watch` refuses it at once (QwenPaw's chat list
/// answers 404 `Agent '…' not found`). A job whose agent disappeared after the watch
/// ends as `error` with that detail, and nothing lands anywhere.
/// A model's slip: the `[SESSION: …]` line of its submission taken for its own chat's.
/// Knowing the child's session (`--child-session`), `watch` refuses it (exit 1) and writes
/// nothing. Not knowing it, the result goes into the child's chat (the chat the watch
/// named, which exists), and the reply it wakes there stays: no follow-up goes up into
/// that same chat (it went up and woke the child again, to the depth limit), and the
/// turn's `up` record says why.
fn own_child_session(ctx: &Ctx) -> R<()> {
    let api = ctx.main.api();
    let user = "olga";
    let tid = ctx.child(&api, "default", "own-child", user, "own child says hello")?;
    let (payload, _) = api.wait_finished(&tid, SECS(60))?;
    let child = payload["result"]["session_id"]
        .as_str()
        .ok_or_else(|| format!("no result.session_id: {payload}"))?
        .to_owned();
    let atc = ctx.atc("own-child", &ctx.main.root())?;
    let refused = atc.run_env(
        &[
            "watch",
            &tid,
            "--session",
            &child,
            "--user",
            user,
            "--channel",
            "console",
            "--child-session",
            &child,
        ],
        &[],
    )?;
    ensure!(
        refused.status.code() == Some(1)
            && refused
                .stderr
                .contains(&format!("--session {child} is {tid}'s own child session")),
        "watch did not refuse the task's own child session as its chat: {}",
        refused.describe()
    );
    ensure!(
        !atc.state.exists(),
        "a refused watch wrote {}",
        atc.state.display()
    );
    atc.watch(&tid, &child, user, &[])?;
    let job = atc.tick_one_until_terminal(&[], &tid, SECS(60))?;
    require_status(&job, "done")?;
    let deadline = std::time::Instant::now() + SECS(60);
    let up = loop {
        atc.ok(&["tick"])?;
        let turn = atc.turn_of(&atc.job(&tid)?)?;
        if turn["up"].is_object() {
            break turn["up"].clone();
        }
        ensure!(
            std::time::Instant::now() < deadline,
            "no tick recorded how the woken turn ended: {turn}"
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    ensure!(
        up.get("turn").is_none()
            && up["not"]
                .as_str()
                .is_some_and(|why| why.contains("delivers into its own child's chat")),
        "the reply went up, or its record does not say why: {up}"
    );
    for _ in 0..3 {
        atc.ok(&["tick"])?;
        std::thread::sleep(Duration::from_millis(500));
    }
    let msgs = api.history("default", user, &child, USER_TURN_WAIT)?;
    let user_turns: Vec<&Msg> = msgs.iter().filter(|m| m.role == "user").collect();
    let results = user_turns
        .iter()
        .filter(|m| m.text.starts_with(&format!("[TASK_ID: {tid}]")))
        .count();
    let follow_ups = user_turns
        .iter()
        .filter(|m| m.text.contains("[atc: follow-up"))
        .count();
    ensure!(
        results == 1 && follow_ups == 0,
        "the child's chat holds {results} results and {follow_ups} follow-ups of {tid}: {:?}",
        user_turns.iter().map(|m| &m.text).collect::<Vec<_>>()
    );
    Ok(())
}

fn unknown_parent_agent(ctx: &Ctx) -> R<()> {
    let api = ctx.main.api();
    let (user, parent) = ("kim", ctx.uniq("nobody-parent"));
    let tid = ctx.child(&api, "default", "nobody-child", user, "child of nobody")?;
    api.wait_finished(&tid, SECS(30))?;
    let refused = api.submit_raw(Some("no-such-agent"), &parent, user, "probe", None)?;
    refused.expect(404, "POST as an unknown agent")?;
    ctx.record("unknown_agent_404", &refused.body);

    let atc = ctx.atc("nobody", &ctx.main.root())?;
    let watched = atc.run_env(
        &[
            "watch",
            &tid,
            "--session",
            &parent,
            "--user",
            user,
            "--channel",
            "console",
            "--agent",
            "no-such-agent",
            "--target-agent",
            "default",
        ],
        &[],
    )?;
    ensure!(
        watched.status.code() == Some(1)
            && watched
                .stderr
                .contains("will not serve agent 'no-such-agent'")
            && watched.stderr.contains("Agent 'no-such-agent' not found"),
        "watch did not refuse an unknown agent: {}",
        watched.describe()
    );
    // A watch whose agent went away afterwards.
    let job = json!({"version": 2, "turns": [], "jobs": [{
        "job_id": "0123456789ab", "task_id": tid, "base_url": format!("{}/api", ctx.main.root()),
        "agent_id": "no-such-agent", "target_agent": "default", "session_id": parent,
        "user_id": user, "channel": "console", "registered_at": "2026-12-01T00:00:00Z",
        "updated_at": "2026-12-01T00:00:00Z", "status": "pending"}]});
    fs::write(&atc.state, job.to_string()).map_err(|e| e.to_string())?;
    let job = atc.tick_one_until_terminal(&[], &tid, SECS(30))?;
    require_status(&job, "error")?;
    ensure!(
        job["final"].is_string(),
        "the rendered text was not kept in `final`: {job}"
    );
    // The refusal is its turn's, with the server's detail; nothing of it went out.
    let turn = own_turn(&atc, &job)?;
    ensure!(
        turn["state"] == "refused"
            && turn["text"] == job["final"]
            && turn["delivery"]["attempts"] == 0
            && s(&turn["delivery"], "error").contains("Agent 'no-such-agent' not found"),
        "the turn does not carry the server's detail: {turn}"
    );
    // And people are told it, from the turn.
    let shown = atc.ok(&["status", &tid])?.stdout;
    ensure!(
        shown.contains("the server refused the delivery")
            && shown.contains("Agent 'no-such-agent' not found"),
        "`atc status` of the refused job: {shown}"
    );
    ensure!(
        api.chat_id("default", user, &parent)?.is_none(),
        "a chat appeared for the parent session on default"
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// parents on an IM channel (MQTT, a real broker)

/// A person on MQTT starts the chat; returns their listener and how many messages they
/// heard (the agent's answer to their first message).
pub(crate) fn mqtt_chat(ctx: &Ctx, im: &Im, client: &str) -> R<(Person, usize)> {
    let person = Person::start(&ctx.venv, &im.broker, client, &im.dir)?;
    person.say(&format!("hello from {client}"), &im.dir)?;
    let heard = person.wait_for_more(0, SECS(60))?;
    ensure!(
        heard[0] == format!("ECHO: hello from {client}"),
        "the person's first answer over MQTT: {heard:?}"
    );
    let api = im.server.api();
    let session = format!("mqtt:{client}");
    let chats = api.get(
        &format!("/api/chats?user_id={client}&channel=mqtt"),
        Some("default"),
    )?;
    ensure!(
        chats
            .body
            .contains(&format!("\"session_id\":\"{session}\"")),
        "no MQTT chat {session}: {}",
        chats.body
    );
    Ok((person, heard.len()))
}

/// Delegates a child (console) whose result shapes the woken parent's answer, watches it
/// from the person's MQTT chat, and ticks until the forward has settled: the job and
/// the turn that carries its result.
fn im_watch(ctx: &Ctx, im: &Im, client: &str, child_says: &str) -> R<(Atc, Value, Value)> {
    let api = im.server.api();
    let tid = ctx.child(&api, "default", "im-child", client, child_says)?;
    api.wait_finished(&tid, SECS(30))?;
    let atc = ctx.atc("im", &im.server.root())?;
    let session = format!("mqtt:{client}");
    atc.ok(&[
        "watch",
        &tid,
        "--session",
        &session,
        "--user",
        client,
        "--channel",
        "mqtt",
    ])?;
    let (job, turn) = until_forwarded(&atc, &tid, SECS(90))?;
    Ok((atc, job, turn))
}

/// The woken parent first says "I will inspect…" with a tool call, then its final text:
/// the person receives exactly one message, the final text, and none of the rest. (The
/// woken turn itself runs through the console: QwenPaw publishes nothing to MQTT.)
fn im_forward_final_only(ctx: &Ctx) -> R<()> {
    let im = ctx.im()?;
    let (person, before) = mqtt_chat(ctx, &im, "alice")?;
    let (atc, job, turn) = im_watch(ctx, &im, "alice", "child for alice IM-PARENT: TOOL")?;
    require_status(&job, "done")?;
    ensure!(
        turn["state"] == "delivered" && turn["parent_turn"] == "completed",
        "parent_turn: {turn}"
    );
    ensure!(
        turn["forward"]["status"] == "sent",
        "forward: {}",
        turn["forward"]
    );
    let heard = person.wait_for_more(before, SECS(20))?;
    std::thread::sleep(SECS(3));
    let heard_now = person.heard();
    ensure!(
        heard_now.len() == heard.len(),
        "more messages kept arriving: {heard_now:?}"
    );
    let new = &heard_now[before..];
    ensure!(
        new == ["FINAL: the person's answer"],
        "the person should get exactly the parent's final reply, got {new:?}"
    );
    // The intermediate text was said (it is in the woken turn's own record), just not
    // forwarded.
    let (record, _) = im
        .server
        .api()
        .wait_finished(s(&turn, "turn_task_id"), SECS(10))?;
    let output = record["result"]["output"].to_string();
    ensure!(
        output.contains("I will inspect the result first.") && output.contains("plugin_call"),
        "the parent's turn did not say its intermediate text and call a tool: {output}"
    );
    for _ in 0..2 {
        atc.ok(&["tick"])?;
    }
    ensure!(person.heard().len() == heard_now.len(), "forwarded again");
    Ok(())
}

/// A parent whose final reply is empty: nothing reaches the person; the forward says
/// skipped.
fn im_empty_reply_skipped(ctx: &Ctx) -> R<()> {
    let im = ctx.im()?;
    let (person, before) = mqtt_chat(ctx, &im, "bruno")?;
    let (_, job, turn) = im_watch(ctx, &im, "bruno", "child for bruno IM-PARENT: EMPTY")?;
    require_status(&job, "done")?;
    ensure!(
        turn["forward"]["status"] == "skipped" && s(&turn["forward"], "reason").contains("empty"),
        "forward: {}",
        turn["forward"]
    );
    std::thread::sleep(SECS(3));
    let heard = person.heard();
    ensure!(
        heard.len() == before,
        "the person received {:?}",
        &heard[before..]
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// contract pinning

fn contract_pinning(ctx: &Ctx) -> R<()> {
    // A cancelled task, for completeness (tests/support/bodies.rs has one).
    let api = ctx.main.api();
    let tid = api.submit(
        Some("default"),
        "pin-cancel",
        "judy",
        "to be cancelled SLEEP=20",
        None,
    )?;
    let chat = api
        .chat_id("default", "judy", "pin-cancel")?
        .ok_or("no chat for the task to cancel")?;
    let stop = api.post(
        &format!("/api/console/chat/stop?chat_id={chat}"),
        Some("default"),
        &json!({}),
    )?;
    stop.expect(200, "POST chat/stop")?;
    let (_, raw) = api.wait_finished(&tid, SECS(30))?;
    ctx.record("finished_cancelled", &raw);
    if !ctx.bodies.borrow().contains_key("not_found") {
        ctx.record("not_found", &api.task("task-000000000000")?.body);
    }

    let bodies = ctx.bodies.borrow().clone();
    let missing: Vec<&str> = REQUIRED_BODIES
        .iter()
        .copied()
        .filter(|k| !bodies.contains_key(*k))
        .collect();
    ensure!(
        missing.is_empty(),
        "not observed (did their scenarios fail?): {missing:?}"
    );
    // What the names promise.
    ensure!(
        bodies["running"]["status"] == "running",
        "running: {}",
        bodies["running"]
    );
    ensure!(
        bodies["finished_completed"]["result"]["status"] == "completed",
        "finished_completed"
    );
    ensure!(
        bodies["finished_failed_llm"]["result"]["error"]["code"] == "MODEL_EXECUTION_ERROR",
        "finished_failed_llm"
    );
    ensure!(
        bodies["finished_timeout"]["result"]["error"]["code"] == "timeout",
        "finished_timeout"
    );
    ensure!(
        s(&bodies["not_found"], "detail").starts_with("Task not found: task-"),
        "not_found"
    );
    ensure!(
        s(&bodies["busy_409"], "detail").starts_with("A task is already running"),
        "busy_409"
    );
    ensure!(
        bodies["auth_401_runtime"]["detail"] == "Invalid runtime boundary token",
        "auth_401_runtime"
    );

    let path = fixture_path();
    if crate::recording() {
        let mut text = serde_json::to_string_pretty(&bodies).map_err(|e| e.to_string())?;
        text.push('\n');
        fs::create_dir_all(path.parent().expect("fixture dir")).map_err(|e| e.to_string())?;
        fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!(
            "e2e: recorded {} bodies into {}",
            bodies.len(),
            path.display()
        );
        return Ok(());
    }
    let pinned: Value = serde_json::from_str(
        &fs::read_to_string(&path)
            .map_err(|e| format!("{}: {e} (record it with ATC_E2E_RECORD=1)", path.display()))?,
    )
    .map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
    let mut diffs = Vec::new();
    for (name, real) in &bodies {
        match pinned.get(name) {
            Some(p) => crate::shape::diff(name, real, p, ("live", "pinned"), &mut diffs),
            None => diffs.push(format!("{name}: not in the fixture")),
        }
    }
    ensure!(
        diffs.is_empty(),
        "the real server's bodies drifted from {} (re-record with ATC_E2E_RECORD=1 if intended): {}",
        path.display(),
        diffs.join("; ")
    );
    Ok(())
}
