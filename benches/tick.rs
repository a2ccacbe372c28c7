//! `cargo bench --bench tick [-- --json]`: how close `atc tick` comes to the floor, as
//! ratios (`-- kick-load`: the kick-load case alone, case 10, and case 8 beside it;
//! `-- long-child`: case 11 alone, a 30-minute child on a simulated clock). It starts a
//! multi-threaded keep-alive fake QwenPaw in this process, writes job files, runs the real `atc` binary as a process (min and median of several runs), and
//! compares it with the floor: the very requests atc made, replayed by a tight loop with the
//! same concurrency over kept-alive connections to the same server. Times are printed, never
//! asserted (machines are noisy); each goal gets a verdict line, `ok` or `MISS`.

#[path = "../tests/support/fake.rs"]
#[allow(dead_code)]
mod fake;

// Case 11, `long-child`: the real pass on a simulated clock against a counting fake server.
#[path = "tick/long_child.rs"]
mod long_child;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

// The real-QwenPaw harness of tests/e2e (provisioned venv, fake LLM, server processes),
// for case 8; its modules name `crate::R` and `crate::keep_dirs`.
#[path = "../tests/e2e/api.rs"]
#[allow(dead_code)]
mod api;
#[path = "../tests/e2e/procs.rs"]
#[allow(dead_code)]
mod procs;
#[path = "../tests/e2e/qwenpaw.rs"]
#[allow(dead_code)]
mod qwenpaw;

type R<T> = Result<T, String>;

fn keep_dirs() -> bool {
    false
}

use fake::{FakeQwenPaw, Recorded, Reply};
use serde_json::{Value, json};

const RUNNING: &str = r#"{"status":"running","started_at":1796003454.6703575}"#;
const FINISHED: &str = r#"{"status":"finished","started_at":1796003454.6703575,"result":{"status":"completed","session_id":"child","output":[{"type":"message","role":"assistant","content":[{"type":"text","text":"ECHO: hello"}],"status":"completed"}]}}"#;
const SUBMIT_OK: &str = r#"{"task_id":"task-d7f9d48350b1","timeout":60}"#;
const CONCURRENCY: usize = 8;
const RUNS: usize = 5;

/// A job record as `atc watch` writes it; `extra` adds or overrides fields.
fn job(i: usize, base_url: &str, extra: Value) -> Value {
    let mut job = json!({
        "job_id": format!("{i:012x}"), "task_id": format!("task-{i:012x}"),
        "base_url": base_url, "agent_id": "default", "target_agent": null,
        "session_id": format!("s-{i}"), "user_id": format!("u-{i}"), "channel": "console",
        "registered_at": now(), "updated_at": now(), "status": "pending"
    });
    if let (Some(job), Value::Object(extra)) = (job.as_object_mut(), extra) {
        job.extend(extra);
    }
    job
}

fn now() -> String {
    ago(0)
}

/// The time `secs` seconds ago, as the job file writes it.
fn ago(secs: u64) -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - secs;
    // RFC 3339 from epoch seconds, UTC (civil-from-days).
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A job file of the version this atc reads and writes.
fn write_file(path: &Path, jobs: Vec<Value>) {
    let file = json!({"version": atc::job_file::VERSION, "jobs": jobs, "turns": []});
    let bytes = serde_json::to_vec_pretty(&file).unwrap();
    std::fs::write(path, bytes).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
}

struct Env {
    _dir: tempfile::TempDir,
    home: PathBuf,
    state: PathBuf,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let state_dir = dir.path().join("state");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&state_dir).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&state_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        Env {
            state: state_dir.join("jobs.json"),
            home,
            _dir: dir,
        }
    }

    fn command(&self, program: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("ATC_STATE", &self.state)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        cmd
    }

    /// Runs a program to completion and returns its wall time.
    fn time(&self, program: &str, args: &[&str]) -> Duration {
        let started = Instant::now();
        let out = self.command(program, args).output().expect("run");
        let took = started.elapsed();
        assert!(
            out.status.success(),
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        took
    }
}

fn atc() -> &'static str {
    env!("CARGO_BIN_EXE_atc")
}

/// min and median of `runs` timings of `run`, each after `setup`.
fn measure(mut setup: impl FnMut(), mut run: impl FnMut() -> Duration) -> (Duration, Duration) {
    let mut times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            setup();
            run()
        })
        .collect();
    times.sort();
    (times[0], times[RUNS / 2])
}

/// One request as atc sent it, to replay.
#[derive(Clone)]
struct Replay {
    method: String,
    target: String,
    body: String,
}

fn replays(recorded: &[Recorded]) -> Vec<Replay> {
    recorded
        .iter()
        .map(|r| Replay {
            method: r.method.clone(),
            target: if r.query.is_empty() {
                r.path.clone()
            } else {
                format!("{}?{}", r.path, r.query)
            },
            body: r.body.clone(),
        })
        .collect()
}

/// The floor: `requests` sent by `concurrency` threads, each over one kept-alive
/// connection, each reading its answer whole before the next request.
fn floor(addr: SocketAddr, requests: &[Replay], concurrency: usize) -> Duration {
    let next = AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..concurrency.min(requests.len()).max(1) {
            scope.spawn(|| {
                let stream = TcpStream::connect(addr).unwrap();
                stream.set_nodelay(true).unwrap();
                let mut writer = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(r) = requests.get(i) else { break };
                    let head = format!(
                        "{} {} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\nX-Agent-Id: default\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                        r.method,
                        r.target,
                        r.body.len()
                    );
                    writer.write_all(head.as_bytes()).unwrap();
                    writer.write_all(r.body.as_bytes()).unwrap();
                    let mut length = 0;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        reader.read_line(&mut line).unwrap();
                        if line == "\r\n" || line.is_empty() {
                            break;
                        }
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0; length];
                    reader.read_exact(&mut body).unwrap();
                }
            });
        }
    });
    started.elapsed()
}

/// What the children waited for so far used: CPU time (user + system) and the peak
/// resident memory of the largest, in KiB.
#[cfg(target_os = "linux")]
fn children_usage() -> Option<(Duration, u64)> {
    #[repr(C)]
    struct Rusage {
        utime: [i64; 2],
        stime: [i64; 2],
        maxrss: i64,
        rest: [i64; 13],
    }
    unsafe extern "C" {
        fn getrusage(who: i32, usage: *mut Rusage) -> i32;
    }
    const RUSAGE_CHILDREN: i32 = -1;
    let mut usage = Rusage {
        utime: [0; 2],
        stime: [0; 2],
        maxrss: 0,
        rest: [0; 13],
    };
    // SAFETY: getrusage fills the struct, which has the layout of Linux's struct rusage.
    let ok = unsafe { getrusage(RUSAGE_CHILDREN, &mut usage) } == 0;
    let time = |t: [i64; 2]| Duration::from_secs(t[0] as u64) + Duration::from_micros(t[1] as u64);
    ok.then(|| (time(usage.utime) + time(usage.stime), usage.maxrss as u64))
}

#[cfg(not(target_os = "linux"))]
fn children_usage() -> Option<(Duration, u64)> {
    None
}

fn children_peak_kib() -> Option<u64> {
    children_usage().map(|(_, kib)| kib)
}

fn children_cpu() -> Duration {
    children_usage().map_or(Duration::ZERO, |(cpu, _)| cpu)
}

/// Runs `atc ARGS` under `strace OPTIONS -o FILE` and returns what strace wrote; `None`
/// when strace is not installed (or cannot trace here).
fn strace(env: &Env, options: &[&str], args: &[&str]) -> Option<String> {
    let trace = env.home.join("strace.out");
    let traced = Command::new("strace")
        .args(options)
        .arg("-o")
        .arg(&trace)
        .arg(atc())
        .args(args)
        .env_clear()
        .env("HOME", &env.home)
        .env("ATC_STATE", &env.state)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    traced
        .success()
        .then(|| std::fs::read_to_string(&trace).ok())
        .flatten()
}

/// A process's system calls by name, as `strace -f -c` counts them.
type Profile = std::collections::BTreeMap<String, usize>;

fn parse_strace_summary(text: &str) -> Profile {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (5 | 6) = fields.len() else { return None };
            let name = *fields.last()?;
            let calls = fields[3].parse().ok()?;
            (name != "total").then(|| (name.to_owned(), calls))
        })
        .collect()
}

/// The system calls of one run of `atc ARGS`, under strace.
fn atc_profile(env: &Env, args: &[&str]) -> Option<Profile> {
    Some(parse_strace_summary(&strace(env, &["-f", "-c"], args)?))
}

/// The system calls of the floor's loop replaying `requests`, in a process of its own
/// (this benchmark run again with `--floor-child`), under strace.
fn floor_profile(env: &Env, addr: SocketAddr, requests: &[Replay]) -> Option<Profile> {
    let file = write_requests(env, requests);
    let trace = env.home.join("strace-floor.out");
    let ok = Command::new("strace")
        .args(["-f", "-c", "-o"])
        .arg(&trace)
        .arg(std::env::current_exe().ok()?)
        .arg("--floor-child")
        .arg(addr.to_string())
        .arg(&file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?
        .success();
    ok.then(|| std::fs::read_to_string(&trace).ok())
        .flatten()
        .map(|t| parse_strace_summary(&t))
}

/// The file a `--floor-child` reads its requests from.
fn write_requests(env: &Env, requests: &[Replay]) -> PathBuf {
    let file = env.home.join("floor-requests.json");
    let list: Vec<Value> = requests
        .iter()
        .map(|r| json!([r.method, r.target, r.body]))
        .collect();
    std::fs::write(&file, serde_json::to_vec(&list).unwrap()).unwrap();
    file
}

/// The CPU time (user + system) of the floor's loop replaying `requests` in a process of
/// its own, as atc's is measured: median of the runs.
fn floor_cpu(env: &Env, addr: SocketAddr, requests: &[Replay]) -> Duration {
    let file = write_requests(env, requests);
    let exe = std::env::current_exe().unwrap();
    median(
        (0..RUNS)
            .map(|_| {
                let before = children_cpu();
                let status = Command::new(&exe)
                    .arg("--floor-child")
                    .arg(addr.to_string())
                    .arg(&file)
                    .stdin(Stdio::null())
                    .status()
                    .unwrap();
                assert!(status.success(), "the floor's process failed");
                children_cpu() - before
            })
            .collect(),
    )
}

/// `--floor-child ADDR FILE`: the floor's loop over the requests in FILE, nothing else.
fn floor_child(addr: &str, file: &str) {
    let list: Vec<(String, String, String)> =
        serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    let requests: Vec<Replay> = list
        .into_iter()
        .map(|(method, target, body)| Replay {
            method,
            target,
            body,
        })
        .collect();
    floor(addr.parse().unwrap(), &requests, CONCURRENCY);
}

/// The per-poll table of two profiles: every call made at least 0.05 times per poll by
/// either, then the totals.
fn profile_table(atc: &Profile, floor: &Profile, polls: usize) -> (Vec<String>, f64, f64) {
    let per = |p: &Profile, name: &str| p.get(name).copied().unwrap_or(0) as f64 / polls as f64;
    let mut names: Vec<&String> = atc.keys().chain(floor.keys()).collect();
    names.sort();
    names.dedup();
    names.sort_by(|a, b| per(atc, b).total_cmp(&per(atc, a)));
    let mut lines = vec![format!("   {:<16} {:>8} {:>8}", "per poll", "atc", "floor")];
    for name in names {
        let (a, f) = (per(atc, name), per(floor, name));
        if a >= 0.05 || f >= 0.05 {
            lines.push(format!("   {name:<16} {a:>8.2} {f:>8.2}"));
        }
    }
    let total = |p: &Profile| p.values().sum::<usize>() as f64 / polls as f64;
    let (a, f) = (total(atc), total(floor));
    lines.push(format!("   {:<16} {a:>8.2} {f:>8.2}", "all (each run)"));
    (lines, a, f)
}

/// Threads one run of `atc ARGS` created: exact under strace when it is installed,
/// otherwise the distinct thread ids seen by sampling /proc (a lower bound).
fn threads_created(env: &Env, args: &[&str]) -> (usize, &'static str) {
    if let Some(text) = strace(env, &["-f", "-qq", "-e", "trace=clone,clone3"], args) {
        let clones = text
            .lines()
            .filter(|l| l.contains("clone") && !l.contains("= -1"))
            .count();
        return (clones, "strace");
    }
    let mut child = env.command(atc(), args).spawn().unwrap();
    let tasks = PathBuf::from(format!("/proc/{}/task", child.id()));
    let mut seen = std::collections::BTreeSet::new();
    while child.try_wait().unwrap().is_none() {
        if let Ok(entries) = std::fs::read_dir(&tasks) {
            for e in entries.flatten() {
                seen.insert(e.file_name());
            }
        }
    }
    (
        seen.len().saturating_sub(1),
        "sampled /proc (a lower bound)",
    )
}

fn mtime_and_inode(path: &Path) -> (std::time::SystemTime, u64) {
    let meta = std::fs::metadata(path).unwrap();
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    (meta.modified().unwrap(), inode)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

struct Verdicts {
    lines: Vec<String>,
    json: Vec<Value>,
}

impl Verdicts {
    fn goal(&mut self, case: &str, measured: f64, goal: f64, unit: &str, detail: Value) {
        let ok = measured <= goal;
        self.lines.push(format!(
            "{:<4} {case}: {measured:.2}{unit} (goal ≤ {goal}{unit})",
            if ok { "ok" } else { "MISS" }
        ));
        self.json
            .push(json!({"case": case, "measured": measured, "goal": goal,
            "unit": unit, "ok": ok, "detail": detail}));
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--floor-child") {
        floor_child(&args[at + 1], &args[at + 2]);
        return;
    }
    let as_json = std::env::args().any(|a| a == "--json");
    let say = |line: String| {
        if !as_json {
            println!("{line}");
        }
    };
    let mut verdicts = Verdicts {
        lines: Vec::new(),
        json: Vec::new(),
    };
    // `-- kick-load`: case 10 alone, and case 8 (10a on the real QwenPaw, where installed).
    if args.iter().any(|a| a == "kick-load") {
        let env = Env::new();
        say("atc tick benchmark, the kick-load case (10) alone".to_owned());
        kick_case(&env, &say, &mut verdicts);
        real_server_case(&env, None, &say, &mut verdicts);
        finish(as_json, &verdicts);
        return;
    }
    // `-- long-child`: case 11 alone (no process, no socket: a second or so).
    if args.iter().any(|a| a == "long-child") {
        say("atc tick benchmark, the long-child case (11) alone".to_owned());
        long_child_case(&say, &mut verdicts);
        finish(as_json, &verdicts);
        return;
    }
    say(format!(
        "atc tick benchmark: min / median of {RUNS} runs, --concurrency {CONCURRENCY}; ratios against the floor"
    ));

    // 2. Idle tick vs process floor (first: small children keep the peak-RSS reading clean).
    let env = Env::new();
    write_file(&env.state, Vec::new());
    let (true_min, true_med) = measure(|| {}, || env.time("true", &[]));
    let (idle_min, idle_med) = measure(|| {}, || env.time(atc(), &["tick"]));
    let idle_ratio = idle_med.as_secs_f64() / true_med.as_secs_f64();
    say(format!(
        "2. idle tick: {:.2} / {:.2} ms; /bin/true {:.2} / {:.2} ms",
        ms(idle_min),
        ms(idle_med),
        ms(true_min),
        ms(true_med)
    ));
    verdicts.goal(
        "2 idle tick / process start",
        idle_ratio,
        3.0,
        "x",
        json!({"tick_ms": ms(idle_med), "true_ms": ms(true_med)}),
    );

    // 1. Poll pass vs floor, 1,000 pending jobs.
    let server = FakeQwenPaw::start();
    server.on_prefix(
        "GET",
        "/api/console/chat/task/",
        vec![Reply::json(200, RUNNING)],
    );
    // As a tick finds them after their first poll (which records the start time): a
    // steady tick over running tasks. The first poll's one-off save is measured apart.
    let pending = |n: usize| {
        (0..n)
            .map(|i| {
                job(
                    i,
                    &server.api(),
                    json!({"started_at": "2026-11-30T01:50:54Z"}),
                )
            })
            .collect::<Vec<_>>()
    };
    let unpolled = |n: usize| {
        (0..n)
            .map(|i| job(i, &server.api(), json!({})))
            .collect::<Vec<_>>()
    };
    let poll_case = |n: usize| {
        let before = server.requests().len();
        let setup = || write_file(&env.state, pending(n));
        let cpu_before = children_cpu();
        let (min, med) = measure(setup, || {
            env.time(atc(), &["tick", "--concurrency", &CONCURRENCY.to_string()])
        });
        let cpu = (children_cpu() - cpu_before) / RUNS as u32;
        let sent = replays(&server.requests()[before..]);
        let one_run = &sent[..sent.len() / RUNS];
        assert_eq!(one_run.len(), n, "one GET per pending job");
        let floors: Vec<Duration> = (0..RUNS)
            .map(|_| floor(server_addr(&server), one_run, CONCURRENCY))
            .collect();
        let floor_med = median(floors);
        (min, med, floor_med, cpu)
    };
    let (min, med, floor_1000, cpu_1000) = poll_case(1000);
    let peak = children_peak_kib();
    let ratio = med.as_secs_f64() / floor_1000.as_secs_f64();
    // What no tick can avoid besides the requests: starting a process, and reading the
    // job file it must poll from (in this process, through atc's own loader).
    write_file(&env.state, pending(1000));
    let (_, parse_1000) = measure(|| {}, || load_time(&env.state));
    let whole_floor = true_med + parse_1000 + floor_1000;
    say(format!(
        "1. 1,000 pending jobs: tick {:.1} / {:.1} ms; floor {:.1} ms (the requests alone); with a process start ({:.1} ms) and one read of the job file ({:.1} ms): {:.1} ms, tick / that = {:.2}",
        ms(min),
        ms(med),
        ms(floor_1000),
        ms(true_med),
        ms(parse_1000),
        ms(whole_floor),
        med.as_secs_f64() / whole_floor.as_secs_f64()
    ));
    verdicts.goal(
        "1 poll pass / floor (1,000 jobs)",
        ratio,
        1.25,
        "x",
        json!({"tick_ms": ms(med), "floor_ms": ms(floor_1000),
            "process_start_ms": ms(true_med), "read_job_file_ms": ms(parse_1000),
            "whole_floor_ms": ms(whole_floor)}),
    );
    verdicts.lines.push(format!(
        "info 1 poll pass / (requests + process start + one read of the job file): {:.2}x",
        med.as_secs_f64() / whole_floor.as_secs_f64()
    ));
    let last_run = replays(&server.requests()[server.requests().len() - 1000..]);
    let floor_cpu_1000 = floor_cpu(&env, server_addr(&server), &last_run);
    say(format!(
        "   CPU (user + system) of that tick: {:.1} ms, {:.1} µs per poll; of the floor's loop as a process of its own: {:.1} ms ({:.1}x); the server shares the {} cores",
        ms(cpu_1000),
        cpu_1000.as_secs_f64() * 1e6 / 1000.0,
        ms(floor_cpu_1000),
        cpu_1000.as_secs_f64() / floor_cpu_1000.as_secs_f64(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    ));
    verdicts.json.push(
        json!({"case": "1 CPU per 1,000 polls", "atc_cpu_ms": ms(cpu_1000),
        "floor_cpu_ms": ms(floor_cpu_1000)}),
    );
    // `ATC_BENCH_BASELINE=<another atc>`: case 1 side by side with that build, in this run,
    // their runs interleaved (the machine's noise falls on both alike).
    if let Some(baseline) = std::env::var_os("ATC_BENCH_BASELINE") {
        let baseline = baseline.to_string_lossy().into_owned();
        let tick = ["tick", "--concurrency", &CONCURRENCY.to_string()].map(str::to_owned);
        let tick: Vec<&str> = tick.iter().map(String::as_str).collect();
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..RUNS {
            write_file(&env.state, pending(1000));
            ours.push(env.time(atc(), &tick));
            write_file(&env.state, pending(1000));
            theirs.push(env.time(&baseline, &tick));
        }
        let (ours, theirs) = (median(ours), median(theirs));
        let side = ours.as_secs_f64() / theirs.as_secs_f64();
        say(format!(
            "1b. the same 1,000 jobs, this build {:.1} ms, {baseline} {:.1} ms (medians, interleaved): {side:.2}x",
            ms(ours),
            ms(theirs)
        ));
        verdicts.lines.push(format!(
            "info 1b poll pass, this build / {baseline}: {side:.2}x"
        ));
        verdicts
            .json
            .push(json!({"case": "1b poll pass beside a baseline build",
            "baseline": baseline, "tick_ms": ms(ours), "baseline_ms": ms(theirs), "ratio": side}));
    }
    verdicts.lines.push(format!(
        "info 1 CPU of the poll pass / the floor's: {:.1} ms / {:.1} ms = {:.2}x",
        ms(cpu_1000),
        ms(floor_cpu_1000),
        cpu_1000.as_secs_f64() / floor_cpu_1000.as_secs_f64()
    ));

    let (first_min, first_med) = measure(
        || write_file(&env.state, unpolled(1000)),
        || env.time(atc(), &["tick", "--concurrency", &CONCURRENCY.to_string()]),
    );
    say(format!(
        "   the same jobs at their first poll (one save, fsynced): {:.1} / {:.1} ms",
        ms(first_min),
        ms(first_med)
    ));

    // 5. Memory of that tick.
    if let Some(kib) = peak {
        say(format!(
            "5. peak RSS of the 1,000-job tick: {:.1} MB",
            kib as f64 / 1024.0
        ));
        verdicts.goal(
            "5 peak RSS (1,000 jobs)",
            kib as f64 / 1024.0,
            20.0,
            " MB",
            json!({"kib": kib}),
        );
    }

    // 7. Threads and connections of that tick.
    write_file(&env.state, pending(1000));
    let (threads, how) =
        threads_created(&env, &["tick", "--concurrency", &CONCURRENCY.to_string()]);
    write_file(&env.state, pending(1000));
    let before = server.connections();
    env.time(atc(), &["tick", "--concurrency", &CONCURRENCY.to_string()]);
    let connections = server.connections() - before;
    say(format!(
        "7. 1,000 polls: {threads} threads created ({how}), {connections} TCP connections"
    ));
    write_file(&env.state, pending(1000));
    let args = ["tick", "--concurrency", &CONCURRENCY.to_string()];
    let before = server.requests().len();
    let profiles = atc_profile(&env, &args).and_then(|atc| {
        let sent = replays(&server.requests()[before..]);
        Some((atc, floor_profile(&env, server_addr(&server), &sent)?))
    });
    match profiles {
        Some((atc, floor)) => {
            let (lines, a, f) = profile_table(&atc, &floor, 1000);
            say(format!(
                "   system calls per poll (strace -f -c of one tick and of the floor's loop, each a process of its own; 1,000 polls): {a:.2} vs {f:.2}"
            ));
            for line in lines {
                say(line);
            }
            verdicts
                .json
                .push(json!({"case": "7 system calls per poll (1,000 polls)",
                "atc": atc, "floor": floor, "atc_per_poll": a, "floor_per_poll": f}));
        }
        None => say(
            "   system calls per poll: skipped (strace is not installed or cannot trace here)"
                .into(),
        ),
    }
    verdicts.goal(
        "7 threads created (1,000 polls)",
        threads as f64,
        (CONCURRENCY + 4) as f64,
        "",
        json!({"how": how}),
    );
    verdicts.goal(
        "7 TCP connections (1,000 polls)",
        connections as f64,
        (CONCURRENCY + 4) as f64,
        "",
        json!({}),
    );

    // 6. Scaling: time per job at 100, 1,000 and 10,000.
    let mut per_job = Vec::new();
    for n in [100, 1000, 10_000] {
        let (_, med, floor, _) = if n == 1000 {
            (min, med, floor_1000, cpu_1000)
        } else {
            poll_case(n)
        };
        per_job.push((
            n,
            med.as_secs_f64() * 1e6 / n as f64,
            floor.as_secs_f64() * 1e6 / n as f64,
        ));
    }
    let shown: Vec<String> = per_job
        .iter()
        .map(|(n, us, floor)| format!("{n}: {us:.0} µs/job (floor {floor:.0})"))
        .collect();
    let slope = per_job[2].1 / per_job[1].1;
    say(format!(
        "6. scaling: {}; per-job time at 10,000 / at 1,000: {slope:.2}",
        shown.join(", ")
    ));
    verdicts.json.push(json!({"case": "6 scaling", "per_job_us": per_job.iter().map(|(n, us, f)| json!({"jobs": n, "us_per_job": us, "floor_us_per_job": f})).collect::<Vec<_>>(), "slope_10000_over_1000": slope}));
    verdicts.lines.push(format!(
        "info 6 scaling: per-job time at 10,000 jobs is {slope:.2}x that at 1,000 (flat is 1)"
    ));

    // 3. Big file, nothing due: 10,000 retained terminal jobs.
    let done: Vec<Value> = (0..10_000)
        .map(|i| {
            job(
                i,
                "http://127.0.0.1:9/api",
                json!({"status": "done", "delivered_at": now(),
                "final": "[TASK_ID: x]\n[STATUS: finished]\n\nTask completed.\n\nECHO: hello",
                "chat_id": format!("chat-{i}"), "delivery": {"attempts": 1, "busy": 0}}),
            )
        })
        .collect();
    write_file(&env.state, done);
    let before = mtime_and_inode(&env.state);
    std::thread::sleep(Duration::from_millis(20));
    // The first tick reads the whole file; the ones after it find it as it left it.
    let first_read = env.time(atc(), &["tick"]);
    let (big_min, big_med) = measure(|| {}, || env.time(atc(), &["tick"]));
    let unchanged = mtime_and_inode(&env.state) == before;
    say(format!(
        "   the first tick over that file (reads and checks all 10,000 jobs): {:.1} ms",
        ms(first_read)
    ));
    say(format!(
        "3. 10,000 ended jobs, nothing due: tick {:.1} / {:.1} ms; file {}",
        ms(big_min),
        ms(big_med),
        if unchanged {
            "not rewritten (mtime and inode unchanged)"
        } else {
            "REWRITTEN"
        }
    ));
    verdicts.goal(
        "3 big idle file / idle tick",
        big_med.as_secs_f64() / idle_med.as_secs_f64(),
        10.0,
        "x",
        json!({"tick_ms": ms(big_med), "unchanged": unchanged}),
    );
    verdicts.goal(
        "3 big idle file rewritten (0 = no)",
        f64::from(u8::from(!unchanged)),
        0.0,
        "",
        json!({}),
    );

    // 4. Delivery pass: 200 finished tasks into 200 idle parent chats.
    let server = parents_server(FINISHED);
    let chats = 200;
    let finished = || {
        (0..chats)
            .map(|i| job(i, &server.api(), json!({})))
            .collect::<Vec<_>>()
    };
    let before = server.requests().len();
    let (dmin, dmed) = measure(
        || write_file(&env.state, finished()),
        || env.time(atc(), &["tick", "--concurrency", &CONCURRENCY.to_string()]),
    );
    let delivered = std::fs::read_to_string(&env.state)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .map_or(0, |f| {
            f["jobs"]
                .as_array()
                .map_or(0, |j| j.iter().filter(|j| j["status"] == "done").count())
        });
    assert_eq!(delivered, chats, "every result delivered in one tick");
    let sent = replays(&server.requests()[before..]);
    let one_run = &sent[..sent.len() / RUNS];
    let dfloor = median(
        (0..RUNS)
            .map(|_| floor(server_addr(&server), one_run, CONCURRENCY))
            .collect(),
    );
    // The write-ahead rule costs three durable saves (results, the claim before the POSTs,
    // their outcome), each an fsync of file and directory.
    write_file(&env.state, finished());
    let bytes = std::fs::read(&env.state).unwrap();
    let (_, one_save) = measure(
        || {},
        || {
            let started = Instant::now();
            atc::state::fsutil::write_atomic(&env.state, &bytes).unwrap();
            started.elapsed()
        },
    );
    let whole = true_med + dfloor + one_save * 3;
    say(format!(
        "4. 200 deliveries ({} requests): tick {:.1} / {:.1} ms; floor {:.1} ms (the requests alone); with a process start and three durable saves ({:.1} ms each): {:.1} ms, tick / that = {:.2}",
        one_run.len(),
        ms(dmin),
        ms(dmed),
        ms(dfloor),
        ms(one_save),
        ms(whole),
        dmed.as_secs_f64() / whole.as_secs_f64()
    ));
    verdicts.goal(
        "4 delivery pass / floor (200 chats)",
        dmed.as_secs_f64() / dfloor.as_secs_f64(),
        1.5,
        "x",
        json!({"tick_ms": ms(dmed), "floor_ms": ms(dfloor), "requests": one_run.len(),
            "durable_save_ms": ms(one_save), "whole_floor_ms": ms(whole)}),
    );
    verdicts.lines.push(format!(
        "info 4 delivery pass / (requests + process start + three durable saves): {:.2}x",
        dmed.as_secs_f64() / whole.as_secs_f64()
    ));

    // 8. The real QwenPaw's CPU per 1,000 polls, where it is installed.
    real_server_case(&env, Some(cpu_1000), &say, &mut verdicts);
    // 9. One wake-up per parent: 50 results finishing together for 5 parent chats, the
    // parents idle at every tick (their turns last less than a tick).
    let (turns, ticks) = batch_case(&env, &server, &[]);
    let (turns_one, ticks_one) = batch_case(&env, &server, &["--no-batch"]);
    say(format!(
        "9. 50 results for 5 chats: {turns} parent turns posted, the last result in after {ticks} tick(s); with --no-batch {turns_one} turns, {ticks_one} ticks"
    ));
    verdicts.goal(
        "9 parent turns per 50 results for 5 chats",
        turns as f64,
        5.0,
        "",
        json!({"turns": turns, "no_batch_turns": turns_one}),
    );
    verdicts.goal(
        "9 ticks until the last of 50 results is in",
        ticks as f64,
        1.0,
        "",
        json!({"ticks": ticks, "no_batch_ticks": ticks_one}),
    );

    // 10. Kick load: 1,000 watches of long children; turn ends that concern none of them,
    // and one turn end of one watched child.
    kick_case(&env, &say, &mut verdicts);
    // 11. One child running 30 minutes, the plugin loaded: its polls on the back-off beside
    // today's 20 s cadence, and the delay from its end to the POST.
    long_child_case(&say, &mut verdicts);
    finish(as_json, &verdicts);
}

/// Case 11, `long-child` (issue 38): one child running 30 minutes on a server whose atc
/// plugin is loaded (`long_child`). Scenario A: the plugin's ticks name their server, so the
/// watch is polled on its back-off and at its end by the kick; scenario B, in the same run:
/// they name none (today's 20 s cadence: every tick polls).
fn long_child_case(say: &dyn Fn(String), verdicts: &mut Verdicts) {
    const POLLS_GOAL: usize = 10;
    const POST_GOAL_S: f64 = 2.0;
    let backoff = long_child::run(true);
    let cadence = long_child::run(false);
    let end_s = long_child::END_MS as f64 / 1e3;
    let shown = |s: Option<f64>| s.map_or("none".to_owned(), |s| format!("{s:.2} s"));
    let times: Vec<String> = backoff.polls.iter().map(|t| format!("{t}")).collect();
    say(format!(
        "11. long-child: one child running {:.0} minutes, the plugin loaded, cadence ticks every 20 s, its turn's end kicked at {end_s:.0} s (simulated clock, the real pass, a counting fake server): with the back-off {} polls of the task, today's cadence {} (same run); posted {} / {} after the child's end",
        end_s / 60.0,
        backoff.polls.len(),
        cadence.polls.len(),
        shown(backoff.post_after_end_s),
        shown(cadence.post_after_end_s),
    ));
    say(format!(
        "    with the back-off, polled at (s): {}; the kicked tick ran {} pass(es); {} delivery POST(s), {} other requests; {} ticks in {:.0} ms of wall time (today's cadence: {} POST(s), {:.0} ms)",
        times.join(", "),
        backoff.kicked_passes,
        backoff.posts,
        backoff.others,
        backoff.ticks,
        ms(backoff.wall),
        cadence.posts,
        ms(cadence.wall),
    ));
    let polls_ok = backoff.polls.len() <= POLLS_GOAL;
    let post_ok = backoff.post_after_end_s.is_some_and(|s| s <= POST_GOAL_S);
    verdicts.lines.push(format!(
        "{:<4} long-child polls of a 30-minute child, plugin loaded: {} (goal ≤ {POLLS_GOAL}); today's 20 s cadence, same run: {}",
        if polls_ok { "ok" } else { "MISS" },
        backoff.polls.len(),
        cadence.polls.len(),
    ));
    verdicts.lines.push(format!(
        "{:<4} long-child its result posted after the child's turn ended: {} (goal ≤ {POST_GOAL_S} s); today's cadence: {}",
        if post_ok { "ok" } else { "MISS" },
        shown(backoff.post_after_end_s),
        shown(cadence.post_after_end_s),
    ));
    verdicts.json.push(json!({
        "case": "long-child",
        "polls": backoff.polls.len(),
        "polls_cadence": cadence.polls.len(),
        "post_after_end_s": backoff.post_after_end_s,
        "post_after_end_s_cadence": cadence.post_after_end_s,
        "ok": polls_ok && post_ok,
        "goal": {"polls": POLLS_GOAL, "post_after_end_s": POST_GOAL_S},
        "detail": {
            "child_runs_s": end_s,
            "cadence_s": 20,
            "poll_ceiling_s": atc::settings::defaults::POLL_CEILING.as_secs(),
            "poll_times_s": backoff.polls,
            "kicked_passes": backoff.kicked_passes,
            "posts": backoff.posts,
            "posts_cadence": cadence.posts,
            "other_requests": backoff.others,
            "ticks": backoff.ticks,
            "wall_ms": ms(backoff.wall),
            "wall_ms_cadence": ms(cadence.wall),
        },
    }));
}

/// Prints the verdicts (or, with `--json`, the one JSON document).
fn finish(as_json: bool, verdicts: &Verdicts) {
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"runs": RUNS, "concurrency": CONCURRENCY, "cases": verdicts.json})
            )
            .unwrap()
        );
    } else {
        println!();
        for line in &verdicts.lines {
            println!("{line}");
        }
    }
}

/// Case 8, where the e2e QwenPaw is installed: its CPU per 1,000 polls, and case 10a on it
/// (the server's CPU for 100 turn ends no watch concerns). `cpu_1000`: atc's CPU for one
/// tick of 1,000 polls (case 1), when that case ran.
fn real_server_case(
    env: &Env,
    cpu_1000: Option<Duration>,
    say: &dyn Fn(String),
    verdicts: &mut Verdicts,
) {
    match server_cost(env) {
        Ok(Some(cost)) => {
            say(format!(
                "8. the real QwenPaw 2.2.2.post1, {} running tasks polled by {} ticks ({} polls): the server's CPU {:.0} ms per 1,000 polls (less what it used idle: {:.0} ms per second), atc's {:.0} ms (a process start per {} polls); a tick took {:.1} ms (median)",
                cost.tasks,
                cost.ticks,
                cost.tasks * cost.ticks,
                cost.server_ms_per_1000,
                cost.server_idle_ms_per_s,
                cost.atc_ms_per_1000,
                cost.tasks,
                cost.tick_ms
            ));
            let every = 20.0;
            if let Some(cpu_1000) = cpu_1000 {
                say(format!(
                    "   1,000 watches on a {every:.0} s timer: the server spends {:.1}% of one core answering the polls, atc {:.1}% (its CPU for one tick of 1,000 polls, case 1: {:.0} ms)",
                    cost.server_ms_per_1000 / every / 10.0,
                    ms(cpu_1000) / every / 10.0,
                    ms(cpu_1000)
                ));
            }
            say(format!(
                "   10a on that server: 100 turn ends concerning none of its {} watches cost it {:.0} ms of CPU in all (less idle; /proc counts in 10 ms steps); one older plugin's kick, naming no turn, {:.0} ms",
                cost.tasks, cost.unrelated_kicks_ms, cost.blind_kick_ms
            ));
            verdicts.lines.push(format!(
                "info 8 real QwenPaw: server CPU {:.0} ms per 1,000 polls, atc {:.0} ms; 10a: {:.0} ms for 100 unrelated kicks, {:.0} ms for one kick naming no turn",
                cost.server_ms_per_1000, cost.atc_ms_per_1000, cost.unrelated_kicks_ms, cost.blind_kick_ms
            ));
            verdicts
                .json
                .push(json!({"case": "8 real QwenPaw CPU per 1,000 polls",
                "server_cpu_ms": cost.server_ms_per_1000, "atc_cpu_ms": cost.atc_ms_per_1000,
                "server_idle_cpu_ms_per_s": cost.server_idle_ms_per_s, "tick_ms": cost.tick_ms,
                "tasks": cost.tasks, "ticks": cost.ticks,
                "unrelated_kicks_100_server_cpu_ms": cost.unrelated_kicks_ms,
                "blind_kick_server_cpu_ms": cost.blind_kick_ms}));
        }
        Ok(None) => {
            let why = format!(
                "QwenPaw is not installed ({} has no .atc-provisioned; tests/e2e/provision.sh makes it)",
                venv_dir().display()
            );
            say(format!(
                "8. the real QwenPaw's CPU per 1,000 polls: skipped, {why}"
            ));
            verdicts.lines.push(format!("skip 8 real QwenPaw: {why}"));
            verdicts
                .json
                .push(json!({"case": "8 real QwenPaw CPU per 1,000 polls", "skipped": why}));
        }
        Err(err) => {
            say(format!(
                "8. the real QwenPaw's CPU per 1,000 polls: FAILED: {err}"
            ));
            verdicts.lines.push(format!("FAIL 8 real QwenPaw: {err}"));
            verdicts
                .json
                .push(json!({"case": "8 real QwenPaw CPU per 1,000 polls", "error": err}));
        }
    }
}

/// `ATC_KICK` for one turn that ended in `agent`'s chat `session` (as the plugin's hook
/// hands it to the kicked tick).
fn turn_ended(agent: &str, session: &str) -> String {
    json!([{"agent_id": agent, "session_id": session, "user_id": "u", "channel": "console"}])
        .to_string()
}

/// Runs `atc tick --kicked` for the turn in `kick` (`None`: an older plugin's kick, which
/// names no turn); returns its wall time.
fn kick(env: &Env, kick: Option<&str>) -> Duration {
    let mut cmd = env.command(atc(), &["tick", "--kicked"]);
    if let Some(kick) = kick {
        cmd.env("ATC_KICK", kick);
    }
    let started = Instant::now();
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "atc tick --kicked: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    started.elapsed()
}

/// A fake QwenPaw whose every task answers `task` (its poll body), whose user `u-<n>`
/// has one idle console chat `chat-<n>` of session `s-<n>`, and which takes every POST.
fn parents_server(task: &'static str) -> FakeQwenPaw {
    let server = FakeQwenPaw::start();
    server.on_prefix(
        "GET",
        "/api/console/chat/task/",
        vec![Reply::json(200, task)],
    );
    server.handle(
        "GET",
        "/api/chats",
        Arc::new(|r: &Recorded| {
            let user = r
                .query
                .split('&')
                .find_map(|kv| kv.strip_prefix("user_id="))?
                .to_owned();
            let i = user.strip_prefix("u-")?;
            Some(Reply::json(
                200,
                &json!([{"id": format!("chat-{i}"), "session_id": format!("s-{i}"),
                    "user_id": user, "channel": "console", "status": "idle"}])
                .to_string(),
            ))
        }),
    );
    server.answer("POST", "/api/console/chat/task", 200, SUBMIT_OK);
    server
}

/// Case 10, kick load: 1,000 watches of long-running children on agent `worker`, their
/// sessions known (`child-<n>`); (a) 100 QwenPaw turn ends that concern none of them, (b)
/// one turn end of one watched child (its record says finished: poll, chat, POST; or
/// still running). Requests counted at the server, per kick, beside an older plugin's kick
/// that names no turn (every watch polled, up to five times).
fn kick_case(env: &Env, say: &dyn Fn(String), verdicts: &mut Verdicts) {
    const WATCHES: usize = 1000;
    const UNRELATED: usize = 100;
    const CHILD: usize = 7;
    let server = parents_server(RUNNING);
    let watches = || {
        (0..WATCHES)
            .map(|i| {
                job(
                    i,
                    &server.api(),
                    json!({"started_at": "2026-11-30T01:50:54Z", "target_agent": "worker",
                        "child_session": format!("child-{i}"), "forward_mode": "never"}),
                )
            })
            .collect::<Vec<_>>()
    };
    write_file(&env.state, watches());
    // A timer's tick first: every watch seen running once (what a steady state has).
    env.time(atc(), &["tick"]);
    let requests = || server.requests().len();

    // (a) 100 turn ends in chats no watch names.
    let before = (requests(), mtime_and_inode(&env.state), children_cpu());
    let mut times: Vec<Duration> = (0..UNRELATED)
        .map(|k| kick(env, Some(&turn_ended("default", &format!("elsewhere-{k}")))))
        .collect();
    let unrelated = requests() - before.0;
    let rewritten = mtime_and_inode(&env.state) != before.1;
    let cpu_per_kick = (children_cpu() - before.2) / UNRELATED as u32;
    times.sort();
    let kick_ms = ms(times[UNRELATED / 2]);

    // (b) one watched child's turn ends: its record says finished.
    let child_path = format!("/api/console/chat/task/task-{CHILD:012x}");
    server.answer("GET", &child_path, 200, FINISHED);
    let before = requests();
    kick(env, Some(&turn_ended("worker", &format!("child-{CHILD}"))));
    let finished = requests() - before;
    let delivered = std::fs::read_to_string(&env.state)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .is_some_and(|f| {
            f["jobs"]
                .as_array()
                .is_some_and(|j| j.iter().any(|j| j["status"] == "done"))
        });
    assert!(
        delivered,
        "the child's result was not delivered by its kick"
    );
    // (b') …while its record still reads running (the hook runs before it says finished):
    // looked at again within the 2 s window, that one task only.
    server.off("GET", &child_path);
    let other = format!("child-{}", CHILD + 1);
    let before = requests();
    kick(env, Some(&turn_ended("worker", &other)));
    let running = requests() - before;
    // An older plugin's kick, which names no turn: every watch, while any reads running.
    let before = requests();
    let blind_ms = ms(kick(env, None));
    let blind = requests() - before;
    // (c) The same watches, their children's sessions unknown: 100 turn ends in 10 chats of
    // their agent. Each chat's first may be a child's: one poll per watch per chat.
    const CHATS: usize = 10;
    let unknown: Vec<Value> = watches()
        .into_iter()
        .map(|mut job| {
            job.as_object_mut().unwrap().remove("child_session");
            // Registered an hour ago (within --max-age): the chats kicks see are newer.
            job["registered_at"] = json!(ago(3600));
            job
        })
        .collect();
    write_file(&env.state, unknown);
    env.time(atc(), &["tick"]);
    let before = requests();
    for k in 0..UNRELATED {
        kick(
            env,
            Some(&turn_ended("worker", &format!("chat-{}", k % CHATS))),
        );
    }
    let by_chat = requests() - before;

    let timer_every = 20.0;
    let timer_per_min = 60.0 / timer_every;
    say(format!(
        "10. kick load, {WATCHES} watches of long children on a {timer_every:.0} s timer ({timer_per_min:.0} polls per watch per minute): (a) {UNRELATED} turn ends concerning none of them made {unrelated} requests ({:.2} per kick; the job file {}), a kick {kick_ms:.1} ms (median), CPU {:.1} ms; (b) one watched child's turn end made {finished} requests (poll, chat look, POST), {running} polls when its record still read running; an older plugin's kick, naming no turn, made {blind} polls ({:.1} per watch) in {blind_ms:.0} ms",
        unrelated as f64 / UNRELATED as f64,
        if rewritten {
            "REWRITTEN"
        } else {
            "not rewritten"
        },
        ms(cpu_per_kick),
        blind as f64 / WATCHES as f64,
    ));
    say(format!(
        "    polls per watch per minute with {UNRELATED} unrelated turn ends a minute: {:.1} (the timer's {timer_per_min:.0} + {:.2} from kicks); before: up to {:.0} (each kick polled every watch up to 5 times)",
        timer_per_min + unrelated as f64 / WATCHES as f64,
        unrelated as f64 / WATCHES as f64,
        timer_per_min + UNRELATED as f64 * blind as f64 / WATCHES as f64,
    ));
    say(format!(
        "    (c) their children's sessions unknown, {UNRELATED} turn ends in {CHATS} chats of their agent: {by_chat} polls ({:.1} per watch; one per watch per chat is {CHATS}, one per turn end {UNRELATED})",
        by_chat as f64 / WATCHES as f64,
    ));
    verdicts.goal(
        "10a requests for 100 turn ends concerning no watch",
        unrelated as f64,
        0.0,
        "",
        json!({"watches": WATCHES, "kick_ms": kick_ms, "kick_cpu_ms": ms(cpu_per_kick),
            "rewritten": rewritten, "blind_kick_polls": blind, "blind_kick_ms": blind_ms}),
    );
    verdicts.goal(
        "10b requests for one watched child's turn end",
        finished as f64,
        5.0,
        "",
        json!({"finished": finished, "still_running": running}),
    );
    verdicts.json.push(json!({"case": "10c watches of unknown child session, 100 turn ends in 10 chats of their agent",
        "polls": by_chat, "per_watch": by_chat as f64 / WATCHES as f64}));
}

/// Where tests/e2e/provision.sh puts the real QwenPaw.
fn venv_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache")
        })
        .join("atc/e2e/qwenpaw-2.2.2.post1")
}

struct ServerCost {
    tasks: usize,
    ticks: usize,
    /// Case 10a on this server: its CPU for 100 kicks naming a turn no watch concerns, and
    /// for one older plugin's kick naming none (less what it used idle meanwhile), ms.
    unrelated_kicks_ms: f64,
    blind_kick_ms: f64,
    server_ms_per_1000: f64,
    server_idle_ms_per_s: f64,
    atc_ms_per_1000: f64,
    tick_ms: f64,
}

/// CPU time (user + system) process `pid` used so far, from /proc/PID/stat.
fn process_cpu(pid: u32) -> R<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
    // Fields after the command name (which may hold spaces), from the 3rd: utime is the
    // 14th field, stime the 15th, in clock ticks (USER_HZ, 100 on Linux).
    let rest = &stat[stat.rfind(')').ok_or("bad stat")? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i - 3)
            .and_then(|f| f.parse::<u64>().ok())
            .ok_or("bad stat")
    };
    Ok(Duration::from_millis((ticks(14)? + ticks(15)?) * 10))
}

/// The process serving `qwenpaw app … --port PORT`.
fn server_pid(port: u16) -> R<u32> {
    let port = port.to_string();
    for entry in std::fs::read_dir("/proc")
        .map_err(|e| e.to_string())?
        .flatten()
    {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let serves = args.iter().any(|a| *a == b"app")
            && args
                .windows(2)
                .any(|w| w[0] == b"--port" && w[1] == port.as_bytes());
        if serves {
            return Ok(pid);
        }
    }
    Err(format!("no qwenpaw app process on port {port}"))
}

/// Case 8: tasks kept running on a real QwenPaw (the fake LLM sleeps), polled by `atc
/// tick` over and over; the server's CPU over those ticks, less what it uses idle over the
/// same time, per 1,000 polls. `None` when QwenPaw is not installed.
fn server_cost(env: &Env) -> R<Option<ServerCost>> {
    const TASKS: usize = 50;
    const TICKS: usize = 40;
    let dir = venv_dir();
    if !dir.join(".atc-provisioned").exists() {
        return Ok(None);
    }
    let venv = qwenpaw::Venv {
        python: dir.join("bin").join("python"),
    };
    let temp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let llm = qwenpaw::FakeLlm::start(&venv, temp.path())?;
    let server = qwenpaw::Server::create(
        "bench",
        &venv,
        &llm,
        qwenpaw::ServerOptions {
            token: None,
            path_prepend: None,
            env: Vec::new(),
            mqtt_port: None,
            ..qwenpaw::ServerOptions::default()
        },
    )?;
    let api = server.api();
    let base_url = format!("{}/api", server.root());
    let mut jobs = Vec::new();
    for i in 0..TASKS {
        let task_id = api.submit(
            Some("default"),
            &format!("bench-child-{i}"),
            "bench",
            "bench child SLEEP=600",
            Some(3600),
        )?;
        jobs.push(job(
            i,
            &base_url,
            json!({"task_id": task_id, "started_at": "2026-11-30T01:50:54Z",
                "child_session": format!("bench-child-{i}")}),
        ));
    }
    write_file(&env.state, jobs);
    let args = ["tick", "--concurrency", &CONCURRENCY.to_string()];
    // A first tick warms the server's paths up.
    env.time(atc(), &args);
    let pid = server_pid(server.port)?;
    // What the server uses with nobody polling (its own timers, the running tasks), before
    // and after the ticks, is subtracted.
    let idle = || -> R<(Duration, Duration)> {
        let (from, cpu) = (Instant::now(), process_cpu(pid)?);
        std::thread::sleep(Duration::from_secs(3));
        Ok((from.elapsed(), process_cpu(pid)? - cpu))
    };
    let idle_before = idle()?;
    let (started, server_before, atc_before) = (Instant::now(), process_cpu(pid)?, children_cpu());
    let mut times: Vec<Duration> = (0..TICKS).map(|_| env.time(atc(), &args)).collect();
    let wall = started.elapsed();
    let server_busy = process_cpu(pid)? - server_before;
    let atc_cpu = (children_cpu() - atc_before).as_secs_f64();
    // Case 10a: 100 turn ends that concern none of the watches, then one kick of an older
    // plugin that names no turn (it polls every watch, up to five times).
    let busy = |run: &mut dyn FnMut()| -> R<(Duration, Duration)> {
        let (from, cpu) = (Instant::now(), process_cpu(pid)?);
        run();
        Ok((from.elapsed(), process_cpu(pid)? - cpu))
    };
    let unrelated = busy(&mut || {
        for k in 0..100 {
            kick(
                env,
                Some(&turn_ended("default", &format!("bench-elsewhere-{k}"))),
            );
        }
    })?;
    let blind = busy(&mut || {
        kick(env, None);
    })?;
    let idle_after = idle()?;
    let idle_rate =
        (idle_before.1 + idle_after.1).as_secs_f64() / (idle_before.0 + idle_after.0).as_secs_f64();
    let server_cpu = server_busy.as_secs_f64() - idle_rate * wall.as_secs_f64();
    let less_idle = |(wall, cpu): (Duration, Duration)| {
        (cpu.as_secs_f64() - idle_rate * wall.as_secs_f64()).max(0.0) * 1e3
    };
    let file: Value =
        serde_json::from_slice(&std::fs::read(&env.state).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    let pending = file["jobs"]
        .as_array()
        .map_or(0, |j| j.iter().filter(|j| j["status"] == "pending").count());
    if pending != TASKS {
        return Err(format!(
            "{pending} of {TASKS} jobs still pending after the ticks: the tasks did not stay running"
        ));
    }
    times.sort();
    let polls = (TASKS * TICKS) as f64;
    Ok(Some(ServerCost {
        tasks: TASKS,
        ticks: TICKS,
        server_ms_per_1000: server_cpu.max(0.0) * 1e6 / polls,
        server_idle_ms_per_s: idle_rate * 1e3,
        unrelated_kicks_ms: less_idle(unrelated),
        blind_kick_ms: less_idle(blind),
        atc_ms_per_1000: atc_cpu * 1e6 / polls,
        tick_ms: ms(times[TICKS / 2]),
    }))
}

/// Case 9: 50 finished tasks whose results go to 5 parent chats (10 each); ticks until
/// every one is delivered. Returns the delivery POSTs (parent turns started) and the ticks.
fn batch_case(env: &Env, server: &FakeQwenPaw, args: &[&str]) -> (usize, usize) {
    let jobs: Vec<Value> = (0..50)
        .map(|i| {
            let chat = i % 5;
            job(
                i,
                &server.api(),
                json!({"session_id": format!("s-{chat}"), "user_id": format!("u-{chat}"),
                    "forward_mode": "never"}),
            )
        })
        .collect();
    write_file(&env.state, jobs);
    let posts = |server: &FakeQwenPaw| {
        server
            .requests()
            .iter()
            .filter(|r| r.method == "POST" && r.path == "/api/console/chat/task")
            .count()
    };
    let before = posts(server);
    let mut tick = vec!["tick"];
    tick.extend_from_slice(args);
    for ticks in 1..=100 {
        env.time(atc(), &tick);
        let file: Value = serde_json::from_slice(&std::fs::read(&env.state).unwrap()).unwrap();
        let done = file["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|j| j["status"] == "done");
        if done {
            return (posts(server) - before, ticks);
        }
    }
    panic!("50 results were not delivered in 100 ticks");
}

/// One read of the job file through atc's loader (what a tick does first).
fn load_time(path: &Path) -> Duration {
    let started = Instant::now();
    let file = atc::state::Store::new(path.to_path_buf()).load().unwrap();
    let took = started.elapsed();
    assert!(!file.jobs.is_empty());
    took
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn server_addr(server: &FakeQwenPaw) -> SocketAddr {
    format!("127.0.0.1:{}", server.port()).parse().unwrap()
}
