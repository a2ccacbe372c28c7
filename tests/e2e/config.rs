//! Issue 27 on the real server: one configuration. The kick server (atc's plugin, a
//! logging ATC_BIN wrapper, no cadence, no timer) has a config file in its environment's
//! usual place (`$HOME/.config/atc/config.toml` of the server's HOME) that says
//! `max-age = "3d"`; the plugin's kicks start `atc tick --kicked` with no flags, and those
//! ticks obey the file: a watch registered two days ago is not expired by a kick (the
//! 24 h default would expire it), and its result is delivered when the child ends.
//! `atc doctor` then compares the server's environment with a shell's.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::R;
use crate::atc::Atc;
use crate::ensure;
use crate::scenarios::Ctx;

const TURN_WAIT: Duration = Duration::from_secs(60);

/// Rewrites the job file under atc's own lock (`<job file>.lock`), atomically and 0600,
/// as atc would: so no tick's save can race the edit.
fn edit_job_file(state: &Path, edit: impl FnOnce(&mut Value) -> R<()>) -> R<()> {
    let lock_path = format!("{}.lock", state.display());
    let lock = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&lock_path)
        .map_err(|e| format!("{lock_path}: {e}"))?;
    lock.lock().map_err(|e| format!("lock {lock_path}: {e}"))?;
    let text = fs::read_to_string(state).map_err(|e| format!("{}: {e}", state.display()))?;
    let mut file: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    ensure!(file["version"] == 2, "job file version {}", file["version"]);
    edit(&mut file)?;
    let tmp = state.with_extension("json.e2e-edit");
    let mut out = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    out.write_all(
        serde_json::to_string_pretty(&file)
            .map_err(|e| e.to_string())?
            .as_bytes(),
    )
    .and_then(|()| out.sync_all())
    .map_err(|e| e.to_string())?;
    fs::rename(&tmp, state).map_err(|e| e.to_string())?;
    drop(lock);
    Ok(())
}

/// An RFC 3339 time `secs` ago.
fn ago(secs: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    atc::time::Timestamp::from_unix(now - secs).to_string()
}

pub fn kick_obeys_the_config_file(ctx: &Ctx) -> R<()> {
    let kick = crate::kick::server(ctx, "kick-config")?;
    let api = kick.server.api();
    let server_home = kick.server.dir.path().join("home");
    let config = server_home.join(".config/atc/config.toml");
    fs::create_dir_all(config.parent().unwrap_or(&server_home)).map_err(|e| e.to_string())?;
    fs::write(
        &config,
        "# the timer's and the kicks' settings\nmax-age = \"3d\"\n",
    )
    .map_err(|e| e.to_string())?;
    fs::set_permissions(&config, fs::Permissions::from_mode(0o600)).map_err(|e| e.to_string())?;

    let dir = ctx.scratch.path().join(ctx.uniq("kick-config-atc"));
    fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let atc = Atc::new(&ctx.atc_bin, &dir, kick.state.clone(), &kick.server.root())?;

    api.make_parent("default", "ivy", "kick-config")?;
    let chat = api
        .chat_id("default", "ivy", "kick-config")?
        .ok_or("no parent chat")?;
    let child = api.submit(
        Some("default"),
        &ctx.uniq("kick-config-child"),
        "default",
        "a two-day-old child SLEEP=8",
        None,
    )?;
    atc.watch(&child, "kick-config", "ivy", &[])?;
    edit_job_file(&kick.state, |file| {
        let job = file["jobs"]
            .as_array_mut()
            .and_then(|jobs| jobs.iter_mut().find(|j| j["task_id"] == child.as_str()))
            .ok_or("the watch is not in the job file")?;
        job["registered_at"] = Value::String(ago(2 * 24 * 3600));
        Ok(())
    })?;

    // Another turn ends while the child still runs: the hook kicks a tick, which polls the
    // two-day-old watch (running) and, under the file's 3 days, keeps it.
    let starts_before = kick.starts().len();
    let other = api.submit(
        Some("default"),
        &ctx.uniq("kick-config-other"),
        "default",
        "an unrelated quick turn",
        None,
    )?;
    api.wait_finished(&other, TURN_WAIT)?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while kick.starts().len() <= starts_before {
        ensure!(
            Instant::now() < deadline,
            "no kick after the unrelated turn ended"
        );
        sleep(Duration::from_millis(50));
    }
    // The kicked tick looks again for up to 2 s; give it that and a margin.
    sleep(Duration::from_secs(3));
    let job = atc.job(&child)?;
    ensure!(
        job["status"] == "pending",
        "a kick decided {} for a 2-day-old watch under max-age = \"3d\": {job}",
        job["status"]
    );
    ensure!(
        api.task(&child)?.json()?["status"] != "finished",
        "the child finished before the kick could judge it (SLEEP too short for this machine)"
    );

    // The child ends: its turn's end kicks the tick that delivers it.
    api.wait_finished(&child, TURN_WAIT)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let job = atc.job(&child)?;
        if job["status"] == "done" {
            break;
        }
        ensure!(
            job["status"] == "pending" || job["status"] == "delivering",
            "the watch ended {} instead of delivered: {job}",
            job["status"]
        );
        ensure!(Instant::now() < deadline, "never delivered: {job}");
        sleep(Duration::from_millis(100));
    }
    // The parent chat holds the turn once QwenPaw has run it.
    let marker = format!("[TASK_ID: {child}]");
    let deadline = Instant::now() + TURN_WAIT;
    let msgs = loop {
        let (msgs, _) = api.chat(&chat)?;
        if msgs
            .iter()
            .any(|m| m.role == "user" && m.text.starts_with(&marker))
        {
            break msgs;
        }
        ensure!(
            Instant::now() < deadline,
            "the watch is done but the parent chat never showed the result: {msgs:?}"
        );
        sleep(Duration::from_millis(200));
    };
    let delivered: Vec<&str> = msgs
        .iter()
        .filter(|m| m.role == "user" && m.text.starts_with(&marker))
        .map(|m| m.text.as_str())
        .collect();
    ensure!(
        delivered.len() == 1 && delivered[0].contains("Task completed."),
        "the parent chat holds {delivered:?}, want the one result"
    );
    ensure!(
        !msgs.iter().any(|m| m.text.contains("[STATUS: expired]")),
        "an expired notice reached the parent"
    );
    let starts = kick.starts();
    ensure!(
        // `--json`: the plugin reads the report for its log (give-ups); no settings flag.
        !starts.is_empty() && starts.iter().all(|l| l == "tick --kicked --json"),
        "the plugin started atc with {starts:?}: kicks pass no tick flags"
    );

    // doctor, as a shell that reads another config file, says the server's kicks do not
    // tick with its settings; pointed at the server's file, that they do.
    let wd = server_home.join(".qwenpaw");
    let wd = wd.to_str().unwrap_or("");
    let pid = kick.server.pid().unwrap_or(0);
    let out = atc.run_env(&["doctor"], &[("QWENPAW_WORKING_DIR", wd)])?;
    ensure!(
        out.stdout.contains(&format!(
            "✗ server settings: the QwenPaw server (pid {pid}) does not tick with this shell's settings: its settings come from {} (max-age = 3d), this shell's from {} (no such file: the defaults)",
            config.display(),
            atc.home.join(".config/atc/config.toml").display()
        )),
        "atc doctor did not compare the server's config file: {}",
        out.stdout
    );
    let same = atc.with_env("ATC_CONFIG", config.to_str().unwrap_or(""));
    let out = same.run_env(&["doctor"], &[("QWENPAW_WORKING_DIR", wd)])?;
    ensure!(
        out.stdout.contains(&format!(
            "✓ server settings: the kicks of the QwenPaw server (pid {pid}) tick this job file with this shell's settings (the same config file values, no setting variables of their own)"
        )),
        "atc doctor with the server's config file: {}",
        out.stdout
    );
    let shown = same.ok(&["config", "get", "max-age"])?;
    ensure!(
        shown.stdout == "3d\n",
        "config get max-age: {:?}",
        shown.stdout
    );
    Ok(())
}
