#!/usr/bin/env bash
# `pip install` of this repository into a fresh virtualenv gives a working `atc` in that
# venv's bin/ (issue 18): the maturin package (pyproject.toml, bindings = "bin").
#
# Needs only Python 3 with venv and pip, a Rust toolchain, and PyPI (for maturin).
# Cached between runs under ${XDG_CACHE_HOME:-~/.cache}/atc/pip: pip's downloads and
# wheels (maturin) and cargo's build directory (CARGO_TARGET_DIR), so a second run only
# relinks. The virtualenv itself is new every time, and removed afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."

py=${ATC_PIP_PYTHON:-}
if [ -z "$py" ]; then
    for candidate in python3.11 python3.12 python3.10 python3; do
        if command -v "$candidate" >/dev/null 2>&1; then py=$candidate; break; fi
    done
fi
[ -n "$py" ] || { echo "pip-install: FAILED: no python3 on PATH (set ATC_PIP_PYTHON)" >&2; exit 1; }

cache=${XDG_CACHE_HOME:-${HOME:?HOME is not set}/.cache}/atc/pip
mkdir -p "$cache"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/atc-pip-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

"$py" -m venv "$tmp/venv"
echo "pip-install: pip install $(pwd) into a fresh venv ($("$tmp/venv/bin/python" --version))" >&2
PIP_CACHE_DIR="$cache/pip-cache" CARGO_TARGET_DIR="$cache/target" \
    "$tmp/venv/bin/python" -m pip install --disable-pip-version-check --quiet . \
    >"$tmp/pip.log" 2>&1 || {
    tail -n 40 "$tmp/pip.log" >&2
    echo "pip-install: FAILED: pip install . (log above)" >&2
    exit 1
}

atc="$tmp/venv/bin/atc"
[ -x "$atc" ] || { echo "pip-install: FAILED: no executable atc in the venv's bin/" >&2; ls -l "$tmp/venv/bin" >&2; exit 1; }
want="atc $(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
got=$("$atc" --version)
[ "$got" = "$want" ] || { echo "pip-install: FAILED: $atc --version says '$got', expected '$want'" >&2; exit 1; }
# A real command, in a throwaway QwenPaw working dir: the embedded plugin is there.
wd="$tmp/qwenpaw"
mkdir -p "$wd/workspaces/default"
printf '{"tools": {"builtin_tools": {}}}\n' >"$wd/workspaces/default/agent.json"
printf '{"agents": {"active_agent": "default", "profiles": {"default": {"workspace_dir": "%s"}}}}\n' \
    "$wd/workspaces/default" >"$wd/config.json"
out=$(env -u ATC_BASE_URL "$atc" qwenpaw install --dry-run --working-dir "$wd")
case "$out" in
*"Would change: write the plugin's plugin.py"*) ;;
*) echo "pip-install: FAILED: atc qwenpaw install --dry-run said: $out" >&2; exit 1 ;;
esac
# The venv's python finds it as a console script would: on the venv's PATH.
found=$(PATH="$tmp/venv/bin:/usr/bin:/bin" command -v atc)
[ "$found" = "$atc" ] || { echo "pip-install: FAILED: atc on the venv's PATH is $found" >&2; exit 1; }
echo "pip-install: ok: $got in the venv's bin/" >&2
