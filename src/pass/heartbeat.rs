//! The tick's heartbeat: what a tick leaves in `<job file>.tick.lock` (one JSON line) for
//! the next tick (a job file it found settled, unchanged since) and for `atc doctor` (when
//! ticks ran, kicked or not, and whether the last one finished its pass).

use serde::{Deserialize, Serialize};

use crate::lifecycle::Limits;
use crate::state::store::Fingerprint;
use crate::time::Timestamp;

/// What a tick leaves in `<job file>.tick.lock` (one JSON line), for the next tick and for
/// `atc doctor`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Heartbeat {
    /// When the last tick started.
    pub last_tick_at: Option<Timestamp>,
    /// When the last tick a QwenPaw turn's end started (`tick --kicked`) started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_kick_at: Option<Timestamp>,
    /// When the last tick that was neither a kick nor a plugin's cadence started: a
    /// timer's, a person's (`atc doctor` tells a timer by it; a plugin's cadence stands by
    /// while one ticks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_unkicked_at: Option<Timestamp>,
    /// When the last tick a QwenPaw plugin's cadence started (`ATC_CADENCE_TICK=1`)
    /// started: no timer (another server's plugin on the same job file ticks on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_cadence_at: Option<Timestamp>,
    /// The job file that tick found settled, unchanged since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) settled: Option<Settled>,
    /// Whether that tick finished its pass, every save it needed made: a heartbeat alone
    /// is not a healthy tick (one that cannot save the job file beats, then exits 4).
    /// `None`: an older atc wrote this heartbeat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<bool>,
    /// When a tick last finished its pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
    /// When the last scheduled pass that polled every watch due (a timer's, a person's, a
    /// cadence's: no kick, no pass for a kick's mark) started, of those that finished,
    /// every save made: what a watch's back-off counts from (`lifecycle::backoff`). A pass
    /// that crashed or failed polled what it polled, or nothing: the back-off times it
    /// came by are still owed. `None` (none yet, or an older atc's heartbeat): the next
    /// scheduled tick polls every watch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_swept_at: Option<Timestamp>,
    /// The servers whose atc plugin ticks this job file (a kick or a cadence tick whose
    /// `ATC_BASE_URL` named it), each with its last such tick: their children are polled
    /// on a back-off (`lifecycle::backoff`). Kept a day.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub plugins: std::collections::BTreeMap<String, Timestamp>,
}

/// A job file with nothing to do: which version (its fingerprint), under which limits,
/// and until when (its first prune; `None`: never, it holds no job).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Settled {
    pub(super) file: Fingerprint,
    pub(super) key: CacheKey,
    pub(super) until: Option<Timestamp>,
    /// It holds give-ups nobody has heard: settled for ticks nobody hears (the plugin's,
    /// which cannot say them), not for one a person hears (it says them).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) unsaid: bool,
}

/// The limits a settled verdict depends on (`--keep` prunes; `--busy-deadline` says which
/// delivered turns are followed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct CacheKey {
    keep_secs: u64,
    busy_deadline_secs: u64,
}

impl CacheKey {
    pub(super) fn of(limits: &Limits) -> CacheKey {
        CacheKey {
            keep_secs: limits.keep.as_secs(),
            busy_deadline_secs: limits.busy_deadline.as_secs(),
        }
    }
}

/// When each kind of tick last started, as a tick that started now leaves it.
#[derive(Clone, Debug)]
pub(super) struct Kinds {
    /// When this tick started.
    now: Timestamp,
    kick: Option<Timestamp>,
    unkicked: Option<Timestamp>,
    cadence: Option<Timestamp>,
    swept: Option<Timestamp>,
    /// This pass is a scheduled one that polls every watch due: once done, the back-offs
    /// count from its start.
    sweeping: bool,
    /// The pass is done, every save made ([`Kinds::done`]).
    done: bool,
    /// When the last tick whose pass was done started: this one's once it is.
    finished_at: Option<Timestamp>,
    pub(super) plugins: std::collections::BTreeMap<String, Timestamp>,
}

/// How long a server's plugin is remembered after its last kick or cadence tick.
const PLUGIN_KEPT: std::time::Duration = std::time::Duration::from_secs(86_400);

impl Kinds {
    /// `previous`'s, with this tick's own kind at `now`. `sweeps`: the pass polls every
    /// watch due (not only what the turns a kick's mark named concern); a scheduled one
    /// that does is what the back-offs count from once it is [`done`](Kinds::done).
    pub(super) fn after(
        previous: &Heartbeat,
        now: Timestamp,
        kicked: bool,
        cadence: bool,
        server: Option<&str>,
        sweeps: bool,
    ) -> Kinds {
        let mut kinds = Kinds {
            now,
            kick: previous.last_kick_at,
            unkicked: previous.last_unkicked(),
            cadence: previous.last_cadence_at,
            swept: previous.last_swept_at,
            sweeping: !kicked && sweeps,
            done: false,
            finished_at: previous.finished_at,
            plugins: previous.plugins.clone(),
        };
        kinds
            .plugins
            .retain(|_, at| at.elapsed_at(now) <= PLUGIN_KEPT);
        if let Some(server) = server.filter(|_| kicked || cadence) {
            kinds.plugins.insert(server.to_owned(), now);
        }
        if kicked {
            kinds.kick = Some(now);
        } else if cadence {
            kinds.cadence = Some(now);
        } else {
            kinds.unkicked = Some(now);
        }
        kinds
    }

    /// What the pass leaves once it is done, every save made.
    pub(super) fn done(&self) -> Kinds {
        let mut kinds = self.clone();
        kinds.done = true;
        kinds.finished_at = Some(kinds.now);
        if kinds.sweeping {
            kinds.swept = Some(kinds.now);
        }
        kinds
    }
}

/// A scheduled tick older than this, with watches waiting, is a timer that does not run:
/// `atc doctor` fails its timer check, and `atc status` warns.
pub const TICK_STALE: std::time::Duration = std::time::Duration::from_secs(120);

impl Heartbeat {
    /// The heartbeat in the tick lock at `path`; an older atc wrote a bare timestamp.
    pub fn read(path: &std::path::Path) -> Heartbeat {
        Heartbeat::parse(crate::state::lock::read_stamp(path))
    }

    /// When the last tick that was no kick started; an older atc's heartbeat (one that
    /// knew no cadence either) says it only when its last tick was not a kick. A heartbeat
    /// that knows a cadence is this atc's, which writes `last_unkicked_at` for every tick
    /// that was neither: without it, no such tick ran.
    pub fn last_unkicked(&self) -> Option<Timestamp> {
        self.last_unkicked_at.or(self
            .last_tick_at
            .filter(|at| self.last_cadence_at.is_none() && Some(*at) != self.last_kick_at))
    }

    pub(super) fn parse(line: Option<String>) -> Heartbeat {
        let Some(line) = line else {
            return Heartbeat::default();
        };
        serde_json::from_str(&line).unwrap_or_else(|_| Heartbeat {
            last_tick_at: Timestamp::parse(&line),
            ..Heartbeat::default()
        })
    }

    /// What a tick leaves: `finished` once its pass is done (`kinds`
    /// [`done`](Kinds::done)), with `finished_at` then its start.
    pub(super) fn of(kinds: &Kinds, settled: Option<Settled>) -> Heartbeat {
        Heartbeat {
            last_tick_at: Some(kinds.now),
            last_kick_at: kinds.kick,
            last_unkicked_at: kinds.unkicked,
            last_cadence_at: kinds.cadence,
            last_swept_at: kinds.swept,
            plugins: kinds.plugins.clone(),
            settled,
            finished: Some(kinds.done),
            finished_at: kinds.finished_at,
        }
    }

    /// When the last scheduled tick (a timer's, a person's, a plugin's cadence: not a
    /// kick) started.
    pub fn last_scheduled(&self) -> Option<Timestamp> {
        self.last_unkicked().max(self.last_cadence_at)
    }

    /// How many watches wait for a scheduled tick that is overdue: some tick still has
    /// something to do for them, the oldest was made longer than [`TICK_STALE`] ago, and
    /// no scheduled tick (a timer's, a person's, a plugin's cadence: kicks come only when
    /// a turn ends) ran for as long. A watch made a moment ago has missed no tick yet
    /// (the plugin's cadence wakes to it within its period). `atc status`'s warning and
    /// `atc doctor`'s timer check, one rule.
    pub fn overdue(
        &self,
        jobs: &[crate::job::Job],
        turns: &crate::lifecycle::Turns,
        now: Timestamp,
    ) -> Option<usize> {
        let waiting: Vec<_> = jobs
            .iter()
            .filter(|j| !crate::lifecycle::settled_job(j, turns))
            .collect();
        let oldest = waiting.iter().map(|j| j.registered_at).min()?;
        let stale = |at: Timestamp| at.elapsed_at(now) > TICK_STALE;
        (stale(oldest) && self.last_scheduled().is_none_or(stale)).then_some(waiting.len())
    }

    /// Whether the atc plugin of the server at `base_url` ticks this job file now: a kick
    /// or cadence tick from it within three ceilings.
    pub fn kicking(&self, base_url: &str, now: Timestamp, ceiling: std::time::Duration) -> bool {
        self.plugins
            .get(base_url)
            .is_some_and(|at| at.elapsed_at(now) <= ceiling * 3)
    }

    pub(super) fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A server's plugin is taken to tick this job file for three ceilings after its last
    /// kick or cadence tick (a missed kick or two must not put its children back on the
    /// 20 s cadence), and only that server's.
    #[test]
    fn a_plugin_is_kicking_for_three_ceilings_after_its_last_tick() {
        let at = Timestamp::from_unix(1_800_000_000);
        let ceiling = Duration::from_secs(300);
        let mut beat = Heartbeat::default();
        beat.plugins.insert("http://h/api".into(), at);
        let after = |secs| at.saturating_add(Duration::from_secs(secs));
        assert!(
            beat.kicking("http://h/api", after(600), ceiling),
            "two ceilings"
        );
        assert!(beat.kicking("http://h/api", after(900), ceiling), "three");
        assert!(
            !beat.kicking("http://h/api", after(901), ceiling),
            "past three"
        );
        assert!(
            !beat.kicking("http://other/api", after(1), ceiling),
            "another server"
        );
    }

    /// The back-offs count from the last scheduled pass that polled every watch due and
    /// finished: not from one that is still running or failed (stamped at its start
    /// only), a scheduled tick's later pass for the turns a kick's mark named (it polls
    /// only what they concern), or a kick; a timer's and a cadence's alike. A tick that
    /// failed keeps the last finished one's time; any that finished leaves its own.
    #[test]
    fn the_back_offs_count_from_the_last_scheduled_pass_that_swept_and_finished() {
        let at = |secs: u64| Timestamp::from_unix(1_800_000_000 + secs);
        for cadence in [false, true] {
            let pass = |beat: &Heartbeat, secs, kicked, sweeps, done: bool| {
                let kinds = Kinds::after(beat, at(secs), kicked, cadence, None, sweeps);
                Heartbeat::of(&if done { kinds.done() } else { kinds }, None)
            };
            let beat = pass(&Heartbeat::default(), 0, false, true, false);
            assert_eq!(beat.last_swept_at, None, "started only; cadence {cadence}");
            let beat = pass(&beat, 0, false, true, true);
            assert_eq!(beat.last_swept_at, Some(at(0)), "cadence {cadence}");
            for (secs, kicked, sweeps, done) in [
                (240, false, false, true), // a mark's pass, done
                (250, true, true, true),   // a kick naming no turn
                (260, false, true, false), // started, then crashed or failed
            ] {
                let after = pass(&beat, secs, kicked, sweeps, done);
                assert_eq!(after.last_tick_at, Some(at(secs)));
                // Whether it finished, and when the last that did started, whatever kind.
                assert_eq!(after.finished, Some(done), "at {secs}");
                assert_eq!(after.finished_at, Some(at(if done { secs } else { 0 })));
                assert_eq!(
                    after.last_swept_at,
                    Some(at(0)),
                    "at {secs}; cadence {cadence}"
                );
            }
            let beat = pass(&beat, 280, false, true, true);
            assert_eq!(beat.last_swept_at, Some(at(280)), "cadence {cadence}");
            // What an older atc wrote (no `last_swept_at`): every watch is polled.
            assert_eq!(
                Heartbeat::parse(Some(r#"{"last_tick_at":"2027-01-15T08:00:00Z"}"#.into()))
                    .last_swept_at,
                None
            );
        }
    }

    /// An older atc left a bare timestamp: the tick it names started then, and counts as
    /// a scheduled one (the doctor's timer check, `atc status`'s warning); nothing is said
    /// of its saves.
    #[test]
    fn an_older_atcs_bare_timestamp_is_a_scheduled_tick_that_says_nothing_of_its_saves() {
        let at = Timestamp::parse("2027-01-15T08:00:00Z");
        let beat = Heartbeat::parse(Some("2027-01-15T08:00:00Z".into()));
        assert!(at.is_some());
        assert_eq!(beat.last_tick_at, at);
        assert_eq!(beat.last_scheduled(), at);
        assert_eq!((beat.finished, beat.finished_at), (None, None));
        assert_eq!(Heartbeat::parse(Some("garbage".into())).last_tick_at, None);
    }

    /// Watches are overdue once the oldest waiting one was made more than `TICK_STALE`
    /// ago and no scheduled tick (a timer's, a person's, a cadence's; not a kick) ran for
    /// as long: at exactly `TICK_STALE`, not yet. Ended watches do not count.
    #[test]
    fn watches_are_overdue_past_the_stale_time_without_a_scheduled_tick() {
        use crate::job::{Job, Watch};
        let at = |secs: u64| Timestamp::from_unix(1_800_000_000 + secs);
        let stale = TICK_STALE.as_secs();
        let mut ended = Job::sample(Watch::Cancelled);
        ended.job_id = "ended".into();
        let jobs = [Job::sample(Watch::Pending), ended];
        let turns = crate::lifecycle::Turns::of(&[]);
        let overdue = |beat: &Heartbeat, secs| beat.overdue(&jobs, &turns, at(secs));
        let none = Heartbeat::default();
        assert_eq!(overdue(&none, stale), None, "the watch made exactly then");
        assert_eq!(overdue(&none, stale + 1), Some(1), "one waiting, one ended");
        let timer = Heartbeat {
            last_unkicked_at: Some(at(10)),
            ..Heartbeat::default()
        };
        assert_eq!(
            overdue(&timer, 10 + stale),
            None,
            "the timer ran exactly then"
        );
        assert_eq!(overdue(&timer, 10 + stale + 1), Some(1));
        let cadence = Heartbeat {
            last_cadence_at: Some(at(10)),
            last_tick_at: Some(at(10)),
            ..Heartbeat::default()
        };
        assert_eq!(overdue(&cadence, 10 + stale), None);
        assert_eq!(overdue(&cadence, 10 + stale + 1), Some(1));
        let kicked = Heartbeat {
            last_kick_at: Some(at(100)),
            last_tick_at: Some(at(100)),
            ..Heartbeat::default()
        };
        assert_eq!(overdue(&kicked, stale + 1), Some(1), "a kick is no timer");
        assert_eq!(
            Heartbeat::default().overdue(&jobs[1..], &turns, at(9999)),
            None
        );
    }

    /// A plugin's cadence counts while it wrote within three of its periods and five
    /// seconds (at exactly that age, still); an older one is a server that stopped.
    #[test]
    fn a_cadence_counts_for_three_periods_and_five_seconds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.json.cadence");
        let at = |secs: u64| Timestamp::from_unix(1_800_000_000 + secs);
        let wrote = at(0).to_string();
        std::fs::write(
            &path,
            format!(r#"{{"pid":42,"every_secs":20,"at":"{wrote}","ticking":true}}"#),
        )
        .unwrap();
        let read = |secs| Cadence::read(&path, at(secs));
        assert_eq!(
            read(65),
            Some(Cadence {
                pid: 42,
                every: Duration::from_secs(20),
                ticking: true,
                timer_seen_at: None,
            })
        );
        assert_eq!(read(66), None);
        std::fs::write(&path, format!(r#"{{"every_secs":0,"at":"{wrote}"}}"#)).unwrap();
        assert_eq!(read(0), None, "no period");
    }
}

/// What atc's QwenPaw plugin last wrote into `<job file>.cadence` (it beats every period
/// while the server runs): which server process ticks this job file, how often, and
/// whether it stands by for a timer it saw tick.
#[derive(Debug, PartialEq)]
pub struct Cadence {
    pub pid: u64,
    pub every: std::time::Duration,
    /// False while the plugin stands by for a system timer.
    pub ticking: bool,
    pub timer_seen_at: Option<Timestamp>,
}

impl Cadence {
    /// The cadence at `path` when a plugin wrote it within three of its periods (and a
    /// few seconds): `None` for none, or one from a server that stopped.
    pub fn read(path: &std::path::Path, now: Timestamp) -> Option<Cadence> {
        let said: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
        let every = said["every_secs"].as_f64().filter(|e| *e > 0.0)?;
        let at = Timestamp::parse(said["at"].as_str()?)?;
        if at.elapsed_at(now).as_secs_f64() > 3.0 * every + 5.0 {
            return None;
        }
        Some(Cadence {
            pid: said["pid"].as_u64().unwrap_or(0),
            every: std::time::Duration::from_secs_f64(every),
            ticking: said["ticking"] == true,
            timer_seen_at: said["timer_seen_at"].as_str().and_then(Timestamp::parse),
        })
    }
}
