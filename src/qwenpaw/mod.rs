//! Everything about QwenPaw's HTTP API: the client (`client`, the only module that does
//! HTTP), what a task poll answered (`task`), the parent chat (`chat`) and QwenPaw's own
//! rendering of a finished task (`render`); `server`, the seam a tick talks through. `task`,
//! `chat` and `render` are pure.

pub mod chat;
pub mod client;
pub mod loopback;
pub mod render;
pub mod server;
pub mod task;

pub use client::{Answer, Client, Transport};
pub use server::Server;

/// QwenPaw's error bodies are `{"detail": "…"}` (or a list of validation errors): the
/// detail, on one line, at most 300 characters.
fn detail(body: &str) -> String {
    let text = match serde_json::from_str::<serde_json::Value>(body) {
        Ok(serde_json::Value::Object(map)) => match map.get("detail") {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => body.to_owned(),
        },
        _ => body.to_owned(),
    };
    crate::text::one_line(&text, 300)
}

#[cfg(test)]
mod tests {
    #[test]
    fn details_are_one_short_line() {
        assert_eq!(
            super::detail(r#"{"detail":"Task not found: t"}"#),
            "Task not found: t"
        );
        assert_eq!(
            super::detail(r#"{"detail":[{"type":"json_invalid"}]}"#),
            r#"[{"type":"json_invalid"}]"#
        );
        assert_eq!(super::detail("<html>\n<b>x</b>"), "<html> <b>x</b>");
        assert_eq!(super::detail(&"y".repeat(400)).len(), 300);
    }
}
