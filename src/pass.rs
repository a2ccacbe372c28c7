//! One `atc tick`, top to bottom, as the README's "How a tick works" tells it:
//!
//! 1. **prepare**: recover what a dead tick left mid-POST, prune old ended jobs, select
//!    the jobs to poll (one locked update);
//! 2. **poll** every pending task once, in parallel, without the lock;
//! 3. **render** finished tasks into the text a delivery carries;
//! 4. **decide**: apply every poll, then claim the due deliveries, at most one per parent
//!    chat, writing their write-ahead records (one locked update);
//! 5. **deliver**: POST each claimed result, in parallel, without the lock;
//! 6. **record** what each POST did (one locked update);
//! 7. **report**.
//!
//! The invariants of delivery, kept here and nowhere else:
//! - The job-file lock is never held across network I/O, so `watch` and `cancel` never
//!   wait on a slow server.
//! - A POST goes out only after its write-ahead record (attempt counted, in flight) is on
//!   disk. A tick that dies after that leaves a job the next tick recovers as unconfirmed:
//!   never posted blind.
//! - Every write after a network step goes through `lifecycle::step` on the job with the
//!   same `job_id`: a cancel or re-watch that landed meanwhile is never overwritten.
//! - The tick lock is held for the whole pass: one tick at a time, so a job found in
//!   flight by `prepare` belongs to a tick that died.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

use anyhow::Result;

use crate::job::Job;
use crate::lifecycle::{self, Check, Effect, Event, Limits, Posted};
use crate::qwenpaw::task::{self, Poll};
use crate::qwenpaw::{Client, chat, render};
use crate::report::{Outcome, Report};
use crate::settings::Tick;
use crate::state::{JobFile, Store};
use crate::time::Timestamp;

/// A delivery the pass has claimed: the job as claimed, and the text to post.
struct Claim {
    job: Job,
    text: String,
}

/// Runs one pass over the job file. `None` when another tick holds the tick lock.
pub fn run(store: &Store, tick: &Tick) -> Result<Option<Report>> {
    let Some(_single_flight) = store.try_lock_tick()? else {
        return Ok(None);
    };
    let client = Client::new(tick.http_timeout, tick.auth.clone());
    let limits = &tick.limits;
    let mut report = Report::default();

    let to_poll = prepare(store, limits, &mut report)?;
    let polls = parallel(&to_poll, tick.concurrency, |job| {
        let answer = client.get_task(&job.base_url, &job.task_id, job.target.poll_agent());
        task::classify(answer, &job.base_url, client.auth())
    });
    let checks: Vec<Check> = to_poll.iter().zip(polls).map(render).collect();
    let claims = decide(store, &to_poll, checks, limits, &mut report)?;
    let posted = parallel(&claims, tick.concurrency, |claim| {
        let body = chat::turn(&claim.job, &claim.text, tick.turn_timeout);
        chat::posted(client.post_turn(&claim.job.base_url, &claim.job.target.agent_id, &body))
    });
    record(store, &claims, posted, limits, &mut report)?;
    Ok(Some(report))
}

/// Recover, prune, select: what is pending now gets polled.
fn prepare(store: &Store, limits: &Limits, report: &mut Report) -> Result<Vec<Job>> {
    store.update(|file| {
        let now = Timestamp::now();
        for i in lifecycle::interrupted(&file.jobs) {
            apply(&mut file.jobs[i], Event::Recovered, now, limits, report);
        }
        file.jobs.retain(|job| {
            let prune = lifecycle::prunable(job, now, limits.keep);
            if prune {
                report.add(Outcome::Pruned, &job.task_id);
            }
            !prune
        });
        Ok(lifecycle::to_poll(&file.jobs)
            .into_iter()
            .cloned()
            .collect())
    })
}

/// What a poll means for the job: a finished task is rendered exactly as QwenPaw's
/// `check_agent_task` would show it.
fn render((job, poll): (&Job, Poll)) -> Check {
    match poll {
        Poll::Record(record) if record.is_finished() => Check::Finished {
            text: render::render_record(&job.task_id, &record),
            started_at: record.started_at,
        },
        Poll::Record(record) => Check::Running {
            started_at: record.started_at,
        },
        Poll::NotFound { detail } => Check::Lost { detail },
        Poll::Failed { error } => Check::Failed { error },
    }
}

/// Applies the polls, then claims the deliveries due now: their write-ahead records are
/// saved with the same write, before any POST.
fn decide(
    store: &Store,
    polled: &[Job],
    checks: Vec<Check>,
    limits: &Limits,
    report: &mut Report,
) -> Result<Vec<Claim>> {
    store.update(|file| {
        let now = Timestamp::now();
        let index = registrations(file);
        for (job, check) in polled.iter().zip(checks) {
            if let Some(&i) = index.get(&job.job_id) {
                apply(&mut file.jobs[i], Event::Polled(check), now, limits, report);
            }
        }
        let due: Vec<usize> = lifecycle::deliveries(&file.jobs, now)
            .iter()
            .map(|job| index[&job.job_id])
            .collect();
        let mut claims = Vec::new();
        for i in due {
            let job = &mut file.jobs[i];
            if let Effect::Post { text } = apply(job, Event::Claimed, now, limits, report) {
                claims.push(Claim {
                    job: job.clone(),
                    text,
                });
            }
        }
        Ok(claims)
    })
}

/// Records each POST's outcome on the registration that claimed it.
fn record(
    store: &Store,
    claims: &[Claim],
    posted: Vec<Posted>,
    limits: &Limits,
    report: &mut Report,
) -> Result<()> {
    if claims.is_empty() {
        return Ok(());
    }
    store.update(|file| {
        let now = Timestamp::now();
        let index = registrations(file);
        for (claim, posted) in claims.iter().zip(posted) {
            match index.get(&claim.job.job_id) {
                Some(&i) => {
                    apply(
                        &mut file.jobs[i],
                        Event::Posted(posted),
                        now,
                        limits,
                        report,
                    );
                }
                None => report.add(Outcome::Replaced, &claim.job.task_id),
            }
        }
        Ok(())
    })
}

/// Steps one job through one event, in place; the effect is the caller's to carry out.
fn apply(
    job: &mut Job,
    event: Event,
    now: Timestamp,
    limits: &Limits,
    report: &mut Report,
) -> Effect {
    let transition = lifecycle::step(job, event, now, limits);
    report.add_all(&transition.outcomes, &transition.job.task_id);
    *job = transition.job;
    transition.effect
}

/// Where each registration (`job_id`) is in the file: one lookup per job, not a scan.
fn registrations(file: &JobFile) -> HashMap<String, usize> {
    file.jobs
        .iter()
        .enumerate()
        .map(|(i, job)| (job.job_id.clone(), i))
        .collect()
}

/// Runs `work` over `items` on at most `workers` threads; results in input order.
fn parallel<T: Sync, R: Send>(
    items: &[T],
    workers: usize,
    work: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    if items.is_empty() {
        return Vec::new();
    }
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new(items.iter().map(|_| None).collect());
    thread::scope(|scope| {
        for _ in 0..workers.clamp(1, items.len()) {
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
