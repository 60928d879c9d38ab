#!/usr/bin/env bash
# `make quality-face-check`: how often the face check (what fit, data check and the server's upload
# apply) refuses real face crops and takes non-face patches for faces, on the app-like protocols of
# ../shared/eval (orl, cs131, celeba: train and test folders; class 1 = make_negatives.py patches,
# class 2 and users = real crops) and on the demo's synthetic users as drawn (synth's --face-check
# off: by default synth draws a refused face again). Prints one row per set.
# FACE_CHECK_ARGS goes to `facetrain face-check` (e.g. "--detector DIR --face-score 0.5").
set -euo pipefail
cd "$(dirname "$0")/../.."
SHARED=${SHARED:-../shared}
OUT=${OUT:-.build/face-check}
BIN=${BIN:-.build/release/facetrain}
PROTOCOLS=${PROTOCOLS:-orl cs131 celeba}
[ -d "$SHARED/eval" ] || { echo "face_check_rates: $SHARED/eval not found (set SHARED=path/to/shared)" >&2; exit 1; }
python3 -c "import skimage, PIL, numpy" 2>/dev/null || python3 -m pip install -q scikit-image pillow numpy
source datasets/protocols.sh
mkdir -p "$OUT"
sets=()
for protocol in $PROTOCOLS; do
  collection=$(protocol_collection "$SHARED" "$protocol")
  [ -d "$OUT/$protocol" ] || python3 "$SHARED/eval/make_protocol.py" "$collection" "$OUT/$protocol" \
    --protocol "$protocol" > "$OUT/$protocol.protocol.log"
  sets+=("$OUT/$protocol")
done
[ -d "$OUT/demo" ] || "$BIN" synth --out "$OUT/demo" --users 20 --per-user 25 --seed 1 \
  --face-check off > /dev/null
sets+=("$OUT/demo")
# shellcheck disable=SC2086 # FACE_CHECK_ARGS is a list of options
"$BIN" face-check --json ${FACE_CHECK_ARGS:-} "${sets[@]}" > "$OUT/verdicts.jsonl" 2> /dev/null || true
python3 - "$OUT/verdicts.jsonl" "$OUT" <<'PY'
import collections, json, os, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
root = os.path.normpath(sys.argv[2])
groups = collections.defaultdict(list)
for row in rows:
    relative = os.path.relpath(row["file"], root).split(os.sep)
    groups[(relative[0], "non-face patches (class 1)" if relative[-2] == "1" else "face crops")].append(row)
print(f"{'set':8} {'images':28} {'n':>6} {'passed':>8}  refusals")
for (name, kind), members in sorted(groups.items()):
    passed = sum(row["accepted"] for row in members)
    reasons = collections.Counter(row["refusal"] for row in members if not row["accepted"])
    detail = ", ".join(f"{reason} {count}" for reason, count in sorted(reasons.items()))
    print(f"{name:8} {kind:28} {len(members):6d} {passed / len(members):8.3f}  {detail}")
PY
