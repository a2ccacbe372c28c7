//! The one exit-code table, shared by every command (documented in the README and the
//! `--help` footer). Errors that must end with a specific code carry it as a [`Failure`]
//! somewhere in their `anyhow` chain; everything else exits [`Exit::Refused`].

use std::fmt;

/// A documented process exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// 0: it worked.
    Ok = 0,
    /// 1: refused or not found (and, for `wait`, the task failed).
    Refused = 1,
    /// 2: usage: a bad task id, URL, flag or value.
    Usage = 2,
    /// 3: the job file is unreadable, corrupt or from a newer atc.
    StateUnreadable = 3,
    /// 4: the job file or its directory cannot be written.
    StateUnwritable = 4,
    /// 5: the server is unreachable or rejected our credentials (foreground commands).
    Server = 5,
    /// 6: the task is lost: the server answered 404 for it.
    Lost = 6,
    /// 75: another atc process holds the job-file lock (EX_TEMPFAIL).
    LockBusy = 75,
    /// 124: a wait timed out (as timeout(1)).
    TimedOut = 124,
}

impl Exit {
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// The `--help` footer: the same table, for people.
pub const HELP_TABLE: &str = "\
Exit codes:
  0    ok
  1    refused or not found (for `wait`: the task failed)
  2    usage: bad task id, URL, flag or value
  3    job file unreadable, corrupt or from a newer atc (left untouched)
  4    cannot write the job file or its directory
  5    server unreachable or credentials rejected (foreground commands)
  6    task lost: the server has no record of it (404)
  75   job file locked by another atc process (try again)
  124  a wait timed out";

/// An error that ends the process with a specific exit code.
#[derive(Debug)]
pub struct Failure {
    pub exit: Exit,
    pub message: String,
}

impl Failure {
    pub fn new(exit: Exit, message: impl Into<String>) -> Failure {
        Failure {
            exit,
            message: message.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// Returns early with a [`Failure`] carrying `exit`.
#[macro_export]
macro_rules! fail {
    ($exit:expr, $($arg:tt)*) => {
        return Err(anyhow::Error::new($crate::exit::Failure::new($exit, format!($($arg)*))))
    };
}

/// The exit code an error asks for: the outermost [`Failure`] wins.
pub fn exit_for(err: &anyhow::Error) -> Exit {
    // `downcast_ref` on the error itself also finds a Failure attached with `.context`,
    // which walking the chain of `dyn Error`s would not.
    err.downcast_ref::<Failure>()
        .or_else(|| {
            err.chain()
                .find_map(|cause| cause.downcast_ref::<Failure>())
        })
        .map_or(Exit::Refused, |failure| failure.exit)
}

/// Attaches an exit code and a one-line explanation to an error, keeping its cause
/// (printed as `explanation: cause`).
pub trait OrExit<T> {
    fn or_exit(self, exit: Exit, message: impl FnOnce() -> String) -> anyhow::Result<T>;
}

impl<T, E> OrExit<T> for Result<T, E>
where
    E: Into<anyhow::Error>,
{
    fn or_exit(self, exit: Exit, message: impl FnOnce() -> String) -> anyhow::Result<T> {
        self.map_err(|err| err.into().context(Failure::new(exit, message())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_carry_their_exit_code_through_context() {
        let io = std::io::Error::other("disk full");
        let err = Err::<(), _>(io)
            .or_exit(Exit::StateUnwritable, || "cannot write x".into())
            .unwrap_err();
        assert_eq!(exit_for(&err), Exit::StateUnwritable);
        assert_eq!(format!("{err:#}"), "cannot write x: disk full");
        let plain = anyhow::anyhow!("something else");
        assert_eq!(exit_for(&plain), Exit::Refused);
        let wrapped =
            anyhow::Error::new(Failure::new(Exit::LockBusy, "busy")).context("while saving");
        assert_eq!(exit_for(&wrapped), Exit::LockBusy);
    }
}
