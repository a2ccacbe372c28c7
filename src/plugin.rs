//! The seed plugin's state file (`~/.qwenpaw/agent-task-callback.json`, Agent Task
//! Callback 0.1.x), read liberally and turned into atc jobs. Pure: text in, jobs out; the
//! `import-plugin-state` command does the I/O.
//!
//! The plugin's statuses map as: `pending` → pending (polled again by the next tick,
//! unless older than the age cap, which the plugin would not have re-armed either: those
//! become `expired` history); `done` → done; `unconfirmed` → unconfirmed, never read back
//! or re-posted (the plugin's posts carry no atc marker to find); `lost`, `abandoned`,
//! `cancelled` → the same, as history. No imported job ever sends a notice.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::ids::{new_job_id, parse_task_id};
use crate::job::{Job, Target, Watch};
use crate::job_file::JobFile;
use crate::report::LogEntry;
use crate::time::Timestamp;
use crate::turn::{Block, BlockKind, Delivery, Turn, TurnState};

/// One plugin record, read.
#[derive(Debug)]
pub enum Record {
    /// A job, and for one the plugin delivered (or may have), the turn that says so (its
    /// id is the job's; the import sets it).
    Job(Box<Job>, Option<Box<Turn>>),
    /// Not importable, and why (no text from the record beyond its task id).
    Skip { task_id: String, why: String },
}

/// What an import did: (task id, status, job id) of each job added; tasks the file already
/// held (left as they are); records skipped, and why.
#[derive(Debug, Default)]
pub struct Imported {
    pub added: Vec<(String, crate::job::Status, String)>,
    pub already: Vec<String>,
    pub skipped: Vec<(String, String)>,
}

impl Imported {
    /// The log's line for each job added: `imported`, with the status it came in as.
    pub fn log_entries(&self, now: Timestamp) -> Vec<LogEntry> {
        self.added
            .iter()
            .map(|(task_id, status, job_id)| LogEntry {
                status: Some(*status),
                ..LogEntry::about("imported", task_id, job_id, now)
            })
            .collect()
    }
}

/// Adds the importable `records` to `jobs`. A task the file already holds is left as it
/// is (whatever its record says), so importing twice changes nothing.
pub fn merge(file: &mut JobFile, records: Vec<Record>) -> Imported {
    let mut done = Imported::default();
    for record in records {
        match record {
            Record::Job(job, _) if file.jobs.iter().any(|j| j.task_id == job.task_id) => {
                done.already.push(job.task_id);
            }
            Record::Job(mut job, turn) => {
                // Two records sharing a job id (or one the file already holds) would make
                // the whole file unloadable: the newcomer gets a fresh one.
                while file.jobs.iter().any(|j| j.job_id == job.job_id)
                    || file.turns.iter().any(|t| t.carries_job(&job.job_id))
                {
                    job.job_id = crate::ids::new_job_id();
                }
                if let Some(mut turn) = turn {
                    let block = Block {
                        job_id: job.job_id.clone(),
                        task_id: job.task_id.clone(),
                        kind: BlockKind::Result,
                    };
                    turn.turn_id = crate::turn::new_id(&block, |id| {
                        file.turns.iter().any(|t| t.turn_id == id)
                    });
                    turn.carries = vec![block];
                    job.turn = Some(turn.turn_id.clone());
                    file.turns.push(*turn);
                }
                let shown = crate::status::status(&job, file.turn_of(&job));
                done.added
                    .push((job.task_id.clone(), shown, job.job_id.clone()));
                file.jobs.push(*job);
            }
            Record::Skip { task_id, why } => done.skipped.push((task_id, why)),
        }
    }
    done
}

/// The records in the plugin's state file: a list of jobs, `{"jobs": [...]}`,
/// `{"jobs": {task_id: job}}` or `{task_id: job}`. `Err` when the text is none of these.
pub fn records(
    text: &str,
    base_url: &str,
    max_age: Duration,
    now: Timestamp,
) -> Result<Vec<Record>, String> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("is not valid JSON ({e})"))?;
    let listed: Vec<(Option<String>, Value)> = match value {
        Value::Array(items) => items.into_iter().map(|v| (None, v)).collect(),
        Value::Object(mut map) => match map.remove("jobs") {
            Some(Value::Array(items)) => items.into_iter().map(|v| (None, v)).collect(),
            Some(Value::Object(jobs)) => jobs.into_iter().map(|(k, v)| (Some(k), v)).collect(),
            Some(_) => return Err("has a \"jobs\" field that is neither a list nor a map".into()),
            None => map.into_iter().map(|(k, v)| (Some(k), v)).collect(),
        },
        _ => return Err("is neither a list nor a map of jobs".into()),
    };
    Ok(listed
        .into_iter()
        .map(|(key, value)| record(key, value, base_url, max_age, now))
        .collect())
}

fn record(
    key: Option<String>,
    value: Value,
    base_url: &str,
    max_age: Duration,
    now: Timestamp,
) -> Record {
    let Value::Object(fields) = value else {
        return Record::Skip {
            task_id: key.unwrap_or_default(),
            why: "is not a job record".into(),
        };
    };
    let raw_id = text(&fields, "task_id").or(key).unwrap_or_default();
    let task_id = match parse_task_id(&raw_id) {
        Ok(id) => id,
        Err(err) => {
            return Record::Skip {
                task_id: crate::validate::preview(&raw_id),
                why: format!("has an unusable task id: {}", err.message),
            };
        }
    };
    let skip = |why: &str| Record::Skip {
        task_id: raw_id.trim().to_owned(),
        why: why.to_owned(),
    };
    if text(&fields, "handed_over_to").as_deref() == Some("atc") {
        return skip(
            "was handed over to atc already (atc qwenpaw install --replace-agent-task-callback)",
        );
    }
    let Some(session_id) = text(&fields, "session_id") else {
        return skip("has no session_id: there is nowhere to deliver it");
    };
    let Some(status) = text(&fields, "status") else {
        return skip("has no status");
    };
    // Every field through the validators `watch` uses: what `watch` would refuse is
    // refused here, one record at a time.
    for name in [
        "session_id",
        "user_id",
        "channel",
        "agent_id",
        "target_agent",
    ] {
        if let Some(value) = text(&fields, name)
            && let Err(why) = crate::validate::label(&value)
        {
            return skip(&format!("has an unusable {name}: it {why}"));
        }
    }
    let mut times = [None, None];
    for (slot, name) in times.iter_mut().zip(["registered_at", "completed_at"]) {
        match fields.get(name).filter(|v| !v.is_null()) {
            None => {}
            Some(_) => match epoch(&fields, name) {
                Some(at) => match crate::validate::timestamp(at) {
                    Ok(()) => *slot = Some(at),
                    Err(why) => return skip(&format!("has an unusable {name}: {why}")),
                },
                None => {
                    return skip(&format!(
                        "has an unusable {name}: not epoch seconds or an RFC 3339 time"
                    ));
                }
            },
        }
    }
    let [registered, completed_at] = times;
    let registered_at = registered.unwrap_or(now);
    let target = Target {
        agent_id: text(&fields, "agent_id").unwrap_or_else(|| "default".to_owned()),
        target_agent: text(&fields, "target_agent"),
        session_id,
        user_id: text(&fields, "user_id").unwrap_or_else(|| "default".to_owned()),
        channel: text(&fields, "channel").unwrap_or_else(|| "console".to_owned()),
    };
    // A job id that collides with another is replaced by the importer.
    let job_id = text(&fields, "job_id")
        .filter(|id| crate::validate::job_id(id).is_ok())
        .unwrap_or_else(new_job_id);
    let mut job = Job::new(job_id, task_id, base_url.to_owned(), target, registered_at);
    job.registered_at = registered_at;
    // Imported now: kept for the retention period from here, like any change.
    job.updated_at = now;
    job.final_text = text(&fields, "final");
    job.note = Some(match text(&fields, "note") {
        Some(note) => format!("imported from the agent-task-callback plugin; its note: {note}"),
        None => "imported from the agent-task-callback plugin".to_owned(),
    });
    let mut turn = None;
    job.watch = match status.as_str() {
        "pending" if registered_at.elapsed_at(now) > max_age => {
            job.final_text = None;
            job.last_error = Some(
                "the plugin's watch was older than the age cap when imported; not polled".into(),
            );
            Watch::Expired
        }
        "pending" => {
            job.final_text = None;
            Watch::Pending
        }
        "done" => {
            if job.final_text.is_none() {
                return skip("is done but carries no delivered text");
            }
            // When is known only from the plugin's own timestamp: a guess would read
            // "delivered 0s ago" for a result delivered who knows when.
            let mut t = imported_turn(&job, TurnState::Delivered, now);
            t.delivered_at = completed_at;
            turn = Some(t);
            Watch::Finished
        }
        "unconfirmed" => {
            if job.final_text.is_none() {
                return skip("is unconfirmed but carries no text");
            }
            let mut t = imported_turn(&job, TurnState::Unconfirmed, now);
            t.delivery = Delivery {
                attempts: 1,
                // The read-back window is long over: the plugin's post carries no atc
                // marker, so a read-back could only miss it and post a second copy. A
                // mark from before the turn, not a time (`Turn::unknown_before_atc`).
                unknown_since: Some(Timestamp::from_unix(0)),
                error: Some(
                    "the plugin posted it and never learned whether it arrived; its turn carries no atc marker to read back".into(),
                ),
                ..Delivery::default()
            };
            turn = Some(t);
            Watch::Finished
        }
        "lost" => Watch::Lost,
        "abandoned" => Watch::Abandoned,
        "cancelled" => Watch::Cancelled,
        other => {
            return skip(&format!(
                "has a status this atc does not know ({})",
                other.escape_debug()
            ));
        }
    };
    Record::Job(Box::new(job), turn.map(Box::new))
}

/// The turn an imported job's delivery by the plugin was (its id and block are set when
/// it is merged).
fn imported_turn(job: &Job, state: TurnState, now: Timestamp) -> Turn {
    let mut turn = Turn::new(String::new(), crate::lifecycle::compose::chat_of(job), now);
    turn.state = state;
    turn.text = job.final_text.clone();
    turn.forward_mode = job.options.forward;
    turn
}

/// The plugin's state file (`file`) with every `pending` record among `tasks` marked handed over
/// to atc: `"status": "cancelled"` (a status the plugin knows and never re-arms, so a
/// rollback to it cannot deliver them again), `"handed_over_to": "atc"` and when. The
/// layout and every other field stay as they were. Returns the new text and the task ids
/// marked; `Err` when the text is not a state file (as `records` says).
pub fn hand_over(
    file: &str,
    tasks: &[String],
    at: Timestamp,
) -> Result<(String, Vec<String>), String> {
    let mut value: Value =
        serde_json::from_str(file).map_err(|e| format!("is not valid JSON ({e})"))?;
    let mut marked = Vec::new();
    let mut mark = |key: Option<&str>, record: &mut Value| {
        let Some(fields) = record.as_object_mut() else {
            return;
        };
        let id = text(fields, "task_id").or(key.map(str::to_owned));
        let Some(id) = id.map(|i| i.trim().to_owned()) else {
            return;
        };
        if text(fields, "status").as_deref() != Some("pending") || !tasks.contains(&id) {
            return;
        }
        fields.insert("status".into(), Value::from("cancelled"));
        fields.insert("handed_over_to".into(), Value::from("atc"));
        fields.insert("handed_over_at".into(), Value::from(at.to_string()));
        marked.push(id);
    };
    match &mut value {
        Value::Array(items) => items.iter_mut().for_each(|r| mark(None, r)),
        Value::Object(map) => match map.get_mut("jobs") {
            Some(Value::Array(items)) => items.iter_mut().for_each(|r| mark(None, r)),
            Some(Value::Object(jobs)) => jobs.iter_mut().for_each(|(k, r)| mark(Some(k), r)),
            Some(_) => return Err("has a \"jobs\" field that is neither a list nor a map".into()),
            None => map.iter_mut().for_each(|(k, r)| mark(Some(k), r)),
        },
        _ => return Err("is neither a list nor a map of jobs".into()),
    }
    let mut out = serde_json::to_string_pretty(&value).expect("a JSON value serializes");
    out.push('\n');
    Ok((out, marked))
}

/// How many jobs the seed's state file `text` holds as pending, never handed over to atc:
/// the seed still watches them (atc's plugin stands by while there are any, as its
/// `seed_pending` counts them). 0 for a file that is not a state file.
pub fn still_owed(text: &str) -> usize {
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return 0;
    };
    let owed = |record: &Value| {
        record.get("status").and_then(Value::as_str) == Some("pending")
            && record.get("handed_over_to").and_then(Value::as_str) != Some("atc")
    };
    let jobs = match &value {
        Value::Object(map) => map.get("jobs").unwrap_or(&value),
        _ => &value,
    };
    match jobs {
        Value::Array(items) => items.iter().filter(|r| owed(r)).count(),
        Value::Object(map) => map.values().filter(|r| owed(r)).count(),
        _ => 0,
    }
}

/// A non-empty string field.
fn text(fields: &Map<String, Value>, name: &str) -> Option<String> {
    fields
        .get(name)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// Epoch seconds (number or numeric string), or an RFC 3339 string.
fn epoch(fields: &Map<String, Value>, name: &str) -> Option<Timestamp> {
    match fields.get(name)? {
        Value::Number(n) => n.as_f64().and_then(Timestamp::from_unix_f64),
        Value::String(s) => s
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(Timestamp::from_unix_f64)
            .or_else(|| Timestamp::parse(s)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(24 * 3600);

    fn now() -> Timestamp {
        Timestamp::from_unix(1_800_000_000)
    }

    fn one(text: &str) -> Record {
        let mut all = records(text, "http://127.0.0.1:8088/api", DAY, now()).unwrap();
        assert_eq!(all.len(), 1);
        all.remove(0)
    }

    fn job(text: &str) -> Job {
        imported(text).0
    }

    fn imported(text: &str) -> (Job, Option<Turn>) {
        match one(text) {
            Record::Job(job, turn) => (*job, turn.map(|t| *t)),
            Record::Skip { why, .. } => panic!("skipped: {why}"),
        }
    }

    #[test]
    fn hand_over_marks_only_the_pending_tasks_named_and_keeps_the_rest() {
        let text = r#"{"jobs": {"task-1": {"status": "pending", "session_id": "s", "x": 1}, "task-2": {"status": "done", "session_id": "s"}, "task-3": {"status": "pending", "session_id": "s"}}}"#;
        let tasks = vec!["task-1".to_owned(), "task-2".to_owned()];
        let (out, marked) = hand_over(text, &tasks, now()).unwrap();
        assert_eq!(marked, ["task-1"]);
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["jobs"]["task-1"]["status"], "cancelled");
        assert_eq!(v["jobs"]["task-1"]["handed_over_to"], "atc");
        assert_eq!(v["jobs"]["task-1"]["x"], 1);
        assert_eq!(v["jobs"]["task-2"]["status"], "done");
        assert_eq!(
            v["jobs"]["task-3"]["status"], "pending",
            "not imported: left"
        );
        let (_, again) = hand_over(&out, &tasks, now()).unwrap();
        assert!(again.is_empty(), "twice marks nothing more");
        assert!(hand_over("[3", &tasks, now()).is_err());
    }

    /// The four layouts of a state file (a list, `{"jobs": [...]}`, `{"jobs": {id: job}}`,
    /// `{id: job}`), each holding `records` keyed by their task ids.
    fn layouts(records: &[(&str, Value)]) -> [String; 4] {
        let listed: Vec<Value> = records
            .iter()
            .map(|(id, r)| {
                let mut r = r.clone();
                r["task_id"] = Value::from(*id);
                r
            })
            .collect();
        let keyed: Map<String, Value> = records
            .iter()
            .map(|(id, r)| ((*id).to_owned(), r.clone()))
            .collect();
        [
            Value::from(listed.clone()),
            serde_json::json!({ "jobs": listed }),
            serde_json::json!({ "jobs": keyed }),
            Value::from(keyed),
        ]
        .map(|v| v.to_string())
    }

    #[test]
    fn every_layout_is_handed_over_and_counted() {
        let records = [
            (
                "task-1",
                serde_json::json!({"status": "pending", "session_id": "s"}),
            ),
            (
                "task-2",
                serde_json::json!({"status": "done", "session_id": "s"}),
            ),
            (
                "task-3",
                serde_json::json!({"status": "pending", "session_id": "s", "handed_over_to": "atc"}),
            ),
            (
                "task-4",
                serde_json::json!({"status": "pending", "session_id": "s"}),
            ),
        ];
        let tasks = ["task-1", "task-2", "task-3"].map(str::to_owned);
        for text in layouts(&records) {
            assert_eq!(still_owed(&text), 2, "pending and not handed over: {text}");
            let (out, marked) = hand_over(&text, &tasks, now()).unwrap();
            assert_eq!(marked, ["task-1", "task-3"], "{text}");
            assert_eq!(still_owed(&out), 1, "task-4, not named: {out}");
        }
        assert_eq!(still_owed("[3"), 0);
        assert_eq!(still_owed("{\"jobs\": 3}"), 0);
    }

    #[test]
    fn a_pending_watch_expires_only_past_the_age_cap() {
        for (age, watch) in [
            (DAY.as_secs(), Watch::Pending),
            (DAY.as_secs() + 1, Watch::Expired),
        ] {
            let at = 1_800_000_000 - age;
            let text = format!(
                r#"[{{"task_id":"t","session_id":"s","status":"pending","registered_at":{at}}}]"#
            );
            assert_eq!(job(&text).watch, watch, "{age} s old");
        }
    }

    #[test]
    fn maps_each_status() {
        let base = r#""task_id":"task-1","job_id":"j1","agent_id":"default","target_agent":"SE","session_id":"s-1","user_id":"u","channel":"console","final":"T","completed_at":1799999990"#;
        let recent = 1_800_000_000 - 60;
        for (status, expect) in [
            ("pending", crate::job::Status::Pending),
            ("done", crate::job::Status::Done),
            ("unconfirmed", crate::job::Status::Unconfirmed),
            ("lost", crate::job::Status::Lost),
            ("abandoned", crate::job::Status::Abandoned),
            ("cancelled", crate::job::Status::Cancelled),
        ] {
            let (mut j, turn) = imported(&format!(
                "[{{{base},\"status\":\"{status}\",\"registered_at\":{recent}}}]"
            ));
            if let Some(turn) = &turn {
                j.turn = Some(turn.turn_id.clone());
            }
            let carried = turn.clone().map(|mut t| {
                t.carries = vec![Block {
                    job_id: j.job_id.clone(),
                    task_id: j.task_id.clone(),
                    kind: BlockKind::Result,
                }];
                t
            });
            assert_eq!(
                crate::status::status(&j, carried.as_ref()),
                expect,
                "{status}"
            );
            assert_eq!(j.job_id, "j1");
            assert_eq!(j.target.target_agent.as_deref(), Some("SE"));
            assert_eq!(j.registered_at, Timestamp::from_unix(recent));
            assert!(!j.notice, "an import never notices");
            match expect {
                crate::job::Status::Pending => {
                    assert_eq!(j.final_text, None, "polled again, rendered fresh")
                }
                crate::job::Status::Done => {
                    let turn = turn.expect("a delivered turn");
                    assert_eq!(turn.state, TurnState::Delivered);
                    assert_eq!(turn.delivered_at, Some(Timestamp::from_unix(1_799_999_990)))
                }
                crate::job::Status::Unconfirmed => {
                    let mut turn = turn.expect("a turn of unknown outcome");
                    turn.carries = vec![Block {
                        job_id: j.job_id.clone(),
                        task_id: j.task_id.clone(),
                        kind: BlockKind::Result,
                    }];
                    assert!(!crate::turn::is_due(
                        &turn,
                        now(),
                        &crate::settings::default_limits()
                    ));
                }
                _ => assert!(turn.is_none(), "{status}: nothing was delivered"),
            }
        }
    }

    #[test]
    fn old_pending_is_history_and_bad_records_are_skipped() {
        let old = job(
            r#"{"jobs":{"task-9":{"session_id":"s","status":"pending","registered_at":1700000000}}}"#,
        );
        assert_eq!(
            (old.task_id.as_str(), old.watch),
            ("task-9", Watch::Expired)
        );
        assert_eq!(old.target.channel, "console");
        for (text, says) in [
            (
                r#"[{"task_id":"a/b","session_id":"s","status":"done"}]"#,
                "contains '/'",
            ),
            (
                r#"[{"task_id":"t","status":"done","final":"x"}]"#,
                "no session_id",
            ),
            (
                r#"[{"task_id":"t","session_id":"s","status":"weird"}]"#,
                "does not know",
            ),
            (
                r#"[{"task_id":"t","session_id":"s","status":"done"}]"#,
                "no delivered text",
            ),
            (r#"[5]"#, "not a job record"),
        ] {
            match one(text) {
                Record::Skip { why, .. } => assert!(why.contains(says), "{why} / {says}"),
                Record::Job(j, _) => panic!("{text} imported as {:?}", j.watch),
            }
        }
        assert!(records("{\"jobs\": 3}", "b", DAY, now()).is_err());
        match one(
            r#"[{"task_id":"t","session_id":"s","status":"cancelled","handed_over_to":"atc"}]"#,
        ) {
            Record::Skip { why, .. } => {
                assert!(why.contains("handed over to atc already"), "{why}")
            }
            Record::Job(..) => panic!("a handed-over record imported again"),
        }
        assert!(records("nope", "b", DAY, now()).is_err());
    }
}
