//! Watching a task again, as a person (or an agent following the skill) does: a held
//! result is kept and sent where the new watch says, changed options are applied (or the
//! output says which could not be), and a watch that could deliver twice or be held
//! forever is refused. Found by the simulation (`tests/sim`, issue 15).

use crate::support;

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

/// The job's result was rendered and held in a turn in `state` that went nowhere (the
/// parent chat did not exist: misrouted).
fn holding(env: &TestEnv, task: &str, status: &str, state: &str) -> Value {
    let mut file = env.file();
    let jobs = file["jobs"].as_array_mut().unwrap();
    let job = jobs.iter_mut().find(|j| j["task_id"] == task).unwrap();
    job["status"] = json!(status);
    job["outcome"] = json!("completed");
    job["final"] = json!(rendered(task));
    let mut turn = support::atc::turn_for(job, state);
    turn["delivery"] = json!({"attempts": 0, "busy": 0, "last_http_status": null,
        "next_attempt_at": null, "attempt_started_at": null, "error": "no chat with session s-77"});
    file["turns"].as_array_mut().unwrap().push(turn.clone());
    env.write_file(&file);
    turn
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
    for (status, state) in [
        ("misrouted", "misrouted"),
        ("undelivered", "undelivered"),
        ("delivering", "open"),
    ] {
        let env = TestEnv::new();
        watched(&env, TASK, &[]);
        holding(&env, TASK, status, state);
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
                assert!(job.get("turn").is_none(), "not in the old turn: {job}");
            })
            .run();
    }
}

/// The oracle found it (issue 35): a held empty answer, watched again from another chat
/// with `--on-empty skip`, was posted although the record said skip. What an empty answer
/// comes to was decided when it was rendered: the new watch keeps the old choice, says so,
/// and the record says what will happen.
#[test]
fn a_rewatch_of_a_held_result_keeps_the_on_empty_it_was_rendered_under() {
    let env = TestEnv::new();
    watched(&env, TASK, &[]);
    holding(&env, TASK, "misrouted", "misrouted");
    env.atc(["watch", TASK, "--session", "s-78", "--on-empty", "skip"])
        .chat_check_skipped()
        .stdout_contains(format!(
            "Watching {TASK} for agent 'default' again (session s-77 → s-78): its result, already received, is kept and not asked for again; not applied: --on-empty (its result is already rendered); the result goes to session s-78"
        ))
        .file(|file| {
            let job = job_in(file, TASK);
            assert_eq!(job["session_id"], "s-78", "{job}");
            assert!(
                job.get("on_empty").is_none_or(|v| v == "deliver"),
                "the rendering's choice is kept: {job}"
            );
            assert_eq!(job["final"], json!(rendered(TASK)), "the result is kept");
        })
        .run();
}

/// Found by the simulation (issue 36): a held result watched again for another chat with
/// another `--target-agent` (a person's or a model's stray) took that agent as the one the
/// child runs on, so a reply the result woke in the child's own chat (a delegation tree)
/// was never sent up. The agent its result came from is kept, and said.
#[test]
fn a_rewatch_of_a_held_result_keeps_the_agent_it_came_from() {
    let env = TestEnv::new();
    watched(&env, TASK, &["--target-agent", "SE"]);
    holding(&env, TASK, "misrouted", "misrouted");
    env.atc(["watch", TASK, "--session", "s-78", "--target-agent", "QA"])
        .chat_check_skipped()
        .stdout_contains(
            "its result, already received, is kept and not asked for again; not applied: --target-agent (its result came from agent SE); the result goes to session s-78",
        )
        .file(|file| {
            let job = job_in(file, TASK);
            assert_eq!(job["session_id"], "s-78", "{job}");
            assert_eq!(job["target_agent"], "SE", "{job}");
        })
        .run();
    // Naming the agent it came from changes nothing and says nothing of it.
    let env = TestEnv::new();
    watched(&env, TASK, &["--target-agent", "SE"]);
    holding(&env, TASK, "misrouted", "misrouted");
    env.atc(["watch", TASK, "--session", "s-78", "--target-agent", "SE"])
        .chat_check_skipped()
        .never_shows("not applied")
        .stdout_inspected()
        .file(|file| assert_eq!(job_in(file, TASK)["target_agent"], "SE"))
        .run();
}

/// Found by hand: a re-watch moving a deadline from 10m to 1.5h said only "now with
/// --stop-after", as if nothing had changed but the flag.
#[test]
fn a_rewatch_that_changes_a_duration_says_its_new_value() {
    let env = TestEnv::new();
    let child = ["--child-session", "s-child"];
    watched(
        &env,
        TASK,
        &[&child[..], &["--stop-after", "10m", "--check-in", "5m"]].concat(),
    );
    env.atc([
        "watch", TASK, "--session", "s-77", child[0], child[1], "--stop-after", "1.5h",
        "--check-in", "5m",
    ])
    .chat_check_skipped()
    .stdout_contains(format!(
        "Already watching {TASK} for agent 'default' (job {}); now with --stop-after 1h 30m; the result goes",
        env.job(TASK)["job_id"].as_str().unwrap()
    ))
    .file(|file| assert_eq!(job_in(file, TASK)["stop_after_secs"], 5400))
    .run();
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
    holding(&env, TASK, "delivering", "open");
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

/// A check-in's turn that may be in the chat already takes no new way of posting: the
/// re-watch of the child still running says why. The check-in it leaves out is off now,
/// and said so.
#[test]
fn a_rewatch_says_a_claimed_turn_takes_no_new_way_of_posting() {
    let env = TestEnv::new();
    watched(&env, TASK, &["--check-in", "5m"]);
    assert_eq!(env.job(TASK)["check_in_secs"], 300);
    let mut file = env.file();
    let job = &mut file["jobs"][0];
    let mut turn = support::atc::turn_for(job, "claimed");
    turn["carries"][0]["block"] = json!("check_in");
    turn["carries"][0]["n"] = json!(1);
    turn["text"] = json!("still running");
    file["turns"].as_array_mut().unwrap().push(turn);
    env.write_file(&file);
    let job_id = env.job(TASK)["job_id"].as_str().unwrap().to_owned();
    env.atc(["watch", TASK, "--session", "s-77", "--forward", "never", "--on-empty", "skip"])
        .chat_check_skipped()
        .stdout_contains(format!(
            "Already watching {TASK} for agent 'default' (job {job_id}); now with --on-empty and without --check-in; not applied: --forward (its turn was already claimed);"
        ))
        .file(|file| {
            let job = job_in(file, TASK);
            assert_eq!(job.get("forward_mode"), None, "{job}");
            assert_eq!(job.get("check_in_secs"), None, "{job}");
        })
        .run();
}

/// `atc watch TASK --session s-78` is refused (exit 1) with `said`, the file untouched.
fn refused_elsewhere(env: &TestEnv, task: &str, said: &str) {
    env.atc(["watch", task, "--session", "s-78"])
        .status(1)
        .stderr(format!("atc: {said}\n"))
        .file_unchanged()
        .run();
}

/// A result that is being posted, or may be in the chat, is not watched again elsewhere;
/// the refusal says what holds it: an outcome unknown, its POST in flight, its group's
/// turn claimed (a member cancelled after that claim too).
#[test]
fn a_rewatch_of_a_result_on_its_way_says_what_holds_it() {
    let chat = "session s-77 (user default, channel console)";
    let env = TestEnv::new();
    watched(&env, TASK, &[]);
    holding(&env, TASK, "unconfirmed", "unconfirmed");
    refused_elsewhere(
        &env,
        TASK,
        &format!(
            "{TASK}'s result may already have been delivered (an attempt's outcome is unknown; atc is reading the chat back); watching it again could post it twice. `atc status {TASK}` shows the text; `atc redeliver {TASK}` tries again safely"
        ),
    );

    // Claimed: its POST in flight, then between POSTs (an earlier one's outcome unknown,
    // the read-back found nothing yet).
    let env = TestEnv::new();
    watched(&env, TASK, &[]);
    holding(&env, TASK, "delivering", "claimed");
    env.edit_turn(TASK, |turn| {
        turn["delivery"]["attempt_started_at"] = json!("2026-11-30T20:15:03Z");
    });
    refused_elsewhere(
        &env,
        TASK,
        &format!(
            "{TASK}'s result is being posted to {chat} right now (delivering); try again after the next atc tick"
        ),
    );
    env.edit_turn(TASK, |turn| {
        turn["delivery"]["attempt_started_at"] = json!(null);
    });
    refused_elsewhere(
        &env,
        TASK,
        &format!(
            "{TASK}'s result was claimed to be posted to {chat} and waits to be posted there again (an earlier attempt's outcome was unknown); watching it again could post it twice (`atc status {TASK}` shows what is known)"
        ),
    );

    let env = TestEnv::new();
    watched(&env, TASK, &["--group", "fan-in"]);
    watched(&env, OTHER, &["--group", "fan-in"]);
    let mut file = env.file();
    let mut carries = Vec::new();
    for job in file["jobs"].as_array_mut().unwrap() {
        let task = job["task_id"].as_str().unwrap().to_owned();
        job["outcome"] = json!("completed");
        job["final"] = json!(rendered(&task));
        job["turn"] = json!("atc-fan-in");
        carries.push(json!({"job_id": job["job_id"], "task_id": task, "block": "result"}));
    }
    let mut turn = support::atc::turn_for(&mut file["jobs"][0].clone(), "claimed");
    turn["turn_id"] = json!("atc-fan-in");
    turn["group"] = json!("fan-in");
    turn["carries"] = json!(carries);
    turn["text"] = json!("[ATC_GROUP: fan-in] 2 tasks: 2 completed");
    file["turns"] = json!([turn]);
    env.write_file(&file);
    refused_elsewhere(
        &env,
        TASK,
        &format!(
            "{TASK}'s result travels in group fan-in's turn, which was claimed to be posted to {chat} (claimed); watched again alone it could go out twice (`atc status {TASK}` shows where that turn stands)"
        ),
    );
    env.atc(["cancel", TASK]).stdout_inspected().run();
    refused_elsewhere(
        &env,
        TASK,
        &format!(
            "{TASK}'s watch was cancelled after its result was claimed into group fan-in's turn, which carries it to {chat}; watching it again could post it twice (`atc status {TASK}` shows where that turn stands)"
        ),
    );
}

#[test]
fn a_late_member_of_a_group_that_went_out_starts_its_next_round_whatever_agent_it_runs_on() {
    let env = TestEnv::new();
    watched(&env, TASK, &["--group", "fan-in"]);
    let job_id = env.job(TASK)["job_id"].clone();
    // The group's turn went out, carrying its one member.
    let mut file = env.file();
    let job = &mut file["jobs"][0];
    job["status"] = json!("done");
    job["outcome"] = json!("completed");
    job["final"] = json!(rendered(TASK));
    let mut turn = support::atc::turn_for(job, "delivered");
    turn["group"] = json!("fan-in");
    turn["text"] = json!(format!(
        "[ATC_GROUP: fan-in] 1 task: 1 completed\n\n{}",
        rendered(TASK)
    ));
    turn["delivered_at"] = json!("2026-11-30T20:15:03Z");
    file["turns"] = json!([turn.clone()]);
    env.write_file(&file);
    assert!(job_id.is_string());
    let late = [
        "watch",
        OTHER,
        "--session",
        "s-77",
        "--group",
        "fan-in",
        "--target-agent",
        "worker",
    ];
    // While the group's turn may still be posted (its outcome unknown), a late member is
    // refused: it could not join that turn, nor be told apart from it.
    turn["state"] = json!("unconfirmed");
    file["turns"] = json!([turn]);
    env.write_file(&file);
    env.atc(late)
        .status(1)
        .stderr_contains(
            "atc: group \"fan-in\" of session s-77 (user default, channel console) already went out (or is going out right now); give these tasks another --group name",
        )
        .file_unchanged()
        .run();
    // Delivered: the skill's second watch of a cross-agent fan-in, after the first part
    // went out (or a model naming its groups again) is the group's next round: held for
    // nothing that went out, it comes back as a message of its own. (It was refused, and
    // a model told to pick another name left its tasks to come back one by one.)
    file["turns"][0]["state"] = json!("delivered");
    env.write_file(&file);
    env.atc(late)
        .chat_check_skipped()
        .stdout(format!(
            "Watching {OTHER} (running on agent 'worker') in group fan-in for agent 'default'; the result goes to session s-77 (user default, channel console) with the rest of its group.\nGroup fan-in already went out to session s-77 (user default, channel console): these tasks are its next round, and come back together as a message of their own.\n"
        ))
        .run();
    let late = env.job(OTHER);
    assert_eq!(late["group"], "fan-in");
    assert_eq!(late["status"], "pending");
}

#[test]
fn a_rewatch_after_a_cancel_met_the_post_is_refused() {
    let env = TestEnv::new();
    watched(&env, TASK, &[]);
    holding(&env, TASK, "cancelled", "delivered");
    env.edit_turn(TASK, |turn| {
        turn["delivery"]["last_http_status"] = json!(200);
        turn["delivery"]["attempts"] = json!(1);
        turn["delivery"].as_object_mut().unwrap().remove("error");
        turn.insert("delivered_at".into(), json!("2026-11-30T20:15:03Z"));
    });
    env.edit_job(TASK, |job| {
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
