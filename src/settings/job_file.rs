//! Where the job file is.

use std::path::PathBuf;

use super::env::Environment;
use super::{Setting, Source};
use crate::exit::{Exit, Failure};

/// The job file: `--state`, else `ATC_STATE`, else the platform state dir
/// (`~/.local/state/atc/jobs.json` on Linux; the local data dir where there is none).
pub(super) fn state_path(
    flag: Option<PathBuf>,
    env: &dyn Environment,
) -> Result<Setting<PathBuf>, Failure> {
    let given = match flag {
        Some(path) => Some((path, Source::Flag("--state"))),
        None => env
            .path("ATC_STATE")
            .map(|path| (path, Source::Env("ATC_STATE"))),
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
    let dirs = directories::ProjectDirs::from("", "", "atc").ok_or_else(|| {
        Failure::new(
            Exit::StateUnwritable,
            "cannot find a home directory for the job file; pass --state FILE or set ATC_STATE",
        )
    })?;
    let dir = dirs.state_dir().unwrap_or_else(|| dirs.data_local_dir());
    Ok(Setting {
        value: dir.join("jobs.json"),
        source: Source::Default,
    })
}
