#!/usr/bin/env bash
# Makes sure a headless Chromium is available for atc's console scenarios (the plugin's
# frontend in a real browser) and prints its path as the last line on stdout.
#
# ATC_E2E_CHROMIUM names one to use (any Chromium or Chrome build). Otherwise Debian's
# `chromium-headless-shell` (Chromium's headless-only build, no display needed) is used,
# and installed with apt-get when it is missing; where a distribution lacks that package,
# its `chromium` is the nearest thing (run with --headless). Needs root (or passwordless
# sudo) the first time; fails, never skips, without it.
set -euo pipefail

say() { printf 'provision-browser: %s\n' "$*" >&2; }
die() { printf 'provision-browser: FAILED: %s\n' "$*" >&2; exit 1; }

if [ -n "${ATC_E2E_CHROMIUM:-}" ]; then
    [ -x "$ATC_E2E_CHROMIUM" ] || die "ATC_E2E_CHROMIUM=$ATC_E2E_CHROMIUM is not an executable file"
    printf '%s\n' "$ATC_E2E_CHROMIUM"
    exit 0
fi

find_browser() {
    local name
    for name in chromium-headless-shell chromium; do
        if command -v "$name" 2>/dev/null; then
            return 0
        fi
    done
    return 1
}

if path=$(find_browser); then
    printf '%s\n' "$path"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
else
    die "no headless Chromium here and this user cannot install one (apt-get install chromium-headless-shell as root once, or set ATC_E2E_CHROMIUM)"
fi
command -v apt-get >/dev/null 2>&1 || die "no headless Chromium here and no apt-get; install Chromium and set ATC_E2E_CHROMIUM to it"

export DEBIAN_FRONTEND=noninteractive
# The package this distribution has: chromium-headless-shell (Debian 12 and later), else
# chromium.
candidate() {
    apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ { print $2 }'
}
pick() {
    local name
    for name in chromium-headless-shell chromium; do
        case "$(candidate "$name")" in
            "" | "(none)") ;;
            *) printf '%s\n' "$name"; return 0 ;;
        esac
    done
    return 1
}
if ! package=$(pick); then
    say "package lists are stale; apt-get update first"
    "${as_root[@]}" apt-get update -q >/dev/null 2>&1 || die "apt-get update failed"
    package=$(pick) || die "this distribution has neither chromium-headless-shell nor chromium; install Chromium and set ATC_E2E_CHROMIUM to it"
fi
say "installing the distribution's $package (first time: ~15–40 s)"
if ! "${as_root[@]}" apt-get install -y -q --no-install-recommends "$package" >/dev/null 2>&1; then
    say "package lists are stale; apt-get update first"
    "${as_root[@]}" apt-get update -q >/dev/null 2>&1 || die "apt-get update failed"
    "${as_root[@]}" apt-get install -y -q --no-install-recommends "$package" >/dev/null 2>&1 ||
        die "apt-get install $package failed"
fi
path=$(find_browser) || die "$package installed but no chromium-headless-shell or chromium on PATH"
say "ready: $path"
printf '%s\n' "$path"
