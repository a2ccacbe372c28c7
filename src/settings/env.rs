//! The process environment (or a test's map): the one place atc reads variables and the
//! home directory from.

use std::path::PathBuf;

use crate::exit::{Exit, Failure};

/// A source of environment variables and the home directory (the process, or a test's map).
pub trait Environment {
    fn var(&self, name: &str) -> Option<String>;
    fn home(&self) -> Option<PathBuf>;
    /// Whether the variable is unset or holds UTF-8 (what `var` can return).
    fn is_unicode(&self, _name: &str) -> bool {
        true
    }
    /// A path from the environment, taken as bytes: a path need not be UTF-8.
    fn path(&self, name: &str) -> Option<PathBuf> {
        self.var(name).map(PathBuf::from)
    }
    /// atc's own state directory, where the default job file is: the platform's
    /// (`$XDG_STATE_HOME/atc`, `~/.local/state/atc` on Linux; the local data dir where
    /// there is none), for this process.
    fn state_dir(&self) -> Option<PathBuf> {
        let dirs = directories::ProjectDirs::from("", "", "atc")?;
        Some(
            dirs.state_dir()
                .unwrap_or_else(|| dirs.data_local_dir())
                .to_path_buf(),
        )
    }
}

/// The variables atc reads as text. One that is not UTF-8 is refused (exit 2), never
/// taken as unset: an `ATC_BASE_URL` in Latin-1 must not quietly become the default.
/// (`ATC_STATE`, `ATC_CONFIG` and `QWENPAW_WORKING_DIR` are paths, taken as bytes.)
pub const TEXT_VARS: [&str; 20] = [
    "ATC_BASE_URL",
    "ATC_NO_BATCH",
    "ATC_MAX_AGE",
    "ATC_BUSY_DEADLINE",
    "ATC_BUSY_RETRY",
    "ATC_KEEP",
    "ATC_MAX_STRIKES",
    "ATC_CONCURRENCY",
    "ATC_HTTP_TIMEOUT",
    "ATC_TURN_TIMEOUT",
    "ATC_AUTO_WATCH",
    "ATC_SESSION_ID",
    "ATC_USER_ID",
    "ATC_CHANNEL",
    "ATC_AGENT_ID",
    "ATC_BEARER_TOKEN",
    "ATC_ALLOW_INSECURE_REMOTE",
    "QWENPAW_RUNTIME_INTERNAL_TOKEN",
    "QWENPAW_RUNTIME_API_URL",
    "QWENPAW_RUNTIME_ID",
];

/// Refuses (exit 2) the first text variable whose value is not UTF-8, naming it.
pub(super) fn check_unicode(env: &dyn Environment) -> Result<(), Failure> {
    match TEXT_VARS.iter().find(|name| !env.is_unicode(name)) {
        Some(name) => Err(Failure::new(
            Exit::Usage,
            format!("{name} is not valid UTF-8; set it to plain text (or unset it)"),
        )),
        None => Ok(()),
    }
}

/// The real process environment. Empty variables count as unset.
pub struct ProcessEnv;

impl Environment for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.trim().is_empty())
    }

    fn home(&self) -> Option<PathBuf> {
        directories::BaseDirs::new().map(|dirs| dirs.home_dir().to_path_buf())
    }

    fn is_unicode(&self, name: &str) -> bool {
        !matches!(std::env::var(name), Err(std::env::VarError::NotUnicode(_)))
    }

    fn path(&self, name: &str) -> Option<PathBuf> {
        std::env::var_os(name)
            .filter(|v| !v.to_string_lossy().trim().is_empty())
            .map(PathBuf::from)
    }
}

/// Another process's environment, as `/proc/<pid>/environ` lists it (`NAME=value`): what
/// atc would resolve there (`atc doctor` asks it of the QwenPaw server, whose kicks run
/// `atc tick` with it). Its default job file is the XDG one (that file is only on Linux).
pub struct VarsEnv {
    vars: Vec<(String, String)>,
}

impl VarsEnv {
    pub fn new<S: AsRef<str>>(entries: impl IntoIterator<Item = S>) -> VarsEnv {
        VarsEnv {
            vars: entries
                .into_iter()
                .filter_map(|kv| {
                    let (name, value) = kv.as_ref().split_once('=')?;
                    Some((name.to_owned(), value.to_owned()))
                })
                .collect(),
        }
    }
}

impl Environment for VarsEnv {
    fn var(&self, name: &str) -> Option<String> {
        self.vars
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .filter(|v| !v.trim().is_empty())
    }

    fn home(&self) -> Option<PathBuf> {
        self.var("HOME").map(PathBuf::from)
    }

    fn state_dir(&self) -> Option<PathBuf> {
        let base = self
            .path("XDG_STATE_HOME")
            .filter(|d| d.is_absolute())
            .or_else(|| self.home().map(|h| h.join(".local/state")))?;
        Some(base.join("atc"))
    }
}
