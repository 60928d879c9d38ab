#!/usr/bin/env bash
# `make bench`: facetrain's training/inference benchmark, and PyTorch's reference on the same network
# in the same run when torch is importable (pip install torch), interleaved, with the ratios. (The
# reference lacks only the embedding's batch norm, a few hundred of ~92 million FLOP per image.)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-.build/release/facetrain}
SHARED=${SHARED:-../shared}
ROUNDS=${ROUNDS:-2}
mkdir -p .build/bench
torch=no
if python3 -c "import torch" 2>/dev/null && [ -f "$SHARED/bench/bench_torch.py" ]; then torch=yes; fi
for round in $(seq 1 "$ROUNDS"); do
  echo "== round $round: facetrain"
  "$BIN" bench
  "$BIN" bench --json > ".build/bench/facetrain.$round.json"
  if [ "$torch" = yes ]; then
    for layout in default channels-last; do
      flag=""; [ "$layout" = channels-last ] && flag="--channels-last"
      echo "== round $round: PyTorch ($layout)"
      python3 "$SHARED/bench/bench_torch.py" --threads 2 --batches 32 --runs 5 $flag | tee ".build/bench/torch-$layout.$round.txt" | grep -v '^{'
    done
  fi
done
if [ "$torch" = no ]; then
  echo "PyTorch is not importable: 'pip install torch' to compare against $SHARED/bench/bench_torch.py in the same run."
  exit 0
fi
python3 - "$ROUNDS" <<'PY'
import json, sys, statistics
rounds = int(sys.argv[1])
def last_json(path):
    return json.loads([l for l in open(path) if l.startswith("{")][-1])
ft = [json.load(open(f".build/bench/facetrain.{r}.json")) for r in range(1, rounds + 1)]
print("\n| metric | facetrain | PyTorch default | PyTorch channels-last | ratio to best PyTorch |")
print("| --- | --- | --- | --- | --- |")
torch = {l: [last_json(f".build/bench/torch-{l}.{r}.txt") for r in range(1, rounds + 1)] for l in ["default", "channels-last"]}
med = statistics.median
f_train = med(x["train_images_per_second"] for x in ft)
t_train = {l: med(x["train"]["32"]["img_s"] for x in v) for l, v in torch.items()}
print(f"| train img/s, batch 32 | {f_train:.0f} | {t_train['default']:.0f} | {t_train['channels-last']:.0f} | {f_train / max(t_train.values()):.2f}x |")
f_inf = med(x["inference_images_per_second"] for x in ft)
t_inf = {l: med(x["infer_img_s"] for x in v) for l, v in torch.items()}
print(f"| inference img/s, batch 64 | {f_inf:.0f} | {t_inf['default']:.0f} | {t_inf['channels-last']:.0f} | {f_inf / max(t_inf.values()):.2f}x |")
f_lat = med(x["latency_batch1_ms"] for x in ft)
t_lat = {l: med(x["latency_b1_ms"] for x in v) for l, v in torch.items()}
print(f"| latency ms, batch 1 | {f_lat:.2f} | {t_lat['default']:.2f} | {t_lat['channels-last']:.2f} | {min(t_lat.values()) / f_lat:.2f}x faster |")
print(f"| peak RSS MB | {med(x['peak_rss_mb'] for x in ft):.0f} | {med(x['peak_rss_mb'] for x in torch['default']):.0f} | {med(x['peak_rss_mb'] for x in torch['channels-last']):.0f} | |")
print(f"(medians of {rounds} interleaved rounds; BLAS kernel {ft[0]['blas_kernel']})")
PY
