#!/usr/bin/env bash
# atc in one command, for people without a QwenPaw at hand.
#
# Installs (once) the real QwenPaw 2.2.2 server into a cache dir, runs it on
# 127.0.0.1 with a fake, deterministic LLM, creates a parent chat, submits a child
# task to another session, registers a watch with atc, runs `atc tick` until the
# result is delivered, and prints the parent chat with the delivered result.
# Everything runs in a temp dir that is removed at the end, pass or fail.
#
#   examples/demo.sh          # runs, shows, cleans up
#   examples/demo.sh --keep   # leaves the server, the job file and a second child task
#                             # running, prints what to try (status, wait, cancel,
#                             # redeliver, log) and how to stop it all
#
# Cost (two cores): the first run installs qwenpaw==2.2.2.post1 from PyPI into a
# virtualenv in ${XDG_CACHE_HOME:-~/.cache}/atc/e2e/ (about 2 minutes, up to 5 on a busy
# machine, and 1.5 GB), so it takes about 2–3 minutes in all. Later runs reuse it and take
# about 20–40 s (up to 60 on a busy machine), most of it QwenPaw starting. The virtualenv
# stays after the demo (the end-to-end tests share it);
# `rm -rf "${XDG_CACHE_HOME:-$HOME/.cache}/atc/e2e"` removes it.
#
# It uses the `atc` on your PATH when there is one (`cargo install --locked --path .`),
# else it builds one (`cargo build`). Nothing leaves the machine: the server, the fake LLM
# and atc talk over loopback.
set -euo pipefail

keep=0
case "${1:-}" in
    --keep) keep=1 ;;
    "") ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: examples/demo.sh [--keep]" >&2; exit 2 ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
e2e="$root/tests/e2e"
. "$e2e/estimates.sh"
began=$SECONDS
work=$(mktemp -d "${TMPDIR:-/tmp}/atc-demo.XXXXXX")
groups=()

if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold='' plain=''; fi
step() { printf '\n%s==> %s%s\n' "$bold" "$*" "$plain"; }
note() { printf '    %s\n' "$*"; }

cleanup() {
    local status=$?
    # A second Ctrl-C must not cut the cleanup short.
    trap - EXIT
    trap '' INT TERM
    if [ ${#groups[@]} -gt 0 ]; then
        step "cleaning up: stopping the server and the fake LLM, removing $work"
        for pgid in "${groups[@]}"; do kill -TERM -- "-$pgid" 2>/dev/null || true; done
        for _ in $(seq 30); do
            alive=0
            for pgid in "${groups[@]}"; do kill -0 -- "-$pgid" 2>/dev/null && alive=1; done
            [ "$alive" -eq 0 ] && break
            sleep 0.1
        done
        for pgid in "${groups[@]}"; do kill -KILL -- "-$pgid" 2>/dev/null || true; done
    fi
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Each background process gets its own session (and so process group), so the
# cleanup can stop it with everything it started.
start_group() { # name logfile cmd...
    local name=$1 log=$2
    shift 2
    setsid "$@" >"$log" 2>&1 &
    groups+=("$!")
    note "$name: pid $!"
}

cache="${XDG_CACHE_HOME:-$HOME/.cache}/atc/e2e"
step "1/8 provisioning QwenPaw 2.2.2.post1 into $cache (the first time: $est_provision; afterwards instant)"
py=$(bash "$e2e/provision.sh" | tail -n 1)
note "python: $py"

if installed=$(command -v atc); then
    step "2/8 using the installed atc"
    atc_bin=$installed
else
    step "2/8 building atc (none on PATH; \`cargo install --locked --path .\` installs one)"
    cargo build --quiet --manifest-path "$root/Cargo.toml" --bin atc
    atc_bin="$root/target/debug/atc"
fi
note "binary: $atc_bin ($("$atc_bin" --version))"

# A clean, isolated environment for QwenPaw (contract §8) and for atc.
for v in $(env | sed -n 's/^\(\(ATC\|QWENPAW\)_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
mkdir -p "$work/home" "$work/tmp"
export HOME="$work/home" TMPDIR="$work/tmp"
export QWENPAW_WORKING_DIR="$work/home/.qwenpaw"
export QWENPAW_TELEMETRY_DISABLED=1 QWENPAW_DISABLE_KEYRING=1 QWENPAW_LLM_MAX_RETRIES=0
export PYTHONDONTWRITEBYTECODE=1
cd "$work"

step "3/8 starting the fake LLM (tests/e2e/fake_llm.py: answers \"ECHO: <your text>\")"
start_group "fake LLM" "$work/llm.out" "$py" -u "$e2e/fake_llm.py" 0
for _ in $(seq 100); do grep -q '^PORT ' "$work/llm.out" 2>/dev/null && break; sleep 0.1; done
llm_port=$(sed -n 's/^PORT //p' "$work/llm.out")
[ -n "$llm_port" ] || { echo "fake LLM did not start:"; cat "$work/llm.out"; exit 1; }
note "listening on 127.0.0.1:$llm_port"

step "4/8 preparing an isolated QwenPaw working dir (qwenpaw init, provider -> fake LLM)"
"$py" "$e2e/qwenpaw_setup.py" setup --llm-url "http://127.0.0.1:$llm_port/v1" 2>"$work/setup.err" | tail -n 1 |
    sed 's/^/    /' || { cat "$work/setup.err"; exit 1; }

port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
step "5/8 starting qwenpaw app on $base and waiting for /api/healthz ($est_server_start)"
start_group "qwenpaw app" "$work/server.log" "$py" "$(dirname "$py")/qwenpaw" app --host 127.0.0.1 --port "$port"

# Tiny HTTP client (the venv's python; no curl needed): api METHOD PATH [JSON]
api() {
    "$py" - "$1" "$base$2" "${3:-}" <<'PY'
import sys, urllib.request, urllib.error
method, url, body = sys.argv[1], sys.argv[2], sys.argv[3]
req = urllib.request.Request(url, method=method, data=body.encode() if body else None,
                             headers={"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(req, timeout=30) as r:
        sys.stdout.write(r.read().decode())
except urllib.error.HTTPError as e:
    sys.stdout.write(e.read().decode()); sys.exit(22)
except OSError as e:
    sys.stderr.write(str(e) + "\n"); sys.exit(7)
PY
}
field() { "$py" -c 'import json,sys; v=json.load(sys.stdin)
for k in sys.argv[1].split("."): v=v[k]
print(v)' "$1"; }
turn() { # session text -> task id
    api POST /api/console/chat/task "$("$py" -c 'import json,sys
print(json.dumps({"session_id": sys.argv[1], "user_id": "demo", "channel": "console",
  "input": [{"role": "user", "content": [{"type": "text", "text": sys.argv[2]}]}]}))' "$1" "$2")" |
        field task_id
}
wait_finished() {
    for _ in $(seq 300); do
        [ "$(api GET "/api/console/chat/task/$1" | field status)" = finished ] && return 0
        sleep 0.2
    done
    echo "task $1 did not finish"; exit 1
}

for _ in $(seq 480); do
    api GET /api/healthz >/dev/null 2>&1 && break
    sleep 0.25
done
api GET /api/healthz >/dev/null || { echo "server did not become healthy:"; tail -n 30 "$work/server.log"; exit 1; }
note "healthy: $(api GET /api/version)"

step "6/8 a parent chat (session demo-parent) and a child task (session demo-child)"
t=$(turn demo-parent "Hello! Please research something for me in the background.")
wait_finished "$t"
note "parent chat has its first turn (task $t)"
child=$(turn demo-child "What is the answer to everything?")
note "child task submitted: $child  (this is what submit_to_agent would return)"

step "7/8 atc watch + atc tick until the result is delivered"
export ATC_STATE="$work/jobs.json" ATC_BASE_URL="$base"
note "\$ atc watch $child --session demo-parent --user demo --channel console"
"$atc_bin" watch "$child" --session demo-parent --user demo --channel console | sed "s/^/    /"
for i in $(seq 60); do
    note "\$ atc -v tick   (pass $i)"
    "$atc_bin" -v tick 2>&1 | sed 's/^/    /'
    status=$("$atc_bin" --json status "$child" | "$py" -c 'import json,sys
d=json.load(sys.stdin); jobs=d.get("jobs", [d]) if isinstance(d, dict) else d
print(jobs[0]["status"] if jobs else "?")')
    [ "$status" = pending ] || [ "$status" = delivering ] || break
    sleep 0.5
done
note "\$ atc status"
"$atc_bin" status | sed 's/^/    /'
[ "$status" = done ] || { echo "the job ended as $status, not done"; exit 1; }

step "8/8 the parent chat, read back from QwenPaw (GET /api/chats...)"
turn_task=$("$py" -c 'import json,sys
f=json.load(open(sys.argv[1])); job=[j for j in f["jobs"] if j["task_id"] == sys.argv[2]][0]
print([t for t in f["turns"] if t["turn_id"] == job["turn"]][0]["turn_task_id"])' "$ATC_STATE" "$child")
wait_finished "$turn_task"
chat_id=$(api GET "/api/chats?user_id=demo&channel=console" | "$py" -c 'import json,sys
print([c["id"] for c in json.load(sys.stdin) if c["session_id"] == "demo-parent"][0])')
api GET "/api/chats/$chat_id" | "$py" -c 'import json, sys, textwrap
for m in json.load(sys.stdin)["messages"]:
    text = "\n".join(p.get("text", "") for p in m.get("content") or [] if p.get("type") == "text")
    print("    --- %s ---" % m["role"])
    print(textwrap.indent(text, "    "))'
printf '\nThe second user turn above was posted by atc: the child'"'"'s result, rendered exactly as\nQwenPaw'"'"'s own check_agent_task would show it, woke the parent agent up.\n'
printf '\nQwenPaw stays installed in %s for the next run (and the tests);\nrm -rf "%s" removes it.\n' "$cache" "$cache"
printf '\nThis run took %d s. With QwenPaw installed a run takes %s;\nthe first run, %s.\n' \
    $((SECONDS - began)) "$est_demo_later" "$est_demo_first"

[ "$keep" -eq 1 ] || exit 0

# --keep: everything stays, plus a second child task nobody watches yet.
child2=$(turn demo-child "And what is the question?")
wait_finished "$child2"
cat >"$work/stop.sh" <<STOP
#!/bin/sh
# Stops the demo's QwenPaw server and fake LLM, and removes the demo's files.
# (\`kill -s SIG -- -PGID\`: the POSIX spelling, which dash's kill also takes.)
for pgid in ${groups[*]}; do kill -s TERM -- "-\$pgid" 2>/dev/null; done
sleep 1
for pgid in ${groups[*]}; do kill -s KILL -- "-\$pgid" 2>/dev/null; done
rm -rf '$work'
echo "stopped; $work removed"
STOP
chmod +x "$work/stop.sh"
trap - EXIT
if [ "$(command -v atc || true)" = "$atc_bin" ]; then a=atc; else a=$atc_bin; fi
step "kept: the server runs on $base; the job file is $ATC_STATE"
cat <<TRY
    Point atc at them in your shell, then try:

    export ATC_STATE='$ATC_STATE' ATC_BASE_URL='$base'
    $a status
    $a status $child
    $a log
    $a wait $child
    $a redeliver $child

    (the delivered watch; it in full; what each command and tick did; the child's result
    in the foreground, without a job file; refused: it was delivered already.)

    A second child task, $child2, has run and nobody watches it yet:

    $a watch $child2 --session demo-parent --user demo --channel console
    $a cancel $child2
    $a watch $child2 --session demo-parent --user demo --channel console
    $a tick
    $a status

    (watch it; stop watching it, the task itself is untouched; watch it again; one tick
    delivers it into the parent chat.)

    Stop the server and the fake LLM, and remove the demo's files:

    $work/stop.sh
TRY
