"""onnxruntime's side of `make bench-inference`: batch-64 throughput and batch-1 latency of one ONNX
model on the CPU provider with a fixed number of intra-op threads, printed as one JSON line.

Not a test: it measures, it checks nothing. The model's first input is fed random images of its
own shape (a symbolic batch dimension becomes the batch size asked for; a symbolic height and
width, a detector's, become --height and --width).
"""

import argparse
import json
import time

import numpy as np
import onnxruntime


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--width", type=int, default=640)
    args = parser.parse_args()

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = onnxruntime.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])
    entry = session.get_inputs()[0]
    symbolic = [1, 1, args.height, args.width]
    shape = [dimension if isinstance(dimension, int) else symbolic[axis] for axis, dimension in enumerate(entry.shape)]
    generator = np.random.default_rng(1)

    def images(count):
        return generator.standard_normal([count] + shape[1:]).astype(np.float32)

    def timed(feed, warm_ups, at_least):
        """Seconds per run of `feed`, over `args.seconds` and at least `at_least` runs."""
        for _ in range(warm_ups):
            session.run(None, {entry.name: feed})
        times = []
        start = time.perf_counter()
        while time.perf_counter() - start < args.seconds or len(times) < at_least:
            began = time.perf_counter()
            session.run(None, {entry.name: feed})
            times.append(time.perf_counter() - began)
        return times

    times = timed(images(args.batch), 3, 3)
    latencies = timed(images(1), 20, 20)
    latencies.sort()

    def percentile(values, share):
        return values[min(len(values) - 1, int(len(values) * share))]

    print(json.dumps({
        "onnxruntime": onnxruntime.__version__,
        "threads": args.threads,
        "input": [args.batch] + shape[1:],
        "images_per_second": args.batch / float(np.median(times)),
        "latency_batch1_ms": 1e3 * float(np.median(latencies)),
        "latency_batch1_p99_ms": 1e3 * percentile(latencies, 0.99),
    }))


if __name__ == "__main__":
    main()
