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
mod tests {
    use super::*;
    use crate::job::{Status, TaskOutcome, Watch};
    use crate::turn::TurnState;

    fn at(secs: u64) -> Timestamp {
        Timestamp::from_unix(1_800_000_000 + secs)
    }

    /// A result due for the sample chat, its task `task`, finished at `finished`.
    fn due(task: &str, finished: u64) -> Job {
        let mut job = Job::sample(Watch::Finished);
        job.job_id = format!("job-{task}");
        job.task_id = task.to_owned();
        job.final_text = Some(format!("[TASK_ID: {task}]\nresult"));
        job.outcome = Some(TaskOutcome::Completed);
        job.finished_at = Some(at(finished));
        job.registered_at = at(finished);
        job
    }

    fn file(jobs: Vec<Job>) -> JobFile {
        JobFile {
            version: crate::job_file::VERSION,
            jobs,
            ..JobFile::default()
        }
    }

    fn compose_all(file: &mut JobFile, batch: bool) {
        let limits = crate::settings::default_limits();
        compose(file, batch, at(100), &limits, &mut |_| {});
    }

    fn tasks(turn: &Turn) -> Vec<&str> {
        turn.carries.iter().map(|b| b.task_id.as_str()).collect()
    }

    #[test]
    fn one_result_is_its_own_turn_byte_for_byte_and_two_are_one_turn_in_finishing_order() {
        let mut f = file(vec![due("t1", 5)]);
        compose_all(&mut f, true);
        assert_eq!(f.turns.len(), 1);
        assert_eq!(f.turns[0].text.as_deref(), Some("[TASK_ID: t1]\nresult"));
        assert_eq!(f.turns[0].turn_id, "atc-job-t1");
        assert_eq!(f.jobs[0].turn.as_deref(), Some("atc-job-t1"));
        // Another result due for the same chat joins the open turn.
        f.jobs.push(due("t0", 1));
        compose_all(&mut f, true);
        assert_eq!(f.turns.len(), 1, "one open turn a chat");
        assert_eq!(tasks(&f.turns[0]), ["t0", "t1"]);
        let text = f.turns[0].text.as_deref().unwrap();
        assert!(
            text.starts_with("[ATC_RESULTS] 2 tasks: 2 completed\n\n[TASK_ID: t0]"),
            "{text}"
        );
        assert!(
            f.jobs
                .iter()
                .all(|j| j.turn.as_deref() == Some("atc-job-t1"))
        );
        assert!(
            plan(&f.jobs, &f.turns, true, at(100)).is_empty(),
            "composed: nothing more to do"
        );
    }

    #[test]
    fn no_batch_gives_each_its_own_turn_and_other_chats_and_groups_stay_apart() {
        let mut f = file(vec![due("t1", 1), due("t2", 2)]);
        compose_all(&mut f, false);
        assert_eq!(f.turns.len(), 2);
        assert!(f.turns.iter().all(|t| t.carries.len() == 1));
        let mut f = file(vec![due("t1", 1), due("t2", 2)]);
        f.jobs[1].target.session_id = "other".into();
        compose_all(&mut f, true);
        assert_eq!(f.turns.len(), 2, "one per chat");
        let mut f = file(vec![due("t1", 1), due("t2", 2)]);
        f.jobs[1].options.group = Some("g".into());
        compose_all(&mut f, true);
        assert_eq!(f.turns.len(), 2);
        assert!(f.turns.iter().any(|t| t.group.as_deref() == Some("g")));
    }

    #[test]
    fn a_cancelled_member_leaves_an_open_turn_and_the_last_one_out_drops_it() {
        let mut f = file(vec![due("t1", 1), due("t2", 2), due("t3", 3)]);
        compose_all(&mut f, true);
        let limits = crate::settings::default_limits();
        for i in [1, 0, 2] {
            let turn = f.turn_of(&f.jobs[i]).cloned();
            let cancel = lifecycle::Event::Cancelled;
            f.jobs[i] = lifecycle::step(&f.jobs[i], turn.as_ref(), cancel, at(50), &limits).job;
            tidy(&mut f, at(50), &limits);
            match i {
                1 => {
                    assert_eq!(tasks(&f.turns[0]), ["t1", "t3"]);
                    assert!(!f.turns[0].text.as_deref().unwrap().contains("t2"));
                }
                0 => {
                    assert_eq!(tasks(&f.turns[0]), ["t3"]);
                    assert_eq!(
                        f.turns[0].text.as_deref(),
                        Some("[TASK_ID: t3]\nresult"),
                        "alone: its own block again"
                    );
                }
                _ => assert!(f.turns.is_empty(), "nothing left to carry"),
            }
        }
    }

    #[test]
    fn a_claimed_turn_is_what_it_is_and_later_results_form_the_next() {
        let mut f = file(vec![due("t1", 1), due("t2", 2)]);
        compose_all(&mut f, true);
        f.turns[0].state = TurnState::Claimed;
        f.turns[0].delivery.attempts = 1;
        f.turns[0].delivery.attempt_started_at = Some(at(50));
        let limits = crate::settings::default_limits();
        // A member cancelled after the claim stays in it.
        let turn = f.turn_of(&f.jobs[1]).cloned();
        let cancel = lifecycle::Event::Cancelled;
        f.jobs[1] = lifecycle::step(&f.jobs[1], turn.as_ref(), cancel, at(60), &limits).job;
        f.jobs.push(due("t3", 3));
        f.jobs.push(due("t4", 4));
        compose_all(&mut f, true);
        assert_eq!(tasks(&f.turns[0]), ["t1", "t2"], "claimed: immutable");
        assert_eq!(tasks(&f.turns[1]), ["t3", "t4"]);
        assert_eq!(f.jobs[1].turn.as_deref(), Some(f.turns[0].turn_id.as_str()));
    }

    fn checking_in(task: &str, at_secs: u64) -> Job {
        let mut job = Job::sample(Watch::Pending);
        job.job_id = format!("job-{task}");
        job.task_id = task.to_owned();
        job.check_in = true;
        job.last_check_in_at = Some(at(at_secs));
        job.started_at = Some(at(0));
        job
    }

    #[test]
    fn a_check_in_and_a_result_due_together_are_one_turn_each_block_once() {
        let mut f = file(vec![checking_in("c1", 2), due("t1", 5)]);
        compose_all(&mut f, true);
        assert_eq!(f.turns.len(), 1);
        let turn = &f.turns[0];
        assert_eq!(tasks(turn), ["c1", "t1"]);
        assert_eq!(turn.carries[0].kind, BlockKind::CheckIn { n: 1 });
        assert_eq!(turn.turn_id, "atc-job-c1-c1");
        let text = turn.text.as_deref().unwrap();
        assert!(
            text.starts_with("[ATC_RESULTS] 2 tasks: 1 running, 1 completed"),
            "{text}"
        );
        // The turn lands: the check-in owes nothing more, the result is delivered.
        f.turns[0].state = TurnState::Delivered;
        let shown = |j: &Job| crate::status::status(j, f.turn_of(j));
        assert_eq!(crate::status::owes(&f.jobs[0], f.turn_of(&f.jobs[0])), None);
        assert_eq!(
            crate::status::check_in(&f.jobs[0], f.turn_of(&f.jobs[0])),
            Some("delivered")
        );
        assert_eq!(shown(&f.jobs[1]), Status::Done);
    }

    #[test]
    fn a_turn_holds_at_most_its_cap() {
        let jobs: Vec<Job> = (0..5)
            .map(|i| {
                let mut job = due(&format!("t{i}"), i);
                job.final_text = Some("x".repeat(8_000));
                job
            })
            .collect();
        let mut f = file(jobs);
        compose_all(&mut f, true);
        assert_eq!(f.turns.len(), 1, "the rest waits for the next turn");
        assert_eq!(tasks(&f.turns[0]), ["t0", "t1", "t2"]);
        assert!(f.turns[0].text.as_deref().unwrap().chars().count() <= TURN_CHARS);
        assert_eq!(f.jobs[3].turn, None);
    }

    fn member(task: &str, watch: Watch, registered: u64) -> Job {
        let mut job = due(task, registered);
        job.watch = watch;
        job.options.group = Some("g".into());
        if watch == Watch::Pending {
            job.final_text = None;
            job.outcome = None;
        }
        job
    }

    #[test]
    fn a_group_is_held_until_none_is_pending_then_sealed_in_registration_order() {
        let mut f = file(vec![
            member("t2", Watch::Finished, 2),
            member("t1", Watch::Pending, 1),
        ]);
        compose_all(&mut f, true);
        assert!(f.turns.is_empty(), "held while a member runs");
        f.jobs[1] = member("t1", Watch::Finished, 1);
        let mut lost = member("t3", Watch::Lost, 3);
        lost.last_error = Some("Task not found: t3".into());
        lost.notice = true;
        f.jobs.push(lost);
        let mut cancelled = member("t4", Watch::Cancelled, 0);
        cancelled.turn = None;
        f.jobs.push(cancelled);
        compose_all(&mut f, true);
        assert_eq!(f.turns.len(), 1);
        let turn = &f.turns[0];
        assert_eq!(turn.group.as_deref(), Some("g"));
        assert_eq!(tasks(turn), ["t1", "t2", "t3"]);
        assert_eq!(turn.carries[2].kind, BlockKind::Notice);
        let text = turn.text.as_deref().unwrap();
        assert!(
            text.starts_with("[ATC_GROUP: g] 3 tasks: 2 completed, 1 lost\n\n[TASK_ID: t1]"),
            "{text}"
        );
        assert_eq!(turn.turn_id, "atc-job-t1");
    }

    #[test]
    fn a_group_member_cancelled_before_the_claim_leaves_its_turn_and_one_after_stays() {
        let mut f = file(vec![
            member("t1", Watch::Finished, 1),
            member("t2", Watch::Finished, 2),
            member("t3", Watch::Finished, 3),
        ]);
        compose_all(&mut f, true);
        let limits = crate::settings::default_limits();
        let turn = f.turn_of(&f.jobs[1]).cloned();
        let cancel = lifecycle::Event::Cancelled;
        f.jobs[1] = lifecycle::step(&f.jobs[1], turn.as_ref(), cancel, at(50), &limits).job;
        tidy(&mut f, at(50), &limits);
        assert_eq!(tasks(&f.turns[0]), ["t1", "t3"]);
        assert!(
            f.turns[0]
                .text
                .as_deref()
                .unwrap()
                .starts_with("[ATC_GROUP: g] 2 tasks")
        );
        f.turns[0].state = TurnState::Claimed;
        let turn = f.turn_of(&f.jobs[2]).cloned();
        let cancel = lifecycle::Event::Cancelled;
        f.jobs[2] = lifecycle::step(&f.jobs[2], turn.as_ref(), cancel, at(60), &limits).job;
        tidy(&mut f, at(60), &limits);
        assert_eq!(tasks(&f.turns[0]), ["t1", "t3"], "claimed: it stays");
    }

    #[test]
    fn a_turn_given_up_and_redelivered_is_composed_anew_with_the_jobs_that_follow_it() {
        let mut f = file(vec![due("t1", 1), due("t2", 2)]);
        compose_all(&mut f, true);
        let limits = crate::settings::default_limits();
        f.turns[0].state = TurnState::Misrouted;
        assert!(
            f.jobs
                .iter()
                .all(|j| crate::status::status(j, f.turn_of(j)) == Status::Misrouted)
        );
        // One of them is watched again elsewhere: its record is replaced.
        f.jobs.remove(1);
        let reopen = TurnEvent::Redeliver {
            create_session: false,
        };
        f.turns[0] = turn::step(&f.turns[0], reopen, at(20), &limits).turn;
        compose_all(&mut f, true);
        assert_eq!(
            tasks(&f.turns[0]),
            ["t1"],
            "the job gone is not posted in it"
        );
        assert_eq!(f.turns[0].text.as_deref(), Some("[TASK_ID: t1]\nresult"));
        assert_eq!(
            crate::status::status(&f.jobs[0], f.turn_of(&f.jobs[0])),
            Status::Delivering
        );
    }

    #[test]
    fn a_redelivered_turn_and_one_still_waiting_become_one() {
        let mut f = file(vec![due("t1", 1)]);
        compose_all(&mut f, true);
        let limits = crate::settings::default_limits();
        f.turns[0].state = TurnState::Undelivered;
        f.jobs.push(due("t2", 2));
        compose_all(&mut f, true);
        assert_eq!(f.turns.len(), 2);
        let reopen = TurnEvent::Redeliver {
            create_session: false,
        };
        f.turns[0] = turn::step(&f.turns[0], reopen, at(20), &limits).turn;
        compose_all(&mut f, true);
        assert_eq!(f.turns.len(), 1, "merged into the oldest");
        assert_eq!(tasks(&f.turns[0]), ["t1", "t2"]);
        assert!(
            f.jobs
                .iter()
                .all(|j| j.turn.as_deref() == Some("atc-job-t1"))
        );
    }
}
