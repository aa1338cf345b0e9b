#!/usr/bin/python3
"""Time one fp32 training step of a CIFAR image classifier in PyTorch on CPU.

The model is the PyTorch twin of a CIFAR ResNet (resnet_torch.py) or, for the
engine's Swin Transformers (swin-t, swin-mini, swin-micro), timm's
SwinTransformer (swin_timm.py; run with the reference environment's python,
scripts/setup-python-ref.sh, which has timm), drop path off.

A step is zero_grad(set_to_none=True), forward, mean cross entropy,
backward, gradient clipping to global norm --grad-clip (the engine's
default 1.0; 0 = none) and an AdamW step with weight decay on >= 2-D
parameters only: the unit of work sdp-train times per step (its steps also
draw the batch; bench/resnet_cpu_vs_torch.sh says how much that costs).
Inputs: one fixed batch of normal random images [B, 3, H, W] and random
labels, so data loading is not timed here.

    /usr/bin/python3 bench/torch_ref/resnet_step_bench.py --model resnet18 --batch 32 \\
        --threads 1 --steps 5 --warmup 2 --json
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet18",
                   help="resnet-tiny, resnet-mini, resnet18, wrn18; swin-t, swin-mini (timm)")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--height", type=int, default=32)
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=5, help="timed steps")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print one JSON line only")
    args = p.parse_args(argv)
    if args.steps < 1 or args.batch < 1 or args.warmup < 0:
        p.error("--steps and --batch must be >= 1, --warmup >= 0")

    # Debian's torch runs its GEMMs in the system OpenBLAS, whose thread pool
    # is sized from the environment at load time and ignores
    # torch.set_num_threads: pin it before the import.
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    import torch
    import torch.nn.functional as F
    import swin_timm
    from resnet_torch import CifarResNet, ResNetConfig

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    if swin_timm.is_swin(args.model):
        model = swin_timm.make(args.model, num_classes=args.classes).train()
    else:
        model = CifarResNet(ResNetConfig.named(args.model, num_classes=args.classes)).train()
    # AdamW groups as the engine's: decay only on >= 2-D parameters.
    groups = [{"params": [q for q in model.parameters() if q.ndim >= 2],
               "weight_decay": args.weight_decay},
              {"params": [q for q in model.parameters() if q.ndim < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.999), eps=1e-8)
    n_params = sum(q.numel() for q in model.parameters())
    images = torch.randn(args.batch, 3, args.height, args.width)
    labels = torch.randint(0, args.classes, (args.batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        if args.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        return loss.item()

    for _ in range(args.warmup):
        step()
    times_ms, cpu_ms = [], []
    loss = float("nan")
    for _ in range(args.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        loss = step()
        times_ms.append((time.perf_counter() - t0) * 1e3)
        cpu_ms.append((time.process_time() - c0) * 1e3)

    ms = statistics.median(times_ms)
    result = {
        "impl": "pytorch", "model": args.model, "batch": args.batch,
        "image": [3, args.height, args.width], "ms_per_step": round(ms, 3),
        "min_ms": round(min(times_ms), 3), "cpu_ms_per_step": round(statistics.median(cpu_ms), 3),
        "images_per_s": round(args.batch / (ms / 1e3), 2), "steps": args.steps,
        "warmup": args.warmup, "threads": torch.get_num_threads(), "params": n_params,
        "torch_version": torch.__version__, "mkldnn": torch.backends.mkldnn.is_available(),
        "last_loss": round(loss, 4),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"pytorch {torch.__version__}, {result['threads']} thread(s), mkldnn "
              f"{result['mkldnn']}; {args.model} ({n_params / 1e6:.2f}M params), batch "
              f"{args.batch} x 3 x {args.height} x {args.width}")
        print(f"median {ms:.1f} ms/step (min {min(times_ms):.1f}) over {args.steps} steps, "
              f"{result['images_per_s']:.1f} images/s, last loss {loss:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
