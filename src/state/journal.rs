//! The event log beside the job file (`<job file>.log`): one JSON line per thing that
//! happened to a watch, appended durably (fsync per batch), rotated to `<job file>.log.1`
//! at [`CAP`]. It holds only typed facts (`report::LogEntry`): never message text,
//! session ids, user ids or tokens.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::Result;

use super::guard::{self, Access, Role};
use super::{fsutil, lock};
use crate::exit::{Exit, Failure, OrExit};
use crate::report::LogEntry;

/// The log is rotated once it is this large (one older file is kept).
pub const CAP: u64 = 1024 * 1024;

/// `<job file>.log`.
pub fn path(job_file: &Path) -> PathBuf {
    lock::sidecar(job_file, "log")
}

fn rotated(job_file: &Path) -> PathBuf {
    lock::sidecar(job_file, "log.1")
}

/// Appends `entries` as JSON lines and syncs them to disk. The caller holds the job-file
/// lock (one writer at a time), so rotation cannot race.
pub fn append(job_file: &Path, entries: &[LogEntry]) -> Result<()> {
    if entries.is_empty() {
        return Ok(());
    }
    let log = path(job_file);
    let mut lines = Vec::new();
    for entry in entries {
        serde_json::to_writer(&mut lines, entry)?;
        lines.push(b'\n');
    }
    let mut file = guard::open_to_write(&log, Role::Log, Access::Append)?;
    let failed = |err: io::Error| -> anyhow::Error {
        Failure::new(
            Exit::StateUnwritable,
            format!(
                "cannot append to the event log {}: {err}; {}",
                log.display(),
                fsutil::advice(&err)
            ),
        )
        .into()
    };
    let len = file.metadata().map_err(failed)?.len();
    if len > 0 && len + lines.len() as u64 > CAP {
        drop(file);
        // A rename replaces whatever is at the rotated path; it never follows a link.
        fs::rename(&log, rotated(job_file)).map_err(failed)?;
        file = guard::open_to_write(&log, Role::Log, Access::Append)?;
    }
    file.write_all(&lines)
        .and_then(|()| file.sync_data())
        .map_err(failed)
}

/// Every entry kept, oldest first (the rotated file, then the current one), and how many
/// lines were skipped: a line that is not an entry (a torn last line after a crash, a
/// byte that is not UTF-8, a hand edit) is skipped, never the reason the log cannot be
/// read.
pub fn read(job_file: &Path) -> Result<(Vec<LogEntry>, usize)> {
    let mut entries = Vec::new();
    let mut skipped = 0;
    for file in [rotated(job_file), path(job_file)] {
        let Some(mut opened) = guard::open(&file, Role::Log, Access::Read)? else {
            continue;
        };
        let mut bytes = Vec::new();
        opened
            .file
            .read_to_end(&mut bytes)
            .or_exit(Exit::StateUnreadable, || {
                format!("cannot read the event log {}", file.display())
            })?;
        for line in bytes.split(|&b| b == b'\n') {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice(line) {
                Ok(entry) => entries.push(entry),
                Err(_) => skipped += 1,
            }
        }
    }
    Ok((entries, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Timestamp;

    fn entry(n: u64) -> LogEntry {
        LogEntry {
            at: Timestamp::from_unix(1_800_000_000 + n),
            event: "polled".into(),
            task_id: format!("task-{n}"),
            job_id: "j".into(),
            turn_id: None,
            status: None,
            task_status: None,
            outcome: None,
            http_status: None,
            reason: None,
        }
    }

    #[test]
    fn appends_reads_and_rotates() {
        let dir = tempfile::tempdir().unwrap();
        let job_file = dir.path().join("jobs.json");
        append(&job_file, &[entry(1), entry(2)]).unwrap();
        append(&job_file, &[]).unwrap();
        assert_eq!(read(&job_file).unwrap(), (vec![entry(1), entry(2)], 0));
        let big: Vec<LogEntry> = (0..20_000).map(entry).collect();
        append(&job_file, &big).unwrap();
        append(&job_file, &[entry(99_999)]).unwrap();
        assert!(rotated(&job_file).exists());
        assert!(fs::metadata(path(&job_file)).unwrap().len() < CAP);
        let (all, _) = read(&job_file).unwrap();
        assert_eq!(all.last(), Some(&entry(99_999)));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(path(&job_file)).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        let mut bytes = fs::read(path(&job_file)).unwrap();
        bytes.extend_from_slice(b"{\"torn\xff\n\n");
        fs::write(path(&job_file), bytes).unwrap();
        let (again, skipped) = read(&job_file).unwrap();
        assert_eq!((again, skipped), (all, 1));
    }

    /// The log turns over when an append would take it past [`CAP`], not before: a
    /// batch that fills it to exactly `CAP` stays in it, the next one starts a new log
    /// and the full one is kept whole as `.log.1`. An empty log is never turned over,
    /// whatever the batch: that would put an empty file over the older entries.
    #[test]
    fn turns_over_past_the_cap_and_never_an_empty_log() {
        let dir = tempfile::tempdir().unwrap();
        let job_file = dir.path().join("jobs.json");
        let line = |e: &LogEntry| [serde_json::to_vec(e).unwrap(), b"\n".to_vec()].concat();
        assert_eq!(CAP, 1 << 20, "the GUIDE and the man page say 1 MiB");
        let filler_len = (1 << 20) - line(&entry(1)).len();
        let mut full = vec![b'x'; filler_len - 1];
        full.push(b'\n');
        fs::write(path(&job_file), &full).unwrap();
        append(&job_file, &[entry(1)]).unwrap();
        assert!(
            !rotated(&job_file).exists(),
            "exactly the cap is not past it"
        );
        full.extend(line(&entry(1)));
        assert_eq!(fs::read(path(&job_file)).unwrap(), full);
        append(&job_file, &[entry(2)]).unwrap();
        assert_eq!(fs::read(rotated(&job_file)).unwrap(), full);
        assert_eq!(fs::read(path(&job_file)).unwrap(), line(&entry(2)));
        fs::write(path(&job_file), b"").unwrap();
        let big: Vec<LogEntry> = (0..20_000).map(entry).collect();
        append(&job_file, &big).unwrap();
        assert_eq!(
            fs::read(rotated(&job_file)).unwrap(),
            full,
            "the older entries kept"
        );
        assert!(fs::metadata(path(&job_file)).unwrap().len() > CAP);
    }
}
