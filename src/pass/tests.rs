use super::*;
use crate::qwenpaw::{Answer, Transport};
use crate::settings::{Auth, Setting, Source};
use serde_json::Value;
use std::time::Duration;

/// A server that answers each route it is given (`None`: the test never asks it) and
/// counts the requests of each.
#[derive(Default)]
struct Scripted {
    auth: Auth,
    task: Option<(u16, &'static str)>,
    chats: Option<&'static str>,
    history: Option<(u16, &'static str)>,
    health: Option<&'static str>,
    stopped: Option<bool>,
    agents: Option<&'static str>,
    asked: std::sync::Mutex<Vec<&'static str>>,
    /// The lanes a parallel phase said it started (`false`) and ended (`true`).
    lanes: std::sync::Mutex<Vec<(usize, bool)>>,
}

const RUNNING: (u16, &str) = (200, r#"{"status":"running","started_at":1796003454.67}"#);
const COMPLETED: (u16, &str) = (
    200,
    r#"{"status":"finished","started_at":1796003454.67,"result":{"status":"completed","output":[]}}"#,
);
const NO_RECORD: (u16, &str) = (404, r#"{"detail":"Task not found: task-1"}"#);

impl Scripted {
    /// Every task still runs; nothing else is asked of it.
    fn running() -> Scripted {
        Scripted {
            task: Some(RUNNING),
            ..Scripted::default()
        }
    }

    fn answer(&self, route: &'static str, said: Option<(u16, &str)>) -> Result<Answer, Transport> {
        let (status, body) = said.unwrap_or_else(|| panic!("{route} was not to be asked"));
        self.asked.lock().unwrap().push(route);
        Ok(Answer {
            status,
            content_type: "application/json".into(),
            body: Ok(body.into()),
        })
    }

    /// How many requests of `route` it answered.
    fn asked(&self, route: &str) -> usize {
        self.asked
            .lock()
            .unwrap()
            .iter()
            .filter(|r| **r == route)
            .count()
    }
}

impl Server for Scripted {
    fn auth(&self) -> &Auth {
        &self.auth
    }
    fn allow_insecure(&mut self, _: &str) {}
    fn get_task(&self, _: &str, _: &str, _: &str) -> Result<Answer, Transport> {
        self.answer("task", self.task)
    }
    fn list_chats(&self, _: &str, _: &str, _: Option<(&str, &str)>) -> Result<Answer, Transport> {
        self.answer("chats", self.chats.map(|c| (200, c)))
    }
    fn chat_status(&self, _: &str, _: &str, _: &str) -> Result<Answer, Transport> {
        self.answer("status", None)
    }
    fn chat_history(&self, _: &str, _: &str, _: &str) -> Result<Answer, Transport> {
        self.answer("history", self.history)
    }
    fn post_turn(&self, _: &str, _: &str, _: &Value) -> Result<Answer, Transport> {
        self.answer("post", None)
    }
    fn send_message(&self, _: &str, _: &str, _: &Value) -> Result<Answer, Transport> {
        self.answer("send", None)
    }
    fn channel_health(&self, _: &str, _: &str, _: &str) -> Result<Answer, Transport> {
        self.answer("health", self.health.map(|h| (200, h)))
    }
    fn stop_chat(&self, _: &str, _: &str, _: &str) -> Result<Answer, Transport> {
        let said = self.stopped.map(|s| {
            if s {
                r#"{"stopped":true}"#
            } else {
                r#"{"stopped":false}"#
            }
        });
        self.answer("stop", said.map(|s| (200, s)))
    }
    fn list_agents(&self, _: &str) -> Result<Answer, Transport> {
        self.answer("agents", self.agents.map(|a| (200, a)))
    }
    fn lane_started(&self, lane: usize) {
        self.lanes.lock().unwrap().push((lane, false));
    }
    fn lane_ended(&self, lane: usize) {
        self.lanes.lock().unwrap().push((lane, true));
    }
}

/// A parallel phase tells the server each lane it started and, after its last item or
/// while its work unwinds, that it ended (a server that orders its lanes waits for no
/// lane that is gone); one worker runs on the caller's thread and starts no lane.
#[test]
fn every_lane_started_is_ended_even_unwinding_and_one_worker_starts_none() {
    let server = Scripted::default();
    let lanes = || {
        let mut said = std::mem::take(&mut *server.lanes.lock().unwrap());
        said.sort();
        said
    };
    let every_end = [
        (0, false),
        (0, true),
        (1, false),
        (1, true),
        (2, false),
        (2, true),
    ];
    let items: Vec<usize> = (0..10).collect();
    let doubled = parallel::parallel(&server, &items, 3, |i| i * 2);
    assert_eq!(doubled, items.iter().map(|i| i * 2).collect::<Vec<_>>());
    assert_eq!(lanes(), every_end);

    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        parallel::parallel(&server, &items, 3, |&i| {
            assert_ne!(i, 4, "item 4 unwinds its lane");
            i
        })
    }));
    assert!(unwound.is_err());
    assert_eq!(lanes(), every_end);

    let caller = std::thread::current().id();
    let threads = parallel::parallel(&server, &items, 1, |_| std::thread::current().id());
    assert_eq!(threads, vec![caller; items.len()]);
    assert_eq!(lanes(), []);
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
    let counted = copies();
    let _copy = Job::sample(Watch::Pending).clone();
    assert_eq!(copies(), counted + 1, "the count of copies counts them");
    let before = copies();
    let report = run_with(
        &store,
        &tick,
        &mut Scripted::running(),
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
        &mut Scripted::running(),
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
        &mut Scripted::running(),
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

/// The parent turn a delivery started is followed while its own task record says it
/// runs: only a finished record ends it (then its reply may go on); a turn with no task
/// id has nothing to ask.
#[test]
fn a_parent_turn_is_ended_only_by_a_finished_record() {
    let server = Scripted::running();
    let mut turn = Turn::sample(TurnState::Delivered);
    assert_eq!(poll::parent_turn(&server, &turn), None, "no task id");
    turn.turn_task_id = Some("task-p".into());
    assert_eq!(
        poll::parent_turn(&server, &turn),
        Some(ParentTurn::Running),
        "its record says it runs"
    );
}

/// A server whose one chat (`c1`, session `s` of user `u` on `console`) is listed, whose
/// history says it is gone, and whose `dingtalk` channel is down.
fn listed() -> Scripted {
    Scripted {
        chats: Some(
            r#"[{"id":"c1","session_id":"s","user_id":"u","channel":"console","status":"idle"}]"#,
        ),
        history: Some((404, r#"{"detail":"Chat not found: c1"}"#)),
        health: Some(r#"{"status":"unhealthy","detail":"token expired"}"#),
        ..Scripted::default()
    }
}

/// A turn of unknown outcome whose chat's history says it is gone is looked for in the
/// chat its triple names now; when that is the very chat just read, it is not read again
/// (no chat: the next step decides), one history request in all.
#[test]
fn a_chat_read_back_as_gone_is_not_read_again_when_the_list_still_names_it() {
    let server = listed();
    let mut turn = Turn::sample(TurnState::Unconfirmed);
    turn.chat_id = Some("c1".into());
    let looked = look::look(&server, &Due::Turn(turn));
    assert!(
        matches!(looked, Looked::Turn(TurnEvent::Probed(Probe::NoChat))),
        "{looked:?}"
    );
    assert_eq!(server.asked("history"), 1, "one read of the chat");
}

/// A forward's channel is asked about before sending, except the console's: it is always
/// there (a toast needs no channel of its own), and a request would only cost the server.
#[test]
fn a_forward_asks_about_its_channel_unless_it_is_the_console() {
    let server = listed();
    let healths = || server.asked("health");
    let mut turn = Turn::sample(TurnState::Delivered);
    let looked = look::look(&server, &Due::Forward(turn.clone()));
    assert!(
        matches!(
            looked,
            Looked::Turn(TurnEvent::ChannelChecked(turn::Health::Healthy))
        ),
        "{looked:?}"
    );
    assert_eq!(healths(), 0, "the console is not asked about");
    turn.chat.channel = "dingtalk".into();
    let looked = look::look(&server, &Due::Forward(turn));
    assert!(
        matches!(
            &looked,
            Looked::Turn(TurnEvent::ChannelChecked(turn::Health::Unhealthy { detail }))
                if detail == "token expired"
        ),
        "{looked:?}"
    );
    assert_eq!(healths(), 1, "an IM channel is asked about once");
}

/// A server for stopping a child: its task record is `task`; a stop says `stopped`; no
/// agent lists any chat; two agents.
fn stops(task: (u16, &'static str), stopped: bool) -> Scripted {
    Scripted {
        task: Some(task),
        chats: Some("[]"),
        stopped: Some(stopped),
        agents: Some(r#"{"agents":[{"id":"default"},{"id":"worker"}]}"#),
        ..Scripted::default()
    }
}

/// A watch whose child's session is `child-s`.
fn with_child() -> Job {
    let mut job = Job::sample(Watch::Pending);
    job.child_session = Some("child-s".into());
    job
}

/// A child whose task the server has no record of (or has finished) is not stopped at
/// all: a stop would reach whatever runs in that session now. A running one is.
#[test]
fn a_child_with_no_record_or_a_finished_one_is_not_stopped() {
    use crate::lifecycle::stop::{NotRunning, StopSaid};
    for (task, said) in [
        (NO_RECORD, Some(NotRunning::NoRecord)),
        (COMPLETED, Some(NotRunning::Finished)),
        (RUNNING, None),
    ] {
        let ended = stop::already_ended(&stops(task, true), &with_child());
        assert_eq!(
            ended.map(|s| s.said),
            said.map(StopSaid::NotRunning),
            "{task:?}"
        );
    }
}

/// A stop that ended a turn while this task's record says it finished by itself (not
/// cancelled, as QwenPaw marks a stopped task) ended another task's turn: the session
/// named was another task's child.
#[test]
fn a_stop_that_ended_a_turn_of_a_task_that_finished_by_itself_stopped_another_child() {
    let mut job = with_child();
    job.target.target_agent = Some("worker".into());
    job.child_chat_id = Some("c9".into());
    let server = stops(COMPLETED, true);
    let stop::StopFailed::OtherChild(why) = stop_failed(&server, &job) else {
        panic!("another failure")
    };
    assert!(
        why.contains("chat c9 of agent 'worker'")
            && why.contains("this task had already finished by itself"),
        "{why}"
    );
}

/// How stopping `job`'s child failed, after one stop sent.
fn stop_failed(server: &Scripted, job: &Job) -> stop::StopFailed {
    let failed = match stop::stop_child(server, job) {
        Ok(stopped) => panic!("stopped: {:?}", stopped.said),
        Err(why) => why,
    };
    assert_eq!(server.asked("stop"), 1, "{}", failed.message());
    failed
}

/// A child whose chat is on none of the agents the server lists, still running by its
/// record: the stop went by session to the asking agent and found nothing; the error
/// names the agents looked through and the fix (`--target-agent`).
#[test]
fn a_child_found_on_no_agent_names_the_agents_searched_and_the_fix() {
    let stop::StopFailed::StillRunning(why) = stop_failed(&stops(RUNNING, false), &with_child())
    else {
        panic!("another failure")
    };
    assert!(
        why.contains("in session child-s of agent 'default'")
            && why.contains("on none of the agents the server lists (default, worker)")
            && why.contains("--target-agent AID"),
        "{why}"
    );
}

/// A kick concerns a turn of the chat whose turn ended when that turn waits for it: due,
/// its forward due, or its woken turn still followed; a turn of another chat, or one of
/// that chat waiting for nothing, does not (the kicked tick then ends at once, no request).
#[test]
fn a_turns_end_concerns_what_waits_for_its_chat_and_nothing_else() {
    let limits = crate::settings::default_limits();
    let at = Timestamp::from_unix(1_800_000_000);
    let now = at.saturating_add(Duration::from_secs(30));
    let concerns_at = |turn: Turn, session: &str, now: Timestamp| {
        let file = JobFile {
            turns: vec![turn],
            ..JobFile::default()
        };
        concerns_any(
            &file,
            &[kick::TurnEnd::sample("default", session)],
            now,
            &limits,
        )
    };
    let concerns = |turn: Turn, session: &str| concerns_at(turn, session, now);
    let due = Turn::sample(TurnState::Open);
    assert!(concerns(due.clone(), "s"), "a turn due in the chat");
    assert!(!concerns(due, "s2"), "a turn due in another chat");
    let mut followed = Turn::sample(TurnState::Delivered);
    followed.turn_task_id = Some("task-p".into());
    followed.delivered_at = Some(at);
    assert!(concerns(followed.clone(), "s"), "a woken turn followed");
    let late = at.saturating_add(limits.busy_deadline + Duration::from_secs(1));
    assert!(
        !concerns_at(followed, "s", late),
        "a woken turn followed no more (--busy-deadline past)"
    );
}

/// A kicked pass sends what goes to an ended turn's chat, or what carries a watch the
/// kick concerns; anything else waits for a scheduled tick. Any other pass sends all.
#[test]
fn a_kicked_pass_sends_only_what_its_turn_ends_concern() {
    let mut elsewhere = Turn::sample(TurnState::Open);
    elsewhere.chat.session_id = "s2".into();
    assert!(concerned(&Work::default(), &elsewhere), "not kicked");
    let mut concern = kick::Concern::default();
    let kicked = |concern: &kick::Concern| Work {
        concern: Some((
            vec![kick::TurnEnd::sample("default", "s")],
            kick::Concern {
                poll: concern.poll.clone(),
                ..Default::default()
            },
        )),
        ..Work::default()
    };
    assert!(
        concerned(&kicked(&concern), &Turn::sample(TurnState::Open)),
        "its chat"
    );
    assert!(!concerned(&kicked(&concern), &elsewhere), "another chat");
    concern.poll.insert("j1".into());
    assert!(
        concerned(&kicked(&concern), &elsewhere),
        "another chat, carrying a watch it concerns"
    );
}
