//! Every give-up heard, wherever it was decided.
//!
//! A tick says each job or turn it gives up on in one line on stderr
//! (`describe::GiveUp::line`), for a person: cron's mail, the journal, a terminal. A tick
//! nobody hears cannot: one atc's QwenPaw plugin started (a kick as a turn ended, or the
//! plugin's cadence), whose stderr goes to /dev/null. So every give-up is also a record of
//! its own in the job file ([`GiveUpRecord`], `give_ups`), saved in the same save as the
//! decision, said or unsaid. The next tick a person hears says the unsaid ones, once, in
//! the save that marks them said; `atc status` marks them, `atc doctor` lists the give-ups
//! of the last day. A record goes `--keep` after it was said; an unsaid one stays until it
//! is (at most [`MAX_UNSAID`] of them).
//!
//! The mark lives on a record of its own, not on the job or the turn: a turn can be given
//! up, put back by `redeliver` and given up again (two give-ups, two lines); an abandoned
//! job's notice turn can be given up too (a job's give-up and its turn's); and the line said
//! later must be the one decided then, not one worded from what the records say now.

use std::time::Duration;

use crate::describe::GiveUp;
use crate::job_file::{GiveUpRecord, JobFile};
use crate::time::Timestamp;

/// How far back `atc doctor` lists give-ups.
pub const RECENT: Duration = Duration::from_secs(24 * 3600);

/// The most give-ups kept unsaid (with atc's plugin alone, nobody may run a tick a person
/// hears for months); past it the oldest unsaid ones go, as said ones do after `--keep`.
pub const MAX_UNSAID: usize = 500;

/// Records the give-ups a tick just decided, in the save that records the decisions:
/// said now when `heard` (the caller says each line once that save is made), unsaid
/// otherwise.
pub fn record(file: &mut JobFile, decided: &[GiveUp], now: Timestamp, heard: bool) {
    file.give_ups.extend(decided.iter().map(|g| GiveUpRecord {
        at: now,
        task_id: g.task_id.clone(),
        with: g.with.clone(),
        line: g.line(),
        said_at: heard.then_some(now),
    }));
}

/// Marks every unsaid give-up said, now, and returns their lines in the order they were
/// decided: the caller says them once the save that marks them is made (as a give-up of
/// its own is: at most once, never twice).
pub fn say_unsaid(file: &mut JobFile, now: Timestamp) -> Vec<String> {
    file.give_ups
        .iter_mut()
        .filter(|r| r.is_unsaid())
        .map(|r| {
            r.said_at = Some(now);
            r.line.clone()
        })
        .collect()
}

/// The give-ups whose lines could not be written (`lines`) are unsaid again: a later tick
/// a person hears says them.
pub fn unsay(file: &mut JobFile, lines: &[String]) {
    for r in &mut file.give_ups {
        if r.said_at.is_some() && lines.contains(&r.line) {
            r.said_at = None;
        }
    }
}

/// Whether the file holds a give-up nobody has heard yet.
pub fn any_unsaid(file: &JobFile) -> bool {
    file.give_ups.iter().any(GiveUpRecord::is_unsaid)
}

/// Drops the records said more than `keep` ago, and the oldest unsaid ones past
/// [`MAX_UNSAID`]; an unsaid one is otherwise kept until a tick a person hears says it.
/// Returns how many went.
pub fn prune(file: &mut JobFile, now: Timestamp, keep: Duration) -> usize {
    let before = file.give_ups.len();
    file.give_ups
        .retain(|r| r.said_at.is_none_or(|said| said.elapsed_at(now) <= keep));
    let mut unsaid = file.give_ups.iter().filter(|r| r.is_unsaid()).count();
    file.give_ups.retain(|r| {
        let drop = r.is_unsaid() && unsaid > MAX_UNSAID;
        unsaid -= usize::from(drop);
        !drop
    });
    before - file.give_ups.len()
}

/// When the first said record becomes old enough to prune.
pub fn first_prune(file: &JobFile, keep: Duration) -> Option<Timestamp> {
    file.give_ups
        .iter()
        .filter_map(|r| r.said_at)
        .map(|said| said.saturating_add(keep))
        .min()
}

/// The give-ups of the last day ([`RECENT`]), oldest first.
pub fn recent(file: &JobFile, now: Timestamp) -> Vec<&GiveUpRecord> {
    file.give_ups
        .iter()
        .filter(|r| r.at.elapsed_at(now) <= RECENT)
        .collect()
}

/// Whether a give-up nobody has heard yet names `task_id`.
pub fn unsaid_for<'a>(file: &'a JobFile, task_id: &str) -> Option<&'a GiveUpRecord> {
    file.give_ups
        .iter()
        .find(|r| r.is_unsaid() && r.names(task_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn give_up(task: &str, with: &[&str]) -> GiveUp {
        GiveUp {
            task_id: task.into(),
            status: "misrouted".into(),
            reason: "the parent chat does not exist, so nothing was posted".into(),
            with: with.iter().map(|t| (*t).to_owned()).collect(),
            batch: true,
            next: format!("`atc status {task}` names the chat"),
        }
    }

    #[test]
    fn unsaid_give_ups_are_said_once_in_order_and_pruned_after_keep() {
        let mut file = JobFile::default();
        let t0 = Timestamp::from_unix(1_800_000_000);
        record(&mut file, &[give_up("task-a", &["task-b"])], t0, false);
        record(&mut file, &[give_up("task-c", &[])], t0, true);
        let t1 = t0.saturating_add(Duration::from_secs(60));
        record(&mut file, &[give_up("task-d", &[])], t1, false);
        assert!(any_unsaid(&file));
        assert!(unsaid_for(&file, "task-b").is_some(), "named as carried");
        assert!(unsaid_for(&file, "task-c").is_none(), "said when decided");
        let lines = say_unsaid(&mut file, t1);
        assert_eq!(
            lines,
            [
                give_up("task-a", &["task-b"]).line(),
                give_up("task-d", &[]).line()
            ]
        );
        assert!(!any_unsaid(&file));
        assert!(say_unsaid(&mut file, t1).is_empty(), "once");
        assert_eq!(file.give_ups[0].said_at, Some(t1));
        assert_eq!(file.give_ups[1].said_at, Some(t0));
        let keep = Duration::from_secs(3600);
        assert_eq!(first_prune(&file, keep), Some(t0.saturating_add(keep)));
        assert_eq!(recent(&file, t1).len(), 3);
        assert_eq!(prune(&mut file, t0.saturating_add(keep), keep), 0);
        // Said at t0 (task-c) goes first; the two said at t1 a minute later.
        let gone = prune(
            &mut file,
            t0.saturating_add(keep + Duration::from_secs(1)),
            keep,
        );
        assert_eq!(gone, 1);
        assert_eq!(file.give_ups.len(), 2);
        assert_eq!(
            prune(
                &mut file,
                t1.saturating_add(keep + Duration::from_secs(1)),
                keep
            ),
            2
        );
    }

    /// A line that could not be written is unsaid again, and only that one: the next tick
    /// a person hears says it, not the others again.
    #[test]
    fn a_line_not_written_is_unsaid_again_alone() {
        let mut file = JobFile::default();
        let t0 = Timestamp::from_unix(1_800_000_000);
        record(&mut file, &[give_up("task-a", &[])], t0, true);
        record(
            &mut file,
            &[give_up("task-b", &[]), give_up("task-c", &[])],
            t0,
            false,
        );
        let lines = say_unsaid(&mut file, t0);
        unsay(&mut file, &lines[1..]);
        let unsaid: Vec<_> = file.give_ups.iter().filter(|r| r.is_unsaid()).collect();
        assert_eq!(unsaid.len(), 1);
        assert_eq!(unsaid[0].task_id, "task-c");
        let later = t0.saturating_add(Duration::from_secs(60));
        assert_eq!(
            say_unsaid(&mut file, later),
            [give_up("task-c", &[]).line()]
        );
    }

    /// `atc doctor` lists the give-ups of the last day: one of an hour ago and one of 23
    /// hours ago, not one of 25.
    #[test]
    fn recent_give_ups_are_the_last_days() {
        let mut file = JobFile::default();
        let now = Timestamp::from_unix(1_800_000_000 + 30 * 3600);
        for (task, hours_ago) in [("task-a", 25), ("task-b", 23), ("task-c", 1)] {
            let at = Timestamp::from_unix(1_800_000_000 + (30 - hours_ago) * 3600);
            record(&mut file, &[give_up(task, &[])], at, true);
        }
        let listed: Vec<_> = recent(&file, now)
            .iter()
            .map(|r| r.task_id.as_str())
            .collect();
        assert_eq!(listed, ["task-b", "task-c"]);
    }

    #[test]
    fn unsaid_give_ups_stay_until_said_but_not_past_the_cap() {
        let mut file = JobFile::default();
        let t0 = Timestamp::from_unix(1_800_000_000);
        for i in 0..MAX_UNSAID + 2 {
            record(&mut file, &[give_up(&format!("task-{i}"), &[])], t0, false);
        }
        let years = Duration::from_secs(10 * 365 * 86400);
        assert_eq!(prune(&mut file, t0.saturating_add(years), years / 10), 2);
        assert_eq!(file.give_ups.len(), MAX_UNSAID);
        assert_eq!(file.give_ups[0].task_id, "task-2", "the oldest went");
        assert_eq!(first_prune(&file, years), None, "nothing said: nothing due");
    }
}
