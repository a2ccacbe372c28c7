# -*- coding: utf-8 -*-
"""The end-of-turn kick and the cadence: ``atc tick`` started detached, one at a time, only
when the job file has work; the turn that ended handed over in ``ATC_KICK`` (never on the
command line, never in a log), or left in the running tick's mark; every ``ATC_CADENCE``
a tick of the plugin's own, unless a system timer ticks."""

import json
import os
import re
import subprocess
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from . import where


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


def has_work(found):
    """Could a tick do anything? Not without a job file, and not with the very file the
    last tick found settled (every watch ended, nothing on its way): the heartbeat in the
    tick lock (``where.Files``) names it by fingerprint. Anything else: yes."""
    try:
        st = os.stat(str(found.job_file))
    except OSError:
        return False
    try:
        with open(str(found.tick_lock), encoding="utf-8") as fh:
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


def append_mark(marks, line):
    """Adds ``line`` (one ended turn, JSON; a bare newline: a turn of no known chat) to the
    mark the running tick takes, ``<job file>.tick.again`` (0600; it holds session ids, like
    the job file). The tick takes the mark by renaming it away: when that happened while the
    line went in, the line goes into a new mark (at worst the tick reads it twice)."""
    mark = str(marks)
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
        # The last failed exit said in QwenPaw's log, (code, atc's line): each breakage is
        # said once, again after a tick that ran clean.
        self.failing = None
        # [started, ended or None] of the ticks started here, newest last.
        self.ours = []

    def warn_once(self, what, message):
        if what not in self.warned:
            self.warned.add(what)
            where.LOG.warning("atc plugin: %s", message)

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
        if where.STANDBY.now():
            return False  # the seed delivers: atc ticks nothing, kicked or not
        found, problem = where.files()
        if found is None:
            self.warn_once("missing", "the end-of-turn kick cannot start atc: " + problem)
            return False
        if not has_work(found):
            return False
        if self.running():
            if mark and ended != []:
                # A tick of ours is running: it makes one more pass for this turn's end.
                append_mark(found.marks, (json.dumps(ended[0]) if ended else "") + "\n")
            return False
        exe, problem = where.find_atc()
        if exe is None:
            self.warn_once("missing", "the end-of-turn kick cannot start atc: " + problem)
            return False
        env = where.atc_env()
        env.pop("ATC_KICK", None)
        env.pop("ATC_CADENCE_TICK", None)
        if not mark:
            # The cadence's tick: atc's heartbeat tells it from a timer's, so that another
            # server's plugin on the same job file does not stand by for it.
            env["ATC_CADENCE_TICK"] = "1"
        if ended is not None:
            # The environment of the child alone: not its command line, not a log.
            env["ATC_KICK"] = json.dumps(ended)
        span = [time.time(), None]
        proc = subprocess.Popen(  # pylint: disable=consider-using-with
            [exe, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
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
            out, err = proc.communicate()
        except Exception:  # pylint: disable=broad-except
            out, err = b"", b""
        code = proc.wait()
        span[1] = time.time()
        # Its give-ups: nobody reads its stderr; QwenPaw's log is where this server's
        # people look (and the next `atc tick` a person hears says them too).
        for line in give_up_lines(out):
            where.LOG.warning("%s", line)
        self.exited(what, code, err)
        # A mark left while that tick was letting go (after its last look): one more tick,
        # once (a tick that cannot take the mark must not start ticks forever).
        if not chained:
            found, _ = where.files()
            if found is not None and found.marks.exists():
                self.kick(chained=True)

    def exited(self, what, code, err):
        """Says a failed tick in QwenPaw's log with atc's own line (a kicked tick says
        nothing else: its stderr is not a person's): once per breakage, again after a
        clean tick."""
        if code == 0:
            self.failing = None
            return
        lines = (err or b"").decode("utf-8", "replace").strip().splitlines()
        said = lines[-1] if lines else ""
        if self.failing == (code, said):
            return
        self.failing = (code, said)
        where.LOG.warning(
            "atc plugin: atc %s exited %s: %s; `atc doctor` as the server's user says more",
            what, code, said or "(it said nothing)")

    def started_it(self, at):
        """Was a tick that started at ``at`` (epoch seconds, as the heartbeat has it, to
        the second) one of ours?"""
        now = time.time()
        return any(
            start - 1.5 <= at <= (end if end is not None else now) + 1.5
            for start, end in self.ours
        )


def unkicked(beat):
    """When the last tick that was no kick started, as the heartbeat says it (an older
    atc's, one that knew no cadence, says it only when its last tick was no kick). A
    heartbeat that knows a cadence is today's atc's: its last tick may be a cadence
    tick's later pass, for a kick's mark, which is no timer's (atc's `last_unkicked`)."""
    if beat.get("last_unkicked_at"):
        return epoch(beat.get("last_unkicked_at"))
    tick, kick = beat.get("last_tick_at"), beat.get("last_kick_at")
    cadence = beat.get("last_cadence_at")
    return epoch(tick) if tick and tick != kick and not cadence else None


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
        where.LOG.warning("atc plugin: ATC_CADENCE=%r is not like 20s or 1m: using 20s", raw)
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
        # Run at each beat, before the tick (the auto-watch's refused commands, tried again).
        self.also = []

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
        """Notes a tick seen in the heartbeat that this plugin did not start and that was
        no kick and no plugin's cadence: a kicked tick or a cadence's (this server's, or
        another server's plugin on the same job file) is not a timer, and two servers that
        each took the other's for one both stood by."""
        found, _ = where.files()
        if found is None:
            return
        try:
            with open(str(found.tick_lock), encoding="utf-8") as fh:
                beat = json.loads(fh.readline() or "{}")
        except (OSError, ValueError):
            return
        at = unkicked(beat) if isinstance(beat, dict) else None
        if at is not None and not self.kicker.started_it(at):
            if self.timer_seen_at is None or at > self.timer_seen_at:
                self.timer_seen_at = at

    def timer_ticks(self, now):
        return (
            self.timer_seen_at is not None
            and now - self.timer_seen_at < self.STANDBY_PERIODS * self.period
        )

    def beat(self):
        for also in list(self.also):
            also()
        self.look()
        now = time.time()
        standing_by = self.timer_ticks(now)
        started = False
        if not standing_by:
            started = self.kicker.tick()
        self.say(now, standing_by, started)
        return started

    def say(self, now, standing_by, started):
        found, _ = where.files()
        if found is None or not found.job_dir.is_dir():
            return  # no job file's directory yet: nothing to tick, nothing to tell
        path = found.cadence
        doc = {
            "by": "atc's QwenPaw plugin",
            "pid": os.getpid(),
            "every_secs": self.period,
            "at": rfc3339(now),
            "ticking": not standing_by,
            "started_a_tick": started,
            "timer_seen_at": rfc3339(self.timer_seen_at) if self.timer_seen_at else None,
            "standing_by": where.STANDBY.now(),
        }
        tmp = Path(str(path) + ".tmp-%d" % os.getpid())
        fd = os.open(str(tmp), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(doc) + "\n")
        os.replace(str(tmp), str(path))


KICKER = Kicker()
CADENCE = Cadence(KICKER, cadence_period())


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
