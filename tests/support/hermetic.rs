//! The one clean environment every test runs atc in (the fast suite's `TestEnv` and the
//! end-to-end harness's `Atc`): the outer environment minus everything that could steer
//! atc or QwenPaw (`ATC_*`, `QWENPAW_*`, `XDG_*`, `HOME`, `RUST_BACKTRACE`), plus a HOME
//! and XDG dirs of the test's own.

use std::ffi::OsString;
use std::path::Path;

/// A loopback address where nothing listens (port 9, "discard", is privileged and never
/// handed out by `bind(…:0)`): the default base URL of every hermetic run, so no test ever
/// reaches a server it did not start. `nowhere_is_nowhere` in tests/it/commands/cli.rs checks it.
pub const NOWHERE: &str = "http://127.0.0.1:9";

/// The variables of a clean environment with `home` as HOME. Use with `env_clear()`.
pub fn vars(home: &Path) -> Vec<(OsString, OsString)> {
    let steering = |name: &str| {
        name.starts_with("ATC_")
            || name.starts_with("QWENPAW_")
            || name.starts_with("XDG_")
            || name == "HOME"
            || name == "RUST_BACKTRACE"
            || name == "NO_COLOR"
    };
    let mut vars: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(name, _)| !steering(&name.to_string_lossy()))
        .collect();
    for (name, dir) in [
        ("HOME", home.to_path_buf()),
        ("XDG_STATE_HOME", home.join(".local/state")),
        ("XDG_DATA_HOME", home.join(".local/share")),
        ("XDG_CONFIG_HOME", home.join(".config")),
        ("XDG_CACHE_HOME", home.join(".cache")),
    ] {
        vars.push((name.into(), dir.into()));
    }
    vars.push(("NO_COLOR".into(), "1".into()));
    vars
}
