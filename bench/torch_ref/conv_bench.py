#!/usr/bin/python3
"""Time PyTorch's CPU conv2d (forward, backward input, backward weight) on
the 3x3 layers of a CIFAR ResNet-18, the reference for bench/bench_conv.cpp.

Same shapes, same order and the same report format as bench_conv, so the two
outputs can be read side by side. Backward halves are timed separately
through aten.convolution_backward with one output mask each (what autograd
calls for a conv whose input and weight both need gradients, split in two).
Run with Debian's interpreter (/usr/bin/python3, python3-torch), one thread:

    /usr/bin/python3 bench/torch_ref/conv_bench.py --batch 32
"""

import argparse
import statistics
import time

import torch

# (channels, spatial size, stride): the stride-1 3x3 convs of each stage,
# then (with --all) the stride-2 3x3 convs entering stages 2-4.
LAYERS = [(64, 32, 1), (128, 16, 1), (256, 8, 1), (512, 4, 1)]
DOWNSAMPLE = [(128, 32, 2), (256, 16, 2), (512, 8, 2)]


def median_ms(fn, iters, warmup):
    """Median wall ms of fn, its fastest run and its mean process CPU ms (on a
    shared machine wall time includes waiting for a core; one thread's CPU
    time does not; the fastest run is the least disturbed)."""
    for _ in range(warmup):
        fn()
    times = []
    c0 = time.process_time()
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), min(times), (time.process_time() - c0) * 1e3 / iters


def bench_layer(batch, cout, size, stride, iters, warmup):
    cin = cout // stride  # a downsampling conv doubles the channels
    x = torch.randn(batch, cin, size, size)
    w = torch.randn(cout, cin, 3, 3) * 0.05
    y = torch.nn.functional.conv2d(x, w, stride=stride, padding=1)
    dy = torch.randn_like(y)
    conv_bwd = torch.ops.aten.convolution_backward

    def backward(mask):
        return lambda: conv_bwd(dy, x, w, None, [stride, stride], [1, 1], [1, 1], False,
                                [0, 0], 1, mask)

    with torch.no_grad():
        fwd, fwd_min, fwd_cpu = median_ms(
            lambda: torch.nn.functional.conv2d(x, w, stride=stride, padding=1), iters, warmup)
        bwd_in, bwd_in_min, bwd_in_cpu = median_ms(backward([True, False, False]), iters, warmup)
        bwd_w, bwd_w_min, bwd_w_cpu = median_ms(backward([False, True, False]), iters, warmup)
    flops = 2.0 * batch * cout * y.shape[2] * y.shape[3] * cin * 9
    total = fwd + bwd_in + bwd_w
    fastest = fwd_min + bwd_in_min + bwd_w_min
    print(f"B={batch:3d} Cin={cin:3d} Cout={cout:3d} {size:2d}x{size:<2d} s{stride}  "
          f"fwd {fwd:7.2f}  bwd_in {bwd_in:7.2f}  bwd_w {bwd_w:7.2f}  total {total:7.2f} ms "
          f"(min {fastest:7.2f}, cpu {fwd_cpu + bwd_in_cpu + bwd_w_cpu:7.2f})  "
          f"{3 * flops / total / 1e6:6.1f} GFLOP/s")
    return total, fastest


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--all", action="store_true", help="also the stride-2 3x3 convs")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
          f"mkldnn {torch.backends.mkldnn.is_available()}")
    layers = LAYERS + (DOWNSAMPLE if args.all else [])
    results = [bench_layer(args.batch, c, s, st, args.iters, args.warmup)
               for c, s, st in layers]
    print(f"sum over layers: {sum(r[0] for r in results):.1f} ms "
          f"(min {sum(r[1] for r in results):.1f})")


if __name__ == "__main__":
    main()
