# -*- coding: utf-8 -*-
"""atc's QwenPaw plugin: the Agent Task Callback tools, as a thin front for `atc`.

`atc qwenpaw install` writes this folder (it is embedded in the atc binary, so it always
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

Where atc keeps its files (the job file, the tick lock, the mark, the cadence file) atc
says itself, ``atc paths --json``, asked once and again only when the environment or the
config file changes: the plugin never works a path out on its own.

This file is the entry QwenPaw loads; the package beside it holds the rest by concern:
``atc_plugin/where.py`` (which atc runs, where its files are, standing by beside the
seed plugin), ``tools.py`` (the four tools), ``kick.py`` (the end-of-turn kick and the
cadence) and ``auto_watch.py`` (the turn's submissions watched at its end). QwenPaw's
loader (``plugins/loader.py``, ``_load_backend_module``) executes this file as the
package ``plugin_atc``, its ``__path__`` this folder, so the relative import below finds
``plugin_atc.atc_plugin``; unloading the plugin drops ``plugin_atc`` and every
``plugin_atc.*`` module from ``sys.modules``, so a reinstall loads the new files.
"""


from pathlib import Path

from .atc_plugin import auto_watch, kick, tools, where

SKILLS = Path(__file__).resolve().parent / "skills"


class AtcPlugin:
    """Registers the tools, the end-of-turn kick, the cadence and (from the plugin zip)
    the atc-callback skill. QwenPaw imports this module and calls ``plugin.register``."""

    def register(self, api):
        # The atc it carries made executable again, or said skipped, once, at load; and
        # where its files are asked now, so that no turn's end waits for the answer.
        where.find_atc()
        where.STANDBY.now()
        where.files()
        for name in tools.TOOLS:
            api.register_tool(
                tool_name=name,
                tool_func=getattr(tools, name),
                description=tools.DESCRIPTIONS[name],
                icon="\U0001f4ec",
            )
        try:
            api.register_runtime_hook(kick.kick_hook(kick.KICKER))
        except Exception as err:  # pylint: disable=broad-except
            where.LOG.warning("atc plugin: no end-of-turn kick (the cadence still ticks): %r", err)
        try:
            api.register_middleware(auto_watch.turn_middleware(auto_watch.REPORTER), priority=100)
            api.register_runtime_hook(auto_watch.auto_watch_hook(auto_watch.REPORTER))
            # A refused automatic watch (a config file being fixed) is tried again each beat.
            kick.CADENCE.also.append(auto_watch.REPORTER.retry)
        except Exception as err:  # pylint: disable=broad-except
            where.LOG.warning(
                "atc plugin: no auto-watch (call watch_agent_task after submit_to_agent): %r", err
            )
        if SKILLS.is_dir():
            try:
                api.register_skill_provider(SKILLS)
            except Exception as err:  # pylint: disable=broad-except
                where.LOG.warning("atc plugin: the atc-callback skill is not installed: %r", err)
        try:
            # Started once the server is up, stopped when the plugin is unloaded (a
            # reinstall loads a new copy of these modules with a cadence of its own).
            api.register_startup_hook(
                hook_name="atc_cadence_start", callback=kick.CADENCE.start, priority=90
            )
            api.register_shutdown_hook(
                hook_name="atc_cadence_stop", callback=kick.CADENCE.stop.set, priority=10
            )
        except Exception as err:  # pylint: disable=broad-except
            where.LOG.warning("atc plugin: no cadence (run a system timer: atc timer print): %r", err)


plugin = AtcPlugin()
