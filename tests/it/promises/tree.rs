//! Delegation trees (issue 37): a result delivered into a watched child's chat (its own
//! answer already delivered) wakes the child, and the reply goes up to the child's
//! parent as a follow-up of the child's task, exactly once, level by level.

use crate::support;

use support::atc::stdout;
use support::bodies;
use support::chats::ParentReply;
use support::fake::Reply;
use support::scene::Scene;

/// The line a follow-up of `task` starts with, after `after` finished.
fn head(task: &str, after: &str) -> String {
    format!(
        "[TASK_ID: {task}]\n[atc: follow-up to this task's earlier answer, after {after} finished]"
    )
}

/// P (`s-77`) watches `task-child`, whose chat is `s-child`; it finished ("delegated")
/// and its result is delivered. Then the child's own task `task-grand` is watched for
/// `s-child`, and the child answers `reply` when its result arrives there.
fn tree(reply: &str) -> Scene {
    let s = Scene::new();
    s.watch("task-child", &[]);
    finishes(
        &s,
        "task-child",
        "s-child",
        "CHILD: delegated to task-grand",
    );
    s.tick(&[]);
    assert_eq!(s.status("task-child"), "done");
    s.watch("task-grand", &["--session", "s-child"]);
    answers(&s, "s-child", reply);
    finishes(&s, "task-grand", "s-grand", "GRAND: 42");
    s
}

/// The next poll of `task` finds it finished, its answer `text` from chat `session`.
fn finishes(s: &Scene, task: &str, session: &str, text: &str) {
    s.poll_replies(
        task,
        vec![Reply::json(200, &bodies::finished_completed(session, text))],
    );
}

/// The agent of chat `session` answers a turn there with a tool call, then `text`.
fn answers(s: &Scene, session: &str, text: &str) {
    s.chats
        .reply(session, ParentReply::ToolThenFinal(text.to_owned()));
}

/// How many times ticks that said `said` gave up a follow-up of `task` as misrouted.
fn follow_ups_given_up(said: &str, task: &str) -> usize {
    said.matches(&format!(
        "atc: gave up on {task} (done, follow-up misrouted)"
    ))
    .count()
}

fn follow_ups(s: &Scene, session: &str) -> Vec<String> {
    s.delivered(session)
        .into_iter()
        .filter(|t| t.contains("[atc: follow-up"))
        .collect()
}

#[test]
fn a_grandchilds_result_goes_up_as_the_childs_follow_up_once() {
    let s = tree("CHILD: the grandchild says 42");
    s.tick(&[]);
    assert_eq!(s.delivered("s-child").len(), 1, "the grandchild's result");
    s.tick(&[]);
    s.tick(&[]);
    assert_eq!(
        follow_ups(&s, "s-77"),
        [format!(
            "{}\n\nCHILD: the grandchild says 42",
            head("task-child", "task-grand")
        )],
        "the child's woken reply, once, under the child's task"
    );
    for _ in 0..3 {
        s.tick(&[]);
    }
    assert_eq!(follow_ups(&s, "s-77").len(), 1, "never posted again");
    assert_eq!(
        s.delivered("s-77").len(),
        2,
        "the result, then the follow-up"
    );
    // The person at the console hears of the follow-up in P's chat, never of the
    // background session.
    let toasts: Vec<String> = s
        .chats
        .sends("console")
        .into_iter()
        .map(|(_, _, t)| t)
        .collect();
    assert!(
        toasts.iter().any(|t| t.starts_with("A follow-up for s-77")),
        "{toasts:?}"
    );
    assert!(!toasts.iter().any(|t| t.contains("s-child")), "{toasts:?}");
    let turn = s.turn("task-grand");
    assert_eq!(turn["up"]["task_id"], "task-child");
    assert_eq!(
        turn["up"]["turn"],
        "atc-".to_owned() + s.job("task-grand")["job_id"].as_str().unwrap() + "-up"
    );
    assert!(turn.get("forward").is_none(), "{turn}");
    s.atc(["status", "task-grand"])
        .stdout_contains(
            "chain           task-grand → task-child's chat → session s-77 (user default, channel console)",
        )
        .stdout_contains("went up         the reply it woke went up as a follow-up of task-child")
        .run();
    s.atc(["status", "task-child"])
        .stdout_contains("follow-ups      atc-")
        .stdout_contains("(delivered)")
        .run();
    let json = s
        .atc(["status", "task-grand", "--json"])
        .stdout_inspected()
        .run();
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["chain"], serde_json::json!(["task-child"]));
    // The list says each watch's chain too: the plugin lets the top parent's model watch
    // a task of its own tree in place.
    let all = s
        .atc(["status", "--all", "--json"])
        .stdout_inspected()
        .run();
    let all: serde_json::Value = serde_json::from_slice(&all.stdout).unwrap();
    assert_eq!(
        all["chains"],
        serde_json::json!({"task-grand": ["task-child"]})
    );
    let events = |task: &str| -> Vec<String> {
        s.env
            .logged(&[task])
            .iter()
            .filter_map(|e| e["event"].as_str().map(str::to_owned))
            .collect()
    };
    assert!(events("task-grand").contains(&"went_up".to_owned()));
    let child = events("task-child");
    assert!(child.contains(&"follow_up".to_owned()), "{child:?}");
    assert_eq!(
        child.iter().filter(|e| *e == "delivered").count(),
        2,
        "its result and its follow-up: {child:?}"
    );
}

/// A watch whose --session was its child's own (the `[SESSION: …]` line submit_to_agent
/// printed, taken for the asking chat's): the result goes into the child's chat, and the
/// reply it wakes there stays, said, where it went up into that same chat and woke the
/// child again, level after level, to the depth limit.
#[test]
fn a_watch_for_its_own_childs_chat_sends_nothing_up_and_says_why() {
    let s = Scene::new();
    s.watch("task-child", &["--session", "s-child"]);
    answers(&s, "s-child", "CHILD: thanks");
    finishes(&s, "task-child", "s-child", "CHILD: 42");
    for _ in 0..4 {
        s.tick(&[]);
    }
    assert_eq!(s.delivered("s-child").len(), 1, "its result only");
    assert!(follow_ups(&s, "s-child").is_empty());
    let up = &s.turn("task-child")["up"];
    assert_eq!(up["task_id"], "task-child");
    assert!(up.get("turn").is_none(), "{up}");
    s.atc(["status", "task-child"])
        .stdout_contains("the reply it woke stayed in this chat: the watch of task-child delivers into its own child's chat (its --session is the child's): its result and this reply went back to the child, not to the agent that asked; `atc wait task-child` prints the result")
        .stdout_contains("\nnote            delivered into its own child's chat (its --session is the child's session): the agent that asked never had it; `atc wait task-child` prints the result")
        .file_unchanged();
    s.atc(["status"])
        .stdout_contains(" ago into its own child's chat")
        .file_unchanged();
}

/// Where the watch knows the child's session (`--child-session`, or the `[SESSION: …]`
/// line under its `[TASK_ID: …]` in `--from`), that session as `--session` is refused
/// before anything is recorded: exit 1, what is wrong and what to pass instead.
#[test]
fn a_watch_naming_the_childs_own_session_as_its_chat_is_refused() {
    let s = Scene::new();
    s.chats.add("default", "s-child", "default", "console");
    let said = "atc: --session s-child is task-child's own child session (QwenPaw's [SESSION: …] line for it): its result would go back to the child, not to the chat that asked; pass the Session ID the asking agent's prompt shows\n";
    let from = s.env.path("submitted.txt");
    std::fs::write(
        &from,
        "[TASK_ID: task-child]\n[SESSION: s-child]\n[TIMEOUT: 600]\nTask submitted successfully",
    )
    .unwrap();
    let from = from.to_str().unwrap();
    let own = [
        "watch",
        "task-child",
        "--session",
        "s-child",
        "--child-session",
        "s-child",
    ];
    for args in [
        own.to_vec(),
        vec!["watch", "--from", from, "--session", "s-child"],
    ] {
        s.checked(&["task-child"], || {
            s.atc(args.clone()).status(1).stderr(said).no_file().run()
        });
    }
    // On another agent it is another chat: the child runs on QA, the chat is default's.
    s.checked(&["task-child"], || {
        s.atc([&own[..], &["--target-agent", "QA"]].concat())
            .stdout_contains("Watching task-child")
            .run()
    });
}

#[test]
fn past_the_depth_limit_the_reply_stays_and_says_why() {
    let s = tree("CHILD: the grandchild says 42");
    for _ in 0..4 {
        s.tick(&["--follow-up-depth", "0"]);
    }
    assert!(follow_ups(&s, "s-77").is_empty());
    assert_eq!(s.delivered("s-77").len(), 1, "the child's result only");
    let up = &s.turn("task-grand")["up"];
    assert_eq!(up["task_id"], "task-child");
    assert!(up.get("turn").is_none(), "{up}");
    assert!(
        up["not"].as_str().unwrap().contains("follow-up-depth"),
        "{up}"
    );
    let toasted: Vec<String> = s
        .chats
        .sends("console")
        .into_iter()
        .map(|(_, session, _)| session)
        .collect();
    assert!(
        !toasted.contains(&"s-child".to_owned()),
        "nobody reads a child's chat: {toasted:?}"
    );
    s.atc(["status", "task-grand"])
        .stdout_contains("the reply it woke stayed in this chat: the follow-up depth limit is reached (0 levels, follow-up-depth)")
        .run();
}

#[test]
fn a_child_still_running_gets_the_result_and_nothing_goes_up() {
    let s = Scene::new();
    s.watch("task-child", &["--child-session", "s-child"]);
    s.poll_replies("task-child", vec![Reply::json(200, bodies::RUNNING)]);
    s.watch("task-grand", &["--session", "s-child"]);
    answers(&s, "s-child", "CHILD: noted");
    finishes(&s, "task-grand", "s-grand", "GRAND: 42");
    for _ in 0..3 {
        s.tick(&[]);
    }
    assert_eq!(s.delivered("s-child").len(), 1);
    assert!(s.delivered("s-77").is_empty());
    assert!(s.turn("task-grand").get("up").is_none());
}

#[test]
fn three_levels_go_up_level_by_level() {
    let s = tree("CHILD: unused");
    // The grandchild delegated further too: its own result (the first tick) names
    // `s-grand` as its chat; the great-grandchild is watched for that chat.
    s.tick(&[]);
    s.watch("task-great", &["--session", "s-grand"]);
    answers(&s, "s-grand", "GRAND: the great one says 7");
    answers(&s, "s-child", "CHILD: all of it: 7");
    finishes(&s, "task-great", "s-great", "GREAT: 7");
    // Two levels up: the depth it needs, set by the flag (the default is 5).
    for _ in 0..8 {
        s.tick(&["--follow-up-depth", "2"]);
    }
    assert_eq!(
        follow_ups(&s, "s-child"),
        [format!(
            "{}\n\nGRAND: the great one says 7",
            head("task-grand", "task-great")
        )]
    );
    let top = follow_ups(&s, "s-77");
    assert_eq!(
        top.last().map(String::as_str),
        Some(
            format!(
                "{}\n\nCHILD: all of it: 7",
                head("task-child", "task-grand")
            )
            .as_str()
        ),
        "{top:?}"
    );
    // The first follow-up (the child's reply to the grandchild's result) and the second
    // (its reply to the grandchild's follow-up), each once.
    assert_eq!(top.len(), 2, "{top:?}");
    s.atc(["status", "task-great"])
        .stdout_contains("task-great → task-grand's chat → task-child's chat → session s-77")
        .run();
}

#[test]
fn a_follow_up_given_up_is_said_and_redelivered_alone() {
    let s = tree("CHILD: the grandchild says 42");
    s.tick(&[]);
    // P's chat is gone by the time the follow-up goes: misrouted, said, given up.
    s.chats.delete("s-77");
    let said = s.ticks_said(2);
    assert_eq!(follow_ups_given_up(&said, "task-child"), 1, "{said}");
    assert!(follow_ups(&s, "s-77").is_empty());
    // The give-up line is said once; `status` and `doctor` still show what waits for a
    // person: the task's own result landed, its follow-up did not.
    let stuck = "✗ deliveries: results that need a person: 1 follow-up misrouted";
    s.healthy();
    let listed = s.atc(["status"]).stdout_inspected().run();
    let row = stdout(&listed)
        .lines()
        .find(|l| l.starts_with("task-child "))
        .map(str::to_owned);
    assert!(
        row.as_deref()
            .is_some_and(|r| r.contains(" done ") && r.contains("follow-up misrouted; delivered")),
        "{row:?}"
    );
    let said = s.atc(["doctor"]).doctor_said(1);
    assert!(said.lines().any(|l| l == stuck), "{said}");
    // `--json` carries it, as the plugin's `callback_task_status` reads it: of the list
    // and of the task, and nothing for a task with nothing stuck.
    let turn = s
        .env
        .turns()
        .into_iter()
        .find(|t| t["carries"][0]["block"] == "follow_up");
    let turn_id = turn.expect("a follow-up turn")["turn_id"].clone();
    let want = serde_json::json!([{"task_id": "task-child", "turn_id": turn_id, "what": "misrouted",
        "follow_up": true}]);
    for args in [
        vec!["--json", "status", "--all"],
        vec!["--json", "status", "task-child"],
    ] {
        let json = s.atc(args).stdout_inspected().file_unchanged().json();
        assert_eq!(json["stuck"], want, "{json}");
    }
    let json = s
        .atc(["--json", "status", "task-grand"])
        .stdout_inspected()
        .json();
    assert_eq!(json["stuck"], serde_json::json!([]), "{json}");
    // The task in full says it too, and what to do.
    let full = s.atc(["status", "task-child"]).stdout_inspected().run();
    let full = stdout(&full);
    let line = full.lines().find(|l| l.starts_with("follow-ups")).unwrap();
    assert!(
        line.ends_with(
            " (misrouted); 1 waits for a person: `atc redeliver task-child` sends it again"
        ),
        "{full}"
    );
    s.add_chat("s-77", "default", "console");
    // That follow-up is task-child's: another task's redeliver leaves it alone.
    s.atc(["redeliver", "task-grand"])
        .status(1)
        .stderr("atc: task-grand was already delivered; only an undelivered, unconfirmed, misrouted or refused (error) delivery, or a result the parent read itself, can be tried again\n")
        .file_unchanged()
        .run();
    s.atc(["redeliver", "task-child"])
        .stdout_contains("task-child's follow-up (turn atc-")
        .stdout_contains("goes to session s-77 (user default, channel console) again")
        .run();
    s.tick(&[]);
    s.tick(&[]);
    assert_eq!(follow_ups(&s, "s-77").len(), 1, "the follow-up, once");
    assert!(
        !s.delivered("s-77")
            .iter()
            .any(|t| t == "CHILD: delegated to task-grand"),
        "the result it already delivered is not posted again"
    );
    let said = s.atc(["doctor"]).doctor_said(0);
    assert!(
        said.lines().any(|l| l == "✓ deliveries: none stuck"),
        "{said}"
    );
    let listed = s.atc(["status"]).stdout_inspected().run();
    assert!(
        !stdout(&listed).contains("follow-up"),
        "{}",
        stdout(&listed)
    );
}

/// Two children whose results went up in one turn each delegated, and each follow-up was
/// given up: `atc redeliver` of both sends each follow-up again. Their shared result turn
/// was delivered and stays so; neither task goes "with" the other through it.
#[test]
fn a_redeliver_of_two_follow_ups_whose_results_shared_a_turn_sends_both() {
    let s = Scene::new();
    for (task, child) in [("task-a", "s-a"), ("task-b", "s-b")] {
        s.watch(task, &[]);
        finishes(&s, task, child, &format!("{child}: delegated"));
    }
    s.tick(&[]);
    assert_eq!(s.delivered("s-77").len(), 1, "both results in one turn");
    assert_eq!(s.turn("task-a")["turn_id"], s.turn("task-b")["turn_id"]);
    for (task, child) in [("task-ga", "s-a"), ("task-gb", "s-b")] {
        s.watch(task, &["--session", child]);
        answers(&s, child, &format!("{child}: the grandchild says 42"));
        finishes(&s, task, &format!("{child}-grand"), "GRAND: 42");
    }
    s.tick(&[]);
    // P's chat is gone by the time the follow-ups go: both given up.
    s.chats.delete("s-77");
    let said = s.ticks_said(3);
    for task in ["task-a", "task-b"] {
        assert_eq!(follow_ups_given_up(&said, task), 1, "{said}");
    }
    assert!(follow_ups(&s, "s-77").is_empty());
    s.add_chat("s-77", "default", "console");
    s.atc(["redeliver", "task-a", "task-b"])
        .stdout_contains("task-a's follow-up (turn atc-")
        .stdout_contains("task-b's follow-up (turn atc-")
        .run();
    for _ in 0..3 {
        s.tick(&[]);
    }
    let mut ups = follow_ups(&s, "s-77");
    ups.sort();
    assert_eq!(
        ups,
        [
            format!(
                "{}\n\ns-a: the grandchild says 42",
                head("task-a", "task-ga")
            ),
            format!(
                "{}\n\ns-b: the grandchild says 42",
                head("task-b", "task-gb")
            ),
        ],
        "each follow-up once"
    );
    assert_eq!(
        s.delivered("s-77").len(),
        2,
        "in the chat started anew, the two follow-ups: their results' turn is not posted again"
    );
}

/// Two grandchildren each woke the child, and both follow-ups were given up: one
/// `atc redeliver` of the child's task sends both again, the older first, each once.
#[test]
fn a_redeliver_sends_every_given_up_follow_up_of_the_task_oldest_first() {
    let s = tree("CHILD: first reply");
    s.tick(&[]);
    s.watch("task-grand2", &["--session", "s-child"]);
    answers(&s, "s-child", "CHILD: second reply");
    finishes(&s, "task-grand2", "s-grand2", "GRAND2: 43");
    s.chats.delete("s-77");
    let said = s.ticks_said(4);
    assert_eq!(follow_ups_given_up(&said, "task-child"), 2, "{said}");
    s.atc(["status", "task-child"])
        .stdout_contains(
            " (misrouted); 2 wait for a person: `atc redeliver task-child` sends them again\n",
        )
        .run();
    s.add_chat("s-77", "default", "console");
    s.atc(["redeliver", "task-child"])
        .stdout_contains("task-child's 2 follow-ups (turns atc-")
        .stdout_contains(") go to session s-77 (user default, channel console) again")
        .run();
    for _ in 0..3 {
        s.tick(&[]);
    }
    assert_eq!(
        follow_ups(&s, "s-77"),
        [
            format!("{}\n\nCHILD: first reply", head("task-child", "task-grand")),
            format!(
                "{}\n\nCHILD: second reply",
                head("task-child", "task-grand2")
            ),
        ],
        "both, the older first, each once"
    );
    let status = s.atc(["status", "task-child"]).stdout_inspected().run();
    let status = support::atc::stdout(&status);
    let line = status
        .lines()
        .find(|l| l.starts_with("follow-ups"))
        .unwrap();
    assert_eq!(line.matches("(delivered)").count(), 2, "{status}");
    assert!(!line.contains("waits for a person"), "{status}");
}
