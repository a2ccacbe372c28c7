//! The man pages in man/ and the completions in completions/ are generated from the clap
//! definition (`atc generate …`) and committed; this fails when they drift. Regenerate
//! with `ATC_REGENERATE=1 cargo test --test generated`.

use std::path::{Path, PathBuf};

use atc::cli::generate::PAGES;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Compares `generated` with the committed file, or rewrites it under ATC_REGENERATE=1.
fn check(path: &Path, generated: &[u8], stale: &mut Vec<String>) {
    if std::env::var_os("ATC_REGENERATE").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, generated).unwrap();
        return;
    }
    match std::fs::read(path) {
        Ok(committed) if committed == generated => {}
        Ok(_) => stale.push(format!("{} differs", path.display())),
        Err(err) => stale.push(format!("{}: {err}", path.display())),
    }
}

#[test]
fn man_pages_match_the_binary() {
    let mut stale = Vec::new();
    let pages = std::iter::once((None, "atc")).chain(
        PAGES
            .iter()
            .map(|(command, title)| (Some(*command), *title)),
    );
    for (command, title) in pages {
        let mut generated = Vec::new();
        atc::cli::generate::man(command, &mut generated).unwrap();
        let text = String::from_utf8(generated.clone()).unwrap();
        assert!(text.contains(&format!(".TH {title} 1")), "{title}");
        check(
            &root().join("man").join(format!("{title}.1")),
            &generated,
            &mut stale,
        );
    }
    assert!(
        stale.is_empty(),
        "regenerate with ATC_REGENERATE=1 cargo test --test generated:\n{}",
        stale.join("\n")
    );
}

#[test]
fn the_atc_page_documents_settings_and_exit_codes() {
    let mut generated = Vec::new();
    atc::cli::generate::man(None, &mut generated).unwrap();
    let text = String::from_utf8(generated).unwrap();
    for needle in [
        "ATC_STATE",
        "QWENPAW_RUNTIME_INTERNAL_TOKEN",
        "Exit codes:",
        "75   job file locked",
    ] {
        assert!(text.contains(needle), "atc.1 lacks {needle}");
    }
}

#[test]
fn completions_match_the_binary() {
    let mut stale = Vec::new();
    for (shell, file) in [("bash", "atc.bash"), ("zsh", "_atc"), ("fish", "atc.fish")] {
        let out = assert_cmd::Command::cargo_bin("atc")
            .unwrap()
            .args(["generate", "completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("watch"),
            "{shell}"
        );
        check(
            &root().join("completions").join(file),
            &out.stdout,
            &mut stale,
        );
    }
    assert!(
        stale.is_empty(),
        "regenerate with ATC_REGENERATE=1 cargo test --test generated:\n{}",
        stale.join("\n")
    );
}

#[test]
fn an_unknown_page_is_a_usage_error() {
    assert_cmd::Command::cargo_bin("atc")
        .unwrap()
        .args(["generate", "man", "nope"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("pages: atc, watch"));
}
