#!/usr/bin/env bash
# `make bench-detect`: the face detector on the `dev` photos of faces_in_photos (SHARED/datasets/
# faces_in_photos, research-only; see datasets/README.md): per-photo milliseconds (letterbox,
# network, decoding, NMS; the photo already decoded) with the photos shared among the cores, and the
# scorer's figures (shared/eval/score_detection.py: AP, recall at 1 false positive per photo,
# landmark error at --threshold 0.9 as the peers were measured). When Python's cv2 is importable
# and YUNET_MODEL names OpenCV's YuNet ONNX file, YuNet runs on the same photos in the same run.
# DETECTOR (default builtin) picks the detector. A benchmark, not a test: the figures depend on the
# machine and on what else runs on it.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-.build/release/facetrain}
SHARED=${SHARED:-../shared}
DETECTOR=${DETECTOR:-builtin}
SET="$SHARED/datasets/faces_in_photos"
SCORER="$SHARED/eval/score_detection.py"
if [ ! -f "$SET/annotations.jsonl" ] || [ ! -f "$SCORER" ]; then
    echo "bench-detect needs $SET (faces_in_photos) and $SCORER; set SHARED=/path to the folder holding them" >&2
    exit 1
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/facetrain-bench-detect-XXXXXX")
trap 'rm -rf "$WORK"' EXIT

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $("$BIN" --version | tail -n 1)"
"$BIN" detector eval --detector "$DETECTOR" --data "$SET" --split dev --predictions "$WORK/facetrain.jsonl" --json \
    > "$WORK/facetrain.json"
echo "facetrain ($DETECTOR): $(cat "$WORK/facetrain.json")"
python3 "$SCORER" --pred "$WORK/facetrain.jsonl" --gt "$SET/annotations.jsonl" --splits "$SET/splits.json" \
    --split dev --threshold 0.9 --out "$WORK/facetrain-score.json" > /dev/null
python3 - "$WORK/facetrain-score.json" <<'PY'
import json, sys
score = json.load(open(sys.argv[1]))
for name in ("easy_medium", "all"):
    c = score[name]
    nme = c.get("nme") or {}
    print(f"  {name}: AP {c['ap']:.4f}  recall@1FPPI {c['recall_at_1fppi']:.4f}  "
          f"at 0.9: recall {c['at_threshold']['recall']:.3f}  NME mean {nme.get('mean', float('nan')):.3f} "
          f"median {nme.get('median', float('nan')):.3f} (n={nme.get('count', 0)})")
PY

# OpenCV's Haar cascade (the frontal default shipped inside cv2, one of the README's peers) needs no
# download: it runs whenever cv2 has it (OpenCV 4; 5 dropped it), one thread, as facetrain's median is
# one core's.
if python3 -c "import cv2; cv2.CascadeClassifier" 2>/dev/null; then
    python3 - "$SET" "$WORK/haar.jsonl" <<'PY'
import json, statistics, sys, time
import cv2
root, out = sys.argv[1:]
cv2.setNumThreads(1)
files = json.load(open(f"{root}/splits.json"))["dev"]
cascade = cv2.CascadeClassifier(cv2.data.haarcascades + "haarcascade_frontalface_default.xml")
times = []
with open(out, "w") as lines:
    for file in files:
        grey = cv2.cvtColor(cv2.imread(f"{root}/{file}"), cv2.COLOR_BGR2GRAY)
        start = time.perf_counter()
        boxes, _, weights = cascade.detectMultiScale3(grey, scaleFactor=1.1, minNeighbors=3, outputRejectLevels=True)
        times.append(time.perf_counter() - start)
        found = [{"box": [float(v) for v in box], "score": float(weight)} for box, weight in zip(boxes, weights)]
        lines.write(json.dumps({"file": file, "faces": found}) + "\n")
print(f"OpenCV Haar (cv2 {cv2.__version__}, frontal default, one thread): ms per photo median "
      f"{1000 * statistics.median(times):.1f}")
PY
    python3 "$SCORER" --pred "$WORK/haar.jsonl" --gt "$SET/annotations.jsonl" --splits "$SET/splits.json" \
        --split dev --out "$WORK/haar-score.json" > /dev/null
    python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print('  easy_medium AP %.4f, all AP %.4f' % (s['easy_medium']['ap'], s['all']['ap']))" "$WORK/haar-score.json"
else
    echo "OpenCV Haar: not run (needs Python's cv2 with CascadeClassifier: pip install 'opencv-python-headless<5')"
fi

if python3 -c "import cv2" 2>/dev/null && [ -n "${YUNET_MODEL:-}" ] && [ -f "${YUNET_MODEL:-}" ]; then
    python3 - "$SET" "$YUNET_MODEL" "$WORK/yunet.jsonl" <<'PY'
import json, statistics, sys, time
import cv2
root, model, out = sys.argv[1:]
cv2.setNumThreads(2)
files = json.load(open(f"{root}/splits.json"))["dev"]
detector = cv2.FaceDetectorYN.create(model, "", (320, 320), 0.02, 0.45, 5000)
times = []
with open(out, "w") as lines:
    for file in files:
        image = cv2.imread(f"{root}/{file}")
        detector.setInputSize((image.shape[1], image.shape[0]))
        start = time.perf_counter()
        _, faces = detector.detect(image)
        times.append(time.perf_counter() - start)
        found = []
        for face in faces if faces is not None else []:
            points = [[float(face[4 + 2 * k]), float(face[5 + 2 * k])] for k in range(5)]
            found.append({"box": [float(v) for v in face[:4]], "score": float(face[14]), "landmarks5": points})
        lines.write(json.dumps({"file": file, "faces": found}) + "\n")
print(f"YuNet (OpenCV {cv2.__version__}): ms per photo median {1000 * statistics.median(times):.1f}")
PY
    python3 "$SCORER" --pred "$WORK/yunet.jsonl" --gt "$SET/annotations.jsonl" --splits "$SET/splits.json" \
        --split dev --threshold 0.9 | python3 -c "import json,sys; s=json.load(sys.stdin); print('  easy_medium AP %.4f, all AP %.4f' % (s['easy_medium']['ap'], s['all']['ap']))"
else
    echo "YuNet: not run (needs Python's cv2 and YUNET_MODEL=<face_detection_yunet .onnx>); the figures of"
    echo "  faces_in_photos' README (YuNet-n 18 ms per photo, AP 0.962 / 0.877) were measured on a 2-core machine of this project"
fi
