//! The man pages in man/ and the completions in completions/ are generated from the clap
//! definition (`atc generate …`) and committed; this fails when they drift. Regenerate
//! with `ATC_REGENERATE=1 cargo test --test it generated`.

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
        "regenerate with ATC_REGENERATE=1 cargo test --test it generated:\n{}",
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
        "regenerate with ATC_REGENERATE=1 cargo test --test it generated:\n{}",
        stale.join("\n")
    );
}

/// `atc generate man --help` names every page it prints (a packager's loop reads the list
/// there; the guide's pip loop is checked by tests/it/docs/install.rs).
#[test]
fn generate_man_help_names_every_page() {
    let out = assert_cmd::Command::cargo_bin("atc")
        .unwrap()
        .args(["generate", "man", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let words: Vec<&str> = help
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '-')
        .collect();
    for (command, _) in PAGES {
        assert!(words.contains(&command), "no {command} in\n{help}");
    }
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

/// One completion a shell is asked for: the words before the cursor (`atc watch
/// --on-empty`), and what it must offer there, with each offer's description.
struct Completion {
    words: Vec<String>,
    offers: Vec<(String, String)>,
}

/// From the clap definition: every command's subcommands, and every option's possible
/// values, with the help clap gives each (what `--help` shows).
fn completions_to_offer() -> Vec<Completion> {
    use clap::CommandFactory;
    fn walk(command: &clap::Command, words: Vec<String>, into: &mut Vec<Completion>) {
        let subcommands: Vec<&clap::Command> = command
            .get_subcommands()
            .filter(|sub| !sub.is_hide_set() && sub.get_name() != "help")
            .collect();
        if !subcommands.is_empty() {
            into.push(Completion {
                words: words.clone(),
                offers: subcommands
                    .iter()
                    .map(|sub| {
                        let about = sub.get_about().map(ToString::to_string);
                        (sub.get_name().to_owned(), about.unwrap_or_default())
                    })
                    .collect(),
            });
        }
        for arg in command.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            let values: Vec<(String, String)> = arg
                .get_possible_values()
                .into_iter()
                .filter(|value| !value.is_hide_set())
                .map(|value| {
                    let help = value.get_help().map(|h| h.to_string().replace('\n', " "));
                    (value.get_name().to_owned(), help.unwrap_or_default())
                })
                .collect();
            if arg.is_hide_set() || values.is_empty() {
                continue;
            }
            let mut words = words.clone();
            words.push(format!("--{long}"));
            into.push(Completion {
                words,
                offers: values,
            });
        }
        for sub in subcommands {
            let mut words = words.clone();
            words.push(sub.get_name().to_owned());
            walk(sub, words, into);
        }
    }
    let mut cli = atc::cli::Cli::command();
    cli.build();
    let mut all = Vec::new();
    walk(&cli, vec!["atc".to_owned()], &mut all);
    assert!(
        all.iter()
            .any(|c| c.words.join(" ") == "atc watch --on-empty"),
        "the walk misses watch --on-empty"
    );
    all
}

/// Runs `script` in `shell`, in an empty HOME; asserts exit 0 and an empty stderr, returns
/// stdout. A missing shell fails the test, never skips it: a completion nobody loaded is
/// not checked (bash is everywhere; .ci/run and the workflows install fish).
fn run_in(shell: &str, args: &[&str], script: &str) -> String {
    let home = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(shell)
        .args(args)
        .arg(script)
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", "/usr/local/bin:/usr/bin:/bin:/opt/homebrew/bin")
        .env("LANG", "C.UTF-8")
        .current_dir(root())
        .output()
        .unwrap_or_else(|err| {
            panic!("{shell} is not installed here ({err}): install it to test its completions")
        });
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.is_empty(),
        "{shell}: {}\nstderr:\n{stderr}\nstdout:\n{stdout}",
        out.status
    );
    stdout
}

/// The answers of a script that printed `== N` before the answer to completion N.
fn answers(stdout: &str, count: usize) -> Vec<Vec<&str>> {
    let mut answers = vec![Vec::new(); count];
    let mut at = None;
    for line in stdout.lines() {
        if let Some(n) = line.strip_prefix("== ") {
            at = Some(n.parse::<usize>().unwrap());
        } else if let Some(n) = at {
            answers[n].push(line);
        }
    }
    answers
}

/// fish runs the committed completions as fish does on the first `atc <TAB>`, and offers
/// every command and every option value with its description, word for word. A value's
/// help goes into a double-quoted fish string that clap_complete does not escape `"` or
/// `$` in: `("(No text content in response)")` there made fish run `No` as a command
/// (issue 33).
#[test]
fn fish_completes_every_command_and_value() {
    let wanted = completions_to_offer();
    let mut script = String::from("source completions/atc.fish\n");
    for (n, completion) in wanted.iter().enumerate() {
        script.push_str(&format!(
            "echo '== {n}'; complete -C '{} '\n",
            completion.words.join(" ")
        ));
    }
    let stdout = run_in("fish", &["--no-config", "-c"], &script);
    for (completion, offered) in wanted.iter().zip(answers(&stdout, wanted.len())) {
        for (word, description) in &completion.offers {
            let line = format!("{word}\t{description}");
            assert!(
                offered.contains(&line.as_str()),
                "fish offers no {line:?} after `{}`:\n{}",
                completion.words.join(" "),
                offered.join("\n")
            );
        }
    }
}

/// bash (with bash-completion's `complete -F` alone, no package) offers every command and
/// every option value after the committed completions are sourced.
#[test]
fn bash_completes_every_command_and_value() {
    let wanted = completions_to_offer();
    let mut script = String::from("set -e\nsource completions/atc.bash\n");
    for (n, completion) in wanted.iter().enumerate() {
        let words = completion.words.join(" ");
        script.push_str(&format!(
            "echo '== {n}'; COMP_WORDS=({words} ''); COMP_CWORD={}; COMP_LINE='{words} '; \
             COMP_POINT=${{#COMP_LINE}}; _atc atc '' {}; printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
            completion.words.len(),
            completion.words.last().unwrap(),
        ));
    }
    let stdout = run_in("bash", &["--norc", "--noprofile", "-c"], &script);
    for (completion, offered) in wanted.iter().zip(answers(&stdout, wanted.len())) {
        for (word, _) in &completion.offers {
            assert!(
                offered.contains(&word.as_str()),
                "bash offers no {word:?} after `{}`:\n{}",
                completion.words.join(" "),
                offered.join("\n")
            );
        }
    }
}
