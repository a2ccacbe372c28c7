//! `cargo bench`: how fast and how lean `atc tick` and `atc status` are, as ratios (machines
//! here are noisy: the tests never assert times; this prints them for people to compare).
//!
//! - poll speed-up: what sequential polling would take over what one tick took, against a
//!   fake QwenPaw that answers every poll after a fixed latency (ideal: --concurrency);
//! - per-job overhead of a tick with instant answers;
//! - peak memory of a tick over many jobs relative to a tick over few;
//! - `atc status --all` time over a large job file relative to a small one.

#[path = "../tests/support/fake.rs"]
#[allow(dead_code)]
mod fake;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use fake::{FakeQwenPaw, Reply};
use serde_json::json;

const RUNNING: &str = r#"{"status":"running","started_at":1796003454.6703575}"#;

fn write_jobs(path: &Path, count: usize, base_url: &str) {
    let jobs: Vec<_> = (0..count)
        .map(|i| {
            json!({
                "job_id": format!("{i:012x}"), "task_id": format!("task-{i:012x}"),
                "base_url": base_url, "agent_id": "default", "target_agent": null,
                "session_id": format!("s-{i}"), "user_id": "default", "channel": "console",
                "registered_at": "2099-01-01T00:00:00Z", "updated_at": "2099-01-01T00:00:00Z",
                "status": "pending"
            })
        })
        .collect();
    std::fs::write(
        path,
        serde_json::to_vec(&json!({"version": 1, "jobs": jobs})).unwrap(),
    )
    .unwrap();
}

fn atc(state: &Path, args: &[&str]) -> Duration {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_atc"))
        .args(args)
        .env("ATC_STATE", state)
        .output()
        .expect("run atc");
    assert!(
        out.status.success(),
        "atc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    started.elapsed()
}

/// Peak resident memory of the largest child so far, in KiB (Linux getrusage).
#[cfg(target_os = "linux")]
fn children_peak_kib() -> Option<u64> {
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
    ok.then_some(usage.maxrss as u64)
}

#[cfg(not(target_os = "linux"))]
fn children_peak_kib() -> Option<u64> {
    None
}

fn main() {
    // `cargo bench` passes --bench; nothing to filter here.
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("jobs.json");

    // Per-job overhead and memory, with instant answers. First: getrusage reports the
    // largest child so far.
    println!("atc bench (ratios; absolute times depend on the machine)");
    let instant = FakeQwenPaw::start();
    instant.on_prefix(
        "GET",
        "/api/console/chat/task/",
        vec![Reply::json(200, RUNNING)],
    );
    let mut peaks = Vec::new();
    for count in [20, 2000] {
        write_jobs(&state, count, &instant.api());
        let took = atc(&state, &["tick", "--concurrency", "8"]);
        peaks.push(children_peak_kib());
        println!(
            "  tick over {count:>4} jobs, instant answers: {:>7.1} ms  ({:.0} µs per job)",
            took.as_secs_f64() * 1e3,
            took.as_secs_f64() * 1e6 / count as f64
        );
    }
    if let [Some(small), Some(large)] = peaks[..] {
        println!(
            "  peak memory: {small} KiB at 20 jobs, {large} KiB at 2000 jobs: {:.2}x for 100x the jobs",
            large as f64 / small as f64
        );
    }

    // Poll speed-up against a fixed latency.
    let latency = Duration::from_millis(20);
    let server = FakeQwenPaw::start();
    server.on_prefix(
        "GET",
        "/api/console/chat/task/",
        vec![Reply::json(200, RUNNING).with_delay(latency)],
    );
    let jobs = 400;
    println!("  {jobs} pending jobs, fake QwenPaw answering each poll after {latency:?}:");
    for concurrency in [1, 8, 32] {
        write_jobs(&state, jobs, &server.api());
        let took = atc(&state, &["tick", "--concurrency", &concurrency.to_string()]);
        let sequential = latency * jobs as u32;
        println!(
            "    tick --concurrency {concurrency:>2}: {:>7.0} ms  speed-up over sequential polling {:>5.1}x (ideal {concurrency}x)",
            took.as_secs_f64() * 1e3,
            sequential.as_secs_f64() / took.as_secs_f64()
        );
    }

    // status over a big file.
    let mut times = Vec::new();
    for count in [100, 10_000] {
        write_jobs(&state, count, "http://127.0.0.1:1/api");
        times.push(atc(&state, &["status", "--all"]));
    }
    println!(
        "  status --all: {:.1} ms for 100 jobs, {:.1} ms for 10000: {:.1}x for 100x the jobs",
        times[0].as_secs_f64() * 1e3,
        times[1].as_secs_f64() * 1e3,
        times[1].as_secs_f64() / times[0].as_secs_f64()
    );
}
