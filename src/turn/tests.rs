//! The turn's state machine, in tables: every (state × event kind) pair, then the
//! sub-states whose answers differ (a POST in flight, a forward due or in flight), then
//! the rules that need more than one step.

use super::*;
use serde_json::json;
use std::time::Duration;

const LIMITS: Limits = Limits {
    max_strikes: 3,
    max_age: Duration::from_secs(3600),
    busy_retry: Duration::from_secs(20),
    busy_deadline: Duration::from_secs(600),
    settle: Duration::from_secs(5),
    keep: Duration::from_secs(7 * 86400),
    follow_up_depth: 5,
    poll_ceiling: Duration::from_secs(300),
};

fn t(secs: u64) -> Timestamp {
    Timestamp::from_unix(1_800_000_000 + secs)
}

/// A turn in `state` as a tick would leave it: open and claimed ones are due; one of
/// unknown outcome is settled and in its read-back window; a delivered one has a parent
/// turn to follow.
fn turn(state: TurnState) -> Turn {
    let mut turn = Turn::sample(state);
    turn.chat.session_id = "s-77".into();
    if state != TurnState::Open {
        turn.delivery.attempts = 1;
        turn.delivery.last_attempt_at = Some(t(0));
    }
    match state {
        TurnState::Unconfirmed => turn.delivery.unknown_since = Some(t(1)),
        TurnState::Delivered => {
            turn.delivered_at = Some(t(1));
            turn.turn_task_id = Some("task-p".into());
        }
        _ => {}
    }
    turn
}

fn apply(turn: &Turn, event: TurnEvent, now: Timestamp) -> TurnTransition {
    step(turn, event, now, &LIMITS)
}

fn idle() -> Probe {
    Probe::Chat {
        chat_id: "c1".into(),
        running: false,
        archived: false,
    }
}

fn busy() -> Probe {
    Probe::Chat {
        chat_id: "c1".into(),
        running: true,
        archived: false,
    }
}

fn accepted() -> Posted {
    Posted::Accepted {
        turn_task_id: Some("task-p".into()),
    }
}

fn in_flight() -> Turn {
    apply(&turn(TurnState::Open), TurnEvent::Probed(idle()), t(6)).turn
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Composed,
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
    ParentEnded,
    Healthy,
    Unhealthy,
    NoChannel,
    SentOk,
    SendFailed,
    SendRejected,
    SendUnknown,
    Recovered,
    ReadBackClosed,
    Redeliver,
}

const KINDS: [Kind; 24] = [
    Kind::Composed,
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
    Kind::ParentEnded,
    Kind::Healthy,
    Kind::Unhealthy,
    Kind::NoChannel,
    Kind::SentOk,
    Kind::SendFailed,
    Kind::SendRejected,
    Kind::SendUnknown,
    Kind::Recovered,
    Kind::ReadBackClosed,
    Kind::Redeliver,
];

/// Every event kind, as a pattern: a new kind that is not added here leaves the tables
/// below non-exhaustive, which does not compile.
macro_rules! any_kind {
    () => {
        Kind::Composed
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
            | Kind::ParentEnded
            | Kind::Healthy
            | Kind::Unhealthy
            | Kind::NoChannel
            | Kind::SentOk
            | Kind::SendFailed
            | Kind::SendRejected
            | Kind::SendUnknown
            | Kind::Recovered
            | Kind::ReadBackClosed
            | Kind::Redeliver
    };
}

fn event(kind: Kind) -> TurnEvent {
    match kind {
        Kind::Composed => TurnEvent::Composed {
            carries: vec![
                Block {
                    job_id: "j1".into(),
                    task_id: "task-1".into(),
                    kind: BlockKind::Result,
                },
                Block {
                    job_id: "j2".into(),
                    task_id: "task-2".into(),
                    kind: BlockKind::Result,
                },
            ],
            text: "[ATC_RESULTS] 2 tasks: 2 completed\n\nT\n\nU".into(),
            create_session: false,
        },
        Kind::NoChat => TurnEvent::Probed(Probe::NoChat),
        Kind::Idle => TurnEvent::Probed(idle()),
        Kind::Busy => TurnEvent::Probed(busy()),
        Kind::Found => TurnEvent::Probed(Probe::Found {
            chat_id: "c1".into(),
            turn: Some("completed".into()),
        }),
        Kind::NotFound => TurnEvent::Probed(Probe::NotFound {
            chat_id: "c1".into(),
            running: false,
        }),
        Kind::ProbeUnknown => TurnEvent::Probed(Probe::Unknown {
            error: "refused".into(),
        }),
        Kind::ProbeRefused => TurnEvent::Probed(Probe::Refused {
            error: "HTTP 404: Agent 'x' not found".into(),
        }),
        Kind::Accepted => TurnEvent::Posted(accepted()),
        Kind::Busy409 => TurnEvent::Posted(Posted::Busy {
            detail: "busy".into(),
        }),
        Kind::NotSent => TurnEvent::Posted(Posted::NotSent {
            error: "refused".into(),
        }),
        Kind::PostUnknown => TurnEvent::Posted(Posted::Unknown {
            error: "timed out".into(),
            http_status: None,
        }),
        Kind::Rejected => TurnEvent::Posted(Posted::Rejected {
            http_status: 404,
            detail: "Agent 'x' not found".into(),
        }),
        Kind::ParentEnded => TurnEvent::ParentPolled {
            turn: ParentTurn::Ended {
                status: "completed".into(),
                reply: "R".into(),
            },
            toast: "A result for s-77: the agent answered; open the chat to read it".into(),
            up: None,
        },
        Kind::Healthy => TurnEvent::ChannelChecked(Health::Healthy),
        Kind::Unhealthy => TurnEvent::ChannelChecked(Health::Unhealthy {
            detail: "not connected".into(),
        }),
        Kind::NoChannel => TurnEvent::ChannelChecked(Health::Missing {
            detail: "Channel 'x' not available".into(),
        }),
        Kind::SentOk => TurnEvent::Forwarded(Sent::Accepted),
        Kind::SendFailed => TurnEvent::Forwarded(Sent::Failed {
            http_status: Some(500),
            detail: "Failed to send message".into(),
        }),
        Kind::SendRejected => TurnEvent::Forwarded(Sent::Rejected {
            http_status: 404,
            detail: "Channel not found: x".into(),
        }),
        Kind::SendUnknown => TurnEvent::Forwarded(Sent::Unknown {
            error: "reset".into(),
        }),
        Kind::Recovered => TurnEvent::Recovered,
        Kind::ReadBackClosed => TurnEvent::ReadBackClosed,
        Kind::Redeliver => TurnEvent::Redeliver {
            create_session: false,
        },
    }
}

/// What a row expects: the state afterwards, whether a POST (or a send) is due, what
/// happened.
type Row = (TurnState, bool, &'static [Outcome]);

const IGNORED: &[Outcome] = &[Outcome::Ignored];

/// The table: every (state × event kind) pair, for `turn(state)`.
fn row(state: TurnState, kind: Kind) -> Row {
    use Kind as K;
    use Outcome as O;
    use TurnState as S;
    match (state, kind) {
        (S::Open, K::Composed) => (S::Open, false, &[O::Batched]),
        // The look before a POST.
        (S::Open | S::Claimed, K::NoChat) => (S::Misrouted, false, &[O::Misrouted]),
        (S::Open | S::Claimed, K::Idle) => (S::Claimed, true, &[O::Claimed]),
        (s @ (S::Open | S::Claimed), K::Busy) => (s, false, &[O::Busy]),
        (s @ (S::Open | S::Claimed), K::ProbeUnknown) => (s, false, &[O::Unreachable]),
        (S::Open | S::Claimed | S::Unconfirmed, K::ProbeRefused) => {
            (S::Refused, false, &[O::Error])
        }
        // Reading a turn of unknown outcome back.
        (S::Unconfirmed, K::Found) => (S::Delivered, false, &[O::Confirmed]),
        // Absent once: looked at again a settle window later before it goes again.
        (S::Unconfirmed, K::NotFound) => (S::Unconfirmed, false, &[O::Waiting]),
        (S::Unconfirmed, K::ProbeUnknown) => (S::Unconfirmed, false, &[O::Unconfirmed]),
        // Its chat not there: the POST that starts it may be stored late; looked at again.
        (S::Unconfirmed, K::NoChat) => (S::Unconfirmed, false, &[O::Waiting]),
        (S::Unconfirmed, K::Redeliver) => (S::Unconfirmed, false, &[O::Requeued]),
        // A console parent: the toast that says something arrived is due.
        (S::Delivered, K::ParentEnded) => (S::Delivered, false, &[O::Followed, O::Claimed]),
        // Given up with nothing of it in the chat: open again, composed anew.
        (S::Undelivered | S::Misrouted | S::Refused, K::Redeliver) => {
            (S::Open, false, &[O::Requeued])
        }
        // Everything else changes nothing: composition applies to open turns, probes to due
        // turns, POST outcomes and recovery to turns in flight (`in_flight_row`), sends to
        // forwards (`forward_row`).
        (
            state @ (S::Open
            | S::Claimed
            | S::Unconfirmed
            | S::Delivered
            | S::Undelivered
            | S::Misrouted
            | S::Refused),
            any_kind!(),
        ) => (state, false, IGNORED),
    }
}

/// A claimed turn whose write-ahead record is saved (a POST in flight).
// The last arm names every kind (so a new one must be added), some already taken above.
#[allow(unreachable_patterns)]
fn in_flight_row(kind: Kind) -> Row {
    use Kind as K;
    use Outcome as O;
    use TurnState as S;
    match kind {
        K::Accepted => (S::Delivered, false, &[O::Delivered]),
        // A definite no: nothing reached the chat, the claim is let go.
        K::Busy409 => (S::Open, false, &[O::Busy]),
        K::NotSent => (S::Open, false, &[O::Unreachable]),
        K::PostUnknown => (S::Unconfirmed, false, &[O::Unconfirmed]),
        K::Rejected => (S::Refused, false, &[O::Error]),
        K::Recovered => (S::Unconfirmed, false, &[O::RecoveredUnconfirmed]),
        any_kind!() => (S::Claimed, false, IGNORED),
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
    use TurnState as S;
    match (in_flight, kind) {
        (false, K::Healthy) => ((S::Delivered, true, &[O::Claimed]), Some(F::Pending)),
        (false, K::Unhealthy) => ((S::Delivered, false, &[O::ForwardHeld]), Some(F::Pending)),
        (false, K::NoChannel) => ((S::Delivered, false, &[O::ForwardFailed]), Some(F::Failed)),
        (true, K::SentOk) => ((S::Delivered, false, &[O::Forwarded]), Some(F::Sent)),
        (true, K::SendFailed) => ((S::Delivered, false, &[O::ForwardHeld]), Some(F::Pending)),
        (true, K::SendRejected) => ((S::Delivered, false, &[O::ForwardFailed]), Some(F::Failed)),
        (true, K::SendUnknown | K::Recovered) => (
            (S::Delivered, false, &[O::ForwardUnconfirmed]),
            Some(F::Unconfirmed),
        ),
        (_, any_kind!()) => ((S::Delivered, false, IGNORED), Some(F::Pending)),
    }
}

fn check(turn: &Turn, kind: Kind, (state, posts, outcomes): Row, case: &str) {
    let tr = apply(turn, event(kind), t(10));
    assert_eq!(tr.turn.state, state, "{case}");
    assert_eq!(tr.outcomes, outcomes, "{case}");
    assert_eq!(
        !matches!(tr.effect, Effect::None),
        posts,
        "{case}: effect {:?}",
        tr.effect
    );
    match tr.effect {
        Effect::Post { .. } => assert!(
            tr.turn.in_flight(),
            "{case}: a POST only with its write-ahead record"
        ),
        Effect::Forward { .. } => assert!(
            tr.turn.forward_in_flight(),
            "{case}: a forward only with its write-ahead record"
        ),
        Effect::None => {}
    }
    if tr.is_ignored() {
        assert_eq!(tr.turn, *turn, "{case}: an ignored event changes nothing");
    } else {
        assert_eq!(tr.turn.updated_at, t(10), "{case}: a change is dated");
    }
    // Once claimed, a turn is what it is: nothing composes it again.
    if turn.state != TurnState::Open {
        assert_eq!(
            (&tr.turn.carries, &tr.turn.text),
            (&turn.carries, &turn.text),
            "{case}"
        );
    }
}

#[test]
fn every_state_and_event_pair_has_a_row() {
    for state in TurnState::ALL {
        for kind in KINDS {
            check(
                &turn(state),
                kind,
                row(state, kind),
                &format!("{state} × {kind:?}"),
            );
        }
    }
}

fn im_parent(forward: Option<ForwardStatus>, in_flight: bool) -> Turn {
    let mut done = turn(TurnState::Delivered);
    done.chat.channel = "mqtt".into();
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
fn sub_states_have_their_rows() {
    let flying = in_flight();
    for kind in KINDS {
        check(
            &flying,
            kind,
            in_flight_row(kind),
            &format!("in flight × {kind:?}"),
        );
    }
    for forward_in_flight in [false, true] {
        let im = im_parent(Some(ForwardStatus::Pending), forward_in_flight);
        for kind in KINDS {
            let (row, forward) = forward_row(forward_in_flight, kind);
            let case = format!("forward (in flight: {forward_in_flight}) × {kind:?}");
            check(&im, kind, row, &case);
            let after = apply(&im, event(kind), t(10)).turn;
            assert_eq!(after.forward.map(|f| f.status), forward, "{case}");
        }
    }
}

#[test]
fn a_claim_is_the_write_ahead_record_and_carries_the_text() {
    let tr = apply(&turn(TurnState::Open), TurnEvent::Probed(idle()), t(6));
    assert_eq!(tr.effect, Effect::Post { text: "T".into() });
    let d = &tr.turn.delivery;
    assert_eq!((d.attempts, d.attempt_started_at), (1, Some(t(6))));
    assert_eq!(tr.turn.chat_id.as_deref(), Some("c1"));
    assert_eq!(tr.turn.state, TurnState::Claimed);
    assert!(!is_due(&tr.turn, t(6), &LIMITS), "one POST at a time");
    let mut no_text = turn(TurnState::Open);
    no_text.text = None;
    assert!(apply(&no_text, TurnEvent::Probed(idle()), t(6)).is_ignored());
    let mut empty = turn(TurnState::Open);
    empty.carries.clear();
    assert!(
        !is_due(&empty, t(6), &LIMITS),
        "a turn carrying nothing never goes"
    );
}

#[test]
fn a_busy_chat_is_asked_again_each_tick_until_the_deadline() {
    let first = apply(&turn(TurnState::Open), TurnEvent::Probed(busy()), t(10)).turn;
    let d = &first.delivery;
    assert_eq!(
        (d.busy, d.waiting_since, d.next_attempt_at),
        (1, Some(t(10)), None),
        "no back-off: the next tick asks again"
    );
    assert!(is_due(&first, t(11), &LIMITS));
    assert!(
        first.is_open(),
        "still open: a result due meanwhile may join it"
    );
    let still = apply(&first, TurnEvent::Probed(busy()), t(610)).turn;
    assert_eq!(still.state, TurnState::Open, "exactly at the deadline");
    let given_up = apply(&still, TurnEvent::Probed(busy()), t(611));
    assert_eq!(given_up.turn.state, TurnState::Undelivered);
    assert_eq!(given_up.outcomes, [Outcome::Undelivered]);
    assert_eq!(given_up.turn.text.as_deref(), Some("T"), "the text is kept");
    let delivered = apply(
        &apply(&still, TurnEvent::Probed(idle()), t(300)).turn,
        TurnEvent::Posted(accepted()),
        t(301),
    )
    .turn;
    assert_eq!(
        (
            delivered.state,
            delivered.delivered_at,
            &delivered.delivery.error
        ),
        (TurnState::Delivered, Some(t(301)), &None),
        "a delivery clears the busy error"
    );
}

#[test]
fn a_409_after_the_claim_backs_off_and_lets_the_claim_go_unless_it_was_ever_unknown() {
    let tr = apply(
        &in_flight(),
        TurnEvent::Posted(Posted::Busy {
            detail: "busy".into(),
        }),
        t(7),
    );
    let j = tr.turn;
    let d = &j.delivery;
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
    assert!(d.error.as_deref().unwrap().contains("409: busy"));
    assert_eq!(j.state, TurnState::Open, "nothing of it is in the chat");
    assert!(!is_due(&j, t(26), &LIMITS));
    assert!(is_due(&j, t(27), &LIMITS));
    assert!(
        !apply(&j, event(Kind::Composed), t(28)).is_ignored(),
        "open again: composed again"
    );
    let unreachable = apply(
        &apply(&j, TurnEvent::Probed(idle()), t(27)).turn,
        TurnEvent::Posted(Posted::NotSent {
            error: "refused".into(),
        }),
        t(700),
    );
    assert_eq!(unreachable.outcomes, [Outcome::Undelivered]);
    let d = &unreachable.turn.delivery;
    assert_eq!((d.attempts, d.busy, d.unreachable), (2, 1, 1));
    assert_eq!(
        d.last_http_status, None,
        "an answer that never came clears the status of the one before"
    );
    let looked = apply(&j, TurnEvent::Probed(busy()), t(27)).turn;
    assert_eq!(
        (looked.delivery.busy, looked.delivery.last_http_status),
        (2, Some(409)),
        "a look that found the chat running is no HTTP answer: the 409 stays"
    );
    // Once a POST of it had an unknown outcome, it may be in a chat: a 409 on the next
    // POST keeps it what it is.
    let mut was_unknown = in_flight();
    was_unknown.delivery.unknown_since = Some(t(2));
    let busy = apply(
        &was_unknown,
        TurnEvent::Posted(Posted::Busy {
            detail: "busy".into(),
        }),
        t(7),
    )
    .turn;
    assert_eq!(busy.state, TurnState::Claimed);
    assert!(apply(&busy, event(Kind::Composed), t(8)).is_ignored());
    assert!(is_due(&busy, t(27), &LIMITS), "posted again, as it is");
}

#[test]
fn an_unknown_delivery_is_read_back_and_posted_again_only_if_absent_and_idle() {
    let unknown = apply(
        &in_flight(),
        TurnEvent::Posted(Posted::Unknown {
            error: "HTTP 502: Bad Gateway".into(),
            http_status: Some(502),
        }),
        t(7),
    )
    .turn;
    assert_eq!(unknown.state, TurnState::Unconfirmed);
    assert_eq!(unknown.delivery.unknown_since, Some(t(7)));
    assert!(is_due(&unknown, t(8), &LIMITS));

    let not_found = |running| {
        TurnEvent::Probed(Probe::NotFound {
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
    // Absent once, settled and idle: not proof (a server may store a POST late). Looked
    // at again a settle window later, absent still: posted again.
    let once = apply(&unknown, not_found(false), t(12));
    assert_eq!(
        once.outcomes,
        [Outcome::Waiting],
        "one absent look is not proof"
    );
    assert_eq!(once.turn.delivery.absent_since, Some(t(12)));
    let soon = apply(&once.turn, not_found(false), t(13));
    assert_eq!(
        soon.outcomes,
        [Outcome::Waiting],
        "a settle window between looks"
    );
    let running = apply(&once.turn, not_found(true), t(20));
    assert_eq!(
        running.turn.delivery.absent_since, None,
        "a running chat starts the count again"
    );
    let again = apply(
        &once.turn,
        not_found(false),
        t(12 + LIMITS.settle.as_secs()),
    );
    assert_eq!(again.effect, Effect::Post { text: "T".into() });
    assert_eq!(again.turn.delivery.attempts, 2);
    assert_eq!(again.turn.state, TurnState::Claimed);
    assert_eq!(again.turn.delivery.absent_since, None);

    let found = apply(
        &unknown,
        TurnEvent::Probed(Probe::Found {
            chat_id: "c1".into(),
            turn: Some("failed".into()),
        }),
        t(60),
    )
    .turn;
    assert_eq!(found.state, TurnState::Delivered);
    assert_eq!(found.parent_turn.as_deref(), Some("failed"));
    assert_eq!(found.delivery.confirmed.as_deref(), Some("read-back"));

    let unreadable = apply(
        &unknown,
        TurnEvent::Probed(Probe::Unknown {
            error: "HTTP 500".into(),
        }),
        t(60),
    )
    .turn;
    assert_eq!(unreadable.state, TurnState::Unconfirmed);
    assert!(is_due(&unreadable, t(607), &LIMITS));
    assert!(
        !is_due(&unreadable, t(608), &LIMITS),
        "read back at most --busy-deadline"
    );
    assert!(!is_settled(&unreadable));
}

#[test]
fn a_closed_read_back_window_is_recorded_once_and_settles_the_turn() {
    let unknown = turn(TurnState::Unconfirmed);
    assert!(
        apply(&unknown, TurnEvent::ReadBackClosed, t(601)).is_ignored(),
        "still open"
    );
    assert!(read_backs_closed(std::slice::from_ref(&unknown), t(601), &LIMITS).is_empty());
    assert_eq!(
        read_backs_closed(std::slice::from_ref(&unknown), t(602), &LIMITS),
        [0]
    );
    assert!(!is_settled(&unknown));
    let closed = apply(&unknown, TurnEvent::ReadBackClosed, t(602));
    assert_eq!(closed.outcomes, [Outcome::ReadBackClosed]);
    assert_eq!(closed.turn.state, TurnState::Unconfirmed);
    assert_eq!(closed.turn.delivery.read_back_closed_at, Some(t(602)));
    assert!(is_settled(&closed.turn), "nothing left for a tick to do");
    assert!(
        apply(&closed.turn, TurnEvent::ReadBackClosed, t(700)).is_ignored(),
        "once"
    );
    let again = apply(
        &closed.turn,
        TurnEvent::Redeliver {
            create_session: false,
        },
        t(800),
    )
    .turn;
    assert_eq!(again.delivery.read_back_closed_at, None);
    assert!(
        is_due(&again, t(801), &LIMITS),
        "redeliver reads it back again"
    );
}

#[test]
fn a_missing_chat_is_misrouted_unless_a_new_one_was_asked_for() {
    let misrouted = apply(
        &turn(TurnState::Open),
        TurnEvent::Probed(Probe::NoChat),
        t(10),
    )
    .turn;
    assert_eq!(misrouted.state, TurnState::Misrouted);
    assert!(
        misrouted
            .delivery
            .error
            .unwrap()
            .contains("no chat with session s-77")
    );
    assert_eq!(misrouted.text.as_deref(), Some("T"), "the text is kept");
    let mut create = turn(TurnState::Open);
    create.create_session = true;
    let tr = apply(&create, TurnEvent::Probed(Probe::NoChat), t(10));
    assert!(matches!(tr.effect, Effect::Post { .. }));
    // Of unknown outcome, its chat absent for sure (a second look a settle window after
    // the first): misrouted too, never posted again into a chat it may not start (the
    // POST would make a ghost session), unless a new chat was asked for.
    for create_session in [false, true] {
        let mut unknown = turn(TurnState::Unconfirmed);
        unknown.create_session = create_session;
        let once = apply(&unknown, TurnEvent::Probed(Probe::NoChat), t(10));
        assert_eq!(once.outcomes, [Outcome::Waiting], "one look is not proof");
        let settle = LIMITS.settle.as_secs();
        let sure = apply(&once.turn, TurnEvent::Probed(Probe::NoChat), t(10 + settle));
        if create_session {
            assert_eq!(sure.effect, Effect::Post { text: "T".into() });
            assert_eq!(sure.turn.state, TurnState::Claimed);
        } else {
            assert_eq!(sure.effect, Effect::None);
            assert_eq!(sure.turn.state, TurnState::Misrouted);
            assert_eq!(sure.outcomes, [Outcome::Misrouted]);
        }
    }
}

/// Only an open turn is composed again, and only when its members, its text or its leave to
/// start the chat changed; the same again is no step at all (the composer relies on it).
#[test]
fn an_open_turn_is_composed_again_only_when_something_of_it_changed() {
    let open = apply(&turn(TurnState::Open), event(Kind::Composed), t(10)).turn;
    assert!(
        apply(&open, event(Kind::Composed), t(11)).is_ignored(),
        "the same members, text and leave: unchanged"
    );
    let TurnEvent::Composed { carries, text, .. } = event(Kind::Composed) else {
        unreachable!()
    };
    let changes = [
        (carries[..1].to_vec(), text.clone(), false, "a member left"),
        (carries.clone(), format!("{text}!"), false, "the text alone"),
        (
            carries.clone(),
            text.clone(),
            true,
            "the leave to start the chat",
        ),
    ];
    for (carries, text, create_session, what) in changes {
        let event = TurnEvent::Composed {
            carries: carries.clone(),
            text: text.clone(),
            create_session,
        };
        let tr = apply(&open, event, t(12));
        assert_eq!(tr.outcomes, [Outcome::Batched], "{what}");
        assert_eq!(
            (tr.turn.carries, tr.turn.text, tr.turn.create_session),
            (carries, Some(text), create_session),
            "{what}"
        );
        assert_eq!(tr.turn.updated_at, t(12), "{what}");
    }
}

/// A turn's record leaves out what is its default (the file every tick reads stays
/// small) and writes what is not.
#[test]
fn a_turns_record_leaves_out_its_defaults() {
    let mut turn = Turn::sample(TurnState::Open);
    let written = serde_json::to_value(&turn).unwrap();
    for key in ["create_session", "forward_mode"] {
        assert!(written.get(key).is_none(), "{key} in {written}");
    }
    assert!(
        written["delivery"].get("unreachable").is_none(),
        "{written}"
    );
    turn.create_session = true;
    turn.forward_mode = ForwardMode::Never;
    turn.delivery.unreachable = 2;
    let written = serde_json::to_value(&turn).unwrap();
    assert_eq!(
        (
            &written["create_session"],
            &written["forward_mode"],
            &written["delivery"]["unreachable"]
        ),
        (&json!(true), &json!("never"), &json!(2))
    );
    assert_eq!(serde_json::from_value::<Turn>(written).unwrap(), turn);
}

#[test]
fn refused_posts_keep_the_reason() {
    let rejected = apply(
        &in_flight(),
        TurnEvent::Posted(Posted::Rejected {
            http_status: 404,
            detail: "Agent 'x' not found".into(),
        }),
        t(7),
    )
    .turn;
    assert_eq!(rejected.state, TurnState::Refused);
    assert_eq!(
        rejected.delivery.error.as_deref(),
        Some("404: Agent 'x' not found")
    );
}

#[test]
fn recovery_turns_an_interrupted_post_into_one_to_read_back() {
    let tr = apply(&in_flight(), TurnEvent::Recovered, t(9));
    assert_eq!(tr.turn.state, TurnState::Unconfirmed);
    assert!(!tr.turn.in_flight());
    let d = &tr.turn.delivery;
    assert_eq!(
        (d.unknown_since, d.last_attempt_at),
        (Some(t(9)), Some(t(6))),
        "read back from now on; settled from the attempt"
    );
    let why = d.error.clone().unwrap();
    assert!(
        why.contains("stopped while posting") && why.contains(&t(6).to_string()),
        "{why}"
    );
    assert_eq!(interrupted(&[turn(TurnState::Open), in_flight()]), [1]);
}

#[test]
fn redelivery_opens_a_turn_given_up_and_reads_an_unknown_one_back_first() {
    let given_up = apply(&turn(TurnState::Open), TurnEvent::Probed(busy()), t(1)).turn;
    let given_up = apply(&given_up, TurnEvent::Probed(busy()), t(700)).turn;
    assert_eq!(given_up.state, TurnState::Undelivered);
    let again = apply(
        &given_up,
        TurnEvent::Redeliver {
            create_session: true,
        },
        t(800),
    )
    .turn;
    assert_eq!(
        again.state,
        TurnState::Open,
        "composed anew: nothing of it was posted"
    );
    assert!(again.create_session);
    assert_eq!(again.delivery.waiting_since, None);
    assert!(is_due(&again, t(800), &LIMITS));

    let unknown = apply(
        &turn(TurnState::Unconfirmed),
        TurnEvent::Redeliver {
            create_session: false,
        },
        t(900),
    )
    .turn;
    assert_eq!(
        unknown.state,
        TurnState::Unconfirmed,
        "read back, never posted blind"
    );
    assert_eq!(unknown.delivery.unknown_since, Some(t(900)));
    // An open one without leave to start its chat may still get it.
    let leave = apply(
        &turn(TurnState::Open),
        TurnEvent::Redeliver {
            create_session: true,
        },
        t(1),
    );
    assert_eq!(leave.outcomes, [Outcome::Requeued]);
    assert!(leave.turn.create_session);
    assert!(
        apply(
            &leave.turn,
            TurnEvent::Redeliver {
                create_session: true
            },
            t(2)
        )
        .is_ignored()
    );
}

#[test]
fn the_parent_turn_is_followed_until_it_ends_and_a_console_parent_gets_one_toast() {
    let done = turn(TurnState::Delivered);
    let parent = |turn| TurnEvent::ParentPolled {
        turn,
        toast: "TOAST".into(),
        up: None,
    };
    assert!(apply(&done, parent(ParentTurn::Running), t(5)).is_ignored());
    let ended = apply(
        &done,
        parent(ParentTurn::Ended {
            status: "failed".into(),
            reply: String::new(),
        }),
        t(5),
    )
    .turn;
    assert_eq!(ended.parent_turn.as_deref(), Some("failed"));
    let toast = ended.forward.clone().unwrap();
    assert_eq!(
        (toast.status, toast.text.as_deref(), toast.since),
        (ForwardStatus::Pending, Some("TOAST"), Some(t(5))),
        "the console shows the reply itself"
    );
    let gone = apply(&done, parent(ParentTurn::Gone), t(5)).turn;
    assert_eq!(gone.parent_turn.as_deref(), Some("unknown"));
    assert_eq!(
        to_follow(std::slice::from_ref(&done), t(600), &LIMITS).len(),
        1
    );
    assert!(to_follow(std::slice::from_ref(&done), t(602), &LIMITS).is_empty());
    // Claimed, sent, recorded: never sent again.
    let claimed = apply(&ended, TurnEvent::ChannelChecked(Health::Healthy), t(6));
    assert_eq!(
        claimed.effect,
        Effect::Forward {
            text: "TOAST".into()
        }
    );
    let sent = apply(&claimed.turn, TurnEvent::Forwarded(Sent::Accepted), t(7)).turn;
    assert!(!forward_due(&sent));
    let mut never = done.clone();
    never.forward_mode = ForwardMode::Never;
    assert_eq!(
        apply(
            &never,
            parent(ParentTurn::Ended {
                status: "completed".into(),
                reply: "R".into()
            }),
            t(5)
        )
        .turn
        .forward,
        None
    );
}

/// A reply woken in a child's chat (issue 37) is neither toasted nor forwarded there,
/// whether it goes up (the follow-up is toasted where it lands) or stays (the depth
/// limit…: the turn says why).
#[test]
fn a_reply_that_goes_up_is_not_toasted_where_it_was_woken() {
    let done = turn(TurnState::Delivered);
    let ended = |up| TurnEvent::ParentPolled {
        turn: ParentTurn::Ended {
            status: "completed".into(),
            reply: "R".into(),
        },
        toast: "TOAST".into(),
        up: Some(up),
    };
    let up = |turn: Option<&str>, not: Option<&str>| Up {
        job_id: "jc".into(),
        task_id: "task-c".into(),
        turn: turn.map(str::to_owned),
        not: not.map(str::to_owned),
    };
    let went = apply(&done, ended(up(Some("atc-j1-up"), None)), t(5));
    assert_eq!(went.outcomes, [Outcome::Followed, Outcome::WentUp]);
    assert_eq!(went.turn.forward, None);
    assert_eq!(went.turn.up, Some(up(Some("atc-j1-up"), None)));
    assert_eq!(went.turn.parent_turn.as_deref(), Some("completed"));
    let stayed = apply(&done, ended(up(None, Some("depth"))), t(5));
    assert_eq!(stayed.outcomes, [Outcome::Followed, Outcome::StayedDown]);
    assert_eq!(stayed.turn.forward, None, "nobody reads a child's chat");
    assert_eq!(stayed.turn.up.unwrap().not.as_deref(), Some("depth"));
    assert!(apply(&went.turn, ended(up(Some("x"), None)), t(6)).is_ignored());
}

#[test]
fn a_parents_reply_is_forwarded_only_from_an_im_channel_and_only_when_there_is_one() {
    let ended = |reply: &str, status: &str| TurnEvent::ParentPolled {
        turn: ParentTurn::Ended {
            status: status.into(),
            reply: reply.into(),
        },
        toast: "TOAST".into(),
        up: None,
    };
    let im = im_parent(None, false);
    let claimed = apply(&im, ended("FINAL", "completed"), t(5));
    assert_eq!(
        claimed.outcomes,
        [Outcome::Followed, Outcome::Claimed],
        "a forward to send"
    );
    let pending = claimed.turn;
    let forward = pending.forward.clone().unwrap();
    assert_eq!(
        (forward.status, forward.text.as_deref(), forward.since),
        (ForwardStatus::Pending, Some("FINAL"), Some(t(5)))
    );
    assert!(forward_due(&pending));
    for (reply, status, says) in [
        ("", "completed", "empty"),
        ("x", "failed", "the parent's turn failed"),
    ] {
        let tr = apply(&im, ended(reply, status), t(5));
        assert_eq!(
            tr.outcomes,
            [Outcome::Followed, Outcome::ForwardSkipped],
            "{says}"
        );
        let skipped = tr.turn.forward.unwrap();
        assert_eq!(skipped.status, ForwardStatus::Skipped);
        assert!(skipped.reason.unwrap().contains(says));
    }
}

#[test]
fn a_forward_is_held_for_an_unhealthy_channel_until_the_deadline_and_retried_a_few_times() {
    let im = im_parent(Some(ForwardStatus::Pending), false);
    let unhealthy = TurnEvent::ChannelChecked(Health::Unhealthy {
        detail: "MQTT client is not connected to broker.".into(),
    });
    let held = apply(&im, unhealthy.clone(), t(601)).turn;
    let f = held.forward.unwrap();
    assert_eq!(f.status, ForwardStatus::Pending);
    assert!(f.reason.unwrap().contains("not connected"));
    let expired = apply(&im, unhealthy, t(602)).turn.forward.unwrap();
    assert_eq!(expired.status, ForwardStatus::Failed);
    assert!(expired.reason.unwrap().contains("--busy-deadline"));

    let mut j = im;
    for n in 1..=FORWARD_ATTEMPTS {
        let claimed = apply(&j, TurnEvent::ChannelChecked(Health::Healthy), t(10));
        assert_eq!(claimed.effect, Effect::Forward { text: "R".into() });
        j = apply(
            &claimed.turn,
            TurnEvent::Forwarded(Sent::Failed {
                http_status: Some(500),
                detail: "Failed to send message: x".into(),
            }),
            t(11),
        )
        .turn;
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
fn one_turn_per_chat_claimed_before_open_oldest_first() {
    let mut a = turn(TurnState::Open);
    a.turn_id = "a".into();
    a.created_at = t(2);
    let mut b = a.clone();
    b.turn_id = "b".into();
    b.created_at = t(1);
    let mut claimed = a.clone();
    claimed.turn_id = "claimed".into();
    claimed.state = TurnState::Claimed;
    claimed.created_at = t(5);
    let mut c = a.clone();
    c.turn_id = "c".into();
    c.chat.session_id = "s-other".into();
    let mut waiting = c.clone();
    waiting.turn_id = "w".into();
    waiting.chat.session_id = "s-third".into();
    waiting.delivery.next_attempt_at = Some(t(100));
    let mut flying = in_flight();
    flying.chat.session_id = "s-fourth".into();
    let turns = [a, b, claimed, c, waiting, flying];
    let ids: Vec<&str> = deliveries(&turns, t(10), &LIMITS, |_| false)
        .iter()
        .map(|t| t.turn_id.as_str())
        .collect();
    assert_eq!(ids, ["claimed", "c"]);
}

#[test]
fn ids_tell_turns_apart_and_settled_turns_without_jobs_are_pruned() {
    let block = |kind| Block {
        job_id: "j1".into(),
        task_id: "task-1".into(),
        kind,
    };
    assert_eq!(new_id(&block(BlockKind::Result), |_| false), "atc-j1");
    assert_eq!(
        new_id(&block(BlockKind::CheckIn { n: 3 }), |_| false),
        "atc-j1-c3"
    );
    assert_eq!(
        new_id(&block(BlockKind::Result), |id| id == "atc-j1"
            || id == "atc-j1-2"),
        "atc-j1-3"
    );
    let mut delivered = turn(TurnState::Delivered);
    delivered.parent_turn = Some("completed".into());
    assert!(
        !prunable(&delivered, t(0), &LIMITS, |id| id == "j1"),
        "its job remains"
    );
    assert!(prunable(&delivered, t(0), &LIMITS, |_| false));
    // Named for a job that remains (its block left the turn before it was claimed): kept,
    // so that job's next turn gets another id.
    let mut named = delivered.clone();
    named.turn_id = "atc-j0".into();
    assert!(
        !prunable(&named, t(0), &LIMITS, |id| id == "j0"),
        "the job it was named for remains"
    );
    named.turn_id = "atc-j0-c2-3".into();
    assert!(!prunable(&named, t(0), &LIMITS, |id| id == "j0"));
    assert!(prunable(&named, t(0), &LIMITS, |id| id == "j9"));
    assert!(
        !prunable(&turn(TurnState::Claimed), t(0), &LIMITS, |_| false),
        "not settled"
    ); // The turn it woke is still followed (its reply may go up a tree, or on to the
    // person): kept until that ends, or --busy-deadline after delivery.
    let mut woke = turn(TurnState::Delivered);
    woke.turn_task_id = Some("parent-turn".into());
    woke.delivered_at = Some(t(0));
    assert!(!prunable(&woke, t(1), &LIMITS, |_| false), "still followed");
    assert!(
        prunable(&woke, t(700), &LIMITS, |_| false),
        "past the busy deadline"
    );
    woke.parent_turn = Some("completed".into());
    assert!(prunable(&woke, t(1), &LIMITS, |_| false), "followed");
}

/// One rule for "was it claimed?": a turn that may be in the chat, carrying the job.
#[test]
fn claimed_is_a_turn_that_may_be_in_the_chat_carrying_the_job() {
    for state in TurnState::ALL {
        let turn = Turn::sample(state);
        let may_be_in_the_chat = matches!(
            state,
            TurnState::Claimed | TurnState::Unconfirmed | TurnState::Delivered
        );
        assert_eq!(claimed(Some(&turn), "j1"), may_be_in_the_chat, "{state}");
        assert!(!claimed(Some(&turn), "j2"), "{state}: another job's turn");
    }
    assert!(!claimed(None, "j1"));
}
