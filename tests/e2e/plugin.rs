//! atc's QwenPaw plugin (`examples/qwenpaw-plugin/atc`) on the real server: installed by
//! `atc qwenpaw install` into the running server (hot-loaded, no restart), its tools
//! called by the model (the fake LLM's `CALLTOOL:`) from a chat whose user is not
//! `default`; the job has that chat's exact agent, session, user and channel; a tick
//! delivers into that chat; `callback_task_status` and `cancel_task_callback` work from
//! it. The same from an MQTT chat: the result reaches the person through the forward.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::R;
use crate::atc::Atc;
use crate::ensure;
use crate::mqtt::Person;
use crate::qwenpaw::Server;
use crate::scenarios::{
    Ctx, delivered_into, job_fields, mqtt_chat, own_turn, require_status, until_forwarded,
};

const TURN_WAIT: Duration = Duration::from_secs(60);

/// The tools atc's plugin offers.
pub(crate) const ATC_TOOLS: [&str; 4] = [
    "watch_agent_task",
    "watch_agent_tasks",
    "callback_task_status",
    "cancel_task_callback",
];

/// The `tools.builtin_tools` of `agent`'s `agent.json` in the working dir `wd`.
pub(crate) fn builtin_tools(wd: &Path, agent: &str) -> R<Value> {
    let path = wd.join("workspaces").join(agent).join("agent.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let config: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    Ok(config["tools"]["builtin_tools"].clone())
}

/// `atc qwenpaw install --all` into `server`'s working dir, with the server running.
pub fn install(ctx: &Ctx, server: &Server, name: &str) -> R<()> {
    let wd = server.dir.path().join("home/.qwenpaw");
    let atc = ctx.atc(name, &server.root())?;
    let wd_shown = wd.display().to_string();
    let out = atc.ok(&["qwenpaw", "install", "--all", "--working-dir", &wd_shown])?;
    let loaded = format!(
        "No restart needed: the QwenPaw at {}/api loaded the plugin.",
        server.root()
    );
    ensure!(
        out.stdout.contains(&loaded),
        "atc qwenpaw install did not hot-load the plugin: {}",
        out.describe()
    );
    let status = server.api().get("/api/plugins/atc/status", None)?;
    ensure!(
        status.status == 200 && status.json()?["loaded"] == true,
        "the server does not report the plugin loaded: HTTP {} {}",
        status.status,
        status.body
    );
    for agent in &server.agents {
        let tools = builtin_tools(&wd, agent)?;
        for tool in ATC_TOOLS {
            ensure!(
                tools[tool]["enabled"] == true,
                "agent {agent}: {tool} not enabled after install: {tools}"
            );
        }
    }
    // A second run changes nothing and needs no restart.
    let again = atc.ok(&["qwenpaw", "install", "--all", "--working-dir", &wd_shown])?;
    ensure!(
        again.stdout.contains("Nothing to change")
            && again.stdout.contains("No restart needed: the QwenPaw at")
            && again.stdout.contains("has this plugin loaded."),
        "the second install was not a no-op: {}",
        again.describe()
    );
    Ok(())
}

/// A turn in (session, user) on `default` whose model calls `tool` with `args`; returns
/// the turn's final text (the tool's one line).
pub(crate) fn call_tool(
    server: &Server,
    session: &str,
    user: &str,
    tool: &str,
    args: &Value,
) -> R<String> {
    let api = server.api();
    let turn = api.submit(
        Some("default"),
        session,
        user,
        &format!("CALLTOOL: {tool} {args}"),
        None,
    )?;
    let (payload, _) = api.wait_finished(&turn, TURN_WAIT)?;
    let output = payload["result"]["output"].to_string();
    ensure!(
        output.contains("plugin_call") || output.contains(tool),
        "the turn did not call the tool {tool}: {output}"
    );
    Ok(crate::api::answer_of(&payload))
}

/// [`call_tool`] of `watch_agent_task` for `task` on `target`: the tool's line.
pub(crate) fn watch_by_tool(
    server: &Server,
    session: &str,
    user: &str,
    task: &str,
    target: &str,
) -> R<String> {
    let args = json!({"task_id": task, "target_agent": target});
    call_tool(server, session, user, "watch_agent_task", &args)
}

/// Submits `text` on `target` (a fresh session named after `prefix`) and has the model in
/// (session, user) `chat` watch it with `watch_agent_task`, which must say so: the task.
pub(crate) fn watched_child(
    ctx: &Ctx,
    server: &Server,
    chat: (&str, &str),
    target: &str,
    prefix: &str,
    text: &str,
) -> R<String> {
    let (session, user) = chat;
    let tid = ctx.child(&server.api(), target, prefix, "default", text)?;
    let said = watch_by_tool(server, session, user, &tid, target)?;
    ensure!(
        said.starts_with(&format!(
            "Watching {tid} (polled as agent {target}): the result comes back into this chat"
        )),
        "watch_agent_task answered {said:?}"
    );
    Ok(tid)
}

fn job_in(state: &Path, ctx: &Ctx, server: &Server, task: &str) -> R<(Atc, Value)> {
    let dir = ctx.fresh_dir("plugin-reader")?;
    let atc = Atc::new(&ctx.atc_bin, &dir, state.to_path_buf(), &server.root())?;
    let job = atc.job(task)?;
    Ok((atc, job))
}

pub fn tools_console(ctx: &Ctx) -> R<()> {
    let server = &ctx.main;
    install(ctx, server, "plugin-install")?;
    let api = server.api();
    let target = server.second_agent()?;
    let (user, parent) = ("erin", "plugin-parent");
    api.make_parent("default", user, parent)?;

    // A child on the second agent, watched by the model through the tool. It runs a few
    // seconds, so that the chat's own turns below are over before its result comes (the
    // plugin's end-of-turn kick delivers it the moment it is ready).
    let child_text = "child work watched through the plugin tool";
    let text = format!("{child_text} SLEEP=8");
    let tid = watched_child(ctx, server, (parent, user), &target, "plugin-child", &text)?;
    let (atc, job) = job_in(&ctx.agent_state, ctx, server, &tid)?;
    let base_url = format!("{}/api", server.root());
    job_fields(
        &job,
        &[
            ("origin", "plugin"),
            ("agent_id", "default"),
            ("session_id", parent),
            ("user_id", user),
            ("channel", "console"),
            ("target_agent", target.as_str()),
            ("base_url", &base_url),
        ],
    )?;

    // A task id the server never had is refused at once, through the tool as on the
    // command line (QwenPaw's own 404), with no "poll check_agent_task" fallback.
    let said = call_tool(
        server,
        parent,
        user,
        "watch_agent_task",
        &json!({"task_id": "task-000000000000"}),
    )?;
    ensure!(
        said == "Not watching task-000000000000: this QwenPaw server has no such task (\"Task not found\"). Copy the ID exactly from the [TASK_ID: ...] line submit_to_agent returned.",
        "watch_agent_task of an unknown id answered {said:?}"
    );
    ensure!(
        atc.file()?["jobs"]
            .as_array()
            .is_none_or(|jobs| jobs.iter().all(|j| j["task_id"] != "task-000000000000")),
        "an unknown task id was watched"
    );

    // callback_task_status from the same chat lists it; from another user's chat, not.
    let status = call_tool(server, parent, user, "callback_task_status", &json!({}))?;
    ensure!(
        status.lines().any(|l| l.starts_with(&format!(
            "{tid} | pending | agent={target} session={parent} | registered="
        ))),
        "callback_task_status answered {status:?}"
    );
    // The parent chat as it is before the result comes (the child is still running).
    let before = api.history("default", user, parent, TURN_WAIT)?.len();
    api.make_parent("default", "frank", "plugin-other")?;
    let other = call_tool(
        server,
        "plugin-other",
        "frank",
        "callback_task_status",
        &json!({}),
    )?;
    ensure!(
        other == "This chat watches no tasks.",
        "another chat's callback_task_status answered {other:?}"
    );

    // A tick (the test's, or one the plugin's end-of-turn hook started) delivers into the
    // chat that asked, once.
    let job = atc.tick_one_until_terminal(&[], &tid, TURN_WAIT)?;
    require_status(&job, "done")?;
    let text = job["final"].as_str().unwrap_or_default().to_string();
    ensure!(
        text.starts_with(&format!(
            "[TASK_ID: {tid}]\n[STATUS: finished]\n\nTask completed."
        )) && text.contains(child_text),
        "the delivered text is not the child's result: {text:?}"
    );
    delivered_into(&api, user, parent, before, &text, &own_turn(&atc, &job)?)?;

    // cancel_task_callback from the same chat.
    let slow = ctx.child(
        &api,
        &target,
        "plugin-slow",
        "default",
        "slow child SLEEP=20",
    )?;
    let said = watch_by_tool(server, parent, user, &slow, &target)?;
    ensure!(
        said.starts_with(&format!("Watching {slow}")),
        "watch_agent_task answered {said:?}"
    );
    let said = call_tool(
        server,
        parent,
        user,
        "cancel_task_callback",
        &json!({"task_id": slow}),
    )?;
    // atc's own line, in the tool's words (the model asks check_agent_task, not `atc wait`).
    ensure!(
        said.starts_with(&format!("Cancelled the watch on {slow}; "))
            && said.ends_with("is not stopped: check_agent_task says how it ends.")
            && !said.contains("atc wait"),
        "cancel_task_callback answered {said:?}"
    );
    let job = atc.job(&slow)?;
    ensure!(
        job["status"] == "cancelled",
        "job {slow} is {}: {job}",
        job["status"]
    );
    let status = call_tool(server, parent, user, "callback_task_status", &json!({}))?;
    ensure!(
        status.contains(&format!("{slow} | cancelled"))
            && status.contains(&format!("{tid} | done")),
        "callback_task_status after the cancel answered {status:?}"
    );
    Ok(())
}

/// What the person heard, once a message `until` accepts arrived (or a minute passed).
fn heard_until(person: &Person, until: impl Fn(&str) -> bool) -> R<Vec<String>> {
    let deadline = std::time::Instant::now() + TURN_WAIT;
    loop {
        let heard = person.heard();
        if heard.iter().any(|m| until(m)) {
            return Ok(heard);
        }
        ensure!(
            std::time::Instant::now() < deadline,
            "the person did not get the expected message; heard {heard:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn tools_mqtt(ctx: &Ctx) -> R<()> {
    let im = ctx.im()?;
    install(ctx, &im.server, "plugin-install-im")?;
    let (person, _) = mqtt_chat(ctx, &im, "pat")?;
    let api = im.server.api();
    let child_text = "child for pat through the plugin";
    let tid = ctx.child(&api, "default", "plugin-im-child", "pat", child_text)?;
    api.wait_finished(&tid, TURN_WAIT)?;
    // The person's own message makes the model call the tool, in the MQTT chat.
    person.say(
        &format!("CALLTOOL: watch_agent_task {}", json!({"task_id": tid})),
        &im.dir,
    )?;
    // QwenPaw relays the tool call and its output to the person too (the tool's
    // display_to_user, on by default), then the final reply: the tool's line.
    let watching = format!("Watching {tid}: the result comes back into this chat");
    let heard = heard_until(&person, |m| m.starts_with(&watching))?;
    // What came after the tool's final line: the kick that turn's end starts may deliver
    // the (finished) result and the woken parent's reply may reach pat before this test
    // looks again.
    let replied = heard
        .iter()
        .position(|m| m.starts_with(&watching))
        .map_or(heard.len(), |at| at + 1);
    let (atc, job) = job_in(&ctx.im_agent_state(), ctx, &im.server, &tid)?;
    job_fields(
        &job,
        &[
            ("agent_id", "default"),
            ("session_id", "mqtt:pat"),
            ("user_id", "pat"),
            ("channel", "mqtt"),
        ],
    )?;
    // Ticks deliver into the MQTT chat; the woken parent's reply is forwarded to pat.
    let (job, turn) = until_forwarded(&atc, &tid, TURN_WAIT)?;
    ensure!(
        job["status"] == "done"
            && turn["state"] == "delivered"
            && turn["forward"]["status"] == "sent",
        "job {tid}: {job}, its turn: {turn}"
    );
    let echo = format!("ECHO: [TASK_ID: {tid}]");
    heard_until(&person, |m| m.starts_with(&echo))?;
    std::thread::sleep(Duration::from_secs(2));
    let heard = person.heard();
    let forwarded = &heard[replied..];
    ensure!(
        forwarded.len() == 1
            && forwarded[0].starts_with(&format!("ECHO: [TASK_ID: {tid}]"))
            && forwarded[0].contains(child_text),
        "the person should get the woken parent's reply to the result, got {forwarded:?} (heard in all: {heard:?}; {replied} before the watch's line)"
    );
    Ok(())
}
