//! The oracle: what each chat must (and must not) have received, computed from the world
//! alone — the operations the history issued and completed (watches and what each
//! registered, cancels, parent reads, redeliveries, imports), the children's ends the
//! simulated server produced, restarts and clock jumps — without asking atc's records.
//! It judges what the simulated server **stored**, in live and deleted chats, like
//! Jepsen's total-queue checker: every result the world owed is in its chat (ok), or was
//! given up and said (heard); none is lost, none is where nothing asked for it
//! (unexpected), none is there more often than the world allows (duplicated). A copy that
//! landed although atc gave it up (a POST of unknown outcome the server did store) is
//! recovered.
//!
//! Where the world leaves the answer open (a cancel after the child ended may meet a POST
//! in flight; a parent read may come before or after atc's claim; a restart forgets the
//! child; `--max-age` races the end), the oracle allows either: it convicts only what no
//! correct atc could do.

use std::collections::{BTreeMap, BTreeSet};

use crate::server::{Chat, End, delivered};
use crate::world::CHATS;

/// Something the world did, at a simulated second.
#[derive(Clone, Debug)]
pub enum Fact {
    /// A registration that sends task `task`'s answer to chat `chat` (an index into
    /// [`CHATS`]): a new record, one watched again after it ended, a live one sent to another
    /// chat, an import. `epoch`: it opens a new obligation (a fresh watch may deliver again);
    /// otherwise the same one, with these options. `skip_empty`: `--on-empty skip`.
    /// `agent`: it names the agent the child runs on (a watch naming another finds no
    /// such task there).
    Watched {
        task: String,
        chat: usize,
        epoch: bool,
        skip_empty: bool,
        agent: bool,
    },
    /// `atc cancel` (with or without `--stop`) that exited 0.
    Cancelled { task: String },
    /// The parent in chat `chat` read the finished result itself (`atc parent-read`).
    Read { task: String, chat: usize },
    /// `atc redeliver` that exited 0: one more copy may go out.
    Redelivered { task: String },
    /// The child ended (on the server).
    Finished { task: String },
    /// The server restarted: it forgot every task.
    Restarted,
}

/// The oracle's verdict over one history.
#[derive(Clone, Copy, Debug, Default)]
pub struct Verdict {
    /// Results the world owed a chat.
    pub owed: u64,
    /// Of those, in their chat.
    pub ok: u64,
    /// Of those, given up and said in a give-up line.
    pub given_up: u64,
    /// Given up, and found in their chat all the same (stored after atc stopped trying).
    pub recovered: u64,
    /// Notices and check-ins the chats hold.
    pub notices: u64,
    pub check_ins: u64,
    /// Convictions (the run fails at the first).
    pub lost: u64,
    pub unexpected: u64,
    pub duplicated: u64,
}

impl Verdict {
    pub fn add(&mut self, other: &Verdict) {
        self.owed += other.owed;
        self.ok += other.ok;
        self.given_up += other.given_up;
        self.recovered += other.recovered;
        self.notices += other.notices;
        self.check_ins += other.check_ins;
        self.lost += other.lost;
        self.unexpected += other.unexpected;
        self.duplicated += other.duplicated;
    }
}

/// What the server stored of one task, by chat (index into [`CHATS`]).
#[derive(Default)]
struct Stored {
    results: BTreeMap<usize, usize>,
    notices: BTreeMap<usize, usize>,
    /// Deleted chats holding a result or a notice: a POST of unknown outcome whose chat
    /// went before the read-back could look may rightly be sent again to its successor.
    gone_results: usize,
    gone_notices: usize,
}

fn chat_index(chat: &Chat) -> Option<usize> {
    CHATS
        .iter()
        .position(|(s, u, c)| chat.session == *s && chat.user == *u && chat.channel == *c)
}

fn task_of(block: &str) -> &str {
    block
        .strip_prefix("[TASK_ID: ")
        .and_then(|rest| rest.split(']').next())
        .unwrap_or("")
}

/// Judges the stored chats against the facts. `ends`: how each child the server still
/// knows ended (a restart forgets them); `heard`: the tasks a give-up line named;
/// `young`: whether a task was short of `--max-age` when the history's drain began (then
/// the drain's first polls found its end in time).
/// Returns the verdict and, for the first conviction, what it is.
pub fn judge(
    facts: &[(u64, Fact)],
    chats: &[Chat],
    gone: &[Chat],
    ends: &BTreeMap<String, End>,
    heard: &BTreeSet<&str>,
    young: impl Fn(&str) -> bool,
) -> (Verdict, Vec<String>) {
    let mut verdict = Verdict::default();
    let mut wrong = Vec::new();
    let mut stored: BTreeMap<String, Stored> = BTreeMap::new();
    for (chat, deleted) in chats
        .iter()
        .map(|c| (c, false))
        .chain(gone.iter().map(|c| (c, true)))
    {
        let Some(at) = chat_index(chat) else { continue };
        let mut held: BTreeSet<(String, bool)> = BTreeSet::new();
        for (_, text) in delivered(chat) {
            for block in crate::world::blocks(&text) {
                let task = task_of(block).to_owned();
                let entry = stored.entry(task.clone()).or_default();
                if block.contains("[STATUS: running]") {
                    verdict.check_ins += 1;
                } else if block.contains("[STATUS: finished]") {
                    *entry.results.entry(at).or_default() += 1;
                    held.insert((task, true));
                } else {
                    verdict.notices += 1;
                    *entry.notices.entry(at).or_default() += 1;
                    held.insert((task, false));
                }
            }
        }
        if deleted {
            for (task, result) in held {
                let entry = stored.entry(task).or_default();
                if result {
                    entry.gone_results += 1;
                } else {
                    entry.gone_notices += 1;
                }
            }
        }
    }
    let tasks: BTreeSet<String> = facts
        .iter()
        .filter_map(|(_, f)| match f {
            Fact::Watched { task, .. } => Some(task.clone()),
            _ => None,
        })
        .chain(stored.keys().cloned())
        .collect();
    for task in &tasks {
        let task = task.as_str();
        let mine = |f: &Fact| match f {
            Fact::Watched { task: t, .. }
            | Fact::Cancelled { task: t }
            | Fact::Read { task: t, .. }
            | Fact::Redelivered { task: t }
            | Fact::Finished { task: t } => t == task,
            Fact::Restarted => true,
        };
        let history: Vec<(u64, &Fact)> = facts
            .iter()
            .filter(|(_, f)| mine(f))
            .map(|(at, f)| (*at, f))
            .collect();
        let finished_at = history
            .iter()
            .rev()
            .find_map(|(at, f)| matches!(f, Fact::Finished { .. }).then_some(*at));
        let end = ends.get(task);
        let got = stored.remove(task).unwrap_or_default();
        let epochs = history
            .iter()
            .filter(|(_, f)| matches!(f, Fact::Watched { epoch: true, .. }))
            .count();
        let redelivered = history
            .iter()
            .filter(|(_, f)| matches!(f, Fact::Redelivered { .. }))
            .count();
        // Duplicated: more copies than watches and redeliveries could each make.
        let allowed = epochs + redelivered;
        for (what, by_chat, gone) in [
            ("result", &got.results, got.gone_results),
            ("notice", &got.notices, got.gone_notices),
        ] {
            let copies: usize = by_chat.values().sum();
            if copies > allowed + gone {
                verdict.duplicated += 1;
                wrong.push(format!(
                    "duplicated: {task}'s {what} is stored {copies} times; {epochs} watches, {redelivered} redeliveries and {gone} deleted chats allow {}",
                    allowed + gone
                ));
            }
        }
        // Unexpected: a result in a chat no watch of the task ever named, or named only by
        // watches a cancel withdrew before the child ended, or only by watches that skip an
        // empty answer when the answer was empty.
        for (&chat, &n) in &got.results {
            if n == 0 {
                continue;
            }
            let mut could = false;
            let mut named = false;
            for (i, (at, f)) in history.iter().enumerate() {
                let Fact::Watched {
                    chat: c,
                    skip_empty,
                    ..
                } = f
                else {
                    continue;
                };
                if *c != chat {
                    continue;
                }
                named = true;
                if *skip_empty && matches!(end, Some(End::Empty)) {
                    continue;
                }
                // Withdrawn before the child ended, and not watched again since.
                let withdrawn = history[i + 1..].iter().any(|(when, g)| {
                    matches!(g, Fact::Cancelled { .. })
                        && finished_at.is_some_and(|f| *when < f)
                        && *when >= *at
                }) && !history[i + 1..]
                    .iter()
                    .any(|(_, g)| matches!(g, Fact::Watched { .. }));
                if !withdrawn {
                    could = true;
                }
            }
            if !could {
                verdict.unexpected += 1;
                wrong.push(if named {
                    format!(
                        "unexpected: {task}'s result is in chat {} although every watch that named it was withdrawn before the child ended, or skips its empty answer",
                        CHATS[chat].0
                    )
                } else {
                    format!(
                        "unexpected: {task}'s result is in chat {}, which no watch of it named",
                        CHATS[chat].0
                    )
                });
            }
        }
        // Owed: the last registration's chat, when nothing since may have taken the
        // result back and the world still knows the child's answer.
        let Some(last) = history
            .iter()
            .rposition(|(_, f)| matches!(f, Fact::Watched { epoch: true, .. }))
        else {
            continue;
        };
        let (began, Fact::Watched { chat, agent, .. }) = history[last] else {
            unreachable!()
        };
        // The options the watches since left it with.
        let skip = history[last..]
            .iter()
            .rev()
            .find_map(|(_, f)| match f {
                Fact::Watched {
                    chat: c,
                    skip_empty,
                    ..
                } if c == chat => Some(*skip_empty),
                _ => None,
            })
            .unwrap_or(false);
        let since = &history[last + 1..];
        let owed = match end {
            Some(End::Answer(_) | End::Failed) => true,
            Some(End::Empty) => !skip,
            // Stopped: its result is the stop's, judged by the stop checks.
            Some(End::Cancelled) | None => false,
        } && finished_at.is_some()
            && *agent
            && young(task)
            && !since.iter().any(|(at, f)| match f {
                Fact::Cancelled { .. } | Fact::Restarted => true,
                // Another chat's watch since: it moved, or was refused and left alone.
                Fact::Watched { chat: c, .. } => c != chat,
                Fact::Read { chat: c, .. } => c == chat && finished_at.is_some_and(|f| *at >= f),
                _ => false,
            });
        if !owed {
            continue;
        }
        verdict.owed += 1;
        let here = got.results.get(chat).copied().unwrap_or(0);
        match (here > 0, heard.contains(task)) {
            (true, false) => verdict.ok += 1,
            (true, true) => verdict.recovered += 1,
            (false, true) => verdict.given_up += 1,
            (false, false) => {
                verdict.lost += 1;
                wrong.push(format!(
                    "lost: {task}'s result was owed to chat {} (watched at {}s, ended at {}s), is in no copy there, and no give-up named it",
                    CHATS[*chat].0,
                    began,
                    finished_at.unwrap_or(0)
                ));
            }
        }
    }
    (verdict, wrong)
}
