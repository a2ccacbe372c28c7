#!/usr/bin/env bash
# Makes sure fish is here for the fast suite: tests/it/docs/generated.rs loads the committed
# completions in fish and asks it to complete every command (a completion that errors on
# the first `atc <TAB>` fails the suite, never skips it). Debian's fish is installed with
# apt-get when it is missing; needs root (or passwordless sudo) the first time, and fails,
# never skips, without it. Prints the path of `fish` as the last line on stdout.
set -euo pipefail

say() { printf 'provision-shells: %s\n' "$*" >&2; }
die() { printf 'provision-shells: FAILED: %s\n' "$*" >&2; exit 1; }

if path=$(command -v fish 2>/dev/null); then
    printf '%s\n' "$path"
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
    as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
else
    die "fish is not installed and this user cannot install it (apt-get install fish as root once; brew install fish on macOS)"
fi
command -v apt-get >/dev/null 2>&1 || die "fish is not installed and there is no apt-get here; install the fish shell"
say "installing Debian's fish (first time: ~20 s)"
export DEBIAN_FRONTEND=noninteractive
if ! "${as_root[@]}" apt-get install -y -q --no-install-recommends fish >/dev/null 2>&1; then
    say "package lists are stale; apt-get update first"
    "${as_root[@]}" apt-get update -q >/dev/null 2>&1 || die "apt-get update failed"
    "${as_root[@]}" apt-get install -y -q --no-install-recommends fish >/dev/null 2>&1 ||
        die "apt-get install fish failed"
fi
command -v fish || die "fish was installed but is not on PATH"
