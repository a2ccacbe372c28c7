//! `atc qwenpaw install`, the plan: which files in a QwenPaw working dir must change so
//! that the plugin (embedded here, so it always matches this atc) is installed, its tools
//! are enabled for the chosen agents, and the atc-callback skill is in the skill pool.
//! Reading the working dir and deciding is [`plan`]; [`apply`] writes, each file
//! atomically. Nothing outside `plugins/atc/`, `skill_pool/atc-callback/` and the chosen
//! agents' `agent.json` is ever written, and another plugin's folder is never touched.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::exit::{Exit, Failure};

/// The plugin's id, and its folder's name under `<working dir>/plugins/`.
pub const PLUGIN_ID: &str = "atc";
/// The seed plugin (Agent Task Callback), whose tools have the same names.
pub const SEED_ID: &str = "agent-task-callback";
/// The plugin's files, as `atc qwenpaw install` writes them: the manifest, the backend
/// (the entry `plugin.py` QwenPaw loads, and beside it the package `atc_plugin/` by
/// concern: where atc and its files are, the tools, the end-of-turn kick and cadence,
/// auto-watch) and the console bundle (an open chat shows what atc
/// delivered into it), which `plugin.json` names as `entry.frontend`.
pub const PLUGIN_FILES: [(&str, &str); 8] = [
    (
        "plugin.json",
        include_str!("../examples/qwenpaw-plugin/atc/plugin.json"),
    ),
    (
        "plugin.py",
        include_str!("../examples/qwenpaw-plugin/atc/plugin.py"),
    ),
    (
        "atc_plugin/__init__.py",
        include_str!("../examples/qwenpaw-plugin/atc/atc_plugin/__init__.py"),
    ),
    (
        "atc_plugin/where.py",
        include_str!("../examples/qwenpaw-plugin/atc/atc_plugin/where.py"),
    ),
    (
        "atc_plugin/tools.py",
        include_str!("../examples/qwenpaw-plugin/atc/atc_plugin/tools.py"),
    ),
    (
        "atc_plugin/kick.py",
        include_str!("../examples/qwenpaw-plugin/atc/atc_plugin/kick.py"),
    ),
    (
        "atc_plugin/auto_watch.py",
        include_str!("../examples/qwenpaw-plugin/atc/atc_plugin/auto_watch.py"),
    ),
    (
        FRONTEND,
        include_str!("../examples/qwenpaw-plugin/atc/frontend.mjs"),
    ),
];
/// The console bundle's file name (`plugin.json` `entry.frontend`).
pub const FRONTEND: &str = "frontend.mjs";
/// The tools the plugin registers (the seed's three, and fan-in).
pub const TOOLS: [&str; 4] = [
    "watch_agent_task",
    "watch_agent_tasks",
    "callback_task_status",
    "cancel_task_callback",
];
pub const SKILL_NAME: &str = "atc-callback";
pub const SKILL_MD: &str = include_str!("../examples/qwenpaw-skill/atc-callback/SKILL.md");

/// The plugin's folder in the zip `atc qwenpaw zip` writes (QwenPaw copies it to
/// `<working dir>/plugins/<id>/` whatever it is called).
pub const BUNDLE_DIR: &str = PLUGIN_ID;
/// The atc a plugin folder carries, relative to it: the plugin runs this one first
/// (`atc_plugin/where.py` `find_atc`), and a person can always reach it at
/// `<working dir>/plugins/atc/bin/atc`, whatever put QwenPaw where.
pub const BUNDLED_ATC: &str = "bin/atc";
/// Beside it, the platform it was built for (`linux-x86_64`): a plugin on another
/// platform skips it and says so, and so does `atc doctor`.
pub const BUNDLED_PLATFORM: &str = "bin/atc.platform";

/// This atc's platform, as the zip's name and `bin/atc.platform` say it:
/// `<os>-<arch>`, `linux-x86_64`, `macos-aarch64`.
pub fn platform() -> String {
    // Rust's names are the zip's: `linux`, `macos`; `x86_64`, `aarch64`.
    format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH)
}

/// What a plugin zip carries besides the plugin.
pub enum Carry<'a> {
    /// This atc's own binary (`bin/atc`): installs with no package index, no pip and no
    /// Rust, on this platform only.
    Atc(&'a [u8]),
    /// A `requirements.txt` naming this atc's package (`atc-qwenpaw==<version>`), which
    /// QwenPaw's loader pip-installs: for the Market and once a release's wheels are on
    /// the index. Any platform.
    Requirements,
}

/// The zip's file name: `atc-qwenpaw-plugin-<version>-<platform>.zip` when it carries
/// atc, `atc-qwenpaw-plugin-<version>.zip` when thin.
pub fn bundle_name(carry: &Carry) -> String {
    let version = env!("CARGO_PKG_VERSION");
    match carry {
        Carry::Atc(_) => format!("atc-qwenpaw-plugin-{version}-{}.zip", platform()),
        Carry::Requirements => format!("atc-qwenpaw-plugin-{version}.zip"),
    }
}

/// What `qwenpaw plugin install <zip>` needs and nothing else, under one folder: the
/// plugin; the atc that runs it (this binary and its platform), or a `requirements.txt`
/// pinning this very atc (`atc-qwenpaw` on PyPI), which QwenPaw's loader pip-installs
/// into the server's own environment before it imports the plugin; and the atc-callback
/// skill, which the plugin registers with `register_skill_provider`. `atc qwenpaw
/// install` writes the plugin without either (the atc that runs it is already here) and
/// puts the skill into the skill pool instead.
pub fn bundle(carry: &Carry) -> Vec<crate::zip::Entry> {
    use crate::zip::Entry;
    let dir = BUNDLE_DIR;
    let mut entries = vec![Entry::dir(format!("{dir}/"))];
    for (name, text) in PLUGIN_FILES {
        // The package's folder before its first file, as a zip made by hand has it.
        if let Some((folder, _)) = name.rsplit_once('/') {
            let folder = format!("{dir}/{folder}/");
            if !entries.iter().any(|entry| entry.name == folder) {
                entries.push(Entry::dir(folder));
            }
        }
        entries.push(Entry::file(format!("{dir}/{name}"), text));
    }
    match carry {
        Carry::Atc(atc) => {
            entries.push(Entry::dir(format!("{dir}/bin/")));
            entries.push(Entry::program(format!("{dir}/{BUNDLED_ATC}"), *atc));
            entries.push(Entry::file(
                format!("{dir}/{BUNDLED_PLATFORM}"),
                format!("{}\n", platform()),
            ));
        }
        Carry::Requirements => {
            entries.push(Entry::file(
                format!("{dir}/requirements.txt"),
                requirements(),
            ));
        }
    }
    entries.push(Entry::dir(format!("{dir}/skills/")));
    entries.push(Entry::dir(format!("{dir}/skills/{SKILL_NAME}/")));
    entries.push(Entry::file(
        format!("{dir}/skills/{SKILL_NAME}/SKILL.md"),
        SKILL_MD,
    ));
    entries
}

/// The thin bundle's `requirements.txt`: this atc, exactly.
pub fn requirements() -> String {
    format!(
        "# atc itself: QwenPaw's plugin loader installs it into the server's environment.\natc-qwenpaw=={}\n",
        env!("CARGO_PKG_VERSION")
    )
}

/// Which agents get the tools enabled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Agents {
    /// The working dir's active agent (`agents.active_agent`, else `default`).
    Active,
    All,
    Named(Vec<String>),
}

/// One file to write.
#[derive(Clone, Debug)]
pub struct Change {
    pub path: PathBuf,
    pub bytes: Vec<u8>,
    /// For people: "write the plugin file", "enable the tools for agent default".
    pub what: String,
    /// A program (the bundled atc): written 0700.
    pub program: bool,
}

#[derive(Clone, Debug)]
pub struct Plan {
    pub working_dir: PathBuf,
    pub plugin_dir: PathBuf,
    /// The agents whose tools the plan enables (or finds enabled).
    pub agents: Vec<String>,
    pub changes: Vec<Change>,
    /// The plugin's own files change (a running server must load it again).
    pub plugin_changed: bool,
}

/// A plugin folder found under `plugins/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundPlugin {
    pub dir: PathBuf,
    pub id: String,
    pub tools: Vec<String>,
}

/// Every plugin folder QwenPaw would load (hidden and `.disabled` folders it skips).
pub fn plugins_in(working_dir: &Path) -> Vec<FoundPlugin> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir(working_dir.join("plugins")) else {
        return found;
    };
    for entry in entries.flatten() {
        let dir = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if !dir.is_dir() || name.starts_with('.') || name.ends_with(".disabled") {
            continue;
        }
        let Some(manifest) = fs::read_to_string(dir.join("plugin.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        else {
            continue;
        };
        let id = manifest["id"].as_str().unwrap_or("").to_owned();
        let mut tools: Vec<String> = manifest["meta"]["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect();
        if let Some(one) = manifest["meta"]["tool_name"].as_str() {
            tools.push(one.to_owned());
        }
        found.push(FoundPlugin { dir, id, tools });
    }
    found.sort_by(|a, b| a.dir.cmp(&b.dir));
    found
}

/// The plugins that would register the same tools as ours: the seed plugin, a second
/// copy of ours (a backup folder QwenPaw also loads), or any plugin naming our tools.
pub fn rivals(working_dir: &Path) -> Vec<FoundPlugin> {
    let ours = working_dir.join("plugins").join(PLUGIN_ID);
    plugins_in(working_dir)
        .into_iter()
        .filter(|p| p.dir != ours)
        .filter(|p| {
            p.id == SEED_ID
                || p.id == PLUGIN_ID
                || p.tools.iter().any(|t| TOOLS.contains(&t.as_str()))
        })
        .collect()
}

fn refuse(message: String) -> Failure {
    Failure::new(Exit::Refused, message)
}

/// The working dir's `config.json`: agent id → workspace dir, and the active agent.
fn agent_profiles(working_dir: &Path) -> Result<(Vec<(String, PathBuf)>, String), Failure> {
    let path = working_dir.join("config.json");
    let text = fs::read_to_string(&path).map_err(|e| {
        refuse(format!(
            "cannot read {}: {e}; is {} QwenPaw's working dir? (`qwenpaw init` makes one; --working-dir names another)",
            path.display(),
            working_dir.display()
        ))
    })?;
    let config: Value = serde_json::from_str(&text)
        .map_err(|e| refuse(format!("{} is not JSON: {e}", path.display())))?;
    let profiles = config["agents"]["profiles"].as_object().ok_or_else(|| {
        refuse(format!(
            "{} lists no agents (agents.profiles)",
            path.display()
        ))
    })?;
    let agents = profiles
        .iter()
        .map(|(id, profile)| {
            let dir = profile["workspace_dir"]
                .as_str()
                .map(PathBuf::from)
                .unwrap_or_else(|| working_dir.join("workspaces").join(id));
            let dir = if dir.is_relative() {
                working_dir.join(dir)
            } else {
                dir
            };
            (id.clone(), dir)
        })
        .collect();
    let active = config["agents"]["active_agent"]
        .as_str()
        .filter(|a| !a.is_empty())
        .unwrap_or("default")
        .to_owned();
    Ok((agents, active))
}

/// The seed plugin's three tools (atc's plugin has them too, and one more).
pub const SEED_TOOLS: [&str; 3] = [
    "watch_agent_task",
    "callback_task_status",
    "cancel_task_callback",
];

/// The agents whose `agent.json` has any of the seed's tools enabled, in config order.
pub fn agents_with_seed_tools(working_dir: &Path) -> Result<Vec<String>, Failure> {
    let (profiles, _) = agent_profiles(working_dir)?;
    Ok(profiles
        .into_iter()
        .filter(|(_, dir)| {
            fs::read_to_string(dir.join("agent.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .is_some_and(|v| {
                    SEED_TOOLS
                        .iter()
                        .any(|t| v["tools"]["builtin_tools"][t]["enabled"] == true)
                })
        })
        .map(|(id, _)| id)
        .collect())
}

/// A tool entry as QwenPaw's `BuiltinToolConfig` writes it, enabled.
fn tool_entry(name: &str) -> Value {
    json!({
        "name": name,
        "enabled": true,
        "description": "",
        "display_to_user": true,
        "async_execution": false,
        "icon": "\u{1f4ec}",
        "config": {}
    })
}

/// `agent.json` with the plugin's tools enabled, or None when they already are.
fn enable_tools(agent_json: &Path) -> Result<Option<Vec<u8>>, Failure> {
    let text = fs::read_to_string(agent_json)
        .map_err(|e| refuse(format!("cannot read {}: {e}", agent_json.display())))?;
    let mut config: Value = serde_json::from_str(&text)
        .map_err(|e| refuse(format!("{} is not JSON: {e}", agent_json.display())))?;
    let Some(root) = config.as_object_mut() else {
        return Err(refuse(format!(
            "{} is not a JSON object",
            agent_json.display()
        )));
    };
    let tools = root
        .entry("tools")
        .or_insert_with(|| Value::Object(Map::new()));
    if tools.is_null() {
        *tools = Value::Object(Map::new());
    }
    let Some(tools) = tools.as_object_mut() else {
        return Err(refuse(format!(
            "{}: `tools` is not an object",
            agent_json.display()
        )));
    };
    let builtin = tools
        .entry("builtin_tools")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(builtin) = builtin.as_object_mut() else {
        return Err(refuse(format!(
            "{}: `tools.builtin_tools` is not an object",
            agent_json.display()
        )));
    };
    let mut changed = false;
    for name in TOOLS {
        match builtin.get_mut(name).and_then(Value::as_object_mut) {
            Some(entry) if entry.get("enabled") == Some(&Value::Bool(true)) => {}
            Some(entry) => {
                entry.insert("enabled".into(), Value::Bool(true));
                changed = true;
            }
            None => {
                builtin.insert(name.into(), tool_entry(name));
                changed = true;
            }
        }
    }
    if !changed {
        return Ok(None);
    }
    let mut bytes = serde_json::to_vec_pretty(&config).expect("a JSON value serializes");
    bytes.push(b'\n');
    Ok(Some(bytes))
}

/// Reads the working dir and decides what to write. Refuses (exit 1) while another copy
/// of the tools is installed, or when the plugin's folder belongs to another plugin; an
/// agent the working dir does not have is a usage error (exit 2).
pub fn plan(working_dir: &Path, agents: &Agents) -> Result<Plan, Failure> {
    plan_with(working_dir, agents, false)
}

/// `plan` as it will be once the seed plugin is gone (a dry run of the replacement).
pub fn plan_ignoring_seed(working_dir: &Path, agents: &Agents) -> Result<Plan, Failure> {
    plan_with(working_dir, agents, true)
}

fn plan_with(working_dir: &Path, agents: &Agents, ignore_seed: bool) -> Result<Plan, Failure> {
    let rivals: Vec<FoundPlugin> = rivals(working_dir)
        .into_iter()
        .filter(|r| !(ignore_seed && r.id == SEED_ID))
        .collect();
    if let Some(rival) = rivals.first() {
        let how = if rival.id == SEED_ID {
            "`atc qwenpaw install --replace-agent-task-callback` moves from it in one step, in an order in which the two never both deliver".to_owned()
        } else {
            format!(
                "move {} out of {} (QwenPaw loads every folder there), then run `atc qwenpaw install` again",
                rival.dir.display(),
                working_dir.join("plugins").display()
            )
        };
        return Err(refuse(format!(
            "plugin {:?} at {} registers the same tools (watch_agent_task…): two copies would both deliver; {how}",
            rival.id,
            rival.dir.display()
        )));
    }
    let plugin_dir = working_dir.join("plugins").join(PLUGIN_ID);
    let manifest = plugin_dir.join("plugin.json");
    if manifest.exists() {
        let id = fs::read_to_string(&manifest)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| v["id"].as_str().map(str::to_owned));
        if id.as_deref() != Some(PLUGIN_ID) {
            return Err(refuse(format!(
                "{} belongs to another plugin ({}); atc never touches another plugin's files: move it away and run `atc qwenpaw install` again",
                plugin_dir.display(),
                id.map_or("unreadable plugin.json".to_owned(), |i| format!("id {i:?}"))
            )));
        }
    }

    let (profiles, active) = agent_profiles(working_dir)?;
    let chosen: Vec<String> = match agents {
        Agents::All => profiles.iter().map(|(id, _)| id.clone()).collect(),
        Agents::Active => vec![active],
        Agents::Named(names) => names.clone(),
    };
    let known: Vec<&str> = profiles.iter().map(|(id, _)| id.as_str()).collect();
    if let Some(unknown) = chosen.iter().find(|a| !known.contains(&a.as_str())) {
        return Err(Failure::new(
            Exit::Usage,
            format!(
                "--agents: QwenPaw at {} has no agent {unknown:?}; it has: {}",
                working_dir.display(),
                known.join(", ")
            ),
        ));
    }

    let mut changes = Vec::new();
    for (name, text) in PLUGIN_FILES {
        let path = plugin_dir.join(name);
        if fs::read(&path).ok().as_deref() != Some(text.as_bytes()) {
            changes.push(Change {
                what: format!("write the plugin's {name}"),
                path,
                bytes: text.as_bytes().to_vec(),
                program: false,
            });
        }
    }
    changes.extend(bundled_atc(&plugin_dir)?);
    let plugin_changed = !changes.is_empty();
    for agent in &chosen {
        let dir = &profiles
            .iter()
            .find(|(id, _)| id == agent)
            .expect("checked above")
            .1;
        let path = dir.join("agent.json");
        if let Some(bytes) = enable_tools(&path)? {
            changes.push(Change {
                what: format!("enable the tools for agent {agent}"),
                path,
                bytes,
                program: false,
            });
        }
    }
    let skill = working_dir
        .join("skill_pool")
        .join(SKILL_NAME)
        .join("SKILL.md");
    // A plugin installed from the zip brings the skill itself (register_skill_provider).
    let provided = plugin_dir
        .join("skills")
        .join(SKILL_NAME)
        .join("SKILL.md")
        .is_file();
    if !provided && fs::read(&skill).ok().as_deref() != Some(SKILL_MD.as_bytes()) {
        changes.push(Change {
            what: format!("put the {SKILL_NAME} skill into the skill pool"),
            path: skill,
            bytes: SKILL_MD.as_bytes().to_vec(),
            program: false,
        });
    }
    Ok(Plan {
        working_dir: working_dir.to_path_buf(),
        plugin_dir,
        agents: chosen,
        changes,
        plugin_changed,
    })
}

/// A plugin folder that carries an atc (installed from the zip) keeps carrying the atc
/// that writes its plugin files, so the plugin never runs an atc older or newer than
/// itself: this binary replaces another one there (and its platform file). A folder that
/// carries none is left so (the plugin finds atc where pip or cargo put it).
fn bundled_atc(plugin_dir: &Path) -> Result<Vec<Change>, Failure> {
    let bundled = plugin_dir.join(BUNDLED_ATC);
    if !bundled.is_file() {
        return Ok(Vec::new());
    }
    let me = std::env::current_exe().map_err(|e| {
        Failure::new(
            Exit::StateUnwritable,
            format!("cannot find this atc's own binary ({e}) to replace the plugin's"),
        )
    })?;
    let same_file = fs::canonicalize(&me).ok() == fs::canonicalize(&bundled).ok();
    let mut changes = Vec::new();
    if !same_file {
        let bytes = fs::read(&me).map_err(|e| {
            Failure::new(
                Exit::StateUnwritable,
                format!("cannot read this atc's own binary {}: {e}", me.display()),
            )
        })?;
        if fs::read(&bundled).ok().as_deref() != Some(bytes.as_slice()) {
            changes.push(Change {
                what: "replace the atc the plugin carries with this one".to_owned(),
                path: bundled,
                bytes,
                program: true,
            });
        }
    }
    let platform_file = plugin_dir.join(BUNDLED_PLATFORM);
    let platform = format!("{}\n", platform());
    if fs::read(&platform_file).ok().as_deref() != Some(platform.as_bytes()) {
        changes.push(Change {
            what: "write the platform of the atc the plugin carries".to_owned(),
            path: platform_file,
            bytes: platform.into_bytes(),
            program: false,
        });
    }
    Ok(changes)
}

/// Writes the plan's files, each atomically (a temp file renamed over it).
pub fn apply(plan: &Plan) -> Result<(), Failure> {
    for change in &plan.changes {
        let dir = crate::state::fsutil::parent_dir(&change.path);
        let write = if change.program {
            crate::state::fsutil::write_program
        } else {
            crate::state::fsutil::write_atomic
        };
        fs::create_dir_all(dir)
            .and_then(|()| write(&change.path, &change.bytes))
            .map_err(|e| {
                Failure::new(
                    Exit::StateUnwritable,
                    format!("cannot {} ({}): {e}", change.what, change.path.display()),
                )
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn working_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let wd = dir.path();
        let ws = wd.join("workspaces");
        for agent in ["default", "SE"] {
            fs::create_dir_all(ws.join(agent)).unwrap();
            fs::write(
                ws.join(agent).join("agent.json"),
                r#"{"id":"x","tools":{"builtin_tools":{"read_file":{"name":"read_file","enabled":true},"watch_agent_task":{"name":"watch_agent_task","enabled":false}}},"zeta":1}"#,
            )
            .unwrap();
        }
        fs::write(
            wd.join("config.json"),
            json!({"agents": {"active_agent": "default", "profiles": {
                "default": {"workspace_dir": ws.join("default")},
                "SE": {"workspace_dir": ws.join("SE")}
            }}})
            .to_string(),
        )
        .unwrap();
        dir
    }

    #[test]
    fn a_fresh_install_writes_plugin_tools_and_skill_and_keeps_the_rest() {
        let dir = working_dir();
        let plan = plan(dir.path(), &Agents::Active).unwrap();
        let whats: Vec<&str> = plan.changes.iter().map(|c| c.what.as_str()).collect();
        assert_eq!(
            whats,
            [
                "write the plugin's plugin.json",
                "write the plugin's plugin.py",
                "write the plugin's atc_plugin/__init__.py",
                "write the plugin's atc_plugin/where.py",
                "write the plugin's atc_plugin/tools.py",
                "write the plugin's atc_plugin/kick.py",
                "write the plugin's atc_plugin/auto_watch.py",
                "write the plugin's frontend.mjs",
                "enable the tools for agent default",
                "put the atc-callback skill into the skill pool"
            ]
        );
        let agent: Value = serde_json::from_slice(&plan.changes[PLUGIN_FILES.len()].bytes).unwrap();
        let tools = &agent["tools"]["builtin_tools"];
        assert_eq!(tools["read_file"]["enabled"], true);
        for name in TOOLS {
            assert_eq!(tools[name]["enabled"], true, "{name}");
        }
        assert_eq!(agent["zeta"], 1);
        apply(&plan).unwrap();
        let again = super::plan(dir.path(), &Agents::Active).unwrap();
        assert!(again.changes.is_empty(), "{:?}", again.changes);
        assert!(!again.plugin_changed);
    }

    #[test]
    fn all_and_named_agents() {
        let dir = working_dir();
        let all = plan(dir.path(), &Agents::All).unwrap();
        assert_eq!(all.agents.len(), 2);
        let named = plan(dir.path(), &Agents::Named(vec!["SE".into()])).unwrap();
        assert_eq!(named.agents, ["SE"]);
        let err = plan(dir.path(), &Agents::Named(vec!["nope".into()])).unwrap_err();
        assert_eq!(err.exit, Exit::Usage);
        assert!(err.to_string().contains("no agent \"nope\""), "{err}");
    }

    #[test]
    fn the_active_agent_is_the_configs_and_default_when_it_names_none() {
        for (active, want) in [
            (json!("SE"), "SE"),
            (json!(""), "default"),
            (json!(null), "default"),
        ] {
            let dir = working_dir();
            let path = dir.path().join("config.json");
            let mut config: Value =
                serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
            config["agents"]["active_agent"] = active;
            fs::write(&path, config.to_string()).unwrap();
            assert_eq!(plan(dir.path(), &Agents::Active).unwrap().agents, [want]);
        }
    }

    #[test]
    fn the_seed_plugin_or_a_second_copy_is_refused() {
        for (folder, id) in [("agent-task-callback", SEED_ID), ("atc.bak", PLUGIN_ID)] {
            let dir = working_dir();
            let other = dir.path().join("plugins").join(folder);
            fs::create_dir_all(&other).unwrap();
            fs::write(other.join("plugin.json"), json!({"id": id}).to_string()).unwrap();
            let err = plan(dir.path(), &Agents::Active).unwrap_err();
            assert_eq!(err.exit, Exit::Refused);
            assert!(
                err.to_string().contains(&other.display().to_string()),
                "{err}"
            );
        }
        // Hidden and disabled folders are not loaded by QwenPaw: no rivals; nor is a
        // plugin of other tools.
        let dir = working_dir();
        for (folder, id) in [
            (".atc-old", PLUGIN_ID),
            ("agent-task-callback.disabled", SEED_ID),
            ("weather", "weather"),
        ] {
            let skipped = dir.path().join("plugins").join(folder);
            fs::create_dir_all(&skipped).unwrap();
            fs::write(skipped.join("plugin.json"), json!({"id": id}).to_string()).unwrap();
        }
        assert!(plan(dir.path(), &Agents::Active).is_ok());
    }

    #[test]
    fn another_plugins_folder_named_atc_is_left_alone() {
        let dir = working_dir();
        let ours = dir.path().join("plugins").join(PLUGIN_ID);
        fs::create_dir_all(&ours).unwrap();
        fs::write(ours.join("plugin.json"), json!({"id": "other"}).to_string()).unwrap();
        let err = plan(dir.path(), &Agents::Active).unwrap_err();
        assert!(err.to_string().contains("another plugin"), "{err}");
    }
}
