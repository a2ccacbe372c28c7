#![allow(dead_code)]

pub mod atc;
pub mod bodies;
pub mod chats;
pub mod fake;
pub mod hermetic;
pub mod rng;
pub mod scene;
pub mod shape;

/// Unix seconds, `secs` ago (the times the seed plugin's state file holds).
pub fn unix_secs_ago(secs: u64) -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - secs
}

/// The job file's timestamp of `secs` ago.
pub fn ago(secs: u64) -> String {
    ::atc::time::Timestamp::from_unix(unix_secs_ago(secs)).to_string()
}

/// Starts `command` (a stand-in `qwenpaw app`) and returns once its arguments show in
/// /proc/<pid>/cmdline. `spawn` returns when the exec began, but the kernel sets the
/// new program's arguments a moment later: a `doctor` run in that window read an empty
/// cmdline and found no server (seen once on a loaded CI machine).
#[cfg(target_os = "linux")]
pub fn spawn_seen(command: &mut std::process::Command) -> std::process::Child {
    let mut child = command.spawn().expect("spawn a stand-in server");
    let path = format!("/proc/{}/cmdline", child.id());
    // A condition, not a time: the bound only stops a broken spawn from hanging the suite.
    for _ in 0..1000 {
        if std::fs::read(&path).is_ok_and(|args| args.split(|b| *b == 0).any(|a| a == b"app")) {
            return child;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("{path} never showed `app`");
}
