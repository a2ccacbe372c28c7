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
//!   agent it is polled as): the turn may have been its child's. Such a watch is polled at
//!   most once per burst of kicks, a burst being the turns one chat ends: a child's chat
//!   ends one turn (the task), so its first is the one that counts; a person's chat ends
//!   many, and only its first, while the watch waits, is worth a poll ([`ChatSeen`],
//!   `kick_chats` in the job file). A busy agent's chats then cost such a watch one poll
//!   each, not one per turn;
//! - the parent chat of that turn: what waits for it (a turn held while it was busy, the
//!   parent turn a delivery started, its forward or toast) goes out now.
//!
//! A turn's end that concerns none of these costs the server nothing: the kicked pass
//! reads the job file, finds nothing, and ends without a request or a write. A kick with
//! no usable context (an older plugin) is [`Ended::Unknown`]: a turn ended, not known
//! which, and the pass looks at everything, as before.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::job::{Job, Watch};
use crate::job_file::ChatSeen;
use crate::time::Timestamp;
use crate::turn::Chat;

/// The most chats the job file remembers ([`ChatSeen`]); past it the oldest go (each then
/// costs at most one more poll per watch).
pub const MAX_SEEN: usize = 256;

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
    /// Not a turn's end: the plugin's kick after it watched this child (auto-watch), so a
    /// child that finished during its parent's turn goes at once. A child that reads
    /// running then has only just started: polled once, never looked at again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub watched: bool,
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
            watched: value.get("watched").and_then(Value::as_bool) == Some(true),
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
    /// turn's agent whose child's session is unknown, for a chat not seen while it waited.
    pub poll: HashSet<String>,
    /// Of `poll`, those polled once, never again in the look-again window: a watch whose
    /// child's session is unknown (once for that chat), or one the plugin just watched
    /// (`TurnEnd::watched`: its child has only just started).
    pub unknown: HashSet<String>,
    /// The chats this concern polls unknown-session watches for: to remember ([`remember`]).
    pub seen: Vec<ChatSeen>,
}

/// Whether a turn's end in `end`'s chat may be the child's of `job`, whose child's session
/// is unknown: it runs on that agent, and no kick polled it for that chat while it waited.
fn may_be_its_child(job: &Job, end: &TurnEnd, seen: &[ChatSeen]) -> bool {
    end.agent_id == job.target.poll_agent()
        && !seen.iter().any(|k| {
            k.agent_id == end.agent_id && k.session_id == end.session_id && k.at > job.registered_at
        })
}

/// The watches `ends` concern, in `jobs` as they are at `now`, given the chats kicks have
/// already polled for (`seen`).
pub fn concern(jobs: &[Job], seen: &[ChatSeen], ends: &[TurnEnd], now: Timestamp) -> Concern {
    let mut found = Concern::default();
    let mut chats: Vec<&TurnEnd> = Vec::new();
    for job in jobs.iter().filter(|j| j.watch == Watch::Pending) {
        let ended: Vec<&TurnEnd> = match &job.child_session {
            Some(session) => ends
                .iter()
                .filter(|end| end.session_id == *session)
                .collect(),
            None => Vec::new(),
        };
        let known = !ended.is_empty();
        let just_watched = known && ended.iter().all(|end| end.watched);
        let mut maybe = false;
        if job.child_session.is_none() {
            for end in ends.iter().filter(|end| may_be_its_child(job, end, seen)) {
                maybe = true;
                if !chats.contains(&end) {
                    chats.push(end);
                }
            }
        }
        if known || maybe {
            found.poll.insert(job.job_id.clone());
        }
        if (maybe && !known) || just_watched {
            found.unknown.insert(job.job_id.clone());
        }
    }
    found.seen = chats
        .into_iter()
        .map(|end| ChatSeen {
            agent_id: end.agent_id.clone(),
            session_id: end.session_id.clone(),
            at: now,
        })
        .collect();
    found
}

/// Remembers the chats a kick polled unknown-session watches for (`fresh`), and forgets
/// the ones no waiting watch needs any more: a chat is kept while a watch of unknown child
/// session on its agent, registered before it was seen, still waits; at most
/// [`MAX_SEEN`], the newest.
pub fn remember(seen: &mut Vec<ChatSeen>, fresh: Vec<ChatSeen>, jobs: &[Job]) {
    for chat in fresh {
        seen.retain(|k| !(k.agent_id == chat.agent_id && k.session_id == chat.session_id));
        seen.push(chat);
    }
    seen.retain(|k| {
        jobs.iter().any(|job| {
            job.watch == Watch::Pending
                && job.child_session.is_none()
                && job.target.poll_agent() == k.agent_id
                && k.at > job.registered_at
        })
    });
    if seen.len() > MAX_SEEN {
        seen.sort_by_key(|k| k.at);
        let extra = seen.len() - MAX_SEEN;
        seen.drain(..extra);
    }
}

/// Whether one of `ends` ran in `chat`: what waits for that chat may go now.
pub fn concerns_chat(ends: &[TurnEnd], chat: &Chat) -> bool {
    ends.iter().any(|end| end.ran_in(chat))
}

#[cfg(test)]
impl TurnEnd {
    /// A turn's end on `agent` in `session`, of user `u` on the console (`Turn::sample`'s
    /// chat when `agent` is `default` and `session` is `s`).
    pub fn sample(agent: &str, session: &str) -> TurnEnd {
        TurnEnd {
            agent_id: agent.into(),
            session_id: session.into(),
            user_id: Some("u".into()),
            channel: Some("console".into()),
            watched: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(agent: &str, session: &str) -> TurnEnd {
        TurnEnd::sample(agent, session)
    }

    fn job(id: &str, agent: Option<&str>, child: Option<&str>) -> Job {
        let mut job = Job::sample(Watch::Pending);
        job.job_id = id.into();
        job.task_id = format!("task-{id}");
        job.target.target_agent = agent.map(str::to_owned);
        job.child_session = child.map(str::to_owned);
        job
    }

    #[test]
    fn a_kick_names_its_turns_and_anything_else_is_unknown() {
        // A user or channel the hook did not say, or said empty: not said.
        let text = r#"[{"agent_id":"w","session_id":"c-1","user_id":"u","channel":"console"},{"agent_id":"w","session_id":"c-2"},{"agent_id":"w","session_id":"c-3","user_id":"","channel":""}]"#;
        let unsaid = |session| TurnEnd {
            user_id: None,
            channel: None,
            ..end("w", session)
        };
        assert_eq!(
            Ended::from_kick(text),
            Ended::Known(vec![end("w", "c-1"), unsaid("c-2"), unsaid("c-3")])
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

    /// The plugin's kick after an auto-watch names the new children `watched`: each is
    /// polled once (a child reading running has only just started), unless a real end of
    /// its session is in the same kick.
    #[test]
    fn a_just_watched_child_is_polled_once_not_looked_at_again() {
        let text = r#"[{"agent_id": "w", "session_id": "c-1", "watched": true}]"#;
        let Ended::Known(ends) = Ended::from_kick(text) else {
            panic!("a known end")
        };
        assert!(ends[0].watched);
        let jobs = vec![job("a", Some("w"), Some("c-1"))];
        let found = concern(&jobs, &[], &ends, Timestamp::from_unix(1));
        assert!(found.poll.contains("a") && found.unknown.contains("a"));
        let both = [ends[0].clone(), end("w", "c-1")];
        let found = concern(&jobs, &[], &both, Timestamp::from_unix(1));
        assert!(found.poll.contains("a") && !found.unknown.contains("a"));
        assert!(!end("w", "c-1").watched, "a turn's end is no watch");
    }

    #[test]
    fn a_turn_end_concerns_its_childs_watch_and_unknown_ones_on_its_agent_once_a_chat() {
        let t = |secs: u64| Timestamp::from_unix(1_800_000_000 + secs);
        let mut done = job("g", Some("w"), Some("c-1"));
        done.watch = Watch::Finished;
        let mut jobs = vec![
            job("a", Some("w"), Some("c-1")),
            job("b", Some("w"), Some("c-2")),
            job("c", Some("w"), None),
            job("d", None, None),
            done,
        ];
        for job in &mut jobs {
            job.registered_at = t(0);
        }
        let sorted = |set: &HashSet<String>| {
            let mut ids: Vec<String> = set.iter().cloned().collect();
            ids.sort_unstable();
            ids
        };
        let mut seen = Vec::new();
        let found = concern(&jobs, &seen, &[end("w", "c-1")], t(10));
        assert_eq!(sorted(&found.poll), ["a", "c"]);
        assert_eq!(sorted(&found.unknown), ["c"]);
        assert_eq!(
            found.seen,
            [ChatSeen {
                agent_id: "w".into(),
                session_id: "c-1".into(),
                at: t(10)
            }]
        );
        remember(&mut seen, found.seen, &jobs);
        // The same chat's next turn: only the watch that knows it is its child's.
        let again = concern(&jobs, &seen, &[end("w", "c-1")], t(20));
        assert_eq!(sorted(&again.poll), ["a"]);
        assert!(again.seen.is_empty());
        // Another chat of that agent: the unknown one again.
        let other = concern(&jobs, &seen, &[end("w", "p-9")], t(20));
        assert_eq!(sorted(&other.poll), ["c"]);
        // A watch registered after the chat was seen: that chat may be its child's.
        let mut late = job("e", Some("w"), None);
        late.registered_at = t(15);
        jobs.push(late);
        let again = concern(&jobs, &seen, &[end("w", "c-1")], t(20));
        assert_eq!(sorted(&again.poll), ["a", "e"]);
        // One registered in the very second the chat was seen (the file holds whole
        // seconds): that chat may still be its child's.
        let mut same = job("f", Some("w"), None);
        same.registered_at = t(10);
        let with_same = [jobs.clone(), vec![same]].concat();
        let again = concern(&with_same, &seen, &[end("w", "c-1")], t(20));
        assert_eq!(sorted(&again.poll), ["a", "e", "f"]);
        // The watch without a target agent is polled as its own agent's (default).
        let found = concern(&jobs, &seen, &[end("default", "p")], t(20));
        assert_eq!(sorted(&found.poll), ["d"]);
        // A child's session matches whatever agent the kick names.
        let found = concern(&jobs, &seen, &[end("x", "c-2")], t(20));
        assert_eq!(sorted(&found.poll), ["b"]);
        assert!(found.unknown.is_empty() && found.seen.is_empty());
        assert!(concern(&jobs, &seen, &[], t(20)).poll.is_empty());
        // Once no waiting watch of unknown session needs it, the chat is forgotten.
        jobs.retain(|j| j.child_session.is_some());
        remember(&mut seen, Vec::new(), &jobs);
        assert!(seen.is_empty());
    }

    #[test]
    fn a_chat_seen_again_is_remembered_once_at_its_latest_and_apart_from_another_agents() {
        let t = |secs: u64| Timestamp::from_unix(1_800_000_000 + secs);
        let mut jobs = [job("c", Some("w"), None), job("y", Some("x"), None)];
        for job in &mut jobs {
            job.registered_at = t(0);
        }
        let seen_at = |agent: &str, secs| ChatSeen {
            agent_id: agent.into(),
            session_id: "p".into(),
            at: t(secs),
        };
        let mut seen = Vec::new();
        remember(&mut seen, vec![seen_at("w", 1), seen_at("x", 2)], &jobs);
        remember(&mut seen, vec![seen_at("w", 5)], &jobs);
        assert_eq!(seen, [seen_at("x", 2), seen_at("w", 5)]);
        // A chat seen in the second its only watch was registered is no reason to skip a
        // poll (`may_be_its_child`): it is not kept.
        remember(
            &mut seen,
            vec![seen_at("v", 0)],
            &[job("v", Some("v"), None)],
        );
        assert!(seen.is_empty(), "{seen:?}");
    }

    #[test]
    fn at_most_max_seen_chats_are_remembered_the_newest() {
        let t = |secs: u64| Timestamp::from_unix(1_800_000_000 + secs);
        let mut waiting = job("c", Some("w"), None);
        waiting.registered_at = t(0);
        let jobs = [waiting];
        let mut seen = Vec::new();
        let fresh = (0..MAX_SEEN as u64 + 3)
            .map(|i| ChatSeen {
                agent_id: "w".into(),
                session_id: format!("p-{i}"),
                at: t(1 + i),
            })
            .collect();
        remember(&mut seen, fresh, &jobs);
        assert_eq!(seen.len(), MAX_SEEN);
        assert_eq!(seen[0].session_id, "p-3");
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
        assert!(
            !concerns_chat(&[end("w", "x"), other_user], &chat),
            "a kicked pass sends only what waits for the ended turns' chats"
        );
    }
}
