//! `atc tick`: run one pass (`pass`) and report it. Silent while nothing is given up
//! (cron mails any output); a job the pass gave up on gets one line on stderr, always
//! (that is what reaches a person: cron's mail, the journal); `-v` on stderr each failed
//! task with why, then one summary line; `-vv` also the task ids per outcome; `--json`
//! one object.
//!
//! Two things make a tick run more than one pass, both bounded:
//! - a mark (`<job file>.tick.again`) left by a kicked tick, or atc's QwenPaw plugin, that
//!   found this tick running: one more pass after this one, so no turn's end is lost to
//!   the tick lock;
//! - `--kicked`: QwenPaw runs the plugin's end-of-turn hook a few ms *before* the task
//!   record says `finished` (and before the chat is idle), so a task still reading
//!   `running`, or a parent still busy, is looked at again for up to [`KICK_WINDOW`].

use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::json;

use crate::cmd::print_json;
use crate::pass;
use crate::report::{GiveUp, LogEntry, Outcome, Report};
use crate::settings::{Output, Tick};
use crate::state::Store;
use crate::time::Timestamp;

/// How long a kicked tick keeps looking at a task that just ended but still reads running.
pub const KICK_WINDOW: Duration = Duration::from_secs(2);
/// The pauses between a kicked tick's passes (they add up to less than the window).
static KICK_PAUSES: [Duration; 4] = [
    Duration::from_millis(100),
    Duration::from_millis(250),
    Duration::from_millis(500),
    Duration::from_millis(800),
];

pub fn run(tick: &Tick, out: Output) -> Result<()> {
    let store = Store::new(tick.state.value.clone());
    // A give-up reaches a person (cron's mail, the journal) whatever else was asked for,
    // once, as soon as it is saved: a later save of the pass may yet fail.
    let heard = &mut |gave_up: &GiveUp| crate::term::say(&gave_up.line());
    let mut shown = |report: &Report| show(report, out);
    let reports = passes(
        &store,
        tick,
        &mut |heard| pass::run(&store, tick, heard),
        &mut RealWindow::new(),
        heard,
        &mut shown,
    )?;
    match reports.last() {
        Some(report) if out.json => print_json(&with_passes(report.to_json(), reports.len())),
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
}

/// [`Window`] on the wall clock.
pub struct RealWindow {
    started: Instant,
    pauses: std::slice::Iter<'static, Duration>,
}

impl RealWindow {
    pub fn new() -> RealWindow {
        RealWindow {
            started: Instant::now(),
            pauses: KICK_PAUSES.iter(),
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
        if self.started.elapsed() >= KICK_WINDOW {
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
}

/// One pass (`pass::run`, or the simulation's `pass::run_with`), telling each give-up it
/// saved to the callback it is given. `None`: another tick holds the tick lock.
pub type Pass<'a> = dyn FnMut(&mut dyn FnMut(&GiveUp)) -> Result<Option<Report>> + 'a;

/// The passes of one `atc tick`: one, then one more for each mark a kicked tick (or the
/// plugin) left meanwhile, and, for a kicked tick, looks again while a task still reads
/// running or a parent is still busy, within the `window`. `pass` runs one pass (`None`:
/// another tick holds the tick lock); `shown` gets each pass's report. Returns the
/// reports, in order (none: another tick was running, and took this one's mark).
pub fn passes(
    store: &Store,
    tick: &Tick,
    pass: &mut Pass<'_>,
    window: &mut dyn Window,
    heard: &mut dyn FnMut(&GiveUp),
    shown: &mut dyn FnMut(&Report) -> Result<()>,
) -> Result<Vec<Report>> {
    let mut reports = Vec::new();
    // A mark means a turn just ended too: from then on this tick looks as a kicked one.
    let mut kicked = tick.kicked;
    let mut marked = false;
    loop {
        let Some(report) = pass(heard)? else {
            if reports.is_empty() && tick.kicked && !leave_mark(store)? {
                // The running tick let go meanwhile: this one runs after all.
                continue;
            }
            break;
        };
        if kicked {
            let why = if marked {
                "another turn ended meanwhile: a mark".to_owned()
            } else if reports.is_empty() {
                "a QwenPaw turn ended".to_owned()
            } else {
                format!("pass {}", reports.len() + 1)
            };
            marked = false;
            store.log(&[LogEntry::tick("kicked", Some(why), Timestamp::now())])?;
        }
        let waiting = still_waiting(&report);
        shown(&report)?;
        reports.push(report);
        if store.take_tick_again() {
            // A fresh window for the turn that left the mark.
            kicked = true;
            marked = true;
            window.restart();
            continue;
        }
        if kicked && waiting && window.pause(store) {
            continue;
        }
        break;
    }
    Ok(reports)
}

/// A kicked tick that found another tick running leaves it the mark, then tries the lock
/// once more: a tick that let go after the mark was written has seen it or will (it looks
/// after letting go), and one that let go before may have missed it. Returns false when
/// the lock is free now (the caller runs the pass itself, and takes the mark).
fn leave_mark(store: &Store) -> Result<bool> {
    store.mark_tick_again()?;
    match store.try_lock_tick()? {
        Some(_free) => {
            store.take_tick_again();
            Ok(false)
        }
        None => Ok(true),
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

/// A task still reading running, or a delivery held by a busy parent: what a turn that
/// just ended changes within a moment.
fn still_waiting(report: &Report) -> bool {
    report.count(Outcome::Running) > 0 || report.count(Outcome::Busy) > 0
}

fn with_passes(mut report: serde_json::Value, passes: usize) -> serde_json::Value {
    if passes > 1 {
        report["passes"] = json!(passes);
    }
    report
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
    if out.verbose > 0 {
        for line in report.failures() {
            crate::term::say(&line);
        }
        crate::term::say(&report.summary());
    }
    Ok(())
}
