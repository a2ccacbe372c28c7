//! Task ids (validated before anything touches the file or the network) and job ids.

use crate::exit::{Exit, Failure};

/// Longest task id accepted. Real 2.2 ids are `task-` + 12 hex digits.
pub const MAX_TASK_ID_LEN: usize = 128;

/// Several task ids given as arguments, each read as [`parse_task_id`] reads one, in
/// the order given, each once (`atc watch a b a` watches two).
pub fn parse_task_ids(raw: &[String]) -> Result<Vec<String>, Failure> {
    let mut ids: Vec<String> = Vec::new();
    for one in raw {
        let id = parse_task_id(one)?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// Normalises a task id the way QwenPaw's `normalize_id` does (trim whitespace, then
/// surrounding quotes, then whitespace: agents often paste `'task-…'` with its quotes) and
/// then insists on `^[A-Za-z0-9_-]{1,128}$`. Anything else (a `/`, `..`, `%`, spaces,
/// non-ASCII) could address another route or smuggle bytes into the URL, so it is refused.
pub fn parse_task_id(raw: &str) -> Result<String, Failure> {
    let id = raw.trim().trim_matches(|c| c == '"' || c == '\'').trim();
    let shown = || crate::text::preview(raw);
    if id.is_empty() {
        return Err(Failure::new(
            Exit::Usage,
            format!(
                "task id {} is empty; pass the id submit_to_agent returned, e.g. task-3f9a0c1b2d4e",
                shown()
            ),
        ));
    }
    if id.len() > MAX_TASK_ID_LEN {
        return Err(Failure::new(
            Exit::Usage,
            format!(
                "task id is {} characters long; at most {MAX_TASK_ID_LEN} are accepted",
                id.chars().count()
            ),
        ));
    }
    if let Some(bad) = id
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
    {
        // A model often passes the id with what surrounded it (`[TASK_ID: task-…]`,
        // `task_id=task-…`): name the id in it, never take it on a guess.
        // Only an id at the end, perhaps after a label, with nothing but punctuation after
        // it (`task-bad id` is no wrapping; `task-a,` is a list written with commas in a
        // shell). Several ids in one (`task-a, task-b`) are named as several: the last is
        // no better guess than the first.
        let several = task_ids_inside(id);
        let meant = Some(id)
            .filter(|_| several.len() < 2)
            .and_then(|id| id.rfind("task-"))
            .map(|at| {
                let rest = &id[at..];
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
                    .unwrap_or(rest.len());
                (&rest[..end], &rest[end..])
            })
            .filter(|(part, after)| {
                part.len() > "task-".len() && !after.chars().any(char::is_alphanumeric)
            })
            .map(|(part, _)| format!(": did you mean {part}? Pass the id alone"))
            .unwrap_or_else(|| {
                if several.len() > 1 {
                    format!(
                        ": it holds {} task ids ({}); pass each alone",
                        several.len(),
                        several.join(", ")
                    )
                } else if is_child_session(id) {
                    // QwenPaw's `[SESSION: …]` line sits under `[TASK_ID: …]`.
                    ": it is a child's session id (the [SESSION: …] line submit_to_agent printed); pass the [TASK_ID: …] line's value, e.g. task-3f9a0c1b2d4e".to_owned()
                } else {
                    " (e.g. task-3f9a0c1b2d4e)".to_owned()
                }
            });
        return Err(Failure::new(
            Exit::Usage,
            format!(
                "task id {} contains {:?}; only letters, digits, '-' and '_' are allowed{meant}",
                crate::text::preview(id),
                bad
            ),
        ));
    }
    Ok(id.to_owned())
}

/// The words of `text` that start like QwenPaw's task ids (`task-` and more), each once,
/// in order.
fn task_ids_inside(text: &str) -> Vec<&str> {
    let mut ids: Vec<&str> = Vec::new();
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_')) {
        if word.len() > "task-".len() && word.starts_with("task-") && !ids.contains(&word) {
            ids.push(word);
        }
    }
    ids
}

/// A child's session id as QwenPaw's `submit_to_agent` makes it:
/// `<agent>:to:<agent>:<milliseconds>:<hex>`.
fn is_child_session(value: &str) -> bool {
    let parts: Vec<&str> = value.split(':').collect();
    parts.len() >= 5
        && parts[1] == "to"
        && parts[parts.len() - 2].chars().all(|c| c.is_ascii_digit())
        && !parts[parts.len() - 2].is_empty()
}

/// A task id as stored: exactly what [`parse_task_id`] would have made of it.
pub fn stored_task_id(value: &str) -> Result<(), String> {
    match parse_task_id(value) {
        Ok(id) if id == value => Ok(()),
        Ok(_) => Err(format!(
            "{} has surrounding quotes or spaces",
            crate::text::preview(value)
        )),
        Err(err) => Err(err.message),
    }
}

/// The task ids named by `[TASK_ID: …]` markers in `text` (what submit_to_agent and
/// `qwenpaw agents chat --background` print), in order, each once. Each is checked like a
/// task id given on the command line.
pub fn task_ids_in(text: &str) -> Result<Vec<String>, Failure> {
    let mut ids: Vec<String> = Vec::new();
    for (_, rest) in text
        .match_indices("[TASK_ID:")
        .map(|(i, m)| (i, &text[i + m.len()..]))
    {
        let Some(end) = rest.find(']') else { continue };
        let id = parse_task_id(&rest[..end])?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// The child sessions named by `[SESSION: …]` markers, each paired with the
/// `[TASK_ID: …]` marker it follows (before the next task's), as submit_to_agent prints
/// them. A session that follows no task id is ignored; each is checked like a label.
pub fn child_sessions_in(text: &str) -> Result<Vec<(String, String)>, Failure> {
    labels_under_tasks(text, "[SESSION:")
}

/// The agents named by `[TARGET_AGENT: …]` markers, each paired with the `[TASK_ID: …]`
/// marker it follows: the agent that task runs on (submit_to_agent's `to_agent`, which
/// atc's plugin writes under each task it saw; QwenPaw's own output has no such line).
pub fn target_agents_in(text: &str) -> Result<Vec<(String, String)>, Failure> {
    labels_under_tasks(text, "[TARGET_AGENT:")
}

/// The `marker …]` values that follow each `[TASK_ID: …]` (before the next task's), by
/// task id: the first of each task, each checked like a label.
fn labels_under_tasks(text: &str, marker: &str) -> Result<Vec<(String, String)>, Failure> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    let starts: Vec<usize> = text.match_indices("[TASK_ID:").map(|(i, _)| i).collect();
    for (n, &start) in starts.iter().enumerate() {
        let rest = &text[start + "[TASK_ID:".len()..];
        let Some(end) = rest.find(']') else { continue };
        let task = parse_task_id(&rest[..end])?;
        let stop = starts.get(n + 1).copied().unwrap_or(text.len());
        let span = &text[start..stop];
        let Some(at) = span.find(marker) else {
            continue;
        };
        let after = &span[at + marker.len()..];
        let Some(close) = after.find(']') else {
            continue;
        };
        let value = after[..close].trim().to_owned();
        crate::validate::label(&value).map_err(|why| {
            Failure::new(
                Exit::Usage,
                format!("the {marker} …] line after [TASK_ID: {task}] {why}"),
            )
        })?;
        if !pairs.iter().any(|(t, _)| *t == task) {
            pairs.push((task, value));
        }
    }
    Ok(pairs)
}

/// A fresh job id: 12 random hex digits.
pub fn new_job_id() -> String {
    let mut bytes = [0u8; 6];
    if !read_urandom(&mut bytes) {
        // No /dev/urandom (not Unix): std's per-process random hash keys, mixed with the
        // clock, are random enough for an id that only has to differ between registrations.
        use std::hash::{BuildHasher, Hasher};
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        hasher.write_u32(std::process::id());
        bytes.copy_from_slice(&hasher.finish().to_le_bytes()[..6]);
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn read_urandom(buf: &mut [u8]) -> bool {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .and_then(|mut file| file.read_exact(buf))
        .is_ok()
}

/// The session id inside a value copied with its label: `[SESSION: X]` (QwenPaw's line
/// for a submitted task, so a child's chat: `true`), or `Session ID: X` /
/// `session_id=X` (the prompt's line, or a key).
pub fn labelled_session(value: &str) -> Option<(&str, bool)> {
    let value = value.trim();
    if let Some(inner) = value
        .strip_prefix("[SESSION:")
        .and_then(|rest| rest.strip_suffix(']'))
    {
        return Some((inner.trim(), true)).filter(|(inner, _)| !inner.is_empty());
    }
    let lower = value.to_ascii_lowercase();
    ["session id:", "session_id:", "session_id="]
        .iter()
        .find(|label| lower.starts_with(*label))
        .map(|label| (value[label.len()..].trim(), false))
        .filter(|(inner, _)| !inner.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_copied_with_its_label_is_told_apart() {
        assert_eq!(
            labelled_session("[SESSION: a:to:b:1:c]"),
            Some(("a:to:b:1:c", true))
        );
        assert_eq!(
            labelled_session(" Session ID: s-77 "),
            Some(("s-77", false))
        );
        assert_eq!(labelled_session("session_id=s-77"), Some(("s-77", false)));
        for plain in [
            "s-77",
            "[SESSION: ]",
            "Session ID:",
            "sessions-1",
            "default:to:SE:1:ab",
        ] {
            assert_eq!(labelled_session(plain), None, "{plain}");
        }
    }

    /// Found by hand: `atc watch '[TASK_ID: task-…]'` said only which character was
    /// wrong; the id inside is named (never taken on a guess).
    #[test]
    fn a_task_id_passed_with_its_wrapping_names_the_id_inside() {
        // Found by hand: `atc watch task-a, task-b` (a list written with commas in a
        // shell) said only that ',' is not allowed.
        for raw in [
            "[TASK_ID: task-562ddee07d1b]",
            "task_id=task-562ddee07d1b",
            "task-562ddee07d1b,",
            "task-562ddee07d1b.",
        ] {
            let err = parse_task_id(raw).unwrap_err();
            assert_eq!(err.exit, Exit::Usage);
            assert!(
                err.message
                    .ends_with(": did you mean task-562ddee07d1b? Pass the id alone"),
                "{err}"
            );
        }
        // Found by hand: a model passed two ids as one; the last was named as "meant".
        for raw in [
            "task-562ddee07d1b, task-000000000001",
            "[TASK_ID: task-562ddee07d1b] [TASK_ID: task-000000000001]",
        ] {
            let err = parse_task_id(raw).unwrap_err();
            assert!(
                err.message.ends_with(
                    ": it holds 2 task ids (task-562ddee07d1b, task-000000000001); pass each alone"
                ),
                "{err}"
            );
        }
        // Found by hand: a model passed the [SESSION: …] value as the task id.
        let err =
            parse_task_id("default:to:QwenPaw_QA_Agent_0.2:1796594835472:29101726").unwrap_err();
        assert_eq!(err.exit, Exit::Usage);
        assert!(
            err.message.ends_with(": it is a child's session id (the [SESSION: …] line submit_to_agent printed); pass the [TASK_ID: …] line's value, e.g. task-3f9a0c1b2d4e"),
            "{err}"
        );
        for raw in [
            "default:to:x",
            "a:b:c:1:ff",
            "default:to:SE:x:ff",
            "task/..",
            "task-/x",
            "a b",
            "task-bad id",
            "x task-",
            "[task-a] b",
        ] {
            let err = parse_task_id(raw).unwrap_err();
            assert!(err.message.ends_with(" (e.g. task-3f9a0c1b2d4e)"), "{err}");
        }
    }

    #[test]
    fn a_session_line_belongs_to_the_task_id_before_it() {
        let text = "[TASK_ID: task-a]\n[SESSION: me:to:w:1:ab]\n[TASK_ID: task-b]\n\
                    [TASK_ID: task-c] [SESSION:  s-c ]\n[SESSION: orphan]";
        assert_eq!(
            child_sessions_in(text).unwrap(),
            [
                ("task-a".to_owned(), "me:to:w:1:ab".to_owned()),
                ("task-c".to_owned(), "s-c".to_owned()),
            ]
        );
        assert!(
            child_sessions_in("[SESSION: s] [TASK_ID: task-a]")
                .unwrap()
                .is_empty()
        );
        let err = child_sessions_in("[TASK_ID: task-a] [SESSION: \u{7}x]").unwrap_err();
        assert!(err.to_string().contains("[TASK_ID: task-a]"), "{err}");
        assert!(err.to_string().contains("the [SESSION: …] line"), "{err}");
    }

    #[test]
    fn a_target_agent_line_belongs_to_the_task_id_before_it() {
        let text = "[TASK_ID: task-a]\n[SESSION: me:to:SE:1:ab]\n[TARGET_AGENT: SE]\n\
                    [TASK_ID: task-b]\n[SESSION: s-b]\n[TARGET_AGENT:  QA ]";
        assert_eq!(
            target_agents_in(text).unwrap(),
            [
                ("task-a".to_owned(), "SE".to_owned()),
                ("task-b".to_owned(), "QA".to_owned()),
            ]
        );
        assert_eq!(child_sessions_in(text).unwrap().len(), 2);
        let err = target_agents_in("[TASK_ID: task-a] [TARGET_AGENT: ]").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("the [TARGET_AGENT: …] line after [TASK_ID: task-a]"),
            "{err}"
        );
    }

    #[test]
    fn normalises_like_qwenpaw() {
        for (raw, want) in [
            ("task-3f9a0c1b2d4e", "task-3f9a0c1b2d4e"),
            ("  task-1\n", "task-1"),
            ("'task-1'", "task-1"),
            ("\"task-1\"", "task-1"),
            (" ' task_1 ' ", "task_1"),
        ] {
            assert_eq!(parse_task_id(raw).unwrap(), want, "{raw:?}");
        }
    }

    #[test]
    fn refuses_ids_that_could_escape_the_route() {
        let long = "a".repeat(129);
        for raw in [
            "",
            "''",
            "task/x",
            "../../version",
            "task%2Fx",
            "task 1",
            "täsk",
            "task.1",
            &long,
        ] {
            let err = parse_task_id(raw).unwrap_err();
            assert_eq!(err.exit, Exit::Usage, "{raw:?}");
        }
        assert!(parse_task_id(&"a".repeat(128)).is_ok());
    }

    #[test]
    fn a_stored_task_id_is_exactly_what_parsing_makes() {
        assert!(stored_task_id("task-1").is_ok());
        for bad in ["../../etc", "'task-1'", " task-1", ""] {
            assert!(stored_task_id(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn task_ids_are_found_in_what_submit_to_agent_prints() {
        let text = "Submitted.\n[TASK_ID: task-aaaaaaaaaaaa]\n[SESSION: s-1]\n\n[TASK_ID: task-bbbbbbbbbbbb]\nagain [TASK_ID: task-aaaaaaaaaaaa]";
        assert_eq!(
            task_ids_in(text).unwrap(),
            ["task-aaaaaaaaaaaa", "task-bbbbbbbbbbbb"]
        );
        assert!(task_ids_in("nothing here").unwrap().is_empty());
        assert!(task_ids_in("[TASK_ID: ../../etc]").is_err());
    }

    #[test]
    fn job_ids_are_12_hex_and_differ() {
        let a = new_job_id();
        let b = new_job_id();
        assert_eq!(a.len(), 12);
        assert!(
            a.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_ne!(a, b);
    }
}
