//! The job file as atc 0.1 (version 1) held it: each turn on the job that carries it (the
//! carrier's `delivery`, `delivered_at`, `turn_task_id`, `parent_turn`, `forward`, the tasks
//! it carries in `group_tasks`, a batch's or a group's text in `turn_text`), the others
//! pointing at it (`carried_by`), a notice's or a check-in's text in `final`. The
//! simulation writes it to check that what an older atc left (mid-POST included) is read
//! and carried on without posting anything twice. Not every file of this version has a
//! version-1 form (a turn whose first job is gone, an id with a suffix): those give `None`.

use atc::job::{Job, OnNoAnswer, Status};
use atc::state::JobFile;
use atc::turn::{BlockKind, Turn};
use serde_json::{Value, json};

/// The delivery id version 1 gave a carrier's turn.
fn v1_id(job: &Job) -> String {
    if job.status == Status::Pending && job.check_in.is_some() {
        format!("atc-{}-c{}", job.job_id, job.check_ins + 1)
    } else {
        format!("atc-{}", job.job_id)
    }
}

pub fn downgrade(file: &JobFile) -> Option<Vec<u8>> {
    // Version 1 recorded no give-ups and no kicked chats (nor did an atc that wrote it
    // read version 2).
    if !file.give_ups.is_empty() || !file.kick_chats.is_empty() {
        return None;
    }
    let index = |job_id: &str| file.jobs.iter().position(|j| j.job_id == job_id);
    let mut jobs: Vec<Value> = file
        .jobs
        .iter()
        .map(|job| {
            let mut value = serde_json::to_value(job).expect("a job serialises");
            let map = value.as_object_mut().expect("an object");
            map.remove("turn");
            // What a job owes outside any turn, as version 1 kept it.
            if let Some(kind) = job.owes()
                && job.turn.is_none()
            {
                if kind != BlockKind::Result {
                    if job.options.group.is_some() && kind == BlockKind::Notice {
                        // A held group member's notice waited for its group's seal.
                        map.insert("notice".into(), Value::Null);
                    } else {
                        map.insert("final".into(), json!(atc::describe::block_text(job, kind)));
                    }
                }
                if !(job.options.group.is_some() && kind == BlockKind::Notice) {
                    map.insert("delivery".into(), json!({"attempts": 0, "busy": 0}));
                }
            }
            value
        })
        .collect();
    let carried: Vec<&Turn> = file
        .turns
        .iter()
        .filter(|t| {
            file.jobs
                .iter()
                .any(|j| j.turn.as_deref() == Some(t.turn_id.as_str()))
        })
        .collect();
    // A turn nobody points at is only kept while settled: version 1 had no record of it.
    if file
        .turns
        .iter()
        .any(|t| !atc::turn::is_settled(t) && !carried.iter().any(|c| c.turn_id == t.turn_id))
    {
        return None;
    }
    for turn in carried {
        // Version 1 knew a check-in only on a job still pending: one whose job moved on
        // (cancelled, finished) would read back as a result.
        if turn.carries.iter().any(|b| {
            b.kind.is_check_in()
                && index(&b.job_id).is_none_or(|j| file.jobs[j].status != Status::Pending)
        }) {
            return None;
        }
        let first = turn.carries.first()?;
        let c = index(&first.job_id)?;
        let carrier = &file.jobs[c];
        if carrier.turn.as_deref() != Some(turn.turn_id.as_str()) || v1_id(carrier) != turn.turn_id
        {
            return None;
        }
        let several = turn.carries.len() > 1 || turn.group.is_some();
        if several && first.kind.is_check_in() {
            // A check-in never carried in version 1.
            return None;
        }
        let mut members = Vec::new();
        for block in &turn.carries[1..] {
            let m = index(&block.job_id)?;
            if file.jobs[m].turn.as_deref() != Some(turn.turn_id.as_str()) {
                return None;
            }
            members.push((m, block.kind));
        }
        let job = jobs[c].as_object_mut()?;
        job.insert(
            "delivery".into(),
            serde_json::to_value(&turn.delivery).ok()?,
        );
        for (key, value) in [
            (
                "delivered_at",
                serde_json::to_value(turn.delivered_at).ok()?,
            ),
            ("turn_task_id", json!(turn.turn_task_id)),
            ("parent_turn", json!(turn.parent_turn)),
        ] {
            if !value.is_null() {
                job.insert(key.into(), value);
            }
        }
        if let Some(forward) = &turn.forward {
            job.insert("forward".into(), serde_json::to_value(forward).ok()?);
        }
        if let Some(chat_id) = &turn.chat_id {
            job.insert("chat_id".into(), json!(chat_id));
        }
        if turn.create_session {
            job.insert("create_session".into(), json!(true));
        }
        if several {
            let tasks: Vec<&str> = turn.carries.iter().map(|b| b.task_id.as_str()).collect();
            job.insert("group_tasks".into(), json!(tasks));
            job.insert("turn_text".into(), json!(turn.text));
            if first.kind != BlockKind::Result {
                job.insert(
                    "final".into(),
                    json!(atc::describe::block_text(carrier, first.kind)),
                );
            }
        } else if first.kind != BlockKind::Result {
            job.insert("final".into(), json!(turn.text));
        }
        for (m, kind) in members {
            let member = &file.jobs[m];
            let value = jobs[m].as_object_mut()?;
            value.insert("carried_by".into(), json!(carrier.job_id));
            // What version 1's members mirrored of where their carrier's turn landed.
            if !turn.state.is_on_its_way() {
                let d = &turn.delivery;
                value.insert(
                    "delivery".into(),
                    json!({"attempts": 0, "busy": 0, "error": d.error,
                           "unknown_since": d.unknown_since, "read_back_closed_at": d.read_back_closed_at}),
                );
                if let Some(at) = turn.delivered_at {
                    value.insert("delivered_at".into(), serde_json::to_value(at).ok()?);
                }
                if let Some(parent) = &turn.turn_task_id {
                    value.insert("turn_task_id".into(), json!(parent));
                }
                if let Some(chat_id) = &turn.chat_id {
                    value.insert("chat_id".into(), json!(chat_id));
                }
            }
            if kind != BlockKind::Result {
                value.insert(
                    "final".into(),
                    json!(atc::describe::block_text(member, kind)),
                );
            }
            if member.options.group.is_some()
                && member.status.ends_without_answer()
                && member.options.on_no_answer == OnNoAnswer::Notify
                && member.notice.is_none()
            {
                return None;
            }
        }
    }
    serde_json::to_vec_pretty(&json!({"version": 1, "jobs": jobs})).ok()
}
