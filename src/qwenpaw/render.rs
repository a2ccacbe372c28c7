//! Renders a finished task exactly as QwenPaw 2.2.2's `format_background_status_text`
//! (`qwenpaw/agents/tools/agent_management.py`), the text `check_agent_task` shows an agent.
//!
//! Where QwenPaw's own formatter would raise (a `result` that is not an object, an `error`
//! that is a string), the closest sensible text is produced instead.

use std::io;

use serde::Serialize;
use serde_json::Value;

use super::task::TaskRecord;
use crate::job::TaskOutcome;
use crate::text::truncate_chars;

/// The seed's `[:8000]`: at most this many characters are delivered.
pub const MAX_CHARS: usize = 8000;

/// Renders the GET payload of task `task_id`, cut to [`MAX_CHARS`] characters.
pub fn render(task_id: &str, payload: &Value) -> String {
    truncate_chars(format_status_text(task_id, payload), MAX_CHARS)
}

/// What the delivery of a finished task carries: QwenPaw's own rendering and, for a
/// fork child that completed, a last line naming its branch (`[FORK_BRANCH: <branch>]`,
/// the marker QwenPaw's own fork tool ends a ready branch with); at most [`MAX_CHARS`]
/// characters in all.
pub fn render_delivery(task_id: &str, record: &TaskRecord, fork_branch: Option<&str>) -> String {
    let text = format_status_text(task_id, &record.payload);
    match fork_branch.filter(|_| record.outcome() == TaskOutcome::Completed) {
        Some(branch) => {
            let line = format!("\n\n[FORK_BRANCH: {branch}]");
            let room = MAX_CHARS.saturating_sub(line.chars().count());
            // A branch name longer than the cap itself (`watch` takes 200 characters at
            // most, a hand-edited job file any) is cut with the rest.
            truncate_chars(truncate_chars(text, room) + &line, MAX_CHARS)
        }
        None => truncate_chars(text, MAX_CHARS),
    }
}

/// The answer of a finished payload as QwenPaw extracts it: "" when there is none.
pub fn answer(payload: &Value) -> String {
    payload
        .get("result")
        .and_then(Value::as_object)
        .map(answer_text)
        .unwrap_or_default()
}

fn format_status_text(task_id: &str, payload: &Value) -> String {
    let status = payload.get("status");
    let mut parts = vec![
        format!("[TASK_ID: {task_id}]"),
        format!("[STATUS: {}]", status.map_or("unknown".to_owned(), py_str)),
        String::new(),
    ];
    match status.and_then(Value::as_str) {
        Some("finished") => {
            let result = payload.get("result");
            let empty = serde_json::Map::new();
            let result_obj = match result {
                None => Some(&empty),
                Some(value) => value.as_object(),
            };
            let task_status = result_obj
                .and_then(|r| r.get("status"))
                .and_then(Value::as_str);
            match (result_obj, task_status) {
                (Some(result), Some("completed")) => {
                    parts.push("Task completed.".to_owned());
                    parts.push(String::new());
                    if let Some(session) = result.get("session_id").filter(|s| py_truthy(s)) {
                        parts.push(format!("[SESSION: {}]", py_str(session)));
                        parts.push(String::new());
                    }
                    let text = answer_text(result);
                    parts.push(if text.is_empty() {
                        "(No text content in response)".to_owned()
                    } else {
                        text
                    });
                }
                (Some(result), Some("failed")) => {
                    let message = match result.get("error") {
                        Some(Value::Object(error)) => error
                            .get("message")
                            .map_or("Unknown error".to_owned(), py_str),
                        // QwenPaw would raise on a string error (its rate-limit path sends
                        // one); the string is the message.
                        Some(Value::String(error)) => error.clone(),
                        None | Some(Value::Null) => "Unknown error".to_owned(),
                        Some(other) => py_str(other),
                    };
                    parts.push("Task failed.".to_owned());
                    parts.push(String::new());
                    parts.push(format!("Error: {message}"));
                }
                _ => parts.push(json_text(payload)),
            }
        }
        Some("running") => {
            let started = payload.get("started_at").map_or("N/A".to_owned(), py_str);
            parts.push("Task is still running...".to_owned());
            parts.push(format!("Started at: {started}"));
            parts.push(String::new());
            parts.push(
                "Do NOT poll again immediately. Wait at least 30 seconds before next check."
                    .to_owned(),
            );
        }
        Some("pending") => parts.push("Task is pending in queue...".to_owned()),
        Some("submitted") => parts.push("Task submitted, waiting to start...".to_owned()),
        _ => parts.push(json_text(payload)),
    }
    parts.join("\n")
}

/// The answer: the text parts of the last output message, joined by newlines, stripped
/// (`extract_agent_text_content`). Shapes QwenPaw cannot read give an empty answer.
fn answer_text(result: &serde_json::Map<String, Value>) -> String {
    let Some(last) = result
        .get("output")
        .and_then(Value::as_array)
        .and_then(|output| output.last())
    else {
        return String::new();
    };
    let Some(content) = last.get("content").and_then(Value::as_array) else {
        return String::new();
    };
    let mut texts = Vec::new();
    for item in content {
        if item.get("type").and_then(Value::as_str) == Some("text") {
            match item.get("text") {
                Some(Value::String(text)) => texts.push(text.as_str()),
                None => texts.push(""),
                // A non-string text makes Python's join raise TypeError, which it catches.
                Some(_) => return String::new(),
            }
        }
    }
    py_strip(&texts.join("\n")).to_owned()
}

/// Python's `str.strip()`: Unicode whitespace plus the ASCII separators U+001C..U+001F.
fn py_strip(text: &str) -> &str {
    text.trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
}

fn py_truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// `str(value)` in Python, for a value decoded from JSON.
fn py_str(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => py_repr(other),
    }
}

fn py_repr(value: &Value) -> String {
    match value {
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (_, Some(u), _) => u.to_string(),
            (_, _, Some(f)) => py_float(f),
            _ => n.to_string(),
        },
        Value::String(s) => py_str_repr(s),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(py_repr).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) => {
            let items: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", py_str_repr(k), py_repr(v)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
    }
}

fn py_str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Python's `repr(float)`: the shortest digits that round-trip, in fixed notation when the
/// decimal exponent is in -4..16, else as `1.5e+16` / `1e-05`; always with a `.0` or exponent.
fn py_float(x: f64) -> String {
    if x.is_nan() {
        return "NaN".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    // Rust's `{:e}` also prints the shortest round-trip digits: "-1.2345e-7".
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').expect("{:e} always has an exponent");
    let exp: i32 = exp.parse().expect("{:e} exponent is an integer");
    let (sign, mantissa) = mantissa
        .strip_prefix('-')
        .map_or(("", mantissa), |m| ("-", m));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let decpt = exp + 1; // value = 0.DIGITS × 10^decpt
    if x == 0.0 {
        return format!("{sign}0.0");
    }
    if -4 < decpt && decpt <= 16 {
        let n = digits.len() as i32;
        if decpt <= 0 {
            format!("{sign}0.{}{digits}", "0".repeat((-decpt) as usize))
        } else if decpt >= n {
            format!("{sign}{digits}{}.0", "0".repeat((decpt - n) as usize))
        } else {
            let (int, frac) = digits.split_at(decpt as usize);
            format!("{sign}{int}.{frac}")
        }
    } else {
        let (first, rest) = digits.split_at(1);
        let exp = decpt - 1;
        let exp_sign = if exp < 0 { '-' } else { '+' };
        let dot = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        format!("{sign}{first}{dot}e{exp_sign}{:02}", exp.abs())
    }
}

/// `json.dumps(data, ensure_ascii=False, indent=2)`: serde_json's pretty layout is the
/// same; only floats need Python's spelling.
fn json_text(value: &Value) -> String {
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, PyFormatter::default());
    value
        .serialize(&mut serializer)
        .expect("serialising a Value into memory cannot fail");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

#[derive(Default)]
struct PyFormatter<'a> {
    pretty: serde_json::ser::PrettyFormatter<'a>,
}

macro_rules! delegate {
    ($($name:ident($($arg:ident: $ty:ty),*);)*) => {$(
        fn $name<W: ?Sized + io::Write>(&mut self, writer: &mut W $(, $arg: $ty)*) -> io::Result<()> {
            self.pretty.$name(writer $(, $arg)*)
        }
    )*};
}

impl serde_json::ser::Formatter for PyFormatter<'_> {
    delegate! {
        begin_array();
        end_array();
        begin_array_value(first: bool);
        end_array_value();
        begin_object();
        end_object();
        begin_object_key(first: bool);
        begin_object_value();
        end_object_value();
    }

    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        writer.write_all(py_float(value).as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_are_spelled_like_python() {
        for (x, want) in [
            (1796003454.6703575, "1796003454.6703575"),
            (1.0, "1.0"),
            (0.5, "0.5"),
            (-2.25, "-2.25"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (1234567890123456.0, "1234567890123456.0"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (123.0, "123.0"),
            (1e22, "1e+22"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            // As `json.dumps` spells them (no JSON body carries one: serde_json refuses).
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
            (f64::NAN, "NaN"),
        ] {
            assert_eq!(py_float(x), want, "{x}");
        }
    }

    #[test]
    fn a_completed_fork_child_names_its_branch_within_the_cap() {
        let record = |payload: Value| TaskRecord {
            status: "finished".into(),
            started_at: None,
            payload,
        };
        let done = record(
            serde_json::json!({"status": "finished", "result": {"status": "completed",
            "output": [{"content": [{"type": "text", "text": "x".repeat(9000)}]}]}}),
        );
        let text = render_delivery("task-1", &done, Some("fork/a1"));
        assert!(text.ends_with("\n\n[FORK_BRANCH: fork/a1]"));
        assert_eq!(text.chars().count(), MAX_CHARS);
        let failed = record(
            serde_json::json!({"status": "finished", "result": {"status": "failed",
            "error": {"message": "Failed to finalize fork worktree"}}}),
        );
        assert_eq!(
            render_delivery("task-1", &failed, Some("fork/a1")),
            "[TASK_ID: task-1]\n[STATUS: finished]\n\nTask failed.\n\nError: Failed to finalize fork worktree",
            "a branch that is not ready is not advertised"
        );
        assert_eq!(
            render_delivery("task-1", &done, None),
            render("task-1", &done.payload)
        );
        let endless = "b".repeat(MAX_CHARS + 10);
        let text = render_delivery("task-1", &done, Some(&endless));
        assert_eq!(
            text.chars().count(),
            MAX_CHARS,
            "the cap holds for any branch"
        );
        assert!(text.starts_with("\n\n[FORK_BRANCH: bbb"));
    }

    #[test]
    fn the_answer_is_the_last_messages_text_stripped() {
        let result = |output: Value| {
            serde_json::json!({"status": "finished",
            "result": {"status": "completed", "output": output}})
        };
        assert_eq!(
            answer(&result(
                serde_json::json!([{"content": [{"type": "text", "text": "  hi \n"}]}])
            )),
            "hi"
        );
        assert_eq!(answer(&result(serde_json::json!([]))), "");
    }

    #[test]
    fn python_str_of_scalars() {
        assert_eq!(py_str(&Value::Null), "None");
        assert_eq!(py_str(&serde_json::json!(true)), "True");
        assert_eq!(py_str(&serde_json::json!(3)), "3");
        assert_eq!(py_str(&serde_json::json!("x")), "x");
        assert_eq!(
            py_str(&serde_json::json!({"a": [1, "b'"]})),
            "{'a': [1, \"b'\"]}"
        );
    }
}
