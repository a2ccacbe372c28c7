use super::*;
use crate::turn::Delivery;

/// A job a person would see as `status` (a result's own word comes from its turn).
fn job(status: Status) -> Job {
    Job::sample(status.watch())
}

/// The turn `job` points at, in `state`, carrying its notice.
fn notice_turn(job: &mut Job, state: TurnState) -> Turn {
    let mut turn = turn_of(job, state);
    turn.carries[0].kind = BlockKind::Notice;
    turn
}

/// A forward in `status`, never tried.
fn a_forward(status: ForwardStatus) -> crate::turn::Forward {
    crate::turn::Forward {
        status,
        attempts: 0,
        last_http_status: None,
        at: None,
        reason: None,
        text: None,
        since: None,
        attempt_started_at: None,
    }
}

/// The turn `job` points at, in `state`, carrying its result.
fn turn_of(job: &mut Job, state: TurnState) -> Turn {
    let mut turn = Turn::sample(state);
    turn.carries[0].job_id = job.job_id.clone();
    job.turn = Some(turn.turn_id.clone());
    turn
}

#[test]
fn explanations_come_from_the_fields() {
    let mut lost = job(Status::Lost);
    lost.last_error = Some("Task not found: task-1".into());
    lost.notice = true;
    let told = notice_turn(&mut lost, TurnState::Delivered);
    let said = explain(&lost, Some(&told)).unwrap();
    assert!(
        said.contains("Task not found: task-1")
            && said.contains("restarted")
            && said.ends_with("the parent was told"),
        "{said}"
    );

    let mut abandoned = job(Status::Abandoned);
    abandoned.strikes = 90;
    abandoned.last_error = Some("HTTP 502: bad gateway".into());
    assert_eq!(
        explain(&abandoned, None).unwrap(),
        "abandoned after 90 failed checks in a row; last: HTTP 502: bad gateway; the parent was not told (--on-no-answer silent)"
    );

    let mut undelivered = job(Status::Undelivered);
    let mut turn = turn_of(&mut undelivered, TurnState::Undelivered);
    turn.delivery = Delivery {
        busy: 29,
        unreachable: 1,
        error: Some("parent chat busy (409: x)".into()),
        ..Delivery::default()
    };
    assert!(
        explain(&undelivered, Some(&turn))
            .unwrap()
            .starts_with("not delivered after 30 waits (parent chat busy (409: x))")
    );
    turn.delivery.busy = 0;
    turn.delivery.unreachable = 0;
    assert!(
        explain(&undelivered, Some(&turn))
            .unwrap()
            .starts_with("not delivered (parent chat busy (409: x));"),
        "no \"after 0 waits\""
    );

    let mut striking = job(Status::Pending);
    striking.strikes = 1;
    striking.last_error = Some("HTTP 503: down".into());
    assert_eq!(
        brief(&striking, None, Timestamp::from_unix(1_800_000_000)),
        "1 failed check: HTTP 503: down"
    );
    assert_eq!(explain(&job(Status::Pending), None), None);

    // A cancelled watch says what was true of its child at the cancel, not "it keeps
    // running" (atc asks nothing afterwards: the child may have finished since).
    let mut cancelled = job(Status::Cancelled);
    assert_eq!(
        explain(&cancelled, None).unwrap(),
        "cancelled before atc polled the child; atc no longer watches it: `atc wait task-1` or check_agent_task says how it ended"
    );
    cancelled.started_at = Some(cancelled.registered_at);
    assert!(
        explain(&cancelled, None)
            .unwrap()
            .starts_with("cancelled while the child was still running (as of atc's last poll)")
    );
    let mut finished = cancelled.clone();
    finished.outcome = Some(TaskOutcome::Failed);
    assert_eq!(
        explain(&finished, None).unwrap(),
        "cancelled after the child had finished (failed); its result was not delivered"
    );
    let mut stopped = cancelled.clone();
    stopped.stopped_at = Some(stopped.registered_at);
    stopped.outcome = None;
    assert_eq!(
        explain(&stopped, None).unwrap(),
        "cancelled; atc stopped the child"
    );
    let mut landed = turn_of(&mut cancelled, TurnState::Delivered);
    assert!(
        explain(&cancelled, Some(&landed))
            .unwrap()
            .contains("it was delivered anyway"),
        "the turn says where it landed"
    );
    landed.state = TurnState::Claimed;
    landed.delivery.attempt_started_at = Some(Timestamp::from_unix(1_800_000_001));
    assert!(
        explain(&cancelled, Some(&landed))
            .unwrap()
            .contains("may already have arrived")
    );
    cancelled.note =
        Some("cancelled while its result was being posted; the result was delivered anyway".into());
    assert!(
        explain(&cancelled, None)
            .unwrap()
            .contains("delivered anyway"),
        "the stored fact of an earlier atc wins"
    );

    let mut confirmed = job(Status::Done);
    let mut turn = turn_of(&mut confirmed, TurnState::Delivered);
    turn.delivery.confirmed = Some("read-back".into());
    turn.parent_turn = Some("completed".into());
    assert_eq!(
        explain(&confirmed, Some(&turn)).unwrap(),
        "delivered (confirmed by reading the parent chat back); the parent's turn completed"
    );
    turn.carries.push(crate::turn::Block {
        job_id: "j2".into(),
        task_id: "task-2".into(),
        kind: BlockKind::Result,
    });
    assert!(
        explain(&confirmed, Some(&turn))
            .unwrap()
            .starts_with("delivered in one turn, with task-2"),
        "a batch's job names what else its turn carried"
    );

    let mut fork = job(Status::Done);
    fork.outcome = Some(TaskOutcome::ForkNotFinalized);
    fork.options.fork_branch = Some("fork/a".into());
    assert!(
        explain(&fork, None)
            .unwrap()
            .contains("branch fork/a is not ready to merge")
    );
}

#[test]
fn briefs_are_short_and_name_the_outcome() {
    let mut lost = job(Status::Lost);
    lost.last_error = Some("x".repeat(200));
    lost.notice = true;
    let told = notice_turn(&mut lost, TurnState::Delivered);
    let now = Timestamp::from_unix(1_800_000_000);
    assert_eq!(
        brief(&lost, Some(&told), now),
        "no record on the server, parent told"
    );
    let mut done = job(Status::Done);
    done.outcome = Some(TaskOutcome::Failed);
    let mut turn = turn_of(&mut done, TurnState::Delivered);
    turn.delivered_at = Some(now);
    assert_eq!(
        brief(&done, Some(&turn), now),
        "child failed; delivered 0s ago"
    );
    // A child atc stopped, and a console parent's toast: said as what they are.
    done.outcome = Some(TaskOutcome::Cancelled);
    done.stopped_at = Some(now);
    turn.forward = Some(crate::turn::Forward {
        attempts: 1,
        last_http_status: Some(200),
        at: Some(now),
        ..a_forward(ForwardStatus::Sent)
    });
    assert_eq!(
        brief(&done, Some(&turn), now),
        "child stopped by atc; delivered 0s ago; toast shown"
    );
    turn.chat.channel = "mqtt".into();
    done.stopped_at = None;
    assert_eq!(
        brief(&done, Some(&turn), now),
        "child cancelled; delivered 0s ago; reply forwarded"
    );
    // The list is cut to the terminal, not here: the whole cause, on one line.
    let mut long = job(Status::Error);
    let mut refused = turn_of(&mut long, TurnState::Refused);
    refused.delivery.error = Some(format!("{}\n{}", "y".repeat(200), "z".repeat(10)));
    let said = brief(&long, Some(&refused), now);
    assert!(
        said.contains(&"y".repeat(200)) && !said.contains('\n'),
        "{said}"
    );
    refused.delivery.error = Some("y".repeat(5000));
    assert_eq!(
        brief(&long, Some(&refused), now).chars().count(),
        BRIEF_CHARS
    );
    // A watch the plugin made at the end of a turn says so, alone when nothing else is said.
    let mut auto = job(Status::Cancelled);
    auto.origin = Origin::Auto;
    auto.note = Some("cancelled".into());
    assert_eq!(brief(&auto, None, now), "cancelled (watched automatically)");
    auto.note = Some(String::new());
    assert_eq!(brief(&auto, None, now), "watched automatically");
}

#[test]
fn notices_frame_like_qwenpaw_and_say_what_to_do() {
    let mut lost = job(Status::Lost);
    lost.task_id = "task-3f9a0c1b2d4e".into();
    // Never seen on the server: no restart is blamed.
    let never = notice_text(&lost);
    assert!(
        never.contains("never had one") && !never.contains("restart"),
        "{never}"
    );
    lost.started_at = Some(lost.registered_at);
    let text = notice_text(&lost);
    assert!(
        text.starts_with("[TASK_ID: task-3f9a0c1b2d4e]\n[STATUS: lost]\n\natc was watching"),
        "{text}"
    );
    assert!(text.contains("restart") && text.ends_with("delegate the work again."));
    let mut expired = job(Status::Expired);
    expired.updated_at = expired
        .registered_at
        .saturating_add(std::time::Duration::from_secs(90000));
    assert!(notice_text(&expired).contains("had not finished 1d 1h after"));
    let mut abandoned = job(Status::Abandoned);
    abandoned.strikes = 3;
    abandoned.last_error = Some("HTTP 500: x".into());
    assert!(notice_text(&abandoned).contains("after 3 failed checks in a row (last: HTTP 500: x)"));
}

#[test]
fn a_batch_counts_each_block_by_what_it_is_and_a_check_in_as_running() {
    let mut result = job(Status::Delivering);
    result.final_text = Some("[TASK_ID: task-1]\nR".into());
    result.outcome = Some(TaskOutcome::Completed);
    let mut checking = job(Status::Pending);
    checking.task_id = "task-2".into();
    checking.check_in = true;
    checking.last_check_in_at = Some(checking.registered_at);
    let text = batch_text(&[
        (&result, BlockKind::Result),
        (&checking, BlockKind::CheckIn { n: 1 }),
    ]);
    assert!(
        text.starts_with("[ATC_RESULTS] 2 tasks: 1 completed, 1 running\n\n[TASK_ID: task-1]\nR\n\n[TASK_ID: task-2]\n[STATUS: running]"),
        "{text}"
    );
}

#[test]
fn a_toast_names_what_its_turn_carried() {
    let mut turn = Turn::sample(TurnState::Delivered);
    assert_eq!(
        toast_text(&turn, "completed"),
        "A result for s: the agent answered; open the chat to read it"
    );
    for (kind, what) in [
        (BlockKind::Notice, "A notice"),
        (BlockKind::FollowUp { depth: 1 }, "A follow-up"),
        (BlockKind::CheckIn { n: 1 }, "A check-in"),
    ] {
        let mut one = turn.clone();
        one.carries[0].kind = kind;
        assert_eq!(
            toast_text(&one, "completed"),
            format!("{what} for s: the agent answered; open the chat to read it")
        );
    }
    for n in 2..=3 {
        turn.carries.push(crate::turn::Block {
            job_id: format!("j{n}"),
            task_id: format!("task-{n}"),
            kind: BlockKind::Result,
        });
    }
    assert_eq!(
        toast_text(&turn, "failed"),
        "3 results for s: the agent's turn failed; open the chat to see it"
    );
    assert_eq!(
        toast_text(&turn, "unknown"),
        "3 results for s: open the chat to read it"
    );
}

/// `atc status`'s list: where a `--stop-after` stands, in a few words.
#[test]
fn a_stop_deadline_says_where_the_stop_stands() {
    let now = Timestamp::from_unix(1_800_000_000);
    let watch = |change: &dyn Fn(&mut Job)| {
        let mut job = job(Status::Pending);
        job.options.stop_after_secs = Some(600);
        job.started_at = Some(Timestamp::from_unix(1_800_000_000 - 360));
        change(&mut job);
        deadline(&job, now)
    };
    assert_eq!(watch(&|_| {}), "; stops in 4m");
    assert_eq!(watch(&|j| j.options.stop_after_secs = None), "");
    assert_eq!(watch(&|j| j.started_at = None), "", "not started yet");
    assert_eq!(watch(&|j| j.stop_asked_at = Some(now)), "; stop due");
    assert_eq!(
        watch(&|j| j.started_at = Some(Timestamp::from_unix(1_800_000_000 - 600))),
        "; stop due",
        "at the deadline"
    );
    assert_eq!(watch(&|j| j.stopped_at = Some(now)), "; stopped");
    assert_eq!(
        watch(&|j| j.stop_tries = crate::lifecycle::STOP_TRIES),
        "; stop given up"
    );
}

#[test]
fn a_watch_made_by_a_model_or_the_plugin_says_how() {
    let made = |origin, group: Option<&str>| {
        let mut j = job(Status::Pending);
        j.origin = origin;
        j.options.group = group.map(str::to_owned);
        origin_note(&j)
    };
    assert_eq!(made(Origin::Cli, None), None);
    assert_eq!(made(Origin::Cli, Some("g")), None);
    assert_eq!(
        made(Origin::Plugin, None),
        Some("by the model, with watch_agent_task")
    );
    // Only the group tool makes a group: the record names the tool the model called.
    assert_eq!(
        made(Origin::Plugin, Some("g")),
        Some("by the model, with watch_agent_tasks")
    );
    assert_eq!(
        made(Origin::Auto, None),
        Some("automatically, at the end of the turn that submitted it")
    );
}

/// A give-up's kind of failure: the kind when it says something, else the HTTP status,
/// else nothing.
#[test]
fn a_failure_is_named_by_its_kind_or_its_http_status() {
    assert_eq!(kind(Some("GET …: timed out"), Some(502)), " (timed out)");
    assert_eq!(kind(Some("the chat is busy"), None), " (chat busy)");
    assert_eq!(kind(Some("mystery"), Some(500)), " (HTTP 500)");
    assert_eq!(kind(Some("mystery"), None), "");
    assert_eq!(kind(None, None), "");
    for interrupted in ["stopped while posting", "stopped while sending"] {
        assert_eq!(kind(Some(interrupted), None), " (tick interrupted)");
    }
}

/// A turn the server refused is an error when it led with a result, and undelivered when
/// it led with a notice (a notice is atc's own words, not the child's answer).
#[test]
fn a_refused_turn_is_an_error_for_a_result_and_undelivered_for_a_notice() {
    let mut job = job(Status::Error);
    let result = turn_of(&mut job, TurnState::Refused);
    let notice = notice_turn(&mut job, TurnState::Refused);
    let status = |turn: &Turn| {
        give_up_turn(turn, None, Outcome::Error)
            .map(|g| g.status)
            .unwrap_or_default()
    };
    assert_eq!(status(&result), "error");
    assert_eq!(status(&notice), "undelivered");
}

/// A give-up's status names what was given up: a notice with its watch's end, a forward
/// with where its turn stands.
#[test]
fn a_give_up_names_a_notice_and_a_forward_by_what_they_follow() {
    let mut lost = job(Status::Lost);
    lost.notice = true;
    let notice = notice_turn(&mut lost, TurnState::Undelivered);
    let said = |turn: &Turn, first: Option<&Job>, outcome| {
        give_up_turn(turn, first, outcome).map(|g| g.status)
    };
    assert_eq!(
        said(&notice, Some(&lost), Outcome::Undelivered).as_deref(),
        Some("lost, notice undelivered")
    );
    let mut done = job(Status::Done);
    let delivered = turn_of(&mut done, TurnState::Delivered);
    assert_eq!(
        said(&delivered, Some(&done), Outcome::ForwardFailed).as_deref(),
        Some("done, forward failed")
    );
    assert_eq!(
        said(&delivered, None, Outcome::ForwardFailed).as_deref(),
        Some("done, forward failed")
    );
    // A follow-up goes after its task's own result landed.
    let mut follow_up = turn_of(&mut done, TurnState::Undelivered);
    follow_up.carries[0].kind = BlockKind::FollowUp { depth: 1 };
    assert_eq!(
        said(&follow_up, Some(&done), Outcome::Undelivered).as_deref(),
        Some("done, follow-up undelivered")
    );
}

/// Where the parent's reply stands on its way to the person: on an IM channel, being sent
/// while a send is in flight and waiting (and why) otherwise; for a console parent, the
/// toast.
#[test]
fn a_forward_says_where_the_reply_stands() {
    let mut turn = Turn::sample(TurnState::Delivered);
    assert_eq!(forward(&turn), None);
    turn.chat.channel = "dingtalk".into();
    let mut pending = crate::turn::Forward {
        reason: Some("the parent's turn is still running".into()),
        ..a_forward(ForwardStatus::Pending)
    };
    turn.forward = Some(pending.clone());
    assert_eq!(
        forward(&turn).as_deref(),
        Some(
            "the parent's reply waits to be sent to the person: the parent's turn is still running"
        )
    );
    pending.attempt_started_at = Some(Timestamp::from_unix(1_800_000_000));
    turn.forward = Some(pending.clone());
    assert_eq!(
        forward(&turn).as_deref(),
        Some("the parent's reply is being sent to the person now")
    );
    turn.chat.channel = "console".into();
    assert_eq!(
        forward(&turn).as_deref(),
        Some("the console toast waits to be shown: the parent's turn is still running")
    );
}

/// What the parent was told of a watch that ended without an answer: a notice held for its
/// group's turn (no turn of its own yet), on its way in a turn, or none.
#[test]
fn a_notice_on_its_way_says_whether_its_group_holds_it() {
    let now = Timestamp::from_unix(1_800_000_000);
    let lost = |group: Option<&str>| {
        let mut job = job(Status::Lost);
        job.notice = true;
        job.options.group = group.map(str::to_owned);
        job
    };
    let held = lost(Some("g"));
    assert_eq!(told(&held, None), "; the parent is told in group g's turn");
    assert!(brief(&held, None, now).ends_with(", held for its group"));
    let mut in_turn = lost(Some("g"));
    let turn = notice_turn(&mut in_turn, TurnState::Open);
    assert_eq!(told(&in_turn, Some(&turn)), "; telling the parent");
    assert!(brief(&in_turn, Some(&turn), now).ends_with(", telling parent"));
    assert_eq!(
        brief(&job(Status::Expired), None, now),
        "not finished within --max-age",
        "silent: nothing told"
    );
    let alone = lost(None);
    assert_eq!(told(&alone, None), "; telling the parent");
    assert!(brief(&alone, None, now).ends_with(", telling parent"));
}

/// A running watch with `--check-in`: when the next one is due, due now, or on its way.
#[test]
fn a_check_in_says_when_it_comes() {
    let now = Timestamp::from_unix(1_800_000_000);
    let running = |since: u64, change: &dyn Fn(&mut Job)| {
        let mut job = job(Status::Pending);
        job.options.check_in_secs = Some(180);
        job.started_at = Some(Timestamp::from_unix(1_800_000_000 - since));
        change(&mut job);
        brief(&job, None, now)
    };
    assert_eq!(running(60, &|_| {}), "running for 1m; check-in in 2m");
    assert_eq!(running(180, &|_| {}), "running for 3m; check-in due");
    assert_eq!(running(240, &|_| {}), "running for 4m; check-in due");
    assert_eq!(
        running(60, &|j| j.check_in = true),
        "running for 1m; check-in on its way"
    );
    assert_eq!(
        running(60, &|j| j.options.check_in_secs = None),
        "running for 1m"
    );
}

/// A cancelled watch whose block a turn carried: which block (its result or its check-in)
/// and where that turn stood.
#[test]
fn a_cancel_says_where_the_turn_that_carried_it_stood() {
    let mut cancelled = job(Status::Cancelled);
    let mut turn = turn_of(&mut cancelled, TurnState::Claimed);
    turn.turn_id = "atc-t".into();
    let said = |turn: &Turn| explain(&cancelled, Some(turn)).unwrap();
    assert_eq!(
        said(&turn),
        "cancelled after its result's turn atc-t was claimed: that turn still goes out as it is"
    );
    turn.carries.insert(
        0,
        crate::turn::Block {
            job_id: "other".into(),
            task_id: "task-9".into(),
            kind: BlockKind::CheckIn { n: 1 },
        },
    );
    turn.carries[1].kind = BlockKind::CheckIn { n: 1 };
    assert_eq!(
        said(&turn),
        "cancelled after its check-in's turn atc-t was claimed, with task-9: that turn still goes out as it is"
    );
    turn.carries[1].kind = BlockKind::Result;
    turn.carries[0].kind = BlockKind::CheckIn { n: 1 };
    assert!(
        said(&turn).starts_with("cancelled after its result's turn"),
        "the other job's check-in is not its own"
    );
    turn.carries.remove(0);
    turn.state = TurnState::Unconfirmed;
    assert_eq!(
        said(&turn),
        "cancelled while it was unknown whether its result had arrived (turn atc-t)"
    );
    turn.state = TurnState::Undelivered;
    assert_eq!(
        said(&turn),
        "cancelled while its result was being posted; it was not delivered (turn atc-t undelivered)"
    );
}

/// A finished watch on its way to the parent: posted now, held for its group, or in its
/// group's turn; a fork whose branch is not named; a stop atc gave up.
#[test]
fn a_result_on_its_way_says_what_holds_it() {
    let mut delivering = job(Status::Delivering);
    delivering.options.group = Some("g".into());
    assert_eq!(
        explain(&delivering, None).unwrap(),
        "finished; held until every task of group g has finished"
    );
    let mut turn = turn_of(&mut delivering, TurnState::Open);
    turn.group = Some("g".into());
    assert_eq!(
        explain(&delivering, Some(&turn)).unwrap(),
        "finished; goes out in its group's one turn"
    );
    turn.delivery.attempt_started_at = Some(Timestamp::from_unix(1_800_000_000));
    assert_eq!(
        explain(&delivering, Some(&turn)).unwrap(),
        "its result is being posted now"
    );

    let mut fork = job(Status::Delivering);
    fork.outcome = Some(TaskOutcome::ForkNotFinalized);
    assert_eq!(
        explain(&fork, None).unwrap(),
        "the task finished; its result is being delivered; the child failed to finalize its fork worktree: its branch is not ready to merge"
    );

    let mut given_up = job(Status::Pending);
    given_up.stop_tries = crate::lifecycle::STOP_TRIES;
    given_up.stop_error = Some("HTTP 500".into());
    assert_eq!(
        explain(&given_up, None).unwrap(),
        "atc gave up stopping the child (--stop-after): 3 stops did not stop it (last: HTTP 500); still watching it: its result comes back when it ends"
    );
}

/// `atc status`'s list for a result on its way: held for its group, in its group's or a
/// batch's turn, being posted, waiting for a busy chat (and when it tries next), or due
/// on the next tick.
#[test]
fn a_result_on_its_way_says_in_a_few_words_what_holds_it() {
    let now = Timestamp::from_unix(1_800_000_000);
    let on_its_way = |change: &dyn Fn(&mut Job, &mut Turn)| {
        let mut job = job(Status::Delivering);
        let mut turn = turn_of(&mut job, TurnState::Open);
        change(&mut job, &mut turn);
        brief(&job, Some(&turn), now)
    };
    let in_flight = |t: &mut Turn| t.delivery.attempt_started_at = Some(now);
    let batch = |t: &mut Turn| {
        t.carries.push(crate::turn::Block {
            job_id: "j2".into(),
            task_id: "task-2".into(),
            kind: BlockKind::Result,
        })
    };
    let group = |j: &mut Job, t: &mut Turn| {
        j.options.group = Some("g".into());
        t.group = Some("g".into());
    };
    assert_eq!(
        on_its_way(&|_, _| {}),
        "finished; delivers on the next tick"
    );
    assert_eq!(on_its_way(&|_, t| in_flight(t)), "posting now");
    assert_eq!(on_its_way(&|j, t| group(j, t)), "in group g's turn");
    assert_eq!(
        on_its_way(&|j, t| {
            group(j, t);
            in_flight(t)
        }),
        "posting now"
    );
    assert_eq!(on_its_way(&|_, t| batch(t)), "in a batch's turn");
    assert_eq!(
        on_its_way(&|_, t| {
            batch(t);
            in_flight(t)
        }),
        "posting now"
    );
    let busy = |t: &mut Turn, next_in: u64| {
        t.delivery.busy = 2;
        t.delivery.next_attempt_at = Some(Timestamp::from_unix(1_800_000_000 + next_in));
    };
    assert_eq!(
        on_its_way(&|_, t| busy(t, 30)),
        "chat busy ×2; next try in 30s"
    );
    assert_eq!(
        on_its_way(&|_, t| {
            batch(t);
            busy(t, 30)
        }),
        "chat busy ×2; next try in 30s",
        "a batch that waits says so"
    );
    assert_eq!(on_its_way(&|_, t| busy(t, 0)), "waiting for the chat ×2");
    // Held for its group: the job names it before any turn does.
    let mut held = job(Status::Delivering);
    held.options.group = Some("g".into());
    assert_eq!(brief(&held, None, now), "held for group g");
}

/// A delivered result says whether the parent's turn it woke is running; a cancelled
/// watch whose job a turn does not carry says what it knew of its child.
#[test]
fn a_delivered_result_says_whether_the_parents_turn_runs() {
    let mut done = job(Status::Done);
    let mut turn = turn_of(&mut done, TurnState::Delivered);
    assert_eq!(explain(&done, Some(&turn)).unwrap(), "delivered");
    turn.turn_task_id = Some("t-1".into());
    assert_eq!(
        explain(&done, Some(&turn)).unwrap(),
        "delivered; the parent's turn was running at atc's last look"
    );
    turn.parent_turn = Some("unknown".into());
    assert_eq!(
        explain(&done, Some(&turn)).unwrap(),
        "delivered; how the parent's turn ended is not known"
    );

    let mut cancelled = job(Status::Cancelled);
    let mut other = turn_of(&mut cancelled, TurnState::Claimed);
    other.carries[0].job_id = "another".into();
    assert!(
        explain(&cancelled, Some(&other))
            .unwrap()
            .starts_with("cancelled before atc polled the child"),
        "a turn that carries another job says nothing of this one"
    );
}

/// The list's note names a task's given-up follow-ups first: one by how it was given up,
/// several by their count; another task's, or none, say nothing.
#[test]
fn the_list_names_a_tasks_given_up_follow_ups() {
    use crate::status::Stuck;
    let up = |task_id, what, follow_up| Stuck {
        task_id,
        turn_id: Some("atc-j1-up"),
        what,
        follow_up,
    };
    let one = [
        up("task-1", "misrouted", true),
        up("task-1", "undelivered", false),
        up("task-2", "undelivered", true),
    ];
    assert_eq!(
        follow_ups_stuck("task-1", &one).as_deref(),
        Some("follow-up misrouted")
    );
    let two = [
        up("task-1", "misrouted", true),
        up("task-1", "undelivered", true),
    ];
    assert_eq!(
        follow_ups_stuck("task-1", &two).as_deref(),
        Some("2 follow-ups given up")
    );
    assert_eq!(follow_ups_stuck("task-3", &one), None);
    assert_eq!(follow_ups_stuck("task-1", &one[1..2]), None);
    // The task in full says what to do, by the same count.
    assert_eq!(
        follow_ups_waiting("task-1", &one),
        "; 1 waits for a person: `atc redeliver task-1` sends it again"
    );
    assert_eq!(
        follow_ups_waiting("task-1", &two),
        "; 2 wait for a person: `atc redeliver task-1` sends them again"
    );
    assert_eq!(follow_ups_waiting("task-1", &one[1..2]), "");
}
