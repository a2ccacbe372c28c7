//! Issue 38 on the real server: a long child is polled on a back-off, and its end by the
//! kick. A server of its own ("backoff") with atc's plugin installed by `atc qwenpaw
//! install`, auto-watch on (the default) and the plugin's cadence at 2 s; the test runs
//! **no tick**: whatever polls and delivers, the plugin started (its cadence, a turn's
//! end's kick).
//!
//! Every atc the plugin starts talks to QwenPaw through a counting proxy: the plugin's atc
//! (`ATC_BIN`, the wrapper `auto::server_with` writes) sets `ATC_BASE_URL` to the proxy's
//! API root before it runs atc, in place of the server's own root the plugin passes
//! (QwenPaw resolves that root from its managed runtime or `last_api`, which no variable
//! of the server's environment overrides). So the automatic watch records the proxy as its
//! server, every kick and cadence tick names the proxy as the server whose plugin ticks
//! (the heartbeat's `plugins`), and every `GET /api/console/chat/task/<id>` the proxy sees
//! is one of atc's: the test reads the server directly, and no model polls (`check_agent_task`
//! is never called; QwenPaw's own tools use the server's root, not the proxy).
//!
//! The parent's model (`CALLTOOL: submit_to_agent`) delegates to the QA agent a child that
//! sleeps `CHILD_SECS` in the fake LLM, then answers with a unique marker. The child's end
//! is the first instant the test's own poll of its record (every 50 ms, straight to the
//! server) reads `finished`; the delivery is the instant the proxy received atc's `POST
//! /api/console/chat/task` carrying the child's `[TASK_ID: …]`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::R;
use crate::api::Api;
use crate::auto::Auto;
use crate::ensure;
use crate::proxy::{Proxy, Seen};
use crate::scenarios::Ctx;

const USER: &str = "bea";
/// The plugin's cadence.
const CADENCE: Duration = Duration::from_secs(2);
/// How long the child's model call sleeps: past the back-off's 60 s poll, before its 140 s
/// one (both counted from the first poll), and long enough that a 20 s timer would poll
/// it more often than the back-off and the kicks do (7 times to the back-off's 6).
const CHILD_SECS: u64 = 125;
/// The cadence of a system timer (and of the plugin's cadence by default).
const TIMER: Duration = Duration::from_secs(20);
/// From the child's end to atc's delivery POST, at most.
const WITHIN: Duration = Duration::from_secs(2);
/// After the delivery: many beats of the cadence, for a copy to show up if one would.
const SETTLE: Duration = Duration::from_secs(5);
/// When `atc status` is asked, after the child was first polled: between the first poll
/// and the back-off's 20 s one.
const STATUS_AT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(50);
/// After the first poll, what the watch's start costs: the kick the plugin starts after an
/// automatic watch (its window: 2 s) and the first scheduled tick (the cadence's, 2 s on).
const REGISTERED: Duration = Duration::from_secs(6);

/// The back-off's first wait (`src/lifecycle/backoff.rs`, `FIRST`).
const BACKOFF_FIRST: Duration = Duration::from_secs(20);

/// Points the plugin's atc at `proxy`: the wrapper exports `ATC_BASE_URL` before it runs
/// atc. Written beside and renamed over the wrapper, so a start never reads half a script.
fn through(auto: &Auto, proxy: &Proxy) -> R<()> {
    let wrapper = auto.wrapper();
    let script = fs::read_to_string(&wrapper).map_err(|e| format!("{}: {e}", wrapper.display()))?;
    let (shebang, rest) = script
        .split_once('\n')
        .ok_or_else(|| format!("the wrapper is not a script: {script:?}"))?;
    let script = format!(
        "{shebang}\nexport ATC_BASE_URL='{}/api'\n{rest}",
        proxy.url()
    );
    let next = wrapper.with_extension("next");
    fs::write(&next, script).map_err(|e| format!("{}: {e}", next.display()))?;
    fs::set_permissions(&next, fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
    fs::rename(&next, &wrapper).map_err(|e| format!("{}: {e}", wrapper.display()))
}

/// The first `task-<hex>` in `text`.
fn task_in(text: &str) -> Option<String> {
    let at = text.find("[TASK_ID: task-")? + "[TASK_ID: ".len();
    let id: String = text[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    Some(id)
}

/// When `task`'s record first reads `finished` (read straight from the server, every
/// 50 ms), and that record.
fn finished_at(api: &Api, task: &str, deadline: Instant) -> R<(Instant, Value)> {
    loop {
        let resp = api.task(task)?;
        let record = resp.json()?;
        if record["status"] == "finished" {
            return Ok((Instant::now(), record));
        }
        ensure!(
            Instant::now() < deadline,
            "the child {task} did not finish: {}",
            resp.body
        );
        sleep(POLL);
    }
}

/// How many user messages of the parent chat carry `task`'s result.
fn results_in(api: &Api, chat: &str, task: &str) -> R<usize> {
    let marker = format!("[TASK_ID: {task}]");
    let (msgs, _) = api.chat(chat)?;
    Ok(msgs
        .iter()
        .filter(|m| m.role == "user" && m.text.contains(&marker))
        .count())
}

/// atc's polls of `task`, as the proxy saw them.
fn polls_of(proxy: &Proxy, task: &str) -> Vec<Seen> {
    let path = format!("/api/console/chat/task/{task}");
    proxy
        .seen()
        .into_iter()
        .filter(|s| s.method == "GET" && s.path.split('?').next() == Some(path.as_str()))
        .collect()
}

/// atc's deliveries of `task`'s result, as the proxy saw them.
fn posts_of(proxy: &Proxy, task: &str) -> Vec<Seen> {
    let marker = format!("[TASK_ID: {task}]");
    proxy
        .seen()
        .into_iter()
        .filter(|s| {
            s.method == "POST" && s.path.ends_with("/console/chat/task") && s.body.contains(&marker)
        })
        .collect()
}

/// Seconds from `zero` to `at` (negative before it), for the report.
fn secs(zero: Instant, at: Instant) -> f64 {
    if at >= zero {
        (at - zero).as_secs_f64()
    } else {
        -(zero - at).as_secs_f64()
    }
}

fn shown(zero: Instant, times: &[Instant]) -> String {
    times
        .iter()
        .map(|t| format!("{:.1}", secs(zero, *t)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The cadence ticks the plugin started so far (the wrapper's log).
fn cadence_ticks(auto: &Auto) -> usize {
    auto.starts().iter().filter(|s| *s == "tick --json").count()
}

pub fn long_child_backoff(ctx: &Ctx) -> R<()> {
    let auto = crate::auto::server_with(
        ctx,
        "backoff",
        vec![("ATC_CADENCE".to_string(), format!("{}s", CADENCE.as_secs()))],
    )?;
    let proxy = Proxy::start(auto.server.port)?;
    through(&auto, &proxy)?;
    let api = auto.server.api();
    let qa = auto.server.second_agent()?;
    let session = ctx.uniq("backoff-parent");
    api.make_parent("default", USER, &session)?;
    let chat = api
        .chat_id("default", USER, &session)?
        .ok_or("no parent chat")?;
    let marker = format!("MARK_{}_answer", session.replace('-', "_"));

    // The parent's model delegates the long child; the turn's end watches it.
    let turn = api.submit(
        Some("default"),
        &session,
        USER,
        &format!(
            r#"CALLTOOL: submit_to_agent {{"to_agent": "{qa}", "text": "{marker} SLEEP={CHILD_SECS}"}}"#
        ),
        None,
    )?;
    let (payload, _) = api.wait_finished(&turn, Duration::from_secs(60))?;
    let submitted = Instant::now();
    let cadence_before = cadence_ticks(&auto);
    ensure!(
        payload["result"]["status"] == "completed",
        "the parent's turn did not complete: {payload}"
    );
    let said = payload.to_string();
    let task = task_in(&said).ok_or_else(|| format!("the parent's turn answered {said}"))?;
    let deadline = submitted + Duration::from_secs(CHILD_SECS + 40);

    let reader = auto.atc(ctx)?;
    let paths: Value = serde_json::from_str(&reader.ok(&["paths", "--json"])?.stdout)
        .map_err(|e| format!("atc paths --json: {e}"))?;
    let lock = paths["tick_lock"]
        .as_str()
        .ok_or_else(|| format!("atc paths --json names no tick_lock: {paths}"))?
        .to_string();
    let heartbeat = || fs::read_to_string(&lock).unwrap_or_else(|e| format!("({lock}: {e})"));

    let (a, b) = (auto.server.api(), auto.server.api());
    let observed = std::thread::scope(|scope| -> R<_> {
        let ended = scope.spawn(|| finished_at(&a, &task, deadline));
        // The automatic watch: of the proxy's server, its child's session known.
        let job = loop {
            if let Some(job) = auto
                .jobs(ctx)?
                .into_iter()
                .find(|j| j["task_id"] == task.as_str())
            {
                break job;
            }
            ensure!(
                submitted.elapsed() < Duration::from_secs(20),
                "the turn's end did not watch {task}; atc started: {:?}",
                auto.starts()
            );
            sleep(Duration::from_millis(100));
        };
        ensure!(
            job["origin"] == "auto"
                && job["base_url"] == format!("{}/api", proxy.url()).as_str()
                && job["child_session"].is_string(),
            "the automatic watch recorded {job}"
        );
        // Mid back-off: `atc status` says the watch waits for its back-off, and the
        // heartbeat names the proxy as a server whose plugin ticks.
        let first = loop {
            if let Some(first) = polls_of(&proxy, &task).first() {
                break first.at;
            }
            ensure!(
                Instant::now() < deadline,
                "atc never polled {task}; atc started: {:?}",
                auto.starts()
            );
            sleep(POLL);
        };
        let mut status = String::new();
        let mut beat = String::new();
        let mid = first + STATUS_AT;
        if Instant::now() < mid {
            sleep(mid - Instant::now());
            status = reader.ok(&["status", &task])?.stdout;
            beat = heartbeat();
        }
        let delivered = loop {
            if let Some(post) = posts_of(&proxy, &task).first() {
                break post.at;
            }
            ensure!(
                Instant::now() < deadline,
                "the result of {task} was never posted; polls at {} s; heartbeat {}; atc status: {}",
                shown(
                    submitted,
                    &polls_of(&proxy, &task)
                        .iter()
                        .map(|s| s.at)
                        .collect::<Vec<_>>()
                ),
                heartbeat(),
                reader
                    .ok(&["status", &task])
                    .map(|o| o.stdout)
                    .unwrap_or_default()
            );
            sleep(POLL);
        };
        let stored = loop {
            if results_in(&b, &chat, &task)? > 0 {
                break Instant::now();
            }
            ensure!(
                Instant::now() < deadline,
                "{task}'s result was posted but never stored in the parent chat"
            );
            sleep(POLL);
        };
        let (end, record) = ended.join().map_err(|_| "finished_at panicked")??;
        Ok((job, first, status, beat, delivered, stored, end, record))
    })?;
    let (job, first, status, beat, delivered, stored, end, record) = observed;
    let cadence_during = cadence_ticks(&auto) - cadence_before;

    // Settle: the cadence and kicks go on; nothing may arrive twice.
    sleep(SETTLE);
    let answer = record["result"]["output"].to_string();
    ensure!(
        record["result"]["status"] == "completed" && answer.contains(&marker),
        "the child did not answer its marker: {record}"
    );
    let polls: Vec<Instant> = polls_of(&proxy, &task).iter().map(|s| s.at).collect();
    let posts = posts_of(&proxy, &task);
    let in_chat = results_in(&api, &chat, &task)?;
    let run = end.saturating_duration_since(submitted);
    let cadence_only = (run.as_secs_f64() / CADENCE.as_secs_f64()).floor() as usize;
    let delay = secs(end, delivered);
    // The polls in three parts: the watch's start (its registration's and the first ticks'),
    // the back-off's while the child runs, the end's.
    let settled = first + REGISTERED;
    let ending = end - Duration::from_millis(500);
    let part = |from: Option<Instant>, to: Option<Instant>| -> Vec<Instant> {
        polls
            .iter()
            .copied()
            .filter(|t| from.is_none_or(|f| *t > f) && to.is_none_or(|u| *t <= u))
            .collect()
    };
    let (start, backed, ended) = (
        part(None, Some(settled)),
        part(Some(settled), Some(ending)),
        part(Some(ending), None),
    );
    eprintln!(
        "e2e backoff: the child {task} ran {:.1} s after the parent's turn (its end: its record first read finished); atc polled it {} times (the 2 s cadence alone: {cadence_only}; a 20 s timer: {}; {cadence_during} cadence ticks started meanwhile), at [{}] s at the watch's start, [{}] s on the back-off, [{}] s at the end; delivery POST {delay:.2} s after the end, stored in the chat {:.2} s after it",
        run.as_secs_f64(),
        polls.len(),
        (run.as_secs_f64() / TIMER.as_secs_f64()).floor() as usize + 1,
        shown(submitted, &start),
        shown(submitted, &backed),
        shown(submitted, &ended),
        secs(end, stored)
    );
    eprintln!(
        "e2e backoff: mid back-off ({:.1} s after the first poll), the heartbeat: {}; atc status: {}",
        STATUS_AT.as_secs_f64(),
        beat.trim(),
        status
            .lines()
            .find(|l| l.starts_with("next poll"))
            .unwrap_or("(no next poll line)")
    );
    let why = || {
        format!(
            "polls at {} s after the submission, the child's end at {:.1} s, the first poll at {:.1} s; the heartbeat mid back-off: {}; atc status then: {status}; the watch: {job}",
            shown(submitted, &polls),
            secs(submitted, end),
            secs(submitted, first),
            beat.trim()
        )
    };
    ensure!(
        posts.len() == 1 && in_chat == 1,
        "the result of {task} was posted {} times and is in the parent chat {in_chat} times; {}",
        posts.len(),
        why()
    );
    ensure!(
        status.contains("for its back-off"),
        "{:.0} s after its first poll, atc status does not say the watch waits for its back-off; {}",
        STATUS_AT.as_secs_f64(),
        why()
    );
    ensure!(
        beat.contains(&format!("\"{}/api\"", proxy.url())),
        "the heartbeat does not name the proxy's server as a plugin's; {}",
        why()
    );
    // While the child runs, scheduled ticks (one every 2 s) poll it only on its back-off:
    // 20 s and 60 s after it was seen starting (the first poll), nothing in between.
    ensure!(
        backed.len() <= 2
            && backed
                .iter()
                .all(|t| *t + Duration::from_secs(1) >= first + BACKOFF_FIRST),
        "while the child ran, atc polled it at {} s: the back-off polls 20 s and 60 s after the first poll ({:.1} s); {}",
        shown(submitted, &backed),
        secs(submitted, first),
        why()
    );
    // A 20 s timer polls at the watch and every 20 s after until the child's end.
    let timer_only = (run.as_secs_f64() / TIMER.as_secs_f64()).floor() as usize + 1;
    ensure!(
        polls.len() < timer_only,
        "atc polled the child {} times in its {:.0} s: not fewer than a 20 s timer's {timer_only}; {}",
        polls.len(),
        run.as_secs_f64(),
        why()
    );
    ensure!(
        polls.len() * 3 < cadence_only,
        "atc polled the child {} times in its {:.0} s: not fewer than a third of the cadence's {cadence_only}; {}",
        polls.len(),
        run.as_secs_f64(),
        why()
    );
    // The back-off's next poll after 60 s is at 140 s: a delivery this soon after the end
    // is the end's kick's.
    ensure!(
        delivered <= end + WITHIN,
        "the result was posted {delay:.2} s after the child's end (want ≤ {WITHIN:?}); {}",
        why()
    );
    auto.no_plugin_warnings()
}
