//! Issue 21 on the real server: atc's plugin's end-of-turn hook (`Phase.FINALLY`) starts
//! `atc tick --kicked`, so results arrive about a second after a turn ends. Its own server
//! ("kick"), whose atc is a wrapper (ATC_BIN) that logs every start: the test runs **no
//! tick and no timer**; whatever delivers, the hook started.

use std::fs;
use std::path::PathBuf;
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::R;
use crate::api::Api;
use crate::atc::{Atc, logging_wrapper};
use crate::ensure;
use crate::qwenpaw::{Server, ServerOptions};
use crate::scenarios::Ctx;

const TURN_WAIT: Duration = Duration::from_secs(60);
/// The bound: a result is in the parent chat this soon after the turn that made
/// it deliverable ended.
const WITHIN: Duration = Duration::from_secs(3);

pub struct Kick {
    pub server: Server,
    /// The wrapper's log: one line per atc start, its arguments.
    pub starts: PathBuf,
    /// The wrapper (ATC_BIN); removing it is "the binary is missing".
    pub wrapper: PathBuf,
    pub state: PathBuf,
}

impl Kick {
    /// The starts of atc the scenarios count: not the plugin's `atc paths --json`, which
    /// asks where atc keeps its files (at load, and when the environment or the config
    /// file changes) and starts no tick.
    pub(crate) fn starts(&self) -> Vec<String> {
        fs::read_to_string(&self.starts)
            .unwrap_or_default()
            .lines()
            .filter(|l| *l != "paths --json")
            .map(str::to_string)
            .collect()
    }

    pub(crate) fn atc(&self, ctx: &Ctx) -> R<Atc> {
        let dir = ctx.fresh_dir("kick-atc")?;
        Atc::new(&ctx.atc_bin, &dir, self.state.clone(), &self.server.root())
    }
}

/// The kick server, with the plugin installed by `atc qwenpaw install`.
pub fn server(ctx: &Ctx, name: &str) -> R<Kick> {
    server_with(ctx, name, &[])
}

/// [`server`], with more in the server's environment.
fn server_with(ctx: &Ctx, name: &str, more: &[(&str, &str)]) -> R<Kick> {
    let more = more.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
    let (server, dir) = wrapped_server(ctx, name, more.collect())?;
    Ok(Kick {
        server,
        starts: dir.join("atc-starts.log"),
        wrapper: dir.join("atc-wrapper"),
        state: dir.join("jobs.json"),
    })
}

/// A server with atc's plugin installed by `atc qwenpaw install`, its atc (ATC_BIN) a
/// wrapper that logs every start, its cadence off, `more` in its environment; and its
/// directory (`atc-wrapper`, its log `atc-starts.log`, the job file `jobs.json`).
pub(crate) fn wrapped_server(
    ctx: &Ctx,
    name: &str,
    more: Vec<(String, String)>,
) -> R<(Server, PathBuf)> {
    let dir = ctx.fresh_dir(name)?;
    let wrapper = dir.join("atc-wrapper");
    logging_wrapper(&wrapper, &dir.join("atc-starts.log"), &ctx.atc_bin)?;
    let mut env = vec![
        ("ATC_BIN".into(), wrapper.display().to_string()),
        (
            "ATC_STATE".into(),
            dir.join("jobs.json").display().to_string(),
        ),
        // Only what a turn's end starts: the plugin's own cadence would tick too.
        ("ATC_CADENCE".into(), "off".into()),
    ];
    env.extend(more);
    let options = ServerOptions {
        env,
        ..ServerOptions::default()
    };
    let server = Server::create(name, &ctx.venv, &ctx.llm, options)?;
    crate::plugin::install(ctx, &server, &format!("{name}-install"))?;
    Ok((server, dir))
}

/// `atc watch <child>` from (`session`, `user`) on `default`, the child on `target`, with
/// `more` arguments.
fn watch_on(
    atc: &Atc,
    child: &str,
    session: &str,
    user: &str,
    target: &str,
    more: &[&str],
) -> R<()> {
    let mut args = vec![
        "watch",
        child,
        "--session",
        session,
        "--user",
        user,
        "--agent",
        "default",
        "--target-agent",
        target,
    ];
    args.extend_from_slice(more);
    atc.ok(&args).map(drop)
}

/// Checks that atc was started, and only as `atc tick --kicked --json`.
fn only_kicked(kick: &Kick) -> R<()> {
    let starts = kick.starts();
    ensure!(
        starts.iter().all(|s| s == "tick --kicked --json") && !starts.is_empty(),
        "atc was started with {starts:?}, expected only `tick --kicked --json`"
    );
    Ok(())
}

/// When the task's record first says `finished` (polled every 20 ms).
fn finished_at(api: &Api, task: &str) -> R<Instant> {
    let deadline = Instant::now() + TURN_WAIT;
    loop {
        let resp = api.task(task)?;
        if resp.json()?["status"] == "finished" {
            return Ok(Instant::now());
        }
        ensure!(Instant::now() < deadline, "task {task} never finished");
        sleep(Duration::from_millis(20));
    }
}

/// When the parent chat first holds the delivered turn of `task` (polled every 50 ms).
fn delivered_at(api: &Api, chat: &str, task: &str, timeout: Duration) -> R<Instant> {
    let deadline = Instant::now() + timeout;
    let marker = format!("[TASK_ID: {task}]");
    loop {
        let (msgs, _) = api.chat(chat)?;
        if msgs
            .iter()
            .any(|m| m.role == "user" && m.text.starts_with(&marker))
        {
            return Ok(Instant::now());
        }
        ensure!(
            Instant::now() < deadline,
            "the result of {task} never arrived in the parent chat"
        );
        sleep(Duration::from_millis(50));
    }
}

/// Latency from `task` finishing to its delivered turn in `chat`, measured side by side.
pub fn latency(server: &Server, chat: &str, task: &str, timeout: Duration) -> R<Duration> {
    let (a, b) = (server.api(), server.api());
    std::thread::scope(|scope| {
        let finished = scope.spawn(|| finished_at(&a, task));
        let delivered = delivered_at(&b, chat, task, timeout)?;
        let finished = finished.join().map_err(|_| "finished_at panicked")??;
        Ok(delivered.saturating_duration_since(finished))
    })
}

pub fn kick_delivers(ctx: &Ctx) -> R<()> {
    let kick = server(ctx, "kick")?;
    let api = kick.server.api();
    let target = kick.server.second_agent()?;

    // No watches: a turn's end starts no atc (there is no job file at all).
    let chat = api.parent_chat("default", "gina", "kick-parent")?;
    sleep(Duration::from_secs(1));
    ensure!(
        kick.starts().is_empty(),
        "turns ended without any watch, and atc was started: {:?}",
        kick.starts()
    );

    // A watched child finishes: its result is in the parent chat within 3 s, no tick run
    // by the test, no timer.
    let atc = kick.atc(ctx)?;
    let child = ctx.child(
        &api,
        &target,
        "kick-child",
        "default",
        "kicked child SLEEP=2",
    )?;
    watch_on(&atc, &child, "kick-parent", "gina", &target, &[])?;
    let took = latency(&kick.server, &chat, &child, Duration::from_secs(30))?;
    eprintln!(
        "e2e: kick: delivered {:.2} s after the child finished",
        took.as_secs_f64()
    );
    ensure!(
        took <= WITHIN,
        "the result arrived {took:?} after the child finished (want ≤ {WITHIN:?})"
    );
    only_kicked(&kick)?;
    let log = atc.ok(&["log"])?;
    ensure!(
        log.stdout
            .contains("(tick)  kicked  (a QwenPaw turn ended)"),
        "atc log records no kicked tick: {}",
        log.stdout
    );

    // A result held for a busy parent: delivered within 3 s of the parent's turn ending.
    let busy_chat = api.parent_chat("default", "gina", "kick-busy")?;
    let slow = api.submit(
        Some("default"),
        "kick-busy",
        "gina",
        "the parent is busy SLEEP=6",
        None,
    )?;
    let quick = ctx.child(&api, &target, "kick-quick", "default", "quick child")?;
    watch_on(&atc, &quick, "kick-busy", "gina", &target, &[])?;
    api.wait_finished(&quick, TURN_WAIT)?;
    let (a, b) = (kick.server.api(), kick.server.api());
    let took = std::thread::scope(|scope| -> R<Duration> {
        let parent_done = scope.spawn(|| finished_at(&a, &slow));
        let delivered = delivered_at(&b, &busy_chat, &quick, Duration::from_secs(60))?;
        let parent_done = parent_done.join().map_err(|_| "finished_at panicked")??;
        ensure!(
            delivered >= parent_done,
            "the result was delivered into the parent chat while it was busy"
        );
        Ok(delivered - parent_done)
    })?;
    eprintln!(
        "e2e: kick: busy parent served {:.2} s after its turn ended",
        took.as_secs_f64()
    );
    ensure!(
        took <= WITHIN,
        "delivered {took:?} after the parent's turn ended (want ≤ {WITHIN:?})"
    );
    Ok(())
}

/// Issue 27: the parent chat is deleted while its child runs. The kick that follows the
/// child's end gives the result up (misrouted) where nobody reads its stderr: the give-up
/// appears in QwenPaw's log, once, and in the next `atc tick`'s stderr, once; the tick
/// after says nothing.
pub fn kick_give_up_heard(ctx: &Ctx) -> R<()> {
    let kick = server(ctx, "kick-give-up")?;
    let api = kick.server.api();
    let target = kick.server.second_agent()?;
    let atc = kick.atc(ctx)?;
    let parent = ctx.uniq("kick-gone");
    let chat = api.parent_chat("default", "ida", &parent)?;
    let child_session = ctx.uniq("kick-gone-child");
    let child = api.submit(
        Some(&target),
        &child_session,
        "default",
        "a child whose parent goes away SLEEP=4",
        None,
    )?;
    watch_on(
        &atc,
        &child,
        &parent,
        "ida",
        &target,
        &["--child-session", &child_session],
    )?;
    let gone = api.delete(&format!("/api/chats/{chat}"), Some("default"))?;
    gone.expect(200, "deleting the parent chat")?;
    api.wait_finished(&child, TURN_WAIT)?;
    // The kick decides it: no tick of the test's, no timer.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if atc.job(&child)?["status"] == "misrouted" {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "the kick never gave the result up: {}",
            atc.job(&child)?
        );
        sleep(Duration::from_millis(100));
    }
    let line = format!("atc: gave up on {child} (misrouted): ");
    let file = atc.file()?;
    let records = file["give_ups"].as_array().cloned().unwrap_or_default();
    ensure!(
        records.len() == 1 && records[0]["said_at"].is_null(),
        "the job file should hold one unsaid give-up: {file}"
    );
    // QwenPaw's log: once (the reaper writes it once the kicked tick exits).
    let deadline = Instant::now() + Duration::from_secs(10);
    let logged = loop {
        let n = kick.server.log_text().matches(&line).count();
        if n > 0 || Instant::now() > deadline {
            break n;
        }
        sleep(Duration::from_millis(100));
    };
    ensure!(
        logged == 1,
        "QwenPaw's log says the give-up {logged} times (want once): {}",
        kick.server.log_tail()
    );
    only_kicked(&kick)?;
    // The next tick with a real stderr says it, once; the one after, nothing.
    let first = atc.ok(&["tick"])?;
    ensure!(
        first.stderr.matches(&line).count() == 1 && first.stderr.lines().count() == 1,
        "the next tick should say the give-up once: {:?}",
        first.stderr
    );
    let second = atc.ok(&["tick"])?;
    ensure!(
        !second.stderr.contains(&line),
        "the give-up was said again: {:?}",
        second.stderr
    );
    ensure!(
        kick.server.log_text().matches(&line).count() == 1,
        "QwenPaw's log says the give-up again"
    );
    // A person puts it back in line, starting the chat again on purpose (with another
    // task id that is not given up, all or none: refused, nothing changed); a tick
    // delivers it there, once.
    let both = atc.run_env(&["redeliver", &child, &child_session], &[])?;
    ensure!(
        both.status.code() == Some(1) && atc.job(&child)?["status"] == "misrouted",
        "a redeliver of a given-up task and one not watched: {}",
        both.describe()
    );
    let again = atc.ok(&["redeliver", &child, "--create-session"])?;
    ensure!(
        again
            .stdout
            .contains("on the next atc tick, starting that chat (--create-session)"),
        "redeliver said {:?}",
        again.stdout
    );
    let job = atc.tick_one_until_terminal(&[], &child, Duration::from_secs(60))?;
    crate::scenarios::require_status(&job, "done")?;
    // QwenPaw stores the turn as its run begins: it may show a moment after the POST.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut found = api.results_in("ida", &parent, &child)?;
    while found == 0 && Instant::now() < deadline {
        sleep(Duration::from_millis(200));
        found = api.results_in("ida", &parent, &child)?;
    }
    ensure!(
        found == 1,
        "the redelivered result should be in the new chat once, not {found} times: {job}"
    );
    Ok(())
}

/// Issue 27: 30 watches of long children (their sessions known), and 20 turns ending in a
/// chat none of them concerns: the kicks those turn ends start poll nothing. The watches
/// were made through a counting proxy (their base URL), so every poll of them, whoever
/// ticks, passes through it.
pub fn kick_unrelated_turns_cost_nothing(ctx: &Ctx) -> R<()> {
    const CHILDREN: usize = 30;
    const TURNS: usize = 20;
    // Thirty children sleeping in the fake LLM hold its calls: QwenPaw lets 10 be in
    // flight at once by default, and the unrelated turns need calls of their own.
    let kick = server_with(
        ctx,
        "kick-unrelated",
        &[("QWENPAW_LLM_MAX_CONCURRENT", "64")],
    )?;
    let api = kick.server.api();
    let target = kick.server.second_agent()?;
    let proxy = crate::proxy::Proxy::start(kick.server.port)?;
    let atc = kick.atc(ctx)?;
    let parent = ctx.uniq("kick-many");
    api.make_parent("default", "jo", &parent)?;
    let mut children = Vec::new();
    for i in 0..CHILDREN {
        let session = ctx.uniq(&format!("kick-long-{i}"));
        let child = api.submit(
            Some(&target),
            &session,
            "default",
            "a long child SLEEP=600",
            Some(3600),
        )?;
        let more = ["--child-session", &session, "--base-url", &proxy.url()];
        watch_on(&atc, &child, &parent, "jo", &target, &more)?;
        children.push(child);
    }
    let polls = || {
        proxy
            .seen()
            .iter()
            .filter(|s| s.method == "GET" && children.iter().any(|c| s.path.ends_with(c.as_str())))
            .count()
    };
    // One timer's tick: every watch seen running once (`atc watch` asked for each task
    // already: those are not the tick's).
    let watched = polls();
    atc.ok(&["tick"])?;
    let before = (polls(), kick.starts().len());
    ensure!(
        before.0 - watched == CHILDREN,
        "the timer's tick polled {} watches",
        before.0 - watched
    );
    let unrelated = ctx.uniq("kick-unrelated-chat");
    for i in 0..TURNS {
        let turn = api.submit(
            Some("default"),
            &unrelated,
            "jo",
            &format!("an unrelated turn {i}"),
            None,
        )?;
        api.wait_finished(&turn, TURN_WAIT)?;
    }
    // The kicks of the last turns end within a moment.
    sleep(Duration::from_secs(3));
    let kicks = kick.starts().len() - before.1;
    let caused = polls() - before.0;
    eprintln!(
        "e2e: kick: {TURNS} unrelated turn ends started {kicks} kicked ticks, which polled {caused} of {CHILDREN} watches"
    );
    ensure!(kicks > 0, "no turn's end started a kicked tick");
    ensure!(
        caused == 0,
        "{TURNS} turn ends in an unrelated chat caused {caused} polls of the {CHILDREN} watches"
    );
    for child in &children {
        ensure!(
            atc.job(child)?["status"] == "pending",
            "{child} is no longer watched"
        );
    }
    Ok(())
}

/// The hook cannot start atc (the binary is gone): turns are unaffected, the server log
/// says so once, `atc doctor` names it.
pub fn kick_without_atc(ctx: &Ctx) -> R<()> {
    let kick = server(ctx, "kick-missing")?;
    let api = kick.server.api();
    // A watch that waits (its child sleeps), so every turn's end has work to announce.
    let atc = kick.atc(ctx)?;
    api.make_parent("default", "hugo", "kick-missing")?;
    let child = ctx.child(
        &api,
        "default",
        "kick-long",
        "default",
        "long child SLEEP=30",
    )?;
    atc.ok(&[
        "watch",
        &child,
        "--session",
        "kick-missing",
        "--user",
        "hugo",
    ])?;
    fs::remove_file(&kick.wrapper).map_err(|e| e.to_string())?;
    for i in 0..3 {
        let turn = api.submit(
            Some("default"),
            "kick-missing",
            "hugo",
            &format!("turn {i}"),
            None,
        )?;
        let (payload, _) = api.wait_finished(&turn, TURN_WAIT)?;
        ensure!(
            payload["result"]["status"] == "completed",
            "turn {i} did not complete with the hook unable to start atc: {payload}"
        );
    }
    let log = kick.server.log_text();
    let said = log.matches("the end-of-turn kick cannot start atc").count();
    ensure!(
        said == 1,
        "the server log says {said} times that the hook cannot start atc (want once)"
    );
    ensure!(kick.starts().is_empty(), "atc started: {:?}", kick.starts());
    // doctor, as the server's user on this machine, names it.
    let wd = kick.server.dir.path().join("home/.qwenpaw");
    let out = atc.run_env(
        &["doctor"],
        &[("QWENPAW_WORKING_DIR", wd.to_str().unwrap_or(""))],
    )?;
    ensure!(
        out.stdout.contains(&format!(
            "✗ atc for the server: the server (pid {}) has ATC_BIN={}, which is not an executable file",
            kick.server.pid().unwrap_or(0),
            kick.wrapper.display()
        )),
        "atc doctor did not name the missing binary: {}",
        out.stdout
    );
    Ok(())
}

/// The benchmark of issue 21 (select it by name: `ATC_E2E=1 cargo test --test e2e --
/// bench-kick`): latency from a child's record first saying `finished` to its delivered
/// turn in the parent chat, for 10 children finishing 2 s apart, with the 20 s timer
/// running, with the plugin's kick on and then off (the hook cannot start atc).
pub fn bench_kick(ctx: &Ctx) -> R<()> {
    const CHILDREN: usize = 10;
    let kick = server(ctx, "bench-kick")?;
    let api = kick.server.api();
    let target = kick.server.second_agent()?;
    let atc = kick.atc(ctx)?;
    let mut chats = Vec::new();
    for i in 0..CHILDREN {
        let session = format!("bench-{i}");
        chats.push(api.parent_chat("default", "ines", &session)?);
    }
    let stop = std::sync::atomic::AtomicBool::new(false);
    let timer_env = [
        ("HOME", atc.home.display().to_string()),
        ("ATC_STATE", kick.state.display().to_string()),
        ("ATC_BASE_URL", kick.server.root()),
    ];
    let mut said = Vec::new();
    let bin = ctx.atc_bin.clone();
    std::thread::scope(|scope| -> R<()> {
        // The timer: `atc tick` every 20 s, as the systemd units run it.
        scope.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::process::Command::new(&bin)
                    .arg("tick")
                    .env_clear()
                    .envs(timer_env.iter().map(|(k, v)| (k, v)))
                    .env("PATH", "/usr/bin:/bin")
                    .status();
                for _ in 0..200 {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        return;
                    }
                    sleep(Duration::from_millis(100));
                }
            }
        });
        let result = (|| -> R<()> {
            for on in [true, false] {
                if !on {
                    fs::rename(&kick.wrapper, kick.wrapper.with_extension("off"))
                        .map_err(|e| e.to_string())?;
                }
                let mut children = Vec::new();
                for (i, chat) in chats.iter().enumerate() {
                    let text = format!("bench child SLEEP={}", 1 + 2 * i);
                    let child = ctx.child(&api, &target, "bench-child", "default", &text)?;
                    let session = format!("bench-{i}");
                    watch_on(&atc, &child, &session, "ines", &target, &[])?;
                    children.push((chat.clone(), child));
                }
                let mut took: Vec<Duration> = std::thread::scope(|inner| {
                    let handles: Vec<_> = children
                        .iter()
                        .map(|(chat, child)| {
                            inner.spawn(|| {
                                latency(&kick.server, chat, child, Duration::from_secs(90))
                            })
                        })
                        .collect();
                    handles
                        .into_iter()
                        .map(|h| h.join().map_err(|_| "latency panicked".to_string())?)
                        .collect::<R<Vec<_>>>()
                })?;
                took.sort();
                let median = (took[CHILDREN / 2 - 1] + took[CHILDREN / 2]) / 2;
                let max = *took.last().expect("children");
                let line = format!(
                    "bench-kick: kick {}: median {:.2} s, max {:.2} s over {CHILDREN} children (20 s timer running)",
                    if on { "on " } else { "off" },
                    median.as_secs_f64(),
                    max.as_secs_f64()
                );
                println!("{line}");
                said.push((on, median, max));
            }
            Ok(())
        })();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        result
    })?;
    let (_, on_median, _) = said[0];
    let (_, off_median, _) = said[1];
    ensure!(
        on_median < off_median,
        "the kick made nothing faster: median {on_median:?} on, {off_median:?} off"
    );
    Ok(())
}
