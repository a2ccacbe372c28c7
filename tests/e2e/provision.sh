#!/usr/bin/env bash
# Creates (or reuses) the virtualenv that holds the real QwenPaw server for atc's
# end-to-end scenarios, and prints its python's path as the last line on stdout.
#
#   venv:   ${XDG_CACHE_HOME:-$HOME/.cache}/atc/e2e/qwenpaw-<version>
#   marker: <venv>/.atc-provisioned, written only after a successful install
#           and import check; with it present this script is a no-op.
#
# Knobs: ATC_E2E_PYTHON (base interpreter, default python3.11, 3.12, 3.10, python3),
#        ATC_E2E_QWENPAW_VERSION (default 2.2.2.post1).
# Touches nothing outside the cache dir. Progress goes to stderr.
set -euo pipefail

version=${ATC_E2E_QWENPAW_VERSION:-2.2.2.post1}
cache=${XDG_CACHE_HOME:-${HOME:?HOME is not set}/.cache}
root="$cache/atc/e2e"
venv="$root/qwenpaw-$version"
marker="$venv/.atc-provisioned"
py="$venv/bin/python"

. "$(dirname "$0")/estimates.sh"

say() { printf 'provision: %s\n' "$*" >&2; }
die() { printf 'provision: FAILED: %s\n' "$*" >&2; exit 1; }

# Complete = the marker names this version and the installed distribution is that
# version. The marker is written only after the full import check below, so this
# fast path needs no heavy import.
check() {
    [ -x "$py" ] && [ -f "$marker" ] && [ "$(cat "$marker")" = "$version" ] &&
        "$py" -c 'import sys; from importlib.metadata import version as v; sys.exit(v("qwenpaw") != sys.argv[1])' \
            "$version" >/dev/null 2>&1
}

import_check() {
    "$py" - "$version" <<'EOF'
import sys
from importlib.metadata import version
import qwenpaw.agents.tools.agent_management as am
assert hasattr(am, "format_background_status_text"), "format_background_status_text missing"
assert version("qwenpaw") == sys.argv[1], "installed version is " + version("qwenpaw")
EOF
}

if check; then
    printf '%s\n' "$py"
    exit 0
fi

mkdir -p "$root" || die "cannot create cache dir $root"

# One installer at a time (two test runs starting together, or run-all + demo).
exec 9>"$root/.qwenpaw-$version.lock"
if command -v flock >/dev/null 2>&1; then
    flock 9 || die "cannot lock $root/.qwenpaw-$version.lock"
fi
if check; then   # another process finished it while we waited
    printf '%s\n' "$py"
    exit 0
fi

base=${ATC_E2E_PYTHON:-}
if [ -z "$base" ]; then
    for cand in python3.11 python3.12 python3.10 python3; do
        if command -v "$cand" >/dev/null 2>&1; then base=$(command -v "$cand"); break; fi
    done
fi
[ -n "$base" ] || die "no python3 found (set ATC_E2E_PYTHON); QwenPaw $version needs Python >= 3.10"
command -v "$base" >/dev/null 2>&1 || die "base python $base not found (ATC_E2E_PYTHON)"
"$base" -c 'import sys; sys.exit(0 if sys.version_info[:2] >= (3, 10) else 1)' ||
    die "$base is $("$base" -V 2>&1); QwenPaw $version needs Python >= 3.10 (set ATC_E2E_PYTHON)"
"$base" -c 'import venv, ensurepip' 2>/dev/null ||
    die "$base lacks the venv/ensurepip modules (Debian: apt-get install python3-venv)"

if [ ! -x "$py" ] || ! "$py" -c 'import pip' >/dev/null 2>&1; then
    say "creating virtualenv $venv with $base"
    rm -rf "$venv"
    "$base" -m venv "$venv" || die "python -m venv $venv failed"
fi

rm -f "$marker"
log="$root/pip-install-$version.log"
say "installing qwenpaw==$version into $venv ($est_provision; log: $log)"
# --no-cache-dir: nothing outside the cache dir is touched (no ~/.cache/pip).
if ! "$py" -m pip install --disable-pip-version-check --no-input --no-cache-dir \
    "qwenpaw==$version" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    die "pip install qwenpaw==$version failed (full log: $log)"
fi
if ! import_check >>"$log" 2>&1; then
    tail -n 30 "$log" >&2
    die "qwenpaw==$version installed but does not import (see above; log: $log)"
fi
printf '%s\n' "$version" >"$marker"
say "ready: $venv"
printf '%s\n' "$py"
