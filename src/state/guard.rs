//! Which files atc trusts: the job file, its directory and the sidecars beside it (the
//! locks and the event log). The one place that decides; `store`, `lock` and `journal`
//! open every one of those files through [`open`].
//!
//! The job file holds session ids and answers, and whoever can write it decides which
//! chat a result goes to. So atc uses only files that are plainly its user's:
//!
//! - never a symbolic link: the job file is replaced by rename, which would replace a
//!   link rather than the file it points to, and a link beside the job file could aim
//!   atc's writes at any file of the user's;
//! - only regular files, looked at before opening (opening a FIFO would block forever);
//! - owned by the user running atc and writable by nobody else. A job file that others
//!   can only *read* is made private (0600) by the next locked update, with one warning:
//!   editors and `cp` create 0644 files, refusing those would strand people, and the fix
//!   is safe (`Store::update`);
//! - in a directory owned by the user (or root) that nobody else can write, unless it is
//!   sticky like /tmp, where others cannot rename or remove our files. A directory that
//!   is a symbolic link is followed only when the link itself is the user's: one planted
//!   in /tmp belongs to whoever planted it.
//!
//! Not following links needs no `O_NOFOLLOW` (0o400000 on x86 Linux but 0o100000 on
//! arm64 Linux, 0x100 on macOS: a wrong constant silently means something else): a path
//! is looked at with `symlink_metadata`, then opened, and the opened file must be the
//! very inode that was looked at, or atc looks again; a missing file is created with
//! `create_new` (O_EXCL, which never follows a link). In a directory that passed
//! [`check_dir`], only the user (or root) can swap a file between the look and the open.

use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::path::Path;

use anyhow::Result;

use super::fsutil::{self, parent_dir};
use crate::exit::{Exit, Failure};

/// The kind of file, for the messages and for what is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    JobFile,
    Lock,
    Log,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::JobFile => "the job file",
            Role::Lock => "the lock file",
            Role::Log => "the event log",
        }
    }
}

/// What to do about a sidecar that is not atc's own.
const SIDECAR_FIX: &str = "move it aside (atc creates its own)";

/// How a file is opened. The writing ones create a missing file (0600).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    ReadWrite,
    Append,
}

/// A file that passed the checks.
#[derive(Debug)]
pub struct Opened {
    pub file: File,
    /// The mode of a job file that others can read (the next locked update fixes it).
    pub exposed: Option<u32>,
}

/// How often atc looks again at a file that changed between looking and opening (another
/// atc renaming a new job file into place) before giving up.
const ATTEMPTS: usize = 10;

/// Opens `path` as `role` after checking it and its directory. `None`: a file to `Read`
/// that does not exist (nor does its directory). Refusals exit 3; I/O errors exit 3 when
/// reading, 4 when writing.
pub fn open(path: &Path, role: Role, access: Access) -> Result<Option<Opened>> {
    let io_failure = |err: io::Error| -> anyhow::Error {
        let (exit, verb) = match access {
            Access::Read => (Exit::StateUnreadable, "read"),
            Access::ReadWrite | Access::Append => (Exit::StateUnwritable, "open"),
        };
        let what = format!(
            "cannot {verb} {} {}: {err}; {}",
            role.name(),
            path.display(),
            fsutil::advice(&err)
        );
        Failure::new(exit, what).into()
    };
    if !check_dir(parent_dir(path))? && access == Access::Read {
        return Ok(None);
    }
    let mut options = OpenOptions::new();
    match access {
        Access::Read => options.read(true),
        Access::ReadWrite => options.read(true).write(true),
        Access::Append => options.append(true),
    };
    for _ in 0..ATTEMPTS {
        match fs::symlink_metadata(path) {
            Ok(looked) => {
                let exposed = check_file(path, role, &looked)?;
                let file = match options.open(path) {
                    Ok(file) => file,
                    Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
                    Err(err) => return Err(io_failure(err)),
                };
                if same_file(&file.metadata().map_err(io_failure)?, &looked) {
                    return Ok(Some(Opened { file, exposed }));
                }
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                if access == Access::Read {
                    return Ok(None);
                }
                let mut create = options.clone();
                create.create_new(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut create, 0o600);
                match create.open(path) {
                    Ok(file) => {
                        return Ok(Some(Opened {
                            file,
                            exposed: None,
                        }));
                    }
                    Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
                    Err(err) => return Err(io_failure(err)),
                }
            }
            Err(err) => return Err(io_failure(err)),
        }
    }
    Err(io_failure(io::Error::other(
        "it kept changing while atc opened it; try again",
    )))
}

/// Checks the file at `path` without opening it, if there is one: for a sidecar that is
/// written only after the job file, so that a refusal comes before anything changed.
pub fn inspect(path: &Path, role: Role) -> Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) => check_file(path, role, &meta).map(drop),
        Err(_) => Ok(()),
    }
}

/// Opens (creating if missing) a file that is written.
pub fn open_to_write(path: &Path, role: Role, access: Access) -> Result<File> {
    debug_assert_ne!(access, Access::Read);
    let opened = open(path, role, access)?;
    Ok(opened.expect("a file opened to write is created").file)
}

fn refuse(message: String) -> anyhow::Error {
    Failure::new(Exit::StateUnreadable, message).into()
}

/// Checks the job file's directory. `false`: it does not exist (yet).
pub fn check_dir(dir: &Path) -> Result<bool> {
    let shown = dir.display();
    let link = match fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(err) => {
            return Err(refuse(format!(
                "cannot look at the job file's directory {shown}: {err}; {}",
                fsutil::advice(&err)
            )));
        }
    };
    let me = euid();
    let meta = if link.file_type().is_symlink() {
        let owner = owner(&link);
        if owner != me {
            return Err(refuse(format!(
                "the job file's directory {shown} is a symbolic link owned by uid {owner}, not by you (uid {me}): someone else may have planted it to capture your jobs; point --state (or ATC_STATE) at a directory of your own"
            )));
        }
        match fs::metadata(dir) {
            Ok(meta) => meta,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(err) => {
                return Err(refuse(format!(
                    "cannot follow the job file's directory {shown}: {err}; {}",
                    fsutil::advice(&err)
                )));
            }
        }
    } else {
        link
    };
    if !meta.is_dir() {
        return Err(refuse(format!(
            "the job file's directory {shown} is not a directory; point --state (or ATC_STATE) at a file in a directory"
        )));
    }
    let owner = owner(&meta);
    if owner != me && owner != 0 {
        return Err(refuse(format!(
            "the job file's directory {shown} is owned by uid {owner}, not by you (uid {me}) or root: its owner can replace your job file; keep the job file in a directory of your own (point --state or ATC_STATE there)"
        )));
    }
    let mode = mode(&meta);
    if mode & WRITE != 0 && mode & 0o1000 == 0 {
        return Err(refuse(format!(
            "the job file's directory {shown} is writable by {} (mode {:o}) and not sticky: they could replace the job file; `chmod 700 {shown}` (or keep the job file in a private directory)",
            who(mode, WRITE),
            mode & 0o7777
        )));
    }
    Ok(true)
}

/// Checks what `symlink_metadata` saw at `path`; the mode of a job file others can read.
fn check_file(path: &Path, role: Role, meta: &Metadata) -> Result<Option<u32>> {
    let shown = path.display();
    let name = role.name();
    let kind = meta.file_type();
    if kind.is_symlink() {
        let target =
            fs::read_link(path).map_or_else(|_| "?".to_owned(), |t| t.display().to_string());
        return Err(refuse(match role {
            Role::JobFile => format!(
                "the job file {shown} is a symbolic link (to {target}): atc replaces its job file atomically, renaming a new file over it, which would replace the link and not the file it points to; point --state (or ATC_STATE) at the real file"
            ),
            Role::Lock | Role::Log => format!(
                "{name} {shown} is a symbolic link (to {target}): atc never follows a link beside its job file, where someone could aim it at another file; {SIDECAR_FIX}"
            ),
        }));
    }
    if !kind.is_file() {
        let what = kind_of(meta);
        return Err(refuse(match role {
            Role::JobFile if meta.is_dir() => format!(
                "the job file {shown} is a directory, not a file; point --state (or ATC_STATE) at a file (for example {})",
                path.join("jobs.json").display()
            ),
            Role::JobFile => format!(
                "the job file {shown} is {what}, not a regular file; point --state (or ATC_STATE) at a regular file"
            ),
            Role::Lock | Role::Log => {
                format!("{name} {shown} is {what}, not a regular file; {SIDECAR_FIX}")
            }
        }));
    }
    let (me, owner) = (euid(), owner(meta));
    if owner != me {
        return Err(refuse(match role {
            Role::JobFile => format!(
                "the job file {shown} is owned by uid {owner}, not by you (uid {me}): atc only uses a job file of your own; if this one should be yours, `sudo chown {me} {shown}`, otherwise point --state (or ATC_STATE) elsewhere"
            ),
            Role::Lock | Role::Log => format!(
                "{name} {shown} is owned by uid {owner}, not by you (uid {me}): someone else may have planted it; {SIDECAR_FIX}"
            ),
        }));
    }
    let mode = mode(meta);
    if mode & WRITE != 0 {
        let why = match role {
            Role::JobFile => "whoever can write it can send results into other chats",
            Role::Lock | Role::Log => "whoever can write it can meddle with atc",
        };
        return Err(refuse(format!(
            "{name} {shown} is writable by {} (mode {:o}): {why}; make it private with `chmod 600 {shown}`",
            who(mode, WRITE),
            mode & 0o7777
        )));
    }
    Ok((role == Role::JobFile && mode & READ != 0).then_some(mode & 0o7777))
}

/// Read and write permission for the group and for others.
const READ: u32 = 0o044;
const WRITE: u32 = 0o022;

/// Who besides the owner has `permission` (`READ` or `WRITE`) in `mode`: "its group",
/// "others" or "group and others".
fn who(mode: u32, permission: u32) -> &'static str {
    let granted = mode & permission;
    match (granted & 0o070 != 0, granted & 0o007 != 0) {
        (true, true) => "group and others",
        (true, false) => "its group",
        _ => "others",
    }
}

/// Whom a job file of `mode` is readable by, for the warning that it was made private.
pub fn readable_by(mode: u32) -> &'static str {
    who(mode, READ)
}

#[cfg(unix)]
fn kind_of(meta: &Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let kind = meta.file_type();
    if kind.is_fifo() {
        "a FIFO (named pipe)"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "a device"
    } else if kind.is_dir() {
        "a directory"
    } else {
        "something else"
    }
}

#[cfg(unix)]
fn same_file(opened: &Metadata, looked: &Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    (opened.dev(), opened.ino()) == (looked.dev(), looked.ino())
}

#[cfg(unix)]
fn owner(meta: &Metadata) -> u32 {
    std::os::unix::fs::MetadataExt::uid(meta)
}

#[cfg(unix)]
fn mode(meta: &Metadata) -> u32 {
    std::os::unix::fs::MetadataExt::mode(meta)
}

/// The effective user id atc runs as.
#[cfg(unix)]
pub fn euid() -> u32 {
    unsafe extern "C" {
        fn geteuid() -> u32;
    }
    // SAFETY: geteuid takes nothing, cannot fail and only returns a number (uid_t is a
    // 32-bit unsigned integer on every Unix Rust supports).
    unsafe { geteuid() }
}

// Elsewhere there are no owners or modes to check: files are what they say they are.
#[cfg(not(unix))]
fn kind_of(_: &Metadata) -> &'static str {
    "not a regular file"
}

#[cfg(not(unix))]
fn same_file(_: &Metadata, _: &Metadata) -> bool {
    true
}

#[cfg(not(unix))]
fn owner(_: &Metadata) -> u32 {
    0
}

#[cfg(not(unix))]
fn mode(_: &Metadata) -> u32 {
    0o600
}

#[cfg(not(unix))]
pub fn euid() -> u32 {
    0
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn set_mode(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn refusal(path: &Path, role: Role, access: Access) -> String {
        let err = open(path, role, access).unwrap_err();
        assert_eq!(
            crate::exit::exit_for(&err),
            Exit::StateUnreadable,
            "{err:#}"
        );
        format!("{err:#}")
    }

    #[test]
    fn missing_files_are_none_to_read_and_created_private_to_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.json.lock");
        assert!(open(&path, Role::Lock, Access::Read).unwrap().is_none());
        let missing_dir = dir.path().join("nope").join("jobs.json");
        assert!(
            open(&missing_dir, Role::JobFile, Access::Read)
                .unwrap()
                .is_none()
        );
        open_to_write(&path, Role::Lock, Access::ReadWrite).unwrap();
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let again = open(&path, Role::Lock, Access::ReadWrite).unwrap().unwrap();
        assert_eq!(again.exposed, None);
    }

    #[test]
    fn sidecars_that_are_links_or_not_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, "precious").unwrap();
        let log = dir.path().join("jobs.json.log");
        std::os::unix::fs::symlink(&victim, &log).unwrap();
        let said = refusal(&log, Role::Log, Access::Append);
        assert!(said.contains("is a symbolic link"), "{said}");
        assert!(said.contains("move it aside"), "{said}");
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
        let lock = dir.path().join("jobs.json.lock");
        fs::create_dir(&lock).unwrap();
        let said = refusal(&lock, Role::Lock, Access::ReadWrite);
        assert!(
            said.contains("is a directory, not a regular file"),
            "{said}"
        );
        let said = refusal(Path::new("/dev/null"), Role::Log, Access::Append);
        assert!(
            said.contains("/dev/null is a device, not a regular file"),
            "{said}"
        );
    }

    #[test]
    fn writable_by_others_is_refused_and_readable_job_files_are_flagged() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.json");
        fs::write(&path, "{}").unwrap();
        set_mode(&path, 0o620);
        let said = refusal(&path, Role::JobFile, Access::Read);
        assert!(said.contains("writable by its group (mode 620)"), "{said}");
        assert!(
            said.contains(&format!("chmod 600 {}", path.display())),
            "{said}"
        );
        set_mode(&path, 0o644);
        let opened = open(&path, Role::JobFile, Access::Read).unwrap().unwrap();
        assert_eq!(opened.exposed, Some(0o644));
        assert_eq!(readable_by(0o644), "group and others");
        let lock = dir.path().join("jobs.json.lock");
        fs::write(&lock, "").unwrap();
        set_mode(&lock, 0o644);
        let opened = open(&lock, Role::Lock, Access::ReadWrite).unwrap().unwrap();
        assert_eq!(opened.exposed, None, "only the job file is flagged");
    }

    /// A file to write in a directory that is not there is an error that says so (the
    /// caller creates the directory first), never "no file"; a name atc cannot look at
    /// is an error too, never taken for a missing file (an empty job list).
    #[test]
    fn what_cannot_be_looked_at_is_an_error_not_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("gone").join("jobs.json.lock");
        let err = open(&lock, Role::Lock, Access::ReadWrite).unwrap_err();
        assert_eq!(crate::exit::exit_for(&err), Exit::StateUnwritable);
        let said = format!("{err:#}");
        assert!(said.starts_with("cannot open the lock file "), "{said}");
        assert!(said.contains("No such file or directory"), "{said}");
        let long = dir.path().join("j".repeat(300));
        let err = open(&long, Role::JobFile, Access::Read).unwrap_err();
        assert_eq!(crate::exit::exit_for(&err), Exit::StateUnreadable);
        let said = format!("{err:#}");
        assert!(said.starts_with("cannot read the job file "), "{said}");
        assert!(said.contains("File name too long"), "{said}");
    }

    /// A directory that is a link of the user's own is followed: to nothing, it is a
    /// directory not made yet; to a loop, an error that says it cannot be followed.
    #[test]
    fn a_directory_link_to_nothing_is_not_there_yet_and_a_loop_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let dangling = dir.path().join("state");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        assert!(!check_dir(&dangling).unwrap());
        let looped = dir.path().join("loop");
        std::os::unix::fs::symlink(&looped, &looped).unwrap();
        let said = format!("{:#}", check_dir(&looped).unwrap_err());
        assert!(
            said.starts_with(&format!(
                "cannot follow the job file's directory {}: ",
                looped.display()
            )),
            "{said}"
        );
    }

    #[test]
    fn directories_writable_by_others_pass_only_when_sticky() {
        let dir = tempfile::tempdir().unwrap();
        set_mode(dir.path(), 0o777);
        let said = format!("{:#}", check_dir(dir.path()).unwrap_err());
        assert!(
            said.contains("writable by group and others (mode 777) and not sticky"),
            "{said}"
        );
        assert!(
            said.contains(&format!("chmod 700 {}", dir.path().display())),
            "{said}"
        );
        set_mode(dir.path(), 0o1777);
        assert!(check_dir(dir.path()).unwrap());
        set_mode(dir.path(), 0o755);
        assert!(check_dir(dir.path()).unwrap());
        assert!(!check_dir(&dir.path().join("missing")).unwrap());
    }
}
