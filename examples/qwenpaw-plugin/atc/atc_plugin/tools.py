# -*- coding: utf-8 -*-
"""The Agent Task Callback tools: each runs one ``atc ... --json`` for the calling chat
and answers with one short line the model can act on, never a file path, never another
chat's session or user."""

import asyncio
import json
import os
import re
import signal

from . import where

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
# What atc takes as a task id (`ids::parse_task_id`).
TASK_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


# The turn running in each chat, by (agent, session), as the turn's recorder
# (auto_watch.turn_middleware) keeps it until the turn ends: a tool called in that turn
# reads what the turn submitted so far. QwenPaw runs one turn per chat at a time.
RUNNING_TURNS = {}


def submitted_here(chat, task_id):
    """(agent it runs on, child session) of ``task_id`` when the turn running in ``chat``
    submitted it (its ``[SESSION: …]`` line, its ``to_agent``); None otherwise."""
    turn = RUNNING_TURNS.get((chat[0], chat[1]))
    for task, target, child in getattr(turn, "submitted", None) or ():
        if task == task_id:
            return target, child
    return None


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


async def run_atc(args, timeout=RUN_TIMEOUT):
    """Runs ``atc <args>``: (exit code, stdout, stderr), or (None, "", why it could not);
    a run longer than ``timeout`` seconds is killed."""
    exe, problem = where.find_atc()
    if exe is None:
        return None, "", problem
    try:
        proc = await asyncio.create_subprocess_exec(
            exe,
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=where.atc_env(),
            # Its own process group: a run past the timeout is killed with whatever it
            # started (an open pipe would keep the wait for it going).
            start_new_session=True,
        )
    except OSError as err:
        return None, "", "cannot run %s: %s. %s" % (exe, err, where.NOT_INSTALLED)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (AttributeError, OSError):
            proc.kill()
        await proc.wait()
        return None, "", "atc did not answer within %g s; try again later" % timeout
    return (
        proc.returncode,
        out.decode("utf-8", "replace"),
        err.decode("utf-8", "replace"),
    )


def scrub(text):
    """What the model may read of atc's words: no file paths (the job file's above all),
    no other chat's ids (a refusal's list of the chats sharing a session id)."""
    found, _ = where.files()
    if found is not None:
        text = text.replace(str(found.job_file), "atc's job file")
    # A path, but not a URL's (this server's own address may be named).
    text = re.sub(r"(?<![\w.:/])/[^\s'\"(),;]+", "(a file on the server)", text)
    text = re.sub(r"; chats with session id .*?(?=\. Pass |$)", "; no chat matches exactly", text)
    return text


def reason(stderr):
    """atc's own one-line error (``atc: ...``), scrubbed, cut to LINE_CAP characters."""
    lines = [l.strip() for l in stderr.splitlines() if l.strip()]
    said = next((l for l in reversed(lines) if l.startswith("atc: ")), None)
    # A value the argument parser refused: its "error: …" line, not the "For more
    # information, try '--help'." under it, which says nothing to a model.
    said = said or next((l for l in lines if l.startswith("error: ")), None)
    said = (said or (lines[-1] if lines else "atc failed without a message"))
    for prefix in ("atc: ", "error: "):
        if said.startswith(prefix):
            said = said[len(prefix):]
    # '--check-in <D>' names the flag with the parser's placeholder for its value.
    said = re.sub(r"(--[a-z-]+) <[A-Z_]+>", r"\1", said)
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


def tool_words(text):
    """atc's reason in this tool's words: its arguments, not atc's flags."""
    for flag, arg in (("--child-session", "child_session"), ("--stop-after", "stop_after"),
                      ("--check-in", "check_in"), ("--target-agent", "target_agent"),
                      ("--group", "group")):
        text = text.replace(flag, arg)
    return text


def for_model(text):
    """atc's words to a person as a model reads them: the tools for atc's commands (it
    asks check_agent_task, not `atc wait`; it watches again with watch_agent_task), the
    tools' arguments for atc's flags, no file paths."""
    text = re.sub(r"`atc wait [^`]*` or check_agent_task", "check_agent_task", text)
    # A person's commands to look at a result or post it again: the model has neither.
    text = re.sub(r" \(`atc status [^`]*` shows [^)]*\)", "", text)
    text = re.sub(r"\. `atc status [^`]*` shows the text; `atc redeliver [^`]*` tries again "
                  r"safely", "", text)
    text = re.sub(r"`atc watch [^`]* --check-in D` starts them",
                  "watch it again with watch_agent_task's check_in to start them", text)
    text = re.sub(r"`atc watch [^`]* --child-session SID` watches it with its session \(SID: ",
                  "watch it again with watch_agent_task's child_session (", text)
    return scrub(tool_words(text))


def no_chat():
    return (
        "Not watching: this call has no chat to send the result to (QwenPaw gave no "
        "session). Check the task with check_agent_task instead, at most once every 30 seconds."
    )


def watch_args(task_ids, target_agent, group, child_session="", stop_after="", check_in="",
               chat=None):
    chat = chat or chat_context()
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
    """(this chat's jobs, every other chat's task ids, the other chats' jobs that belong
    to this chat's delegation tree by task id), or None with why not."""
    code, out, err = await run_atc(["status", "--all", "--json"])
    if code is None:
        return None, err
    if code != 0:
        return None, reason(err)
    jobs = jobs_of(out)
    own = [j for j in jobs if mine(j, chat)]
    others = {j.get("task_id") for j in jobs if not mine(j, chat)}
    try:
        doc = json.loads(out)
    except ValueError:
        doc = None
    doc = doc if isinstance(doc, dict) else {}
    return (own, others, in_tree(doc, jobs, own), follow_ups_stuck(doc)), None


def follow_ups_stuck(doc):
    """What atc's ``stuck`` says of follow-ups (a child's later reply, sent up a delegation
    tree, that no one can post now: ``misrouted``, ``undelivered``…): by task id, each
    one's ``what``, in atc's order. Only a person moves them (``atc redeliver``)."""
    stuck = doc.get("stuck")
    found = {}
    for entry in stuck if isinstance(stuck, list) else ():
        if isinstance(entry, dict) and entry.get("follow_up") is True:
            found.setdefault(entry.get("task_id"), []).append(str(entry.get("what")))
    return found


def in_tree(doc, jobs, own):
    """The other chats' watches whose chain (atc's ``chains``: the watches above each, the
    nearest first) ends at a watch of this chat: a task a child of this chat delegated
    further, whose result atc sends up to this chat (issue 37). By task id."""
    chains = doc.get("chains") or {}
    if not isinstance(chains, dict):
        return {}
    ours = {j.get("task_id") for j in own}
    by_task = {j.get("task_id"): j for j in jobs}
    return {
        task: by_task[task]
        for task, above in chains.items()
        if isinstance(above, list) and above and above[-1] in ours and task in by_task
    }


async def watch(task_ids, target_agent="", group=None, child_session="", stop_after="", check_in=""):
    standing_by = where.STANDBY.answer()
    if standing_by:
        return standing_by
    if watch_args(task_ids, target_agent, group) is None:
        return no_chat()
    shown = ", ".join(task_ids)
    chat = chat_context()
    # A task this very turn submitted: its session and agent are on the submission's
    # lines, which the turn's end would read too; a model that leaves them out (a
    # deadline needs the session) gets them filled, never changed.
    here = [submitted_here(chat, t) for t in task_ids]
    if len(task_ids) == 1 and here[0] is not None:
        target, child = here[0]
        target_agent = (target_agent or "").strip() or target or ""
        child_session = (child_session or "").strip() or child or ""
    listed, problem = await chat_jobs(chat)
    if listed is None:
        return "Not watching %s: %s" % (shown, problem)
    taken = [t for t in task_ids if t in listed[1]]
    tree = listed[2].get(task_ids[0]) if len(task_ids) == 1 and taken else None
    if tree is not None:
        # A task of this chat's delegation tree (a child delegated it further): its
        # options apply to the same watch, which still goes to the child's chat; what the
        # child makes of the result comes up here as a follow-up.
        return await watch_in_tree(tree, task_ids, target_agent, child_session, stop_after, check_in)
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
        # Of several, say which: atc names the ones the server does not have.
        named = re.search(r"has no task (.+?) \(QwenPaw answers", err or "")
        missing = [t for t in task_ids if named and t in named.group(1).split(", ")]
        which = (
            "has no task %s" % ", ".join(missing)
            if len(task_ids) > 1 and missing else "has no such task"
        )
        return (
            "Not watching %s: this QwenPaw server %s (\"Task not found\")%s. "
            "Copy the ID exactly from the [TASK_ID: ...] line submit_to_agent returned." % (
                shown, which, "; nothing was watched" if len(task_ids) > 1 else "")
        )
    if code != 0:
        why = for_model(reason(err))
        watched = {j.get("task_id"): j.get("status") for j in listed[0]}
        if all(t in watched for t in task_ids):
            # Watched here already (the turn's end watched it): only the change was
            # refused. Polling would be wasted: say where each stands.
            return "Not changed %s: %s. %s" % (shown, why, standing(task_ids, watched))
        if all(h is not None for h in here):
            # Submitted in this turn: its end watches them all the same.
            return (
                "Not changed %s: %s. %s watched when your turn ends all the same: %s "
                "comes back into this chat by itself. Do not poll check_agent_task for %s."
                % ((shown, why) + (("It is", "the result", "it") if len(task_ids) == 1
                                   else ("They are", "each result", "them")))
            )
        return (
            "Not watching %s: %s. If you cannot fix that, check the task with "
            "check_agent_task instead, at most once every 30 seconds." % (shown, why)
        )
    jobs = jobs_of(out)
    ids = [j.get("task_id") for j in jobs] or list(task_ids)
    options = applied(jobs[0] if jobs else {}, target_agent, group, child_session, stop_after, check_in)
    confirmed = (" (%s)" % "; ".join(options)) if options else ""
    if group:
        # One message for the whole group, once none of its tasks (from every call
        # with this group name) is still running: not one result per finished task.
        comes = (
            "the group's results come back into this chat together, as one message, by "
            "themselves once none of its tasks is still running. Do not poll "
            "check_agent_task for them"
        )
    elif len(ids) == 1:
        comes = (
            "the result comes back into this chat by itself when it finishes. Do not poll "
            "check_agent_task for it"
        )
    else:
        comes = (
            "each result comes back into this chat by itself when its task finishes. Do "
            "not poll check_agent_task for them"
        )
    return "Watching %s%s: %s; tell the user and end your turn." % (
        ", ".join(i for i in ids if i), confirmed, comes)


def standing(task_ids, statuses):
    """Where this chat's watches of ``task_ids`` stand, for a model told a change was
    refused: still coming (do not poll), posted here already, or ended without a post."""
    coming = [t for t in task_ids if statuses.get(t) in ("pending", "delivering")]
    posted = [t for t in task_ids if statuses.get(t) == "done"]
    ended = [t for t in task_ids if t not in coming and t not in posted]
    said = []
    if coming:
        said.append(
            "It is still watched: the result comes back into this chat by itself."
            if len(task_ids) == 1 else
            "%s %s still watched: %s result comes back into this chat by itself." % (
                ", ".join(coming), "is" if len(coming) == 1 else "are",
                "its" if len(coming) == 1 else "each")
        )
    def naming(ids, alone, one, many):
        # The subject: `alone` when the call named one task, else one id or several.
        return alone if len(task_ids) == 1 else one % ids[0] if len(ids) == 1 else many % ", ".join(ids)

    if posted:
        said.append(
            "%s posted into this chat already: the %s starting with %s." % (
                naming(posted, "Its result was", "The result of %s was", "The results of %s were"),
                "message" if len(posted) == 1 else "messages",
                " and ".join("[TASK_ID: %s]" % t for t in posted))
        )
    if ended:
        said.append(
            "%s %s; callback_task_status says what happened." % (
                naming(ended, "Its watch ended as", "The watch of %s ended as",
                       "The watches of %s ended as"),
                ", ".join(str(statuses.get(t)) for t in ended))
        )
    if coming:
        said.append("Do not poll check_agent_task for %s." % ("it" if len(coming) == 1 else "them"))
    return " ".join(said)


async def watch_in_tree(job, task_ids, target_agent, child_session, stop_after, check_in):
    shown = ", ".join(task_ids)
    chat = (job.get("agent_id"), job.get("session_id"), job.get("user_id"), job.get("channel"))
    target = (target_agent or "").strip() or job.get("target_agent") or ""
    args = watch_args(task_ids, target, None, child_session, stop_after, check_in, chat=chat)
    code, out, err = await run_atc(args)
    if code is None or code != 0:
        why = err if code is None else tool_words(reason(err))
        return (
            "Not changed %s: %s. It is still watched: its result reaches the agent you "
            "delegated to, and what that agent makes of it comes back into this chat by "
            "itself. Do not poll check_agent_task for it." % (shown, why)
        )
    jobs = jobs_of(out)
    options = applied(jobs[0] if jobs else {}, target, None, child_session, stop_after, check_in)
    confirmed = (" (%s)" % "; ".join(options)) if options else ""
    return (
        "Watching %s%s: a task your delegate started. Its result goes to that agent, and "
        "its follow-up comes back into this chat by itself. Do not poll check_agent_task "
        "for it; tell the user and end your turn." % (shown, confirmed)
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
            ``cancel_task_callback(task_id, stop=True)``). For a task submitted in this
            same turn it is taken from that answer when you leave it out (and so is
            ``target_agent``).
        stop_after (`str`, optional):
            A deadline such as ``10m`` or ``1h``: if the task is still running that long
            after it started, it is stopped and its "Task cancelled" result comes back
            here with a line saying so. Use it when the result is worthless after a while
            (something the user is waiting for now, a task that may hang); leave it empty
            for work that should finish however long it takes. Needs ``child_session``
            (known already for a task submitted in this turn or watched before).
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
    ids = ids_in(task_id) or [str(task_id or "").strip()]
    if ids == [""]:
        # Found by hand: it said "Not watching : task id \"\" is empty".
        return where.STANDBY.answer() or (
            "Not watching: pass the task ID submit_to_agent returned, e.g. task-3f9a0c1b2d4e.")
    return await watch(
        ids,
        target_agent,
        child_session=str(child_session or ""),
        stop_after=str(stop_after or ""),
        check_in=str(check_in or ""),
    )


def ids_in(value):
    """The task ids in what a model passed as one or several: a list, the JSON text of
    one, or a text of ids separated by commas, semicolons, spaces or the words a sentence
    joins them with (`task-a and task-b`, `&`), each perhaps quoted, bracketed or still
    labelled (`[TASK_ID: task-…]`, `task_id=task-…`): no task id has any of those. Each
    once, in order; whatever is left that is no task id, atc refuses by name."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        value = parsed if isinstance(parsed, list) else [value]
    # QwenPaw hands a text argument over as a list of that one text: an element holding
    # several ids is split.
    ids = []
    for word in (w for v in value or [] for w in re.split(r"[\s,;&]+", str(v))):
        word = word.strip("'\"[]").rpartition("=")[2].strip("'\"[]")
        if word and not word.endswith(":") and word.lower() != "and" and word not in ids:
            ids.append(word)
    return ids


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
            A short name for this batch (e.g. ``reviews``). Once a group's message came,
            its name may be used again: the tasks watched then are its next batch.

    Returns:
        `str`:
            One line: watching (and what to do next), or why not and what to do instead.
    """
    ids = ids_in(task_ids)
    name = str(group or "").strip()
    if not ids and not name:
        return "Not watching: pass the task IDs and a group name."
    if not ids:
        return "Not watching: pass the task IDs submit_to_agent returned."
    if not name:
        return "Not watching: pass a group name (a short one, e.g. reviews)."
    return await watch(ids, group=name)


async def callback_task_status() -> str:
    """List the tasks this chat watches and what is happening to each.

    Use it when the user asks how delegated work is doing (tasks ``submit_to_agent``
    started are watched by themselves, so they are listed too). One line per task, newest
    first: ``task_id | status | agent=… session=… | registered=…``. ``pending`` means waiting for the
    task (or for this chat to be idle); ``done`` means its result was posted here;
    ``skipped`` that nothing was posted (you read the result with ``check_agent_task``);
    ``delivering`` or ``unconfirmed`` that it is being posted here; ``undelivered``,
    ``misrouted`` or ``error`` that atc gave up posting it here (``check_agent_task``
    still shows the result, and a person can send it again with ``atc redeliver``);
    ``lost``, ``expired`` or ``abandoned`` that the watch ended without an answer (a
    notice here says so); ``cancelled`` that it is no longer watched.
    A fifth part, ``1 later reply of its child not posted here (…)``, names what the
    task's child sent up after its result and atc could not post: tell the user. A task
    submitted in this same turn is listed first as ``submitted in this turn``: it
    is watched when your turn ends.

    Returns:
        `str`:
            The chat's watches, one per line, or a line saying there are none.
    """
    standing_by = where.STANDBY.answer()
    if standing_by:
        return standing_by
    chat = chat_context()
    if not chat[1]:
        return "This call has no chat (QwenPaw gave no session): there is nothing to list."
    listed, problem = await chat_jobs(chat)
    if listed is None:
        return "Cannot list the watches: %s" % problem
    own = listed[0]
    # What this very turn submitted is watched when it ends: listed first, as coming.
    known = {j.get("task_id") for j in own}
    turn = RUNNING_TURNS.get((chat[0], chat[1]))
    coming = [
        "%s | submitted in this turn: watched when your turn ends | agent=%s session=%s"
        % (task, target or chat[0], chat[1])
        for task, target, _ in getattr(turn, "submitted", None) or ()
        if task not in known and task not in getattr(turn, "cancelled", ())
    ]
    if not own and not coming:
        return "This chat watches no tasks."
    stuck = listed[3]
    lines = coming + [
        "%s | %s | agent=%s session=%s | registered=%s%s"
        % (
            j.get("task_id"),
            j.get("status"),
            j.get("target_agent") or j.get("agent_id"),
            j.get("session_id"),
            j.get("registered_at"),
            follow_ups_said(j.get("task_id"), stuck.get(j.get("task_id")) or []),
        )
        for j in own[:STATUS_LIMIT]
    ]
    return "\n".join(lines)


def follow_ups_said(task_id, whats):
    """The end of a task's line when its follow-ups wait for a person: its result came,
    a later reply of its child's did not."""
    if not whats:
        return ""
    many = len(whats) > 1
    return (" | %d later %s of its child not posted here (%s): a person can send %s again "
            "with `atc redeliver %s`" % (len(whats), "replies" if many else "reply",
                                         ", ".join(dict.fromkeys(whats)),
                                         "them" if many else "it", task_id))


async def cancel_task_callback(task_id: str, stop: bool = False, check_ins: bool = False) -> str:
    """Stop watching a task: its result will not be posted into this chat.

    By default the task itself keeps running; only the callback is dropped. Use it when
    the user no longer wants the result (a task submitted in this very turn is then not
    watched when the turn ends). With ``stop=True`` the task itself is stopped
    too (its child session must be known: a task submitted in this turn, or one watched
    automatically or with ``child_session``); use that when the work is no
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
            One line: stopped, or why not (one line per task given several).
    """
    standing_by = where.STANDBY.answer()
    if standing_by:
        return standing_by
    # Several ids in one text are each cancelled, as a model that wrote them meant.
    ids = ids_in(task_id) or [str(task_id or "").strip()]
    if ids == [""]:
        return ("Not cancelled: pass the task ID submit_to_agent returned "
                "(callback_task_status lists this chat's watches).")
    return "\n".join([await cancel_one(t, stop, check_ins) for t in ids])


async def cancel_one(task_id, stop, check_ins):
    """cancel_task_callback of one task id."""
    if not TASK_ID.fullmatch(task_id):
        # No task id at all: atc's own refusal says what is wrong with it (and names an
        # id inside it), where "this chat watches no such task" would send the model
        # looking for a watch.
        code, _, err = await run_atc(["cancel", "--", task_id])
        return "Not cancelled %s: %s" % (task_id, err if code is None else for_model(reason(err)))
    chat = chat_context()
    listed, problem = await chat_jobs(chat)
    if listed is None:
        return "Not cancelled %s: %s" % (task_id, problem)
    here = submitted_here(chat, task_id) if chat[1] else None
    if here is not None and task_id not in {j.get("task_id") for j in listed[0]}:
        return await cancel_this_turns(chat, task_id, here, stop, check_ins)
    if not chat[1] or task_id not in {j.get("task_id") for j in listed[0]}:
        return "Not cancelled %s: this chat watches no such task (callback_task_status lists its watches)." % task_id
    mine = next(j for j in listed[0] if j.get("task_id") == task_id)
    if mine.get("status") == "cancelled" and not truthy(stop):
        # A second cancel changes nothing: say so, rather than "stopped watching" again.
        return "%s was already cancelled: atc no longer watches it; nothing to do." % task_id
    if truthy(check_ins):
        return await said_by_cancel(task_id, "--check-ins", "Check-ins not stopped for %s",
                                    "No more check-ins for %s.")
    if truthy(stop):
        return await said_by_cancel(task_id, "--stop", "Not stopped %s (still watched)",
                                    "Stopped %s.")
    return await said_by_cancel(task_id, None, "Not cancelled %s",
                                "Stopped watching %s; the task itself keeps running.")


async def said_by_cancel(task_id, flag, failed, done):
    """``atc cancel TASK [flag]``, answered with atc's own line in the tools' words: it
    says what the cancel did (whether the result may already be on its way, whether the
    child still runs, what becomes of the task's group). ``failed`` and ``done`` (with
    the task id) are said when atc could not run, or said nothing."""
    code, out, err = await run_atc(["cancel", task_id] + ([flag] if flag else []))
    if code is None:
        return "%s: %s" % (failed % task_id, err)
    if code != 0:
        return "%s: %s" % (failed % task_id, for_model(reason(err)))
    return for_model(out.strip().splitlines()[-1]) if out.strip() else done % task_id


async def cancel_this_turns(chat, task_id, submission, stop, check_ins):
    """cancel_task_callback of a task this very turn submitted, not watched yet: the
    turn's end leaves it unwatched (the turn notes the call), and with ``stop`` it is
    watched now with what its submission said (its session, its agent) only to be
    stopped at once, through atc's own stop."""
    if truthy(check_ins):
        return (
            "No check-ins to stop for %s: submitted in this turn, it is watched when your "
            "turn ends, without check-ins; its result comes back into this chat by itself."
            % task_id
        )
    if not truthy(stop):
        return (
            "Cancelled the watch on %s before it began: submitted in this turn, it is not "
            "watched when your turn ends, and its result will not be posted into this chat. "
            "The task itself keeps running." % task_id
        )
    target, child = submission
    args = watch_args([task_id], target or "", None, child_session=child or "", chat=chat)
    code, _, err = await run_atc(args)
    if code is None or code != 0:
        why = err if code is None else tool_words(reason(err))
        return (
            "Not stopped %s: %s. It is not watched when your turn ends either: its result "
            "will not be posted into this chat." % (task_id, why)
        )
    return await said_by_cancel(task_id, "--stop",
                                "Not stopped %s (watched now, its result comes back here)",
                                "Stopped %s.")


def truthy(flag):
    """A tool's boolean as a model may pass it: True, or "true", "1", "yes"."""
    return flag is True or str(flag).strip().lower() in ("true", "1", "yes")


DESCRIPTIONS = {
    "watch_agent_task": "Give a task a deadline or check-ins, or watch one started another way; submit_to_agent's tasks come back by themselves (atc).",
    "watch_agent_tasks": "Get several tasks' results back together as one message (atc).",
    "callback_task_status": "List the tasks this chat watches (atc).",
    "cancel_task_callback": "Stop watching a task; the task keeps running unless stop=True (atc).",
}
