#!/usr/bin/env python3
"""Checks a facetrain Core ML export (.mlmodel) and ONNX export (.onnx) with real consumers.

Usage:  python3 check_exports.py CASES.json

CASES.json (written by the Swift export tests) names the two files and says what they must contain:
  {"mlmodel": path, "onnx": path, "labels": [...],
   "input": {"name", "width", "height", "channels", "colorSpace": "RGB"|"GRAY"},
   "outputs": {"label": "classLabel", "probabilities": "classProbability"},
   "metadata": {"version", "versionString", "shortDescription", "author", "license", "userDefined": {...}},
   "onnxProducer": {"name", "version"}, "tolerance": 1e-4,
   "cases": [{"name", "pixels": [uint8, HWC, RGB order], "probabilities": [expected, label order]}],
   "operations": {"conv2d": [{"onnx": "Conv", "coreML": "convolution"}], "relu": [{..., "coreMLActivation": "ReLU"}],
                  ..., "flatten": [...], "softmax": [...], "preprocessing": [{"onnx": "Mul", "coreML": ""}, ...]}}

"operations" is facetrain's table of what each layer kind exports as (ExportFormTable, read from its
ONNX and Core ML lowering tables): the only list of kinds this script knows. The files may use
those operators and layers and no others; every Core ML layer and activation in it needs an entry
in COREML_LAYERS or COREML_ACTIVATIONS below (the numpy evaluation and weight rules), or the check
fails.

What it does:
  ONNX     onnx.checker (full check) and strict shape inference; IR 7 / opset 13; one float NCHW input
           [N, C, H, W] and one output [N, classes]; only the expected operators (Conv may be grouped;
           a residual Add reads two earlier blobs; Slice's starts, ends and axes are int64); metadata_props
           (class_labels JSON, version, free-form entries); onnxruntime runs all cases as one batch.
  Core ML  coremltools.utils.load_spec (protobuf parse; Core ML itself does not run on Linux);
           spec version 1, neuralNetworkClassifier, image input, classLabel/classProbability outputs,
           labels, metadata; the rules of Apple's validator (weight counts, blob order, float32 only,
           nGroups dividing the channels, two inputs for an add)
           plus what it misses (unique layer names, label count = softmax width); then a numpy
           forward pass of the spec written here from the NeuralNetwork.proto semantics.
  Table    every Core ML layer and activation of "operations" has an evaluator here.
  Numbers  both files' probabilities against the expected ones within `tolerance`, same top label.

Exit status: 0 all checks passed, 1 a check failed, 2 bad usage, 3 a Python module is missing.
"""
import importlib.util
import json
import sys

REQUIRED_MODULES = ["numpy", "onnx", "onnxruntime", "coremltools"]
MISSING_MODULES_STATUS = 3


def require_modules():
    missing = [name for name in REQUIRED_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        print(f"check_exports.py: MISSING PYTHON MODULES: {', '.join(missing)}.\n"
              f"  The export checks load the files with onnx, onnxruntime and coremltools.\n"
              f"  Install them with: python3 -m pip install -r Tests/Scripts/requirements.txt",
              file=sys.stderr)
        sys.exit(MISSING_MODULES_STATUS)


class Checks:
    """Collects failures so that one run reports all of them."""

    def __init__(self):
        self.failures = []
        self.count = 0

    def expect(self, condition, message):
        self.count += 1
        if not condition:
            self.failures.append(message)
            print(f"FAIL: {message}")
        return condition

    def equal(self, actual, expected, what):
        return self.expect(actual == expected, f"{what}: got {actual!r}, expected {expected!r}")


# ---------------------------------------------------------------------------------------------
# ONNX

def onnx_operators(cases_file):
    """The ONNX operators facetrain's table says its exports may use."""
    return {entry["onnx"] for entries in cases_file["operations"].values() for entry in entries}


def onnx_dims(value_info):
    dims = []
    for dim in value_info.type.tensor_type.shape.dim:
        dims.append(dim.dim_param if dim.WhichOneof("value") == "dim_param" else dim.dim_value)
    return dims


def check_onnx(path, cases_file, checks, batch):
    import numpy as np
    import onnx
    import onnxruntime

    model = onnx.load(path)
    try:
        onnx.checker.check_model(model, full_check=True)
        checks.expect(True, "onnx.checker")
    except Exception as error:  # the checker raises several types
        checks.expect(False, f"onnx.checker.check_model(full_check=True) failed: {error}")
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    except Exception as error:
        checks.expect(False, f"ONNX shape inference failed: {error}")
        inferred = model

    labels = cases_file["labels"]
    spec = cases_file["input"]
    checks.equal(model.ir_version, 7, "ONNX ir_version")
    checks.equal([(o.domain, o.version) for o in model.opset_import], [("", 13)], "ONNX opset_import")
    checks.equal(model.model_version, cases_file["metadata"]["version"], "ONNX model_version")
    checks.equal(model.doc_string, cases_file["metadata"]["shortDescription"], "ONNX doc_string")
    checks.equal(model.producer_name, cases_file["onnxProducer"]["name"], "ONNX producer_name")
    checks.equal(model.producer_version, cases_file["onnxProducer"]["version"], "ONNX producer_version")

    graph = model.graph
    initializers = {tensor.name for tensor in graph.initializer}
    checks.equal([i.name for i in graph.input], [spec["name"]], "ONNX graph inputs (initializers must not be listed)")
    checks.equal(graph.input[0].type.tensor_type.elem_type, onnx.TensorProto.FLOAT, "ONNX input element type")
    checks.equal(onnx_dims(graph.input[0]), ["N", spec["channels"], spec["height"], spec["width"]],
                 "ONNX input shape")
    probabilities_name = cases_file["outputs"]["probabilities"]
    checks.equal([o.name for o in graph.output], [probabilities_name], "ONNX graph outputs")
    checks.equal(onnx_dims(graph.output[0]), ["N", len(labels)], "ONNX output shape")
    inferred_output = [o for o in inferred.graph.output if o.name == probabilities_name]
    if inferred_output:
        checks.equal(onnx_dims(inferred_output[0]), ["N", len(labels)], "ONNX inferred output shape")

    operators = [node.op_type for node in graph.node]
    allowed = onnx_operators(cases_file)
    checks.expect(set(operators) <= allowed, f"ONNX operators {sorted(set(operators) - allowed)} "
                  f"are not expected (allowed: {sorted(allowed)})")
    checks.equal(operators[:2], ["Mul", "Add"], "ONNX normalisation nodes")
    checks.equal(graph.node[0].input[0], spec["name"], "ONNX first node reads the image")
    checks.equal(operators[-1], "Softmax", "ONNX last operator")
    produced = {spec["name"]}
    for node in graph.node:
        residual = node.op_type == "Add" and node.name != "pre_add"
        if residual:
            checks.equal(len(node.input), 2, f"ONNX residual Add {node.name} input count")
        for index, name in enumerate(node.input):
            if index > 0 and not residual:
                continue
            checks.expect(name in produced, f"ONNX node {node.name} reads {name!r} before it is produced")
        produced.update(node.output)
    node_names = [node.name for node in graph.node]
    checks.expect(len(set(node_names)) == len(node_names), f"ONNX node names are not unique: {node_names}")
    for node in graph.node:
        if node.op_type == "Softmax":
            axis = [a.i for a in node.attribute if a.name == "axis"]
            checks.equal(axis, [1], "ONNX Softmax axis")
        if node.op_type == "Gemm":
            trans_b = [a.i for a in node.attribute if a.name == "transB"]
            checks.equal(trans_b, [1], "ONNX Gemm transB")
        if node.op_type == "Add" and node.name != "pre_add":
            continue  # a residual add: both inputs are blobs, checked above
        for name in node.input[1:]:
            checks.expect(name in initializers, f"ONNX node {node.name} input {name} is not an initializer")
    # Slice (the input's crop) reads int64 starts, ends and axes; every other tensor is float32.
    slice_inputs = {name for node in graph.node if node.op_type == "Slice" for name in node.input[1:]}
    for tensor in graph.initializer:
        expected_type = onnx.TensorProto.INT64 if tensor.name in slice_inputs else onnx.TensorProto.FLOAT
        checks.equal(tensor.data_type, expected_type, f"ONNX initializer {tensor.name} type")

    properties = {p.key: p.value for p in model.metadata_props}
    try:
        checks.equal(json.loads(properties.get("class_labels", "null")), labels, "ONNX metadata class_labels")
    except json.JSONDecodeError as error:
        checks.expect(False, f"ONNX metadata class_labels is not JSON: {error}")
    checks.equal(properties.get("image_size"), f"{spec['width']}x{spec['height']}", "ONNX metadata image_size")
    expected_properties = dict(cases_file["metadata"]["userDefined"])
    for key in ("author", "license"):
        if cases_file["metadata"].get(key):
            expected_properties[key] = cases_file["metadata"][key]
    for key, value in expected_properties.items():
        checks.equal(properties.get(key), value, f"ONNX metadata_props[{key!r}]")

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    meta = session.get_modelmeta()
    checks.equal(json.loads(meta.custom_metadata_map.get("class_labels", "null")), labels,
                 "onnxruntime custom_metadata_map class_labels")
    checks.equal(meta.version, cases_file["metadata"]["version"], "onnxruntime model version")
    nchw = batch.transpose(0, 3, 1, 2).astype(np.float32)
    (probabilities,) = session.run([probabilities_name], {spec["name"]: nchw})
    return probabilities


# ---------------------------------------------------------------------------------------------
# Core ML

def coreml_forms(cases_file):
    """(layers, activations) of Core ML that facetrain's table says its exports may use."""
    entries = [entry for entries in cases_file["operations"].values() for entry in entries if entry["coreML"]]
    return ({entry["coreML"] for entry in entries},
            {entry["coreMLActivation"] for entry in entries if entry.get("coreMLActivation")})


def check_table(cases_file, checks):
    """Every Core ML layer and activation facetrain may write has an evaluator in this script."""
    layers, activations = coreml_forms(cases_file)
    checks.expect(layers <= set(COREML_LAYERS),
                  f"check_exports.py has no evaluator for the Core ML layers {sorted(layers - set(COREML_LAYERS))} "
                  f"of facetrain's table: add them to COREML_LAYERS")
    checks.expect(activations <= set(COREML_ACTIVATIONS),
                  f"check_exports.py has no evaluator for the Core ML activations "
                  f"{sorted(activations - set(COREML_ACTIVATIONS))}: add them to COREML_ACTIVATIONS")


COLOR_SPACES = {"RGB": "RGB", "GRAY": "GRAYSCALE"}


def float_weights(weights, expected_count, what, checks):
    """The values of a WeightParams after checking it holds exactly `expected_count` float32 values."""
    import numpy as np
    others = [field.name for field, _ in weights.ListFields() if field.name != "floatValue"]
    checks.expect(not others, f"{what} stores {others}; only float32 floatValue is allowed in spec version 1")
    checks.equal(len(weights.floatValue), expected_count, f"{what} value count")
    return np.asarray(weights.floatValue, dtype=np.float32)


def check_coreml_structure(spec, cases_file, checks):
    allowed_layers, allowed_activations = coreml_forms(cases_file)
    labels = cases_file["labels"]
    spec_input = cases_file["input"]
    outputs = cases_file["outputs"]
    checks.equal(spec.specificationVersion, 1, "Core ML specificationVersion")
    checks.equal(spec.WhichOneof("Type"), "neuralNetworkClassifier", "Core ML model type")

    description = spec.description
    checks.equal([i.name for i in description.input], [spec_input["name"]], "Core ML inputs")
    image = description.input[0].type
    checks.equal(image.WhichOneof("Type"), "imageType", "Core ML input type")
    color_space = image.imageType.ColorSpace.Name(image.imageType.colorSpace)
    checks.equal((image.imageType.width, image.imageType.height, color_space),
                 (spec_input["width"], spec_input["height"], COLOR_SPACES[spec_input["colorSpace"]]),
                 "Core ML image width, height, colour space")
    features = {o.name: o.type for o in description.output}
    checks.equal(sorted(features), sorted([outputs["label"], outputs["probabilities"]]), "Core ML outputs")
    if outputs["label"] in features:
        checks.equal(features[outputs["label"]].WhichOneof("Type"), "stringType", "Core ML label output type")
    if outputs["probabilities"] in features:
        dictionary = features[outputs["probabilities"]]
        checks.equal(dictionary.WhichOneof("Type"), "dictionaryType", "Core ML probability output type")
        checks.equal(dictionary.dictionaryType.WhichOneof("KeyType"), "stringKeyType",
                     "Core ML probability dictionary key type")
    checks.equal(description.predictedFeatureName, outputs["label"], "Core ML predictedFeatureName")
    checks.equal(description.predictedProbabilitiesName, outputs["probabilities"],
                 "Core ML predictedProbabilitiesName")

    metadata = description.metadata
    expected = cases_file["metadata"]
    checks.equal(metadata.shortDescription, expected["shortDescription"], "Core ML shortDescription")
    checks.equal(metadata.versionString, expected["versionString"], "Core ML versionString")
    checks.equal(metadata.author, expected["author"], "Core ML author")
    checks.equal(metadata.license, expected["license"], "Core ML license")
    checks.equal(dict(metadata.userDefined), expected["userDefined"], "Core ML userDefined metadata")

    network = spec.neuralNetworkClassifier
    checks.equal(list(network.stringClassLabels.vector), labels, "Core ML stringClassLabels")
    checks.equal(network.labelProbabilityLayerName, outputs["probabilities"], "Core ML labelProbabilityLayerName")
    checks.equal((network.arrayInputShapeMapping, network.imageInputShapeMapping), (0, 0),
                 "Core ML shape mappings (must stay 0 for spec version 1)")
    checks.equal([p.featureName for p in network.preprocessing], [spec_input["name"]], "Core ML preprocessing")
    if network.preprocessing:
        checks.equal(network.preprocessing[0].WhichOneof("preprocessor"), "scaler", "Core ML preprocessor")

    names = [layer.name for layer in network.layers]
    checks.expect(len(set(names)) == len(names), f"Core ML layer names are not unique: {names}")
    checks.expect(all(names), "Core ML has a layer without a name")
    available = {spec_input["name"]}
    for layer in network.layers:
        kind = layer.WhichOneof("layer")
        checks.expect(kind in allowed_layers,
                      f"Core ML layer {layer.name} is a {kind}, not one of {sorted(allowed_layers)}")
        checks.equal(len(layer.input), 2 if kind == "add" else 1, f"Core ML layer {layer.name} input count")
        checks.equal(len(layer.output), 1, f"Core ML layer {layer.name} output count")
        for blob in layer.input:
            checks.expect(blob in available, f"Core ML layer {layer.name} reads {blob!r} before it is produced")
        for blob in layer.output:
            checks.expect(blob not in available, f"Core ML layer {layer.name} writes {blob!r} a second time")
            available.add(blob)
        if kind == "activation":
            activation = layer.activation.WhichOneof("NonlinearityType")
            checks.expect(activation in allowed_activations,
                          f"Core ML {layer.name} activation is {activation}, not one of {sorted(allowed_activations)}")
    if network.layers:
        last = network.layers[-1]
        checks.equal(last.WhichOneof("layer"), "softmax", "Core ML last layer")
        checks.equal(list(last.output), [outputs["probabilities"]], "Core ML softmax output blob")


def kernel_of(params):
    values = list(params.kernelSize) or [3, 3]
    return values[0], values[1]


def stride_of(params):
    values = list(params.stride) or [1, 1]
    return values[0], values[1]


def padding(params, height, width):
    """(top, bottom, left, right) of a convolution or pooling layer."""
    kind = params.WhichOneof("ConvolutionPaddingType" if hasattr(params, "isDeconvolution") else "PoolingPaddingType")
    if kind == "valid":
        borders = params.valid.paddingAmounts.borderAmounts
        if not borders:
            return 0, 0, 0, 0
        return borders[0].startEdgeSize, borders[0].endEdgeSize, borders[1].startEdgeSize, borders[1].endEdgeSize
    if kind == "same":
        kh, kw = kernel_of(params)
        sh, sw = stride_of(params)
        amounts = []
        for size, kernel, stride in ((height, kh, sh), (width, kw, sw)):
            total = max(0, (-(-size // stride) - 1) * stride + kernel - size)
            small, large = total // 2, total - total // 2
            heavy_top_left = params.same.asymmetryMode == 1
            amounts += [large, small] if heavy_top_left else [small, large]
        return amounts[0], amounts[1], amounts[2], amounts[3]
    raise ValueError(f"padding type {kind!r} is not supported by this checker")


def check_coreml_weights(spec, checks):
    """The weight-count rules of Apple's validator (mlmodel/src/Validation), float32 only."""
    for layer in spec.neuralNetworkClassifier.layers:
        kind = layer.WhichOneof("layer")
        if kind in COREML_LAYERS and COREML_LAYERS[kind].weights:
            COREML_LAYERS[kind].weights(getattr(layer, kind), f"Core ML {layer.name}", checks)


def convolution_weights(params, what, checks):
    kh, kw = kernel_of(params)
    groups = params.nGroups or 1
    checks.expect(list(params.dilationFactor) in ([], [1, 1]) and not params.isDeconvolution,
                  f"{what}: only undilated, forward convolutions are expected")
    checks.expect(params.outputChannels % groups == 0,
                  f"{what}: {groups} groups do not divide {params.outputChannels} output channels")
    float_weights(params.weights, params.outputChannels * params.kernelChannels * kh * kw, f"{what} weights", checks)
    if params.hasBias:
        float_weights(params.bias, params.outputChannels, f"{what} bias", checks)


def batchnorm_weights(params, what, checks):
    checks.expect(not params.computeMeanVar and not params.instanceNormalization,
                  f"{what}: batchnorm must use stored statistics")
    for name in ("gamma", "beta", "mean", "variance"):
        float_weights(getattr(params, name), params.channels, f"{what} {name}", checks)


def inner_product_weights(params, what, checks):
    float_weights(params.weights, params.inputChannels * params.outputChannels, f"{what} weights", checks)
    if params.hasBias:
        float_weights(params.bias, params.outputChannels, f"{what} bias", checks)


def run_coreml(spec, image):
    """Forward pass of the classifier spec on one HWC uint8 image; returns the softmax blob."""
    import numpy as np
    network = spec.neuralNetworkClassifier
    color_space = spec.description.input[0].type.imageType.colorSpace
    x = image.astype(np.float32).transpose(2, 0, 1)  # C, H, W; channels R, G, B or grey
    scaler = network.preprocessing[0].scaler
    scale = np.float32(scaler.channelScale or 1.0)  # unset (0) means 1
    if color_space == 10:
        biases = [scaler.grayBias]
    elif color_space == 20:
        biases = [scaler.redBias, scaler.greenBias, scaler.blueBias]
    else:
        x = x[::-1]
        biases = [scaler.blueBias, scaler.greenBias, scaler.redBias]
    blobs = {spec.description.input[0].name: x * scale + np.asarray(biases, dtype=np.float32)[:, None, None]}

    for layer in network.layers:
        kind = layer.WhichOneof("layer")
        if kind not in COREML_LAYERS:
            raise ValueError(f"layer kind {kind!r} is not supported by this checker")
        inputs = [blobs[name] for name in layer.input]
        blobs[layer.output[0]] = COREML_LAYERS[kind].evaluate(getattr(layer, kind), inputs)
    return blobs[network.labelProbabilityLayerName].reshape(-1)


def crop(params, inputs):
    """CropLayerParams with cropAmounts: [H, W] edge sizes cut from a [C, H, W] blob (one input)."""
    (x,) = inputs
    (top, bottom), (left, right) = [(edge.startEdgeSize, edge.endEdgeSize) for edge in params.cropAmounts.borderAmounts]
    return x[:, top:x.shape[1] - bottom, left:x.shape[2] - right]


def add(params, inputs):
    """AddLayerParams: the elementwise sum of all inputs (alpha only joins a single input)."""
    import numpy as np
    return sum(inputs) if len(inputs) > 1 else inputs[0] + np.float32(params.alpha)


def batchnorm(params, inputs):
    import numpy as np
    epsilon = params.epsilon or 1e-5
    gamma, beta, mean, variance = (np.asarray(getattr(params, n).floatValue, dtype=np.float32)
                                   for n in ("gamma", "beta", "mean", "variance"))
    return (inputs[0] - mean[:, None, None]) / np.sqrt(variance + np.float32(epsilon))[:, None, None] \
        * gamma[:, None, None] + beta[:, None, None]


def activation(params, inputs):
    name = params.WhichOneof("NonlinearityType")
    if name not in COREML_ACTIVATIONS:
        raise ValueError(f"activation {name!r} is not supported by this checker")
    return COREML_ACTIVATIONS[name](getattr(params, name), inputs[0])


def relu(params, x):
    import numpy as np
    return np.maximum(x, 0)


def prelu(params, x):
    """One slope per channel (axis -3), applied where x is not positive."""
    import numpy as np
    alpha = np.asarray(params.alpha.floatValue, dtype=np.float32)
    if alpha.size not in (1, x.shape[0]):
        raise ValueError(f"PReLU with {alpha.size} slopes for {x.shape[0]} channels")
    return np.where(x > 0, x, alpha.reshape(-1, 1, 1) * x)


def linear(params, x):
    """ActivationLinear: alpha * x + beta (a route exports as alpha 1, beta 0)."""
    import numpy as np
    return np.float32(params.alpha) * x + np.float32(params.beta)


def upsample(params, inputs):
    """UpsampleLayerParams, mode NN: each value repeated into a scalingFactor [H, W] block."""
    import numpy as np
    if params.mode != params.NN or params.fractionalScalingFactor:
        raise ValueError("only integer nearest-neighbour upsampling is supported by this checker")
    sh, sw = list(params.scalingFactor) or [1, 1]
    return np.repeat(np.repeat(inputs[0], sh, axis=1), sw, axis=2)


def l2normalize(params, inputs):
    """Core ML: x / sqrt(sum over C, H, W of x^2 + epsilon); epsilon 0 means the default 1e-6."""
    import numpy as np
    x = inputs[0]
    epsilon = params.epsilon or 1e-6
    return x / np.sqrt(np.sum(x.astype(np.float64) ** 2) + epsilon).astype(np.float32)


def flatten(params, inputs):
    x = inputs[0]
    return (x if params.mode == 0 else x.transpose(1, 2, 0)).reshape(-1, 1, 1)


def inner_product(params, inputs):
    import numpy as np
    weights = np.asarray(params.weights.floatValue, dtype=np.float32).reshape(
        params.outputChannels, params.inputChannels)
    y = weights @ inputs[0].reshape(-1)
    if params.hasBias:
        y = y + np.asarray(params.bias.floatValue, dtype=np.float32)
    return y.reshape(-1, 1, 1)


def softmax(params, inputs):
    import numpy as np
    shifted = np.exp(inputs[0] - inputs[0].max(axis=0, keepdims=True))
    return shifted / shifted.sum(axis=0, keepdims=True)


def convolution(params, inputs):
    x = inputs[0]
    import numpy as np
    kh, kw = kernel_of(params)
    sh, sw = stride_of(params)
    top, bottom, left, right = padding(params, x.shape[1], x.shape[2])
    padded = np.pad(x, ((0, 0), (top, bottom), (left, right)))
    out_h = (padded.shape[1] - kh) // sh + 1
    out_w = (padded.shape[2] - kw) // sw + 1
    weights = np.asarray(params.weights.floatValue, dtype=np.float32).reshape(
        params.outputChannels, params.kernelChannels, kh, kw)
    # nGroups: output channels g*F/G ..< (g+1)*F/G see input channels g*kernelChannels ..< (g+1)*kernelChannels.
    groups = params.nGroups or 1
    if padded.shape[0] != groups * params.kernelChannels:
        raise ValueError(f"convolution of {padded.shape[0]} channels with {groups} groups of {params.kernelChannels}")
    per_group = params.outputChannels // groups
    y = np.zeros((params.outputChannels, out_h, out_w), dtype=np.float32)
    for g in range(groups):
        inputs = padded[g * params.kernelChannels:(g + 1) * params.kernelChannels]
        outputs = slice(g * per_group, (g + 1) * per_group)
        for i in range(kh):
            for j in range(kw):
                window = inputs[:, i:i + sh * (out_h - 1) + 1:sh, j:j + sw * (out_w - 1) + 1:sw]
                y[outputs] += np.tensordot(weights[outputs, :, i, j], window, axes=([1], [0]))
    if params.hasBias:
        y += np.asarray(params.bias.floatValue, dtype=np.float32)[:, None, None]
    return y


def pooling(params, inputs):
    import numpy as np
    x = inputs[0]
    average = params.type == params.AVERAGE
    if params.type not in (params.MAX, params.AVERAGE):
        raise ValueError("only MAX and AVERAGE pooling are supported by this checker")
    if params.globalPooling:
        return (x.mean if average else x.max)(axis=(1, 2), keepdims=True)
    kh, kw = kernel_of(params)
    sh, sw = stride_of(params)
    top, bottom, left, right = padding(params, x.shape[1], x.shape[2])
    if average and (top or bottom or left or right):
        raise ValueError("padded average pooling is not supported by this checker")
    padded = np.pad(x, ((0, 0), (top, bottom), (left, right)), constant_values=-np.inf)
    out_h = (padded.shape[1] - kh) // sh + 1
    out_w = (padded.shape[2] - kw) // sw + 1
    windows = [padded[:, i:i + sh * (out_h - 1) + 1:sh, j:j + sw * (out_w - 1) + 1:sw]
               for i in range(kh) for j in range(kw)]
    return np.mean(windows, axis=0) if average else np.max(windows, axis=0)


class CoreMLLayer:
    """How this checker evaluates one Core ML layer kind, and checks its weights (None: it has none)."""

    def __init__(self, evaluate, weights=None):
        self.evaluate = evaluate
        self.weights = weights


# The one table of Core ML layers (NeuralNetworkLayer oneof names) and activations this checker can
# evaluate. facetrain's "operations" table says which its exports use; each must be listed here.
COREML_LAYERS = {
    "convolution": CoreMLLayer(convolution, convolution_weights),
    "batchnorm": CoreMLLayer(batchnorm, batchnorm_weights),
    "activation": CoreMLLayer(activation),
    "l2normalize": CoreMLLayer(l2normalize),
    "pooling": CoreMLLayer(pooling),
    "flatten": CoreMLLayer(flatten),
    "innerProduct": CoreMLLayer(inner_product, inner_product_weights),
    "softmax": CoreMLLayer(softmax),
    "add": CoreMLLayer(add),
    "crop": CoreMLLayer(crop),
    "upsample": CoreMLLayer(upsample),
}
COREML_ACTIVATIONS = {
    "ReLU": relu,
    "PReLU": prelu,
    "linear": linear,
}


def check_coreml(path, cases_file, checks, batch):
    import coremltools
    import numpy as np
    spec = coremltools.utils.load_spec(path)
    check_coreml_structure(spec, cases_file, checks)
    check_coreml_weights(spec, checks)
    labels = cases_file["labels"]
    probabilities = np.stack([run_coreml(spec, image) for image in batch])
    checks.equal(probabilities.shape[1], len(labels), "Core ML softmax width vs number of labels")
    return probabilities


# ---------------------------------------------------------------------------------------------

def compare(what, got, cases_file, checks):
    import numpy as np
    labels = cases_file["labels"]
    tolerance = cases_file["tolerance"]
    worst = 0.0
    for case, row in zip(cases_file["cases"], got):
        expected = np.asarray(case["probabilities"], dtype=np.float64)
        if not checks.equal(row.shape, expected.shape, f"{what} {case['name']}: probability count"):
            continue
        difference = float(np.max(np.abs(row.astype(np.float64) - expected)))
        worst = max(worst, difference)
        checks.expect(difference <= tolerance,
                      f"{what} {case['name']}: probabilities differ from the expected ones by {difference:.3g} "
                      f"(tolerance {tolerance})")
        checks.equal(labels[int(np.argmax(row))], labels[int(np.argmax(expected))], f"{what} {case['name']}: top label")
        checks.expect(abs(float(row.sum()) - 1) < 1e-4, f"{what} {case['name']}: probabilities sum to {row.sum()}")
    return worst


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    require_modules()
    import numpy as np

    with open(argv[1], encoding="utf-8") as handle:
        cases_file = json.load(handle)
    spec = cases_file["input"]
    shape = (spec["height"], spec["width"], spec["channels"])
    batch = np.stack([np.asarray(case["pixels"], dtype=np.uint8).reshape(shape) for case in cases_file["cases"]])

    checks = Checks()
    check_table(cases_file, checks)
    onnx_probabilities = check_onnx(cases_file["onnx"], cases_file, checks, batch)
    coreml_probabilities = check_coreml(cases_file["mlmodel"], cases_file, checks, batch)
    onnx_worst = compare("onnxruntime", onnx_probabilities, cases_file, checks)
    coreml_worst = compare("Core ML (numpy)", coreml_probabilities, cases_file, checks)
    between = float(np.max(np.abs(onnx_probabilities - coreml_probabilities)))

    print(f"cases: {len(cases_file['cases'])}, classes: {len(cases_file['labels'])}, checks: {checks.count}")
    print(f"max |p - expected|: onnxruntime {onnx_worst:.3g}, Core ML numpy {coreml_worst:.3g}; "
          f"between the two files {between:.3g}")
    if checks.failures:
        print(f"{len(checks.failures)} check(s) FAILED")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
