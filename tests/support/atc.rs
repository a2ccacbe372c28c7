//! A hermetic environment for running the real `atc` binary: its own HOME and XDG dirs,
//! no `ATC_*` or `QWENPAW_*` variables from the outside, and helpers to read and write the
//! job file it leaves on disk.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;
use tempfile::TempDir;

pub struct TestEnv {
    pub dir: TempDir,
    pub home: PathBuf,
    /// The job file every `cmd()` uses (through `ATC_STATE`).
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

    /// `atc` with a clean environment and `ATC_STATE` pointing at this env's job file.
    pub fn cmd(&self) -> Command {
        Command::from_std(self.std_cmd())
    }

    /// `atc` with a clean environment and no `ATC_STATE`: the default job file path.
    pub fn bare(&self) -> Command {
        Command::from_std(self.std_bare())
    }

    /// `cmd()` as a `std::process::Command`, for tests that start processes concurrently.
    pub fn std_cmd(&self) -> std::process::Command {
        let mut cmd = self.std_bare();
        cmd.env("ATC_STATE", &self.state);
        cmd
    }

    fn std_bare(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("atc"));
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy().into_owned();
            if name.starts_with("ATC_") || name.starts_with("QWENPAW_") || name.starts_with("XDG_")
            {
                cmd.env_remove(&name);
            }
        }
        cmd.env("HOME", &self.home)
            .env("XDG_STATE_HOME", self.home.join(".local/state"))
            .env("XDG_DATA_HOME", self.home.join(".local/share"))
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("XDG_CACHE_HOME", self.home.join(".cache"))
            .env("NO_COLOR", "1")
            .env_remove("RUST_BACKTRACE");
        cmd
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

    pub fn write_bytes(&self, bytes: &[u8]) {
        std::fs::create_dir_all(self.state.parent().unwrap()).unwrap();
        std::fs::write(&self.state, bytes).unwrap();
    }

    pub fn write_file(&self, value: &Value) {
        self.write_bytes(serde_json::to_string_pretty(value).unwrap().as_bytes());
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

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
}

/// A job record in the v1 schema, for seeding files.
pub fn job(task_id: &str, status: &str, base_url: &str) -> Value {
    serde_json::json!({
        "job_id": format!("{:012x}", task_id.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100000001b3)) & 0xffff_ffff_ffff),
        "task_id": task_id,
        "base_url": base_url,
        "agent_id": "default",
        "target_agent": null,
        "session_id": "s-77",
        "user_id": "default",
        "channel": "console",
        "registered_at": "2026-11-30T20:14:03Z",
        "updated_at": "2026-11-30T20:14:03Z",
        "status": status,
    })
}

pub fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[cfg(unix)]
pub fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}
