//! Attacks: hostile task ids and URLs refused before any I/O, tokens that never leak and
//! never travel over plain http to another machine, and text from the server that the
//! user's terminal never obeys.

use crate::support;

use std::process::Command;

use support::atc::{TestEnv, stdout};
use support::bodies;
use support::fake::{FakeQwenPaw, Reply};
use support::scene::Scene;

const TASK: &str = "task-3f9a0c1b2d4e";

// ---------------------------------------------------------------------------------------
// Hostile task ids and URLs

#[test]
fn hostile_task_ids_are_refused_before_any_io() {
    // A strict fake: any request at all fails the test when it is dropped.
    let server = FakeQwenPaw::start();
    let env = TestEnv::new();
    let huge = "a".repeat(10 * 1024);
    for bad in [
        "task/x",
        "..",
        "../../api/version",
        "task%2Fx",
        "task 1",
        "task-1\nX-Evil: 1",
        "task\r-1",
        "task\u{2010}3f9a0c1b2d4e", // a Unicode hyphen that looks like '-'
        "tаsk-3f9a0c1b2d4e",        // a Cyrillic 'а'
        "task-\u{202e}1",           // a bidi override
        huge.as_str(),
    ] {
        for args in [
            vec!["watch", bad, "--session", "s"],
            vec!["wait", bad],
            vec!["status", bad],
            vec!["cancel", bad],
            vec!["redeliver", bad],
            vec!["log", bad],
        ] {
            env.atc(&args)
                .env("ATC_BASE_URL", server.url())
                .status(2)
                .stderr_contains("atc: task id")
                .no_file();
        }
    }
    // A NUL cannot be an argument; it can arrive through --from.
    env.atc(["watch", "--from", "-", "--session", "s"])
        .env("ATC_BASE_URL", server.url())
        .stdin("[TASK_ID: task-1\0x]\n")
        .status(2)
        .stderr_contains("contains '\\0'")
        .no_file();
    assert!(server.requests().is_empty());
    assert!(
        !env.state.parent().unwrap().exists(),
        "nothing may be created"
    );
}

#[test]
fn hostile_urls_in_the_environment_are_refused() {
    let env = TestEnv::new();
    for (var, url, says) in [
        (
            "ATC_BASE_URL",
            "http://127.0.0.1:8088\nHost: evil",
            "whitespace",
        ),
        (
            "ATC_BASE_URL",
            "file:///etc/passwd",
            "only http:// and https://",
        ),
        ("ATC_BASE_URL", "javascript:alert(1)", "no scheme"),
        (
            "ATC_BASE_URL",
            "http://u:hunter2@127.0.0.1:8088",
            "user name or password",
        ),
        (
            "QWENPAW_RUNTIME_API_URL",
            "http://u:hunter2@127.0.0.1:7000",
            "user name or password",
        ),
        (
            "QWENPAW_RUNTIME_API_URL",
            "gopher://127.0.0.1:70",
            "only http:// and https://",
        ),
    ] {
        env.atc(["watch", TASK, "--session", "s"])
            .env_remove("ATC_BASE_URL")
            .env(var, url)
            .env("QWENPAW_RUNTIME_ID", "r1")
            .env("QWENPAW_RUNTIME_INTERNAL_TOKEN", "tok-planted-url")
            .status(2)
            .stderr_contains(says)
            .never_shows("hunter2")
            .never_shows("tok-planted-url")
            .no_file();
    }
}

// ---------------------------------------------------------------------------------------
// Tokens

const RUNTIME_TOKEN: &str = "PLANTED-RUNTIME-TOKEN-61c0";
const BEARER_TOKEN: &str = "PLANTED-BEARER-TOKEN-9b2e";

#[test]
fn tokens_never_appear_in_output_json_the_job_file_or_the_log() {
    let s = Scene::new();
    fn tokens(run: support::atc::Run<'_>) -> support::atc::Run<'_> {
        run.env("QWENPAW_RUNTIME_INTERNAL_TOKEN", RUNTIME_TOKEN)
            .env("ATC_BEARER_TOKEN", BEARER_TOKEN)
            .never_shows(RUNTIME_TOKEN)
            .never_shows(BEARER_TOKEN)
    }
    s.chats.add("default", "s-77", "default", "console");
    s.checked(&[TASK], || {
        tokens(s.atc(["watch", TASK, "--session", "s-77", "-v"]))
            .stdout_inspected()
            .stderr_inspected()
            .run()
    });
    // A refused token, then a good answer: errors and -v lines carry no token.
    s.poll_replies(
        TASK,
        vec![
            Reply::json(401, bodies::AUTH_401_RUNTIME),
            Reply::json(200, bodies::FINISHED_COMPLETED),
        ],
    );
    // … and the refusal's hint knows the tokens were set: check them, not set them.
    tokens(s.tick(&["-vv"]))
        .stderr_contains("HTTP 401 Invalid runtime boundary token: check QWENPAW_RUNTIME_INTERNAL_TOKEN / ATC_BEARER_TOKEN in atc tick's environment")
        .run();
    tokens(s.tick(&["-vv", "--json"]))
        .stdout_inspected()
        .stderr_inspected()
        .run();
    assert_eq!(s.status(TASK), "done");
    for args in [
        vec!["status"],
        vec!["status", TASK],
        vec!["--json", "status"],
        vec!["log", "--all"],
        vec!["--json", "log", "--all"],
        vec!["-v", "wait", TASK],
        vec!["--json", "wait", TASK],
    ] {
        tokens(s.atc(&args))
            .stdout_inspected()
            .stderr_inspected()
            .run();
    }
    s.server.on(
        "GET",
        "/api/version",
        vec![Reply::json(401, bodies::AUTH_401_RUNTIME)],
    );
    tokens(s.atc(["doctor", "--json"]))
        .status(1)
        .stdout_inspected()
        .stderr_inspected()
        .run();
    let log = std::fs::read_to_string(s.env.state.with_file_name("jobs.json.log")).unwrap();
    assert!(log.contains("delivered"), "{log}");
    assert!(
        !log.contains(RUNTIME_TOKEN) && !log.contains(BEARER_TOKEN),
        "{log}"
    );
    // Every request carried them (so the test would see a leak) …
    let requests = s.server.requests();
    assert!(
        requests
            .iter()
            .all(|r| r.header("x-qwenpaw-runtime-token") == Some(RUNTIME_TOKEN)),
        "a request went without the runtime token"
    );
}

#[test]
fn tokens_never_go_over_plain_http_to_another_machine() {
    let env = TestEnv::new();
    // Refused before any I/O (no name is looked up: `.invalid` would not resolve anyway).
    for args in [vec!["watch", TASK, "--session", "s"], vec!["wait", TASK]] {
        env.atc(&args)
            .env("ATC_BASE_URL", "http://qwenpaw.invalid:8088")
            .env("QWENPAW_RUNTIME_INTERNAL_TOKEN", RUNTIME_TOKEN)
            .status(2)
            .stderr(
                "atc: ATC_BASE_URL http://qwenpaw.invalid:8088/api: refusing to send the token (QWENPAW_RUNTIME_INTERNAL_TOKEN / ATC_BEARER_TOKEN) over plain http:// to qwenpaw.invalid, which is not this machine: use https://, or pass --allow-insecure-remote on a network you trust\n",
            )
            .never_shows(RUNTIME_TOKEN)
            .no_file();
    }
    // A job watched elsewhere (no allowance recorded): the tick refuses to poll it with
    // the token; a strike that says why.
    env.write_file(&serde_json::json!({
        "version": 2,
        "jobs": [support::atc::job(TASK, "pending", "http://qwenpaw.invalid:8088/api")]
    }));
    env.atc(["tick"])
        .env("ATC_BEARER_TOKEN", BEARER_TOKEN)
        .never_shows(BEARER_TOKEN)
        .run();
    let job = env.job(TASK);
    assert_eq!(job["strikes"], 1, "{job}");
    assert!(
        job["last_error"]
            .as_str()
            .unwrap()
            .contains("refusing to send the token (QWENPAW_RUNTIME_INTERNAL_TOKEN / ATC_BEARER_TOKEN) over plain http:// to qwenpaw.invalid"),
        "{job}"
    );
    // Loopback and https are fine; so is plain http without a token.
    for url in ["http://127.0.0.1:9", "http://localhost:9", "http://[::1]:9"] {
        env.atc(["wait", TASK, "--interval", "100ms"])
            .env("ATC_BASE_URL", url)
            .env("QWENPAW_RUNTIME_INTERNAL_TOKEN", RUNTIME_TOKEN)
            .status(5)
            .stderr_contains("polls in a row failed")
            .never_shows(RUNTIME_TOKEN)
            .file_unchanged();
    }
    // The allowance is for a remote host: on loopback there is nothing to allow, and the
    // watch records none.
    let local = "task-100000000001";
    env.atc([
        "--allow-insecure-remote",
        "watch",
        local,
        "--session",
        "s-77",
        "--no-task-check",
    ])
    .env("ATC_BASE_URL", "http://127.0.0.1:9")
    .env("QWENPAW_RUNTIME_INTERNAL_TOKEN", RUNTIME_TOKEN)
    .stdout_contains(local)
    .stderr_contains("could not check that the parent chat exists")
    .never_shows(RUNTIME_TOKEN)
    .run();
    let job = env.job(local);
    assert_eq!(job["base_url"], "http://127.0.0.1:9/api", "{job}");
    assert!(job.get("allow_insecure_remote").is_none(), "{job}");
}

/// A shell command run inside a private network namespace where 10.123.0.1 is an address
/// of this machine's loopback interface but not a loopback address: a "remote" host no
/// real network can reach. `None` when namespaces are not available here.
fn in_private_network(script: &str) -> Option<std::process::Output> {
    let probe = Command::new("unshare")
        .args([
            "-rn",
            "sh",
            "-c",
            "ip link set lo up && ip addr add 10.123.0.1/32 dev lo",
        ])
        .output()
        .ok()?;
    if !probe.status.success() {
        return None;
    }
    let full = format!("ip link set lo up && ip addr add 10.123.0.1/32 dev lo && {script}");
    Command::new("unshare")
        .args(["-rn", "sh", "-c", &full])
        .output()
        .ok()
}

#[test]
fn allow_insecure_remote_sends_the_token_to_a_private_network_host_and_only_then() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("seen.txt");
    // A tiny server on 10.123.0.1 that records each request's token header and answers
    // QwenPaw's 404 for an unknown task.
    let server = format!(
        r#"python3 -c '
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        open(sys.argv[1], "a").write("GET " + self.path + " token=" + str(self.headers.get("X-QwenPaw-Runtime-Token")) + "\n")
        body = b"{{\"detail\":\"Task not found: {TASK}\"}}"
        self.send_response(404); self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
s = http.server.HTTPServer(("10.123.0.1", 18080), H)
open(sys.argv[1] + ".up", "w").close()
s.serve_forever()' {seen} </dev/null >/dev/null 2>&1 &
server=$!
for i in $(seq 100); do [ -e {seen}.up ] && break; sleep 0.05; done"#,
        seen = seen.display()
    );
    let atc = assert_cmd::cargo::cargo_bin("atc");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let atc = format!(
        "env -i PATH=/usr/bin:/bin HOME={home} XDG_STATE_HOME={home}/state QWENPAW_RUNTIME_INTERNAL_TOKEN={RUNTIME_TOKEN} {atc}",
        home = home.display(),
        atc = atc.display(),
    );
    let run = |extra: &str| {
        format!(
            "{atc} {extra} wait {TASK} --base-url http://10.123.0.1:18080 >{out}.out 2>{out}.err; echo $? >{out}.code",
            out = dir
                .path()
                .join(if extra.is_empty() {
                    "refused"
                } else {
                    "allowed"
                })
                .display(),
        )
    };
    // A watch made with the flag keeps it: the tick that polls it sends the token there.
    let watched = format!(
        "{atc} --allow-insecure-remote watch {TASK} --session s-77 --base-url http://10.123.0.1:18080 >{out}.watch 2>&1; {atc} tick >{out}.out 2>{out}.err; echo $? >{out}.code",
        out = dir.path().join("tick").display(),
    );
    let Some(output) = in_private_network(&format!(
        "{server}\n{}\n{}\ncp {seen} {seen}.waits\n{watched}\nkill $server",
        run(""),
        run("--allow-insecure-remote"),
        seen = seen.display(),
    )) else {
        // Without a namespace only the refusal can be checked (it comes before any I/O);
        // the live half (the token reaching the allowed host) is skipped.
        eprintln!("no private network namespace here (unshare -rn): the live check is skipped");
        let env = TestEnv::new();
        env.atc(["wait", TASK, "--base-url", "http://10.123.0.1:18080"])
            .env("QWENPAW_RUNTIME_INTERNAL_TOKEN", RUNTIME_TOKEN)
            .status(2)
            .stderr_contains("over plain http:// to 10.123.0.1, which is not this machine")
            .never_shows(RUNTIME_TOKEN)
            .no_file();
        return;
    };
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap_or_default();
    assert_eq!(read("refused.code").trim(), "2", "{}", read("refused.err"));
    assert!(
        read("refused.err").contains("over plain http:// to 10.123.0.1, which is not this machine"),
        "{}",
        read("refused.err")
    );
    assert_eq!(read("allowed.code").trim(), "6", "{}", read("allowed.err"));
    let seen = read("seen.txt.waits");
    assert_eq!(
        seen,
        format!("GET /api/console/chat/task/{TASK} token={RUNTIME_TOKEN}\n"),
        "exactly one request, the allowed one, carried the token"
    );
    let polled = read("seen.txt");
    let task_get = format!("GET /api/console/chat/task/{TASK} token={RUNTIME_TOKEN}");
    assert_eq!(
        polled.lines().filter(|line| *line == task_get).count(),
        2,
        "the tick polled the watch with its token: {polled}\n{}\n{}",
        read("tick.watch"),
        read("tick.err")
    );
    assert_eq!(read("tick.code").trim(), "0", "{}", read("tick.err"));
    for name in [
        "refused.out",
        "refused.err",
        "allowed.out",
        "allowed.err",
        "tick.watch",
        "tick.out",
        "tick.err",
    ] {
        assert!(
            !read(name).contains(RUNTIME_TOKEN),
            "{name} shows the token"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Text from the server on the user's terminal

const HOSTILE: &str = "ECHO: \u{1b}]0;pwned\u{7}\u{1b}[31mred\u{1b}[0m \u{202e}evil";

/// What `atc ARGS` shows on a wide terminal, its lines joined; `None` without `script`.
fn on_a_terminal(env: &TestEnv, base: &str, args: &str) -> Option<String> {
    env.on_a_terminal(200, Some("200"), &[("ATC_BASE_URL", base)], args)
        .map(|lines| lines.join("\n"))
}

/// What a tick says on stderr too: the server's words in a failure, exact when piped and
/// escaped on a terminal, where the give-up is said (a terminal is somebody reading).
#[test]
fn a_ticks_stderr_is_escaped_on_a_terminal_and_exact_when_piped() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    let refusal = serde_json::json!({ "detail": HOSTILE }).to_string();
    s.poll_replies(
        TASK,
        vec![Reply::json(500, &refusal), Reply::json(500, &refusal)],
    );
    // The record keeps no control character (each is a space); the bidi override is
    // text, kept as it is.
    s.tick(&["-v", "--max-strikes", "2"])
        .stderr_contains(format!(
            "tick: {TASK}: failed check: HTTP 500: ECHO:  ]0;pwned  [31mred [0m \u{202e}evil\n"
        ))
        .run();
    let Some(shown) = on_a_terminal(&s.env, &s.server.url(), "tick -v --max-strikes 2") else {
        eprintln!("no `script` here: the terminal check is skipped");
        s.tick(&["--max-strikes", "2"])
            .stderr_contains(format!("atc: gave up on {TASK}"))
            .run();
        return;
    };
    assert!(!shown.contains('\u{202e}'), "{shown:?}");
    assert!(shown.contains("[0m \\u{202e}evil"), "{shown:?}");
    assert!(
        shown.contains(&format!("atc: gave up on {TASK}")),
        "{shown:?}"
    );
    assert_eq!(s.status(TASK), "abandoned");
}

#[test]
fn text_from_the_server_is_shown_escaped_on_a_terminal_and_exact_when_piped() {
    let s = Scene::new();
    s.watch(TASK, &[]);
    let body = bodies::FINISHED_COMPLETED.replace(
        "ECHO: hello",
        serde_json::to_string(HOSTILE).unwrap().trim_matches('"'),
    );
    s.poll_replies(TASK, vec![Reply::json(200, &body)]);
    s.tick(&[]).run();
    assert_eq!(s.status(TASK), "done");

    // Piped and --json: the exact text.
    let piped = s.atc(["status", TASK]).stdout_inspected().run();
    assert!(
        stdout(&piped).contains(HOSTILE),
        "piped output keeps the text"
    );
    let json = s.atc(["--json", "status", TASK]).json();
    assert!(
        json["jobs"][0]["final"]
            .as_str()
            .unwrap()
            .ends_with(HOSTILE)
    );
    let waited = s.atc(["wait", TASK]).stdout_inspected().run();
    assert!(stdout(&waited).contains(HOSTILE));

    // On a terminal: escaped, never obeyed.
    let Some(shown) = on_a_terminal(&s.env, &s.server.url(), &format!("status {TASK}")) else {
        eprintln!("no `script` here: the terminal check is skipped");
        return;
    };
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\u{7}') && !shown.contains('\u{202e}'),
        "{shown:?}"
    );
    assert!(
        shown.contains("ECHO: \\x1b]0;pwned\\x07\\x1b[31mred\\x1b[0m \\u{202e}evil"),
        "{shown:?}"
    );
    let shown = on_a_terminal(&s.env, &s.server.url(), &format!("wait {TASK}")).unwrap();
    assert!(
        !shown.contains('\u{1b}') && shown.contains("\\x1b]0;pwned"),
        "{shown:?}"
    );
}
