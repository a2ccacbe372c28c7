//! Advisory locks on sidecar files. The only module that calls the std lock APIs.
//!
//! Locks live on `<job file>.lock` and `<job file>.tick.lock`, never on the job file itself:
//! the job file is replaced by rename, and a lock on a replaced inode protects nothing.

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::guard::{self, Access, Role};
use crate::exit::{Exit, Failure, OrExit};

/// An exclusive lock, released when dropped (or when the process dies, however it dies).
#[derive(Debug)]
pub struct Guard {
    file: File,
    path: PathBuf,
}

impl Guard {
    /// What the last `stamp` wrote, read through the lock already held (no second open).
    pub fn contents(&mut self) -> Option<String> {
        use std::io::{Read, Seek};
        let mut text = String::new();
        self.file.rewind().ok()?;
        self.file.read_to_string(&mut text).ok()?;
        Some(text.trim().to_owned()).filter(|text| !text.is_empty())
    }

    /// Replaces the lock file's contents with `text` (a heartbeat others can read; the
    /// lock itself is unaffected).
    pub fn stamp(&mut self, text: &str) -> Result<()> {
        use std::io::{Seek, Write};
        let path = &self.path;
        (|| {
            self.file.set_len(0)?;
            self.file.rewind()?;
            self.file.write_all(format!("{text}\n").as_bytes())
        })()
        .map_err(|err| {
            Failure::new(
                Exit::StateUnwritable,
                format!(
                    "cannot write {}: {err}; {}",
                    path.display(),
                    super::fsutil::advice(&err)
                ),
            )
            .into()
        })
    }
}

/// What the last `stamp` wrote into the lock file at `path`, if anything (nothing from a
/// lock file `guard` refuses).
pub fn read_stamp(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut text = String::new();
    guard::open(path, Role::Lock, Access::Read)
        .ok()??
        .file
        .read_to_string(&mut text)
        .ok()?;
    Some(text.trim().to_owned()).filter(|text| !text.is_empty())
}

/// The sidecar path `<file>.<suffix>`, derived from the file's own name so that two job
/// files never share a lock.
pub fn sidecar(file: &Path, suffix: &str) -> PathBuf {
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(".");
    name.push(suffix);
    file.with_file_name(name)
}

fn open(path: &Path) -> Result<File> {
    guard::open_to_write(path, Role::Lock, Access::ReadWrite)
}

/// Waits up to `wait` for the exclusive lock on `path`, then gives up with exit 75.
pub fn exclusive(path: &Path, wait: Duration) -> Result<Guard> {
    let file = open(path)?;
    let deadline = Instant::now() + wait;
    loop {
        match file.try_lock() {
            Ok(()) => {
                return Ok(Guard {
                    file,
                    path: path.to_path_buf(),
                });
            }
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(20));
            }
            Err(TryLockError::WouldBlock) => {
                return Err(Failure::new(
                    Exit::LockBusy,
                    format!(
                        "another atc process has held the lock {} for {}s; try again (a stuck process holding it can be found with `fuser {}`)",
                        path.display(),
                        wait.as_secs(),
                        path.display()
                    ),
                )
                .into());
            }
            Err(TryLockError::Error(err)) => {
                return Err(err).or_exit(Exit::StateUnwritable, || {
                    format!("cannot lock {}", path.display())
                });
            }
        }
    }
}

/// Takes the exclusive lock on `path` if nobody holds it; `None` if somebody does.
pub fn try_exclusive(path: &Path) -> Result<Option<Guard>> {
    let file = open(path)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(Guard {
            file,
            path: path.to_path_buf(),
        })),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(err)) => Err(err).or_exit(Exit::StateUnwritable, || {
            format!("cannot lock {}", path.display())
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sidecars_follow_the_file_name() {
        assert_eq!(
            sidecar(Path::new("/x/jobs.json"), "lock"),
            PathBuf::from("/x/jobs.json.lock")
        );
        assert_eq!(
            sidecar(Path::new("other.json"), "tick.lock"),
            PathBuf::from("other.json.tick.lock")
        );
    }

    #[test]
    fn second_holder_waits_then_fails_with_75() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.json.lock");
        let held = exclusive(&path, Duration::ZERO).unwrap();
        assert!(try_exclusive(&path).unwrap().is_none());
        let err = exclusive(&path, Duration::from_millis(50)).unwrap_err();
        assert_eq!(crate::exit::exit_for(&err), Exit::LockBusy);
        assert!(err.to_string().contains("jobs.json.lock"));
        drop(held);
        assert!(try_exclusive(&path).unwrap().is_some());
    }
}
