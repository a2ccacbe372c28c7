//! Which turn carries which block: one pure composer for both kinds of turn that carry
//! more than one block, and the one rule of membership.
//!
//! - **Membership.** A block belongs to an open turn while its job still owes it, points
//!   at that turn, and still goes where the turn goes ([`belongs`]). A cancel, a re-watch or
//!   a re-target takes a job out; a claimed turn is what it is whatever happens to its
//!   jobs (`turn`), and each job it carries reads where it landed from that turn
//!   (`status`).
//! - **Groups** (`atc watch T1 T2 --group G`): once none of a group's members is pending,
//!   every block its members owe goes in one turn, in registration order, under the
//!   group's header (`describe::group_text`).
//! - **Batches**: everything else due for one parent chat goes in one open turn (the
//!   batch), in the order it became due, under `[ATC_RESULTS]` when it holds more than one
//!   block, at most [`TURN_CHARS`] characters; what does not fit waits for the next turn.
//!   A block alone is posted byte for byte. `--no-batch` composes every block into a turn
//!   of its own (turns already composed stay as they are). One open turn per chat (and
//!   `--forward` mode) at a time: a redelivered turn and one still waiting become one.
//!
//! [`plan`] looks at the whole file and says what changes; [`apply`] carries the changes
//! out through `turn::step` and `lifecycle::step`, the only places a turn or a job changes.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::describe;
use crate::job::{ForwardMode, Job};
use crate::job_file::JobFile;
use crate::lifecycle::{self, Event, Limits};
use crate::outcome::Outcome;
use crate::time::Timestamp;
use crate::turn::{self, Block, BlockKind, Chat, Turn, TurnEvent};

/// The most characters one turn carries (each block is still at most 8,000).
pub const TURN_CHARS: usize = 32_000;

/// What composition changes, in the order it must be applied.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// Jobs whose block left an open turn (before the turns change).
    pub left: Vec<String>,
    /// Turns opened, composed again, or dropped.
    pub changes: Vec<Change>,
    /// Jobs whose block went into a turn: (job id, turn id).
    pub joined: Vec<(String, String)>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.left.is_empty() && self.changes.is_empty() && self.joined.is_empty()
    }
}

/// One change to the turns.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// A new open turn.
    Open(Box<Turn>),
    /// An open turn's members and text, composed again.
    Compose {
        turn_id: String,
        carries: Vec<Block>,
        text: String,
        create_session: bool,
    },
    /// An open turn left with nothing to carry: removed.
    Drop { turn_id: String },
}

/// What applying a plan (or following a turn) did to one job or turn, for the report.
pub enum Seen<'a> {
    Job(&'a Job, bool, &'a [Outcome]),
    /// A turn as it is now, with the file's jobs (which have followed it).
    Turn(&'a Turn, &'a [Job], &'a [Outcome]),
    /// A turn was dropped (it had nothing left to carry).
    Dropped(&'a Turn),
}

/// The chat a job's block goes to.
pub fn chat_of(job: &Job) -> Chat {
    Chat {
        base_url: job.base_url.clone(),
        agent_id: job.target.agent_id.clone(),
        session_id: job.target.session_id.clone(),
        user_id: job.target.user_id.clone(),
        channel: job.target.channel.clone(),
    }
}

/// Whether `job`'s block `kind` still belongs in the open turn `turn`: the job owes it,
/// points at the turn, goes to its chat, is of its group (or of none, with the same
/// `--forward`).
pub fn belongs(job: &Job, turn: &Turn, kind: BlockKind) -> bool {
    job.turn.as_deref() == Some(turn.turn_id.as_str())
        && crate::status::owes(job, Some(turn)) == Some(kind)
        && job.chat_key() == turn.chat.key()
        && job.options.group == turn.group
        && (turn.group.is_some() || job.options.forward == turn.forward_mode)
}

/// The order blocks go in a batch: the order they became due, then the order they were
/// registered in (timestamps are whole seconds: the file's order breaks a tie, never the
/// random job id).
fn due_order(
    job: &Job,
    kind: BlockKind,
    pos: &HashMap<&str, usize>,
) -> (Option<Timestamp>, Timestamp, usize) {
    let at = match kind {
        BlockKind::CheckIn { .. } => job.last_check_in_at,
        _ => job.finished_at,
    };
    (at, job.registered_at, pos[job.job_id.as_str()])
}

/// A block's length in characters (what it adds to a turn).
fn chars(job: &Job, kind: BlockKind) -> usize {
    describe::block_text(job, kind).chars().count()
}

/// The changes the file's turns need now. `batch` false (`--no-batch`): no block joins
/// another's turn.
pub fn plan(jobs: &[Job], turns: &[Turn], batch: bool, now: Timestamp) -> Plan {
    plan_of(jobs, turns, batch, true, now)
}

/// [`plan`]; `joining` false: only what leaves — no free block joins an open turn (a
/// group's included), for [`tidy`].
fn plan_of(jobs: &[Job], turns: &[Turn], batch: bool, joining: bool, now: Timestamp) -> Plan {
    let by_id: HashMap<&str, &Job> = jobs.iter().map(|j| (j.job_id.as_str(), j)).collect();
    let pos: HashMap<&str, usize> = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| (j.job_id.as_str(), i))
        .collect();
    let by_turn: HashMap<&str, &Turn> = turns.iter().map(|t| (t.turn_id.as_str(), t)).collect();
    let owes = |job: &Job| {
        let turn = job.turn.as_deref().and_then(|id| by_turn.get(id).copied());
        crate::status::owes(job, turn)
    };
    let mut plan = Plan::default();
    let mut ids: HashSet<String> = turns.iter().map(|t| t.turn_id.clone()).collect();

    // The members each open turn keeps: the blocks that still belong there.
    let mut kept: HashMap<&str, Vec<Block>> = HashMap::new();
    // A follow-up's turn is fixed when it opens (`lifecycle::tree`): never composed.
    let composable = |t: &&Turn| t.is_open() && !t.is_follow_up();
    for turn in turns.iter().filter(composable) {
        let keep: Vec<Block> = turn
            .carries
            .iter()
            .filter(|b| {
                by_id
                    .get(b.job_id.as_str())
                    .is_some_and(|j| belongs(j, turn, b.kind))
            })
            .cloned()
            .collect();
        kept.insert(turn.turn_id.as_str(), keep);
    }
    // Jobs pointing at an open turn that does not keep their block leave it; a job
    // pointing at a turn that is gone, or that does not carry what it owes now, is free.
    let mut free: Vec<(&Job, BlockKind)> = Vec::new();
    for job in jobs {
        let Some(kind) = owes(job) else {
            // A cancelled job that named an open turn (one redelivered since) has left it.
            if let Some(t) = job.turn.as_deref().and_then(|id| by_turn.get(id))
                && t.is_open()
                && !kept[t.turn_id.as_str()]
                    .iter()
                    .any(|b| b.job_id == job.job_id)
            {
                plan.left.push(job.job_id.clone());
            }
            continue;
        };
        let turn = job.turn.as_deref().and_then(|id| by_turn.get(id));
        match turn {
            Some(t) if t.is_open() => {
                if !kept[t.turn_id.as_str()]
                    .iter()
                    .any(|b| b.job_id == job.job_id)
                {
                    plan.left.push(job.job_id.clone());
                    free.push((job, kind));
                }
            }
            Some(t) if t.carries_block(&job.job_id, kind) => {} // it follows that turn
            Some(_) => {
                plan.left.push(job.job_id.clone());
                free.push((job, kind));
            }
            None => {
                if job.turn.is_some() {
                    plan.left.push(job.job_id.clone());
                }
                free.push((job, kind));
            }
        }
    }

    // Groups: per (name, chat), once no member is pending.
    let mut groups: BTreeMap<(&str, crate::job::ChatKey), Vec<&Job>> = BTreeMap::new();
    for job in jobs {
        if let Some(name) = job.options.group.as_deref() {
            groups.entry((name, job.chat_key())).or_default().push(job);
        }
    }
    // An open group turn whose members all left (watched again elsewhere) is dropped.
    for turn in turns.iter().filter(composable) {
        if let Some(name) = turn.group.as_deref() {
            groups.entry((name, turn.chat.key())).or_default();
        }
    }
    for ((name, key), mut members) in groups {
        members.sort_by_key(|j| (j.registered_at, pos[j.job_id.as_str()]));
        let open: Vec<&Turn> = turns
            .iter()
            .filter(|t| composable(t) && t.group.as_deref() == Some(name) && t.chat.key() == key)
            .collect();
        let held = members
            .iter()
            .any(|j| j.watch == crate::job::Watch::Pending);
        if held && open.is_empty() {
            continue;
        }
        let member_ids: HashSet<&str> = members.iter().map(|j| j.job_id.as_str()).collect();
        let in_open = |j: &Job| {
            open.iter().any(|t| {
                kept[t.turn_id.as_str()]
                    .iter()
                    .any(|b| b.job_id == j.job_id)
            })
        };
        let free_here: Vec<(&Job, BlockKind)> = free
            .iter()
            .filter(|(j, _)| member_ids.contains(j.job_id.as_str()))
            .copied()
            .collect();
        let contributors: Vec<(&Job, BlockKind)> = members
            .iter()
            .filter_map(|j| {
                let kind = owes(j)?;
                (in_open(j)
                    || (joining && !held && free_here.iter().any(|(f, _)| f.job_id == j.job_id)))
                .then_some((*j, kind))
            })
            .collect();
        let carries = blocks(&contributors);
        match open.split_first() {
            // Tidying (nothing joins): each open turn of the group keeps its own members;
            // two of them (one opened again by `redeliver`) are merged by the next tick.
            Some(_) if !joining => {
                for turn in &open {
                    let own: Vec<(&Job, BlockKind)> = contributors
                        .iter()
                        .filter(|(j, _)| {
                            kept[turn.turn_id.as_str()]
                                .iter()
                                .any(|b| b.job_id == j.job_id)
                        })
                        .copied()
                        .collect();
                    recompose(&mut plan, turn, blocks(&own), &own, Some(name));
                }
            }
            Some((first, rest)) => {
                recompose(&mut plan, first, carries, &contributors, Some(name));
                for (job, _) in &contributors {
                    if job.turn.as_deref() != Some(first.turn_id.as_str()) {
                        plan.joined
                            .push((job.job_id.clone(), first.turn_id.clone()));
                    }
                }
                for other in rest {
                    plan.changes.push(Change::Drop {
                        turn_id: other.turn_id.clone(),
                    });
                }
            }
            None if !contributors.is_empty() => {
                let text = describe::group_text(name, &contributors);
                let mut opened = new_turn(&contributors, &mut ids, now);
                opened.group = Some(name.to_owned());
                opened.carries = carries;
                opened.text = Some(text);
                for (job, _) in &contributors {
                    plan.joined
                        .push((job.job_id.clone(), opened.turn_id.clone()));
                }
                plan.changes.push(Change::Open(Box::new(opened)));
            }
            None => {}
        }
    }

    // Batches: per chat and `--forward` mode, everything else that is due.
    type Key<'a> = (crate::job::ChatKey<'a>, ForwardMode);
    type Waiting<'a> = (Vec<&'a Turn>, Vec<(&'a Job, BlockKind)>);
    let mut chats: BTreeMap<Key, Waiting> = BTreeMap::new();
    for turn in turns.iter().filter(|t| composable(t) && t.group.is_none()) {
        chats
            .entry((turn.chat.key(), turn.forward_mode))
            .or_default()
            .0
            .push(turn);
    }
    for (job, kind) in &free {
        if job.options.group.is_none() {
            chats
                .entry((job.chat_key(), job.options.forward))
                .or_default()
                .1
                .push((job, *kind));
        }
    }
    for (_, (mut open, mut waiting)) in chats {
        open.sort_by_key(|t| (t.created_at, t.turn_id.clone()));
        waiting.sort_by_key(|(j, k)| due_order(j, *k, &pos));
        if !batch {
            for turn in &open {
                let members = members_of(turn, &kept, &by_id);
                recompose(&mut plan, turn, blocks(&members), &members, None);
            }
            for one in waiting {
                let opened = batch_turn(&[one], &mut ids, now);
                plan.joined
                    .push((one.0.job_id.clone(), opened.turn_id.clone()));
                plan.changes.push(Change::Open(Box::new(opened)));
            }
            continue;
        }
        // The oldest open turn is the batch; the others' members move to it, and what is
        // waiting joins, in the order it became due, while it fits.
        let (primary, rest) = match open.split_first() {
            Some((first, rest)) => (Some(*first), rest.to_vec()),
            None => (None, Vec::new()),
        };
        let mut members: Vec<(&Job, BlockKind)> = primary
            .map(|t| members_of(t, &kept, &by_id))
            .unwrap_or_default();
        let mut candidates: Vec<(&Job, BlockKind)> = Vec::new();
        for turn in &rest {
            candidates.extend(members_of(turn, &kept, &by_id));
        }
        candidates.extend(waiting);
        candidates.sort_by_key(|(j, k)| due_order(j, *k, &pos));
        let mut used = describe::BATCH_HEADER_MAX
            + members.iter().map(|(j, k)| chars(j, *k) + 2).sum::<usize>();
        let mut moved: HashSet<String> = HashSet::new();
        for (job, kind) in candidates {
            let more = chars(job, kind) + 2;
            if members.is_empty() || used + more <= TURN_CHARS {
                used += more;
                moved.insert(job.job_id.clone());
                members.push((job, kind));
            }
        }
        if members.is_empty() {
            // Nothing left to carry: the open turns go.
            for turn in primary.into_iter().chain(rest) {
                plan.changes.push(Change::Drop {
                    turn_id: turn.turn_id.clone(),
                });
            }
            continue;
        }
        members.sort_by_key(|(j, k)| due_order(j, *k, &pos));
        let turn_id = match primary {
            Some(turn) => {
                recompose(&mut plan, turn, blocks(&members), &members, None);
                turn.turn_id.clone()
            }
            None => {
                let opened = batch_turn(&members, &mut ids, now);
                let id = opened.turn_id.clone();
                plan.changes.push(Change::Open(Box::new(opened)));
                id
            }
        };
        for (job, _) in &members {
            if moved.contains(&job.job_id) {
                plan.joined.push((job.job_id.clone(), turn_id.clone()));
            }
        }
        for turn in rest {
            let left: Vec<(&Job, BlockKind)> = members_of(turn, &kept, &by_id)
                .into_iter()
                .filter(|(j, _)| !moved.contains(&j.job_id))
                .collect();
            recompose(&mut plan, turn, blocks(&left), &left, None);
        }
    }
    plan
}

/// The blocks an open turn keeps, with their jobs.
fn members_of<'a>(
    turn: &Turn,
    kept: &HashMap<&str, Vec<Block>>,
    by_id: &HashMap<&str, &'a Job>,
) -> Vec<(&'a Job, BlockKind)> {
    kept[turn.turn_id.as_str()]
        .iter()
        .filter_map(|b| by_id.get(b.job_id.as_str()).map(|j| (*j, b.kind)))
        .collect()
}

fn blocks(members: &[(&Job, BlockKind)]) -> Vec<Block> {
    members
        .iter()
        .map(|(j, kind)| Block {
            job_id: j.job_id.clone(),
            task_id: j.task_id.clone(),
            kind: *kind,
        })
        .collect()
}

/// The text of a turn of `members` (a group's under its header).
fn text_of(members: &[(&Job, BlockKind)], group: Option<&str>) -> String {
    match (group, members) {
        (Some(name), _) => describe::group_text(name, members),
        (None, [(job, kind)]) => describe::block_text(job, *kind),
        (None, _) => describe::batch_text(members),
    }
}

/// An open turn composed again with `carries` (dropped when there is nothing left).
fn recompose(
    plan: &mut Plan,
    turn: &Turn,
    carries: Vec<Block>,
    members: &[(&Job, BlockKind)],
    group: Option<&str>,
) {
    if carries.is_empty() {
        plan.changes.push(Change::Drop {
            turn_id: turn.turn_id.clone(),
        });
        return;
    }
    let text = text_of(members, group);
    let create_session =
        turn.create_session || members.iter().any(|(j, _)| j.options.create_session);
    if turn.carries != carries
        || turn.text.as_deref() != Some(text.as_str())
        || turn.create_session != create_session
    {
        plan.changes.push(Change::Compose {
            turn_id: turn.turn_id.clone(),
            carries,
            text,
            create_session,
        });
    }
}

/// A new open turn for `members` (the first decides its id and chat).
fn new_turn(members: &[(&Job, BlockKind)], ids: &mut HashSet<String>, now: Timestamp) -> Turn {
    let carries = blocks(members);
    let first = &members[0].0;
    let id = turn::new_id(&carries[0], |id| ids.contains(id));
    ids.insert(id.clone());
    let mut opened = Turn::new(id, chat_of(first), now);
    opened.forward_mode = first.options.forward;
    opened.create_session = members.iter().any(|(j, _)| j.options.create_session);
    opened
}

fn batch_turn(members: &[(&Job, BlockKind)], ids: &mut HashSet<String>, now: Timestamp) -> Turn {
    let mut opened = new_turn(members, ids, now);
    opened.carries = blocks(members);
    opened.text = Some(text_of(members, None));
    opened
}

/// Carries `plan` out: jobs leave, turns open, are composed again or dropped, jobs join.
pub fn apply(
    file: &mut JobFile,
    plan: Plan,
    now: Timestamp,
    limits: &Limits,
    seen: &mut dyn FnMut(Seen),
) {
    for job_id in &plan.left {
        step_job(file, job_id, Event::Left, now, limits, seen);
    }
    for change in plan.changes {
        match change {
            Change::Open(opened) => {
                let outcome = if opened.group.is_some() {
                    Outcome::Sealed
                } else {
                    Outcome::Batched
                };
                seen(Seen::Turn(&opened, &file.jobs, &[outcome]));
                file.turns.push(*opened);
            }
            Change::Compose {
                turn_id,
                carries,
                text,
                create_session,
            } => {
                let Some(i) = file.turns.iter().position(|t| t.turn_id == turn_id) else {
                    continue;
                };
                let event = TurnEvent::Composed {
                    carries,
                    text,
                    create_session,
                };
                let t = turn::step(&file.turns[i], event, now, limits);
                seen(Seen::Turn(&t.turn, &file.jobs, &t.outcomes));
                file.turns[i] = t.turn;
            }
            Change::Drop { turn_id } => {
                if let Some(i) = file
                    .turns
                    .iter()
                    .position(|t| t.turn_id == turn_id && t.is_open())
                {
                    let dropped = file.turns.remove(i);
                    seen(Seen::Dropped(&dropped));
                }
            }
        }
    }
    for (job_id, turn_id) in plan.joined {
        step_job(
            file,
            &job_id,
            Event::Joined { turn: turn_id },
            now,
            limits,
            seen,
        );
    }
}

fn step_job(
    file: &mut JobFile,
    job_id: &str,
    event: Event,
    now: Timestamp,
    limits: &Limits,
    seen: &mut dyn FnMut(Seen),
) {
    if let Some(i) = file.jobs.iter().position(|j| j.job_id == job_id) {
        let job = &file.jobs[i];
        let t = lifecycle::step(job, file.turn_of(job), event, now, limits);
        let changed = t.job != *job;
        seen(Seen::Job(&t.job, changed, &t.outcomes));
        file.jobs[i] = t.job;
    }
}

/// Composes the file's turns now (the tick's decide and claim phases).
pub fn compose(
    file: &mut JobFile,
    batch: bool,
    now: Timestamp,
    limits: &Limits,
    seen: &mut dyn FnMut(Seen),
) {
    let plan = plan(&file.jobs, &file.turns, batch, now);
    if !plan.is_empty() {
        apply(file, plan, now, limits, seen);
    }
}

/// Takes out of open turns every block that no longer belongs there (after a cancel, a
/// re-watch, a re-target): the turns are composed again without them, or dropped. Nothing
/// joins. What the commands run after changing a job, so an open turn never carries a
/// block its job no longer owes.
pub fn tidy(file: &mut JobFile, now: Timestamp, limits: &Limits) {
    let mut full = plan_of(&file.jobs, &file.turns, false, false, now);
    // Only what leaves: no turn opens and nothing joins until a tick composes.
    full.changes.retain(|c| !matches!(c, Change::Open(_)));
    full.joined.clear();
    if !full.is_empty() {
        apply(file, full, now, limits, &mut |_| {});
    }
}

#[cfg(test)]
mod tests;
