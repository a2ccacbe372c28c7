//! What a QwenPaw turn's end concerns: the decisions behind a kicked tick (pure).
//!
//! atc's QwenPaw plugin runs a hook at the end of every turn on the server (any chat, any
//! agent) and starts `atc tick --kicked`, handing it the turn that ended ([`TurnEnd`]: the
//! agent, the session, and the chat's user and channel) in the child's environment
//! (`ATC_KICK`), never on a command line or in a log. A turn's end concerns:
//!
//! - a watch whose child's session is that session (`Job::child_session`: from
//!   `--child-session`, `--from`'s `[SESSION: …]`, the plugin tool's `child_session`, or a
//!   finished record's `result.session_id`): its child may just have finished;
//! - a watch whose child's session atc does not know, when it runs on that agent (the
//!   agent it is polled as): it may be its child's. Such a watch is polled by kicks at most
//!   once per [`BURST`] (`Job::kick_polled_at`): a busy agent ends many turns, and each
//!   would otherwise poll every such watch;
//! - the parent chat of that turn: what waits for it (a turn held while it was busy, the
//!   parent turn a delivery started, its forward or toast) goes out now.
//!
//! A turn's end that concerns none of these costs the server nothing: the kicked pass
//! reads the job file, finds nothing, and ends without a request or a write. A kick with
//! no usable context (an older plugin) is [`Ended::Unknown`]: a turn ended, not known
//! which, and the pass looks at everything, as before.

use std::collections::HashSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::job::{Job, Status};
use crate::time::Timestamp;
use crate::turn::Chat;

/// A burst of kicks, for a watch whose child's session is unknown: the turn ends on its
/// agent within this long of the kick that last polled it. It is polled once per burst,
/// so kicks cost it at most what the default timer (every 20 s) does.
pub const BURST: Duration = Duration::from_secs(20);

/// One QwenPaw turn that ended, as the plugin's hook saw it (`ctx.agent_id`,
/// `ctx.session_id`, `ctx.request.user_id`, `ctx.request.channel`). It holds a session id
/// and a user id: it travels in the environment of the tick (`ATC_KICK`) and in the mark
/// file beside the job file (0600), never in a log or on a command line.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TurnEnd {
    pub agent_id: String,
    pub session_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
}

impl TurnEnd {
    /// One turn end from its JSON object; `None` when it lacks the agent or the session,
    /// or a value is not a plain label (`validate::label`).
    fn of(value: &Value) -> Option<TurnEnd> {
        let text = |key: &str| -> Option<Option<String>> {
            match value.get(key) {
                None | Some(Value::Null) => Some(None),
                Some(Value::String(s)) if s.is_empty() => Some(None),
                Some(Value::String(s)) => crate::validate::label(s).ok().map(|()| Some(s.clone())),
                Some(_) => None,
            }
        };
        Some(TurnEnd {
            agent_id: text("agent_id")??,
            session_id: text("session_id")??,
            user_id: text("user_id")?,
            channel: text("channel")?,
        })
    }

    /// Whether this turn ran in `chat` (the parent chat a turn of atc's goes to): the same
    /// agent and session, and the same user and channel when the hook said them.
    pub fn ran_in(&self, chat: &Chat) -> bool {
        self.agent_id == chat.agent_id
            && self.session_id == chat.session_id
            && self.user_id.as_ref().is_none_or(|u| *u == chat.user_id)
            && self.channel.as_ref().is_none_or(|c| *c == chat.channel)
    }
}

/// The turns that ended, as a kick (or a mark left for the running tick) tells them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ended {
    /// A turn ended, not known which: a kick of an older plugin, a bare mark, a context
    /// that cannot be read. Everything may be concerned.
    Unknown,
    /// These turns ended (none: a kick that only takes a mark, whose turns are in it).
    Known(Vec<TurnEnd>),
}

impl Ended {
    /// What `ATC_KICK` says: a JSON list of turn ends. Anything else, or an unusable
    /// entry, is [`Ended::Unknown`] (looking at everything never misses a result).
    pub fn from_kick(text: &str) -> Ended {
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Array(items)) => items
                .iter()
                .map(TurnEnd::of)
                .collect::<Option<Vec<_>>>()
                .map_or(Ended::Unknown, Ended::Known),
            _ => Ended::Unknown,
        }
    }

    /// What a mark file holds: one JSON turn end a line. An empty mark (an older plugin's,
    /// or an older atc's) or an unusable line is [`Ended::Unknown`].
    pub fn from_mark(text: &str) -> Ended {
        let lines: Vec<&str> = text.lines().collect();
        if lines.is_empty() {
            return Ended::Unknown;
        }
        lines
            .iter()
            .map(|line| {
                serde_json::from_str::<Value>(line)
                    .ok()
                    .and_then(|v| TurnEnd::of(&v))
            })
            .collect::<Option<Vec<_>>>()
            .map_or(Ended::Unknown, Ended::Known)
    }

    /// The lines a mark holds for these ends (an empty line for an unknown one).
    pub fn to_mark(&self) -> String {
        match self {
            Ended::Unknown => "\n".to_owned(),
            Ended::Known(ends) => ends
                .iter()
                .map(|end| format!("{}\n", serde_json::to_string(end).unwrap_or_default()))
                .collect(),
        }
    }

    /// Both: unknown when either is; otherwise every end once, in order.
    pub fn join(self, other: Ended) -> Ended {
        match (self, other) {
            (Ended::Known(mut ends), Ended::Known(more)) => {
                for end in more {
                    if !ends.contains(&end) {
                        ends.push(end);
                    }
                }
                Ended::Known(ends)
            }
            _ => Ended::Unknown,
        }
    }
}

/// What a set of ended turns concerns in the job file.
#[derive(Debug, Default)]
pub struct Concern {
    /// The watches to poll (by `job_id`): a child of an ended session, or one on an ended
    /// turn's agent whose child's session is unknown and that no kick polled this burst.
    pub poll: HashSet<String>,
    /// Of `poll`, those whose child's session is unknown: polled once this burst
    /// ([`stamp`]), never again in the look-again window.
    pub unknown: HashSet<String>,
}

/// The watches `ends` concern, in `jobs` as they are at `now`.
pub fn concern(jobs: &[Job], ends: &[TurnEnd], now: Timestamp) -> Concern {
    let mut found = Concern::default();
    for job in jobs.iter().filter(|j| j.status == Status::Pending) {
        let known = match &job.child_session {
            Some(session) => ends.iter().any(|end| end.session_id == *session),
            None => false,
        };
        let maybe = job.child_session.is_none()
            && ends
                .iter()
                .any(|end| end.agent_id == job.target.poll_agent())
            && job
                .kick_polled_at
                .is_none_or(|at| at.elapsed_at(now) >= BURST);
        if known || maybe {
            found.poll.insert(job.job_id.clone());
        }
        if maybe && !known {
            found.unknown.insert(job.job_id.clone());
        }
    }
    found
}

/// Whether one of `ends` ran in `chat`: what waits for that chat may go now.
pub fn concerns_chat(ends: &[TurnEnd], chat: &Chat) -> bool {
    ends.iter().any(|end| end.ran_in(chat))
}

/// Notes that a kick polled `job` for a turn that may have been its child's (its session
/// unknown): kicks leave it alone for the rest of the burst.
pub fn stamp(job: &mut Job, now: Timestamp) {
    job.kick_polled_at = Some(now);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::Status;

    fn end(agent: &str, session: &str) -> TurnEnd {
        TurnEnd {
            agent_id: agent.into(),
            session_id: session.into(),
            user_id: Some("u".into()),
            channel: Some("console".into()),
        }
    }

    fn job(id: &str, agent: Option<&str>, child: Option<&str>) -> Job {
        let mut job = Job::sample(Status::Pending);
        job.job_id = id.into();
        job.task_id = format!("task-{id}");
        job.target.target_agent = agent.map(str::to_owned);
        job.child_session = child.map(str::to_owned);
        job
    }

    #[test]
    fn a_kick_names_its_turns_and_anything_else_is_unknown() {
        let text = r#"[{"agent_id":"w","session_id":"c-1","user_id":"u","channel":"console"},{"agent_id":"w","session_id":"c-2"}]"#;
        assert_eq!(
            Ended::from_kick(text),
            Ended::Known(vec![
                end("w", "c-1"),
                TurnEnd {
                    user_id: None,
                    channel: None,
                    ..end("w", "c-2")
                }
            ])
        );
        assert_eq!(Ended::from_kick("[]"), Ended::Known(vec![]));
        for bad in [
            "",
            "{}",
            "not json",
            r#"[{"agent_id":"w"}]"#,
            r#"[{"agent_id":"w","session_id":""}]"#,
            r#"[{"agent_id":"w","session_id":"a\nb"}]"#,
            r#"[{"agent_id":"w","session_id":7}]"#,
        ] {
            assert_eq!(Ended::from_kick(bad), Ended::Unknown, "{bad}");
        }
    }

    #[test]
    fn a_mark_holds_one_end_a_line_and_an_empty_mark_is_unknown() {
        let both = Ended::Known(vec![end("w", "c-1"), end("d", "p")]);
        assert_eq!(Ended::from_mark(&both.to_mark()), both);
        assert_eq!(Ended::from_mark(""), Ended::Unknown);
        assert_eq!(
            Ended::from_mark(&format!("{}\n", both.to_mark())),
            Ended::Unknown,
            "a bare line is a turn of no known chat"
        );
        assert_eq!(Ended::from_mark(&Ended::Unknown.to_mark()), Ended::Unknown);
        assert_eq!(
            Ended::Known(vec![end("w", "c-1")])
                .join(both.clone())
                .join(Ended::Known(vec![])),
            Ended::Known(vec![end("w", "c-1"), end("d", "p")])
        );
        assert_eq!(both.join(Ended::Unknown), Ended::Unknown);
    }

    #[test]
    fn a_turn_end_concerns_its_childs_watch_and_unknown_ones_on_its_agent_once_a_burst() {
        let now = Timestamp::from_unix(1_800_000_000);
        let mut stamped = job("e", Some("w"), None);
        stamped.kick_polled_at = Some(now);
        let mut stale = job("f", Some("w"), None);
        stale.kick_polled_at = Some(Timestamp::from_unix(1_800_000_000 - 20));
        let mut done = job("g", Some("w"), Some("c-1"));
        done.status = Status::Done;
        let jobs = [
            job("a", Some("w"), Some("c-1")),
            job("b", Some("w"), Some("c-2")),
            job("c", Some("w"), None),
            job("d", None, None),
            stamped,
            stale,
            done,
        ];
        let found = concern(&jobs, &[end("w", "c-1")], now);
        let mut poll: Vec<&str> = found.poll.iter().map(String::as_str).collect();
        poll.sort_unstable();
        assert_eq!(poll, ["a", "c", "f"]);
        let mut unknown: Vec<&str> = found.unknown.iter().map(String::as_str).collect();
        unknown.sort_unstable();
        assert_eq!(unknown, ["c", "f"]);
        // The watch without a target agent is polled as its own agent's (default).
        let found = concern(&jobs, &[end("default", "p")], now);
        assert_eq!(found.poll, HashSet::from(["d".to_owned()]));
        // A child's session matches whatever agent the kick names.
        let found = concern(&jobs, &[end("x", "c-2")], now);
        assert_eq!(found.poll, HashSet::from(["b".to_owned()]));
        assert!(found.unknown.is_empty());
        assert!(concern(&jobs, &[], now).poll.is_empty());
    }

    #[test]
    fn a_turn_ran_in_the_parent_chat_of_the_same_agent_session_user_and_channel() {
        let chat = Chat {
            base_url: "http://h/api".into(),
            agent_id: "d".into(),
            session_id: "p".into(),
            user_id: "u".into(),
            channel: "console".into(),
        };
        assert!(end("d", "p").ran_in(&chat));
        assert!(!end("w", "p").ran_in(&chat));
        assert!(!end("d", "q").ran_in(&chat));
        let other_user = TurnEnd {
            user_id: Some("v".into()),
            ..end("d", "p")
        };
        assert!(!other_user.ran_in(&chat));
        let unsaid = TurnEnd {
            user_id: None,
            channel: None,
            ..end("d", "p")
        };
        assert!(concerns_chat(&[end("w", "x"), unsaid], &chat));
    }
}
