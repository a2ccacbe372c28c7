//! Issue 37 on the real server: delegation trees. A server of its own ("tree") with atc's
//! plugin installed by `atc qwenpaw install`, auto-watch on (the default) and the plugin's
//! cadence at 2 s; the test runs **no tick**: whatever delivers, the plugin started (a
//! turn's end's kick, its cadence). The fake LLM's `DELEGATE:` scripts every level, and
//! no model calls a watch tool or `check_agent_task`:
//!
//! - P (a console chat of user `tia` on `default`) submits a background task to the child
//!   (on `default`, a session of its own); the child's background turn submits one to the
//!   grandchild and ends with an interim answer ("Delegated to … as task-…"); three levels
//!   deep, the grandchild (on `default`) does the same with the great-grandchild. The leaf
//!   runs on the QA agent (which has no submit_to_agent): it sleeps a few seconds, then
//!   answers with its marker (`MARK_…_answer`).
//! - A result delivered into a node's background chat wakes it: it replies
//!   `MARK_…_L<k>_woke wake <n> (woken by <task>; heard: <the markers of what woke it>)`.
//! - atc must carry each such reply up, as a follow-up block of that node's task
//!   (`[TASK_ID: <its task>]`, then `[atc: follow-up to this task's earlier answer, after
//!   <the task whose block woke it> finished]`, then the reply), into the chat above,
//!   exactly once, level by level, so the top chat P hears the real answer.
//!
//! Timing orders the tree (each level's own result lands in the chat above, ~0.5 s after
//! its turn ends, before anything lands in its own chat): an intermediate level k ends its
//! interim turn 4·(k−1) s after its submission, the leaf sleeps 4·(depth−2)+5 s. Three
//! levels deep the child wakes twice (on the grandchild's interim answer, then on the
//! grandchild's follow-up), and each reply goes up: P receives two follow-ups of the
//! child's task, each naming the grandchild, each once.

use std::collections::BTreeMap;
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::R;
use crate::api::{Api, Msg};
use crate::auto::Auto;
use crate::ensure;
use crate::scenarios::Ctx;

const USER: &str = "tia";
/// From P's turn to the last follow-up in P's chat (observed: 6.1 s two levels deep, 10.6 s
/// three levels deep).
const WAIT: Duration = Duration::from_secs(40);
/// After the last expected delivery: more than two beats of the cadence, for a copy to
/// show up if one would.
const SETTLE: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(250);
const FOLLOW_UP: &str = "[atc: follow-up to this task's earlier answer, after ";
/// Tools no model may call here: atc posts every result by itself.
const POLLING_TOOLS: [&str; 3] = ["watch_agent_task", "watch_agent_tasks", "check_agent_task"];

/// The server the tree scenarios share (`Ctx::tree` makes it once).
pub fn shared(ctx: &Ctx) -> R<Auto> {
    crate::auto::server_with(
        ctx,
        "tree",
        vec![("ATC_CADENCE".to_string(), "2s".to_string())],
    )
}

/// P → child → grandchild.
pub fn two_levels(ctx: &Ctx) -> R<()> {
    tree(ctx, 2)
}

/// P → child → grandchild → great-grandchild.
pub fn three_levels(ctx: &Ctx) -> R<()> {
    tree(ctx, 3)
}

/// A chat by its exact identity.
#[derive(Clone, Debug)]
struct Chat {
    agent: String,
    session: String,
    user: String,
    channel: String,
}

impl Chat {
    fn of_job(job: &Value) -> Chat {
        let s = |k: &str| job[k].as_str().unwrap_or("").to_string();
        Chat {
            agent: s("agent_id"),
            session: s("session_id"),
            user: s("user_id"),
            channel: s("channel"),
        }
    }

    fn shown(&self) -> String {
        format!(
            "{} / {} / {} on {}",
            self.session, self.user, self.channel, self.agent
        )
    }
}

/// Every chat of `agent` (no filter), as the server lists them.
fn chats_of(api: &Api, agent: &str) -> R<Vec<Value>> {
    let resp = api.get("/api/chats", Some(agent))?;
    ensure!(
        resp.status == 200,
        "GET chats of {agent}: HTTP {} {}",
        resp.status,
        resp.body
    );
    match resp.json()? {
        Value::Array(list) => Ok(list),
        other => Err(format!("GET chats of {agent}: not a list: {other}")),
    }
}

/// The messages of the chat `id` of `agent` (`GET /api/chats/<id>` finds only the chats
/// of the agent its `X-Agent-Id` names, `default` without one).
fn chat_of(api: &Api, agent: &str, id: &str) -> R<Vec<Msg>> {
    let resp = api.get(&format!("/api/chats/{id}"), Some(agent))?;
    ensure!(
        resp.status == 200,
        "GET chat {id} of {agent}: HTTP {} {}",
        resp.status,
        resp.body
    );
    let v = resp.json()?;
    Ok(v["messages"]
        .as_array()
        .ok_or_else(|| format!("GET chat {id} of {agent}: no messages: {}", resp.body))?
        .iter()
        .map(|m| Msg {
            role: m["role"].as_str().unwrap_or("").to_string(),
            kind: m["type"].as_str().unwrap_or("").to_string(),
            text: crate::api::text_of(&m["content"]),
            raw: m.clone(),
        })
        .collect())
}

/// The messages of `chat` (none while it does not exist).
fn messages(api: &Api, chat: &Chat) -> R<Vec<Msg>> {
    let ids: Vec<String> = chats_of(api, &chat.agent)?
        .iter()
        .filter(|c| {
            c["session_id"] == chat.session.as_str()
                && c["user_id"] == chat.user.as_str()
                && c["channel"] == chat.channel.as_str()
        })
        .filter_map(|c| c["id"].as_str().map(str::to_string))
        .collect();
    match ids.as_slice() {
        [] => Ok(Vec::new()),
        [id] => chat_of(api, &chat.agent, id),
        many => Err(format!("{} chats for {}", many.len(), chat.shown())),
    }
}

/// The first `task-<hex>` in `text`.
fn task_in(text: &str) -> Option<String> {
    text.match_indices("task-").find_map(|(i, _)| {
        let id: String = text[i..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        (id.len() > "task-".len()).then_some(id)
    })
}

fn final_text(payload: &Value) -> String {
    payload["result"]["output"]
        .as_array()
        .and_then(|o| o.last())
        .map(|m| crate::api::text_of(&m["content"]))
        .unwrap_or_default()
}

/// What the user messages of a chat hold of `task`: its result blocks (a `[TASK_ID: …]`
/// line not followed by atc's follow-up line), and its follow-up blocks, each as (the task
/// it names as finished, what follows its line).
#[derive(Debug, Default)]
struct Blocks {
    results: usize,
    follow_ups: Vec<(String, String)>,
}

fn blocks_of(msgs: &[Msg], task: &str) -> Blocks {
    let id_line = format!("[TASK_ID: {task}]");
    let mut found = Blocks::default();
    for m in msgs.iter().filter(|m| m.role == "user") {
        let lines: Vec<&str> = m.text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if line.trim_end() != id_line {
                continue;
            }
            let after = lines
                .get(i + 1)
                .and_then(|l| l.trim_end().strip_prefix(FOLLOW_UP))
                .and_then(|rest| rest.strip_suffix(" finished]"));
            match after {
                Some(after) => found
                    .follow_ups
                    .push((after.to_string(), lines[i + 2..].join("\n"))),
                None => found.results += 1,
            }
        }
    }
    found
}

/// The woken replies of level `mark` in a chat: its assistant messages that start with it.
fn wakes(msgs: &[Msg], mark: &str) -> Vec<String> {
    msgs.iter()
        .filter(|m| m.role == "assistant" && m.text.starts_with(mark))
        .map(|m| m.text.trim().to_string())
        .collect()
}

/// One line per user message of a chat (its first two lines), for a failure's reason.
fn summary(msgs: &[Msg]) -> String {
    msgs.iter()
        .map(|m| {
            let head: Vec<&str> = m.text.lines().take(2).collect();
            format!("{}: {}", m.role, head.join(" ⏎ "))
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

/// Polls `probe` until it yields, or fails with `what` (and the state `why` describes).
fn until<T>(
    deadline: Instant,
    what: &str,
    mut probe: impl FnMut() -> R<Option<T>>,
    why: impl Fn() -> String,
) -> R<T> {
    loop {
        if let Some(found) = probe()? {
            return Ok(found);
        }
        ensure!(Instant::now() < deadline, "{what}; {}", why());
        sleep(POLL);
    }
}

/// Every chat of every agent of the server: (agent, the chat's list entry, its messages).
fn every_chat(auto: &Auto) -> R<Vec<(String, Value, Vec<Msg>)>> {
    let api = auto.server.api();
    let mut all = Vec::new();
    for agent in &auto.server.agents {
        for chat in chats_of(&api, agent)? {
            let id = chat["id"].as_str().unwrap_or("").to_string();
            let msgs = chat_of(&api, agent, &id)?;
            all.push((agent.clone(), chat, msgs));
        }
    }
    Ok(all)
}

/// Nothing atc posted is in any chat twice: each delivery id (`qwenpaw_client_message_id`
/// `atc-…`) once, each text atc posted once. Returns how many atc turns there are.
fn posted_once(auto: &Auto) -> R<usize> {
    let mut ids: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut texts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (agent, chat, msgs) in every_chat(auto)? {
        let place = format!("{} of {agent}", chat["session_id"]);
        for m in msgs.iter().filter(|m| m.role == "user") {
            let Some(id) = m.delivery_id().filter(|id| id.starts_with("atc-")) else {
                continue;
            };
            ids.entry(id.to_string()).or_default().push(place.clone());
            texts.entry(m.text.clone()).or_default().push(place.clone());
        }
    }
    let twice: Vec<String> = ids
        .iter()
        .filter(|(_, at)| at.len() > 1)
        .map(|(id, at)| format!("{id} in {at:?}"))
        .chain(
            texts
                .iter()
                .filter(|(_, at)| at.len() > 1)
                .map(|(text, at)| format!("{:?} in {at:?}", text.lines().next())),
        )
        .collect();
    ensure!(twice.is_empty(), "atc posted twice: {}", twice.join("; "));
    Ok(ids.len())
}

/// No model called a polling or watch tool: not in any stored chat, not in any request
/// of this tree the fake LLM saw (each model step's tool calls are in the next request);
/// and the submissions are there (`levels` of them), so the log is the right one.
fn no_polling(ctx: &Ctx, auto: &Auto, nonce: &str, levels: usize) -> R<()> {
    let mut stored = 0;
    for (agent, chat, msgs) in every_chat(auto)? {
        for m in &msgs {
            let raw = m.raw.to_string();
            if raw.contains(nonce) && raw.contains("\"name\":\"submit_to_agent\"") {
                stored += 1;
            }
            for tool in POLLING_TOOLS {
                ensure!(
                    !raw.contains(&format!("\"name\":\"{tool}\"")),
                    "a model called {tool} in {} of {agent}: {raw}",
                    chat["session_id"]
                );
            }
        }
    }
    // Each submission's call is stored (so a polling call would be seen), here with its
    // arguments, which hold the nonce.
    ensure!(
        stored >= levels,
        "{stored} stored submit_to_agent calls of this tree, not {levels}: the check reads the wrong field"
    );
    let mut submissions = std::collections::BTreeSet::new();
    for request in ctx.llm.requests() {
        if !request.to_string().contains(nonce) {
            continue;
        }
        for msg in request["messages"].as_array().into_iter().flatten() {
            for call in msg["tool_calls"].as_array().into_iter().flatten() {
                let name = call["function"]["name"].as_str().unwrap_or("");
                ensure!(
                    !POLLING_TOOLS.contains(&name),
                    "a model of the tree called {name}: {call}"
                );
                if name == "submit_to_agent" {
                    submissions.insert(call["id"].to_string());
                }
            }
        }
    }
    ensure!(
        submissions.len() == levels,
        "the fake LLM's log holds {} submit_to_agent calls of this tree, not {levels}",
        submissions.len()
    );
    Ok(())
}

fn tree(ctx: &Ctx, depth: usize) -> R<()> {
    let auto = ctx.tree()?;
    let api = auto.server.api();
    let qa = auto.server.second_agent()?;
    // Every level runs on `default` but the leaf, on the QA agent: the shipped QA agent has
    // no submit_to_agent (its agent.json leaves it off), so only the leaf can be there.
    let agent_of = |k: usize| {
        if k == depth {
            qa.clone()
        } else {
            "default".to_string()
        }
    };
    let nonce = ctx.uniq(&format!("tree{depth}")).replace('-', "_");
    // woke[k]: what level k (1..depth) says when a result wakes it; the leaf's answer.
    let woke: Vec<String> = (0..depth)
        .map(|k| format!("MARK_{nonce}_L{k}_woke"))
        .collect();
    let leaf = format!("MARK_{nonce}_L{depth}_answer");
    let mut text = format!("{leaf} SLEEP={}", 4 * (depth - 2) + 5);
    for k in (1..depth).rev() {
        text = format!(
            "DELEGATE: {}",
            json!({"to_agent": agent_of(k + 1), "text": text, "woken": woke[k], "sleep": 4 * (k - 1)})
        );
    }
    let top = format!(
        "DELEGATE: {}",
        json!({"to_agent": agent_of(1), "text": text})
    );
    let session = format!("tree-{nonce}");
    api.make_parent("default", USER, &session)?;
    let p_chat = Chat {
        agent: "default".into(),
        session: session.clone(),
        user: USER.into(),
        channel: "console".into(),
    };
    let started = Instant::now();
    let deadline = started + WAIT;
    let turn = api.submit(Some("default"), &session, USER, &top, None)?;
    let (payload, _) = api.wait_finished(&turn, WAIT)?;
    ensure!(
        payload["result"]["status"] == "completed",
        "P's turn did not complete: {payload}"
    );

    // The tasks, level by level: each intermediate level's interim answer names the next.
    let mut tasks = vec![String::new()];
    let said = final_text(&payload);
    tasks.push(task_in(&said).ok_or_else(|| format!("P's turn answered {said:?}"))?);
    for k in 1..depth {
        let (record, _) = api.wait_finished(&tasks[k], WAIT)?;
        let said = final_text(&record);
        ensure!(
            record["result"]["status"] == "completed" && said.starts_with("Delegated to "),
            "level {k}'s task {} ended {record}",
            tasks[k]
        );
        tasks.push(task_in(&said).ok_or_else(|| format!("level {k} answered {said:?}"))?);
    }

    // The plugin watched each level's task for the chat above it, by itself.
    let jobs_of = |tasks: &[String]| -> R<Option<Vec<Value>>> {
        let jobs = auto.jobs(ctx)?;
        Ok(tasks[1..]
            .iter()
            .map(|t| jobs.iter().find(|j| j["task_id"] == t.as_str()).cloned())
            .collect())
    };
    let jobs = until(
        deadline,
        "the plugin did not watch every task of the tree",
        || jobs_of(&tasks),
        || {
            format!(
                "tasks {:?}; jobs: {:?}; atc started: {:?}",
                &tasks[1..],
                auto.jobs(ctx).unwrap_or_default(),
                auto.starts()
            )
        },
    )?;
    let jobs: Vec<Value> = std::iter::once(Value::Null).chain(jobs).collect();
    // chats[k]: the chat level k's turns run in (P's, then each background task's), as the
    // watch of level k+1 records it.
    let mut chats = vec![p_chat.clone()];
    for k in 1..=depth {
        let job = &jobs[k];
        ensure!(
            job["origin"] == "auto" && job["agent_id"] == agent_of(k - 1).as_str(),
            "level {k}'s task was not watched automatically from level {}'s agent: {job}",
            k - 1
        );
        if k == 1 {
            ensure!(
                job["session_id"] == session.as_str()
                    && job["user_id"] == USER
                    && job["channel"] == "console",
                "the child's watch is not for P's chat: {job}"
            );
        } else {
            // (a) The chat the plugin recorded for this watch is the background chat of
            // the level above: the session the submission that started it printed.
            ensure!(
                job["session_id"] == jobs[k - 1]["child_session"],
                "level {k}'s watch is for session {}, but level {}'s submission printed [SESSION: {}]: {job}",
                job["session_id"],
                k - 1,
                jobs[k - 1]["child_session"]
            );
            chats.push(Chat::of_job(job));
        }
    }
    let p_msgs = messages(&api, &p_chat)?;
    let printed: Vec<String> = p_msgs
        .iter()
        .filter(|m| m.kind.ends_with("_output"))
        .map(|m| m.raw.to_string())
        .filter(|raw| raw.contains(&format!("[TASK_ID: {}]", tasks[1])))
        .filter_map(|raw| {
            raw.split("[SESSION: ")
                .nth(1)
                .and_then(|rest| rest.split(']').next())
                .map(str::to_string)
        })
        .collect();
    eprintln!(
        "e2e tree: the child's submission in P's chat printed [SESSION: {}]; the watch of the grandchild records the chat {} (user {:?}, channel {:?})",
        printed.join(", "),
        chats[1].shown(),
        jobs[2]["user_id"],
        jobs[2]["channel"]
    );
    ensure!(
        printed.len() == 1 && printed[0] == chats[1].session,
        "P's stored submit_to_agent output printed {printed:?}, the grandchild's watch names {}",
        chats[1].session
    );

    // The leaf's result reaches the chat above it and wakes that level (today already).
    let last = depth - 1;
    let woken = until(
        deadline,
        &format!(
            "level {last} was not woken in {} by the leaf's result",
            chats[last].shown()
        ),
        || {
            let msgs = messages(&api, &chats[last])?;
            Ok(wakes(&msgs, &woke[last])
                .into_iter()
                .find(|w| w.contains(&leaf)))
        },
        || summary(&messages(&api, &chats[last]).unwrap_or_default()),
    )?;
    // (b) The record of the turn that delivery started carries the woken reply.
    let atc = auto.atc(ctx)?;
    let turn = until(
        deadline,
        "the leaf's job has no posted turn",
        || {
            let job = atc.job(&tasks[depth])?;
            Ok(atc
                .turn_if_any(&job)?
                .filter(|turn| turn["turn_task_id"].is_string()))
        },
        || format!("{:?}", atc.job(&tasks[depth])),
    )?;
    let woke_task = turn["turn_task_id"].as_str().unwrap_or("");
    let (record, _) = api.wait_finished(woke_task, WAIT)?;
    eprintln!(
        "e2e tree: the woken turn {woke_task}'s record: status {}, its last output {:?}",
        record["result"]["status"],
        final_text(&record)
    );
    ensure!(
        record["result"]["status"] == "completed" && final_text(&record).trim() == woken,
        "the record of the turn the leaf's result woke ({woke_task}) does not carry the reply {woken:?}: {record}"
    );

    // Level by level up: level k+1's last woken reply goes up into level k's chat as a
    // follow-up of its task, naming level k+2's task; there it wakes level k.
    let mut reply = woken;
    for k in (0..last).rev() {
        let (task, after) = (&tasks[k + 1], &tasks[k + 2]);
        let line = format!("{FOLLOW_UP}{after} finished]");
        until(
            deadline,
            &format!(
                "no follow-up of {task} (level {}) with its reply {reply:?} in {} within {WAIT:?} (the line {line:?})",
                k + 1,
                chats[k].shown()
            ),
            || {
                let msgs = messages(&api, &chats[k])?;
                Ok(blocks_of(&msgs, task)
                    .follow_ups
                    .iter()
                    .any(|(_, rest)| rest.contains(&reply))
                    .then_some(()))
            },
            || {
                format!(
                    "the chat holds: {}; atc started: {:?}",
                    summary(&messages(&api, &chats[k]).unwrap_or_default()),
                    auto.starts()
                )
            },
        )?;
        if k > 0 {
            reply = until(
                deadline,
                &format!("level {k} was not woken by the follow-up of {task}"),
                || {
                    let msgs = messages(&api, &chats[k])?;
                    Ok(wakes(&msgs, &woke[k])
                        .into_iter()
                        .find(|w| w.contains(&woke[k + 1])))
                },
                || summary(&messages(&api, &chats[k]).unwrap_or_default()),
            )?;
        }
    }
    eprintln!(
        "e2e tree: the last follow-up reached P after {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // Settle: kicks and the cadence go on; nothing may arrive twice.
    let settled = Instant::now() + SETTLE;
    while Instant::now() < settled {
        posted_once(&auto)?;
        sleep(POLL);
    }
    // Each chat of the tree: the result of the task below it once; a follow-up of that
    // task for each time the level below was woken (depth − k times for level k), each
    // once, naming the task below that one, and holding that woken reply.
    for k in 0..depth {
        let msgs = messages(&api, &chats[k])?;
        let task = &tasks[k + 1];
        let found = blocks_of(&msgs, task);
        ensure!(
            found.results == 1,
            "{} holds the result of {task} {} times: {}",
            chats[k].shown(),
            found.results,
            summary(&msgs)
        );
        let replies = if k + 1 < depth {
            let below = messages(&api, &chats[k + 1])?;
            wakes(&below, &woke[k + 1])
        } else {
            Vec::new()
        };
        ensure!(
            replies.len() == depth - k - 1,
            "level {} was woken {} times, not {}: {replies:?}",
            k + 1,
            replies.len(),
            depth - k - 1
        );
        ensure!(
            found.follow_ups.len() == replies.len(),
            "{} holds {} follow-ups of {task} for {} woken replies: {:?}",
            chats[k].shown(),
            found.follow_ups.len(),
            replies.len(),
            found.follow_ups
        );
        for woken in &replies {
            let carrying: Vec<&(String, String)> = found
                .follow_ups
                .iter()
                .filter(|(_, rest)| rest.contains(woken.as_str()))
                .collect();
            ensure!(
                carrying.len() == 1 && carrying[0].0 == tasks[k + 2],
                "the reply {woken:?} went up into {} as {carrying:?} (once, after {}, expected)",
                chats[k].shown(),
                tasks[k + 2]
            );
        }
    }
    let posted = posted_once(&auto)?;
    eprintln!(
        "e2e tree: {posted} atc turns on the server, none twice; took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    no_polling(ctx, &auto, &nonce, depth)?;
    auto.no_plugin_warnings()
}
