//! Crashes and concurrency: atc killed at every named crash point of a tick, and a soak of
//! ticks, watches and cancels running at once. Each scenario ends with every job in the
//! right status, each result in its parent chat exactly once, and the job file whole JSON
//! at every instant.
//!
//! Needs the `crash-points` feature (`cargo test --features crash-points --test crash`;
//! `tests/e2e/run-all` runs it). `ATC_SOAK_SECS` sets the soak's length (default 30).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::bodies;
use support::chats::PostFault;
use support::fake::Reply;
use support::rng::Rng;
use support::scene::Scene;

const TASK: &str = "task-3f9a0c1b2d4e";

/// A watched task that has finished, in a scene whose ticks time out after 1 s (so an
/// unknown delivery settles quickly).
fn finished_scene() -> Scene {
    let s = Scene::new();
    s.watch(TASK, &[]);
    s.poll_replies(TASK, vec![Reply::json(200, bodies::FINISHED_COMPLETED)]);
    s
}

/// Ticks (without any crash point) until the job has ended; at most `n` ticks.
fn tick_until_ended(s: &Scene, n: usize) -> Value {
    for _ in 0..n {
        s.tick(&["--http-timeout", "1s"]).stderr_inspected().run();
        let job = s.job(TASK);
        let status = job["status"].as_str().unwrap().to_owned();
        if !matches!(status.as_str(), "pending" | "delivering" | "unconfirmed") {
            return job;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    panic!("the job never ended: {}", s.job(TASK));
}

fn assert_delivered_once(s: &Scene) {
    let job = tick_until_ended(s, 20);
    assert_eq!(job["status"], "done", "{job}");
    let delivered = s.delivered("s-77");
    assert_eq!(
        delivered.len(),
        1,
        "delivered {} times: {delivered:?}",
        delivered.len()
    );
    assert!(delivered[0].ends_with("ECHO: hello"), "{delivered:?}");
    assert_eq!(job["final"].as_str(), Some(delivered[0].as_str()));
}

fn crash_tick(s: &Scene, point: &str) {
    s.tick(&["--http-timeout", "1s"])
        .env("ATC_CRASH_AT", point)
        .aborted()
        .run();
}

#[test]
fn a_crash_after_the_polls_loses_nothing() {
    let s = finished_scene();
    crash_tick(&s, "polled");
    assert_eq!(s.status(TASK), "pending", "nothing was saved");
    assert!(s.posts().is_empty());
    assert_delivered_once(&s);
    assert_eq!(s.polls(TASK), 2, "the next tick polls again");
}

#[test]
fn a_crash_after_the_write_ahead_save_is_read_back_then_posted_once() {
    let s = finished_scene();
    crash_tick(&s, "claimed");
    assert_eq!(s.status(TASK), "delivering");
    let turn = s.turn(TASK);
    assert_eq!(turn["state"], "claimed", "{turn}");
    assert!(
        turn["delivery"]["attempt_started_at"].is_string(),
        "the claim is saved: {turn}"
    );
    assert!(s.posts().is_empty(), "the POST never went out");
    // The next tick finds it in flight: unconfirmed; the read-back finds nothing and,
    // once --http-timeout has passed, posts it: once.
    assert_delivered_once(&s);
    assert_eq!(s.posts().len(), 1);
}

#[test]
fn a_crash_after_the_post_answered_is_confirmed_by_read_back_without_a_second_post() {
    let s = finished_scene();
    crash_tick(&s, "posted");
    assert_eq!(s.posts().len(), 1);
    assert_eq!(s.delivered("s-77").len(), 1, "the server has it");
    assert_delivered_once(&s);
    assert_eq!(s.posts().len(), 1, "found by read-back, never posted again");
    assert_eq!(s.turn(TASK)["delivery"]["confirmed"], "read-back");
}

#[test]
fn a_crash_during_read_back_settles_on_the_next_tick() {
    let s = finished_scene();
    s.chats.fault(PostFault::DropAfterStore);
    s.tick(&["--http-timeout", "1s"]).stderr_inspected().run();
    assert_eq!(s.status(TASK), "unconfirmed");
    crash_tick(&s, "read-back");
    assert_eq!(s.status(TASK), "unconfirmed", "nothing was saved");
    assert_delivered_once(&s);
    assert_eq!(s.posts().len(), 1);
}

/// A batch (three results for one chat) killed at every crash point: afterwards every
/// job is done and every block is in the chat exactly once, in one turn.
#[test]
fn a_batch_killed_at_every_crash_point_leaves_one_copy_of_every_block() {
    let tasks = ["task-a", "task-b", "task-c"];
    let points = [
        "polled",
        "claimed",
        "posted",
        "read-back",
        "save-before-rename#1",
        "save-before-rename#2",
        "save-before-rename#3",
    ];
    for point in points {
        let s = Scene::new();
        for task in tasks {
            s.watch(task, &[]);
            s.poll_replies(
                task,
                vec![Reply::json(
                    200,
                    &bodies::finished_completed("x", &format!("answer of {task}")),
                )],
            );
        }
        if point == "read-back" {
            s.chats.fault(PostFault::DropAfterStore);
            s.tick(&["--http-timeout", "1s"]).stderr_inspected().run();
            assert_eq!(s.status("task-a"), "unconfirmed", "{point}");
        }
        crash_tick(&s, point);
        let mut ended = false;
        for _ in 0..20 {
            s.tick(&["--http-timeout", "1s"]).stderr_inspected().run();
            if tasks.iter().all(|t| s.status(t) == "done") {
                ended = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        assert!(ended, "{point}: {:?}", s.env.jobs());
        let delivered = s.delivered("s-77");
        assert_eq!(delivered.len(), 1, "{point}: one turn: {delivered:?}");
        for task in tasks {
            let answer = format!("answer of {task}");
            assert_eq!(delivered[0].matches(&answer).count(), 1, "{point}: {task}");
        }
        assert!(delivered[0].starts_with("[ATC_RESULTS] 3 tasks"), "{point}");
    }
}

#[test]
fn a_crash_inside_any_save_leaves_the_old_file_whole() {
    // The tick saves three times here: the poll's result, the claim, the POST's outcome.
    for nth in 1..=3 {
        let s = finished_scene();
        let before = s.env.bytes();
        crash_tick(&s, &format!("save-before-rename#{nth}"));
        if nth == 1 {
            assert_eq!(s.env.bytes(), before, "the first save never happened");
        }
        let dir = s.env.state.parent().unwrap();
        let temps: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert_eq!(temps.len(), 1, "the crash left its temp file: {temps:?}");
        // The next save removes it (the Run checks that no temp file is left).
        assert_delivered_once(&s);
        assert!(
            s.posts().len() <= 2 && s.delivered("s-77").len() == 1,
            "save #{nth}: {} posts",
            s.posts().len()
        );
    }
}

// ---------------------------------------------------------------------------------------
// The soak

fn soak_secs() -> u64 {
    std::env::var("ATC_SOAK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30)
}

#[test]
fn a_soak_of_ticks_watches_and_cancels_loses_and_doubles_nothing() {
    let s = Scene::new();
    let seed = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(std::process::id());
    eprintln!("soak: seed {seed:#x}, {} s", soak_secs());
    // Every task finishes after a few polls; every answer comes after a random delay.
    let polls: Arc<Mutex<BTreeMap<String, u32>>> = Arc::default();
    let latency = Arc::new(Mutex::new(Rng::new(seed)));
    {
        let (polls, latency) = (Arc::clone(&polls), Arc::clone(&latency));
        s.server.handle(
            "GET",
            "/api/console/chat/task/task-soak",
            Arc::new(move |req| {
                let id = req.path.rsplit('/').next().unwrap().to_owned();
                let n = {
                    let mut polls = polls.lock().unwrap();
                    let n = polls.entry(id).or_default();
                    *n += 1;
                    *n
                };
                let delay = Duration::from_millis(latency.lock().unwrap().below(40) as u64);
                let body = if n >= 3 {
                    bodies::FINISHED_COMPLETED
                } else {
                    bodies::RUNNING
                };
                Some(Reply::json(200, body).with_delay(delay))
            }),
        );
    }
    // Few parent chats, so that results due together go out as one turn; a slow server,
    // so that a cancel lands while a turn is in flight (stored, its answer not back yet).
    let sessions = 6;
    for i in 0..sessions {
        s.add_chat(&format!("soak-{i}"), "default", "console");
    }
    s.chats
        .post_latency(Duration::from_millis(600), seed.rotate_left(29));

    let stop = Arc::new(AtomicBool::new(false));
    let torn = Arc::new(AtomicUsize::new(0));
    let reads = Arc::new(AtomicUsize::new(0));
    let unexpected: Arc<Mutex<Vec<String>>> = Arc::default();
    let watched: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let cancelled: Arc<Mutex<Vec<(String, bool)>>> = Arc::default();
    let deadline = Instant::now() + Duration::from_secs(soak_secs());

    std::thread::scope(|scope| {
        // The file is whole JSON whenever anyone looks.
        {
            let (stop, torn, reads, path) = (&stop, &torn, &reads, &s.env.state);
            scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(bytes) = std::fs::read(path) {
                        reads.fetch_add(1, Ordering::Relaxed);
                        if serde_json::from_slice::<Value>(&bytes).is_err() {
                            torn.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
            });
        }
        // Eight tick loops.
        for _ in 0..8 {
            let (stop, unexpected) = (&stop, &unexpected);
            let s = &s;
            scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let out = s
                        .env
                        .std_cmd()
                        .env("ATC_BASE_URL", s.server.url())
                        .args(["tick", "--busy-retry", "1s", "--concurrency", "4"])
                        .stdin(Stdio::null())
                        .output()
                        .unwrap();
                    let code = out.status.code();
                    if code != Some(0) && code != Some(75) || !out.stdout.is_empty() {
                        unexpected.lock().unwrap().push(format!(
                            "tick {:?}: {}{}",
                            code,
                            String::from_utf8_lossy(&out.stdout),
                            String::from_utf8_lossy(&out.stderr)
                        ));
                    }
                }
            });
        }
        // Watches, and cancels of some of what was watched.
        {
            let (watched, cancelled, unexpected, stop) = (&watched, &cancelled, &unexpected, &stop);
            let s = &s;
            scope.spawn(move || {
                let mut rng = Rng::new(seed.rotate_left(17));
                let mut n = 0;
                while Instant::now() < deadline {
                    let task = format!("task-soak{n:07}");
                    let session = format!("soak-{}", rng.below(sessions));
                    n += 1;
                    let out = s
                        .env
                        .std_cmd()
                        .env("ATC_BASE_URL", s.server.url())
                        .args(["watch", &task, "--session", &session])
                        .stdin(Stdio::null())
                        .output()
                        .unwrap();
                    match out.status.code() {
                        Some(0) => watched.lock().unwrap().push((task.clone(), session)),
                        Some(75) => {}
                        other => unexpected.lock().unwrap().push(format!(
                            "watch {other:?}: {}",
                            String::from_utf8_lossy(&out.stderr)
                        )),
                    }
                    if rng.below(2) == 0 {
                        // Half the time one whose result is on its way (as a person who
                        // sees it in `atc status` would), else one of the last few watched.
                        let delivering: Vec<String> = std::fs::read(&s.env.state)
                            .ok()
                            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                            .and_then(|f| f["jobs"].as_array().cloned())
                            .unwrap_or_default()
                            .iter()
                            .filter(|j| j["status"] == "delivering")
                            .filter_map(|j| j["task_id"].as_str().map(str::to_owned))
                            .collect();
                        let victim = if !delivering.is_empty() && rng.below(2) == 0 {
                            Some(delivering[rng.below(delivering.len())].clone())
                        } else {
                            let w = watched.lock().unwrap();
                            let recent = w.len().clamp(1, 8);
                            let i = w.len().saturating_sub(1 + rng.below(recent));
                            w.get(i).map(|(t, _)| t.clone())
                        };
                        if let Some(victim) = victim {
                            let out = s
                                .env
                                .std_cmd()
                                .args(["cancel", &victim])
                                .stdin(Stdio::null())
                                .output()
                                .unwrap();
                            let said = String::from_utf8_lossy(&out.stdout).into_owned();
                            let err = String::from_utf8_lossy(&out.stderr).into_owned();
                            match out.status.code() {
                                Some(0) => cancelled
                                    .lock()
                                    .unwrap()
                                    .push((victim, said.contains("may already be on its way"))),
                                // Already delivered or ended: a documented refusal.
                                Some(1) if err.contains("nothing to cancel") => {}
                                Some(75) => {}
                                other => unexpected
                                    .lock()
                                    .unwrap()
                                    .push(format!("cancel {other:?}: {said}{err}")),
                            }
                        }
                    }
                }
                stop.store(true, Ordering::Relaxed);
            });
        }
    });

    // Let the rest finish.
    for _ in 0..60 {
        let jobs = s.env.jobs();
        if jobs.iter().all(|j| {
            !matches!(
                j["status"].as_str(),
                Some("pending" | "delivering" | "unconfirmed")
            )
        }) {
            break;
        }
        s.tick(&["--busy-retry", "1s"]).stderr_inspected().run();
        std::thread::sleep(Duration::from_millis(200));
    }

    let unexpected = unexpected.lock().unwrap();
    assert!(
        unexpected.is_empty(),
        "unexpected exits:\n{}",
        unexpected.join("\n")
    );
    assert_eq!(
        torn.load(Ordering::Relaxed),
        0,
        "the job file was seen torn"
    );
    assert!(reads.load(Ordering::Relaxed) > 0);

    let watched = watched.lock().unwrap();
    let cancelled = cancelled.lock().unwrap();
    let cancelled_ids: BTreeSet<&str> = cancelled.iter().map(|(t, _)| t.as_str()).collect();
    let in_flight: BTreeSet<&str> = cancelled
        .iter()
        .filter(|(_, f)| *f)
        .map(|(t, _)| t.as_str())
        .collect();
    let jobs: BTreeMap<String, Value> = s
        .env
        .jobs()
        .into_iter()
        .map(|j| (j["task_id"].as_str().unwrap().to_owned(), j))
        .collect();
    assert!(
        watched.len() >= 20,
        "only {} watches in the soak",
        watched.len()
    );
    let mut delivered_total = 0;
    let batches: usize = (0..sessions)
        .map(|i| {
            s.delivered(&format!("soak-{i}"))
                .iter()
                .filter(|t| t.starts_with("[ATC_RESULTS]"))
                .count()
        })
        .sum();
    for (task, session) in watched.iter() {
        let job = jobs
            .get(task)
            .unwrap_or_else(|| panic!("the registration of {task} was lost"));
        // Copies of its block, in every chat (a batch holds several blocks).
        let copies = (0..sessions)
            .flat_map(|i| s.delivered(&format!("soak-{i}")))
            .map(|t| t.matches(&format!("[TASK_ID: {task}]\n")).count())
            .sum::<usize>();
        assert!(copies <= 1, "{task} was delivered {copies} times");
        if copies == 1 {
            assert!(
                s.delivered(session)
                    .iter()
                    .any(|t| t.contains(&format!("[TASK_ID: {task}]\n"))),
                "{task} was delivered into another chat than {session}"
            );
        }
        delivered_total += copies;
        if cancelled_ids.contains(task.as_str()) {
            assert_eq!(
                job["status"], "cancelled",
                "a cancel of {task} was ignored: {job}"
            );
            if copies == 1 {
                assert!(
                    in_flight.contains(task.as_str()),
                    "{task} was cancelled (not in flight) and still delivered"
                );
            }
        } else {
            assert_eq!(job["status"], "done", "{task}: {job}");
            assert_eq!(copies, 1, "{task} never arrived");
        }
    }
    eprintln!(
        "soak: {} watched, {} cancelled ({} in flight), {} delivered ({} batches), {} file reads",
        watched.len(),
        cancelled.len(),
        in_flight.len(),
        delivered_total,
        batches,
        reads.load(Ordering::Relaxed)
    );
    // The run reached what it is for: cancels that met a turn being posted.
    assert!(
        !in_flight.is_empty(),
        "no cancel landed while a turn was in flight: the soak proved nothing about them"
    );
}
