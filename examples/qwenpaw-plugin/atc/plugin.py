# -*- coding: utf-8 -*-
"""atc's QwenPaw plugin: the Agent Task Callback tools, as a thin front for `atc`.

`atc qwenpaw install` writes this file (it is embedded in the atc binary, so it always
matches the atc that runs it). It registers the seed plugin's three tools with the same
names and signatures -- ``watch_agent_task(task_id, target_agent="")``,
``callback_task_status()``, ``cancel_task_callback(task_id)`` -- plus the fan-in
``watch_agent_tasks(task_ids, group)``. Each tool runs one ``atc ... --json`` with the
calling turn's agent, session, user and channel (QwenPaw's ``agent_context`` getters),
against this very server (its own base URL; its token stays in the environment), and
returns one short line the model can act on.

Standard library only. No polling and no state of its own: the job file and ``atc tick``
do the rest. The tools are coroutines and await their ``atc`` without blocking the
server's event loop (``atc watch`` asks this same server whether the chat exists; a
blocking call would wait on itself).

The end of every turn is when atc has something to do (a child's result is ready, or a
parent's chat is idle), so a ``FINALLY`` runtime hook starts ``atc tick --kicked``
detached (its own session, stdio to /dev/null, reaped by a thread) and returns at once. It
starts one only when the job file has work (not the file the last tick found settled: a
stat and one line of the tick lock), at most one at a time (another turn's end meanwhile
leaves the running tick a mark: one more pass), and never blocks, awaits or raises. The
timer stays: it covers what no turn's end announces.
"""

import asyncio
import json
import logging
import os
import shutil
import subprocess
import threading
from pathlib import Path

PLUGIN_ID = "atc"
TOOLS = (
    "watch_agent_task",
    "watch_agent_tasks",
    "callback_task_status",
    "cancel_task_callback",
)
# atc's own requests time out well before this; it only guards against a hung process.
RUN_TIMEOUT = 60.0
# How many of the chat's watches callback_task_status lists (the seed's 20).
STATUS_LIMIT = 20
# Cut atc's refusals to this many characters: the model needs the reason, not a page.
LINE_CAP = 400

NOT_INSTALLED = (
    "atc is not installed where this QwenPaw server can find it (ATC_BIN, PATH, "
    "~/.cargo/bin/atc): install it with QwenPaw's own pip (see atc's README: \"Use atc "
    "from QwenPaw\") or set ATC_BIN in the server's environment, and restart QwenPaw. "
    "Tell the user; "
    "until then check the task with check_agent_task, at most once every 30 seconds."
)


def find_atc():
    """(path, None), or (None, why not): ATC_BIN, then PATH, then ~/.cargo/bin/atc."""
    named = os.environ.get("ATC_BIN", "").strip()
    if named:
        if os.path.isfile(named) and os.access(named, os.X_OK):
            return named, None
        return None, (
            "ATC_BIN=%s is not an executable file: point it at the atc binary in the "
            "server's environment and restart QwenPaw. Tell the user; until then check "
            "the task with check_agent_task, at most once every 30 seconds." % named
        )
    found = shutil.which("atc")
    if found:
        return found, None
    cargo = Path.home() / ".cargo" / "bin" / "atc"
    if cargo.is_file() and os.access(str(cargo), os.X_OK):
        return str(cargo), None
    return None, NOT_INSTALLED


def chat_context():
    """The calling turn's (agent, session, user, channel); None where QwenPaw has none."""
    from qwenpaw.app import agent_context as ctx  # the host; stubbed in the tests

    peek = getattr(ctx, "peek_current_agent_id", None)
    agent = (peek() if peek else "") or ctx.get_current_agent_id()
    return (
        agent or None,
        ctx.get_current_session_id() or None,
        ctx.get_current_user_id() or None,
        ctx.get_current_channel() or None,
    )


def server_base_url():
    """This server's API root, resolved as QwenPaw's own agent tools resolve it."""
    try:
        from qwenpaw.agents.tools.agent_management import _normalize_api_base_url

        return _normalize_api_base_url(None)
    except Exception:  # pylint: disable=broad-except
        return None  # atc resolves it the same way (managed runtime, last_api)


def atc_env():
    """The server's environment (its runtime token included: never on a command line),
    with atc pointed at this server."""
    env = dict(os.environ)
    base = server_base_url()
    if base:
        env["ATC_BASE_URL"] = base
    return env


async def run_atc(args):
    """Runs ``atc <args>``: (exit code, stdout, stderr), or (None, "", why it could not)."""
    exe, problem = find_atc()
    if exe is None:
        return None, "", problem
    try:
        proc = await asyncio.create_subprocess_exec(
            exe,
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=atc_env(),
        )
    except OSError as err:
        return None, "", "cannot run %s: %s. %s" % (exe, err, NOT_INSTALLED)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), RUN_TIMEOUT)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        return None, "", "atc did not answer within %d s; try again later" % RUN_TIMEOUT
    return (
        proc.returncode,
        out.decode("utf-8", "replace"),
        err.decode("utf-8", "replace"),
    )


def reason(stderr):
    """atc's own one-line error (``atc: ...``), cut to LINE_CAP characters."""
    lines = [l.strip() for l in stderr.splitlines() if l.strip()]
    said = next((l for l in reversed(lines) if l.startswith("atc: ")), None)
    said = (said or (lines[-1] if lines else "atc failed without a message"))
    if said.startswith("atc: "):
        said = said[len("atc: "):]
    return said if len(said) <= LINE_CAP else said[: LINE_CAP - 1] + "\u2026"


def jobs_of(stdout):
    """The job records of a ``--json`` answer: one record, or ``{"jobs": [...]}``."""
    try:
        doc = json.loads(stdout)
    except ValueError:
        return []
    if isinstance(doc, dict) and isinstance(doc.get("jobs"), list):
        return [j for j in doc["jobs"] if isinstance(j, dict)]
    return [doc] if isinstance(doc, dict) else []


def no_chat():
    return (
        "Not watching: this call has no chat to send the result to (QwenPaw gave no "
        "session). Check the task with check_agent_task instead, at most once every 30 seconds."
    )


def watch_args(task_ids, target_agent, group, child_session="", stop_after="", check_in=""):
    agent, session, user, channel = chat_context()
    if not session:
        return None
    args = ["watch", *task_ids, "--json", "--session", session]
    if user:
        args += ["--user", user]
    if channel:
        args += ["--channel", channel]
    if agent:
        args += ["--agent", agent]
    target = (target_agent or "").strip()
    if target and target != agent:
        args += ["--target-agent", target]
    if group:
        args += ["--group", group]
    child = (child_session or "").strip()
    if child:
        args += ["--child-session", child]
    deadline = (stop_after or "").strip()
    if deadline:
        args += ["--stop-after", deadline]
    every = (check_in or "").strip()
    if every:
        args += ["--check-in", every]
    return args


async def watch(task_ids, target_agent="", group=None, child_session="", stop_after="", check_in=""):
    args = watch_args(task_ids, target_agent, group, child_session, stop_after, check_in)
    if args is None:
        return no_chat()
    shown = ", ".join(task_ids)
    code, out, err = await run_atc(args)
    if code is None:
        return "Not watching %s: %s" % (shown, err)
    if code != 0:
        return (
            "Not watching %s: %s. If you cannot fix that, check the task with "
            "check_agent_task instead, at most once every 30 seconds." % (shown, reason(err))
        )
    ids = [j.get("task_id") for j in jobs_of(out)] or list(task_ids)
    together = " together, as one message," if group else ""
    return (
        "Watching %s: the result comes back into this chat%s by itself when it "
        "finishes. Do not poll check_agent_task for it; tell the user and end your turn."
        % (", ".join(i for i in ids if i), together)
    )


async def watch_agent_task(
    task_id: str,
    target_agent: str = "",
    child_session: str = "",
    stop_after: str = "",
    check_in: str = "",
) -> str:
    """Watch a background task so that its result comes back into this chat by itself.

    Call this right after ``submit_to_agent`` returns a ``[TASK_ID: ...]``, in the same
    turn, instead of polling ``check_agent_task``. When the task finishes, its result is
    posted into this conversation as a new user message starting with
    ``[TASK_ID: <task_id>]`` (the same text ``check_agent_task`` shows), which wakes you
    up to continue. After a successful watch, tell the user the work is delegated and end
    your turn. Watching the same task again changes nothing.

    Args:
        task_id (`str`):
            The task ID ``submit_to_agent`` returned, e.g. ``task-3f9a0c1b2d4e``.
        target_agent (`str`, optional):
            The agent the task runs on (the ``to_agent`` you submitted to). Pass it
            whenever you delegated to another agent.
        child_session (`str`, optional):
            The ``[SESSION: ...]`` value ``submit_to_agent`` printed under the task ID.
            Pass it so the task can be stopped later (``stop_after``, or
            ``cancel_task_callback(task_id, stop=True)``).
        stop_after (`str`, optional):
            A deadline such as ``10m`` or ``1h``: if the task is still running that long
            after it started, it is stopped and its "Task cancelled" result comes back
            here with a line saying so. Use it when the result is worthless after a while
            (something the user is waiting for now, a task that may hang); leave it empty
            for work that should finish however long it takes. Needs ``child_session``.
        check_in (`str`, optional):
            An interval such as ``5m``: while the task runs, a short
            ``[STATUS: running]`` note arrives here that often (at most 5 times). Use it
            for long work the user wants to hear about; there is nothing to do on a
            check-in but tell the user, if they asked.

    Returns:
        `str`:
            One line: watching (and what to do next), or why not and what to do instead.
    """
    return await watch(
        [str(task_id).strip()],
        target_agent,
        child_session=str(child_session or ""),
        stop_after=str(stop_after or ""),
        check_in=str(check_in or ""),
    )


async def watch_agent_tasks(task_ids: list, group: str) -> str:
    """Watch several background tasks and get all their results back together, once.

    Use this instead of ``watch_agent_task`` when you submitted several tasks and want
    one combined answer (fan-in): when none of them is still running, one message
    starting with ``[ATC_GROUP: <group>]`` arrives in this chat with every task's result
    in order. Tasks on different agents: call it once per agent with the same group name.

    Args:
        task_ids (`list[str]`):
            The task IDs ``submit_to_agent`` returned.
        group (`str`):
            A short name for this batch, new for every batch (e.g. ``reviews-1``).

    Returns:
        `str`:
            One line: watching (and what to do next), or why not and what to do instead.
    """
    if isinstance(task_ids, str):
        task_ids = [t for t in task_ids.replace(",", " ").split() if t]
    ids = [str(t).strip() for t in task_ids or [] if str(t).strip()]
    name = str(group or "").strip()
    if not ids or not name:
        return "Not watching: pass the task IDs and a group name."
    return await watch(ids, group=name)


async def callback_task_status() -> str:
    """List the tasks this chat watches and what is happening to each.

    Use it when the user asks how delegated work is doing. One line per task, newest
    first: ``task_id | status | agent | registered``. ``pending`` means waiting for the
    task (or for this chat to be idle); ``done`` means its result was posted here.

    Returns:
        `str`:
            The chat's watches, one per line, or a line saying there are none.
    """
    agent, session, user, channel = chat_context()
    code, out, err = await run_atc(["status", "--all", "--json"])
    if code is None:
        return err
    if code != 0:
        return "Cannot list the watches: %s" % reason(err)
    mine = [
        j
        for j in jobs_of(out)
        if j.get("session_id") == session
        and (user is None or j.get("user_id") == user)
        and (channel is None or j.get("channel") == channel)
        and (agent is None or j.get("agent_id") == agent)
    ]
    if not mine:
        return "This chat watches no tasks."
    lines = [
        "%s | %s | agent=%s | registered=%s"
        % (
            j.get("task_id"),
            j.get("status"),
            j.get("target_agent") or j.get("agent_id"),
            j.get("registered_at"),
        )
        for j in mine[:STATUS_LIMIT]
    ]
    return "\n".join(lines)


async def cancel_task_callback(task_id: str, stop: bool = False) -> str:
    """Stop watching a task: its result will not be posted into this chat.

    By default the task itself keeps running; only the callback is dropped. Use it when
    the user no longer wants the result. With ``stop=True`` the task itself is stopped
    too (it must have been watched with ``child_session``); use that when the work is no
    longer wanted at all.

    Args:
        task_id (`str`):
            The watched task ID.
        stop (`bool`, optional):
            Also stop the running task.

    Returns:
        `str`:
            One line: stopped, or why not.
    """
    task_id = str(task_id).strip()
    if stop is True or str(stop).strip().lower() in ("true", "1", "yes"):
        code, out, err = await run_atc(["cancel", task_id, "--stop"])
        if code is None:
            return "Not stopped: %s" % err
        if code != 0:
            return "Not stopped %s (still watched): %s" % (task_id, reason(err))
        return out.strip().splitlines()[-1] if out.strip() else "Stopped %s." % task_id
    code, out, err = await run_atc(["cancel", task_id, "--json"])
    if code is None:
        return "Not cancelled: %s" % err
    if code != 0:
        return "Not cancelled %s: %s" % (task_id, reason(err))
    job = (jobs_of(out) or [{}])[0]
    return "Stopped watching %s (now %s); the task itself keeps running." % (
        task_id,
        job.get("status", "cancelled"),
    )


LOG = logging.getLogger("qwenpaw.plugins.atc")


def job_file():
    """The job file atc uses in this environment: ATC_STATE, else atc's default."""
    named = os.environ.get("ATC_STATE", "").strip()
    if named:
        return Path(named)
    state = os.environ.get("XDG_STATE_HOME", "").strip()
    base = Path(state) if state and os.path.isabs(state) else Path.home() / ".local" / "state"
    return base / "atc" / "jobs.json"


def sidecar(path, suffix):
    return Path(str(path) + "." + suffix)


def fingerprint(st):
    """The job file's fingerprint as atc records it (state/store.rs ``Fingerprint``)."""
    second = 1000000000
    return {
        "len": st.st_size,
        "mtime": [st.st_mtime_ns // second, st.st_mtime_ns % second],
        "ctime": [st.st_ctime_ns // second, st.st_ctime_ns % second],
        "ino": st.st_ino,
        "dev": st.st_dev,
    }


def has_work(path):
    """Could a tick do anything? Not without a job file, and not with the very file the
    last tick found settled (every watch ended, nothing on its way): the heartbeat in
    ``<job file>.tick.lock`` names it by fingerprint. Anything else: yes."""
    try:
        st = os.stat(str(path))
    except OSError:
        return False
    try:
        with open(str(sidecar(path, "tick.lock")), encoding="utf-8") as fh:
            beat = json.loads(fh.readline() or "{}")
    except (OSError, ValueError):
        return True
    settled = beat.get("settled") if isinstance(beat, dict) else None
    if not isinstance(settled, dict):
        return True
    return settled.get("file") != fingerprint(st)


class Kicker:
    """Starts ``atc tick --kicked`` when a turn ends: detached, one at a time."""

    def __init__(self):
        self.lock = threading.Lock()
        self.proc = None
        self.reaper = None
        self.warned = set()

    def warn_once(self, what, message):
        if what not in self.warned:
            self.warned.add(what)
            LOG.warning("atc plugin: %s", message)

    def kick(self, chained=False):
        """Never raises, never waits: at worst a turn's end is not announced, and the
        timer's next tick does the work."""
        try:
            with self.lock:
                self._kick(chained)
        except Exception as err:  # pylint: disable=broad-except
            self.warn_once("error", "cannot start atc tick at the end of a turn: %r" % err)

    def _kick(self, chained):
        path = job_file()
        if not has_work(path):
            return
        if self.proc is not None and self.proc.poll() is None:
            # A kicked tick is running: it makes one more pass for this turn's end.
            fd = os.open(str(sidecar(path, "tick.again")), os.O_WRONLY | os.O_CREAT, 0o600)
            os.close(fd)
            return
        exe, problem = find_atc()
        if exe is None:
            self.warn_once("missing", "the end-of-turn kick cannot start atc: " + problem)
            return
        proc = subprocess.Popen(  # pylint: disable=consider-using-with
            [exe, "tick", "--kicked"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
            env=atc_env(),
        )
        self.proc = proc
        self.reaper = threading.Thread(
            target=self.reap, args=(proc, chained), name="atc-kick-reaper", daemon=True
        )
        self.reaper.start()

    def reap(self, proc, chained):
        code = proc.wait()
        if code != 0:
            self.warn_once(
                "exit",
                "atc tick --kicked exited %s; `atc tick -v` as the server's user says why" % code,
            )
        # A mark left while that tick was letting go (after its last look): one more tick,
        # once (a tick that cannot take the mark must not start ticks forever).
        if not chained and sidecar(job_file(), "tick.again").exists():
            self.kick(chained=True)


KICKER = Kicker()


def kick_hook(kicker):
    """A ``FINALLY`` runtime hook (once per turn: chats and background tasks alike)."""
    from qwenpaw.runtime.hooks import HookBase, HookResult  # the host
    from qwenpaw.runtime.phases import Phase

    class AtcKickHook(HookBase):
        phase = Phase.FINALLY
        name = "atc_kick"
        # After QwenPaw's own end-of-turn work.
        priority = 1000

        async def run(self, ctx):  # pylint: disable=unused-argument
            kicker.kick()
            return HookResult()

    return AtcKickHook()


DESCRIPTIONS = {
    "watch_agent_task": "Watch a submit_to_agent task; its result comes back into this chat by itself (atc).",
    "watch_agent_tasks": "Watch several tasks; their results come back together as one message (atc).",
    "callback_task_status": "List the tasks this chat watches (atc).",
    "cancel_task_callback": "Stop watching a task; the task keeps running unless stop=True (atc).",
}


class AtcPlugin:
    """Registers the tools. QwenPaw imports this module and calls ``plugin.register``."""

    def register(self, api):
        for name in TOOLS:
            api.register_tool(
                tool_name=name,
                tool_func=globals()[name],
                description=DESCRIPTIONS[name],
                icon="\U0001f4ec",
            )
        try:
            api.register_runtime_hook(kick_hook(KICKER))
        except Exception as err:  # pylint: disable=broad-except
            LOG.warning("atc plugin: no end-of-turn kick (the timer still ticks): %r", err)


plugin = AtcPlugin()
