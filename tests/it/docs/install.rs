//! The README's install lines, and the guide's man pages for a pip install, work as
//! written on a fresh account, run in a fresh HOME.
//!
//! The Cargo block (with `cargo install` standing in as a copy of the built binary into
//! `~/.cargo/bin`): `man -w atc` and `man -w atc-tick` (the units' `Documentation=`)
//! find the pages with nothing but `~/.cargo/bin` added to PATH, and each shell's
//! completion file is where that shell looks.
//!
//! The QwenPaw pip block (with `pip install atc-qwenpaw` standing in as a copy of the binary into the
//! virtualenv's `bin/`, which is what `tests/pip-install.sh` proves pip leaves there, in
//! `tests/e2e/run-all`): against a QwenPaw working dir with one agent, the plugin lands in
//! it with its tools enabled, the timer units name the virtualenv's atc, and `atc doctor`
//! finds all of that, failing only on the server nobody started. The `systemctl` lines are
//! systemd's own and need a user session a test does not have: they are skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The lines of the README's `sh` block that holds `marker`, without comments and blank
/// lines.
fn install_lines(marker: &str) -> Vec<String> {
    sh_lines("README.md", marker)
}

/// The lines of `document`'s `sh` block that holds `marker`, without comments and blank
/// lines.
fn sh_lines(document: &str, marker: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join(document)).unwrap();
    let blocks: Vec<&str> = text.split("```sh\n").skip(1).collect();
    let block = blocks
        .iter()
        .map(|b| b.split("```").next().unwrap())
        .find(|b| b.contains(marker))
        .unwrap_or_else(|| panic!("{document} has no sh block with {marker:?}"));
    block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// A fresh account: HOME, no MANPATH, XDG_* unset, PATH = ~/.cargo/bin + the system's.
fn fresh(home: &Path, program: &str) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear()
        .env("HOME", home)
        .env(
            "PATH",
            format!(
                "{}:/usr/local/bin:/usr/bin:/bin",
                home.join(".cargo/bin").display()
            ),
        )
        .env("LANG", "C")
        .current_dir(root());
    cmd
}

#[test]
fn the_readme_install_lines_put_man_pages_and_completions_where_they_are_found() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut script = vec!["set -eu".to_owned()];
    for line in install_lines("cargo install --locked --path .") {
        if line.starts_with("cargo install") {
            // What `cargo install --locked --path .` leaves: the binary in ~/.cargo/bin.
            script.push(format!(
                "mkdir -p ~/.cargo/bin && cp '{}' ~/.cargo/bin/atc",
                assert_cmd::cargo::cargo_bin("atc").display()
            ));
        } else if line.starts_with("man ") && which("man").is_none() {
            continue;
        } else {
            script.push(line);
        }
    }
    let out = fresh(&home, "sh")
        .arg("-c")
        .arg(script.join("\n"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let man1 = home.join(".cargo/share/man/man1");
    for page in ["atc.1", "atc-tick.1", "atc-watch.1"] {
        assert_eq!(
            std::fs::read(man1.join(page)).unwrap(),
            std::fs::read(root().join("man").join(page)).unwrap()
        );
    }
    for (file, says) in [
        (
            ".local/share/bash-completion/completions/atc",
            "complete -F",
        ),
        (".zfunc/_atc", "#compdef atc"),
        (".config/fish/completions/atc.fish", "complete -c atc"),
    ] {
        let text = std::fs::read_to_string(home.join(file)).unwrap();
        assert!(text.contains(says), "{file}");
    }

    if which("man").is_none() {
        eprintln!("man is not installed here: `man -w atc` not checked (the pages are in place)");
        return;
    }
    for page in ["atc", "atc-tick"] {
        let out = fresh(&home, "man").args(["-w", page]).output().unwrap();
        assert!(
            out.status.success(),
            "man -w {page}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            man1.join(format!("{page}.1")).display().to_string()
        );
    }
}

/// The guide's man-page lines for a pip install (issue 33: its loop once left out
/// `config`), with `pip install atc-qwenpaw` standing in as a copy of the binary into the
/// virtualenv's `bin/`: they write every page `atc generate man` knows, each the page in
/// man/, where `man -w` finds it.
#[test]
fn the_guides_pip_man_lines_write_every_page() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let lines = sh_lines("GUIDE.md", "generate man");
    let venv = lines
        .iter()
        .find(|l| l.starts_with("venv="))
        .expect("the block names the virtualenv")
        .clone();
    let (checks, writes): (Vec<String>, Vec<String>) =
        lines.into_iter().partition(|l| l.contains("man -w"));
    let run = |lines: &[String]| {
        let out = fresh(&home, "sh")
            .arg("-c")
            .arg(format!("set -eu\n{}", lines.join("\n")))
            .output()
            .unwrap();
        let said = format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{said}");
        said
    };
    // What `pip install atc-qwenpaw` leaves: the binary in the virtualenv's bin/.
    let pip = format!(
        "mkdir -p \"$venv/bin\" && cp '{}' \"$venv/bin/atc\"",
        assert_cmd::cargo::cargo_bin("atc").display()
    );
    run(&[venv.clone(), pip]);
    run(&writes);

    let man1 = home.join(".venvs/qwenpaw/share/man/man1");
    let titles =
        std::iter::once("atc").chain(atc::cli::generate::PAGES.iter().map(|(_, title)| *title));
    let mut missing = Vec::new();
    for title in titles {
        let page = format!("{title}.1");
        match std::fs::read(man1.join(&page)) {
            Ok(written) => assert_eq!(
                written,
                std::fs::read(root().join("man").join(&page)).unwrap(),
                "{page}"
            ),
            Err(_) => missing.push(page),
        }
    }
    assert!(
        missing.is_empty(),
        "the guide's lines write no {}",
        missing.join(", ")
    );

    if which("man").is_none() {
        eprintln!("man is not installed here: `man -w` not checked (the pages are in place)");
        return;
    }
    assert!(!checks.is_empty(), "the block checks with `man -w`");
    let said = run(&[vec![venv], checks].concat());
    let config = man1.join("atc-config.1");
    assert!(said.contains(&config.display().to_string()), "{said}");
}

fn which(program: &str) -> Option<PathBuf> {
    ["/usr/local/bin", "/usr/bin", "/bin"]
        .iter()
        .map(|dir| Path::new(dir).join(program))
        .find(|p| p.is_file())
}

#[test]
fn the_readme_qwenpaw_lines_install_the_plugin_and_the_timer() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    // A QwenPaw working dir where QwenPaw looks by default, with one agent (as
    // tests/pip-install.sh makes one); no QwenPaw ever ran on it, so nothing is asked.
    let workspace = home.join(".qwenpaw/workspaces/default");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(
        workspace.join("agent.json"),
        "{\"tools\": {\"builtin_tools\": {}}}\n",
    )
    .unwrap();
    let config = serde_json::json!({"agents": {"active_agent": "default",
        "profiles": {"default": {"workspace_dir": workspace}}}});
    std::fs::write(home.join(".qwenpaw/config.json"), config.to_string()).unwrap();

    let lines = install_lines("timer print systemd --unit service");
    let mut script = vec!["set -eu".to_owned()];
    let mut doctor = None;
    for line in &lines {
        if line.contains("pip\" install ") {
            // What `pip install atc-qwenpaw` leaves: the binary in the virtualenv's bin/.
            script.push(format!(
                "mkdir -p \"$venv/bin\" && cp '{}' \"$venv/bin/atc\"",
                assert_cmd::cargo::cargo_bin("atc").display()
            ));
        } else if line.starts_with("systemctl ") {
            continue;
        } else if line.contains("atc\" doctor") {
            doctor = Some(line.clone());
        } else {
            script.push(line.clone());
        }
    }
    let venv_line = lines
        .iter()
        .find(|l| l.starts_with("venv="))
        .expect("the block names the virtualenv")
        .clone();
    let doctor = doctor.expect("the block ends with atc doctor");
    let run = |script: &str| {
        fresh(&home, "sh")
            .env("ATC_BASE_URL", "http://127.0.0.1:9") // nothing listens there
            .arg("-c")
            .arg(script)
            .output()
            .unwrap()
    };
    let out = run(&script.join("\n"));
    let said = |out: &std::process::Output| {
        format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    assert!(out.status.success(), "{}", said(&out));

    let plugin = home.join(".qwenpaw/plugins/atc");
    for (file, _) in atc::install::PLUGIN_FILES {
        assert!(plugin.join(file).is_file(), "{file}: {}", said(&out));
    }
    let agent = std::fs::read_to_string(workspace.join("agent.json")).unwrap();
    assert!(agent.contains("watch_agent_task"), "{agent}");
    let venv_atc = home.join(".venvs/qwenpaw/bin/atc");
    let units = home.join(".config/systemd/user");
    let service = std::fs::read_to_string(units.join("atc-tick.service")).unwrap();
    assert!(
        service.contains(&format!("ExecStart={} tick", venv_atc.display())),
        "{service}"
    );
    let timer = std::fs::read_to_string(units.join("atc-tick.timer")).unwrap();
    assert!(timer.contains("OnUnitActiveSec=20s"), "{timer}");

    let out = run(&format!("{venv_line}\n{doctor}"));
    let text = said(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("✓ plugin: atc's plugin is installed"),
        "{text}"
    );
    assert!(
        text.contains("✓ plugin tools: enabled for every agent: default"),
        "{text}"
    );
    let failed: Vec<&str> = text.lines().filter(|l| l.starts_with('✗')).collect();
    assert_eq!(failed.len(), 1, "{text}");
    assert!(failed[0].starts_with("✗ server: cannot reach it"), "{text}");
}
