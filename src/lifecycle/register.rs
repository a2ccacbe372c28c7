//! What `watch` does with the records the file already holds: a new registration, the
//! same one kept (its options updated), a record replaced (re-watched, re-targeted, a
//! held result kept), or a refusal when the result went out, may have, or is on its way
//! in a turn that was claimed. Pure: the command (and the simulation) give it the file's
//! jobs and turns; `compose::tidy` then takes replaced jobs out of open turns.

use crate::job::{Job, Options, Origin, Status, Target, Watch};
use crate::time::Timestamp;
use crate::turn::Turn;

/// What `watch` should do, given the record the file already holds for the task.
#[derive(Debug, PartialEq, Eq)]
pub enum Registration {
    /// No record: add one.
    New,
    /// Same task, same target, still live: keep the existing job and its id.
    AlreadyWatching,
    /// Replace the existing record with a fresh pending job. `was` says what it replaced.
    Replace { was: Status, same_target: bool },
    /// Refuse: the result already went out, or may have, or is going out right now.
    Refuse { was: Status },
}

/// Whether `turn` carries `job`'s result (or notice) and may be in the chat: claimed (on
/// its way, whatever happens to the job), of unknown outcome, or delivered.
pub fn landed_with(job: &Job, turn: Option<&Turn>) -> bool {
    crate::turn::claimed(turn, &job.job_id)
        && turn.is_some_and(|t| {
            t.carries
                .iter()
                .any(|b| b.job_id == job.job_id && !b.kind.is_check_in())
        })
}

/// A different base URL is a different target too: it names another QwenPaw instance (and
/// re-watching with a corrected URL is how a wrong one is fixed). So is another group.
/// `turn` is the turn the existing record points at.
pub fn register(
    existing: Option<&Job>,
    turn: Option<&Turn>,
    target: &Target,
    base_url: &str,
    group: Option<&str>,
) -> Registration {
    let Some(job) = existing else {
        return Registration::New;
    };
    let same_target =
        job.target == *target && job.base_url == base_url && job.options.group.as_deref() == group;
    match crate::status::status(job, turn) {
        was @ (Status::Done | Status::Unconfirmed) => Registration::Refuse { was },
        Status::Pending | Status::Delivering if same_target => Registration::AlreadyWatching,
        // Its block is in a turn that was claimed (posted, being posted, or waiting to be
        // posted again) or may have landed: replaced, it could go out twice.
        was if landed_with(job, turn) => Registration::Refuse { was },
        was => Registration::Replace { was, same_target },
    }
}

/// True when the job holds its child's rendered result, not delivered: a re-watch keeps
/// it rather than poll a task whose record the server may have lost since.
pub fn holds_result(job: &Job, turn: Option<&Turn>) -> bool {
    job.final_text.is_some()
        && job.outcome.is_some()
        && match crate::status::status(job, turn) {
            Status::Delivering | Status::Undelivered | Status::Misrouted | Status::Error => true,
            // The parent read it itself, and is asked to get it after all.
            Status::Skipped => job.read_by_parent_at.is_some(),
            _ => false,
        }
}

/// A live job watched again with other options: what it takes (`applied`) and what it
/// cannot take any more, because its result is already rendered or its turn was claimed
/// (`not_applied`), by flag name; a switch or a duration the new watch leaves out is
/// applied as `no --flag` (it is off now; a flag of named values names none).
fn reoption(
    job: &Job,
    wanted: &Options,
    claimed: bool,
) -> (Job, Vec<&'static str>, Vec<&'static str>) {
    let mut next = job.clone();
    let (mut applied, mut not_applied) = (Vec::new(), Vec::new());
    let have = &job.options;
    let rendered = job.watch != Watch::Pending;
    let off = Options::default();
    // A flag that changed is applied unless it is frozen (then it is named as not taken).
    // `$may_be_off`: its default is its absence (`--forward auto` is a value, not an off).
    macro_rules! take {
        ($($flag:literal $field:ident $frozen:expr, $may_be_off:expr;)*) => {$(
            if have.$field != wanted.$field {
                if $frozen {
                    not_applied.push($flag);
                } else {
                    applied.push(if $may_be_off && wanted.$field == off.$field {
                        concat!("no ", $flag)
                    } else {
                        $flag
                    });
                    next.options.$field = Clone::clone(&wanted.$field);
                }
            }
        )*};
    }
    take! {
        "--on-no-answer" on_no_answer rendered, false;
        "--on-empty" on_empty rendered, false;
        "--fork-branch" fork_branch rendered, true;
        "--create-session" create_session claimed, true;
        "--forward" forward claimed, false;
        "--allow-insecure-remote" allow_insecure_remote false, true;
        "--check-in" check_in_secs rendered, true;
        "--stop-after" stop_after_secs rendered, true;
    }
    (next, applied, not_applied)
}

/// One `atc watch` of one or more tasks, to one parent chat.
#[derive(Clone, Debug)]
pub struct WatchRequest {
    pub task_ids: Vec<String>,
    pub target: Target,
    pub base_url: String,
    pub options: Options,
    /// The parent chat's id, when `watch` looked it up.
    pub chat_id: Option<String>,
    /// The child sessions known, by task id (`--child-session`, `[SESSION: …]` lines).
    pub child_sessions: Vec<(String, String)>,
    /// The agents tasks run on, by task id, where one differs from `target`'s
    /// (`[TARGET_AGENT: …]` lines under their `[TASK_ID: …]`).
    pub target_agents: Vec<(String, String)>,
    /// Who asks: what the parent is later told names the options in its words.
    /// `Origin::Auto` (the plugin, at the end of the turn that submitted the tasks) never
    /// takes a record over: see [`watch`].
    pub origin: Origin,
}

impl WatchRequest {
    /// Where `task_id`'s result goes: the request's target, with the agent that task runs
    /// on when the request names one for it.
    pub fn target_of(&self, task_id: &str) -> Target {
        let mut target = self.target.clone();
        if let Some((_, on)) = self.target_agents.iter().find(|(t, _)| t == task_id) {
            target.target_agent = (*on != target.agent_id).then(|| on.clone());
        }
        target
    }
}

/// Why an automatic watch (`Origin::Auto`) left a task's record as it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeftAlone {
    /// Another chat watches the task: the plugin's own tool refuses to take it over too.
    OtherChat,
    /// Its watch ended (delivered, cancelled, read by the parent…): a turn's end does not
    /// start it again.
    Ended(Status),
}

/// What a watch did with one task.
#[derive(Clone, Debug, PartialEq)]
pub enum Registered {
    /// A new record.
    New(Job),
    /// The live record for the same target, kept as it is.
    AlreadyWatching(Job),
    /// The live record for the same target, with the options that changed (`applied`), and
    /// those it could not take any more (`not_applied`: its result is already rendered, or
    /// its turn was claimed).
    Updated {
        job: Job,
        applied: Vec<&'static str>,
        not_applied: Vec<&'static str>,
    },
    /// A record holding its result (not delivered), sent where the new watch says: the
    /// result is kept, never polled again. `old` is the record it replaced; `not_applied`:
    /// the options the result was already rendered under (`--on-empty`), kept as they were.
    Kept {
        old: Box<Job>,
        job: Job,
        not_applied: Vec<&'static str>,
    },
    /// A live record sent to another chat: the old record and the new.
    Retargeted { old: Box<Job>, job: Job },
    /// A record that had ended, replaced by a fresh watch.
    Rewatched { was: Status, job: Job },
    /// An automatic watch found a record it does not touch (`why`): `job` is that record.
    LeftAlone { job: Job, why: LeftAlone },
}

impl Registered {
    /// The options of the watch that this registration did not take (flag names).
    pub fn not_applied(&self) -> &[&'static str] {
        match self {
            Registered::Updated { not_applied, .. } | Registered::Kept { not_applied, .. } => {
                not_applied
            }
            _ => &[],
        }
    }

    pub fn job(&self) -> &Job {
        match self {
            Registered::New(job)
            | Registered::AlreadyWatching(job)
            | Registered::Updated { job, .. }
            | Registered::Kept { job, .. }
            | Registered::Retargeted { job, .. }
            | Registered::Rewatched { job, .. }
            | Registered::LeftAlone { job, .. } => job,
        }
    }
}

/// Why a watch was refused; nothing it registered is kept.
#[derive(Clone, Debug, PartialEq)]
pub enum WatchRefused {
    /// The group already went out (or is going out) to this chat.
    GroupWentOut { group: String },
    /// This task's result went out, may have, or is going out right now. `turn` is the
    /// turn its record points at.
    Task {
        job: Box<Job>,
        turn: Option<Box<Turn>>,
        was: Status,
    },
    /// The watch names a child session for `task_id` other than the one its record holds
    /// (`known`: QwenPaw's `[SESSION: …]` line, or an earlier watch's): the child is one.
    OtherChildSession {
        task_id: String,
        known: String,
        asked: String,
    },
    /// The watch would deliver `task_id`'s result into its own child's chat: `session`,
    /// its child session (`--child-session`, a `[SESSION: …]` line, an earlier watch's), is
    /// the watch's `--session` on the agent the child runs on. The asking chat never hears.
    OwnChildSession { task_id: String, session: String },
    /// The child session named for `task_id` is the child of another live watch (`of`) on
    /// the same agent: one session is one child, and a stop of it would stop the other.
    ChildSessionTaken {
        task_id: String,
        session: String,
        of: String,
    },
}

/// The turns group `name` has had in `chat`: once there is one, the name "went out" there,
/// and a watch it takes is a late member (refused) or its next round.
pub fn group_turns<'a>(
    turns: &'a [Turn],
    name: &str,
    chat: crate::job::ChatKey<'_>,
) -> Vec<&'a Turn> {
    turns
        .iter()
        .filter(|t| t.group.as_deref() == Some(name) && t.chat.key() == chat)
        .collect()
}

/// Applies a watch to the jobs of the file (`new_id` names each new registration); `turns`
/// are the file's turns, which say what may be in a chat already. On a refusal the caller
/// must not keep `jobs` (`store.update` does not save an error).
///
/// An automatic watch (`Origin::Auto`: the plugin, at the end of the turn whose
/// `submit_to_agent` started the tasks) is the same registration as any other of the task:
/// it adds a record where the file holds none, and otherwise changes nothing the record
/// says (options, group, chat, origin) but what it lacks and the turn knows (the child's
/// session, the agent it runs on). A record of another chat, or one that ended, it leaves
/// alone; it refuses nothing.
pub fn watch(
    jobs: &mut Vec<Job>,
    turns: &[Turn],
    request: &WatchRequest,
    mut new_id: impl FnMut() -> String,
    now: Timestamp,
) -> Result<Vec<Registered>, WatchRefused> {
    let (target, base_url) = (&request.target, &request.base_url);
    let group = request.options.group.as_deref();
    let turn_of = |job: &Job| {
        job.turn
            .as_deref()
            .and_then(|id| turns.iter().find(|t| t.turn_id == id))
    };
    // Groups are per parent chat, whichever agent each member runs on (the skill runs one
    // `atc watch … --group G` per `--target-agent`): a member joining after the group's
    // turn was composed would be held for it forever.
    if let Some(name) = group {
        let chat = target.chat_key(base_url);
        let group_turns = group_turns(turns, name, chat);
        // A task not in the group's turn would be a late member, whether or not the watch
        // names the tasks already in it; and a member in it that the watch leaves out
        // would be one watch of a group split in two.
        let sealed: Vec<&String> = group_turns
            .iter()
            .flat_map(|t| t.carries.iter().map(|b| &b.task_id))
            .collect();
        // A new round under the same name (a model's "research" again, an hour later):
        // every earlier turn of the group delivered and settled, the watch naming none
        // of their tasks, and no earlier member still running or owed. The name starts
        // over; its next turn carries this round only (the earlier members owe nothing).
        let new_round = || {
            let turns_index = super::Turns::of(turns);
            group_turns
                .iter()
                .all(|t| t.state == crate::turn::TurnState::Delivered && crate::turn::is_settled(t))
                && request.task_ids.iter().all(|t| !sealed.contains(&t))
                && !jobs.iter().any(|j| {
                    j.options.group.as_deref() == Some(name)
                        && j.chat_key() == chat
                        && !request.task_ids.contains(&j.task_id)
                        && !super::settled_job(j, &turns_index)
                })
        };
        let late = !group_turns.is_empty()
            && (request.task_ids.iter().any(|t| !sealed.contains(&t))
                || sealed.iter().any(|t| !request.task_ids.contains(t)))
            && !new_round();
        if late {
            return Err(WatchRefused::GroupWentOut {
                group: name.to_owned(),
            });
        }
    }
    let mut done = Vec::new();
    for task_id in &request.task_ids {
        let existing = jobs.iter().find(|j| j.task_id == *task_id);
        let turn = existing.and_then(turn_of);
        let target = &request.target_of(task_id);
        if request.origin == Origin::Auto
            && let Some(job) = existing
        {
            done.push(auto_existing(job, turn, request, target, task_id, now));
            if let Some(i) = jobs.iter().position(|j| j.task_id == *task_id) {
                jobs[i] = done.last().expect("just pushed").job().clone();
            }
            continue;
        }
        let mut fresh = Job::new(
            new_id(),
            task_id.clone(),
            base_url.clone(),
            target.clone(),
            now,
        );
        fresh.options = request.options.clone();
        fresh.origin = request.origin;
        fresh.chat_id = request.chat_id.clone();
        // The same task is the same child, whoever watches it: a session already known is
        // kept (with its chat) unless this watch names another.
        let asked = request
            .child_sessions
            .iter()
            .find(|(t, _)| t == task_id)
            .map(|(_, s)| s.clone());
        let known = existing.and_then(|j| j.child_session.clone());
        let mut taken_from = None;
        if let (Some(asked), Some(known)) = (&asked, &known)
            && asked != known
        {
            return Err(WatchRefused::OtherChildSession {
                task_id: task_id.clone(),
                known: known.clone(),
                asked: asked.clone(),
            });
        }
        if let Some(asked) = &asked
            && let Some(other) = jobs.iter().position(|j| {
                j.task_id != *task_id
                    && j.watch == Watch::Pending
                    && j.child_session.as_deref() == Some(asked.as_str())
                    && j.base_url == *base_url
                    && j.target.poll_agent() == target.poll_agent()
            })
        {
            // QwenPaw's own line (an automatic watch) is the fact: the other watch was
            // given this task's session, and forgets it. A person or a model is refused.
            if request.origin != Origin::Auto {
                return Err(WatchRefused::ChildSessionTaken {
                    task_id: task_id.clone(),
                    session: asked.clone(),
                    of: jobs[other].task_id.clone(),
                });
            }
            taken_from = Some(other);
        }
        fresh.child_session = asked.clone().or(known.clone());
        // A --session that is the child's own (a model taking the [SESSION: …] line for
        // its own chat's) would post the result back to the child. The plugin's own watch
        // names the chat it ran in, and is never refused.
        if request.origin != Origin::Auto && fresh.into_own_child_chat() {
            return Err(WatchRefused::OwnChildSession {
                task_id: task_id.clone(),
                session: target.session_id.clone(),
            });
        }
        if fresh.child_session == known {
            fresh.child_chat_id = existing.and_then(|j| j.child_chat_id.clone());
            fresh.child_agent = existing.and_then(|j| j.child_agent.clone());
        }
        let registered = match register(existing, turn, target, base_url, group) {
            Registration::New => Registered::New(fresh),
            Registration::AlreadyWatching => {
                let job = existing.cloned().expect("a live record exists");
                let claimed = crate::turn::claimed(turn, &job.job_id);
                let (mut next, mut applied, not_applied) =
                    reoption(&job, &request.options, claimed);
                if asked.is_some() && asked != job.child_session {
                    next.child_session = asked;
                    next.child_chat_id = None;
                    next.child_agent = None;
                    applied.push("--child-session");
                }
                if applied.is_empty() && not_applied.is_empty() {
                    done.push(Registered::AlreadyWatching(job));
                    continue;
                }
                // The options it has now are the ones this watch gave (an automatic watch
                // the model's tool adjusts stays automatic: both speak the tools' words).
                if !applied.is_empty() {
                    next.origin = match (job.origin, request.origin) {
                        (Origin::Auto, Origin::Plugin) => Origin::Auto,
                        (_, asked) => asked,
                    };
                }
                if next != job {
                    next.updated_at = now;
                }
                Registered::Updated {
                    job: next,
                    applied,
                    not_applied,
                }
            }
            Registration::Replace { .. } if existing.is_some_and(|j| holds_result(j, turn)) => {
                let old = existing.cloned().expect("a record exists");
                let mut job = fresh;
                job.watch = Watch::Finished;
                job.final_text = old.final_text.clone();
                job.stopped_at = old.stopped_at;
                job.outcome = old.outcome;
                job.started_at = old.started_at;
                job.finished_at = old.finished_at;
                // What an empty answer came to was decided when it was rendered: a new
                // `--on-empty` cannot apply to it (it would skip an answer already kept
                // for delivery, or deliver one already skipped).
                let mut not_applied = Vec::new();
                if job.options.on_empty != old.options.on_empty {
                    job.options.on_empty = old.options.on_empty;
                    not_applied.push("--on-empty");
                }
                // The agent the child runs on is a fact its result proved (the poll that
                // found it finished asked that agent): a re-watch naming another keeps it,
                // or the child's own chat would be looked for on the wrong agent (a reply
                // woken there, in a delegation tree, would never go up).
                if job.target.poll_agent() != old.target.poll_agent() {
                    let on = old.target.poll_agent().to_owned();
                    job.target.target_agent = (on != job.target.agent_id).then_some(on);
                    not_applied.push("--target-agent");
                }
                Registered::Kept {
                    old: Box::new(old),
                    job,
                    not_applied,
                }
            }
            Registration::Replace { was, same_target } => {
                let old = existing.cloned().expect("a record exists");
                if !same_target && matches!(was, Status::Pending | Status::Delivering) {
                    Registered::Retargeted {
                        old: Box::new(old),
                        job: fresh,
                    }
                } else {
                    Registered::Rewatched { was, job: fresh }
                }
            }
            Registration::Refuse { was } => {
                let job = existing.cloned().expect("a refusal is about a record");
                return Err(WatchRefused::Task {
                    job: Box::new(job),
                    turn: turn.cloned().map(Box::new),
                    was,
                });
            }
        };
        if let Some(other) = taken_from {
            let wrong = &mut jobs[other];
            wrong.child_session = None;
            wrong.child_chat_id = None;
            wrong.child_agent = None;
            wrong.updated_at = now;
        }
        jobs.retain(|j| j.task_id != *task_id);
        jobs.push(registered.job().clone());
        done.push(registered);
    }
    Ok(done)
}

/// What an automatic watch does with the record the file holds for `task_id`: see
/// [`watch`].
fn auto_existing(
    job: &Job,
    turn: Option<&Turn>,
    request: &WatchRequest,
    target: &Target,
    task_id: &str,
    now: Timestamp,
) -> Registered {
    let same_chat = job.base_url == request.base_url
        && job.target.agent_id == target.agent_id
        && job.target.session_id == target.session_id
        && job.target.user_id == target.user_id
        && job.target.channel == target.channel;
    let shown = crate::status::status(job, turn);
    if !matches!(shown, Status::Pending | Status::Delivering) {
        return Registered::LeftAlone {
            job: job.clone(),
            why: LeftAlone::Ended(shown),
        };
    }
    if !same_chat {
        return Registered::LeftAlone {
            job: job.clone(),
            why: LeftAlone::OtherChat,
        };
    }
    let mut next = job.clone();
    let mut applied = Vec::new();
    // The session QwenPaw's `submit_to_agent` printed for this task is the child's: it
    // replaces one an earlier watch named (a model may pass another task's).
    if let Some((_, session)) = request.child_sessions.iter().find(|(t, _)| t == task_id)
        && next.child_session.as_deref() != Some(session.as_str())
    {
        next.child_session = Some(session.clone());
        next.child_chat_id = None;
        next.child_agent = None;
        next.stop_tries = 0;
        next.stop_error = None;
        applied.push("--child-session");
    }
    if next.target.target_agent.is_none() && target.target_agent.is_some() {
        next.target.target_agent = target.target_agent.clone();
        applied.push("--target-agent");
    }
    if applied.is_empty() {
        return Registered::AlreadyWatching(job.clone());
    }
    next.updated_at = now;
    Registered::Updated {
        job: next,
        applied,
        not_applied: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{ForwardMode, OnEmpty, OnNoAnswer};

    const ALL: [&str; 8] = [
        "--on-no-answer",
        "--on-empty",
        "--fork-branch",
        "--create-session",
        "--forward",
        "--allow-insecure-remote",
        "--check-in",
        "--stop-after",
    ];

    /// Every option other than the default a watch starts with.
    fn every_other() -> Options {
        Options {
            create_session: true,
            on_no_answer: OnNoAnswer::Silent,
            on_empty: OnEmpty::Skip,
            fork_branch: Some("b".into()),
            group: None,
            forward: ForwardMode::Never,
            allow_insecure_remote: true,
            stop_after_secs: Some(60),
            check_in_secs: Some(30),
        }
    }

    #[test]
    fn a_rewatch_takes_each_changed_flag_unless_its_result_is_rendered_or_its_turn_claimed() {
        let wanted = every_other();
        let pending = Job::sample(Watch::Pending);
        // Running, turn open: every flag is taken.
        let (next, applied, not_applied) = reoption(&pending, &wanted, false);
        assert_eq!((applied, not_applied), (ALL.to_vec(), vec![]));
        assert_eq!(next.options, wanted);
        // The same flags again: nothing changed, nothing named.
        let (same, applied, not_applied) = reoption(&next, &wanted, false);
        assert!(applied.is_empty() && not_applied.is_empty());
        assert_eq!(same.options, wanted);
        // Every flag left out: a switch or a duration is off, a named value is the default.
        let (back, applied, _) = reoption(&next, &Options::default(), false);
        assert_eq!(
            applied,
            [
                "--on-no-answer",
                "--on-empty",
                "no --fork-branch",
                "no --create-session",
                "--forward",
                "no --allow-insecure-remote",
                "no --check-in",
                "no --stop-after",
            ]
        );
        assert_eq!(back.options, Options::default());
        // Its result rendered: how it is rendered and when the child is checked on or
        // stopped is settled; where and how it is posted is not, until its turn is claimed.
        let rendered = Job::sample(Watch::Finished);
        let (next, applied, not_applied) = reoption(&rendered, &wanted, false);
        let posting = ["--create-session", "--forward", "--allow-insecure-remote"];
        assert_eq!(applied, posting);
        let frozen: Vec<_> = ALL.into_iter().filter(|f| !posting.contains(f)).collect();
        assert_eq!(not_applied, frozen);
        assert_eq!(next.options.on_empty, rendered.options.on_empty);
        assert_eq!(next.options.check_in_secs, rendered.options.check_in_secs);
        assert!(next.options.create_session && next.options.forward == ForwardMode::Never);
        // Its turn claimed too: only the token's permission is still taken.
        let (next, applied, not_applied) = reoption(&rendered, &wanted, true);
        assert_eq!(applied, ["--allow-insecure-remote"]);
        assert_eq!(not_applied.len(), ALL.len() - 1);
        assert!(!next.options.create_session && next.options.forward == ForwardMode::Auto);
        // Claimed while still running (a check-in's turn): the child's options are taken.
        let (_, applied, not_applied) = reoption(&pending, &wanted, true);
        assert_eq!(not_applied, ["--create-session", "--forward"]);
        assert_eq!(applied.len(), ALL.len() - 2);
    }
}
