//! Issue 29: every delegated task comes back by itself. What atc's QwenPaw plugin runs at
//! the end of a turn (`atc watch --origin auto --from -`, with the turn's background
//! submissions) and when the parent reads a finished result itself (`atc parent-read`),
//! through the real binary against the fake QwenPaw: exit status, stdout, stderr and the
//! job file after each command.

use crate::support;

use serde_json::{Value, json};
use support::atc::TestEnv;
use support::bodies;
use support::chats::PostFault;
use support::fake::Reply;
use support::scene::Scene;

const A: &str = "task-aaaaaaaaaaaa";
const B: &str = "task-bbbbbbbbbbbb";
const CHILD_A: &str = "default:to:SE:1796161586102:6bb71902";
const CHILD_B: &str = "default:to:QA:1796161586103:0c1d2e3f";
const AUTOMATIC: &str = "automatically, at the end of the turn that submitted it";

/// What the plugin writes on the auto-watch's standard input for the turn's background
/// submissions: each task, its child session and the agent it runs on.
fn submitted(tasks: &[(&str, &str, &str)]) -> String {
    tasks
        .iter()
        .map(|(task, child, on)| {
            format!("[TASK_ID: {task}]\n[SESSION: {child}]\n[TARGET_AGENT: {on}]\n")
        })
        .collect()
}

/// `atc watch --origin auto --json` for carol's chat s-77, as the plugin runs it; the
/// server knows each task of `stdin` as a running one for watch's task check.
fn auto_watch<'a>(s: &'a Scene, stdin: &str) -> support::atc::Run<'a> {
    for task in stdin
        .split("[TASK_ID: ")
        .skip(1)
        .filter_map(|rest| rest.split(']').next())
    {
        s.server.once(
            "GET",
            &Scene::task_path(task),
            Reply::json(200, bodies::RUNNING),
        );
    }
    s.atc([
        "watch",
        "--origin",
        "auto",
        "--json",
        "--from",
        "-",
        "--session",
        "s-77",
        "--user",
        "carol",
        "--channel",
        "console",
        "--agent",
        "default",
    ])
    .stdin(stdin.to_owned())
}

/// The server knows `task` as a running one, for one watch's task check.
fn known(s: &Scene, task: &str) {
    s.server.once(
        "GET",
        &Scene::task_path(task),
        Reply::json(200, bodies::RUNNING),
    );
}

fn finishes(s: &Scene, task: &str, text: &str) {
    s.poll_replies(
        task,
        vec![Reply::json(200, &bodies::finished_completed("x", text))],
    );
}

fn said(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_turns_two_background_submits_are_watched_each_on_its_own_agent_and_say_so() {
    let s = Scene::new();
    s.add_chat("s-77", "carol", "console");
    let out = auto_watch(&s, &submitted(&[(A, CHILD_A, "SE"), (B, CHILD_B, "QA")]))
        .stdout_inspected()
        .run();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["auto_watch"],
        json!({"on": true, "from": "the default"})
    );
    assert_eq!(doc["left_alone"], json!([]));
    let jobs = doc["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2);
    for (job, (task, child, on)) in jobs.iter().zip([(A, CHILD_A, "SE"), (B, CHILD_B, "QA")]) {
        assert_eq!(job["task_id"], task);
        assert_eq!(job["origin"], "auto");
        assert_eq!(job["child_session"], child);
        assert_eq!(job["target_agent"], on);
        assert_eq!(
            (&job["session_id"], &job["user_id"], &job["agent_id"]),
            (&json!("s-77"), &json!("carol"), &json!("default"))
        );
        // The file holds exactly what was printed.
        assert_eq!(&s.job(task), job);
    }
    // Both agents were asked whether they exist, as `watch --target-agent` asks.
    for agent in ["SE", "QA"] {
        assert!(
            s.server
                .requests()
                .iter()
                .any(|r| r.path == "/api/chats" && r.header("x-agent-id") == Some(agent)),
            "agent {agent} not checked"
        );
    }
    // atc status and atc log say the watch was made automatically.
    let list = s.atc(["status"]).stdout_inspected().file_unchanged().run();
    let list = said(&list);
    assert_eq!(
        list.lines()
            .filter(|l| l.ends_with("not polled yet (watched automatically)"))
            .count(),
        2,
        "{list}"
    );
    s.atc(["status", A])
        .stdout_contains(format!("watched         {AUTOMATIC} (auto)\n"))
        .file_unchanged()
        .run();
    let log = s.atc(["log", A]).stdout_inspected().file_unchanged().run();
    let log = said(&log);
    assert!(
        log.contains(&format!("{A}  registered  → pending  ({AUTOMATIC})  job ")),
        "{log}"
    );
}

#[test]
fn a_turn_with_no_background_submit_watches_nothing() {
    let s = Scene::new();
    s.add_chat("s-77", "carol", "console");
    // `--from` text without a task id: what a turn with no submit would have to say.
    auto_watch(&s, "nothing here\n")
        .status(2)
        .stderr("atc: --from - (standard input): no [TASK_ID: …] line in it (submit_to_agent and `qwenpaw agents chat --background` print one per task)\n")
        .no_file()
        .run();
}

#[test]
fn auto_watch_off_watches_nothing_asks_nothing_and_says_so() {
    let s = Scene::new();
    // No chat scripted: a request to the fake would fail the test.
    let out = s
        .atc([
            "watch",
            "--origin",
            "auto",
            "--json",
            "--from",
            "-",
            "--session",
            "s-77",
        ])
        .stdin(submitted(&[(A, CHILD_A, "SE")]))
        .env("ATC_AUTO_WATCH", "0")
        .stdout_inspected()
        .no_file()
        .run();
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).unwrap(),
        json!({"auto_watch": {"on": false, "from": "ATC_AUTO_WATCH"}, "jobs": [], "left_alone": []})
    );
    assert!(s.server.requests().is_empty());
    s.atc(["watch", A, "--origin", "auto", "--session", "s-77"])
        .env("ATC_AUTO_WATCH", "off")
        .stdout(format!("Not watching {A}: auto-watch is off (ATC_AUTO_WATCH); the model's own watch_agent_task (or `atc watch`) still watches.\n"))
        .no_file()
        .run();
    // The model's own watch is no automatic one: it watches.
    s.add_chat("s-77", "default", "console");
    known(&s, A);
    s.atc(["watch", A, "--origin", "plugin", "--session", "s-77"])
        .env("ATC_AUTO_WATCH", "0")
        .stdout(format!("Watching {A} for agent 'default' (by the model, with watch_agent_task); the result goes to session s-77 (user default, channel console) on the next atc tick.\n"))
        .run();
    assert_eq!(s.job(A)["origin"], "plugin");
    s.atc(["watch", B, "--origin", "auto", "--session", "s-77"])
        .env("ATC_AUTO_WATCH", "maybe")
        .status(2)
        .stderr("atc: ATC_AUTO_WATCH: \"maybe\" is neither true nor false (write true or false, 1 or 0)\n")
        .file_unchanged()
        .run();
}

/// `auto-watch` is a key of atc's config file: `atc config set auto-watch false` turns
/// the plugin's end-of-turn watches off for every atc that reads the file (the server's
/// too), `ATC_AUTO_WATCH` beats the file, `atc config show` says which is in effect, and
/// `atc config unset auto-watch` turns it back on.
#[test]
fn auto_watch_false_in_the_config_file_turns_it_off_and_atc_auto_watch_beats_the_file() {
    let s = Scene::new();
    let config = s.env.home.join(".config/atc/config.toml");
    let file = config.display().to_string();
    let shown = |s: &Scene, env: Option<&str>| -> String {
        let mut run = s
            .atc(["config", "show"])
            .stdout_inspected()
            .file_unchanged();
        if let Some(value) = env {
            run = run.env("ATC_AUTO_WATCH", value);
        }
        let out = run.run();
        said(&out)
            .lines()
            .find(|l| l.starts_with("auto-watch "))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    assert_eq!(shown(&s, None), "auto-watch true default");

    s.atc(["config", "set", "auto-watch", "false"])
        .stdout_inspected()
        .no_file()
        .run();
    assert!(
        std::fs::read_to_string(&config)
            .unwrap()
            .contains("\nauto-watch = false\n"),
        "{file}"
    );
    assert_eq!(shown(&s, None), "auto-watch false config file");

    // The plugin's watch at a turn's end: nothing asked of the server, no job file.
    let out = s
        .atc([
            "watch",
            "--origin",
            "auto",
            "--json",
            "--from",
            "-",
            "--session",
            "s-77",
        ])
        .stdin(submitted(&[(A, CHILD_A, "SE")]))
        .stdout_inspected()
        .no_file()
        .run();
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).unwrap(),
        json!({"auto_watch": {"on": false, "from": format!("auto-watch in {file}")}, "jobs": [], "left_alone": []})
    );
    assert!(s.server.requests().is_empty());
    s.atc(["watch", A, "--origin", "auto", "--session", "s-77"])
        .stdout(format!("Not watching {A}: auto-watch is off (auto-watch in {file}); the model's own watch_agent_task (or `atc watch`) still watches.\n"))
        .no_file()
        .run();

    // The environment beats the file.
    assert_eq!(shown(&s, Some("1")), "auto-watch true ATC_AUTO_WATCH");
    s.add_chat("s-77", "carol", "console");
    let out = auto_watch(&s, &submitted(&[(A, CHILD_A, "SE")]))
        .env("ATC_AUTO_WATCH", "1")
        .stdout_inspected()
        .run();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["auto_watch"],
        json!({"on": true, "from": "ATC_AUTO_WATCH"})
    );
    assert_eq!(s.job(A)["origin"], "auto");

    // Unset, it is on again, by default.
    s.atc(["config", "unset", "auto-watch"])
        .stdout_inspected()
        .file_unchanged()
        .run();
    assert_eq!(shown(&s, None), "auto-watch true default");
    let out = auto_watch(&s, &submitted(&[(B, CHILD_B, "QA")]))
        .stdout_inspected()
        .run();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["auto_watch"],
        json!({"on": true, "from": "the default"})
    );
    assert_eq!(s.job(B)["origin"], "auto");
}

#[test]
fn the_models_watch_and_the_turns_end_are_one_registration_either_way_and_one_delivery() {
    let s = Scene::new();
    s.add_chat("s-77", "carol", "console");
    // The model watched A with options in the turn; the turn's end watches it again.
    known(&s, A);
    s.atc([
        "watch",
        A,
        "--origin",
        "plugin",
        "--session",
        "s-77",
        "--user",
        "carol",
        "--target-agent",
        "SE",
        "--child-session",
        CHILD_A,
        "--stop-after",
        "10m",
        "--check-in",
        "5m",
    ])
    .stdout_inspected()
    .run();
    let model = s.job(A);
    let out = auto_watch(&s, &submitted(&[(A, CHILD_A, "SE")]))
        .stdout_inspected()
        .file_unchanged()
        .run();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["jobs"], json!([model]), "the same record, untouched");
    assert_eq!(model["origin"], "plugin");
    assert_eq!(
        (&model["stop_after_secs"], &model["check_in_secs"]),
        (&json!(600), &json!(300))
    );
    // The reverse: the turn's end watched B; in a later turn the model asks for a deadline.
    auto_watch(&s, &submitted(&[(B, CHILD_B, "QA")]))
        .stdout_inspected()
        .run();
    let auto = s.job(B);
    known(&s, B);
    s.atc([
        "watch", B, "--origin", "plugin", "--session", "s-77", "--user", "carol",
        "--target-agent", "QA", "--child-session", CHILD_B, "--stop-after", "10m",
    ])
    .stdout(format!(
        "Already watching {B} (running on agent 'QA') for agent 'default' (job {}); now with --stop-after 10m; the result goes to session s-77 (user default, channel console) on the next atc tick.\n",
        auto["job_id"].as_str().unwrap()
    ).replace("user default", "user carol"))
    .run();
    let after = s.job(B);
    assert_eq!(
        (
            &after["job_id"],
            &after["origin"],
            &after["stop_after_secs"]
        ),
        (&auto["job_id"], &json!("auto"), &json!(600))
    );
    // One delivery each.
    finishes(&s, A, "answer A");
    finishes(&s, B, "answer B");
    s.tick(&["--no-batch"]).run();
    s.tick(&["--no-batch"]).run();
    let turns = s.delivered("s-77");
    assert_eq!(turns.len(), 2, "{turns:?}");
    for (task, answer) in [(A, "answer A"), (B, "answer B")] {
        assert_eq!(
            turns.iter().filter(|t| t.contains(answer)).count(),
            1,
            "{task}: {turns:?}"
        );
        assert_eq!(s.status(task), "done");
    }
}

#[test]
fn an_automatic_watch_leaves_another_chats_watch_and_an_ended_one_alone() {
    let s = Scene::new();
    s.add_chat("s-77", "carol", "console");
    s.watch(A, &["--session", "s-78"]);
    s.watch(B, &["--session", "s-77", "--user", "carol"]);
    s.atc(["cancel", B]).stdout_inspected().run();
    let out = auto_watch(&s, &submitted(&[(A, CHILD_A, "SE"), (B, CHILD_B, "QA")]))
        .stdout_inspected()
        .file_unchanged()
        .run();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["jobs"], json!([]));
    assert_eq!(
        doc["left_alone"],
        json!([
            {"task_id": A, "reason": "it is watched for session s-78 (user default, channel console) (agent 'default')", "status": "pending"},
            {"task_id": B, "reason": "its watch already ended (cancelled)", "status": "cancelled"},
        ])
    );
    assert_eq!(s.job(A)["session_id"], "s-78");
}

/// A result waiting for a busy parent, read by the parent itself: never posted.
#[test]
fn a_result_the_parent_read_itself_is_not_posted_status_says_so_and_redeliver_sends_it() {
    let s = Scene::new();
    s.watch(A, &["--user", "carol"]);
    finishes(&s, A, "answer A");
    s.chats.busy_for("s-77", 1);
    s.tick(&[]).run();
    assert_eq!(s.status(A), "delivering");
    s.atc([
        "parent-read",
        A,
        "--session",
        "s-77",
        "--user",
        "carol",
        "--channel",
        "console",
        "--agent",
        "default",
    ])
    .stdout(format!(
        "{A}: not posted: the parent read its result itself; `atc redeliver {A}` still sends it.\n"
    ))
    .file(|file| {
        let job = support::atc::job_of(file, A);
        assert_eq!(job["status"], "skipped");
        assert!(job["read_by_parent_at"].is_string(), "{job}");
        assert!(job.get("turn").is_none(), "{job}");
        // Its open turn went with it.
        assert_eq!(file["turns"], json!([]), "{file}");
    })
    .run();
    s.tick(&[]).run();
    assert!(s.posts().is_empty(), "posted after the parent read it");
    let note = format!(
        "the parent read its result itself (check_agent_task) before atc posted it: nothing was posted; `atc redeliver {A}` sends it"
    );
    s.atc(["status", A])
        .stdout_contains(format!("note            {note}\n"))
        .stdout_contains("parent read     ")
        .file_unchanged()
        .run();
    let list = s.atc(["status"]).stdout_inspected().file_unchanged().run();
    assert!(said(&list).contains("skipped  ") && said(&list).contains(&note));
    let log = s.atc(["log", A]).stdout_inspected().file_unchanged().run();
    assert!(
        said(&log).contains(&format!("{A}  read_by_parent  → skipped  job ")),
        "{}",
        said(&log)
    );
    // Reading it again changes nothing.
    s.atc(["parent-read", A, "--session", "s-77", "--user", "carol"])
        .stdout(format!("{A}: already read by the parent; nothing to do.\n"))
        .file_unchanged()
        .run();
    // A person still gets it sent.
    s.atc(["redeliver", A])
        .stdout(format!("{A} goes to session s-77 (user carol, channel console) again on the next atc tick, once the chat is idle.\n"))
        .run();
    s.tick(&[]).run();
    let turns = s.delivered("s-77");
    assert_eq!(turns.len(), 1);
    assert!(turns[0].contains("answer A"));
    assert_eq!(s.status(A), "done");
}

/// Read before atc saw it finish: the watch ends; redeliver watches again, and the next
/// tick fetches and posts the result.
#[test]
fn a_result_read_before_atc_polled_it_ends_the_watch_and_redeliver_fetches_it() {
    let s = Scene::new();
    s.watch(A, &[]);
    let out = s
        .atc(["--json", "parent-read", A, "--session", "s-77"])
        .stdout_inspected()
        .run();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let job_id = s.job(A)["job_id"].clone();
    assert_eq!(
        doc,
        json!({"tasks": [{"task_id": A, "outcome": "read_by_parent", "status": "skipped", "job_id": job_id}]})
    );
    s.tick(&[]).run();
    assert_eq!((s.polls(A), s.posts().len()), (0, 0), "polled or posted");
    s.atc(["status", A])
        .stdout_contains("the parent read its result itself (check_agent_task) before atc saw it finish: nothing was posted")
        .file_unchanged()
        .run();
    s.atc(["redeliver", A])
        .stdout(format!("{A} is watched again (the parent read its result before atc fetched it): the next atc tick fetches the result and posts it to session s-77 (user default, channel console), once the chat is idle.\n"))
        .run();
    assert_eq!(s.status(A), "pending");
    finishes(&s, A, "answer A");
    s.tick(&[]).run();
    assert_eq!(s.delivered("s-77").len(), 1);
}

/// The read lands while the turn's POST is out: a claimed turn is what it is.
#[test]
fn a_read_while_its_turn_is_being_posted_goes_out_anyway_and_status_says_both() {
    let s = Scene::new();
    s.watch(A, &[]);
    finishes(&s, A, "answer A");
    s.chats
        .fault(PostFault::SlowAfterStore(std::time::Duration::from_secs(2)));
    let tick = s.tick_until_posted(&[]);
    s.atc(["parent-read", A, "--session", "s-77"])
        .stdout(format!("{A}: the parent read its result itself, but its turn was already claimed: it goes out as it is.\n"))
        .file(|file| {
            let job = support::atc::job_of(file, A);
            assert_eq!(job["status"], "delivering");
            assert!(job["read_by_parent_at"].is_string());
        })
        .run();
    tick.wait();
    assert_eq!(s.status(A), "done");
    assert_eq!(s.delivered("s-77").len(), 1);
    s.atc(["status", A])
        .stdout_contains("; the parent read its result itself (check_agent_task) after its turn was claimed: it was posted anyway\n")
        .file_unchanged()
        .run();
}

#[test]
fn parent_read_of_a_task_not_watched_or_watched_elsewhere_changes_nothing() {
    let env = TestEnv::new();
    // No job file at all: nothing is created (not even its directory).
    env.atc(["parent-read", A, "--session", "s-77"])
        .stdout(format!("{A}: not watched; nothing to do.\n"))
        .no_file()
        .run();
    assert!(!env.state.parent().unwrap().exists());
    let s = Scene::new();
    s.watch(A, &["--session", "s-78"]);
    s.watch(B, &[]);
    s.poll_replies(A, vec![Reply::json(200, bodies::RUNNING)]);
    finishes(&s, B, "answer B");
    s.tick(&[]).run();
    assert_eq!(s.status(B), "done");
    s.atc(["parent-read", A, B, "task-cccccccccccc", "--session", "s-77"])
        .stdout(format!(
            "{A}: watched for another chat; nothing to do.\n{B}: already delivered; nothing to do.\ntask-cccccccccccc: not watched; nothing to do.\n"
        ))
        .file_unchanged()
        .run();
    s.atc(["parent-read", "--session", "s-77"])
        .status(2)
        .stderr_contains("required")
        .file_unchanged()
        .run();
}

/// A watch that already ended is left alone, and its line says how it ended: cancelled;
/// skipped (an empty answer under `--on-empty skip`); read already while its POST's
/// outcome is unknown (that turn goes out as it is).
#[test]
fn parent_read_of_an_ended_watch_says_how_it_ended() {
    let s = Scene::new();
    s.watch(A, &[]);
    s.watch(B, &["--on-empty", "skip"]);
    s.poll_replies(A, vec![Reply::json(200, bodies::RUNNING)]);
    s.poll_replies(
        B,
        vec![Reply::json(200, &bodies::finished_completed("x", "   "))],
    );
    s.atc(["cancel", A]).stdout_contains("Cancelled").run();
    s.tick(&[]).run();
    assert_eq!(s.status(B), "skipped");
    s.atc(["parent-read", A, B, "--session", "s-77"])
        .stdout(format!(
            "{A}: the watch already ended (cancelled); nothing to do.\n{B}: the watch already ended (skipped); nothing to do.\n"
        ))
        .file_unchanged()
        .run();
    let s = Scene::new();
    s.watch(A, &[]);
    finishes(&s, A, "answer A");
    s.chats.fault(PostFault::DropAfterStore);
    s.tick(&[]).run();
    assert_eq!(s.status(A), "unconfirmed");
    s.atc(["parent-read", A, "--session", "s-77"])
        .stdout(format!(
            "{A}: the parent read its result itself, but its turn was already claimed: it goes out as it is.\n"
        ))
        .run();
    s.atc(["parent-read", A, "--session", "s-77"])
        .stdout(format!(
            "{A}: already read by the parent (its turn goes out as it is); nothing to do.\n"
        ))
        .file_unchanged()
        .run();
    s.env.settle_passed(A);
    s.tick(&[]).run();
    assert_eq!(s.status(A), "done");
    assert_eq!((s.posts().len(), s.delivered("s-77").len()), (1, 1));
}

#[test]
fn the_plumbing_is_hidden_from_the_main_help() {
    let env = TestEnv::new();
    let out = env.atc(["--help"]).stdout_inspected().no_file().run();
    assert!(!said(&out).contains("parent-read"), "{}", said(&out));
    let out = env
        .atc(["watch", "--help"])
        .stdout_inspected()
        .no_file()
        .run();
    assert!(!said(&out).contains("--origin"));
    assert!(
        said(&out).contains("auto-watch"),
        "watch --help says what auto-watch does"
    );
    env.atc(["parent-read", "--help"])
        .stdout_contains("The parent read these tasks' finished results itself")
        .no_file()
        .run();
}

#[test]
fn an_automatic_watch_of_an_acp_session_is_refused_as_any_watch_is() {
    let env = TestEnv::new();
    env.atc([
        "watch", "--origin", "auto", "--json", "--from", "-", "--session", "s-1", "--channel",
        "acp",
    ])
    .stdin(submitted(&[(A, CHILD_A, "SE")]))
    .status(1)
    .stderr("atc: channel \"acp\" (--channel) is an ACP session: atc posts results through QwenPaw's console API, which can never route back into an ACP session; poll check_agent_task (at most every 30 s) instead, or watch from a console session\n")
    .no_file()
    .run();
}

/// The event log says who watched a task and who changed its watch: the model's tool
/// (`--origin plugin`), in its words; a person's `atc watch` needs none.
#[test]
fn the_log_says_who_watched_and_who_changed_a_watch() {
    let s = Scene::new();
    s.add_chat("s-77", "default", "console");
    for check_in in [None, Some("5m"), Some("10m")] {
        known(&s, A);
        let mut args = vec!["watch", A, "--session", "s-77"];
        if check_in != Some("10m") {
            args.extend(["--origin", "plugin"]);
        }
        if let Some(every) = check_in {
            args.extend(["--check-in", every]);
        }
        s.atc(args).stdout_inspected().run();
    }
    let log = s.env.logged(&[]);
    let said: Vec<(Value, Value)> = log
        .iter()
        .map(|e| (e["event"].clone(), e["reason"].clone()))
        .collect();
    let model = json!("by the model, with watch_agent_task");
    assert_eq!(
        said,
        [
            (json!("registered"), model.clone()),
            (json!("updated"), model),
            (json!("updated"), Value::Null),
        ],
        "{log:#?}"
    );
}
