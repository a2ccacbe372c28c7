#!/usr/bin/env python3
"""A headless Chromium the e2e scenarios drive, over the DevTools protocol on a pipe.

Standard library only. Usage: browser.py <chromium> <profile dir>

Starts ``<chromium> --remote-debugging-pipe`` (the protocol on the child's fds 3 and 4,
NUL-terminated JSON messages: no port, no websocket), attaches to its page, and then
reads one JSON command per line on stdin and answers each with one JSON line on stdout,
``{"ok": <value>}`` or ``{"error": "<why>"}``. The first line it prints is
``{"ready": "<browser version>"}``.

  {"op": "open", "url": U}        navigate the page to U, wait for its load event
  {"op": "eval", "js": E}         evaluate E in the page (promises awaited), its value
  {"op": "insert", "text": T}     type T into the focused element (as an IME would)
  {"op": "key", "key": "Enter"}   press and release a key
  {"op": "shot", "path": P}       a PNG screenshot of the page into P
  {"op": "requests", "since": N}  the page's requests from the N-th on:
                                  {"total": n, "requests": [[wall secs, method, url], …]}
  {"op": "navigations"}           how many times the top frame navigated (a reload too)
  {"op": "quit"}                  close the browser and exit

Every request the page makes is recorded (``Network.requestWillBeSent``) from the start,
whatever the commands, by a thread that reads the pipe all the time.
"""

import base64
import json
import os
import subprocess
import sys
import threading

# Nothing but the pages the scenario opens: no first-run, sync, updates or field trials,
# and no host name resolves but the loopback's, so nothing leaves the machine (the
# console itself asks https://pypi.org for a newer QwenPaw: that request fails at once).
FLAGS = [
    # chromium-headless-shell is headless anyway; a full Chromium needs it said.
    "--headless",
    "--remote-debugging-pipe",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-sync",
    "--disable-extensions",
    "--metrics-recording-only",
    "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication",
    "--window-size=1280,900",
]


class Chromium:
    def __init__(self, exe, profile):
        to_chrome_r, to_chrome_w = os.pipe()
        from_chrome_r, from_chrome_w = os.pipe()

        def wire():
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self.proc = subprocess.Popen(  # pylint: disable=consider-using-with
            [exe, *FLAGS, "--user-data-dir=" + profile, "about:blank"],
            pass_fds=(3, 4),
            preexec_fn=wire,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(profile, "chromium.log"), "wb"),  # pylint: disable=consider-using-with
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.out = os.fdopen(to_chrome_w, "wb", buffering=0)
        self.inp = os.fdopen(from_chrome_r, "rb", buffering=0)
        self.lock = threading.Condition()
        self.answers = {}
        self.next_id = 0
        self.session = None
        self.requests = []
        self.navigations = 0
        self.loads = 0
        self.closed = False
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        buf = b""
        while True:
            chunk = self.inp.read(1 << 16)
            if not chunk:
                break
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                self.dispatch(json.loads(raw))
        with self.lock:
            self.closed = True
            self.lock.notify_all()

    def dispatch(self, msg):
        with self.lock:
            if "id" in msg:
                self.answers[msg["id"]] = msg
            else:
                method, params = msg.get("method"), msg.get("params", {})
                if method == "Network.requestWillBeSent":
                    req = params.get("request", {})
                    self.requests.append([params.get("wallTime"), req.get("method"), req.get("url")])
                elif method == "Page.frameNavigated" and not params.get("frame", {}).get("parentId"):
                    self.navigations += 1
                elif method == "Page.loadEventFired":
                    self.loads += 1
            self.lock.notify_all()

    def call(self, method, params=None, browser=False, timeout=60):
        with self.lock:
            self.next_id += 1
            ident = self.next_id
        msg = {"id": ident, "method": method, "params": params or {}}
        if self.session and not browser:
            msg["sessionId"] = self.session
        self.out.write(json.dumps(msg).encode() + b"\0")
        with self.lock:
            if not self.lock.wait_for(lambda: ident in self.answers or self.closed, timeout):
                raise RuntimeError("%s: no answer within %d s" % (method, timeout))
            if ident not in self.answers:
                raise RuntimeError("%s: the browser went away" % method)
            answer = self.answers.pop(ident)
        if "error" in answer:
            raise RuntimeError("%s: %s" % (method, answer["error"].get("message")))
        return answer.get("result", {})

    def attach(self):
        targets = self.call("Target.getTargets", browser=True)["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.call(
            "Target.attachToTarget", {"targetId": page["targetId"], "flatten": True}, browser=True
        )["sessionId"]
        for domain in ("Page", "Runtime", "Network"):
            self.call(domain + ".enable")
        return self.call("Browser.getVersion", browser=True).get("product", "")

    def open(self, url):
        with self.lock:
            loads = self.loads
        self.call("Page.navigate", {"url": url})
        with self.lock:
            if not self.lock.wait_for(lambda: self.loads > loads, 60):
                raise RuntimeError("%s did not load within 60 s" % url)
        return url

    def eval(self, js):
        result = self.call(
            "Runtime.evaluate", {"expression": js, "awaitPromise": True, "returnByValue": True}
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise RuntimeError(
                "the page threw: %s" % (details.get("exception", {}).get("description") or details.get("text"))
            )
        return result.get("result", {}).get("value")

    def key(self, key):
        codes = {"Enter": 13}
        for kind in ("keyDown", "keyUp"):
            params = {"type": kind, "key": key, "code": key, "windowsVirtualKeyCode": codes.get(key, 0)}
            if kind == "keyDown" and key == "Enter":
                params["text"] = "\r"
            self.call("Input.dispatchKeyEvent", params)
        return key

    def shot(self, path):
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as fh:
            fh.write(base64.b64decode(data))
        return path

    def quit(self):
        try:
            self.call("Browser.close", browser=True, timeout=10)
        except RuntimeError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def main():
    exe, profile = sys.argv[1], sys.argv[2]
    chromium = Chromium(exe, profile)
    try:
        version = chromium.attach()
    except Exception as err:  # pylint: disable=broad-except
        print(json.dumps({"error": "chromium did not start: %s" % err}), flush=True)
        chromium.quit()
        return 1
    print(json.dumps({"ready": version}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        cmd = json.loads(line)
        op = cmd.get("op")
        try:
            if op == "open":
                value = chromium.open(cmd["url"])
            elif op == "eval":
                value = chromium.eval(cmd["js"])
            elif op == "insert":
                chromium.call("Input.insertText", {"text": cmd["text"]})
                value = None
            elif op == "key":
                value = chromium.key(cmd["key"])
            elif op == "shot":
                value = chromium.shot(cmd["path"])
            elif op == "requests":
                with chromium.lock:
                    since = int(cmd.get("since", 0))
                    value = {"total": len(chromium.requests), "requests": chromium.requests[since:]}
            elif op == "navigations":
                with chromium.lock:
                    value = chromium.navigations
            elif op == "quit":
                chromium.quit()
                print(json.dumps({"ok": "bye"}), flush=True)
                return 0
            else:
                raise RuntimeError("unknown op %r" % op)
            print(json.dumps({"ok": value}), flush=True)
        except Exception as err:  # pylint: disable=broad-except
            print(json.dumps({"error": str(err)}), flush=True)
    chromium.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
