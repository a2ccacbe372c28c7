//! The job's state machine, in tables: every (standing × event kind) pair, where a
//! standing is where the watch stands and, for a finished child, where the turn that
//! carries its result stands (the job reads it there; it keeps no copy). Then the
//! sub-states whose answers differ (a check-in on its way, a notice), then the rules that
//! need more than one step. The turn's own machine has its table in `turn/tests.rs`.

use super::*;
use crate::job::{Options, Target};
use crate::turn::BlockKind;

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
    let mut job = Job::sample(Watch::Pending);
    job.target = target();
    job.registered_at = t(0);
    job.updated_at = t(0);
    job
}

/// The turn the jobs of these tables point at.
const TURN: &str = "atc-a1b2c3d4e5f6";

/// A job whose watch is `watch`, as a tick would leave it: a finished one has its text
/// (and no turn yet); ended ones have what their ending recorded (no notice).
fn job(watch: Watch) -> Job {
    let mut job = pending();
    if matches!(watch, Watch::Finished | Watch::Skipped) {
        job.final_text = Some("T".into());
        job.outcome = Some(TaskOutcome::Completed);
    }
    job.watch = watch;
    job
}

/// The turn `TURN` in `state`, carrying `job`'s block `kind`.
fn carrying(job: &Job, kind: BlockKind, state: TurnState) -> Turn {
    let mut turn = Turn::sample(state);
    turn.turn_id = TURN.into();
    turn.carries[0].job_id.clone_from(&job.job_id);
    turn.carries[0].kind = kind;
    turn
}

fn apply(job: &Job, event: Event, now: Timestamp) -> Transition {
    step(job, None, event, now, &LIMITS)
}

fn apply_in(job: &Job, turn: &Turn, event: Event, now: Timestamp) -> Transition {
    step(job, Some(turn), event, now, &LIMITS)
}

fn running() -> Check {
    Check::Running {
        started_at: Some(t(1)),
        turn_ended: false,
    }
}

fn finished() -> Check {
    Check::Finished {
        text: "T2".into(),
        started_at: None,
        outcome: TaskOutcome::Completed,
        empty: false,
        child_session: None,
    }
}

/// Where a job stands: its watch, and for a finished child, where its result's turn is.
#[derive(Clone, Copy, Debug)]
enum Stand {
    Pending,
    /// Finished, no turn carries its result yet.
    Due,
    InOpen,
    InClaimed,
    Unconfirmed,
    Delivered,
    Undelivered,
    Misrouted,
    Refused,
    Lost,
    Abandoned,
    Expired,
    Cancelled,
    Skipped,
}

const STANDS: [Stand; 14] = [
    Stand::Pending,
    Stand::Due,
    Stand::InOpen,
    Stand::InClaimed,
    Stand::Unconfirmed,
    Stand::Delivered,
    Stand::Undelivered,
    Stand::Misrouted,
    Stand::Refused,
    Stand::Lost,
    Stand::Abandoned,
    Stand::Expired,
    Stand::Cancelled,
    Stand::Skipped,
];

/// The job and its turn for `stand`.
fn standing(stand: Stand) -> (Job, Option<Turn>) {
    use Stand as D;
    let in_turn = |state| {
        let mut job = job(Watch::Finished);
        job.turn = Some(TURN.into());
        let turn = carrying(&job, BlockKind::Result, state);
        (job, Some(turn))
    };
    match stand {
        D::Pending => (pending(), None),
        D::Due => (job(Watch::Finished), None),
        D::InOpen => in_turn(TurnState::Open),
        D::InClaimed => in_turn(TurnState::Claimed),
        D::Unconfirmed => in_turn(TurnState::Unconfirmed),
        D::Delivered => in_turn(TurnState::Delivered),
        D::Undelivered => in_turn(TurnState::Undelivered),
        D::Misrouted => in_turn(TurnState::Misrouted),
        D::Refused => in_turn(TurnState::Refused),
        D::Lost => (job(Watch::Lost), None),
        D::Abandoned => (job(Watch::Abandoned), None),
        D::Expired => (job(Watch::Expired), None),
        D::Cancelled => (job(Watch::Cancelled), None),
        D::Skipped => (job(Watch::Skipped), None),
    }
}

/// The kinds of event, one representative each.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Running,
    Finished,
    Lost,
    Failed,
    Cancelled,
    CheckInsOff,
    StopAnswered,
    Joined,
    Left,
    Requeued,
    Read,
    CheckInSettled,
}

const KINDS: [Kind; 12] = [
    Kind::Running,
    Kind::Finished,
    Kind::Lost,
    Kind::Failed,
    Kind::Cancelled,
    Kind::CheckInsOff,
    Kind::StopAnswered,
    Kind::Joined,
    Kind::Left,
    Kind::Requeued,
    Kind::Read,
    Kind::CheckInSettled,
];

/// Every event kind, as a pattern: a new kind that is not added here leaves the tables
/// below non-exhaustive, which does not compile.
macro_rules! any_kind {
    () => {
        Kind::Running
            | Kind::Finished
            | Kind::Lost
            | Kind::Failed
            | Kind::Cancelled
            | Kind::CheckInsOff
            | Kind::StopAnswered
            | Kind::Joined
            | Kind::Left
            | Kind::Requeued
            | Kind::Read
            | Kind::CheckInSettled
    };
}

/// The event of `kind`.
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
        Kind::Cancelled => Event::Cancelled,
        Kind::CheckInsOff => Event::CheckInsOff,
        Kind::StopAnswered => Event::StopAnswered {
            agent: None,
            chat_id: Some("c-child".into()),
            answer: StopAnswer::Stopped,
        },
        Kind::Joined => Event::Joined {
            turn: "atc-other".into(),
        },
        Kind::Left => Event::Left,
        Kind::Requeued => Event::Requeued {
            create_session: false,
        },
        Kind::Read => Event::ReadByParent,
        Kind::CheckInSettled => Event::CheckInSettled,
    }
}

/// What a row expects: the status shown afterwards (with the same turn), and what
/// happened.
type Row = (Status, &'static [Outcome]);

const IGNORED: &[Outcome] = &[Outcome::Ignored];

/// The table: every (standing × event kind) pair. Exhaustive by construction: a new
/// standing or event kind does not compile here until it has its rows.
fn row(stand: Stand, kind: Kind) -> Row {
    use Kind as K;
    use Outcome as O;
    use Stand as D;
    use Status as S;
    match (stand, kind) {
        (D::Pending, K::Running) => (S::Pending, &[O::Polled, O::Running]),
        (D::Pending, K::Finished) => (S::Delivering, &[O::Polled, O::Finished]),
        (D::Pending, K::Lost) => (S::Lost, &[O::Polled, O::Lost, O::Noticed]),
        (D::Pending, K::Failed) => (S::Pending, &[O::Polled, O::FailedCheck]),
        (D::Pending | D::Due | D::InOpen, K::Cancelled) => (S::Cancelled, &[O::Cancelled]),
        // Its turn was claimed: the cancel cannot take it out, the result may be on its way.
        (D::InClaimed | D::Unconfirmed, K::Cancelled) => (S::Cancelled, &[O::CancelledInFlight]),
        (D::Cancelled, K::Cancelled) => (S::Cancelled, &[O::AlreadyCancelled]),

        // A result on its way goes into a turn, or out of one.
        (D::Due, K::Joined) => (S::Delivering, &[O::Batched]),
        (D::InOpen | D::InClaimed, K::Joined) => (S::Delivering, &[O::Batched]),
        (D::InOpen | D::InClaimed, K::Left) => (S::Delivering, &[O::Unsealed]),

        // `redeliver` of a given-up result whose turn went elsewhere: on its way again.
        (D::Undelivered | D::Misrouted | D::Refused, K::Requeued) => {
            (S::Delivering, &[O::Requeued])
        }

        // The parent read the finished result itself: what is not on its way is not
        // posted (a watch still pending, a result waiting or given up); a turn already
        // claimed goes out as it is.
        (D::Pending | D::Due | D::InOpen | D::Undelivered | D::Misrouted | D::Refused, K::Read) => {
            (S::Skipped, &[O::ReadByParent])
        }
        (D::InClaimed, K::Read) => (S::Delivering, &[O::ReadInFlight]),
        (D::Unconfirmed, K::Read) => (S::Unconfirmed, &[O::ReadInFlight]),

        // Everything else changes nothing: polls apply to pending jobs only, composition to
        // a job that owes something; an ended job is only ever pruned.
        (
            stand @ (D::Pending
            | D::Due
            | D::InOpen
            | D::InClaimed
            | D::Unconfirmed
            | D::Delivered
            | D::Undelivered
            | D::Misrouted
            | D::Refused
            | D::Lost
            | D::Abandoned
            | D::Expired
            | D::Cancelled
            | D::Skipped),
            any_kind!(),
        ) => {
            let (job, turn) = standing(stand);
            (crate::status::status(&job, turn.as_ref()), IGNORED)
        }
    }
}

fn check(job: &Job, turn: Option<&Turn>, kind: Kind, (status, outcomes): Row, case: &str) -> Job {
    let tr = step(job, turn, event(kind), t(10), &LIMITS);
    assert_eq!(crate::status::status(&tr.job, turn), status, "{case}");
    assert_eq!(tr.outcomes, outcomes, "{case}");
    if tr.is_ignored() {
        assert_eq!(tr.job, *job, "{case}: an ignored event changes nothing");
    } else if tr.outcomes != [Outcome::AlreadyCancelled] {
        assert_eq!(tr.job.updated_at, t(10), "{case}: a change is dated");
        assert_eq!(tr.job.note, None, "{case}: the fields say the rest");
    }
    tr.job
}

/// Every pair, each job with the note an import leaves: an event that applies clears it
/// (the fields and the turn say the rest), one that does not leaves it, like the rest.
#[test]
fn every_standing_and_event_pair_has_a_row() {
    for stand in STANDS {
        let (mut job, turn) = standing(stand);
        job.note = Some("imported from the agent-task-callback plugin".into());
        for kind in KINDS {
            check(
                &job,
                turn.as_ref(),
                kind,
                row(stand, kind),
                &format!("{stand:?} × {kind:?}"),
            );
        }
    }
}

/// A pending job whose check-in 1 is in turn `TURN`, in `state` (`closed`: its read-back
/// window closed): what a poll that finds the child running makes of it.
#[test]
fn a_check_in_is_done_when_its_turn_settles_and_the_next_poll_sees_it() {
    use Outcome as O;
    let mut checking = pending();
    checking.options.check_in_secs = Some(10);
    checking.check_in = true;
    checking.turn = Some(TURN.into());
    let in_flight: &[Outcome] = &[O::Polled, O::Running];
    let landed: &[Outcome] = &[O::Polled, O::CheckedIn, O::Running];
    let dropped: &[Outcome] = &[O::Polled, O::CheckInDropped, O::Running];
    for (state, closed, outcomes, done) in [
        (TurnState::Open, false, in_flight, 0),
        (TurnState::Claimed, false, in_flight, 0),
        (TurnState::Unconfirmed, false, in_flight, 0),
        (TurnState::Unconfirmed, true, dropped, 1),
        (TurnState::Delivered, false, landed, 1),
        (TurnState::Undelivered, false, dropped, 1),
        (TurnState::Misrouted, false, dropped, 1),
        (TurnState::Refused, false, dropped, 1),
    ] {
        let case = format!("{state:?}, closed {closed}");
        let mut turn = carrying(&checking, BlockKind::CheckIn { n: 1 }, state);
        turn.delivery.read_back_closed_at = closed.then_some(t(5));
        let settled = apply_in(&checking, &turn, Event::CheckInSettled, t(10));
        assert_eq!(
            settled.outcomes,
            if done == 1 { &outcomes[1..2] } else { IGNORED },
            "{case}: the turn's move"
        );
        let tr = apply_in(&checking, &turn, Event::Polled(running()), t(10));
        assert_eq!(tr.outcomes, outcomes, "{case}: or the next poll");
        if done == 1 {
            let schedule = |job: &Job| (job.check_in, job.check_ins, job.turn.clone());
            assert_eq!(
                schedule(&settled.job),
                schedule(&tr.job),
                "{case}: the turn's move and the poll leave the same schedule"
            );
        }
        assert_eq!(tr.job.check_ins, done, "{case}");
        assert_eq!(tr.job.check_in, done == 0, "{case}");
        assert_eq!(
            tr.job.turn.is_none(),
            done == 1,
            "{case}: a check-in done no longer names its turn"
        );
    }
    // Turned off: one not claimed leaves its turn; one claimed finishes, and the job still
    // points at it.
    let open = carrying(&checking, BlockKind::CheckIn { n: 1 }, TurnState::Open);
    let off = apply_in(&checking, &open, Event::CheckInsOff, t(10)).job;
    assert_eq!((off.check_in, off.turn.as_deref()), (false, None));
    let claimed = carrying(&checking, BlockKind::CheckIn { n: 1 }, TurnState::Claimed);
    let off = apply_in(&checking, &claimed, Event::CheckInsOff, t(10)).job;
    assert_eq!((off.check_in, off.turn.as_deref()), (true, Some(TURN)));
    // The result takes over; the check-in's turn goes on without the job.
    let tr = apply_in(&checking, &open, Event::Polled(finished()), t(10));
    assert_eq!(
        (tr.job.watch, tr.job.check_in, tr.job.turn.as_deref()),
        (Watch::Finished, false, None)
    );
    // A cancel takes a claimed check-in's job out of nothing: the turn goes out as it is.
    let tr = apply_in(&checking, &claimed, Event::Cancelled, t(10));
    assert_eq!(tr.outcomes, [O::CancelledInFlight]);
    assert_eq!(tr.job.turn.as_deref(), Some(TURN));
}

/// A lost job whose notice is owed: it goes into turns and out of them like a result;
/// one given up goes again on `redeliver`.
#[test]
fn a_notice_goes_like_a_result() {
    let mut notice = job(Watch::Lost);
    notice.notice = true;
    assert_eq!(crate::status::owes(&notice, None), Some(BlockKind::Notice));
    let joined = apply(&notice, Event::Joined { turn: TURN.into() }, t(10));
    assert_eq!(joined.outcomes, [Outcome::Batched]);
    let open = carrying(&joined.job, BlockKind::Notice, TurnState::Open);
    let left = apply_in(&joined.job, &open, Event::Left, t(11));
    assert_eq!(left.outcomes, [Outcome::Unsealed]);
    let given_up = carrying(&joined.job, BlockKind::Notice, TurnState::Undelivered);
    assert_eq!(
        crate::status::notice(&joined.job, Some(&given_up)),
        Some("undelivered")
    );
    let again = apply_in(
        &joined.job,
        &given_up,
        Event::Requeued {
            create_session: false,
        },
        t(12),
    );
    assert_eq!(again.outcomes, [Outcome::Requeued]);
    assert_eq!(crate::status::notice(&again.job, None), Some("delivering"));
    let delivered = carrying(&joined.job, BlockKind::Notice, TurnState::Delivered);
    assert!(
        apply_in(
            &joined.job,
            &delivered,
            Event::Requeued {
                create_session: false
            },
            t(12)
        )
        .is_ignored()
    );
}

#[test]
fn a_result_the_parent_read_itself_is_not_posted_and_redeliver_still_sends_it() {
    let read = Event::ReadByParent;
    // In an open turn (or waiting for one): it leaves the turn, nothing is owed.
    let (waiting, _) = standing(Stand::InOpen);
    let open = carrying(&waiting, BlockKind::Result, TurnState::Open);
    let tr = apply_in(&waiting, &open, read.clone(), t(10));
    assert_eq!(tr.outcomes, [Outcome::ReadByParent]);
    let skipped = tr.job;
    assert_eq!(
        (
            skipped.watch,
            skipped.read_by_parent_at,
            skipped.turn.as_deref()
        ),
        (Watch::Skipped, Some(t(10)), None)
    );
    assert_eq!(
        (
            crate::status::owes(&skipped, None),
            crate::status::block(&skipped)
        ),
        (None, None)
    );
    assert_eq!(
        skipped.final_text.as_deref(),
        Some("T"),
        "the result is kept"
    );
    assert!(
        apply(&skipped, read.clone(), t(11)).is_ignored(),
        "read twice"
    );
    // Its turn was claimed: it goes out as it is, and the job says the parent read it.
    let claimed = carrying(&waiting, BlockKind::Result, TurnState::Claimed);
    let tr = apply_in(&waiting, &claimed, read.clone(), t(10));
    assert_eq!(tr.outcomes, [Outcome::ReadInFlight]);
    assert_eq!(
        (
            tr.job.watch,
            tr.job.read_by_parent_at,
            tr.job.turn.as_deref()
        ),
        (Watch::Finished, Some(t(10)), Some(TURN))
    );
    assert!(
        apply_in(&tr.job, &claimed, read.clone(), t(11)).is_ignored(),
        "the first read is the one recorded"
    );
    let landed = carrying(&waiting, BlockKind::Result, TurnState::Delivered);
    assert_eq!(
        crate::status::status(&tr.job, Some(&landed)),
        Status::Done,
        "where it stands is its turn's"
    );
    // Given up before the parent read it: it follows that turn no more (`redeliver` of
    // another task it carries opens it again without this one).
    let given_up = carrying(&waiting, BlockKind::Result, TurnState::Undelivered);
    let after = apply_in(&waiting, &given_up, read.clone(), t(10)).job;
    assert_eq!((after.watch, after.turn.as_deref()), (Watch::Skipped, None));
    // `redeliver` sends the result atc holds, in a new turn.
    let again = Event::Requeued {
        create_session: false,
    };
    let tr = apply(&skipped, again.clone(), t(20));
    assert_eq!(tr.outcomes, [Outcome::Requeued]);
    assert_eq!(
        (
            tr.job.watch,
            tr.job.read_by_parent_at,
            tr.job.turn.as_deref()
        ),
        (Watch::Finished, None, None)
    );
    assert_eq!(crate::status::owes(&tr.job, None), Some(BlockKind::Result));
    assert!(!tr.job.options.create_session);
    let leave = apply(
        &skipped,
        Event::Requeued {
            create_session: true,
        },
        t(20),
    );
    assert!(
        leave.job.options.create_session,
        "`redeliver --create-session` gives it leave to start its chat"
    );
    // Read before atc saw it finish: the watch ends without a result, and `redeliver`
    // watches again, so the next poll fetches it.
    let early = apply(&pending(), read, t(5)).job;
    assert_eq!(
        (early.watch, early.final_text.as_deref()),
        (Watch::Skipped, None)
    );
    let tr = apply(&early, again.clone(), t(20));
    assert_eq!(tr.job.watch, Watch::Pending);
    // A result imported from the seed plugin is its text alone (no outcome): that text is
    // the one that goes out.
    let mut imported = skipped.clone();
    imported.outcome = None;
    let tr = apply(&imported, again, t(20));
    assert_eq!(
        (tr.job.watch, crate::status::owes(&tr.job, None)),
        (Watch::Finished, Some(BlockKind::Result))
    );
    let polled = apply(&tr.job, Event::Polled(finished()), t(21)).job;
    assert_eq!(crate::status::owes(&polled, None), Some(BlockKind::Result));
    // An empty answer skipped by `--on-empty skip` is not redelivered.
    let empty = job(Watch::Skipped);
    assert!(
        apply(
            &empty,
            Event::Requeued {
                create_session: false
            },
            t(20)
        )
        .is_ignored()
    );
}

#[test]
fn a_check_ins_turn_says_nothing_of_the_result() {
    // A check-in's turn lands after the child finished: the result is not delivered by it.
    let mut job = pending();
    job.check_in = true;
    job.turn = Some(TURN.into());
    let turn = carrying(&job, BlockKind::CheckIn { n: 1 }, TurnState::Delivered);
    let result = apply_in(&job, &turn, Event::Polled(finished()), t(5)).job;
    assert_eq!(
        (result.watch, result.turn.as_deref()),
        (Watch::Finished, None)
    );
    assert_eq!(
        crate::status::status(&result, Some(&turn)),
        Status::Delivering
    );
    assert_eq!(
        crate::status::owes(&result, Some(&turn)),
        Some(BlockKind::Result)
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
        Event::Polled(Check::Running {
            started_at: None,
            turn_ended: false,
        }),
        t(7),
    )
    .job;
    assert_eq!(first.started_at, Some(t(7)));

    let n = apply(&pending(), Event::Polled(finished()), t(5)).job;
    assert_eq!(n.final_text.as_deref(), Some("T2"));
    assert_eq!(n.outcome, Some(TaskOutcome::Completed));
    assert_eq!(
        (n.finished_at, crate::status::owes(&n, None)),
        (Some(t(5)), Some(BlockKind::Result))
    );

    let lost = apply(
        &pending(),
        Event::Polled(Check::Lost {
            detail: "Task not found: task-1".into(),
        }),
        t(5),
    )
    .job;
    assert_eq!(lost.last_error.as_deref(), Some("Task not found: task-1"));
    assert!(lost.notice);
    assert_eq!(
        crate::status::owes(&lost, None),
        Some(BlockKind::Notice),
        "the notice goes out like a result"
    );
    let notice = crate::describe::block_text(&lost, BlockKind::Notice);
    assert!(
        notice.starts_with("[TASK_ID: task-1]\n[STATUS: lost]\n\n"),
        "{notice}"
    );
}

#[test]
fn a_silent_watch_gets_no_notice_and_a_group_member_owes_its_group_one() {
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
    assert_eq!((silent.job.notice, &silent.job.final_text), (false, &None));
    assert_eq!(silent.outcomes, [Outcome::Polled, Outcome::Lost]);
    assert_eq!(crate::status::owes(&silent.job, None), None);
    let member = lost(Options {
        group: Some("g".into()),
        ..Options::default()
    });
    assert_eq!(
        crate::status::owes(&member.job, None),
        Some(BlockKind::Notice),
        "owed to its group's turn"
    );
    assert_eq!(
        member.outcomes,
        [Outcome::Polled, Outcome::Lost],
        "the group's turn tells"
    );
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
                child_session: None,
            }),
            t(5),
        )
    };
    let skipped = empty(TaskOutcome::Completed, OnEmpty::Skip);
    assert_eq!(skipped.job.watch, Watch::Skipped);
    assert_eq!(
        skipped.outcomes,
        [Outcome::Polled, Outcome::Finished, Outcome::Skipped]
    );
    assert!(skipped.job.final_text.is_some(), "the text is kept");
    assert_eq!(crate::status::owes(&skipped.job, None), None);
    assert_eq!(
        empty(TaskOutcome::Completed, OnEmpty::Deliver).job.watch,
        Watch::Finished
    );
    assert_eq!(
        empty(TaskOutcome::Failed, OnEmpty::Skip).job.watch,
        Watch::Finished,
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
        assert_eq!((j.watch, j.strikes), (Watch::Pending, n));
    }
    let tr = apply(
        &j,
        Event::Polled(Check::Failed {
            error: "boom".into(),
        }),
        t(9),
    );
    assert_eq!(tr.job.watch, Watch::Abandoned);
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
        at_cap.job.watch,
        Watch::Pending,
        "exactly at the cap is not over it"
    );
    let over = apply(&j, Event::Polled(running()), t(3601));
    assert_eq!(over.job.watch, Watch::Expired);
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
        done.job.watch,
        Watch::Finished,
        "a result that is here is delivered"
    );
}

#[test]
fn a_cancel_takes_a_block_out_of_an_open_turn_and_leaves_it_in_a_claimed_one() {
    let (waiting, _) = standing(Stand::InOpen);
    let open = carrying(&waiting, BlockKind::Result, TurnState::Open);
    let after = apply_in(&waiting, &open, Event::Cancelled, t(5)).job;
    assert_eq!(
        (after.watch, after.turn.as_deref()),
        (Watch::Cancelled, None)
    );
    let claimed = carrying(&waiting, BlockKind::Result, TurnState::Claimed);
    let after = apply_in(&waiting, &claimed, Event::Cancelled, t(5)).job;
    assert_eq!(
        (after.watch, after.turn.as_deref()),
        (Watch::Cancelled, Some(TURN)),
        "it still names the turn its result may be in"
    );
    // Whatever that turn does next, the job shows cancelled.
    for state in TurnState::ALL {
        let turn = carrying(&waiting, BlockKind::Result, state);
        assert_eq!(
            crate::status::status(&after, Some(&turn)),
            Status::Cancelled,
            "{state}"
        );
    }
}

#[test]
fn redelivery_of_a_job_whose_turn_went_elsewhere_puts_it_on_its_way_with_no_turn() {
    for stand in [Stand::Undelivered, Stand::Misrouted, Stand::Refused] {
        let (job, turn) = standing(stand);
        let again = step(
            &job,
            turn.as_ref(),
            Event::Requeued {
                create_session: true,
            },
            t(800),
            &LIMITS,
        )
        .job;
        assert_eq!(
            crate::status::status(&again, turn.as_ref()),
            Status::Delivering,
            "{stand:?}"
        );
        assert!(again.options.create_session);
        assert_eq!(again.turn, None, "composed into a new turn");
        assert_eq!(crate::status::owes(&again, None), Some(BlockKind::Result));
    }
    // A queued one without leave to start its chat may still get it.
    let queued = job(Watch::Finished);
    let leave = apply(
        &queued,
        Event::Requeued {
            create_session: true,
        },
        t(1),
    );
    assert_eq!(leave.outcomes, [Outcome::Requeued]);
    assert!(leave.job.options.create_session);
    assert!(
        apply(
            &leave.job,
            Event::Requeued {
                create_session: true
            },
            t(2)
        )
        .is_ignored(),
        "nothing left to allow"
    );
}

fn turn_in(job: &Job, state: TurnState) -> Turn {
    let mut turn = Turn::sample(state);
    turn.turn_id = TURN.into();
    turn.carries[0].job_id = job.job_id.clone();
    turn
}

/// A watch of `tasks` for `target()`'s chat, by `origin`, with `options`.
fn request(tasks: &[&str], origin: crate::job::Origin, options: Options) -> WatchRequest {
    WatchRequest {
        task_ids: tasks.iter().map(|t| (*t).to_owned()).collect(),
        target: Target {
            target_agent: None,
            ..target()
        },
        base_url: "http://h/api".into(),
        options,
        chat_id: None,
        child_sessions: Vec::new(),
        target_agents: Vec::new(),
        origin,
    }
}

#[test]
fn an_automatic_watch_is_the_same_registration_as_the_models_own_either_way() {
    use crate::job::Origin;
    let mut n = 0;
    let mut ids = move || {
        n += 1;
        format!("job{n}")
    };
    let model = Options {
        stop_after_secs: Some(600),
        check_in_secs: Some(300),
        ..Options::default()
    };
    // The model's watch_agent_task, then the turn's end: nothing changes, not even the
    // record's date; the options the model asked for stay.
    let mut jobs = Vec::new();
    let mut asked = request(&["task-1"], Origin::Plugin, model.clone());
    asked.child_sessions = vec![("task-1".into(), "child-1".into())];
    asked.target_agents = vec![("task-1".into(), "SE".into())];
    watch(&mut jobs, &[], &asked, &mut ids, t(0)).unwrap();
    let before = jobs.clone();
    let mut auto = request(&["task-1"], Origin::Auto, Options::default());
    auto.child_sessions = vec![("task-1".into(), "child-1".into())];
    auto.target_agents = vec![("task-1".into(), "SE".into())];
    let done = watch(&mut jobs, &[], &auto, &mut ids, t(5)).unwrap();
    assert_eq!(done, [Registered::AlreadyWatching(before[0].clone())]);
    assert_eq!(jobs, before);
    assert_eq!((jobs[0].origin, &jobs[0].options), (Origin::Plugin, &model));
    // The model watched without the child's session or the agent it runs on: the turn's
    // end fills in what it knows, and nothing else.
    let mut jobs = Vec::new();
    watch(
        &mut jobs,
        &[],
        &request(&["task-1"], Origin::Plugin, model.clone()),
        &mut ids,
        t(0),
    )
    .unwrap();
    let done = watch(&mut jobs, &[], &auto, &mut ids, t(5)).unwrap();
    let [Registered::Updated { job, applied, .. }] = done.as_slice() else {
        panic!("{done:?}");
    };
    assert_eq!(applied, &["--child-session", "--target-agent"]);
    assert_eq!(
        (
            job.job_id.as_str(),
            job.child_session.as_deref(),
            job.target.target_agent.as_deref()
        ),
        ("job2", Some("child-1"), Some("SE"))
    );
    assert_eq!((&job.options, job.origin), (&model, Origin::Plugin));
    // The reverse: the turn's end watched it, then the model asks for a deadline: the same
    // record, now with it.
    let mut jobs = Vec::new();
    let done = watch(&mut jobs, &[], &auto, &mut ids, t(0)).unwrap();
    let [Registered::New(first)] = done.as_slice() else {
        panic!("{done:?}");
    };
    assert_eq!(
        (first.origin, first.target.target_agent.as_deref()),
        (Origin::Auto, Some("SE"))
    );
    let mut later = asked.clone();
    later.options = Options {
        stop_after_secs: Some(600),
        ..Options::default()
    };
    let done = watch(&mut jobs, &[], &later, &mut ids, t(9)).unwrap();
    let [Registered::Updated { job, applied, .. }] = done.as_slice() else {
        panic!("{done:?}");
    };
    assert_eq!(applied, &["--stop-after"]);
    assert_eq!(
        (job.job_id.as_str(), job.origin),
        (first.job_id.as_str(), Origin::Auto)
    );
    // The model's watch with no options after the turn's end's: already watching.
    let plain = {
        let mut r = request(&["task-1"], Origin::Plugin, later.options.clone());
        r.target_agents = vec![("task-1".into(), "SE".into())];
        r
    };
    let done = watch(&mut jobs, &[], &plain, &mut ids, t(10)).unwrap();
    assert!(
        matches!(done.as_slice(), [Registered::AlreadyWatching(_)]),
        "{done:?}"
    );
}

#[test]
fn a_watch_that_changes_options_takes_its_origin_and_dates_the_record() {
    use crate::job::Origin;
    let mut ids = || "job2".to_owned();
    let check_in = Options {
        check_in_secs: Some(300),
        ..Options::default()
    };
    let mut auto = job(Watch::Pending);
    auto.task_id = "task-1".into();
    auto.target.target_agent = None;
    auto.origin = Origin::Auto;
    // A person's options on the plugin's automatic watch: the watch is the person's now,
    // and its record changed then.
    let mut jobs = vec![auto.clone()];
    let by_hand = request(&["task-1"], Origin::Cli, check_in.clone());
    let done = watch(&mut jobs, &[], &by_hand, &mut ids, t(7)).unwrap();
    let [Registered::Updated { job, applied, .. }] = done.as_slice() else {
        panic!("{done:?}");
    };
    assert_eq!(applied, &["--check-in"]);
    assert_eq!((job.origin, job.updated_at), (Origin::Cli, t(7)));
    // Only options it can no longer take (its result is rendered): nothing changed, so
    // neither its origin nor its date.
    let mut rendered = auto.clone();
    rendered.watch = Watch::Finished;
    rendered.final_text = Some("T".into());
    rendered.outcome = Some(TaskOutcome::Completed);
    let mut jobs = vec![rendered.clone()];
    let done = watch(&mut jobs, &[], &by_hand, &mut ids, t(7)).unwrap();
    let [
        Registered::Updated {
            job,
            applied,
            not_applied,
        },
    ] = done.as_slice()
    else {
        panic!("{done:?}");
    };
    assert!(applied.is_empty() && not_applied == &["--check-in"]);
    assert_eq!(
        (job.origin, job.updated_at),
        (Origin::Auto, rendered.updated_at)
    );
}

#[test]
fn a_watch_elsewhere_keeps_the_childs_session_with_its_chat_and_agent() {
    use crate::job::Origin;
    let mut ids = || "job2".to_owned();
    let mut known = pending();
    known.task_id = "task-1".into();
    known.child_session = Some("child-1".into());
    known.child_chat_id = Some("chat-1".into());
    known.child_agent = Some("QA".into());
    // To another chat (a new record replaces this one), the session named again or not:
    // the child is the same, and so are its chat and the agent it was found on.
    for named in [false, true] {
        let mut jobs = vec![known.clone()];
        let mut elsewhere = request(&["task-1"], Origin::Plugin, Options::default());
        elsewhere.target.session_id = "s-other".into();
        if named {
            elsewhere.child_sessions = vec![("task-1".into(), "child-1".into())];
        }
        let done = watch(&mut jobs, &[], &elsewhere, &mut ids, t(5)).unwrap();
        let [Registered::Retargeted { job, .. }] = done.as_slice() else {
            panic!("{done:?}");
        };
        assert_eq!(
            (
                job.target.session_id.as_str(),
                job.child_session.as_deref(),
                job.child_chat_id.as_deref(),
                job.child_agent.as_deref()
            ),
            ("s-other", Some("child-1"), Some("chat-1"), Some("QA")),
            "named again: {named}"
        );
    }
    // A session named for a child whose session was not known: none of another's chat.
    let mut unknown = known.clone();
    unknown.child_session = None;
    let mut jobs = vec![unknown];
    let mut elsewhere = request(&["task-1"], Origin::Plugin, Options::default());
    elsewhere.target.session_id = "s-other".into();
    elsewhere.child_sessions = vec![("task-1".into(), "child-9".into())];
    let done = watch(&mut jobs, &[], &elsewhere, &mut ids, t(5)).unwrap();
    let [Registered::Retargeted { job, .. }] = done.as_slice() else {
        panic!("{done:?}");
    };
    assert_eq!(
        (
            job.child_session.as_deref(),
            job.child_chat_id.as_deref(),
            job.child_agent.as_deref()
        ),
        (Some("child-9"), None, None)
    );
}

#[test]
fn an_automatic_watch_leaves_another_chats_watch_and_an_ended_one_alone() {
    use crate::job::Origin;
    let auto = request(&["task-1"], Origin::Auto, Options::default());
    let mut elsewhere = pending();
    elsewhere.target.session_id = "s-other".into();
    let (delivered, landed) = standing(Stand::Delivered);
    for (existing, turns, why) in [
        (elsewhere, vec![], LeftAlone::OtherChat),
        (
            job(Watch::Cancelled),
            vec![],
            LeftAlone::Ended(Status::Cancelled),
        ),
        (
            delivered.clone(),
            vec![landed.clone().unwrap()],
            LeftAlone::Ended(Status::Done),
        ),
        (
            job(Watch::Skipped),
            vec![],
            LeftAlone::Ended(Status::Skipped),
        ),
        (job(Watch::Lost), vec![], LeftAlone::Ended(Status::Lost)),
    ] {
        let mut jobs = vec![existing.clone()];
        let done = watch(&mut jobs, &turns, &auto, || "new".into(), t(20)).unwrap();
        assert_eq!(
            done,
            [Registered::LeftAlone {
                job: existing.clone(),
                why
            }]
        );
        assert_eq!(jobs, [existing], "{why:?}: the record is as it was");
    }
    // Two tasks, one new, each on its own agent.
    let mut two = request(&["task-1", "task-2"], Origin::Auto, Options::default());
    two.target_agents = vec![
        ("task-2".into(), "QA".into()),
        ("task-1".into(), "default".into()),
    ];
    let mut jobs = vec![delivered];
    let turns = vec![landed.unwrap()];
    let done = watch(&mut jobs, &turns, &two, || "new".into(), t(20)).unwrap();
    assert!(matches!(done[0], Registered::LeftAlone { .. }));
    let Registered::New(second) = &done[1] else {
        panic!("{done:?}");
    };
    assert_eq!(
        (second.target.target_agent.as_deref(), second.origin),
        (Some("QA"), Origin::Auto)
    );
    assert_eq!(jobs.len(), 2);
}

#[test]
fn registration_rules() {
    let other = Target {
        session_id: "s-78".into(),
        ..target()
    };
    let replace = |was, same_target| Registration::Replace { was, same_target };
    for stand in STANDS {
        let (existing, turn) = standing(stand);
        let status = crate::status::status(&existing, turn.as_ref());
        let (same, different) = match stand {
            Stand::Delivered | Stand::Unconfirmed => (
                Registration::Refuse { was: status },
                Registration::Refuse { was: status },
            ),
            // Claimed: never re-targeted.
            Stand::InClaimed => (
                Registration::AlreadyWatching,
                Registration::Refuse { was: status },
            ),
            Stand::Pending | Stand::Due | Stand::InOpen => {
                (Registration::AlreadyWatching, replace(status, false))
            }
            _ => (replace(status, true), replace(status, false)),
        };
        assert_eq!(
            register(
                Some(&existing),
                turn.as_ref(),
                &target(),
                "http://h/api",
                None
            ),
            same,
            "{stand:?}"
        );
        assert_eq!(
            register(Some(&existing), turn.as_ref(), &other, "http://h/api", None),
            different,
            "{stand:?}"
        );
    }
    assert_eq!(
        register(None, None, &target(), "http://h/api", None),
        Registration::New
    );
    // Its turn was claimed (or may be in the chat): never re-targeted, never re-watched.
    for state in [
        TurnState::Claimed,
        TurnState::Unconfirmed,
        TurnState::Delivered,
    ] {
        for watch in [Watch::Finished, Watch::Cancelled] {
            let mut j = job(watch);
            j.turn = Some(TURN.into());
            let turn = turn_in(&j, state);
            assert_eq!(
                register(Some(&j), Some(&turn), &other, "http://h/api", None),
                Registration::Refuse {
                    was: crate::status::status(&j, Some(&turn))
                },
                "{watch:?} in a {state} turn"
            );
        }
    }
    // Open, or given up with nothing posted: it may go elsewhere (it leaves that turn).
    for state in [
        TurnState::Open,
        TurnState::Undelivered,
        TurnState::Misrouted,
        TurnState::Refused,
    ] {
        let mut j = job(Watch::Finished);
        j.turn = Some(TURN.into());
        let turn = turn_in(&j, state);
        assert_eq!(
            register(Some(&j), Some(&turn), &other, "http://h/api", None),
            replace(crate::status::status(&j, Some(&turn)), false),
            "{state}"
        );
    }
    // A pending job's check-in in a claimed turn does not hold its watch.
    let mut checking = pending();
    checking.check_in = true;
    checking.turn = Some(TURN.into());
    let mut turn = turn_in(&checking, TurnState::Claimed);
    turn.carries[0].kind = BlockKind::CheckIn { n: 1 };
    assert_eq!(
        register(Some(&checking), Some(&turn), &other, "http://h/api", None),
        replace(Status::Pending, false)
    );
    assert_eq!(
        register(
            Some(&pending()),
            None,
            &target(),
            "http://other:8088/api",
            None
        ),
        replace(Status::Pending, false),
        "another base URL is another target"
    );
    assert_eq!(
        register(Some(&pending()), None, &target(), "http://h/api", Some("g")),
        replace(Status::Pending, false),
        "so is another group"
    );
}

#[test]
fn pruning_keeps_live_and_recent_jobs_and_those_an_unsettled_turn_carries() {
    let week = LIMITS.keep.as_secs();
    for stand in STANDS {
        let (j, turn) = standing(stand);
        let turns: Vec<Turn> = turn.into_iter().collect();
        assert!(
            !prunable(&j, &Turns::of(&turns), t(week), &LIMITS),
            "{stand:?}"
        );
        let settled = matches!(
            stand,
            Stand::Delivered
                | Stand::Undelivered
                | Stand::Misrouted
                | Stand::Refused
                | Stand::Lost
                | Stand::Abandoned
                | Stand::Expired
                | Stand::Cancelled
                | Stand::Skipped
        );
        assert_eq!(
            prunable(&j, &Turns::of(&turns), t(week + 2), &LIMITS),
            settled,
            "{stand:?}"
        );
    }
    let mut notice = job(Watch::Lost);
    notice.notice = true;
    assert!(
        !prunable(&notice, &Turns::of(&[]), t(week * 2), &LIMITS),
        "a notice still going out"
    );
    let cancelled = job(Watch::Cancelled);
    let claimed = turn_in(&cancelled, TurnState::Claimed);
    assert!(
        !prunable(
            &cancelled,
            &Turns::of(std::slice::from_ref(&claimed)),
            t(week * 2),
            &LIMITS
        ),
        "a claimed turn still carries it"
    );
    let landed = turn_in(&cancelled, TurnState::Delivered);
    assert!(prunable(
        &cancelled,
        &Turns::of(&[landed]),
        t(week * 2),
        &LIMITS
    ));
}

/// Seed 20 of the simulation: a job's result landed long ago, then a follow-up went up for
/// it (a turn the job does not point at). `--keep` counts from that follow-up's last
/// change, and the job stays while the follow-up is still followed, even past `--keep`.
#[test]
fn a_follow_up_turn_keeps_its_job_like_its_own_turn() {
    let week = LIMITS.keep.as_secs();
    let done = job(Watch::Finished);
    let mut own = turn_in(&done, TurnState::Delivered);
    own.updated_at = t(0);
    let mut up = carrying(
        &done,
        BlockKind::FollowUp { depth: 1 },
        TurnState::Delivered,
    );
    up.turn_id = format!("{TURN}-up");
    up.delivered_at = Some(t(week));
    up.updated_at = t(week);
    up.turn_task_id = Some("turn-12".into());
    let mut job = done.clone();
    job.turn = Some(own.turn_id.clone());
    job.updated_at = t(0);
    let both = [own.clone(), up.clone()];
    let turns = Turns::of(&both);
    assert_eq!(
        last_change(&job, &turns),
        t(week),
        "the follow-up's change counts"
    );
    assert!(
        !prunable(&job, &turns, t(week + 20), &LIMITS),
        "20 s after its follow-up landed, --keep after its own result"
    );
    assert!(prunable(&job, &turns, t(2 * week + 1), &LIMITS));
    // With a `--keep` shorter than `--busy-deadline`: kept while the follow-up is followed.
    let short = Limits {
        keep: Duration::from_secs(60),
        ..LIMITS
    };
    assert!(
        !prunable(&job, &turns, t(week + 120), &short),
        "still followed"
    );
    up.parent_turn = Some("completed".into());
    let followed = [own, up];
    assert!(prunable(&job, &Turns::of(&followed), t(week + 120), &short));
}

/// A watch with `--stop-after 10s` on a child whose session is known, started at t(1).
fn stoppable() -> Job {
    let mut job = pending();
    job.options.stop_after_secs = Some(10);
    job.child_session = Some("kid".into());
    job.started_at = Some(t(1));
    job
}

/// A stop that reached another task's child (issue 36 H1) counts as a try, whether its
/// answer says so or the poll a settle later does; atc forgets that session, and a
/// person's status says no stop is sent until the watch has the task's own.
#[test]
fn a_stop_that_reached_another_child_counts_and_is_said() {
    let mut asked = stoppable();
    asked.stop_asked_at = Some(t(11));
    let other = StopAnswer::OtherChild("that session is another task's child".into());
    let answered = apply(&asked, stop_answer(other), t(12));
    let mut stopped = stoppable();
    stopped.stopped_at = Some(t(12));
    let polled = apply(&stopped, Event::Polled(running()), t(20));
    for (case, tr) in [("answered", answered), ("polled", polled)] {
        assert!(tr.outcomes.contains(&Outcome::StopGaveUp), "{case}");
        let job = tr.job;
        assert_eq!(
            (job.stop_tries, job.child_session.as_deref()),
            (1, None),
            "{case}"
        );
        let said = crate::describe::explain(&job, None).unwrap_or_default();
        assert!(
            said.starts_with("1 stop did not stop the child (last: ")
                && said.ends_with(
                    "; no stop is sent until the watch is given this task's own session (watch it again with --child-session SID)"
                ),
            "{case}: {said}"
        );
    }
}

fn stop_answer(answer: StopAnswer) -> Event {
    Event::StopAnswered {
        agent: Some("worker".into()),
        chat_id: Some("c-child".into()),
        answer,
    }
}

fn failed(why: &str) -> StopAnswer {
    StopAnswer::Failed(why.into())
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
    // Asked for the last time: STOP_TRIES - 1 stops did not stop it.
    let last_try = || {
        let mut job = asked();
        job.stop_tries = STOP_TRIES - 1;
        job
    };
    let given_up = || {
        let mut job = stoppable();
        job.stop_tries = STOP_TRIES;
        job.stop_error = Some("HTTP 500".into());
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
            "running, stopped a moment ago",
            stopped(),
            Event::Polled(running()),
            14,
            &[O::Polled, O::Running],
            false,
            true,
        ),
        (
            // The stop ended another task's child (the session was that task's): no
            // stopped_at, no session to stop again, and the tick says why.
            "running a settle after a stop answered stopped",
            stopped(),
            Event::Polled(running()),
            30,
            &[O::Polled, O::Running, O::StopGaveUp],
            false,
            false,
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
            stop_answer(StopAnswer::Stopped),
            12,
            &[O::Stopped],
            false,
            true,
        ),
        (
            "nothing running",
            asked(),
            stop_answer(StopAnswer::NotRunning),
            12,
            &[O::StopNotRunning],
            false,
            false,
        ),
        (
            "stop failed",
            asked(),
            stop_answer(failed("HTTP 500")),
            12,
            &[O::StopFailed],
            false,
            false,
        ),
        (
            "the last try failed: given up",
            last_try(),
            stop_answer(failed("HTTP 500")),
            12,
            &[O::StopFailed, O::StopGaveUp],
            false,
            false,
        ),
        (
            "the last try found nothing running: given up",
            last_try(),
            stop_answer(StopAnswer::NotRunning),
            12,
            &[O::StopNotRunning, O::StopGaveUp],
            false,
            false,
        ),
        (
            "the last try stopped it",
            last_try(),
            stop_answer(StopAnswer::Stopped),
            12,
            &[O::Stopped],
            false,
            true,
        ),
        (
            "running, given up stopping it: no more stops",
            given_up(),
            Event::Polled(running()),
            300,
            &[O::Polled, O::Running],
            false,
            false,
        ),
        (
            // The session named was another task's child: no stop again by it.
            "the stop ended another task's child",
            asked(),
            stop_answer(StopAnswer::OtherChild("another task's child".into())),
            12,
            &[O::StopFailed, O::StopGaveUp],
            false,
            false,
        ),
        (
            "an answer with no stop out",
            stoppable(),
            stop_answer(StopAnswer::Stopped),
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
        assert_eq!(
            to_stop(std::slice::from_ref(&tr.job)).len(),
            usize::from(out),
            "{case}: to_stop"
        );
    }
    let missed = apply(&stopped(), Event::Polled(running()), t(30)).job;
    assert_eq!(
        missed.child_session, None,
        "that session is not this child's"
    );
    let later = apply(&missed, Event::Polled(running()), t(300));
    assert!(!later.outcomes.contains(&O::StopDue), "no stop again");
    assert!(
        missed
            .stop_error
            .as_deref()
            .is_some_and(|e| e.contains("another task's")),
        "{:?}",
        missed.stop_error
    );
    let answered = apply(&asked(), stop_answer(failed("HTTP 500")), t(12)).job;
    assert_eq!(answered.last_error.as_deref(), Some("HTTP 500"));
    assert_eq!(answered.stop_error.as_deref(), Some("HTTP 500"));
    assert_eq!(answered.stop_tries, 1);
    let again = apply(&answered, Event::Polled(running()), t(32));
    assert!(
        again.outcomes.contains(&O::StopDue),
        "a failed stop is asked again"
    );
    // Where the chat was found is recorded: the agent only when the watch named none.
    let mut unnamed = asked();
    unnamed.target.target_agent = None;
    let recorded = apply(&unnamed, stop_answer(StopAnswer::Stopped), t(12)).job;
    assert_eq!(recorded.child_chat_id.as_deref(), Some("c-child"));
    assert_eq!(recorded.child_agent.as_deref(), Some("worker"));
    let mut named = asked();
    named.target.target_agent = Some("se".into());
    let recorded = apply(&named, stop_answer(StopAnswer::Stopped), t(12)).job;
    assert_eq!(recorded.child_agent, None, "--target-agent says where");
    // A stop that keeps failing, tick after tick: STOP_TRIES stops, then none, ever.
    let mut job = stoppable();
    let mut stops = 0;
    for tick in 0..20 {
        let polled = apply(&job, Event::Polled(running()), t(11 + 20 * tick));
        job = polled.job;
        if job.stop_asked_at.is_some() {
            stops += 1;
            job = apply(&job, stop_answer(failed("HTTP 500")), t(12 + 20 * tick)).job;
        }
    }
    assert_eq!(stops, STOP_TRIES, "bounded");
    assert!(stop_given_up(&job));
    assert_eq!(job.watch, Watch::Pending, "the watch goes on");
    assert_eq!(job.stop_error.as_deref(), Some("HTTP 500"));
}

/// A watch with `--check-in 10s` whose child started at t(1).
fn checking_in() -> Job {
    let mut job = pending();
    job.options.check_in_secs = Some(10);
    job.started_at = Some(t(1));
    job
}

/// `--check-in`: a check-in is queued when due (its block composed into a turn like any
/// other), and is done once its turn lands or gives up; never more than `MAX_CHECK_INS`,
/// never for a group member; turned off, none comes again.
#[test]
fn check_in_rows() {
    use Outcome as O;
    let at = |secs| t(secs);
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
    assert_eq!(job.watch, Watch::Pending);
    assert_eq!(
        crate::status::owes(&job, None),
        Some(BlockKind::CheckIn { n: 1 })
    );
    assert_eq!(job.last_check_in_at, Some(at(11)));
    let text = crate::describe::block_text(&job, BlockKind::CheckIn { n: 1 });
    assert!(text.starts_with("[TASK_ID: task-1]\n[STATUS: running]\n\nStill running after 10s (check-in 1 of at most 5)."), "{text}");
    assert!(text.contains("atc cancel task-1 --check-ins"), "{text}");
    // A second poll while it is on its way queues nothing more.
    let again = apply(&job, Event::Polled(running()), at(40));
    assert_eq!(again.outcomes, [O::Polled, O::Running]);
    // Composed into a turn, which lands: done, the job plain pending again.
    let mut carried = apply(&job, Event::Joined { turn: TURN.into() }, at(12)).job;
    assert_eq!(carried.turn.as_deref(), Some(TURN));
    let landed = carrying(&carried, BlockKind::CheckIn { n: 1 }, TurnState::Delivered);
    carried = apply_in(&carried, &landed, Event::Polled(running()), at(13)).job;
    assert_eq!(
        (
            carried.watch,
            carried.check_in,
            carried.check_ins,
            &carried.turn
        ),
        (Watch::Pending, false, 1, &None)
    );
    // The next one is due a period after the last; none past the cap, none for a group.
    let second = apply(&carried, Event::Polled(running()), at(21));
    assert_eq!(second.outcomes, [O::Polled, O::Running, O::CheckInDue]);
    assert_eq!(
        crate::status::owes(&second.job, None),
        Some(BlockKind::CheckIn { n: 2 })
    );
    let mut capped = carried.clone();
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
    assert!(!off.job.check_in && off.job.options.check_in_secs.is_none());
    assert_eq!(
        apply(&off.job, Event::Polled(running()), at(100)).outcomes,
        [O::Polled, O::Running]
    );
    assert!(apply(&pending(), Event::CheckInsOff, at(12)).is_ignored());
    assert_eq!(
        next_check_in(&carried, at(13)),
        Some(at(21)),
        "a period after the last one"
    );
}

/// When the next check-in is due: a period after the child started (or after the last
/// one); none without `--check-in`, once the watch ended, while one is on its way, past
/// the cap, or once the child was stopped (`atc status` and the back-off read it).
#[test]
fn the_next_check_in_is_a_period_on_unless_none_can_come() {
    let now = t(13);
    assert_eq!(next_check_in(&checking_in(), now), Some(t(11)));
    type Change = fn(&mut Job);
    let cases: [(&str, Change); 5] = [
        ("no --check-in", |j| j.options.check_in_secs = None),
        ("ended", |j| j.watch = Watch::Finished),
        ("one on its way", |j| j.check_in = true),
        ("past the cap", |j| j.check_ins = MAX_CHECK_INS),
        ("stopped", |j| j.stopped_at = Some(t(12))),
    ];
    for (case, change) in cases {
        let mut job = checking_in();
        change(&mut job);
        assert_eq!(next_check_in(&job, now), None, "{case}");
    }
}

/// Issue 27: a poll right after a turn's end that may be the child's (a kick) may read a
/// stale `running` (QwenPaw runs the hook a few ms before the record says `finished`), so
/// it decides nothing on time: no check-in, no stop, no expiry. A later poll does.
#[test]
fn a_poll_right_after_a_turn_ended_decides_nothing_on_time() {
    let mut due = checking_in();
    due.options.stop_after_secs = Some(5);
    due.child_session = Some("c-child".into());
    let kicked = Check::Running {
        started_at: Some(t(1)),
        turn_ended: true,
    };
    // Past the check-in, the stop and --max-age (3600 s after registration).
    let late = t(4000);
    let after = apply(&due, Event::Polled(kicked), late);
    assert_eq!(after.outcomes, [Outcome::Polled, Outcome::Running]);
    assert_eq!(after.job, due, "nothing changed");
    let timer = apply(&due, Event::Polled(running()), late);
    assert_eq!(
        timer.outcomes,
        [
            Outcome::Polled,
            Outcome::Running,
            Outcome::StopDue,
            Outcome::CheckInDue,
            Outcome::Expired,
            Outcome::Noticed
        ],
        "the timer's poll decides them"
    );
}

/// A finished record names the child's session (`result.session_id`): it is the child's,
/// recorded whatever a watch named (issue 36 H1: a model may name another task's).
#[test]
fn a_finished_record_names_the_childs_session() {
    let finished_in = |session: &str| Check::Finished {
        text: "T".into(),
        started_at: None,
        outcome: TaskOutcome::Completed,
        empty: false,
        child_session: Some(session.into()),
    };
    let learned = apply(&pending(), Event::Polled(finished_in("c-9")), t(5)).job;
    assert_eq!(learned.child_session.as_deref(), Some("c-9"));
    let mut known = pending();
    known.child_session = Some("c-1".into());
    let corrected = apply(&known, Event::Polled(finished_in("c-9")), t(5)).job;
    assert_eq!(corrected.child_session.as_deref(), Some("c-9"));
}

/// A watch whose chat is its task's own child's (its --session the child's session, known
/// from its own --child-session or an earlier watch) is refused, the whole watch, for a
/// person or a model; the plugin's automatic watch names the chat it ran in, and is not.
#[test]
fn a_watch_into_its_tasks_own_childs_chat_is_refused_unless_automatic() {
    use crate::job::Origin;
    let own = request(&["task-0", "task-1"], Origin::Cli, Options::default());
    let session = own.target.session_id.clone();
    let mut named = own.clone();
    named.child_sessions = vec![("task-1".into(), session.clone())];
    let refused = WatchRefused::OwnChildSession {
        task_id: "task-1".into(),
        session: session.clone(),
    };
    let mut jobs = Vec::new();
    assert_eq!(
        watch(&mut jobs, &[], &named, || "j".into(), t(1)).unwrap_err(),
        refused
    );
    // Known from an earlier watch of the task, for another chat.
    let mut earlier = request(&["task-1"], Origin::Plugin, Options::default());
    earlier.target.session_id = "elsewhere".into();
    earlier.child_sessions = vec![("task-1".into(), session.clone())];
    watch(&mut jobs, &[], &earlier, || "j1".into(), t(1)).unwrap();
    assert_eq!(
        watch(&mut jobs.clone(), &[], &own, || "j2".into(), t(2)).unwrap_err(),
        refused
    );
    let mut auto = named.clone();
    auto.origin = Origin::Auto;
    assert!(watch(&mut Vec::new(), &[], &auto, || "j3".into(), t(2)).is_ok());
    // The child on another agent: another chat.
    let mut other = named.clone();
    other.target.target_agent = Some("QA".into());
    assert!(watch(&mut Vec::new(), &[], &other, || "j4".into(), t(2)).is_ok());
}

/// Issue 36 (H1): one child session is one child. A model (or a person) naming another
/// task's session is refused, whether the task's own is known or another live watch holds
/// it; QwenPaw's own `[SESSION: …]` line (an automatic watch) is the fact and corrects a
/// session an earlier watch was given.
#[test]
fn a_child_session_is_the_one_qwenpaw_names() {
    use crate::job::Origin;
    let with_session = |tasks: &[&str], origin, sessions: &[(&str, &str)]| {
        let mut r = request(tasks, origin, Options::default());
        r.child_sessions = sessions
            .iter()
            .map(|(t, s)| ((*t).to_owned(), (*s).to_owned()))
            .collect();
        r
    };
    let mut n = 0;
    let mut new_id = || {
        n += 1;
        format!("{n:012x}")
    };
    // T2 is watched with its own session; T1 named with T2's: refused.
    let mut jobs = Vec::new();
    let t2 = with_session(&["task-2"], Origin::Plugin, &[("task-2", "s-2")]);
    watch(&mut jobs, &[], &t2, &mut new_id, t(1)).unwrap();
    let t1 = with_session(&["task-1"], Origin::Plugin, &[("task-1", "s-2")]);
    assert_eq!(
        watch(&mut jobs.clone(), &[], &t1, &mut new_id, t(2)).unwrap_err(),
        WatchRefused::ChildSessionTaken {
            task_id: "task-1".into(),
            session: "s-2".into(),
            of: "task-2".into(),
        }
    );
    // T1 watched with its own; then named again with another: refused.
    let t1 = with_session(&["task-1"], Origin::Plugin, &[("task-1", "s-1")]);
    watch(&mut jobs, &[], &t1, &mut new_id, t(2)).unwrap();
    let again = with_session(&["task-1"], Origin::Cli, &[("task-1", "s-9")]);
    assert_eq!(
        watch(&mut jobs.clone(), &[], &again, &mut new_id, t(3)).unwrap_err(),
        WatchRefused::OtherChildSession {
            task_id: "task-1".into(),
            known: "s-1".into(),
            asked: "s-9".into(),
        }
    );
    // The model named T2's session for T3 before T2 was watched; the turn's end then
    // auto-watches both with QwenPaw's lines: T3 gets its own, T2 keeps its own.
    let mut jobs = Vec::new();
    let wrong = with_session(&["task-3"], Origin::Plugin, &[("task-3", "s-4")]);
    watch(&mut jobs, &[], &wrong, &mut new_id, t(1)).unwrap();
    let auto = with_session(
        &["task-4", "task-3"],
        Origin::Auto,
        &[("task-3", "s-3"), ("task-4", "s-4")],
    );
    watch(&mut jobs, &[], &auto, &mut new_id, t(2)).unwrap();
    let session = |task: &str| {
        jobs.iter()
            .find(|j| j.task_id == task)
            .and_then(|j| j.child_session.clone())
    };
    assert_eq!(
        (session("task-3"), session("task-4")),
        (Some("s-3".into()), Some("s-4".into()))
    );
}

/// Issue 36 (H1): a stop answered "stopped" stopped this task only if its record then
/// reads cancelled; one that finished otherwise (the stop went to another child's session)
/// keeps no `stopped_at`, and its result says nothing of a stop.
#[test]
fn a_stop_counts_only_when_the_task_reads_cancelled() {
    let mut stopped = pending();
    stopped.stopped_at = Some(t(5));
    let ended = |outcome| {
        Event::Polled(Check::Finished {
            text: "T".into(),
            started_at: None,
            outcome,
            empty: false,
            child_session: None,
        })
    };
    let completed = apply(&stopped, ended(TaskOutcome::Completed), t(9)).job;
    assert_eq!(completed.stopped_at, None, "another child was stopped");
    let cancelled = apply(&stopped, ended(TaskOutcome::Cancelled), t(9)).job;
    assert_eq!(cancelled.stopped_at, Some(t(5)));
}
