//! Canned QwenPaw 2.2.2 HTTP bodies, copied byte-for-byte from
//! `/work/shared/qwenpaw-2.2-contract.md` (§2, §3, §4, §6).
//!
//! Where the contract elides a value with `…` the text is kept as shown; it is
//! still valid JSON because every elision sits inside a string.

// ---- §4 poll bodies ------------------------------------------------------

/// `GET /api/console/chat/task/{id}` while the task runs.
pub const RUNNING: &str = r#"{"status":"running","started_at":1796003454.6703575}"#;

/// A completed task (observed): session `demo-1`, answer `ECHO: hello`.
pub const FINISHED_COMPLETED: &str = r#"{"status":"finished","started_at":1796003454.6703575,"result":{"status":"completed","session_id":"demo-1","id":"response_f19c…","output":[{"id":"msg_9ce7…","type":"message","role":"assistant","content":[{"type":"text","delta":false,"index":0,"status":null,"object":"content","msg_id":null,"text":"ECHO: hello"}],"status":"completed","metadata":null,"name":"assistant","object":"message","sequence_number":6,"usage":{"input_tokens":10,"output_tokens":5}}],"created_at":"2026-11-30T01:50:54+00:00","completed_at":"2026-11-30T01:50:54+00:00","metadata":null,"object":"response","sequence_number":7,"usage":{"input_tokens":10,"output_tokens":5}}}"#;

/// A task whose LLM call failed (`MODEL_EXECUTION_ERROR`).
pub const FINISHED_FAILED_LLM: &str = r#"{"status":"finished","started_at":1796003454.83,"result":{"status":"failed","session_id":"demo-1-fail","id":"response_5af9…","output":[],"created_at":"…","completed_at":"…","metadata":null,"object":"response","sequence_number":3,"error":{"code":"MODEL_EXECUTION_ERROR","message":"Model 'mock-model' execution failed. Reason: …"}}}"#;

/// A task that hit its `timeout` (no `session_id`, no `output`).
pub const FINISHED_TIMEOUT: &str = r#"{"status":"finished","started_at":1796003456.31,"result":{"status":"failed","error":{"message":"Task timed out after 1s","code":"timeout"}}}"#;

/// A cancelled task (no `session_id`, no `output`, no `code`).
pub const FINISHED_CANCELLED: &str = r#"{"status":"finished","started_at":1796003164.30,"result":{"status":"failed","error":{"message":"Task cancelled"}}}"#;

// ---- §12 stop bodies ----------------------------------------------------

/// 200 for `POST /api/console/chat/stop?chat_id=…` that stopped a running turn.
pub const STOPPED: &str = r#"{"stopped":true}"#;

/// 200 for a stop that found nothing running (or an unknown id).
pub const NOT_STOPPED: &str = r#"{"stopped":false}"#;

/// 422 for `POST /api/console/chat/stop` without `chat_id` (FastAPI's validation body).
pub const STOP_NO_CHAT_ID_422: &str = r#"{"detail":[{"type":"missing","loc":["query","chat_id"],"msg":"Field required","input":null}]}"#;

// ---- §3 submit bodies ----------------------------------------------------

/// 200 for `POST /api/console/chat/task`.
pub const SUBMIT_OK: &str = r#"{"task_id":"task-d7f9d48350b1","timeout":60}"#;

/// 409 for `POST /api/console/chat/task` when the chat already has a running turn.
pub const BUSY_409: &str = r#"{"detail":"A task is already running for this chat. Wait for it to finish or use a different session_id."}"#;

/// 503 for `POST /api/console/chat/task` when the agent has no console channel.
pub const NO_CONSOLE_503: &str = r#"{"detail":"Channel Console not found"}"#;

// ---- §2 auth bodies ------------------------------------------------------

/// 401 on every path when the runtime token header is missing or wrong.
pub const AUTH_401_RUNTIME: &str = r#"{"detail":"Invalid runtime boundary token"}"#;

/// 401 from web login when no bearer token is sent.
pub const AUTH_401_NOT_AUTHENTICATED: &str = r#"{"detail":"Not authenticated"}"#;

/// 401 from web login when the bearer token is bad.
pub const AUTH_401_EXPIRED: &str = r#"{"detail":"Invalid or expired token"}"#;

// ---- generic ---------------------------------------------------------------

/// FastAPI's 404 for a path with no route (application/json).
pub const NO_ROUTE: &str = r#"{"detail":"Not Found"}"#;

/// `GET /api/version` (2.2.2.post1).
pub const VERSION: &str = r#"{"version":"2.2.2.post1"}"#;

/// `GET /api/healthz` once the server is up.
pub const HEALTH_OK: &str =
    r#"{"status":"ok","agents_loaded":["default","QwenPaw_QA_Agent_0.2"],"uptime_seconds":6.71}"#;

/// `GET /api/healthz` while the server boots (503).
pub const HEALTH_STARTING: &str = r#"{"status":"starting"}"#;

/// `GET /api/agents` of a fresh working directory.
pub const AGENTS: &str = r#"{"agents":[{"id":"default","name":"Default Agent","description":"Default QwenPaw agent (migrated from legacy config)","workspace_dir":"/tmp/qpw/workspaces/default","enabled":true,"pinned":true,"startup_status":"running","backend":"qwenpaw","backend_capabilities":{"workspace_ui":true},"backend_model":null,"backend_reasoning_effort":null,"active_model":null,"managed_by_app":null,"available_in_chat":true},{"id":"QwenPaw_QA_Agent_0.2","name":"QA Agent","description":"Builtin Q&A helper for QwenPaw setup","workspace_dir":"/tmp/qpw/workspaces/QwenPaw_QA_Agent_0.2","enabled":true,"pinned":false,"startup_status":"running","backend":"qwenpaw","backend_capabilities":{"workspace_ui":true},"backend_model":null,"backend_reasoning_effort":null,"active_model":null,"managed_by_app":null,"available_in_chat":true}]}"#;

/// atc's entry in `GET /api/frontend_plugin` (the list of loaded plugins the web console
/// imports bundles from) once the plugin is loaded; the hub plugins QwenPaw ships are
/// listed beside it with `"frontend_entry":null`.
pub const FRONTEND_PLUGIN_ATC: &str = r#"{"id":"atc","name":"atc (Agent Task Callback)","version":"0.2.0","description":"Results of submit_to_agent tasks come back into the chat that asked, as a new message: the Agent Task Callback tools, as a thin front for the atc command.","author":"atc","enabled":true,"loaded":true,"plugin_type":"tool","frontend_entry":"frontend.mjs"}"#;

/// uvicorn's 400 for raw spaces / raw non-ASCII bytes in the path (text/plain).
pub const INVALID_HTTP_400: &str = "Invalid HTTP request received.";

fn js(s: &str) -> String {
    serde_json::to_string(s).expect("string always serialises")
}

fn detail(message: &str) -> String {
    format!(r#"{{"detail":{}}}"#, js(message))
}

/// 404 for an unknown task id: `{"detail":"Task not found: <id>"}`.
pub fn not_found(task_id: &str) -> String {
    detail(&format!("Task not found: {task_id}"))
}

/// 404 for an unknown `X-Agent-Id`: `{"detail":"Agent '<agent>' not found"}`.
pub fn unknown_agent(agent: &str) -> String {
    detail(&format!("Agent '{agent}' not found"))
}

/// 404 for an unknown chat uuid (§6): `{"detail":"Chat not found: <uuid>"}`.
pub fn chat_not_found(uuid: &str) -> String {
    detail(&format!("Chat not found: {uuid}"))
}

/// `{"status":"running","started_at":<started_at>}`, the float written as Python would
/// (an integral value keeps its `.0`).
pub fn running_at(started_at: f64) -> String {
    let n = serde_json::to_string(&started_at).expect("finite f64");
    format!(r#"{{"status":"running","started_at":{n}}}"#)
}

/// Same shape as [`FINISHED_COMPLETED`] (same keys, same order), with the given
/// session id and answer text. `finished_completed("demo-1", "ECHO: hello")`
/// equals `FINISHED_COMPLETED` byte for byte.
pub fn finished_completed(session_id: &str, text: &str) -> String {
    format!(
        concat!(
            r#"{{"status":"finished","started_at":1796003454.6703575,"result":{{"status":"completed","session_id":{session},"id":"response_f19c…","#,
            r#""output":[{{"id":"msg_9ce7…","type":"message","role":"assistant","content":[{{"type":"text","delta":false,"index":0,"status":null,"object":"content","msg_id":null,"text":{text}}}],"#,
            r#""status":"completed","metadata":null,"name":"assistant","object":"message","sequence_number":6,"usage":{{"input_tokens":10,"output_tokens":5}}}}],"#,
            r#""created_at":"2026-11-30T01:50:54+00:00","completed_at":"2026-11-30T01:50:54+00:00","metadata":null,"object":"response","sequence_number":7,"usage":{{"input_tokens":10,"output_tokens":5}}}}}}"#,
        ),
        session = js(session_id),
        text = js(text),
    )
}

/// Same shape as [`FINISHED_FAILED_LLM`] with the given `error.message`.
/// `finished_failed("Model 'mock-model' execution failed. Reason: …")` equals
/// `FINISHED_FAILED_LLM` byte for byte.
pub fn finished_failed(message: &str) -> String {
    format!(
        concat!(
            r#"{{"status":"finished","started_at":1796003454.83,"result":{{"status":"failed","session_id":"demo-1-fail","id":"response_5af9…","output":[],"#,
            r#""created_at":"…","completed_at":"…","metadata":null,"object":"response","sequence_number":3,"#,
            r#""error":{{"code":"MODEL_EXECUTION_ERROR","message":{message}}}}}}}"#,
        ),
        message = js(message),
    )
}
