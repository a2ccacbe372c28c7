//! The atc-callback skill (`examples/qwenpaw-skill/atc-callback/SKILL.md`) on the real
//! server: installed and enabled the way QwenPaw's docs tell a user to (a folder under the
//! agent's workspace `skills/`, then `qwenpaw skills test` and `qwenpaw skills enable`),
//! seen in the next turn's system prompt, and followed: the agent delegates with
//! `submit_to_agent`, runs the `atc watch …` the skill prescribes from its shell tool with
//! the values its prompt shows, and the result comes back into its chat exactly once.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::R;
use crate::api::answer_of;
use crate::ensure;
use crate::procs::{Output, clip};
use crate::scenarios::{Ctx, delivered_into, final_text, job_fields, own_turn, require_status};

const SKILL: &str = "atc-callback";
/// What the fake LLM's `SKILLTEST:` directive answers once `atc watch` ran.
const DELEGATED: &str = "Delegated; the result will come back by itself.";
const TURN_WAIT: Duration = Duration::from_secs(60);

fn skill_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/qwenpaw-skill")
        .join(SKILL)
}

/// The `description:` of the skill's front matter: one line, in double quotes (it holds
/// `: `, which plain YAML would take for a mapping), without escapes.
fn skill_description() -> R<String> {
    let path = skill_dir().join("SKILL.md");
    let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .take_while(|l| !l.is_empty())
        .find_map(|l| l.strip_prefix("description: \"")?.strip_suffix('"'))
        .filter(|d| !d.contains(['"', '\\']))
        .map(str::to_string)
        .ok_or_else(|| format!("{} has no one-line quoted description", path.display()))
}

/// Runs the venv's python with the server's environment and requires exit 0.
fn python_ok(ctx: &Ctx, what: &str, args: &[&str]) -> R<Output> {
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    let out = ctx
        .main
        .python(what, &args, None, Duration::from_secs(120))?;
    ensure!(out.status.success(), "{what} failed: {}", out.describe());
    Ok(out)
}

/// The real QwenPaw CLI (`qwenpaw skills …`), as the server's user runs it.
fn qwenpaw(ctx: &Ctx, args: &[&str]) -> R<Output> {
    let mut all = vec!["-m", "qwenpaw"];
    all.extend_from_slice(args);
    python_ok(ctx, &format!("qwenpaw {}", args.join(" ")), &all)
}

/// Installs the skill for `agent`: its folder goes into the agent's workspace `skills/`
/// (QwenPaw's "create manually in the workspace"; the next manifest reconcile lists it,
/// disabled), `qwenpaw skills test` validates it (front matter, security scan, declared
/// requirements), `qwenpaw skills enable` enables it. The running server needs no reload:
/// it resolves the enabled skills for every request.
fn install_skill(ctx: &Ctx, agent: &str) -> R<()> {
    // Where this agent's workspace is, in QwenPaw's own words.
    let out = python_ok(
        ctx,
        "workspace dir",
        &[
            "-c",
            "import sys; from qwenpaw.config.utils import load_config; \
             print(load_config().agents.profiles[sys.argv[1]].workspace_dir)",
            agent,
        ],
    )?;
    let workspace = PathBuf::from(out.stdout.trim());
    ensure!(
        workspace.is_dir(),
        "agent {agent}'s workspace {} is not a directory",
        workspace.display()
    );
    let dest = workspace.join("skills").join(SKILL);
    fs::create_dir_all(&dest).map_err(|e| format!("{}: {e}", dest.display()))?;
    fs::copy(skill_dir().join("SKILL.md"), dest.join("SKILL.md"))
        .map_err(|e| format!("copy SKILL.md to {}: {e}", dest.display()))?;

    let tested = qwenpaw(ctx, &["skills", "test", SKILL, "--agent-id", agent])?;
    ensure!(
        tested
            .stdout
            .contains(&format!("Skill test passed: {SKILL}")),
        "`qwenpaw skills test` did not pass the skill: {}",
        tested.describe()
    );
    let enabled = qwenpaw(ctx, &["skills", "enable", SKILL, "--agent-id", agent])?;
    ensure!(
        enabled.stdout.contains(&format!("Enabled: {SKILL}")),
        "`qwenpaw skills enable` did not enable the skill: {}",
        enabled.describe()
    );
    Ok(())
}

/// The text of an OpenAI message content (a string or a list of text parts).
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str().or_else(|| p.as_str()))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn messages(req: &Value) -> Vec<Value> {
    req["messages"].as_array().cloned().unwrap_or_default()
}

/// Everything the request's system message(s) say.
fn system_text(req: &Value) -> String {
    messages(req)
        .iter()
        .filter(|m| m["role"] == "system")
        .map(|m| text_of(&m["content"]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The LLM requests of the parent chat `session` (its prompt shows the Session ID).
fn requests_of(ctx: &Ctx, skip: usize, session: &str) -> Vec<Value> {
    let line = format!("Session ID: {session}\n");
    ctx.llm
        .requests()
        .into_iter()
        .skip(skip)
        .filter(|r| system_text(r).contains(&line))
        .collect()
}

/// One tool call the model made, with the text of the tool's result.
struct Call {
    name: String,
    args: Value,
    result: Option<String>,
}

/// The tool calls in a request's conversation, in order, with their results.
fn calls(req: &Value) -> Vec<Call> {
    let msgs = messages(req);
    let mut out = Vec::new();
    for m in &msgs {
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            let id = &call["id"];
            let result = msgs
                .iter()
                .find(|r| r["role"] == "tool" && r["tool_call_id"] == *id)
                .map(|r| text_of(&r["content"]));
            out.push(Call {
                name: call["function"]["name"].as_str().unwrap_or("").to_string(),
                args: call["function"]["arguments"]
                    .as_str()
                    .and_then(|a| serde_json::from_str(a).ok())
                    .unwrap_or(Value::Null),
                result,
            });
        }
    }
    out
}

/// `[LABEL: value]` from a tool result.
fn bracketed(text: &str, label: &str) -> Option<String> {
    let start = text.find(&format!("[{label}: "))? + label.len() + 3;
    let end = text[start..].find(']')? + start;
    Some(text[start..end].trim().to_string())
}

pub fn registers_callback(ctx: &Ctx) -> R<()> {
    let result = run(ctx);
    // Leave the default agent as the other scenarios found it.
    let disabled = qwenpaw(ctx, &["skills", "disable", SKILL, "--agent-id", "default"]);
    result?;
    disabled.map(|_| ())
}

fn run(ctx: &Ctx) -> R<()> {
    let api = ctx.main.api();
    // The child runs on the second shipped agent: a real cross-agent delegation, so
    // --target-agent matters (its polls go out as that agent, like check_agent_task's).
    let target = ctx.main.second_agent()?;
    let (user, parent) = ("ivan", "skill-parent");
    let description = skill_description()?;

    let seen = ctx.llm.requests();
    ensure!(
        !seen.iter().any(|r| system_text(r).contains(&description)),
        "the skill was in a system prompt before it was installed"
    );
    install_skill(ctx, "default")?;

    // The parent chat's first turn is the agent's next turn: its prompt lists the skill.
    api.make_parent("default", user, parent)?;
    let first = requests_of(ctx, seen.len(), parent);
    let system = first
        .first()
        .map(system_text)
        .ok_or_else(|| format!("the fake LLM saw no request of session {parent}"))?;
    ensure!(
        system.contains(SKILL) && system.contains(&description),
        "the system prompt of the next turn does not list the enabled skill (name and description): {}",
        clip(&system, 1500)
    );

    // One turn: submit_to_agent, then the skill's atc watch, then the final text.
    let child_text = "child work delegated under the atc-callback skill";
    let turn = api.submit(
        Some("default"),
        parent,
        user,
        &format!("SKILLTEST: delegate {child_text} to {target}"),
        None,
    )?;
    let (payload, _) = api.wait_finished(&turn, TURN_WAIT)?;
    let answer = answer_of(&payload);

    let reqs = requests_of(ctx, seen.len(), parent);
    let whole = reqs
        .iter()
        .rev()
        .find(|r| calls(r).iter().any(|c| c.name == "execute_shell_command"))
        .ok_or_else(|| {
            format!("the agent never ran a shell command; its turn answered {answer:?}")
        })?;
    let calls = calls(whole);
    let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
    ensure!(
        names == ["submit_to_agent", "execute_shell_command"],
        "the turn made the tool calls {names:?}, expected submit_to_agent then execute_shell_command; it answered {answer:?}"
    );
    let (submit, shell) = (&calls[0], &calls[1]);
    ensure!(
        submit.args["to_agent"] == target.as_str() && submit.args["text"] == child_text,
        "submit_to_agent was called with {}",
        submit.args
    );
    let submitted = submit.result.clone().unwrap_or_default();
    let tid = bracketed(&submitted, "TASK_ID")
        .ok_or_else(|| format!("submit_to_agent returned no [TASK_ID: …]: {submitted:?}"))?;
    ensure!(
        tid.starts_with("task-"),
        "submit_to_agent returned task id {tid:?}"
    );
    // Exactly the skill's command, filled from the prompt QwenPaw showed the agent.
    let want = format!(
        "atc watch {tid} --session {parent} --user {user} --channel console --agent default --target-agent {target}"
    );
    ensure!(
        shell.args["command"] == want.as_str(),
        "the agent ran {}, expected {want:?}",
        shell.args["command"]
    );
    let watched = shell.result.clone().unwrap_or_default();
    ensure!(
        watched.contains(&format!("Watching {tid}")),
        "atc watch inside the agent did not register the task: {watched:?}"
    );
    ensure!(
        payload["result"]["status"] == "completed" && answer == DELEGATED,
        "the delegating turn ended {} with {answer:?}, expected {DELEGATED:?}",
        payload["result"]["status"]
    );

    // The child really ran on the target agent, in the session submit_to_agent named.
    let (child, _) = api.wait_finished(&tid, TURN_WAIT)?;
    ensure!(
        child["result"]["status"] == "completed" && answer_of(&child).contains(child_text),
        "the child task did not complete with an echo of its text: {child}"
    );
    let child_session = bracketed(&submitted, "SESSION")
        .ok_or_else(|| format!("submit_to_agent returned no [SESSION: …]: {submitted:?}"))?;
    ensure!(
        api.chat_id(&target, "default", &child_session)?.is_some(),
        "agent {target} has no chat {child_session} (user default) for the child"
    );

    // The agent's atc wrote the job where the server's environment said (ATC_STATE).
    let atc = ctx.agent_atc()?;
    let job = atc.job(&tid)?;
    ensure!(
        matches!(job["status"].as_str(), Some("pending" | "delivering")),
        "job {tid} is {}, expected pending (or delivering): {job}",
        job["status"]
    );
    let base_url = format!("{}/api", ctx.main.root());
    job_fields(
        &job,
        &[
            ("session_id", parent),
            ("user_id", user),
            ("channel", "console"),
            ("agent_id", "default"),
            ("target_agent", target.as_str()),
            ("base_url", &base_url),
        ],
    )?;

    // The timer's tick delivers; the parent wakes up with the result, once.
    let before = api.history("default", user, parent, TURN_WAIT)?.len();
    let job = atc.tick_one_until_terminal(&[], &tid, TURN_WAIT)?;
    require_status(&job, "done")?;
    let text = final_text(&job)?;
    ensure!(
        text.starts_with(&format!(
            "[TASK_ID: {tid}]\n[STATUS: finished]\n\nTask completed."
        )) && text.contains(child_text),
        "the delivered text is not the child's completed result: {text:?}"
    );
    let turn = own_turn(&atc, &job)?;
    delivered_into(&api, user, parent, before, &text, &turn)?;
    Ok(())
}
