#!/usr/bin/env bash
# The builtin detector's training set (`make detector`): faces_in_photos (WIDER FACE photos, read
# in place through symbolic links, never copied) plus SCENES synthetic photos from `facetrain synth
# --scenes` and CROP_SCENES canvases of face crops and non-face patches on grey (crop_scenes.py),
# all in the `train` split; `dev` stays faces_in_photos' own. The synthetic scenes teach the
# detector the drawn faces of `facetrain synth`; the crop scenes teach it what the face check
# shows it (one crop padded with grey) and that a lone texture patch is not a face.
# Usage: detector/training_set.sh SHARED OUT [SCENES] [SEED] [CROP_SCENES]
set -euo pipefail
shared=${1:?usage: training_set.sh SHARED OUT [SCENES] [SEED]}
out=${2:?usage: training_set.sh SHARED OUT [SCENES] [SEED]}
scenes=${3:-250}
seed=${4:-7}
crop_scenes=${5:-600}
bin=${BIN:-.build/release/facetrain}
photos=$shared/datasets/faces_in_photos
[ -f "$photos/annotations.jsonl" ] || { echo "training_set: $photos/annotations.jsonl not found" >&2; exit 1; }
photos=$(cd "$photos" && pwd)

rm -rf "$out" "$out.synthetic" "$out.crops"
"$bin" synth --scenes "$scenes" --seed "$seed" --dev-fraction 0 --out "$out.synthetic" > /dev/null
mkdir -p "$out/images"
for folder in "$photos"/images/*/; do ln -s "${folder%/}" "$out/images/$(basename "$folder")"; done
[ ! -e "$out/images/0--Synthetic" ] || { echo "training_set: faces_in_photos has a 0--Synthetic folder" >&2; exit 1; }
mv "$out.synthetic/images/0--Synthetic" "$out/images/0--Synthetic"
cat "$photos/annotations.jsonl" "$out.synthetic/annotations.jsonl" > "$out/annotations.jsonl"
python3 - "$photos/splits.json" "$out.synthetic/splits.json" "$out/splits.json" <<'PY'
import json, sys
photos, synthetic = (json.load(open(path)) for path in sys.argv[1:3])
json.dump({"train": photos["train"] + synthetic["train"], "dev": photos["dev"]}, open(sys.argv[3], "w"), indent=1)
PY
rm -rf "$out.synthetic"
# Crop scenes cut from the train photos above (and CelebA's train identities), then added to train.
if [ "$crop_scenes" -gt 0 ]; then
python3 "$(dirname "$0")/crop_scenes.py" "$out" "$shared/datasets/celeba_identities" "$out.crops" \
  --scenes "$crop_scenes" --seed "$seed"
mv "$out.crops/images/0--CropScenes" "$out/images/0--CropScenes"
cat "$out.crops/annotations.jsonl" >> "$out/annotations.jsonl"
python3 - "$out/splits.json" "$out.crops/annotations.jsonl" <<'PY'
import json, sys
splits = json.load(open(sys.argv[1]))
splits["train"] += [json.loads(line)["file"] for line in open(sys.argv[2])]
json.dump(splits, open(sys.argv[1], "w"), indent=1)
PY
rm -rf "$out.crops"
fi
echo "$out: $(wc -l < "$out/annotations.jsonl") photos ($scenes synthetic, $crop_scenes crop scenes)"
