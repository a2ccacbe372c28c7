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

/// Writes at `path` an executable shell script that logs its arguments to `starts`, one
/// line a start, then runs `real` with them.
pub fn logging_wrapper(path: &Path, starts: &Path, real: &Path) -> R<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::write(
        path,
        format!(
            "#!/bin/sh\necho \"$@\" >> '{}'\nexec '{}' \"$@\"\n",
            starts.display(),
            real.display()
        ),
    )
    .map_err(|e| e.to_string())?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())
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

    /// The job file, which must be version 2.
    fn file_v2(&self) -> R<Value> {
        let file = self.file()?;
        if file["version"] != 2 {
            return Err(format!(
                "job file version is {}, expected 2",
                file["version"]
            ));
        }
        Ok(file)
    }

    pub fn jobs(&self) -> R<Vec<Value>> {
        let file = self.file_v2()?;
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

    /// The turns of the job file (`turns`, beside `jobs`).
    pub fn turns(&self) -> R<Vec<Value>> {
        let file = self.file_v2()?;
        file["turns"]
            .as_array()
            .cloned()
            .ok_or_else(|| format!("job file has no turns list: {file}"))
    }

    /// The turn `job` points at (its `turn`), as the job file holds it now; `None` while
    /// no turn carries the job's block. The turn must carry a block of the job.
    pub fn turn_if_any(&self, job: &Value) -> R<Option<Value>> {
        let Some(id) = job["turn"].as_str() else {
            return Ok(None);
        };
        let turns = self.turns()?;
        let mine: Vec<&Value> = turns.iter().filter(|t| t["turn_id"] == id).collect();
        let turn = match mine.as_slice() {
            [one] => (*one).clone(),
            [] => {
                return Err(format!(
                    "job {} points at turn {id}, which is not in the file",
                    job["task_id"]
                ));
            }
            many => return Err(format!("{} turns with id {id}", many.len())),
        };
        let carried = turn["carries"]
            .as_array()
            .is_some_and(|blocks| blocks.iter().any(|b| b["job_id"] == job["job_id"]));
        if !carried {
            return Err(format!(
                "turn {id} does not carry a block of job {} (task {}): {turn}",
                job["job_id"], job["task_id"]
            ));
        }
        Ok(Some(turn))
    }

    /// The turn `job` points at; an error when it has none.
    pub fn turn_of(&self, job: &Value) -> R<Value> {
        self.turn_if_any(job)?
            .ok_or_else(|| format!("job {} has no turn: {job}", job["task_id"]))
    }

    /// The tasks a turn carries, in its order (a task twice if it carries two of its
    /// blocks).
    pub fn carried_tasks(turn: &Value) -> Vec<String> {
        turn["carries"]
            .as_array()
            .map(|blocks| {
                blocks
                    .iter()
                    .map(|b| b["task_id"].as_str().unwrap_or("").to_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// [`Atc::tick_until_terminal`] for the one job of `task_id`.
    pub fn tick_one_until_terminal(
        &self,
        args: &[&str],
        task_id: &str,
        timeout: Duration,
    ) -> R<Value> {
        let mut jobs = self.tick_until_terminal(args, &[task_id.to_string()], timeout)?;
        Ok(jobs.remove(0))
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
