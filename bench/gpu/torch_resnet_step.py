#!/usr/bin/env python3
"""Time PyTorch training steps of the sdp-engine's CIFAR ResNets on a GPU.

The reference the engine's `sdp-train --model resnet18 ...` is measured
against: the same network (bench/torch_ref/resnet_torch.py, checked against
the engine by resnet_check_step.py), the same unit of work per step
(zero_grad(set_to_none=True), forward, mean cross entropy, backward,
clipping to global norm 1.0, AdamW with weight decay on >= 2-D parameters),
one fixed batch of random images [B, 3, H, W] and labels on the device.
Eager mode, NCHW (channels_last off), cuDNN with benchmark off.

    python3 bench/gpu/torch_resnet_step.py --model resnet18 --batch 128 \\
        --precision autocast --json out.json
    /usr/bin/python3 bench/gpu/torch_resnet_step.py --model resnet-tiny --device cpu   # a quick test

Precision (--precision):
  autocast (default on cuda): fp32 parameters, gradients and AdamW state,
      convolutions and the classifier in bf16 under torch.autocast, BatchNorm
      in fp32 (autocast's rule). The engine's bf16 keeps bf16 parameters and
      activations beside fp32 master weights and AdamW state.
  f32: plain fp32, TF32 off for convolutions and matmuls (the engine's f32
      does not use TF32 either).

FLOPs per step (formula, the same for every implementation; summarize.py
restates it): 2 x multiply-adds of every convolution and of the classifier,
3 times (forward, input gradient, weight gradient), less the stem's input
gradient (no one needs the images' gradient).

Prints one JSON object (and writes it to --json): images_per_s, step_ms
(median of the timed steps), max_memory_allocated / max_memory_reserved
(bytes, CUDA only), params, flops_per_step, losses, versions.
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch_ref"))

# As models/resnet/resnet_config.cpp: (widths, blocks per stage).
MODELS = {
    "resnet-tiny": ((4, 8, 8, 16), (2, 1, 1, 1)),
    "resnet-mini": ((16, 32, 64, 128), (2, 2, 2, 2)),
    "resnet18": ((64, 128, 256, 512), (2, 2, 2, 2)),
    "wrn18": ((128, 256, 512, 1024), (2, 2, 2, 2)),
}


def forward_macs(model, height, width, classes, in_channels=3):
    """Multiply-adds of one image's forward: (stem, everything else)."""
    widths, blocks = MODELS[model]
    stem = widths[0] * in_channels * 9 * height * width
    macs, cin, h, w = 0, widths[0], height, width
    for s, (cout, nb) in enumerate(zip(widths, blocks)):
        for b in range(nb):
            stride = 2 if (s > 0 and b == 0) else 1
            ho, wo = (h - 1) // stride + 1, (w - 1) // stride + 1
            macs += cout * cin * 9 * ho * wo + cout * cout * 9 * ho * wo
            if stride != 1 or cin != cout:
                macs += cout * cin * ho * wo
            cin, h, w = cout, ho, wo
    return stem, macs + classes * cin


def step_flops(model, batch, height, width, classes):
    """Training FLOPs of one step, as the module doc says."""
    stem, rest = forward_macs(model, height, width, classes)
    return batch * (2 * stem * 2 + 2 * rest * 3)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=sorted(MODELS), default="resnet18")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--height", type=int, default=32)
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    p.add_argument("--precision", choices=("autocast", "f32"), default=None,
                   help="default: autocast on cuda, f32 on cpu")
    p.add_argument("--device", default="cuda", help="cuda or cpu")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="CPU threads (cpu device); 0 = torch's")
    p.add_argument("--json", default=None, help="also write the result object to this file")
    args = p.parse_args(argv)
    if args.steps < 1 or args.warmup < 0 or args.batch < 1:
        p.error("--steps and --batch must be >= 1 and --warmup >= 0")
    if args.precision is None:
        args.precision = "autocast" if args.device.startswith("cuda") else "f32"
    return args


def emit(result, path):
    text = json.dumps(result, sort_keys=True)
    print(text, flush=True)
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text + "\n")


def main(argv=None):
    args = parse_args(argv)
    import torch
    import torch.nn.functional as F
    from resnet_torch import CifarResNet, ResNetConfig

    result = {
        "impl": "torch-eager", "model": args.model, "batch": args.batch,
        "image": [3, args.height, args.width], "precision": args.precision,
        "device": args.device, "torch_version": torch.__version__, "steps": args.steps,
        "warmup": args.warmup,
        "flops_per_step": step_flops(args.model, args.batch, args.height, args.width,
                                     args.classes),
    }
    on_cuda = args.device.startswith("cuda")
    if on_cuda and not torch.cuda.is_available():
        result.update(status="skipped", reason="torch sees no CUDA device")
        emit(result, args.json)
        return 0
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    device = torch.device(args.device)
    if on_cuda:
        torch.cuda.set_device(device)
        result["device_name"] = torch.cuda.get_device_name(device)
        result["cudnn_version"] = torch.backends.cudnn.version()
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = False
    torch.manual_seed(args.seed)
    model = CifarResNet(ResNetConfig.named(args.model, num_classes=args.classes))
    model = model.to(device).train()
    result["params"] = sum(q.numel() for q in model.parameters())
    fused = {"fused": True} if on_cuda else {}
    opt = torch.optim.AdamW(model.decay_groups(0.1), lr=args.lr, betas=(0.9, 0.95), eps=1e-8,
                            **fused)

    generator = torch.Generator().manual_seed(args.seed + 1)
    images = torch.randn(args.batch, 3, args.height, args.width, generator=generator).to(device)
    labels = torch.randint(0, args.classes, (args.batch,), generator=generator).to(device)

    def sync():
        if on_cuda:
            torch.cuda.synchronize(device)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16,
                            enabled=args.precision == "autocast"):
            logits = model(images)
        loss = F.cross_entropy(logits.float(), labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    losses = []
    t0 = time.perf_counter()
    for _ in range(args.warmup):
        losses.append(step().item())
    sync()
    result["warmup_s"] = round(time.perf_counter() - t0, 3)
    if on_cuda:
        torch.cuda.reset_peak_memory_stats(device)  # the steady state, as ours is per step

    times = []
    for _ in range(args.steps):
        sync()
        start = time.perf_counter()
        loss = step()
        sync()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())

    step_s = statistics.median(times)
    result.update(
        status="ok",
        step_ms=round(step_s * 1e3, 3),
        step_ms_min=round(min(times) * 1e3, 3),
        images_per_s=round(args.batch / step_s, 1),
        achieved_tflops=round(result["flops_per_step"] / step_s / 1e12, 3),
        loss_first=round(losses[0], 4),
        loss_last=round(losses[-1], 4),
    )
    if on_cuda:
        result["max_memory_allocated"] = torch.cuda.max_memory_allocated(device)
        result["max_memory_reserved"] = torch.cuda.max_memory_reserved(device)
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
