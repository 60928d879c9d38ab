#!/usr/bin/env bash
# `make bench-inference`: facetrain's inference against onnxruntime's on the same network, side by
# side in one run (issue #34): the builtin base's extractor (ref-deep-gdc, width 32, 80 px) as
# `facetrain bench` runs it (random weights), and onnxruntime on the model.onnx of a bundle fitted
# from the builtin base (the same extractor and its small head; its 88-px input is cropped to 80
# inside the graph). Batch-64 throughput and batch-1 latency (median, p99), ROUNDS interleaved
# rounds (3), 2 threads each, the CPU, the BLAS kernel and the engine's vector kernels named.
# When the environment sets OPENBLAS_CORETYPE, facetrain also runs without it (the binary's own
# choice); on a CPU with AVX-512, also with FACETRAIN_VECTOR_KERNELS=portable (the Swift kernels).
# Then the builtin detector's network on 640x480 photos (`facetrain detector bench` against
# onnxruntime on `facetrain detector export`'s file): batch-16 throughput and batch-1 latency.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-.build/release/facetrain}
ROUNDS=${ROUNDS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-3}
OUT=.build/bench-inference
mkdir -p "$OUT"
if ! python3 -c "import onnxruntime" 2>/dev/null; then
  echo "onnxruntime is not importable: run 'make pydeps' (Tests/Scripts/requirements.txt)" >&2
  exit 1
fi
if [ ! -f "$OUT/models/1/model.onnx" ]; then
  rm -rf "$OUT/users" "$OUT/models"
  "$BIN" synth --out "$OUT/users" --users 5 --per-user 10 > "$OUT/synth.log"
  "$BIN" fit --data "$OUT/users" --out "$OUT/models" > "$OUT/fit.log" 2>&1
fi
variants=("default")
if [ -n "${OPENBLAS_CORETYPE:-}" ]; then variants+=("own-kernel"); fi
# The Swift kernels beside the AVX-512 ones, where the CPU has them (the same binary).
if grep -qw avx512f /proc/cpuinfo; then variants+=("portable"); fi
for round in $(seq 1 "$ROUNDS"); do
  for variant in "${variants[@]}"; do
    launcher=(env)
    [ "$variant" = own-kernel ] && launcher=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)
    [ "$variant" = portable ] && launcher=(env FACETRAIN_VECTOR_KERNELS=portable)
    "${launcher[@]}" "$BIN" bench --architecture ref-deep-gdc --width 32 --input-size 80 --steps 20 \
      --latency-seconds "$SECONDS_PER_RUN" --json > "$OUT/facetrain-$variant.$round.json"
  done
  python3 Tests/Scripts/onnx_inference.py --model "$OUT/models/1/model.onnx" --threads 2 \
    --seconds "$SECONDS_PER_RUN" > "$OUT/onnxruntime.$round.json"
  echo "round $round done"
done
"$BIN" detector export --out "$OUT/detector.onnx" > /dev/null
for round in $(seq 1 "$ROUNDS"); do
  for variant in "${variants[@]}"; do
    launcher=(env)
    [ "$variant" = own-kernel ] && launcher=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)
    [ "$variant" = portable ] && launcher=(env FACETRAIN_VECTOR_KERNELS=portable)
    "${launcher[@]}" "$BIN" detector bench --size 640x480 --batch-size 16 --seconds "$SECONDS_PER_RUN" --json \
      > "$OUT/detector-facetrain-$variant.$round.json"
  done
  python3 Tests/Scripts/onnx_inference.py --model "$OUT/detector.onnx" --threads 2 --batch 16 --height 480 \
    --width 640 --seconds "$SECONDS_PER_RUN" > "$OUT/detector-onnxruntime.$round.json"
  echo "detector round $round done"
done
python3 - "$ROUNDS" "${variants[@]}" <<'PY'
import json, statistics, sys
rounds, variants = int(sys.argv[1]), sys.argv[2:]
out = ".build/bench-inference"
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown CPU")
flags = next((l.split(":", 1)[1].split() for l in open("/proc/cpuinfo") if l.startswith("flags")), [])
isa = "AVX-512" if "avx512f" in flags else ("AVX2" if "avx2" in flags else "SSE")
med = statistics.median


def table(title, prefix, batch):
    ort = [json.load(open(f"{out}/{prefix}onnxruntime.{r}.json")) for r in range(1, rounds + 1)]
    o_throughput = med(x["images_per_second"] for x in ort)
    o_p50, o_p99 = med(x["latency_batch1_ms"] for x in ort), med(x["latency_batch1_p99_ms"] for x in ort)
    print(f"\n{title}; {cpu} ({isa}), {rounds} interleaved rounds, medians; "
          f"onnxruntime {ort[0]['onnxruntime']}, {ort[0]['threads']} threads")
    print(f"| run | batch {batch} img/s | ratio | batch 1 p50 ms | batch 1 p99 ms | p50 ratio |")
    print("| --- | --- | --- | --- | --- | --- |")
    print(f"| onnxruntime | {o_throughput:.0f} | 1.00x | {o_p50:.2f} | {o_p99:.2f} | 1.00x |")
    for variant in variants:
        ft = [json.load(open(f"{out}/{prefix}facetrain-{variant}.{r}.json")) for r in range(1, rounds + 1)]
        throughput = med(x["inference_images_per_second"] for x in ft)
        p50, p99 = med(x["latency_batch1_ms"] for x in ft), med(x["latency_batch1_p99_ms"] for x in ft)
        name = f"facetrain ({ft[0]['blas_kernel']} BLAS, {ft[0]['vector_kernels']} kernels"
        name += ", environment's OPENBLAS_*)" if variant == "default" and "own-kernel" in variants else ")"
        print(f"| {name} | {throughput:.0f} | {throughput / o_throughput:.2f}x | {p50:.2f} | {p99:.2f} | "
              f"{p50 / o_p50:.2f}x |")


table("ref-deep-gdc width 32, 80 px (the builtin base's extractor)", "", 64)
table("the builtin detector's network, 640x480 photos", "detector-", 16)
print("\nIssue #34's targets: throughput >= 1.5x onnxruntime's, batch-1 latency at most onnxruntime's.")
PY
