//! Every relative link in every Markdown file of the repository leads somewhere: the file
//! or directory exists, and a `#anchor` names a heading of the Markdown file it points
//! into (or an `id`/`name` set in its HTML), by GitHub's rules for heading anchors. Links
//! with a scheme (`https:`, `mailto:`) are left alone: no network. Standard library only.
//!
//! GitHub's anchor for a heading (github-slugger): the heading's text, lowercased, with
//! every character that is not a letter, a digit, `-`, `_` or a space dropped, and each
//! space made `-`; a second heading with the same anchor gets `-1`, a third `-2`, and so on.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The anchor GitHub gives a heading whose text (as rendered) is `text`.
fn slug(text: &str) -> String {
    text.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// A heading's text as GitHub renders it: code spans keep their content, emphasis marks
/// and link targets go, `[text](target)` keeps its text.
fn rendered(heading: &str) -> String {
    let mut out = String::new();
    let mut rest = heading;
    while let Some(c) = rest.chars().next() {
        if c == '`' {
            let run = rest.len() - rest.trim_start_matches('`').len();
            let fence = &rest[..run];
            if let Some(end) = rest[run..].find(fence) {
                out.push_str(rest[run..run + end].trim());
                rest = &rest[run + end + run..];
                continue;
            }
            out.push_str(fence);
            rest = &rest[run..];
            continue;
        }
        if c == '['
            && let Some((text, _, after)) = link_at(rest)
        {
            out.push_str(&rendered(text));
            rest = after;
            continue;
        }
        // An HTML tag renders as nothing of the text.
        if c == '<'
            && let Some(end) = rest.find('>')
            && rest[1..end]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '/')
        {
            rest = &rest[end + 1..];
            continue;
        }
        if c != '*' && c != '\\' {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    out.trim().to_owned()
}

/// Where `close` brings the nesting, `depth` deep at the start of `s`, back to none.
fn closing(s: &str, open: char, close: char, mut depth: i32) -> Option<usize> {
    for (i, c) in s.char_indices() {
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
            if depth == 0 {
                return Some(i);
            }
        }
    }
    None
}

/// `[text](target "title")` at the start of `s`: (text, target, what follows).
fn link_at(s: &str) -> Option<(&str, &str, &str)> {
    let close = closing(s, '[', ']', 0)?;
    let after = s[close + 1..].strip_prefix('(')?;
    let end = closing(after, '(', ')', 1)?;
    let inside = after[..end].trim();
    let target = if let Some(angled) = inside.strip_prefix('<') {
        angled.split('>').next().unwrap_or("")
    } else {
        inside.split_whitespace().next().unwrap_or("")
    };
    Some((&s[1..close], target, &after[end + 1..]))
}

/// A code fence at the start of `line` (indented or not): its character and length.
fn fence(line: &str) -> Option<(char, usize)> {
    let trimmed = line.trim_start();
    let c = trimmed.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let run = trimmed.len() - trimmed.trim_start_matches(c).len();
    (run >= 3).then_some((c, run))
}

/// The lines of a Markdown text that are prose. Fenced code blocks and YAML front matter
/// become blank lines (their brackets are not links and their `#`s not headings), so
/// that a paragraph ends where they start.
fn prose_lines(text: &str) -> Vec<&str> {
    let mut lines = text.lines().peekable();
    let mut prose = Vec::new();
    if lines.peek() == Some(&"---") {
        lines.next();
        for line in lines.by_ref() {
            if line == "---" {
                break;
            }
        }
    }
    let mut open: Option<(char, usize)> = None;
    for line in lines {
        match (open, fence(line)) {
            (Some((c, n)), Some((d, m))) if c == d && m >= n && line.trim().len() == m => {
                open = None;
                prose.push("");
            }
            (Some(_), _) => prose.push(""),
            (None, Some(found)) => {
                open = Some(found);
                prose.push("");
            }
            (None, None) => prose.push(line),
        }
    }
    prose
}

/// Every anchor a Markdown text offers: its headings' (ATX `#`, and setext `===`/`---`
/// underlines), numbered as GitHub numbers repeats, and the `id`/`name` of its HTML.
fn anchors(text: &str) -> Vec<String> {
    let lines = prose_lines(text);
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut found = Vec::new();
    let mut add = |heading: &str, found: &mut Vec<String>| {
        let base = slug(&rendered(heading));
        let n = seen.entry(base.clone()).or_insert(0);
        found.push(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    };
    for (i, line) in lines.iter().enumerate() {
        let hashes = line.len() - line.trim_start_matches('#').len();
        if (1..=6).contains(&hashes)
            && (line.len() == hashes || line[hashes..].starts_with([' ', '\t']))
        {
            let text = line[hashes..].trim();
            let text = text.trim_end_matches('#').trim_end();
            add(text, &mut found);
            continue;
        }
        let underline = line.trim();
        let setext = !underline.is_empty()
            && (underline.chars().all(|c| c == '=') || underline.chars().all(|c| c == '-'));
        if setext && i > 0 {
            let above = lines[i - 1].trim();
            if !above.is_empty() && !above.starts_with(['#', '|', '-', '*', '>']) {
                add(above, &mut found);
            }
        }
    }
    for line in &lines {
        for attr in ["id=\"", "name=\""] {
            let mut rest = *line;
            while let Some(at) = rest.find(attr) {
                rest = &rest[at + attr.len()..];
                if let Some(end) = rest.find('"') {
                    found.push(rest[..end].to_owned());
                }
            }
        }
    }
    found
}

/// Every link target in a Markdown text's prose: inline links and images
/// (`[text](target)`), reference definitions (`[name]: target`) and HTML `href`/`src`,
/// outside code spans.
fn targets(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    // Paragraphs, not lines: a code span may go on over a line break.
    let mut paragraphs = vec![String::new()];
    for line in prose_lines(text) {
        let trimmed = line.trim_start();
        if trimmed.starts_with('[')
            && let Some(close) = trimmed.find("]:")
            && close > 1
            && !trimmed[1..close].contains(['[', ']'])
        {
            let target = trimmed[close + 2..].split_whitespace().next().unwrap_or("");
            found.push(target.trim_matches(['<', '>']).to_owned());
            continue;
        }
        if line.trim().is_empty() {
            paragraphs.push(String::new());
        } else {
            let paragraph = paragraphs.last_mut().unwrap();
            paragraph.push_str(line);
            paragraph.push('\n');
        }
    }
    for paragraph in &paragraphs {
        let mut rest = paragraph.as_str();
        while let Some(c) = rest.chars().next() {
            if c == '`' {
                let run = rest.len() - rest.trim_start_matches('`').len();
                let fence = &rest[..run];
                match rest[run..].find(fence) {
                    Some(end) => rest = &rest[run + end + run..],
                    None => rest = &rest[run..],
                }
                continue;
            }
            if c == '['
                && let Some((_, target, _)) = link_at(rest)
            {
                found.push(target.to_owned());
                // The text may hold a link of its own (an image in a link).
                rest = &rest[1..];
                continue;
            }
            for attr in ["href=\"", "src=\""] {
                if let Some(value) = rest.strip_prefix(attr)
                    && let Some(end) = value.find('"')
                {
                    found.push(value[..end].to_owned());
                }
            }
            rest = &rest[c.len_utf8()..];
        }
    }
    found
}

/// `%20` and friends, as a browser decodes a link.
fn decoded(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 3 <= bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
            if let Ok(byte) = u8::from_str_radix(hex, 16) {
                out.push(byte);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `a/b/../c` as `a/c`, without asking the file system.
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// What is wrong with each relative link of `text`, a Markdown file at `file` in the
/// repository at `repo`: one line per link that leads nowhere.
fn broken(repo: &Path, file: &Path, text: &str) -> Vec<String> {
    let mut wrong = Vec::new();
    let shown = file
        .strip_prefix(repo)
        .unwrap_or(file)
        .display()
        .to_string();
    for target in targets(text) {
        let scheme = target.split_once(':').is_some_and(|(s, _)| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        });
        if target.is_empty() || scheme || target.starts_with("//") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((path, anchor)) => (path, Some(anchor)),
            None => (target.as_str(), None),
        };
        let path = decoded(path.split('?').next().unwrap_or(""));
        let into = if path.is_empty() {
            file.to_path_buf()
        } else if let Some(from_root) = path.strip_prefix('/') {
            normal(&repo.join(from_root))
        } else {
            normal(&file.parent().unwrap().join(&path))
        };
        if !into.starts_with(repo) {
            wrong.push(format!("{shown}: {target}: leaves the repository"));
            continue;
        }
        if !into.exists() {
            wrong.push(format!("{shown}: {target}: no such file"));
            continue;
        }
        let Some(anchor) = anchor else { continue };
        if into.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let there = std::fs::read_to_string(&into).unwrap();
        if !anchors(&there).iter().any(|a| a == &decoded(anchor)) {
            wrong.push(format!(
                "{shown}: {target}: no heading has the anchor #{anchor}"
            ));
        }
    }
    wrong
}

/// Every `.md` file under `dir`, but for `target/` and `.git`.
fn markdown_files(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        let name = entry.file_name();
        if name == ".git" || (dir == root() && name == "target") {
            continue;
        }
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            markdown_files(&path, into);
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "md") {
            into.push(path);
        }
    }
}

#[test]
fn every_relative_link_and_anchor_in_every_markdown_file_resolves() {
    let repo = root();
    let mut files = Vec::new();
    markdown_files(&repo, &mut files);
    files.sort();
    for must in [
        "README.md",
        "GUIDE.md",
        "ARCHITECTURE.md",
        "tests/e2e/README.md",
    ] {
        assert!(
            files.contains(&repo.join(must)),
            "{must} not found: {files:?}"
        );
    }
    let mut wrong = Vec::new();
    let mut links = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        links += targets(&text).len();
        wrong.extend(broken(&repo, file, &text));
    }
    assert!(links > 50, "only {links} links found: is the finder blind?");
    assert!(
        wrong.is_empty(),
        "links that lead nowhere:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn anchors_follow_githubs_rules() {
    for (heading, anchor) in [
        ("Quick start", "quick-start"),
        (
            "Run `atc tick` every 20 seconds",
            "run-atc-tick-every-20-seconds",
        ),
        (
            "From a turn's end to the parent",
            "from-a-turns-end-to-the-parent",
        ),
        ("`atc doctor`", "atc-doctor"),
        (
            "What atc does, and what it is not",
            "what-atc-does-and-what-it-is-not",
        ),
        ("C++ & Rust: a *tour*!", "c--rust-a-tour"),
        ("snake_case and kebab-case", "snake_case-and-kebab-case"),
        ("The [guide](GUIDE.md) → here", "the-guide--here"),
        ("Ünïcode stays", "ünïcode-stays"),
    ] {
        assert_eq!(slug(&rendered(heading)), anchor, "{heading}");
    }
    let text = "# Title\n## Notes\n```sh\n# not a heading\n```\n## Notes\nSetext\n------\n### Notes ###\n<a id=\"here\"></a>\n";
    assert_eq!(
        anchors(text),
        ["title", "notes", "notes-1", "setext", "notes-2", "here"]
    );
}

#[test]
fn a_broken_link_is_caught() {
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("links-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("docs")).unwrap();
    std::fs::write(dir.join("docs/other.md"), "# Other\n## Part two\n").unwrap();
    let file = dir.join("README.md");
    let text = "\
# Here
[fine](docs/other.md), [fine too](docs/other.md#part-two), [self](#here), [dir](docs/),
[web](https://example.com/nope.md), `[in code](nope.md)`,
[gone](docs/missing.md), [no anchor](docs/other.md#part-three), [no self](#there),
[up and out](../outside.md)

```text
[in a fence](fenced.md)
```

[ref]: docs/also-missing.md
";
    std::fs::write(&file, text).unwrap();
    let wrong = broken(&dir, &file, text);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        wrong,
        [
            "README.md: docs/also-missing.md: no such file",
            "README.md: docs/missing.md: no such file",
            "README.md: docs/other.md#part-three: no heading has the anchor #part-three",
            "README.md: #there: no heading has the anchor #there",
            "README.md: ../outside.md: leaves the repository",
        ]
    );
}
