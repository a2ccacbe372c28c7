//! Property tests in the manner of a fuzzer, over the pure readers of untrusted bytes: the
//! job-file loader, the task-poll classifier with the renderer behind it, and the chat
//! answer parsers. Inputs come from a seeded xorshift generator, so every run is the same
//! run and a failure names the iteration that found it.
//!
//! `ATC_FUZZ_ITERS` sets the iterations of each property (default 300, a couple of
//! seconds); a long run is `ATC_FUZZ_ITERS=200000 cargo test --release --test it fuzz`.
//! `ATC_FUZZ_SEED` picks another sequence of inputs.

use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::Duration;

use atc::exit::exit_for;
use atc::lifecycle::Limits;
use atc::qwenpaw::chat::{self, ReadBack, Unusable};
use atc::qwenpaw::render::{self, MAX_CHARS};
use atc::qwenpaw::task::{self, Poll};
use atc::qwenpaw::{Answer, Transport};
use atc::settings::Auth;
use atc::state::Store;
use atc::time::Timestamp;
use atc::turn::{Posted, Sent};
use serde_json::{Map, Value, json};

// ---------------------------------------------------------------------------------------
// The generator

use crate::support::rng;

use rng::Rng;

/// What the fuzz tests draw beyond numbers: characters, strings, JSON.
trait Draw {
    fn char(&mut self) -> char;
    fn string(&mut self, max: usize) -> String;
    fn text(&mut self) -> String;
    fn number(&mut self) -> Value;
    fn value(&mut self, depth: usize) -> Value;
    fn or_any(&mut self, typical: impl FnOnce(&mut Rng) -> Value) -> Value;
    fn word(&mut self, words: &[&str]) -> Value;
}

impl Draw for Rng {
    /// Characters that break naive code: multi-byte ones (truncation must count
    /// characters), whitespace Python strips, quotes and escapes, controls.
    fn char(&mut self) -> char {
        const ODD: &[char] = &[
            ' ',
            '\n',
            '\t',
            '\r',
            '"',
            '\'',
            '\\',
            '{',
            '}',
            '[',
            ']',
            ':',
            ',',
            '\0',
            '\u{1b}',
            '\u{1c}',
            '\u{7f}',
            '\u{85}',
            '\u{a0}',
            '\u{2028}',
            '\u{feff}',
            '\u{301}',
            'é',
            '任',
            '🙂',
            '\u{10ffff}',
            '%',
            '/',
            '?',
            '#',
        ];
        if self.one_in(3) {
            *self.pick(ODD)
        } else {
            (b'a' + self.below(26) as u8) as char
        }
    }

    fn string(&mut self, max: usize) -> String {
        let len = self.below(max + 1);
        (0..len).map(|_| self.char()).collect()
    }

    /// Mostly short, sometimes longer than any cap (up to 3 × `MAX_CHARS`).
    fn text(&mut self) -> String {
        if self.one_in(8) {
            let n = MAX_CHARS - 50 + self.below(2 * MAX_CHARS);
            let unit = self.string(4);
            let unit = if unit.is_empty() {
                "任".to_owned()
            } else {
                unit
            };
            unit.repeat(n / unit.chars().count() + 1)
        } else {
            self.string(40)
        }
    }

    fn number(&mut self) -> Value {
        match self.below(8) {
            0 => json!(0),
            1 => json!(-1),
            2 => json!(u64::MAX),
            3 => json!(i64::MIN),
            4 => json!(1796003454.6703575),
            5 => json!(1e300),
            6 => json!(-0.0),
            _ => json!(self.next() as f64 / 7.0),
        }
    }

    /// Any JSON value, at most `depth` deep.
    fn value(&mut self, depth: usize) -> Value {
        let kinds = if depth == 0 { 4 } else { 6 };
        match self.below(kinds) {
            0 => Value::Null,
            1 => Value::Bool(self.one_in(2)),
            2 => self.number(),
            3 => Value::String(self.text()),
            4 => Value::Array((0..self.below(4)).map(|_| self.value(depth - 1)).collect()),
            _ => {
                let mut map = Map::new();
                for _ in 0..self.below(4) {
                    let key = self.string(8);
                    map.insert(key, self.value(depth - 1));
                }
                Value::Object(map)
            }
        }
    }

    /// Usually `typical()`, sometimes any value at all.
    fn or_any(&mut self, typical: impl FnOnce(&mut Rng) -> Value) -> Value {
        if self.one_in(6) {
            self.value(2)
        } else {
            typical(self)
        }
    }

    fn word(&mut self, words: &[&str]) -> Value {
        if self.one_in(8) {
            Value::String(self.string(10))
        } else {
            json!(*self.pick(words))
        }
    }
}

fn iterations() -> usize {
    std::env::var("ATC_FUZZ_ITERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300)
}

fn seed() -> u64 {
    std::env::var("ATC_FUZZ_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0x00a7_c0ff_ee15)
}

/// Runs `property` once per iteration with its own generator; a failure (an assertion or
/// a panic inside atc) names the property, the iteration and the seed.
fn each(name: &str, mut property: impl FnMut(&mut Rng)) {
    let seed = seed();
    for i in 0..iterations() {
        let mut rng = Rng::new(seed.wrapping_add(i as u64).wrapping_mul(0x100_0000_01b3));
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| property(&mut rng))) {
            let said = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)");
            panic!("{name}: iteration {i} failed (ATC_FUZZ_SEED={seed}): {said}");
        }
    }
}

// ---------------------------------------------------------------------------------------
// The job-file loader

const NOW: u64 = 1_796_003_454;

fn limits() -> Limits {
    Limits {
        max_strikes: 90,
        max_age: Duration::from_secs(24 * 3600),
        busy_retry: Duration::from_secs(20),
        busy_deadline: Duration::from_secs(6 * 3600),
        settle: Duration::from_secs(30),
        keep: Duration::from_secs(7 * 24 * 3600),
        follow_up_depth: 5,
        poll_ceiling: Duration::from_secs(300),
    }
}

/// A job file with jobs in most of the shapes a tick leaves behind (pending with strikes,
/// a claimed turn after 409s, done with a forward, unconfirmed, a lost job's open notice, a
/// group's open turn, an unknown field, cancelled), cut to the first `n` jobs and the turns
/// that carry only them, as this atc reads it.
fn varied_file(path: &Path, n: usize) -> atc::job_file::JobFile {
    let mut file: Value =
        serde_json::from_str(include_str!("../../data/jobs.varied.json")).expect("the fixture");
    let jobs = file["jobs"].as_array_mut().unwrap();
    jobs.truncate(n);
    let kept: Vec<Value> = jobs.iter().map(|job| job["job_id"].clone()).collect();
    file["turns"].as_array_mut().unwrap().retain(|turn| {
        turn["carries"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| kept.contains(&c["job_id"]))
    });
    fs::write(path, serde_json::to_vec(&file).unwrap()).unwrap();
    let file = Store::new(path.to_path_buf())
        .load()
        .expect("a valid job file");
    fs::remove_file(path).unwrap();
    file
}

/// A job file written by atc's own save, holding what `file` holds.
fn real_job_file(path: &Path, file: &atc::job_file::JobFile) -> Vec<u8> {
    let store = Store::new(path.to_path_buf());
    store
        .update(|on_disk| {
            on_disk.jobs = file.jobs.clone();
            on_disk.turns = file.turns.clone();
            Ok(())
        })
        .expect("saving the job file");
    fs::read(path).expect("the saved job file")
}

/// Loads `bytes` as the job file at `path`: a refusal exits 3, names the file, and leaves
/// it byte for byte; an accepted file survives a save, and the code that reads jobs copes
/// with whatever it holds.
fn load(path: &Path, bytes: &[u8]) -> Result<atc::job_file::JobFile, String> {
    fs::write(path, bytes).unwrap();
    let loaded = Store::new(path.to_path_buf()).load();
    assert!(fs::read(path).unwrap() == bytes, "load changed the file");
    match loaded {
        Err(err) => {
            let said = format!("{err:#}");
            assert_eq!(exit_for(&err).code(), 3, "{said}");
            assert!(
                said.contains(&path.display().to_string()) && said.contains("left untouched"),
                "{said}"
            );
            Err(said)
        }
        Ok(file) => {
            let saved = serde_json::to_value(&file).expect("an accepted file serialises");
            let again: atc::job_file::JobFile =
                serde_json::from_value(saved.clone()).expect("what atc saves, it reads");
            assert_eq!(
                serde_json::to_value(&again).unwrap(),
                saved,
                "save is stable"
            );
            read_jobs(&file);
            Ok(file)
        }
    }
}

/// What `status` and a tick's first phases do with loaded jobs and turns.
fn read_jobs(file: &atc::job_file::JobFile) {
    let now = Timestamp::from_unix(NOW);
    let limits = limits();
    let (jobs, turns) = (&file.jobs, &file.turns);
    for job in jobs {
        let turn = file.turn_of(job);
        let _ = atc::describe::explain(job, turn);
        let _ = atc::describe::brief(job, turn, now);
        let _ = atc::describe::notice_text(job);
        let _ = atc::lifecycle::prunable(job, &atc::lifecycle::Turns::of(turns), now, &limits);
        if let Some(kind) = atc::status::owes(job, turn) {
            let _ = atc::describe::block_text(job, kind);
        }
    }
    for turn in turns {
        let _ = atc::describe::forward(turn);
        let _ = atc::turn::is_due(turn, now, &limits);
        let _ = atc::turn::is_settled(turn);
        let _ = chat::turn_body(turn, "text", Some(Duration::from_secs(60)));
        let _ = atc::describe::toast_text(turn, "completed");
    }
    let _ = atc::lifecycle::to_poll(jobs);
    let _ = atc::lifecycle::settled(jobs, &atc::lifecycle::Turns::of(turns));
    let _ = atc::turn::interrupted(turns);
    let _ = atc::turn::deliveries(turns, now, &limits, |_| false);
    let _ = atc::turn::to_follow(turns, now, &limits);
    let _ = atc::turn::forwards(turns);
    let _ = atc::lifecycle::compose::plan(jobs, turns, true, now);
    let _ = atc::lifecycle::compose::plan(jobs, turns, false, now);
}

/// A random edit of a JSON value in place: some node replaced, removed, or added to.
fn mutate_value(rng: &mut Rng, value: &mut Value) {
    match value {
        Value::Object(map) if !map.is_empty() && !rng.one_in(4) => {
            let key = map.keys().nth(rng.below(map.len())).unwrap().clone();
            match rng.below(5) {
                0 => {
                    map.remove(&key);
                }
                1 => {
                    map.insert(key, rng.value(2));
                }
                2 => {
                    map.insert(rng.string(12), rng.value(1));
                }
                _ => mutate_value(rng, map.get_mut(&key).unwrap()),
            }
        }
        Value::Array(items) if !items.is_empty() && !rng.one_in(4) => match rng.below(4) {
            0 => {
                items.remove(rng.below(items.len()));
            }
            1 => {
                let copy = items[rng.below(items.len())].clone();
                items.push(copy);
            }
            _ => {
                let i = rng.below(items.len());
                mutate_value(rng, &mut items[i]);
            }
        },
        other => *other = rng.value(2),
    }
}

/// A random edit of raw bytes.
fn mutate_bytes(rng: &mut Rng, bytes: &mut Vec<u8>) {
    const TOKENS: &[&[u8]] = &[
        b"null",
        b"true",
        b"-0",
        b"1e999",
        b"18446744073709551616",
        b"\"\\ud800\"",
        b"{}",
        b"[]",
        b"\"\"",
        b"\"2026-13-40T99:99:99Z\"",
        b"\"pending\"",
        b"\xff\xfe",
        b"\0",
        b",",
        b"\"version\": 2",
        b"[[[[[[[[",
    ];
    let at = rng.below(bytes.len() + 1);
    match rng.below(6) {
        0 if at < bytes.len() => bytes[at] ^= 1 << rng.below(8),
        1 if at < bytes.len() => bytes[at] = *rng.pick(b"\"{}[],:0-e\\ \xff\x00tfn"),
        2 => {
            let end = (at + rng.below(16)).min(bytes.len());
            bytes.drain(at..end);
        }
        3 => {
            let from = rng.below(bytes.len().max(1));
            let end = (from + rng.below(64)).min(bytes.len());
            let copy = bytes[from..end].to_vec();
            bytes.splice(at..at, copy);
        }
        _ => {
            let token = rng.pick(TOKENS);
            bytes.splice(at..at, token.iter().copied());
        }
    }
}

#[test]
fn the_job_file_loader_refuses_every_truncation_with_exit_3_and_touches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.json");
    // Four of the shapes (pending with strikes, delivering after 409s, done with a forward,
    // unconfirmed): every cut costs a parse of what is left, so the file is kept short.
    let want = varied_file(&path, 4);
    let real = real_job_file(&path, &want);
    let file = load(&path, &real).expect("the real file loads");
    assert_eq!(file, want);
    let end = real.iter().rposition(|b| *b == b'}').unwrap() + 1;
    for cut in 0..real.len() {
        match load(&path, &real[..cut]) {
            Ok(_) => assert!(
                cut >= end,
                "a file cut at byte {cut} of {} loaded",
                real.len()
            ),
            Err(said) if cut == 0 => assert!(said.contains("is empty (0 bytes)"), "{said}"),
            Err(said) => assert!(said.contains("is truncated"), "cut at {cut}: {said}"),
        }
    }
}

#[test]
fn the_job_file_loader_never_panics_on_mutated_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.json");
    let real = real_job_file(&path, &varied_file(&path, 8));
    each("mutated job-file bytes", |rng| {
        let mut bytes = real.clone();
        for _ in 0..1 + rng.below(4) {
            mutate_bytes(rng, &mut bytes);
        }
        let _ = load(&path, &bytes);
    });
}

#[test]
fn the_job_file_loader_never_panics_on_mutated_or_random_json() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.json");
    let real: Value =
        serde_json::from_slice(&real_job_file(&path, &varied_file(&path, 8))).unwrap();
    let mut accepted = 0;
    each("mutated job-file JSON", |rng| {
        let value = if rng.one_in(10) {
            rng.value(4)
        } else {
            let mut value = real.clone();
            for _ in 0..1 + rng.below(3) {
                mutate_value(rng, &mut value);
            }
            value
        };
        let bytes = if rng.one_in(2) {
            serde_json::to_vec_pretty(&value).unwrap()
        } else {
            serde_json::to_vec(&value).unwrap()
        };
        if load(&path, &bytes).is_ok() {
            accepted += 1;
        }
    });
    assert!(accepted > 0, "some mutations must still be valid files");
    // Nesting far past any limit, and a very long string: refused or read, never a crash.
    let deep = format!(
        r#"{{"version":2,"jobs":{}{}}}"#,
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    assert!(
        load(&path, deep.as_bytes())
            .unwrap_err()
            .contains("recursion limit exceeded")
    );
    let mut long = real.clone();
    long["jobs"][0]["last_error"] = json!("é".repeat(300_000));
    load(&path, &serde_json::to_vec(&long).unwrap()).expect("a long note is still a job");
}

// ---------------------------------------------------------------------------------------
// The task-poll classifier and the renderer

const BASE: &str = "http://127.0.0.1:8088/api";

fn task_id(rng: &mut Rng) -> String {
    match rng.below(4) {
        0 => "task-3f9a0c1b2d4e".to_owned(),
        1 => format!("task-{:012x}", rng.next() & 0xffff_ffff_ffff),
        2 => format!(
            "{:08x}-0000-4000-8000-{:012x}",
            rng.next() as u32,
            rng.next() >> 16
        ),
        _ => format!("t{}", rng.string(12)),
    }
}

fn part(rng: &mut Rng) -> Value {
    rng.or_any(|rng| {
        let mut part = json!({"type": rng.word(&["text", "text", "data", "image"])});
        if !rng.one_in(8) {
            part["text"] = if rng.one_in(8) {
                rng.value(1)
            } else {
                Value::String(rng.text())
            };
        }
        part
    })
}

fn output_item(rng: &mut Rng) -> Value {
    rng.or_any(|rng| {
        json!({
            "type": rng.word(&["message", "message", "plugin_call", "plugin_call_output"]),
            "role": rng.word(&["assistant", "assistant", "tool", "user"]),
            "content": rng.or_any(|rng| Value::Array((0..rng.below(4)).map(|_| part(rng)).collect())),
        })
    })
}

fn task_result(rng: &mut Rng) -> Value {
    rng.or_any(|rng| {
        let mut result = json!({"status": rng.word(&["completed", "completed", "failed", "running"])});
        if !rng.one_in(4) {
            result["output"] =
                rng.or_any(|rng| Value::Array((0..rng.below(5)).map(|_| output_item(rng)).collect()));
        }
        if rng.one_in(3) {
            result["error"] = match rng.below(4) {
                0 => Value::String(rng.text()),
                1 => json!({"message": rng.word(&["Task cancelled", "Task timed out after 1s",
                    "Failed to finalize fork worktree", "boom"]), "code": rng.word(&["timeout", "X"])}),
                2 => Value::Null,
                _ => rng.value(2),
            };
        }
        if rng.one_in(2) {
            result["session_id"] = rng.or_any(|rng| Value::String(rng.string(20)));
        }
        result
    })
}

/// A task payload: mostly QwenPaw's shape, with wrong types and odd values mixed in.
fn payload(rng: &mut Rng) -> Value {
    let mut payload = Map::new();
    if !rng.one_in(20) {
        payload.insert(
            "status".into(),
            rng.or_any(|rng| {
                rng.word(&[
                    "finished",
                    "finished",
                    "finished",
                    "running",
                    "pending",
                    "submitted",
                    "failed",
                    "cancelled",
                    "timeout",
                    "error",
                ])
            }),
        );
    }
    if rng.one_in(2) {
        payload.insert("started_at".into(), rng.or_any(Rng::number));
    }
    if !rng.one_in(5) {
        payload.insert("result".into(), task_result(rng));
    }
    for _ in 0..rng.below(3) {
        payload.insert(rng.string(8), rng.value(2));
    }
    Value::Object(payload)
}

/// A body as a server might send it: `value` as JSON (or damaged), or something else.
fn body_text(rng: &mut Rng, value: &Value) -> String {
    match rng.below(12) {
        0 => rng.text(),
        1 => format!(
            "{}{}",
            "[".repeat(1 + rng.below(20_000)),
            "]".repeat(rng.below(20_000))
        ),
        2 => {
            let text = value.to_string();
            text.chars()
                .take(rng.below(text.chars().count() + 1))
                .collect()
        }
        3 => {
            let mut chars: Vec<char> = value.to_string().chars().collect();
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(chars.len() + 1);
                chars.insert(at, rng.char());
            }
            chars.into_iter().collect()
        }
        _ => value.to_string(),
    }
}

const CONTENT_TYPES: &[&str] = &[
    "application/json",
    "application/json",
    "application/json; charset=utf-8",
    "application/problem+json",
    "text/html; charset=utf-8",
    "text/plain",
    "",
    "application/jsonx",
];

/// What the client could hand a parser: an answer (any status, content type, body) or a
/// transport error. `body` makes a typical body.
fn answer(rng: &mut Rng, body: impl FnOnce(&mut Rng) -> Value) -> Result<Answer, Transport> {
    if rng.one_in(20) {
        return Err(Transport {
            nothing_sent: rng.one_in(2),
            message: format!("GET {BASE}/x: {}", rng.string(20)),
        });
    }
    if rng.one_in(2) {
        // What a working server sends: all the variety is in the body.
        return Ok(Answer {
            status: 200,
            content_type: "application/json".to_owned(),
            body: Ok(body(rng).to_string()),
        });
    }
    let status = *rng.pick(&[
        200, 200, 200, 200, 201, 301, 401, 403, 404, 404, 409, 500, 502, 503,
    ]);
    let status = if rng.one_in(20) {
        rng.below(1000) as u16
    } else {
        status
    };
    let content_type = if rng.one_in(20) {
        rng.string(30).replace(|c: char| c.is_control(), "")
    } else {
        (*rng.pick(CONTENT_TYPES)).to_owned()
    };
    let body = if rng.one_in(15) {
        Err(rng
            .pick(&[
                "the answer is larger than 8 MiB",
                "reading the answer failed: timed out (receive body)",
                "reading the answer failed: io: stream did not contain valid UTF-8",
            ])
            .to_string())
    } else {
        let value = body(rng);
        Ok(body_text(rng, &value))
    };
    Ok(Answer {
        status,
        content_type,
        body,
    })
}

fn auth(rng: &mut Rng) -> Auth {
    Auth {
        runtime_token: rng.one_in(2).then(|| "rt".to_owned()),
        bearer_token: rng.one_in(2).then(|| "bt".to_owned()),
        allow_insecure_remote: rng.one_in(2),
    }
}

#[test]
fn classifying_any_poll_answer_never_panics_and_rendering_keeps_the_cap() {
    let mut finished = 0;
    each("task poll", |rng| {
        let task = task_id(rng);
        let not_found = rng.one_in(10);
        let answer = answer(rng, |rng| {
            if not_found {
                json!({"detail": format!("Task not found: {task}")})
            } else {
                payload(rng)
            }
        });
        let (status, json_answer, one_line) = match &answer {
            Ok(a) => (Some(a.status), a.is_json(), true),
            Err(_) => (None, false, false),
        };
        match task::classify(answer, &task, BASE, &auth(rng)) {
            Poll::Record(record) => {
                assert_eq!(
                    (status, json_answer),
                    (Some(200), true),
                    "only a JSON 200 is a record"
                );
                assert!(record.payload.is_object());
                let _ = (
                    record.outcome(),
                    render::answer(&record.payload),
                    record.final_reply(),
                    record.result_status(),
                );
                if !record.is_finished() {
                    return;
                }
                finished += 1;
                let rendered = render::render(&task, &record.payload);
                assert!(
                    rendered.chars().count() <= MAX_CHARS,
                    "render: {} characters",
                    rendered.chars().count()
                );
                let branches = [
                    None,
                    Some("fork/a1".to_owned()),
                    Some(rng.string(200)),
                    Some(rng.text()),
                ];
                for branch in &branches {
                    let text = render::render_delivery(&task, &record, branch.as_deref());
                    let n = text.chars().count();
                    assert!(
                        n <= MAX_CHARS,
                        "render_delivery with a branch of {:?} characters: {n}",
                        branch.as_ref().map(|b| b.chars().count())
                    );
                    if branch.is_none() {
                        assert_eq!(text, rendered);
                    }
                    if let Some(branch) = branch.as_deref().filter(|b| b.chars().count() <= 200) {
                        let line = format!("\n\n[FORK_BRANCH: {branch}]");
                        assert_eq!(
                            text.ends_with(&line),
                            record.outcome() == atc::job::TaskOutcome::Completed,
                            "the branch is named exactly when the task completed"
                        );
                    }
                }
            }
            Poll::NotFound { detail } => {
                assert_eq!(
                    (status, json_answer),
                    (Some(404), true),
                    "only QwenPaw's 404 parks a task as lost"
                );
                assert_eq!(detail, format!("Task not found: {task}"));
            }
            Poll::Denied { error } => {
                assert!(matches!(status, Some(401 | 403)) && json_answer, "{error}");
            }
            Poll::Failed { error } => {
                assert!(!error.is_empty());
                if one_line {
                    assert!(!error.contains('\n'), "one line: {error:?}");
                    assert!(
                        error.chars().count() <= 600,
                        "short: {} characters",
                        error.chars().count()
                    );
                }
            }
        }
    });
    assert!(
        finished > iterations() / 10,
        "{finished} finished records: the generator must reach the renderer"
    );
}

// ---------------------------------------------------------------------------------------
// The chat answers

const OURS: &str = "atc-0123456789ab";

fn chat_entry(rng: &mut Rng) -> Value {
    rng.or_any(|rng| {
        let mut chat = Map::new();
        for key in ["id", "session_id", "user_id", "channel", "status"] {
            if !rng.one_in(8) {
                let value = match key {
                    "status" => rng.word(&["idle", "running"]),
                    "channel" => rng.word(&["console", "mqtt"]),
                    _ => rng.or_any(|rng| Value::String(rng.string(12))),
                };
                chat.insert(key.into(), value);
            }
        }
        Value::Object(chat)
    })
}

fn message(rng: &mut Rng) -> Value {
    rng.or_any(|rng| {
        let id = rng.or_any(|rng| rng.word(&[OURS, OURS, "atc-ffffffffffff", "other"]));
        let inner = rng.or_any(|rng| {
            json!({"qwenpaw_client_message_id": id,
                   "qwenpaw_turn_state": rng.or_any(|rng| json!({"status": rng.word(&["completed", "failed"])}))})
        });
        json!({"role": rng.word(&["user", "user", "assistant"]),
               "content": [part(rng)],
               "metadata": rng.or_any(|_| json!({"original_name": "user", "metadata": inner}))})
    })
}

fn history(rng: &mut Rng) -> Value {
    rng.or_any(|rng| {
        json!({"status": rng.word(&["idle", "running"]),
               "messages": rng.or_any(|rng| Value::Array((0..rng.below(5)).map(|_| message(rng)).collect()))})
    })
}

#[test]
fn parsing_any_chat_answer_never_panics_and_never_claims_more_than_it_saw() {
    each("chat answers", |rng| {
        // The chat list.
        let listed = answer(rng, |rng| {
            rng.or_any(|rng| Value::Array((0..rng.below(5)).map(|_| chat_entry(rng)).collect()))
        });
        let status = listed.as_ref().ok().map(|a| a.status);
        match chat::chats(listed) {
            Ok(chats) => {
                assert_eq!(status, Some(200), "only a 200 lists chats");
                let _ = chat::find(&chats, "s-77", "default", "console");
                let _ = chats.iter().map(chat::ChatRef::describe).count();
            }
            Err(Unusable::Refused(m)) => assert!(matches!(status, Some(403 | 404)), "{m}"),
            Err(Unusable::Unknown(m)) => assert!(!m.is_empty()),
        }

        // Reading a delivery back.
        let read = answer(rng, history);
        let (status, body) = match &read {
            Ok(a) => (Some(a.status), a.body.clone().unwrap_or_default()),
            Err(_) => (None, String::new()),
        };
        match chat::read_back(read, OURS) {
            Ok(ReadBack::Found { .. }) => {
                assert_eq!(status, Some(200));
                assert!(body.contains(OURS), "found only what is there");
            }
            Ok(ReadBack::Absent { .. }) => assert_eq!(status, Some(200)),
            Ok(ReadBack::NoChat) => assert_eq!(status, Some(404)),
            Err(m) => assert!(!m.is_empty()),
        }

        // The chat's status.
        let asked = answer(rng, |rng| {
            rng.or_any(|rng| json!({"status": rng.word(&["idle", "running"])}))
        });
        let status = asked.as_ref().ok().map(|a| a.status);
        if chat::running(asked).is_ok() {
            assert_eq!(status, Some(200));
        }

        // What a delivery POST came back with: anything the server may have received is
        // never "not sent" (that would allow a blind second POST).
        let posted = answer(rng, |rng| {
            rng.or_any(
                |rng| json!({"task_id": rng.or_any(|rng| json!(task_id(rng))), "timeout": 60}),
            )
        });
        let (status, sent) = match &posted {
            Ok(a) => (Some(a.status), true),
            Err(t) => (None, !t.nothing_sent),
        };
        match chat::posted(posted) {
            Posted::NotSent { .. } => {
                assert!(!sent, "a request that may have arrived is not 'not sent'")
            }
            Posted::Accepted { .. } => assert!(matches!(status, Some(200..=299))),
            Posted::Busy { .. } => assert_eq!(status, Some(409)),
            Posted::Rejected { http_status, .. } => {
                assert_eq!(Some(http_status), status);
                assert!(
                    !matches!(http_status, 200..=299 | 409 | 500..=599),
                    "a 2xx or 5xx may have stored the turn: never given up as refused"
                );
            }
            Posted::Unknown { .. } => {}
        }

        // A forward, and the channel's health.
        let forwarded = answer(rng, |rng| {
            rng.or_any(|rng| json!({"success": rng.or_any(|rng| json!(rng.one_in(2)))}))
        });
        let status = forwarded.as_ref().ok().map(|a| a.status);
        if chat::forwarded(forwarded) == Sent::Accepted {
            assert!(matches!(status, Some(200..=299)));
        }
        let health = answer(rng, |rng| {
            rng.or_any(
                |rng| json!({"status": rng.word(&["healthy", "unhealthy"]), "detail": rng.text()}),
            )
        });
        let status = health.as_ref().ok().map(|a| a.status);
        if chat::health(health) == atc::turn::Health::Healthy {
            assert_eq!(status, Some(200));
        }
    });
}
