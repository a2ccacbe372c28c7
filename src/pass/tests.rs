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
    fn list_chats(&self, _: &str, _: &str, _: Option<(&str, &str)>) -> Result<Answer, Transport> {
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

/// The timer's tick over the job file at `path`, one request at a time.
fn timer_tick(path: std::path::PathBuf) -> Tick {
    Tick {
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
        cadence: false,
        server: None,
        batch: true,
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
    let tick = timer_tick(path);
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

/// Issue 36 (M1): a watch saved while a tick is between its prepare phase and its
/// "settled" stamp is not stamped settled with it: the stamp is the fingerprint of the file
/// as the pass read it under the lock, so the next tick sees a change and polls the new
/// watch. (The stamp was a fresh `stat` after the lock was released: the new watch was
/// skipped by every tick until the file changed for another reason.)
#[test]
fn a_watch_saved_during_a_settled_pass_is_polled_by_the_next_tick() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.json");
    let now = Timestamp::from_unix(1_800_000_000);
    let write = |jobs: Vec<Job>| {
        let mut file = JobFile {
            version: crate::job_file::VERSION,
            jobs,
            ..JobFile::default()
        };
        crate::status::show(&mut file.jobs, &[]);
        let tmp = path.with_extension("new");
        std::fs::write(&tmp, serde_json::to_vec(&file).unwrap()).unwrap();
        std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    };
    let mut ended = Job::sample(Watch::Cancelled);
    ended.updated_at = now;
    write(vec![ended.clone()]);
    // The second reading of the clock is the prepare phase's, after it read the file:
    // another process's save lands then (in life, once the lock is let go; the pass saves
    // nothing here, so the effect on the stamp is the same).
    struct Meanwhile<'a>(Timestamp, AtomicU32, &'a (dyn Fn() + Sync));
    impl Clock for Meanwhile<'_> {
        fn now(&self) -> Timestamp {
            if self.1.fetch_add(1, Ordering::Relaxed) == 1 {
                (self.2)();
            }
            self.0
        }
    }
    let mut watched = Job::sample(Watch::Pending);
    watched.job_id = "bbbbbbbbbbbb".into();
    watched.task_id = "task-2".into();
    watched.registered_at = now;
    let save_watch = || write(vec![ended.clone(), watched.clone()]);
    let tick = timer_tick(path.clone());
    let clock = Meanwhile(now, AtomicU32::new(0), &save_watch);
    let first = run_with(
        &Store::new(path.clone()),
        &tick,
        &mut Running(Auth::default()),
        &clock,
        Intent::TIMER,
        &mut |_| {},
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        first.count(Outcome::Polled),
        0,
        "nothing to poll when it read the file"
    );
    assert!(
        clock.1.load(Ordering::Relaxed) >= 2,
        "the watch was saved meanwhile"
    );
    let next = run_with(
        &Store::new(path),
        &tick,
        &mut Running(Auth::default()),
        &Meanwhile(now, AtomicU32::new(0), &|| {}),
        Intent::TIMER,
        &mut |_| {},
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        next.count(Outcome::Polled),
        1,
        "the next tick polls the new watch"
    );
}
