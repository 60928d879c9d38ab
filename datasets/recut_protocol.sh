#!/usr/bin/env bash
# Re-cuts the face crops of a protocol folder (make_protocol.py's train/ and test/) in place with
# `facetrain crop`: every image of a user or of class 2 becomes its face aligned by the detector's
# 5 landmarks (the alignment study of docs/design/detector.md, section 5). Class 1 (not a face) is
# left alone, as the face check leaves it. A crop the detector refuses keeps its original image and
# is counted; file names (and formats) stay, so score.py matches rows as before.
# Usage: datasets/recut_protocol.sh DIR [CROP OPTIONS...]   (default: --pad 0.25 --template celeba96 --size 96)
set -euo pipefail
dir=${1:?usage: recut_protocol.sh DIR [CROP OPTIONS...]}
shift
bin=${BIN:-.build/release/facetrain}
options=("$@")
[ ${#options[@]} -gt 0 ] || options=(--pad 0.25 --template celeba96 --size 96)
for part in train test; do
  [ -d "$dir/$part" ] || { echo "recut_protocol: $dir/$part not found (a make_protocol.py folder?)" >&2; exit 1; }
done
work=$dir.recut
rm -rf "$work"
mkdir -p "$work"
for part in train test; do
  for class in "$dir/$part"/*/; do
    label=$(basename "$class")
    [ "$label" != 1 ] || continue
    "$bin" crop --in "$class" --out "$work/$part/$label" --json "${options[@]}" > "$work/$part-$label.jsonl" 2> /dev/null || true
  done
done
python3 - "$dir" "$work" <<'PY'
import glob, json, os, sys
from PIL import Image
root, work = sys.argv[1:3]
cut = kept = 0
for log in sorted(glob.glob(os.path.join(work, "*.jsonl"))):
    part, label = os.path.basename(log)[:-len(".jsonl")].split("-", 1)
    for line in open(log):
        row = json.loads(line)
        if not row.get("crops"):
            kept += 1
            continue
        original = os.path.join(root, part, label, row["file"])
        crop = Image.open(os.path.join(work, part, label, row["crops"][0]["file"]))
        crop.load()
        # The original's name and format: the scorer matches rows by file name.
        crop.convert("L" if Image.open(original).mode == "L" else "RGB").save(original, Image.open(original).format)
        cut += 1
print(f"{root}: {cut} face crops re-cut, {kept} kept as they were (the detector refused them)")
PY
rm -rf "$work"
