// atc's QwenPaw console bundle: an open chat page shows a result atc delivered into it,
// and the agent's reply, once that turn has ended, without a reload.
//
// QwenPaw 2.2.2's console never re-reads the open chat: it polls the sidebar's chat list,
// its toasts and its inbox, so a turn posted from outside (atc's delivery) and the reply
// it wakes stay invisible until the page is reloaded. The console imports this file once,
// at start-up (`plugin.json` `entry.frontend`, listed by `GET /api/frontend_plugin`).
// While a chat page is open it reads along what the page already polls: the chat list
// (every 3 s, the sidebar's poll), whose entry for the open chat says when a turn in it
// last ended, and the push messages (every 2.5 s, the toasts), where atc's toast names the
// chat's session. With the sidebar folded away the page stops polling the list, and the
// bundle asks for it itself, at the sidebar's rate. When a turn in the open chat has ended
// it reads the chat once and, if an atc turn (a user message whose delivery id is
// `atc-…`, with `atc_task_id`) is missing from the view or lacks its reply there, shows
// the chat as stored: the very refresh the chat page does itself after its input queue
// ran (`refreshSession`, then `setSessionMessages`). The input box, its draft, the scroll
// position and the page itself stay as they are.
//
// Plain JavaScript, no build step, no dependency. Everything that reads QwenPaw's page
// is at the bottom and does nothing when it does not find what it expects (another
// QwenPaw version): the page then behaves as without this bundle. The functions above it
// are pure; tests/frontend/logic.mjs runs them (under node, and in the e2e's Chromium).

/** The sidebar's own poll period (console index-*.js: `setInterval(…, 3e3)`). */
export const POLL_MS = 3000;

/** The delivery id QwenPaw keeps on a stored user message (`metadata.metadata`), as the
 * console itself reads it (its `fy`). */
export function deliveryId(metadata) {
  if (!metadata || typeof metadata !== "object") return undefined;
  const inner = metadata.metadata;
  const fields = inner && typeof inner === "object" ? inner : metadata;
  const id = fields.qwenpaw_client_message_id;
  return typeof id === "string" ? id : undefined;
}

/** Is this stored user message's metadata one of atc's deliveries? atc posts every turn
 * with `qwenpaw_client_message_id` `atc-<job>[-…]` and `atc_task_id` (src/qwenpaw/chat.rs,
 * `turn_body`). */
export function isAtcTurn(metadata) {
  const id = deliveryId(metadata);
  if (!id || !id.startsWith("atc-")) return false;
  const inner = metadata.metadata && typeof metadata.metadata === "object" ? metadata.metadata : metadata;
  return typeof inner.atc_task_id === "string";
}

/** The metadata of a user message in the console's view (its cards format:
 * `cards[0].data.input[0].metadata`). */
function viewMetadata(message) {
  const card = message && Array.isArray(message.cards) ? message.cards[0] : undefined;
  const input = card && card.data && Array.isArray(card.data.input) ? card.data.input[0] : undefined;
  return input ? input.metadata : undefined;
}

/** atc's turns in a list of view messages, in order: `{id, answered}`, `answered` when
 * something other than a user message follows it (the console renders a turn's replies,
 * and a failed turn's error, as one response after it). */
export function atcTurns(messages) {
  const turns = [];
  const list = Array.isArray(messages) ? messages : [];
  list.forEach((message, i) => {
    if (!message || message.role !== "user") return;
    const metadata = viewMetadata(message);
    if (!isAtcTurn(metadata)) return;
    const next = list[i + 1];
    turns.push({ id: deliveryId(metadata), answered: !!next && next.role !== "user" });
  });
  return turns;
}

/** Does the view (`shown`) lack an atc turn the stored chat (`stored`) has, or its reply? */
export function needsRefresh(stored, shown) {
  const have = new Map(atcTurns(shown).map((t) => [t.id, t.answered]));
  return atcTurns(stored).some((t) => !have.has(t.id) || (t.answered && !have.get(t.id)));
}

/** Is `text` atc's toast about session `sessionId`? atc's toast names the session after
 * what arrived (src/describe.rs, `toast_text`): "A result for <session>: …", "A notice
 * for …", "A check-in for …", "3 results for …". */
export function toastNames(text, sessionId) {
  if (typeof text !== "string" || !sessionId) return false;
  const m = /^(?:A result|A notice|A check-in|\d+ results) for /.exec(text);
  return !!m && text.startsWith(sessionId + ": ", m[0].length);
}

/** The chat id of a console path (`/chat/<id>`, the console's own route), or null. */
export function chatIdOf(pathname) {
  const m = /^\/chat\/([^/?#]+)$/.exec(typeof pathname === "string" ? pathname : "");
  if (!m) return null;
  try {
    return decodeURIComponent(m[1]);
  } catch {
    return null;
  }
}

/** The entry of chat `id` in a chat list (`GET /api/chats`), or undefined. */
export function entryOf(list, id) {
  return Array.isArray(list) ? list.find((c) => c && c.id === id) : undefined;
}

/** Has a turn in the chat ended since its entry read `before`? The entry's
 * `last_finished_at` moves at every turn's end (however short the turn: a status poll
 * misses most), and a turn seen running is over once it no longer is. */
export function turnEnded(before, now) {
  if (!before || !now) return false;
  const moved = !!now.last_finished_at && now.last_finished_at !== before.last_finished_at;
  return moved || (before.status === "running" && now.status !== "running");
}

/** The console names a chat it has not saved yet by a local id (`<ms>-<random>`). */
export function isLocalId(id) {
  return /^\d+-[a-z0-9]+$/.test(id);
}

/** Does the text of push messages `messages` hold atc's toast for `sessionId`, among
 * those whose id is not in `seen` (which it extends)? */
export function toastFor(messages, sessionId, seen) {
  let found = false;
  for (const m of Array.isArray(messages) ? messages : []) {
    if (!m || typeof m.id !== "string" || seen.has(m.id)) continue;
    seen.add(m.id);
    if (toastNames(m.text, sessionId)) found = true;
  }
  if (seen.size > 500) seen.clear();
  return found;
}

// ---------------------------------------------------------------------------------------
// The page. Reads QwenPaw 2.2.2.post1's console (tests/e2e/README.md, "The web console",
// names the places): its host API (`window.QwenPaw.host.fetch`, `getCurrentSessionId`),
// its session manager (an export of the entry module with `refreshSession`), and the
// chat view's React contexts above the input box (`setSessionMessages`,
// `getSessionLoading`, `getCurrentSessionId`).

function start(win) {
  const doc = win.document;
  const host = win.QwenPaw.host;
  // chat: the open chat's id; entry: its chat-list entry as last read; listedAt: when the
  // page itself last polled the list; due: a look at the chat is due until then.
  // (The page polls its list from the start: give it one period before asking ourselves.)
  const state = { chat: null, real: null, entry: null, listedAt: Date.now(), due: 0, busy: false, seen: new Set() };
  const said = new Set();
  const once = (what, ...args) => {
    if (!said.has(what)) {
      said.add(what);
      win.console.warn("[atc]", ...args);
    }
  };
  const stats = { checks: 0, refreshes: 0 };
  Object.defineProperty(win, "__atcConsole", { value: stats, configurable: true });

  // The session manager the chat page itself uses: the same module instance (the
  // entry script is already loaded; importing it again fetches nothing).
  let manager = null;
  const sessions = () => {
    if (!manager) {
      const entry = Array.from(doc.scripts).find((s) => s.type === "module" && s.src);
      manager = entry
        ? import(entry.src).then(
            (mod) =>
              Object.values(mod).find(
                (v) =>
                  v &&
                  typeof v.refreshSession === "function" &&
                  typeof v.getRealIdForSession === "function",
              ) || null,
            () => null,
          )
        : Promise.resolve(null);
    }
    return manager;
  };

  // The chat view's contexts, found from the input box up (React keeps each fiber on its
  // DOM node); null on any other page or console.
  const view = () => {
    const box = doc.querySelector("textarea.qwenpaw-sender-input") || doc.querySelector("[class*='sender'] textarea");
    const key = box && Object.keys(box).find((k) => k.startsWith("__reactFiber$"));
    const found = {};
    for (let f = key ? box[key] : null; f; f = f.return) {
      const v = f.memoizedProps && f.memoizedProps.value;
      if (!v || typeof v !== "object") continue;
      if (!found.messages && typeof v.setSessionMessages === "function" && typeof v.getSessionMessages === "function") found.messages = v;
      if (!found.loading && typeof v.getSessionLoading === "function") found.loading = v;
      if (!found.session && typeof v.getCurrentSessionId === "function" && "sessions" in v) found.session = v;
    }
    return found.messages && found.loading && found.session ? found : null;
  };

  const check = async () => {
    if (state.busy) return;
    state.busy = true;
    try {
      const sm = await sessions();
      const v = view();
      if (!sm || (!v && doc.querySelector("textarea"))) {
        once("internals", "this console is not the one atc's frontend knows (QwenPaw 2.2.2): open chats are not refreshed");
        state.due = 0;
        return;
      }
      // The chat view is not there (yet): the next tick looks again.
      if (!v) return;
      const id = v.session.getCurrentSessionId();
      if (!id || (id !== state.chat && sm.getRealIdForSession(id) !== state.chat)) return;
      // The page runs a turn of its own here (or follows one): it shows that itself.
      if (v.loading.getSessionLoading(id)) return;
      stats.checks += 1;
      const stored = await sm.refreshSession(id);
      // Read, or not to be read now: another turn running has no stored history yet, and
      // its end moves the chat's entry again.
      state.due = 0;
      if (!stored || stored.generating) return;
      if (chatIdOf(win.location.pathname) !== state.chat || v.loading.getSessionLoading(id)) return;
      if (needsRefresh(stored.messages, v.messages.getSessionMessages(id))) {
        v.messages.setSessionMessages(id, stored.messages);
        stats.refreshes += 1;
      }
    } catch (err) {
      once("check", "could not refresh the open chat:", err);
      state.due = 0;
    } finally {
      state.busy = false;
    }
  };

  // A look is due for a while after a turn ended (the page may still be finishing one).
  const due = () => {
    state.due = Date.now() + 60000;
    check();
  };

  // The open chat, as the page's path names it now.
  const follow = () => {
    const chat = chatIdOf(win.location.pathname);
    if (chat !== state.chat) {
      state.chat = chat;
      state.real = null;
      state.entry = null;
      state.due = 0;
    }
    return chat;
  };

  // The open chat's entry in a chat list (the page's, or our own).
  const listed = (list) => {
    if (!follow()) return;
    const real = state.real || state.chat;
    const entry = entryOf(list, real);
    if (!entry) return;
    // The first entry read for this chat: one look now covers whatever ended before it
    // (between the page's load of the chat and this read); later ends move the entry.
    if (!state.entry || turnEnded(state.entry, entry)) due();
    state.entry = { last_finished_at: entry.last_finished_at, status: entry.status };
  };

  // atc's toast about the open chat's session.
  const pushed = (body) => {
    const session = host.getCurrentSessionId && host.getCurrentSessionId();
    if (toastFor(body && body.messages, session, state.seen) && follow()) due();
  };

  const tick = async () => {
    const chat = follow();
    if (!chat || isLocalId(chat) || doc.visibilityState !== "visible") return;
    const sm = await sessions();
    state.real = (sm && sm.getRealIdForSession(chat)) || chat;
    // The sidebar folded away polls nothing: ask for the list at its rate, only the open
    // chat's user and channel.
    if (Date.now() - state.listedAt > 2 * POLL_MS + 500) {
      try {
        const known = sm && typeof sm.findSession === "function" ? sm.findSession(chat) : null;
        const query = new URLSearchParams({ archived: "false", include_app_owned: "false" });
        if (known && known.userId && known.channel) {
          query.set("user_id", known.userId);
          query.set("channel", known.channel);
        }
        const answer = await host.fetch(`/chats?${query}`, { atcOwn: true });
        if (answer.ok) listed(await answer.json());
      } catch {
        // No list this time: the next tick asks again.
      }
    }
    if (state.due > Date.now()) check();
  };

  // What the page polls, read along (a copy of each answer): never asked for again, never
  // consumed.
  const fetch = win.fetch;
  const read = (answer, use) => {
    try {
      if (!answer.ok) return;
      answer
        .clone()
        .json()
        .then(use)
        .catch(() => {});
    } catch {
      // The page read the body first: its next poll comes soon.
    }
  };
  win.fetch = function (...args) {
    const answer = fetch.apply(this, args);
    try {
      const target = args[0];
      const init = args[1] || {};
      const method = String(init.method || (target && target.method) || "GET").toUpperCase();
      const url = new URL(typeof target === "string" ? target : String((target && target.url) || target), win.location.href);
      if (method !== "GET") {
        // Not a poll.
      } else if (url.pathname.endsWith("/api/console/push-messages")) {
        answer.then((r) => read(r, pushed), () => {});
      } else if (url.pathname.endsWith("/api/chats") && !init.atcOwn) {
        state.listedAt = Date.now();
        answer.then((r) => read(r, listed), () => {});
      }
    } catch {
      // Not a request this bundle reads.
    }
    return answer;
  };

  const loop = () => {
    tick()
      .catch(() => {})
      .finally(() => win.setTimeout(loop, POLL_MS));
  };
  win.setTimeout(loop, POLL_MS);
}

if (typeof window !== "undefined" && window.QwenPaw && window.QwenPaw.host && !window.__atcConsole) {
  start(window);
}
