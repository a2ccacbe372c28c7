//! Long children on a real QwenPaw (issue 19): `cancel --stop` and `watch --stop-after`,
//! and the §12 facts about `POST /api/console/chat/stop` they rest on.

use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::R;
use crate::api::{Api, Msg, carrying};
use crate::atc::Atc;
use crate::ensure;
use crate::scenarios::Ctx;

/// A fresh atc aimed at the main server.
fn fresh_atc(ctx: &Ctx, name: &str) -> R<Atc> {
    ctx.atc(name, &ctx.main.root())
}

/// `atc cancel <tid> --stop`: it must say `said` (the first, of a watch whose child runs:
/// the child was stopped; a second: both had already ended).
fn cancel_stop_says(atc: &Atc, tid: &str, said: &str) -> R<()> {
    let out = atc.ok(&["cancel", tid, "--stop"])?;
    ensure!(
        out.stdout == said,
        "cancel --stop said {:?}, not {said:?}",
        out.stdout
    );
    Ok(())
}

/// What the first `atc cancel <tid> --stop` of a running child says.
fn stopped(tid: &str) -> String {
    format!("Cancelled the watch on {tid}; the child was stopped.\n")
}

/// What a second `atc cancel <tid> --stop` says.
fn already_ended(tid: &str) -> String {
    format!("{tid} was already cancelled; atc had already stopped the child.\n")
}

/// The parent's chat still holds only its `before` messages.
fn parent_untouched(api: &Api, user: &str, parent: &str, before: &[Msg]) -> R<()> {
    let after = api.history("default", user, parent, Duration::from_secs(10))?;
    ensure!(
        after.len() == before.len(),
        "the parent got {} new messages after cancel --stop",
        after.len() - before.len()
    );
    Ok(())
}

/// The parent's user turns after its first `before` messages that carry `tid`'s result.
fn results_after(api: &Api, user: &str, parent: &str, before: &[Msg], tid: &str) -> R<Vec<Msg>> {
    let after = api.history("default", user, parent, Duration::from_secs(60))?;
    Ok(carrying(&after[before.len()..], tid)
        .into_iter()
        .cloned()
        .collect())
}

/// Submits a child on `default` and waits until its record says running.
fn running_child(api: &Api, session: &str, user: &str, text: &str) -> R<String> {
    running_child_on(api, "default", session, user, text)
}

/// Submits a child on `agent` and waits until its record says running.
fn running_child_on(api: &Api, agent: &str, session: &str, user: &str, text: &str) -> R<String> {
    let tid = api.submit(Some(agent), session, user, text, None)?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = api.task(&tid)?.json()?;
        if v["status"] == "running" {
            return Ok(tid);
        }
        ensure!(Instant::now() < deadline, "child {tid} never ran: {v}");
        sleep(Duration::from_millis(100));
    }
}

/// `cancel --stop` ends a `SLEEP=60` child within a second (its record says "Task
/// cancelled"), cancels the watch, records the child's chat, and the parent gets nothing.
/// Also pins §12: a second stop is `{"stopped":false}`, no `chat_id` is 422.
pub fn cancel_stop(ctx: &Ctx) -> R<()> {
    let api = ctx.main.api();
    let (user, parent, child) = ("lena", ctx.uniq("stop-parent"), ctx.uniq("stop-child"));
    let before = api.make_parent("default", user, &parent)?;
    let tid = running_child(&api, &child, user, "long child SLEEP=60")?;
    let atc = fresh_atc(ctx, "cancel-stop")?;
    atc.watch(&tid, &parent, user, &["--child-session", &child])?;

    cancel_stop_says(&atc, &tid, &stopped(&tid))?;
    let stopped_at = Instant::now();
    let record = loop {
        let v = api.task(&tid)?.json()?;
        if v["status"] == "finished" {
            break v;
        }
        ensure!(
            stopped_at.elapsed() < Duration::from_secs(1),
            "the child still runs 1 s after cancel --stop: {v}"
        );
        sleep(Duration::from_millis(50));
    };
    ensure!(
        record["result"]["status"] == "failed"
            && record["result"]["error"]["message"] == "Task cancelled"
            && record["result"].get("session_id").is_none(),
        "a stopped child's record: {record}"
    );
    let job = atc.job(&tid)?;
    let chat = api
        .chat_id("default", user, &child)?
        .ok_or("no chat for the child")?;
    ensure!(
        job["status"] == "cancelled" && job["child_chat_id"] == chat.as_str(),
        "job after cancel --stop: {job}"
    );
    // The stopped chat is idle: nothing more is running there.
    let (_, status) = api.chat(&chat)?;
    ensure!(status != "running", "the child's chat is {status}");

    // Nothing reaches the parent, however often atc ticks.
    for _ in 0..3 {
        atc.ok(&["tick"])?;
        sleep(Duration::from_millis(300));
    }
    parent_untouched(&api, user, &parent, &before)?;
    let turns = atc.turns()?;
    ensure!(
        turns.is_empty(),
        "a cancelled watch has turns in the file: {turns:?}"
    );

    // Again: nothing running → stopped:false; the task record says it finished.
    cancel_stop_says(&atc, &tid, &already_ended(&tid))?;
    let unknown = api.post(
        "/api/console/chat/stop?chat_id=no-such-chat",
        Some("default"),
        &json!({}),
    )?;
    ensure!(
        unknown.status == 200 && unknown.json()? == json!({"stopped": false}),
        "stop of an unknown id: HTTP {} {}",
        unknown.status,
        unknown.body
    );
    let bare = api.post("/api/console/chat/stop", Some("default"), &json!({}))?;
    let body = bare.json()?;
    ensure!(
        bare.status == 422 && body["detail"][0]["loc"] == json!(["query", "chat_id"]),
        "stop without chat_id: HTTP {} {}",
        bare.status,
        bare.body
    );
    Ok(())
}

/// `cancel --stop` of a child on the second shipped agent, watched without
/// `--target-agent` (its polls work anyway: the poll route ignores the agent): atc finds
/// the child's chat among the server's agents, stops it there, records where, and says
/// "not running" only when the task record says so (issue 27, defect 6: it stopped on
/// the asking agent, found nothing, and said the child was not running while it ran).
/// In the same `atc cancel A B --stop`, a child on the asking agent is stopped too.
pub fn cancel_stop_elsewhere(ctx: &Ctx) -> R<()> {
    let api = ctx.main.api();
    let second = ctx.main.second_agent()?;
    let (user, parent, child) = (
        "olga",
        ctx.uniq("stop-else-parent"),
        ctx.uniq("stop-else-child"),
    );
    let before = api.make_parent("default", user, &parent)?;
    let tid = running_child_on(&api, &second, &child, user, "long child SLEEP=60")?;
    // And one on the asking agent: both stopped by one `cancel A B --stop`.
    let child_here = ctx.uniq("stop-else-child-here");
    let here = running_child(&api, &child_here, user, "long child SLEEP=60")?;
    let atc = fresh_atc(ctx, "cancel-stop-elsewhere")?;
    atc.watch(&tid, &parent, user, &["--child-session", &child])?;
    atc.watch(&here, &parent, user, &["--child-session", &child_here])?;
    let out = atc.ok(&["cancel", &tid, &here, "--stop"])?;
    ensure!(
        out.stdout == stopped(&tid) + &stopped(&here),
        "cancel of both --stop said {:?}",
        out.stdout
    );
    for task in [&tid, &here] {
        let record = finished_record(&api, task)?;
        ensure!(
            record["result"]["status"] == "failed"
                && record["result"]["error"]["message"] == "Task cancelled",
            "the child was not stopped: {record}"
        );
    }
    ensure!(
        atc.job(&here)?["status"] == "cancelled",
        "the asking agent's child's watch: {}",
        atc.job(&here)?
    );
    let job = atc.job(&tid)?;
    let chat = api
        .chat_id(&second, user, &child)?
        .ok_or("no chat for the child on the second agent")?;
    ensure!(
        job["status"] == "cancelled"
            && job["child_agent"] == second.as_str()
            && job["child_chat_id"] == chat.as_str()
            && job["stopped_at"].is_string()
            && job["target_agent"].is_null(),
        "job after cancel --stop: {job}"
    );
    // A second stop goes straight there, finds nothing, and the record says why.
    cancel_stop_says(&atc, &tid, &already_ended(&tid))?;
    atc.ok(&["tick"])?;
    parent_untouched(&api, user, &parent, &before)
}

/// `--stop-after 3s` of a child on the second agent, watched without `--target-agent`:
/// stopped there (not a stop sent to the asking agent on every tick, unheard), and its
/// result says so, once.
pub fn stop_after_elsewhere(ctx: &Ctx) -> R<()> {
    let api = ctx.main.api();
    let second = ctx.main.second_agent()?;
    let (user, parent, child) = (
        "pia",
        ctx.uniq("deadline-else-parent"),
        ctx.uniq("deadline-else-child"),
    );
    let before = api.make_parent("default", user, &parent)?;
    let tid = running_child_on(&api, &second, &child, user, "long child SLEEP=60")?;
    let atc = fresh_atc(ctx, "stop-after-elsewhere")?;
    let job = stopped_after_3s(&atc, &api, &tid, &parent, user, &child)?;
    ensure!(
        job["status"] == "done"
            && job["stopped_at"].is_string()
            && job["child_agent"] == second.as_str()
            && job.get("stop_tries").is_none(),
        "job after --stop-after: {job}"
    );
    let ours = results_after(&api, user, &parent, &before, &tid)?;
    ensure!(
        ours.len() == 1
            && ours[0].text.ends_with(
                "[atc: stopped this task after 3s at the watch's request (--stop-after 3s)]"
            ),
        "the parent holds {} turns for {tid}: {:?}",
        ours.len(),
        ours.iter().map(|m| &m.text).collect::<Vec<_>>()
    );
    Ok(())
}

/// Watches `tid` (its child session `child`) with `--stop-after 3s` and ticks until its
/// job ends: the job, once the child's record says it was cancelled.
fn stopped_after_3s(
    atc: &Atc,
    api: &Api,
    tid: &str,
    parent: &str,
    user: &str,
    child: &str,
) -> R<serde_json::Value> {
    atc.watch(
        tid,
        parent,
        user,
        &["--child-session", child, "--stop-after", "3s"],
    )?;
    let job = atc.tick_one_until_terminal(&[], tid, Duration::from_secs(40))?;
    let record = api.task(tid)?.json()?;
    ensure!(
        record["result"]["error"]["message"] == "Task cancelled",
        "the child was not stopped: {record}; the job: {job}"
    );
    Ok(job)
}

/// The task record once it says finished (a stopped child's does at once; the wait is a
/// bound, not a measure).
fn finished_record(api: &Api, tid: &str) -> R<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = api.task(tid)?.json()?;
        if v["status"] == "finished" {
            return Ok(v);
        }
        ensure!(
            Instant::now() < deadline,
            "the child still runs 10 s after cancel --stop: {v}"
        );
        sleep(Duration::from_millis(50));
    }
}

/// `--stop-after 3s` ends a `SLEEP=60` child; the parent receives its "Task cancelled"
/// result with the stop line, once.
pub fn stop_after(ctx: &Ctx) -> R<()> {
    let api = ctx.main.api();
    let (user, parent, child) = (
        "mona",
        ctx.uniq("deadline-parent"),
        ctx.uniq("deadline-child"),
    );
    let before = api.make_parent("default", user, &parent)?;
    let tid = running_child(&api, &child, user, "long child SLEEP=60")?;
    let atc = fresh_atc(ctx, "stop-after")?;
    let job = stopped_after_3s(&atc, &api, &tid, &parent, user, &child)?;
    ensure!(
        job["status"] == "done"
            && job["stopped_at"].is_string()
            && job["child_chat_id"].is_string(),
        "job after --stop-after: {job}"
    );
    let ours = results_after(&api, user, &parent, &before, &tid)?;
    ensure!(
        ours.len() == 1,
        "the parent holds {} turns for {tid}",
        ours.len()
    );
    let text = &ours[0].text;
    let turn = atc.turn_of(&job)?;
    ensure!(
        turn["state"] == "delivered"
            && turn["text"] == text.as_str()
            && ours[0].delivery_id() == turn["turn_id"].as_str(),
        "the chat's turn is not the job's turn {turn}"
    );
    ensure!(
        text.contains("Task failed.") && text.contains("Error: Task cancelled"),
        "delivered {text:?}"
    );
    ensure!(
        text.ends_with(
            "[atc: stopped this task after 3s at the watch's request (--stop-after 3s)]"
        ),
        "no stop line at the end of {text:?}"
    );
    Ok(())
}

/// `--check-in 2s` on a `SLEEP=8` child: the parent gets at least one check-in while it
/// runs, then the result; each exactly once (by its delivery id).
pub fn check_in(ctx: &Ctx) -> R<()> {
    let api = ctx.main.api();
    let (user, parent, child) = (
        "nora",
        ctx.uniq("checkin-parent"),
        ctx.uniq("checkin-child"),
    );
    let before = api.make_parent("default", user, &parent)?;
    let tid = running_child(&api, &child, user, "slow child SLEEP=8")?;
    let atc = fresh_atc(ctx, "check-in")?;
    atc.watch(
        &tid,
        &parent,
        user,
        &["--child-session", &child, "--check-in", "2s"],
    )?;
    let job = atc.tick_one_until_terminal(&[], &tid, Duration::from_secs(60))?;
    ensure!(job["status"] == "done", "job: {job}");
    let check_ins = job["check_ins"].as_u64().unwrap_or(0);
    ensure!(check_ins >= 1, "no check-in went out: {job}");
    let ours = results_after(&api, user, &parent, &before, &tid)?;
    let ids: Vec<String> = ours
        .iter()
        .map(|m| m.delivery_id().unwrap_or("").to_owned())
        .collect();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    ensure!(unique.len() == ids.len(), "a turn arrived twice: {ids:?}");
    let running: Vec<&Msg> = ours
        .iter()
        .filter(|m| m.text.contains("[STATUS: running]"))
        .collect();
    let finished: Vec<&Msg> = ours
        .iter()
        .filter(|m| m.text.contains("[STATUS: finished]"))
        .collect();
    ensure!(
        !running.is_empty() && running.len() as u64 == check_ins,
        "{} check-ins in the chat, the job counts {check_ins}: {ids:?}",
        running.len()
    );
    ensure!(
        finished.len() == 1,
        "{} results in the chat: {ids:?}",
        finished.len()
    );
    ensure!(
        ours.last()
            .is_some_and(|m| m.text.contains("[STATUS: finished]")),
        "the result is not the last turn: {ids:?}"
    );
    ensure!(
        running[0]
            .text
            .contains(&format!("Stop the task: atc cancel {tid} --stop")),
        "check-in text: {:?}",
        running[0].text
    );
    // The file holds the same turns, each delivered, the result's the job's turn.
    let mut filed: Vec<String> = atc
        .turns()?
        .iter()
        .filter(|t| Atc::carried_tasks(t).contains(&tid))
        .map(|t| {
            let id = t["turn_id"].as_str().unwrap_or("");
            if t["state"] == "delivered" {
                id.to_owned()
            } else {
                format!("{id} ({})", t["state"])
            }
        })
        .collect();
    filed.sort();
    ensure!(
        filed == unique,
        "the job file's turns for {tid} are {filed:?}, the chat holds {unique:?}"
    );
    ensure!(
        ids.last().map(String::as_str) == job["turn"].as_str(),
        "the last turn in the chat is not the job's result turn {}: {ids:?}",
        job["turn"]
    );
    Ok(())
}

/// Issue 36 H1 on a real QwenPaw: one turn submits T1 and T2; T2 is watched with its own
/// child session. A watch of T1 that names T2's session (with a deadline) is refused: one
/// session is one child. A `cancel --stop` of a watch given another task's session no
/// watch held ends that task's child, and says so at once from T1's own record (which
/// still runs): no `stopped_at`, the watch kept. Then T1 watched with its own session and
/// `--stop-after 2s`: the stop reaches T1's child only, and its result says stopped, once.
pub fn stop_another_session(ctx: &Ctx) -> R<()> {
    let api = ctx.main.api();
    let (user, parent) = ("nell", ctx.uniq("h1-parent"));
    let (c1, c2, c3) = (
        ctx.uniq("h1-child-1"),
        ctx.uniq("h1-child-2"),
        ctx.uniq("h1-child-3"),
    );
    let before = api.make_parent("default", user, &parent)?;
    let t1 = running_child(&api, &c1, user, "long child SLEEP=60")?;
    let t2 = running_child(&api, &c2, user, "long child SLEEP=60")?;
    let t3 = running_child(&api, &c3, user, "long child SLEEP=60")?;
    let atc = fresh_atc(ctx, "stop-another-session")?;
    atc.watch(&t2, &parent, user, &["--child-session", &c2])?;

    // T2's session for T1: refused, nothing recorded for T1.
    let refused = atc.run_env(
        &[
            "watch",
            &t1,
            "--session",
            &parent,
            "--user",
            user,
            "--child-session",
            &c2,
            "--stop-after",
            "2s",
        ],
        &[],
    )?;
    ensure!(
        refused.status.code() == Some(1)
            && refused.stderr.contains(&c2)
            && refused.stderr.contains(&t2),
        "a watch naming another watch's child session: {}",
        refused.describe()
    );
    ensure!(
        atc.jobs()?.iter().all(|j| j["task_id"] != t1.as_str()),
        "the refused watch recorded {t1}"
    );

    // T3's session (no watch holds it) for T1: believed, and a stop proves it wrong.
    atc.watch(&t1, &parent, user, &["--child-session", &c3])?;
    let stop = atc.run_env(&["cancel", &t1, "--stop"], &[])?;
    ensure!(
        stop.status.code() == Some(1)
            && stop
                .stderr
                .contains("this task still runs: that session is another task's child"),
        "cancel --stop by another task's session: {}",
        stop.describe()
    );
    let third = finished_record(&api, &t3)?;
    ensure!(
        third["result"]["error"]["message"] == "Task cancelled",
        "the session's own task was not the one stopped: {third}"
    );
    let job = atc.job(&t1)?;
    ensure!(
        job["status"] == "pending" && job.get("stopped_at").is_none(),
        "T1 after a stop that ended another child: {job}"
    );
    ensure!(
        api.task(&t1)?.json()?["status"] == "running",
        "T1 must still run"
    );

    // The wrong session is forgotten: T1 watched again with its own and a deadline.
    ensure!(
        job.get("child_session").is_none(),
        "a session proven another task's is kept: {job}"
    );
    atc.watch(
        &t1,
        &parent,
        user,
        &["--child-session", &c1, "--stop-after", "2s"],
    )?;
    let job = atc.tick_one_until_terminal(&[], &t1, Duration::from_secs(40))?;
    ensure!(
        job["status"] == "done" && job["stopped_at"].is_string(),
        "T1 after --stop-after: {job}"
    );
    let second = api.task(&t2)?.json()?;
    ensure!(
        second["status"] == "running",
        "T2 was touched by T1's stop: {second}"
    );
    let ours = results_after(&api, user, &parent, &before, &t1)?;
    ensure!(
        ours.len() == 1 && ours[0].text.contains("[atc: stopped this task after 2s"),
        "the parent holds {} turns for {t1}: {:?}",
        ours.len(),
        ours.iter().map(|m| &m.text).collect::<Vec<_>>()
    );
    // T2 stays watched; stop it so the server is left quiet.
    atc.ok(&["cancel", &t2, "--stop"])?;
    Ok(())
}
