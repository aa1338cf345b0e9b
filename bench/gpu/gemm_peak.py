#!/usr/bin/env python3
"""Measure the GPU's bf16 matrix-multiply rate through torch: the ceiling MFU is taken against.

    python3 bench/gpu/gemm_peak.py --json peak.json [--size 8192]

Random bf16 operands (zeros run faster and would flatter the peak), several
operand sets in rotation so that no product reads another's output from L2,
warm-up first, then each product timed with CUDA events; reports the median
and best TFLOP/s beside the datasheet's dense bf16 figure for the H100/H200
SXM (989 TFLOP/s). Without a GPU it reports status "skipped" (or, with
--device cpu, times a small float32 product, to test this script).
"""

import argparse
import json
import statistics
import sys
import time

SPEC_BF16_DENSE_TFLOPS = 989.0  # H100 / H200 SXM datasheet, dense (no sparsity)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=8192, help="M = N = K")
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--device", default="cuda")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)

    import torch

    n = args.size
    result = {"size": n, "spec_tflops": SPEC_BF16_DENSE_TFLOPS, "torch_version": torch.__version__}
    on_cuda = args.device.startswith("cuda")
    if on_cuda and not torch.cuda.is_available():
        result.update(status="skipped", reason="torch sees no CUDA device")
    elif on_cuda:
        device = torch.device(args.device)
        result["device_name"] = torch.cuda.get_device_name(device)
        sets = [(torch.randn(n, n, device=device, dtype=torch.bfloat16),
                 torch.randn(n, n, device=device, dtype=torch.bfloat16)) for _ in range(3)]
        out = torch.empty(n, n, device=device, dtype=torch.bfloat16)
        for a, b in sets * 2:  # warm-up: cuBLAS handle, heuristics, clocks
            torch.matmul(a, b, out=out)
        torch.cuda.synchronize(device)
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(args.repeats)]
        for i, (start, stop) in enumerate(events):
            a, b = sets[i % len(sets)]
            start.record()
            torch.matmul(a, b, out=out)
            stop.record()
        torch.cuda.synchronize(device)
        ms = [start.elapsed_time(stop) for start, stop in events]
        flops = 2.0 * n * n * n
        result.update(status="ok", dtype="bf16", ms_median=round(statistics.median(ms), 4),
                      tflops_median=round(flops / (statistics.median(ms) * 1e-3) / 1e12, 1),
                      tflops_best=round(flops / (min(ms) * 1e-3) / 1e12, 1))
    else:
        n = min(n, 512)
        a, b = torch.randn(n, n), torch.randn(n, n)
        torch.matmul(a, b)
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            torch.matmul(a, b)
            times.append(time.perf_counter() - t0)
        flops = 2.0 * n * n * n
        result.update(status="ok", dtype="f32", device_name="cpu", size=n,
                      ms_median=round(statistics.median(times) * 1e3, 4),
                      tflops_median=round(flops / statistics.median(times) / 1e12, 4),
                      tflops_best=round(flops / min(times) / 1e12, 4))
    text = json.dumps(result, sort_keys=True)
    print(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
