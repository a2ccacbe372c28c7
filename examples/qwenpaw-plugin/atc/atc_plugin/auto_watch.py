# -*- coding: utf-8 -*-
"""Auto-watch: every background task a turn's submit_to_agent started, watched when the
turn ends, with no tool call by the model; a finished result the parent read itself with
check_agent_task reported at once (``atc parent-read``), so atc does not post it too.

A middleware the plugin registers (QwenPaw builds one per turn, ``runtime/builder.py``
``_build_middlewares``) sees each tool call of that turn return (``on_acting``): exactly
this turn's calls, none of the earlier turns the agent's memory holds. At the turn's end a
``FINALLY`` hook runs one ``atc watch --origin auto --json`` for the turn's submissions,
detached; atc decides (auto-watch on or off, a task already watched, ACP). The model is
told where it reads: a background submission's result ends with :data:`TOLD`, a check of a
running task atc watches for this chat with :data:`TOLD_WATCHED` (``atc status``, bounded)."""

import json
import re
import subprocess
import threading
import time

from . import kick, tools, where

TURN_KEY = "atc.turn"
SUBMIT = "submit_to_agent"
CHECK = "check_agent_task"
CANCEL = "cancel_task_callback"
_TASK_LINE = re.compile(r"\A\s*\[TASK_ID:\s*([^\]\s]+)\s*\]")
_SESSION_LINE = re.compile(r"^\[SESSION:\s*(.*?)\s*\]\s*$", re.M)
_FINISHED = re.compile(r"\A\s*\[TASK_ID:\s*([^\]\s]+)\s*\]\s*\n\[STATUS:\s*finished\s*\]")
# A task check_agent_task found not finished yet: QwenPaw's ``format_background_status_text``
# says ``[STATUS: running]`` ("Task is still running..."), or ``pending`` (in its queue) or
# ``submitted`` (waiting to start).
_RUNNING = re.compile(
    r"\A\s*\[TASK_ID:\s*([^\]\s]+)\s*\]\s*\n\[STATUS:\s*(?:running|pending|submitted)\s*\]")
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


# What the model reads at the end of a background submission's tool result when atc will
# post that task's result into this chat (issue 37): short, stable, documented (agents and
# prompts may match it); it holds no path and no other chat's ids.
TOLD = ("[atc: this task's result will be posted into this chat when it finishes; "
        "you need not call check_agent_task]")
# What the model reads at the end of a check_agent_task's result on a task still running
# that atc watches for this chat (issue 37), whatever started the watch: as short, stable
# and documented as TOLD; it holds no path and no other chat's ids.
TOLD_WATCHED = ("[atc: atc watches this task for this chat; its result will be posted into "
                "this chat when it finishes; you need not call check_agent_task again]")
# How long the check_agent_task result waits for ``atc status`` (it reads only the job
# file): past it, the model reads QwenPaw's answer unchanged.
WATCHED_TIMEOUT = 5.0


def tell_the_model(chat, name, arguments, response):
    """Ends a submit_to_agent's result (a ToolResponse) with :data:`TOLD` when atc will
    watch that task for this chat by itself: a background submission that started (not a
    failed one, not chat_with_agent), a turn with a chat (no ACP turn), auto-watch on, the
    seed plugin not delivering instead. Returns whether it did."""
    if name != SUBMIT or chat[1] is None:
        return False
    if not background_submission(name, arguments, tool_output([response])):
        return False
    if where.STANDBY.now():
        return False
    found, _ = where.files()
    if found is None or not found.auto_watch:
        return False
    return append_line(response, TOLD)


def append_line(response, line):
    """Ends the last text block of ``response`` with ``line`` (once); whether it did."""
    blocks = [b for b in (getattr(response, "content", None) or [])
              if isinstance(getattr(b, "text", None), str)]
    if not blocks or line in blocks[-1].text:
        return False
    blocks[-1].text = blocks[-1].text.rstrip("\n") + "\n\n" + line
    return True


def running_check(name, output):
    """The task a check_agent_task call found still running (not finished), else None."""
    if name != CHECK:
        return None
    found = _RUNNING.match(output or "")
    return found.group(1) if found else None


async def watched_here(chat, task):
    """Whether atc has a pending watch of ``task`` for ``chat`` (its session, and its user,
    channel and agent where the turn has them), as ``atc status <task> --json`` says within
    :data:`WATCHED_TIMEOUT`; False when it has none, watches it for another chat, the
    watch ended, or atc cannot say (missing, failing, slow, an answer it cannot read)."""
    code, out, _ = await tools.run_atc(["status", task, "--json"], timeout=WATCHED_TIMEOUT)
    if code != 0:
        return False
    return any(
        job.get("task_id") == task and job.get("status") == "pending" and tools.mine(job, chat)
        for job in tools.jobs_of(out)
    )


async def tell_the_model_watched(chat, name, response):
    """Ends a check_agent_task's result (a ToolResponse) with :data:`TOLD_WATCHED` when the
    task still runs and atc watches it for this chat (a pending watch, whatever made it:
    auto-watch, a tool, the command line); never for a finished task, one not watched or
    watched for another chat, an ACP turn, or with the seed plugin delivering instead.
    Returns whether it did."""
    if name != CHECK or chat[1] is None:
        return False
    task = running_check(name, tool_output([response]))
    if task is None or where.STANDBY.now():
        return False
    if not await watched_here(chat, task):
        return False
    return append_line(response, TOLD_WATCHED)


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
            args = call_arguments(arguments)
            # Only the check-ins stopped (check_ins=True): the task is still to be watched.
            # The ids as the tool read them (several in one text, labelled, quoted).
            if not tools.truthy(args.get("check_ins")):
                self.cancelled.update(tools.ids_in(args.get("task_id") or ""))
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
    args = ["watch", "--origin", "auto", "--json", "--from", "-", *tools.chat_args(turn.chat)]
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
    return ["parent-read", task, "--json", *tools.chat_args(chat)]


# The exits a later try of an automatic watch (or parent-read) may get past: the config
# file (78: a person fixes it), the job file locked (75), unwritable (4) or unreadable (3).
# Any other refusal (a chat that does not exist, a task the server never had) stays one.
RETRY_EXITS = (3, 4, 75, 78)
# How long such a command is tried again (each beat of the cadence and each turn's end),
# and how many wait at most (the oldest goes first, said in QwenPaw's log).
RETRY_FOR_SECS = 24 * 3600
RETRY_MAX = 64
_TASK_IDS = re.compile(r"^\[TASK_ID:\s*([^\]\s]+)\s*\]", re.M)


class Retry:
    """A command atc refused for a reason a later try may get past."""

    def __init__(self, args, stdin_text, done, code, said):
        self.args = args
        self.stdin_text = stdin_text
        self.done = done
        self.since = time.time()
        self.tries = 1
        self.code = code
        self.said = said


def tasks_of(args, stdin_text):
    """The task ids a command started by the :class:`Reporter` names, for QwenPaw's log."""
    if args and args[0] == "parent-read":
        return args[1:2]
    return _TASK_IDS.findall(stdin_text or "")


class Reporter:
    """Starts the auto-watch and parent-read commands, detached (own session, stdin fed and
    output read by a reaper thread), never waiting and never raising; after an auto-watch
    that watched something, a kick (results that finished during the turn are then
    delivered at once, not at the next turn's end or beat of the cadence). A command atc
    refused for a reason a later try may get past (a config file it cannot use, say) is
    tried again at each beat of the cadence and each turn's end until it lands (for a day):
    a typo in the config file never loses a watch. Each refusal is said in QwenPaw's log,
    naming its tasks, and so is its landing or its end."""

    def __init__(self, kicker):
        self.kicker = kicker
        # The reaper threads of the last few commands (the tests wait on them).
        self.reapers = []
        self.lock = threading.Lock()
        # The commands waiting for another try (none of them running).
        self.retries = []

    def turn_ended(self, turn):
        try:
            if where.STANDBY.now():
                return  # the seed watches what this turn submitted (its own tool, if called)
            self.retry()
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

    def retry(self, now=None):
        """The refused commands tried again (the cadence's beat and each turn's end call
        this); one waiting longer than :data:`RETRY_FOR_SECS` is given up, and said."""
        try:
            if where.STANDBY.now():
                return
            now = time.time() if now is None else now
            with self.lock:
                due, self.retries = self.retries, []
            for r in due:
                if now - r.since > RETRY_FOR_SECS:
                    self.gave_up(r, "refused for a day")
                    continue
                r.tries += 1
                self.start(r.args, r.stdin_text, r.done, r)
        except Exception as err:  # pylint: disable=broad-except
            self.kicker.warn_once("retry", "cannot try a refused atc command again: %r" % err)

    def gave_up(self, r, why):
        what, tasks = r.args[0], ", ".join(tasks_of(r.args, r.stdin_text)) or "its tasks"
        lost = "not watched: watch them by hand (`atc watch`)" if what == "watch" else (
            "atc may still post the result the parent read")
        self.kicker.warn_once(
            "gave-up-%s %s" % (what, tasks),
            "atc %s of %s (from the end of a turn): %s after %d tries (exit %s: %s); %s"
            % (what, tasks, why, r.tries, r.code, r.said or "it said nothing", lost),
        )

    def start(self, args, stdin_text, done, retry=None):
        exe, problem = where.find_atc()
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
            env=where.atc_env(),
        )
        reaper = threading.Thread(
            target=self.reap, args=(proc, stdin_text, done, args, retry),
            name="atc-auto-reaper", daemon=True,
        )
        reaper.start()
        self.reapers = self.reapers[-7:] + [reaper]
        return proc

    def reap(self, proc, stdin_text, done, args, retry):
        what = args[0]
        try:
            data = stdin_text.encode("utf-8") if stdin_text is not None else None
            out, err = proc.communicate(data)
            tasks = ", ".join(tasks_of(args, stdin_text)) or "its tasks"
            if proc.returncode == 0:
                if retry is not None:
                    self.kicker.warn_once(
                        "landed-%s %s" % (what, tasks),
                        "atc %s of %s (from the end of a turn) landed on try %d, after exit %s"
                        % (what, tasks, retry.tries, retry.code),
                    )
                if done is not None:
                    done(out)
                return
            code = proc.returncode
            if code not in RETRY_EXITS:
                # atc's own line is left out: it may name a chat (a session id).
                self.kicker.warn_once(
                    "exit-%s %s" % (what, tasks),
                    "atc %s of %s (from the end of a turn) exited %s; `atc log` and `atc doctor` "
                    "as the server's user say more" % (what, tasks, code),
                )
                return
            # atc's line names a file and what to do (a config file's key, a lock).
            lines = (err or b"").decode("utf-8", "replace").strip().splitlines()
            said = lines[-1] if lines else ""
            if retry is None:
                self.kicker.warn_once(
                    "exit-%s %s" % (what, tasks),
                    "atc %s of %s (from the end of a turn) exited %s: %s; tried again at each "
                    "beat of the cadence and each turn's end until it lands (for a day); "
                    "`atc doctor` as the server's user says more"
                    % (what, tasks, code, said or "(it said nothing)"),
                )
                retry = Retry(args, stdin_text, done, code, said)
            retry.code, retry.said = code, said
            with self.lock:
                self.retries.append(retry)
                over = self.retries[:-RETRY_MAX] if len(self.retries) > RETRY_MAX else []
                self.retries = self.retries[len(over):]
            for old in over:
                self.gave_up(old, "%d other refused commands came after it" % RETRY_MAX)
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
        # Not a turn's end: atc polls the child once and does not look again.
        ends.append({"agent_id": agent, "session_id": job["child_session"], "watched": True})
    return ends or None


REPORTER = Reporter(kick.KICKER)


def turn_middleware(reporter):
    """The middleware factory (``api.register_middleware``): one recorder per turn, kept in
    the turn's ``ctx.extras`` for the FINALLY hook. It passes every tool call's output on
    unchanged (but a background submission's, which ends with :data:`TOLD` when atc will
    watch it, and a check of a running task atc watches for this chat, which ends with
    :data:`TOLD_WATCHED`) and never raises into the turn."""
    from agentscope.middleware import MiddlewareBase  # the host

    class AtcTurnRecorder(MiddlewareBase):
        def __init__(self, turn):
            self.turn = turn

        async def on_acting(self, agent, input_kwargs, next_handler):  # pylint: disable=unused-argument
            call = input_kwargs.get("tool_call")
            items = []
            async for item in next_handler(**input_kwargs):
                if type(item).__name__ == "ToolResponse":
                    try:
                        tell_the_model(self.turn.chat, getattr(call, "name", ""),
                                       getattr(call, "input", ""), item)
                    except Exception as err:  # pylint: disable=broad-except
                        reporter.kicker.warn_once("told", "cannot tell the model atc watches: %r" % err)
                    try:
                        await tell_the_model_watched(self.turn.chat, getattr(call, "name", ""), item)
                    except Exception as err:  # pylint: disable=broad-except
                        reporter.kicker.warn_once(
                            "told-watched", "cannot tell the model atc watches a running task: %r" % err)
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
            if turn.chat[1]:
                tools.RUNNING_TURNS[(turn.chat[0], turn.chat[1])] = turn
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
                key = (turn.chat[0], turn.chat[1])
                if tools.RUNNING_TURNS.get(key) is turn:
                    del tools.RUNNING_TURNS[key]
                reporter.turn_ended(turn)
            return HookResult()

    return AtcAutoWatchHook()
