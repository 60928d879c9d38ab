#!/usr/bin/env python3
"""Checks `facetrain predict` against the bundle's exports, run by real consumers.

Usage:  python3 check_predictions.py CASES.json

CASES.json has check_exports.py's format (see its docstring); here the expected probabilities are
what `facetrain predict --json` printed, the pixels are the ones facetrain fed its network, and each
case also names its image "file". This script
  1. runs every check of check_exports.py (ONNX via onnxruntime, Core ML via coremltools.load_spec
     and the numpy evaluation of the spec; structure, labels, metadata, probabilities, top labels);
  2. when Pillow is installed, decodes each file independently with Pillow and compares its pixels
     with facetrain's (exact equality is required when the file already has the input size; both use
     libjpeg-turbo's default decoder), and runs onnxruntime on Pillow's pixels as well.

Exit status: 0 all checks passed, 1 a check failed, 2 bad usage, 3 a Python module is missing.
"""
import importlib.util
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_exports  # noqa: E402  (the evaluators live there)


def check_independent_decoding(cases_file, checks):
    """Pillow's decode of each file against facetrain's pixels; returns a summary line."""
    if importlib.util.find_spec("PIL") is None:
        return "Pillow is not installed: independent decoding not compared"
    import numpy as np
    import onnxruntime
    from PIL import Image

    spec = cases_file["input"]
    shape = (spec["height"], spec["width"], spec["channels"])
    worst_pixel, differing, compared, pillow_batch = 0, 0, 0, []
    for case in cases_file["cases"]:
        with Image.open(case["file"]) as image:
            image = image.convert("L" if spec["channels"] == 1 else "RGB")
            if image.size != (spec["width"], spec["height"]):
                continue  # facetrain resized it; Pillow's resampling is not the same filter
            pillow = np.asarray(image, dtype=np.uint8).reshape(shape)
        ours = np.asarray(case["pixels"], dtype=np.uint8).reshape(shape)
        difference = np.abs(pillow.astype(np.int16) - ours.astype(np.int16))
        worst_pixel = max(worst_pixel, int(difference.max()))
        differing += int((difference > 0).sum())
        compared += 1
        checks.expect(difference.max() == 0, f"Pillow decodes {case['file']} differently: max pixel difference "
                                             f"{int(difference.max())}, {int((difference > 0).sum())} values")
        pillow_batch.append((case, pillow))
    if not pillow_batch:
        return "no file has the input size: independent decoding not compared"

    session = onnxruntime.InferenceSession(cases_file["onnx"], providers=["CPUExecutionProvider"])
    nchw = np.stack([pixels for _, pixels in pillow_batch]).transpose(0, 3, 1, 2).astype(np.float32)
    (probabilities,) = session.run([cases_file["outputs"]["probabilities"]], {spec["name"]: nchw})
    worst_probability = 0.0
    for (case, _), row in zip(pillow_batch, probabilities):
        expected = np.asarray(case["probabilities"], dtype=np.float64)
        difference = float(np.max(np.abs(row.astype(np.float64) - expected)))
        worst_probability = max(worst_probability, difference)
        checks.expect(difference <= cases_file["tolerance"],
                      f"onnxruntime on Pillow's pixels of {case['file']}: probabilities differ by {difference:.3g}")
    return (f"Pillow decoding: {compared} files, max pixel difference {worst_pixel} ({differing} values differ); "
            f"onnxruntime on Pillow's pixels: max |p - predict| {worst_probability:.3g}")


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    check_exports.require_modules()
    status = check_exports.main(argv)
    with open(argv[1], encoding="utf-8") as handle:
        cases_file = json.load(handle)
    checks = check_exports.Checks()
    print(check_independent_decoding(cases_file, checks))
    if checks.failures:
        print(f"{len(checks.failures)} decoding check(s) FAILED")
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
