//! `atc doctor`: one line per check, ✓ or ✗, each ✗ with what to do. It starts from
//! "nothing arrived": is atc talking to the right server, does the server answer, does it
//! take the token, do the agents exist, is the job file sound and private, is the timer
//! running, and is any result stuck. Then it reads the jobs themselves (`watches`): a
//! server that answers doctor is no proof that the timer's watches get answers.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Result;
use serde_json::{Value, json};

use crate::cmd::{emit, print_json};
use crate::exit::{Exit, Failure};
use crate::job::{Job, Watch};
use crate::job_file::JobFile;
use crate::lifecycle::Turns;
use crate::qwenpaw::{Answer, Client, Transport};
use crate::settings::{Doctor, Output};
use crate::state::Store;
use crate::text::plural;
use crate::time::{Timestamp, age};
use crate::turn::{ForwardStatus, Turn};

mod check;
mod config;
mod qwenpaw;

use check::{Check, bad, ok};

/// A tick is expected at least this often while watches wait.
use crate::pass::TICK_STALE;

pub fn run(doctor: &Doctor, out: Output) -> Result<()> {
    let store = Store::new(doctor.state.value.clone());
    let mut checks = Vec::new();
    // None: it cannot be read, and the checks of its watches cannot run (not "none").
    let read = job_file(&store, doctor, &mut checks);
    let unread = read.is_none();
    let file = read.unwrap_or_default();
    let jobs = &file.jobs;
    let base = &doctor.base_url.value;
    checks.push(ok(
        "base URL",
        format!("{base} (from {})", doctor.base_url.source),
    ));
    checks.push(config::config_line(&doctor.config));
    checks.extend(config::timer(doctor, doctor.home.as_deref()));
    let mut client = Client::new(doctor.http_timeout, doctor.auth.clone());
    // As the tick does: a watch's --allow-insecure-remote lets its base URL have tokens.
    for job in file.jobs.iter().filter(|j| j.options.allow_insecure_remote) {
        client.allow_insecure(&job.base_url);
    }
    let client = client;
    if server(&client, doctor, &mut checks) && !unread {
        checks.push(agents(&client, base, jobs, &file.turns));
    }
    let heartbeat = crate::pass::Heartbeat::read(&store.tick_lock_path());
    let last_tick = heartbeat.last_tick_at;
    let cadence = qwenpaw::cadence(&doctor.state.value);
    // A systemd timer of atc's installed (`atc timer print systemd`) for longer than a
    // tick may take to come, which should have ticked.
    let unit = doctor
        .home
        .as_ref()
        .map(|home| home.join(".config/systemd/user/atc-tick.timer"))
        .filter(|unit| {
            std::fs::metadata(unit)
                .and_then(|m| m.modified())
                .is_ok_and(|at| at.elapsed().is_ok_and(|age| age > TICK_STALE))
        });
    checks.push(tick(
        &heartbeat,
        &file,
        cadence.as_ref().is_some_and(|c| c.0),
        unit.as_deref(),
    ));
    checks.push(ok(
        "cadence",
        cadence.map_or_else(
            || "no atc QwenPaw plugin ticks for this job file, so its ticks come from a system timer, cron or you (`atc timer print` prints a timer)".to_owned(),
            |c| c.1,
        ),
    ));
    match unread {
        false => watches(&client, base, &store, &heartbeat, &file, &mut checks),
        true => checks.push(last_pass(&store, &heartbeat)),
    }
    checks.extend(
        doctor
            .other_job_files
            .iter()
            .filter_map(|path| other_job_file(path, Timestamp::now())),
    );
    checks.extend(qwenpaw::checks(&client, doctor));

    let failed = checks.iter().filter(|c| !c.ok).count();
    if out.json {
        let listed: Vec<Value> = checks
            .iter()
            .map(|c| json!({"check": c.name, "ok": c.ok, "detail": c.detail, "fix": c.fix}))
            .collect();
        let give_ups = crate::heard::recent(&file, Timestamp::now());
        print_json(
            &json!({"ok": failed == 0, "checks": listed, "last_tick_at": last_tick, "give_ups": give_ups}),
        )?;
    } else if !out.quiet || failed > 0 {
        let mut text = String::new();
        for c in &checks {
            let mark = if c.ok { '✓' } else { '✗' };
            text.push_str(&format!("{mark} {}: {}\n", c.name, c.detail));
            if let Some(fix) = &c.fix {
                text.push_str(&format!("  → {fix}\n"));
            }
        }
        emit(&text)?;
    }
    if failed > 0 {
        return Err(Failure::new(
            Exit::Refused,
            format!("{failed} of {} checks failed", checks.len()),
        )
        .into());
    }
    Ok(())
}

/// The job file loads, and it and its directory are private. Returns what it holds.
fn job_file(store: &Store, doctor: &Doctor, checks: &mut Vec<Check>) -> Option<JobFile> {
    let path = store.path();
    let shown = path.display();
    let loaded = match store.load() {
        Ok(file) if path.exists() => {
            checks.push(ok(
                "job file",
                format!(
                    "{shown} holds {} (from {})",
                    plural(file.jobs.len() as u64, "job", "jobs"),
                    doctor.state.source
                ),
            ));
            file
        }
        Ok(file) => {
            checks.push(ok(
                "job file",
                format!("none yet at {shown}; the first `atc watch` creates it"),
            ));
            return Some(file);
        }
        Err(err) => {
            checks.push(bad(
                "job file",
                format!("{err:#}"),
                format!("move {shown} aside (atc starts a new one where none exists); until then no check of its watches (agents, watches, deliveries, give-ups) can run"),
            ));
            return None;
        }
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| {
            std::fs::metadata(p).map_or(0, |m| m.permissions().mode() & 0o777)
        };
        let file_mode = mode(path);
        let dir = crate::state::fsutil::parent_dir(path);
        let dir_mode = mode(dir);
        if file_mode & 0o077 != 0 {
            checks.push(bad(
                "privacy",
                format!("{shown} is mode {file_mode:o}: others can read session ids and answers"),
                format!("chmod 600 {shown}"),
            ));
        } else if dir_mode & 0o077 != 0 {
            checks.push(bad(
                "privacy",
                format!("its directory {} is mode {dir_mode:o}", dir.display()),
                format!(
                    "chmod 700 {} (or keep the job file in a private directory)",
                    dir.display()
                ),
            ));
        } else {
            checks.push(ok(
                "privacy",
                format!("file {file_mode:o}, directory {dir_mode:o}"),
            ));
        }
    }
    Some(loaded)
}

fn json_of(answer: &Answer) -> Option<Value> {
    answer
        .body
        .as_ref()
        .ok()
        .filter(|_| answer.is_json())
        .and_then(|b| serde_json::from_str(b).ok())
}

/// The server answers as QwenPaw, is healthy, and takes the credentials. True when it is
/// worth asking it more.
fn server(client: &Client, doctor: &Doctor, checks: &mut Vec<Check>) -> bool {
    let base = &doctor.base_url.value;
    let source = &doctor.base_url.source;
    let fix_url = format!(
        "start QwenPaw (`qwenpaw app`), or point atc at it with --base-url or ATC_BASE_URL (now from {source})"
    );
    let version = match client.version(base) {
        Err(Transport { message, .. }) => {
            checks.push(bad(
                "server",
                format!("cannot reach it: {message}"),
                fix_url,
            ));
            return false;
        }
        Ok(answer) => answer,
    };
    let Some(body) = json_of(&version) else {
        checks.push(bad(
            "server",
            format!(
                "{base}/version answers HTTP {} with {}: that is not QwenPaw's API",
                version.status,
                version.kind()
            ),
            format!("check the base URL: it must point at QwenPaw (which serves /api); {fix_url}"),
        ));
        return false;
    };
    let auth = &doctor.auth;
    let has_token = auth.has_token();
    if matches!(version.status, 401 | 403) {
        checks.push(ok("server", format!("QwenPaw answers at {base}")));
        let said = body.get("detail").and_then(Value::as_str).unwrap_or("");
        checks.push(if has_token {
            bad(
                "token",
                format!("the server refused the token ({} {said})", version.status),
                "set QWENPAW_RUNTIME_INTERNAL_TOKEN to the server's own value (or ATC_BEARER_TOKEN to a fresh web login) in atc's environment, and the timer's".to_owned(),
            )
        } else {
            bad(
                "token",
                format!("the server wants a token ({} {said})", version.status),
                "set QWENPAW_RUNTIME_INTERNAL_TOKEN (the server's runtime token) or ATC_BEARER_TOKEN (a web login) in atc's environment, and the timer's (EnvironmentFile)".to_owned(),
            )
        });
        return false;
    }
    match (version.status, body.get("version").and_then(Value::as_str)) {
        (200, Some(v)) => checks.push(ok("server", format!("QwenPaw {v} answers at {base}"))),
        (status, _) => {
            checks.push(bad(
                "server",
                format!("{base}/version answers HTTP {status}: {body}"),
                fix_url,
            ));
            return false;
        }
    }
    checks.push(ok(
        "token",
        if has_token {
            "accepted".to_owned()
        } else {
            "none needed".to_owned()
        },
    ));
    let health = client.health(base);
    checks.push(
        match health
            .as_ref()
            .ok()
            .and_then(|a| json_of(a).map(|v| (a.status, v)))
        {
            Some((200, v)) => ok(
                "health",
                match v.get("uptime_seconds").and_then(Value::as_f64) {
                    Some(up) => format!("ok, up {}", age(Duration::from_secs_f64(up.max(0.0)))),
                    None => "ok".to_owned(),
                },
            ),
            Some((503, _)) => bad(
                "health",
                "the server is still starting".to_owned(),
                "wait a few seconds and run atc doctor again".to_owned(),
            ),
            other => bad(
                "health",
                format!("{base}/healthz answers {other:?}"),
                "see the server's log".to_owned(),
            ),
        },
    );
    true
}

/// The agents that live watches on this server name exist there.
fn agents(client: &Client, base: &str, jobs: &[Job], turns: &[Turn]) -> Check {
    let turns = &Turns::of(turns);
    let named: BTreeSet<&str> = jobs
        .iter()
        .filter(|j| j.base_url == base && live(j, turns))
        .flat_map(|j| {
            std::iter::once(j.target.agent_id.as_str()).chain(j.target.target_agent.as_deref())
        })
        .collect();
    if named.is_empty() {
        return ok(
            "agents",
            "no live watch names an agent on this server".to_owned(),
        );
    }
    let listed = client
        .list_agents(base)
        .ok()
        .and_then(|a| json_of(&a).filter(|_| a.status == 200));
    let Some(listed) = listed else {
        return bad(
            "agents",
            format!("{base}/agents does not list the agents"),
            "check the server's log".to_owned(),
        );
    };
    let agents = || {
        listed
            .get("agents")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
    };
    let known: BTreeSet<&str> = agents()
        .filter_map(|a| a.get("id").and_then(Value::as_str))
        .collect();
    let disabled: BTreeSet<&str> = agents()
        .filter(|a| a.get("enabled").and_then(Value::as_bool) == Some(false))
        .filter_map(|a| a.get("id").and_then(Value::as_str))
        .collect();
    let missing: Vec<&str> = named.difference(&known).copied().collect();
    let off: Vec<&str> = named.intersection(&disabled).copied().collect();
    if !missing.is_empty() {
        bad(
            "agents",
            format!("watches name agents the server does not have: {}", missing.join(", ")),
            "watch those tasks again with the right --agent / --target-agent (the agent's prompt shows its id), or `atc cancel` them".to_owned(),
        )
    } else if !off.is_empty() {
        bad(
            "agents",
            format!("watches name agents that are disabled: {}", off.join(", ")),
            "enable them in QwenPaw (the server answers 403 for a disabled agent), or `atc cancel` their watches".to_owned(),
        )
    } else {
        ok(
            "agents",
            format!("the watches name agents the server has: {}", join(&named)),
        )
    }
}

fn join(names: &BTreeSet<&str>) -> String {
    names.iter().copied().collect::<Vec<_>>().join(", ")
}

/// A tick ran lately, if anything waits for one. Kicks (ticks a QwenPaw turn's end
/// started) are no cadence: they come only when some turn ends, so they are said apart,
/// and only the other ticks (a timer's, the plugin's cadence, a person's) count.
fn tick(
    beat: &crate::pass::Heartbeat,
    file: &JobFile,
    plugin_ticks: bool,
    unit: Option<&std::path::Path>,
) -> Check {
    let turns = Turns::of(&file.turns);
    // A tick must come by for each live watch: it is watched, owes its parent something,
    // or a turn that carries it is not settled (on its way, read back, forwarded).
    let now = Timestamp::now();
    let waiting = file.jobs.iter().filter(|j| live(j, &turns)).count();
    let overdue = beat.overdue(&file.jobs, &turns, now).is_some();
    // A timer's (or a person's) tick, or a QwenPaw plugin's cadence (kept apart: another
    // server's plugin on the same job file ticks on beside it).
    let timer = beat.last_unkicked();
    let cadence = beat
        .last_cadence_at
        .filter(|c| timer.is_none_or(|t| *c > t));
    let last = cadence.or(timer);
    let kicks = beat
        .last_kick_at
        .map(|at| {
            format!(
                " (kicks, the ticks a turn's end starts, are apart: the last ran {} ago)",
                age(at.elapsed_at(now))
            )
        })
        .unwrap_or_default();
    let said = match last {
        Some(at) if cadence.is_some() => format!(
            "the last atc tick a QwenPaw plugin's cadence started ran {} ago{kicks}",
            age(at.elapsed_at(now))
        ),
        Some(at) => format!(
            "the last atc tick that was no kick ran {} ago{kicks}",
            age(at.elapsed_at(now))
        ),
        None if beat.last_kick_at.is_some() => {
            format!("no atc tick but kicks has run yet{kicks}")
        }
        None => "no atc tick has run yet".to_owned(),
    };
    let stale = last.is_none_or(|at| at.elapsed_at(now) > TICK_STALE);
    if let Some(unit) = unit
        && timer.is_none()
        && !plugin_ticks
    {
        // Installed, yet never ran: a timer nobody enabled (or one that fails).
        return bad(
            "timer",
            format!("{} is installed, and {said}", unit.display()),
            "`systemctl --user enable --now atc-tick.timer` starts it; `systemctl --user status atc-tick.service` says why a tick fails".to_owned(),
        );
    }
    if overdue {
        bad(
            "timer",
            format!(
                "{}, and {said}",
                plural(waiting as u64, "watch waits", "watches wait")
            ),
            if plugin_ticks {
                "atc's QwenPaw plugin says it ticks, yet no tick ran: is atc where the server finds it (the \"atc for the server\" line)? `atc tick -v` as the server's user says why a tick fails".to_owned()
            } else {
                "load atc's QwenPaw plugin (it ticks by itself while QwenPaw runs), or install a timer: `atc timer print systemd` (or `cron`, `launchd`) prints one; `systemctl --user status atc-tick.timer` shows one that is".to_owned()
            },
        )
    } else if waiting > 0 && stale {
        ok(
            "timer",
            format!(
                "{said}; {} for less than {}: no tick is overdue yet",
                plural(waiting as u64, "watch waits", "watches wait"),
                humantime::format_duration(TICK_STALE)
            ),
        )
    } else {
        ok("timer", said)
    }
}

// ---------------------------------------------------------------------------------------
// The watches: what the jobs themselves say. Doctor's own server answering proves little
// about them: the timer runs in another environment (no token?), a job keeps the base URL
// it was watched with, and a tick that beats but cannot save changes nothing.

/// The checks that read the jobs: failing checks by cause, recorded base URLs that do not
/// answer, results given up, and whether the last tick finished.
fn watches(
    client: &Client,
    base: &str,
    store: &Store,
    heartbeat: &crate::pass::Heartbeat,
    file: &JobFile,
    checks: &mut Vec<Check>,
) {
    let jobs = &file.jobs;
    let dead = dead_base_urls(client, base, file);
    for (url, (count, why)) in &dead {
        checks.push(bad(
            "job base URL",
            format!(
                "{} recorded with base URL {url}, which does not answer ({why}); atc doctor's is {base}",
                plural(*count as u64, "live watch is", "live watches are")
            ),
            format!(
                "start QwenPaw there, or watch those tasks again with --base-url {base} (`atc status` lists them)"
            ),
        ));
    }
    checks.extend(failing(jobs, &dead));
    checks.push(stuck(file));
    checks.push(give_ups(file, Timestamp::now()));
    checks.push(last_pass(store, heartbeat));
}

/// The give-ups of the last day, each with its line, the ones no tick has said to a
/// person marked (`heard`). Always ✓: what is still stuck, `deliveries` says.
fn give_ups(file: &JobFile, now: Timestamp) -> Check {
    let recent = crate::heard::recent(file, now);
    if recent.is_empty() {
        return ok("give-ups", "none in the last day".to_owned());
    }
    let unsaid = recent.iter().filter(|r| r.is_unsaid()).count();
    let mut detail = format!("{} in the last day", recent.len());
    if unsaid > 0 {
        detail.push_str(&format!(
            ", {unsaid} not yet said by a tick a person hears (decided by a QwenPaw kick, or a tick whose stderr goes to /dev/null; the next `atc tick` says {})",
            if unsaid == 1 { "it" } else { "them" }
        ));
    }
    for r in recent {
        detail.push_str(&format!(
            "\n  {} ago{}: {}",
            age(r.at.elapsed_at(now)),
            if r.is_unsaid() { " (not yet said)" } else { "" },
            r.line
        ));
    }
    ok("give-ups", detail)
}

/// Another job file a tick might read (the config file's `state`, the default) that
/// still watches tasks: fine while ticks read it, a failure when none has for longer
/// than a tick may take to come (its results wait there for nobody). Nothing to say of a
/// file that is not there, cannot be read or watches nothing.
fn other_job_file(path: &std::path::Path, now: Timestamp) -> Option<Check> {
    let (live, what) = crate::cmd::still_watching(path)?;
    let shown = path.display();
    let store = Store::new(path.to_path_buf());
    let last = crate::pass::Heartbeat::read(&store.tick_lock_path()).last_tick_at;
    match last {
        Some(at) if at.elapsed_at(now) <= TICK_STALE => Some(ok(
            "other job file",
            format!(
                "{what}, and a tick read it {} ago (a timer or plugin of its own)",
                age(at.elapsed_at(now))
            ),
        )),
        _ => Some(bad(
            "other job file",
            format!(
                "{what}, and no atc tick has read it {}: {} there for nobody",
                last.map_or("at all".to_owned(), |at| format!(
                    "for {}",
                    age(at.elapsed_at(now))
                )),
                if live == 1 {
                    "its result waits"
                } else {
                    "their results wait"
                }
            ),
            format!(
                "tick it until they end (`atc --state {shown} tick`, or a timer of its own), or make it the job file again (`atc config set state {shown}`); `atc --state {shown} status` lists them"
            ),
        )),
    }
}

/// A live watch: a tick still has something to do for it.
fn live(job: &Job, turns: &Turns) -> bool {
    !crate::lifecycle::settled_job(job, turns)
}

/// The base URLs live watches recorded, other than doctor's own, that do not answer:
/// how many watches each, and why.
fn dead_base_urls(
    client: &Client,
    base: &str,
    file: &JobFile,
) -> std::collections::BTreeMap<String, (usize, String)> {
    let jobs = &file.jobs;
    let turns = &Turns::of(&file.turns);
    let mut dead = std::collections::BTreeMap::new();
    let others: BTreeSet<&str> = jobs
        .iter()
        .filter(|j| live(j, turns) && j.base_url != base)
        .map(|j| j.base_url.as_str())
        .collect();
    for url in others {
        if let Err(Transport { message, .. }) = client.version(url) {
            let count = jobs
                .iter()
                .filter(|j| live(j, turns) && j.base_url == url)
                .count();
            let why = crate::describe::short_cause(&message);
            dead.insert(url.to_owned(), (count, why));
        }
    }
    dead
}

/// Live watches whose checks fail, grouped by cause: a refused token (the timer's
/// environment), or the kind of failure. Watches on a dead base URL are counted there.
fn failing(jobs: &[Job], dead: &std::collections::BTreeMap<String, (usize, String)>) -> Vec<Check> {
    let mut causes: std::collections::BTreeMap<String, Vec<&str>> = Default::default();
    for job in jobs {
        if job.watch != Watch::Pending || job.strikes == 0 || dead.contains_key(&job.base_url) {
            continue;
        }
        let kind = crate::report::failure_kind(job.last_error.as_deref().unwrap_or(""));
        causes.entry(kind).or_default().push(&job.task_id);
    }
    if causes.is_empty() {
        let live = jobs.iter().filter(|j| j.watch == Watch::Pending);
        let count = live.clone().count();
        let watched = plural(count as u64, "task watched", "tasks watched");
        // Those on a base URL that does not answer are its check's, never "not failing".
        let unanswered = live.filter(|j| dead.contains_key(&j.base_url)).count();
        let said = match unanswered {
            0 => format!("{watched}, none failing its checks"),
            n if n == count => {
                format!("{watched}, on a base URL that does not answer (job base URL, above)")
            }
            1 => format!(
                "{watched}, none failing its checks but the one on a base URL that does not answer (job base URL, above)"
            ),
            n => format!(
                "{watched}, none failing its checks but the {n} on a base URL that does not answer (job base URL, above)"
            ),
        };
        return vec![ok("watches", said)];
    }
    causes
        .into_iter()
        .map(|(kind, tasks)| {
            let which = format!(
                "{} failing checks with {kind}: {}",
                plural(tasks.len() as u64, "watch is", "watches are"),
                tasks.join(", ")
            );
            let fix = match kind.as_str() {
                "HTTP 401" | "HTTP 403" => "the timer's environment lacks the token (or holds a stale one): put QWENPAW_RUNTIME_INTERNAL_TOKEN=<the server's value> (or ATC_BEARER_TOKEN=…) in ~/.config/atc/env, chmod 600 — the unit `atc timer print systemd` prints reads it (EnvironmentFile=-%h/.config/atc/env); under cron, set it at the top of the crontab".to_owned(),
                "connection refused" | "timed out" => "is QwenPaw running where those watches point? `atc status TASK` shows the base URL and the last error".to_owned(),
                _ => "`atc status TASK` shows the last error; `atc log TASK` the history; after --max-strikes failures in a row the watch is abandoned".to_owned(),
            };
            bad("watches", which, fix)
        })
        .collect()
}

/// No result is stuck where only a person can move it: given up and not redelivered, or
/// of unknown outcome with its read-back window closed (`status::stuck`, a follow-up up a
/// delegation tree among them). Counted by result (a turn of two results refused is two),
/// with the turns they are in.
fn stuck(file: &JobFile) -> Check {
    let mut counts: Vec<(String, usize)> = Vec::new();
    let count = |counts: &mut Vec<(String, usize)>, what: &str| match counts
        .iter_mut()
        .find(|(w, _)| w == what)
    {
        Some((_, n)) => *n += 1,
        None => counts.push((what.to_owned(), 1)),
    };
    let mut turns_stuck = BTreeSet::new();
    for stuck in crate::status::stuck(&file.jobs, &file.turns) {
        match stuck.follow_up {
            true => count(&mut counts, &format!("follow-up {}", stuck.what)),
            false => count(&mut counts, stuck.what),
        }
        turns_stuck.extend(stuck.turn_id);
    }
    for t in &file.turns {
        // A console toast that failed leaves nothing stuck: the chat holds the turn.
        if t.forwards()
            && t.forward.as_ref().is_some_and(|f| {
                matches!(f.status, ForwardStatus::Failed | ForwardStatus::Unconfirmed)
            })
        {
            count(&mut counts, "not forwarded to the person");
        }
    }
    if counts.is_empty() {
        return ok("deliveries", "none stuck".to_owned());
    }
    let said: Vec<String> = counts
        .iter()
        .map(|(w, n)| match w.strip_prefix("follow-up ") {
            Some(how) if *n > 1 => format!("{n} follow-ups {how}"),
            _ => format!("{n} {w}"),
        })
        .collect();
    let results: usize = counts.iter().map(|(_, n)| n).sum();
    let turns = match turns_stuck.len() {
        n if n > 0 && n < results => format!(" (in {})", plural(n as u64, "turn", "turns")),
        _ => String::new(),
    };
    bad(
        "deliveries",
        format!("results that need a person: {}{turns}", said.join(", ")),
        "`atc status` shows each one and why; `atc redeliver TASK` tries a delivery again (an unconfirmed one is read back first)"
            .to_owned(),
    )
}

/// The last tick finished its pass: a heartbeat alone is not a healthy tick (one that
/// cannot save the job file beats, then exits 4). And the tick can write the directory.
fn last_pass(store: &Store, heartbeat: &crate::pass::Heartbeat) -> Check {
    let now = Timestamp::now();
    let dir = crate::state::fsutil::parent_dir(store.path());
    if let Some(mode) = unwritable_mode(dir) {
        return bad(
            "tick saves",
            format!(
                "the job file's directory {} is mode {mode:o}: a tick cannot save the job file there",
                dir.display()
            ),
            format!("chmod 700 {}", dir.display()),
        );
    }
    if heartbeat.finished != Some(false) {
        return ok(
            "tick saves",
            match heartbeat.finished_at {
                Some(at) => format!(
                    "the last atc tick finished its pass {} ago",
                    age(at.elapsed_at(now))
                ),
                None => "no unfinished tick".to_owned(),
            },
        );
    }
    // A tick may be running right now: then its pass is simply not done yet.
    if matches!(store.try_lock_tick(), Ok(None)) {
        return ok("tick saves", "an atc tick is running now".to_owned());
    }
    let started = heartbeat
        .last_tick_at
        .map_or("the last atc tick".to_owned(), |at| {
            format!("the last atc tick ({} ago)", age(at.elapsed_at(now)))
        });
    let before = match heartbeat.finished_at {
        Some(at) => format!("the last one that did ran {} ago", age(at.elapsed_at(now))),
        None => "none has since this atc was installed".to_owned(),
    };
    bad(
        "tick saves",
        format!("{started} did not finish its pass; {before}"),
        format!(
            "run `atc tick -v` to see why: a job directory it cannot write ({}) or a full disk exits 4, a job file it cannot read 3",
            dir.display()
        ),
    )
}

/// The mode of `dir` when it is ours and we may not write it (root may write anyway).
fn unwritable_mode(dir: &std::path::Path) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let euid = crate::state::guard::euid();
        let meta = std::fs::metadata(dir).ok()?;
        (euid != 0 && meta.uid() == euid && meta.mode() & 0o200 == 0).then_some(meta.mode() & 0o777)
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        None
    }
}
