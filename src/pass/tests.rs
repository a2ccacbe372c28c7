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
