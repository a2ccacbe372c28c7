//! Child processes the harness starts: each in its own process group, told to die
//! with the harness (PR_SET_PDEATHSIG), stopped as a group (SIGTERM, then SIGKILL
//! after 3 s), and remembered so the run can prove at its end that none survived.

use std::fs::{self, File};
use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::R;

const SIGKILL: i32 = 9;
const SIGTERM: i32 = 15;
#[cfg(target_os = "linux")]
const PR_SET_PDEATHSIG: i32 = 1;

unsafe extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
    #[cfg(target_os = "linux")]
    fn prctl(option: i32, ...) -> i32;
    #[cfg(target_os = "linux")]
    fn getppid() -> i32;
}

/// Every process group (= leader pid) started during the run, with a name.
static STARTED: Mutex<Vec<(u32, String)>> = Mutex::new(Vec::new());

/// Put the child in a new process group and arrange for SIGTERM when the harness
/// (the spawning thread, which is always the main thread) dies.
fn isolate(cmd: &mut Command) {
    cmd.process_group(0);
    #[cfg(target_os = "linux")]
    {
        let parent = std::process::id() as i32;
        // SAFETY: prctl, getppid and _exit-by-error-return are async-signal-safe;
        // nothing is allocated between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if prctl(PR_SET_PDEATHSIG, SIGTERM as std::ffi::c_ulong) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The harness died between fork and prctl: don't outlive it.
                if getppid() != parent {
                    return Err(io::Error::other("harness already gone"));
                }
                Ok(())
            });
        }
    }
}

fn register(pid: u32, name: &str) {
    STARTED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((pid, name.to_string()));
}

fn signal_group(pgid: u32, sig: i32) {
    // SAFETY: plain syscall; a negative pid addresses the whole group.
    unsafe {
        kill(-(pgid as i32), sig);
    }
}

/// Makes the harness the reaper of orphaned descendants: a process that escaped its
/// group (setsid) and outlived its parent is re-parented here, where `leftovers`
/// sees it.
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    // SAFETY: plain syscall on the current process.
    unsafe {
        const PR_SET_CHILD_SUBREAPER: i32 = 36;
        prctl(PR_SET_CHILD_SUBREAPER, 1 as std::ffi::c_ulong);
    }
}

struct Proc {
    pid: u32,
    ppid: u32,
    pgrp: u32,
    state: char,
}

/// Every process visible in /proc.
fn processes() -> Vec<Proc> {
    let mut out = Vec::new();
    let Ok(dir) = fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid pgrp ..."; comm may hold spaces and parens.
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let mut rest = stat[close + 1..].split_whitespace();
        let state = rest.next().and_then(|s| s.chars().next()).unwrap_or('?');
        let ppid = rest.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        let pgrp = rest.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        out.push(Proc {
            pid,
            ppid,
            pgrp,
            state,
        });
    }
    out
}

/// Live (non-zombie) members of a process group.
fn group_members(pgid: u32) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|p| p.pgrp == pgid && p.state != 'Z' && p.state != 'X')
        .map(|p| p.pid)
        .collect()
}

fn cmdline(pid: u32) -> String {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .replace('\0', " ")
                .trim()
                .chars()
                .take(120)
                .collect()
        })
        .unwrap_or_default()
}

/// A long-running child (fake LLM, QwenPaw server) and its process group.
pub struct Group {
    name: String,
    child: Option<Child>,
    pgid: u32,
}

impl Group {
    pub fn spawn(name: &str, mut cmd: Command) -> R<Group> {
        isolate(&mut cmd);
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {name}: {e}"))?;
        let pgid = child.id();
        register(pgid, name);
        Ok(Group {
            name: name.to_string(),
            child: Some(child),
            pgid,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pgid
    }

    /// `Some(status)` once the leader has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    pub fn child_mut(&mut self) -> Option<&mut Child> {
        self.child.as_mut()
    }

    /// SIGTERM to the group; SIGKILL to whatever is left after 3 s.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if !stop_group(self.pgid, &mut child) {
            eprintln!(
                "e2e: {} (pid {}) ignored SIGTERM for 3 s; killed",
                self.name, self.pgid
            );
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Every live descendant of `root` (QwenPaw runs its agents' shell commands in new
/// sessions, so they leave the process group).
fn descendants(root: u32) -> Vec<u32> {
    let procs = processes();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            procs
                .iter()
                .filter(|p| p.ppid == parent && p.state != 'Z')
                .map(|p| p.pid),
        );
        i += 1;
    }
    found.remove(0);
    found
}

fn signal_pids(pids: &[u32], sig: i32) {
    for &pid in pids {
        // SAFETY: plain syscall.
        unsafe {
            kill(pid as i32, sig);
        }
    }
}

fn all_gone(pgid: u32, strays: &[u32]) -> bool {
    let live: Vec<u32> = processes()
        .into_iter()
        .filter(|p| p.state != 'Z')
        .map(|p| p.pid)
        .collect();
    group_members(pgid).is_empty() && !strays.iter().any(|p| live.contains(p))
}

/// Stops the group and every descendant that left it. False when SIGKILL was needed.
fn stop_group(pgid: u32, child: &mut Child) -> bool {
    let strays = descendants(pgid);
    signal_group(pgid, SIGTERM);
    signal_pids(&strays, SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut reaped = false;
    while Instant::now() < deadline {
        if !reaped {
            reaped = matches!(child.try_wait(), Ok(Some(_)));
        }
        if reaped && all_gone(pgid, &strays) {
            return true;
        }
        sleep(Duration::from_millis(50));
    }
    signal_group(pgid, SIGKILL);
    signal_pids(&strays, SIGKILL);
    let _ = child.wait();
    let deadline = Instant::now() + Duration::from_secs(2);
    while !all_gone(pgid, &strays) && Instant::now() < deadline {
        sleep(Duration::from_millis(50));
    }
    false
}

pub struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn describe(&self) -> String {
        format!(
            "{}; stdout: {:?}; stderr: {:?}",
            self.status,
            clip(&self.stdout, 1500),
            clip(&self.stderr, 1500)
        )
    }
}

pub fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let tail: String = s
            .chars()
            .rev()
            .take(max)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("…{tail}")
    }
}

/// Runs a short-lived command to completion in its own process group, killing the
/// group after `timeout`. Output goes through files in `scratch` (no pipe deadlocks).
pub fn run(
    name: &str,
    mut cmd: Command,
    stdin: Option<&[u8]>,
    timeout: Duration,
    scratch: &Path,
) -> R<Output> {
    static SEQ: Mutex<u64> = Mutex::new(0);
    let n = {
        let mut seq = SEQ.lock().unwrap_or_else(|e| e.into_inner());
        *seq += 1;
        *seq
    };
    let out_path = scratch.join(format!("run-{n}.out"));
    let err_path = scratch.join(format!("run-{n}.err"));
    let in_path = scratch.join(format!("run-{n}.in"));
    let file = |p: &Path| File::create(p).map_err(|e| format!("{}: {e}", p.display()));
    cmd.stdout(file(&out_path)?).stderr(file(&err_path)?);
    match stdin {
        Some(bytes) => {
            fs::write(&in_path, bytes).map_err(|e| format!("{}: {e}", in_path.display()))?;
            cmd.stdin(File::open(&in_path).map_err(|e| e.to_string())?);
        }
        None => {
            cmd.stdin(Stdio::null());
        }
    }
    isolate(&mut cmd);
    let mut child = cmd.spawn().map_err(|e| format!("cannot run {name}: {e}"))?;
    let pgid = child.id();
    register(pgid, name);
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => sleep(Duration::from_millis(20)),
            Ok(None) => {
                stop_group(pgid, &mut child);
                let err = fs::read_to_string(&err_path).unwrap_or_default();
                return Err(format!(
                    "{name} did not finish within {timeout:?} (killed); stderr: {:?}",
                    clip(&err, 1500)
                ));
            }
            Err(e) => return Err(format!("waiting for {name}: {e}")),
        }
    };
    // Anything the command left behind in its group goes too.
    if !group_members(pgid).is_empty() {
        signal_group(pgid, SIGKILL);
    }
    let read = |p: &Path| fs::read(p).map(|b| String::from_utf8_lossy(&b).into_owned());
    let output = Output {
        status,
        stdout: read(&out_path).unwrap_or_default(),
        stderr: read(&err_path).unwrap_or_default(),
    };
    for p in [&out_path, &err_path, &in_path] {
        let _ = fs::remove_file(p);
    }
    Ok(output)
}

/// The processes started during the run that are still alive: among the harness's
/// descendants, a started pid, any member of a started process group (e.g. a shell the
/// agent spawned), or an orphan re-parented to the harness (see `become_subreaper`). Each
/// one found is killed, so a failing check still leaves nothing behind.
pub fn leftovers() -> Vec<String> {
    let started = STARTED.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let me = std::process::id();
    let mut out = Vec::new();
    let all = processes();
    let parent: std::collections::HashMap<u32, u32> = all.iter().map(|p| (p.pid, p.ppid)).collect();
    // Only the harness's descendants (orphans included: it is their subreaper). A process
    // id of a group that ended long ago may be another user's or session's now, and so may
    // a process group id: on a shared machine such a match is not ours to kill.
    let descends = |mut pid: u32| {
        for _ in 0..64 {
            match parent.get(&pid) {
                Some(&ppid) if ppid == me => return true,
                Some(&ppid) if ppid > 1 => pid = ppid,
                _ => return false,
            }
        }
        false
    };
    for p in all.iter().filter(|p| descends(p.pid)) {
        if p.state == 'Z' || p.state == 'X' || p.pid == me {
            continue;
        }
        let owner = started
            .iter()
            .find(|(leader, _)| *leader == p.pid || *leader == p.pgrp)
            .map(|(_, name)| format!("group of {name}"))
            .or_else(|| (p.ppid == me).then(|| "orphan re-parented to the harness".to_string()));
        if let Some(owner) = owner {
            out.push(format!("pid {} ({owner}): {}", p.pid, cmdline(p.pid)));
            // SAFETY: plain syscall.
            unsafe {
                kill(p.pid as i32, SIGKILL);
            }
        }
    }
    out
}

pub fn started_count() -> usize {
    STARTED.lock().unwrap_or_else(|e| e.into_inner()).len()
}
