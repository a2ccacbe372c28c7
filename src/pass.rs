//! One `atc tick`, top to bottom, as the README's "How a tick works" tells it:
//!
//! 1. **prepare**: recover what a dead tick left mid-POST, close read-back windows that
//!    ran out, prune old ended jobs, select the tasks to poll and the delivered turns to
//!    follow (one locked update);
//! 2. **poll** every pending task, and the parent turns deliveries started, in parallel,
//!    without the lock;
//! 3. **render** finished tasks into the text a delivery carries;
//! 4. **decide**: apply every poll, compose complete groups, and pick what is due now:
//!    turns, at most one per parent chat, and forwards of parents' replies (one locked
//!    update);
//! 5. **look** before acting: each parent chat (does it exist, is it busy, and, for a
//!    delivery of unknown outcome, is the turn already in it); each IM channel a forward
//!    goes through (is it healthy); in parallel, without the lock;
//! 6. **claim**: apply what the looks found; what may go out gets its write-ahead record
//!    (one locked update);
//! 7. **send** each claimed turn (POST into the chat) and forward (to the person), in
//!    parallel, without the lock;
//! 8. **record** what each send did (one locked update);
//! 9. **report**.
//!
//! The invariants of delivery, kept here and nowhere else:
//! - The job-file lock is never held across network I/O, so `watch` and `cancel` never
//!   wait on a slow server.
//! - A POST goes out only after its write-ahead record (attempt counted, in flight) is on
//!   disk. A tick that dies after that leaves a job the next tick recovers as unconfirmed
//!   and reads back: never posted blind.
//! - Every POST of one job carries the same delivery id (`atc-<job_id>`), which QwenPaw
//!   keeps on the stored message: that is what read-back finds.
//! - Every write after a network step goes through `lifecycle::step` on the job with the
//!   same `job_id`: a cancel or re-watch that landed meanwhile is never overwritten.
//! - The tick lock is held for the whole pass: one tick at a time, so a job found in
//!   flight by `prepare` belongs to a tick that died.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use anyhow::Result;

use crate::job::{Job, Outbound, Status};
use crate::lifecycle::{self, Check, Effect, Event, Limits, Probe, Turn};
use crate::qwenpaw::chat::{self, ReadBack};
use crate::qwenpaw::task::{self, Poll};
use crate::qwenpaw::{Client, Server, render};
use crate::report::{GiveUp, LogEntry, Outcome, Report};
use crate::settings::Tick;
use crate::state::store::Fingerprint;
use crate::state::{JobFile, Store};
use crate::time::{Clock, SystemClock, Timestamp};
use crate::{batch, group};

/// What `prepare` chose: tasks to poll, delivered turns to follow.
struct Work {
    poll: Vec<Job>,
    follow: Vec<Job>,
    /// Base URLs whose watches allowed tokens over plain http (`--allow-insecure-remote`).
    insecure_ok: Vec<String>,
    /// Nothing else can change in this tick (`lifecycle::settled`).
    settled: bool,
    /// Every job is watched (pending) or settled: only a poll's news can change anything.
    only_watching: bool,
    /// When the first ended job becomes old enough to prune (`--keep`).
    first_prune: Option<Timestamp>,
}

/// What a tick leaves in `<job file>.tick.lock` (one JSON line), for the next tick and for
/// `atc doctor`.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Heartbeat {
    /// When the last tick started.
    pub last_tick_at: Option<Timestamp>,
    /// When the last tick a QwenPaw turn's end started (`tick --kicked`) started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_kick_at: Option<Timestamp>,
    /// The job file that tick found settled, unchanged since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    settled: Option<Settled>,
    /// Whether that tick finished its pass, every save it needed made: a heartbeat alone
    /// is not a healthy tick (one that cannot save the job file beats, then exits 4).
    /// `None`: an older atc wrote this heartbeat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<bool>,
    /// When a tick last finished its pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
}

/// A job file with nothing to do: which version (its fingerprint), under which limits,
/// and until when (its first prune; `None`: never, it holds no job).
#[derive(Debug, Serialize, Deserialize)]
struct Settled {
    file: Fingerprint,
    key: CacheKey,
    until: Option<Timestamp>,
}

/// The limits a settled verdict depends on (`--keep` prunes; `--busy-deadline` says which
/// delivered turns are followed).
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
struct CacheKey {
    keep_secs: u64,
    busy_deadline_secs: u64,
}

impl CacheKey {
    fn of(limits: &Limits) -> CacheKey {
        CacheKey {
            keep_secs: limits.keep.as_secs(),
            busy_deadline_secs: limits.busy_deadline.as_secs(),
        }
    }
}

impl Heartbeat {
    /// The heartbeat in the tick lock at `path`; an older atc wrote a bare timestamp.
    pub fn read(path: &std::path::Path) -> Heartbeat {
        Heartbeat::parse(crate::state::lock::read_stamp(path))
    }

    fn parse(line: Option<String>) -> Heartbeat {
        let Some(line) = line else {
            return Heartbeat::default();
        };
        serde_json::from_str(&line).unwrap_or_else(|_| Heartbeat {
            last_tick_at: Timestamp::parse(&line),
            ..Heartbeat::default()
        })
    }

    /// What a tick that started at `now` leaves: `finished` once its pass is done.
    fn of(
        now: Timestamp,
        last_kick_at: Option<Timestamp>,
        settled: Option<Settled>,
        finished_at: Option<Timestamp>,
    ) -> Heartbeat {
        Heartbeat {
            last_tick_at: Some(now),
            last_kick_at,
            settled,
            finished: Some(finished_at == Some(now)),
            finished_at,
        }
    }

    fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// What the tick is about to do for a job over the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Errand {
    /// Post its outbound turn into the parent chat.
    Turn,
    /// Send the parent's reply on to the person.
    Forward,
    /// Stop the child (`--stop-after` passed); never claimed, nothing is posted.
    Stop,
}

/// Something the pass has claimed: the job as claimed, and what to send.
struct Claim {
    job: Job,
    errand: Errand,
    text: String,
}

/// Runs one pass over the job file. `None` when another tick holds the tick lock.
///
/// `heard` gets each job the pass gives up on as soon as the save recording it is made:
/// a pass that fails afterwards (a later save cannot be written) has still saved it, and
/// the next pass will not give it up again, so this is the only time to tell a person.
pub fn run(store: &Store, tick: &Tick, heard: &mut dyn FnMut(&GiveUp)) -> Result<Option<Report>> {
    let mut client = Client::with_lanes(tick.http_timeout, tick.auth.clone(), tick.concurrency);
    run_with(store, tick, &mut client, &SystemClock, heard)
}

/// [`run`], talking to `server` and reading `clock`: the seam the simulation
/// (`tests/sim`) drives the real pass through.
pub fn run_with<S: Server>(
    store: &Store,
    tick: &Tick,
    server: &mut S,
    clock: &dyn Clock,
    heard: &mut dyn FnMut(&GiveUp),
) -> Result<Option<Report>> {
    let Some(mut single_flight) = store.try_lock_tick()? else {
        return Ok(None);
    };
    let limits = &tick.limits;
    let now = clock.now();
    // When the last tick ran, for `atc doctor`, and what it found: a job file it found
    // settled, unchanged since, holds nothing to do until its first prune.
    let previous = Heartbeat::parse(single_flight.contents());
    let last_kick_at = if tick.kicked {
        Some(now)
    } else {
        previous.last_kick_at
    };
    let key = CacheKey::of(limits);
    if let (Some(settled), Some(print)) = (&previous.settled, store.fingerprint())
        && settled.file == print
        && settled.key == key
        && settled.until.is_none_or(|until| now <= until)
    {
        let beat = Heartbeat::of(now, last_kick_at, previous.settled, Some(now));
        single_flight.stamp(&beat.to_line())?;
        return Ok(Some(Report::unchanged()));
    }
    single_flight.stamp(&Heartbeat::of(now, last_kick_at, None, previous.finished_at).to_line())?;
    // Stamped when the pass is done: every save it needed was made.
    let finished = |lock: &mut crate::state::lock::Guard| {
        lock.stamp(&Heartbeat::of(now, last_kick_at, None, Some(now)).to_line())
    };
    let workers = tick.concurrency;
    let mut report = Report::default();

    let mut started = Instant::now();
    let mut lap = |report: &mut Report, phase: &'static str| {
        report.time(phase, started.elapsed());
        started = Instant::now();
    };
    let mut announce =
        |report: &mut Report| report.take_saved_give_ups().iter().for_each(&mut *heard);
    let work = prepare(store, limits, clock, &mut report)?;
    announce(&mut report);
    lap(&mut report, "prepare");
    store.log(&report.take_log())?;
    if work.poll.is_empty() && work.follow.is_empty() && work.settled {
        // Nothing watched and nothing on its way: no second load, no save; and the next
        // tick need not even read the file while it stays as it is.
        if let Some(file) = store.fingerprint() {
            let settled = Settled {
                file,
                key,
                until: work.first_prune,
            };
            let beat = Heartbeat::of(now, last_kick_at, Some(settled), Some(now));
            single_flight.stamp(&beat.to_line())?;
        } else {
            finished(&mut single_flight)?;
        }
        return Ok(Some(report));
    }
    for base_url in &work.insecure_ok {
        server.allow_insecure(base_url);
    }
    let client = &*server;
    let polls = parallel(&work.poll, workers, |job| {
        let answer = client.get_task(&job.base_url, &job.task_id, job.target.poll_agent());
        task::classify(answer, &job.task_id, &job.base_url, client.auth())
    });
    let turns = parallel(&work.follow, workers, |job| follow(client, job));
    let checks: Vec<Check> = work.poll.iter().zip(polls).map(render).collect();
    lap(&mut report, "poll");
    if !work.poll.is_empty() {
        crate::crash::point("polled");
    }
    if work.only_watching
        && work.follow.is_empty()
        && no_news(&work.poll, &checks, limits, clock, &mut report)
    {
        // Every task is still running and nothing else is on its way: the file stays as it
        // is, and the tick is done.
        store.log(&report.take_log())?;
        lap(&mut report, "decide");
        finished(&mut single_flight)?;
        return Ok(Some(report));
    }
    let due = decide(store, &work, checks, turns, tick, clock, &mut report)?;
    announce(&mut report);
    store.log(&report.take_log())?;
    lap(&mut report, "decide");
    let looked = parallel(&due, workers, |(job, errand)| look(client, job, *errand));
    lap(&mut report, "look");
    let claims = claim(store, &due, looked, tick, clock, &mut report)?;
    announce(&mut report);
    store.log(&report.take_log())?;
    lap(&mut report, "claim");
    if !claims.is_empty() {
        crate::crash::point("claimed");
    }
    let sent = parallel(&claims, workers, |claim| send(client, claim, tick));
    if !claims.is_empty() {
        crate::crash::point("posted");
    }
    lap(&mut report, "send");
    record(store, &claims, sent, tick, clock, &mut report)?;
    announce(&mut report);
    store.log(&report.take_log())?;
    lap(&mut report, "record");
    finished(&mut single_flight)?;
    Ok(Some(report))
}

/// Recover, prune, select: what is pending gets polled; delivered turns get followed.
fn prepare(store: &Store, limits: &Limits, clock: &dyn Clock, report: &mut Report) -> Result<Work> {
    store.update(|file| {
        let now = clock.now();
        for i in lifecycle::interrupted(&file.jobs) {
            apply(&mut file.jobs[i], Event::Recovered, now, limits, report);
        }
        for i in lifecycle::read_backs_closed(&file.jobs, now, limits) {
            apply(
                &mut file.jobs[i],
                Event::ReadBackClosed,
                now,
                limits,
                report,
            );
        }
        file.jobs.retain(|job| {
            let prune = lifecycle::prunable(job, now, limits);
            if prune {
                report.add(Outcome::Pruned, &job.task_id);
                report.log(LogEntry::of("pruned", job, now));
            }
            !prune
        });
        let mut insecure_ok: Vec<String> = file
            .jobs
            .iter()
            .filter(|job| job.options.allow_insecure_remote)
            .map(|job| job.base_url.clone())
            .collect();
        insecure_ok.dedup();
        Ok(Work {
            insecure_ok,
            settled: lifecycle::settled(&file.jobs),
            only_watching: file.jobs.iter().all(|job| {
                (job.status == Status::Pending && job.check_in.is_none())
                    || lifecycle::settled_job(job)
            }),
            first_prune: file
                .jobs
                .iter()
                .map(|job| job.updated_at.saturating_add(limits.keep))
                .min(),
            poll: lifecycle::to_poll(&file.jobs)
                .into_iter()
                .cloned()
                .collect(),
            follow: lifecycle::to_follow(&file.jobs, now, limits)
                .into_iter()
                .cloned()
                .collect(),
        })
    })
}

/// What a poll means for the job: a finished task is rendered exactly as QwenPaw's
/// `check_agent_task` would show it (and names the fork branch when it has one).
fn render((job, poll): (&Job, Poll)) -> Check {
    match poll {
        Poll::Record(record) if record.is_finished() => Check::Finished {
            text: render::render_delivery(
                &job.task_id,
                &record,
                job.options.fork_branch.as_deref(),
            ),
            started_at: record.started_at,
            outcome: record.outcome(),
            empty: record.answer().is_empty(),
        },
        Poll::Record(record) => Check::Running {
            started_at: record.started_at,
        },
        Poll::NotFound { detail } => Check::Lost { detail },
        Poll::Failed { error } | Poll::Denied { error } => Check::Failed { error },
    }
}

/// How the parent turn a delivery started is doing (its own task record). `None`: the
/// server did not say; ask again next tick.
fn follow(client: &impl Server, job: &Job) -> Option<Turn> {
    let turn = job.turn_task_id.as_deref()?;
    let answer = client.get_task(&job.base_url, turn, &job.target.agent_id);
    match task::classify(answer, turn, &job.base_url, client.auth()) {
        Poll::Record(record) if record.is_finished() => Some(Turn::Ended {
            status: record
                .result_status()
                .unwrap_or(record.status.as_str())
                .to_owned(),
            reply: record.final_reply(),
        }),
        Poll::Record(_) => Some(Turn::Running),
        Poll::NotFound { .. } => Some(Turn::Gone),
        Poll::Failed { .. } | Poll::Denied { .. } => None,
    }
}

/// True when applying `checks` to the jobs as `prepare` saw them changes none of them
/// (every task is still running, as before). Then the report gets what the polls said,
/// and nothing needs the lock: a job that another command changed meanwhile would take
/// the same polls as no change either.
fn no_news(
    jobs: &[Job],
    checks: &[Check],
    limits: &Limits,
    clock: &dyn Clock,
    report: &mut Report,
) -> bool {
    if !checks.iter().all(|c| matches!(c, Check::Running { .. })) {
        return false;
    }
    let now = clock.now();
    let steps: Vec<_> = jobs
        .iter()
        .zip(checks)
        .map(|(job, check)| lifecycle::step(job, Event::Polled(check.clone()), now, limits))
        .collect();
    if steps.iter().zip(jobs).any(|(step, job)| step.job != *job) {
        return false;
    }
    for step in &steps {
        report.record(&step.job, false, &step.outcomes, now);
    }
    true
}

/// Applies the polls and the followed turns, composes the groups that are complete, and
/// picks what is due now: turns, and forwards.
fn decide(
    store: &Store,
    work: &Work,
    checks: Vec<Check>,
    turns: Vec<Option<Turn>>,
    tick: &Tick,
    clock: &dyn Clock,
    report: &mut Report,
) -> Result<Vec<(Job, Errand)>> {
    let limits = &tick.limits;
    store.update(|file| {
        let now = clock.now();
        let index = registrations(file);
        for (job, check) in work.poll.iter().zip(checks) {
            if let Some(&i) = index.get(&job.job_id) {
                apply(&mut file.jobs[i], Event::Polled(check), now, limits, report);
            }
        }
        for (job, turn) in work.follow.iter().zip(turns) {
            if let (Some(&i), Some(turn)) = (index.get(&job.job_id), turn) {
                apply(
                    &mut file.jobs[i],
                    Event::TurnPolled(turn),
                    now,
                    limits,
                    report,
                );
            }
        }
        groups(file, now, tick, report);
        let turns = lifecycle::deliveries(&file.jobs, now, limits)
            .into_iter()
            .map(|job| (job.clone(), Errand::Turn));
        let forwards = lifecycle::forwards(&file.jobs)
            .into_iter()
            .map(|job| (job.clone(), Errand::Forward));
        let stops = lifecycle::to_stop(&file.jobs)
            .into_iter()
            .map(|job| (job.clone(), Errand::Stop));
        Ok(turns.chain(forwards).chain(stops).collect())
    })
}

/// Looks before acting: at the parent chat for a turn, at the channel for a forward.
fn look(client: &impl Server, job: &Job, errand: Errand) -> Event {
    match errand {
        Errand::Turn => Event::Probed(probe(client, job)),
        // The console is always there (a toast needs no channel of its own).
        Errand::Forward if job.target.channel == "console" => {
            Event::ChannelChecked(lifecycle::Health::Healthy)
        }
        Errand::Forward => {
            let t = &job.target;
            let health = client.channel_health(&job.base_url, &t.agent_id, &t.channel);
            Event::ChannelChecked(chat::health(health))
        }
        Errand::Stop => {
            let (chat_id, answer) = match stop_child(client, job) {
                Ok(Stopped { chat_id, said }) => (chat_id, Ok(said == chat::Stop::Stopped)),
                Err(why) => (None, Err(why.message())),
            };
            Event::StopAnswered { chat_id, answer }
        }
    }
}

/// What a stop of the child did: the chat it went to when that is the child's uuid (to be
/// recorded), and what QwenPaw said.
pub struct Stopped {
    pub chat_id: Option<String>,
    pub said: chat::Stop,
}

/// Why the child could not be stopped.
pub enum StopFailed {
    /// The watch does not know the child's session.
    NoSession,
    /// The child's chat could not be looked up.
    Lookup(String),
    /// The stop could not be sent, or the answer says nothing.
    Stop(String),
}

impl StopFailed {
    pub fn message(&self) -> String {
        match self {
            StopFailed::NoSession => "the child's session is not known".to_owned(),
            StopFailed::Lookup(why) => format!("its chat could not be looked up ({why})"),
            StopFailed::Stop(why) => why.clone(),
        }
    }
}

/// Stops the child of `job` (`cancel --stop`, `--stop-after`): its chat is the one recorded,
/// or looked up by its session on the agent it runs on (`GET /chats`), or, when no chat is
/// listed, its session id (QwenPaw finds `console` chats by it); then
/// `POST /console/chat/stop` as that agent.
pub fn stop_child(client: &(impl Server + ?Sized), job: &Job) -> Result<Stopped, StopFailed> {
    let Some(session) = &job.child_session else {
        return Err(StopFailed::NoSession);
    };
    let agent = job.target.poll_agent();
    let chat_id = match &job.child_chat_id {
        Some(id) => Some(id.clone()),
        None => match chat::chats(client.list_chats(&job.base_url, agent, None)) {
            Ok(chats) => chat::child_chat(&chats, session).map(|c| c.id.clone()),
            Err(unusable) => return Err(StopFailed::Lookup(unusable.message().to_owned())),
        },
    };
    let target = chat_id.as_deref().unwrap_or(session);
    match chat::stopped(client.stop_chat(&job.base_url, agent, target)) {
        Ok(said) => Ok(Stopped { chat_id, said }),
        Err(why) => Err(StopFailed::Stop(why)),
    }
}

/// Looks at the parent chat of a due turn. Before a POST the chat is found by its exact
/// triple, every time: it may have vanished since the last look (posting would start a
/// new one), and QwenPaw's status route calls any id idle, even a deleted chat's. A
/// delivery of unknown outcome is looked for in the history of the chat it went to (the
/// id found then), or else of the chat the triple names now.
fn probe(client: &impl Server, job: &Job) -> Probe {
    let t = &job.target;
    let (base, agent) = (&job.base_url, &t.agent_id);
    let reading_back = job.outbound() == Some(Outbound::Unconfirmed);
    let chat_id = match &job.chat_id {
        Some(id) if reading_back => id.clone(),
        _ => {
            let listed =
                chat::chats(client.list_chats(base, agent, Some((&t.user_id, &t.channel))));
            let chats = match listed {
                Ok(chats) => chats,
                Err(chat::Unusable::Refused(error)) => return Probe::Refused { error },
                Err(chat::Unusable::Unknown(error)) => return Probe::Unknown { error },
            };
            match chat::find(&chats, &t.session_id, &t.user_id, &t.channel) {
                None => return Probe::NoChat,
                Some(found) if !reading_back => {
                    return Probe::Chat {
                        chat_id: found.id.clone(),
                        running: found.running,
                    };
                }
                Some(found) => found.id.clone(),
            }
        }
    };
    let history = client.chat_history(base, agent, &chat_id);
    crate::crash::point("read-back");
    match chat::read_back(history, &chat::client_message_id(job)) {
        Ok(ReadBack::Found { turn }) => Probe::Found { chat_id, turn },
        Ok(ReadBack::Absent { running }) => Probe::NotFound { chat_id, running },
        Ok(ReadBack::NoChat) => Probe::NoChat,
        Err(error) => Probe::Unknown { error },
    }
}

/// Applies what the looks found. What may go out now is claimed: its write-ahead record
/// is saved with this write, before anything is sent.
fn claim(
    store: &Store,
    due: &[(Job, Errand)],
    looked: Vec<Event>,
    tick: &Tick,
    clock: &dyn Clock,
    report: &mut Report,
) -> Result<Vec<Claim>> {
    let limits = &tick.limits;
    if due.is_empty() {
        return Ok(Vec::new());
    }
    store.update(|file| {
        let now = clock.now();
        // A batch is composed again from what is due now (a cancel or a re-watch may have
        // landed since the decision), so its claim posts what it carries now.
        groups(file, now, tick, report);
        let index = registrations(file);
        let mut claims = Vec::new();
        for ((job, errand), event) in due.iter().zip(looked) {
            let Some(&i) = index.get(&job.job_id) else {
                continue;
            };
            let job = &mut file.jobs[i];
            let text = match apply(job, event, now, limits, report) {
                Effect::Post { text } | Effect::Forward { text } => text,
                Effect::None => continue,
            };
            claims.push(Claim {
                job: job.clone(),
                errand: *errand,
                text,
            });
        }
        groups(file, now, tick, report);
        Ok(claims)
    })
}

/// Sends one claimed thing: the turn into the parent chat, or the forward to the person.
fn send(client: &impl Server, claim: &Claim, tick: &Tick) -> Event {
    let job = &claim.job;
    let (base, agent) = (&job.base_url, &job.target.agent_id);
    match claim.errand {
        Errand::Turn => {
            let body = chat::turn(job, &claim.text, tick.turn_timeout);
            Event::Posted(chat::posted(client.post_turn(base, agent, &body)))
        }
        Errand::Forward => {
            let body = chat::forward_body(job, &claim.text);
            Event::Forwarded(chat::forwarded(client.send_message(base, agent, &body)))
        }
        Errand::Stop => unreachable!("a stop is never claimed: its step has no effect"),
    }
}

/// Records what each send did on the registration that claimed it.
fn record(
    store: &Store,
    claims: &[Claim],
    sent: Vec<Event>,
    tick: &Tick,
    clock: &dyn Clock,
    report: &mut Report,
) -> Result<()> {
    let limits = &tick.limits;
    if claims.is_empty() {
        return Ok(());
    }
    store.update(|file| {
        let now = clock.now();
        let index = registrations(file);
        for (claim, event) in claims.iter().zip(sent) {
            match index.get(&claim.job.job_id) {
                Some(&i) => {
                    apply(&mut file.jobs[i], event, now, limits, report);
                }
                None => report.add(Outcome::Replaced, &claim.job.task_id),
            }
        }
        groups(file, now, tick, report);
        Ok(())
    })
}

/// Gives the groups the events `group::plan` says they need, then the batches what
/// `batch::plan` says (everything due for one chat composed into one turn).
fn groups(file: &mut JobFile, now: Timestamp, tick: &Tick, report: &mut Report) {
    for (i, event) in group::plan(&file.jobs) {
        apply(&mut file.jobs[i], event, now, &tick.limits, report);
    }
    for (i, event) in batch::plan(&file.jobs, tick.batch) {
        apply(&mut file.jobs[i], event, now, &tick.limits, report);
    }
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
    report.record(
        &transition.job,
        transition.job != *job,
        &transition.outcomes,
        now,
    );
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
    if workers <= 1 || items.len() == 1 {
        // One worker: no thread to start (and, in the simulation, one deterministic order).
        return items.iter().map(work).collect();
    }
    let next = AtomicUsize::new(0);
    let (next, work) = (&next, &work);
    let done: Vec<Vec<(usize, R)>> = thread::scope(|scope| {
        let workers: Vec<_> = (0..workers.clamp(1, items.len()))
            .map(|lane| {
                scope.spawn(move || {
                    // Each worker its own connections: no pool shared between threads.
                    crate::qwenpaw::client::enter_lane(lane);
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        done.push((i, work(item)));
                    }
                    done
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    let mut results: Vec<Option<R>> = items.iter().map(|_| None).collect();
    for (i, result) in done.into_iter().flatten() {
        results[i] = Some(result);
    }
    results
        .into_iter()
        .map(|r| r.expect("every item was processed"))
        .collect()
}
