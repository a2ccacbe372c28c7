//! `atc doctor`'s QwenPaw-side checks: is atc's plugin installed and loaded, which agents
//! have its tools enabled, can the running server find `atc` on its PATH, and is the
//! seed plugin (Agent Task Callback) still installed next to it (double deliveries).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::install::{self, PLUGIN_ID, SEED_ID, TOOLS};
use crate::qwenpaw::Client;
use crate::settings::Doctor;

use super::check::{Check, bad, ok};

pub fn checks(client: &Client, doctor: &Doctor) -> Vec<Check> {
    // No QwenPaw working dir here (or not this user's): nothing to say about QwenPaw.
    let Some(wd) = doctor.qwenpaw_working_dir.as_ref().filter(|wd| wd.is_dir()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let installed = wd
        .join("plugins")
        .join(PLUGIN_ID)
        .join("plugin.json")
        .is_file();
    let loaded = if installed {
        plugin_loaded(client, &doctor.base_url.value)
    } else {
        None
    };
    out.push(match (installed, loaded) {
        (true, Some(true)) => ok(
            "plugin",
            format!("atc's plugin is loaded by the QwenPaw at {}", doctor.base_url.value),
        ),
        (true, Some(false)) => bad(
            "plugin",
            format!(
                "atc's plugin is installed in {} but the server has not loaded it",
                wd.display()
            ),
            "restart QwenPaw (or run `atc qwenpaw install` again while it runs); its log says why a plugin failed to load".to_owned(),
        ),
        (true, None) => ok(
            "plugin",
            format!(
                "atc's plugin is installed in {} (the server does not say whether it loaded it)",
                wd.display()
            ),
        ),
        (false, _) => ok(
            "plugin",
            format!(
                "atc's plugin is not installed in {} (agents use the shell and the atc-callback skill; `atc qwenpaw install` gives them the tools)",
                wd.display()
            ),
        ),
    });
    if loaded == Some(true)
        && let Some(console) = console(client, &doctor.base_url.value)
    {
        out.push(console);
    }
    if installed {
        out.push(tools_enabled(wd));
        out.push(kicks(wd, doctor));
    }
    let server = port_of(&doctor.base_url.value).and_then(server_process);
    out.push(server_path(wd, &doctor.base_url.value, server.as_ref()));
    if let Some(server) = &server {
        out.push(super::config::server(doctor, server.pid, &server.environ));
    }
    out.push(seed(wd, doctor.home.as_deref()));
    out
}

/// `GET /plugins/atc/status`: Some(loaded), or None when the server does not say.
fn plugin_loaded(client: &Client, base: &str) -> Option<bool> {
    let answer = client.plugin_status(base, PLUGIN_ID).ok()?;
    match answer.status {
        200 => {
            let body: Value = serde_json::from_str(answer.body.as_deref().ok()?).ok()?;
            Some(body["loaded"] == true)
        }
        404 if answer.is_json() => Some(false),
        _ => None,
    }
}

/// Does the server offer the plugin's console bundle to the web console (`GET
/// /frontend_plugin` lists the loaded plugins with their `frontend_entry`)? None when it
/// does not say.
fn console(client: &Client, base: &str) -> Option<Check> {
    let answer = client.frontend_plugins(base).ok()?;
    if answer.status == 404 && answer.is_json() {
        return Some(ok(
            "console",
            "this QwenPaw loads no frontend plugins (GET /api/frontend_plugin: 404): an open console chat shows a delivered result after a reload".to_owned(),
        ));
    }
    if answer.status != 200 {
        return None;
    }
    let listed: Value = serde_json::from_str(answer.body.as_deref().ok()?).ok()?;
    let entry = listed
        .as_array()?
        .iter()
        .find(|p| p["id"] == PLUGIN_ID)?
        .get("frontend_entry")
        .cloned()
        .unwrap_or(Value::Null);
    Some(if entry == install::FRONTEND {
        ok(
            "console",
            format!(
                "atc's frontend is loaded ({}, which every console page imports at start-up): an open chat shows a result atc delivers, and its reply, once that turn ends; reload console pages opened before the plugin loaded",
                install::FRONTEND
            ),
        )
    } else {
        bad(
            "console",
            format!(
                "the server loaded atc's plugin without its console frontend (frontend entry {entry}): an open console chat shows a delivered result only after a reload"
            ),
            "`atc qwenpaw install` (or this atc's plugin zip) installs the plugin with it; then reload open console pages".to_owned(),
        )
    })
}

/// Which agents have the plugin's tools enabled in their agent.json.
fn tools_enabled(wd: &Path) -> Check {
    let agents = agents(wd);
    let on: Vec<&str> = agents
        .iter()
        .filter(|(_, dir)| {
            std::fs::read_to_string(dir.join("agent.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .is_some_and(|v| {
                    TOOLS
                        .iter()
                        .all(|t| v["tools"]["builtin_tools"][t]["enabled"] == true)
                })
        })
        .map(|(id, _)| id.as_str())
        .collect();
    if on.is_empty() {
        bad(
            "plugin tools",
            "no agent has the plugin's tools enabled (QwenPaw installs plugin tools switched off)"
                .to_owned(),
            "`atc qwenpaw install --all` (or --agents a,b) enables them".to_owned(),
        )
    } else {
        let off: Vec<&str> = agents
            .iter()
            .map(|(id, _)| id.as_str())
            .filter(|id| !on.contains(id))
            .collect();
        ok(
            "plugin tools",
            if off.is_empty() {
                format!("enabled for every agent: {}", on.join(", "))
            } else {
                format!(
                    "enabled for {}; not for {} (`atc qwenpaw install --agents …` adds them)",
                    on.join(", "),
                    off.join(", ")
                )
            },
        )
    }
}

/// Is the plugin's end-of-turn hook installed (the plugin on disk is this atc's), and do
/// its kicks arrive (the last kicked tick's time, from the tick lock's heartbeat)?
fn kicks(wd: &Path, doctor: &Doctor) -> Check {
    // The hook lives in the package beside the entry: every file must be this atc's.
    let folder = wd.join("plugins").join(PLUGIN_ID);
    let stale = install::PLUGIN_FILES.iter().find(|(name, text)| {
        std::fs::read(folder.join(name)).ok().as_deref() != Some(text.as_bytes())
    });
    if let Some((name, _)) = stale {
        return bad(
            "kicks",
            format!(
                "{} is not this atc's plugin (an older one may lack the end-of-turn hook)",
                folder.join(name).display()
            ),
            "`atc qwenpaw install` again (no restart needed while QwenPaw runs)".to_owned(),
        );
    }
    let tick_lock = crate::state::lock::sidecar(&doctor.state.value, "tick.lock");
    let beat = crate::pass::Heartbeat::read(&tick_lock);
    ok(
        "kicks",
        match beat.last_kick_at {
            Some(at) => format!(
                "the end-of-turn hook is installed; the last tick a turn's end started ran {} ago",
                crate::time::age(at.elapsed_at(crate::time::Timestamp::now()))
            ),
            None => "the end-of-turn hook is installed; no turn's end has started a tick yet (it starts one only while watches wait, and needs atc where the server finds it: see the atc for the server line)".to_owned(),
        },
    )
}

fn agents(wd: &Path) -> Vec<(String, PathBuf)> {
    let Some(config) = std::fs::read_to_string(wd.join("config.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
    else {
        return Vec::new();
    };
    config["agents"]["profiles"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(id, p)| {
            let dir = p["workspace_dir"]
                .as_str()
                .map(PathBuf::from)
                .unwrap_or_else(|| wd.join("workspaces").join(id));
            (id.clone(), dir)
        })
        .collect()
}

/// The seed plugin, or a second copy of the tools, next to ours; or the seed's state file
/// still holding jobs nobody moved to atc (atc's plugin stands by while it does).
fn seed(wd: &Path, home: Option<&Path>) -> Check {
    match install::rivals(wd).first() {
        None => {
            let beside = wd.join("agent-task-callback.json");
            let state = match home {
                Some(home) if !beside.exists() => home.join(".qwenpaw/agent-task-callback.json"),
                _ => beside,
            };
            let owed = crate::cmd::import::read_plugin_state(&state)
                .map(|text| crate::plugin::still_owed(&text))
                .unwrap_or(0);
            if owed == 0 {
                return ok(
                    "seed plugin",
                    "the Agent Task Callback plugin is not installed".to_owned(),
                );
            }
            bad(
                "seed plugin",
                format!(
                    "the Agent Task Callback plugin is gone, but its state file {} still holds {owed} pending job{} nobody moved to atc: atc's plugin stands by (delivers nothing) until they are",
                    state.display(),
                    if owed == 1 { "" } else { "s" }
                ),
                "`atc qwenpaw install --replace-agent-task-callback` imports them and marks them handed over".to_owned(),
            )
        }
        Some(rival) if rival.id == SEED_ID => bad(
            "seed plugin",
            format!(
                "the Agent Task Callback plugin is still installed at {}: it watches and delivers its tasks, and atc's plugin stands by (no auto-watch, no kicks, no cadence; its tools say so) so that nothing arrives twice",
                rival.dir.display()
            ),
            "`atc qwenpaw install --replace-agent-task-callback` removes it, moves its jobs to atc and enables atc's tools for the same agents, in an order in which the two never both deliver".to_owned(),
        ),
        Some(rival) => bad(
            "seed plugin",
            format!(
                "{} (plugin {:?}) registers atc's tools too: two copies race",
                rival.dir.display(),
                rival.id
            ),
            format!(
                "move it out of {} (QwenPaw loads every folder there)",
                wd.join("plugins").display()
            ),
        ),
    }
}

const FINDS: &str = "atc for the server";

/// Can the running QwenPaw server (its plugin, and so its tools and kicks) find `atc`?
/// Looked for where the plugin looks, in its order: next to the server's interpreter (the
/// interpreter's directory, then a venv's `bin/` the interpreter is a symlink into), under
/// `$QWENPAW_PLUGIN_SITE/bin`, then `ATC_BIN`, then its `PATH`, then `~/.cargo/bin`. Read
/// from /proc/<pid>/cmdline and /proc/<pid>/environ of a `qwenpaw app` process when this
/// user can read them; elsewhere (no /proc) it cannot tell.
fn server_path(wd: &Path, base: &str, server: Option<&ServerProcess>) -> Check {
    // The atc the plugin carries (from the zip) comes first, server process or not.
    let bundled = wd
        .join("plugins")
        .join(PLUGIN_ID)
        .join(install::BUNDLED_ATC);
    let mut skipped = None;
    if bundled.is_file() {
        let built_for = std::fs::read_to_string(
            wd.join("plugins")
                .join(PLUGIN_ID)
                .join(install::BUNDLED_PLATFORM),
        )
        .map(|t| t.trim().to_owned())
        .unwrap_or_default();
        let here = install::platform();
        if built_for.is_empty() || built_for == here {
            return ok(
                FINDS,
                format!(
                    "the server finds {} (the atc its plugin carries, first in its order)",
                    bundled.display()
                ),
            );
        }
        skipped = Some(bad(
            FINDS,
            format!(
                "the atc the plugin carries ({}) is built for {built_for}, and this machine is {here}: the plugin skips it (QwenPaw's log says so)",
                bundled.display()
            ),
            "make the zip on this machine (`atc qwenpaw zip`) and install it with `qwenpaw plugin install --force <zip>`, or install atc next to the server's interpreter".to_owned(),
        ));
    }
    let found = server_path_outside(base, server);
    match skipped {
        // Said whether or not another atc is found: the zip is for another platform.
        Some(mut skipped) => {
            if found.ok {
                skipped
                    .detail
                    .push_str(&format!("; it runs another: {}", found.detail));
            }
            skipped
        }
        None => found,
    }
}

/// `server_path` past the atc the plugin carries: where pip, `ATC_BIN`, `PATH` or cargo
/// put one.
fn server_path_outside(base: &str, server: Option<&ServerProcess>) -> Check {
    let Some(server) = server else {
        return ok(
            FINDS,
            if cfg!(target_os = "linux") {
                format!(
                    "cannot tell: no `qwenpaw app` process serving {base} whose environment this user can read"
                )
            } else {
                "cannot tell on this system: atc reads a server's environment from /proc, which only Linux has".to_owned()
            },
        );
    };
    let pid = server.pid;
    let var = |name: &str| {
        server
            .environ
            .iter()
            .find_map(|kv| kv.strip_prefix(name).and_then(|r| r.strip_prefix('=')))
            .map(str::to_owned)
    };
    let mut looked = Vec::new();
    for (dir, why) in interpreter_dirs(&server.interpreter, var("QWENPAW_PLUGIN_SITE")) {
        let atc = dir.join("atc");
        if is_executable(&atc) {
            return ok(
                FINDS,
                format!("the server (pid {pid}) finds {} ({why})", atc.display()),
            );
        }
        looked.push(format!("{} ({why})", dir.display()));
    }
    if let Some(bin) = var("ATC_BIN").filter(|b| !b.is_empty()) {
        return if is_executable(Path::new(&bin)) {
            ok(FINDS, format!("the server (pid {pid}) has ATC_BIN={bin}"))
        } else {
            bad(
                FINDS,
                format!(
                    "the server (pid {pid}) has ATC_BIN={bin}, which is not an executable file"
                ),
                "point ATC_BIN at the atc binary in the server's environment and restart it"
                    .to_owned(),
            )
        };
    }
    let path = var("PATH").unwrap_or_default();
    let home = var("HOME").map(PathBuf::from);
    let found = std::env::split_paths(&path)
        .map(|dir| dir.join("atc"))
        .find(|p| is_executable(p))
        .or_else(|| {
            home.map(|h| h.join(".cargo/bin/atc"))
                .filter(|p| is_executable(p))
        });
    let python = server
        .interpreter
        .as_ref()
        .map_or("<the server's python>".to_owned(), |p| {
            p.display().to_string()
        });
    match found {
        Some(atc) => ok(
            FINDS,
            format!("the server (pid {pid}) finds {} (its PATH)", atc.display()),
        ),
        None => bad(
            FINDS,
            format!(
                "the server (pid {pid}) cannot find atc: not where pip puts it for the server ({}), no ATC_BIN, not on its PATH ({path}), no ~/.cargo/bin/atc; its tools and kicks fail",
                if looked.is_empty() {
                    "unknown".to_owned()
                } else {
                    looked.join(", ")
                }
            ),
            format!(
                "install the plugin zip made on this machine (`atc qwenpaw zip`, then `qwenpaw plugin install --force <zip>`): it carries atc, which the plugin runs first; or put atc next to the server's interpreter ({python}'s directory: pip or a copy), where the plugin finds it at its next call (no restart); or set ATC_BIN in the server's environment and restart it"
            ),
        ),
    }
}

/// Where pip puts atc for a server run by `interpreter`, in the plugin's order: its
/// directory; the `bin/` of a virtualenv it is a symlink into (a `pyvenv.cfg` one level
/// up); `$QWENPAW_PLUGIN_SITE/bin`.
fn interpreter_dirs(
    interpreter: &Option<PathBuf>,
    plugin_site: Option<String>,
) -> Vec<(PathBuf, &'static str)> {
    let mut dirs: Vec<(PathBuf, &'static str)> = Vec::new();
    if let Some(python) = interpreter {
        if let Some(dir) = python.parent() {
            dirs.push((dir.to_path_buf(), "next to its interpreter"));
        }
        let mut hop = python.clone();
        for _ in 0..8 {
            let Ok(target) = std::fs::read_link(&hop) else {
                break;
            };
            // A relative link is from the link's directory (an absolute one replaces it).
            hop = match hop.parent() {
                Some(dir) => dir.join(target),
                None => target,
            };
            if let Some(dir) = hop.parent()
                && dir
                    .parent()
                    .is_some_and(|venv| venv.join("pyvenv.cfg").is_file())
                && !dirs.iter().any(|(d, _)| d == dir)
            {
                dirs.push((
                    dir.to_path_buf(),
                    "the virtualenv its interpreter links into",
                ));
            }
        }
    }
    if let Some(site) = plugin_site.filter(|s| !s.is_empty()) {
        dirs.push((Path::new(&site).join("bin"), "$QWENPAW_PLUGIN_SITE/bin"));
    }
    dirs
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

/// The port of a base URL (80/443 when it names none).
fn port_of(base: &str) -> Option<u16> {
    let (scheme, rest) = base.split_once("://")?;
    let authority = rest.split('/').next()?;
    match authority.rsplit_once(':') {
        Some((_, port)) if !port.ends_with(']') => port.parse().ok(),
        _ => Some(if scheme == "https" { 443 } else { 80 }),
    }
}

/// A `qwenpaw app` process: its pid, its interpreter (argv[0] when absolute: a script's
/// shebang interpreter, as the kernel passes it), its environment.
struct ServerProcess {
    pid: u32,
    interpreter: Option<PathBuf>,
    environ: Vec<String>,
}

/// The `qwenpaw app` process started with `--port <port>` (8088, QwenPaw's default, when
/// it names none), when this user can read it. Linux only: /proc.
#[cfg(target_os = "linux")]
fn server_process(port: u16) -> Option<ServerProcess> {
    let mut pids: Vec<u32> = std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable();
    pids.into_iter().find_map(|pid| {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let is_server =
            args.iter().any(|a| a.ends_with(b"qwenpaw")) && args.iter().any(|a| *a == b"app");
        let its_port = args
            .iter()
            .position(|a| *a == b"--port")
            .and_then(|i| args.get(i + 1))
            .map_or("8088".to_owned(), |p| {
                String::from_utf8_lossy(p).into_owned()
            });
        if !is_server || its_port != port.to_string() {
            return None;
        }
        let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
        let interpreter = args
            .first()
            .map(|a| PathBuf::from(String::from_utf8_lossy(a).into_owned()))
            .filter(|p| p.is_absolute());
        Some(ServerProcess {
            pid,
            interpreter,
            environ: environ
                .split(|b| *b == 0)
                .map(|kv| String::from_utf8_lossy(kv).into_owned())
                .collect(),
        })
    })
}

#[cfg(not(target_os = "linux"))]
fn server_process(_port: u16) -> Option<ServerProcess> {
    None
}

/// What atc's QwenPaw plugin last said about the cadence (`<job file>.cadence`), when it
/// said it lately (within three of its periods): (the plugin ticks, what to say).
pub fn cadence(state: &Path) -> Option<(bool, String)> {
    let now = crate::time::Timestamp::now();
    let path = crate::state::store::Store::new(state.to_path_buf()).cadence_path();
    let said = crate::pass::Cadence::read(&path, now)?;
    let (pid, every) = (said.pid, crate::time::human(said.every));
    if said.ticking {
        Some((
            true,
            format!(
                "atc's QwenPaw plugin (server pid {pid}) starts `atc tick` every {every} while watches wait; no system timer seen"
            ),
        ))
    } else {
        let seen = said.timer_seen_at.map_or("lately".to_owned(), |t| {
            format!("{} ago", crate::time::age(t.elapsed_at(now)))
        });
        Some((
            false,
            format!(
                "a system timer: a tick atc's QwenPaw plugin did not start ran {seen}, so the plugin (server pid {pid}) stands by"
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::port_of;

    #[test]
    fn a_base_urls_port_is_its_own_or_its_schemes() {
        for (base, port) in [
            ("http://127.0.0.1:8088/api", Some(8088)),
            ("http://localhost/api", Some(80)),
            ("https://qwenpaw.example/api", Some(443)),
            ("http://[::1]/api", Some(80)),
            ("https://[::1]:9000/api", Some(9000)),
            ("http://host:port/api", None),
            ("localhost:8088", None),
        ] {
            assert_eq!(port_of(base), port, "{base}");
        }
    }
}
