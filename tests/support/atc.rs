//! Running the real `atc` binary in a hermetic environment, and the job file it leaves.
//!
//! [`TestEnv`] is one installation: its own HOME, XDG dirs and job file, the base URL
//! pointing where nothing listens. [`Run`] is one invocation, in the manner of `just`'s
//! `Test` builder: it expects exit 0, **empty stdout and empty stderr** unless told
//! otherwise, and checks the job file afterwards (a failing command must leave it byte
//! for byte as it was; a succeeding one must leave valid, private JSON). It runs when
//! dropped, or on `.run()`, which also hands back the output.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;
use tempfile::TempDir;

use super::hermetic;

pub struct TestEnv {
    pub dir: TempDir,
    pub home: PathBuf,
    /// The job file every `atc()` uses (through `ATC_STATE`).
    pub state: PathBuf,
}

impl Default for TestEnv {
    fn default() -> Self {
        Self::new()
    }
}

impl TestEnv {
    pub fn new() -> TestEnv {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let state = dir.path().join("state").join("jobs.json");
        TestEnv { dir, home, state }
    }

    /// `atc ARGS…` with `ATC_STATE` pointing at this env's job file.
    pub fn atc<I, S>(&self, args: I) -> Run<'_>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let mut run = Run::new(self, self.state.clone());
        run.cmd.env("ATC_STATE", &self.state);
        run.args(args)
    }

    /// `atc ARGS…` with no `ATC_STATE`: the default job file in this env's HOME.
    pub fn atc_default_state<I, S>(&self, args: I) -> Run<'_>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let default = self.home.join(".local/state/atc/jobs.json");
        Run::new(self, default).args(args)
    }

    /// A plain `std::process::Command` in this environment, for tests that start many
    /// processes at once and check each one's output themselves.
    pub fn std_cmd(&self) -> Command {
        let mut cmd = base_command(&self.home);
        cmd.env("ATC_STATE", &self.state);
        cmd
    }

    /// What `atc ARGS` (words split by the shell) writes on a pseudo-terminal `window`
    /// columns wide (`script -qec … /dev/null`, sized by `stty`), in this environment with
    /// `vars` added and COLUMNS set to `columns` or unset: its lines, without their `\r`.
    /// `None` only where `script` is not installed; a failing atc fails the test.
    pub fn on_a_terminal(
        &self,
        window: usize,
        columns: Option<&str>,
        vars: &[(&str, &str)],
        args: &str,
    ) -> Option<Vec<String>> {
        let mut script = Command::new("script");
        script.env_clear();
        for (k, v) in self.std_cmd().get_envs() {
            if let Some(v) = v {
                script.env(k, v);
            }
        }
        script.envs(vars.iter().copied());
        // Set as atc starts: the shell that `script` runs sets COLUMNS to the window's
        // width after each command (bash's checkwinsize).
        let columns = columns.map_or("-u COLUMNS".to_owned(), |c| format!("COLUMNS={c}"));
        let command = format!(
            "stty cols {window} rows 24; exec env {columns} {} {args}",
            assert_cmd::cargo::cargo_bin("atc").display()
        );
        let out = match script.args(["-qec", &command, "/dev/null"]).output() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            out => out.expect("script runs"),
        };
        assert!(out.status.success(), "atc {args} on a terminal: {out:?}");
        Some(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(|l| l.trim_end_matches('\r').to_owned())
                .collect(),
        )
    }

    /// The events `atc log ARGS --json` lists, oldest first, each without its time (`at`).
    pub fn logged(&self, args: &[&str]) -> Vec<Value> {
        let log = self.atc(["log"]).args(args).args(["--json"]).json();
        let Value::Array(events) = log["events"].clone() else {
            panic!("atc log --json lists no events: {log}");
        };
        events
            .into_iter()
            .map(|mut e| {
                e.as_object_mut()
                    .expect("an event is an object")
                    .remove("at");
                e
            })
            .collect()
    }

    /// The tasks of the `event` events `atc log` lists (its last 50), oldest first.
    pub fn logged_tasks(&self, event: &str) -> Vec<String> {
        self.logged(&[])
            .into_iter()
            .filter(|e| e["event"] == event)
            .map(|e| e["task_id"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    pub fn exists(&self) -> bool {
        self.state.exists()
    }

    pub fn bytes(&self) -> Vec<u8> {
        std::fs::read(&self.state).expect("job file")
    }

    /// The job file, parsed.
    pub fn file(&self) -> Value {
        serde_json::from_slice(&self.bytes()).expect("job file is JSON")
    }

    pub fn jobs(&self) -> Vec<Value> {
        self.file()["jobs"].as_array().expect("jobs array").clone()
    }

    /// The one job for `task_id`; panics unless there is exactly one.
    pub fn job(&self, task_id: &str) -> Value {
        let matching: Vec<Value> = self
            .jobs()
            .into_iter()
            .filter(|j| j["task_id"] == task_id)
            .collect();
        assert_eq!(matching.len(), 1, "jobs for {task_id}: {matching:#?}");
        matching[0].clone()
    }

    /// Writes the job file as atc would have: a new one private (0600), a new directory
    /// 0700, whatever the umask. An existing file keeps its mode.
    pub fn write_bytes(&self, bytes: &[u8]) {
        write_private(&self.state, bytes);
    }

    pub fn write_file(&self, value: &Value) {
        self.write_bytes(serde_json::to_string_pretty(value).unwrap().as_bytes());
    }

    /// Leaves what a timer's tick that ran just now leaves in the tick lock (the
    /// heartbeat `atc status` and `atc doctor` read), where a test's watches were written
    /// as registered long ago and no tick ran.
    #[allow(dead_code)]
    pub fn ticked_just_now(&self) {
        let now = atc::time::Timestamp::now().to_string();
        write_private(
            &self.state.with_extension("json.tick.lock"),
            format!(
                "{}\n",
                serde_json::json!({"last_tick_at": now, "last_unkicked_at": now, "finished": true, "finished_at": now})
            )
            .as_bytes(),
        );
    }

    /// Rewrites one job's fields in place (to put a job in a given state).
    pub fn edit_job(&self, task_id: &str, edit: impl FnOnce(&mut serde_json::Map<String, Value>)) {
        let mut file = self.file();
        let job = file["jobs"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|j| j["task_id"] == task_id)
            .expect("job to edit");
        edit(job.as_object_mut().unwrap());
        self.write_file(&file);
    }

    /// Makes every job and turn `secs` old (their times of registration, creation and
    /// last change): a watch that has waited that long.
    pub fn age_everything(&self, secs: u64) {
        let mut file = self.file();
        let at = super::ago(secs);
        for key in ["jobs", "turns"] {
            for record in file[key].as_array_mut().into_iter().flatten() {
                for field in ["registered_at", "created_at", "updated_at"] {
                    if record.get(field).is_some() {
                        record[field] = Value::String(at.clone());
                    }
                }
            }
        }
        self.write_file(&file);
    }

    pub fn turns(&self) -> Vec<Value> {
        self.file()["turns"].as_array().cloned().unwrap_or_default()
    }

    /// The turn that carries `task_id`'s block: the one whose `turn_id` is the job's
    /// `turn`; panics unless the job points at exactly one.
    pub fn turn(&self, task_id: &str) -> Value {
        turn_of(&self.file(), task_id).clone()
    }

    /// Rewrites the fields of the turn `task_id`'s job points at (to put a delivery in a
    /// given state).
    pub fn edit_turn(&self, task_id: &str, edit: impl FnOnce(&mut serde_json::Map<String, Value>)) {
        let mut file = self.file();
        let id = job_of(&file, task_id)["turn"].clone();
        assert!(id.is_string(), "{task_id} has no turn: {file:#}");
        let turn = file["turns"]
            .as_array_mut()
            .expect("turns array")
            .iter_mut()
            .find(|t| t["turn_id"] == id)
            .expect("turn to edit");
        edit(turn.as_object_mut().unwrap());
        self.write_file(&file);
    }

    /// Lets the settle window of `task_id`'s turn of unknown outcome pass: its attempt, and
    /// the moment atc learned its outcome was unknown, move 90 s into the past (within its
    /// read-back window, past any `--http-timeout` the tests use).
    #[allow(dead_code)]
    pub fn settle_passed(&self, task_id: &str) {
        let then = super::ago(90);
        self.edit_turn(task_id, |turn| {
            turn["delivery"]["last_attempt_at"] = serde_json::json!(then);
            if turn["delivery"].get("unknown_since").is_some() {
                turn["delivery"]["unknown_since"] = serde_json::json!(then);
            }
        });
    }

    /// Moves the first absent read-back of `task_id`'s turn, if it had one, into the past:
    /// the next look that finds it absent too posts it again (the second window is over).
    #[allow(dead_code)]
    pub fn absent_long_ago(&self, task_id: &str) {
        let had = self.turn(task_id)["delivery"].get("absent_since").is_some();
        assert!(
            had,
            "{task_id}'s turn was never read back absent: {:#}",
            self.turn(task_id)
        );
        self.edit_turn(task_id, |turn| {
            turn["delivery"]["absent_since"] = serde_json::json!("2026-01-01T00:00:00Z");
        });
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// `sh -c SCRIPT` in this environment with `ATC_STATE` set and `$ATC` naming the atc
    /// binary: to run it under a umask or a ulimit (`ulimit -f 1; exec "$ATC" watch …`).
    pub fn sh(&self, script: &str) -> Run<'_> {
        let mut run = Run::new(self, self.state.clone());
        run.cmd = in_env(Command::new("sh"), &self.home);
        run.cmd
            .env("ATC", assert_cmd::cargo::cargo_bin("atc"))
            .env("ATC_STATE", &self.state)
            .arg("-c")
            .arg(script);
        run.shown.push(format!("(sh -c '{script}')"));
        run
    }
}

/// Writes `bytes` to `path`, creating a missing file 0600 and a missing directory 0700.
pub fn write_private(path: &Path, bytes: &[u8]) {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = path.parent().unwrap();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut file| file.write_all(bytes))
        .unwrap();
}

/// `atc` in the hermetic environment of `home`, aimed at [`hermetic::NOWHERE`].
fn base_command(home: &Path) -> Command {
    in_env(Command::new(assert_cmd::cargo::cargo_bin("atc")), home)
}

fn in_env(mut cmd: Command, home: &Path) -> Command {
    cmd.env_clear()
        .envs(hermetic::vars(home))
        .env("ATC_BASE_URL", hermetic::NOWHERE)
        .current_dir(home);
    cmd
}

/// What a stream must hold.
#[derive(Clone, Debug)]
enum Expect {
    Exactly(String),
    Contains(Vec<String>),
    /// The caller reads it from `.run()` and checks it there.
    Inspected,
}

impl Expect {
    fn check(&self, name: &str, got: &str, context: &str) {
        match self {
            Expect::Exactly(want) => assert!(
                got == want,
                "{context}: {name} differs\n--- got\n{got}\n--- want\n{want}"
            ),
            Expect::Contains(needles) => {
                for needle in needles {
                    assert!(
                        got.contains(needle.as_str()),
                        "{context}: {name} lacks {needle:?}:\n{got}"
                    );
                }
            }
            Expect::Inspected => {}
        }
    }

    fn contains(self, needle: String) -> Expect {
        match self {
            Expect::Contains(mut needles) => {
                needles.push(needle);
                Expect::Contains(needles)
            }
            _ => Expect::Contains(vec![needle]),
        }
    }
}

/// What the job file must look like afterwards.
enum FileCheck {
    /// Unchanged when the command fails; valid private JSON when it succeeds.
    Default,
    /// Byte for byte as before, whatever the exit status.
    Unchanged,
    /// Absent afterwards (nothing created).
    Absent,
    Custom(Box<dyn FnOnce(&Path)>),
}

/// One invocation of atc and what it must do. Runs when dropped unless `.run()` ran it.
pub struct Run<'a> {
    _env: &'a TestEnv,
    cmd: Command,
    shown: Vec<String>,
    state: PathBuf,
    stdin: Option<Vec<u8>>,
    status: i32,
    stdout: Expect,
    stderr: Expect,
    lacks: Vec<String>,
    file: Option<FileCheck>,
    before: Option<Vec<u8>>,
    concurrent: bool,
    /// Expect the process to die of SIGABRT (a crash point).
    aborted: bool,
    done: bool,
}

impl<'a> Run<'a> {
    fn new(env: &'a TestEnv, state: PathBuf) -> Run<'a> {
        Run {
            _env: env,
            cmd: base_command(&env.home),
            shown: Vec::new(),
            state,
            stdin: None,
            status: 0,
            stdout: Expect::Exactly(String::new()),
            stderr: Expect::Exactly(String::new()),
            lacks: Vec::new(),
            file: Some(FileCheck::Default),
            before: None,
            concurrent: false,
            aborted: false,
            done: false,
        }
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        for arg in args {
            let arg: OsString = arg.into();
            self.shown.push(arg.to_string_lossy().into_owned());
            self.cmd.arg(arg);
        }
        self
    }

    pub fn env(mut self, name: &str, value: impl AsRef<std::ffi::OsStr>) -> Self {
        self.cmd.env(name, value);
        self
    }

    pub fn env_remove(mut self, name: &str) -> Self {
        self.cmd.env_remove(name);
        self
    }

    /// Runs it as another user (the test must run as root to start it so).
    #[cfg(unix)]
    pub fn run_as(mut self, uid: u32) -> Self {
        use std::os::unix::process::CommandExt;
        self.cmd.uid(uid).gid(uid);
        self
    }

    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(bytes.into());
        self
    }

    /// The exit status it must end with (default 0).
    /// The process must die of SIGABRT (a crash point of a `crash-points` build): no exit
    /// code, nothing checked on stderr; the job file must still be whole JSON (or absent).
    pub fn aborted(mut self) -> Self {
        self.aborted = true;
        self.stderr = Expect::Inspected;
        self.file = Some(FileCheck::Custom(Box::new(|path: &Path| {
            if let Ok(bytes) = std::fs::read(path) {
                let value: Value = serde_json::from_slice(&bytes)
                    .unwrap_or_else(|e| panic!("a crash left a job file that is not JSON: {e}"));
                assert!(
                    value["version"].is_u64(),
                    "a crash left a job file without a version"
                );
            }
        })));
        self
    }

    pub fn status(mut self, code: i32) -> Self {
        self.status = code;
        self
    }

    /// stdout must be exactly `text`.
    pub fn stdout(mut self, text: impl Into<String>) -> Self {
        self.stdout = Expect::Exactly(text.into());
        self
    }

    /// stdout must contain `text` (repeatable).
    pub fn stdout_contains(mut self, text: impl Into<String>) -> Self {
        self.stdout = std::mem::replace(&mut self.stdout, Expect::Inspected).contains(text.into());
        self
    }

    /// The test reads stdout from `.run()` and checks it itself.
    pub fn stdout_inspected(mut self) -> Self {
        self.stdout = Expect::Inspected;
        self
    }

    /// stderr must be exactly `text`.
    pub fn stderr(mut self, text: impl Into<String>) -> Self {
        self.stderr = Expect::Exactly(text.into());
        self
    }

    /// stderr must contain `text` (repeatable).
    pub fn stderr_contains(mut self, text: impl Into<String>) -> Self {
        self.stderr = std::mem::replace(&mut self.stderr, Expect::Inspected).contains(text.into());
        self
    }

    /// stderr must say that `watch` could not check the parent chat (the hermetic base
    /// URL points where nothing listens).
    pub fn chat_check_skipped(self) -> Self {
        self.stderr_contains("the chat check was skipped")
    }

    /// The test reads stderr from `.run()` and checks it itself.
    pub fn stderr_inspected(mut self) -> Self {
        self.stderr = Expect::Inspected;
        self
    }

    /// Neither stdout, stderr nor the job file may contain `text` (a token, say).
    pub fn never_shows(mut self, text: impl Into<String>) -> Self {
        self.lacks.push(text.into());
        self
    }

    /// The job file must be byte for byte as before, whatever the exit status.
    pub fn file_unchanged(mut self) -> Self {
        self.file = Some(FileCheck::Unchanged);
        self
    }

    /// No job file may exist afterwards.
    pub fn no_file(mut self) -> Self {
        self.file = Some(FileCheck::Absent);
        self
    }

    /// The job file this run must be judged by, when `--state` names another one.
    pub fn judging(mut self, path: &Path) -> Self {
        self.state = path.to_path_buf();
        self
    }

    /// Checks the job file afterwards (besides it being valid and private).
    pub fn file(mut self, check: impl FnOnce(&Value) + 'static) -> Self {
        self.file = Some(FileCheck::Custom(Box::new(move |path: &Path| {
            let bytes = std::fs::read(path).expect("the job file exists");
            let value: Value = serde_json::from_slice(&bytes).expect("the job file is JSON");
            check(&value);
        })));
        self
    }

    fn context(&self) -> String {
        format!("`atc {}`", self.shown.join(" "))
    }

    fn prepare(&mut self) -> Child {
        assert!(!self.done, "{} ran twice", self.context());
        self.done = true;
        self.before = std::fs::read(&self.state).ok();
        self.cmd
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = self.cmd.spawn().expect("start atc");
        if let Some(bytes) = self.stdin.take() {
            let mut stdin = child.stdin.take().expect("piped stdin");
            let _ = stdin.write_all(&bytes);
        }
        child
    }

    fn verify(&mut self, output: &Output) {
        let context = self.context();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        if self.aborted {
            #[cfg(unix)]
            assert_eq!(
                std::os::unix::process::ExitStatusExt::signal(&output.status),
                Some(6),
                "{context}: did not abort at its crash point ({})\nstdout: {stdout}\nstderr: {stderr}",
                output.status
            );
            self.stdout.check("stdout", &stdout, &context);
            if let Some(FileCheck::Custom(check)) = self.file.take() {
                check(&self.state);
            }
            return;
        }
        assert_eq!(
            output.status.code(),
            Some(self.status),
            "{context}: exit status\nstdout: {stdout}\nstderr: {stderr}"
        );
        self.stdout.check("stdout", &stdout, &context);
        self.stderr.check("stderr", &stderr, &context);
        if self.status != 0 && self.status != 2 {
            // Refusals and failures are one line of `atc: …` (clap's usage errors, exit 2,
            // have their own layout).
            assert!(
                stderr.starts_with("atc: ") && stderr.trim_end().lines().count() == 1,
                "{context}: an error must be one line starting with `atc: `:\n{stderr}"
            );
        }
        let after = std::fs::read(&self.state).ok();
        for secret in &self.lacks {
            assert!(
                !stdout.contains(secret.as_str()),
                "{context}: stdout shows {secret:?}"
            );
            assert!(
                !stderr.contains(secret.as_str()),
                "{context}: stderr shows {secret:?}"
            );
            if let Some(bytes) = &after {
                assert!(
                    !String::from_utf8_lossy(bytes).contains(secret.as_str()),
                    "{context}: the job file holds {secret:?}"
                );
            }
        }
        match self.file.take().expect("checked once") {
            FileCheck::Default if self.status != 0 => {
                assert_eq!(
                    after, self.before,
                    "{context} failed and changed the job file"
                );
            }
            FileCheck::Default => {}
            FileCheck::Unchanged => {
                assert_eq!(after, self.before, "{context} changed the job file")
            }
            FileCheck::Absent => assert!(after.is_none(), "{context} created the job file"),
            FileCheck::Custom(check) => check(&self.state),
        }
        if let Some(bytes) = after
            .as_ref()
            .filter(|bytes| Some(*bytes) != self.before.as_ref())
        {
            let value: Value = serde_json::from_slice(bytes)
                .unwrap_or_else(|e| panic!("{context} left a job file that is not JSON: {e}"));
            assert!(
                value["version"].is_u64(),
                "{context}: no version in the job file"
            );
            assert_eq!(
                mode(&self.state),
                0o600,
                "{context}: the job file is not private"
            );
        }
        let dir = self.state.parent().expect("a directory");
        // Runs started together see each other's saves in progress.
        if let Some(entries) = std::fs::read_dir(dir).ok().filter(|_| !self.concurrent) {
            let temps: Vec<String> = entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".tmp"))
                .collect();
            assert!(temps.is_empty(), "{context} left temp files: {temps:?}");
        }
    }

    /// Runs now, checks everything, and returns the output for further checks.
    pub fn run(mut self) -> Output {
        let child = self.prepare();
        let output = child.wait_with_output().expect("wait for atc");
        self.verify(&output);
        output
    }

    /// For `atc doctor`: runs it; it must exit `status` (1: a check failed, and stderr
    /// counts them) and leave the job file as it was. Returns what it printed.
    pub fn doctor_said(self, status: i32) -> String {
        let run = self.status(status).stdout_inspected().file_unchanged();
        let run = match status {
            1 => run.stderr_contains("checks failed\n"),
            _ => run.stderr_inspected(),
        };
        stdout(&run.run())
    }

    /// Runs, checks, and parses stdout as the one JSON document it must be.
    pub fn json(self) -> Value {
        let context = self.context();
        let output = self.stdout_inspected().run();
        serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("{context}: stdout is not one JSON document: {e}"))
    }

    /// Starts it in the background; `.wait()` (or dropping the handle) checks it.
    pub fn spawn(mut self) -> Running<'a> {
        self.concurrent = true;
        let child = self.prepare();
        Running {
            run: Some(self),
            child: Some(child),
        }
    }
}

impl Drop for Run<'_> {
    fn drop(&mut self) {
        if !self.done && !std::thread::panicking() {
            let child = self.prepare();
            let output = child.wait_with_output().expect("wait for atc");
            self.verify(&output);
        }
    }
}

/// An invocation started with [`Run::spawn`].
pub struct Running<'a> {
    run: Option<Run<'a>>,
    child: Option<Child>,
}

impl Running<'_> {
    /// Whether it is still running.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .expect("not waited for yet")
            .try_wait()
            .expect("try_wait")
            .is_none()
    }

    /// Kills it (a crash, as far as the job file is concerned); nothing is checked.
    pub fn kill(mut self) {
        let mut child = self.child.take().expect("not waited for yet");
        child.kill().expect("kill atc");
        child.wait().expect("reap atc");
        self.run.take().expect("one run").done = true;
    }

    /// Waits for it and checks everything.
    pub fn wait(mut self) -> Output {
        self.finish()
    }

    fn finish(&mut self) -> Output {
        let child = self.child.take().expect("not waited for yet");
        let output = child.wait_with_output().expect("wait for atc");
        let mut run = self.run.take().expect("one run");
        run.verify(&output);
        output
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if self.child.is_some() && !std::thread::panicking() {
            self.finish();
        }
    }
}

/// A job record, for seeding files. It was registered a minute ago: a
/// fixed date would pass `--max-age` (24 h by default) as the calendar moves on, and
/// expire every pending job seeded so.
pub fn job(task_id: &str, status: &str, base_url: &str) -> Value {
    let registered = humantime::format_rfc3339_seconds(
        std::time::SystemTime::now() - std::time::Duration::from_secs(60),
    )
    .to_string();
    serde_json::json!({
        "job_id": format!("{:012x}", task_id.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100000001b3)) & 0xffff_ffff_ffff),
        "task_id": task_id,
        "base_url": base_url,
        "agent_id": "default",
        "target_agent": null,
        "session_id": "s-77",
        "user_id": "default",
        "channel": "console",
        "registered_at": registered,
        "updated_at": registered,
        "status": status,
    })
}

/// A version-2 turn carrying `job`'s result alone (its text the job's `final`), in
/// `state`, for seeding files; `job` is pointed at it (`turn`).
pub fn turn_for(job: &mut Value, state: &str) -> Value {
    let id = format!("atc-{}", job["job_id"].as_str().expect("a job id"));
    job["turn"] = Value::String(id.clone());
    let mut turn = serde_json::json!({
        "turn_id": id,
        "base_url": job["base_url"],
        "agent_id": job["agent_id"],
        "session_id": job["session_id"],
        "user_id": job["user_id"],
        "channel": job["channel"],
        "state": state,
        "carries": [{"job_id": job["job_id"], "task_id": job["task_id"], "block": "result"}],
        "created_at": job["updated_at"],
        "updated_at": job["updated_at"],
        "delivery": {"attempts": 0, "busy": 0},
    });
    if let Some(text) = job.get("final") {
        turn["text"] = text.clone();
    }
    turn
}

/// The one job for `task_id` in a parsed job file.
pub fn job_of<'a>(file: &'a Value, task_id: &str) -> &'a Value {
    let matching: Vec<&Value> = file["jobs"]
        .as_array()
        .expect("jobs array")
        .iter()
        .filter(|j| j["task_id"] == task_id)
        .collect();
    assert_eq!(matching.len(), 1, "jobs for {task_id}: {matching:#?}");
    matching[0]
}

/// The turn `task_id`'s job points at (its `turn`) in a parsed job file.
pub fn turn_of<'a>(file: &'a Value, task_id: &str) -> &'a Value {
    let job = job_of(file, task_id);
    let id = job["turn"]
        .as_str()
        .unwrap_or_else(|| panic!("{task_id} has no turn: {job}"));
    let matching: Vec<&Value> = file["turns"]
        .as_array()
        .expect("turns array")
        .iter()
        .filter(|t| t["turn_id"] == id)
        .collect();
    assert_eq!(matching.len(), 1, "turns {id}: {matching:#?}");
    matching[0]
}

/// The tasks a turn carries, in its order (a task twice if it carries two of its blocks).
pub fn carried_tasks(turn: &Value) -> Vec<String> {
    turn["carries"]
        .as_array()
        .expect("carries array")
        .iter()
        .map(|b| b["task_id"].as_str().unwrap().to_owned())
        .collect()
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[cfg(unix)]
pub fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Checks the age `text` shows right after `label` (`delivered 3s ago`): an age is computed
/// at two moments (when the tick recorded the time, when `status` read it), so only a range
/// holds on a busy machine. It must be at most `within` (what the test measured around the
/// commands that recorded and read it), plus the second timestamps are truncated to.
pub fn assert_age(text: &str, label: &str, within: std::time::Duration) {
    let rest = text
        .split_once(label)
        .unwrap_or_else(|| panic!("no {label:?} in\n{text}"))
        .1;
    let shown = rest
        .split_once(" ago")
        .unwrap_or_else(|| panic!("no age after {label:?} in\n{text}"))
        .0;
    let age = humantime::parse_duration(shown)
        .unwrap_or_else(|e| panic!("{label:?} shows {shown:?}, not an age ({e})"));
    let most = std::time::Duration::from_secs(within.as_secs() + 1);
    assert!(
        age <= most,
        "{label}{shown} ago, but at most {most:?} passed:\n{text}"
    );
}

/// The tasks and statuses of the jobs a command's `--json` lists (`{"jobs": […]}`), in
/// its order.
pub fn listed_statuses(out: &Value) -> Vec<(String, String)> {
    out["jobs"]
        .as_array()
        .unwrap_or_else(|| panic!("no jobs listed: {out}"))
        .iter()
        .map(|j| {
            let text = |key: &str| j[key].as_str().unwrap_or_default().to_owned();
            (text("task_id"), text("status"))
        })
        .collect()
}
