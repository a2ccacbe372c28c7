#!/usr/bin/env python3
"""A deterministic fake OpenAI-compatible LLM for atc's real-QwenPaw scenarios.

Standard library only. Routes:

  GET  /v1/models              -> one model list
  POST /v1/chat/completions    -> streaming (SSE) or plain completion

What it answers depends on the *last user text* of the request (see
``last_user_text``):

  contains ``SLEEP=<n>``       -> sleeps n seconds first, then the rules below
  contains ``FAIL``            -> HTTP 500
  contains ``RUNSHELL: <cmd>`` -> a tool call to ``execute_shell_command`` with
                                  command <cmd> (the rest of the text); when the
                                  next request's last message is that tool's
                                  result, the reply is the tool output text
  contains ``SKILLTEST: delegate <text> to <agent>``
                               -> what the atc-callback skill prescribes, in three
                                  steps: a tool call ``submit_to_agent(to_agent=<agent>,
                                  text=<text>)``; after its result, a tool call to
                                  ``execute_shell_command`` with ``atc watch <TASK_ID>
                                  --session S --user U --channel C --agent A
                                  --target-agent <agent>`` (the task id parsed from the
                                  result, S/U/C/A from the system prompt QwenPaw sent);
                                  after that, the final text "Delegated; the result
                                  will come back by itself."
  contains ``CALLTOOL: <name> <json object>``
                               -> a tool call to <name> with those arguments (a plugin
                                  tool, e.g. ``watch_agent_task``); after its result,
                                  the final text is the tool's output
  contains ``CALLTOOLS: <json list of [name, {arguments}]>``
                               -> those tool calls, one per model step, in order (the
                                  n-th once n-1 tool results followed the user's turn),
                                  then the final text: the last tool's output. In an
                                  argument string ``$TASK_ID``/``$SESSION`` stand for the
                                  last ``[TASK_ID: …]``/``[SESSION: …]`` a tool of this
                                  turn returned, ``$TASK_ID1``, ``$TASK_ID2``… for each
                                  in the order they came
  contains ``DELEGATE: <json object>`` (``to_agent``, ``text``; optional ``woken``,
  ``sleep``)                   -> a delegation tree's node: a tool call
                                  ``submit_to_agent(to_agent, text)`` (``text`` may hold
                                  the next level's ``DELEGATE:``); after its result, the
                                  interim final text "Delegated to <agent> as <task id>;
                                  its answer comes back here." (after ``sleep`` seconds).
                                  Later, in the same chat, a delivered result (a text with
                                  a ``[TASK_ID: …]`` line) wakes it: with ``woken`` set,
                                  the reply is ``<woken> wake <n> (woken by <task id>;
                                  heard: <the MARK_… words of that text>)`` (n counts the
                                  delivered texts of the chat so far); without, the usual
                                  echo
  anything else                -> ``ECHO: <last user text>``

A text that starts with ``[TASK_ID:`` is a background-task result delivered into
a parent chat (by atc). It echoes back but never acts as a directive: a child's
``ECHO: ... SLEEP=5`` must not make the parent's resumed turn sleep or fail. Two
markers in it do shape the woken parent's answer (for the IM-channel scenarios):

  ``IM-PARENT: TOOL``          -> "I will inspect the result first." together with a
                                  tool call (``echo inspected``); after the tool's
                                  result, the final text ``FINAL: the person's answer``
  ``IM-PARENT: EMPTY``         -> an empty final answer

Usage: fake_llm.py [PORT]   (0 or nothing: pick a free port)
Prints ``PORT <n>`` on stdout once listening.  FAKE_LLM_LOG=<file> appends
every request body as one JSON line (for inspecting what QwenPaw sends).
"""

import json
import os
import re
import shlex
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "fake-echo"
IM_INTERMEDIATE = "I will inspect the result first."
IM_FINAL = "FINAL: the person's answer"
SKILL_FINAL = "Delegated; the result will come back by itself."
_CALLTOOL = re.compile(r"CALLTOOL:\s*(\w+)\s*(\{.*\})?\s*$", re.S)
_CALLTOOLS = re.compile(r"CALLTOOLS:\s*(\[.*\])\s*$", re.S)
_SKILLTEST = re.compile(r"SKILLTEST:\s*delegate\s+(.+)\s+to\s+(\S+)\s*$", re.S)
LOG_LOCK = threading.Lock()

# QwenPaw (agentscope) may wrap the user's words: a leading "[Time: ...]"
# style header or <system-reminder> blocks. These patterns strip such
# wrappers so "last user text" is what the caller posted.
_WRAPPERS = [
    re.compile(r"<system-reminder>.*?</system-reminder>", re.S),
]


def _text_of(content):
    """Flatten an OpenAI message content (str or list of parts) into text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if isinstance(part, dict):
            if part.get("type") == "text" and isinstance(part.get("text"), str):
                parts.append(part["text"])
        elif isinstance(part, str):
            parts.append(part)
    return "\n".join(parts)


def last_user_text(messages):
    """The text of the last ``role: user`` message, without QwenPaw's wrappers."""
    for msg in reversed(messages):
        if msg.get("role") == "user":
            text = _text_of(msg.get("content"))
            for pat in _WRAPPERS:
                text = pat.sub("", text)
            return text.strip()
    return ""


def _tool_name_of(messages, tool_msg):
    """The function name of the assistant tool call that ``tool_msg`` answers."""
    call_id = tool_msg.get("tool_call_id")
    for msg in reversed(messages):
        for call in msg.get("tool_calls") or []:
            if call.get("id") == call_id:
                return (call.get("function") or {}).get("name")
    return tool_msg.get("name")


def prompt_identity(messages):
    """(session, user, channel, agent) as the system prompt QwenPaw sent shows them
    (``- Session ID: …``, ``- User ID: …``, ``- Channel: …``,
    ``Your agent id is "…"``); None for a line that is missing."""
    system = "\n".join(_text_of(m.get("content")) for m in messages
                       if m.get("role") == "system")

    def line(label):
        m = re.search(r"^\s*-?\s*" + label + r":[ \t]*(\S[^\n]*?)[ \t]*$", system, re.M)
        return m.group(1) if m else None

    agent = re.search(r'Your agent id is "([^"\n]+)"', system)
    return (line("Session ID"), line("User ID"), line("Channel"),
            agent.group(1) if agent else None)


def skilltest(messages, last, text):
    """The three steps of ``SKILLTEST: delegate <text> to <agent>`` (see the module doc):
    (status, kind, payload, delay) or None when ``text`` is no such directive."""
    m = _SKILLTEST.search(text)
    if not m or text.startswith("[TASK_ID:"):
        return None
    child_text, to_agent = m.group(1).strip(), m.group(2)
    if last.get("role") != "tool":
        return 200, "call", ("submit_to_agent",
                             {"to_agent": to_agent, "text": child_text}), 0.0
    result = _text_of(last.get("content")).strip()
    if _tool_name_of(messages, last) == "submit_to_agent":
        task = re.search(r"\[TASK_ID:\s*([^\]\s]+)\s*\]", result)
        ident = prompt_identity(messages)
        if not task or None in ident:
            return 200, "text", ("SKILLTEST: cannot build the atc watch command "
                                 "(task id %r, prompt identity %r) from: %s"
                                 % (task and task.group(1), ident, result)), 0.0
        session, user, channel, agent = ident
        command = " ".join(["atc", "watch", shlex.quote(task.group(1)),
                            "--session", shlex.quote(session),
                            "--user", shlex.quote(user),
                            "--channel", shlex.quote(channel),
                            "--agent", shlex.quote(agent),
                            "--target-agent", shlex.quote(to_agent)])
        return 200, "tool", command, 0.0
    return 200, "text", SKILL_FINAL, 0.0


def calltools(messages, text):
    """The next step of ``CALLTOOLS: [...]`` (see the module doc): (status, kind, payload,
    delay), or None when ``text`` is no such directive."""
    m = _CALLTOOLS.search(text)
    if not m or text.startswith("[TASK_ID:"):
        return None
    try:
        steps = json.loads(m.group(1))
    except ValueError as err:
        return 200, "text", "CALLTOOLS: bad JSON: %s" % err, 0.0
    start = max((i for i, msg in enumerate(messages) if msg.get("role") == "user"), default=-1)
    results = [_text_of(msg.get("content")) for msg in messages[start + 1:]
               if msg.get("role") == "tool"]
    if len(results) >= len(steps):
        return 200, "text", results[-1].strip() if results else "", 0.0
    tasks, sessions = [], []
    for result in results:
        tasks += re.findall(r"\[TASK_ID:\s*([^\]\s]+)\s*\]", result)
        sessions += re.findall(r"\[SESSION:\s*([^\]\n]+?)\s*\]", result)

    def fill(value):
        if isinstance(value, str):
            for n in range(len(tasks), 0, -1):
                value = value.replace("$TASK_ID%d" % n, tasks[n - 1])
            if tasks:
                value = value.replace("$TASK_ID", tasks[-1])
            if sessions:
                value = value.replace("$SESSION", sessions[-1])
            return value
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v) for v in value]
        return value

    name, args = steps[len(results)]
    return 200, "call", (name, fill(args)), 0.0


_DELEGATE = re.compile(r"DELEGATE:\s*(\{.*\})\s*$", re.S)
_TASK_LINE = re.compile(r"^\[TASK_ID:\s*([^\]\s]+)\s*\]", re.M)
_MARK = re.compile(r"\bMARK_\w+")


def _delegate_spec(text):
    """The JSON object of a ``DELEGATE:`` directive in ``text`` (a dict), else None."""
    m = _DELEGATE.search(text)
    if not m:
        return None
    try:
        spec = json.loads(m.group(1))
    except ValueError as err:
        return {"bad": str(err)}
    return spec if isinstance(spec, dict) else {"bad": "not an object"}


def _delivered(text):
    """Whether a user text is a delivered result (a ``[TASK_ID: …]`` line), not a directive."""
    return "DELEGATE:" not in text and _TASK_LINE.search(text) is not None


def delegate(messages, last, text):
    """A node of a delegation tree (``DELEGATE:``, see the module doc): (status, kind,
    payload, delay), or None when neither this turn's text nor the chat's first directive
    is one."""
    users = [i for i, msg in enumerate(messages) if msg.get("role") == "user"]
    if not users:
        return None
    texts = [last_user_text([messages[i]]) for i in users]
    if _delivered(text):
        spec = next((s for s in map(_delegate_spec, texts[:-1]) if s is not None), None)
        if not spec or not isinstance(spec.get("woken"), str):
            return None
        woken = spec["woken"]
        heard = []
        for mark in _MARK.findall(text):
            if mark != woken and mark not in heard:
                heard.append(mark)
        wake = sum(1 for t in texts if _delivered(t))
        return 200, "text", "%s wake %d (woken by %s; heard: %s)" % (
            woken, wake, _TASK_LINE.search(text).group(1), ", ".join(heard) or "nothing"), 0.0
    spec = _delegate_spec(text)
    if spec is None or text.startswith("[TASK_ID:"):
        return None
    if "bad" in spec or not isinstance(spec.get("to_agent"), str) \
            or not isinstance(spec.get("text"), str):
        return 200, "text", "DELEGATE: bad directive: %s" % spec, 0.0
    results = [msg for msg in messages[users[-1] + 1:] if msg.get("role") == "tool"]
    if not results:
        return 200, "call", ("submit_to_agent",
                             {"to_agent": spec["to_agent"], "text": spec["text"]}), 0.0
    task = re.search(r"\[TASK_ID:\s*([^\]\s]+)\s*\]", _text_of(results[-1].get("content")))
    return 200, "text", "Delegated to %s as %s; its answer comes back here." % (
        spec["to_agent"], task.group(1) if task else "(no task id)"), float(spec.get("sleep") or 0)


def decide(body):
    """Return (http_status, kind, payload, delay_seconds)."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    text = last_user_text(messages)
    tree = delegate(messages, last, text)
    if tree is not None:
        return tree
    skill = skilltest(messages, last, text)
    if skill is not None:
        return skill
    steps = calltools(messages, text)
    if steps is not None:
        return steps
    if last.get("role") == "tool":
        if text.startswith("[TASK_ID:") and "IM-PARENT: TOOL" in text:
            return 200, "text", IM_FINAL, 0.0
        # Report the tool's output as the answer.
        return 200, "text", _text_of(last.get("content")).strip(), 0.0
    if text.startswith("[TASK_ID:"):
        if "IM-PARENT: TOOL" in text:
            return 200, "tool+text", "echo inspected", 0.0
        if "IM-PARENT: EMPTY" in text:
            return 200, "text", "", 0.0
        return 200, "text", "ECHO: " + text, 0.0
    m = _CALLTOOL.search(text)
    if m:
        try:
            args = json.loads(m.group(2) or "{}")
        except ValueError as err:
            return 200, "text", "CALLTOOL: bad JSON arguments: %s" % err, 0.0
        return 200, "call", (m.group(1), args), 0.0
    delay = 0.0
    m = re.search(r"SLEEP=(\d+(?:\.\d+)?)", text)
    if m:
        delay = float(m.group(1))
    if "FAIL" in text:
        return 500, "fail", "fake LLM: failure requested by the prompt", delay
    m = re.search(r"RUNSHELL:\s*(.+)", text, re.S)
    if m:
        return 200, "tool", m.group(1).strip(), delay
    return 200, "text", "ECHO: " + text, delay


def _chunk(cid, created, delta, finish=None, usage=None):
    obj = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        obj["usage"] = usage
    return obj


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-llm/1"

    def log_message(self, fmt, *args):  # quiet
        if os.environ.get("FAKE_LLM_VERBOSE"):
            sys.stderr.write("fake_llm: " + (fmt % args) + "\n")

    def _send_json(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        path = self.path.split("?", 1)[0].rstrip("/")
        if path.endswith("/models"):
            self._send_json(200, {"object": "list", "data": [
                {"id": MODEL, "object": "model", "created": 0, "owned_by": "atc-e2e"}]})
        else:
            self._send_json(404, {"error": {"message": "no route " + self.path}})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0].rstrip("/")
        if not path.endswith("/chat/completions"):
            self._send_json(404, {"error": {"message": "no route " + self.path}})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send_json(400, {"error": {"message": "invalid JSON"}})
            return
        log = os.environ.get("FAKE_LLM_LOG")
        if log:
            with LOG_LOCK, open(log, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(body, ensure_ascii=False) + "\n")

        status, kind, payload, delay = decide(body)
        if delay:
            time.sleep(delay)
        if status != 200:
            self._send_json(status, {"error": {"message": payload, "type": "server_error",
                                               "code": "fake_failure"}})
            return

        cid = "chatcmpl-" + uuid.uuid4().hex[:12]
        created = int(time.time())
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if kind in ("tool", "tool+text", "call"):
            name, args = (payload if kind == "call"
                          else ("execute_shell_command", {"command": payload}))
            call = {"id": "call_" + uuid.uuid4().hex[:12], "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)}}
            said = IM_INTERMEDIATE if kind == "tool+text" else None
            message = {"role": "assistant", "content": said, "tool_calls": [call]}
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": payload}
            finish = "stop"

        if not body.get("stream"):
            self._send_json(200, {
                "id": cid, "object": "chat.completion", "created": created, "model": MODEL,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            })
            return

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        chunks = [_chunk(cid, created, {"role": "assistant", "content": ""})]
        if kind == "tool+text":
            chunks.append(_chunk(cid, created, {"content": IM_INTERMEDIATE}))
        if kind in ("tool", "tool+text", "call"):
            chunks.append(_chunk(cid, created, {"tool_calls": [dict(call, index=0)]}))
        else:
            chunks.append(_chunk(cid, created, {"content": payload}))
        chunks.append(_chunk(cid, created, {}, finish=finish))
        if (body.get("stream_options") or {}).get("include_usage"):
            last = _chunk(cid, created, {}, usage=usage)
            last["choices"] = []
            chunks.append(last)
        try:
            for c in chunks:
                self.wfile.write(b"data: " + json.dumps(c).encode() + b"\n\n")
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    srv = Server(("127.0.0.1", port), Handler)
    print("PORT %d" % srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
