#!/usr/bin/env bash
# The wheel as a QwenPaw user gets it (issue 28): `maturin build --release --locked`,
# installed into a fresh virtualenv whose PATH has no cargo or rustc, and `atc --version`
# and `atc doctor` run from it. Prints the wheel's path on its last line (the e2e
# scenarios serve it to QwenPaw's plugin loader: ATC_E2E_WHEEL).
#
# Cargo's build directory is cached under ${XDG_CACHE_HOME:-~/.cache}/atc/pip/target (the
# one tests/pip-install.sh uses), so a second run only relinks. The wheel goes into
# ${XDG_CACHE_HOME:-~/.cache}/atc/wheels/<this checkout's own folder>.
set -euo pipefail
cd "$(dirname "$0")/.."
tools=$(tests/tools.sh | tail -n 1)
cache=${XDG_CACHE_HOME:-${HOME:?HOME is not set}/.cache}/atc
# One wheel folder per checkout: two checkouts testing at once (a clone for CI beside a
# work tree) must not serve each other's wheel to their scenarios.
out="$cache/wheels/$(pwd -P | cksum | cut -d' ' -f1)"
rm -rf "$out"
mkdir -p "$out"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/atc-wheel-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

CARGO_TARGET_DIR="$cache/pip/target" "$tools/maturin" build --release --locked --out "$out" \
    >"$tmp/maturin.log" 2>&1 || {
    tail -n 40 "$tmp/maturin.log" >&2
    echo "wheel: FAILED: maturin build --release --locked (log above)" >&2
    exit 1
}
wheel=$(ls "$out"/atc_qwenpaw-*.whl)
echo "wheel: built $(basename "$wheel")" >&2

py=$(command -v python3.11 || command -v python3)
"$py" -m venv "$tmp/venv"
# PATH: the venv and the system's, nothing else (no ~/.cargo/bin).
clean=(env -i "HOME=$tmp/home" "PATH=$tmp/venv/bin:/usr/bin:/bin" LANG=C.UTF-8)
mkdir -p "$tmp/home"
for tool in cargo rustc; do
    if "${clean[@]}" sh -c "command -v $tool" >/dev/null 2>&1; then
        echo "wheel: FAILED: $tool is on the clean PATH ($("${clean[@]}" sh -c "command -v $tool")); the check would prove nothing" >&2
        exit 1
    fi
done
"${clean[@]}" "$tmp/venv/bin/python" -m pip install --disable-pip-version-check --quiet --no-index "$wheel" \
    >"$tmp/pip.log" 2>&1 || {
    cat "$tmp/pip.log" >&2
    echo "wheel: FAILED: pip install of the wheel into a fresh venv" >&2
    exit 1
}
atc="$tmp/venv/bin/atc"
want="atc $(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
got=$("${clean[@]}" "$atc" --version)
[ "$got" = "$want" ] || { echo "wheel: FAILED: atc --version says '$got', expected '$want'" >&2; exit 1; }
# doctor in an account with nothing set up: it runs, says what to fix, exits 1.
set +e
said=$("${clean[@]}" ATC_BASE_URL=http://127.0.0.1:9 "$atc" doctor 2>"$tmp/doctor.err")
code=$?
set -e
case "$code:$said" in
1:*"✓ job file: none yet"*"✗ server: cannot reach it"*) ;;
*)
    echo "wheel: FAILED: atc doctor from the wheel exited $code: $said $(cat "$tmp/doctor.err")" >&2
    exit 1
    ;;
esac
echo "wheel: ok: $got and atc doctor run from a fresh venv with no cargo or rustc on PATH" >&2
echo "$wheel"
