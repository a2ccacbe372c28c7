//! The one exit-code table, shared by every command (documented in GUIDE.md, atc(1) and the
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
    /// 6: the task is lost, or unknown: the server answered 404 for it (`wait`, and
    /// `watch` of a task the server never had).
    Lost = 6,
    /// 75: another atc process holds the job-file lock (EX_TEMPFAIL).
    LockBusy = 75,
    /// 78: the config file is unusable: unreadable, not TOML, an unknown key, a bad value
    /// (EX_CONFIG).
    Config = 78,
    /// 124: a wait timed out (as timeout(1)).
    TimedOut = 124,
}

impl Exit {
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// Every code with what it means, for people: the `--help` footer and the man page's
/// EXIT STATUS are made from it.
pub const MEANINGS: [(Exit, &str); 10] = [
    (Exit::Ok, "ok"),
    (
        Exit::Refused,
        "refused or not found (wait: the task failed; doctor: a check failed)",
    ),
    (Exit::Usage, "usage: bad task id, URL, flag or value"),
    (
        Exit::StateUnreadable,
        "job file unreadable, corrupt or from a newer atc (left untouched)",
    ),
    (
        Exit::StateUnwritable,
        "cannot write the job file or its directory",
    ),
    (
        Exit::Server,
        "server unreachable or credentials rejected (foreground commands)",
    ),
    (
        Exit::Lost,
        "task lost or unknown: the server has no record of it (404; wait, watch)",
    ),
    (
        Exit::LockBusy,
        "job file locked by another atc process (try again)",
    ),
    (
        Exit::Config,
        "config file unusable: not TOML, an unknown key or a bad value (the message names the file and the key)",
    ),
    (Exit::TimedOut, "wait timed out (--timeout)"),
];

/// The `--help` footer: the same table.
pub fn help_table() -> String {
    let mut text = "Exit codes:".to_owned();
    for (exit, meaning) in MEANINGS {
        text.push_str(&format!("\n  {:<4} {meaning}", exit.code()));
    }
    text
}

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

    /// Every code is documented once, in order.
    #[test]
    fn the_table_lists_every_code() {
        // A new variant fails to compile here until it is added to the list below.
        let _exhaustive = |exit: Exit| match exit {
            Exit::Ok
            | Exit::Refused
            | Exit::Usage
            | Exit::StateUnreadable
            | Exit::StateUnwritable
            | Exit::Server
            | Exit::Lost
            | Exit::LockBusy
            | Exit::Config
            | Exit::TimedOut => (),
        };
        for exit in [
            Exit::Ok,
            Exit::Refused,
            Exit::Usage,
            Exit::StateUnreadable,
            Exit::StateUnwritable,
            Exit::Server,
            Exit::Lost,
            Exit::LockBusy,
            Exit::Config,
            Exit::TimedOut,
        ] {
            let listed = MEANINGS.iter().filter(|(e, _)| *e == exit).count();
            assert_eq!(listed, 1, "{exit:?}");
        }
        let codes: Vec<u8> = MEANINGS.iter().map(|(e, _)| e.code()).collect();
        assert!(codes.is_sorted(), "{codes:?}");
        assert!(help_table().contains("\n  124  wait timed out"));
    }
}
