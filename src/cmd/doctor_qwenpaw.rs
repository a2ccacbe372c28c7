//! `atc doctor`'s QwenPaw-side checks: is atc's plugin installed and loaded, which agents
//! have its tools enabled, can the running server find `atc` on its PATH, and is the
//! seed plugin (Agent Task Callback) still installed next to it (double deliveries).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::install::{self, PLUGIN_ID, SEED_ID, TOOLS};
use crate::qwenpaw::Client;
use crate::settings::Doctor;

/// One line of `atc doctor`.
pub struct Finding {
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
    pub fix: Option<String>,
}

fn ok(name: &'static str, detail: String) -> Finding {
    Finding {
        name,
        ok: true,
        detail,
        fix: None,
    }
}

fn bad(name: &'static str, detail: String, fix: String) -> Finding {
    Finding {
        name,
        ok: false,
        detail,
        fix: Some(fix),
    }
}

pub fn checks(client: &Client, doctor: &Doctor) -> Vec<Finding> {
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
                "atc's plugin is installed in {} (whether the server loaded it: cannot tell, it does not answer)",
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
    if installed {
        out.push(tools_enabled(wd));
        out.push(kicks(wd, doctor));
    }
    out.push(server_path(&doctor.base_url.value));
    out.push(seed(wd));
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

/// Which agents have the plugin's tools enabled in their agent.json.
fn tools_enabled(wd: &Path) -> Finding {
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
fn kicks(wd: &Path, doctor: &Doctor) -> Finding {
    let installed = wd.join("plugins").join(PLUGIN_ID).join("plugin.py");
    let current = std::fs::read(&installed).ok().as_deref()
        == install::PLUGIN_FILES
            .iter()
            .find(|(name, _)| *name == "plugin.py")
            .map(|(_, text)| text.as_bytes());
    if !current {
        return bad(
            "kicks",
            format!(
                "{} is not this atc's plugin (an older one may lack the end-of-turn hook)",
                installed.display()
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
                crate::time::human(at.elapsed_at(crate::time::Timestamp::now()))
            ),
            None => "the end-of-turn hook is installed; no turn's end has started a tick yet (it starts one only while watches wait, and needs atc on the server's PATH)".to_owned(),
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

/// The seed plugin, or a second copy of the tools, next to ours.
fn seed(wd: &Path) -> Finding {
    match install::rivals(wd).first() {
        None => ok(
            "seed plugin",
            "the Agent Task Callback plugin is not installed".to_owned(),
        ),
        Some(rival) if rival.id == SEED_ID => bad(
            "seed plugin",
            format!(
                "the Agent Task Callback plugin is still installed at {}: it watches and delivers too, so results can arrive twice",
                rival.dir.display()
            ),
            format!(
                "`atc import-plugin-state` (its jobs move to atc), then `qwenpaw plugin uninstall {SEED_ID}` (or delete that folder and restart QwenPaw)"
            ),
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

/// Can the running QwenPaw server (and so its agents' shell tool and the plugin) find
/// `atc`? Read from /proc/<pid>/environ of a `qwenpaw app` process when that is readable.
fn server_path(base: &str) -> Finding {
    const NAME: &str = "atc on the server's PATH";
    let Some((pid, env)) = port_of(base).and_then(server_environ) else {
        return ok(
            NAME,
            format!(
                "cannot tell: no `qwenpaw app` process serving {base} whose environment this user can read"
            ),
        );
    };
    let var = |name: &str| {
        env.iter()
            .find_map(|kv| kv.strip_prefix(name).and_then(|r| r.strip_prefix('=')))
            .map(str::to_owned)
    };
    if let Some(bin) = var("ATC_BIN").filter(|b| !b.is_empty()) {
        return if is_executable(Path::new(&bin)) {
            ok(NAME, format!("the server (pid {pid}) has ATC_BIN={bin}"))
        } else {
            bad(
                NAME,
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
    match found {
        Some(atc) => ok(NAME, format!("the server (pid {pid}) finds {}", atc.display())),
        None => bad(
            NAME,
            format!("the server (pid {pid}) cannot find atc: not on its PATH ({path}), no ATC_BIN, no ~/.cargo/bin/atc; its agents get `atc: command not found`"),
            "pip install atc into QwenPaw's own Python environment (its bin/ is on the server's PATH), or set ATC_BIN in the server's environment (systemd: Environment=ATC_BIN=…), then restart QwenPaw".to_owned(),
        ),
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
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

/// The pid and environment of the `qwenpaw app` process started with `--port <port>`
/// (8088, QwenPaw's default, when it names none), when this user can read them.
fn server_environ(port: u16) -> Option<(u32, Vec<String>)> {
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
        Some((
            pid,
            environ
                .split(|b| *b == 0)
                .map(|kv| String::from_utf8_lossy(kv).into_owned())
                .collect(),
        ))
    })
}
