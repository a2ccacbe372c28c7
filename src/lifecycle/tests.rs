//! The state machine's tables: every (status × event kind) pair for a job in that status,
//! then the sub-states whose answers differ (a POST in flight, a notice, a group member),
//! then the rules that need more than one step.

use super::*;
use crate::job::{ForwardStatus, Options};

const LIMITS: Limits = Limits {
    max_strikes: 3,
    max_age: Duration::from_secs(3600),
    busy_retry: Duration::from_secs(20),
    busy_deadline: Duration::from_secs(600),
    settle: Duration::from_secs(5),
    keep: Duration::from_secs(7 * 86400),
};

fn t(secs: u64) -> Timestamp {
    Timestamp::from_unix(1_800_000_000 + secs)
}

fn target() -> Target {
    Target {
        agent_id: "default".into(),
        target_agent: Some("SE".into()),
        session_id: "s-77".into(),
        user_id: "default".into(),
        channel: "console".into(),
    }
}

fn pending() -> Job {
    let mut job = Job::sample(Status::Pending);
    job.target = target();
    job.registered_at = t(0);
    job.updated_at = t(0);
    job
}

/// A job in `status` as a tick would leave it: delivering jobs have their text and are
/// due; an unknown delivery is settled and in its read-back window; a delivered one has a
/// parent turn to follow; ended jobs have what their ending recorded (no notice).
fn job(status: Status) -> Job {
    let mut job = pending();
    if status != Status::Pending {
        job.final_text = Some("T".into());
        job.delivery = Some(Delivery::default());
    }
    match status {
        Status::Unconfirmed => job.delivery.as_mut().unwrap().unknown_since = Some(t(1)),
        Status::Done => {
            job.delivered_at = Some(t(1));
            job.turn_task_id = Some("task-p".into());
        }
        _ => {}
    }
    job.status = status;
    job
}

fn apply(job: &Job, event: Event, now: Timestamp) -> Transition {
    step(job, event, now, &LIMITS)
}

fn in_flight() -> Job {
    apply(&job(Status::Delivering), Event::Probed(idle()), t(6)).job
}

fn idle() -> Probe {
    Probe::Chat {
        chat_id: "c1".into(),
        running: false,
    }
}

fn busy() -> Probe {
    Probe::Chat {
        chat_id: "c1".into(),
        running: true,
    }
}

fn running() -> Check {
    Check::Running {
        started_at: Some(t(1)),
    }
}

fn finished() -> Check {
    Check::Finished {
        text: "T2".into(),
        started_at: None,
        outcome: TaskOutcome::Completed,
        empty: false,
    }
}

fn accepted() -> Posted {
    Posted::Accepted {
        turn_task_id: Some("task-p".into()),
    }
}

/// The kinds of event, one representative each.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Running,
    Finished,
    Lost,
    Failed,
    NoChat,
    Idle,
    Busy,
    Found,
    NotFound,
    ProbeUnknown,
    ProbeRefused,
    Accepted,
    Busy409,
    NotSent,
    PostUnknown,
    Rejected,
    TurnEnded,
    Healthy,
    Unhealthy,
    NoChannel,
    SentOk,
    SendFailed,
    SendRejected,
    SendUnknown,
    Cancelled,
    Redeliver,
    Recovered,
    ReadBackClosed,
    Sealed,
    Carried,
    Unsealed,
    Followed,
    StopAnswered,
    CheckInsOff,
    Batched,
}

const KINDS: [Kind; 35] = [
    Kind::Running,
    Kind::Finished,
    Kind::Lost,
    Kind::Failed,
    Kind::NoChat,
    Kind::Idle,
    Kind::Busy,
    Kind::Found,
    Kind::NotFound,
    Kind::ProbeUnknown,
    Kind::ProbeRefused,
    Kind::Accepted,
    Kind::Busy409,
    Kind::NotSent,
    Kind::PostUnknown,
    Kind::Rejected,
    Kind::TurnEnded,
    Kind::Healthy,
    Kind::Unhealthy,
    Kind::NoChannel,
    Kind::SentOk,
    Kind::SendFailed,
    Kind::SendRejected,
    Kind::SendUnknown,
    Kind::Cancelled,
    Kind::Redeliver,
    Kind::Recovered,
    Kind::ReadBackClosed,
    Kind::Sealed,
    Kind::Carried,
    Kind::Unsealed,
    Kind::Followed,
    Kind::StopAnswered,
    Kind::CheckInsOff,
    Kind::Batched,
];

/// Every event kind, as a pattern: a new kind that is not added here leaves the tables
/// below non-exhaustive, which does not compile.
macro_rules! any_kind {
    () => {
        Kind::Running
            | Kind::Finished
            | Kind::Lost
            | Kind::Failed
            | Kind::NoChat
            | Kind::Idle
            | Kind::Busy
            | Kind::Found
            | Kind::NotFound
            | Kind::ProbeUnknown
            | Kind::ProbeRefused
            | Kind::Accepted
            | Kind::Busy409
            | Kind::NotSent
            | Kind::PostUnknown
            | Kind::Rejected
            | Kind::TurnEnded
            | Kind::Healthy
            | Kind::Unhealthy
            | Kind::NoChannel
            | Kind::SentOk
            | Kind::SendFailed
            | Kind::SendRejected
            | Kind::SendUnknown
            | Kind::Cancelled
            | Kind::Redeliver
            | Kind::Recovered
            | Kind::ReadBackClosed
            | Kind::Sealed
            | Kind::Carried
            | Kind::Unsealed
            | Kind::Followed
            | Kind::StopAnswered
            | Kind::CheckInsOff
            | Kind::Batched
    };
}

fn carrier_done() -> Job {
    let mut carrier = job(Status::Done);
    carrier.job_id = "carrier".into();
    carrier
}

fn event(kind: Kind) -> Event {
    match kind {
        Kind::Running => Event::Polled(running()),
        Kind::Finished => Event::Polled(finished()),
        Kind::Lost => Event::Polled(Check::Lost {
            detail: "Task not found: task-1".into(),
        }),
        Kind::Failed => Event::Polled(Check::Failed {
            error: "HTTP 500".into(),
        }),
        Kind::NoChat => Event::Probed(Probe::NoChat),
        Kind::Idle => Event::Probed(idle()),
        Kind::Busy => Event::Probed(busy()),
        Kind::Found => Event::Probed(Probe::Found {
            chat_id: "c1".into(),
            turn: Some("completed".into()),
        }),
        Kind::NotFound => Event::Probed(Probe::NotFound {
            chat_id: "c1".into(),
            running: false,
        }),
        Kind::ProbeUnknown => Event::Probed(Probe::Unknown {
            error: "refused".into(),
        }),
        Kind::ProbeRefused => Event::Probed(Probe::Refused {
            error: "HTTP 404: Agent 'x' not found".into(),
        }),
        Kind::Accepted => Event::Posted(accepted()),
        Kind::Busy409 => Event::Posted(Posted::Busy {
            detail: "busy".into(),
        }),
        Kind::NotSent => Event::Posted(Posted::NotSent {
            error: "refused".into(),
        }),
        Kind::PostUnknown => Event::Posted(Posted::Unknown {
            error: "timed out".into(),
            http_status: None,
        }),
        Kind::Rejected => Event::Posted(Posted::Rejected {
            http_status: 404,
            detail: "Agent 'x' not found".into(),
        }),
        Kind::TurnEnded => Event::TurnPolled(Turn::Ended {
            status: "completed".into(),
            reply: "R".into(),
        }),
        Kind::Healthy => Event::ChannelChecked(Health::Healthy),
        Kind::Unhealthy => Event::ChannelChecked(Health::Unhealthy {
            detail: "not connected".into(),
        }),
        Kind::NoChannel => Event::ChannelChecked(Health::Missing {
            detail: "Channel 'x' not available".into(),
        }),
        Kind::SentOk => Event::Forwarded(Sent::Accepted),
        Kind::SendFailed => Event::Forwarded(Sent::Failed {
            http_status: Some(500),
            detail: "Failed to send message".into(),
        }),
        Kind::SendRejected => Event::Forwarded(Sent::Rejected {
            http_status: 404,
            detail: "Channel not found: x".into(),
        }),
        Kind::SendUnknown => Event::Forwarded(Sent::Unknown {
            error: "reset".into(),
        }),
        Kind::Cancelled => Event::Cancelled,
        Kind::Redeliver => Event::Redeliver {
            create_session: false,
        },
        Kind::Recovered => Event::Recovered,
        Kind::ReadBackClosed => Event::ReadBackClosed,
        Kind::Sealed => Event::Sealed {
            text: "G".into(),
            tasks: vec!["task-1".into()],
        },
        Kind::Carried => Event::Carried {
            carrier: "carrier".into(),
        },
        Kind::Unsealed => Event::Unsealed,
        Kind::Followed => Event::Followed(Box::new(carrier_done())),
        Kind::StopAnswered => Event::StopAnswered {
            chat_id: Some("c-child".into()),
            answer: Ok(true),
        },
        Kind::CheckInsOff => Event::CheckInsOff,
        Kind::Batched => Event::Batched {
            text: Some("[ATC_RESULTS] 2 tasks: 2 completed\n\nT\n\nU".into()),
            tasks: vec!["task-1".into(), "task-2".into()],
        },
    }
}

/// What a row expects: the status afterwards, whether a POST is due, what happened.
type Row = (Status, bool, &'static [Outcome]);

const IGNORED: &[Outcome] = &[Outcome::Ignored];

/// The table: every (status × event kind) pair, for `job(status)`. Exhaustive by
/// construction: a new status or event kind does not compile here until it has its rows.
fn row(status: Status, kind: Kind) -> Row {
    use Kind as K;
    use Outcome as O;
    use Status as S;
    match (status, kind) {
        (S::Pending, K::Running) => (S::Pending, false, &[O::Polled, O::Running]),
        (S::Pending, K::Finished) => (S::Delivering, false, &[O::Polled, O::Finished]),
        (S::Pending, K::Lost) => (S::Lost, false, &[O::Polled, O::Lost, O::Noticed]),
        (S::Pending, K::Failed) => (S::Pending, false, &[O::Polled, O::FailedCheck]),
        (S::Pending | S::Delivering, K::Cancelled) => (S::Cancelled, false, &[O::Cancelled]),
        // Outside any group, a result on its way joins its chat's batch (or carries it).
        (S::Delivering, K::Carried | K::Batched) => (S::Delivering, false, &[O::Batched]),

        (S::Delivering, K::NoChat) => (S::Misrouted, false, &[O::Misrouted]),
        (S::Delivering, K::Idle) => (S::Delivering, true, &[O::Claimed]),
        (S::Delivering, K::Busy) => (S::Delivering, false, &[O::Busy]),
        (S::Delivering, K::ProbeUnknown) => (S::Delivering, false, &[O::Unreachable]),
        (S::Delivering | S::Unconfirmed, K::ProbeRefused) => (S::Error, false, &[O::Error]),

        (S::Unconfirmed, K::Found) => (S::Done, false, &[O::Confirmed]),
        (S::Unconfirmed, K::NotFound) => (S::Delivering, true, &[O::Claimed]),
        (S::Unconfirmed, K::ProbeUnknown) => (S::Unconfirmed, false, &[O::Unconfirmed]),
        (S::Unconfirmed, K::NoChat) => (S::Misrouted, false, &[O::Misrouted]),
        (S::Unconfirmed, K::Cancelled) => (S::Cancelled, false, &[O::CancelledInFlight]),
        (S::Unconfirmed, K::Redeliver) => (S::Unconfirmed, false, &[O::Requeued]),

        // A console parent: the toast that says something arrived is due.
        (S::Done, K::TurnEnded) => (S::Done, false, &[O::Followed, O::Claimed]),
        (S::Undelivered | S::Misrouted | S::Error, K::Redeliver) => {
            (S::Delivering, false, &[O::Requeued])
        }
        (S::Cancelled, K::Cancelled) => (S::Cancelled, false, &[O::AlreadyCancelled]),

        // Everything else changes nothing: polls apply to pending jobs only, probes to due
        // turns, POST outcomes and recovery to jobs in flight (`in_flight_row`), group
        // events to group members (`group_row`); an ended job is only ever pruned.
        (
            status @ (S::Pending
            | S::Delivering
            | S::Done
            | S::Unconfirmed
            | S::Undelivered
            | S::Lost
            | S::Abandoned
            | S::Expired
            | S::Cancelled
            | S::Skipped
            | S::Misrouted
            | S::Error),
            any_kind!(),
        ) => (status, false, IGNORED),
    }
}

/// A delivering job whose write-ahead record is saved (a POST in flight).
// The last arm names every kind (so a new one must be added), some already taken above.
#[allow(unreachable_patterns)]
fn in_flight_row(kind: Kind) -> Row {
    use Kind as K;
    use Outcome as O;
    use Status as S;
    match kind {
        K::Accepted => (S::Done, false, &[O::Delivered]),
        K::Busy409 => (S::Delivering, false, &[O::Busy]),
        K::NotSent => (S::Delivering, false, &[O::Unreachable]),
        K::PostUnknown => (S::Unconfirmed, false, &[O::Unconfirmed]),
        K::Rejected => (S::Error, false, &[O::Error]),
        K::Recovered => (S::Unconfirmed, false, &[O::RecoveredUnconfirmed]),
        K::Cancelled => (S::Cancelled, false, &[O::CancelledInFlight]),
        any_kind!() => (S::Delivering, false, IGNORED),
    }
}

/// A job cancelled while its POST was in flight.
// The last arm names every kind (so a new one must be added), some already taken above.
#[allow(unreachable_patterns)]
fn cancelled_in_flight_row(kind: Kind) -> Row {
    use Kind as K;
    use Outcome as O;
    use Status as S;
    match kind {
        K::Accepted | K::Busy409 | K::NotSent | K::PostUnknown | K::Rejected => {
            (S::Cancelled, false, &[O::CancelledInFlight])
        }
        K::Recovered => (S::Cancelled, false, &[O::RecoveredUnconfirmed]),
        K::Cancelled => (S::Cancelled, false, &[O::AlreadyCancelled]),
        any_kind!() => (S::Cancelled, false, IGNORED),
    }
}

/// A lost job whose notice is due: the same protocol as a result, the status unchanged.
// The last arm names every kind (so a new one must be added), some already taken above.
#[allow(unreachable_patterns)]
fn notice_row(kind: Kind) -> Row {
    use Kind as K;
    use Outcome as O;
    use Status as S;
    match kind {
        K::NoChat => (S::Lost, false, &[O::Misrouted]),
        K::Idle => (S::Lost, true, &[O::Claimed]),
        K::Busy => (S::Lost, false, &[O::Busy]),
        K::ProbeUnknown => (S::Lost, false, &[O::Unreachable]),
        K::ProbeRefused => (S::Lost, false, &[O::Error]),
        K::Carried | K::Batched => (S::Lost, false, &[O::Batched]),
        any_kind!() => (S::Lost, false, IGNORED),
    }
}

/// A finished member of a group that is not complete yet (held), and one whose result
/// another member carries.
// The last arm names every kind (so a new one must be added), some already taken above.
#[allow(unreachable_patterns)]
fn group_row(carried: bool, kind: Kind) -> Row {
    use Kind as K;
    use Outcome as O;
    use Status as S;
    match (carried, kind) {
        (false, K::Sealed | K::Carried) => (S::Delivering, false, &[O::Sealed]),
        (true, K::Unsealed) => (S::Delivering, false, &[O::Unsealed]),
        (true, K::Followed) => (S::Done, false, &[O::Delivered]),
        (_, K::Cancelled) => (S::Cancelled, false, &[O::Cancelled]),
        (_, any_kind!()) => (S::Delivering, false, IGNORED),
    }
}

/// A delivered turn of a parent on an IM channel whose reply is to be forwarded, and the
/// same forward once claimed (in flight).
// The last arm names every kind (so a new one must be added), some already taken above.
#[allow(unreachable_patterns)]
fn forward_row(in_flight: bool, kind: Kind) -> (Row, Option<ForwardStatus>) {
    use ForwardStatus as F;
    use Kind as K;
    use Outcome as O;
    use Status as S;
    match (in_flight, kind) {
        (false, K::Healthy) => ((S::Done, true, &[O::Claimed]), Some(F::Pending)),
        (false, K::Unhealthy) => ((S::Done, false, &[O::ForwardHeld]), Some(F::Pending)),
        (false, K::NoChannel) => ((S::Done, false, &[O::ForwardFailed]), Some(F::Failed)),
        (true, K::SentOk) => ((S::Done, false, &[O::Forwarded]), Some(F::Sent)),
        (true, K::SendFailed) => ((S::Done, false, &[O::ForwardHeld]), Some(F::Pending)),
        (true, K::SendRejected) => ((S::Done, false, &[O::ForwardFailed]), Some(F::Failed)),
        (true, K::SendUnknown | K::Recovered) => (
            (S::Done, false, &[O::ForwardUnconfirmed]),
            Some(F::Unconfirmed),
        ),
        (_, any_kind!()) => ((S::Done, false, IGNORED), Some(F::Pending)),
    }
}

fn check(job: &Job, kind: Kind, (status, posts, outcomes): Row, case: &str) {
    let tr = apply(job, event(kind), t(10));
    assert_eq!(tr.job.status, status, "{case}");
    assert_eq!(tr.outcomes, outcomes, "{case}");
    assert_eq!(
        !matches!(tr.effect, Effect::None),
        posts,
        "{case}: effect {:?}",
        tr.effect
    );
    match tr.effect {
        Effect::Post { .. } => assert!(
            tr.job.in_flight(),
            "{case}: a POST only with its write-ahead record"
        ),
        Effect::Forward { .. } => assert!(
            tr.job.forward_in_flight(),
            "{case}: a forward only with its write-ahead record"
        ),
        Effect::None => {}
    }
    if tr.is_ignored() {
        assert_eq!(tr.job, *job, "{case}: an ignored event changes nothing");
    } else if tr.outcomes != [Outcome::AlreadyCancelled] {
        assert_eq!(tr.job.updated_at, t(10), "{case}: a change is dated");
    }
}

#[test]
fn every_status_and_event_pair_has_a_row() {
    for status in Status::ALL {
        for kind in KINDS {
            check(
                &job(status),
                kind,
                row(status, kind),
                &format!("{status} × {kind:?}"),
            );
        }
    }
}

#[test]
fn sub_states_have_their_rows() {
    let flying = in_flight();
    let mut cancelled_flying = flying.clone();
    cancelled_flying.status = Status::Cancelled;
    let mut notice = job(Status::Lost);
    notice.notice = Some(Outbound::Delivering);
    let mut held = job(Status::Delivering);
    held.options.group = Some("g".into());
    let mut carried = held.clone();
    carried.carried_by = Some("carrier".into());
    for kind in KINDS {
        check(
            &flying,
            kind,
            in_flight_row(kind),
            &format!("in flight × {kind:?}"),
        );
        check(
            &cancelled_flying,
            kind,
            cancelled_in_flight_row(kind),
            &format!("cancelled in flight × {kind:?}"),
        );
        check(
            &notice,
            kind,
            notice_row(kind),
            &format!("notice × {kind:?}"),
        );
        check(
            &held,
            kind,
            group_row(false, kind),
            &format!("held × {kind:?}"),
        );
        check(
            &carried,
            kind,
            group_row(true, kind),
            &format!("carried × {kind:?}"),
        );
    }
}

fn im_parent(forward: Option<ForwardStatus>, in_flight: bool) -> Job {
    let mut done = job(Status::Done);
    done.target.channel = "mqtt".into();
    done.parent_turn = forward.map(|_| "completed".to_owned());
    done.forward = forward.map(|status| Forward {
        status,
        attempts: u32::from(in_flight),
        last_http_status: None,
        at: None,
        reason: None,
        text: Some("R".into()),
        since: Some(t(1)),
        attempt_started_at: in_flight.then(|| t(2)),
    });
    done
}

#[test]
fn forward_sub_states_have_their_rows() {
    for in_flight in [false, true] {
        let im = im_parent(Some(ForwardStatus::Pending), in_flight);
        for kind in KINDS {
            let (row, forward) = forward_row(in_flight, kind);
            let case = format!("forward (in flight: {in_flight}) × {kind:?}");
            check(&im, kind, row, &case);
            let after = apply(&im, event(kind), t(10)).job;
            assert_eq!(after.forward.map(|f| f.status), forward, "{case}");
        }
    }
}

#[test]
fn a_parents_reply_is_forwarded_only_from_an_im_channel_and_only_when_there_is_one() {
    let ended = |reply: &str, status: &str| {
        Event::TurnPolled(Turn::Ended {
            status: status.into(),
            reply: reply.into(),
        })
    };
    let im = im_parent(None, false);
    let pending = apply(&im, ended("FINAL", "completed"), t(5)).job;
    let forward = pending.forward.clone().unwrap();
    assert_eq!(
        (forward.status, forward.text.as_deref(), forward.since),
        (ForwardStatus::Pending, Some("FINAL"), Some(t(5)))
    );
    assert_eq!(pending.parent_turn.as_deref(), Some("completed"));
    assert!(forward_due(&pending));
    for (reply, status, says) in [
        ("", "completed", "empty"),
        ("x", "failed", "the parent's turn failed"),
    ] {
        let skipped = apply(&im, ended(reply, status), t(5)).job.forward.unwrap();
        assert_eq!(skipped.status, ForwardStatus::Skipped);
        assert!(skipped.reason.unwrap().contains(says));
    }
    let gone = apply(&im, Event::TurnPolled(Turn::Gone), t(5))
        .job
        .forward
        .unwrap();
    assert_eq!(gone.status, ForwardStatus::Skipped);
    let mut never = im.clone();
    never.options.forward = crate::job::ForwardMode::Never;
    assert_eq!(
        apply(&never, ended("FINAL", "completed"), t(5)).job.forward,
        None
    );
}

#[test]
fn a_console_parent_gets_one_toast_naming_what_arrived_unless_forward_never() {
    let ended = |status: &str| {
        Event::TurnPolled(Turn::Ended {
            status: status.into(),
            reply: "FINAL".into(),
        })
    };
    let console = apply(&job(Status::Done), ended("completed"), t(5)).job;
    let toast = console.forward.clone().unwrap();
    assert_eq!(
        (toast.status, toast.text.as_deref(), toast.since),
        (
            ForwardStatus::Pending,
            Some("A result for s-77: the agent answered; open the chat to read it"),
            Some(t(5))
        ),
        "the parent's reply itself is not sent: the console shows it"
    );
    let mut batch = job(Status::Done);
    batch.group_tasks = Some(vec!["task-1".into(), "task-2".into(), "task-3".into()]);
    let failed = apply(&batch, ended("failed"), t(5)).job.forward.unwrap();
    assert_eq!(
        failed.text.as_deref(),
        Some("3 results for s-77: the agent's turn failed; open the chat to see it")
    );
    let gone = apply(&batch, Event::TurnPolled(Turn::Gone), t(5)).job;
    assert_eq!(
        gone.forward.unwrap().text.as_deref(),
        Some("3 results for s-77: open the chat to read it")
    );
    // Claimed, sent, recorded: never sent again.
    let claimed = apply(&console, Event::ChannelChecked(Health::Healthy), t(6));
    assert_eq!(
        claimed.effect,
        Effect::Forward {
            text: toast.text.clone().unwrap()
        }
    );
    let sent = apply(&claimed.job, Event::Forwarded(Sent::Accepted), t(7)).job;
    assert_eq!(sent.forward.as_ref().unwrap().status, ForwardStatus::Sent);
    assert!(!forward_due(&sent));
    let again = apply(&sent, ended("completed"), t(8));
    assert!(again.is_ignored(), "one toast per turn");
    let mut never = job(Status::Done);
    never.options.forward = crate::job::ForwardMode::Never;
    assert_eq!(apply(&never, ended("completed"), t(5)).job.forward, None);
}

#[test]
fn a_forward_is_held_for_an_unhealthy_channel_until_the_deadline_and_retried_a_few_times() {
    let im = im_parent(Some(ForwardStatus::Pending), false);
    let unhealthy = Event::ChannelChecked(Health::Unhealthy {
        detail: "MQTT client is not connected to broker.".into(),
    });
    let held = apply(&im, unhealthy.clone(), t(601)).job;
    assert_eq!(
        held.forward.as_ref().unwrap().status,
        ForwardStatus::Pending
    );
    assert!(
        held.forward
            .unwrap()
            .reason
            .unwrap()
            .contains("not connected")
    );
    let expired = apply(&im, unhealthy, t(602)).job.forward.unwrap();
    assert_eq!(expired.status, ForwardStatus::Failed);
    assert!(expired.reason.unwrap().contains("--busy-deadline"));

    let mut j = im;
    for n in 1..=FORWARD_ATTEMPTS {
        let claimed = apply(&j, Event::ChannelChecked(Health::Healthy), t(10));
        assert_eq!(claimed.effect, Effect::Forward { text: "R".into() });
        j = apply(
            &claimed.job,
            Event::Forwarded(Sent::Failed {
                http_status: Some(500),
                detail: "Failed to send message: x".into(),
            }),
            t(11),
        )
        .job;
        let f = j.forward.clone().unwrap();
        let want = if n < FORWARD_ATTEMPTS {
            ForwardStatus::Pending
        } else {
            ForwardStatus::Failed
        };
        assert_eq!((f.status, f.attempts), (want, n), "send {n}");
    }
    assert!(
        j.forward
            .unwrap()
            .reason
            .unwrap()
            .contains("gave up after 5 sends")
    );
}

#[test]
fn polls_update_the_record() {
    let mut j = pending();
    j.strikes = 2;
    j.note = Some("check failed (2 in a row)".into());
    let tr = apply(&j, Event::Polled(running()), t(10));
    let n = &tr.job;
    assert_eq!(
        (n.strikes, n.started_at, n.updated_at),
        (0, Some(t(1)), t(10))
    );
    assert_eq!(
        n.note, None,
        "an older atc's note does not outlive the poll"
    );
    // The next poll of a task still running changes nothing: no tick rewrites the file
    // for it.
    let again = apply(n, Event::Polled(running()), t(30));
    assert_eq!(again.job, *n, "nothing to record");
    assert!(again.outcomes.contains(&Outcome::Running));
    // A server that gives no start time: the first sight of it running stands in.
    let mut quiet = pending();
    quiet.started_at = None;
    let first = apply(
        &quiet,
        Event::Polled(Check::Running { started_at: None }),
        t(7),
    )
    .job;
    assert_eq!(first.started_at, Some(t(7)));

    let n = apply(&pending(), Event::Polled(finished()), t(5)).job;
    assert_eq!(n.final_text.as_deref(), Some("T2"));
    assert_eq!(n.outcome, Some(TaskOutcome::Completed));
    assert!(is_due(&n, t(5), &LIMITS));

    let lost = apply(
        &pending(),
        Event::Polled(Check::Lost {
            detail: "Task not found: task-1".into(),
        }),
        t(5),
    )
    .job;
    assert_eq!(lost.last_error.as_deref(), Some("Task not found: task-1"));
    assert_eq!(lost.notice, Some(Outbound::Delivering));
    let notice = lost.final_text.clone().unwrap();
    assert!(
        notice.starts_with("[TASK_ID: task-1]\n[STATUS: lost]\n\n"),
        "{notice}"
    );
    assert!(
        is_due(&lost, t(5), &LIMITS),
        "the notice goes out like a result"
    );
}

#[test]
fn a_silent_watch_and_a_group_member_get_no_notice_of_their_own() {
    let lost = |options: Options| {
        let mut j = pending();
        j.options = options;
        apply(
            &j,
            Event::Polled(Check::Lost {
                detail: "Task not found: task-1".into(),
            }),
            t(5),
        )
    };
    let silent = lost(Options {
        on_no_answer: OnNoAnswer::Silent,
        ..Options::default()
    });
    assert_eq!((silent.job.notice, silent.job.final_text), (None, None));
    assert_eq!(silent.outcomes, [Outcome::Polled, Outcome::Lost]);
    let member = lost(Options {
        group: Some("g".into()),
        ..Options::default()
    });
    assert_eq!(member.job.notice, None, "the group's turn carries it");
}

#[test]
fn an_empty_answer_is_skipped_only_when_asked_and_only_on_success() {
    let empty = |outcome, on_empty| {
        let mut j = pending();
        j.options.on_empty = on_empty;
        apply(
            &j,
            Event::Polled(Check::Finished {
                text: "(No text content in response)".into(),
                started_at: None,
                outcome,
                empty: true,
            }),
            t(5),
        )
    };
    let skipped = empty(TaskOutcome::Completed, OnEmpty::Skip);
    assert_eq!(skipped.job.status, Status::Skipped);
    assert_eq!(
        skipped.outcomes,
        [Outcome::Polled, Outcome::Finished, Outcome::Skipped]
    );
    assert!(skipped.job.final_text.is_some(), "the text is kept");
    assert_eq!(
        empty(TaskOutcome::Completed, OnEmpty::Deliver).job.status,
        Status::Delivering
    );
    assert_eq!(
        empty(TaskOutcome::Failed, OnEmpty::Skip).job.status,
        Status::Delivering,
        "a failure is news"
    );
}

#[test]
fn strikes_abandon_at_the_cap_and_keep_the_last_error() {
    let mut j = pending();
    for n in 1..LIMITS.max_strikes {
        j = apply(
            &j,
            Event::Polled(Check::Failed {
                error: "500".into(),
            }),
            t(n.into()),
        )
        .job;
        assert_eq!((j.status, j.strikes), (Status::Pending, n));
    }
    let tr = apply(
        &j,
        Event::Polled(Check::Failed {
            error: "boom".into(),
        }),
        t(9),
    );
    assert_eq!(tr.job.status, Status::Abandoned);
    assert_eq!(
        tr.outcomes,
        [
            Outcome::Polled,
            Outcome::FailedCheck,
            Outcome::Abandoned,
            Outcome::Noticed
        ]
    );
    assert_eq!(tr.job.last_error.as_deref(), Some("boom"));
}

#[test]
fn the_age_cap_expires_a_task_that_is_not_finished() {
    let j = pending();
    let at_cap = apply(&j, Event::Polled(running()), t(3600));
    assert_eq!(
        at_cap.job.status,
        Status::Pending,
        "exactly at the cap is not over it"
    );
    let over = apply(&j, Event::Polled(running()), t(3601));
    assert_eq!(over.job.status, Status::Expired);
    assert_eq!(
        over.outcomes,
        [
            Outcome::Polled,
            Outcome::Running,
            Outcome::Expired,
            Outcome::Noticed
        ]
    );
    let done = apply(&j, Event::Polled(finished()), t(99_999));
    assert_eq!(
        done.job.status,
        Status::Delivering,
        "a result that is here is delivered"
    );
}

#[test]
fn a_claim_is_the_write_ahead_record_and_carries_the_text() {
    let tr = apply(&job(Status::Delivering), Event::Probed(idle()), t(6));
    assert_eq!(tr.effect, Effect::Post { text: "T".into() });
    let d = tr.job.delivery.clone().unwrap();
    assert_eq!((d.attempts, d.attempt_started_at), (1, Some(t(6))));
    assert_eq!(tr.job.chat_id.as_deref(), Some("c1"));
    assert!(!is_due(&tr.job, t(6), &LIMITS), "one POST at a time");
    let mut no_text = job(Status::Delivering);
    no_text.final_text = None;
    assert!(apply(&no_text, Event::Probed(idle()), t(6)).is_ignored());
}

#[test]
fn a_busy_chat_is_asked_again_each_tick_until_the_deadline() {
    let first = apply(&job(Status::Delivering), Event::Probed(busy()), t(10)).job;
    let d = first.delivery.clone().unwrap();
    assert_eq!(
        (d.busy, d.waiting_since, d.next_attempt_at),
        (1, Some(t(10)), None),
        "no back-off: the next tick asks again"
    );
    assert!(is_due(&first, t(11), &LIMITS));
    let still = apply(&first, Event::Probed(busy()), t(610)).job;
    assert_eq!(still.status, Status::Delivering, "exactly at the deadline");
    let given_up = apply(&still, Event::Probed(busy()), t(611));
    assert_eq!(given_up.job.status, Status::Undelivered);
    assert_eq!(given_up.outcomes, [Outcome::Undelivered]);
    assert_eq!(
        given_up.job.final_text.as_deref(),
        Some("T"),
        "the text is kept"
    );
    let delivered = apply(
        &apply(&still, Event::Probed(idle()), t(300)).job,
        Event::Posted(accepted()),
        t(301),
    )
    .job;
    assert_eq!(
        (
            delivered.status,
            delivered.delivered_at,
            delivered.last_error
        ),
        (Status::Done, Some(t(301)), None),
        "a delivery clears the busy error"
    );
}

#[test]
fn a_409_anyway_backs_off_and_counts_toward_the_deadline() {
    let tr = apply(
        &in_flight(),
        Event::Posted(Posted::Busy {
            detail: "busy".into(),
        }),
        t(7),
    );
    let j = tr.job;
    let d = j.delivery.clone().unwrap();
    assert_eq!(
        (
            d.busy,
            d.last_http_status,
            d.next_attempt_at,
            d.attempt_started_at,
            d.waiting_since
        ),
        (1, Some(409), Some(t(27)), None, Some(t(7)))
    );
    assert!(j.last_error.as_deref().unwrap().contains("409: busy"));
    assert!(!is_due(&j, t(26), &LIMITS));
    assert!(is_due(&j, t(27), &LIMITS));
    let unreachable = apply(
        &apply(&j, Event::Probed(idle()), t(27)).job,
        Event::Posted(Posted::NotSent {
            error: "refused".into(),
        }),
        t(700),
    );
    assert_eq!(unreachable.outcomes, [Outcome::Undelivered]);
    let d = unreachable.job.delivery.clone().unwrap();
    assert_eq!((d.attempts, d.busy, d.unreachable), (2, 1, 1));
}

#[test]
fn an_unknown_delivery_is_read_back_and_posted_again_only_if_absent_and_idle() {
    let unknown = apply(
        &in_flight(),
        Event::Posted(Posted::Unknown {
            error: "HTTP 502: Bad Gateway".into(),
            http_status: Some(502),
        }),
        t(7),
    )
    .job;
    assert_eq!(unknown.status, Status::Unconfirmed);
    assert_eq!(unknown.delivery.as_ref().unwrap().unknown_since, Some(t(7)));
    assert!(is_due(&unknown, t(8), &LIMITS));

    let not_found = |running| {
        Event::Probed(Probe::NotFound {
            chat_id: "c1".into(),
            running,
        })
    };
    let too_soon = apply(&unknown, not_found(false), t(10));
    assert_eq!(too_soon.outcomes, [Outcome::Waiting], "settle first");
    let ours_running = apply(&unknown, not_found(true), t(60));
    assert_eq!(
        ours_running.outcomes,
        [Outcome::Waiting],
        "the running turn may be ours"
    );
    let again = apply(&unknown, not_found(false), t(12));
    assert_eq!(again.effect, Effect::Post { text: "T".into() });
    assert_eq!(again.job.delivery.as_ref().unwrap().attempts, 2);

    let found = apply(
        &unknown,
        Event::Probed(Probe::Found {
            chat_id: "c1".into(),
            turn: Some("failed".into()),
        }),
        t(60),
    )
    .job;
    assert_eq!(found.status, Status::Done);
    assert_eq!(found.parent_turn.as_deref(), Some("failed"));
    assert_eq!(
        found.delivery.as_ref().unwrap().confirmed.as_deref(),
        Some("read-back")
    );

    let unreadable = apply(
        &unknown,
        Event::Probed(Probe::Unknown {
            error: "HTTP 500".into(),
        }),
        t(60),
    )
    .job;
    assert_eq!(unreadable.status, Status::Unconfirmed);
    assert!(is_due(&unreadable, t(607), &LIMITS));
    assert!(
        !is_due(&unreadable, t(608), &LIMITS),
        "read back at most --busy-deadline"
    );
    assert!(!prunable(&unreadable, t(600), &LIMITS));
}

#[test]
fn a_closed_read_back_window_is_recorded_once_and_settles_the_job() {
    let unknown = job(Status::Unconfirmed);
    assert!(
        apply(&unknown, Event::ReadBackClosed, t(601)).is_ignored(),
        "still open"
    );
    assert!(read_backs_closed(std::slice::from_ref(&unknown), t(601), &LIMITS).is_empty());
    assert_eq!(
        read_backs_closed(std::slice::from_ref(&unknown), t(602), &LIMITS),
        [0]
    );
    assert!(!settled_job(&unknown));
    let closed = apply(&unknown, Event::ReadBackClosed, t(602));
    assert_eq!(closed.outcomes, [Outcome::ReadBackClosed]);
    assert_eq!(closed.job.status, Status::Unconfirmed);
    assert_eq!(
        closed.job.delivery.as_ref().unwrap().read_back_closed_at,
        Some(t(602))
    );
    assert!(settled_job(&closed.job), "nothing left for a tick to do");
    assert!(
        apply(&closed.job, Event::ReadBackClosed, t(700)).is_ignored(),
        "once"
    );
    assert!(read_backs_closed(std::slice::from_ref(&closed.job), t(700), &LIMITS).is_empty());
    let again = apply(
        &closed.job,
        Event::Redeliver {
            create_session: false,
        },
        t(800),
    )
    .job;
    assert_eq!(again.delivery.as_ref().unwrap().read_back_closed_at, None);
    assert!(
        is_due(&again, t(801), &LIMITS),
        "redeliver reads it back again"
    );
}

#[test]
fn a_missing_chat_is_misrouted_unless_a_new_one_was_asked_for() {
    let misrouted = apply(
        &job(Status::Delivering),
        Event::Probed(Probe::NoChat),
        t(10),
    )
    .job;
    assert_eq!(misrouted.status, Status::Misrouted);
    assert!(
        misrouted
            .last_error
            .unwrap()
            .contains("no chat with session s-77")
    );
    assert_eq!(
        misrouted.final_text.as_deref(),
        Some("T"),
        "the text is kept"
    );
    let mut create = job(Status::Delivering);
    create.options.create_session = true;
    let tr = apply(&create, Event::Probed(Probe::NoChat), t(10));
    assert!(matches!(tr.effect, Effect::Post { .. }));
}

#[test]
fn refused_posts_keep_the_reason() {
    let rejected = apply(
        &in_flight(),
        Event::Posted(Posted::Rejected {
            http_status: 404,
            detail: "Agent 'x' not found".into(),
        }),
        t(7),
    )
    .job;
    assert_eq!(
        rejected.last_error.as_deref(),
        Some("404: Agent 'x' not found")
    );
    let mut notice = job(Status::Lost);
    notice.notice = Some(Outbound::Delivering);
    let flying = apply(&notice, Event::Probed(idle()), t(6)).job;
    let refused = apply(
        &flying,
        Event::Posted(Posted::Rejected {
            http_status: 404,
            detail: "x".into(),
        }),
        t(7),
    )
    .job;
    assert_eq!(
        (refused.status, refused.notice),
        (Status::Lost, Some(Outbound::Undelivered))
    );
}

#[test]
fn a_cancel_during_the_post_is_not_clobbered() {
    for (posted, says) in [
        (accepted(), "delivered anyway"),
        (
            Posted::Busy { detail: "b".into() },
            "the result was not delivered",
        ),
        (
            Posted::Unknown {
                error: "e".into(),
                http_status: Some(502),
            },
            "unknown",
        ),
    ] {
        let cancelled = apply(&in_flight(), Event::Cancelled, t(7));
        assert_eq!(cancelled.outcomes, [Outcome::CancelledInFlight]);
        let after = apply(&cancelled.job, Event::Posted(posted), t(8)).job;
        assert_eq!(after.status, Status::Cancelled);
        // When it arrived, or that it may have: a re-watch must not post it again.
        assert_eq!(after.delivered_at, None);
        let d = after.delivery.as_ref().unwrap();
        let accepted = (says == "delivered anyway").then_some(200);
        assert_eq!(d.last_http_status, accepted, "{d:?}");
        assert_eq!(d.unknown_since, (says == "unknown").then_some(t(8)));
        let rewatch = register(Some(&after), &after.target, &after.base_url, None);
        if says == "the result was not delivered" {
            assert!(
                matches!(rewatch, Registration::Replace { .. }),
                "{rewatch:?}"
            );
        } else {
            assert_eq!(
                rewatch,
                Registration::Refuse {
                    was: Status::Cancelled
                }
            );
        }
        assert!(!after.in_flight());
        assert!(after.note.as_deref().unwrap().contains(says), "{after:?}");
    }
}

#[test]
fn recovery_turns_an_interrupted_post_into_one_to_read_back() {
    let tr = apply(&in_flight(), Event::Recovered, t(9));
    assert_eq!(tr.job.status, Status::Unconfirmed);
    assert!(!tr.job.in_flight());
    let d = tr.job.delivery.as_ref().unwrap();
    assert_eq!(
        (d.unknown_since, d.last_attempt_at),
        (Some(t(9)), Some(t(6))),
        "read back from now on; settled from the attempt"
    );
    let why = tr.job.last_error.unwrap();
    assert!(
        why.contains("stopped while posting") && why.contains(&t(6).to_string()),
        "{why}"
    );
}

#[test]
fn redelivery_restarts_the_wait_and_reads_an_unknown_one_back_first() {
    let given_up = apply(&job(Status::Delivering), Event::Probed(busy()), t(1)).job;
    let given_up = apply(&given_up, Event::Probed(busy()), t(700)).job;
    assert_eq!(given_up.status, Status::Undelivered);
    let again = apply(
        &given_up,
        Event::Redeliver {
            create_session: true,
        },
        t(800),
    )
    .job;
    assert_eq!(again.status, Status::Delivering);
    assert!(again.options.create_session);
    assert_eq!(again.delivery.as_ref().unwrap().waiting_since, None);
    assert!(is_due(&again, t(800), &LIMITS));

    let unknown = apply(
        &job(Status::Unconfirmed),
        Event::Redeliver {
            create_session: false,
        },
        t(900),
    )
    .job;
    assert_eq!(
        unknown.status,
        Status::Unconfirmed,
        "read back, never posted blind"
    );
    assert_eq!(
        unknown.delivery.as_ref().unwrap().unknown_since,
        Some(t(900))
    );
}

#[test]
fn a_requeued_misrouted_result_may_still_get_leave_to_start_its_chat() {
    let redeliver = |create_session| Event::Redeliver { create_session };
    let queued = apply(&job(Status::Misrouted), redeliver(false), t(1)).job;
    assert_eq!(queued.status, Status::Delivering);
    assert!(!queued.options.create_session);
    assert!(
        apply(&queued, redeliver(false), t(2)).is_ignored(),
        "already queued"
    );
    let allowed = apply(&queued, redeliver(true), t(3));
    assert_eq!(allowed.outcomes, [Outcome::Requeued]);
    assert_eq!(allowed.job.status, Status::Delivering);
    assert!(allowed.job.options.create_session);
    assert!(
        apply(&allowed.job, redeliver(true), t(4)).is_ignored(),
        "nothing left to allow"
    );
}

#[test]
fn the_parent_turn_is_followed_until_it_ends() {
    let done = job(Status::Done);
    assert!(apply(&done, Event::TurnPolled(Turn::Running), t(5)).is_ignored());
    let ended = apply(
        &done,
        Event::TurnPolled(Turn::Ended {
            status: "failed".into(),
            reply: String::new(),
        }),
        t(5),
    )
    .job;
    assert_eq!(ended.parent_turn.as_deref(), Some("failed"));
    let gone = apply(&done, Event::TurnPolled(Turn::Gone), t(5)).job;
    assert_eq!(gone.parent_turn.as_deref(), Some("unknown"));
    assert_eq!(
        to_follow(std::slice::from_ref(&done), t(600), &LIMITS).len(),
        1
    );
    assert!(to_follow(&[done], t(602), &LIMITS).is_empty());
}

#[test]
fn a_carried_member_mirrors_where_its_carriers_turn_landed() {
    let mut member = job(Status::Delivering);
    member.options.group = Some("g".into());
    member.carried_by = Some("carrier".into());
    let mut carrier = carrier_done();
    carrier.delivered_at = Some(t(3));
    carrier.turn_task_id = Some("task-turn".into());
    let done = apply(&member, Event::Followed(Box::new(carrier.clone())), t(5)).job;
    assert_eq!(
        (done.status, done.delivered_at, done.turn_task_id.as_deref()),
        (Status::Done, Some(t(3)), Some("task-turn"))
    );
    let mut lost = job(Status::Lost);
    lost.options.group = Some("g".into());
    let lost = apply(
        &lost,
        Event::Carried {
            carrier: "carrier".into(),
        },
        t(4),
    )
    .job;
    assert_eq!(lost.notice, Some(Outbound::Delivering));
    let told = apply(&lost, Event::Followed(Box::new(carrier.clone())), t(5)).job;
    assert_eq!(
        (told.status, told.notice),
        (Status::Lost, Some(Outbound::Delivered))
    );
    carrier.status = Status::Undelivered;
    let not = apply(&member, Event::Followed(Box::new(carrier)), t(5)).job;
    assert_eq!(not.status, Status::Undelivered);
}

#[test]
fn registration_rules() {
    let other = Target {
        session_id: "s-78".into(),
        ..target()
    };
    let replace = |was, same_target| Registration::Replace { was, same_target };
    for status in Status::ALL {
        let existing = job(status);
        let (same, different) = match status {
            Status::Done | Status::Unconfirmed => (
                Registration::Refuse { was: status },
                Registration::Refuse { was: status },
            ),
            Status::Pending | Status::Delivering => {
                (Registration::AlreadyWatching, replace(status, false))
            }
            _ => (replace(status, true), replace(status, false)),
        };
        assert_eq!(
            register(Some(&existing), &target(), "http://h/api", None),
            same
        );
        assert_eq!(
            register(Some(&existing), &other, "http://h/api", None),
            different
        );
    }
    assert_eq!(
        register(None, &target(), "http://h/api", None),
        Registration::New
    );
    let flying = in_flight();
    assert_eq!(
        register(Some(&flying), &other, "http://h/api", None),
        Registration::Refuse {
            was: Status::Delivering
        }
    );
    assert_eq!(
        register(Some(&flying), &target(), "http://h/api", None),
        Registration::AlreadyWatching
    );
    assert_eq!(
        register(Some(&pending()), &target(), "http://other:8088/api", None),
        replace(Status::Pending, false),
        "another base URL is another target"
    );
    assert_eq!(
        register(Some(&pending()), &target(), "http://h/api", Some("g")),
        replace(Status::Pending, false),
        "so is another group"
    );
}

#[test]
fn one_delivery_per_chat_oldest_first() {
    let mut a = job(Status::Delivering);
    a.job_id = "a".into();
    a.registered_at = t(2);
    let mut b = a.clone();
    b.job_id = "b".into();
    b.registered_at = t(1);
    let mut c = a.clone();
    c.job_id = "c".into();
    c.target.session_id = "s-other".into();
    let mut waiting = c.clone();
    waiting.job_id = "w".into();
    waiting.target.session_id = "s-third".into();
    waiting.delivery.as_mut().unwrap().next_attempt_at = Some(t(100));
    let mut held = c.clone();
    held.job_id = "h".into();
    held.target.session_id = "s-fourth".into();
    held.options.group = Some("g".into());
    let jobs = [a, b, c, waiting, pending(), in_flight(), held];
    let ids: Vec<&str> = deliveries(&jobs, t(10), &LIMITS)
        .iter()
        .map(|j| j.job_id.as_str())
        .collect();
    assert_eq!(ids, ["b", "c"]);
    assert_eq!(to_poll(&jobs).len(), 1);
    assert_eq!(interrupted(&jobs), [5]);
}

#[test]
fn pruning_keeps_live_and_recent_jobs() {
    let week = LIMITS.keep.as_secs();
    for status in Status::ALL {
        assert!(!prunable(&job(status), t(week), &LIMITS), "{status}");
        let old = prunable(&job(status), t(week + 2), &LIMITS);
        assert_eq!(old, status.is_terminal(), "{status}");
    }
    let mut notice = job(Status::Lost);
    notice.notice = Some(Outbound::Delivering);
    assert!(
        !prunable(&notice, t(week * 2), &LIMITS),
        "a notice still going out"
    );
}

/// A watch with `--stop-after 10s` on a child whose session is known, started at t(1).
fn stoppable() -> Job {
    let mut job = pending();
    job.options.stop_after_secs = Some(10);
    job.child_session = Some("kid".into());
    job.started_at = Some(t(1));
    job
}

fn stop_answer(answer: Result<bool, String>) -> Event {
    Event::StopAnswered {
        chat_id: Some("c-child".into()),
        answer,
    }
}

/// `--stop-after`, row by row: (case, job, event, at, outcomes, a stop out afterwards,
/// stopped afterwards).
#[test]
fn stop_after_rows() {
    let asked = || {
        let mut job = stoppable();
        job.stop_asked_at = Some(t(11));
        job
    };
    let no_session = || {
        let mut job = stoppable();
        job.child_session = None;
        job
    };
    let unasked = || {
        let mut job = stoppable();
        job.options.stop_after_secs = None;
        job
    };
    let stopped = || {
        let mut job = stoppable();
        job.stopped_at = Some(t(12));
        job
    };
    use Outcome as O;
    type StopRow = (
        &'static str,
        Job,
        Event,
        u64,
        &'static [Outcome],
        bool,
        bool,
    );
    let rows: Vec<StopRow> = vec![
        (
            "running, before the deadline",
            stoppable(),
            Event::Polled(running()),
            10,
            &[O::Polled, O::Running],
            false,
            false,
        ),
        (
            "running, at the deadline",
            stoppable(),
            Event::Polled(running()),
            11,
            &[O::Polled, O::Running, O::StopDue],
            true,
            false,
        ),
        (
            "running, a stop already out",
            asked(),
            Event::Polled(running()),
            30,
            &[O::Polled, O::Running],
            true,
            false,
        ),
        (
            "running, already stopped",
            stopped(),
            Event::Polled(running()),
            30,
            &[O::Polled, O::Running],
            false,
            true,
        ),
        (
            "running, no child session",
            no_session(),
            Event::Polled(running()),
            30,
            &[O::Polled, O::Running],
            false,
            false,
        ),
        (
            "running, no --stop-after",
            unasked(),
            Event::Polled(running()),
            30,
            &[O::Polled, O::Running],
            false,
            false,
        ),
        (
            "stopped",
            asked(),
            stop_answer(Ok(true)),
            12,
            &[O::Stopped],
            false,
            true,
        ),
        (
            "nothing running",
            asked(),
            stop_answer(Ok(false)),
            12,
            &[O::StopNotRunning],
            false,
            false,
        ),
        (
            "stop failed",
            asked(),
            stop_answer(Err("HTTP 500".into())),
            12,
            &[O::StopFailed],
            false,
            false,
        ),
        (
            "an answer with no stop out",
            stoppable(),
            stop_answer(Ok(true)),
            12,
            &[O::Ignored],
            false,
            false,
        ),
        (
            "finished with a stop out",
            asked(),
            Event::Polled(finished()),
            12,
            &[O::Polled, O::Finished],
            false,
            false,
        ),
    ];
    for (case, job, event, at, outcomes, out, was_stopped) in rows {
        let tr = apply(&job, event, t(at));
        assert_eq!(tr.outcomes, outcomes, "{case}");
        assert_eq!(tr.job.stop_asked_at.is_some(), out, "{case}: a stop out");
        assert_eq!(tr.job.stopped_at.is_some(), was_stopped, "{case}: stopped");
        assert_eq!(tr.effect, Effect::None, "{case}: a stop is no POST");
        assert_eq!(
            to_stop(std::slice::from_ref(&tr.job)).len(),
            usize::from(out),
            "{case}: to_stop"
        );
    }
    let answered = apply(&asked(), stop_answer(Err("HTTP 500".into())), t(12)).job;
    assert_eq!(answered.last_error.as_deref(), Some("HTTP 500"));
    let again = apply(&answered, Event::Polled(running()), t(32));
    assert!(
        again.outcomes.contains(&O::StopDue),
        "a failed stop is asked again"
    );
    let recorded = apply(&asked(), stop_answer(Ok(true)), t(12)).job;
    assert_eq!(recorded.child_chat_id.as_deref(), Some("c-child"));
}

#[test]
fn the_result_of_a_stopped_child_ends_with_one_stop_line() {
    let mut job = stoppable();
    job.stopped_at = Some(t(12));
    let tr = apply(&job, Event::Polled(finished()), t(20));
    assert_eq!(
        tr.job.final_text.as_deref(),
        Some("T2\n\n[atc: stopped this task after 10s at the watch's request (--stop-after 10s)]")
    );
    let plain = apply(&stoppable(), Event::Polled(finished()), t(20));
    assert_eq!(plain.job.final_text.as_deref(), Some("T2"));
}

/// A watch with `--check-in 10s` whose child started at t(1).
fn checking_in() -> Job {
    let mut job = pending();
    job.options.check_in_secs = Some(10);
    job.started_at = Some(t(1));
    job
}

/// `--check-in`, row by row: a check-in is queued when due, goes through the delivery
/// protocol like any turn (with its own delivery id), and is done once delivered or given
/// up; never more than `MAX_CHECK_INS`, never for a group member.
#[test]
fn check_in_rows() {
    use Outcome as O;
    let at = |secs| t(secs);
    // Not yet, then due.
    let early = apply(&checking_in(), Event::Polled(running()), at(10));
    assert_eq!(early.outcomes, [O::Polled, O::Running]);
    assert_eq!(
        early.job,
        checking_in(),
        "a running poll before it is due changes nothing"
    );
    let due = apply(&checking_in(), Event::Polled(running()), at(11));
    assert_eq!(due.outcomes, [O::Polled, O::Running, O::CheckInDue]);
    let job = due.job;
    assert_eq!(job.status, Status::Pending);
    assert_eq!(job.outbound(), Some(Outbound::Delivering));
    assert_eq!(
        crate::qwenpaw::chat::client_message_id(&job),
        "atc-a1b2c3d4e5f6-c1"
    );
    let text = job.final_text.clone().unwrap();
    assert!(text.starts_with("[TASK_ID: task-1]\n[STATUS: running]\n\nStill running after 10s (check-in 1 of at most 5)."), "{text}");
    assert!(text.contains("atc cancel task-1 --check-ins"), "{text}");
    assert!(is_due(&job, at(11), &LIMITS));
    // A second poll while it is on its way queues nothing more.
    let again = apply(&job, Event::Polled(running()), at(40));
    assert_eq!(again.outcomes, [O::Polled, O::Running]);
    // Busy parent: it waits like any turn.
    let busy = apply(&job, Event::Probed(busy()), at(12));
    assert_eq!(busy.outcomes, [O::Busy]);
    assert_eq!(busy.job.check_in, Some(Outbound::Delivering));
    // Claimed, posted: done, the job plain pending again, one check-in further.
    let claimed = apply(&job, Event::Probed(idle()), at(12));
    assert_eq!(claimed.outcomes, [O::Claimed]);
    assert!(
        matches!(claimed.effect, Effect::Post { ref text } if text.contains("[STATUS: running]"))
    );
    let posted = apply(&claimed.job, Event::Posted(accepted()), at(13));
    assert_eq!(posted.outcomes, [O::CheckedIn]);
    let after = posted.job;
    assert_eq!(
        (after.status, after.check_in, after.check_ins),
        (Status::Pending, None, 1)
    );
    assert!(after.final_text.is_none() && after.delivery.is_none() && after.delivered_at.is_none());
    // Unknown outcome: read back under its own id; found → done.
    let unknown = apply(
        &claimed.job,
        Event::Posted(Posted::Unknown {
            error: "reset".into(),
            http_status: None,
        }),
        at(13),
    );
    assert_eq!(unknown.job.check_in, Some(Outbound::Unconfirmed));
    let found = apply(
        &unknown.job,
        Event::Probed(Probe::Found {
            chat_id: "c1".into(),
            turn: None,
        }),
        at(30),
    );
    assert_eq!(found.outcomes, [O::CheckedIn]);
    assert_eq!(found.job.check_ins, 1);
    // Refused: dropped, not an error status.
    let refused = apply(
        &claimed.job,
        Event::Posted(Posted::Rejected {
            http_status: 404,
            detail: "x".into(),
        }),
        at(13),
    );
    assert_eq!(refused.outcomes, [O::CheckInDropped]);
    assert_eq!(
        (refused.job.status, refused.job.check_ins),
        (Status::Pending, 1)
    );
    // The child finishes while a check-in waits: the result takes over.
    let finished = apply(&job, Event::Polled(finished()), at(20));
    assert_eq!(finished.job.status, Status::Delivering);
    assert_eq!(finished.job.check_in, None);
    assert_eq!(finished.job.final_text.as_deref(), Some("T2"));
    // Cancelled while one waits: dropped with the watch.
    let cancelled = apply(&claimed.job, Event::Cancelled, at(13));
    assert_eq!(cancelled.job.status, Status::Cancelled);
    assert!(cancelled.job.check_in.is_none() && cancelled.job.delivery.is_none());
    assert!(apply(&cancelled.job, Event::Posted(accepted()), at(14)).is_ignored());
    // The next one is due a period after the last; none past the cap, none for a group.
    let second = apply(&after, Event::Polled(running()), at(21));
    assert_eq!(second.outcomes, [O::Polled, O::Running, O::CheckInDue]);
    assert_eq!(
        crate::qwenpaw::chat::client_message_id(&second.job),
        "atc-a1b2c3d4e5f6-c2"
    );
    let mut capped = after.clone();
    capped.check_ins = MAX_CHECK_INS;
    assert_eq!(
        apply(&capped, Event::Polled(running()), at(100)).outcomes,
        [O::Polled, O::Running]
    );
    let mut member = checking_in();
    member.options.group = Some("g".into());
    assert_eq!(
        apply(&member, Event::Polled(running()), at(100)).outcomes,
        [O::Polled, O::Running]
    );
    // Turned off: a queued one is dropped, none comes again.
    let off = apply(&job, Event::CheckInsOff, at(12));
    assert_eq!(off.outcomes, [O::CheckInsOff]);
    assert!(off.job.check_in.is_none() && off.job.options.check_in_secs.is_none());
    assert_eq!(
        apply(&off.job, Event::Polled(running()), at(100)).outcomes,
        [O::Polled, O::Running]
    );
    let in_flight_off = apply(&claimed.job, Event::CheckInsOff, at(12)).job;
    assert_eq!(
        in_flight_off.check_in,
        Some(Outbound::Delivering),
        "one in flight finishes"
    );
    assert!(apply(&pending(), Event::CheckInsOff, at(12)).is_ignored());
}
