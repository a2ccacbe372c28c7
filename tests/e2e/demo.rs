//! `examples/demo.sh --keep` (issue 16, case 20): the demo leaves the server, the job file
//! and a second child task, prints what to try and how to stop it all. This runs the demo
//! as a new user would, then every command it printed, in order, in a shell, then the
//! printed stop command, and checks that each did what the demo says it does.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::R;
use crate::api::Api;
use crate::ensure;
use crate::procs;
use crate::scenarios::Ctx;

/// What `--keep` printed: where things are and the commands to try.
struct Kept {
    state: String,
    base_url: String,
    first: String,
    second: String,
    /// The indented `atc …` lines of the "try" list, in order.
    commands: Vec<String>,
    stop: PathBuf,
}

impl Kept {
    fn parse(out: &str) -> R<Kept> {
        let export = out
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with("export ATC_STATE="))
            .ok_or("no `export ATC_STATE=…` line")?;
        let quoted: Vec<&str> = export.split('\'').collect();
        ensure!(
            quoted.len() == 5 && quoted[2].trim() == "ATC_BASE_URL=",
            "unexpected export line {export:?}"
        );
        let commands: Vec<String> = out
            .lines()
            .filter(|l| l.starts_with("    atc "))
            .map(|l| l.trim().to_owned())
            .collect();
        let word = |prefix: &str| {
            commands
                .iter()
                .find_map(|c| c.strip_prefix(prefix))
                .map(|rest| rest.split(' ').next().unwrap_or("").to_owned())
                .ok_or(format!("no `{prefix}…` line"))
        };
        let stop = out
            .lines()
            .map(str::trim)
            .find(|l| l.ends_with("/stop.sh"))
            .ok_or("no stop command")?;
        Ok(Kept {
            state: quoted[1].to_owned(),
            base_url: quoted[3].to_owned(),
            first: word("atc wait ")?,
            second: word("atc cancel ")?,
            commands,
            stop: PathBuf::from(stop),
        })
    }
}

/// Stops what the demo left running when the scenario ends early.
struct Stop(Option<PathBuf>);

impl Drop for Stop {
    fn drop(&mut self) {
        if let Some(stop) = self.0.take() {
            let _ = Command::new(stop).output();
        }
    }
}

pub fn demo_keep(ctx: &Ctx) -> R<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = ctx.scratch.path().join(ctx.uniq("demo-tmp"));
    std::fs::create_dir_all(&tmp).map_err(|e| e.to_string())?;
    // The atc under test is the one on PATH (the demo uses it), and the QwenPaw cache is
    // the one the suite provisioned.
    let bin = ctx.scratch.path().join("bin");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let cache = ctx
        .venv
        .python
        .ancestors()
        .find(|p| p.ends_with("atc/e2e"))
        .and_then(|p| p.parent()?.parent())
        .ok_or("the venv is not under <cache>/atc/e2e")?
        .to_owned();
    let mut demo = Command::new("bash");
    demo.arg(root.join("examples/demo.sh"))
        .arg("--keep")
        .env("PATH", &path)
        .env("TMPDIR", &tmp)
        .env("XDG_CACHE_HOME", &cache)
        .env_remove("NO_COLOR");
    let out = procs::run("demo.sh --keep", demo, None, Duration::from_secs(300), &tmp)?;
    ensure!(
        out.status.success(),
        "demo.sh --keep exited {}: {}",
        out.status,
        procs::clip(&format!("{}{}", out.stdout, out.stderr), 2000)
    );
    let kept = Kept::parse(&out.stdout).map_err(|e| format!("{e} in: {}", out.stdout))?;
    let mut guard = Stop(Some(kept.stop.clone()));
    ensure!(
        Path::new(&kept.state).is_file(),
        "the job file {} was not kept",
        kept.state
    );
    let api = Api::new(&kept.base_url, None);
    ensure!(
        api.get("/api/version", None)?.status == 200,
        "the kept server at {} does not answer",
        kept.base_url
    );
    ensure!(
        out.stdout.contains("(the delivered watch; it in full;"),
        "no explanation of the commands"
    );

    // Every printed command, in order, as a user would paste it after the export line.
    let sh = |line: &str| -> R<procs::Output> {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(line)
            .env("PATH", &path)
            .env("ATC_STATE", &kept.state)
            .env("ATC_BASE_URL", &kept.base_url)
            .env("HOME", &tmp)
            .env("XDG_STATE_HOME", tmp.join("state"));
        procs::run(line, cmd, None, Duration::from_secs(60), &tmp)
    };
    let (first, second) = (&kept.first, &kept.second);
    let want: Vec<(String, i32, String)> = vec![
        ("atc status".into(), 0, first.clone()),
        (format!("atc status {first}"), 0, "delivered".into()),
        ("atc log".into(), 0, "delivered".into()),
        (
            format!("atc wait {first}"),
            0,
            "ECHO: What is the answer to everything?".into(),
        ),
        (
            format!("atc redeliver {first}"),
            1,
            "was already delivered".into(),
        ),
        (
            format!("atc watch {second} --session demo-parent --user demo --channel console"),
            0,
            format!("Watching {second}"),
        ),
        (
            format!("atc cancel {second}"),
            0,
            format!("Cancelled the watch on {second}"),
        ),
        (
            format!("atc watch {second} --session demo-parent --user demo --channel console"),
            0,
            format!("Watching {second}"),
        ),
        ("atc tick".into(), 0, String::new()),
        ("atc status".into(), 0, second.clone()),
    ];
    ensure!(
        kept.commands == want.iter().map(|w| w.0.clone()).collect::<Vec<_>>(),
        "the demo printed {:?}",
        kept.commands
    );
    for (line, code, says) in &want {
        let run = sh(line)?;
        let both = format!("{}{}", run.stdout, run.stderr);
        ensure!(
            run.status.code() == Some(*code) && both.contains(says.as_str()),
            "`{line}` exited {} (want {code}, saying {says:?}): {both}",
            run.status
        );
    }
    // The one tick delivered the second child's result into the parent chat.
    let jobs: Value = serde_json::from_slice(
        &std::fs::read(&kept.state).map_err(|e| format!("{}: {e}", kept.state))?,
    )
    .map_err(|e| e.to_string())?;
    let job = jobs["jobs"]
        .as_array()
        .and_then(|jobs| jobs.iter().find(|j| j["task_id"] == second.as_str()))
        .ok_or("the second watch is not in the job file")?;
    ensure!(
        job["status"] == "done",
        "the second watch is {}",
        job["status"]
    );
    let history = api.history("default", "demo", "demo-parent", Duration::from_secs(60))?;
    let delivered = history
        .iter()
        .filter(|m| m.role == "user" && m.text.contains("ECHO: And what is the question?"))
        .count();
    ensure!(
        delivered == 1,
        "the parent chat holds the second result {delivered} times"
    );

    // The printed stop command stops the server and the fake LLM and removes the files.
    let work = kept
        .stop
        .parent()
        .ok_or("stop.sh has no directory")?
        .to_owned();
    guard.0 = None;
    let mut stop = Command::new(&kept.stop);
    stop.env("PATH", &path);
    let stopped = procs::run("stop.sh", stop, None, Duration::from_secs(30), &tmp)?;
    ensure!(
        stopped.status.success()
            && stopped.stdout == format!("stopped; {} removed\n", work.display()),
        "stop.sh exited {}: {}{}",
        stopped.status,
        stopped.stdout,
        stopped.stderr
    );
    ensure!(!work.exists(), "{} is still there", work.display());
    ensure!(
        api.get("/api/version", None).is_err(),
        "the server still answers after stop.sh"
    );
    Ok(())
}
