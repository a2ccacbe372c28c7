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

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use anyhow::Result;

use crate::job::{Job, Watch};
use crate::job_file::JobFile;
use crate::lifecycle::compose::{self, Seen};
use crate::lifecycle::kick::{self, Concern, TurnEnd};
use crate::lifecycle::{self, Check, Event, Limits, StopAnswer, backoff};
use crate::qwenpaw::chat::{self, ReadBack};
use crate::qwenpaw::task::{self, Poll};
use crate::qwenpaw::{Client, Server, render};
use crate::report::{GiveUp, LogEntry, Outcome, Report};
use crate::settings::Tick;
use crate::state::Store;
use crate::time::{Clock, SystemClock, Timestamp};

mod heartbeat;
mod look;
mod parallel;
mod poll;
mod stop;

use crate::turn::{self, Effect, ParentTurn, Probe, Turn, TurnEvent, TurnState};
use heartbeat::{CacheKey, Kinds, Settled};
pub use heartbeat::{Cadence, Heartbeat, TICK_STALE};
use look::look;
use parallel::parallel;
pub use stop::{StopFailed, already_ended, stop_child};

/// What one pass looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Everything: the timer's pass, a person's, the plugin's cadence.
    All,
    /// Everything, right after a QwenPaw turn ended, not known which (a kick of an older
    /// plugin, a bare mark): any poll may read a child's stale `running`.
    AnyTurn,
    /// Looking again after an [`Scope::AnyTurn`] pass: what is due goes, and no watch is
    /// polled again (a kick that names no turn costs each watch one poll at most).
    AnyTurnAgain,
    /// Only what these ended turns concern (`lifecycle::kick`): a kicked pass.
    Turns(Vec<TurnEnd>),
}

impl Scope {
    /// Whether a pass of this scope polls every watch due (a scheduled pass's does; one
    /// limited to some turns, or looking again, does not).
    fn sweeps(&self) -> bool {
        matches!(self, Scope::All | Scope::AnyTurn)
    }

    /// The ended turns it is limited to, if it is.
    fn ends(&self) -> Option<&[TurnEnd]> {
        match self {
            Scope::Turns(ends) => Some(ends),
            Scope::All | Scope::AnyTurn | Scope::AnyTurnAgain => None,
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
    /// atc's stop of it was answered "stopped": the line says so only if the task's
    /// record then reads cancelled (a stop that hit another child did not stop this one).
    stopped: bool,
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
            stopped: job.stopped_at.is_some(),
            turn_ended,
            unknown,
        }
    }
}

/// What `prepare` chose: tasks to poll, delivered turns to follow.
#[cfg_attr(test, derive(Default))]
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
#[derive(Debug)]
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
    // Which kind of tick ran last, each kind's time kept. A scheduled tick's later pass,
    // for the turns a kick's mark names, polls only what they concern: a watch's back-off
    // counts from the last scheduled pass that polled every watch due and finished.
    let kinds = Kinds::after(
        &previous,
        now,
        tick.kicked,
        tick.cadence,
        tick.server.as_deref(),
        intent.scope.sweeps(),
    );
    let key = CacheKey::of(limits);
    if let (Some(settled), Some(print)) = (&previous.settled, store.fingerprint())
        && settled.file == print
        && settled.key == key
        && settled.until.is_none_or(|until| now <= until)
        && !(settled.unsaid && intent.heard)
    {
        let beat = Heartbeat::of(&kinds.done(), previous.settled);
        single_flight.stamp(&beat.to_line())?;
        return Ok(Some(Report::unchanged()));
    }
    single_flight.stamp(&Heartbeat::of(&kinds, None).to_line())?;
    // Stamped when the pass is done: every save it needed was made.
    let done = kinds.done();
    let finished =
        |lock: &mut crate::state::lock::Guard| lock.stamp(&Heartbeat::of(&done, None).to_line());
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
    // The servers whose plugin ticks (this tick's own included), and when the last
    // scheduled pass that polled every watch due finished: what a watch's back-off counts
    // from. A kicked tick has none.
    let schedule = (!tick.kicked).then(|| Heartbeat {
        plugins: kinds.plugins.clone(),
        ..previous.clone()
    });
    let work = prepare(store, limits, clock, intent, schedule.as_ref(), &mut report)?;
    announce(&mut report);
    lap(&mut report, "prepare");
    store.log(&report.take_log())?;
    if work.poll.is_empty() && work.follow.is_empty() && work.settled {
        // Nothing watched and nothing on its way: no second load, no save; and the next
        // tick need not even read the file while it stays as it is (unless it holds a
        // give-up nobody has heard and a person hears that tick: it says it). The version
        // stamped is the one the pass read under the lock: one saved since is a change.
        if let Some(file) = store.known_fingerprint() {
            let settled = Settled {
                file,
                key,
                until: work.first_prune,
                unsaid: work.unsaid,
            };
            let beat = Heartbeat::of(&done, Some(settled));
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
    let polls = parallel(client, &work.poll, workers, |job| {
        let answer = client.get_task(&job.base_url, &job.task_id, &job.agent);
        task::classify(answer, &job.task_id, &job.base_url, client.auth())
    });
    let parents = parallel(client, &work.follow, workers, |turn| {
        poll::parent_turn(client, turn)
    });
    let checks: Vec<Check> = work.poll.iter().zip(polls).map(poll::render).collect();
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
        && poll::no_news(store, &work.poll, &checks, limits, clock, &mut report)
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
    let looked = parallel(client, &due, workers, |due| look(client, due));
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
    let sent = parallel(client, &claims, workers, |claim| send(client, claim, tick));
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
            && (turn::is_due_when(t, now, limits, true)
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
    schedule: Option<&Heartbeat>,
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
        let index = lifecycle::Turns::of(&turns);
        file.jobs.retain(|job| {
            let prune = lifecycle::prunable(job, &index, now, limits);
            if prune {
                report.add(Outcome::Pruned, &job.task_id);
                let turn = index.of_job(job);
                let mut entry = LogEntry::of("pruned", job, now);
                entry.status = Some(crate::status::status(job, turn));
                report.log(entry);
            }
            !prune
        });
        drop(index);
        let jobs: std::collections::HashSet<&str> =
            file.jobs.iter().map(|j| j.job_id.as_str()).collect();
        file.turns = turns
            .into_iter()
            .filter(|t| !turn::prunable(t, now, limits, |id| jobs.contains(id)))
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
        let index = lifecycle::Turns::of(turns);
        let turn_ended = *intent.scope != Scope::All;
        let again = *intent.scope == Scope::AnyTurnAgain;
        let poll = lifecycle::to_poll(jobs)
            .into_iter()
            // A scheduled pass polls a child whose turn's end the plugin kicks only on its
            // back-off (or at its own times); a kick polls what it concerns.
            .filter(|job| {
                turn_ended
                    || schedule.is_none_or(|s| {
                        let kicking = s.kicking(&job.base_url, now, limits.poll_ceiling);
                        backoff::due(job, kicking, s.last_swept_at, now, limits)
                    })
            })
            .filter(|job| {
                !again
                    && concern
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
            // A delivered turn still to be followed keeps the file unsettled, even when
            // this pass (a kick for another chat) does not follow it.
            settled: lifecycle::settled(jobs, &index)
                && turn::to_follow(turns, now, limits).is_empty(),
            only_watching: turns.iter().all(turn::is_settled)
                && jobs.iter().all(|job| {
                    (job.watch == Watch::Pending && !job.check_in)
                        || lifecycle::settled_job(job, &index)
                }),
            first_prune: jobs
                .iter()
                .map(|job| lifecycle::last_change(job, &index).saturating_add(limits.keep))
                .chain(crate::heard::first_prune(file, limits.keep))
                .min(),
            poll,
            follow,
        })
    })
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
        let mut went_up: HashSet<String> = HashSet::new();
        for (turn, parent) in work.follow.iter().zip(parents) {
            if let (Some(&i), Some(parent)) = (turns.get(&turn.turn_id), parent) {
                let status = match &parent {
                    ParentTurn::Ended { status, .. } => status.clone(),
                    _ => "unknown".to_owned(),
                };
                let toast = crate::describe::toast_text(&file.turns[i], &status);
                // A reply woken in a watched child's chat goes up to its parent (issue 37),
                // opened in the same save as the end that decides it: at most once.
                let (up, opened) = lifecycle::tree::up(
                    &file.jobs,
                    &lifecycle::Turns::of(&file.turns),
                    &file.turns[i],
                    &parent,
                    now,
                    limits,
                )
                .map_or((None, None), |(up, opened)| (Some(up), opened));
                let event = TurnEvent::ParentPolled {
                    turn: parent,
                    toast,
                    up,
                };
                apply_turn(file, i, event, now, limits, report);
                if let Some(mut opened) = opened {
                    while file.turns.iter().any(|t| t.turn_id == opened.turn_id) {
                        opened.turn_id.push_str("-2");
                    }
                    report.record_turn(&opened, &file.jobs, &[Outcome::FollowUp], now);
                    went_up.insert(opened.turn_id.clone());
                    file.turns.push(opened);
                }
            }
        }
        composed(file, now, tick, report);
        keep_give_ups(file, report, now, work.heard);
        // A kick for a chat whose turn just ended: what waits out that chat's back-off
        // (a 409, a busy look) goes now.
        let freed = |t: &Turn| {
            work.concern
                .as_ref()
                .is_some_and(|(ends, _)| kick::concerns_chat(ends, &t.chat))
        };
        let turns = turn::deliveries(&file.turns, now, limits, freed)
            .into_iter()
            .filter(|t| concerned(work, t) || went_up.contains(&t.turn_id))
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

#[cfg(test)]
mod tests;
