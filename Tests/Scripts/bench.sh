#!/usr/bin/env bash
# `make bench`: facetrain's training/inference benchmark of each architecture in ARCHITECTURES, and
# PyTorch on the same network (Tests/Scripts/torch_architectures.py, checked to have the same
# parameter count) in the same run when torch is importable (pip install torch), interleaved, with
# the ratios per architecture. WIDTH (16), INPUT_SIZE (64), BATCH (32, training) and ROUNDS (2) as for
# `facetrain bench`; `WIDTH=32 INPUT_SIZE=80 BATCH=128 ARCHITECTURES=ref-deep-gdc` is the base's pretraining.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-.build/release/facetrain}
ROUNDS=${ROUNDS:-2}
WIDTH=${WIDTH:-16}
INPUT_SIZE=${INPUT_SIZE:-64}
BATCH=${BATCH:-32}
ARCHITECTURES=${ARCHITECTURES:-"ref-small ref-small-gdc ref-deep-gdc mobile-face"}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-3}
mkdir -p .build/bench
torch=no
if python3 -c "import torch" 2>/dev/null; then torch=yes; fi
"$BIN" architectures --json --width "$WIDTH" --input-size "$INPUT_SIZE" > .build/bench/architectures.json
for round in $(seq 1 "$ROUNDS"); do
  for architecture in $ARCHITECTURES; do
    echo "== round $round: facetrain $architecture"
    "$BIN" bench --architecture "$architecture" --width "$WIDTH" --input-size "$INPUT_SIZE" --batch-size "$BATCH" --json \
      > ".build/bench/facetrain-$architecture.$round.json"
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(f\"train {r['train_images_per_second']:.1f} img/s, inference {r['inference_images_per_second']:.1f} img/s, latency {r['latency_batch1_ms']:.2f} ms\")" ".build/bench/facetrain-$architecture.$round.json"
    if [ "$torch" = yes ]; then
      for layout in default channels-last; do
        flag=""; [ "$layout" = channels-last ] && flag="--channels-last"
        echo "== round $round: PyTorch $architecture ($layout)"
        python3 Tests/Scripts/torch_architectures.py --architecture "$architecture" --width "$WIDTH" --threads 2 \
          --input-size "$INPUT_SIZE" --batch "$BATCH" \
          --seconds "$SECONDS_PER_RUN" $flag | tee ".build/bench/torch-$architecture-$layout.$round.txt" | grep -v '^{'
      done
    fi
  done
done
if [ "$torch" = no ]; then
  echo "PyTorch is not importable: 'pip install torch' to compare against the same networks in the same run."
  exit 0
fi
python3 - "$ROUNDS" "$BATCH" $ARCHITECTURES <<'PY'
import json, sys, statistics
rounds, batch, architectures = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
med = statistics.median
listing = {entry["name"]: entry for entry in json.load(open(".build/bench/architectures.json"))}
def last_json(path):
    return json.loads([l for l in open(path) if l.startswith("{")][-1])
status = 0
for name in architectures:
    ft = [json.load(open(f".build/bench/facetrain-{name}.{r}.json")) for r in range(1, rounds + 1)]
    torch = {l: [last_json(f".build/bench/torch-{name}-{l}.{r}.txt") for r in range(1, rounds + 1)]
             for l in ["default", "channels-last"]}
    if torch["default"][0]["parameters"] != listing[name]["parameters"]:
        print(f"{name}: the PyTorch module has {torch['default'][0]['parameters']} parameters, facetrain "
              f"{listing[name]['parameters']}: not the same network, no comparison")
        status = 1
        continue
    print(f"\n{name} (width {listing[name]['width']}, {listing[name]['input_size']} px, {listing[name]['parameters']} parameters "
          f"in both, {listing[name]['training_mflop_per_image']:.1f} training MFLOP per image)")
    print("| metric | facetrain | PyTorch default | PyTorch channels-last | ratio to best PyTorch |")
    print("| --- | --- | --- | --- | --- |")
    f_train = med(x["train_images_per_second"] for x in ft)
    t_train = {l: med(x["train"][batch]["img_s"] for x in v) for l, v in torch.items()}
    print(f"| train img/s, batch {batch} | {f_train:.0f} | {t_train['default']:.0f} | {t_train['channels-last']:.0f} | "
          f"{f_train / max(t_train.values()):.2f}x |")
    f_inf = med(x["inference_images_per_second"] for x in ft)
    t_inf = {l: med(x["infer_img_s"] for x in v) for l, v in torch.items()}
    print(f"| inference img/s, batch 64 | {f_inf:.0f} | {t_inf['default']:.0f} | {t_inf['channels-last']:.0f} | "
          f"{f_inf / max(t_inf.values()):.2f}x |")
    f_lat = med(x["latency_batch1_ms"] for x in ft)
    t_lat = {l: med(x["latency_b1_ms"] for x in v) for l, v in torch.items()}
    print(f"| latency ms, batch 1 | {f_lat:.2f} | {t_lat['default']:.2f} | {t_lat['channels-last']:.2f} | "
          f"{min(t_lat.values()) / f_lat:.2f}x faster |")
    print(f"| peak RSS MB | {med(x['peak_rss_mb'] for x in ft):.0f} | "
          f"{med(x['peak_rss_mb'] for x in torch['default']):.0f} | "
          f"{med(x['peak_rss_mb'] for x in torch['channels-last']):.0f} | |")
print(f"(medians of {rounds} interleaved rounds; BLAS kernel {ft[0]['blas_kernel']})")
sys.exit(status)
PY
