//! What people are told about a job, derived from its typed fields (strikes, `last_error`,
//! the delivery counters), so a note can never disagree with them. The one stored note
//! (`Job::note`) records what no field can: how a cancel met a POST.

use crate::job::{Job, Status};
use crate::text::truncate_chars;
use crate::time::{Timestamp, human};

/// Longest note in the `atc status` list.
const BRIEF_CHARS: usize = 72;

fn plural(n: u32, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Why the job is where it is, in a sentence, or `None` when its status says it all.
pub fn explain(job: &Job) -> Option<String> {
    if let Some(note) = &job.note {
        return Some(note.clone());
    }
    let error = job.last_error.as_deref().unwrap_or("no detail recorded");
    let deferrals = job.delivery.as_ref().map_or(0, |d| d.deferrals());
    Some(match job.status {
        Status::Pending if job.strikes > 0 => format!(
            "{} in a row; last: {error}",
            plural(job.strikes, "failed check", "failed checks")
        ),
        Status::Pending | Status::Done => return None,
        Status::Delivering if job.in_flight() => "its result is being posted now".to_owned(),
        Status::Delivering if deferrals > 0 => format!(
            "{error}; retrying (tried {})",
            plural(deferrals, "time", "times")
        ),
        Status::Delivering => "the task finished; its result is being delivered".to_owned(),
        Status::Unconfirmed => format!(
            "delivery outcome unknown ({error}); not re-posted, to avoid a duplicate turn; the text is kept in `final`"
        ),
        Status::Undelivered => format!(
            "not delivered after {} ({error}); the text is kept in `final`",
            plural(deferrals, "try", "tries")
        ),
        Status::Lost => format!(
            "the server has no record of the task ({error}): QwenPaw keeps task records in memory only, so it was restarted, or the task id or base URL {} is wrong",
            job.base_url
        ),
        Status::Abandoned => format!(
            "abandoned after {} in a row; last: {error}",
            plural(job.strikes, "failed check", "failed checks")
        ),
        Status::Expired => format!(
            "still not finished {} after registration (--max-age)",
            human(job.registered_at.elapsed_at(job.updated_at))
        ),
        Status::Cancelled if job.in_flight() => {
            "cancelled while its result was being posted; it may already have arrived".to_owned()
        }
        Status::Cancelled => "cancelled; the child task keeps running".to_owned(),
        Status::Error => format!("the server refused the delivery ({error})"),
        Status::Skipped | Status::Misrouted => return None,
    })
}

/// One short phrase for the `atc status` list: what is happening to the job now.
pub fn brief(job: &Job, now: Timestamp) -> String {
    let delivery = job.delivery.clone().unwrap_or_default();
    let note = match job.status {
        Status::Pending if job.strikes > 0 => format!(
            "{}: {}",
            plural(job.strikes, "failed check", "failed checks"),
            job.last_error.as_deref().unwrap_or("")
        ),
        Status::Pending if job.polls == 0 => "not polled yet".to_owned(),
        Status::Pending => format!("running; {}", plural(job.polls, "poll", "polls")),
        Status::Delivering => match delivery.next_attempt_at {
            _ if job.in_flight() => "posting now".to_owned(),
            Some(at) if at > now => format!(
                "chat busy ×{}; next try in {}",
                delivery.deferrals(),
                human(now.elapsed_at(at))
            ),
            _ => "finished; delivers on the next tick".to_owned(),
        },
        Status::Done => match job.delivered_at {
            Some(at) => format!("delivered {} ago", human(at.elapsed_at(now))),
            None => "delivered".to_owned(),
        },
        _ => explain(job).unwrap_or_default(),
    };
    truncate_chars(note, BRIEF_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::Delivery;

    fn job(status: Status) -> Job {
        Job::sample(status)
    }

    #[test]
    fn explanations_come_from_the_fields() {
        let mut lost = job(Status::Lost);
        lost.last_error = Some("Task not found: task-1".into());
        let said = explain(&lost).unwrap();
        assert!(
            said.contains("Task not found: task-1") && said.contains("restarted"),
            "{said}"
        );

        let mut abandoned = job(Status::Abandoned);
        abandoned.strikes = 90;
        abandoned.last_error = Some("HTTP 502: bad gateway".into());
        assert_eq!(
            explain(&abandoned).unwrap(),
            "abandoned after 90 failed checks in a row; last: HTTP 502: bad gateway"
        );

        let mut undelivered = job(Status::Undelivered);
        undelivered.delivery = Some(Delivery {
            busy: 29,
            unreachable: 1,
            ..Delivery::default()
        });
        undelivered.last_error = Some("parent chat busy (409: x)".into());
        assert!(
            explain(&undelivered)
                .unwrap()
                .starts_with("not delivered after 30 tries")
        );

        let mut striking = job(Status::Pending);
        striking.strikes = 1;
        striking.last_error = Some("HTTP 503: down".into());
        assert_eq!(
            brief(&striking, Timestamp::from_unix(1_800_000_000)),
            "1 failed check: HTTP 503: down"
        );
        assert_eq!(explain(&job(Status::Pending)), None);

        let mut cancelled = job(Status::Cancelled);
        assert!(explain(&cancelled).unwrap().contains("keeps running"));
        cancelled.note = Some(
            "cancelled while its result was being posted; the result was delivered anyway".into(),
        );
        assert!(
            explain(&cancelled).unwrap().contains("delivered anyway"),
            "the stored fact wins"
        );
    }

    #[test]
    fn briefs_are_short() {
        let mut lost = job(Status::Lost);
        lost.last_error = Some("x".repeat(200));
        assert_eq!(
            brief(&lost, Timestamp::from_unix(1_800_000_000))
                .chars()
                .count(),
            72
        );
    }
}
