//! `atc tick`: run one pass (`pass`) and report it. Silent while nothing is given up
//! (cron mails any output); a job the pass gave up on gets one line on stderr (that is
//! what reaches a person: cron's mail, the journal); `-v` on stderr each failed task with
//! why, then one summary line; `-vv` also the task ids per outcome; `--json` one object
//! for every pass together.
//!
//! **Who hears a give-up.** A tick a person can hear (not `--kicked`, its stderr not
//! `/dev/null`) says each give-up once, as soon as the save that records it is made, and
//! then the ones earlier ticks left unsaid. A tick nobody hears (atc's QwenPaw plugin
//! starts its kicks and its cadence's ticks with stderr to `/dev/null`) says nothing: its
//! give-ups are marked unsaid in the job file (`heard`), its `--json` lists them with
//! their `line` (the plugin writes those into QwenPaw's log), and the next tick a person
//! hears says them.
//!
//! **What a kicked tick looks at.** The plugin's hook hands it the turn that ended in the
//! environment ([`KICK_ENV`], a JSON list of `{agent_id, session_id, user_id, channel}`;
//! never on the command line, which other users' `ps` shows, and never in a log): the
//! pass polls only the watches that turn may concern and delivers what waits for its
//! chat (`lifecycle::kick`); a turn's end that concerns nothing costs no request. Without
//! it (an older plugin) the pass looks at everything, as before.
//!
//! Two things make a tick run more than one pass, both bounded:
//! - a mark (`<job file>.tick.again`) left by a kicked tick, or atc's QwenPaw plugin, that
//!   found this tick running, holding the turns that ended: one more pass after this one
//!   for what they concern, so no turn's end is lost to the tick lock;
//! - a turn's end: QwenPaw runs the plugin's hook a few ms *before* the task record says
//!   `finished` (and before the chat is idle), so a kicked pass first waits [`SETTLE`],
//!   and then, while a child the ended turn may be still reads `running` or its chat is
//!   still busy, looks again, for up to [`KICK_WINDOW`] (only at what the turn concerns).

use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::json;

use crate::cmd::print_json;
use crate::lifecycle::kick::Ended;
use crate::pass::{self, Intent, Scope};
use crate::report::{LogEntry, Outcome, Report};
use crate::settings::{Output, Tick};
use crate::state::Store;
use crate::time::Timestamp;

/// The variable the plugin's hook hands a kicked tick the turns that ended in: a JSON
/// list of `{"agent_id", "session_id", "user_id", "channel"}` (`lifecycle::kick::Ended`).
/// Read only by `atc tick --kicked`; an empty list: the turns are in the mark (the
/// plugin's kick for a mark its own tick left behind).
pub const KICK_ENV: &str = "ATC_KICK";

/// How long a kicked tick keeps looking at a task that just ended but still reads running.
pub const KICK_WINDOW: Duration = Duration::from_secs(2);
/// How long a kicked tick waits before it first looks at what a turn's end concerns: the
/// record says `finished` 5–10 ms after the hook ran (contract §13); one look after this
/// usually sees it, where one at once usually sees `running`.
pub const SETTLE: Duration = Duration::from_millis(100);
/// The pauses between a kicked tick's passes (they add up to less than the window).
pub static KICK_PAUSES: [Duration; 4] = [
    Duration::from_millis(100),
    Duration::from_millis(250),
    Duration::from_millis(500),
    Duration::from_millis(800),
];

pub fn run(tick: &Tick, out: Output) -> Result<()> {
    let store = Store::new(tick.state.value.clone());
    // A give-up reaches a person (cron's mail, the journal) whatever else was asked for,
    // once, as soon as it is saved: a later save of the pass may yet fail.
    let heard = !tick.kicked && !crate::term::stderr_discarded();
    let kick = tick.kicked.then(|| match std::env::var(KICK_ENV) {
        Ok(text) => Ended::from_kick(&text),
        // An older plugin (or a person): a turn ended, not known which.
        Err(_) => Ended::Unknown,
    });
    // A give-up line stderr could not take is unsaid again once the passes are done.
    let mut lost = Vec::new();
    let mut say = |line: &str| {
        if !crate::term::try_say(line) {
            lost.push(line.to_owned());
        }
    };
    let mut shown = |report: &Report| show(report, out);
    let reports = passes(
        &store,
        kick,
        heard,
        &mut |intent, say| pass::run(&store, tick, intent, say),
        &mut RealWindow::new(),
        &mut say,
        &mut shown,
    )?;
    if !lost.is_empty() {
        store.update(|file| {
            crate::heard::unsay(file, &lost);
            Ok(())
        })?;
    }
    let merged = reports.into_iter().reduce(|mut all, later| {
        all.absorb(later);
        all
    });
    match merged {
        Some(report) if out.json => print_json(&report.to_json()),
        Some(_) => Ok(()),
        None => {
            if out.verbose > 0 {
                crate::term::say(&format!(
                    "tick: another atc tick is running (it holds {}); {}",
                    store.tick_lock_path().display(),
                    if tick.kicked {
                        "it makes one more pass for this one"
                    } else {
                        "nothing to do"
                    }
                ));
            }
            if out.json {
                print_json(&json!({ "skipped": "another atc tick is running" }))?;
            }
            Ok(())
        }
    }
}

/// How a tick waits between the passes a turn's end asks for: the real one sleeps (less
/// when a mark arrives) within [`KICK_WINDOW`]; the simulation's runs other processes'
/// operations instead.
pub trait Window {
    /// A turn ended (the kick, or a mark): the window starts again.
    fn restart(&mut self);
    /// Waits for the next look, if the window allows one more.
    fn pause(&mut self, store: &Store) -> bool;
    /// Waits [`SETTLE`] before a first look at what a turn's end concerns (the pass calls
    /// it once it knows the turn concerns something).
    fn settle(&self, store: &Store);
}

/// [`Window`] on the wall clock.
pub struct RealWindow {
    started: Instant,
    pauses: std::slice::Iter<'static, Duration>,
    /// [`KICK_WINDOW`] and [`SETTLE`] (a test's own, to be independent of the clock).
    window: Duration,
    settle: Duration,
}

impl RealWindow {
    pub fn new() -> RealWindow {
        RealWindow::lasting(KICK_WINDOW, SETTLE)
    }

    fn lasting(window: Duration, settle: Duration) -> RealWindow {
        RealWindow {
            started: Instant::now(),
            pauses: KICK_PAUSES.iter(),
            window,
            settle,
        }
    }
}

impl Default for RealWindow {
    fn default() -> RealWindow {
        RealWindow::new()
    }
}

impl Window for RealWindow {
    fn restart(&mut self) {
        self.started = Instant::now();
        self.pauses = KICK_PAUSES.iter();
    }

    fn pause(&mut self, store: &Store) -> bool {
        if self.started.elapsed() >= self.window {
            return false;
        }
        match self.pauses.next() {
            Some(pause) => {
                pause_unless_marked(store, *pause);
                true
            }
            None => false,
        }
    }

    fn settle(&self, store: &Store) {
        pause_unless_marked(store, self.settle);
    }
}

/// One pass (`pass::run`, or the simulation's `pass::run_with`), as `intent` asks, saying
/// each give-up line a person must hear to the callback it is given. `None`: another
/// tick holds the tick lock.
pub type Pass<'a> = dyn FnMut(Intent<'_>, &mut dyn FnMut(&str)) -> Result<Option<Report>> + 'a;

/// What a pass serving these ended turns looks at (`None`: no turn ended, the timer's).
fn scope_of(ended: &Option<Ended>) -> Scope {
    match ended {
        None => Scope::All,
        Some(Ended::Unknown) => Scope::AnyTurn,
        Some(Ended::Known(ends)) => Scope::Turns(ends.clone()),
    }
}

/// The passes of one `atc tick`: one, then one more for each mark a kicked tick (or the
/// plugin) left meanwhile, and, for turns that ended, looks again while what they concern
/// is still on its way, within the `window`. `kick`: the turns a kicked tick was started
/// for (`None`: not kicked). `heard`: a person reads the tick's stderr. `pass` runs one
/// pass (`None`: another tick holds the tick lock); `say` gets each line a person hears;
/// `shown` gets each pass's report. Returns the reports, in order (none: another tick was
/// running, and took this one's mark).
pub fn passes(
    store: &Store,
    kick: Option<Ended>,
    heard: bool,
    pass: &mut Pass<'_>,
    window: &mut dyn Window,
    say: &mut dyn FnMut(&str),
    shown: &mut dyn FnMut(&Report) -> Result<()>,
) -> Result<Vec<Report>> {
    let mut ended = kick;
    // Turns that ended while a tick ran and that it let go without taking: the plugin
    // starts a kick for them (an empty list), and any kick that knows its turn takes them.
    if matches!(ended, Some(Ended::Known(_)))
        && let Some(text) = store.take_tick_again()
    {
        ended = ended.map(|e| e.join(Ended::from_mark(&text)));
    }
    let mut scope = scope_of(&ended);
    let mut reports = Vec::new();
    let mut marked = false;
    let mut fresh = true;
    loop {
        let settle = || window.settle(store);
        let intent = Intent {
            scope: &scope,
            heard,
            // Only a pass for turns new to this tick waits (the window's looks do not).
            settle: fresh.then_some(&settle as &dyn Fn()),
        };
        fresh = false;
        let Some(report) = pass(intent, say)? else {
            if reports.is_empty()
                && let Some(mine) = &ended
                && let Some(all) = leave_mark(store, mine)?
            {
                // The running tick let go meanwhile: this one runs after all.
                ended = Some(all);
                scope = scope_of(&ended);
                fresh = true;
                continue;
            }
            break;
        };
        if ended.is_some() && !report.is_unconcerned() {
            let why = if marked {
                "another turn ended meanwhile: a mark".to_owned()
            } else if reports.is_empty() {
                "a QwenPaw turn ended".to_owned()
            } else {
                format!("pass {}", reports.len() + 1)
            };
            store.log(&[LogEntry::tick("kicked", Some(why), Timestamp::now())])?;
        }
        marked = false;
        // A kick that names no turn looks again only for a delivery a busy parent held: its
        // looks again poll nothing, so a task that read running would read it still.
        let waiting = match scope {
            Scope::All => false,
            Scope::AnyTurn | Scope::AnyTurnAgain => report.count(Outcome::Busy) > 0,
            Scope::Turns(_) => report.wants_another_look(),
        };
        shown(&report)?;
        reports.push(report);
        if let Some(text) = store.take_tick_again() {
            // A fresh window for the turns that left the mark.
            let more = Ended::from_mark(&text);
            ended = Some(match ended {
                Some(mine) => mine.join(more),
                None => more,
            });
            scope = scope_of(&ended);
            marked = true;
            fresh = true;
            window.restart();
            continue;
        }
        if waiting && window.pause(store) {
            // A kick that names no turn polled every watch once: looking again, it only
            // delivers.
            if scope == Scope::AnyTurn {
                scope = Scope::AnyTurnAgain;
            }
            continue;
        }
        break;
    }
    Ok(reports)
}

/// A kicked tick that found another tick running leaves it the mark (the turns it was
/// started for), then tries the lock once more: a tick that let go after the mark was
/// written has seen it or will (it looks after letting go), and one that let go before may
/// have missed it. Returns the turns to serve when the lock is free now (the caller runs
/// the pass itself: its own and any others the mark held).
fn leave_mark(store: &Store, ended: &Ended) -> Result<Option<Ended>> {
    store.mark_tick_again(&ended.to_mark())?;
    match store.try_lock_tick()? {
        Some(_free) => Ok(Some(match store.take_tick_again() {
            Some(text) => ended.clone().join(Ended::from_mark(&text)),
            None => ended.clone(),
        })),
        None => Ok(None),
    }
}

/// Sleeps `pause`, or less when a mark arrives meanwhile (a turn ended: look now).
fn pause_unless_marked(store: &Store, pause: Duration) {
    const STEP: Duration = Duration::from_millis(25);
    let until = Instant::now() + pause;
    while Instant::now() < until && !store.tick_again_path().exists() {
        std::thread::sleep(STEP.min(until.saturating_duration_since(Instant::now())));
    }
}

fn show(report: &Report, out: Output) -> Result<()> {
    if out.json || out.quiet {
        return Ok(());
    }
    if out.verbose > 2 {
        crate::term::say(&report.timing());
    }
    if out.verbose > 1 {
        for line in report.detail() {
            crate::term::say(&line);
        }
    }
    if out.verbose > 0 && report.is_unchanged() {
        crate::term::say(
            "tick: nothing to do: every watch has ended and the job file is as the last tick found it",
        );
        return Ok(());
    }
    if out.verbose > 0 && report.is_unconcerned() {
        crate::term::say(
            "tick: nothing to do: the QwenPaw turn that ended concerns no watch and no waiting parent",
        );
        return Ok(());
    }
    if out.verbose > 0 {
        for line in report.failures() {
            crate::term::say(&line);
        }
        crate::term::say(&report.summary());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_secs(3600);

    /// A store in `dir`, and the thread that leaves its mark `after` a while.
    fn marked_after(
        dir: &std::path::Path,
        after: Duration,
    ) -> (Store, std::thread::JoinHandle<()>) {
        let store = Store::new(dir.join("jobs.json"));
        let marking = store.clone();
        let thread = std::thread::spawn(move || {
            std::thread::sleep(after);
            marking.mark_tick_again("").unwrap();
        });
        (store, thread)
    }

    #[test]
    fn a_pause_and_the_settle_last_until_a_mark_arrives() {
        let pause = |store: &Store| pause_unless_marked(store, LONG);
        let settle = |store: &Store| RealWindow::lasting(LONG, LONG).settle(store);
        for (name, wait) in [("pause", &pause as &dyn Fn(&Store)), ("settle", &settle)] {
            let dir = tempfile::tempdir().unwrap();
            let (store, thread) = marked_after(dir.path(), Duration::from_millis(200));
            wait(&store);
            assert!(
                store.tick_again_path().exists(),
                "{name} returned before the mark"
            );
            thread.join().unwrap();
        }
    }

    /// With a mark there, no pause sleeps: the window gives its four pauses, then none,
    /// and a turn's end (a restart) gives them again; a window that is over gives none.
    #[test]
    fn the_window_gives_its_pauses_and_a_restart_gives_them_again() {
        let dir = tempfile::tempdir().unwrap();
        let (store, thread) = marked_after(dir.path(), Duration::ZERO);
        thread.join().unwrap();
        let mut window = RealWindow::lasting(LONG, LONG);
        let pauses = |window: &mut RealWindow| {
            std::iter::from_fn(|| window.pause(&store).then_some(()))
                .take(KICK_PAUSES.len() + 1)
                .count()
        };
        assert_eq!(pauses(&mut window), KICK_PAUSES.len());
        assert_eq!(pauses(&mut window), 0);
        window.restart();
        assert_eq!(pauses(&mut window), KICK_PAUSES.len());
        let mut over = RealWindow::lasting(Duration::ZERO, LONG);
        assert_eq!(pauses(&mut over), 0);
    }
}
