//! Where the job file is.

use std::path::PathBuf;

use super::env::Environment;
use super::file::ConfigFile;
use super::keys::Value;
use super::{Setting, Source};
use crate::exit::{Exit, Failure};

/// The job file: `--state`, else `ATC_STATE`, else `state` in the config file, else the
/// platform state dir (`~/.local/state/atc/jobs.json` on Linux; the local data dir where
/// there is none).
pub fn state_path(
    flag: Option<PathBuf>,
    env: &dyn Environment,
    file: &ConfigFile,
) -> Result<Setting<PathBuf>, Failure> {
    let given = match flag {
        Some(path) => Some((path, Source::Flag("--state"))),
        None => env
            .path("ATC_STATE")
            .map(|path| (path, Source::Env("ATC_STATE")))
            .or_else(|| match file.get("state") {
                Some(Setting {
                    value: Value::Path(path),
                    source,
                }) => Some((path, source)),
                _ => None,
            }),
    };
    if let Some((path, source)) = given {
        if path.as_os_str().is_empty() || path.is_dir() {
            return Err(Failure::new(
                Exit::Usage,
                format!(
                    "{source} {:?} must name a file, not a directory",
                    path.display().to_string()
                ),
            ));
        }
        return Ok(Setting {
            value: path,
            source,
        });
    }
    let value = default_job_file(env).ok_or_else(|| {
        Failure::new(
            Exit::StateUnwritable,
            "cannot find a home directory for the job file; pass --state FILE, set ATC_STATE or `atc config set state FILE`",
        )
    })?;
    Ok(Setting {
        value,
        source: Source::Default,
    })
}

/// The platform's job file, when there is a home directory.
pub(super) fn default_job_file(env: &dyn Environment) -> Option<PathBuf> {
    env.state_dir().map(|dir| dir.join("jobs.json"))
}

/// The config file's `state`, when it names one.
pub(super) fn configured_job_file(file: &ConfigFile) -> Option<PathBuf> {
    match file.get("state") {
        Some(Setting {
            value: Value::Path(path),
            ..
        }) => Some(path),
        _ => None,
    }
}

/// Whether two spellings name the same job file: equal, or both there and the same file
/// once links and `..` are resolved.
pub(super) fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    a == b
        || matches!(
            (std::fs::canonicalize(a), std::fs::canonicalize(b)),
            (Ok(a), Ok(b)) if a == b
        )
}
