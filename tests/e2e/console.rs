//! Issue 30 in a real browser: atc's plugin's console bundle (`frontend.mjs`) on the real
//! QwenPaw 2.2.2.post1, in headless Chromium. One console page, opened on a parent chat
//! of the web console's own user, with a draft in its input box and a marker on `window`:
//! a watched child finishes and atc delivers its result (the plugin's end-of-turn kick,
//! no tick by the test); the page shows the delivered turn and the parent's reply within
//! a few seconds, without a reload, the draft still there. A turn delivered into another
//! chat leaves the open one alone; the person's own turn from the page is the page's
//! business; the bundle's pure functions pass their cases in the same browser.

use std::fs;
use std::path::PathBuf;
use std::rc::Rc;
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::R;
use crate::browser::{Browser, artifacts};
use crate::ensure;
use crate::kick::Kick;
use crate::scenarios::Ctx;

/// "Within a few seconds of the parent's reply": atc's kicked tick sends its toast about a
/// second after the reply, the page polls its toasts every 2.5 s and the bundle the chat's
/// status every 3 s (observed: ~2–3 s).
const WITHIN: Duration = Duration::from_secs(10);
const TURN_WAIT: Duration = Duration::from_secs(60);
/// The web console's own user: the chats a person starts there are theirs.
const USER: &str = "default";
const SESSION: &str = "front-open";

/// The console page every console scenario uses, made by the first that runs.
pub struct Front {
    pub kick: Kick,
    pub browser: Browser,
    /// The open chat's id (its uuid, in the page's path).
    pub chat: String,
    pub draft: String,
    pub marker: String,
}

fn js(s: &str) -> String {
    Value::from(s).to_string()
}

const INPUT: &str = "document.querySelector('textarea.qwenpaw-sender-input')";

pub fn front(ctx: &Ctx) -> R<Rc<Front>> {
    if let Some(f) = ctx.front.borrow().as_ref() {
        return Ok(f.clone());
    }
    let kick = crate::kick::server(ctx, "front")?;
    let api = kick.server.api();
    // The list the console imports plugin bundles from names atc's.
    let listed = api.get("/api/frontend_plugin", None)?;
    let entry = listed
        .json()?
        .as_array()
        .and_then(|all| all.iter().find(|p| p["id"] == "atc").cloned())
        .ok_or_else(|| format!("GET /api/frontend_plugin lists no atc: {}", listed.body))?;
    ensure!(
        entry["frontend_entry"] == "frontend.mjs" && entry["loaded"] == true,
        "atc's plugin is listed without its frontend: {entry}"
    );
    ctx.record("frontend_plugin_atc", &entry.to_string());

    api.make_parent("default", USER, SESSION)?;
    let chat = api
        .chat_id("default", USER, SESSION)?
        .ok_or("no parent chat")?;
    let dir = ctx.scratch.path().join(ctx.uniq("browser"));
    fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let browser = Browser::start(&ctx.venv.python, &dir)?;
    browser.open(&format!("{}/chat/{chat}", kick.server.root()))?;
    browser.wait_for(
        "the parent chat, its input box and atc's bundle",
        &format!(
            "!!{INPUT} && document.body.innerText.includes({}) && typeof window.__atcConsole === 'object'",
            js(&format!("ECHO: hello from parent {SESSION}"))
        ),
        Duration::from_secs(60),
    )?;
    let marker = ctx.uniq("not-reloaded");
    let draft = "a draft the person has not sent yet".to_string();
    // The input box may still be re-rendered right after the chat loads: type until it
    // holds the draft.
    for _ in 0..5 {
        browser.eval(&format!(
            "window.__atcE2e = {}; {INPUT}.focus(); {INPUT}.value = ''; 1",
            js(&marker)
        ))?;
        browser.insert(&draft)?;
        sleep(Duration::from_millis(300));
        if browser.eval(&format!("{INPUT}.value"))? == draft.as_str() {
            break;
        }
    }
    ensure!(
        browser.eval(&format!("{INPUT}.value"))? == draft.as_str(),
        "could not type the draft into the input box"
    );
    let front = Rc::new(Front {
        kick,
        browser,
        chat,
        draft,
        marker,
    });
    *ctx.front.borrow_mut() = Some(front.clone());
    Ok(front)
}

/// How often `needle` occurs in the page's text.
fn occurrences(browser: &Browser, needle: &str) -> R<u64> {
    let n = browser.eval(&format!(
        "document.body.innerText.split({}).length - 1",
        js(needle)
    ))?;
    Ok(n.as_u64().unwrap_or(0))
}

fn shot(browser: &Browser, name: &str) -> R<PathBuf> {
    let path = artifacts()?.join(format!("{name}.png"));
    browser.screenshot(&path)?;
    eprintln!("e2e: screenshot {}", path.display());
    Ok(path)
}

/// The parent's reply to the delivered turn of `task` is stored: when it first was.
fn replied(front: &Front, chat: &str, task: &str) -> R<Instant> {
    let api = front.kick.server.api();
    let deadline = Instant::now() + TURN_WAIT;
    let marker = format!("[TASK_ID: {task}]");
    loop {
        let (msgs, status) = api.chat(chat)?;
        if let Some(at) = msgs
            .iter()
            .position(|m| m.role == "user" && m.text.starts_with(&marker))
            && status == "idle"
            && msgs[at + 1..].iter().any(|m| m.role == "assistant")
        {
            return Ok(Instant::now());
        }
        ensure!(
            Instant::now() < deadline,
            "the parent never replied to the result of {task}"
        );
        sleep(Duration::from_millis(100));
    }
}

/// A child on the second agent, watched for the parent chat `session` of the console's
/// user; the plugin's kicks deliver it.
fn delegate(ctx: &Ctx, front: &Front, session: &str, work: &str) -> R<String> {
    let api = front.kick.server.api();
    let target = front.kick.server.second_agent()?;
    let child = api.submit(
        Some(&target),
        &ctx.uniq("front-child"),
        "default",
        work,
        None,
    )?;
    front.kick.atc(ctx)?.ok(&[
        "watch",
        &child,
        "--session",
        session,
        "--user",
        USER,
        "--agent",
        "default",
        "--target-agent",
        &target,
    ])?;
    Ok(child)
}

pub fn open_chat(ctx: &Ctx) -> R<()> {
    let front = front(ctx)?;
    let b = &front.browser;
    let navigations = b.navigations()?;

    // doctor, as the server's user, says the frontend part is loaded.
    let wd = front.kick.server.dir.path().join("home/.qwenpaw");
    let doctor = front.kick.atc(ctx)?.run_env(
        &["doctor"],
        &[("QWENPAW_WORKING_DIR", wd.to_str().unwrap_or(""))],
    )?;
    ensure!(
        doctor.stdout.lines().any(|l| l.starts_with(
            "✓ console: atc's frontend is loaded (frontend.mjs, which every console page imports at start-up)"
        )),
        "atc doctor does not say the console frontend is loaded: {}",
        doctor.stdout
    );

    let child = delegate(ctx, &front, SESSION, "front child SLEEP=2")?;
    let delivered = format!("[TASK_ID: {child}]");
    let reply = format!("ECHO: [TASK_ID: {child}]");
    ensure!(
        occurrences(b, &delivered)? == 0,
        "the page shows the result before it was delivered"
    );
    let replied = replied(&front, &front.chat, &child)?;
    let (shown, _) = b.wait_for(
        "the delivered turn and the parent's reply",
        &format!(
            "document.body.innerText.includes({}) && document.body.innerText.includes({})",
            js(&delivered),
            js(&reply)
        ),
        WITHIN + Duration::from_secs(20),
    )?;
    let took = shown.saturating_duration_since(replied);
    eprintln!(
        "e2e: console: the open chat showed the result {:.1} s after the parent's reply",
        took.as_secs_f64()
    );
    let path = shot(b, "console-open-chat")?;
    ensure!(
        took <= WITHIN,
        "the open chat showed the result {took:?} after the parent's reply (want ≤ {WITHIN:?}); {}",
        path.display()
    );
    // The delivered turn and the reply that quotes it, each once.
    ensure!(
        occurrences(b, &delivered)? == 2,
        "the page shows {delivered} {} times (want 2: the turn and the reply quoting it)",
        occurrences(b, &delivered)?
    );
    ensure!(
        b.eval(&format!("{INPUT}.value"))? == front.draft.as_str(),
        "the draft is gone from the input box: {}",
        b.eval(&format!("{INPUT}.value"))?
    );
    ensure!(
        b.eval("window.__atcE2e")? == front.marker.as_str(),
        "the marker on window is gone: the page was reloaded"
    );
    ensure!(
        b.navigations()? == navigations,
        "the page navigated ({} → {})",
        navigations,
        b.navigations()?
    );
    Ok(())
}

pub fn other_chat(ctx: &Ctx) -> R<()> {
    let front = front(ctx)?;
    let b = &front.browser;
    let api = front.kick.server.api();
    let other = "front-other";
    api.make_parent("default", USER, other)?;
    let other_chat = api
        .chat_id("default", USER, other)?
        .ok_or("no other parent chat")?;
    // What is still due about the open chat (the toast of an earlier delivery into it,
    // which only a tick that follows the parent's turn sends) goes out first, and the
    // page has polled it, before the watching starts.
    let atc = front.kick.atc(ctx)?;
    for _ in 0..10 {
        atc.ok(&["tick"])?;
        let pending = atc.turns()?.iter().any(|t| {
            t["forward"]["status"] == "pending"
                || (t["state"] == "delivered" && t["parent_turn"].is_null())
        });
        if !pending {
            break;
        }
        sleep(Duration::from_millis(500));
    }
    sleep(Duration::from_secs(4));
    let refreshes = b.eval("window.__atcConsole.refreshes")?;
    let navigations = b.navigations()?;
    let since = b.request_count()?;
    let child = delegate(ctx, &front, other, "other child")?;
    replied(&front, &other_chat, &child)?;
    // The toast about the other chat reaches this page (the bundle reads it too): the
    // next tick (a timer's) follows the parent's turn and sends it.
    let toast = format!("A result for {other}: the agent answered; open the chat to read it");
    let shows_toast = format!("document.body.innerText.includes({})", js(&toast));
    for _ in 0..10 {
        atc.ok(&["tick"])?;
        if b.eval(&shows_toast)? == true {
            break;
        }
        sleep(Duration::from_secs(1));
    }
    b.wait_for(
        "atc's toast about the other chat",
        &shows_toast,
        Duration::from_secs(15),
    )?;
    // ... and a few of the page's polls later the open chat was neither read nor redrawn.
    sleep(Duration::from_secs(7));
    shot(b, "console-other-chat")?;
    let open = format!("/api/chats/{}", front.chat);
    let requests = b.requests_since(since)?;
    let read: Vec<&String> = requests
        .iter()
        .filter(|(_, url)| url.split('?').next().is_some_and(|p| p.ends_with(&open)))
        .map(|(_, url)| url)
        .collect();
    ensure!(
        read.is_empty(),
        "the page read the open chat again after a turn in another chat: {read:?} (the bundle: {})",
        b.eval("JSON.stringify(window.__atcConsole)")?
    );
    // Meanwhile the page polled the chat list, whose entries the bundle reads.
    let lists = requests
        .iter()
        .filter(|(_, url)| {
            url.split('?')
                .next()
                .is_some_and(|p| p.ends_with("/api/chats"))
        })
        .count();
    ensure!(
        lists >= 2,
        "the chat list was polled {lists} times meanwhile: the bundle had nothing to read"
    );
    ensure!(
        b.eval("window.__atcConsole.refreshes")? == refreshes,
        "the bundle refreshed the open chat for a turn in another chat"
    );
    ensure!(
        occurrences(b, &format!("[TASK_ID: {child}]"))? == 0,
        "the open chat shows the other chat's result"
    );
    ensure!(b.navigations()? == navigations, "the page navigated");
    Ok(())
}

/// The sidebar folded away: the page polls no chat list, and the bundle reads the open
/// chat's entry itself, at the sidebar's rate (its user and channel only).
pub fn sidebar_folded(ctx: &Ctx) -> R<()> {
    let front = front(ctx)?;
    let b = &front.browser;
    let navigations = b.navigations()?;
    b.eval("document.querySelector('button[aria-label=\"Collapse sidebar\"]').click(); 1")?;
    // Until the page's own list polling has stopped.
    let page_lists = |since: usize| -> R<usize> {
        Ok(b.requests_since(since)?
            .iter()
            .filter(|(_, url)| url.contains("/api/chats?") && !url.contains("user_id="))
            .count())
    };
    sleep(Duration::from_secs(4));
    let since = b.request_count()?;
    sleep(Duration::from_secs(7));
    ensure!(
        page_lists(since)? == 0,
        "the page still polls the chat list with the sidebar folded"
    );
    let child = delegate(ctx, &front, SESSION, "folded child SLEEP=1")?;
    let replied = replied(&front, &front.chat, &child)?;
    let (shown, _) = b.wait_for(
        "the result delivered while the sidebar is folded",
        &format!(
            "document.body.innerText.includes({})",
            js(&format!("ECHO: [TASK_ID: {child}]"))
        ),
        WITHIN + Duration::from_secs(20),
    )?;
    let took = shown.saturating_duration_since(replied);
    eprintln!(
        "e2e: console: with the sidebar folded, the open chat showed the result {:.1} s after the parent's reply",
        took.as_secs_f64()
    );
    shot(b, "console-sidebar-folded")?;
    ensure!(
        took <= WITHIN,
        "with the sidebar folded the result showed {took:?} after the reply (want ≤ {WITHIN:?})"
    );
    let own: Vec<String> = b
        .requests_since(since)?
        .into_iter()
        .map(|(_, url)| url)
        .filter(|url| url.contains("/api/chats?"))
        .collect();
    ensure!(
        !own.is_empty()
            && own
                .iter()
                .all(|u| u.contains("user_id=default") && u.contains("channel=console")),
        "the bundle's own list reads: {own:?}"
    );
    ensure!(
        b.eval(&format!("{INPUT}.value"))? == front.draft.as_str(),
        "the draft is gone from the input box"
    );
    ensure!(b.navigations()? == navigations, "the page navigated");
    b.eval("document.querySelector('button[aria-label=\"Expand sidebar\"]')?.click(); 1")?;
    Ok(())
}

pub fn own_turn(ctx: &Ctx) -> R<()> {
    let front = front(ctx)?;
    let b = &front.browser;
    let refreshes = b.eval("window.__atcConsole.refreshes")?;
    let reply = format!("ECHO: {}", front.draft);
    let before = occurrences(b, &front.draft)?;
    b.eval(&format!("{INPUT}.focus(); 1"))?;
    b.key("Enter")?;
    b.wait_for(
        "the reply to the person's own message",
        &format!("document.body.innerText.includes({})", js(&reply)),
        TURN_WAIT,
    )?;
    // Past the chat's status going idle and the bundle's look at it.
    sleep(Duration::from_secs(7));
    shot(b, "console-own-turn")?;
    ensure!(
        occurrences(b, &reply)? == 1,
        "the reply to the person's own message shows {} times",
        occurrences(b, &reply)?
    );
    ensure!(
        occurrences(b, &front.draft)? == before + 2,
        "the person's message and the reply quoting it: the draft shows {} times (before: {before})",
        occurrences(b, &front.draft)?
    );
    ensure!(
        b.eval("window.__atcConsole.refreshes")? == refreshes,
        "the bundle redrew the chat after the person's own turn"
    );
    ensure!(
        b.eval(&format!("{INPUT}.value"))? == "",
        "the input box was not emptied by the send"
    );
    // The last console scenario: the browser and its server go now, not at the suite's end.
    drop(front);
    ctx.front.borrow_mut().take();
    Ok(())
}

/// tests/frontend/logic.mjs, the cases node runs in the fast suite, in this Chromium: the
/// bundle's pure functions as the browser that runs them sees them.
pub fn bundle_logic(ctx: &Ctx) -> R<()> {
    let front = front(ctx)?;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |rel: &str| fs::read_to_string(root.join(rel)).map_err(|e| format!("{rel}: {e}"));
    let bundle = read("examples/qwenpaw-plugin/atc/frontend.mjs")?;
    let cases = read("tests/frontend/logic.mjs")?;
    let failures = front.browser.eval(&format!(
        "(async () => {{
            const load = (src) => import(URL.createObjectURL(new Blob([src], {{ type: 'text/javascript' }})));
            const bundle = await load({});
            const cases = await load({});
            return cases.run(bundle, null);
        }})()",
        js(&bundle),
        js(&cases)
    ))?;
    ensure!(
        failures.as_array().is_some_and(|f| f.is_empty()),
        "the bundle's cases failed in {}: {failures}",
        front.browser.version
    );
    Ok(())
}
