# -*- coding: utf-8 -*-
"""Where atc is, where its files are, and whether to stand by.

Which atc runs (the one this plugin carries, the server's Python environment, ``ATC_BIN``,
``PATH``, ``~/.cargo/bin``: ``find_atc``), the environment it runs in (``atc_env``),
where it keeps its files (``files``: atc says, ``atc paths --json``, asked once and again
only when the environment or the config file changes), and whether the Agent Task
Callback plugin still delivers beside this one (``STANDBY``).
"""

import json
import logging
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path

LOG = logging.getLogger("qwenpaw.plugins.atc")

# What this module has said in QwenPaw's log, each once.
_SAID = set()


def say_once(what, message):
    if what not in _SAID:
        _SAID.add(what)
        LOG.warning("atc plugin: %s", message)


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
PLUGIN_DIR = Path(__file__).resolve().parent.parent
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
        say_once("platform", skipped)
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


STANDBY = Standby()


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



# -- Where atc keeps its files: atc says (`atc paths --json`) --------------------------
#
# Asked once, and again only when what atc resolves them from changes: the variables
# below (the kick passes the server's own environment) or the config file (its `state`
# names the job file). That check is a few lookups and one stat, cheap enough for the
# end of every turn. When atc cannot answer, the kicks and the cadence start nothing
# (a system timer still ticks) and the kick says why in QwenPaw's log, once; atc is asked
# again when the environment changes or after RETRY_SECS. Nothing here raises.

# The variables atc resolves its files from (`src/settings`: ATC_STATE, ATC_CONFIG, and
# the XDG and home directories their defaults lie in).
PATH_VARS = ("ATC_STATE", "ATC_CONFIG", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "HOME")
PATHS_TIMEOUT = 10.0
RETRY_SECS = 30.0


class Files:
    """atc's files, as ``atc paths --json`` names them (``src/cmd/paths.rs``)."""

    KEYS = ("job_file", "job_dir", "tick_lock", "marks", "cadence", "log")

    def __init__(self, doc):
        for key in self.KEYS:
            setattr(self, key, Path(doc[key]))
        config = doc.get("config_file")
        self.config_file = Path(config) if isinstance(config, str) else None
        # What of the config file atc left out (a wrong key or value): watches are still
        # recorded, every tick refuses the file until it is fixed.
        # Whether automatic watches watch here (an older atc does not say: they do).
        self.auto_watch = doc.get("auto_watch") is not False
        skipped = doc.get("config_skipped")
        self.config_skipped = [s for s in skipped if isinstance(s, str)] if isinstance(skipped, list) else []

    @classmethod
    def parse(cls, out):
        """The files of ``atc paths --json``'s answer, or None when it is not one."""
        try:
            doc = json.loads(out)
        except ValueError:
            return None
        if not isinstance(doc, dict) or not all(isinstance(doc.get(k), str) for k in cls.KEYS):
            return None
        return cls(doc)


def _config_seen(path):
    """What tells a changed config file: (mtime_ns, size), or None while it is absent."""
    if path is None:
        return None
    try:
        st = os.stat(str(path))
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


class Where:
    """The last answer of ``atc paths --json``, and what it was asked with."""

    def __init__(self):
        self.lock = threading.Lock()
        # (environment, config file seen, Files or None, why not, when asked)
        self.known = None

    def files(self):
        """(Files, None), or (None, why atc could not say)."""
        env = tuple(os.environ.get(name) for name in PATH_VARS)
        with self.lock:
            known = self.known
            if known is not None and known[0] == env:
                found, why, config, at = known[2], known[3], known[1], known[4]
                if found is not None and _config_seen(found.config_file) == config:
                    return found, None
                if found is None and time.monotonic() - at < RETRY_SECS:
                    return None, why
            found, why = self.ask()
            if found is not None:
                say_config(found.config_skipped)
            config = _config_seen(found.config_file) if found is not None else None
            self.known = (env, config, found, why, time.monotonic())
            return found, why

    @staticmethod
    def ask():
        exe, problem = find_atc()
        if exe is None:
            return None, problem
        try:
            done = subprocess.run(
                [exe, "paths", "--json"],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=PATHS_TIMEOUT,
                env=atc_env(),
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as err:
            why = "cannot run %s paths: %s" % (exe, err)
        else:
            found = Files.parse(done.stdout) if done.returncode == 0 else None
            if found is not None:
                return found, None
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            why = "`%s paths --json` exited %s%s" % (
                exe, done.returncode, (": " + said[-1]) if said else " without an answer")
        return None, "atc cannot say where its files are (%s)" % why


WHERE = Where()

# The config file's problems last said in QwenPaw's log: each breakage is said once, and
# again after the file was fixed and broken anew.
_CONFIG_SAID = []


def say_config(skipped):
    if skipped != _CONFIG_SAID:
        _CONFIG_SAID[:] = skipped
        for line in skipped:
            LOG.warning(
                "atc plugin: atc left part of its config file out (watches are still "
                "recorded; every atc tick refuses the file until it is fixed): %s", line)


def files():
    """(Files, None), or (None, why not): where atc keeps its files in this environment."""
    return WHERE.files()
