//! The README's install lines work as written on a fresh account: run in a fresh HOME
//! (with `cargo install` standing in as a copy of the built binary into
//! `~/.cargo/bin`), `man -w atc` and `man -w atc-tick` (the units' `Documentation=`)
//! find the pages with nothing but `~/.cargo/bin` added to PATH, and each shell's
//! completion file is where that shell looks.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The lines of the README's install block (the `sh` block holding `cargo install`),
/// without comments and blank lines.
fn install_lines() -> Vec<String> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let blocks: Vec<&str> = readme.split("```sh\n").skip(1).collect();
    let block = blocks
        .iter()
        .map(|b| b.split("```").next().unwrap())
        .find(|b| b.contains("cargo install --path ."))
        .expect("the README has an install block");
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
    for line in install_lines() {
        if line.starts_with("cargo install") {
            // What `cargo install --path .` leaves: the binary in ~/.cargo/bin.
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

fn which(program: &str) -> Option<PathBuf> {
    ["/usr/local/bin", "/usr/bin", "/bin"]
        .iter()
        .map(|dir| Path::new(dir).join(program))
        .find(|p| p.is_file())
}
