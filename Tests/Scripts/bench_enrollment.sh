#!/usr/bin/env bash
# Enrollment benchmark (`make bench-enrollment`): wall time of `fit` from the builtin base for
# 100 synthetic users x 25 crops (cold embedding cache), then again after one more user has
# enrolled (warm cache: only the new user's crops are embedded), next to a from-scratch fit.
# BASE=DIR times another base instead of the builtin one; SCRATCH=no skips the from-scratch fit.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-.build/release/facetrain}
WORK=${WORK:-.build/bench/enrollment}
BASE=${BASE:-builtin}
SCRATCH=${SCRATCH:-yes}
rm -rf "$WORK" && mkdir -p "$WORK"
"$BIN" synth --out "$WORK/data" --users 101 --per-user 25 --seed 11 > /dev/null
# The 101st user enrolls later; `synth` numbers users 3..103.
mv "$WORK/data/103" "$WORK/later-103"
python3 - "$WORK/data/users.json" "$WORK/later-users.json" <<'PY'
import json, sys
users = json.load(open(sys.argv[1]))
json.dump([u for u in users if u["id"] != 103], open(sys.argv[1], "w"))
json.dump([u for u in users if u["id"] == 103], open(sys.argv[2], "w"))
PY
seconds() { local start; start=$(date +%s.%N); "$@" > /dev/null; echo "$(date +%s.%N) - $start" | bc; }
cold=$(seconds "$BIN" fit --data "$WORK/data" --out "$WORK/models" --base "$BASE")
mv "$WORK/later-103" "$WORK/data/103"
python3 - "$WORK/data/users.json" "$WORK/later-users.json" <<'PY'
import json, sys
json.dump(json.load(open(sys.argv[1])) + json.load(open(sys.argv[2])), open(sys.argv[1], "w"))
PY
warm=$(seconds "$BIN" fit --data "$WORK/data" --out "$WORK/models" --base "$BASE")
[ "$SCRATCH" = no ] || scratch=$(seconds "$BIN" fit --data "$WORK/data" --out "$WORK/models" --base none)
cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | xargs)
echo "| fit of 100 users x 25 crops | seconds |"
echo "| --- | --- |"
printf "| from the base (%s), cold embedding cache | %.1f |\n" "$BASE" "$cold"
printf "| one more user enrolled (101 users, warm cache) | %.1f |\n" "$warm"
[ "$SCRATCH" = no ] || printf "| --base none (ref-small from scratch, 90 epochs) | %.1f |\n" "$scratch"
echo "($(nproc) cores of $cpu; $("$BIN" --version | sed -n 2p))"
