//! The time estimates people read (issue 16, case 21) have one home,
//! `tests/e2e/estimates.sh`. Every estimate stated in the scripts (`examples/demo.sh`,
//! `tests/e2e/provision.sh`, `tests/e2e/provision-browser.sh`, `tests/e2e/run-all`) or in
//! the marked parts of the documents that quote them (between `<!-- estimates -->` and
//! `<!-- /estimates -->`: the READMEs and CONTRIBUTING.md) must be one of its values, word
//! for word, so two files (or one output) can no longer disagree; and every value must be
//! used. Whether the values are true is measured, not asserted: `run-all` prints each
//! part's time beside its estimate.

use std::path::Path;

const SCRIPTS: [&str; 4] = [
    "examples/demo.sh",
    "tests/e2e/provision.sh",
    "tests/e2e/provision-browser.sh",
    "tests/e2e/run-all",
];
const DOCUMENTS: [&str; 3] = ["README.md", "CONTRIBUTING.md", "tests/e2e/README.md"];
/// What the README must tell a new user before they run anything.
const IN_THE_README: [&str; 6] = [
    "est_provision",
    "est_demo_first",
    "est_demo_later",
    "est_fast",
    "est_e2e",
    "est_run_all",
];

fn read(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `est_<name>='<text>'` lines; anything else but comments and blank lines fails.
fn estimates() -> Vec<(String, String)> {
    let text = read("tests/e2e/estimates.sh");
    let mut all = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (name, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("not `est_<name>='<text>'`: {line:?}"));
        let value = value
            .strip_prefix('\'')
            .and_then(|v| v.strip_suffix('\''))
            .filter(|v| !v.contains('\''))
            .unwrap_or_else(|| panic!("not one single-quoted value: {line:?}"));
        assert!(name.starts_with("est_"), "{line:?}");
        all.push((name.to_owned(), value.to_owned()));
    }
    assert!(all.len() >= IN_THE_README.len(), "{all:?}");
    all
}

/// Lines joined into one, `#` comment markers dropped and runs of white space made one
/// space: a value may wrap across lines (of a comment, or a paragraph).
fn flat(text: &str) -> String {
    text.lines()
        .map(|l| {
            let l = l.trim_start();
            l.strip_prefix('#').unwrap_or(l).trim()
        })
        .collect::<Vec<_>>()
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The parts of a document between the markers.
fn marked(rel: &str) -> Vec<String> {
    let text = read(rel);
    let mut parts = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("<!-- estimates -->") {
        let after = &rest[at..];
        let end = after
            .find("<!-- /estimates -->")
            .unwrap_or_else(|| panic!("{rel}: an estimates marker is not closed"));
        parts.push(after[..end].to_owned());
        rest = &after[end..];
    }
    assert!(!parts.is_empty(), "{rel} marks no estimates");
    parts
}

const UNITS: [&str; 6] = ["s", "seconds", "sec", "min", "minutes", "minute"];

/// Every phrase that states how long something takes: a number or a range (`2–3`, `5-15`)
/// and a unit of time, when it is a range or says `~`, `about` or `up to`. (A plain
/// `2 minutes`, `a 30 s soak`, is a fact about atc, not an estimate.) Byte ranges.
fn stated(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts_number = bytes[i].is_ascii_digit()
            && (i == 0 || !bytes[i - 1].is_ascii_alphanumeric() && bytes[i - 1] != b'.');
        if !starts_number {
            i += 1;
            continue;
        }
        let mut j = i;
        let digits = |j: &mut usize| {
            while *j < bytes.len() && (bytes[*j].is_ascii_digit() || bytes[*j] == b'.') {
                *j += 1;
            }
        };
        digits(&mut j);
        let mut range = false;
        for dash in ["–", "-"] {
            if text[j..].starts_with(dash)
                && text[j + dash.len()..].starts_with(|c: char| c.is_ascii_digit())
            {
                j += dash.len();
                digits(&mut j);
                range = true;
            }
        }
        let unit = text[j..].strip_prefix(' ').and_then(|rest| {
            UNITS.iter().find(|u| {
                rest.starts_with(*u) && !rest[u.len()..].starts_with(|c: char| c.is_alphanumeric())
            })
        });
        if let Some(unit) = unit {
            let end = j + 1 + unit.len();
            let before = &text[..i];
            let hedged = ["~", "about ", "up to "]
                .iter()
                .find(|h| before.ends_with(*h))
                .map(|h| h.len());
            if range || hedged.is_some() {
                found.push((i - hedged.unwrap_or(0), end));
            }
            i = end;
        } else {
            i = j.max(i + 1);
        }
    }
    found
}

/// The phrases in `text` that no occurrence of a value covers.
fn unknown(text: &str, values: &[(String, String)]) -> Vec<String> {
    let covers: Vec<(usize, usize)> = values
        .iter()
        .flat_map(|(_, v)| {
            text.match_indices(v.as_str())
                .map(|(at, v)| (at, at + v.len()))
        })
        .collect();
    stated(text)
        .into_iter()
        .filter(|(a, b)| !covers.iter().any(|(s, e)| s <= a && b <= e))
        .map(|(a, b)| {
            let mut from = a.saturating_sub(40);
            while !text.is_char_boundary(from) {
                from -= 1;
            }
            format!("{:?} (in “…{}”)", &text[a..b], &text[from..b])
        })
        .collect()
}

#[test]
fn the_finder_sees_estimates_and_leaves_facts_alone() {
    let text =
        "takes about 2–3 minutes, ~10 s, 5-15 s, up to 5 min; every 2 minutes; a 30 s soak; 1.5 GB";
    let found: Vec<&str> = stated(text).iter().map(|(a, b)| &text[*a..*b]).collect();
    assert_eq!(
        found,
        ["about 2–3 minutes", "~10 s", "5-15 s", "up to 5 min"]
    );
}

#[test]
fn every_estimate_is_one_of_the_values_word_for_word() {
    let values = estimates();
    let mut wrong = Vec::new();
    for rel in SCRIPTS {
        for phrase in unknown(&flat(&read(rel)), &values) {
            wrong.push(format!("{rel}: {phrase}"));
        }
    }
    for rel in DOCUMENTS {
        for part in marked(rel) {
            for phrase in unknown(&flat(&part), &values) {
                wrong.push(format!("{rel}: {phrase}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "estimates that are not in tests/e2e/estimates.sh (quote one of its values, or change it there and everywhere):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_value_is_quoted_or_printed_and_the_readme_gives_the_first_hours() {
    let values = estimates();
    let scripts: Vec<String> = SCRIPTS.iter().map(|r| read(r)).collect();
    let documents: Vec<String> = DOCUMENTS
        .iter()
        .flat_map(|r| marked(r))
        .chain(scripts.iter().cloned())
        .map(|t| flat(&t))
        .collect();
    for (name, value) in &values {
        let printed = scripts.iter().any(|s| s.contains(&format!("${name}")));
        let quoted = documents.iter().any(|d| d.contains(value.as_str()));
        assert!(printed || quoted, "{name}='{value}' is used nowhere");
    }
    let readme: String = marked("README.md").iter().map(|p| flat(p)).collect();
    for name in IN_THE_README {
        let value = &values.iter().find(|(n, _)| n == name).unwrap().1;
        assert!(
            readme.contains(value.as_str()),
            "the README does not say {name}: '{value}'"
        );
    }
}
