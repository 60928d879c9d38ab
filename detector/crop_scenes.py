#!/usr/bin/env python3
"""Crop scenes for the builtin detector's training set (`make detector`, detector/training_set.sh).

The face check (docs/detector.md) runs the detector on face crops padded with grey, the way the
app uploads them; WIDER photos hardly ever show a face that fills the frame, and the texture
patches users file as class 1 ("not a face") never appear as a lone rectangle on grey either. A
crop scene is a canvas of grey (or one flat colour) holding a few such rectangles at random sizes:
  * face crops: CelebA crops of `train` identities only (the protocols' held-out people are never
    used), with their YuNet-convention box and 5 points; and windows cut around the larger faces of
    the set's own `train` photos (WIDER and, for half of them, the drawn scenes, since the demo's
    users are drawn faces), carrying every face inside;
  * non-face patches: windows of the same photos that touch no face, and a few flat, gradient and
    noise patches (blank or out-of-focus uploads).
Nothing from the protocols' held-out crops, ORL, CS131 or the demo's users is read.

Usage: crop_scenes.py SET CELEBA OUT_DIR [--scenes N] [--seed S]
  SET     a detection set (annotations.jsonl, splits.json, images/) whose `train` photos are cut
  CELEBA  ../shared/datasets/celeba_identities
Writes OUT_DIR/images/0--CropScenes/*.jpg and OUT_DIR/annotations.jsonl (the set's line format).
"""
import argparse
import json
import math
import os
import random
import sys

import numpy as np
from PIL import Image, ImageFilter

GREY = (127, 127, 127)


def fail(message):
    sys.exit(f"crop_scenes: {message}")


def load_set(root):
    path = os.path.join(root, "annotations.jsonl")
    if not os.path.isfile(path):
        fail(f"{path} not found: SET must be a detection set folder")
    with open(os.path.join(root, "splits.json")) as handle:
        train = set(json.load(handle)["train"])
    photos = []
    with open(path) as handle:
        for line in handle:
            photo = json.loads(line)
            if photo["file"] in train:
                photos.append(photo)
    return photos


def load_celeba(root):
    with open(os.path.join(root, "splits.json")) as handle:
        identities = {str(identity) for identity in json.load(handle)["train"]}
    crops = []
    with open(os.path.join(root, "landmarks5_yunet.jsonl")) as handle:
        for line in handle:
            row = json.loads(line)
            if row["file"].split("/")[1] in identities:
                crops.append(row)
    return crops


def face_record(box, points, score, invalid=0):
    record = {"box": [round(v, 2) for v in box], "invalid": invalid}
    if points is not None and score is not None and not invalid:
        record["landmarks5"] = [[round(x, 2), round(y, 2)] for x, y in points]
        record["landmarks5_score"] = score
    return record


def celeba_item(row, celeba_root, rng):
    """A CelebA crop, sometimes narrowed like a taller crop, with its face in the crop's pixels."""
    image = Image.open(os.path.join(celeba_root, row["file"])).convert("RGB")
    x, y, w, h = row["box"]
    points = row["landmarks5"]
    if rng.random() < 0.4:  # ORL-like portrait framing: cut columns off both sides
        keep = rng.uniform(0.78, 0.95) * image.width
        left = rng.uniform(0, image.width - keep)
        image = image.crop((round(left), 0, round(left + keep), image.height))
        x -= round(left)
        points = [(px - round(left), py) for px, py in points]
    return image, [(x, y, w, h, points, row.get("score"), 0)]


def overlaps(a, b, margin=0.0):
    ax, ay, aw, ah = a
    bx, by, bw, bh = b
    return not (ax + aw * (1 + margin) <= bx - aw * margin or bx + bw * (1 + margin) <= ax - bw * margin
                or ay + ah * (1 + margin) <= by - ah * margin or by + bh * (1 + margin) <= ay - bh * margin)


def photo_face_item(photo, set_root, rng, cache):
    """A window around one larger face of a photo, framed like a phone's crop, with every face in it."""
    faces = [f for f in photo["faces"] if not f.get("invalid") and f["box"][3] >= 48]
    if not faces:
        return None
    face = rng.choice(faces)
    x, y, w, h = face["box"]
    side = max(w, h) * rng.uniform(1.1, 1.6)
    cx = x + w / 2 + rng.uniform(-0.1, 0.1) * w
    cy = y + h / 2 + rng.uniform(-0.1, 0.1) * h
    window = (cx - side / 2, cy - side / 2, side, side)
    if window[0] < 0 or window[1] < 0 or window[0] + side > photo["width"] or window[1] + side > photo["height"]:
        return None
    image = open_photo(photo, set_root, cache).crop(tuple(round(v) for v in (
        window[0], window[1], window[0] + side, window[1] + side)))
    left, top = round(window[0]), round(window[1])
    kept = []
    for other in photo["faces"]:
        ox, oy, ow, oh = other["box"]
        if not overlaps((ox, oy, ow, oh), (left, top, image.width, image.height)):
            continue
        centre_inside = left <= ox + ow / 2 < left + image.width and top <= oy + oh / 2 < top + image.height
        points = other.get("landmarks5")
        shifted = [(px - left, py - top) for px, py in points] if points else None
        # A neighbour cut by the window is an ignore region: neither a face to find nor background.
        invalid = 1 if other.get("invalid") or not centre_inside else 0
        kept.append((ox - left, oy - top, ow, oh, shifted, other.get("landmarks5_score"), invalid))
    return image, kept


def open_photo(photo, set_root, cache):
    path = os.path.join(set_root, photo["file"])
    if path not in cache:
        if len(cache) > 64:
            cache.clear()
        cache[path] = Image.open(path).convert("RGB")
    return cache[path]


def background_item(photo, set_root, rng, cache):
    """A window of a photo that touches no face (faces grown by a third), or None."""
    if photo["width"] < 64 or photo["height"] < 64:
        return None
    boxes = [f["box"] for f in photo["faces"]]
    for _ in range(30):
        side = rng.uniform(40, min(photo["width"], photo["height"]) * 0.6)
        width = side * rng.uniform(0.8, 1.0)
        x = rng.uniform(0, photo["width"] - width)
        y = rng.uniform(0, photo["height"] - side)
        if not any(overlaps(tuple(b), (x, y, width, side), margin=0.33) for b in boxes):
            image = open_photo(photo, set_root, cache).crop((round(x), round(y), round(x + width), round(y + side)))
            return image, []
    return None


def synthetic_patch(rng):
    side = rng.randint(48, 160)
    kind = rng.choice(["flat", "gradient", "noise"])
    if kind == "flat":
        return Image.new("RGB", (side, side), tuple(rng.randint(0, 255) for _ in range(3))), []
    if kind == "gradient":
        start = np.array([rng.randint(0, 255) for _ in range(3)], dtype=np.float32)
        end = np.array([rng.randint(0, 255) for _ in range(3)], dtype=np.float32)
        ramp = np.linspace(0, 1, side, dtype=np.float32)[:, None, None]
        pixels = np.broadcast_to(start + (end - start) * ramp, (side, side, 3))
        if rng.random() < 0.5:
            pixels = pixels.transpose(1, 0, 2)
        return Image.fromarray(np.ascontiguousarray(pixels).astype(np.uint8)), []
    noise = np.random.default_rng(rng.randrange(1 << 30)).integers(0, 256, (side // 4 + 1, side // 4 + 1, 3))
    image = Image.fromarray(noise.astype(np.uint8)).resize((side, side), Image.BILINEAR)
    return image.filter(ImageFilter.GaussianBlur(rng.uniform(0, 2))), []


def place(canvas_size, placed, width, height, rng):
    canvas_width, canvas_height = canvas_size
    if width > canvas_width or height > canvas_height:
        return None
    for _ in range(40):
        x = rng.uniform(0, canvas_width - width)
        y = rng.uniform(0, canvas_height - height)
        # A quarter of the item's size of background around it, as the face check pads a crop.
        if not any(overlaps(other, (x, y, width, height), margin=0.25) for other in placed):
            return x, y
    return None


def make_scene(index, photos, drawn, celeba, args, rng, cache):
    canvas_size = (rng.randint(400, 640), rng.randint(400, 640))
    background = GREY if rng.random() < 0.75 else tuple(rng.randint(0, 255) for _ in range(3))
    canvas = Image.new("RGB", canvas_size, background)
    placed, faces = [], []
    for _ in range(rng.randint(2, 6)):
        roll = rng.random()
        if roll < 0.45:
            item = celeba_item(rng.choice(celeba), args.celeba, rng)
        elif roll < 0.65:
            # Half from the drawn scenes: the demo's users are drawn faces, and they are few in the set.
            pool = drawn if drawn and rng.random() < 0.5 else photos
            item = photo_face_item(rng.choice(pool), args.set, rng, cache)
        elif roll < 0.92:
            item = background_item(rng.choice(photos), args.set, rng, cache)
        else:
            item = synthetic_patch(rng)
        if item is None:
            continue
        image, items_faces = item
        height = math.exp(rng.uniform(math.log(40), math.log(320)))
        scale = height / image.height
        width = image.width * scale
        spot = place(canvas_size, placed, width, height, rng)
        if spot is None:
            continue
        resized = image.resize((max(1, round(width)), max(1, round(height))), Image.BILINEAR)
        if rng.random() < 0.25:
            resized = resized.convert("L").convert("RGB")
        left, top = round(spot[0]), round(spot[1])
        canvas.paste(resized, (left, top))
        placed.append((left, top, resized.width, resized.height))
        sx, sy = resized.width / image.width, resized.height / image.height
        for x, y, w, h, points, score, invalid in items_faces:
            # Clip to the pasted item: what lies outside it is not on the canvas.
            x0, y0 = max(0.0, x), max(0.0, y)
            x1, y1 = min(image.width, x + w), min(image.height, y + h)
            if x1 <= x0 or y1 <= y0:
                continue
            box = (left + x0 * sx, top + y0 * sy, (x1 - x0) * sx, (y1 - y0) * sy)
            moved = [(left + px * sx, top + py * sy) for px, py in points] if points else None
            faces.append(face_record(box, moved, score, invalid))
    name = f"images/0--CropScenes/0_CropScenes_{index:05d}.jpg"
    canvas.save(os.path.join(args.out, name), quality=92)
    return {"file": name, "width": canvas_size[0], "height": canvas_size[1], "faces": faces}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("set")
    parser.add_argument("celeba")
    parser.add_argument("out")
    parser.add_argument("--scenes", type=int, default=600)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    photos = load_set(args.set)
    celeba = load_celeba(args.celeba)
    if not photos or not celeba:
        fail(f"no train photos in {args.set} or no train-identity crops in {args.celeba}")
    drawn = [photo for photo in photos if "/0--Synthetic/" in photo["file"]]
    rng = random.Random(args.seed)
    os.makedirs(os.path.join(args.out, "images", "0--CropScenes"), exist_ok=True)
    cache = {}
    with open(os.path.join(args.out, "annotations.jsonl"), "w") as handle:
        for index in range(args.scenes):
            handle.write(json.dumps(make_scene(index, photos, drawn, celeba, args, rng, cache)) + "\n")


if __name__ == "__main__":
    main()
