# -*- coding: utf-8 -*-
"""A stand-in for the Agent Task Callback plugin 0.1.5 (the seed atc replaces), written
from its public README's behaviour for atc's migration scenario (tests/e2e/pkg.rs):

- tools ``watch_agent_task(task_id, target_agent="")``, ``callback_task_status()``,
  ``cancel_task_callback(task_id)``;
- state in ``~/.qwenpaw/agent-task-callback.json`` (``{"jobs": {task_id: job}}``), jobs
  ``pending`` / ``done`` / ``cancelled`` …; at startup it re-arms pending jobs registered
  within 24 h;
- one daemon thread per pending job polls ``GET {base}/console/chat/task/{id}`` (every
  ``SEED_POLL_SECONDS``, 20 by default) and, once finished, posts the result, rendered by
  QwenPaw's ``format_background_status_text``, into the registering session as a user
  turn (a busy parent's 409: back off one period and retry, up to 30 times), then marks
  the job ``done``;
- its shutdown hook (run when it is unloaded or uninstalled) stops the threads.

It really delivers: if it kept running next to atc, results would arrive twice.
"""

import json
import os
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

STATE = Path.home() / ".qwenpaw" / "agent-task-callback.json"
POLL = float(os.environ.get("SEED_POLL_SECONDS", "20"))
MAX_AGE = 24 * 3600
LOCK = threading.Lock()
STOP = threading.Event()


def load():
    try:
        return json.loads(STATE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"jobs": {}}


def save(state):
    STATE.parent.mkdir(parents=True, exist_ok=True)
    tmp = STATE.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2), encoding="utf-8")
    os.replace(tmp, STATE)


def base_url():
    from qwenpaw.agents.tools.agent_management import _normalize_api_base_url

    return _normalize_api_base_url(None).rstrip("/")


def call(method, url, agent, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("X-Agent-Id", agent)
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read().decode())


def watcher(task_id):
    from qwenpaw.agents.tools.agent_management import format_background_status_text

    while not STOP.wait(POLL):
        with LOCK:
            job = load()["jobs"].get(task_id)
        if not job or job.get("status") != "pending":
            return
        agent = job.get("target_agent") or job["agent_id"]
        try:
            payload = call("GET", "%s/console/chat/task/%s" % (job["base"], task_id), agent)
        except Exception:  # pylint: disable=broad-except
            continue
        if payload.get("status") != "finished":
            continue
        text = format_background_status_text(task_id, payload)
        # A busy parent answers 409: back off and try again, up to 30 times (the seed's
        # README: "a delivery attempt that meets HTTP 409 backs off and retries up to
        # 30 x 20 s instead of blindly re-posting").
        for _attempt in range(30):
            if STOP.is_set():
                return
            try:
                call("POST", "%s/console/chat/task" % job["base"], job["agent_id"], {
                    "session_id": job["session_id"], "user_id": job["user_id"],
                    "channel": job["channel"],
                    "input": [{"role": "user", "content": [{"type": "text", "text": text}]}],
                })
                break
            except urllib.error.HTTPError as err:
                if err.code != 409:
                    raise
                STOP.wait(POLL)
        else:
            return
        with LOCK:
            state = load()
            state["jobs"][task_id].update(status="done", final=text, completed_at=time.time())
            save(state)
        return


def arm(task_id):
    threading.Thread(target=watcher, args=(task_id,), daemon=True).start()


def watch_agent_task(task_id: str, target_agent: str = "") -> str:
    """Watch a background task; its result is posted back into this session.

    Args:
        task_id (`str`):
            The task id submit_to_agent returned.
        target_agent (`str`, optional):
            The agent the task runs on.
    """
    from qwenpaw.app import agent_context as ctx

    agent = ctx.peek_current_agent_id() or ctx.get_current_agent_id()
    job = {
        "task_id": task_id, "status": "pending", "agent_id": agent,
        "target_agent": target_agent or None, "session_id": ctx.get_current_session_id(),
        "user_id": ctx.get_current_user_id(), "channel": ctx.get_current_channel() or "console",
        "registered_at": time.time(), "base": base_url(),
    }
    with LOCK:
        state = load()
        state.setdefault("jobs", {})[task_id] = job
        save(state)
    arm(task_id)
    return "Watching task %s for agent '%s'." % (task_id, agent)


def callback_task_status() -> str:
    """List the last 20 jobs."""
    jobs = list(load().get("jobs", {}).values())[-20:]
    return "\n".join("%s | %s | agent=%s session=%s" % (
        j["task_id"], j["status"], j.get("target_agent") or j["agent_id"], j["session_id"])
        for j in jobs) or "No jobs."


def cancel_task_callback(task_id: str) -> str:
    """Stop watching a task.

    Args:
        task_id (`str`):
            The watched task id.
    """
    with LOCK:
        state = load()
        if task_id in state.get("jobs", {}):
            state["jobs"][task_id]["status"] = "cancelled"
            save(state)
    return "Cancelled %s." % task_id


def boot():
    now = time.time()
    for task_id, job in load().get("jobs", {}).items():
        if job.get("status") == "pending" and now - float(job.get("registered_at", 0)) < MAX_AGE:
            arm(task_id)


class Plugin:
    def register(self, api):
        for func in (watch_agent_task, callback_task_status, cancel_task_callback):
            api.register_tool(tool_name=func.__name__, tool_func=func, description=func.__doc__.splitlines()[0])
        api.register_startup_hook(hook_name="seed_boot", callback=boot, priority=90)
        api.register_shutdown_hook(hook_name="seed_stop", callback=STOP.set, priority=10)


plugin = Plugin()
