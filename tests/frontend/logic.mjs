// Cases for the pure part of atc's console bundle (examples/qwenpaw-plugin/atc/frontend.mjs).
//
// `run(bundle, atc)` returns the failures, one line each (none: all passed). `atc` is what
// atc itself produces (tests/it/promises/frontend.rs makes it with the atc library): `toasts`, each
// `{text, session}` as `describe::toast_text` words it for that session, and `stored`, the
// metadata of atc's delivered user turns as QwenPaw stores them (its input metadata under
// `metadata`, contract §6). Run by node in the fast suite (tests/frontend/node.mjs) and,
// in the e2e suite, inside the Chromium that loads the console (console-bundle-logic).
// No imports: both callers hand the bundle in.

// A message of the console's view, as its converter builds them from a stored chat
// (console index-*.js `Ta` and `xy`): a user message is one request card whose input
// keeps the stored metadata; everything after it up to the next user message is one
// response card.
function user(id, metadata) {
  return {
    id,
    role: "user",
    cards: [{ code: "AgentScopeRuntimeRequestCard", data: { created_at: 1, input: [{ role: "user", type: "message", content: [{ type: "text", text: id }], metadata }] } }],
  };
}
function reply() {
  return { id: "r" + Math.random(), role: "assistant", cards: [{ code: "AgentScopeRuntimeResponseCard", data: { output: [], status: "completed" } }], msgStatus: "finished" };
}
// QwenPaw's stored metadata around the input metadata a turn was posted with.
function stored(inner) {
  return { original_id: "m1", original_name: "user", metadata: { ...inner, qwenpaw_tag: "external_user_query", qwenpaw_turn_state: { status: "completed" } }, timestamp: "2026-12-01T21:03:12+00:00" };
}

export function run(b, atc) {
  const failures = [];
  const same = (what, got, want) => {
    const g = JSON.stringify(got);
    const w = JSON.stringify(want);
    if (g !== w) failures.push(`${what}: got ${g}, want ${w}`);
  };

  const a1 = stored({ qwenpaw_client_message_id: "atc-j1", atc_task_id: "task-000000000001" });
  const a2 = stored({ qwenpaw_client_message_id: "atc-j2-c1", atc_task_id: "task-000000000002" });
  const mine = stored({ qwenpaw_client_message_id: "0b6f3c1e-8d0a-4e55-9a59-3c0f1f1e2d3c" });

  // The delivery id, where the console itself reads it.
  same("deliveryId nested", b.deliveryId(a1), "atc-j1");
  same("deliveryId flat", b.deliveryId({ qwenpaw_client_message_id: "x" }), "x");
  same("deliveryId none", b.deliveryId(null), undefined);
  same("deliveryId not a string", b.deliveryId({ metadata: { qwenpaw_client_message_id: 7 } }), undefined);

  // atc's turns: an atc- id and the task it carries.
  same("isAtcTurn result", b.isAtcTurn(a1), true);
  same("isAtcTurn check-in", b.isAtcTurn(a2), true);
  same("isAtcTurn the person's own", b.isAtcTurn(mine), false);
  same("isAtcTurn atc- id without a task", b.isAtcTurn(stored({ qwenpaw_client_message_id: "atc-x" })), false);
  same("isAtcTurn nothing", b.isAtcTurn(undefined), false);
  same("isAtcTurn no metadata (an MQTT person's turn)", b.isAtcTurn(null), false);

  const chat = [user("u0", mine), reply(), user("u1", a1), reply(), user("u2", a2)];
  same("atcTurns", b.atcTurns(chat), [{ id: "atc-j1", answered: true }, { id: "atc-j2-c1", answered: false }]);
  same("atcTurns of nothing", b.atcTurns(undefined), []);
  same("atcTurns, two user turns in a row", b.atcTurns([user("u1", a1), user("u0", mine)]), [{ id: "atc-j1", answered: false }]);

  // Refresh when the view lacks an atc turn the stored chat has, or its reply.
  const before = [user("u0", mine), reply()];
  const delivered = [user("u0", mine), reply(), user("u1", a1), reply()];
  same("the delivered turn and its reply are missing", b.needsRefresh(delivered, before), true);
  same("only the reply is missing", b.needsRefresh(delivered, [user("u0", mine), reply(), user("u1", a1)]), true);
  same("the view has both", b.needsRefresh(delivered, delivered), false);
  same("a turn of the person's own is new", b.needsRefresh([...before, user("u3", mine), reply()], before), false);
  same("the view has more than the stored chat", b.needsRefresh(before, delivered), false);
  same("an atc turn without a reply yet, shown", b.needsRefresh([user("u1", a1)], [user("u1", a1)]), false);
  same("an atc turn without a reply yet, not shown", b.needsRefresh([user("u1", a1)], []), true);

  // atc's toasts: which session they name.
  same("toast for s", b.toastNames("A result for s: the agent answered; open the chat to read it", "s"), true);
  same("toast for another session", b.toastNames("A result for s-2: the agent answered; open the chat to read it", "s"), false);
  same("toast for a session this one is a prefix of", b.toastNames("A result for s: x", "s-2"), false);
  same("not atc's toast", b.toastNames("Cron job for s: done", "s"), false);
  same("no session open", b.toastNames("A result for s: x", null), false);
  same("no text", b.toastNames(undefined, "s"), false);

  const seen = new Set();
  const pushed = [{ id: "p1", text: "A notice for s: open the chat to read it" }, { id: "p2", text: "A result for t: x" }];
  same("toastFor: this session's toast", b.toastFor(pushed, "s", seen), true);
  same("toastFor: the same toast polled again", b.toastFor(pushed, "s", seen), false);
  same("toastFor: another session's", b.toastFor([{ id: "p3", text: "A result for t: x" }], "s", seen), false);
  same("toastFor: nothing pushed", b.toastFor(undefined, "s", seen), false);

  // A turn in the chat ended: its list entry says so, however short the turn was.
  const idle = { id: "c1", status: "idle", last_finished_at: "2026-12-01T21:06:08.136276Z" };
  same("entryOf", b.entryOf([{ id: "c0" }, idle], "c1"), idle);
  same("entryOf none", b.entryOf([{ id: "c0" }], "c1"), undefined);
  same("entryOf no list", b.entryOf(null, "c1"), undefined);
  same("turnEnded: nothing before", b.turnEnded(null, idle), false);
  same("turnEnded: the same entry", b.turnEnded(idle, { ...idle }), false);
  same("turnEnded: finished again", b.turnEnded(idle, { ...idle, last_finished_at: "2026-12-01T21:18:45.000001Z" }), true);
  same("turnEnded: a turn started", b.turnEnded(idle, { ...idle, status: "running" }), false);
  same("turnEnded: the running turn ended", b.turnEnded({ ...idle, status: "running" }, { ...idle, status: "idle" }), true);
  same("turnEnded: a first turn ended", b.turnEnded({ id: "c1", status: "running", last_finished_at: null }, idle), true);
  same("turnEnded: still running", b.turnEnded({ ...idle, status: "running" }, { ...idle, status: "running" }), false);

  // The open chat, from the console's route.
  same("chatIdOf a chat", b.chatIdOf("/chat/62f5c32f-75c6-4c6b-b135-484c0d31d923"), "62f5c32f-75c6-4c6b-b135-484c0d31d923");
  same("chatIdOf an encoded id", b.chatIdOf("/chat/a%20b"), "a b");
  same("chatIdOf the chat list", b.chatIdOf("/chat"), null);
  same("chatIdOf a deeper path", b.chatIdOf("/chat/a/b"), null);
  same("chatIdOf another page", b.chatIdOf("/settings/general"), null);
  same("chatIdOf a bad encoding", b.chatIdOf("/chat/%E0%A4%A"), null);
  same("isLocalId unsaved", b.isLocalId("1796159108989-mp2l4y0eb"), true);
  same("isLocalId saved", b.isLocalId("62f5c32f-75c6-4c6b-b135-484c0d31d923"), false);

  // What atc itself posts and says, through the same functions.
  if (atc) {
    for (const t of atc.toasts) {
      same(`atc's toast names its session (${t.text})`, b.toastNames(t.text, t.session), true);
      same(`atc's toast names no other session (${t.text})`, b.toastNames(t.text, t.session + "-other"), false);
    }
    for (const m of atc.stored) {
      same(`atc's delivered turn is atc's (${JSON.stringify(m)})`, b.isAtcTurn(m), true);
    }
    if (!atc.toasts.length || !atc.stored.length) failures.push("atc gave no toasts or no turns to check");
  }
  return failures;
}
