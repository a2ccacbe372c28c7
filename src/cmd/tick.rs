//! `atc tick`: run one pass (`pass`) and report it. Silent while nothing is given up
//! (cron mails any output); a job the pass gave up on gets one line on stderr, always
//! (that is what reaches a person: cron's mail, the journal); `-v` on stderr each failed
//! task with why, then one summary line; `-vv` also the task ids per outcome; `--json`
//! one object.

use anyhow::Result;
use serde_json::json;

use crate::cmd::print_json;
use crate::pass;
use crate::settings::{Output, Tick};
use crate::state::Store;

pub fn run(tick: &Tick, out: Output) -> Result<()> {
    let store = Store::new(tick.state.value.clone());
    let Some(report) = pass::run(&store, tick)? else {
        if out.verbose > 0 {
            crate::term::say(&format!(
                "tick: another atc tick is running (it holds {}); nothing to do",
                store.tick_lock_path().display()
            ));
        }
        if out.json {
            print_json(&json!({ "skipped": "another atc tick is running" }))?;
        }
        return Ok(());
    };
    // Whatever else was asked for: these reach a person, once, from the tick that gave up.
    for gave_up in report.gave_up() {
        crate::term::say(&gave_up.line());
    }
    if out.json {
        return print_json(&report.to_json());
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
