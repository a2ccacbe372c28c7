//! `atc paths`: where atc keeps its files for this environment's settings, named by the
//! same definitions every command opens them by (`state::store`, `state::journal`), so
//! that atc's QwenPaw plugin asks instead of working them out again.

use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::Serialize;

use crate::cmd::{emit, print_json};
use crate::settings::{Output, Paths};
use crate::state::journal;
use crate::state::store::Store;

/// The files, in the order `atc paths` lists them; the keys are the JSON's.
#[derive(Debug, Serialize)]
pub struct Where {
    pub job_file: PathBuf,
    pub job_dir: PathBuf,
    pub config_file: Option<PathBuf>,
    pub config_file_exists: bool,
    pub lock: PathBuf,
    pub tick_lock: PathBuf,
    pub marks: PathBuf,
    pub cadence: PathBuf,
    pub log: PathBuf,
    /// What of the config file was left out, one line each: a tick refuses the file until
    /// it is fixed (the plugin says so in QwenPaw's log).
    pub config_skipped: Vec<String>,
    /// Whether automatic watches watch here (the `auto-watch` knob).
    pub auto_watch: bool,
}

impl Where {
    pub fn of(paths: &Paths) -> Where {
        let store = Store::new(paths.state.value.clone());
        Where {
            job_file: store.path().to_path_buf(),
            job_dir: store
                .path()
                .parent()
                .filter(|dir| !dir.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .to_path_buf(),
            config_file: paths.config_file.clone(),
            config_file_exists: paths.config_file_exists,
            lock: store.lock_path(),
            tick_lock: store.tick_lock_path(),
            marks: store.tick_again_path(),
            cadence: store.cadence_path(),
            log: journal::path(store.path()),
            config_skipped: paths.config_skipped.clone(),
            auto_watch: paths.auto_watch,
        }
    }

    /// One `name: path` line each.
    fn lines(&self) -> String {
        let shown = |path: &Path| path.display().to_string();
        let rows = [
            ("job_file", shown(&self.job_file)),
            ("job_dir", shown(&self.job_dir)),
            (
                "config_file",
                self.config_file
                    .as_deref()
                    .map_or_else(|| "(none: no home directory)".to_owned(), shown),
            ),
            ("config_file_exists", self.config_file_exists.to_string()),
            ("lock", shown(&self.lock)),
            ("tick_lock", shown(&self.tick_lock)),
            ("marks", shown(&self.marks)),
            ("cadence", shown(&self.cadence)),
            ("log", shown(&self.log)),
            ("auto_watch", self.auto_watch.to_string()),
        ];
        let mut lines: String = rows
            .iter()
            .map(|(name, value)| format!("{name}: {value}\n"))
            .collect();
        for skipped in &self.config_skipped {
            lines.push_str(&format!("config_skipped: {skipped}\n"));
        }
        lines
    }
}

pub fn run(paths: &Paths, out: Output) -> Result<()> {
    let found = Where::of(paths);
    if out.json {
        print_json(&found)
    } else if out.quiet {
        Ok(())
    } else {
        emit(&found.lines())
    }
}
