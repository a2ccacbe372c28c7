//! Properties of the validators (`src/validate.rs`, `ids::parse_task_id` and
//! `ids::stored_task_id`) and of every
//! door they guard: no input (any bytes, any length) panics, and none gets past a
//! validator into the job file, the network (a URL, a header) or the terminal (an error
//! message: short, and free of control characters).

use std::path::PathBuf;
use std::time::Duration;

use atc::settings::{Action, Environment, resolve};
use atc::validate::{self, MAX_DURATION, MAX_LABEL};
use proptest::prelude::*;

/// Text of any kind: arbitrary bytes read as UTF-8 (lossily), arbitrary chars, control
/// characters and escapes, and now and then something very long.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::collection::vec(any::<u8>(), 0..64)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        4 => any::<String>(),
        2 => "[ -~\t\r\n\u{1b}\u{7f}\u{85}\u{2028}@:/\\[\\]%?#.]{0,80}",
        1 => (any::<char>(), 200usize..120_000).prop_map(|(c, n)| c.to_string().repeat(n)),
    ]
}

/// A URL-shaped string: scheme, credentials, host, port and path drawn apart.
fn url() -> impl Strategy<Value = String> {
    let one_of =
        |items: &'static [&'static str]| proptest::sample::select(items).prop_map(str::to_owned);
    (
        one_of(&["http", "https", "HTTP", "ftp", "", "http:"]),
        one_of(&["", "user:pw@", "tok@", "@"]),
        prop_oneof![
            one_of(&["127.0.0.1", "localhost", "[::1]", "[::1", "", "h"]),
            "[a-z0-9.\\-]{0,20}",
        ],
        prop_oneof![
            Just(String::new()),
            any::<u32>().prop_map(|p| format!(":{p}")),
            ":[0-9+\\-]{0,7}",
        ],
        prop_oneof![
            one_of(&["", "/", "/api", "/api/", "/api/api", "/prefix"]),
            "[ -~]{0,12}",
        ],
    )
        .prop_map(|(s, c, h, p, path)| format!("{s}://{c}{h}{p}{path}"))
}

/// What may reach a terminal: one short line of printable text.
fn fit_for_a_terminal(message: &str) {
    // Long enough for a message and its advice, far too short for an echoed input.
    assert!(message.chars().count() < 1000, "{message}");
    assert!(!message.chars().any(char::is_control), "{message:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn labels_that_pass_are_short_and_printable(value in text()) {
        match validate::label(&value) {
            Ok(()) => {
                prop_assert!(value.chars().count() <= MAX_LABEL);
                prop_assert!(!value.trim().is_empty());
                prop_assert!(!value.chars().any(char::is_control));
            }
            Err(why) => fit_for_a_terminal(&why),
        }
    }

    #[test]
    fn task_ids_that_pass_are_safe_in_a_route(value in text()) {
        match atc::ids::parse_task_id(&value) {
            Ok(id) => {
                prop_assert!((1..=128).contains(&id.len()));
                prop_assert!(id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
                prop_assert!(atc::ids::stored_task_id(&id).is_ok(), "a parsed id is a stored id");
            }
            Err(err) => fit_for_a_terminal(&err.message),
        }
        if let Err(why) = validate::job_id(&value) {
            fit_for_a_terminal(&why);
        }
    }

    #[test]
    fn base_urls_that_pass_are_plain_and_stable(raw in prop_oneof![url(), text()]) {
        match validate::base_url(&raw) {
            Ok(url) => {
                prop_assert!(url.starts_with("http://") || url.starts_with("https://"), "{url}");
                prop_assert!(url.ends_with("/api"), "{url}");
                prop_assert!(!url.contains('@'));
                prop_assert!(!url.contains(['?', '#']));
                prop_assert!(!url.chars().any(|c| c.is_whitespace() || c.is_control()));
                prop_assert_eq!(validate::base_url(&url), Ok(url.clone()), "normal form");
                // What the client will connect to parses, with a real port.
                let uri: ureq::http::Uri = url.parse().map_err(|e| TestCaseError::fail(format!("{url}: {e}")))?;
                prop_assert!(uri.port_u16().is_none_or(|p| p >= 1));
                prop_assert!(uri.host().is_some_and(|h| !h.is_empty()));
            }
            Err(why) => {
                fit_for_a_terminal(&why);
                if raw.contains('@') {
                    // Credentials are never echoed.
                    for secret in ["user:pw", "tok@", "pw@"] {
                        prop_assert!(!why.contains(secret) || !raw.contains(secret), "{why}");
                    }
                }
            }
        }
    }

    #[test]
    fn tokens_that_pass_are_header_safe_and_a_refused_one_is_never_shown(
        value in prop_oneof![text(), "[!-~]{8,40}[\r\n \u{0}\u{e9}]?"]
    ) {
        match validate::token(&value) {
            Ok(()) => {
                prop_assert!(value.chars().all(|c| c.is_ascii_graphic()));
                prop_assert!(ureq::http::HeaderValue::from_str(&value).is_ok());
            }
            Err(why) => {
                fit_for_a_terminal(&why);
                let secret: String = value.chars().filter(char::is_ascii_alphanumeric).collect();
                if secret.len() >= 12 {
                    prop_assert!(!why.contains(&secret), "{why}");
                }
            }
        }
    }

    #[test]
    fn durations_are_bounded_wherever_a_flag_takes_one(
        text in prop_oneof![
            "[0-9]{1,25}(ns|us|ms|s|m|h|d|w|y|years|)",
            "[0-9 a-z]{0,30}",
            any::<String>(),
        ],
        flag in prop_oneof![
            Just(vec!["tick", "--http-timeout"]),
            Just(vec!["tick", "--max-age"]),
            Just(vec!["tick", "--busy-retry"]),
            Just(vec!["tick", "--busy-deadline"]),
            Just(vec!["tick", "--keep"]),
            Just(vec!["tick", "--turn-timeout"]),
            Just(vec!["wait", "task-1", "--timeout"]),
            Just(vec!["wait", "task-1", "--interval"]),
        ],
    ) {
        let mut args = flag.clone();
        args.push(&text);
        if let Ok(cli) = atc::cli::parse_from(args.iter().copied()) {
            let env = Env::default();
            if let Ok(settings) = resolve(cli, &env) {
                let durations: Vec<Duration> = match settings.action {
                    Action::Tick(t) => vec![
                        t.http_timeout, t.limits.max_age, t.limits.busy_retry,
                        t.limits.busy_deadline, t.limits.keep,
                        t.turn_timeout.unwrap_or_default(),
                    ],
                    Action::Wait(w) => vec![w.timeout.unwrap_or_default(), w.interval],
                    _ => unreachable!(),
                };
                for d in durations {
                    prop_assert!(d <= MAX_DURATION);
                    // Every deadline atc computes from it stays representable.
                    let now = atc::time::Timestamp::now();
                    prop_assert!(now.saturating_add(d).elapsed_at(now) == Duration::ZERO);
                    prop_assert!(std::time::Instant::now().checked_add(d * 2).is_some());
                }
            }
        }
    }

    #[test]
    fn timestamps_are_in_range_or_refused(secs in any::<u64>(), text in any::<String>()) {
        let secs = secs % (MAX_DURATION.as_secs() * 100);
        let t = atc::time::Timestamp::from_unix(secs);
        prop_assert_eq!(validate::timestamp(t).is_ok(), secs < validate::MAX_TIMESTAMP_SECS);
        let _ = atc::time::Timestamp::parse(&text);
    }

    /// The settings a watch records pass every validator, whatever the command line and
    /// the environment held: nothing else reaches the job file or the URL.
    #[test]
    fn what_watch_records_has_passed_the_validators(
        session in text(),
        user in text(),
        agent in text(),
        url in prop_oneof![url(), text()],
        env_user in proptest::option::of(text()),
    ) {
        let mut args = vec!["watch", "task-1", "--session", &session, "--user", &user];
        args.extend(["--target-agent", &agent, "--base-url", &url]);
        let Ok(cli) = atc::cli::parse_from(args.iter().copied()) else {
            return Ok(());
        };
        let mut env = Env::default();
        if let Some(u) = env_user {
            env.vars.push(("ATC_USER_ID", u));
        }
        match resolve(cli, &env) {
            Ok(settings) => {
                let Action::Watch(watch) = settings.action else { unreachable!() };
                let t = watch.target();
                for label in [&t.session_id, &t.user_id, &t.agent_id, &t.channel] {
                    prop_assert!(validate::label(label).is_ok(), "{label:?}");
                }
                if let Some(on) = &t.target_agent {
                    prop_assert!(validate::label(on).is_ok());
                }
                prop_assert_eq!(validate::base_url(&watch.base_url.value), Ok(watch.base_url.value.clone()));
            }
            Err(failure) => fit_for_a_terminal(&failure.message),
        }
    }

    /// A job file whose fields hold anything: it loads only when every field passes, and
    /// a refusal is one short line.
    #[test]
    fn the_loader_lets_no_bad_field_in(
        task in text(), job_id in text(), session in text(), url in prop_oneof![url(), text()],
        registered in prop_oneof![Just("2026-11-30T20:14:03Z".to_owned()), "[0-9]{4}-0[1-9]-1[0-9]T00:00:00Z", text()],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.json");
        let file = serde_json::json!({"version": 2, "jobs": [{
            "job_id": job_id, "task_id": task, "base_url": url, "agent_id": "default",
            "session_id": session, "user_id": "default", "channel": "console",
            "registered_at": registered, "updated_at": "2026-11-30T20:14:03Z", "status": "pending",
        }]});
        write_private(&path, &serde_json::to_vec(&file).unwrap());
        match atc::state::Store::new(path).load() {
            Ok(loaded) => {
                let job = &loaded.jobs[0];
                prop_assert!(atc::ids::stored_task_id(&job.task_id).is_ok());
                prop_assert!(validate::job_id(&job.job_id).is_ok());
                prop_assert!(validate::base_url(&job.base_url).is_ok());
                prop_assert!(validate::label(&job.target.session_id).is_ok());
                prop_assert!(validate::timestamp(job.registered_at).is_ok());
            }
            Err(err) => {
                prop_assert_eq!(atc::exit::exit_for(&err), atc::exit::Exit::StateUnreadable);
                let message = format!("{err:#}");
                // The path is the test's own; the rest must fit a terminal.
                fit_for_a_terminal(&message.replace(&dir.path().display().to_string(), "D"));
            }
        }
    }
}

#[derive(Default)]
struct Env {
    vars: Vec<(&'static str, String)>,
}

impl Environment for Env {
    fn var(&self, name: &str) -> Option<String> {
        self.vars
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
            .filter(|v| !v.trim().is_empty())
    }
    fn home(&self) -> Option<PathBuf> {
        None
    }
}

fn write_private(path: &std::path::Path, bytes: &[u8]) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .unwrap();
    file.write_all(bytes).unwrap();
}
