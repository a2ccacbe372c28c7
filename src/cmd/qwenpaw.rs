//! `atc qwenpaw install`: plan the working dir's changes (`install`), write them, and have
//! a QwenPaw running on that working dir load the plugin; say whether a restart is needed.

use anyhow::Result;
use serde_json::{Value, json};

use crate::cmd::{emit, print_json};
use crate::install::{self, PLUGIN_ID, Plan};
use crate::qwenpaw::Client;
use crate::settings::{Output, QwenpawInstall};

/// What the server on the working dir says.
enum Server {
    /// Nothing answered there (or no address is known): the plugin loads at its next start.
    Away(String),
    Running {
        base: String,
        loaded: bool,
    },
}

fn server(client: &Client, install: &QwenpawInstall) -> Server {
    let Some(base) = &install.base_url else {
        return Server::Away(
            "no QwenPaw has run on this working dir yet (no last_api in its config.json)"
                .to_owned(),
        );
    };
    let base = base.value.clone();
    match client.version(&base) {
        Ok(answer) if answer.status == 200 && answer.is_json() => {}
        Ok(answer) if !answer.is_json() => {
            return Server::Away(format!(
                "{base}/version answers HTTP {} with {}: that is not QwenPaw's API (see atc doctor)",
                answer.status,
                answer.kind()
            ));
        }
        Ok(answer) => {
            return Server::Away(format!(
                "{base}/version answers HTTP {} (a token missing? see atc doctor)",
                answer.status
            ));
        }
        Err(err) => return Server::Away(format!("no QwenPaw answers at {base} ({})", err.message)),
    }
    let loaded = client
        .plugin_status(&base, PLUGIN_ID)
        .ok()
        .filter(|a| a.status == 200)
        .and_then(|a| a.body.ok())
        .and_then(|b| serde_json::from_str::<Value>(&b).ok())
        .is_some_and(|v| v["loaded"] == true);
    Server::Running { base, loaded }
}

pub fn run(install: &QwenpawInstall, out: Output) -> Result<()> {
    let wd = &install.working_dir.value;
    let client = Client::new(install.http_timeout, install.auth.clone());
    let server = server(&client, install);
    let (agents, replaced) = match &install.replace {
        Some(replace) => {
            let (agents, said) =
                super::qwenpaw_replace::run(install, replace, &client, &server_base(&server))?;
            let agents = agents.map_or_else(|| install.agents.clone(), install::Agents::Named);
            (agents, Some(said))
        }
        None => (install.agents.clone(), None),
    };
    let plan = if install.dry_run && install.replace.is_some() {
        // The seed plugin is still there in a dry run: plan as if it were gone.
        install::plan_ignoring_seed(wd, &agents)?
    } else {
        install::plan(wd, &agents)?
    };
    if !install.dry_run {
        install::apply(&plan)?;
    }
    let verb = |done: &str, would: &str| {
        if install.dry_run {
            would.to_owned()
        } else {
            done.to_owned()
        }
    };
    // (loaded now, restart needed, what to say)
    let (loaded, restart, said) = match &server {
        Server::Away(why) => (
            false,
            true,
            format!(
                "Restart QwenPaw (or start it) to load the plugin: {why}. The tools are enabled from its next start."
            ),
        ),
        // After a replacement the server loads it again even if no file changed: the
        // seed held the tool names when it loaded atc's plugin (QwenPaw refused them).
        Server::Running { loaded: true, base }
            if !plan.plugin_changed && (install.replace.is_none() || install.dry_run) =>
        {
            (
                true,
                false,
                format!("No restart needed: the QwenPaw at {base} has this plugin loaded."),
            )
        }
        Server::Running { loaded, base } if install.dry_run => (
            *loaded,
            false,
            format!("No restart needed: the QwenPaw at {base} would load the plugin now."),
        ),
        Server::Running { loaded, base } => {
            let answer = client.install_plugin(
                base,
                &json!({"source": plan.plugin_dir.display().to_string(), "force": loaded}),
            );
            match answer {
                Ok(a) if a.status == 200 => (
                    true,
                    false,
                    format!("No restart needed: the QwenPaw at {base} loaded the plugin."),
                ),
                Ok(a) => (
                    false,
                    true,
                    format!(
                        "Restart QwenPaw to load the plugin: {base}/plugins/install answered HTTP {} {}",
                        a.status,
                        crate::text::fit(a.body.as_deref().unwrap_or(""), 300)
                    ),
                ),
                Err(err) => (
                    false,
                    true,
                    format!("Restart QwenPaw to load the plugin: {}", err.message),
                ),
            }
        }
    };
    if out.json {
        return print_json(&json!({
            "replaced": replaced.as_ref().map(|r| &r.json),
            "dry_run": install.dry_run,
            "working_dir": wd,
            "plugin_dir": plan.plugin_dir,
            "agents": plan.agents,
            "changes": plan.changes.iter().map(|c| json!({"what": c.what, "path": c.path})).collect::<Vec<_>>(),
            "loaded": loaded,
            "restart_needed": restart,
        }));
    }
    if out.quiet {
        return Ok(());
    }
    let preface = replaced.map(|r| r.text).unwrap_or_default();
    emit(&format!(
        "{preface}{}",
        report(install, &plan, &verb("Changed", "Would change"), &said)
    ))
}

/// The base URL of the server running on the working dir, if one answers.
fn server_base(server: &Server) -> Option<String> {
    match server {
        Server::Running { base, .. } => Some(base.clone()),
        Server::Away(_) => None,
    }
}

fn report(install: &QwenpawInstall, plan: &Plan, verb: &str, said: &str) -> String {
    let mut text = format!(
        "QwenPaw working dir {} (from {})\n",
        plan.working_dir.display(),
        install.working_dir.source
    );
    if plan.changes.is_empty() {
        text.push_str("Nothing to change: the plugin, its tools and the skill are in place.\n");
    }
    for change in &plan.changes {
        text.push_str(&format!(
            "{verb}: {} ({})\n",
            change.what,
            change.path.display()
        ));
    }
    text.push_str(&format!(
        "Tools enabled for: {} (watch_agent_task, watch_agent_tasks, callback_task_status, cancel_task_callback)\n",
        plan.agents.join(", ")
    ));
    text.push_str(&format!("{said}\n"));
    text
}

/// `atc qwenpaw zip`: writes the plugin zip into `dir` (atomically) and prints its path.
/// It carries this very binary unless `thin`.
pub fn zip(dir: &std::path::Path, thin: bool, out: Output) -> Result<()> {
    let me = if thin {
        None
    } else {
        let exe = std::env::current_exe().and_then(|p| std::fs::read(&p).map(|b| (p, b)));
        Some(exe.map_err(|e| {
            crate::exit::Failure::new(
                crate::exit::Exit::StateUnwritable,
                format!(
                    "cannot read this atc's own binary to put it into the zip ({e}); `atc qwenpaw zip --thin` makes one that pip-installs atc instead"
                ),
            )
        })?)
    };
    let carry = match &me {
        Some((_, bytes)) => install::Carry::Atc(bytes),
        None => install::Carry::Requirements,
    };
    let entries = install::bundle(&carry);
    let bytes = crate::zip::archive(&entries);
    let path = dir.join(install::bundle_name(&carry));
    std::fs::create_dir_all(dir)
        .and_then(|()| crate::state::fsutil::write_atomic(&path, &bytes))
        .map_err(|e| {
            crate::exit::Failure::new(
                crate::exit::Exit::StateUnwritable,
                format!("cannot write the plugin zip {}: {e}", path.display()),
            )
        })?;
    if out.json {
        return print_json(&json!({
            "path": path,
            "bytes": bytes.len(),
            "files": entries.iter().filter(|e| !e.name.ends_with('/')).map(|e| &e.name).collect::<Vec<_>>(),
            "platform": me.as_ref().map(|_| install::platform()),
            "thin": thin,
        }));
    }
    if out.quiet {
        return Ok(());
    }
    emit(&format!("{}\n", path.display()))
}
