//! The job file: loading (refusing anything doubtful), atomic saving, and the locked
//! read-modify-write every command goes through.
//!
//! A corrupt file is never "started fresh" (the seed plugin did that and lost every job):
//! it is refused with exit 3 and left exactly as it was.

use std::collections::HashSet;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::fsutil::{self, parent_dir, write_atomic};
use super::guard::{self, Access, Opened, Role};
use super::lock;
use crate::exit::{Exit, Failure, OrExit};
use crate::job::{Job, Status};
use crate::job_file::JobFile;
use crate::time::Timestamp;
use crate::turn::{Block, BlockKind, Turn, TurnState};

use crate::job_file::VERSION;

/// How long a command waits for another atc process to finish its read-modify-write.
pub const LOCK_WAIT: Duration = Duration::from_secs(10);

/// Which version of a file is on disk, from its metadata alone: a save (a new inode), an
/// edit in place (mtime, size) or a chmod (ctime) all change it. Lets a process reuse what
/// it parsed, and a tick skip a file it already found settled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    ino: u64,
    dev: u64,
}

impl Fingerprint {
    pub fn of(meta: &fs::Metadata) -> Fingerprint {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Fingerprint {
                len: meta.len(),
                mtime: (meta.mtime(), meta.mtime_nsec()),
                ctime: (meta.ctime(), meta.ctime_nsec()),
                ino: meta.ino(),
                dev: meta.dev(),
            }
        }
        #[cfg(not(unix))]
        {
            let mtime = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or((0, 0), |d| {
                    (d.as_secs() as i64, i64::from(d.subsec_nanos()))
                });
            Fingerprint {
                len: meta.len(),
                mtime,
                ctime: (0, 0),
                ino: 0,
                dev: 0,
            }
        }
    }
}

/// A job file and its sidecar locks.
#[derive(Debug)]
pub struct Store {
    path: PathBuf,
    /// The last version this process read or wrote, with its fingerprint: an unchanged
    /// file is not parsed again (a tick reads the file in every phase).
    known: std::sync::Mutex<Option<(Fingerprint, JobFile)>>,
}

impl Clone for Store {
    fn clone(&self) -> Store {
        Store::new(self.path.clone())
    }
}

impl Store {
    pub fn new(path: PathBuf) -> Store {
        Store {
            path,
            known: std::sync::Mutex::new(None),
        }
    }

    /// The job file's fingerprint now, if it exists.
    pub fn fingerprint(&self) -> Option<Fingerprint> {
        fs::symlink_metadata(&self.path)
            .ok()
            .filter(fs::Metadata::is_file)
            .map(|m| Fingerprint::of(&m))
    }

    /// The fingerprint of the version this process last read or wrote (under the lock,
    /// for an update), whatever is on disk now: what a tick that found that version
    /// settled stamps, so that a save by another process since is a change to the next.
    pub fn known_fingerprint(&self) -> Option<Fingerprint> {
        self.known().as_ref().map(|(print, _)| *print)
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Option<(Fingerprint, JobFile)>> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `<job file>.lock`: held for every read-modify-write.
    pub fn lock_path(&self) -> PathBuf {
        lock::sidecar(&self.path, "lock")
    }

    /// `<job file>.tick.lock`: held for a whole tick (single flight).
    pub fn tick_lock_path(&self) -> PathBuf {
        lock::sidecar(&self.path, "tick.lock")
    }

    /// `<job file>.tick.again`: "one more pass, please", left by a kicked tick (or atc's
    /// QwenPaw plugin) that found another tick running. The running tick takes it after
    /// its pass and runs one more, so no turn's end is lost to the tick lock.
    pub fn tick_again_path(&self) -> PathBuf {
        lock::sidecar(&self.path, "tick.again")
    }

    /// `<job file>.cadence`: what atc's QwenPaw plugin last said about its cadence (it
    /// ticks, or stands by for a timer); `atc doctor` reads it.
    pub fn cadence_path(&self) -> PathBuf {
        lock::sidecar(&self.path, "cadence")
    }

    /// Leaves the mark (created 0600, the user's own, like every sidecar), adding `lines`:
    /// the turns that ended, one a line (`lifecycle::kick::Ended::to_mark`; the mark holds
    /// session ids, like the job file). A mark taken while the lines went in (renamed away
    /// by [`Store::take_tick_again`]) may have missed them: they go into a new one, so a
    /// turn's end is never lost to that race (at worst the running tick reads it twice).
    pub fn mark_tick_again(&self, lines: &str) -> Result<()> {
        use std::io::Write;
        self.ensure_dir()?;
        let path = self.tick_again_path();
        for _ in 0..3 {
            let mut file = guard::open_to_write(&path, Role::Lock, Access::Append)?;
            file.write_all(lines.as_bytes()).map_err(|err| {
                Failure::new(
                    Exit::StateUnwritable,
                    format!("cannot write the mark {}: {err}", path.display()),
                )
            })?;
            let written = file.metadata().ok().map(|m| Fingerprint::of(&m).ino);
            let there = fs::symlink_metadata(&path)
                .ok()
                .map(|m| Fingerprint::of(&m).ino);
            if written.is_some() && written == there {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Takes the mark: what it holds (the ended turns, one a line; empty from an older
    /// plugin or atc), or `None` when none was left. It is renamed away first, so a line
    /// added meanwhile goes into a new mark ([`Store::mark_tick_again`]). A mark atc would
    /// not trust (a link, another user's) is removed and taken as empty: a turn ended.
    pub fn take_tick_again(&self) -> Option<String> {
        let path = self.tick_again_path();
        let taken = lock::sidecar(
            &self.path,
            &format!("tick.again.taken-{}", std::process::id()),
        );
        fs::rename(&path, &taken).ok()?;
        let mut text = String::new();
        if let Ok(Some(mut opened)) = guard::open(&taken, Role::Lock, Access::Read) {
            let _ = opened.file.read_to_string(&mut text);
        }
        let _ = fs::remove_file(&taken);
        Some(text)
    }

    /// The single-flight lock of a tick, if no other tick holds it. Held until dropped.
    pub fn try_lock_tick(&self) -> Result<Option<lock::Guard>> {
        self.ensure_dir()?;
        lock::try_exclusive(&self.tick_lock_path())
    }

    /// Reads the file without locking (writes are atomic renames, so a reader always sees
    /// one whole version). A missing file is an empty job list.
    pub fn load(&self) -> Result<JobFile> {
        let (file, _, from) = self.read()?;
        match from {
            // What this process read or wrote last: a copy for the caller, the original kept.
            Source::Cache(print) => {
                let copy = file.clone();
                *self.known() = Some((print, file));
                Ok(copy)
            }
            Source::Disk(_) | Source::Nothing => Ok(file),
        }
    }

    /// Lets `see` look at the file as it is now, without locking or copying it (parsed
    /// only when it changed since this process last read it, and kept: a locked update
    /// right after does not parse it again).
    pub fn peek<R>(&self, see: impl FnOnce(&JobFile) -> R) -> Result<R> {
        let (file, _, from) = self.read()?;
        let seen = see(&file);
        if let Source::Cache(print) | Source::Disk(Some(print)) = from {
            *self.known() = Some((print, file));
        }
        Ok(seen)
    }

    /// Lets `see` look at the file as this process last read or wrote it, if it is still
    /// what is on disk (its fingerprint unchanged), without a copy: `None` otherwise.
    pub fn with_known<R>(&self, see: impl FnOnce(&JobFile) -> R) -> Option<R> {
        let print = self.fingerprint()?;
        let known = self.known();
        match known.as_ref() {
            Some((known, file)) if *known == print => Some(see(file)),
            _ => None,
        }
    }

    /// The file, and its mode when others can read it (`guard` checked everything else),
    /// and where it came from. The version this process last read or wrote is taken out
    /// of the cache (no parse, no copy; the caller puts it back); otherwise it is parsed.
    fn read(&self) -> Result<(JobFile, Option<u32>, Source)> {
        let Some(Opened { mut file, exposed }) =
            guard::open(&self.path, Role::JobFile, Access::Read)?
        else {
            *self.known() = None;
            return Ok((
                JobFile {
                    version: VERSION,
                    ..JobFile::default()
                },
                None,
                Source::Nothing,
            ));
        };
        let meta = file.metadata().ok();
        let print = meta.as_ref().map(Fingerprint::of);
        {
            let mut known = self.known();
            if let Some(print) = print
                && known.as_ref().is_some_and(|(seen, _)| *seen == print)
                && let Some((_, cached)) = known.take()
            {
                return Ok((cached, exposed, Source::Cache(print)));
            }
        }
        // Sized up front: growing a buffer for a large file copies it over and over.
        let size = meta.map_or(0, |m| m.len());
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0).saturating_add(1));
        file.read_to_end(&mut bytes)
            .or_exit(Exit::StateUnreadable, || {
                format!("cannot read the job file {}", self.path.display())
            })?;
        let parsed = parse(&bytes).map_err(|problem| {
            let advice = match problem.fix {
                Fix::Edit => {
                    "it was left untouched: fix or move it aside (atc starts a new one where none exists)"
                }
                Fix::Upgrade => "it was left untouched: upgrade atc to read it",
                Fix::Replace => {
                    "it was left untouched: move it away and watch the pending tasks again"
                }
            };
            Failure::new(
                Exit::StateUnreadable,
                format!("the job file {} {}; {advice}", self.path.display(), problem.what),
            )
        })?;
        Ok((parsed, exposed, Source::Disk(print)))
    }

    /// Locks, loads, lets `change` edit the jobs, and saves if anything changed. A job
    /// file others could read is saved even unchanged: the save makes it private (0600).
    /// One copy of the file per update: `change` edits it, the original it is compared
    /// with stays in the cache (or becomes the cache, when it was parsed).
    pub fn update<T>(&self, change: impl FnOnce(&mut JobFile) -> Result<T>) -> Result<T> {
        self.ensure_dir()?;
        let _guard = lock::exclusive(&self.lock_path(), LOCK_WAIT)?;
        // The event log is appended after the save: a log atc would refuse then must
        // stop the update before it changes anything.
        guard::inspect(&super::journal::path(&self.path), Role::Log)?;
        let (original, exposed, from) = self.read()?;
        let mut file = original.clone();
        let result = change(&mut file);
        // With no file, `original` is an empty one: a change is anything added to it.
        let changed = result.is_ok() && file != original;
        // The original goes (back) into the cache: what is on disk is still it.
        *self.known() = match from {
            Source::Cache(print) | Source::Disk(Some(print)) => Some((print, original)),
            Source::Disk(None) | Source::Nothing => None,
        };
        let out = result?;
        if changed || exposed.is_some() {
            // Under the lock no other save is in progress: a temp file beside the job
            // file is a crashed writer's (never another user's, even as root in a sticky
            // directory).
            super::fsutil::remove_leftover_temps(&self.path, guard::euid());
            self.save(file)?;
        }
        if let Some(mode) = exposed {
            crate::term::say(&format!(
                "atc: warning: the job file {} was readable by {} (mode {mode:o}), and it holds session ids and answers: atc has made it private (0600)",
                self.path.display(),
                guard::readable_by(mode)
            ));
        }
        Ok(out)
    }

    /// Appends `entries` to the event log beside the job file, under the job-file lock.
    pub fn log(&self, entries: &[crate::report::LogEntry]) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        self.ensure_dir()?;
        let _guard = lock::exclusive(&self.lock_path(), LOCK_WAIT)?;
        super::journal::append(&self.path, entries)
    }

    /// Creates the job file's directory (0700) if it does not exist. Existing directories
    /// are left as they are (`--state /tmp/jobs.json` must not chmod /tmp); `guard`
    /// checks them whenever a file in them is opened.
    pub fn ensure_dir(&self) -> Result<()> {
        let dir = parent_dir(&self.path);
        if dir.is_dir() {
            return Ok(());
        }
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(dir).map_err(|err| {
            let why = if err.kind() == io::ErrorKind::AlreadyExists {
                "something that is not a directory is in the way".to_owned()
            } else {
                err.to_string()
            };
            Failure::new(
                Exit::StateUnwritable,
                format!(
                    "cannot create the job file's directory {}: {why}; point --state (or ATC_STATE) at a place where it can be created",
                    dir.display()
                ),
            )
            .into()
        })
    }

    /// Atomic save: a private temp file in the same directory, fsync, rename over the job
    /// file, fsync the directory. On any error the temp file is removed and the old file
    /// stays whole.
    /// Proves that `file` can be saved where the job file is (the directory writable, room
    /// for its bytes) without saving it: the same bytes into a temp file beside it, synced,
    /// then removed. For a step that must not start unless the save after it will succeed
    /// (the replacement of the seed plugin removes it between the two, under the lock).
    pub fn prove_save(&self, file: &JobFile) -> Result<()> {
        let mut bytes = serde_json::to_vec_pretty(file).context("serialising the job file")?;
        bytes.push(b'\n');
        let probe = self.path.with_file_name(format!(
            ".{}.probe-{}",
            self.path
                .file_name()
                .map_or("jobs.json".into(), |n| n.to_string_lossy()),
            std::process::id()
        ));
        let written = write_atomic(&probe, &bytes);
        let _ = std::fs::remove_file(&probe);
        written.map_err(|err| {
            anyhow::Error::from(Failure::new(
                Exit::StateUnwritable,
                format!(
                    "cannot write the job file {}: {err}; nothing was changed: {}",
                    self.path.display(),
                    fsutil::advice(&err)
                ),
            ))
        })
    }

    fn save(&self, mut file: JobFile) -> Result<()> {
        crate::status::show(&mut file.jobs, &file.turns);
        let mut bytes = serde_json::to_vec_pretty(&file).context("serialising the job file")?;
        bytes.push(b'\n');
        write_atomic(&self.path, &bytes).map_err(|err| {
            *self.known() = None;
            anyhow::Error::from(Failure::new(
                Exit::StateUnwritable,
                format!(
                    "cannot write the job file {}: {err}; the previous one was left whole: {}",
                    self.path.display(),
                    fsutil::advice(&err)
                ),
            ))
        })?;
        // Written under the lock: what is on disk now is exactly `file`.
        *self.known() = self.fingerprint().map(|print| (print, file));
        Ok(())
    }
}

/// Where `read` found the file.
enum Source {
    /// The cache of what this process last read or wrote, still what is on disk.
    Cache(Fingerprint),
    /// Parsed from disk (with its fingerprint, when it could be taken).
    Disk(Option<Fingerprint>),
    /// There is no file.
    Nothing,
}

/// Why some bytes are not a job file this atc can use.
#[derive(Debug)]
struct Problem {
    what: String,
    fix: Fix,
}

/// What a person can do about a file atc refuses.
#[derive(Debug, PartialEq)]
enum Fix {
    /// A bad field, a bad byte: fix the file or move it aside.
    Edit,
    /// Written by a newer atc: the fix is an upgrade, not an edit.
    Upgrade,
    /// Written by a development build no release reads: nothing to fix, start over.
    Replace,
}

impl From<String> for Problem {
    fn from(what: String) -> Problem {
        Problem {
            what,
            fix: Fix::Edit,
        }
    }
}

/// The job file in `bytes`, or why they are not one this atc can use.
fn parse(bytes: &[u8]) -> Result<JobFile, Problem> {
    if bytes.is_empty() {
        return Err("is empty (0 bytes)".to_owned().into());
    }
    // The common case in one pass: a sound file of this version straight into the jobs.
    // Anything doubtful takes the slow path below, which says what is wrong.
    if let Ok(file) = serde_json::from_slice::<JobFile>(bytes)
        && file.version == VERSION
    {
        return checked(unique(file)?).map(derived);
    }
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|err| {
        if err.is_eof() {
            format!("is truncated ({err})")
        } else {
            format!("is not valid JSON ({err})")
        }
    })?;
    let version = value
        .get("version")
        .ok_or_else(|| "has no \"version\" field".to_owned())?;
    match version.as_u64() {
        Some(2) => {}
        Some(1) => {
            return Err(Problem {
                what: "was written by a development build of atc before 0.2 (job file version 1), which no release reads".to_owned(),
                fix: Fix::Replace,
            });
        }
        Some(v) if v > u64::from(VERSION) => {
            return Err(Problem {
                what: format!("has version {v}, newer than this atc understands ({VERSION})"),
                fix: Fix::Upgrade,
            });
        }
        _ => return Err(format!("has an unsupported version {version}").into()),
    }
    if let Some(serde_json::Value::Array(jobs)) = value.get("jobs") {
        for (i, job) in jobs.iter().enumerate() {
            if let Err(err) = serde_json::from_value::<Job>(job.clone()) {
                let field = culprit::<Job>(job).map_or(String::new(), |f| format!(" field {f:?}:"));
                return Err(format!(
                    "does not match the v2 schema: {}{field} {err}",
                    name_of(i, job)
                )
                .into());
            }
        }
    }
    if let Some(serde_json::Value::Array(turns)) = value.get("turns") {
        for (i, turn) in turns.iter().enumerate() {
            if let Err(err) = serde_json::from_value::<Turn>(turn.clone()) {
                let id = turn
                    .get("turn_id")
                    .and_then(serde_json::Value::as_str)
                    .filter(|id| crate::validate::label(id).is_ok())
                    .map_or(format!("the turn at position {}", i + 1), |id| {
                        format!("turn {id}")
                    });
                let field =
                    culprit::<Turn>(turn).map_or(String::new(), |f| format!(" field {f:?}:"));
                return Err(format!("does not match the v2 schema: {id}{field} {err}").into());
            }
        }
    }
    let file: JobFile = serde_json::from_value(value)
        .map_err(|err| format!("does not match the v2 schema ({err})"))?;
    checked(unique(file)?).map(derived)
}

/// The file as the decisions read it: where each watch stands, rebuilt from the words it
/// shows (`status::rebuild`); a delivery's standing is its turn's. A finished child's
/// result the file calls settled (done, unconfirmed, given up) with no turn that carries
/// it (an edit by hand) gets a turn that says so: a result is never posted again because
/// its record was lost.
fn derived(mut file: JobFile) -> JobFile {
    crate::status::rebuild(&mut file.jobs);
    let carried: HashSet<(&str, &str)> = file
        .turns
        .iter()
        .flat_map(|t| {
            t.carries
                .iter()
                .map(move |b| (t.turn_id.as_str(), b.job_id.as_str()))
        })
        .collect();
    let orphans: Vec<usize> = file
        .jobs
        .iter()
        .enumerate()
        .filter(|(_, job)| {
            job.shown.is_result()
                && job.shown != Status::Delivering
                && !job
                    .turn
                    .as_deref()
                    .is_some_and(|id| carried.contains(&(id, job.job_id.as_str())))
        })
        .map(|(i, _)| i)
        .collect();
    for i in orphans {
        let job = &file.jobs[i];
        let turn = settled_without_record(job, job.shown, |id| file.turn(id).is_some());
        file.jobs[i].turn = Some(turn.turn_id.clone());
        file.turns.push(turn);
    }
    file
}

/// The turn a loaded job's result stands in when the file calls it settled (`shown`:
/// done, unconfirmed, undelivered, misrouted, error) but no turn record carries it (an edit
/// by hand): settled as the file says, with its text, its read-back long closed. Nothing
/// of it is posted again unless a person asks (`atc redeliver`).
fn settled_without_record(
    job: &Job,
    shown: crate::job::Status,
    taken: impl Fn(&str) -> bool,
) -> Turn {
    let block = Block {
        job_id: job.job_id.clone(),
        task_id: job.task_id.clone(),
        kind: BlockKind::Result,
    };
    let mut turn = Turn::new(
        crate::turn::new_id(&block, taken),
        crate::lifecycle::compose::chat_of(job),
        job.updated_at,
    );
    turn.carries.push(block);
    turn.text.clone_from(&job.final_text);
    turn.forward_mode = job.options.forward;
    turn.create_session = job.options.create_session;
    turn.state = match shown {
        Status::Done => TurnState::Delivered,
        Status::Unconfirmed => TurnState::Unconfirmed,
        Status::Misrouted => TurnState::Misrouted,
        Status::Error => TurnState::Refused,
        _ => TurnState::Undelivered,
    };
    if turn.state != TurnState::Delivered {
        turn.delivery.unknown_since =
            (turn.state == TurnState::Unconfirmed).then(|| Timestamp::from_unix(0));
        turn.delivery.read_back_closed_at =
            (turn.state == TurnState::Unconfirmed).then_some(job.updated_at);
        turn.delivery.error = Some(format!(
            "the job file said {shown} with no turn record for it (edited by hand?); `atc redeliver {}` posts it again",
            job.task_id
        ));
    }
    turn
}

/// "job 3f9a… (task task-1)", or "the job at position 3" when its ids are unusable.
fn name_of(i: usize, job: &serde_json::Value) -> String {
    let id = |key: &str| {
        job.get(key)
            .and_then(serde_json::Value::as_str)
            .filter(|v| crate::validate::job_id(v).is_ok())
    };
    match (id("job_id"), id("task_id")) {
        (Some(job_id), Some(task_id)) => format!("job {job_id} (task {task_id})"),
        (Some(job_id), None) => format!("job {job_id}"),
        (None, Some(task_id)) => format!("the job for task {task_id}"),
        (None, None) => format!("the job at position {}", i + 1),
    }
}

/// The field that stops a job from loading: the one whose removal changes the error
/// (serde's own message names the expected type, not the field). Nested one level
/// (`delivery.attempts`).
fn culprit<T: serde::de::DeserializeOwned>(job: &serde_json::Value) -> Option<String> {
    let fails = |v: &serde_json::Value| serde_json::from_value::<T>(v.clone()).err();
    let first = fails(job)?.to_string();
    let fields = job.as_object()?;
    if let Some(missing) = first
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next())
        .filter(|name| !fields.contains_key(*name))
    {
        return Some(missing.to_owned());
    }
    for (key, inner) in fields {
        let mut without = job.clone();
        without.as_object_mut()?.remove(key);
        let after = fails(&without).map(|e| e.to_string());
        if after.as_deref() == Some(first.as_str()) {
            continue;
        }
        if let Some(inner) = inner.as_object() {
            for sub in inner.keys() {
                let mut less = job.clone();
                less[key].as_object_mut()?.remove(sub);
                if fails(&less).is_none_or(|e| e.to_string() != first) {
                    return Some(format!("{key}.{sub}"));
                }
            }
        }
        return Some(key.clone());
    }
    None
}

/// Every job's fields through the validators `watch` uses: a hand edit must not smuggle
/// a path into a URL (`../../etc`), credentials into the output, or a control character
/// onto a terminal. The problem names the job and the field, never a credential.
fn checked(file: JobFile) -> Result<JobFile, Problem> {
    use crate::validate;
    // The jobs of a file name a server or two: each base URL is checked once.
    let mut good_url: Option<&str> = None;
    for job in &file.jobs {
        let bad = |field: &str, why: String| -> Problem {
            let who = if validate::job_id(&job.job_id).is_ok() {
                format!("job {}", job.job_id)
            } else {
                "a job".to_owned()
            };
            let task = if crate::ids::stored_task_id(&job.task_id).is_ok() {
                format!(" (task {})", job.task_id)
            } else {
                String::new()
            };
            format!("has {who}{task} with a bad {field}: {why}").into()
        };
        validate::job_id(&job.job_id).map_err(|why| bad("job_id", why))?;
        crate::ids::stored_task_id(&job.task_id).map_err(|why| bad("task_id", why))?;
        if good_url != Some(job.base_url.as_str()) {
            validate::base_url(&job.base_url).map_err(|why| bad("base_url", why))?;
            good_url = Some(&job.base_url);
        }
        let t = &job.target;
        for (field, value) in [
            ("agent_id", Some(&t.agent_id)),
            ("target_agent", t.target_agent.as_ref()),
            ("session_id", Some(&t.session_id)),
            ("user_id", Some(&t.user_id)),
            ("channel", Some(&t.channel)),
            ("group", job.options.group.as_ref()),
            ("fork_branch", job.options.fork_branch.as_ref()),
            ("child_session", job.child_session.as_ref()),
            ("child_chat_id", job.child_chat_id.as_ref()),
            ("child_agent", job.child_agent.as_ref()),
        ] {
            if let Some(value) = value {
                validate::label(value).map_err(|why| bad(field, why))?;
            }
        }
        if let Some(turn) = &job.turn {
            validate::label(turn).map_err(|why| bad("turn", why))?;
        }
        for (field, at) in [
            ("registered_at", Some(job.registered_at)),
            ("updated_at", Some(job.updated_at)),
            ("started_at", job.started_at),
            ("stop_asked_at", job.stop_asked_at),
            ("stopped_at", job.stopped_at),
            ("last_check_in_at", job.last_check_in_at),
        ] {
            if let Some(at) = at {
                validate::timestamp(at).map_err(|why| bad(field, why))?;
            }
        }
    }
    for turn in &file.turns {
        let bad = |field: &str, why: String| -> Problem {
            let who = if validate::label(&turn.turn_id).is_ok() {
                format!("turn {}", turn.turn_id)
            } else {
                "a turn".to_owned()
            };
            format!("has {who} with a bad {field}: {why}").into()
        };
        validate::label(&turn.turn_id).map_err(|why| bad("turn_id", why))?;
        if good_url != Some(turn.chat.base_url.as_str()) {
            validate::base_url(&turn.chat.base_url).map_err(|why| bad("base_url", why))?;
            good_url = Some(&turn.chat.base_url);
        }
        let c = &turn.chat;
        for (field, value) in [
            ("agent_id", Some(&c.agent_id)),
            ("session_id", Some(&c.session_id)),
            ("user_id", Some(&c.user_id)),
            ("channel", Some(&c.channel)),
            ("group", turn.group.as_ref()),
            ("chat_id", turn.chat_id.as_ref()),
        ] {
            if let Some(value) = value {
                validate::label(value).map_err(|why| bad(field, why))?;
            }
        }
        for block in &turn.carries {
            validate::job_id(&block.job_id).map_err(|why| bad("carries.job_id", why))?;
            crate::ids::stored_task_id(&block.task_id)
                .map_err(|why| bad("carries.task_id", why))?;
        }
        for (field, at) in [
            ("created_at", Some(turn.created_at)),
            ("updated_at", Some(turn.updated_at)),
            ("delivered_at", turn.delivered_at),
        ] {
            if let Some(at) = at {
                validate::timestamp(at).map_err(|why| bad(field, why))?;
            }
        }
    }
    for (i, record) in file.give_ups.iter().enumerate() {
        let bad = |field: &str, why: String| -> Problem {
            format!("has a bad {field} in give-up {} of give_ups: {why}", i + 1).into()
        };
        for task in std::iter::once(&record.task_id).chain(&record.with) {
            crate::ids::stored_task_id(task).map_err(|why| bad("task_id", why))?;
        }
        // The line goes to a person's stderr as it is: no control characters.
        if record.line.chars().any(char::is_control) || record.line.len() > 64 * 1024 {
            return Err(bad("line", "control characters or over 64 KiB".to_owned()));
        }
        for at in std::iter::once(record.at).chain(record.said_at) {
            validate::timestamp(at).map_err(|why| bad("timestamp", why))?;
        }
    }
    for (i, chat) in file.kick_chats.iter().enumerate() {
        let bad = |field: &str, why: String| -> Problem {
            format!("has a bad {field} in chat {} of kick_chats: {why}", i + 1).into()
        };
        validate::label(&chat.agent_id).map_err(|why| bad("agent_id", why))?;
        validate::label(&chat.session_id).map_err(|why| bad("session_id", why))?;
        validate::timestamp(chat.at).map_err(|why| bad("at", why))?;
    }
    Ok(file)
}

/// The file, if each task and each job id has one record.
fn unique(file: JobFile) -> Result<JobFile, Problem> {
    // Every lookup goes by task id (and every late write by job id): with two records
    // for one, which of them a tick would change is an accident of their order.
    let (mut tasks, mut registrations) = (HashSet::new(), HashSet::new());
    for job in &file.jobs {
        if !tasks.insert(job.task_id.as_str()) {
            return Err(format!(
                "has two jobs for task {} (there must be one per task)",
                job.task_id
            )
            .into());
        }
        if !registrations.insert(job.job_id.as_str()) {
            return Err(format!(
                "has two jobs with job id {} (job ids are unique)",
                job.job_id
            )
            .into());
        }
    }
    let mut turns = HashSet::new();
    for turn in &file.turns {
        if !turns.insert(turn.turn_id.as_str()) {
            return Err(format!(
                "has two turns with turn id {} (turn ids are unique)",
                turn.turn_id
            )
            .into());
        }
    }
    Ok(file)
}

#[cfg(test)]
mod tests;
