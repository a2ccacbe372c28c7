//! Writing files so that a reader (or a crash) only ever sees a whole old or a whole new
//! version: one function, used for the job file. And reading a file a person names, whole
//! or not at all.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// The directory a file lives in (`.` for a bare file name).
pub fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Reads all of `from`, refusing more than `max` bytes (error kind `FileTooLarge`, saying
/// the limit) rather than cutting: a cut can end inside a task id or a JSON value, and a
/// part read is then misread, not refused.
pub fn read_at_most(from: impl Read, max: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    from.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        let limit = match max {
            m if m % (1024 * 1024) == 0 => format!("{} MiB", m / (1024 * 1024)),
            m => format!("{m} bytes"),
        };
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("longer than {limit}"),
        ));
    }
    Ok(bytes)
}

/// Atomic write: a private (0600) temp file in the same directory, written and fsynced,
/// renamed over `path`, then the directory fsynced (the rename is durable only once the
/// directory entry is). On any error the temp file is removed and `path` stays whole.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_via(&temp_path(path)?, path, bytes, 0o600)
}

/// [`write_atomic`] for a program: mode 0700 (the owner runs it; nobody else reads it).
pub fn write_program(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_via(&temp_path(path)?, path, bytes, 0o700)
}

fn write_via(tmp: &Path, path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let mut options = OpenOptions::new();
    // create_new: never follow or reuse something already at the temp path (whatever is
    // there is not ours, so a failure here has nothing to clean up either).
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options.open(tmp)?;
    let result = (|| {
        file.write_all(bytes)?;
        // A precise modification time, later than the version it replaces: the file's
        // fingerprint (size, times, inode) then differs from every earlier version's,
        // although a file system stamps writes with a coarse clock (a few milliseconds)
        // and the inode of a version two saves back may be reused.
        let before = fs::metadata(path).and_then(|m| m.modified()).ok();
        let now = std::time::SystemTime::now();
        let stamp = match before {
            Some(before) if before >= now => before + std::time::Duration::from_micros(1),
            _ => now,
        };
        file.set_modified(stamp)?;
        file.sync_all()?;
        drop(file);
        crate::crash::point("save-before-rename");
        fs::rename(tmp, path)?;
        #[cfg(unix)]
        File::open(parent_dir(path))?.sync_all()?;
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(tmp);
    }
    result
}

/// Removes the temp files of earlier saves of `path` that never reached their rename (a
/// writer that crashed), only those of user `owner`. Only safe while holding the lock
/// every writer of `path` holds: then no other save is in progress. Returns how many were
/// removed.
pub fn remove_leftover_temps(path: &Path, owner: u32) -> usize {
    let Some(name) = path.file_name() else {
        return 0;
    };
    let prefix = format!(".{}.", name.to_string_lossy());
    let Ok(entries) = fs::read_dir(parent_dir(path)) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with(&prefix)
                && n.ends_with(".tmp")
                && e.file_type().is_ok_and(|t| t.is_file())
                && owned_by(e, owner)
        })
        .filter(|e| fs::remove_file(e.path()).is_ok())
        .count()
}

/// Whether a directory entry is user `owner`'s.
fn owned_by(entry: &fs::DirEntry, owner: u32) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        entry.metadata().is_ok_and(|m| m.uid() == owner)
    }
    #[cfg(not(unix))]
    {
        let _ = (entry, owner);
        true
    }
}

/// What to do when reading or writing a file failed with `err`, for the end of its
/// message.
pub fn advice(err: &io::Error) -> &'static str {
    match err.kind() {
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => {
            "free some space and try again"
        }
        io::ErrorKind::FileTooLarge => {
            "a file size limit was reached (`ulimit -f`): raise it and try again"
        }
        io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem => {
            "check the permissions of the file and its directory, or point --state (or ATC_STATE) elsewhere"
        }
        io::ErrorKind::NotADirectory => {
            "a file is where a directory should be: point --state (or ATC_STATE) elsewhere"
        }
        _ => "fix the cause and try again",
    }
}

/// Makes a write past the file size limit (`ulimit -f`) fail with EFBIG instead of
/// killing the process: SIGXFSZ's default action ends atc in the middle of a save, leaving
/// its temp file behind and saying nothing. Ignored, the write fails, the temp file is
/// removed and the failure is reported. Call once, first thing.
pub fn ignore_file_size_signal() {
    #[cfg(all(
        any(target_os = "linux", target_os = "macos"),
        not(any(target_arch = "mips", target_arch = "mips64"))
    ))]
    {
        const SIGXFSZ: std::ffi::c_int = 25;
        const SIG_IGN: usize = 1;
        unsafe extern "C" {
            fn signal(signum: std::ffi::c_int, handler: usize) -> usize;
        }
        // SAFETY: setting a signal's disposition to SIG_IGN installs no handler code and
        // touches no memory of ours; it fails only for an invalid signal number.
        unsafe { signal(SIGXFSZ, SIG_IGN) };
    }
}

/// `.<name>.<pid>.<n>.tmp` beside `path`: unique per process and call, hidden, and easy
/// to recognise as a leftover.
fn temp_path(path: &Path) -> io::Result<PathBuf> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let mut tmp = std::ffi::OsString::from(".");
    tmp.push(name);
    tmp.push(format!(
        ".{}.{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    Ok(parent_dir(path).join(tmp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bounded_read_takes_the_limit_whole_and_refuses_one_byte_more() {
        assert_eq!(read_at_most(&b"abcd"[..], 4).unwrap(), b"abcd");
        assert_eq!(read_at_most(&b""[..], 0).unwrap(), b"");
        let over = read_at_most(&b"abcde"[..], 4).unwrap_err();
        assert_eq!(over.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(over.to_string(), "longer than 4 bytes");
        let over = read_at_most(&[0; 4097][..], 4096).unwrap_err();
        assert_eq!(over.to_string(), "longer than 4096 bytes");
        let mib = vec![b'x'; 2 * 1024 * 1024 + 1];
        assert_eq!(
            read_at_most(&mib[..mib.len() - 1], 2 * 1024 * 1024)
                .unwrap()
                .len(),
            mib.len() - 1
        );
        let over = read_at_most(&mib[..], 2 * 1024 * 1024).unwrap_err();
        assert_eq!(over.to_string(), "longer than 2 MiB");
    }

    #[test]
    fn writes_whole_private_files_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.json");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "no temp file left behind");
        assert_ne!(temp_path(&path).unwrap(), temp_path(&path).unwrap());
        // A crashed writer's temp file is cleaned up by the next one; others stay.
        fs::write(dir.path().join(".jobs.json.999.0.tmp"), b"half").unwrap();
        fs::write(dir.path().join(".other.json.999.0.tmp"), b"keep").unwrap();
        #[cfg(unix)]
        let me = std::os::unix::fs::MetadataExt::uid(&fs::metadata(&path).unwrap());
        #[cfg(not(unix))]
        let me = 0;
        #[cfg(unix)]
        assert_eq!(
            remove_leftover_temps(&path, me + 1),
            0,
            "another user's stays"
        );
        assert_eq!(remove_leftover_temps(&path, me), 1);
        assert!(dir.path().join(".other.json.999.0.tmp").exists());
    }

    #[test]
    fn a_bare_file_name_lives_in_the_current_directory() {
        assert_eq!(parent_dir(Path::new("jobs.json")), Path::new("."));
        assert_eq!(
            parent_dir(Path::new("/state/jobs.json")),
            Path::new("/state")
        );
    }

    /// A program is written whole like the job file, but its owner may run it.
    #[cfg(unix)]
    #[test]
    fn a_program_is_written_for_its_owner_to_run() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("atc-tick");
        write_program(&path, b"#!/bin/sh\n").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"#!/bin/sh\n");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    /// Each save is stamped later than the version it replaces, whether that one's time
    /// is in the past (the save takes the clock's) or ahead of the clock (it takes one
    /// microsecond more): a fingerprint never comes back.
    #[test]
    fn a_save_is_stamped_later_than_the_version_it_replaces() {
        use std::time::{Duration, SystemTime};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.json");
        let modified = |path: &Path| fs::metadata(path).unwrap().modified().unwrap();
        let stamp = |at: SystemTime| {
            File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(at)
                .unwrap();
        };
        write_atomic(&path, b"one").unwrap();
        let past = SystemTime::now() - Duration::from_secs(3600);
        stamp(past);
        let before = SystemTime::now();
        write_atomic(&path, b"two").unwrap();
        assert!(
            modified(&path) >= before,
            "the clock's time, not the old one's"
        );
        let ahead = SystemTime::now() + Duration::from_secs(3600);
        stamp(ahead);
        write_atomic(&path, b"three").unwrap();
        assert_eq!(modified(&path), ahead + Duration::from_micros(1));
    }

    #[test]
    fn a_failure_is_told_what_to_do_by_its_kind() {
        use io::ErrorKind::*;
        for (kind, advice_given) in [
            (StorageFull, "free some space and try again"),
            (QuotaExceeded, "free some space and try again"),
            (
                FileTooLarge,
                "a file size limit was reached (`ulimit -f`): raise it and try again",
            ),
            (
                PermissionDenied,
                "check the permissions of the file and its directory, or point --state (or ATC_STATE) elsewhere",
            ),
            (
                ReadOnlyFilesystem,
                "check the permissions of the file and its directory, or point --state (or ATC_STATE) elsewhere",
            ),
            (
                NotADirectory,
                "a file is where a directory should be: point --state (or ATC_STATE) elsewhere",
            ),
            (Interrupted, "fix the cause and try again"),
        ] {
            assert_eq!(advice(&io::Error::from(kind)), advice_given, "{kind:?}");
        }
    }

    #[test]
    fn a_failed_write_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.json");
        write_atomic(&path, b"old").unwrap();
        let missing = dir.path().join("no-such-dir").join("jobs.json");
        assert!(write_atomic(&missing, b"new").is_err());
        assert_eq!(fs::read(&path).unwrap(), b"old");
    }

    /// Someone who can guess the temp file's name plants a link there to a file of ours:
    /// the write refuses to go through it, and leaves both the link and its target alone.
    #[cfg(unix)]
    #[test]
    fn a_link_planted_at_the_temp_path_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.json");
        write_atomic(&path, b"old").unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, b"precious").unwrap();
        let tmp = temp_path(&path).unwrap();
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        let err = write_via(&tmp, &path, b"new", 0o600).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
        assert_eq!(fs::read(&path).unwrap(), b"old");
        assert!(fs::symlink_metadata(&tmp).unwrap().file_type().is_symlink());
    }
}
