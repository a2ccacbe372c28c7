#!/usr/bin/env bash
# Makes sure an MQTT broker is available for atc's IM-channel scenarios and prints the
# path of `mosquitto` as the last line on stdout.
#
# Debian's mosquitto (the broker the QwenPaw contract was probed with: it runs from a
# two-line config) is installed with apt-get when it is missing. The scenarios start it
# themselves, on a free loopback port, and stop it; the system service the package
# brings is stopped and disabled right after installing, so nothing is left running.
# Needs root (or passwordless sudo) the first time; fails, never skips, without it.
set -euo pipefail

say() { printf 'provision-broker: %s\n' "$*" >&2; }
die() { printf 'provision-broker: FAILED: %s\n' "$*" >&2; exit 1; }

find_broker() {
    command -v mosquitto 2>/dev/null || { [ -x /usr/sbin/mosquitto ] && echo /usr/sbin/mosquitto; }
}

if path=$(find_broker); then
    printf '%s\n' "$path"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
else
    die "mosquitto is not installed and this user cannot install it (apt-get install mosquitto as root once)"
fi
command -v apt-get >/dev/null 2>&1 || die "mosquitto is not installed and there is no apt-get here; install an MQTT broker named mosquitto"

say "installing Debian's mosquitto (first time: ~15 s)"
export DEBIAN_FRONTEND=noninteractive
if ! "${as_root[@]}" apt-get install -y -q --no-install-recommends mosquitto >/dev/null 2>&1; then
    say "package lists are stale; apt-get update first"
    "${as_root[@]}" apt-get update -q >/dev/null 2>&1 || die "apt-get update failed"
    "${as_root[@]}" apt-get install -y -q --no-install-recommends mosquitto >/dev/null 2>&1 ||
        die "apt-get install mosquitto failed"
fi
# The scenarios run their own broker; the packaged service must not stay running.
if command -v systemctl >/dev/null 2>&1; then
    "${as_root[@]}" systemctl disable --now mosquitto >/dev/null 2>&1 || true
fi
if command -v service >/dev/null 2>&1; then
    "${as_root[@]}" service mosquitto stop >/dev/null 2>&1 || true
fi
path=$(find_broker) || die "mosquitto installed but not found"
say "ready: $path"
printf '%s\n' "$path"
