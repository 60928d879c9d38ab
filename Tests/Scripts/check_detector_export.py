#!/usr/bin/env python3
"""Checks a facetrain detector export (`facetrain detector export`, ONNX) with real consumers.

Usage:  python3 check_detector_export.py CASES.json

CASES.json (written by the Swift test DetectorExportTests) names the file and what it must give:
  {"onnx": path, "heads": ["stride8", ...], "channels": 15, "strides": [8, 16, 32], "tolerance": 1e-4,
   "metadata": {key: text the entry must contain, ...},
   "cases": [{"name", "height", "width", "pixels": [raw 0..255 floats, CHW, RGB],
              "outputs": {"stride8": [floats, CHW of the head], ...}}]}

What it does: onnx.checker (full check); IR 7 / opset 13; one float input [N, 3, H, W] whose height
and width are symbolic and one output per head [N, channels, ?, ?] in the given order; only the
operators a detector exports as (the preprocessing Mul and Add, Conv, BatchNormalization, Relu,
MaxPool, Identity for a route, Resize for an upsample, Add); metadata_props with the strides;
then onnxruntime runs every case (each its own size) and each head must match facetrain's values
within `tolerance` times the head's largest magnitude (at least 1), with the expected shape
[1, channels, H / stride, W / stride].

Exit status: 0 all checks passed, 1 a check failed, 2 bad usage, 3 a Python module is missing.
"""
import json
import sys

OPERATORS = {"Mul", "Add", "Conv", "BatchNormalization", "Relu", "MaxPool", "Identity", "Resize"}


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    try:
        import numpy as np
        import onnx
        import onnxruntime as ort
    except ImportError as error:
        print(f"missing Python module: {error.name} (pip install -r Tests/Scripts/requirements.txt)", file=sys.stderr)
        return 3
    spec = json.load(open(argv[1]))
    failures = []

    model = onnx.load(spec["onnx"])
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as error:  # the checker raises several types
        failures.append(f"onnx.checker: {error}")
    if model.ir_version != 7 or [o.version for o in model.opset_import] != [13]:
        failures.append(f"IR {model.ir_version}, opsets {[o.version for o in model.opset_import]}: want IR 7, opset 13")
    graph = model.graph
    if len(graph.input) != 1:
        failures.append(f"{len(graph.input)} graph inputs, want 1")
    else:
        dims = graph.input[0].type.tensor_type.shape.dim
        shape = [d.dim_param or d.dim_value for d in dims]
        if len(shape) != 4 or shape[1] != 3 or not isinstance(shape[2], str) or not isinstance(shape[3], str):
            failures.append(f"input shape {shape}: want [N, 3, H, W] with symbolic H and W")
    names = [output.name for output in graph.output]
    if names != spec["heads"]:
        failures.append(f"outputs {names}, want {spec['heads']}")
    for output in graph.output:
        dims = [d.dim_param or d.dim_value for d in output.type.tensor_type.shape.dim]
        if len(dims) != 4 or dims[1] != spec["channels"]:
            failures.append(f"output {output.name} shape {dims}: want [N, {spec['channels']}, ?, ?]")
    unexpected = sorted({node.op_type for node in graph.node} - OPERATORS)
    if unexpected:
        failures.append(f"unexpected operators {unexpected}")
    metadata = {entry.key: entry.value for entry in model.metadata_props}
    if json.loads(metadata.get("strides", "null")) != spec["strides"]:
        failures.append(f"metadata strides {metadata.get('strides')!r}, want {spec['strides']}")
    for key, text in spec.get("metadata", {}).items():
        if text not in metadata.get(key, ""):
            failures.append(f"metadata {key} {metadata.get(key)!r} does not say {text!r}")

    session = ort.InferenceSession(spec["onnx"], providers=["CPUExecutionProvider"])
    input_name = session.get_inputs()[0].name
    for case in spec["cases"]:
        height, width = case["height"], case["width"]
        pixels = np.asarray(case["pixels"], dtype=np.float32).reshape(1, 3, height, width)
        results = session.run(None, {input_name: pixels})
        for head, stride, result in zip(spec["heads"], spec["strides"], results):
            expected = np.asarray(case["outputs"][head], dtype=np.float32)
            want = (1, spec["channels"], height // stride, width // stride)
            if result.shape != want:
                failures.append(f"{case['name']} {head}: shape {result.shape}, want {want}")
                continue
            expected = expected.reshape(want)
            scale = max(1.0, float(np.abs(expected).max()))
            worst = float(np.abs(result - expected).max())
            if not np.isfinite(result).all() or worst > spec["tolerance"] * scale:
                failures.append(f"{case['name']} {head}: largest difference {worst:.3g} (scale {scale:.3g})")

    for failure in failures:
        print(f"FAIL {failure}")
    if not failures:
        print(f"ok: {len(spec['cases'])} cases, heads {', '.join(spec['heads'])}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
