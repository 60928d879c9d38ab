#!/usr/bin/env bash
# `make quality`: the app-like protocols of ../shared/eval on ORL and CS131, end to end
# (split, fit with defaults, eval, score), printed next to the baselines of quality-anchors.md.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED:-../shared}
OUT=${OUT:-.build/quality}
BIN=${BIN:-.build/release/facetrain}
PROTOCOLS=${PROTOCOLS:-orl cs131}
[ -d "$SHARED/eval" ] || { echo "quality: $SHARED/eval not found (set SHARED=path/to/shared)" >&2; exit 1; }
python3 -c "import skimage, PIL, numpy" 2>/dev/null || python3 -m pip install -q scikit-image pillow numpy

mkdir -p "$OUT"
for protocol in $PROTOCOLS; do
  case $protocol in
    orl) collection=$SHARED/datasets/orl_faces ;;
    cs131) collection=$SHARED/datasets/cs131_celebrity_faces ;;
    *) echo "quality: unknown protocol $protocol" >&2; exit 1 ;;
  esac
  dir=$OUT/$protocol
  rm -rf "$dir"
  python3 "$SHARED/eval/make_protocol.py" "$collection" "$dir" --protocol "$protocol" > "$OUT/$protocol.protocol.log"
  start=$(date +%s)
  bundle=$("$BIN" fit --data "$dir/train" --out "$dir/models" ${FIT_ARGS:-} | tail -n 1)
  seconds=$(( $(date +%s) - start ))
  "$BIN" eval --model "$bundle" --data "$dir/test" --predictions "$dir/predictions.csv" --json > "$dir/eval.json"
  threshold=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['threshold'])" "$dir/eval.json")
  python3 "$SHARED/eval/score.py" "$dir/predictions.csv" --protocol "$dir" --out "$dir/score-argmax.json" > /dev/null
  python3 "$SHARED/eval/score.py" "$dir/predictions.csv" --protocol "$dir" --threshold "$threshold" --out "$dir/score-threshold.json" > /dev/null
  echo "$seconds" > "$dir/fit-seconds"
done

python3 - "$OUT" $PROTOCOLS <<'PY'
import json, os, sys
out, protocols = sys.argv[1], sys.argv[2:]
baselines = {
    "orl": [("LBPH", .967, .780, .030), ("Eigenfaces+SVM", .911, .120, .010), ("PyTorch same CNN", 1.0, .620, .010),
            ("PyTorch + threshold 0.5", .967, .040, .000)],
    "cs131": [("LBPH", .408, .775, .040), ("Eigenfaces+SVM", .350, .467, .040), ("PyTorch same CNN", .642, .633, .020),
              ("PyTorch + threshold 0.5", .492, .125, .000)],
}
print("| protocol | method | user_accuracy | unknown_far | nonface_far |")
print("| --- | --- | --- | --- | --- |")
for p in protocols:
    d = os.path.join(out, p)
    a = json.load(open(os.path.join(d, "score-argmax.json")))
    t = json.load(open(os.path.join(d, "score-threshold.json")))
    secs = open(os.path.join(d, "fit-seconds")).read().strip()
    for name, ua, uf, nf in baselines[p]:
        print(f"| {p} | {name} | {ua:.3f} | {uf:.3f} | {nf:.3f} |")
    print(f"| {p} | **facetrain, argmax** (fit {secs} s) | {a['user_accuracy']:.3f} | {a['unknown_far']:.3f} | {a['nonface_far']:.3f} |")
    print(f"| {p} | **facetrain, threshold {t['threshold']:.2f}** | {t['user_accuracy']:.3f} | {t['unknown_far']:.3f} | {t['nonface_far']:.3f} |")
PY
