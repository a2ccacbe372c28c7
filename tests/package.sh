#!/usr/bin/env bash
# The crate as crates.io gets it: `cargo package` holds everything the binary embeds
# (include_str! of the plugin, its manifest and the skill), and `cargo publish --dry-run`
# passes (it builds the packaged crate on its own). --allow-dirty only outside CI, where
# a work tree may hold uncommitted edits.
set -euo pipefail
cd "$(dirname "$0")/.."
dirty=()
[ -n "${CI:-}" ] || dirty=(--allow-dirty)
list=$(cargo package --locked --list "${dirty[@]}")
missing=0
for embedded in $(grep -ho 'include_str!("[^"]*")' src/*.rs src/*/*.rs | sed 's/include_str!("\(.*\)")/\1/' | sort -u); do
    # Paths are relative to the file that embeds them, all under src/: normalise.
    path=$(realpath -m --relative-to=. "src/$embedded")
    if ! grep -qx "$path" <<<"$list"; then
        echo "package: FAILED: the binary embeds $path, which cargo package leaves out" >&2
        missing=1
    fi
done
[ "$missing" -eq 0 ] || exit 1
cargo publish --dry-run --locked "${dirty[@]}" >/dev/null 2>"${TMPDIR:-/tmp}/atc-publish.log" || {
    tail -n 30 "${TMPDIR:-/tmp}/atc-publish.log" >&2
    echo "package: FAILED: cargo publish --dry-run" >&2
    exit 1
}
echo "package: ok: $(wc -l <<<"$list") files, every embedded one among them; cargo publish --dry-run passes" >&2
