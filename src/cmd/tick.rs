//! `atc tick`: one short synchronous pass. Poll every pending task once, render finished
//! ones, deliver them, record everything in the job file, exit.
//!
//! The job-file lock is held only for short read-modify-write steps, never during network
//! I/O, so `watch` and `cancel` never wait on a slow server. A sidecar `tick.lock`, held for
//! the whole pass, keeps two ticks from ever running at once.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

use anyhow::Result;
use serde_json::json;

use crate::Output;
use crate::http::Client;
use crate::job::{Job, Status};
use crate::lifecycle::{self, Check, Posted};
use crate::lock;
use crate::settings;
use crate::store::Store;
use crate::time::Timestamp;

/// What happened to which task in this pass (task ids only: never message text).
#[derive(Debug, Default)]
struct Report {
    outcomes: BTreeMap<&'static str, Vec<String>>,
}

impl Report {
    fn add(&mut self, outcome: &'static str, task_id: &str) {
        self.outcomes
            .entry(outcome)
            .or_default()
            .push(task_id.to_owned());
    }

    fn count(&self, outcome: &str) -> usize {
        self.outcomes.get(outcome).map_or(0, Vec::len)
    }

    /// Failed checks and failed deliveries. (An abandoned job is also a failed check of
    /// this pass: counted once.)
    fn errors(&self) -> usize {
        ["failed_check", "unconfirmed", "error", "undelivered"]
            .iter()
            .map(|o| self.count(o))
            .sum()
    }
}

pub fn run(store: &Store, tick: &settings::Tick, out: Output) -> Result<()> {
    store.ensure_dir()?;
    let tick_lock = store.tick_lock_path();
    let Some(_single_flight) = lock::try_exclusive(&tick_lock)? else {
        if out.verbose > 0 {
            eprintln!(
                "tick: another atc tick is running (it holds {}); nothing to do",
                tick_lock.display()
            );
        }
        if out.json {
            crate::cmd::print_json(&json!({ "skipped": "another atc tick is running" }))?;
        }
        return Ok(());
    };
    let mut report = Report::default();
    let limits = tick.limits;

    // Recover, prune, select. We hold tick.lock, so a delivery left in flight belongs to a
    // tick that died.
    let to_poll = store.update(|file| {
        let now = Timestamp::now();
        for job in &mut file.jobs {
            if lifecycle::recover(job, now) {
                report.add("recovered_unconfirmed", &job.task_id);
            }
        }
        file.jobs.retain(|job| {
            let prune = lifecycle::is_expired_record(job, now, limits.keep);
            if prune {
                report.add("pruned", &job.task_id);
            }
            !prune
        });
        Ok(file
            .jobs
            .iter()
            .filter(|job| job.status == Status::Pending)
            .cloned()
            .collect::<Vec<Job>>())
    })?;

    // Poll, in parallel, without the lock.
    let client = Client::new(tick.http_timeout, tick.auth.clone());
    let checks = parallel(&to_poll, tick.concurrency, |job| client.poll(job));

    // Decide, under the lock; one save. A job cancelled or re-registered meanwhile is left
    // alone (matched by job_id and status).
    store.update(|file| {
        let now = Timestamp::now();
        for (polled, check) in to_poll.iter().zip(checks) {
            let Some(job) = file.registration_mut(&polled.job_id) else {
                continue;
            };
            if job.status != Status::Pending {
                continue;
            }
            report.add("polled", &job.task_id);
            let outcome = match &check {
                Check::Running { .. } => "running",
                Check::Finished { .. } => "finished",
                Check::Lost { .. } => "lost",
                Check::Failed { .. } => "failed_check",
            };
            lifecycle::apply_check(job, check, now, &limits);
            report.add(outcome, &job.task_id);
            match job.status {
                Status::Abandoned => report.add("abandoned", &job.task_id),
                Status::Expired => report.add("expired", &job.task_id),
                _ => {}
            }
        }
        Ok(())
    })?;

    // Deliver: the oldest due result per parent chat. A second POST into the same chat
    // would only meet 409 behind the turn the first one starts.
    // Selection only reads: each delivery re-checks under the lock before it posts.
    let file = store.load()?;
    let now = Timestamp::now();
    let mut due: Vec<&Job> = file
        .jobs
        .iter()
        .filter(|job| lifecycle::is_due(job, now))
        .collect();
    due.sort_by_key(|job| job.registered_at);
    let mut chats = HashSet::new();
    let due: Vec<String> = due
        .into_iter()
        .filter(|job| chats.insert(job.chat_key()))
        .map(|job| job.job_id.clone())
        .collect();
    let report = Mutex::new(report);
    let results = parallel(&due, tick.concurrency, |job_id| {
        deliver(store, &client, job_id, tick, &report)
    });
    let report = report
        .into_inner()
        .unwrap_or_else(|poison| poison.into_inner());
    results.into_iter().collect::<Result<Vec<()>>>()?;

    print_report(&report, out)
}

/// One delivery: write-ahead record, POST, guarded outcome.
fn deliver(
    store: &Store,
    client: &Client,
    job_id: &str,
    tick: &settings::Tick,
    report: &Mutex<Report>,
) -> Result<()> {
    // Write-ahead: re-check under the lock that this is still the same registration, not
    // cancelled and still due; count the attempt and mark it in flight; save. Only then POST.
    let claimed = store.update(|file| {
        let now = Timestamp::now();
        let Some(job) = file.registration_mut(job_id) else {
            return Ok(None);
        };
        if !lifecycle::is_due(job, now) {
            return Ok(None);
        }
        lifecycle::begin_attempt(job, now);
        Ok(Some(job.clone()))
    })?;
    let Some(job) = claimed else {
        return Ok(());
    };
    let text = job.final_text.as_deref().unwrap_or_default();
    let posted = client.deliver(&job, text, tick.turn_timeout);
    let outcome = store.update(|file| {
        let Some(current) = file.registration_mut(job_id) else {
            return Ok("replaced");
        };
        let was_cancelled = current.status == Status::Cancelled;
        lifecycle::apply_posted(current, posted.clone(), Timestamp::now(), &tick.limits);
        Ok(match (&posted, current.status) {
            _ if was_cancelled => "cancelled_in_flight",
            (Posted::Accepted { .. }, _) => "delivered",
            (_, Status::Undelivered) => "undelivered",
            (Posted::Busy { .. }, _) => "busy",
            (Posted::NotSent { .. }, _) => "unreachable",
            (Posted::Unknown { .. }, _) => "unconfirmed",
            (Posted::Rejected { .. }, _) => "error",
        })
    })?;
    report
        .lock()
        .unwrap_or_else(|poison| poison.into_inner())
        .add(outcome, &job.task_id);
    Ok(())
}

/// Runs `work` over `items` on at most `workers` threads; results in input order.
fn parallel<T: Sync, R: Send>(
    items: &[T],
    workers: usize,
    work: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new(items.iter().map(|_| None).collect());
    thread::scope(|scope| {
        for _ in 0..workers.clamp(1, items.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let result = work(item);
                    results.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(result);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .map(|r| r.expect("every item was processed"))
        .collect()
}

/// Silent on success (cron mails output); `-v` one line on stderr; `--json` one object.
fn print_report(report: &Report, out: Output) -> Result<()> {
    if out.json {
        let mut counts = serde_json::Map::new();
        for name in ["polled", "delivered", "busy", "lost"] {
            counts.insert(name.to_owned(), json!(report.count(name)));
        }
        counts.insert("errors".to_owned(), json!(report.errors()));
        counts.insert("tasks".to_owned(), json!(report.outcomes));
        return crate::cmd::print_json(&counts);
    }
    if out.verbose > 1 {
        for (outcome, tasks) in &report.outcomes {
            eprintln!("tick: {outcome}: {}", tasks.join(" "));
        }
    }
    if out.verbose > 0 {
        eprintln!(
            "tick: {} polled, {} delivered, {} busy, {} lost, {} errors",
            report.count("polled"),
            report.count("delivered"),
            report.count("busy"),
            report.count("lost"),
            report.errors()
        );
    }
    Ok(())
}
