//! Runs the real atc binary with a clean environment and reads its job file.

use std::cell::RefCell;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::R;
use crate::procs::{self, Output};

/// Statuses after which atc does nothing more with a job (`unconfirmed` is still being
/// read back; a watch that ended without an answer may still be telling the parent).
pub const TERMINAL: &[&str] = &[
    "done",
    "undelivered",
    "misrouted",
    "skipped",
    "lost",
    "abandoned",
    "expired",
    "cancelled",
    "error",
];

pub fn is_terminal(job: &Value) -> bool {
    let notice_pending = matches!(job["notice"].as_str(), Some("delivering" | "unconfirmed"));
    job["status"]
        .as_str()
        .is_some_and(|s| TERMINAL.contains(&s))
        && !notice_pending
}

/// One atc "installation": its HOME, job file and base URL.
#[derive(Clone)]
pub struct Atc {
    pub bin: PathBuf,
    pub home: PathBuf,
    pub state: PathBuf,
    pub base_url: String,
    /// Extra environment for every invocation (e.g. the runtime token).
    pub env: Vec<(String, String)>,
    /// stdout and stderr of every invocation, for failure reports and secret checks.
    pub transcript: RefCell<String>,
}

impl Atc {
    /// `dir` must exist; HOME and the job file live inside it.
    pub fn new(bin: &Path, dir: &Path, state: PathBuf, base_url: &str) -> R<Atc> {
        let home = dir.join("atc-home");
        fs::create_dir_all(&home).map_err(|e| format!("{}: {e}", home.display()))?;
        Ok(Atc {
            bin: bin.to_path_buf(),
            home,
            state,
            base_url: base_url.to_string(),
            env: Vec::new(),
            transcript: RefCell::new(String::new()),
        })
    }

    fn base_env(&self) -> Vec<(OsString, OsString)> {
        let mut env = crate::hermetic::vars(&self.home);
        env.push(("ATC_STATE".into(), self.state.clone().into()));
        env.push(("ATC_BASE_URL".into(), self.base_url.clone().into()));
        for (k, v) in &self.env {
            env.push((k.into(), v.into()));
        }
        env
    }

    pub fn run_env(&self, args: &[&str], extra: &[(&str, &str)]) -> R<Output> {
        let mut cmd = Command::new(&self.bin);
        cmd.args(args)
            .env_clear()
            .envs(self.base_env())
            .current_dir(&self.home);
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let out = procs::run(
            &format!("atc {}", args.join(" ")),
            cmd,
            None,
            Duration::from_secs(120),
            &self.home,
        )?;
        self.transcript.borrow_mut().push_str(&format!(
            "$ atc {}\n[{}]\n{}{}",
            args.join(" "),
            out.status,
            out.stdout,
            out.stderr
        ));
        Ok(out)
    }

    /// The same installation with one more environment variable.
    pub fn with_env(&self, key: &str, value: &str) -> Atc {
        let mut copy = self.clone();
        copy.env.push((key.to_string(), value.to_string()));
        copy
    }

    /// Runs and requires exit 0.
    pub fn ok(&self, args: &[&str]) -> R<Output> {
        self.ok_env(args, &[])
    }

    pub fn ok_env(&self, args: &[&str], extra: &[(&str, &str)]) -> R<Output> {
        let out = self.run_env(args, extra)?;
        if !out.status.success() {
            return Err(format!(
                "`atc {}` failed: {}",
                args.join(" "),
                out.describe()
            ));
        }
        Ok(out)
    }

    pub fn watch(&self, task_id: &str, session: &str, user: &str, more: &[&str]) -> R<Output> {
        let mut args = vec![
            "watch",
            task_id,
            "--session",
            session,
            "--user",
            user,
            "--channel",
            "console",
        ];
        args.extend_from_slice(more);
        self.ok(&args)
    }

    pub fn file(&self) -> R<Value> {
        let text = fs::read_to_string(&self.state)
            .map_err(|e| format!("job file {}: {e}", self.state.display()))?;
        serde_json::from_str(&text)
            .map_err(|e| format!("job file {} is not JSON: {e}", self.state.display()))
    }

    pub fn jobs(&self) -> R<Vec<Value>> {
        let file = self.file()?;
        if file["version"] != 1 {
            return Err(format!(
                "job file version is {}, expected 1",
                file["version"]
            ));
        }
        file["jobs"]
            .as_array()
            .cloned()
            .ok_or_else(|| format!("job file has no jobs list: {file}"))
    }

    pub fn job(&self, task_id: &str) -> R<Value> {
        let jobs = self.jobs()?;
        let mine: Vec<&Value> = jobs.iter().filter(|j| j["task_id"] == task_id).collect();
        match mine.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(format!("no job for {task_id} in {}", self.state.display())),
            many => Err(format!("{} jobs for {task_id}", many.len())),
        }
    }

    /// Ticks (with `args`) until every job of `task_ids` is terminal.
    pub fn tick_until_terminal(
        &self,
        args: &[&str],
        task_ids: &[String],
        timeout: Duration,
    ) -> R<Vec<Value>> {
        let deadline = Instant::now() + timeout;
        let mut tick = vec!["tick"];
        tick.extend_from_slice(args);
        loop {
            let out = self.ok(&tick)?;
            if !out.stdout.trim().is_empty() && !args.contains(&"--json") && !args.contains(&"-v") {
                return Err(format!(
                    "`atc tick` is not quiet on success: stdout {:?}",
                    out.stdout
                ));
            }
            let jobs = task_ids
                .iter()
                .map(|t| self.job(t))
                .collect::<R<Vec<_>>>()?;
            if jobs.iter().all(is_terminal) {
                return Ok(jobs);
            }
            if Instant::now() > deadline {
                let open: Vec<String> = jobs
                    .iter()
                    .filter(|j| !is_terminal(j))
                    .map(|j| format!("{} {}", j["task_id"], j["status"]))
                    .collect();
                return Err(format!(
                    "jobs not terminal after {timeout:?}: {}",
                    open.join(", ")
                ));
            }
            sleep(Duration::from_millis(300));
        }
    }
}
