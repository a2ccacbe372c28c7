//! Golden tests: atc's rendering against QwenPaw 2.2.2's own `format_background_status_text`.
//! Each `tests/data/render/NAME.json` is a task GET body (the contract's verbatim bodies plus
//! Chinese, emoji, odd shapes and an over-long answer; the statuses before the end; a
//! session or error that is not a string, spelled as Python's `str` spells each JSON value;
//! an unknown status's body with Python's floats); `NAME.txt` is what the real formatter
//! returned for it, cut to 8000 characters (regenerate with `generate.py` there).

use std::path::Path;

use atc::qwenpaw::render::{MAX_CHARS, render};

const TASK_ID: &str = "task-d7f9d48350b1";

#[test]
fn renders_byte_for_byte_like_qwenpaw() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/render");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let payload: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let want = std::fs::read_to_string(path.with_extension("txt")).unwrap();
        let got = render(TASK_ID, &payload);
        assert!(
            got == want,
            "{}:\n--- atc\n{got}\n--- qwenpaw\n{want}",
            path.display()
        );
        checked += 1;
    }
    assert!(checked >= 26, "only {checked} golden cases found");
}

#[test]
fn the_contract_bodies_render_as_the_contract_says() {
    let completed: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/render/completed.json"
        ))
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        render(TASK_ID, &completed),
        "[TASK_ID: task-d7f9d48350b1]\n[STATUS: finished]\n\nTask completed.\n\n[SESSION: demo-1]\n\nECHO: hello"
    );
}

#[test]
fn long_answers_keep_exactly_8000_characters() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/render/long_emoji.txt"
    ))
    .unwrap();
    assert_eq!(text.chars().count(), MAX_CHARS, "the golden itself is cut");
    let payload: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/render/long_emoji.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let got = render(TASK_ID, &payload);
    assert_eq!(got.chars().count(), MAX_CHARS);
    assert!(!got.ends_with('…'), "no marker is added");
}

#[test]
fn a_string_error_is_used_as_the_message_where_qwenpaw_would_crash() {
    let payload = serde_json::json!({"status": "finished", "result": {"status": "failed", "error": "Rate limit exceeded"}});
    assert_eq!(
        render(TASK_ID, &payload),
        "[TASK_ID: task-d7f9d48350b1]\n[STATUS: finished]\n\nTask failed.\n\nError: Rate limit exceeded"
    );
}
