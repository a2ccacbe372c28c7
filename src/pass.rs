//! One `atc tick`, top to bottom, as the guide's "How a tick works" tells it:
//!
//! 1. **prepare**: recover what a dead tick left mid-POST, close read-back windows that
//!    ran out, prune old ended jobs and settled turns, select the tasks to poll and the
//!    delivered turns to follow (one locked update);
//! 2. **poll** every pending task, and the parent turns deliveries started, in parallel,
//!    without the lock;
//! 3. **render** finished tasks into the text their block carries;
//! 4. **decide**: apply every poll, compose the turns (`compose`: groups, batches), and
//!    pick what is due now: turns, at most one per parent chat, forwards of parents'
//!    replies, stops (one locked update);
//! 5. **look** before acting: each due turn's chat (does it exist, is it busy, and, for a
//!    turn of unknown outcome, is it already in it); each IM channel a forward goes
//!    through (is it healthy); each child to stop; in parallel, without the lock;
//! 6. **claim**: compose again (a cancel or a re-watch may have landed), apply what the
//!    looks found; what may go out gets its write-ahead record (one locked update);
//! 7. **send** each claimed turn (POST into the chat) and forward (to the person), in
//!    parallel, without the lock;
//! 8. **record** what each send did; the jobs each turn carries follow it (one locked
//!    update);
//! 9. **report**.
//!
//! The invariants of delivery, kept here and nowhere else:
//! - The job-file lock is never held across network I/O, so `watch` and `cancel` never
//!   wait on a slow server.
//! - A POST goes out only after its write-ahead record (attempt counted, in flight) is on
//!   disk. A tick that dies after that leaves a turn the next tick recovers as
//!   unconfirmed and reads back: never posted blind.
//! - Every POST of one turn carries the same delivery id (its `turn_id`), which QwenPaw
//!   keeps on the stored message: that is what read-back finds.
//! - Every write after a network step goes through `turn::step` on the turn with the same
//!   `turn_id` (or `lifecycle::step` on the job with the same `job_id`): a cancel or a
//!   re-watch that landed meanwhile is never overwritten, and a claimed turn is what it is.
//! - The tick lock is held for the whole pass: one tick at a time, so a turn found in
//!   flight by `prepare` belongs to a tick that died.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use anyhow::Result;

use crate::compose::{self, Seen};
use crate::job::{Job, Watch};
use crate::lifecycle::kick::{self, Concern, TurnEnd};
use crate::lifecycle::{self, Check, Event, Limits, StopAnswer};
use crate::qwenpaw::chat::{self, ReadBack};
use crate::qwenpaw::task::{self, Poll};
use crate::qwenpaw::{Client, Server, render};
use crate::report::{GiveUp, LogEntry, Outcome, Report};
use crate::settings::Tick;
use crate::state::store::Fingerprint;
use crate::state::{JobFile, Store};
use crate::time::{Clock, SystemClock, Timestamp};
use crate::turn::{self, Effect, ParentTurn, Probe, Turn, TurnEvent, TurnState};

/// What one pass looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Everything: the timer's pass, a person's, the plugin's cadence.
    All,
    /// Everything, right after a QwenPaw turn ended, not known which (a kick of an older
    /// plugin, a bare mark): any poll may read a child's stale `running`.
    AnyTurn,
    /// Only what these ended turns concern (`lifecycle::kick`): a kicked pass.
    Turns(Vec<TurnEnd>),
}

impl Scope {
    /// The ended turns it is limited to, if it is.
    fn ends(&self) -> Option<&[TurnEnd]> {
        match self {
            Scope::Turns(ends) => Some(ends),
            Scope::All | Scope::AnyTurn => None,
        }
    }
}

/// What a pass is asked besides the tick's settings: what it looks at, and whether a
/// person hears what it gives up (its stderr is read: the timer's journal, cron's mail, a
/// terminal). A pass nobody hears leaves its give-ups unsaid in the job file (`heard`);
/// one a person hears also says those an earlier tick left. `settle`: a kicked pass's
/// wait for the ended turn's records to settle, called once it knows they concern
/// something, before its first request (a turn's end that concerns nothing waits for
/// nothing).
#[derive(Clone, Copy)]
pub struct Intent<'a> {
    pub scope: &'a Scope,
    pub heard: bool,
    pub settle: Option<&'a dyn Fn()>,
}

impl Intent<'_> {
    /// The timer's pass: everything, heard.
    pub const TIMER: Intent<'static> = Intent {
        scope: &Scope::All,
        heard: true,
        settle: None,
    };
}

/// A task to poll: what the request and the rendering of its answer need, so that the
/// hot path (a tick over running tasks) copies no job.
struct ToPoll {
    job_id: String,
    task_id: String,
    base_url: String,
    agent: String,
    fork_branch: Option<String>,
    /// The line a result of a child atc stopped ends with.
    stop_line: Option<String>,
    /// Polled right after a turn ended that may be its child's (`Check::Running`).
    turn_ended: bool,
    /// Polled because a turn ended on its agent, its child's session unknown: once per
    /// chat, never looked at again in a kicked tick's window.
    unknown: bool,
}

impl ToPoll {
    fn of(job: &Job, turn_ended: bool, unknown: bool) -> ToPoll {
        ToPoll {
            job_id: job.job_id.clone(),
            task_id: job.task_id.clone(),
            base_url: job.base_url.clone(),
            agent: job.target.poll_agent().to_owned(),
            fork_branch: job.options.fork_branch.clone(),
            stop_line: crate::describe::stop_line(job),
            turn_ended,
            unknown,
        }
    }
}

/// What `prepare` chose: tasks to poll, delivered turns to follow.
struct Work {
    poll: Vec<ToPoll>,
    follow: Vec<Turn>,
    /// A kicked pass: the turns that ended, and the watches they concern (what it may
    /// deliver, forward or stop besides what waits for the ended turns' chats).
    concern: Option<(Vec<TurnEnd>, Concern)>,
    /// A person hears the pass (`Intent::heard`).
    heard: bool,
    /// A give-up nobody has heard is in the file: the file is not settled for a tick a
    /// person hears (it says it).
    unsaid: bool,
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
    /// When the last tick that was no kick started: a timer's, the plugin's cadence, a
    /// person's (`atc doctor` tells a cadence from kicks by it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_unkicked_at: Option<Timestamp>,
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
    /// It holds give-ups nobody has heard: settled for ticks nobody hears (the plugin's,
    /// which cannot say them), not for one a person hears (it says them).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    unsaid: bool,
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

    /// When the last tick that was no kick started; an older atc's heartbeat says it only
    /// when its last tick was not a kick.
    pub fn last_unkicked(&self) -> Option<Timestamp> {
        self.last_unkicked_at.or(self
            .last_tick_at
            .filter(|at| Some(*at) != self.last_kick_at))
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
        (last_kick_at, last_unkicked_at): (Option<Timestamp>, Option<Timestamp>),
        settled: Option<Settled>,
        finished_at: Option<Timestamp>,
    ) -> Heartbeat {
        Heartbeat {
            last_tick_at: Some(now),
            last_kick_at,
            last_unkicked_at,
            settled,
            finished: Some(finished_at == Some(now)),
            finished_at,
        }
    }

    fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// What the tick is about to do over the network.
#[derive(Clone, Debug)]
enum Due {
    /// Post the turn into its parent chat (or read it back).
    Turn(Turn),
    /// Send the parent's reply on to the person (or the console toast).
    Forward(Turn),
    /// Stop the job's child (`--stop-after` passed); never claimed, nothing is posted.
    Stop(Job),
}

/// What a look found, for the turn or the job it was about.
enum Looked {
    Turn(TurnEvent),
    Job(Event),
}

/// Something the pass has claimed: the turn as claimed, and what to send.
struct Claim {
    turn: Turn,
    forward: bool,
    text: String,
}

/// Runs one pass over the job file. `None` when another tick holds the tick lock.
///
/// `say` gets the line of each give-up a person hears (`intent.heard`: this pass's, and
/// those earlier ticks left unsaid) as soon as the save that marks it said is made: a pass
/// that fails afterwards (a later save cannot be written) has still saved it, and no
/// later pass says it again, so this is the only time to tell a person.
pub fn run(
    store: &Store,
    tick: &Tick,
    intent: Intent<'_>,
    say: &mut dyn FnMut(&str),
) -> Result<Option<Report>> {
    let mut client = Client::with_lanes(tick.http_timeout, tick.auth.clone(), tick.concurrency);
    run_with(store, tick, &mut client, &SystemClock, intent, say)
}

/// [`run`], talking to `server` and reading `clock`: the seam the simulation
/// (`tests/sim`) drives the real pass through.
pub fn run_with<S: Server>(
    store: &Store,
    tick: &Tick,
    server: &mut S,
    clock: &dyn Clock,
    intent: Intent<'_>,
    say: &mut dyn FnMut(&str),
) -> Result<Option<Report>> {
    let Some(mut single_flight) = store.try_lock_tick()? else {
        return Ok(None);
    };
    let limits = &tick.limits;
    let now = clock.now();
    // When the last tick ran, for `atc doctor`, and what it found: a job file it found
    // settled, unchanged since, holds nothing to do until its first prune.
    let previous = Heartbeat::parse(single_flight.contents());
    // Which kind of tick ran last, each kind's time kept.
    let kinds = if tick.kicked {
        (Some(now), previous.last_unkicked())
    } else {
        (previous.last_kick_at, Some(now))
    };
    let key = CacheKey::of(limits);
    if let (Some(settled), Some(print)) = (&previous.settled, store.fingerprint())
        && settled.file == print
        && settled.key == key
        && settled.until.is_none_or(|until| now <= until)
        && !(settled.unsaid && intent.heard)
    {
        let beat = Heartbeat::of(now, kinds, previous.settled, Some(now));
        single_flight.stamp(&beat.to_line())?;
        return Ok(Some(Report::unchanged()));
    }
    single_flight.stamp(&Heartbeat::of(now, kinds, None, previous.finished_at).to_line())?;
    // Stamped when the pass is done: every save it needed was made.
    let finished = |lock: &mut crate::state::lock::Guard| {
        lock.stamp(&Heartbeat::of(now, kinds, None, Some(now)).to_line())
    };
    let workers = tick.concurrency;
    let mut report = Report::default();

    let mut started = Instant::now();
    let mut lap = |report: &mut Report, phase: &'static str| {
        report.time(phase, started.elapsed());
        started = Instant::now();
    };
    let mut announce = |report: &mut Report| {
        for line in report.take_to_say() {
            say(&line);
        }
    };
    if let Some(ends) = intent.scope.ends() {
        if !store.peek(|file| concerns_any(file, ends, now, limits))? {
            // A turn's end that concerns nothing costs the server no request and the job
            // file no write.
            finished(&mut single_flight)?;
            return Ok(Some(Report::unconcerned()));
        }
        if let Some(settle) = intent.settle {
            settle();
        }
    }
    let work = prepare(store, limits, clock, intent, &mut report)?;
    announce(&mut report);
    lap(&mut report, "prepare");
    store.log(&report.take_log())?;
    if work.poll.is_empty() && work.follow.is_empty() && work.settled {
        // Nothing watched and nothing on its way: no second load, no save; and the next
        // tick need not even read the file while it stays as it is (unless it holds a
        // give-up nobody has heard and a person hears that tick: it says it).
        if let Some(file) = store.fingerprint() {
            let settled = Settled {
                file,
                key,
                until: work.first_prune,
                unsaid: work.unsaid,
            };
            let beat = Heartbeat::of(now, kinds, Some(settled), Some(now));
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
        let answer = client.get_task(&job.base_url, &job.task_id, &job.agent);
        task::classify(answer, &job.task_id, &job.base_url, client.auth())
    });
    let parents = parallel(&work.follow, workers, |turn| follow(client, turn));
    let checks: Vec<Check> = work.poll.iter().zip(polls).map(render).collect();
    // A child the ended turn may be still reads running (the record says `finished` a few
    // ms after the hook), or the parent turn it ended is not over yet: look again soon.
    let running = |c: &Check| matches!(c, Check::Running { .. });
    if work
        .poll
        .iter()
        .zip(&checks)
        .any(|(p, c)| !p.unknown && running(c))
        || parents.contains(&Some(ParentTurn::Running))
    {
        report.look_again();
    }
    lap(&mut report, "poll");
    if !work.poll.is_empty() {
        crate::crash::point("polled");
    }
    if work.only_watching
        && work.follow.is_empty()
        && no_news(store, &work.poll, &checks, limits, clock, &mut report)
    {
        // Every task is still running and nothing else is on its way: the file stays as it
        // is, and the tick is done.
        store.log(&report.take_log())?;
        lap(&mut report, "decide");
        finished(&mut single_flight)?;
        return Ok(Some(report));
    }
    let due = decide(store, &work, checks, parents, tick, clock, &mut report)?;
    announce(&mut report);
    store.log(&report.take_log())?;
    lap(&mut report, "decide");
    let looked = parallel(&due, workers, |due| look(client, due));
    if looked.iter().any(|l| {
        matches!(
            l,
            Looked::Turn(TurnEvent::Probed(
                Probe::Chat { running: true, .. } | Probe::NotFound { running: true, .. }
            ))
        )
    }) {
        // The parent chat is still busy: its turn is ending.
        report.look_again();
    }
    lap(&mut report, "look");
    let claims = claim(store, &due, looked, tick, clock, intent, &mut report)?;
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
    record(store, &claims, sent, tick, clock, intent, &mut report)?;
    announce(&mut report);
    store.log(&report.take_log())?;
    lap(&mut report, "record");
    finished(&mut single_flight)?;
    Ok(Some(report))
}

/// Whether `ends` concern anything in `file` (`lifecycle::kick`): a watch to poll, or
/// something waiting for one of their chats (a turn due, a parent turn to follow, a
/// forward).
fn concerns_any(file: &JobFile, ends: &[TurnEnd], now: Timestamp, limits: &Limits) -> bool {
    let waits = |t: &Turn| {
        kick::concerns_chat(ends, &t.chat)
            && (turn::is_due(t, now, limits)
                || turn::forward_due(t)
                || turn::to_follow(std::slice::from_ref(t), now, limits).len() == 1)
    };
    !kick::concern(&file.jobs, &file.kick_chats, ends, now)
        .poll
        .is_empty()
        || file.turns.iter().any(waits)
}

/// Whether a kicked pass may send what concerns `turn`: it goes to one of the ended turns'
/// chats, or carries a watch they concern. (Every other pass sends everything due.)
fn concerned(work: &Work, turn: &Turn) -> bool {
    let Some((ends, concern)) = &work.concern else {
        return true;
    };
    kick::concerns_chat(ends, &turn.chat)
        || turn
            .carries
            .iter()
            .any(|b| concern.poll.contains(&b.job_id))
}

/// Records in `file` the give-ups the pass decided since the last save (said, when a
/// person hears it: then each line is said once the save is made).
fn keep_give_ups(file: &mut JobFile, report: &mut Report, now: Timestamp, heard: bool) {
    let decided = report.unrecorded_give_ups().to_vec();
    crate::heard::record(file, &decided, now, heard);
    if heard {
        report.say(decided.iter().map(GiveUp::line).collect(), false);
    }
}

/// Recover, prune, select: what is pending gets polled (in a kicked pass, what the ended
/// turns concern); delivered turns get followed. A pass a person hears says the give-ups
/// earlier ticks left unsaid.
fn prepare(
    store: &Store,
    limits: &Limits,
    clock: &dyn Clock,
    intent: Intent<'_>,
    report: &mut Report,
) -> Result<Work> {
    store.update(|file| {
        let now = clock.now();
        for i in turn::interrupted(&file.turns) {
            apply_turn(file, i, TurnEvent::Recovered, now, limits, report);
        }
        for i in turn::read_backs_closed(&file.turns, now, limits) {
            apply_turn(file, i, TurnEvent::ReadBackClosed, now, limits, report);
        }
        let turns = std::mem::take(&mut file.turns);
        file.jobs.retain(|job| {
            let prune = lifecycle::prunable(job, &turns, now, limits);
            if prune {
                report.add(Outcome::Pruned, &job.task_id);
                let turn = job
                    .turn
                    .as_deref()
                    .and_then(|id| turns.iter().find(|t| t.turn_id == id));
                let mut entry = LogEntry::of("pruned", job, now);
                entry.status = Some(crate::status::status(job, turn));
                report.log(entry);
            }
            !prune
        });
        let jobs: std::collections::HashSet<&str> =
            file.jobs.iter().map(|j| j.job_id.as_str()).collect();
        file.turns = turns
            .into_iter()
            .filter(|t| !turn::prunable(t, |id| jobs.contains(id)))
            .collect();
        if intent.heard {
            let late = crate::heard::say_unsaid(file, now);
            report.say(late, true);
        }
        crate::heard::prune(file, now, limits.keep);
        // What the ended turns concern; the chats whose turn's end polls watches of
        // unknown child session are remembered (their later turns do not, while those
        // watches wait).
        let mut concern = intent
            .scope
            .ends()
            .map(|ends| kick::concern(&file.jobs, &file.kick_chats, ends, now));
        let fresh = concern
            .as_mut()
            .map(|c| std::mem::take(&mut c.seen))
            .unwrap_or_default();
        kick::remember(&mut file.kick_chats, fresh, &file.jobs);
        keep_give_ups(file, report, now, intent.heard);
        let mut insecure_ok: Vec<String> = file
            .jobs
            .iter()
            .filter(|job| job.options.allow_insecure_remote)
            .map(|job| job.base_url.clone())
            .collect();
        insecure_ok.dedup();
        let (jobs, turns) = (&file.jobs, &file.turns);
        let turn_ended = *intent.scope != Scope::All;
        let poll = lifecycle::to_poll(jobs)
            .into_iter()
            .filter(|job| {
                concern
                    .as_ref()
                    .is_none_or(|c| c.poll.contains(&job.job_id))
            })
            .map(|job| {
                let unknown = concern
                    .as_ref()
                    .is_some_and(|c| c.unknown.contains(&job.job_id));
                ToPoll::of(job, turn_ended, unknown)
            })
            .collect();
        let ends = intent.scope.ends();
        let follow = turn::to_follow(turns, now, limits)
            .into_iter()
            .filter(|t| ends.is_none_or(|ends| kick::concerns_chat(ends, &t.chat)))
            .cloned()
            .collect();
        Ok(Work {
            unsaid: crate::heard::any_unsaid(file),
            concern: ends.map(<[TurnEnd]>::to_vec).zip(concern),
            heard: intent.heard,
            insecure_ok,
            settled: lifecycle::settled(jobs, turns),
            only_watching: turns.iter().all(turn::is_settled)
                && jobs.iter().all(|job| {
                    (job.watch == Watch::Pending && !job.check_in)
                        || lifecycle::settled_job(job, turns)
                }),
            first_prune: jobs
                .iter()
                .map(|job| lifecycle::last_change(job, turns).saturating_add(limits.keep))
                .chain(crate::heard::first_prune(file, limits.keep))
                .min(),
            poll,
            follow,
        })
    })
}

/// What a poll means for the job: a finished task is rendered exactly as QwenPaw's
/// `check_agent_task` would show it (and names the fork branch when it has one); a child
/// atc stopped ends with the line that says so.
fn render((job, poll): (&ToPoll, Poll)) -> Check {
    match poll {
        Poll::Record(record) if record.is_finished() => {
            let text = render::render_delivery(&job.task_id, &record, job.fork_branch.as_deref());
            let child_session = record
                .child_session()
                .filter(|s| crate::validate::label(s).is_ok())
                .map(str::to_owned);
            Check::Finished {
                child_session,
                text: match &job.stop_line {
                    Some(line) => format!("{text}\n\n{line}"),
                    None => text,
                },
                started_at: record.started_at,
                outcome: record.outcome(),
                empty: render::answer(&record.payload).is_empty(),
            }
        }
        Poll::Record(record) => Check::Running {
            started_at: record.started_at,
            turn_ended: job.turn_ended,
        },
        Poll::NotFound { detail } => Check::Lost { detail },
        Poll::Failed { error } | Poll::Denied { error } => Check::Failed { error },
    }
}

/// How the parent turn a delivery started is doing (its own task record). `None`: the
/// server did not say; ask again next tick.
fn follow(client: &impl Server, turn: &Turn) -> Option<ParentTurn> {
    let task_id = turn.turn_task_id.as_deref()?;
    let base = &turn.chat.base_url;
    let answer = client.get_task(base, task_id, &turn.chat.agent_id);
    match task::classify(answer, task_id, base, client.auth()) {
        Poll::Record(record) if record.is_finished() => Some(ParentTurn::Ended {
            status: record
                .result_status()
                .unwrap_or(record.status.as_str())
                .to_owned(),
            reply: record.final_reply(),
        }),
        Poll::Record(_) => Some(ParentTurn::Running),
        Poll::NotFound { .. } => Some(ParentTurn::Gone),
        Poll::Failed { .. } | Poll::Denied { .. } => None,
    }
}

/// True when applying `checks` to the jobs as `prepare` saw them changes none of them
/// (every task is still running, as before). Then the report gets what the polls said,
/// and nothing needs the lock: a job that another command changed meanwhile would take
/// the same polls as no change either. The jobs are looked at where the store keeps
/// them (the file as `prepare` read it, if it is still what is on disk): no copy.
fn no_news(
    store: &Store,
    polled: &[ToPoll],
    checks: &[Check],
    limits: &Limits,
    clock: &dyn Clock,
    report: &mut Report,
) -> bool {
    if !checks.iter().all(|c| matches!(c, Check::Running { .. })) {
        return false;
    }
    let now = clock.now();
    let seen = store.with_known(|file| {
        let index: HashMap<&str, &Job> = file.jobs.iter().map(|j| (j.job_id.as_str(), j)).collect();
        let mut steps = Vec::with_capacity(polled.len());
        for (p, check) in polled.iter().zip(checks) {
            let job = index.get(p.job_id.as_str())?;
            let step = lifecycle::step(
                job,
                file.turn_of(job),
                Event::Polled(check.clone()),
                now,
                limits,
            );
            if step.job != **job {
                return None;
            }
            steps.push(step);
        }
        Some(steps)
    });
    let Some(Some(steps)) = seen else {
        return false;
    };
    for step in &steps {
        report.record(&step.job, false, &step.outcomes, now);
    }
    true
}

/// Applies the polls and the followed parent turns, composes the turns, and picks what is
/// due now: turns, forwards and stops.
fn decide(
    store: &Store,
    work: &Work,
    checks: Vec<Check>,
    parents: Vec<Option<ParentTurn>>,
    tick: &Tick,
    clock: &dyn Clock,
    report: &mut Report,
) -> Result<Vec<Due>> {
    let limits = &tick.limits;
    store.update(|file| {
        let now = clock.now();
        let index = registrations(file);
        for (job, check) in work.poll.iter().zip(checks) {
            if let Some(&i) = index.get(&job.job_id) {
                apply_job(file, i, Event::Polled(check), now, limits, report);
            }
        }
        let turns = turn_index(file);
        for (turn, parent) in work.follow.iter().zip(parents) {
            if let (Some(&i), Some(parent)) = (turns.get(&turn.turn_id), parent) {
                let status = match &parent {
                    ParentTurn::Ended { status, .. } => status.clone(),
                    _ => "unknown".to_owned(),
                };
                let toast = crate::describe::toast_text(&file.turns[i], &status);
                let event = TurnEvent::ParentPolled {
                    turn: parent,
                    toast,
                };
                apply_turn(file, i, event, now, limits, report);
            }
        }
        composed(file, now, tick, report);
        keep_give_ups(file, report, now, work.heard);
        let turns = turn::deliveries(&file.turns, now, limits)
            .into_iter()
            .filter(|t| concerned(work, t))
            .map(|t| Due::Turn(t.clone()));
        let forwards = turn::forwards(&file.turns)
            .into_iter()
            .filter(|t| concerned(work, t))
            .map(|t| Due::Forward(t.clone()));
        let stops = lifecycle::to_stop(&file.jobs)
            .into_iter()
            .filter(|job| {
                work.concern
                    .as_ref()
                    .is_none_or(|(_, c)| c.poll.contains(&job.job_id))
            })
            .map(|job| Due::Stop(job.clone()));
        Ok(turns.chain(forwards).chain(stops).collect())
    })
}

/// Looks before acting: at the parent chat for a turn, at the channel for a forward.
fn look(client: &impl Server, due: &Due) -> Looked {
    match due {
        Due::Turn(t) => Looked::Turn(TurnEvent::Probed(probe(client, t))),
        // The console is always there (a toast needs no channel of its own).
        Due::Forward(t) if t.chat.channel == "console" => {
            Looked::Turn(TurnEvent::ChannelChecked(turn::Health::Healthy))
        }
        Due::Forward(t) => {
            let c = &t.chat;
            let health = client.channel_health(&c.base_url, &c.agent_id, &c.channel);
            Looked::Turn(TurnEvent::ChannelChecked(chat::health(health)))
        }
        Due::Stop(job) => {
            let event = match stop_child(client, job) {
                Ok(stopped) => Event::StopAnswered {
                    answer: stopped.answer(),
                    agent: stopped.agent,
                    chat_id: stopped.chat_id,
                },
                Err(why) => Event::StopAnswered {
                    agent: None,
                    chat_id: None,
                    answer: StopAnswer::Failed(why.message()),
                },
            };
            Looked::Job(event)
        }
    }
}

/// What a stop of the child did: where its chat was found (the agent and the chat's uuid,
/// both recorded on the job), and what came of it.
pub struct Stopped {
    /// The agent whose chats hold the child's chat, when a lookup found it there.
    pub agent: Option<String>,
    pub chat_id: Option<String>,
    pub said: StopSaid,
}

impl Stopped {
    /// The answer as the state machine takes it.
    pub fn answer(&self) -> StopAnswer {
        match self.said {
            StopSaid::Stopped => StopAnswer::Stopped,
            StopSaid::NotRunning(_) => StopAnswer::NotRunning,
        }
    }
}

/// What a stop found: it stopped the child, or there was nothing to stop, and what says so.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopSaid {
    Stopped,
    NotRunning(NotRunning),
}

/// What says the child is not running, besides QwenPaw's `{"stopped": false}` (which only
/// says nothing runs in the chat the stop went to).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotRunning {
    /// Its task record says it finished.
    Finished,
    /// The server has no record of the task (nothing of it runs there).
    NoRecord,
    /// Its chat says no turn runs there.
    ChatIdle,
}

/// Why the child could not be stopped.
pub enum StopFailed {
    /// The watch does not know the child's session.
    NoSession,
    /// The child's chat could not be looked up.
    Lookup(String),
    /// The stop could not be sent, or what came back tells nothing.
    Stop(String),
    /// QwenPaw found nothing to stop, but nothing says the child is not running (its task
    /// record says it runs, or cannot tell): why, and where to look.
    StillRunning(String),
}

impl StopFailed {
    pub fn message(&self) -> String {
        match self {
            StopFailed::NoSession => "the child's session is not known".to_owned(),
            StopFailed::Lookup(why) => format!("its chat could not be looked up ({why})"),
            StopFailed::Stop(why) | StopFailed::StillRunning(why) => why.clone(),
        }
    }
}

/// Where a child's chat is: the agent whose chats hold it, and the chat when it is listed
/// (or was recorded).
struct ChildChat {
    agent: String,
    chat: Option<String>,
    /// Whether a lookup found it (so the agent is worth recording).
    found: bool,
    /// The agents whose chats were looked through, when the agent was not known.
    searched: Vec<String>,
}

/// Finds the child's chat: on the agent it is known to run on (`--target-agent`, or where
/// an earlier stop found it), else on the asking agent, else on every other agent the
/// server lists. A watch without `--target-agent` is polled fine (the poll route ignores
/// the agent), but a stop goes to one agent's chats: sent to the wrong one, it finds
/// nothing running.
fn child_chat(
    client: &(impl Server + ?Sized),
    job: &Job,
    session: &str,
) -> Result<ChildChat, StopFailed> {
    let base = &job.base_url;
    let look = |agent: &str| {
        chat::chats(client.list_chats(base, agent, None))
            .map(|chats| chat::child_chat(&chats, session).map(|c| c.id.clone()))
    };
    let known = job
        .target
        .target_agent
        .as_deref()
        .or(job.child_agent.as_deref());
    if let Some(agent) = known {
        let chat = match &job.child_chat_id {
            Some(id) => Some(id.clone()),
            None => look(agent).map_err(|u| StopFailed::Lookup(u.message().to_owned()))?,
        };
        return Ok(ChildChat {
            agent: agent.to_owned(),
            found: chat.is_some(),
            chat,
            searched: Vec::new(),
        });
    }
    let asking = &job.target.agent_id;
    // Recorded by an atc that looked only on the asking agent.
    if let Some(id) = &job.child_chat_id {
        return Ok(ChildChat {
            agent: asking.clone(),
            chat: Some(id.clone()),
            found: false,
            searched: Vec::new(),
        });
    }
    let mut searched = vec![asking.clone()];
    if let Some(id) = look(asking).map_err(|u| StopFailed::Lookup(u.message().to_owned()))? {
        return Ok(ChildChat {
            agent: asking.clone(),
            chat: Some(id),
            found: true,
            searched,
        });
    }
    let agents = chat::agents(client.list_agents(base)).map_err(|why| {
        StopFailed::Lookup(format!("the server's agents could not be listed: {why}"))
    })?;
    for agent in agents.iter().filter(|a| *a != asking) {
        searched.push(agent.clone());
        // An agent whose chats cannot be read (disabled: 403) holds no running child.
        if let Ok(Some(id)) = look(agent) {
            return Ok(ChildChat {
                agent: agent.clone(),
                chat: Some(id),
                found: true,
                searched,
            });
        }
    }
    Ok(ChildChat {
        agent: asking.clone(),
        chat: None,
        found: false,
        searched,
    })
}

/// Stops the child of `job` (`cancel --stop`, `--stop-after`): finds its chat
/// ([`child_chat`]), then `POST /console/chat/stop` as the agent that holds it (by the
/// chat's uuid; when no chat is listed, by its session id, which QwenPaw finds among
/// `console` chats). QwenPaw's `{"stopped": false}` says only that nothing runs in the chat
/// the stop reached: the child is said not to be running only when its task record (or,
/// when that tells nothing, its chat) says so too.
pub fn stop_child(client: &(impl Server + ?Sized), job: &Job) -> Result<Stopped, StopFailed> {
    let Some(session) = &job.child_session else {
        return Err(StopFailed::NoSession);
    };
    let base = &job.base_url;
    let place = child_chat(client, job, session)?;
    let target = place.chat.as_deref().unwrap_or(session);
    let said =
        chat::stopped(client.stop_chat(base, &place.agent, target)).map_err(StopFailed::Stop)?;
    let stopped = |said| Stopped {
        agent: place.found.then(|| place.agent.clone()),
        chat_id: place.chat.clone(),
        said,
    };
    if said == chat::Stop::Stopped {
        return Ok(stopped(StopSaid::Stopped));
    }
    let poll = task::classify(
        client.get_task(base, &job.task_id, job.target.poll_agent()),
        &job.task_id,
        base,
        client.auth(),
    );
    let nowhere = if place.chat.is_none() && !place.searched.is_empty() {
        format!(
            "; its chat (session {session}) is on none of the agents the server lists ({}): watch it again with --target-agent AID, the agent submit_to_agent ran it on",
            place.searched.join(", ")
        )
    } else {
        String::new()
    };
    let reached = match &place.chat {
        Some(id) => format!("chat {id} of agent '{}'", place.agent),
        None => format!("session {session} of agent '{}'", place.agent),
    };
    match poll {
        Poll::Record(record) if record.is_finished() => {
            Ok(stopped(StopSaid::NotRunning(NotRunning::Finished)))
        }
        Poll::Record(_) => Err(StopFailed::StillRunning(format!(
            "QwenPaw found nothing running to stop in {reached}, but the task record says the child still runs{nowhere}"
        ))),
        Poll::NotFound { .. } => Ok(stopped(StopSaid::NotRunning(NotRunning::NoRecord))),
        Poll::Failed { error } | Poll::Denied { error } => {
            let idle = place
                .chat
                .as_deref()
                .map(|id| chat::running(client.chat_status(base, &place.agent, id)));
            match idle {
                Some(Ok(false)) => Ok(stopped(StopSaid::NotRunning(NotRunning::ChatIdle))),
                _ => Err(StopFailed::StillRunning(format!(
                    "QwenPaw found nothing running to stop in {reached}, and neither the task record ({error}) nor the chat says whether the child still runs{nowhere}"
                ))),
            }
        }
    }
}

/// Looks at the parent chat of a due turn. Before a POST the chat is found by its exact
/// triple, every time: it may have vanished since the last look (posting would start a
/// new one), and QwenPaw's status route calls any id idle, even a deleted chat's. A turn
/// of unknown outcome is looked for in the history of the chat it went to (the id found
/// then); when that chat is gone, in the chat the triple names now (the POST itself may
/// have started it).
fn probe(client: &impl Server, turn: &Turn) -> Probe {
    let c = &turn.chat;
    let (base, agent) = (&c.base_url, &c.agent_id);
    let reading_back = turn.state == TurnState::Unconfirmed;
    if reading_back && let Some(id) = &turn.chat_id {
        match read_back(client, turn, id) {
            Probe::NoChat => {}
            seen => return seen,
        }
    }
    let listed = chat::chats(client.list_chats(base, agent, Some((&c.user_id, &c.channel))));
    let chats = match listed {
        Ok(chats) => chats,
        Err(chat::Unusable::Refused(error)) => return Probe::Refused { error },
        Err(chat::Unusable::Unknown(error)) => return Probe::Unknown { error },
    };
    match chat::find(&chats, &c.session_id, &c.user_id, &c.channel) {
        None => Probe::NoChat,
        Some(found) if !reading_back => Probe::Chat {
            chat_id: found.id.clone(),
            running: found.running,
        },
        Some(found) if turn.chat_id.as_deref() == Some(found.id.as_str()) => Probe::NoChat,
        Some(found) => read_back(client, turn, &found.id),
    }
}

/// Reads chat `chat_id` back for `turn`'s delivery id.
fn read_back(client: &impl Server, turn: &Turn, chat_id: &str) -> Probe {
    let history = client.chat_history(&turn.chat.base_url, &turn.chat.agent_id, chat_id);
    crate::crash::point("read-back");
    let chat_id = chat_id.to_owned();
    match chat::read_back(history, &turn.turn_id) {
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
    due: &[Due],
    looked: Vec<Looked>,
    tick: &Tick,
    clock: &dyn Clock,
    intent: Intent<'_>,
    report: &mut Report,
) -> Result<Vec<Claim>> {
    let limits = &tick.limits;
    if due.is_empty() {
        return Ok(Vec::new());
    }
    store.update(|file| {
        let now = clock.now();
        // The turns are composed again from what is due now (a cancel or a re-watch may
        // have landed since the decision), so a claim posts what its turn carries now.
        composed(file, now, tick, report);
        let turns = turn_index(file);
        let jobs = registrations(file);
        let mut claims = Vec::new();
        for (due, looked) in due.iter().zip(looked) {
            match (due, looked) {
                (Due::Turn(t) | Due::Forward(t), Looked::Turn(event)) => {
                    let Some(&i) = turns.get(&t.turn_id) else {
                        continue;
                    };
                    let text = match apply_turn(file, i, event, now, limits, report) {
                        Effect::Post { text } | Effect::Forward { text } => text,
                        Effect::None => continue,
                    };
                    claims.push(Claim {
                        turn: file.turns[i].clone(),
                        forward: matches!(due, Due::Forward(_)),
                        text,
                    });
                }
                (Due::Stop(job), Looked::Job(event)) => {
                    if let Some(&i) = jobs.get(&job.job_id) {
                        apply_job(file, i, event, now, limits, report);
                    }
                }
                _ => {}
            }
        }
        keep_give_ups(file, report, now, intent.heard);
        Ok(claims)
    })
}

/// Sends one claimed thing: the turn into the parent chat, or the forward to the person.
fn send(client: &impl Server, claim: &Claim, tick: &Tick) -> TurnEvent {
    let t = &claim.turn;
    let (base, agent) = (&t.chat.base_url, &t.chat.agent_id);
    if claim.forward {
        let body = chat::forward_body(t, &claim.text);
        TurnEvent::Forwarded(chat::forwarded(client.send_message(base, agent, &body)))
    } else {
        let body = chat::turn_body(t, &claim.text, tick.turn_timeout);
        TurnEvent::Posted(chat::posted(client.post_turn(base, agent, &body)))
    }
}

/// Records what each send did on the turn that claimed it; its jobs follow.
fn record(
    store: &Store,
    claims: &[Claim],
    sent: Vec<TurnEvent>,
    tick: &Tick,
    clock: &dyn Clock,
    intent: Intent<'_>,
    report: &mut Report,
) -> Result<()> {
    let limits = &tick.limits;
    if claims.is_empty() {
        return Ok(());
    }
    store.update(|file| {
        let now = clock.now();
        let turns = turn_index(file);
        for (claim, event) in claims.iter().zip(sent) {
            if let Some(&i) = turns.get(&claim.turn.turn_id) {
                apply_turn(file, i, event, now, limits, report);
            }
        }
        // A turn a definite no opened again goes on without the jobs cancelled while it
        // was claimed.
        composed(file, now, tick, report);
        keep_give_ups(file, report, now, intent.heard);
        Ok(())
    })
}

/// Composes the file's turns (`compose`: groups and batches), with what it did in the
/// report.
fn composed(file: &mut JobFile, now: Timestamp, tick: &Tick, report: &mut Report) {
    compose::compose(file, tick.batch, now, &tick.limits, &mut |seen| {
        see(report, seen, now)
    });
}

/// What composing or following did, into the report.
fn see(report: &mut Report, seen: Seen, now: Timestamp) {
    match seen {
        Seen::Job(job, changed, outcomes) => report.record(job, changed, outcomes, now),
        Seen::Turn(turn, jobs, outcomes) => report.record_turn(turn, jobs, outcomes, now),
        Seen::Dropped(_) => {}
    }
}

/// Steps one job through one event, in place.
fn apply_job(
    file: &mut JobFile,
    i: usize,
    event: Event,
    now: Timestamp,
    limits: &Limits,
    report: &mut Report,
) {
    let job = &file.jobs[i];
    let transition = lifecycle::step(job, file.turn_of(job), event, now, limits);
    report.record(
        &transition.job,
        transition.job != *job,
        &transition.outcomes,
        now,
    );
    file.jobs[i] = transition.job;
}

/// Steps one turn through one event, in place. The effect is the caller's to carry out.
fn apply_turn(
    file: &mut JobFile,
    i: usize,
    event: TurnEvent,
    now: Timestamp,
    limits: &Limits,
    report: &mut Report,
) -> Effect {
    let transition = turn::step(&file.turns[i], event, now, limits);
    let moved = file.turns[i].state != transition.turn.state
        || file.turns[i].delivery.read_back_closed_at
            != transition.turn.delivery.read_back_closed_at;
    file.turns[i] = transition.turn;
    // A check-in it carried that is now done: its watch schedules the next one.
    if moved {
        let checked: Vec<String> = file.turns[i]
            .carries
            .iter()
            .filter(|b| b.kind.is_check_in())
            .map(|b| b.job_id.clone())
            .collect();
        for job_id in checked {
            if let Some(j) = file.jobs.iter().position(|j| j.job_id == job_id) {
                apply_job(file, j, Event::CheckInSettled, now, limits, report);
            }
        }
    }
    report.record_turn(&file.turns[i], &file.jobs, &transition.outcomes, now);
    transition.effect
}

/// Where each turn (`turn_id`) is in the file.
fn turn_index(file: &JobFile) -> HashMap<String, usize> {
    file.turns
        .iter()
        .enumerate()
        .map(|(i, t)| (t.turn_id.clone(), i))
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qwenpaw::{Answer, Transport};
    use crate::settings::{Auth, Setting, Source};
    use serde_json::Value;
    use std::time::Duration;

    /// A server whose every task is still running; nothing else is asked of it.
    struct Running(Auth);

    impl Server for Running {
        fn auth(&self) -> &Auth {
            &self.0
        }
        fn allow_insecure(&mut self, _: &str) {}
        fn get_task(&self, _: &str, _: &str, _: &str) -> Result<Answer, Transport> {
            Ok(Answer {
                status: 200,
                content_type: "application/json".into(),
                body: Ok(r#"{"status":"running","started_at":1796003454.67}"#.into()),
            })
        }
        fn list_chats(
            &self,
            _: &str,
            _: &str,
            _: Option<(&str, &str)>,
        ) -> Result<Answer, Transport> {
            unreachable!("no chat is looked at")
        }
        fn chat_status(&self, _: &str, _: &str, _: &str) -> Result<Answer, Transport> {
            unreachable!()
        }
        fn chat_history(&self, _: &str, _: &str, _: &str) -> Result<Answer, Transport> {
            unreachable!()
        }
        fn post_turn(&self, _: &str, _: &str, _: &Value) -> Result<Answer, Transport> {
            unreachable!()
        }
        fn send_message(&self, _: &str, _: &str, _: &Value) -> Result<Answer, Transport> {
            unreachable!()
        }
        fn channel_health(&self, _: &str, _: &str, _: &str) -> Result<Answer, Transport> {
            unreachable!()
        }
        fn stop_chat(&self, _: &str, _: &str, _: &str) -> Result<Answer, Transport> {
            unreachable!()
        }
        fn list_agents(&self, _: &str) -> Result<Answer, Transport> {
            unreachable!()
        }
    }

    fn copies() -> u64 {
        crate::job::JOB_COPIES.with(|n| n.get())
    }

    /// The hot path: a tick over running tasks copies each job at most twice (once for
    /// the file's update, once for the step that finds nothing changed). An earlier atc
    /// copied each job about 21 times a poll.
    #[test]
    fn a_tick_over_running_tasks_copies_each_job_at_most_twice() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.json");
        let store = Store::new(path.clone());
        let n = 200;
        let now = Timestamp::from_unix(1_800_000_000);
        store
            .update(|file| {
                for i in 0..n {
                    let mut job = Job::sample(Watch::Pending);
                    job.job_id = format!("{i:012x}");
                    job.task_id = format!("task-{i}");
                    job.registered_at = now;
                    job.started_at = Some(Timestamp::from_unix(1_796_003_454));
                    file.jobs.push(job);
                }
                Ok(())
            })
            .unwrap();
        let tick = Tick {
            state: Setting {
                value: path,
                source: Source::Default,
            },
            limits: crate::settings::default_limits(),
            concurrency: 1,
            http_timeout: Duration::from_secs(5),
            turn_timeout: None,
            auth: Auth::default(),
            kicked: false,
            batch: true,
        };
        struct At(Timestamp);
        impl Clock for At {
            fn now(&self) -> Timestamp {
                self.0
            }
        }
        let clock = At(now.saturating_add(Duration::from_secs(60)));
        // A new process: the store reads the file afresh, as a tick does.
        let store = Store::new(tick.state.value.clone());
        let before = copies();
        let report = run_with(
            &store,
            &tick,
            &mut Running(Auth::default()),
            &clock,
            Intent::TIMER,
            &mut |_| {},
        )
        .unwrap()
        .unwrap();
        let per_poll = (copies() - before) as f64 / n as f64;
        assert_eq!(report.count(Outcome::Polled), n);
        assert!(
            per_poll <= 2.0,
            "{per_poll} copies of each job per poll on the hot path"
        );
    }
}
