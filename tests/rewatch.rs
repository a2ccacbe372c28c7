//! Watching a task again, as a person (or an agent following the skill) does: a held
//! result is kept and sent where the new watch says, changed options are applied (or the
//! output says which could not be), and a watch that could deliver twice or be held
//! forever is refused. Found by the simulation (`tests/sim`, issue 15).

mod support;

use serde_json::{Value, json};
use support::atc::TestEnv;

const TASK: &str = "task-5e1f";
const OTHER: &str = "task-77aa";

fn watched(env: &TestEnv, task: &str, extra: &[&str]) {
    let mut args = vec!["watch", task, "--session", "s-77"];
    args.extend_from_slice(extra);
    env.atc(args)
        .chat_check_skipped()
        .stdout_contains("Watching")
        .run();
}

fn rendered(task: &str) -> String {
    format!("[TASK_ID: {task}]\n[STATUS: finished]\n\nTask completed.\n\nthe answer")
}

/// The job's result was rendered and held: the parent chat did not exist (misrouted).
fn holding(env: &TestEnv, task: &str, status: &str) {
    let text = rendered(task);
    let status = status.to_owned();
    env.edit_job(task, move |job| {
        job.insert("status".into(), json!(status));
        job.insert("outcome".into(), json!("completed"));
        job.insert("final".into(), json!(text));
        job.insert(
            "delivery".into(),
            json!({"attempts": 0, "busy": 0, "last_http_status": null, "next_attempt_at": null,
                   "attempt_started_at": null, "error": "no chat with session s-77"}),
        );
    });
}

fn job_in(file: &Value, task: &str) -> Value {
    file["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["task_id"] == task)
        .cloned()
        .unwrap_or_else(|| panic!("no job for {task} in {file}"))
}

#[test]
fn a_rewatch_keeps_the_held_result_and_sends_it_to_the_new_chat() {
    for status in ["misrouted", "undelivered", "delivering"] {
        let env = TestEnv::new();
        watched(&env, TASK, &[]);
        holding(&env, TASK, status);
        let before = env.job(TASK);
        env.atc(["watch", TASK, "--session", "s-78"])
            .chat_check_skipped()
            .stdout_contains(format!(
                "Watching {TASK} for agent 'default' again (session s-77 → s-78): its result, already received, is kept and not asked for again; the result goes to session s-78 (user default, channel console) on the next atc tick."
            ))
            .file(move |file| {
                let job = job_in(file, TASK);
                assert_eq!(job["status"], "delivering", "{job}");
                assert_eq!(job["session_id"], "s-78");
                assert_eq!(job["final"], json!(rendered(TASK)), "the result is kept");
                assert_eq!(job["outcome"], "completed");
                assert_ne!(job["job_id"], before["job_id"], "a new registration");
            })
            .run();
    }
}

#[test]
fn a_rewatch_with_changed_options_applies_them_and_says_so() {
    let env = TestEnv::new();
    watched(&env, TASK, &[]);
    env.atc([
        "watch",
        TASK,
        "--session",
        "s-77",
        "--on-no-answer",
        "silent",
        "--fork-branch",
        "feature-x",
    ])
    .chat_check_skipped()
    .stdout_contains(format!(
        "Already watching {TASK} for agent 'default' (job {}); now with --on-no-answer, --fork-branch; the result goes to session s-77 (user default, channel console) on the next atc tick.",
        env.job(TASK)["job_id"].as_str().unwrap()
    ))
    .file(|file| {
        let job = job_in(file, TASK);
        assert_eq!(job["on_no_answer"], "silent", "{job}");
        assert_eq!(job["fork_branch"], "feature-x", "{job}");
    })
    .run();
}

#[test]
fn a_rewatch_says_which_options_a_rendered_result_cannot_take() {
    let env = TestEnv::new();
    watched(&env, TASK, &[]);
    holding(&env, TASK, "delivering");
    let job_id = env.job(TASK)["job_id"].as_str().unwrap().to_owned();
    env.atc([
        "watch",
        TASK,
        "--session",
        "s-77",
        "--fork-branch",
        "feature-x",
        "--create-session",
    ])
    .chat_check_skipped()
    .stdout_contains(format!(
        "Already watching {TASK} for agent 'default' (job {job_id}); now with --create-session; not applied: --fork-branch (its result is already rendered);"
    ))
    .file(|file| {
        let job = job_in(file, TASK);
        assert_eq!(job["create_session"], true, "{job}");
        assert_eq!(job.get("fork_branch"), None, "{job}");
        assert_eq!(job["final"], json!(rendered(TASK)));
    })
    .run();
}

#[test]
fn a_late_member_of_a_group_that_went_out_is_refused_whatever_agent_it_runs_on() {
    let env = TestEnv::new();
    watched(&env, TASK, &["--group", "fan-in"]);
    let job_id = env.job(TASK)["job_id"].clone();
    let text = rendered(TASK);
    env.edit_job(TASK, move |job| {
        job.insert("status".into(), json!("done"));
        job.insert("outcome".into(), json!("completed"));
        job.insert("final".into(), json!(text));
        job.insert("group_tasks".into(), json!([TASK]));
        job.insert("delivered_at".into(), json!("2026-11-30T20:15:03Z"));
    });
    assert!(job_id.is_string());
    // The skill's second watch of a cross-agent fan-in, after the first part went out.
    env.atc([
        "watch",
        OTHER,
        "--session",
        "s-77",
        "--group",
        "fan-in",
        "--target-agent",
        "worker",
    ])
    .status(1)
    .stderr_contains(
        "atc: group \"fan-in\" of session s-77 (user default, channel console) already went out (or is going out right now); give these tasks another --group name",
    )
    .file_unchanged()
    .run();
}

#[test]
fn a_rewatch_after_a_cancel_met_the_post_is_refused() {
    let env = TestEnv::new();
    watched(&env, TASK, &[]);
    holding(&env, TASK, "cancelled");
    env.edit_job(TASK, |job| {
        job["delivery"]["last_http_status"] = json!(200);
        job.insert(
            "note".into(),
            json!("cancelled while its result was being posted; the result was delivered anyway"),
        );
    });
    env.atc(["watch", TASK, "--session", "s-77"])
        .status(1)
        .stderr_contains(format!(
            "atc: {TASK}'s watch was cancelled while its result was being posted to session s-77 (user default, channel console), so it may be there already; watching it again could post it twice (`atc status {TASK}` shows what is known)"
        ))
        .file_unchanged()
        .run();
}
