//! atc's console bundle (`examples/qwenpaw-plugin/atc/frontend.mjs`) without a browser:
//! its pure functions under node (tests/frontend/logic.mjs, run by tests/frontend/node.mjs),
//! fed what atc itself produces, so the bundle and atc cannot drift apart: every toast
//! `describe::toast_text` words names its session for the bundle, and every turn
//! `turn_body` posts is atc's once QwenPaw has stored it (contract §6). The same cases run
//! in the e2e suite's Chromium (`console-bundle-logic`), which needs no node.

use std::path::Path;
use std::process::Command;

use atc::describe::toast_text;
use atc::qwenpaw::chat::turn_body;
use atc::time::Timestamp;
use atc::turn::{Block, BlockKind, Chat, Turn, new_id};
use serde_json::{Value, json};

fn turn(session: &str, kinds: &[BlockKind]) -> Turn {
    let chat = Chat {
        base_url: "http://127.0.0.1:8088/api".into(),
        agent_id: "default".into(),
        session_id: session.into(),
        user_id: "default".into(),
        channel: "console".into(),
    };
    let mut turn = Turn::new(String::new(), chat, Timestamp::from_unix(1_800_000_000));
    turn.carries = kinds
        .iter()
        .enumerate()
        .map(|(i, kind)| Block {
            job_id: format!("j{i}"),
            task_id: format!("task-00000000000{i}"),
            kind: *kind,
        })
        .collect();
    turn.turn_id = new_id(&turn.carries[0], |_| false);
    turn
}

/// What atc says and posts, as tests/frontend/logic.mjs takes it.
fn atc_data() -> Value {
    let sessions = ["front-open", "mqtt:alice", "s p a c e", "2026-12-01"];
    let kinds: [&[BlockKind]; 4] = [
        &[BlockKind::Result],
        &[BlockKind::Notice],
        &[BlockKind::CheckIn { n: 2 }],
        &[BlockKind::Result, BlockKind::Result, BlockKind::Notice],
    ];
    let mut toasts = Vec::new();
    let mut stored = Vec::new();
    for session in sessions {
        for kind in kinds {
            let turn = turn(session, kind);
            for status in ["completed", "failed", "unknown"] {
                toasts.push(json!({"text": toast_text(&turn, status), "session": session}));
            }
            let body = turn_body(&turn, "[TASK_ID: task-000000000000]", None);
            // QwenPaw keeps the input's metadata under `metadata` of the stored message.
            let mut inner = body["input"][0]["metadata"].clone();
            inner["qwenpaw_tag"] = json!("external_user_query");
            inner["qwenpaw_turn_state"] = json!({"status": "completed"});
            stored.push(json!({"original_id": "m", "original_name": "user", "metadata": inner}));
        }
    }
    json!({"toasts": toasts, "stored": stored})
}

#[test]
fn the_bundles_logic_holds_for_what_atc_says_and_posts() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let Ok(probe) = Command::new("node").arg("--version").output() else {
        // The e2e suite runs the same cases in Chromium (console-bundle-logic).
        eprintln!("node is not installed: the bundle's cases run in the e2e suite only");
        return;
    };
    assert!(probe.status.success());
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("atc.json");
    std::fs::write(&data, atc_data().to_string()).unwrap();
    let out = Command::new("node")
        .arg(root.join("tests/frontend/node.mjs"))
        .arg(&data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok\n");
}

#[test]
fn the_plugin_names_the_bundle_atc_ships_in_both_installs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/qwenpaw-plugin/atc");
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("plugin.json")).unwrap()).unwrap();
    assert_eq!(manifest["entry"]["frontend"], atc::install::FRONTEND);
    let bundle = std::fs::read(root.join(atc::install::FRONTEND)).unwrap();
    // `atc qwenpaw install` writes it ...
    let (_, embedded) = atc::install::PLUGIN_FILES
        .iter()
        .find(|(name, _)| *name == atc::install::FRONTEND)
        .expect("the bundle among the plugin's files");
    assert_eq!(embedded.as_bytes(), bundle);
    // ... and the zip holds it, in the plugin's folder.
    let zipped = atc::install::bundle(&atc::install::Carry::Requirements);
    let entry = zipped
        .iter()
        .find(|e| e.name == format!("atc/{}", atc::install::FRONTEND))
        .expect("the bundle in the zip");
    assert_eq!(entry.bytes, bundle);
    // An ES module the console can import from a blob: no imports of its own.
    let text = String::from_utf8(bundle).unwrap();
    assert!(
        !text.lines().any(|l| l.trim_start().starts_with("import ")),
        "the console imports the bundle from a blob URL: relative imports cannot resolve"
    );
}
