//! The job file against the disk and against other users: faults (a directory that cannot
//! be made, a path that is not a readable file, a save that runs out of room), bad files
//! (empty, cut short at every byte, wrong types, newer, duplicated, unknown statuses) and
//! attacks (links planted in place of the job file, its directory or its sidecars, files
//! of other users, loose permissions, a permissive umask).
//!
//! Every refusal is one line, exits 3 (4 for what cannot be written) and leaves the job
//! file byte for byte as it was. Many of these need another user: as root (as in CI) the
//! tests make one by `chown`ing to uid 12345 or running atc as it; the few that cannot
//! work without root say so on stderr and skip.

use crate::support;

use std::fs;
use std::os::unix::fs::{FileTypeExt, PermissionsExt, chown, lchown, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;

use atc::exit::exit_for;
use atc::state::Store;
use serde_json::json;
use support::atc::{TestEnv, mode};

const TASKS: [&str; 3] = [
    "task-3f9a0c1b2d4e",
    "task-111111111111",
    "task-222222222222",
];
const OTHER: &str = "task-333333333333";
/// A user that is not us (nor root).
const STRANGER: u32 = 12345;

fn me() -> u32 {
    atc::state::guard::euid()
}

fn is_root() -> bool {
    me() == 0
}

fn skip(why: &str) {
    eprintln!("note: skipped: {why}");
}

fn set_mode(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A real job file of three watches, written by atc itself. Returns its bytes.
fn watched(env: &TestEnv) -> Vec<u8> {
    env.atc(["watch", TASKS[0], TASKS[1], TASKS[2], "--session", "s"])
        .chat_check_skipped()
        .stdout_contains("Watching")
        .run();
    env.bytes()
}

/// `atc watch OTHER`: a command that would write the job file.
fn watch_other(env: &TestEnv) -> support::atc::Run<'_> {
    env.atc(["watch", OTHER, "--session", "s"])
}

/// Refused with exit 3, `says` on stderr, the job file byte for byte as it was: by a
/// reader (`status`), a writer (`watch`) and a tick.
fn refused_everywhere(env: &TestEnv, says: &str) {
    env.atc(["status"])
        .status(3)
        .stderr(format!("atc: {says}\n"))
        .file_unchanged()
        .run();
    watch_other(env)
        .status(3)
        .stderr(format!("atc: {says}\n"))
        .file_unchanged()
        .run();
    env.atc(["tick"])
        .status(3)
        .stderr(format!("atc: {says}\n"))
        .file_unchanged()
        .run();
}

fn left_untouched(env: &TestEnv, problem: &str) -> String {
    format!(
        "the job file {} {problem}; it was left untouched: fix or move it aside (atc starts a new one where none exists)",
        env.state.display()
    )
}

// ---------------------------------------------------------------------------------------
// Disk faults

#[test]
fn a_directory_that_cannot_be_created_exits_4() {
    let env = TestEnv::new();
    let blocker = env.path("a-file");
    fs::write(&blocker, "not a directory").unwrap();
    let dir = blocker.join("state");
    let state = dir.join("jobs.json");
    env.atc(["--state", s(&state), "watch", TASKS[0], "--session", "s"])
        .judging(&state)
        .status(4)
        .stderr(format!(
            "atc: cannot create the job file's directory {}: Not a directory (os error 20); point --state (or ATC_STATE) at a place where it can be created\n",
            dir.display()
        ))
        .no_file()
        .run();
    env.atc(["--state", s(&state), "status"])
        .judging(&state)
        .status(3)
        .stderr(format!(
            "atc: cannot look at the job file's directory {}: Not a directory (os error 20); a file is where a directory should be: point --state (or ATC_STATE) elsewhere\n",
            dir.display()
        ))
        .no_file()
        .run();
    // The directory itself is a file: "in the way".
    let state = blocker.join("jobs.json");
    env.atc(["--state", s(&state), "watch", TASKS[0], "--session", "s"])
        .judging(&state)
        .status(4)
        .stderr(format!(
            "atc: cannot create the job file's directory {}: something that is not a directory is in the way; point --state (or ATC_STATE) at a place where it can be created\n",
            blocker.display()
        ))
        .no_file()
        .run();
    assert_eq!(fs::read(&blocker).unwrap(), b"not a directory");
}

#[test]
fn a_job_file_that_is_a_directory_exits_3() {
    let env = TestEnv::new();
    // `--state DIR` is a usage error, caught before anything is opened (tests/it/commands/cli.rs);
    // the default job file can still turn out to be a directory.
    let state = env.home.join(".local/state/atc/jobs.json");
    fs::create_dir_all(&state).unwrap();
    set_mode(state.parent().unwrap(), 0o700);
    fs::write(state.join("keep"), "x").unwrap();
    let says = format!(
        "atc: the job file {} is a directory, not a file; point --state (or ATC_STATE) at a file (for example {}/jobs.json)\n",
        state.display(),
        state.display()
    );
    for args in [
        vec!["status"],
        vec!["watch", TASKS[0], "--session", "s"],
        vec!["tick"],
    ] {
        env.atc_default_state(args)
            .status(3)
            .stderr(&says)
            .file_unchanged()
            .run();
    }
    let names: Vec<_> = fs::read_dir(&state).unwrap().collect();
    assert_eq!(names.len(), 1, "nothing was created inside it");
}

#[test]
fn a_job_file_that_is_a_fifo_exits_3_without_opening_it() {
    let env = TestEnv::new();
    let dir = env.state.parent().unwrap();
    fs::create_dir_all(dir).unwrap();
    set_mode(dir, 0o700);
    let fifo = dir.join("fifo.json");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    set_mode(&fifo, 0o600);
    let says = format!(
        "atc: the job file {} is a FIFO (named pipe), not a regular file; point --state (or ATC_STATE) at a regular file\n",
        fifo.display()
    );
    // Opening a FIFO blocks until a writer comes: were atc to open it, these would hang.
    // (The harness is judging the unused `env.state`, for it would block reading a FIFO.)
    for args in [
        vec!["status"],
        vec!["watch", TASKS[0], "--session", "s"],
        vec!["tick"],
    ] {
        env.atc(["--state", s(&fifo)].into_iter().chain(args))
            .status(3)
            .stderr(&says)
            .no_file()
            .run();
    }
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
}

/// Every directory from `path` up to / can be searched by any user (so another user can
/// run the binary at `path`).
fn reachable_by_anyone(path: &Path) -> bool {
    path.ancestors()
        .all(|p| fs::metadata(p).is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
}

/// Who the job file's owner is, for a test of what its owner may not do: as root (who
/// may do anything) the job directory and its files are handed to uid `STRANGER`, and
/// the test runs atc as that user; as anyone else, as ourselves. `Err` when the stranger
/// cannot run the binary.
fn owner(env: &TestEnv) -> Result<Option<u32>, String> {
    if !is_root() {
        return Ok(None);
    }
    let bin = assert_cmd::cargo::cargo_bin("atc");
    if !reachable_by_anyone(&bin) {
        return Err(format!("uid {STRANGER} cannot run {}", bin.display()));
    }
    set_mode(env.dir.path(), 0o755);
    set_mode(&env.home, 0o755);
    let dir = env.state.parent().unwrap();
    chown(dir, Some(STRANGER), Some(STRANGER)).unwrap();
    for entry in fs::read_dir(dir).unwrap() {
        chown(entry.unwrap().path(), Some(STRANGER), Some(STRANGER)).unwrap();
    }
    Ok(Some(STRANGER))
}

/// `run` as the job file's `owner`.
fn as_owner(run: support::atc::Run<'_>, owner: Option<u32>) -> support::atc::Run<'_> {
    match owner {
        Some(uid) => run.run_as(uid),
        None => run,
    }
}

#[test]
fn an_unreadable_job_file_exits_3() {
    let env = TestEnv::new();
    watched(&env);
    let says = format!(
        "atc: cannot read the job file {}: Permission denied (os error 13); check the permissions of the file and its directory, or point --state (or ATC_STATE) elsewhere\n",
        env.state.display()
    );
    // Root reads anything; a user who owns the file but may not read it cannot.
    let owner = match owner(&env) {
        Ok(owner) => owner,
        Err(why) => return skip(&why),
    };
    set_mode(&env.state, 0o000);
    as_owner(env.atc(["status"]), owner)
        .status(3)
        .stderr(&says)
        .file_unchanged()
        .run();
    as_owner(watch_other(&env), owner)
        .status(3)
        .stderr(&says)
        .file_unchanged()
        .run();
}

/// Doctor sees a job directory its owner may not write (a tick could not save there),
/// and only then.
#[test]
fn doctor_names_a_job_directory_a_tick_cannot_write() {
    let env = TestEnv::new();
    watched(&env);
    let dir = env.state.parent().unwrap().to_path_buf();
    let owner = match owner(&env) {
        Ok(owner) => owner,
        Err(why) => return skip(&why),
    };
    let doctor = || as_owner(env.atc(["doctor"]), owner).doctor_said(1);
    let said = doctor();
    assert!(
        said.contains("✓ tick saves: no unfinished tick\n"),
        "{said}"
    );
    set_mode(&dir, 0o500);
    let said = doctor();
    set_mode(&dir, 0o700);
    assert!(
        said.contains(&format!(
            "✗ tick saves: the job file's directory {0} is mode 500: a tick cannot save the job file there\n  → chmod 700 {0}\n",
            dir.display()
        )),
        "{said}"
    );
}

#[test]
fn a_save_past_the_file_size_limit_exits_4_and_keeps_the_old_file() {
    let env = TestEnv::new();
    let before = watched(&env);
    let log = fs::read(atc::state::journal::path(&env.state)).unwrap();
    assert!(
        before.len() > 1024,
        "the job file outgrows `ulimit -f 1` (512 or 1024 bytes)"
    );
    // No `trap '' XFSZ`: atc itself must not die of SIGXFSZ half way through its save.
    env.sh(&format!(
        "ulimit -f 1; exec \"$ATC\" watch {OTHER} --session s"
    ))
    .status(4)
    .stderr(format!(
        "atc: cannot write the job file {}: File too large (os error 27); the previous one was left whole: a file size limit was reached (`ulimit -f`): raise it and try again\n",
        env.state.display()
    ))
    .file_unchanged()
    .run();
    // (The harness also found no temp file left beside it.)
    assert_eq!(
        fs::read(atc::state::journal::path(&env.state)).unwrap(),
        log
    );
    watch_other(&env)
        .chat_check_skipped()
        .stdout_contains("Watching")
        .run();
    assert_eq!(env.jobs().len(), 4);
}

#[test]
fn a_tick_lock_that_cannot_be_written_says_what_to_do() {
    let env = TestEnv::new();
    watched(&env);
    let lock = env.state.with_file_name("jobs.json.tick.lock");
    env.sh("ulimit -f 0; exec \"$ATC\" tick")
        .status(4)
        .stderr(format!(
            "atc: cannot write {}: File too large (os error 27); a file size limit was reached (`ulimit -f`): raise it and try again\n",
            lock.display()
        ))
        .file_unchanged()
        .run();
}

// ---------------------------------------------------------------------------------------
// Bad files

#[test]
fn an_empty_job_file_is_refused_untouched() {
    let env = TestEnv::new();
    env.write_bytes(b"");
    refused_everywhere(&env, &left_untouched(&env, "is empty (0 bytes)"));
}

#[test]
fn a_job_file_cut_short_at_any_byte_is_refused_untouched() {
    let env = TestEnv::new();
    let whole = watched(&env);
    // Only the trailing newline may go: what is left is still the whole file.
    let complete = whole.trim_ascii_end().len();
    let store = Store::new(env.state.clone());
    // Every cut through the library (the binary maps the same error to its exit code)…
    for cut in 0..whole.len() {
        env.write_bytes(&whole[..cut]);
        let loaded = store.load();
        // …and through the locked update, which would save an emptied list if it let
        // anything through.
        let updated = store.update(|file| {
            file.jobs.clear();
            Ok(())
        });
        if cut >= complete {
            assert_eq!(loaded.unwrap().jobs.len(), 3, "cut at {cut}");
            assert!(updated.is_ok(), "cut at {cut}");
            continue;
        }
        for err in [loaded.unwrap_err(), updated.unwrap_err()] {
            assert_eq!(exit_for(&err).code(), 3, "cut at {cut}: {err:#}");
            let said = format!("{err:#}");
            assert!(
                said.contains("it was left untouched") && !said.contains('\n'),
                "cut at {cut}: {said}"
            );
        }
        assert_eq!(fs::read(&env.state).unwrap(), &whole[..cut], "cut at {cut}");
    }
    // …and the real binary on a sample (a process per cut would cost seconds).
    for cut in [
        0,
        1,
        2,
        complete / 3,
        complete / 2,
        complete - 2,
        complete - 1,
    ] {
        env.write_bytes(&whole[..cut]);
        env.atc(["status"])
            .status(3)
            .stderr_contains(format!("atc: the job file {} is ", env.state.display()))
            .stderr_contains("it was left untouched")
            .file_unchanged()
            .run();
        watch_other(&env)
            .status(3)
            .stderr_contains("it was left untouched")
            .file_unchanged()
            .run();
    }
}

#[test]
fn wrong_types_are_refused_untouched() {
    let env = TestEnv::new();
    watched(&env);
    let good = env.file();
    let mut bad_task = good.clone();
    bad_task["jobs"][0]["task_id"] = json!(5);
    let mut no_jobs = good.clone();
    no_jobs.as_object_mut().unwrap().remove("jobs");
    for (file, says) in [
        (json!([]), "has no \"version\" field".to_owned()),
        (json!("jobs"), "has no \"version\" field".to_owned()),
        (
            json!({"version": "1", "jobs": []}),
            "has an unsupported version \"1\"".to_owned(),
        ),
        (
            json!({"version": 1.5, "jobs": []}),
            "has an unsupported version 1.5".to_owned(),
        ),
        (
            json!({"version": 2, "jobs": {}}),
            "does not match the v2 schema (invalid type: map, expected a sequence)".to_owned(),
        ),
        (
            bad_task,
            // Schema errors name the job and the field.
            format!(
                "does not match the v2 schema: job {} field \"task_id\": invalid type: integer `5`, expected a string",
                good["jobs"][0]["job_id"].as_str().unwrap()
            ),
        ),
        (
            no_jobs,
            "does not match the v2 schema (missing field `jobs`)".to_owned(),
        ),
    ] {
        env.write_file(&file);
        refused_everywhere(&env, &left_untouched(&env, &says));
    }
}

#[test]
fn a_newer_version_says_only_upgrade_atc() {
    let env = TestEnv::new();
    watched(&env);
    let mut newer = env.file();
    newer["version"] = json!(3);
    newer["something_new"] = json!({"a": 1});
    env.write_file(&newer);
    refused_everywhere(
        &env,
        &format!(
            "the job file {} has version 3, newer than this atc understands (2); it was left untouched: upgrade atc to read it",
            env.state.display()
        ),
    );
}

/// Job file version 1 was written only by development builds before 0.2; no release
/// reads it. It is refused as any version atc does not read, saying what to do instead.
#[test]
fn a_version_1_file_is_refused_untouched_saying_which_build_wrote_it() {
    let env = TestEnv::new();
    let mut job = support::atc::job(TASKS[0], "delivering", support::hermetic::NOWHERE);
    job["final"] = json!("the answer");
    job["delivery"] =
        json!({"attempts": 1, "busy": 0, "attempt_started_at": "2026-11-30T20:15:03Z"});
    env.write_file(&json!({"version": 1, "jobs": [job]}));
    refused_everywhere(
        &env,
        &format!(
            "the job file {} was written by a development build of atc before 0.2 (job file version 1), which no release reads; it was left untouched: move it away and watch the pending tasks again",
            env.state.display()
        ),
    );
}

#[test]
fn two_jobs_for_one_task_are_refused_naming_the_task() {
    let env = TestEnv::new();
    watched(&env);
    let good = env.file();
    let mut twice = good.clone();
    let mut again = twice["jobs"][0].clone();
    again["job_id"] = json!("0123456789ab");
    twice["jobs"].as_array_mut().unwrap().push(again);
    env.write_file(&twice);
    refused_everywhere(
        &env,
        &left_untouched(
            &env,
            &format!(
                "has two jobs for task {} (there must be one per task)",
                TASKS[0]
            ),
        ),
    );
    // Two registrations sharing a job id would take each other's late writes.
    let mut shared = good.clone();
    let job_id = shared["jobs"][0]["job_id"].clone();
    shared["jobs"][2]["job_id"] = job_id.clone();
    env.write_file(&shared);
    refused_everywhere(
        &env,
        &left_untouched(
            &env,
            &format!(
                "has two jobs with job id {} (job ids are unique)",
                job_id.as_str().unwrap()
            ),
        ),
    );
}

#[test]
fn a_job_with_an_unknown_status_is_refused() {
    let env = TestEnv::new();
    watched(&env);
    let mut file = env.file();
    file["jobs"][1]["status"] = json!("exploded");
    env.write_file(&file);
    for run in [env.atc(["status"]), watch_other(&env), env.atc(["tick"])] {
        run.status(3)
            .stderr_contains(format!(
                "atc: the job file {} does not match the v2 schema: job {} (task {}) field \"status\": unknown variant `exploded`, expected one of",
                env.state.display(),
                file["jobs"][1]["job_id"].as_str().unwrap(),
                file["jobs"][1]["task_id"].as_str().unwrap()
            ))
            .stderr_contains("it was left untouched")
            .file_unchanged()
            .run();
    }
}

// ---------------------------------------------------------------------------------------
// Filesystem attacks

#[test]
fn a_job_file_that_is_a_symlink_is_refused_and_not_followed() {
    let env = TestEnv::new();
    let real = env.path("real/jobs.json");
    env.atc(["--state", s(&real), "watch", TASKS[0], "--session", "s"])
        .judging(&real)
        .chat_check_skipped()
        .stdout_contains("Watching")
        .run();
    let dir = env.state.parent().unwrap();
    fs::create_dir_all(dir).unwrap();
    set_mode(dir, 0o700);
    symlink(&real, &env.state).unwrap();
    // (The harness reads through the link: the real file must stay byte for byte.)
    refused_everywhere(
        &env,
        &format!(
            "the job file {} is a symbolic link (to {}): atc replaces its job file atomically, renaming a new file over it, which would replace the link and not the file it points to; point --state (or ATC_STATE) at the real file",
            env.state.display(),
            real.display()
        ),
    );
    assert!(
        fs::symlink_metadata(&env.state)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // A dangling link is not followed to create its target either.
    let target = env.path("created-through-the-link");
    fs::remove_file(&env.state).unwrap();
    symlink(&target, &env.state).unwrap();
    watch_other(&env)
        .status(3)
        .stderr_contains("is a symbolic link")
        .run();
    assert!(!target.exists());
}

#[test]
fn links_planted_beside_the_job_file_are_refused_and_not_followed() {
    let env = TestEnv::new();
    watched(&env);
    let victim = env.path("victim");
    fs::write(&victim, "precious").unwrap();
    for (suffix, role, run) in [
        ("lock", "the lock file", "watch"),
        ("log", "the event log", "watch"),
        ("tick.lock", "the lock file", "tick"),
        ("log", "the event log", "log"),
    ] {
        let planted = env.state.with_file_name(format!("jobs.json.{suffix}"));
        let _ = fs::remove_file(&planted);
        symlink(&victim, &planted).unwrap();
        let cmd = match run {
            "watch" => watch_other(&env),
            other => env.atc([other]),
        };
        cmd.status(3)
            .stderr(format!(
                "atc: {role} {} is a symbolic link (to {}): atc never follows a link beside its job file, where someone could aim it at another file; move it aside (atc creates its own)\n",
                planted.display(),
                victim.display()
            ))
            .file_unchanged()
            .run();
        assert_eq!(fs::read(&victim).unwrap(), b"precious", "{suffix}");
        assert!(
            fs::symlink_metadata(&planted)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        fs::remove_file(&planted).unwrap();
    }
    assert_eq!(env.jobs().len(), 3);
}

#[test]
fn a_directory_link_is_followed_only_when_it_is_yours() {
    let env = TestEnv::new();
    let real = env.path("real");
    fs::create_dir(&real).unwrap();
    set_mode(&real, 0o700);
    let link = env.state.parent().unwrap();
    symlink(&real, link).unwrap();
    watch_other(&env)
        .chat_check_skipped()
        .stdout_contains("Watching")
        .run();
    assert!(
        real.join("jobs.json").is_file(),
        "written through our own link"
    );
    // Followed, the real directory must pass the checks itself.
    set_mode(&real, 0o777);
    env.atc(["status"])
        .status(3)
        .stderr(format!(
            "atc: the job file's directory {} is writable by group and others (mode 777) and not sticky: they could replace the job file; `chmod 700 {}` (or keep the job file in a private directory)\n",
            link.display(),
            link.display()
        ))
        .run();
    set_mode(&real, 0o700);
    if !is_root() {
        return skip("a link owned by another user needs root to make (lchown)");
    }
    // A link planted by someone else (in /tmp it is theirs) is refused.
    lchown(link, Some(STRANGER), Some(STRANGER)).unwrap();
    let says = format!(
        "atc: the job file's directory {} is a symbolic link owned by uid {STRANGER}, not by you (uid 0): someone else may have planted it to capture your jobs; point --state (or ATC_STATE) at a directory of your own\n",
        link.display()
    );
    env.atc(["status"])
        .status(3)
        .stderr(&says)
        .file_unchanged()
        .run();
    watch_other(&env)
        .status(3)
        .stderr(&says)
        .file_unchanged()
        .run();
}

#[test]
fn a_job_file_or_directory_of_another_user_is_refused() {
    if !is_root() {
        // A root-owned file is another user's file too.
        let passwd = Path::new("/etc/passwd");
        TestEnv::new()
            .atc(["--state", s(passwd), "status"])
            .judging(passwd)
            .status(3)
            .stderr(format!(
                "atc: the job file /etc/passwd is owned by uid 0, not by you (uid {}): atc only uses a job file of your own; if this one should be yours, `sudo chown {} /etc/passwd`, otherwise point --state (or ATC_STATE) elsewhere\n",
                me(),
                me()
            ))
            .file_unchanged()
            .run();
        return skip("a directory of another user needs root to make (chown)");
    }
    let env = TestEnv::new();
    watched(&env);
    chown(&env.state, Some(STRANGER), None).unwrap();
    refused_everywhere(
        &env,
        &format!(
            "the job file {} is owned by uid {STRANGER}, not by you (uid 0): atc only uses a job file of your own; if this one should be yours, `sudo chown 0 {}`, otherwise point --state (or ATC_STATE) elsewhere",
            env.state.display(),
            env.state.display()
        ),
    );
    chown(&env.state, Some(0), None).unwrap();
    let dir = env.state.parent().unwrap();
    chown(dir, Some(STRANGER), None).unwrap();
    refused_everywhere(
        &env,
        &format!(
            "the job file's directory {} is owned by uid {STRANGER}, not by you (uid 0) or root: its owner can replace your job file; keep the job file in a directory of your own (point --state or ATC_STATE there)",
            dir.display()
        ),
    );
    // A sidecar someone else left there is not used either.
    chown(dir, Some(0), None).unwrap();
    let lock = env.state.with_file_name("jobs.json.lock");
    chown(&lock, Some(STRANGER), None).unwrap();
    watch_other(&env)
        .status(3)
        .stderr(format!(
            "atc: the lock file {} is owned by uid {STRANGER}, not by you (uid 0): someone else may have planted it; move it aside (atc creates its own)\n",
            lock.display()
        ))
        .file_unchanged()
        .run();
}

#[test]
fn a_job_file_writable_by_others_is_refused_with_the_chmod_fix() {
    let env = TestEnv::new();
    watched(&env);
    for (mode_bits, who) in [
        (0o620, "its group"),
        (0o602, "others"),
        (0o666, "group and others"),
    ] {
        set_mode(&env.state, mode_bits);
        refused_everywhere(
            &env,
            &format!(
                "the job file {} is writable by {who} (mode {mode_bits:o}): whoever can write it can send results into other chats; make it private with `chmod 600 {}`",
                env.state.display(),
                env.state.display()
            ),
        );
        assert_eq!(mode(&env.state), mode_bits, "refused, not changed");
    }
}

#[test]
fn a_job_file_readable_by_others_is_made_private_with_one_warning() {
    let env = TestEnv::new();
    watched(&env);
    let warning = |mode_bits: u32, who: &str| {
        format!(
            "atc: warning: the job file {} was readable by {who} (mode {mode_bits:o}), and it holds session ids and answers: atc has made it private (0600)\n",
            env.state.display()
        )
    };
    // Reading does not write: `status` says nothing (doctor reports it).
    set_mode(&env.state, 0o644);
    env.atc(["status"]).stdout_contains(TASKS[0]).run();
    assert_eq!(mode(&env.state), 0o644);
    // A locked update saves it private, even when it changes nothing else.
    let before = env.bytes();
    let out = env
        .atc(["watch", TASKS[0], "--session", "s"])
        .stdout_contains("Already watching")
        .chat_check_skipped()
        .stderr_contains(warning(0o644, "group and others"))
        .run();
    assert_eq!(support::atc::stderr(&out).matches("readable by").count(), 1);
    assert_eq!(mode(&env.state), 0o600);
    assert_eq!(env.bytes(), before);
    // Once: the next update has nothing to say.
    env.atc(["cancel", TASKS[1]])
        .stdout_contains("Cancelled")
        .run();
    for (mode_bits, who, task) in [(0o640, "its group", TASKS[2]), (0o604, "others", TASKS[0])] {
        set_mode(&env.state, mode_bits);
        env.atc(["cancel", task])
            .stdout_contains("Cancelled")
            .stderr(warning(mode_bits, who))
            .run();
        assert_eq!(mode(&env.state), 0o600);
    }
}

#[test]
fn a_directory_writable_by_others_is_refused_unless_sticky() {
    let env = TestEnv::new();
    watched(&env);
    let dir = env.state.parent().unwrap();
    for (mode_bits, who) in [
        (0o770, "its group"),
        (0o707, "others"),
        (0o777, "group and others"),
    ] {
        set_mode(dir, mode_bits);
        refused_everywhere(
            &env,
            &format!(
                "the job file's directory {} is writable by {who} (mode {mode_bits:o}) and not sticky: they could replace the job file; `chmod 700 {}` (or keep the job file in a private directory)",
                dir.display(),
                dir.display()
            ),
        );
        assert_eq!(mode(dir), mode_bits, "never chmodded");
    }
    // Sticky, like /tmp: others cannot rename or remove our files there.
    set_mode(dir, 0o1777);
    watch_other(&env)
        .chat_check_skipped()
        .stdout_contains("Watching")
        .run();
    assert_eq!(
        fs::metadata(dir).unwrap().permissions().mode() & 0o7777,
        0o1777,
        "a directory atc did not create is never chmodded"
    );
}

#[test]
fn files_and_directories_are_private_under_a_permissive_umask() {
    let env = TestEnv::new();
    let state: PathBuf = env.path("new/deeper/jobs.json");
    env.sh(&format!(
        "umask 000; exec \"$ATC\" --state '{}' watch {} --session s",
        state.display(),
        TASKS[0]
    ))
    .judging(&state)
    .chat_check_skipped()
    .stdout_contains("Watching")
    .run();
    env.sh(&format!(
        "umask 000; exec \"$ATC\" --state '{}' tick",
        state.display()
    ))
    .judging(&state)
    .run();
    assert_eq!(mode(&env.path("new")), 0o700);
    assert_eq!(mode(&env.path("new/deeper")), 0o700);
    for name in [
        "jobs.json",
        "jobs.json.log",
        "jobs.json.lock",
        "jobs.json.tick.lock",
    ] {
        assert_eq!(mode(&state.with_file_name(name)), 0o600, "{name}");
    }
}

#[test]
fn doctor_shows_a_refused_job_file_as_a_failed_check() {
    let env = TestEnv::new();
    watched(&env);
    set_mode(&env.state, 0o666);
    let out = env
        .atc(["doctor"])
        .status(1)
        .stdout_inspected()
        .stderr_contains("checks failed")
        .file_unchanged()
        .run();
    let text = support::atc::stdout(&out);
    assert!(
        text.contains(&format!(
            "✗ job file: the job file {} is writable by group and others (mode 666)",
            env.state.display()
        )),
        "{text}"
    );
    // The checks of its watches cannot run: left out and said, never "✓ none" (found by
    // hand: "✓ watches: 0 tasks watched", "✓ deliveries: none stuck" of a file doctor
    // could not read).
    assert!(
        text.contains(
            "; until then no check of its watches (agents, watches, deliveries, give-ups) can run\n"
        ),
        "{text}"
    );
    for check in ["agents:", "watches:", "deliveries:", "give-ups:"] {
        assert!(
            !text
                .lines()
                .any(|l| l[l.find(' ').map_or(0, |i| i + 1)..].starts_with(check)),
            "{check} in {text}"
        );
    }
    assert!(text.contains("tick saves: "), "{text}");
    // Its tick is refused (exit 3), so the last pass did not finish: the fix names that.
    env.atc(["tick"])
        .status(3)
        .stderr_inspected()
        .file_unchanged()
        .run();
    let said = env.atc(["doctor"]).doctor_said(1);
    assert!(
        said.contains("or a full disk exits 4, a job file it cannot read 3\n"),
        "{said}"
    );
}

/// A file written by the build before the job kept only its watch and the turn its delivery
/// (issue 34), with a job in every delivery status and its turn: it loads, and `status`
/// shows each job as that build wrote it (derived again from the turns, not read back),
/// in the list, in `--json` and in a job's own view; the file is not rewritten by a look.
#[test]
fn a_file_written_before_the_status_projection_shows_the_same_statuses() {
    let env = TestEnv::new();
    let before: serde_json::Value =
        serde_json::from_str(include_str!("../../data/jobs.before-one-truth.json")).unwrap();
    env.write_file(&before);
    env.ticked_just_now();
    let bytes = env.bytes();
    let shown = env.atc(["status", "--all", "--json"]).json();
    let listed =
        String::from_utf8(env.atc(["status", "--all"]).stdout_inspected().run().stdout).unwrap();
    let words: Vec<&str> = before["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["status"].as_str().unwrap())
        .collect();
    for word in [
        "pending",
        "delivering",
        "done",
        "unconfirmed",
        "undelivered",
        "misrouted",
        "error",
        "lost",
        "expired",
        "cancelled",
        "skipped",
    ] {
        assert!(words.contains(&word), "the fixture has a {word} job");
    }
    for was in before["jobs"].as_array().unwrap() {
        let task = was["task_id"].as_str().unwrap();
        let now = shown["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["task_id"] == task)
            .unwrap_or_else(|| panic!("{task} in --json"));
        assert_eq!(now["status"], was["status"], "{task} in --json");
        assert_eq!(now.get("notice"), was.get("notice"), "{task}'s notice");
        let row = listed
            .lines()
            .find(|l| l.contains(task))
            .unwrap_or_else(|| panic!("{task} listed: {listed}"));
        let status = was["status"].as_str().unwrap();
        assert!(
            row.split_whitespace().nth(1) == Some(status),
            "{task} listed as {status}: {row}"
        );
        let own =
            String::from_utf8(env.atc(["status", task]).stdout_inspected().run().stdout).unwrap();
        assert!(
            own.lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["status", status]),
            "{task}'s own view says {status}: {own}"
        );
        if let Some(notice) = was["notice"].as_str() {
            assert!(
                own.lines()
                    .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["notice", notice]),
                "{task}'s own view says notice {notice}: {own}"
            );
        }
    }
    assert_eq!(env.bytes(), bytes, "a look leaves the file as it was");
}
