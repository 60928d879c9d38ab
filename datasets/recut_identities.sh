#!/usr/bin/env bash
# An aligned copy of an identities corpus (celeba_identities' layout: images/<identity>/*.jpg,
# splits.json, a teacher file): every crop re-cut by `facetrain crop` (the detector's 5 landmarks
# mapped onto a template), as datasets/recut_protocol.sh re-cuts the protocols, for pretraining a
# base on aligned crops (the alignment study, docs/results/quality.md). A crop the detector refuses
# keeps its original image and is counted; file names stay, so the teacher's rows still match.
# splits.json and dlib_descriptors.h5 are linked, not copied. The copy derives from the corpus:
# keep it out of the repository (CelebA's terms).
# Usage: datasets/recut_identities.sh CORPUS OUT [CROP OPTIONS...]   (default: --pad 0.25 --template celeba96 --size 96)
set -euo pipefail
source=${1:?usage: recut_identities.sh CORPUS OUT [CROP OPTIONS...]}
out=${2:?usage: recut_identities.sh CORPUS OUT [CROP OPTIONS...]}
shift 2
bin=${BIN:-.build/release/facetrain}
options=("$@")
[ ${#options[@]} -gt 0 ] || options=(--pad 0.25 --template celeba96 --size 96)
[ -d "$source/images" ] && [ -f "$source/splits.json" ] ||
  { echo "recut_identities: $source has no images/ and splits.json (an identities corpus?)" >&2; exit 1; }
source=$(cd "$source" && pwd)
rm -rf "$out" "$out.work"
mkdir -p "$out"
ln -s "$source/splits.json" "$out/splits.json"
[ ! -f "$source/dlib_descriptors.h5" ] || ln -s "$source/dlib_descriptors.h5" "$out/dlib_descriptors.h5"
"$bin" crop --in "$source/images" --out "$out.work" --json "${options[@]}" > "$out.crop.jsonl" 2> /dev/null || true
python3 - "$source" "$out" <<'PY'
import json, os, shutil, sys
source, out = sys.argv[1:3]
cut = {}
for line in open(out + ".crop.jsonl"):
    row = json.loads(line)
    if row.get("crops"):
        crop = row["crops"][0]["file"]
        cut[row["file"]] = crop if "/" in crop else os.path.join(os.path.dirname(row["file"]), crop)
done = kept = 0
for identity in sorted(os.listdir(os.path.join(source, "images"))):
    os.makedirs(os.path.join(out, "images", identity), exist_ok=True)
    for name in sorted(os.listdir(os.path.join(source, "images", identity))):
        relative = os.path.join(identity, name)
        target = os.path.join(out, "images", relative)
        if relative in cut:
            shutil.move(os.path.join(out + ".work", cut[relative]), target)
            done += 1
        else:
            shutil.copyfile(os.path.join(source, "images", relative), target)
            kept += 1
print(f"{out}: {done} crops re-cut, {kept} kept as they were (the detector refused them)")
PY
rm -rf "$out.work" "$out.crop.jsonl"
