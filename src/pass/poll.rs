//! Phases 2 and 3 of a pass, **poll** and **render**: what one poll of a task means for
//! its job, how a delivered turn's parent turn is doing, and whether the polls changed
//! anything at all (a steady tick then needs no lock).

use super::*;

/// What a poll means for the job: a finished task is rendered exactly as QwenPaw's
/// `check_agent_task` would show it (and names the fork branch when it has one); a child
/// atc stopped ends with the line that says so.
pub(super) fn render((job, poll): (&ToPoll, Poll)) -> Check {
    match poll {
        Poll::Record(record) if record.is_finished() => {
            let text = render::render_delivery(&job.task_id, &record, job.fork_branch.as_deref());
            let child_session = record
                .child_session()
                .filter(|s| crate::validate::label(s).is_ok())
                .map(str::to_owned);
            let outcome = record.outcome();
            let line = job
                .stop_line
                .as_ref()
                .filter(|_| !job.stopped || outcome == crate::job::TaskOutcome::Cancelled);
            Check::Finished {
                child_session,
                text: match line {
                    Some(line) => format!("{text}\n\n{line}"),
                    None => text,
                },
                started_at: record.started_at,
                outcome,
                empty: render::answer(&record.payload).is_empty(),
            }
        }
        Poll::Record(record) => Check::Running {
            started_at: record.started_at,
            turn_ended: job.turn_ended,
        },
        Poll::NotFound { detail } => Check::Lost { detail },
        Poll::Failed { error } | Poll::Denied { error } => Check::Failed { error },
    }
}

/// How the parent turn a delivery started is doing (its own task record). `None`: the
/// server did not say; ask again next tick.
pub(super) fn parent_turn(client: &impl Server, turn: &Turn) -> Option<ParentTurn> {
    let task_id = turn.turn_task_id.as_deref()?;
    let base = &turn.chat.base_url;
    let answer = client.get_task(base, task_id, &turn.chat.agent_id);
    match task::classify(answer, task_id, base, client.auth()) {
        Poll::Record(record) if record.is_finished() => Some(ParentTurn::Ended {
            status: record
                .result_status()
                .unwrap_or(record.status.as_str())
                .to_owned(),
            reply: record.final_reply(),
        }),
        Poll::Record(_) => Some(ParentTurn::Running),
        Poll::NotFound { .. } => Some(ParentTurn::Gone),
        Poll::Failed { .. } | Poll::Denied { .. } => None,
    }
}

/// True when applying `checks` to the jobs as `prepare` saw them changes none of them
/// (every task is still running, as before). Then the report gets what the polls said,
/// and nothing needs the lock: a job that another command changed meanwhile would take
/// the same polls as no change either. The jobs are looked at where the store keeps
/// them (the file as `prepare` read it, if it is still what is on disk): no copy.
pub(super) fn no_news(
    store: &Store,
    polled: &[ToPoll],
    checks: &[Check],
    limits: &Limits,
    clock: &dyn Clock,
    report: &mut Report,
) -> bool {
    if !checks.iter().all(|c| matches!(c, Check::Running { .. })) {
        return false;
    }
    let now = clock.now();
    let seen = store.with_known(|file| {
        // The polls are in the file's order (`prepare` chose them from this very file): one
        // walk finds each job, no index.
        let mut jobs = file.jobs.iter();
        let mut steps = Vec::with_capacity(polled.len());
        for (p, check) in polled.iter().zip(checks) {
            let job = jobs.find(|j| j.job_id == p.job_id)?;
            let step = lifecycle::step(
                job,
                file.turn_of(job),
                Event::Polled(check.clone()),
                now,
                limits,
            );
            if step.job != *job {
                return None;
            }
            steps.push(step);
        }
        Some(steps)
    });
    let Some(Some(steps)) = seen else {
        return false;
    };
    for step in &steps {
        report.record(&step.job, false, &step.outcomes, now);
    }
    true
}
