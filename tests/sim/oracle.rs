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
//!
//! Delegation trees (issue 37) have a judge of their own ([`judge_follow_ups`]): from the
//! turns the server's stored POSTs woke, the polls of their records it served, the stored
//! results and the world's facts, which woken reply the world owed its child's parent as
//! a follow-up, which it allows, and which no correct atc could have sent up.

use std::collections::{BTreeMap, BTreeSet};

use atc::job::Job;
use atc::lifecycle::Limits;
use atc::time::Timestamp;

use crate::server::{Chat, End, Seen, Served, Woke, Woken, delivered};
use crate::world::{CHATS, NCHATS, chat_at, task_id};

/// Something the world did, at a simulated second.
#[derive(Clone, Debug)]
pub enum Fact {
    /// A registration that sends task `task`'s answer to chat `chat` (an index below
    /// [`NCHATS`]: a parent chat of [`CHATS`], or a task's child chat): a new record, one watched again after it ended, a live one sent to another
    /// chat, an import. `epoch`: it opens a new obligation (a fresh watch may deliver again);
    /// otherwise the same one, with these options. `skip_empty`: `--on-empty skip`.
    /// `agent`: it names the agent the child runs on (a watch naming another finds no
    /// such task there).
    Watched {
        task: String,
        chat: usize,
        /// The child session the watch named for the task (a stray's may be another's).
        child: Option<String>,
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

impl Fact {
    /// The task it is about (`None`: every task, a restart).
    pub fn task(&self) -> Option<&str> {
        match self {
            Fact::Watched { task, .. }
            | Fact::Cancelled { task }
            | Fact::Read { task, .. }
            | Fact::Redelivered { task }
            | Fact::Finished { task } => Some(task),
            Fact::Restarted => None,
        }
    }
}

/// Why a scheduled tick owes a pending watch a poll (issue 38), whether its server's plugin
/// kicks or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owed {
    /// Its child ended a ceiling ago and nothing polled it since: a missed kick costs at
    /// most the ceiling.
    Ceiling,
    /// One of its own times came: a check-in, its stop (`--stop-after`), its expiry
    /// (`--max-age`).
    OwnTime,
}

/// Whether a scheduled tick at `now` (its second) owes the pending watch `job` a poll, and
/// why. `ended`: its child ended and no poll of its record was served since; then, the
/// second from which a missed kick counts: the latest of the end, of anything done to the
/// task since (a watch, a cancel, a read, a redelivery may have moved the watch on or off
/// its back-off) and of a tick that had a crash armed (it stamped its start as the last
/// scheduled tick, and may have polled nothing).
///
/// The bound: a watch on its back-off is polled at the first scheduled tick that finds a
/// back-off time (anchor + 20 s, + 40 s, … each wait at most the ceiling) come since the
/// last scheduled tick. Some back-off time falls within a ceiling after `ended`, so the
/// first scheduled tick a ceiling after it (or one before) polls the watch; a watch not on
/// its back-off is polled by every tick. The own times come from the watch's options and
/// what its record says of the child (started, the last check-in, stops asked and given
/// up): a check-in `--check-in` after the child started or after the last one (at most
/// five, never a group member's, none while one is on its way or once stopped), its stop
/// `--stop-after` after it started (until one is out, it stopped, or atc gave up), its
/// expiry a second past `--max-age` after the watch.
pub fn poll_owed(
    job: &Job,
    now: u64,
    limits: &Limits,
    ended: Option<u64>,
) -> Option<(Owed, String)> {
    let secs = |t: Timestamp| Timestamp::from_unix(0).elapsed_at(t).as_secs();
    let ceiling = limits.poll_ceiling.as_secs();
    if let Some(from) = ended
        && from + ceiling <= now
    {
        return Some((
            Owed::Ceiling,
            format!(
                "its child ended, unpolled since {from}s, and the ceiling ({ceiling}s) has passed"
            ),
        ));
    }
    let expiry = secs(job.registered_at) + limits.max_age.as_secs() + 1;
    if expiry <= now {
        return Some((
            Owed::OwnTime,
            format!("its expiry (--max-age) came at {expiry}s"),
        ));
    }
    if let Some(every) = job.options.check_in_secs
        && !job.check_in
        && job.check_ins < atc::lifecycle::MAX_CHECK_INS
        && job.options.group.is_none()
        && job.stopped_at.is_none()
        && let Some(since) = job.last_check_in_at.or(job.started_at)
        && secs(since) + every <= now
    {
        return Some((
            Owed::OwnTime,
            format!("its check-in came at {}s", secs(since) + every),
        ));
    }
    if let Some(after) = job.options.stop_after_secs
        && job.stop_asked_at.is_none()
        && job.stopped_at.is_none()
        && job.stop_tries < atc::lifecycle::STOP_TRIES
        && let Some(started) = job.started_at
        && secs(started) + after <= now
    {
        return Some((
            Owed::OwnTime,
            format!("its stop (--stop-after) came at {}s", secs(started) + after),
        ));
    }
    None
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
    /// Follow-ups (issue 37), judged by [`judge_follow_ups`].
    pub follow_ups: FollowUps,
}

/// The verdict on follow-ups: woken replies that went up a delegation tree.
#[derive(Clone, Copy, Debug, Default)]
pub struct FollowUps {
    /// Woken replies the world owed their child's parent.
    pub owed: u64,
    /// Of those: in that chat; given up and said; both (stored after atc gave up).
    pub ok: u64,
    pub given_up: u64,
    pub recovered: u64,
    /// Copies stored in all, and of those where the world left it open (not owed).
    pub stored: u64,
    pub allowed: u64,
    /// Copies of a follow-up of a follow-up (three levels).
    pub deep: u64,
    /// Woken turns atc followed (a poll of their record was served).
    pub followed: u64,
    /// Results that landed in a child's chat before the child's own result had landed
    /// anywhere (the child still running, as far as atc could know).
    pub early: u64,
    /// Convictions.
    pub lost: u64,
    pub unexpected: u64,
    pub duplicated: u64,
}

impl FollowUps {
    pub fn add(&mut self, other: &FollowUps) {
        self.owed += other.owed;
        self.ok += other.ok;
        self.given_up += other.given_up;
        self.recovered += other.recovered;
        self.stored += other.stored;
        self.allowed += other.allowed;
        self.deep += other.deep;
        self.followed += other.followed;
        self.early += other.early;
        self.lost += other.lost;
        self.unexpected += other.unexpected;
        self.duplicated += other.duplicated;
    }
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
        self.follow_ups.add(&other.follow_ups);
    }
}

/// What the server stored of one task, by chat (an index below [`NCHATS`]).
#[derive(Default)]
struct Stored {
    results: BTreeMap<usize, usize>,
    notices: BTreeMap<usize, usize>,
    /// Deleted chats holding a result or a notice: a POST of unknown outcome whose chat
    /// went before the read-back could look may rightly be sent again to its successor.
    gone_results: usize,
    gone_notices: usize,
}

/// The index (below [`NCHATS`]) of the chat with this (session, user, channel): a parent
/// chat, or a task's own child chat.
pub fn index_of(session: &str, user: &str, channel: &str) -> Option<usize> {
    (0..NCHATS).find(|&c| {
        let (s, u, ch) = chat_at(c);
        s == session && u == user && ch == channel
    })
}

fn chat_index(chat: &Chat) -> Option<usize> {
    index_of(&chat.session, &chat.user, &chat.channel)
}

/// The session of chat `c`, for messages.
fn name(c: usize) -> String {
    chat_at(c).0
}

/// The line a follow-up block has after its `[TASK_ID: …]` line
/// (`describe::follow_up_text`), up to the task after which it went up.
const FOLLOW_UP: &str = "[atc: follow-up to this task's earlier answer, after ";

/// A follow-up block: (its task, the task whose block woke the reply, the reply).
pub fn follow_up_of(block: &str) -> Option<(&str, &str, &str)> {
    let (_, rest) = block.split_once('\n')?;
    let (after, reply) = rest.strip_prefix(FOLLOW_UP)?.split_once(" finished]\n\n")?;
    Some((task_of(block), after, reply.trim_end()))
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
            // A follow-up is judged apart ([`judge_follow_ups`]): neither result nor notice.
            for block in crate::world::blocks(&text).filter(|b| follow_up_of(b).is_none()) {
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
                        name(chat)
                    )
                } else {
                    format!(
                        "unexpected: {task}'s result is in chat {}, which no watch of it named",
                        name(chat)
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
                    name(*chat),
                    began,
                    finished_at.unwrap_or(0)
                ));
            }
        }
    }
    (verdict, wrong)
}

/// What the world knows of a delegation tree, for [`judge_follow_ups`].
pub struct Tree<'a> {
    /// The world's facts, and where each falls in the world's order.
    pub facts: &'a [(u64, Fact)],
    pub seqs: &'a [u64],
    /// Every stored POST and the turn it woke, in order; every poll of such a turn's
    /// record the server answered.
    pub woken: &'a [Woke],
    pub served: &'a [Served],
    /// The ids of chats deleted during the history.
    pub gone: &'a BTreeSet<String>,
    /// The ticks that crashed.
    pub crashed: &'a BTreeSet<u64>,
    /// Tasks a stop ended: their record names no session.
    pub stopped: &'a [String],
    /// Give-up lines heard, in the world's order.
    pub heard: &'a [(u64, String)],
    /// The drain: where it began in the world's order, and its first tick's second.
    pub drain_seq: u64,
    pub drain_tick_at: u64,
    pub keep: u64,
    pub busy_deadline: u64,
    pub depth: u32,
}

/// Judges the follow-ups (issue 37) the server stored against what the world knows.
///
/// A woken reply (the turn a stored POST into task `j`'s child chat woke, ended
/// `completed` with a reply) is **owed** to the chat `j`'s result went to when the world
/// can tell atc knew, at the moment it learned how the woken turn ended (the first poll of
/// its record the server answered `finished`, in a tick that did not crash), that `j`'s
/// result had landed: a copy of it was stored by a POST whose 200 reached atc, in an
/// earlier tick that did not crash; nothing about `j` changed since (no watch, redelivery
/// or cancel of it after that copy), `--keep` is far, no other task's watch named `j`'s
/// session, `j` was not stopped (a stopped task's record names no session), and the woken
/// turn's depth is within `--follow-up-depth`, and that chat is not the one the reply is
/// in (a watch of `j` for its own child's chat sends nothing up). Owed and in that chat: ok; given up and
/// said (a give-up line for `j` after that poll): given up; neither: **lost**.
///
/// Any follow-up copy must name a reply some woken turn gave, come from a chat that is
/// its task's child's (or one a watch of it named), after a poll said that turn ended and
/// after its task's result was stored, within the depth limit, into a chat its task's
/// result went to, with the woken turn's first task named, by the delivery id
/// `<woken delivery id>-up`; else it is **unexpected**. More than one copy per woken
/// turn (a deleted chat may hold one more, and each `redeliver` of its task since, which
/// sends a given-up follow-up again) is **duplicated**.
///
/// Beside it, a liveness check: a woken turn atc knew of (its POST's 200 reached atc in
/// a tick that did not crash), stored before the drain and within `--busy-deadline` of
/// the drain's first tick, was polled at least once.
pub fn judge_follow_ups(t: &Tree) -> (FollowUps, Vec<String>) {
    let mut v = FollowUps::default();
    let mut wrong = Vec::new();
    let crashed = |tick: u64| t.crashed.contains(&tick);
    let chat_of = |w: &Woke| index_of(&w.chat.0, &w.chat.1, &w.chat.2);
    let child_of = |c: Option<usize>| {
        c.filter(|c| *c >= CHATS.len())
            .map(|c| task_id((c - CHATS.len()) as u8))
    };
    let by_reply: BTreeMap<&str, usize> = t
        .woken
        .iter()
        .enumerate()
        .filter_map(|(i, w)| match &w.end {
            Woken::Reply(text) => Some((text.as_str(), i)),
            _ => None,
        })
        .collect();
    let partial: BTreeSet<&str> = t
        .woken
        .iter()
        .filter_map(|w| match &w.end {
            Woken::Failed(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let mut served: BTreeMap<&str, Vec<&Served>> = BTreeMap::new();
    for s in t.served {
        served.entry(s.turn.as_str()).or_default().push(s);
    }
    // Each stored POST's blocks: follow-ups (post, task, after, reply) and results by task;
    // each woken turn's depth (1 + its reply's woken turn's, for a follow-up).
    let mut copies: Vec<(usize, &str, &str, &str)> = Vec::new();
    let mut results: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let mut depth = vec![0u32; t.woken.len()];
    for (i, w) in t.woken.iter().enumerate() {
        for block in crate::world::blocks(&w.text) {
            if let Some((task, after, reply)) = follow_up_of(block) {
                copies.push((i, task, after, reply));
                let below = by_reply.get(reply).map_or(0, |&k| depth[k]);
                depth[i] = depth[i].max(below + 1);
            } else if block.contains("[STATUS: finished]") {
                results.entry(task_of(block)).or_default().push(i);
            }
        }
    }
    for (i, w) in t.woken.iter().enumerate() {
        let holds_result = crate::world::blocks(&w.text)
            .any(|b| follow_up_of(b).is_none() && b.contains("[STATUS: finished]"));
        if let Some(j) = child_of(chat_of(w))
            && holds_result
            && !results
                .get(j.as_str())
                .is_some_and(|r| r.iter().any(|&r| r < i))
        {
            v.early += 1;
        }
    }
    // The facts about a task, in the world's order.
    let facts: Vec<(u64, &Fact)> = t
        .seqs
        .iter()
        .copied()
        .zip(t.facts.iter().map(|(_, f)| f))
        .collect();
    let named = |task: &str, session: &str, before: u64| {
        facts.iter().any(|(seq, f)| {
            *seq < before
                && matches!(f, Fact::Watched { task: t, child: Some(c), .. } if t == task && c == session)
        })
    };
    // Every copy: could a correct atc have sent it up?
    let mut per_woken: BTreeMap<usize, (u64, u64, &str)> = BTreeMap::new();
    for &(post, task, after, reply) in &copies {
        v.stored += 1;
        let p = &t.woken[post];
        let here = chat_of(p);
        let Some(&wi) = by_reply.get(reply) else {
            v.unexpected += 1;
            wrong.push(if partial.contains(reply) {
                format!(
                    "unexpected: a follow-up of {task} in {} ({}) carries the output of a woken turn that failed: {reply}",
                    p.chat.0, p.delivery
                )
            } else {
                format!(
                    "unexpected: a follow-up of {task} in {} ({}) carries a reply no woken turn gave: {reply:?}",
                    p.chat.0, p.delivery
                )
            });
            continue;
        };
        let w = &t.woken[wi];
        if depth[wi] >= 1 {
            v.deep += 1;
        }
        let entry = per_woken.entry(wi).or_insert((0, 0, task));
        entry.0 += 1;
        entry.1 += u64::from(t.gone.contains(&p.chat_id));
        let mut not = |why: String| {
            v.unexpected += 1;
            wrong.push(format!(
                "unexpected: the follow-up of {task} in {} ({}) of the reply {reply} woken in {} by {}: {why}",
                p.chat.0, p.delivery, w.chat.0, w.delivery
            ));
        };
        // Its delivery id names the turn it follows up (`-2` when that id was taken).
        let id_ok = p
            .delivery
            .strip_prefix(&format!("{}-up", w.delivery))
            .is_some_and(|rest| rest.split("-2").all(str::is_empty));
        if !id_ok {
            not("its delivery id does not name the woken turn's".into());
            continue;
        }
        let session = &w.chat.0;
        let childs = child_of(chat_of(w));
        if childs.as_deref() != Some(task) && !named(task, session, p.seq) {
            not(format!(
                "the reply was woken in {session}, which is not {task}'s child's chat, and no watch of {task} named it"
            ));
            continue;
        }
        let Some(last_ended) = served
            .get(w.id.as_str())
            .into_iter()
            .flatten()
            .filter(|s| s.seen == Seen::Ended && s.seq < p.seq)
            .map(|s| s.seq)
            .max()
        else {
            not("no poll of the woken turn's record had said it ended".into());
            continue;
        };
        let landed = results
            .get(task)
            .into_iter()
            .flatten()
            .any(|&r| t.woken[r].seq < last_ended);
        if !landed {
            not(format!(
                "{task}'s own result had not landed anywhere when atc learned the woken turn ended"
            ));
            continue;
        }
        if depth[wi] + 1 > t.depth {
            not(format!(
                "it went up {} levels, past --follow-up-depth {}",
                depth[wi] + 1,
                t.depth
            ));
            continue;
        }
        let its_chat = results
            .get(task)
            .into_iter()
            .flatten()
            .any(|&r| t.woken[r].seq < p.seq && chat_of(&t.woken[r]) == here);
        if here.is_none() || !its_chat {
            not(format!("{task}'s result never went to that chat"));
            continue;
        }
        if here == chat_of(w) {
            not("it went up into the chat it was woken in (its task's watch delivers into its own child's chat)".into());
            continue;
        }
        let first = crate::world::blocks(&w.text).next().map(task_of);
        if first != Some(after) {
            not(format!(
                "it says it follows {after}, and the woken turn's first block is {first:?}'s"
            ));
        }
    }
    for (wi, (n, gone, task)) in &per_woken {
        // `redeliver` of the task sends a given-up follow-up of it again (one whose POST
        // may have landed, unconfirmed): one more copy each.
        let w = &t.woken[*wi];
        let redelivered = facts
            .iter()
            .filter(|(seq, f)| {
                *seq > w.seq && matches!(f, Fact::Redelivered { task: r } if r == task)
            })
            .count() as u64;
        if *n > 1 + gone + redelivered {
            v.duplicated += 1;
            wrong.push(format!(
                "duplicated: the reply woken in {} by {} went up {n} times ({gone} in deleted chats, {redelivered} redeliveries of {task})",
                w.chat.0, w.delivery
            ));
        }
    }
    // What the world owed.
    let mut owed_copies = 0;
    for (wi, w) in t.woken.iter().enumerate() {
        let polls: &[&Served] = served.get(w.id.as_str()).map_or(&[], Vec::as_slice);
        if !polls.is_empty() {
            v.followed += 1;
        }
        // Followed: a woken turn atc knew of, within --busy-deadline when the drain began.
        // (A delivered turn is kept until it is followed, whatever happened to its jobs:
        // `turn::prunable`; this once exempted re-watched and pruned jobs.)
        if w.answered
            && w.tick != 0
            && !crashed(w.tick)
            && w.seq < t.drain_seq
            && w.at + t.busy_deadline >= t.drain_tick_at + 20
            && polls.is_empty()
        {
            v.lost += 1;
            wrong.push(format!(
                "lost: atc never polled the turn {} woke in {} ({}; stored at {}s, the drain's first tick at {}s, --busy-deadline {}s)",
                w.delivery, w.chat.0, w.id, w.at, t.drain_tick_at, t.busy_deadline
            ));
        }
        let Woken::Reply(reply) = &w.end else {
            continue;
        };
        // atc decided at the first poll that said the turn ended.
        if polls
            .iter()
            .any(|s| s.seen != Seen::Running && crashed(s.tick))
        {
            continue;
        }
        let Some(decided) = polls.iter().find(|s| s.seen != Seen::Running) else {
            continue;
        };
        if decided.seen != Seen::Ended {
            continue;
        }
        let Some(j) = child_of(chat_of(w)) else {
            continue;
        };
        let j = j.as_str();
        let session = &w.chat.0;
        let stray = facts.iter().any(|(seq, f)| {
            *seq < decided.seq
                && matches!(f, Fact::Watched { task, child: Some(c), .. } if task != j && c == session)
        });
        if stray || t.stopped.iter().any(|s| s == j) || depth[wi] + 1 > t.depth {
            continue;
        }
        // The copy of j's result atc knew of: its 200 reached a tick before this one.
        let Some(r) = results
            .get(j)
            .into_iter()
            .flatten()
            .copied()
            .filter(|&r| {
                let p = &t.woken[r];
                p.answered && p.tick != 0 && !crashed(p.tick) && p.tick < decided.tick
            })
            .max_by_key(|&r| t.woken[r].seq)
        else {
            continue;
        };
        let result = &t.woken[r];
        // The registration that result was j's: from its last watch before it landed. A
        // cancel since (one meeting its turn in flight leaves the result going out and the
        // watch cancelled), or any change after it landed, leaves it open.
        let registered = facts
            .iter()
            .filter(|(seq, f)| {
                *seq < result.seq
                    && matches!(f, Fact::Watched { task, epoch: true, .. } if task == j)
            })
            .map(|(seq, _)| *seq)
            .max()
            .unwrap_or(0);
        // The agent that registration named is the child's (atc matches a child's chat by
        // the agent its watch names).
        let agent = facts
            .iter()
            .rfind(|(seq, f)| {
                *seq < result.seq && matches!(f, Fact::Watched { task, .. } if task == j)
            })
            .is_some_and(|(_, f)| matches!(f, Fact::Watched { agent: true, .. }));
        let touched = !agent
            || facts.iter().any(|(seq, f)| match f {
                Fact::Cancelled { task } => task == j && *seq > registered,
                Fact::Watched { task, .. } | Fact::Redelivered { task } => {
                    task == j && *seq > result.seq
                }
                _ => false,
            });
        if touched || decided.at + 120 >= result.at + t.keep {
            continue;
        }
        let Some(there) = chat_of(result) else {
            continue;
        };
        // j's watch delivers into the chat the reply is in (its own child's): up is there,
        // and nothing goes.
        if Some(there) == chat_of(w) {
            continue;
        }
        v.owed += 1;
        let found = copies
            .iter()
            .filter(|(post, task, _, r)| {
                *task == j && r == reply && chat_of(&t.woken[*post]) == Some(there)
            })
            .count();
        owed_copies += found.min(1) as u64;
        let heard = t.heard.iter().any(|(seq, line)| {
            *seq > decided.seq && line.starts_with(&format!("atc: gave up on {j} "))
        });
        match (found > 0, heard) {
            (true, false) => v.ok += 1,
            (true, true) => v.recovered += 1,
            (false, true) => v.given_up += 1,
            (false, false) => {
                v.lost += 1;
                wrong.push(format!(
                    "lost: the reply {reply} woken in {} by {} (depth {}) was owed to {} as a follow-up of {j} (its result {} landed there at {}s; the poll that said the turn ended at {}s), is in no copy there, and no give-up named it",
                    session,
                    w.delivery,
                    depth[wi],
                    name(there),
                    result.delivery,
                    result.at,
                    decided.at
                ));
            }
        }
    }
    v.allowed = v.stored - owed_copies.min(v.stored);
    (v, wrong)
}
