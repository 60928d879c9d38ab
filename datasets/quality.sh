#!/usr/bin/env bash
# `make quality`: the app-like protocols of ../shared/eval on CelebA, CS131 and ORL, end to end
# (split, fit, eval, score), printed next to the baselines of quality-anchors.md. Every protocol
# is fitted from each base of BASES ("builtin": the shipped pretrained extractor; "none": from
# scratch), so the table shows what the base changes.
# Every protocol is fitted with each seed of SEEDS: on ~25 crops a person the seed alone moves
# user accuracy by several points, so one run says little about a change.
# RECUT="crop options" re-cuts every protocol's face crops with `facetrain crop` first
# (datasets/recut_protocol.sh): RECUT="--pad 0.25 --template celeba96 --size 96" aligns them.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED:-../shared}
OUT=${OUT:-.build/quality}
BIN=${BIN:-.build/release/facetrain}
PROTOCOLS=${PROTOCOLS:-celeba cs131 orl}
SEEDS=${SEEDS:-1 2 3}
BASES=${BASES:-builtin none}
[ -d "$SHARED/eval" ] || { echo "quality: $SHARED/eval not found (set SHARED=path/to/shared)" >&2; exit 1; }
[ -n "${SEEDS// /}" ] || { echo "quality: SEEDS is empty (e.g. SEEDS=\"1 2 3\")" >&2; exit 1; }
case " ${FIT_ARGS:-} " in
  *" --seed"* | *" --out"* | *" --data"* | *" --base"*)
    echo "quality: FIT_ARGS must not set --seed, --out, --data or --base (use SEEDS, OUT and BASES)" >&2; exit 1 ;;
esac
python3 -c "import skimage, PIL, numpy" 2>/dev/null || python3 -m pip install -q scikit-image pillow numpy

source datasets/protocols.sh
mkdir -p "$OUT"
for protocol in $PROTOCOLS; do
  collection=$(protocol_collection "$SHARED" "$protocol")
  dir=$OUT/$protocol
  rm -rf "$dir"
  python3 "$SHARED/eval/make_protocol.py" "$collection" "$dir" --protocol "$protocol" > "$OUT/$protocol.protocol.log"
  # shellcheck disable=SC2086  # RECUT is a list of options
  [ -z "${RECUT:-}" ] || BIN=$BIN bash datasets/recut_protocol.sh "$dir" $RECUT | tee -a "$OUT/$protocol.protocol.log"
  for base in $BASES; do for seed in $SEEDS; do
    run=$dir/$(basename "$base")-seed-$seed
    mkdir -p "$run"
    start=$(date +%s)
    # The protocols are scored on their fixed splits, as recorded, so without the face check (on by
    # default, it refuses 2 of ORL's 400 crops and would stop the fit).
    # shellcheck disable=SC2086  # FIT_ARGS is a list of options
    bundle=$("$BIN" fit --data "$dir/train" --out "$run/models" --seed "$seed" --base "$base" \
      --face-check off ${FIT_ARGS:-} | tail -n 1)
    echo $(( $(date +%s) - start )) > "$run/fit-seconds"
    "$BIN" eval --model "$bundle" --data "$dir/test" --predictions "$run/predictions.csv" --json > "$run/eval.json"
    threshold=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['threshold'])" "$run/eval.json")
    python3 "$SHARED/eval/score.py" "$run/predictions.csv" --protocol "$dir" --out "$run/score-argmax.json" > /dev/null
    python3 "$SHARED/eval/score.py" "$run/predictions.csv" --protocol "$dir" --threshold "$threshold" \
      --out "$run/score-threshold.json" > /dev/null
  done; done
done

python3 - "$OUT" "$PROTOCOLS" "$SEEDS" "$BASES" <<'PY'
import csv, json, os, statistics, sys
out, protocols, seeds, bases = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4].split()
baselines = {
    "orl": [("LBPH", .967, .780, .030), ("Eigenfaces+SVM", .911, .120, .010), ("PyTorch same CNN", 1.0, .620, .010),
            ("PyTorch + threshold 0.5", .967, .040, .000)],
    "cs131": [("LBPH", .408, .775, .040), ("Eigenfaces+SVM", .350, .467, .040), ("PyTorch same CNN", .642, .633, .020),
              ("PyTorch + threshold 0.5", .492, .125, .000)],
    "celeba": [],
}

def best_on_test(path, far_cap=0.05):
    """User accuracy at the test threshold that accepts at most far_cap of the unseen strangers: what a
    perfectly calibrated threshold could reach, so a shortfall is the network's, not the calibration's."""
    rows = list(csv.DictReader(open(path)))
    def is_user(label): return label not in ("1", "2")
    users = [r for r in rows if is_user(r["true_label"])]
    strangers = [r for r in rows if r["true_label"] == "2"]
    if not users or not strangers:
        return float("nan")
    best = 0.0
    for t in sorted({float(r["confidence"]) for r in rows} | {2.0}):
        accepted = lambda r: is_user(r["predicted_label"]) and float(r["confidence"]) >= t
        if sum(map(accepted, strangers)) <= far_cap * len(strangers):
            best = max(best, sum(accepted(r) and r["predicted_label"] == r["true_label"] for r in users) / len(users))
    return best

def summary(values):
    if len(values) == 1: return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ({min(values):.3f}-{max(values):.3f})"

print(f"facetrain rows: mean (min-max) over seeds {' '.join(seeds)}\n")
print("| protocol | method | user_accuracy | unknown_far | nonface_far |")
print("| --- | --- | --- | --- | --- |")
for p in protocols:
    for name, ua, uf, nf in baselines[p]:
        print(f"| {p} | {name} | {ua:.3f} | {uf:.3f} | {nf:.3f} |")
    for base in bases:
        runs = [os.path.join(out, p, f"{os.path.basename(base)}-seed-{s}") for s in seeds]
        argmax = [json.load(open(os.path.join(r, "score-argmax.json"))) for r in runs]
        chosen = [json.load(open(os.path.join(r, "score-threshold.json"))) for r in runs]
        seconds = [int(open(os.path.join(r, "fit-seconds")).read()) for r in runs]
        oracle = [best_on_test(os.path.join(r, "predictions.csv")) for r in runs]
        def row(name, scores):
            cells = " | ".join(summary([s[k] for s in scores]) for k in ("user_accuracy", "unknown_far", "nonface_far"))
            print(f"| {p} | {name} | {cells} |")
        row(f"**--base {base}, argmax** (fit {statistics.mean(seconds):.0f} s)", argmax)
        thresholds = "/".join(f"{s['threshold']:.2f}" for s in chosen)
        row(f"**--base {base}, chosen threshold** ({thresholds})", chosen)
        print(f"| {p} | --base {base}, best test threshold with unknown_far <= 0.05 | {summary(oracle)} | <= 0.050 | |")
PY
