#!/usr/bin/env python3
"""Fast tests of atc's QwenPaw plugin (examples/qwenpaw-plugin/atc/plugin.py) with plain
python3: QwenPaw's context getters and the atc binary are stubbed, nothing else is
needed. `cargo test --test it qwenpaw_plugin` runs this file.

The stub atc records its arguments and the environment it got, prints what the test
asks for and exits with the code the test asks for.
"""

import asyncio
import importlib.util
import json
import os
import stat
import sys
import tempfile
import time
import types
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "examples" / "qwenpaw-plugin" / "atc" / "plugin.py"

# What the stubbed agent_context getters answer (a test changes it).
CONTEXT = {}
BASE = {"url": "http://127.0.0.1:8123/api"}


def install_host_stubs():
    """qwenpaw.app.agent_context and the base-URL resolver, as QwenPaw 2.2.2 has them."""
    qwenpaw = types.ModuleType("qwenpaw")
    app = types.ModuleType("qwenpaw.app")
    ctx = types.ModuleType("qwenpaw.app.agent_context")
    ctx.peek_current_agent_id = lambda: CONTEXT.get("agent") or ""
    ctx.get_current_agent_id = lambda: CONTEXT.get("agent") or "active-agent"
    ctx.get_current_session_id = lambda: CONTEXT.get("session")
    ctx.get_current_user_id = lambda: CONTEXT.get("user")
    ctx.get_current_channel = lambda: CONTEXT.get("channel")
    agents = types.ModuleType("qwenpaw.agents")
    tools = types.ModuleType("qwenpaw.agents.tools")
    am = types.ModuleType("qwenpaw.agents.tools.agent_management")
    am._normalize_api_base_url = lambda _url: BASE["url"]
    qwenpaw.app, app.agent_context = app, ctx
    qwenpaw.agents, agents.tools, tools.agent_management = agents, tools, am
    runtime = types.ModuleType("qwenpaw.runtime")
    hooks = types.ModuleType("qwenpaw.runtime.hooks")
    phases = types.ModuleType("qwenpaw.runtime.phases")

    class HookBase:  # as qwenpaw/runtime/hooks.py has it
        priority = 100

    class HookResult:
        pass

    class Phase:
        FINALLY = "finally"

    hooks.HookBase, hooks.HookResult, phases.Phase = HookBase, HookResult, Phase
    qwenpaw.runtime, runtime.hooks, runtime.phases = runtime, hooks, phases
    agentscope = types.ModuleType("agentscope")
    middleware = types.ModuleType("agentscope.middleware")

    class MiddlewareBase:  # as agentscope/middleware/_base.py has it
        pass

    middleware.MiddlewareBase = MiddlewareBase
    agentscope.middleware = middleware
    sys.modules["agentscope"] = agentscope
    sys.modules["agentscope.middleware"] = middleware
    for name, mod in [
        ("qwenpaw.runtime", runtime),
        ("qwenpaw.runtime.hooks", hooks),
        ("qwenpaw.runtime.phases", phases),
        ("qwenpaw", qwenpaw),
        ("qwenpaw.app", app),
        ("qwenpaw.app.agent_context", ctx),
        ("qwenpaw.agents", agents),
        ("qwenpaw.agents.tools", tools),
        ("qwenpaw.agents.tools.agent_management", am),
    ]:
        sys.modules[name] = mod


def load_plugin(path=PLUGIN):
    """The entry as QwenPaw's loader imports it (``plugins/loader.py``,
    ``_load_backend_module``): the package ``plugin_atc``, its ``__path__`` the plugin's
    folder, so that its relative imports find ``atc_plugin`` beside it. A load before is
    dropped first, as QwenPaw's unload drops ``plugin_atc`` and every ``plugin_atc.*``."""
    for name in [n for n in sys.modules if n == "plugin_atc" or n.startswith("plugin_atc.")]:
        del sys.modules[name]
    folder = str(Path(path).parent)
    spec = importlib.util.spec_from_file_location(
        "plugin_atc", path, submodule_search_locations=[folder]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["plugin_atc"] = module
    module.__package__ = "plugin_atc"
    module.__path__ = [folder]
    spec.loader.exec_module(module)
    return module


def plugin_sources():
    """Every file of the plugin's backend, relative to its folder: the entry and its package."""
    folder = PLUGIN.parent
    return [PLUGIN.relative_to(folder)] + sorted(
        p.relative_to(folder) for p in (folder / "atc_plugin").glob("*.py")
    )


def installed_plugin(root):
    """The plugin as QwenPaw installs it, in a working dir of its own under ``root``,
    carrying the stub atc as its own (the one it runs first): whatever atc this machine
    has next to python3, on PATH or in ~/.cargo/bin, the tests run the stub. Returns the
    loaded module."""
    plugin_dir = Path(root) / "wd" / "plugins" / "atc"
    (plugin_dir / "bin").mkdir(parents=True)
    (plugin_dir / "atc_plugin").mkdir()
    for name in plugin_sources():
        (plugin_dir / name).write_bytes((PLUGIN.parent / name).read_bytes())
    (plugin_dir / "bin" / "atc").write_text(STUB)
    (plugin_dir / "bin" / "atc").chmod(0o755)
    module = load_plugin(plugin_dir / "plugin.py")
    # "Next to the server's interpreter" is a folder of the test's too: the python3 that
    # runs these tests may have an atc of its own beside it (a developer's virtualenv).
    venv_bin = Path(root) / "venv" / "bin"
    module.where.sys = InterpreterAt(str(venv_bin / "python"))
    module.where.sysconfig = types.SimpleNamespace(get_path=lambda _name: str(venv_bin))
    return module


class InterpreterAt:
    """``sys`` as the plugin sees it, with another ``sys.executable``."""

    def __init__(self, executable):
        self.executable = executable

    def __getattr__(self, name):
        return getattr(sys, name)


STUB = """#!/bin/sh
if [ "$1" = paths ]; then
    # Where atc keeps its files: $STUB_DIR/paths when a test wrote one, else as atc
    # resolves them from ATC_STATE (the tests that need the config file run the real atc).
    if [ -f "$STUB_DIR/paths.exit" ]; then echo "atc: no" >&2; exit "$(cat "$STUB_DIR/paths.exit")"; fi
    if [ -f "$STUB_DIR/paths" ]; then cat "$STUB_DIR/paths"; exit 0; fi
    j="${ATC_STATE:-$HOME/.local/state/atc/jobs.json}"
    printf '{"job_file": "%s", "job_dir": "%s", "config_file": null, "config_file_exists": false, "lock": "%s.lock", "tick_lock": "%s.tick.lock", "marks": "%s.tick.again", "cadence": "%s.cadence", "log": "%s.log"}\\n' "$j" "$(dirname "$j")" "$j" "$j" "$j" "$j" "$j"
    exit 0
fi
log="$STUB_DIR/calls"
[ -n "$STUB_SLEEP" ] && sleep "$STUB_SLEEP"
printf '%s\\n' "$*" >> "$log.all"
if [ "$1" = status ]; then
    if [ -f "$STUB_DIR/status.exit" ]; then
        cat "$STUB_DIR/status.stderr" >&2 2>/dev/null
        exit "$(cat "$STUB_DIR/status.exit")"
    fi
    cat "$STUB_DIR/status" 2>/dev/null || echo '{"jobs": []}'
    exit 0
fi
printf '%s\\n' "$@" > "$log.args"
cat > "$log.stdin"
cat "$log.stdin" >> "$log.stdin.all"
printf 'ATC_BASE_URL=%s\\nTOKEN=%s\\nATC_KICK=%s\\n' "$ATC_BASE_URL" "$QWENPAW_RUNTIME_INTERNAL_TOKEN" "${ATC_KICK-(unset)}" > "$log.env"
printf '%s\\n' "${ATC_CADENCE_TICK-(unset)}" > "$log.cadence"
cat "$STUB_DIR/stdout" 2>/dev/null
cat "$STUB_DIR/stderr" >&2 2>/dev/null
exit "$(cat "$STUB_DIR/exit" 2>/dev/null || echo 0)"
"""


def run(coro):
    return asyncio.run(coro)


def job(task, session="s-1", user="carol", channel="console", agent="default", status="pending", target=None):
    return {
        "task_id": task, "status": status, "session_id": session, "user_id": user,
        "channel": channel, "agent_id": agent, "target_agent": target,
        "registered_at": "2026-12-01T10:00:00Z",
    }


class Carried:
    """The atc the installed plugin carries (``installed_plugin``), for the test classes."""

    def no_bundled(self):
        """The plugin as `atc qwenpaw install` writes it: no atc of its own."""
        (self.path / "wd" / "plugins" / "atc" / "bin" / "atc").unlink()

    def carry(self, atc):
        """The plugin carries ``atc`` (the real one under test) instead of the stub."""
        bundled = self.path / "wd" / "plugins" / "atc" / "bin" / "atc"
        bundled.unlink()
        bundled.symlink_to(atc)


class PluginTest(Carried, unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = Path(self.dir.name)
        self.atc = self.path / "atc"
        self.atc.write_text(STUB)
        self.atc.chmod(self.atc.stat().st_mode | stat.S_IXUSR)
        self.wd = self.path / "wd"
        self.plugin_dir = self.wd / "plugins" / "atc"
        self.bundled = self.plugin_dir / "bin" / "atc"
        self.env = dict(os.environ)
        os.environ["ATC_BIN"] = str(self.atc)
        os.environ["STUB_DIR"] = str(self.path)
        os.environ["QWENPAW_RUNTIME_INTERNAL_TOKEN"] = "tok-secret"
        CONTEXT.clear()
        CONTEXT.update(agent="default", session="s-1", user="carol", channel="console")
        self.plugin = installed_plugin(self.path)

    def tearDown(self):
        os.environ.clear()
        os.environ.update(self.env)
        self.dir.cleanup()

    def answer(self, stdout="", stderr="", code=0):
        (self.path / "stdout").write_text(stdout)
        (self.path / "stderr").write_text(stderr)
        (self.path / "exit").write_text(str(code))

    def args(self):
        return (self.path / "calls.args").read_text().splitlines()

    def listed(self, *jobs):
        """What the stub's `atc status --all --json` answers."""
        (self.path / "status").write_text(json.dumps({"jobs": list(jobs)}))

    def calls(self):
        return (self.path / "calls.all").read_text().splitlines()

    def env_seen(self):
        return dict(l.split("=", 1) for l in (self.path / "calls.env").read_text().splitlines())

    # -- watch_agent_task -------------------------------------------------------------

    def test_watch_passes_the_calling_chat_and_this_server(self):
        self.answer(json.dumps(job("task-0123456789ab", target="SE")))
        line = run(self.plugin.tools.watch_agent_task("task-0123456789ab", target_agent="SE"))
        self.assertEqual(self.args(), [
            "watch", "task-0123456789ab", "--json", "--origin", "plugin", "--session", "s-1", "--user", "carol",
            "--channel", "console", "--agent", "default", "--target-agent", "SE"])
        self.assertEqual(self.env_seen(), {
            "ATC_BASE_URL": "http://127.0.0.1:8123/api", "TOKEN": "tok-secret", "ATC_KICK": "(unset)"})
        self.assertEqual(self.calls(), [
            "status --all --json",
            "watch task-0123456789ab --json --origin plugin --session s-1 --user carol --channel console --agent default --target-agent SE"])
        self.assertTrue(line.startswith("Watching task-0123456789ab (polled as agent SE): the result comes back"), line)
        self.assertNotIn("\n", line)
        self.assertIn("Do not poll check_agent_task", line)

    def test_watch_of_an_mqtt_chat_keeps_its_exact_identity(self):
        CONTEXT.update(agent="SE", session="mqtt:dave", user="dave", channel="mqtt")
        self.answer(json.dumps(job("task-0123456789ab")))
        run(self.plugin.tools.watch_agent_task("task-0123456789ab"))
        self.assertEqual(self.args(), [
            "watch", "task-0123456789ab", "--json", "--origin", "plugin", "--session", "mqtt:dave", "--user", "dave",
            "--channel", "mqtt", "--agent", "SE"])

    def test_target_agent_equal_to_the_caller_is_not_passed(self):
        self.answer(json.dumps(job("task-0123456789ab")))
        run(self.plugin.tools.watch_agent_task("task-0123456789ab", target_agent="default"))
        self.assertNotIn("--target-agent", self.args())

    def test_missing_user_and_channel_are_left_to_atc_defaults(self):
        CONTEXT.update(user=None, channel=None, agent=None)
        self.answer(json.dumps(job("task-0123456789ab")))
        run(self.plugin.tools.watch_agent_task("task-0123456789ab"))
        # No per-call agent: the active agent, as QwenPaw's get_current_agent_id falls back.
        self.assertEqual(self.args(), [
            "watch", "task-0123456789ab", "--json", "--origin", "plugin", "--session", "s-1", "--agent", "active-agent"])

    def test_a_refusal_is_one_line_with_atcs_reason_and_the_fallback(self):
        self.answer("", "warning: something\natc: no chat s-1 for user carol on console; the session id is known for: bob\n", 1)
        line = run(self.plugin.tools.watch_agent_task("task-0123456789ab"))
        self.assertEqual(line, (
            "Not watching task-0123456789ab: no chat s-1 for user carol on console; the session "
            "id is known for: bob. If you cannot fix that, check the task with check_agent_task "
            "instead, at most once every 30 seconds."))

    def test_a_value_the_argument_parser_refused_is_said_in_the_tools_words(self):
        # Found by hand: check_in="5" came back as "Not changed T: For more information,
        # try '--help'.." (the parser's last line), not what was wrong with it.
        self.listed(job("task-0123456789ab"))
        self.answer("", "error: invalid value '5' for '--check-in <D>': time unit needed, for example 5sec or 5ms (write durations like 30s, 5m, 24h, 7d)\n\nFor more information, try '--help'.\n", 2)
        line = run(self.plugin.tools.watch_agent_task("task-0123456789ab", check_in="5"))
        self.assertTrue(line.startswith(
            "Not changed task-0123456789ab: invalid value '5' for 'check_in': time unit needed, "
            "for example 5sec or 5ms (write durations like 30s, 5m, 24h, 7d). It is still watched"), line)
        self.assertNotIn("--help", line)

    def test_a_refused_change_to_a_watched_task_says_it_is_still_watched(self):
        # Issue 36: a model asking for a deadline on a task auto-watched a moment earlier
        # was refused in atc's flags and told to poll check_agent_task.
        self.listed(job("task-0123456789ab"))
        self.answer("", "atc: task-0123456789ab's child session is a (QwenPaw's [SESSION: …] line, or an earlier watch's); --child-session b names another child: watch without --child-session\n", 1)
        line = run(self.plugin.tools.watch_agent_task("task-0123456789ab", child_session="b", stop_after="10m"))
        self.assertTrue(line.startswith("Not changed task-0123456789ab: "), line)
        self.assertIn("child_session b names another child: watch without child_session", line)
        self.assertTrue(line.endswith(
            "It is still watched: the result comes back into this chat by itself. "
            "Do not poll check_agent_task for it."), line)
        self.assertNotIn("--", line)

    def test_a_long_refusal_is_cut(self):
        self.answer("", "atc: " + "x" * 5000 + "\n", 1)
        line = run(self.plugin.tools.watch_agent_task("task-0123456789ab"))
        self.assertLess(len(line), 700)
        self.assertIn("\u2026", line)

    def test_no_session_means_no_watch_and_no_atc(self):
        CONTEXT.update(session=None)
        line = run(self.plugin.tools.watch_agent_task("task-0123456789ab"))
        self.assertIn("no chat to send the result to", line)
        self.assertFalse((self.path / "calls.args").exists())

    # -- finding the binary -----------------------------------------------------------

    def test_missing_binary_says_so_and_names_the_fix(self):
        self.no_bundled()
        os.environ.pop("ATC_BIN")
        os.environ["PATH"] = str(self.path / "empty")
        os.environ["HOME"] = str(self.path / "home")
        line = run(self.plugin.tools.watch_agent_task("task-0123456789ab"))
        self.assertTrue(line.startswith("Not watching task-0123456789ab: atc is not installed"), line)
        self.assertIn("`atc qwenpaw zip`, which carries atc", line)
        self.assertIn("Tell the user", line)

    def test_a_bad_atc_bin_is_named(self):
        self.no_bundled()
        os.environ["ATC_BIN"] = str(self.path / "nope")
        line = run(self.plugin.tools.watch_agent_task("task-0123456789ab"))
        self.assertIn("ATC_BIN in the server's environment is not an executable file", line)
        self.assertNotIn(str(self.path), line, "a path in the model's answer")

    def test_path_then_cargo_bin(self):
        self.no_bundled()
        os.environ.pop("ATC_BIN")
        home = self.path / "home"
        cargo = home / ".cargo" / "bin"
        cargo.mkdir(parents=True)
        os.environ["HOME"] = str(home)
        os.environ["PATH"] = str(self.path / "empty")
        (cargo / "atc").write_text(STUB)
        (cargo / "atc").chmod(0o755)
        self.assertEqual(self.plugin.where.find_atc(), (str(cargo / "atc"), None))
        on_path = self.path / "onpath"
        on_path.mkdir()
        (on_path / "atc").write_text(STUB)
        (on_path / "atc").chmod(0o755)
        os.environ["PATH"] = str(on_path)
        self.assertEqual(self.plugin.where.find_atc(), (str(on_path / "atc"), None))

    def test_next_to_the_interpreter_first_then_the_plugin_site_then_atc_bin(self):
        self.no_bundled()
        fake_bin = self.path / "venv" / "bin"
        fake_bin.mkdir(parents=True)
        os.environ["PATH"] = str(self.path / "empty")
        old = self.plugin.where.sys.executable
        try:
            self.plugin.where.sys.executable = str(fake_bin / "python")
            # Nothing next to the interpreter: ATC_BIN.
            self.assertEqual(self.plugin.where.find_atc(), (str(self.atc), None))
            site = self.path / "site"
            (site / "bin").mkdir(parents=True)
            (site / "bin" / "atc").write_text(STUB)
            (site / "bin" / "atc").chmod(0o755)
            os.environ["QWENPAW_PLUGIN_SITE"] = str(site)
            self.assertEqual(self.plugin.where.find_atc(), (str(site / "bin" / "atc"), None))
            (fake_bin / "atc").write_text(STUB)
            (fake_bin / "atc").chmod(0o755)
            self.assertEqual(self.plugin.where.find_atc(), (str(fake_bin / "atc"), None))
            # Even when ATC_BIN names nothing usable.
            os.environ["ATC_BIN"] = str(self.path / "nope")
            self.assertEqual(self.plugin.where.find_atc(), (str(fake_bin / "atc"), None))
        finally:
            self.plugin.where.sys.executable = old
            os.environ.pop("QWENPAW_PLUGIN_SITE", None)
        dirs = self.plugin.where.interpreter_dirs()
        self.assertIn(self.plugin.where.sysconfig.get_path("scripts"), dirs, "the environment's scripts dir")

    def test_the_atc_the_plugin_carries_comes_first_and_is_made_executable_again(self):
        # QwenPaw's installer extracts the zip with Python's zipfile: no program bit.
        self.bundled.chmod(0o644)
        fake_bin = self.path / "venv" / "bin"
        fake_bin.mkdir(parents=True)
        (fake_bin / "atc").write_text(STUB)
        (fake_bin / "atc").chmod(0o755)
        old = self.plugin.where.sys.executable
        try:
            self.plugin.where.sys.executable = str(fake_bin / "python")
            self.assertEqual(self.plugin.where.find_atc(), (str(self.bundled), None))
        finally:
            self.plugin.where.sys.executable = old
        self.assertTrue(os.access(str(self.bundled), os.X_OK))
        line = run(self.plugin.tools.watch_agent_task("task-0123456789ab"))
        self.assertTrue(line.startswith("Watching task-0123456789ab"), line)

    def test_an_atc_built_for_another_platform_is_skipped_and_said_once_in_the_log(self):
        here = self.plugin.where.this_platform()
        (self.plugin_dir / "bin" / "atc.platform").write_text(here + "\n")
        self.assertEqual(self.plugin.where.find_atc(), (str(self.bundled), None))
        other = "macos-aarch64" if here != "macos-aarch64" else "linux-x86_64"
        (self.plugin_dir / "bin" / "atc.platform").write_text(other + "\n")
        with self.assertLogs("qwenpaw.plugins.atc", "WARNING") as said:
            self.assertEqual(self.plugin.where.find_atc(), (str(self.atc), None), "ATC_BIN next")
            self.plugin.where.find_atc()
        self.assertEqual(len(said.output), 1, said.output)
        self.assertIn("the atc this plugin carries is built for %s, and this server runs on %s" % (other, here), said.output[0])
        self.assertIn("`atc qwenpaw zip`", said.output[0])

    def test_the_platform_names_match_the_zips(self):
        self.assertRegex(self.plugin.where.this_platform(), r"\A(linux|macos)-(x86_64|aarch64)\Z")

    # -- beside the Agent Task Callback plugin -----------------------------------------

    def seed_installed(self, folder="agent-task-callback"):
        seed = self.wd / "plugins" / folder
        seed.mkdir(parents=True)
        (seed / "plugin.json").write_text(json.dumps({"id": "agent-task-callback", "version": "0.1.5"}))
        self.plugin.where.STANDBY_LOOK_SECS = 0
        return seed

    def test_beside_the_seed_every_tool_stands_by_and_names_the_one_command(self):
        seed = self.seed_installed()
        for call in (
            self.plugin.tools.watch_agent_task("task-0123456789ab"),
            self.plugin.tools.watch_agent_tasks(["task-0123456789ab", "task-0123456789ac"], "g"),
            self.plugin.tools.callback_task_status(),
            self.plugin.tools.cancel_task_callback("task-0123456789ab"),
        ):
            line = run(call)
            self.assertTrue(line.startswith("atc is standing by and watches nothing"), line)
            self.assertIn("`atc qwenpaw install --replace-agent-task-callback`", line)
            self.assertNotIn(str(self.path), line, "a path in the model's answer")
        self.assertFalse((self.path / "calls.all").exists(), "atc was run")
        # The seed gone (the replacement done): the same plugin delivers, no restart.
        import shutil
        shutil.rmtree(seed)
        line = run(self.plugin.tools.watch_agent_task("task-0123456789ab"))
        self.assertTrue(line.startswith("Watching task-0123456789ab"), line)

    def test_a_disabled_or_hidden_seed_folder_is_not_the_seed(self):
        self.seed_installed("agent-task-callback.disabled")
        self.seed_installed(".agent-task-callback")
        self.assertIsNone(self.plugin.where.STANDBY.now())

    def test_the_seeds_state_file_with_jobs_nobody_moved_keeps_it_standing_by(self):
        self.plugin.where.STANDBY_LOOK_SECS = 0
        state = self.wd / "agent-task-callback.json"
        pending = {"task_id": "task-0123456789ab", "status": "pending", "session_id": "s-1"}
        state.write_text(json.dumps({"jobs": {"task-0123456789ab": pending}}))
        with self.assertLogs("qwenpaw.plugins.atc", "WARNING") as said:
            why = self.plugin.where.STANDBY.now()
            self.assertIn("still holds 1 pending job nobody moved to atc", why)
            self.plugin.where.STANDBY.now()
            # Handed over (the replacement marks it): atc delivers, and says so once.
            pending.update(status="cancelled", handed_over_to="atc")
            state.write_text(json.dumps({"jobs": {"task-0123456789ab": pending}}))
            self.assertIsNone(self.plugin.where.STANDBY.now())
            self.assertIsNone(self.plugin.where.STANDBY.now())
        self.assertEqual(len(said.output), 2, said.output)
        self.assertIn("standing by, delivering nothing", said.output[0])
        self.assertIn("`atc qwenpaw install --replace-agent-task-callback`", said.output[0])
        self.assertIn("delivering", said.output[1])
        self.assertNotIn("s-1", "".join(said.output), "a session id in the log")

    # -- fan-in, status, cancel --------------------------------------------------------

    def test_watch_agent_tasks_uses_group(self):
        self.answer(json.dumps({"jobs": [job("task-00000000000a"), job("task-00000000000b")]}))
        line = run(self.plugin.tools.watch_agent_tasks(["task-00000000000a", "task-00000000000b"], "trio"))
        self.assertEqual(self.args()[:3], ["watch", "task-00000000000a", "task-00000000000b"])
        self.assertEqual(self.args()[-2:], ["--group", "trio"])
        self.assertTrue(line.startswith("Watching task-00000000000a, task-00000000000b (group trio): the group's results come back into this chat together, as one message, by themselves once none of its tasks is still running. Do not poll check_agent_task for them;"), line)

    def test_watch_agent_tasks_takes_a_list_passed_as_text(self):
        # A model passing the list as a string: JSON, or ids with quotes and commas.
        # Found by hand: QwenPaw hands a text argument over as a list of that one text
        # (["task-a, task-b"]), which went to atc as one id.
        for text in ('["task-00000000000a", "task-00000000000b"]',
                     "'task-00000000000a', 'task-00000000000b'",
                     "task-00000000000a task-00000000000b",
                     ["task-00000000000a, task-00000000000b"],
                     ['["task-00000000000a", "task-00000000000b"]'],
                     # Found by hand: each still labelled, as submit_to_agent printed it.
                     "[TASK_ID: task-00000000000a] [TASK_ID: task-00000000000b]",
                     ["task_id=task-00000000000a", "task_id='task-00000000000b'"],
                     # Found by hand: joined as a sentence joins them, "and" was taken
                     # for a third id and the whole watch refused ("no task and").
                     "task-00000000000a and task-00000000000b",
                     "task-00000000000a, and task-00000000000b",
                     "task-00000000000a & task-00000000000b",
                     "task-00000000000a;task-00000000000b"):
            self.answer(json.dumps({"jobs": [job("task-00000000000a"), job("task-00000000000b")]}))
            run(self.plugin.tools.watch_agent_tasks(text, "trio"))
            self.assertEqual(self.args()[:3], ["watch", "task-00000000000a", "task-00000000000b"], text)

    def test_a_blank_task_id_is_asked_for_without_running_atc(self):
        # Found by hand: watch_agent_task("") said "Not watching : task id \"\" is empty".
        for blank in ("", " ", None, []):
            self.assertEqual(run(self.plugin.tools.watch_agent_task(blank)),
                             "Not watching: pass the task ID submit_to_agent returned, e.g. task-3f9a0c1b2d4e.")
            self.assertEqual(run(self.plugin.tools.cancel_task_callback(blank)),
                             "Not cancelled: pass the task ID submit_to_agent returned "
                             "(callback_task_status lists this chat's watches).")
        self.assertFalse((self.path / "calls.all").exists(), "atc ran")

    def test_watch_agent_tasks_needs_ids_and_a_group(self):
        self.assertEqual(run(self.plugin.tools.watch_agent_tasks([], "")), "Not watching: pass the task IDs and a group name.")
        self.assertEqual(run(self.plugin.tools.watch_agent_tasks([" ", ","], "g")), "Not watching: pass the task IDs submit_to_agent returned.")
        self.assertEqual(run(self.plugin.tools.watch_agent_tasks(["task-00000000000a"], " ")), "Not watching: pass a group name (a short one, e.g. reviews).")

    def test_status_lists_only_this_chats_watches(self):
        self.listed(*[
            job("task-00000000000a", status="pending", target="SE"),
            job("task-00000000000b", user="bob"),
            job("task-00000000000c", session="other"),
            job("task-00000000000d", channel="mqtt"),
            job("task-00000000000e", status="done"),
        ])
        text = run(self.plugin.tools.callback_task_status())
        self.assertEqual(self.calls(), ["status --all --json"])
        self.assertEqual(text.splitlines(), [
            "task-00000000000a | pending | agent=SE session=s-1 | registered=2026-12-01T10:00:00Z",
            "task-00000000000e | done | agent=default session=s-1 | registered=2026-12-01T10:00:00Z",
        ])
        for other in ("bob", "other", "mqtt"):
            self.assertNotIn(other, text)

    def test_status_says_a_follow_up_that_never_came_here(self):
        # Found by reading: a task whose result came but whose child's later reply (a
        # follow-up up a delegation tree) was given up was listed as plain ``done``.
        (self.path / "status").write_text(json.dumps({
            "jobs": [job("task-00000000000a", status="done"), job("task-00000000000b", status="done"),
                     job("task-00000000000c", status="pending")],
            "stuck": [
                {"task_id": "task-00000000000a", "turn_id": "atc-up-1", "what": "misrouted", "follow_up": True},
                {"task_id": "task-00000000000b", "turn_id": "atc-up-2", "what": "misrouted", "follow_up": True},
                {"task_id": "task-00000000000b", "turn_id": "atc-up-3", "what": "undelivered", "follow_up": True},
                # Its own block: the status already says it.
                {"task_id": "task-00000000000c", "turn_id": "atc-x", "what": "undelivered", "follow_up": False},
            ],
        }))
        self.assertEqual(run(self.plugin.tools.callback_task_status()).splitlines(), [
            "task-00000000000a | done | agent=default session=s-1 | registered=2026-12-01T10:00:00Z"
            " | 1 later reply of its child not posted here (misrouted): a person can send it again"
            " with `atc redeliver task-00000000000a`",
            "task-00000000000b | done | agent=default session=s-1 | registered=2026-12-01T10:00:00Z"
            " | 2 later replies of its child not posted here (misrouted, undelivered): a person can"
            " send them again with `atc redeliver task-00000000000b`",
            "task-00000000000c | pending | agent=default session=s-1 | registered=2026-12-01T10:00:00Z",
        ])

    def test_status_with_nothing_watched(self):
        self.listed(job("task-00000000000b", user="bob"))
        self.assertEqual(run(self.plugin.tools.callback_task_status()), "This chat watches no tasks.")

    def test_status_is_capped_at_twenty(self):
        self.listed(*[job("task-%012x" % i) for i in range(30)])
        self.assertEqual(len(run(self.plugin.tools.callback_task_status()).splitlines()), 20)

    def test_cancel_says_what_atc_said_in_the_tools_words(self):
        # Found by hand: the tool said "Stopped watching T (now cancelled); the task itself
        # keeps running." whatever atc said: not that its group still comes back without
        # it, nor that its result may already be on its way.
        self.listed(job("task-00000000000a"))
        self.answer(
            "Cancelled the watch on task-00000000000a; the child was still running at atc's "
            "last poll and is not stopped: `atc wait task-00000000000a` or check_agent_task "
            "says how it ends. Group g still comes back as one message, without it, once its "
            "other task ends.\n")
        line = run(self.plugin.tools.cancel_task_callback("task-00000000000a"))
        self.assertEqual(self.args(), ["cancel", "task-00000000000a"])
        self.assertEqual(line, (
            "Cancelled the watch on task-00000000000a; the child was still running at atc's "
            "last poll and is not stopped: check_agent_task says how it ends. Group g still "
            "comes back as one message, without it, once its other task ends."))
        self.listed(job("task-00000000000a"))
        self.answer(
            "Cancelled the watch on task-00000000000a, but its result was being posted to "
            "session s-1 (user carol, channel console) at that moment: it may already be on "
            "its way.\n")
        line = run(self.plugin.tools.cancel_task_callback("task-00000000000a"))
        self.assertTrue(line.endswith("it may already be on its way."), line)

    def test_check_ins_off_without_check_ins_names_the_tool(self):
        self.listed(job("task-00000000000a"))
        self.answer("", "atc: task-00000000000a has no check-ins to stop (watched without "
                    "--check-in, or they were stopped already): `atc watch task-00000000000a "
                    "--session s-1 --user carol --stop-after 1h --check-in D` starts them\n", 1)
        line = run(self.plugin.tools.cancel_task_callback("task-00000000000a", check_ins=True))
        self.assertEqual(line, (
            "Check-ins not stopped for task-00000000000a: task-00000000000a has no check-ins "
            "to stop (watched without check_in, or they were stopped already): watch it again "
            "with watch_agent_task's check_in to start them"))

    def test_a_second_cancel_says_it_was_already_cancelled(self):
        # Issue 36: a second cancel_task_callback said "Stopped watching" again.
        self.listed(job("task-00000000000a", status="cancelled"))
        line = run(self.plugin.tools.cancel_task_callback("task-00000000000a"))
        self.assertEqual(
            line, "task-00000000000a was already cancelled: atc no longer watches it; nothing to do.")
        ran = (self.path / "calls.all").read_text() if (self.path / "calls.all").exists() else ""
        self.assertNotIn("cancel", ran, "atc cancel ran")

    def test_watch_with_a_child_session_and_a_deadline(self):
        self.answer(json.dumps(job("task-0123456789ab")))
        run(self.plugin.tools.watch_agent_task(
            "task-0123456789ab", child_session=" default:to:SE:1:ab ", stop_after="10m", check_in="5m"))
        self.assertEqual(self.args()[-6:], [
            "--child-session", "default:to:SE:1:ab", "--stop-after", "10m", "--check-in", "5m"])

    def test_a_watch_without_target_agent_keeps_the_agent_the_turns_end_recorded(self):
        self.listed(job("task-0123456789ab", target="SE"))
        self.answer(json.dumps(job("task-0123456789ab", target="SE")))
        run(self.plugin.tools.watch_agent_task("task-0123456789ab", stop_after="10m", child_session="c-1"))
        self.assertEqual(self.args()[-2:], ["--stop-after", "10m"])
        self.assertIn("--target-agent", self.args())
        self.assertEqual(self.args()[self.args().index("--target-agent") + 1], "SE")

    def test_watch_without_them_passes_neither(self):
        self.answer(json.dumps(job("task-0123456789ab")))
        run(self.plugin.tools.watch_agent_task("task-0123456789ab"))
        self.assertNotIn("--child-session", self.args())
        self.assertNotIn("--stop-after", self.args())
        self.assertNotIn("--check-in", self.args())

    def test_cancel_with_stop_stops_the_task_and_says_what_happened(self):
        self.listed(job("task-00000000000a"))
        self.answer("Cancelled the watch on task-00000000000a; the child was stopped.\n")
        line = run(self.plugin.tools.cancel_task_callback("task-00000000000a", stop=True))
        self.assertEqual(self.args(), ["cancel", "task-00000000000a", "--stop"])
        self.assertEqual(line, "Cancelled the watch on task-00000000000a; the child was stopped.")

    def test_cancel_with_stop_refused_keeps_the_watch(self):
        self.listed(job("task-00000000000a"))
        self.answer("", "atc: cannot stop the child of task-00000000000a: its session is not "
                    "known; `atc watch task-00000000000a --session s-1 --user carol "
                    "--child-session SID` watches it with its session (SID: the [SESSION: …] "
                    "line submit_to_agent printed), or stop it from QwenPaw's console; the "
                    "watch is kept\n", 1)
        line = run(self.plugin.tools.cancel_task_callback("task-00000000000a", stop=True))
        self.assertEqual(line, (
            "Not stopped task-00000000000a (still watched): cannot stop the child of "
            "task-00000000000a: its session is not known; watch it again with "
            "watch_agent_task's child_session (the [SESSION: …] line submit_to_agent "
            "printed), or stop it from QwenPaw's console; the watch is kept"))

    def test_cancel_with_check_ins_stops_only_them(self):
        self.listed(job("task-00000000000a"))
        self.answer("No more check-ins for task-00000000000a; still watching it (its result comes back as usual).\n")
        line = run(self.plugin.tools.cancel_task_callback("task-00000000000a", check_ins=True))
        self.assertEqual(self.args(), ["cancel", "task-00000000000a", "--check-ins"])
        self.assertEqual(line, "No more check-ins for task-00000000000a; still watching it (its result comes back as usual).")

    def test_a_task_the_server_never_had_is_refused_without_the_polling_fallback(self):
        self.answer("", "atc: http://127.0.0.1:8123/api has no task task-0123456789ab (QwenPaw answers \"Task not found\"): is the id the one submit_to_agent printed? Nothing was watched\n", 6)
        line = run(self.plugin.tools.watch_agent_task("task-0123456789ab"))
        self.assertEqual(line, (
            "Not watching task-0123456789ab: this QwenPaw server has no such task (\"Task not "
            "found\"). Copy the ID exactly from the [TASK_ID: ...] line submit_to_agent returned."))

    def test_a_refused_change_to_tasks_already_posted_says_so_and_not_that_they_come_back(self):
        # Found by hand: a model grouping two auto-watched tasks whose results had been
        # posted already was told "They are still watched: the result comes back".
        self.listed(job("task-00000000000a", status="done"), job("task-00000000000b"),
                    job("task-00000000000c", status="lost"))
        self.answer("", "atc: task-00000000000a was already delivered to session s-1 (user carol, channel console) at 2026-12-01T10:01:00Z; watching it again would only post the result twice\n", 1)
        line = run(self.plugin.tools.watch_agent_tasks(
            ["task-00000000000a", "task-00000000000b", "task-00000000000c"], "late"))
        self.assertTrue(line.startswith(
            "Not changed task-00000000000a, task-00000000000b, task-00000000000c: "
            "task-00000000000a was already delivered"), line)
        self.assertTrue(line.endswith(
            "task-00000000000b is still watched: its result comes back into this chat by "
            "itself. The result of task-00000000000a was posted into this chat already: the "
            "message starting with [TASK_ID: task-00000000000a]. The watch of "
            "task-00000000000c ended as lost; callback_task_status says what happened. Do "
            "not poll check_agent_task for it."), line)
        # atc's own words (found by hand: its command for a person reached the model).
        self.answer("", "atc: task-00000000000a was already delivered to session s-1 (user "
                    "carol, channel console) at 2026-12-01T10:01:00Z; watching it again would "
                    "only post the result twice (`atc status task-00000000000a` shows what was "
                    "sent)\n", 1)
        line = run(self.plugin.tools.watch_agent_task("task-00000000000a", stop_after="5m"))
        self.assertIn("would only post the result twice. Its result was posted", line)
        self.assertTrue(line.endswith(
            "Its result was posted into this chat already: the message starting with "
            "[TASK_ID: task-00000000000a]."), line)
        self.assertNotIn("still watched", line)

    def test_of_several_tasks_the_ones_the_server_never_had_are_named(self):
        self.answer("", "atc: http://127.0.0.1:8123/api has no task task-00000000000b (QwenPaw answers \"Task not found\"): is the id the one submit_to_agent printed, and was it submitted to this server (the base URL from --base-url)? Nothing was watched (--no-task-check skips this check)\n", 6)
        line = run(self.plugin.tools.watch_agent_tasks(["task-00000000000a", "task-00000000000b"], "pair"))
        self.assertEqual(line, (
            "Not watching task-00000000000a, task-00000000000b: this QwenPaw server has no task "
            "task-00000000000b (\"Task not found\"); nothing was watched. Copy the ID exactly "
            "from the [TASK_ID: ...] line submit_to_agent returned."))

    def test_a_persons_commands_to_look_at_a_result_do_not_reach_the_model(self):
        for said, meant in (
            ("T was already delivered to session s (user u, channel console); watching it "
             "again would only post the result twice (`atc status T` shows what was sent)",
             "T was already delivered to session s (user u, channel console); watching it "
             "again would only post the result twice"),
            ("T's result travels in group g's turn, which was claimed to be posted to session "
             "s (turn-1); watched again alone it could go out twice (`atc status T` shows "
             "where that turn stands)",
             "T's result travels in group g's turn, which was claimed to be posted to session "
             "s (turn-1); watched again alone it could go out twice"),
            ("T's result may already have been delivered (an attempt's outcome is unknown; atc "
             "is reading the chat back); watching it again could post it twice. `atc status T` "
             "shows the text; `atc redeliver T` tries again safely",
             "T's result may already have been delivered (an attempt's outcome is unknown; atc "
             "is reading the chat back); watching it again could post it twice"),
        ):
            self.assertEqual(self.plugin.tools.for_model(said), meant)

    def test_durations_are_said_as_atc_says_them(self):
        for secs, said in ((20, "20s"), (90, "1m 30s"), (7200, "2h"), (90000, "1d 1h"), (0, "0s")):
            self.assertEqual(self.plugin.tools.human(secs), said)

    def test_cancel_refused(self):
        self.listed(job("task-00000000000a"))
        self.answer("", "atc: task-00000000000a is not watched\n", 1)
        line = run(self.plugin.tools.cancel_task_callback("task-00000000000a"))
        self.assertEqual(line, "Not cancelled task-00000000000a: task-00000000000a is not watched")

    def test_ids_given_labelled_or_several_in_one_are_each_what_the_model_meant(self):
        # Found by hand: cancel_task_callback("task-a, task-b") and ("[TASK_ID: task-a]")
        # both said "this chat watches no such task" of tasks the chat watched, and
        # watch_agent_task("task-a, task-b") named task-b alone as the id meant.
        self.listed(job("task-00000000000a"), job("task-00000000000b"))
        self.answer()
        line = run(self.plugin.tools.cancel_task_callback("task-00000000000a, task-00000000000b"))
        self.assertEqual(line, "Stopped watching task-00000000000a; the task itself keeps running.\n"
                               "Stopped watching task-00000000000b; the task itself keeps running.")
        self.assertEqual(self.calls(), ["status --all --json", "cancel task-00000000000a",
                                        "status --all --json", "cancel task-00000000000b"])
        (self.path / "calls.all").unlink()
        line = run(self.plugin.tools.cancel_task_callback("[TASK_ID: task-00000000000a]", stop=True))
        self.assertEqual(line, "Stopped task-00000000000a.")
        self.assertEqual(self.calls(), ["status --all --json", "cancel task-00000000000a --stop"])
        self.answer(json.dumps({"jobs": [job("task-00000000000a"), job("task-00000000000b")]}))
        line = run(self.plugin.tools.watch_agent_task("task-00000000000a, task-00000000000b"))
        self.assertEqual(self.args()[:3], ["watch", "task-00000000000a", "task-00000000000b"])
        self.assertEqual(line, "Watching task-00000000000a, task-00000000000b: each result comes "
                               "back into this chat by itself when its task finishes. Do not poll "
                               "check_agent_task for them; tell the user and end your turn.")
        self.answer(json.dumps(job("task-00000000000a")))
        run(self.plugin.tools.watch_agent_task("[TASK_ID: task-00000000000a]"))
        self.assertEqual(self.args()[:2], ["watch", "task-00000000000a"])

    def test_a_cancel_of_no_task_id_says_what_atc_says_of_it(self):
        # No watch is looked for: atc's refusal names the id inside.
        self.listed(job("task-00000000000a"))
        self.answer("", "atc: task id \"TASK_ID:task-00000000000a\" contains ':'; only letters, "
                    "digits, '-' and '_' are allowed: did you mean task-00000000000a? Pass the "
                    "id alone\n", 2)
        line = run(self.plugin.tools.cancel_task_callback("TASK_ID:task-00000000000a"))
        self.assertEqual(self.calls(), ["cancel -- TASK_ID:task-00000000000a"])
        self.assertEqual(line, "Not cancelled TASK_ID:task-00000000000a: task id "
                               "\"TASK_ID:task-00000000000a\" contains ':'; only letters, digits, "
                               "'-' and '_' are allowed: did you mean task-00000000000a? Pass the "
                               "id alone")

    # -- only the calling chat's own things -----------------------------------------------

    def test_another_chats_task_is_neither_watched_nor_cancelled_nor_named(self):
        self.listed(job("task-00000000000a", session="s-other", user="bob"))
        line = run(self.plugin.tools.watch_agent_task("task-00000000000a"))
        self.assertEqual(line, "Not watching task-00000000000a: another chat already watches task-00000000000a. Watch only the tasks you submitted from this chat.")
        line = run(self.plugin.tools.cancel_task_callback("task-00000000000a"))
        self.assertEqual(line, "Not cancelled task-00000000000a: this chat watches no such task (callback_task_status lists its watches).")
        self.assertEqual(self.calls(), ["status --all --json", "status --all --json"])

    def test_a_task_of_this_chats_delegation_tree_is_watched_in_place(self):
        # task-grand was delegated by this chat's child (task-child): atc watches it for
        # the child's chat, and says so in `chains`.
        child = job("task-00000000000c")
        grand = job("task-00000000000g", session="s-child", user="default", agent="SE")
        (self.path / "status").write_text(json.dumps({
            "jobs": [child, grand], "chains": {"task-00000000000g": ["task-00000000000c"]}}))
        self.answer(json.dumps(dict(grand, stop_after_secs=600)))
        line = run(self.plugin.tools.watch_agent_task("task-00000000000g", stop_after="10m"))
        self.assertEqual(self.args(), [
            "watch", "task-00000000000g", "--json", "--origin", "plugin", "--session", "s-child",
            "--user", "default", "--channel", "console", "--agent", "SE", "--stop-after", "10m"])
        self.assertEqual(line, (
            "Watching task-00000000000g (stops it after 10m if it is still running): a task "
            "your delegate started. Its result goes to that agent, and its follow-up comes back "
            "into this chat by itself. Do not poll check_agent_task for it; tell the user and "
            "end your turn."))
        self.assertNotIn("s-child", line)
        # Another chat's tree is still another chat's.
        (self.path / "status").write_text(json.dumps({
            "jobs": [job("task-00000000000c", session="s-other"), grand],
            "chains": {"task-00000000000g": ["task-00000000000c"]}}))
        line = run(self.plugin.tools.watch_agent_task("task-00000000000g"))
        self.assertIn("another chat already watches task-00000000000g", line)

    def test_refusals_name_no_file_and_no_other_chat(self):
        state = self.path / "state" / "jobs.json"
        os.environ["ATC_STATE"] = str(state)
        self.answer("", "atc: cannot lock %s.lock: Permission denied (os error 13); chmod it\n" % state, 4)
        line = run(self.plugin.tools.watch_agent_task("task-0123456789ab"))
        self.assertNotIn(str(self.path), line)
        self.assertIn("atc's job file.lock", line)
        self.answer("", "atc: http://127.0.0.1:8123/api has no chat with session s-1, user carol, channel console for agent 'default': delivering there would start a new chat the asking agent never sees; chats with session id s-1: user xavier on console; user yolanda on mqtt. Pass the Session ID, User ID and Channel the agent's prompt shows, or --create-session to start a new chat on purpose\n", 1)
        line = run(self.plugin.tools.watch_agent_task("task-0123456789ab"))
        for other in ("xavier", "yolanda"):
            self.assertNotIn(other, line)
        self.assertIn("http://127.0.0.1:8123/api has no chat with session s-1", line)
        self.assertIn("no chat matches exactly. Pass the Session ID", line)

    def test_the_answer_confirms_every_option_applied(self):
        recorded = dict(job("task-0123456789ab", target="SE"), stop_after_secs=20, check_in_secs=300)
        self.answer(json.dumps(recorded))
        line = run(self.plugin.tools.watch_agent_task(
            "task-0123456789ab", target_agent="SE", child_session="default:to:SE:1:ab", stop_after="20s", check_in="5m"))
        self.assertTrue(line.startswith(
            "Watching task-0123456789ab (polled as agent SE; its child session recorded, so it can "
            "be stopped; stops it after 20s if it is still running; a [STATUS: running] check-in "
            "every 5m while it runs (at most 5)): the result comes back"), line)

    def test_every_list_parameter_has_typed_items(self):
        import typing
        for name in self.plugin.tools.TOOLS:
            hints = typing.get_type_hints(getattr(self.plugin.tools, name))
            for param, hint in hints.items():
                if hint is list or typing.get_origin(hint) is list:
                    self.assertEqual(typing.get_args(hint), (str,), "%s(%s)" % (name, param))

    # -- registration -----------------------------------------------------------------

    def test_registers_the_seed_tools_with_the_same_signatures(self):
        import inspect

        seen = []
        hooks = []
        middlewares = []

        startup = []
        skills = []

        class Api:
            def register_tool(self, tool_name, tool_func, description="", icon="", **_):
                seen.append((tool_name, tool_func, description))

            def register_runtime_hook(self, hook):
                hooks.append(hook)

            def register_middleware(self, factory, priority=100):
                middlewares.append(factory)

            def register_startup_hook(self, hook_name, callback, priority=100):
                startup.append((hook_name, callback))

            def register_shutdown_hook(self, hook_name, callback, priority=100):
                startup.append((hook_name, callback))

            def register_skill_provider(self, skills_dir, **_):
                skills.append(skills_dir)

        self.plugin.plugin.register(Api())
        self.assertEqual([s[0] for s in seen], [
            "watch_agent_task", "watch_agent_tasks", "callback_task_status", "cancel_task_callback"])
        sigs = {name: str(inspect.signature(func)) for name, func, _ in seen}
        # The seed's calls still work: new parameters are optional, defaults unchanged.
        self.assertEqual(sigs["watch_agent_task"], "(task_id: str, target_agent: str = '', child_session: str = '', stop_after: str = '', check_in: str = '') -> str")
        self.assertEqual(sigs["callback_task_status"], "() -> str")
        self.assertEqual(sigs["cancel_task_callback"], "(task_id: str, stop: bool = False, check_ins: bool = False) -> str")
        self.assertEqual(sigs["watch_agent_tasks"], "(task_ids: list[str], group: str) -> str")
        self.assertEqual([(h.phase, h.name) for h in hooks], [("finally", "atc_kick"), ("finally", "atc_auto_watch")])
        # The auto-watch hook runs first (lower priority), the kick after it.
        self.assertLess(hooks[1].priority, hooks[0].priority)
        self.assertEqual(len(middlewares), 1)
        self.assertTrue(callable(middlewares[0]))
        for name, func, description in seen:
            self.assertTrue(inspect.iscoroutinefunction(func), name)
            self.assertTrue(func.__doc__ and description, name)
        self.assertEqual([n for n, _ in startup], ["atc_cadence_start", "atc_cadence_stop"])
        # The examples folder has no skills/ (atc qwenpaw install puts the skill into the
        # pool); the zip's folder has, and registers it.
        self.assertEqual(skills, [])
        self.plugin.SKILLS = self.path
        self.plugin.plugin.register(Api())
        self.assertEqual(skills, [self.path])

    def test_manifest_names_the_entry_and_the_tools(self):
        manifest = json.loads((PLUGIN.parent / "plugin.json").read_text())
        self.assertEqual(manifest["id"], "atc")
        self.assertEqual(manifest["entry"]["backend"], "plugin.py")
        self.assertTrue(manifest["name"] and manifest["version"])
        self.assertEqual([t["name"] for t in manifest["meta"]["tools"]], list(self.plugin.tools.TOOLS))


class KickTest(Carried, unittest.TestCase):
    """The FINALLY hook: atc tick --kicked, detached, only with work, one at a time."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = Path(self.dir.name)
        self.atc = self.path / "atc"
        self.atc.write_text(STUB)
        self.atc.chmod(0o755)
        self.env = dict(os.environ)
        self.jobs = self.path / "state" / "jobs.json"
        self.jobs.parent.mkdir()
        os.environ.update(ATC_BIN=str(self.atc), STUB_DIR=str(self.path), ATC_STATE=str(self.jobs))
        os.environ.pop("STUB_SLEEP", None)
        self.plugin = installed_plugin(self.path)
        self.kicker = self.plugin.kick.Kicker()

    def tearDown(self):
        # Let every reaper finish (one may start one more tick for a mark).
        while self.kicker.reaper is not None and self.kicker.reaper.is_alive():
            self.kicker.reaper.join()
        os.environ.clear()
        os.environ.update(self.env)
        self.dir.cleanup()

    def settle(self):
        """Writes the heartbeat a tick leaves for a settled file (as pass.rs does)."""
        st = os.stat(self.jobs)
        beat = {"last_tick_at": "2026-12-01T10:00:00Z", "settled": {
            "file": self.plugin.kick.fingerprint(st), "key": {"keep_secs": 1, "busy_deadline_secs": 1}, "until": None}}
        Path(str(self.jobs) + ".tick.lock").write_text(json.dumps(beat) + "\n")

    def kicked(self):
        proc = self.kicker.proc
        self.assertIsNotNone(proc, "no atc started")
        proc.wait()
        return (self.path / "calls.args").read_text().splitlines()

    def test_no_job_file_starts_nothing(self):
        self.kicker.kick()
        self.assertIsNone(self.kicker.proc)
        self.assertFalse((self.path / "calls.args").exists())

    def test_a_settled_file_starts_nothing_a_changed_one_does(self):
        self.jobs.write_text('{"version": 2, "jobs": []}')
        self.settle()
        self.kicker.kick()
        self.assertIsNone(self.kicker.proc)
        self.jobs.write_text('{"version": 2, "jobs": [1]}')
        self.kicker.kick()
        self.assertEqual(self.kicked(), ["tick", "--kicked", "--json"])

    def test_beside_the_seed_no_kick_and_no_cadence_tick_starts(self):
        self.jobs.write_text('{"version": 2, "jobs": [1]}')
        seed = self.path / "wd" / "plugins" / "agent-task-callback"
        seed.mkdir(parents=True)
        (seed / "plugin.json").write_text('{"id": "agent-task-callback", "version": "0.1.5"}')
        self.plugin.where.STANDBY_LOOK_SECS = 0
        self.kicker.kick()
        self.assertFalse(self.kicker.tick())
        self.assertIsNone(self.kicker.proc)
        self.assertFalse((self.path / "calls.all").exists())
        seed.joinpath("plugin.json").unlink()
        seed.rmdir()
        self.kicker.kick()
        self.assertEqual(self.kicked(), ["tick", "--kicked", "--json"])

    def test_no_heartbeat_yet_means_work(self):
        self.jobs.write_text('{"version": 2, "jobs": []}')
        self.kicker.kick()
        self.assertEqual(self.kicked(), ["tick", "--kicked", "--json"])

    def test_one_at_a_time_the_second_leaves_a_mark(self):
        self.jobs.write_text("{}")
        os.environ["STUB_SLEEP"] = "1"
        self.kicker.kick()
        first = self.kicker.proc
        self.kicker.kick()
        self.assertIs(self.kicker.proc, first)
        mark = Path(str(self.jobs) + ".tick.again")
        self.assertTrue(mark.exists())
        # The stub tick ignores the mark, so the reaper starts one more tick for it.
        first.wait()
        self.kicker.reaper.join()
        os.environ.pop("STUB_SLEEP")
        self.assertIsNot(self.kicker.proc, first)
        self.kicker.proc.wait()

    def test_a_missing_binary_says_so_once_and_never_raises(self):
        self.jobs.write_text("{}")
        self.no_bundled()
        os.environ["ATC_BIN"] = str(self.path / "nope")
        with self.assertLogs("qwenpaw.plugins.atc", "WARNING") as said:
            self.kicker.kick()
            self.kicker.kick()
            self.plugin.where.LOG.warning("end")
        self.assertEqual(len(said.output), 2, said.output)
        self.assertIn("the end-of-turn kick cannot start atc: ATC_BIN in the server's environment", said.output[0])
        self.assertIsNone(self.kicker.proc)

    def env_seen(self):
        self.kicker.reaper.join()
        return dict(l.split("=", 1) for l in (self.path / "calls.env").read_text().splitlines())

    def files(self):
        found, why = self.plugin.where.files()
        self.assertIsNotNone(found, why)
        return found

    def test_atc_says_where_its_files_are_asked_again_only_when_that_may_change(self):
        real = os.environ.get("ATC_TEST_BIN")
        if not real:
            self.skipTest("ATC_TEST_BIN not set (the Rust test runner sets it)")
        self.carry(real)
        home = self.path / "home"
        os.environ.pop("ATC_STATE")
        os.environ.pop("ATC_CONFIG", None)
        os.environ.pop("XDG_STATE_HOME", None)
        os.environ.update(HOME=str(home), XDG_CONFIG_HOME=str(self.path / "xdg"))
        default = home / ".local" / "state" / "atc" / "jobs.json"
        found = self.files()
        self.assertEqual(found.job_file, default)
        self.assertEqual(found.tick_lock, Path(str(default) + ".tick.lock"))
        self.assertEqual(found.marks, Path(str(default) + ".tick.again"))
        self.assertEqual(found.cadence, Path(str(default) + ".cadence"))
        self.assertEqual(found.job_dir, default.parent)
        # The same environment and config file: the answer kept, atc not run again.
        self.assertIs(self.files(), found)
        config = self.path / "xdg" / "atc" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text('# mine\nmax-age = "3d"\nstate = "%s"\n' % self.jobs)
        self.assertEqual(self.files().job_file, self.jobs)
        config.write_text('state = "~/kept/jobs.json"\nkeep = "30d"\n')
        os.utime(str(config), ns=(time.time_ns(), time.time_ns() + 1))
        self.assertEqual(self.files().job_file, home / "kept" / "jobs.json")
        named = self.path / "named.toml"
        named.write_text('state = "/srv/atc/jobs.json"\n')
        os.environ["ATC_CONFIG"] = str(named)
        self.assertEqual(self.files().job_file, Path("/srv/atc/jobs.json"))
        os.environ["ATC_STATE"] = str(self.jobs)
        self.assertEqual(self.files().job_file, self.jobs)
        # A config file atc refuses: no files, atc's reason, and no tick started.
        os.environ.pop("ATC_STATE")
        named.write_text("state = 3\n")
        os.utime(str(named), ns=(time.time_ns(), time.time_ns() + 2))
        found, why = self.plugin.where.files()
        self.assertIsNone(found)
        self.assertIn("atc cannot say where its files are", why)
        self.assertIn("exited 78", why)

    def test_a_failing_tick_is_said_with_atcs_line_once_per_breakage(self):
        """Issue 36 M2: a tick refused (a config typo) is said in QwenPaw's log with
        atc's own line, once while it stays broken, and again after a clean tick."""
        self.jobs.write_text("{}")
        typo = "atc: config file /x/config.toml: unknown key \"busy-deadlne\""

        def tick(code, err):
            (self.path / "stderr").write_text(err)
            (self.path / "exit").write_text(str(code))
            self.jobs.write_text('{"jobs": [], "n": %d}' % len(err + str(code)))
            self.kicker.kick()
            self.kicked()
            self.kicker.reaper.join()

        with self.assertLogs("qwenpaw.plugins.atc", "WARNING") as said:
            tick(78, typo + "\n")
            tick(78, typo + "\n")
            tick(0, "")
            tick(78, typo + "\n")
            self.plugin.where.LOG.warning("end")
        broken = [l for l in said.output if "exited 78" in l]
        self.assertEqual(len(broken), 2, said.output)
        self.assertIn("atc tick --kicked --json exited 78: " + typo, broken[0])

    def test_a_config_file_atc_left_part_of_is_said_once_per_breakage(self):
        """`atc paths` answers past a typo (watches are still recorded) and names it:
        QwenPaw's log says it once, and again once the file breaks anew."""
        self.jobs.write_text("{}")
        paths = {
            "job_file": str(self.jobs), "job_dir": str(self.jobs.parent), "config_file": None,
            "config_file_exists": False, "lock": str(self.jobs) + ".lock",
            "tick_lock": str(self.jobs) + ".tick.lock", "marks": str(self.jobs) + ".tick.again",
            "cadence": str(self.jobs) + ".cadence", "log": str(self.jobs) + ".log",
            "config_skipped": ["config file /x: unknown key \"kep\""]}
        with self.assertLogs("qwenpaw.plugins.atc", "WARNING") as said:
            (self.path / "paths").write_text(json.dumps(paths))
            found, _ = self.plugin.where.files()
            self.assertEqual(found.job_file, self.jobs, "the files are answered")
            self.plugin.where.WHERE.known = None
            self.plugin.where.files()
            paths["config_skipped"] = []
            (self.path / "paths").write_text(json.dumps(paths))
            self.plugin.where.WHERE.known = None
            self.plugin.where.files()
            paths["config_skipped"] = ["config file /x: unknown key \"kep\""]
            (self.path / "paths").write_text(json.dumps(paths))
            self.plugin.where.WHERE.known = None
            self.plugin.where.files()
            self.plugin.where.LOG.warning("end")
        told = [l for l in said.output if "left part of its config file out" in l]
        self.assertEqual(len(told), 2, said.output)
        self.assertIn('unknown key "kep"', told[0])

    def test_a_kick_looks_at_the_job_file_atc_names(self):
        other = self.path / "other" / "jobs.json"
        other.parent.mkdir()
        (self.path / "paths").write_text(json.dumps({
            "job_file": str(other), "job_dir": str(other.parent), "config_file": None,
            "config_file_exists": False, "lock": str(other) + ".lock",
            "tick_lock": str(other) + ".tick.lock", "marks": str(other) + ".tick.again",
            "cadence": str(other) + ".cadence", "log": str(other) + ".log"}))
        self.jobs.write_text("{}")
        self.kicker.kick()
        self.assertIsNone(self.kicker.proc, "the job file atc names does not exist yet")
        other.write_text("{}")
        self.kicker.kick()
        self.assertEqual(self.kicked(), ["tick", "--kicked", "--json"])

    def test_when_atc_cannot_say_where_its_files_are_nothing_starts_and_the_log_says_so_once(self):
        self.jobs.write_text("{}")
        (self.path / "paths.exit").write_text("78")
        with self.assertLogs("qwenpaw.plugins.atc", "WARNING") as said:
            self.kicker.kick()
            self.assertFalse(self.kicker.tick())
            self.kicker.kick()
            self.plugin.where.LOG.warning("end")
        self.assertEqual(len(said.output), 2, said.output)
        self.assertIn("the end-of-turn kick cannot start atc: atc cannot say where its files are", said.output[0])
        self.assertIn("exited 78: atc: no", said.output[0])
        self.assertIsNone(self.kicker.proc)
        self.assertFalse((self.path / "calls.all").exists())
        # Asked again after a failure (here: the retry time gone by), and then it works.
        (self.path / "paths.exit").unlink()
        self.plugin.where.RETRY_SECS = 0
        self.kicker.kick()
        self.assertEqual(self.kicked(), ["tick", "--kicked", "--json"])

    def test_the_hook_runs_the_kick_and_returns(self):
        self.jobs.write_text("{}")
        hook = self.plugin.kick.kick_hook(self.kicker)
        self.assertEqual(hook.phase, "finally")
        run(hook.run(object()))
        self.assertEqual(self.kicked(), ["tick", "--kicked", "--json"])
        # No agent or session in that context: the tick is told no turn (it looks at all).
        self.assertEqual(self.env_seen()["ATC_KICK"], "(unset)")

    def test_the_hook_hands_the_tick_the_turn_that_ended_in_its_environment(self):
        self.jobs.write_text("{}")
        request = types.SimpleNamespace(session_id="c-1", user_id="default", channel="console")
        ctx = types.SimpleNamespace(agent_id="worker", session_id="c-1", request=request)
        run(self.plugin.kick.kick_hook(self.kicker).run(ctx))
        args = self.kicked()
        self.assertEqual(args, ["tick", "--kicked", "--json"], "nothing of the turn on the command line")
        self.assertEqual(
            json.loads(self.env_seen()["ATC_KICK"]),
            [{"agent_id": "worker", "session_id": "c-1", "user_id": "default", "channel": "console"}],
        )
        # A dict request (as the runtime may pass one), a missing channel.
        ctx = types.SimpleNamespace(agent_id="default", session_id="p-1", request={"user_id": "carol"})
        self.assertEqual(
            self.plugin.kick.turn_end(ctx), {"agent_id": "default", "session_id": "p-1", "user_id": "carol"}
        )
        self.assertIsNone(self.plugin.kick.turn_end(types.SimpleNamespace(agent_id="default")))

    def test_a_turn_ending_while_our_tick_runs_goes_into_its_mark_as_one_line(self):
        self.jobs.write_text("{}")
        os.environ["STUB_SLEEP"] = "1"
        self.kicker.kick({"agent_id": "worker", "session_id": "c-1"})
        first = self.kicker.proc
        self.kicker.kick({"agent_id": "default", "session_id": "p-1", "user_id": "carol"})
        self.kicker.kick(None)
        mark = Path(str(self.jobs) + ".tick.again")
        self.assertEqual(
            mark.read_text().splitlines(),
            ['{"agent_id": "default", "session_id": "p-1", "user_id": "carol"}', ""],
        )
        self.assertEqual(os.stat(mark).st_mode & 0o777, 0o600)
        first.wait()
        self.kicker.reaper.join()
        os.environ.pop("STUB_SLEEP")
        # The stub ignored the mark: the reaper's one more tick is told its turns are there.
        self.assertIsNot(self.kicker.proc, first)
        self.kicker.proc.wait()
        self.assertEqual(self.env_seen()["ATC_KICK"], "[]")

    def test_the_ticks_give_ups_go_into_the_log(self):
        self.jobs.write_text("{}")
        line = "atc: gave up on task-1 (misrouted): the parent chat does not exist, so nothing was posted; `atc status task-1` names the chat"
        (self.path / "stdout").write_text(json.dumps({"polled": 1, "gave_up": [{"task_id": "task-1", "line": line}]}))
        with self.assertLogs("qwenpaw.plugins.atc", "WARNING") as said:
            self.kicker.kick({"agent_id": "worker", "session_id": "c-1"})
            self.kicker.proc.wait()
            self.kicker.reaper.join()
        self.assertEqual(said.output, ["WARNING:qwenpaw.plugins.atc:" + line])
        self.assertEqual(self.plugin.kick.give_up_lines(b"not json"), [])

    def test_the_real_atc_heartbeat_is_understood(self):
        real = os.environ.get("ATC_TEST_BIN")
        if not real:
            self.skipTest("ATC_TEST_BIN not set (the Rust test runner sets it)")
        import subprocess
        env = dict(os.environ, ATC_BASE_URL="http://127.0.0.1:9", HOME=str(self.path),
                   XDG_CONFIG_HOME=str(self.path / ".config"))
        env.pop("ATC_BIN")
        env.pop("ATC_CONFIG", None)
        def atc(*args):
            subprocess.run([real, *args], env=env, check=True, capture_output=True)
        atc("watch", "task-0123456789ab", "--session", "s-1")
        found = self.files()
        self.assertTrue(self.plugin.kick.has_work(found))
        atc("cancel", "task-0123456789ab")
        atc("tick")
        self.assertFalse(self.plugin.kick.has_work(found), Path(str(self.jobs) + ".tick.lock").read_text())
        atc("watch", "task-0123456789ac", "--session", "s-1")
        self.assertTrue(self.plugin.kick.has_work(found))



class TextBlock:
    def __init__(self, text):
        self.text = text


class ToolResponse:  # agentscope.tool.ToolResponse, as far as the plugin reads it
    def __init__(self, text):
        self.content = [TextBlock(text)]


class ToolChunk:
    def __init__(self, text):
        self.content = [TextBlock(text)]


class ToolCall:  # agentscope.message.ToolCallBlock: the name and the arguments' JSON
    def __init__(self, name, arguments):
        self.name = name
        self.input = arguments if isinstance(arguments, str) else json.dumps(arguments)


def submitted(task, child):
    """What submit_to_agent answers for a background task (agent_management.py)."""
    return (
        "[TASK_ID: %s]\n[SESSION: %s]\n[TIMEOUT: 3600s]\n\nTask submitted successfully.\n"
        "The subagent is working autonomously \u2014 do NOT poll immediately.\n"
        "Wait at least 30 seconds, then check with:\n  check_agent_task(task_id='%s')"
        % (task, child, task)
    )


def checked(task, status="finished"):
    """What check_agent_task answers (format_background_status_text)."""
    if status == "finished":
        return "[TASK_ID: %s]\n[STATUS: finished]\n\nTask completed.\n\n[SESSION: c]\n\nthe answer" % task
    return "[TASK_ID: %s]\n[STATUS: running]\n\nTask is still running...\nStarted at: 1.0" % task


CHILD_SE = "default:to:SE:1796161586102:6bb71902"
CHILD_QA = "default:to:QA:1796161586103:0c1d2e3f"


class AutoWatchTest(Carried, unittest.TestCase):
    """The turn's tool calls, as the middleware sees them return, to the atc commands the
    plugin starts: one `atc watch --origin auto` at the turn's end for its background
    submissions, one `atc parent-read` at once for each finished result it read."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = Path(self.dir.name)
        self.atc = self.path / "atc"
        self.atc.write_text(STUB)
        self.atc.chmod(0o755)
        self.env = dict(os.environ)
        self.jobs = self.path / "state" / "jobs.json"
        self.jobs.parent.mkdir()
        os.environ.update(ATC_BIN=str(self.atc), STUB_DIR=str(self.path), ATC_STATE=str(self.jobs))
        for name in ("STUB_SLEEP", "ATC_AUTO_WATCH"):
            os.environ.pop(name, None)
        self.plugin = installed_plugin(self.path)
        self.kicks = []
        self.warned = []
        test = self

        class Kicker:
            def kick(self, ends=None):
                test.kicks.append(ends if ends is not None else True)

            def warn_once(self, what, message):
                test.warned.append((what, message))

        self.reporter = self.plugin.auto_watch.Reporter(Kicker())
        self.factory = self.plugin.auto_watch.turn_middleware(self.reporter)
        self.hook = self.plugin.auto_watch.auto_watch_hook(self.reporter)

    def tearDown(self):
        self.settle()
        os.environ.clear()
        os.environ.update(self.env)
        self.dir.cleanup()

    def settle(self):
        for reaper in list(self.reporter.reapers):
            reaper.join(10)

    def ctx(self, session="s-1", user="carol", channel="console", agent="default"):
        return types.SimpleNamespace(
            agent_id=agent, session_id=session,
            request=types.SimpleNamespace(user_id=user, channel=channel), extras={})

    def turn(self, calls, ctx=None):
        """Runs one turn: the middleware QwenPaw builds for it sees `calls` (name, arguments,
        output) return, then the FINALLY hook runs. Returns what each call yielded."""
        ctx = ctx or self.ctx()
        recorder = self.factory(ctx, None)
        yielded = []
        for name, arguments, output in calls:
            yielded += self.act(recorder, name, arguments, output)
        self.during = self.started()
        run(self.hook.run(ctx))
        self.settle()
        return yielded

    def act(self, recorder, name, arguments, output):
        """One tool call of a turn returning `output`, through the turn's recorder; what it
        yielded."""
        response = output if not isinstance(output, str) else ToolResponse(output)
        yielded = []

        async def next_handler(**_):
            yield response

        async def drain():
            async for item in recorder.on_acting(object(), {"tool_call": ToolCall(name, arguments)}, next_handler):
                yielded.append(item)

        run(drain())
        return yielded

    def test_a_tool_called_in_the_turn_that_submitted_knows_the_childs_session_and_agent(self):
        # Found by hand: a model that submits and, in the same turn, gives the task a
        # deadline without child_session was refused ("needs the child's session") and
        # told to poll check_agent_task, though the turn's end watches the task anyway.
        CONTEXT.clear()
        CONTEXT.update(agent="default", session="s-1", user="carol", channel="console")
        tools = self.plugin.tools
        ctx = self.ctx()
        recorder = self.factory(ctx, None)
        self.act(recorder, "submit_to_agent", {"to_agent": "SE", "text": "review"},
                 submitted("task-aaaaaaaaaaaa", CHILD_SE))
        (self.path / "stdout").write_text(json.dumps(job("task-aaaaaaaaaaaa", target="SE")))
        line = run(tools.watch_agent_task("task-aaaaaaaaaaaa", stop_after="10m"))
        self.assertEqual((self.path / "calls.args").read_text().splitlines()[-6:], [
            "--target-agent", "SE", "--child-session", CHILD_SE, "--stop-after", "10m"])
        self.assertTrue(line.startswith("Watching task-aaaaaaaaaaaa (polled as agent SE"), line)
        # What the model passed wins; only what it left out is filled.
        run(tools.watch_agent_task("task-aaaaaaaaaaaa", target_agent="SE", child_session=CHILD_QA))
        self.assertIn(CHILD_QA, (self.path / "calls.args").read_text().splitlines())
        # Refused, it is told the turn's end watches it all the same, not to poll.
        (self.path / "stdout").write_text("")
        (self.path / "stderr").write_text("atc: --stop-after \"ten minutes\": not a duration\n")
        (self.path / "exit").write_text("2")
        line = run(tools.watch_agent_task("task-aaaaaaaaaaaa", stop_after="ten minutes"))
        self.assertTrue(line.startswith("Not changed task-aaaaaaaaaaaa: stop_after "), line)
        self.assertTrue(line.endswith(
            "It is watched when your turn ends all the same: the result comes back into this "
            "chat by itself. Do not poll check_agent_task for it."), line)
        # A task this turn did not submit is not filled (nor said to be watched).
        line = run(tools.watch_agent_task("task-bbbbbbbbbbbb", stop_after="ten minutes"))
        self.assertIn("check_agent_task instead", line)
        (self.path / "exit").write_text("0")
        run(self.hook.run(ctx))
        self.settle()
        self.assertEqual(tools.RUNNING_TURNS, {})
        self.assertIsNone(tools.submitted_here(("default", "s-1"), "task-aaaaaaaaaaaa"))

    def test_status_in_the_turn_that_submitted_lists_what_its_end_watches(self):
        # Found by hand: callback_task_status right after submit_to_agent said "This chat
        # watches no tasks."
        CONTEXT.clear()
        CONTEXT.update(agent="default", session="s-1", user="carol", channel="console")
        tools = self.plugin.tools
        ctx = self.ctx()
        recorder = self.factory(ctx, None)
        self.assertEqual(run(tools.callback_task_status()), "This chat watches no tasks.")
        self.act(recorder, "submit_to_agent", {"to_agent": "SE", "text": "review"},
                 submitted("task-aaaaaaaaaaaa", CHILD_SE))
        self.act(recorder, "submit_to_agent", {"to_agent": "QA", "text": "test"},
                 submitted("task-bbbbbbbbbbbb", CHILD_QA))
        self.act(recorder, "cancel_task_callback", {"task_id": "task-bbbbbbbbbbbb"}, "Cancelled")
        (self.path / "status").write_text(json.dumps({"jobs": [job("task-cccccccccccc")]}))
        self.assertEqual(run(tools.callback_task_status()).splitlines(), [
            "task-aaaaaaaaaaaa | submitted in this turn: watched when your turn ends | agent=SE session=s-1",
            "task-cccccccccccc | pending | agent=default session=s-1 | registered=2026-12-01T10:00:00Z"])
        run(self.hook.run(ctx))

    def test_a_cancel_in_the_turn_that_submitted_does_what_it_says(self):
        # Found by hand: cancel_task_callback(task, stop=True) of a task the same turn
        # submitted said "Not cancelled: this chat watches no such task" and stopped
        # nothing; with check_ins=True it dropped the turn's own watch of the task.
        CONTEXT.clear()
        CONTEXT.update(agent="default", session="s-1", user="carol", channel="console")
        tools = self.plugin.tools
        task = "task-aaaaaaaaaaaa"
        prefix = "--session s-1 --user carol --channel console --agent default"

        def turn_with(**kwargs):
            ctx = self.ctx()
            recorder = self.factory(ctx, None)
            self.act(recorder, "submit_to_agent", {"to_agent": "SE", "text": "review"},
                     submitted(task, CHILD_SE))
            before = len(self.started())
            line = run(tools.cancel_task_callback(task, **kwargs))
            self.act(recorder, "cancel_task_callback", dict(task_id=task, **kwargs), line)
            during = self.started()[before:]
            run(self.hook.run(ctx))
            return line, during, self.started()[before + len(during):]

        line, during, after = turn_with()
        self.assertEqual(line, (
            "Cancelled the watch on %s before it began: submitted in this turn, it is not "
            "watched when your turn ends, and its result will not be posted into this chat. "
            "The task itself keeps running." % task))
        self.assertEqual((during, after), (["status --all --json"], []))

        line, during, after = turn_with(check_ins=True)
        self.assertTrue(line.startswith("No check-ins to stop for %s: submitted in this turn, it is watched when your turn ends" % task), line)
        self.assertEqual(after, ["watch --origin auto --json --from - %s" % prefix])

        (self.path / "stdout").write_text("Cancelled the watch on %s; the child was stopped.\n" % task)
        line, during, after = turn_with(stop=True)
        self.assertEqual(line, "Cancelled the watch on %s; the child was stopped." % task)
        self.assertEqual(during, [
            "status --all --json",
            "watch %s --json --origin plugin %s --target-agent SE --child-session %s" % (task, prefix, CHILD_SE),
            "cancel %s --stop" % task])
        self.assertEqual(after, [])

    def started(self):
        self.settle()
        try:
            return (self.path / "calls.all").read_text().splitlines()
        except FileNotFoundError:
            return []

    def test_a_turn_with_two_background_submits_asks_one_watch_of_both(self):
        self.turn([
            ("submit_to_agent", {"to_agent": "SE", "text": "review"}, submitted("task-aaaaaaaaaaaa", CHILD_SE)),
            ("execute_shell_command", {"command": "ls"}, "a\nb"),
            ("submit_to_agent", {"to_agent": "QA", "text": "test"}, submitted("task-bbbbbbbbbbbb", CHILD_QA)),
        ])
        self.assertEqual(self.started(), [
            "watch --origin auto --json --from - --session s-1 --user carol --channel console --agent default"])
        self.assertEqual((self.path / "calls.stdin").read_text(), (
            "[TASK_ID: task-aaaaaaaaaaaa]\n[SESSION: %s]\n[TARGET_AGENT: SE]\n"
            "[TASK_ID: task-bbbbbbbbbbbb]\n[SESSION: %s]\n[TARGET_AGENT: QA]\n" % (CHILD_SE, CHILD_QA)))
        self.assertEqual(self.during, [], "nothing started before the turn ended")

    def test_beside_the_seed_a_turns_submits_are_left_to_it(self):
        seed = self.path / "wd" / "plugins" / "agent-task-callback"
        seed.mkdir(parents=True)
        (seed / "plugin.json").write_text('{"id": "agent-task-callback", "version": "0.1.5"}')
        self.plugin.where.STANDBY_LOOK_SECS = 0
        self.turn([
            ("submit_to_agent", {"to_agent": "SE", "text": "review"}, submitted("task-aaaaaaaaaaaa", CHILD_SE)),
        ])
        self.assertEqual(self.started(), [])

    def test_a_turn_with_no_background_submit_starts_no_atc(self):
        self.turn([("execute_shell_command", {"command": "ls"}, "a")])
        self.turn([])
        self.assertEqual(self.started(), [])

    def test_foreground_calls_spawned_subagents_and_failed_submits_are_never_watched(self):
        self.turn([
            ("chat_with_agent", {"to_agent": "SE", "text": "ask"}, "[SESSION: %s]\n\nECHO: ask" % CHILD_SE),
            ("spawn_subagent", {"task": "x", "background": True}, "[TASK_ID: task-cccccccccccc]\n[SESSION: sub-1]"),
            ("submit_to_agent", {"to_agent": "nope", "text": "x"}, "Agent [nope] not exists"),
            ("submit_to_agent", {"to_agent": "SE", "text": ""}, "ERROR: 'text' is required for submission"),
        ])
        self.assertEqual(self.started(), [])

    def test_a_finished_result_the_parent_read_is_reported_at_once_and_not_watched(self):
        self.turn([
            ("submit_to_agent", {"to_agent": "SE", "text": "quick"}, submitted("task-aaaaaaaaaaaa", CHILD_SE)),
            ("submit_to_agent", {"to_agent": "QA", "text": "slow"}, submitted("task-bbbbbbbbbbbb", CHILD_QA)),
            ("check_agent_task", {"task_id": "task-bbbbbbbbbbbb"}, checked("task-bbbbbbbbbbbb", "running")),
            ("check_agent_task", {"task_id": "task-aaaaaaaaaaaa"}, checked("task-aaaaaaaaaaaa")),
        ])
        # The read went out during the turn (the parent's chat still busy): atc cannot
        # have claimed a turn into it meanwhile. (The running task's check asked atc
        # whether it watches that task for this chat.)
        self.assertEqual(self.during, [
            "status task-bbbbbbbbbbbb --json",
            "parent-read task-aaaaaaaaaaaa --json --session s-1 --user carol --channel console --agent default"])
        self.assertEqual(self.started()[2:], [
            "watch --origin auto --json --from - --session s-1 --user carol --channel console --agent default"])
        self.assertEqual((self.path / "calls.stdin").read_text(),
                         "[TASK_ID: task-bbbbbbbbbbbb]\n[SESSION: %s]\n[TARGET_AGENT: QA]\n" % CHILD_QA)

    def test_a_later_turns_read_is_reported_and_the_turn_watches_nothing(self):
        self.turn([("check_agent_task", {"task_id": "task-aaaaaaaaaaaa"}, checked("task-aaaaaaaaaaaa"))],
                  ctx=self.ctx(session="mqtt:dave", user="dave", channel="mqtt", agent="SE"))
        self.assertEqual(self.started(), [
            "parent-read task-aaaaaaaaaaaa --json --session mqtt:dave --user dave --channel mqtt --agent SE"])

    def test_a_callback_cancelled_in_the_turn_is_not_watched_at_its_end(self):
        self.turn([
            ("submit_to_agent", {"to_agent": "SE", "text": "x"}, submitted("task-aaaaaaaaaaaa", CHILD_SE)),
            ("cancel_task_callback", {"task_id": "'task-aaaaaaaaaaaa'"}, "Not cancelled task-aaaaaaaaaaaa: ..."),
        ])
        self.assertEqual(self.started(), [])
        # Found by hand: a cancel of two at once (or of one still labelled) said both
        # were not watched at the turn's end, and its end watched them all the same.
        for cancel in ("task-aaaaaaaaaaaa, task-bbbbbbbbbbbb",
                       "[TASK_ID: task-aaaaaaaaaaaa] [TASK_ID: task-bbbbbbbbbbbb]",
                       ["task-aaaaaaaaaaaa", "task_id=task-bbbbbbbbbbbb"]):
            (self.path / "calls.stdin").unlink(missing_ok=True)
            self.turn([
                ("submit_to_agent", {"to_agent": "SE", "text": "x"}, submitted("task-aaaaaaaaaaaa", CHILD_SE)),
                ("submit_to_agent", {"to_agent": "SE", "text": "y"}, submitted("task-bbbbbbbbbbbb", CHILD_SE)),
                ("submit_to_agent", {"to_agent": "SE", "text": "z"}, submitted("task-cccccccccccc", CHILD_SE)),
                ("cancel_task_callback", {"task_id": cancel}, "Cancelled the watch on …"),
            ])
            self.started()
            self.assertEqual((self.path / "calls.stdin").read_text(), (
                "[TASK_ID: task-cccccccccccc]\n[SESSION: %s]\n[TARGET_AGENT: SE]\n" % CHILD_SE), cancel)

    def test_every_output_passes_through_unchanged(self):
        out = ToolResponse(submitted("task-aaaaaaaaaaaa", CHILD_SE))
        chunk = ToolChunk("partial")
        yielded = self.turn([("submit_to_agent", {"to_agent": "SE"}, out), ("execute_shell_command", {}, chunk)])
        self.assertEqual(len(yielded), 2)
        self.assertIs(yielded[0], out)
        self.assertIs(yielded[1], chunk)

    def test_a_background_submission_tells_the_model_atc_posts_its_result(self):
        """Issue 37: the submit_to_agent result the model reads ends with atc's line when
        atc will watch the task for this chat; nothing else is changed or told."""
        told = self.plugin.auto_watch.TOLD
        self.jobs.write_text("{}")
        out = ToolResponse(submitted("task-aaaaaaaaaaaa", CHILD_SE))
        failed = ToolResponse("ERROR: Agent 'nobody' not exists")
        chat = ToolResponse("the foreground answer")
        shell = ToolResponse("[TASK_ID: task-bbbbbbbbbbbb]")
        self.turn([
            ("submit_to_agent", {"to_agent": "SE"}, out),
            ("submit_to_agent", {"to_agent": "nobody"}, failed),
            ("chat_with_agent", {"to_agent": "SE"}, chat),
            ("execute_shell_command", {}, shell),
        ])
        self.assertTrue(out.content[0].text.endswith("check_agent_task(task_id='task-aaaaaaaaaaaa')\n\n" + told),
                        out.content[0].text)
        self.assertEqual(out.content[0].text.count(told), 1)
        self.assertNotIn(told, failed.content[0].text)
        self.assertNotIn(told, chat.content[0].text)
        self.assertNotIn(told, shell.content[0].text)
        self.assertNotIn("[", told[1:], "one bracket: no ids, no paths")
        self.assertNotIn("/", told)
        # An ACP turn (no chat to post into): not told.
        acp = self.ctx()
        acp.request.request_context = {"qwenpaw.ephemeral": True}
        quiet = ToolResponse(submitted("task-cccccccccccc", CHILD_SE))
        self.turn([("submit_to_agent", {"to_agent": "SE"}, quiet)], ctx=acp)
        self.assertNotIn(told, quiet.content[0].text)

    def test_with_auto_watch_off_the_model_is_not_told(self):
        told = self.plugin.auto_watch.TOLD
        self.jobs.write_text("{}")
        (self.path / "paths").write_text(json.dumps({
            "job_file": str(self.jobs), "job_dir": str(self.jobs.parent), "config_file": None,
            "config_file_exists": False, "lock": str(self.jobs) + ".lock",
            "tick_lock": str(self.jobs) + ".tick.lock", "marks": str(self.jobs) + ".tick.again",
            "cadence": str(self.jobs) + ".cadence", "log": str(self.jobs) + ".log",
            "auto_watch": False}))
        self.plugin.where.WHERE.known = None
        out = ToolResponse(submitted("task-aaaaaaaaaaaa", CHILD_SE))
        self.turn([("submit_to_agent", {"to_agent": "SE"}, out)])
        self.assertNotIn(told, out.content[0].text)

    def watches(self, *jobs):
        """What the stub `atc status TASK --json` answers: these watches."""
        (self.path / "status").write_text(json.dumps({"jobs": list(jobs), "turns": [], "give_ups": []}))

    def check(self, text, ctx=None):
        """One turn whose check_agent_task answered ``text``: what the model reads of it."""
        out = ToolResponse(text)
        yielded = self.turn([("check_agent_task", {"task_id": "task-aaaaaaaaaaaa"}, out)], ctx=ctx)
        self.assertIs(yielded[0], out)
        return out.content[0].text

    def test_a_check_of_a_running_task_atc_watches_for_this_chat_says_so(self):
        """Issue 37: check_agent_task on a task still running that atc watches for this
        chat ends with atc's line, whatever made the watch (auto-watch, a tool, the command
        line, auto-watch on or off); atc is asked (`atc status TASK --json`), once."""
        told = self.plugin.auto_watch.TOLD_WATCHED
        running = checked("task-aaaaaaaaaaaa", "running")
        for origin in ("auto", "plugin", "cli"):
            self.watches(dict(job("task-aaaaaaaaaaaa", target="SE"), origin=origin))
            text = self.check(running)
            self.assertEqual(text, running + "\n\n" + told)
        self.assertEqual(self.started(), ["status task-aaaaaaaaaaaa --json"] * 3)
        # QwenPaw's other words for a task not finished yet: in its queue, not started.
        for status, words in (("pending", "Task is pending in queue..."),
                              ("submitted", "Task submitted, waiting to start...")):
            text = self.check("[TASK_ID: task-aaaaaaaaaaaa]\n[STATUS: %s]\n\n%s" % (status, words))
            self.assertTrue(text.endswith(words + "\n\n" + told), text)
        # A chat QwenPaw gives no user or channel for: its session and agent decide.
        ctx = self.ctx(user=None, channel=None)
        self.assertTrue(self.check(running, ctx=ctx).endswith(told))
        # Stable, short, no ids, no path; consistent with the submission's line.
        self.assertEqual(told, "[atc: atc watches this task for this chat; its result will be posted "
                               "into this chat when it finishes; you need not call check_agent_task again]")
        self.assertNotIn("[", told[1:])
        self.assertNotIn("/", told)
        self.assertNotIn("task-", told)
        self.assertEqual(self.warned, [])

    def test_a_check_of_a_finished_task_gets_no_line_and_asks_atc_nothing(self):
        told = self.plugin.auto_watch.TOLD_WATCHED
        self.watches(job("task-aaaaaaaaaaaa"))
        done = checked("task-aaaaaaaaaaaa")
        failed = "[TASK_ID: task-aaaaaaaaaaaa]\n[STATUS: finished]\n\nTask failed.\n\nError: boom"
        self.assertEqual(self.check(done), done)
        self.assertEqual(self.check(failed), failed)
        self.assertNotIn("status task-aaaaaaaaaaaa --json", self.started())
        # QwenPaw still said running, but atc's watch already ended (the task finished in
        # between, or the watch was cancelled, lost, ...): no line either.
        running = checked("task-aaaaaaaaaaaa", "running")
        for status in ("delivering", "done", "cancelled", "skipped", "lost", "expired"):
            self.watches(job("task-aaaaaaaaaaaa", status=status))
            self.assertNotIn(told, self.check(running), status)
        # Not a check at all, or a check that failed: nothing asked, nothing added.
        shell = ToolResponse(running)
        self.turn([("execute_shell_command", {}, shell),
                   ("check_agent_task", {}, "ERROR: 'task_id' is required to check task status")])
        self.assertEqual(shell.content[0].text, running)
        self.assertEqual(self.started().count("status task-aaaaaaaaaaaa --json"), 6)

    def test_a_check_of_a_task_watched_for_another_chat_gets_no_line(self):
        told = self.plugin.auto_watch.TOLD_WATCHED
        running = checked("task-aaaaaaaaaaaa", "running")
        for other in (dict(session="s-2"), dict(user="dave"), dict(channel="mqtt"), dict(agent="SE")):
            self.watches(job("task-aaaaaaaaaaaa", **other))
            text = self.check(running)
            self.assertEqual(text, running, other)
        # The watch is this chat's, but the check ran in another chat's turn.
        self.watches(job("task-aaaaaaaaaaaa"))
        self.assertEqual(self.check(running, ctx=self.ctx(session="s-2")), running)
        self.assertNotIn(told, self.check(running, ctx=self.ctx(agent="QA")))
        # Another task's watch for this chat says nothing of this one.
        self.watches(job("task-bbbbbbbbbbbb"))
        self.assertEqual(self.check(running), running)

    def test_a_check_of_a_task_atc_does_not_watch_gets_no_line(self):
        running = checked("task-aaaaaaaaaaaa", "running")
        # atc's refusal (exit 1: "no watch for TASK in <its job file>"), or no job at all.
        (self.path / "status.exit").write_text("1")
        (self.path / "status.stderr").write_text("atc: no watch for task-aaaaaaaaaaaa in %s\n" % self.jobs)
        self.assertEqual(self.check(running), running)
        (self.path / "status.exit").unlink()
        self.watches()
        self.assertEqual(self.check(running), running)
        self.assertEqual(self.started(), ["status task-aaaaaaaaaaaa --json"] * 2)
        # No chat to post into (no session, an ACP turn): atc is not even asked.
        self.watches(job("task-aaaaaaaaaaaa"))
        self.assertEqual(self.check(running, ctx=self.ctx(session=None)), running)
        acp = self.ctx()
        acp.request.request_context = {"qwenpaw.ephemeral": True}
        self.assertEqual(self.check(running, ctx=acp), running)
        # Beside the seed plugin (it delivers instead): no line.
        seed = self.path / "wd" / "plugins" / "agent-task-callback"
        seed.mkdir(parents=True)
        (seed / "plugin.json").write_text('{"id": "agent-task-callback", "version": "0.1.5"}')
        self.plugin.where.STANDBY_LOOK_SECS = 0
        self.assertEqual(self.check(running), running)
        self.assertEqual(self.started(), ["status task-aaaaaaaaaaaa --json"] * 2)
        self.assertEqual(self.warned, [])

    def test_when_atc_fails_the_check_is_left_as_it_is_and_the_turn_goes_on(self):
        running = checked("task-aaaaaaaaaaaa", "running")
        self.watches(job("task-aaaaaaaaaaaa"))
        # atc failing (a job file it cannot read, say).
        (self.path / "status.exit").write_text("3")
        (self.path / "status.stderr").write_text("atc: cannot read %s\n" % self.jobs)
        self.assertEqual(self.check(running), running)
        (self.path / "status.exit").unlink()
        # An answer it cannot read.
        (self.path / "status").write_text("not json")
        self.assertEqual(self.check(running), running)
        (self.path / "status").write_text('["a list"]')
        self.assertEqual(self.check(running), running)
        # Too slow: the turn waits no longer than the bound, then goes on unchanged.
        self.watches(job("task-aaaaaaaaaaaa"))
        self.plugin.auto_watch.WATCHED_TIMEOUT = 0.3
        os.environ["STUB_SLEEP"] = "3"
        began = time.monotonic()
        self.assertEqual(self.check(running), running)
        self.assertLess(time.monotonic() - began, 2.5)
        del os.environ["STUB_SLEEP"]
        # No atc at all.
        self.no_bundled()
        os.environ["ATC_BIN"] = str(self.path / "nope")
        self.assertEqual(self.check(running), running)
        self.assertEqual(self.warned, [])

    def test_the_target_agent_is_the_calls_to_agent_else_the_one_the_generated_session_names(self):
        sub = self.plugin.auto_watch.background_submission
        out = submitted("task-aaaaaaaaaaaa", CHILD_SE)
        self.assertEqual(sub("submit_to_agent", json.dumps({"to_agent": " 'QA' "}), out),
                         ("task-aaaaaaaaaaaa", "QA", CHILD_SE))
        self.assertEqual(sub("submit_to_agent", "{not json", out), ("task-aaaaaaaaaaaa", "SE", CHILD_SE))
        own = submitted("task-aaaaaaaaaaaa", "my-own-session")
        self.assertEqual(sub("submit_to_agent", "{}", own), ("task-aaaaaaaaaaaa", None, "my-own-session"))
        self.assertIsNone(sub("chat_with_agent", "{}", out))
        read = self.plugin.auto_watch.finished_read
        self.assertEqual(read("check_agent_task", checked("task-a")), "task-a")
        self.assertIsNone(read("check_agent_task", checked("task-a", "running")))
        self.assertIsNone(read("check_agent_task", "ERROR: 'task_id' is required to check task status"))
        failed = "[TASK_ID: task-a]\n[STATUS: finished]\n\nTask failed.\n\nError: Task cancelled"
        self.assertEqual(read("check_agent_task", failed), "task-a", "a failed result is a result")

    def test_an_auto_watch_that_watched_something_kicks_a_tick_and_one_that_did_not_does_not(self):
        (self.path / "stdout").write_text(json.dumps(
            {"auto_watch": {"on": True, "from": "the default"}, "jobs": [{"task_id": "task-aaaaaaaaaaaa"}], "left_alone": []}))
        self.turn([("submit_to_agent", {"to_agent": "SE"}, submitted("task-aaaaaaaaaaaa", CHILD_SE))])
        self.assertEqual(self.kicks, [True], "a child session not known: the tick looks at everything")
        self.kicks.clear()
        (self.path / "stdout").write_text(json.dumps(
            {"auto_watch": {"on": False, "from": "ATC_AUTO_WATCH"}, "jobs": [], "left_alone": []}))
        self.turn([("submit_to_agent", {"to_agent": "SE"}, submitted("task-bbbbbbbbbbbb", CHILD_SE))])
        self.assertEqual(self.kicks, [], "auto-watch off: nothing to tick for")

    def test_the_kick_after_an_auto_watch_concerns_only_the_watched_children(self):
        jobs = [
            {"task_id": "task-aaaaaaaaaaaa", "agent_id": "default", "target_agent": "SE", "child_session": CHILD_SE},
            {"task_id": "task-bbbbbbbbbbbb", "agent_id": "default", "target_agent": None, "child_session": "own"},
        ]
        (self.path / "stdout").write_text(json.dumps(
            {"auto_watch": {"on": True, "from": "the default"}, "jobs": jobs, "left_alone": []}))
        self.turn([("submit_to_agent", {"to_agent": "SE"}, submitted("task-aaaaaaaaaaaa", CHILD_SE))])
        self.assertEqual(self.kicks, [[
            {"agent_id": "SE", "session_id": CHILD_SE, "watched": True},
            {"agent_id": "default", "session_id": "own", "watched": True},
        ]])

    def test_a_refusal_is_said_once_and_nothing_raises_into_the_turn(self):
        (self.path / "exit").write_text("1")
        (self.path / "stderr").write_text("atc: no chat s-1 for user carol\n")
        for _ in range(2):
            self.turn([("submit_to_agent", {"to_agent": "SE"}, submitted("task-aaaaaaaaaaaa", CHILD_SE))])
        # Said per task (the real Kicker says a key once); a refusal no later try gets past
        # is not tried again, and atc's line (it may name a chat) is not logged.
        self.assertEqual([w[0] for w in self.warned], ["exit-watch task-aaaaaaaaaaaa"] * 2)
        self.assertEqual(
            self.warned[0][1],
            "atc watch of task-aaaaaaaaaaaa (from the end of a turn) exited 1; `atc log` and "
            "`atc doctor` as the server's user say more")
        self.assertEqual(self.reporter.retries, [])
        (self.path / "stderr").unlink()
        self.no_bundled()
        os.environ["ATC_BIN"] = str(self.path / "nope")
        self.turn([("submit_to_agent", {"to_agent": "SE"}, submitted("task-aaaaaaaaaaaa", CHILD_SE))])
        self.assertEqual(self.warned[-1][0], "missing-auto")
        # A context QwenPaw could not describe: no recorder, no error.
        self.assertIsNone(self.factory(None, None))
        run(self.hook.run(types.SimpleNamespace()))

    def test_a_watch_refused_for_the_config_file_is_tried_again_until_it_lands(self):
        """Issue 36 (M2): a config file atc cannot use (exit 78) never loses an automatic
        watch: it is tried again at each turn's end and each beat of the cadence, said
        once when refused and once when it lands."""
        line = 'atc: config file /h/.config/atc/config.toml: line 1, column 14: invalid basic string'
        (self.path / "exit").write_text("78")
        (self.path / "stderr").write_text(line + "\n")
        self.turn([("submit_to_agent", {"to_agent": "SE"}, submitted("task-aaaaaaaaaaaa", CHILD_SE))])
        self.assertEqual(self.warned, [(
            "exit-watch task-aaaaaaaaaaaa",
            "atc watch of task-aaaaaaaaaaaa (from the end of a turn) exited 78: %s; tried again at "
            "each beat of the cadence and each turn's end until it lands (for a day); `atc doctor` "
            "as the server's user says more" % line)])
        self.assertEqual(len(self.reporter.retries), 1)
        # The parent then reads another task's result itself: refused too, kept too (and
        # that turn's end tried both again: try 2).
        self.turn([("check_agent_task", {}, checked("task-bbbbbbbbbbbb"))])
        self.assertEqual(len(self.reporter.retries), 2)
        # A beat while the file is still broken (try 3): nothing said again.
        self.reporter.retry()
        self.settle()
        self.assertEqual(len(self.reporter.retries), 2)
        self.assertEqual([w[0] for w in self.warned],
                         ["exit-watch task-aaaaaaaaaaaa", "exit-parent-read task-bbbbbbbbbbbb"])
        # The file fixed: the next beat (try 4) lands both, each said, and the watch kicks
        # its tick.
        (self.path / "exit").unlink()
        (self.path / "stderr").unlink()
        (self.path / "stdout").write_text(json.dumps(
            {"auto_watch": {"on": True, "from": "the default"},
             "jobs": [{"task_id": "task-aaaaaaaaaaaa", "agent_id": "default", "target_agent": "SE",
                       "child_session": CHILD_SE}], "left_alone": []}))
        before = len(self.started())
        self.reporter.retry()
        self.settle()
        self.assertEqual(self.reporter.retries, [])
        self.assertEqual(sorted(self.started()[before:]), [
            "parent-read task-bbbbbbbbbbbb --json --session s-1 --user carol --channel console --agent default",
            "watch --origin auto --json --from - --session s-1 --user carol --channel console --agent default",
        ])
        self.assertIn("[TASK_ID: task-aaaaaaaaaaaa]", (self.path / "calls.stdin.all").read_text())
        landed = sorted(w for w in self.warned if w[0].startswith("landed-"))
        self.assertEqual(landed, [
            ("landed-parent-read task-bbbbbbbbbbbb",
             "atc parent-read of task-bbbbbbbbbbbb (from the end of a turn) landed on try 4, after exit 78"),
            ("landed-watch task-aaaaaaaaaaaa",
             "atc watch of task-aaaaaaaaaaaa (from the end of a turn) landed on try 4, after exit 78"),
        ])
        self.assertEqual(self.kicks, [[{"agent_id": "SE", "session_id": CHILD_SE, "watched": True}]])
        # Nothing left to try: a beat starts nothing.
        before = len(self.started())
        self.reporter.retry()
        self.assertEqual(len(self.started()), before)

    def test_a_refused_watch_is_given_up_after_a_day_and_said(self):
        (self.path / "exit").write_text("75")
        self.turn([("submit_to_agent", {"to_agent": "SE"}, submitted("task-aaaaaaaaaaaa", CHILD_SE))])
        self.assertEqual(len(self.reporter.retries), 1)
        since = self.reporter.retries[0].since
        before = len(self.started())
        self.reporter.retry(now=since + self.plugin.auto_watch.RETRY_FOR_SECS + 1)
        self.settle()
        self.assertEqual(self.reporter.retries, [])
        self.assertEqual(len(self.started()), before, "not tried again")
        self.assertEqual(self.warned[-1], (
            "gave-up-watch task-aaaaaaaaaaaa",
            "atc watch of task-aaaaaaaaaaaa (from the end of a turn): refused for a day after 1 tries "
            "(exit 75: it said nothing); not watched: watch them by hand (`atc watch`)"))

    def test_the_cadence_tries_the_refused_commands_again_at_each_beat(self):
        tried = []
        cadence = self.plugin.kick.Cadence(types.SimpleNamespace(tick=lambda: False), 20)
        cadence.also.append(lambda: tried.append(True))
        cadence.beat()
        self.assertEqual(tried, [True])

    def test_a_turn_in_no_chat_or_an_acp_session_starts_nothing(self):
        calls = [("submit_to_agent", {"to_agent": "SE"}, submitted("task-aaaaaaaaaaaa", CHILD_SE)),
                 ("check_agent_task", {}, checked("task-aaaaaaaaaaaa"))]
        self.turn(calls, ctx=self.ctx(session=None))
        acp = self.ctx()
        acp.request.request_context = {"qwenpaw.ephemeral": True}
        self.turn(calls, ctx=acp)
        self.assertEqual(self.started(), [])
        # Any other channel is atc's to judge (it refuses an ACP channel itself).
        self.turn(calls[:1], ctx=self.ctx(channel="acp"))
        self.assertEqual(self.started(), [
            "watch --origin auto --json --from - --session s-1 --user carol --channel acp --agent default"])

    def test_the_real_atc_takes_what_the_plugin_writes(self):
        real = os.environ.get("ATC_TEST_BIN")
        if not real:
            self.skipTest("ATC_TEST_BIN not set (the Rust test runner sets it)")
        self.carry(real)
        os.environ["ATC_BIN"] = real
        os.environ["ATC_BASE_URL"] = "http://127.0.0.1:9"
        os.environ["HOME"] = str(self.path)
        self.plugin.where.server_base_url = lambda: None
        self.turn([
            ("submit_to_agent", {"to_agent": "SE"}, submitted("task-aaaaaaaaaaaa", CHILD_SE)),
            ("submit_to_agent", {"to_agent": "default"}, submitted("task-bbbbbbbbbbbb", "mine")),
        ])
        jobs = {j["task_id"]: j for j in json.loads(self.jobs.read_text())["jobs"]}
        self.assertEqual(set(jobs), {"task-aaaaaaaaaaaa", "task-bbbbbbbbbbbb"})
        a, b = jobs["task-aaaaaaaaaaaa"], jobs["task-bbbbbbbbbbbb"]
        self.assertEqual((a["origin"], a["target_agent"], a["child_session"]), ("auto", "SE", CHILD_SE))
        self.assertEqual((b["target_agent"], b["child_session"]), (None, "mine"))
        self.assertEqual((a["session_id"], a["user_id"], a["channel"], a["agent_id"]),
                         ("s-1", "carol", "console", "default"))
        # The kick after it: those two children, just watched (polled once each).
        self.assertEqual(self.kicks, [[{"agent_id": "SE", "session_id": CHILD_SE, "watched": True},
                                       {"agent_id": "default", "session_id": "mine", "watched": True}]])
        # The parent reads one itself: atc records it and will not post it.
        self.turn([("check_agent_task", {}, checked("task-aaaaaaaaaaaa"))])
        jobs = {j["task_id"]: j for j in json.loads(self.jobs.read_text())["jobs"]}
        self.assertEqual(jobs["task-aaaaaaaaaaaa"]["status"], "skipped")
        self.assertIn("read_by_parent_at", jobs["task-aaaaaaaaaaaa"])
        self.assertEqual(jobs["task-bbbbbbbbbbbb"]["status"], "pending")
        # A check of the one still running: the real `atc status --json` says atc watches it
        # for this chat, and the model reads so; not in another chat, not for a task atc
        # does not watch, not for the one already read.
        told = self.plugin.auto_watch.TOLD_WATCHED
        for task, ctx, says in (("task-bbbbbbbbbbbb", None, True),
                                ("task-bbbbbbbbbbbb", self.ctx(session="s-2"), False),
                                ("task-cccccccccccc", None, False),
                                ("task-aaaaaaaaaaaa", None, False)):
            out = ToolResponse(checked(task, "running"))
            self.turn([("check_agent_task", {}, out)], ctx=ctx)
            self.assertEqual(out.content[0].text.endswith("\n\n" + told), says, (task, ctx))
        self.assertEqual(self.warned, [])


class CadenceTest(Carried, unittest.TestCase):
    """The plugin's own cadence: atc tick every period unless a timer ticks."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = Path(self.dir.name)
        self.atc = self.path / "atc"
        self.atc.write_text(STUB)
        self.atc.chmod(0o755)
        self.env = dict(os.environ)
        self.jobs = self.path / "state" / "jobs.json"
        self.jobs.parent.mkdir()
        self.jobs.write_text("{}")
        os.environ.update(ATC_BIN=str(self.atc), STUB_DIR=str(self.path), ATC_STATE=str(self.jobs))
        os.environ.pop("STUB_SLEEP", None)
        os.environ.pop("ATC_CADENCE", None)
        self.plugin = installed_plugin(self.path)
        self.kicker = self.plugin.kick.Kicker()
        self.cadence = self.plugin.kick.Cadence(self.kicker, 20)

    def tearDown(self):
        if self.kicker.proc is not None:
            self.kicker.proc.wait()
        if self.kicker.reaper is not None:
            self.kicker.reaper.join()
        os.environ.clear()
        os.environ.update(self.env)
        self.dir.cleanup()

    def heartbeat(self, at):
        self.write_beat({"last_tick_at": self.plugin.kick.rfc3339(at)})

    def write_beat(self, beat):
        """``beat`` as atc leaves it in the tick lock (one JSON line)."""
        Path(str(self.jobs) + ".tick.lock").write_text(json.dumps(beat) + "\n")

    def ticked(self, why):
        """This plugin's cadence ticked at its beat (``why``: what standing by would
        mean); the tick is waited for."""
        self.assertTrue(self.cadence.beat(), why)
        self.kicker.proc.wait()
        self.kicker.reaper.join()

    def stands_by(self, beat, why):
        """A fresh cadence reading ``beat`` stands by for a timer."""
        self.write_beat(beat)
        self.assertFalse(self.plugin.kick.Cadence(self.plugin.kick.Kicker(), 20).beat(), why)

    def said(self):
        return json.loads(Path(str(self.jobs) + ".cadence").read_text())

    def test_the_period_is_20s_unless_configured(self):
        self.assertEqual(self.plugin.kick.cadence_period(), 20.0)
        for raw, secs in (("5s", 5.0), ("1m", 60.0), ("30", 30.0), ("off", 0.0), ("0", 0.0)):
            os.environ["ATC_CADENCE"] = raw
            self.assertEqual(self.plugin.kick.cadence_period(), secs, raw)

    def test_no_timer_seen_a_beat_starts_a_plain_tick_and_says_so(self):
        self.assertTrue(self.cadence.beat())
        self.kicker.proc.wait()
        self.assertEqual((self.path / "calls.args").read_text().splitlines(), ["tick", "--json"])
        said = self.said()
        self.assertEqual((said["ticking"], said["started_a_tick"], said["every_secs"]), (True, True, 20))
        self.assertIsNone(said["timer_seen_at"])
        self.assertEqual(os.stat(Path(str(self.jobs) + ".cadence")).st_mode & 0o777, 0o600)

    def test_its_own_ticks_in_the_heartbeat_are_not_a_timer(self):
        self.cadence.beat()
        self.kicker.proc.wait()
        self.kicker.reaper.join()
        self.heartbeat(time.time())
        self.assertTrue(self.cadence.beat(), "stood by for its own tick")

    def test_a_tick_it_did_not_start_makes_it_stand_by_for_three_periods(self):
        import time as clock
        self.heartbeat(clock.time() - 5)
        self.assertFalse(self.cadence.beat())
        self.assertFalse((self.path / "calls.args").exists(), "a tick was started")
        said = self.said()
        self.assertEqual((said["ticking"], said["started_a_tick"]), (False, False))
        self.assertIsNotNone(said["timer_seen_at"])
        # The timer went quiet three periods ago: the plugin ticks again.
        Path(str(self.jobs) + ".tick.lock").unlink()
        self.cadence.timer_seen_at -= 60
        self.assertTrue(self.cadence.beat())

    def test_a_recent_tick_when_it_starts_counts_as_a_timer(self):
        import time as clock
        self.heartbeat(clock.time() - 2)
        self.cadence.period = 3600  # the thread must not beat during the test
        self.cadence.start()
        self.cadence.stop.set()
        self.assertIsNotNone(self.cadence.timer_seen_at)

    def test_kicked_ticks_of_another_server_are_no_timer(self):
        # Issue 36 (M5): two servers' plugins on one job file each took the other's kicked
        # ticks for a system timer, and both cadences stood by.
        now = self.plugin.kick.rfc3339(time.time() - 2)
        self.write_beat({"last_tick_at": now, "last_kick_at": now})
        self.ticked("stood by for another server's kick")
        # A tick that was no kick (a timer's): stand by.
        earlier = self.plugin.kick.rfc3339(time.time() - 40)
        beat = {"last_tick_at": now, "last_kick_at": now, "last_unkicked_at": earlier}
        self.stands_by(beat, "a timer's tick 40 s ago: stand by")

    def test_another_servers_cadence_is_no_timer_and_its_own_ticks_say_they_are_a_cadence(self):
        # Issue 36 (M5): two servers on one job file both tick on their cadence; neither
        # takes the other's cadence ticks (atc's heartbeat: last_cadence_at) for a timer.
        now = self.plugin.kick.rfc3339(time.time() - 2)
        self.write_beat({"last_tick_at": now, "last_cadence_at": now})
        self.ticked("stood by for another server's cadence")
        self.assertEqual((self.path / "calls.args").read_text().splitlines(), ["tick", "--json"])
        self.assertEqual((self.path / "calls.cadence").read_text(), "1\n", "a cadence tick says so")
        # A kick's tick does not.
        self.kicker.kick()
        self.kicker.proc.wait()
        self.assertEqual((self.path / "calls.cadence").read_text(), "(unset)\n")

    def test_a_heartbeat_that_knows_a_cadence_says_a_timer_only_by_last_unkicked_at(self):
        # Stop 67: the fallback for heartbeats older than the cadence (their last tick, no
        # kick, was a timer's) read one whose last tick came after its last cadence tick
        # (another server's cadence pass, stamped by a build of that stop that kept the
        # cadence's time for its sweeps alone) as a timer's: this plugin stood by. atc's
        # own rule (`last_unkicked`): a heartbeat that knows a cadence says a timer only
        # by last_unkicked_at.
        started = self.plugin.kick.rfc3339(time.time() - 30)
        later = self.plugin.kick.rfc3339(time.time() - 2)
        self.write_beat({"last_tick_at": later, "last_cadence_at": started})
        self.ticked("stood by for a cadence tick's later pass")
        self.stands_by({"last_tick_at": later}, "an older atc's timer tick 2 s ago: stand by")

    def test_nothing_to_do_starts_nothing(self):
        self.jobs.unlink()
        self.assertFalse(self.cadence.beat())
        self.assertIsNone(self.kicker.proc)


if __name__ == "__main__":
    install_host_stubs()
    unittest.main(verbosity=1)
