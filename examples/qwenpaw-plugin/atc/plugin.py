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
parent's chat is idle), so a ``FINALLY`` runtime hook starts ``atc tick --kicked --json``
detached (its own session, stdin and stderr to /dev/null, reaped by a thread) and returns
at once. It hands the tick the turn that ended -- the agent, the session, the chat's user
and channel -- in the child's environment (``ATC_KICK``, a JSON list), never on its
command line (other users' ``ps`` shows that) and never in a log, so the tick polls only
what that turn concerns (a turn's end that concerns nothing costs the server no request).
It starts one only when the job file has work (not the file the last tick found settled:
a stat and one line of the tick lock), at most one at a time (another turn's end
meanwhile goes into the running tick's mark, one JSON line: one more pass for what it
concerns), and never blocks, awaits or raises. The ticks it starts take no settings
flags: their settings (``max-age``, ``busy-deadline``, the job file...) come from atc's
config file, ``~/.config/atc/config.toml``, which the timer's ticks and a person's
commands read too.

Nobody reads such a tick's stderr, so it says nothing there: it leaves its give-ups
marked unsaid in the job file (the next ``atc tick`` a person hears says them) and lists
them in its JSON, which the reaper thread reads once the tick has exited and writes into
QwenPaw's log, one line each (task ids and statuses only).

Every background task a turn's ``submit_to_agent`` starts is watched when that turn ends,
with no tool call by the model: a middleware notes the turn's tool calls as they return
(exactly this turn's), and a second ``FINALLY`` hook runs one ``atc watch --origin auto``
for them, detached like the kick (atc decides: auto-watch off, a task watched already,
ACP). A finished result the parent reads itself with ``check_agent_task`` is reported at
once (``atc parent-read``), so atc does not post it too.

What no turn's end announces (a child on another server, a busy parent gone idle, a
check-in, a deadline) needs a cadence: while the plugin is loaded it starts ``atc tick``
every ``ATC_CADENCE`` (20 s), the same way, unless it sees a tick it did not start (a
system timer): then it stands by. It says which in ``<job file>.cadence``, for
``atc doctor``.

The tools answer with the calling chat's own things only: never a file path, never
another chat's session or user.
"""

import asyncio
import json
import logging
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from datetime import datetime, timezone
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
    "atc is not installed where this QwenPaw server can find it (in this plugin's bin/, "
    "next to the server's Python, ATC_BIN, PATH): install the plugin zip made on this "
    "machine's platform (`atc qwenpaw zip`, which carries atc), or install atc into the "
    "server's own Python environment, or set ATC_BIN in the server's environment. Tell the "
    "user; until then check the task with check_agent_task, at most once every 30 seconds."
)
EXE = "atc.exe" if os.name == "nt" else "atc"
# This plugin's folder (<working dir>/plugins/atc), the atc it may carry, and the
# platform that atc was built for (`atc qwenpaw zip` writes both).
PLUGIN_DIR = Path(__file__).resolve().parent
BUNDLED = PLUGIN_DIR / "bin" / EXE
BUNDLED_PLATFORM = PLUGIN_DIR / "bin" / "atc.platform"


def executable(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


def this_platform():
    """This server's platform as atc's zip names it: ``linux-x86_64``, ``macos-aarch64``."""
    system = "macos" if sys.platform == "darwin" else sys.platform
    if system.startswith("linux"):
        system = "linux"
    machine = platform.machine().lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    return "%s-%s" % (system, machine)


def bundled_atc():
    """(path, None) for the atc this plugin carries, (None, why it is not used) when it
    carries one that cannot run here, (None, None) when it carries none. QwenPaw's
    installer extracts the zip without file modes: the program bit is set again here."""
    if not BUNDLED.is_file():
        return None, None
    try:
        built_for = BUNDLED_PLATFORM.read_text(encoding="utf-8").strip()
    except OSError:
        built_for = ""
    here = this_platform()
    if built_for and built_for != here:
        return None, (
            "the atc this plugin carries is built for %s, and this server runs on %s: it "
            "is not used. Make the zip on this platform (`atc qwenpaw zip`) and install "
            "it again with --force, or install atc another way" % (built_for, here)
        )
    path = str(BUNDLED)
    if not os.access(path, os.X_OK):
        try:
            os.chmod(path, 0o755)
        except OSError as err:
            return None, "the atc this plugin carries (%s) cannot be made executable: %s" % (
                path,
                err,
            )
    return path, None


def interpreter_dirs():
    """Where pip put atc for this server: the directory of the server's own interpreter,
    the environment's scripts directory (a venv's bin/, also when the interpreter was
    reached through a symlink into it), and the frozen desktop build's plugin site."""
    dirs = []
    if sys.executable:
        dirs.append(os.path.dirname(sys.executable))
    try:
        scripts = sysconfig.get_path("scripts")
    except Exception:  # pylint: disable=broad-except
        scripts = None
    if scripts:
        dirs.append(scripts)
    site = os.environ.get("QWENPAW_PLUGIN_SITE", "").strip()
    if site:
        dirs.append(os.path.join(site, "bin"))
    seen = []
    for d in dirs:
        if d and d not in seen:
            seen.append(d)
    return seen


def find_atc():
    """(path, None), or (None, why not). In this order: the atc this plugin carries (its
    ``bin/``, from the zip), next to the server's interpreter (``interpreter_dirs``),
    ``ATC_BIN``, ``PATH``, ``~/.cargo/bin``. ``atc doctor`` looks in the same order."""
    bundled, skipped = bundled_atc()
    if bundled:
        return bundled, None
    if skipped:
        KICKER.warn_once("platform", skipped)
    for d in interpreter_dirs():
        here = os.path.join(d, EXE)
        if executable(here):
            return here, None
    named = os.environ.get("ATC_BIN", "").strip()
    if named:
        if executable(named):
            return named, None
        return None, (
            "ATC_BIN in the server's environment is not an executable file: point it at "
            "the atc binary and restart QwenPaw. Tell the user; until then check the task "
            "with check_agent_task, at most once every 30 seconds."
        )
    found = shutil.which("atc")
    if found:
        return found, None
    cargo = Path.home() / ".cargo" / "bin" / EXE
    if executable(str(cargo)):
        return str(cargo), None
    return None, NOT_INSTALLED


# -- Standing by beside the Agent Task Callback plugin ------------------------------------
#
# The seed plugin (Agent Task Callback) watches and delivers the same tasks with the same
# tool names. Loaded beside it (its zip installed before the move), this plugin delivers
# nothing: no auto-watch, no kicks, no cadence, and every tool answers with the one
# command that moves the seed's jobs to atc and removes it (`atc qwenpaw install
# --replace-agent-task-callback`). It stands by while the seed's folder is installed or
# its state file holds pending jobs nobody moved to atc, and looks again every few
# seconds: once the move is done it delivers, without a restart.

SEED_ID = "agent-task-callback"
SEED_STATE = "agent-task-callback.json"
REPLACE = "atc qwenpaw install --replace-agent-task-callback"
STANDBY_LOOK_SECS = 5.0


def seed_folder():
    """The seed plugin's folder among this plugin's siblings (QwenPaw loads every folder
    there but hidden and ``.disabled`` ones), or None."""
    try:
        entries = list(os.scandir(str(PLUGIN_DIR.parent)))
    except OSError:
        return None
    for entry in entries:
        if entry.name.startswith(".") or entry.name.endswith(".disabled"):
            continue
        try:
            with open(os.path.join(entry.path, "plugin.json"), encoding="utf-8") as fh:
                manifest = json.load(fh)
        except (OSError, ValueError):
            continue
        if isinstance(manifest, dict) and manifest.get("id") == SEED_ID:
            return entry.path
    return None


def seed_state_file():
    """Where the seed keeps its jobs, as ``atc qwenpaw install`` reads it: beside the
    working dir's plugins, else ``~/.qwenpaw/``."""
    beside = PLUGIN_DIR.parent.parent / SEED_STATE
    return beside if beside.exists() else Path.home() / ".qwenpaw" / SEED_STATE


def seed_pending():
    """How many jobs the seed's state file holds as pending, never handed over to atc."""
    try:
        doc = json.loads(seed_state_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    jobs = doc.get("jobs", doc) if isinstance(doc, dict) else doc
    if isinstance(jobs, dict):
        jobs = list(jobs.values())
    if not isinstance(jobs, list):
        return 0
    return sum(
        1
        for j in jobs
        if isinstance(j, dict) and j.get("status") == "pending" and j.get("handed_over_to") != "atc"
    )


class Standby:
    """Why this plugin stands by (a sentence), or None; looked at again at most every
    ``STANDBY_LOOK_SECS``. Says each change once in QwenPaw's log."""

    def __init__(self):
        self.lock = threading.Lock()
        self.looked_at = None
        self.why = None

    def now(self):
        with self.lock:
            at = time.monotonic()
            if self.looked_at is not None and at - self.looked_at < STANDBY_LOOK_SECS:
                return self.why
            self.looked_at = at
            why = self.look()
            if why and why != self.why:
                LOG.warning(
                    "atc plugin: standing by, delivering nothing (no auto-watch, no kicks, "
                    "no cadence; its tools say so): %s. `%s` moves its jobs to atc and "
                    "removes it, in an order in which the two never both deliver",
                    why,
                    REPLACE,
                )
            elif self.why and not why:
                LOG.warning("atc plugin: the Agent Task Callback plugin's jobs are atc's now: delivering")
            self.why = why
            return why

    @staticmethod
    def look():
        folder = seed_folder()
        if folder:
            return "the Agent Task Callback plugin is installed (%s) and delivers its tasks itself" % folder
        pending = seed_pending()
        if pending:
            return (
                "the Agent Task Callback plugin's state file (%s) still holds %d pending "
                "job%s nobody moved to atc" % (seed_state_file(), pending, "" if pending == 1 else "s")
            )
        return None

    def answer(self):
        """What a tool says while standing by, or None."""
        why = self.now()
        if not why:
            return None
        return (
            "atc is standing by and watches nothing: the Agent Task Callback plugin is "
            "still in place, and two deliverers would post every result twice. Tell the "
            "user to run `%s` on the server (it moves the old plugin's jobs to atc, then "
            "removes it); until then use the Agent Task Callback plugin's own tools." % REPLACE
        )


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


def scrub(text):
    """What the model may read of atc's words: no file paths (the job file's above all),
    no other chat's ids (a refusal's list of the chats sharing a session id)."""
    path = str(job_file())
    text = text.replace(path, "atc's job file")
    # A path, but not a URL's (this server's own address may be named).
    text = re.sub(r"(?<![\w.:/])/[^\s'\"(),;]+", "(a file on the server)", text)
    text = re.sub(r"; chats with session id .*?(?=\. Pass |$)", "; no chat matches exactly", text)
    return text


def reason(stderr):
    """atc's own one-line error (``atc: ...``), scrubbed, cut to LINE_CAP characters."""
    lines = [l.strip() for l in stderr.splitlines() if l.strip()]
    said = next((l for l in reversed(lines) if l.startswith("atc: ")), None)
    said = (said or (lines[-1] if lines else "atc failed without a message"))
    if said.startswith("atc: "):
        said = said[len("atc: "):]
    said = scrub(said)
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
    chat = chat_context()
    agent, session = chat[0], chat[1]
    if not session:
        return None
    # --origin plugin: what the parent is told later names this tool's options
    # (stop_after, cancel_task_callback), not atc's flags.
    args = ["watch", *task_ids, "--json", "--origin", "plugin", *chat_args(chat)]
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


def human(secs):
    """Seconds as atc writes durations: 20s, 1m 30s, 2h, 1d 1h."""
    left, parts = int(secs), []
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m"), (1, "s")):
        if left >= size:
            parts.append("%d%s" % (left // size, unit))
            left %= size
    return " ".join(parts) or "0s"


def applied(job, target_agent, group, child_session, stop_after, check_in):
    """The options this watch applied, as the model asked for them and atc recorded them."""
    said = []
    target = job.get("target_agent") or (target_agent or "").strip()
    if target:
        said.append("polled as agent %s" % target)
    if group:
        said.append("group %s" % group)
    if (child_session or "").strip():
        said.append("its child session recorded, so it can be stopped")
    stop = job.get("stop_after_secs")
    if stop or (stop_after or "").strip():
        said.append("stops it after %s if it is still running" % (
            human(stop) if stop else stop_after.strip()))
    every = job.get("check_in_secs")
    if every or (check_in or "").strip():
        said.append("a [STATUS: running] check-in every %s while it runs (at most 5)" % (
            human(every) if every else check_in.strip()))
    return said


def mine(job, chat):
    agent, session, user, channel = chat
    return (
        job.get("session_id") == session
        and (user is None or job.get("user_id") == user)
        and (channel is None or job.get("channel") == channel)
        and (agent is None or job.get("agent_id") == agent)
    )


async def chat_jobs(chat):
    """(this chat's jobs, every other chat's task ids), or None with why not."""
    code, out, err = await run_atc(["status", "--all", "--json"])
    if code is None:
        return None, err
    if code != 0:
        return None, reason(err)
    jobs = jobs_of(out)
    own = [j for j in jobs if mine(j, chat)]
    others = {j.get("task_id") for j in jobs if not mine(j, chat)}
    return (own, others), None


async def watch(task_ids, target_agent="", group=None, child_session="", stop_after="", check_in=""):
    standing_by = STANDBY.answer()
    if standing_by:
        return standing_by
    if watch_args(task_ids, target_agent, group) is None:
        return no_chat()
    shown = ", ".join(task_ids)
    listed, problem = await chat_jobs(chat_context())
    if listed is None:
        return "Not watching %s: %s" % (shown, problem)
    taken = [t for t in task_ids if t in listed[1]]
    if taken:
        # Watching it here would take another chat's watch away from it.
        return (
            "Not watching %s: another chat already watches %s. Watch only the tasks you "
            "submitted from this chat." % (shown, ", ".join(taken))
        )
    if not (target_agent or "").strip() and len(task_ids) == 1:
        # The turn's end watched it already, on the agent submit_to_agent named: the same
        # watch, not another one polled as this agent.
        known = [j.get("target_agent") for j in listed[0] if j.get("task_id") == task_ids[0]]
        target_agent = (known[0] if known else None) or ""
    args = watch_args(task_ids, target_agent, group, child_session, stop_after, check_in)
    code, out, err = await run_atc(args)
    if code is None:
        return "Not watching %s: %s" % (shown, err)
    if code == 6:
        # The server has no such task (atc's exit 6): check_agent_task would say the same.
        return (
            "Not watching %s: this QwenPaw server has no such task (\"Task not found\"). "
            "Copy the ID exactly from the [TASK_ID: ...] line submit_to_agent returned." % shown
        )
    if code != 0:
        return (
            "Not watching %s: %s. If you cannot fix that, check the task with "
            "check_agent_task instead, at most once every 30 seconds." % (shown, reason(err))
        )
    jobs = jobs_of(out)
    ids = [j.get("task_id") for j in jobs] or list(task_ids)
    together = " together, as one message," if group else ""
    options = applied(jobs[0] if jobs else {}, target_agent, group, child_session, stop_after, check_in)
    confirmed = (" (%s)" % "; ".join(options)) if options else ""
    return (
        "Watching %s%s: the result comes back into this chat%s by itself when it "
        "finishes. Do not poll check_agent_task for it; tell the user and end your turn."
        % (", ".join(i for i in ids if i), confirmed, together)
    )


async def watch_agent_task(
    task_id: str,
    target_agent: str = "",
    child_session: str = "",
    stop_after: str = "",
    check_in: str = "",
) -> str:
    """Watch a background task with options, or one started some other way.

    You do not need this after ``submit_to_agent``: every background task it starts from
    this chat is watched by itself when your turn ends, and its result comes back into
    this chat by itself, as a new user message starting with ``[TASK_ID: <task_id>]`` (the
    same text ``check_agent_task`` shows), which wakes you up to continue. So do not poll
    ``check_agent_task`` either: tell the user the work is delegated and end your turn.
    Call this tool only to give a task a deadline (``stop_after``) or progress notes
    (``check_in``), or to watch a task started another way (``qwenpaw agents chat
    --background``). Watching the same task again changes nothing. A task ID the server
    does not have is refused: copy it exactly from ``submit_to_agent``'s answer.

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
            check-in but tell the user, if they asked
            (``cancel_task_callback(task_id, check_ins=True)`` stops them).

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


async def watch_agent_tasks(task_ids: list[str], group: str) -> str:
    """Get several background tasks' results back together, once, as one message.

    Every task ``submit_to_agent`` starts comes back by itself anyway, each as soon as it
    finishes. Use this only when you want one combined answer (fan-in): when none of them
    is still running, one message starting with ``[ATC_GROUP: <group>]`` arrives in this
    chat with every task's result in order. Tasks on different agents: call it once per
    agent with the same group name. Do not poll ``check_agent_task`` for them.

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

    Use it when the user asks how delegated work is doing (tasks ``submit_to_agent``
    started are watched by themselves, so they are listed too). One line per task, newest
    first: ``task_id | status | agent=… session=… | registered=…``. ``pending`` means waiting for the
    task (or for this chat to be idle); ``done`` means its result was posted here;
    ``skipped`` that nothing was posted (you read the result with ``check_agent_task``).

    Returns:
        `str`:
            The chat's watches, one per line, or a line saying there are none.
    """
    standing_by = STANDBY.answer()
    if standing_by:
        return standing_by
    chat = chat_context()
    if not chat[1]:
        return "This call has no chat (QwenPaw gave no session): there is nothing to list."
    listed, problem = await chat_jobs(chat)
    if listed is None:
        return "Cannot list the watches: %s" % problem
    own = listed[0]
    if not own:
        return "This chat watches no tasks."
    lines = [
        "%s | %s | agent=%s session=%s | registered=%s"
        % (
            j.get("task_id"),
            j.get("status"),
            j.get("target_agent") or j.get("agent_id"),
            j.get("session_id"),
            j.get("registered_at"),
        )
        for j in own[:STATUS_LIMIT]
    ]
    return "\n".join(lines)


async def cancel_task_callback(task_id: str, stop: bool = False, check_ins: bool = False) -> str:
    """Stop watching a task: its result will not be posted into this chat.

    By default the task itself keeps running; only the callback is dropped. Use it when
    the user no longer wants the result (a task submitted in this very turn is then not
    watched when the turn ends). With ``stop=True`` the task itself is stopped
    too (it must have been watched with ``child_session``); use that when the work is no
    longer wanted at all. With ``check_ins=True`` only the check-ins stop (the task was
    watched with ``check_in``): the result still comes back.

    Args:
        task_id (`str`):
            The watched task ID.
        stop (`bool`, optional):
            Also stop the running task.
        check_ins (`bool`, optional):
            Only stop the check-ins; keep watching.

    Returns:
        `str`:
            One line: stopped, or why not.
    """
    standing_by = STANDBY.answer()
    if standing_by:
        return standing_by
    task_id = str(task_id).strip()
    chat = chat_context()
    listed, problem = await chat_jobs(chat)
    if listed is None:
        return "Not cancelled %s: %s" % (task_id, problem)
    if not chat[1] or task_id not in {j.get("task_id") for j in listed[0]}:
        return "Not cancelled %s: this chat watches no such task (callback_task_status lists its watches)." % task_id
    if truthy(check_ins):
        code, out, err = await run_atc(["cancel", task_id, "--check-ins"])
        if code is None:
            return "Check-ins not stopped: %s" % err
        if code != 0:
            return "Check-ins not stopped for %s: %s" % (task_id, reason(err))
        return scrub(out.strip().splitlines()[-1]) if out.strip() else "No more check-ins for %s." % task_id
    if truthy(stop):
        code, out, err = await run_atc(["cancel", task_id, "--stop"])
        if code is None:
            return "Not stopped: %s" % err
        if code != 0:
            return "Not stopped %s (still watched): %s" % (task_id, reason(err))
        return scrub(out.strip().splitlines()[-1]) if out.strip() else "Stopped %s." % task_id
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


def truthy(flag):
    """A tool's boolean as a model may pass it: True, or "true", "1", "yes"."""
    return flag is True or str(flag).strip().lower() in ("true", "1", "yes")


LOG = logging.getLogger("qwenpaw.plugins.atc")


def config_file():
    """atc's config file in this environment, where atc looks for it: ATC_CONFIG, else
    $XDG_CONFIG_HOME/atc/config.toml, else ~/.config/atc/config.toml."""
    named = os.environ.get("ATC_CONFIG", "").strip()
    if named:
        return Path(named)
    config = os.environ.get("XDG_CONFIG_HOME", "").strip()
    base = Path(config) if config and os.path.isabs(config) else Path.home() / ".config"
    return base / "atc" / "config.toml"


# (path, mtime_ns, size) of the config file last read, and the job file it named.
_CONFIGURED = [None, None]


def configured_state():
    """``state`` in atc's config file, when it names an absolute path (or one from ~/):
    the job file every tick uses, the kicks' included. Read again only when the file
    changed. atc itself checks the rest of the file (and refuses a bad one)."""
    path = config_file()
    try:
        st = os.stat(str(path))
    except OSError:
        return None
    seen = (str(path), st.st_mtime_ns, st.st_size)
    if _CONFIGURED[0] != seen:
        state = None
        try:
            import tomllib  # Python 3.11+, as QwenPaw 2.2 requires

            with open(str(path), "rb") as fh:
                value = tomllib.load(fh).get("state")
            if isinstance(value, str) and value.startswith("~/"):
                state = Path.home() / value[2:]
            elif isinstance(value, str) and os.path.isabs(value):
                state = Path(value)
        except Exception:  # pylint: disable=broad-except
            state = None  # atc says what is wrong with the file when it runs
        _CONFIGURED[0], _CONFIGURED[1] = seen, state
    return _CONFIGURED[1]


def job_file():
    """The job file atc uses in this environment: ATC_STATE, else ``state`` in atc's config
    file, else atc's default."""
    named = os.environ.get("ATC_STATE", "").strip()
    if named:
        return Path(named)
    configured = configured_state()
    if configured is not None:
        return configured
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


def turn_end(ctx):
    """The turn that ended, as ``atc tick --kicked`` takes it (``ATC_KICK``): the agent and
    session of the hook's context, the chat's user and channel from its request (contract
    §13). ``None`` when QwenPaw gave no agent or session: the tick then looks at
    everything. Issue 29's auto-watch reads the same context."""
    try:
        request = getattr(ctx, "request", None)

        def of_request(key):
            if isinstance(request, dict):
                return request.get(key)
            return getattr(request, key, None)

        end = {
            "agent_id": getattr(ctx, "agent_id", None),
            "session_id": getattr(ctx, "session_id", None) or of_request("session_id"),
            "user_id": of_request("user_id"),
            "channel": of_request("channel"),
        }
    except Exception:  # pylint: disable=broad-except
        return None
    end = {k: str(v) for k, v in end.items() if isinstance(v, str) and v}
    if "agent_id" not in end or "session_id" not in end:
        return None
    return end


def append_mark(path, line):
    """Adds ``line`` (one ended turn, JSON; a bare newline: a turn of no known chat) to the
    mark the running tick takes, ``<job file>.tick.again`` (0600; it holds session ids, like
    the job file). The tick takes the mark by renaming it away: when that happened while the
    line went in, the line goes into a new mark (at worst the tick reads it twice)."""
    mark = str(sidecar(path, "tick.again"))
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(3):
        fd = os.open(mark, flags, 0o600)
        try:
            os.write(fd, line.encode("utf-8"))
            written = os.fstat(fd).st_ino
        finally:
            os.close(fd)
        try:
            if os.lstat(mark).st_ino == written:
                return
        except OSError:
            pass


def give_up_lines(stdout):
    """The give-up lines in a tick's ``--json`` report (``gave_up[].line``)."""
    try:
        doc = json.loads(stdout or b"{}")
    except ValueError:
        return []
    gave_up = doc.get("gave_up") if isinstance(doc, dict) else None
    if not isinstance(gave_up, list):
        return []
    return [g["line"] for g in gave_up if isinstance(g, dict) and isinstance(g.get("line"), str)]


class Kicker:
    """Starts atc ticks, detached, one at a time: ``atc tick --kicked --json`` when a turn
    ends, ``atc tick --json`` for the cadence. Remembers when its own ticks ran, so that a
    tick it did not start (a system timer's) can be told apart."""

    def __init__(self):
        self.lock = threading.Lock()
        self.proc = None
        self.reaper = None
        self.warned = set()
        # [started, ended or None] of the ticks started here, newest last.
        self.ours = []

    def warn_once(self, what, message):
        if what not in self.warned:
            self.warned.add(what)
            LOG.warning("atc plugin: %s", message)

    def kick(self, end=None, chained=False, ends=None):
        """Starts a kicked tick for the turn that ended (``end``: ``turn_end``'s dict;
        ``None``: not known which; ``ends``: several, as a list; ``chained``: the turns are
        in the mark). Never raises, never waits: at worst a turn's end is not announced,
        and the cadence's next tick does the work."""
        ended = [] if chained else (ends or ([end] if end else None))
        try:
            with self.lock:
                self._start(["tick", "--kicked", "--json"], chained, mark=True, ended=ended)
        except Exception as err:  # pylint: disable=broad-except
            self.warn_once("error", "cannot start atc tick at the end of a turn: %r" % err)

    def tick(self):
        """The cadence's tick: started unless one of ours still runs (it does the work)."""
        try:
            with self.lock:
                return self._start(["tick", "--json"], True, mark=False, ended=None)
        except Exception as err:  # pylint: disable=broad-except
            self.warn_once("error", "cannot start atc tick for the cadence: %r" % err)
            return False

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def _start(self, args, chained, mark, ended):
        if STANDBY.now():
            return False  # the seed delivers: atc ticks nothing, kicked or not
        path = job_file()
        if not has_work(path):
            return False
        if self.running():
            if mark and ended != []:
                # A tick of ours is running: it makes one more pass for this turn's end.
                append_mark(path, (json.dumps(ended[0]) if ended else "") + "\n")
            return False
        exe, problem = find_atc()
        if exe is None:
            self.warn_once("missing", "the end-of-turn kick cannot start atc: " + problem)
            return False
        env = atc_env()
        env.pop("ATC_KICK", None)
        if ended is not None:
            # The environment of the child alone: not its command line, not a log.
            env["ATC_KICK"] = json.dumps(ended)
        span = [time.time(), None]
        proc = subprocess.Popen(  # pylint: disable=consider-using-with
            [exe, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
            env=env,
        )
        self.ours = self.ours[-31:] + [span]
        self.proc = proc
        self.reaper = threading.Thread(
            target=self.reap, args=(proc, chained, span, " ".join(args)),
            name="atc-kick-reaper", daemon=True
        )
        self.reaper.start()
        return True

    def reap(self, proc, chained, span, what):
        # Read in this thread, never in the server's event loop: the tick's one JSON
        # report, once it exits.
        try:
            out, _ = proc.communicate()
        except Exception:  # pylint: disable=broad-except
            out = b""
        code = proc.wait()
        span[1] = time.time()
        # Its give-ups: nobody reads its stderr; QwenPaw's log is where this server's
        # people look (and the next `atc tick` a person hears says them too).
        for line in give_up_lines(out):
            LOG.warning("%s", line)
        if code != 0:
            self.warn_once(
                "exit",
                "atc %s exited %s; `atc tick -v` as the server's user says why" % (what, code),
            )
        # A mark left while that tick was letting go (after its last look): one more tick,
        # once (a tick that cannot take the mark must not start ticks forever).
        if not chained and sidecar(job_file(), "tick.again").exists():
            self.kick(chained=True)

    def started_it(self, at):
        """Was a tick that started at ``at`` (epoch seconds, as the heartbeat has it, to
        the second) one of ours?"""
        now = time.time()
        return any(
            start - 1.5 <= at <= (end if end is not None else now) + 1.5
            for start, end in self.ours
        )


def rfc3339(at):
    return datetime.fromtimestamp(int(at), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def epoch(text):
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except (TypeError, ValueError):
        return None


def cadence_period():
    """``ATC_CADENCE`` (``20s``, ``1m``, or seconds), 20 s by default; 0 or ``off``: none."""
    raw = os.environ.get("ATC_CADENCE", "").strip().lower()
    if not raw:
        return 20.0
    if raw in ("0", "off", "none", "no"):
        return 0.0
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(s|m|)", raw)
    if not match:
        LOG.warning("atc plugin: ATC_CADENCE=%r is not like 20s or 1m: using 20s", raw)
        return 20.0
    value = float(match.group(1)) * (60 if match.group(2) == "m" else 1)
    return max(value, 1.0)


class Cadence:
    """Every period, while watches wait: ``atc tick``, unless a tick this plugin did not
    start ran within the last three periods (a system timer ticks: stay out of its way).
    Each beat says which in ``<job file>.cadence`` (``atc doctor`` reads it)."""

    STANDBY_PERIODS = 3

    def __init__(self, kicker, period):
        self.kicker = kicker
        self.period = period
        self.stop = threading.Event()
        self.thread = None
        self.timer_seen_at = None

    def start(self):
        if self.period <= 0 or (self.thread is not None and self.thread.is_alive()):
            return
        # A tick already recent when we start was not ours: someone else ticks.
        self.look()
        self.thread = threading.Thread(target=self.run, name="atc-cadence", daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.wait(self.period):
            try:
                self.beat()
            except Exception as err:  # pylint: disable=broad-except
                self.kicker.warn_once("cadence", "the cadence failed a beat: %r" % err)

    def look(self):
        """Notes a tick seen in the heartbeat that this plugin did not start."""
        try:
            with open(str(sidecar(job_file(), "tick.lock")), encoding="utf-8") as fh:
                beat = json.loads(fh.readline() or "{}")
        except (OSError, ValueError):
            return
        at = epoch(beat.get("last_tick_at")) if isinstance(beat, dict) else None
        if at is not None and not self.kicker.started_it(at):
            if self.timer_seen_at is None or at > self.timer_seen_at:
                self.timer_seen_at = at

    def timer_ticks(self, now):
        return (
            self.timer_seen_at is not None
            and now - self.timer_seen_at < self.STANDBY_PERIODS * self.period
        )

    def beat(self):
        self.look()
        now = time.time()
        standing_by = self.timer_ticks(now)
        started = False
        if not standing_by:
            started = self.kicker.tick()
        self.say(now, standing_by, started)
        return started

    def say(self, now, standing_by, started):
        path = sidecar(job_file(), "cadence")
        if not path.parent.is_dir():
            return  # no job file's directory yet: nothing to tick, nothing to tell
        doc = {
            "by": "atc's QwenPaw plugin",
            "pid": os.getpid(),
            "every_secs": self.period,
            "at": rfc3339(now),
            "ticking": not standing_by,
            "started_a_tick": started,
            "timer_seen_at": rfc3339(self.timer_seen_at) if self.timer_seen_at else None,
            "standing_by": STANDBY.now(),
        }
        tmp = Path(str(path) + ".tmp-%d" % os.getpid())
        fd = os.open(str(tmp), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(doc) + "\n")
        os.replace(str(tmp), str(path))


STANDBY = Standby()
KICKER = Kicker()
CADENCE = Cadence(KICKER, cadence_period())
SKILLS = Path(__file__).resolve().parent / "skills"


def kick_hook(kicker):
    """A ``FINALLY`` runtime hook (once per turn: chats and background tasks alike)."""
    from qwenpaw.runtime.hooks import HookBase, HookResult  # the host
    from qwenpaw.runtime.phases import Phase

    class AtcKickHook(HookBase):
        phase = Phase.FINALLY
        name = "atc_kick"
        # After QwenPaw's own end-of-turn work.
        priority = 1000

        async def run(self, ctx):
            kicker.kick(turn_end(ctx))
            return HookResult()

    return AtcKickHook()


# -- Auto-watch: every background task a turn's submit_to_agent started ------------------
#
# A middleware the plugin registers (QwenPaw builds one per turn, `runtime/builder.py`
# `_build_middlewares`) sees each tool call of that turn return (`on_acting`): exactly
# this turn's calls, none of the earlier turns the agent's memory holds. It notes the
# background tasks submit_to_agent started (task id, target agent, child session), and
# the finished results check_agent_task showed the parent (reported to atc at once, while
# the parent's chat is still busy: `atc parent-read`, so atc does not post them too). At
# the turn's end a FINALLY hook runs one `atc watch --origin auto --json` for the turn's
# submissions, detached; atc decides (auto-watch on or off, a task already watched, ACP).

TURN_KEY = "atc.turn"
SUBMIT = "submit_to_agent"
CHECK = "check_agent_task"
CANCEL = "cancel_task_callback"
_TASK_LINE = re.compile(r"\A\s*\[TASK_ID:\s*([^\]\s]+)\s*\]")
_SESSION_LINE = re.compile(r"^\[SESSION:\s*(.*?)\s*\]\s*$", re.M)
_FINISHED = re.compile(r"\A\s*\[TASK_ID:\s*([^\]\s]+)\s*\]\s*\n\[STATUS:\s*finished\s*\]")
# The child session QwenPaw generates: "<from>:to:<to>:<milliseconds>:<8 hex>".
_GENERATED_SESSION = re.compile(r"\A[^:\s]+:to:([^:\s]+):\d+:[0-9a-f]{8}\Z")


def normalize_id(value):
    """As QwenPaw's ``normalize_id``: surrounding whitespace and quotes dropped."""
    if not isinstance(value, str):
        return None
    return value.strip().strip("'\"").strip() or None


def call_arguments(raw):
    """A tool call's arguments (the JSON the model wrote), as a dict; {} when unreadable."""
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def tool_output(items):
    """The text a tool call returned: its final ToolResponse's text blocks, else the text of
    the chunks it streamed."""
    def text_of(item):
        return "".join(
            getattr(block, "text", "") or ""
            for block in (getattr(item, "content", None) or [])
            if isinstance(getattr(block, "text", None), str)
        )

    responses = [i for i in items if type(i).__name__ == "ToolResponse"]
    if responses:
        return text_of(responses[-1])
    return "".join(text_of(i) for i in items)


def background_submission(name, arguments, output):
    """(task id, agent it runs on, child session) when this call was a submit_to_agent that
    started a background task (its output opens with ``[TASK_ID: …]``, then
    ``[SESSION: …]``); None for any other call, and for a submission that failed (``ERROR:
    …``, ``Agent [x] not exists``). chat_with_agent (foreground: its answer is in the same
    turn) and spawn_subagent are never watched."""
    if name != SUBMIT:
        return None
    task = _TASK_LINE.match(output or "")
    if not task:
        return None
    session = _SESSION_LINE.search(output)
    child = session.group(1) if session and session.group(1) else None
    target = normalize_id(call_arguments(arguments).get("to_agent"))
    if target is None and child:
        generated = _GENERATED_SESSION.match(child)
        target = generated.group(1) if generated else None
    return task.group(1), target, child


def finished_read(name, output):
    """The task whose finished result a check_agent_task call showed (``[STATUS:
    finished]``: completed or failed), else None. A task still running is no read."""
    if name != CHECK:
        return None
    found = _FINISHED.match(output or "")
    return found.group(1) if found else None


def turn_chat(ctx):
    """The chat a turn ran in, from its HookContext: (agent, session, user, channel). An ACP
    turn (``request_context["qwenpaw.ephemeral"]``: never saved, no chat atc can post
    into) has no session: nothing of it is watched."""
    request = getattr(ctx, "request", None)
    context = getattr(request, "request_context", None)
    ephemeral = isinstance(context, dict) and str(context.get("qwenpaw.ephemeral")).lower() in (
        "true", "1", "yes")
    if ephemeral:
        return (getattr(ctx, "agent_id", None) or None, None, None, None)
    return (
        getattr(ctx, "agent_id", None) or None,
        getattr(ctx, "session_id", None) or None,
        getattr(request, "user_id", None) or None,
        getattr(request, "channel", None) or None,
    )


def chat_args(chat):
    agent, session, user, channel = chat
    args = ["--session", session]
    if user:
        args += ["--user", user]
    if channel:
        args += ["--channel", channel]
    if agent:
        args += ["--agent", agent]
    return args


class Turn:
    """What one turn's tool calls did, as they returned: the background tasks it submitted
    (in order, each once), the finished results it read, the watches it cancelled."""

    def __init__(self, chat):
        self.chat = chat
        self.submitted = []
        self.read = set()
        self.cancelled = set()

    def saw(self, name, arguments, output):
        """Notes one tool call; returns the task id of a finished result it read, if any."""
        submission = background_submission(name, arguments, output)
        if submission and submission[0] not in [s[0] for s in self.submitted]:
            self.submitted.append(submission)
        if name == CANCEL:
            task = normalize_id(str(call_arguments(arguments).get("task_id") or ""))
            if task:
                self.cancelled.add(task)
        read = finished_read(name, output)
        if read:
            self.read.add(read)
        return read

    def to_watch(self):
        """The submissions the turn's end watches: not one whose result the turn already
        read itself, nor one it cancelled the callback of."""
        return [s for s in self.submitted if s[0] not in self.read | self.cancelled]


def auto_watch_args(turn):
    """``atc watch --origin auto …`` for the turn, and what goes on its standard input
    (each task, its child session and the agent it runs on); None when the turn started
    nothing to watch or ran in no chat."""
    tasks = turn.to_watch()
    if not tasks or not turn.chat[1]:
        return None
    args = ["watch", "--origin", "auto", "--json", "--from", "-", *chat_args(turn.chat)]
    lines = []
    for task, target, child in tasks:
        lines.append("[TASK_ID: %s]" % task)
        if child:
            lines.append("[SESSION: %s]" % child)
        if target:
            lines.append("[TARGET_AGENT: %s]" % target)
    return args, "\n".join(lines) + "\n"


def parent_read_args(chat, task):
    """``atc parent-read`` of one finished result the parent read; None with no chat."""
    if not chat[1]:
        return None
    return ["parent-read", task, "--json", *chat_args(chat)]


class Reporter:
    """Starts the auto-watch and parent-read commands, detached (own session, stdin fed and
    output read by a reaper thread), never waiting and never raising; after an auto-watch
    that watched something, a kick (results that finished during the turn are then
    delivered at once, not at the next turn's end or beat of the cadence)."""

    def __init__(self, kicker):
        self.kicker = kicker
        # The reaper threads of the last few commands (the tests wait on them).
        self.reapers = []

    def turn_ended(self, turn):
        try:
            if STANDBY.now():
                return  # the seed watches what this turn submitted (its own tool, if called)
            asked = auto_watch_args(turn)
            if asked is not None:
                self.start(asked[0], asked[1], self.watched)
        except Exception as err:  # pylint: disable=broad-except
            self.kicker.warn_once("auto-watch", "the automatic watch at a turn's end failed: %r" % err)

    def read(self, chat, task):
        try:
            args = parent_read_args(chat, task)
            if args is not None:
                self.start(args, None, None)
        except Exception as err:  # pylint: disable=broad-except
            self.kicker.warn_once("parent-read", "cannot tell atc the parent read a result: %r" % err)

    def start(self, args, stdin_text, done):
        exe, problem = find_atc()
        if exe is None:
            self.kicker.warn_once("missing-auto", "auto-watch cannot start atc: " + problem)
            return None
        proc = subprocess.Popen(  # pylint: disable=consider-using-with
            [exe, *args],
            stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
            env=atc_env(),
        )
        reaper = threading.Thread(
            target=self.reap, args=(proc, stdin_text, done, args[0]),
            name="atc-auto-reaper", daemon=True,
        )
        reaper.start()
        self.reapers = self.reapers[-7:] + [reaper]
        return proc

    def reap(self, proc, stdin_text, done, what):
        try:
            data = stdin_text.encode("utf-8") if stdin_text is not None else None
            out, _ = proc.communicate(data)
            if proc.returncode != 0:
                self.kicker.warn_once(
                    "exit-" + what,
                    "atc %s (from the end of a turn) exited %s; `atc log` and `atc doctor` as "
                    "the server's user say more" % (what, proc.returncode),
                )
            elif done is not None:
                done(out)
        except Exception as err:  # pylint: disable=broad-except
            self.kicker.warn_once("reap-" + what, "atc %s: %r" % (what, err))

    def watched(self, out):
        """After the auto-watch: a tick, when it watched anything."""
        try:
            doc = json.loads(out.decode("utf-8", "replace"))
        except ValueError:
            return
        if isinstance(doc, dict) and doc.get("jobs"):
            self.kicker.kick(ends=children_of(doc["jobs"]))


def children_of(jobs):
    """The kick after an auto-watch: as if each new watch's child had just ended its turn
    (its agent, its session), so the tick polls those watches and nothing else; ``None``
    (look at everything) when a watch's child session is not known."""
    ends = []
    for job in jobs:
        if not isinstance(job, dict) or not job.get("child_session"):
            return None
        agent = job.get("target_agent") or job.get("agent_id")
        if not agent:
            return None
        ends.append({"agent_id": agent, "session_id": job["child_session"]})
    return ends or None


REPORTER = Reporter(KICKER)


def turn_middleware(reporter):
    """The middleware factory (``api.register_middleware``): one recorder per turn, kept in
    the turn's ``ctx.extras`` for the FINALLY hook. It passes every tool call's output on
    unchanged and never raises into the turn."""
    from agentscope.middleware import MiddlewareBase  # the host

    class AtcTurnRecorder(MiddlewareBase):
        def __init__(self, turn):
            self.turn = turn

        async def on_acting(self, agent, input_kwargs, next_handler):  # pylint: disable=unused-argument
            call = input_kwargs.get("tool_call")
            items = []
            async for item in next_handler(**input_kwargs):
                items.append(item)
                yield item
            try:
                read = self.turn.saw(
                    getattr(call, "name", ""), getattr(call, "input", ""), tool_output(items)
                )
                if read:
                    reporter.read(self.turn.chat, read)
            except Exception as err:  # pylint: disable=broad-except
                reporter.kicker.warn_once("record", "cannot note a tool call of the turn: %r" % err)

    def factory(ctx, agent_config):  # pylint: disable=unused-argument
        try:
            turn = Turn(turn_chat(ctx))
            ctx.extras[TURN_KEY] = turn
            return AtcTurnRecorder(turn)
        except Exception as err:  # pylint: disable=broad-except
            reporter.kicker.warn_once("factory", "no auto-watch for a turn: %r" % err)
            return None

    return factory


def auto_watch_hook(reporter):
    """A ``FINALLY`` runtime hook: the turn's background submissions, watched (success,
    failure and cancel alike: the children run whatever became of the turn)."""
    from qwenpaw.runtime.hooks import HookBase, HookResult  # the host
    from qwenpaw.runtime.phases import Phase

    class AtcAutoWatchHook(HookBase):
        phase = Phase.FINALLY
        name = "atc_auto_watch"
        # Before the kick (1000): the watch is registered as soon as possible.
        priority = 990

        async def run(self, ctx):
            turn = getattr(ctx, "extras", {}).get(TURN_KEY)
            if turn is not None:
                reporter.turn_ended(turn)
            return HookResult()

    return AtcAutoWatchHook()


DESCRIPTIONS = {
    "watch_agent_task": "Give a task a deadline or check-ins, or watch one started another way; submit_to_agent's tasks come back by themselves (atc).",
    "watch_agent_tasks": "Get several tasks' results back together as one message (atc).",
    "callback_task_status": "List the tasks this chat watches (atc).",
    "cancel_task_callback": "Stop watching a task; the task keeps running unless stop=True (atc).",
}


class AtcPlugin:
    """Registers the tools, the end-of-turn kick, the cadence and (from the plugin zip)
    the atc-callback skill. QwenPaw imports this module and calls ``plugin.register``."""

    def register(self, api):
        # The atc it carries made executable again, or said skipped, once, at load.
        find_atc()
        STANDBY.now()
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
            LOG.warning("atc plugin: no end-of-turn kick (the cadence still ticks): %r", err)
        try:
            api.register_middleware(turn_middleware(REPORTER), priority=100)
            api.register_runtime_hook(auto_watch_hook(REPORTER))
        except Exception as err:  # pylint: disable=broad-except
            LOG.warning(
                "atc plugin: no auto-watch (call watch_agent_task after submit_to_agent): %r", err
            )
        if SKILLS.is_dir():
            try:
                api.register_skill_provider(SKILLS)
            except Exception as err:  # pylint: disable=broad-except
                LOG.warning("atc plugin: the atc-callback skill is not installed: %r", err)
        try:
            # Started once the server is up, stopped when the plugin is unloaded (a
            # reinstall loads a new copy of this module with a cadence of its own).
            api.register_startup_hook(
                hook_name="atc_cadence_start", callback=CADENCE.start, priority=90
            )
            api.register_shutdown_hook(
                hook_name="atc_cadence_stop", callback=CADENCE.stop.set, priority=10
            )
        except Exception as err:  # pylint: disable=broad-except
            LOG.warning("atc plugin: no cadence (run a system timer: atc timer print): %r", err)


plugin = AtcPlugin()
