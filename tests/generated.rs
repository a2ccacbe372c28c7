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
    for section in [
        ".SH NAME",
        ".SH SYNOPSIS",
        ".SH DESCRIPTION",
        ".SH \"GLOBAL OPTIONS\"",
        ".SH SUBCOMMANDS",
        ".SH ENVIRONMENT",
        ".SH FILES",
        ".SH \"EXIT STATUS\"",
        ".SH EXAMPLES",
        ".SH \"SEE ALSO\"",
    ] {
        assert!(text.contains(section), "atc.1 lacks {section}");
    }
    for var in [
        "ATC_STATE",
        "ATC_BASE_URL",
        "ATC_SESSION_ID",
        "ATC_USER_ID",
        "ATC_CHANNEL",
        "ATC_AGENT_ID",
        "ATC_BEARER_TOKEN",
        "QWENPAW_RUNTIME_INTERNAL_TOKEN",
        "QWENPAW_RUNTIME_API_URL",
        "QWENPAW_WORKING_DIR",
    ] {
        assert!(
            text.contains(&format!(".TP\n\\fB{var}\\fR\n")),
            "ENVIRONMENT lacks {var}"
        );
    }
    // Each exit code is its own tagged paragraph (a table that cannot wrap out of line).
    let status =
        &text[text.find(".SH \"EXIT STATUS\"").unwrap()..text.find(".SH EXAMPLES").unwrap()];
    for (exit, meaning) in atc::exit::MEANINGS {
        let entry = format!(".TP\n\\fB{}\\fR\n", exit.code());
        assert!(status.contains(&entry), "EXIT STATUS lacks {}", exit.code());
        let first_word = meaning.split(' ').next().unwrap();
        assert!(status.contains(first_word), "{meaning}");
    }
}

/// Every option that takes a value shows it in the SYNOPSIS, as `--help` does
/// (`[--state FILE]`; clap_mangen alone writes `[--state]`, as if it were a switch).
#[test]
fn synopses_show_the_value_each_option_takes() {
    use clap::CommandFactory;
    let mut cli = atc::cli::Cli::command();
    cli.build();
    let pages = std::iter::once((None, cli.clone())).chain(PAGES.iter().map(|(command, _)| {
        let sub = cli.find_subcommand(command).unwrap().clone();
        (Some(*command), sub)
    }));
    let mut checked = 0;
    for (command, page) in pages {
        let mut generated = Vec::new();
        atc::cli::generate::man(command, &mut generated).unwrap();
        let text = String::from_utf8(generated).unwrap();
        let synopsis = text
            .split(".SH SYNOPSIS\n")
            .nth(1)
            .and_then(|rest| rest.lines().next())
            .unwrap_or_else(|| panic!("{command:?} has no SYNOPSIS"));
        for arg in page.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            // A hidden option (`watch --origin`, for atc's own plugin) is in no page.
            if arg.is_hide_set() {
                continue;
            }
            let flag = format!("\\fB\\-\\-{}\\fR", long.replace('-', "\\-"));
            let takes_value = arg.get_num_args().is_some_and(|n| n.takes_values());
            if takes_value {
                let value = arg.get_value_names().unwrap().join(" ");
                let shown = format!("{flag} \\fI{value}\\fR");
                assert!(
                    synopsis.contains(&shown),
                    "{command:?}: no {shown} in\n{synopsis}"
                );
                checked += 1;
            } else {
                assert!(
                    synopsis.contains(&format!("{flag}]"))
                        || synopsis.contains(&format!("{flag}|"))
                        || synopsis.contains(&format!("|{flag}")),
                    "{command:?}: --{long} takes no value: {synopsis}"
                );
            }
        }
    }
    // --state and --base-url on every page, and the tick's and watch's own.
    assert!(checked > 40, "{checked}");
}

/// Without `man`: the checked-in page has every section heading.
fn checked_in_has_every_section(page: &std::path::Path) {
    let text = std::fs::read_to_string(page).unwrap();
    for heading in [
        ".SH NAME",
        ".SH DESCRIPTION",
        ".SH ENVIRONMENT",
        ".SH FILES",
        ".SH \"EXIT STATUS\"",
        ".SH EXAMPLES",
    ] {
        assert!(text.contains(heading), "man/atc.1 lacks {heading}");
    }
}

/// Where `man` is installed, the checked-in page renders with every section.
#[test]
fn man_renders_the_checked_in_page() {
    let page = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("man/atc.1");
    let Ok(out) = std::process::Command::new("man")
        .arg("-l")
        .arg(&page)
        .env("MANWIDTH", "80")
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .output()
    else {
        eprintln!("man is not installed here: rendering not checked");
        return checked_in_has_every_section(&page);
    };
    let shown = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || shown.trim().is_empty() {
        eprintln!(
            "man could not render here ({}): rendering not checked",
            out.status
        );
        return checked_in_has_every_section(&page);
    }
    for heading in [
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "GLOBAL OPTIONS",
        "SUBCOMMANDS",
        "ENVIRONMENT",
        "FILES",
        "EXIT STATUS",
        "EXAMPLES",
        "SEE ALSO",
    ] {
        assert!(
            shown.lines().any(|l| l.trim_end() == heading),
            "man atc shows no {heading}:\n{shown}"
        );
    }
    assert!(shown.contains("124    wait timed out"), "{shown}");
}

/// `atc watch` takes many task ids: its page says so, as `--help` does.
#[test]
fn the_watch_synopsis_shows_many_task_ids() {
    let mut generated = Vec::new();
    atc::cli::generate::man(Some("watch"), &mut generated).unwrap();
    let text = String::from_utf8(generated).unwrap();
    let synopsis = text
        .lines()
        .find(|l| l.starts_with("\\fBatc watch\\fR"))
        .unwrap();
    assert!(synopsis.ends_with("[\\fITASK_ID\\fR]... "), "{synopsis}");
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
