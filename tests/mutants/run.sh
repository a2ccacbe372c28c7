#!/usr/bin/env bash
# The simulation's mutants (issue 35): each patch here is one small, realistic bug in the
# delivery code. For each, this copies the tree, applies the patch, and runs the
# simulation's random search at its CI size (2,000 histories, seed 15; ATC_SIM_CASES and
# ATC_SIM_SEED change them). Every mutant must make the simulation fail: the script says
# what killed each (the first line of the failure) and exits 1 if one survived.
#
#   tests/mutants/run.sh              # all of them (about a minute each on 2 cores)
#   tests/mutants/run.sh 3 8          # the ones whose names start with 3 or 8
#
# Not part of CI (it takes long); TESTING.md gives the last result.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/atc-mutants.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
# One target directory for every mutant: only the mutated crate rebuilds.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target/mutants}"
export ATC_SIM_CASES="${ATC_SIM_CASES:-2000}"
export ATC_SIM_SEED="${ATC_SIM_SEED:-15}"

patches=()
for patch in "$root"/tests/mutants/*.patch; do
  name=$(basename "$patch" .patch)
  if [ $# -eq 0 ]; then
    patches+=("$patch")
  else
    for want in "$@"; do
      case "$name" in "$want"*) patches+=("$patch") ;; esac
    done
  fi
done
if [ ${#patches[@]} -eq 0 ]; then
  echo "mutants: no patch matches: $*" >&2
  exit 2
fi

survived=0
for patch in "${patches[@]}"; do
  name=$(basename "$patch" .patch)
  tree="$scratch/tree"
  rm -rf "$tree"
  mkdir -p "$tree"
  # The working tree as it is (uncommitted changes included), without build output.
  tar -C "$root" --exclude=./target --exclude=./.git -cf - . | tar -C "$tree" -xf -
  if ! patch -s -d "$tree" -p1 <"$patch"; then
    echo "$name: the patch no longer applies: update it" >&2
    exit 2
  fi
  log="$scratch/$name.log"
  if (cd "$tree" && cargo test --release --test sim random_histories_keep_every_promise -- --nocapture) >"$log" 2>&1; then
    echo "$name: SURVIVED (the simulation passed with it)"
    survived=$((survived + 1))
  elif grep -q "could not compile" "$log"; then
    echo "$name: does not compile: update it" >&2
    grep -m5 "^error" "$log" >&2
    exit 2
  else
    why=$(grep -m1 -o "a history broke a promise: .*\|reached these fewer than .*" "$log" || echo "failed (see the log)")
    echo "$name: killed: $why"
  fi
done
if [ "$survived" -gt 0 ]; then
  echo "mutants: $survived of ${#patches[@]} survived the simulation" >&2
  exit 1
fi
echo "mutants: all ${#patches[@]} killed by the simulation ($ATC_SIM_CASES histories, seed $ATC_SIM_SEED)"
