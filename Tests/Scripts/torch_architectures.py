#!/usr/bin/env python3
"""facetrain's named architectures as PyTorch modules, and a CPU benchmark of one of them.

usage: python3 torch_architectures.py --architecture ref-small|ref-small-gdc|ref-deep-gdc|mobile-face [--width 16] [--classes 42]
       [--input-size 64] [--batch 32]
                                      [--threads 2] [--batch 32] [--infer-batch 64] [--seconds 2]
                                      [--channels-last]

The modules follow Sources/FaceTrain/Model/Architecture.swift layer for layer (the same
convolutions, groups, batch norms, residual adds, BN neck, L2 normalisation to length 16 and
linear classifier), so their trainable parameter count equals `facetrain architectures --json`'s;
bench.sh checks that. The benchmark mirrors `facetrain bench`: random data, a training step of
forward + cross-entropy + backward + SGD (momentum 0.9, weight decay 5e-4), inference at
--infer-batch, batch-1 latency. The last line is JSON in the layout of ../shared/bench/bench_torch.py
({"train": {"<batch>": {"img_s"}}, "infer_img_s", "latency_b1_ms", "peak_rss_mb"}) plus "parameters".
"""
import argparse
import json
import resource
import statistics
import time


def conv_bn(nn, inputs, outputs, kernel, stride=1, groups=1, relu=True):
    layers = [nn.Conv2d(inputs, outputs, kernel, stride=stride, padding=kernel // 2, groups=groups),
              nn.BatchNorm2d(outputs, eps=1e-5, momentum=0.1)]
    if relu:
        layers.append(nn.ReLU())
    return layers


def build(name, width, classes, input_size=64):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Residual(nn.Module):
        """y = x + body(x): facetrain's add(source:) over one inverted bottleneck."""

        def __init__(self, body):
            super().__init__()
            self.body = body

        def forward(self, x):
            return x + self.body(x)

    class Head(nn.Module):
        """Global average pool, BN neck, the embedding scaled to length 16, linear classifier."""

        def __init__(self, features):
            super().__init__()
            self.neck = nn.BatchNorm1d(features, eps=1e-5, momentum=0.1)
            self.linear = nn.Linear(features, classes)

        def forward(self, x):
            x = self.neck(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
            return self.linear(16 * F.normalize(x, dim=1, eps=1e-6))

    layers = []
    if name in ("ref-small", "ref-small-gdc"):
        inputs = 3
        for outputs in (width, 2 * width, 4 * width):
            layers += conv_bn(nn, inputs, outputs, 3) + [nn.MaxPool2d(2, 2)]
            inputs = outputs
        layers += conv_bn(nn, inputs, 8 * width, 3)
        if name == "ref-small-gdc":
            # The global depthwise convolution over the last map (8x8 for a 64-px input).
            layers.append(nn.Conv2d(8 * width, 8 * width, input_size // 8, groups=8 * width))
    elif name == "ref-deep-gdc":
        inputs = 3
        for stage, outputs in enumerate((width, 2 * width, 4 * width, 8 * width)):
            layers += conv_bn(nn, inputs, outputs, 3)
            if stage > 0:
                layers += conv_bn(nn, outputs, outputs, 3)
            if stage < 3:
                layers.append(nn.MaxPool2d(2, 2))
            inputs = outputs
        layers.append(nn.Conv2d(8 * width, 8 * width, input_size // 8, groups=8 * width))
    elif name == "mobile-face":
        stem = 2 * width
        layers += conv_bn(nn, 3, stem, 3, stride=2)
        layers += conv_bn(nn, stem, stem, 3, groups=stem)
        current = stem
        stages = [(2, 2 * width, 2, 2), (4, 4 * width, 1, 2), (2, 4 * width, 3, 1), (4, 4 * width, 1, 2),
                  (2, 4 * width, 2, 1)]
        for expansion, outputs, repeats, first_stride in stages:
            for block in range(repeats):
                stride = first_stride if block == 0 else 1
                expanded = current * expansion
                body = nn.Sequential(*(conv_bn(nn, current, expanded, 1)
                                       + conv_bn(nn, expanded, expanded, 3, stride=stride, groups=expanded)
                                       + conv_bn(nn, expanded, outputs, 1, relu=False)))
                layers.append(Residual(body) if stride == 1 and current == outputs else body)
                current = outputs
        layers += conv_bn(nn, current, 8 * width, 1)
    else:
        raise SystemExit(f"architecture {name!r} is not known; known: ref-small, ref-small-gdc, ref-deep-gdc, mobile-face")
    return nn.Sequential(*layers, Head(8 * width))


def timed(step, seconds):
    """Per-call seconds of `step` over about `seconds`, after a short warm-up."""
    for _ in range(3):
        step()
    times = []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds or len(times) < 3:
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--architecture", default="ref-small")
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--classes", type=int, default=42)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--input-size", type=int, default=64)
    ap.add_argument("--infer-batch", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--channels-last", action="store_true")
    a = ap.parse_args()

    import torch
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    model = build(a.architecture, a.width, a.classes, a.input_size).to(memory_format=fmt)
    parameters = sum(p.numel() for p in model.parameters() if p.requires_grad)

    def images(batch):
        return torch.randn(batch, 3, a.input_size, a.input_size).contiguous(memory_format=fmt)

    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y = images(a.batch), torch.randint(0, a.classes, (a.batch,))

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        optimizer.step()

    train = statistics.median(timed(step, a.seconds))
    model.eval()
    with torch.inference_mode():
        xi = images(a.infer_batch)
        infer = statistics.median(timed(lambda: model(xi), a.seconds / 2))
        x1 = images(1)
        latency = statistics.median(timed(lambda: model(x1), a.seconds / 2))
    result = {"bench": "torch", "torch": torch.__version__, "architecture": a.architecture, "width": a.width,
              "threads": torch.get_num_threads(), "channels_last": a.channels_last, "parameters": parameters,
              "train": {str(a.batch): {"img_s": round(a.batch / train, 1), "ms_per_step": round(1e3 * train, 2)}},
              "infer_batch": a.infer_batch, "infer_img_s": round(a.infer_batch / infer, 1),
              "latency_b1_ms": round(1e3 * latency, 3),
              "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    print(f"{a.architecture} width {a.width}: train b={a.batch} {result['train'][str(a.batch)]['img_s']} img/s, "
          f"infer b={a.infer_batch} {result['infer_img_s']} img/s, b=1 latency {result['latency_b1_ms']} ms, "
          f"{parameters} parameters")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
