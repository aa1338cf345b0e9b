#!/usr/bin/python3
"""Cross-check one sdp-train training step and one evaluation of a CIFAR ResNet against PyTorch.

    /usr/bin/python3 bench/torch_ref/resnet_check_step.py [--bin build/bin/sdp-train]
        [--model resnet-mini] [--images 64] [--dtype f64 f32]

What it does (about half a minute for resnet-mini on one core):
 1. Writes a CIFAR-10 binary data set of random pixels and labels (numpy)
    into a temporary folder, so both sides read the same images: the
    engine through its cifar10: reader (augmentation off, `limit=N`: the
    first N images of each split), torch from the same bytes, normalized by
    the same float32 formula (image_augment.h).
 2. Runs sdp-train for 2 steps of batch N = the whole (limited) train split,
    saving a checkpoint after each and evaluating after the second. Each
    step's batch is then every train image (in a shuffled order, which
    BatchNorm's statistics and the mean loss do not depend on).
    AdamW is made stateless and linear in the gradient: beta1 = beta2 = 0
    gives m = g, v = g^2 without bias correction, and eps = 1 makes the
    update lr g / (|g| + 1), about lr g; weight decay on >= 2-D parameters
    only; constant lr; no clipping.
 3. Loads the step-1 checkpoint (weights and BatchNorm running statistics)
    into resnet_torch.CifarResNet in float64 and repeats step 2 there:
    train-mode forward, mean cross entropy, backward, the same AdamW step;
    compares with the engine's step 2 (its metrics and step-2 checkpoint):
      - the train loss and the gradient norm (before any update);
      - every parameter after the update: max |ours - torch| over max
        |torch's update| per tensor, i.e. the relative error of
        lr g / (|g| + 1), the gradient's relative error at first order;
      - every running mean / variance (momentum 0.1 toward the batch mean
        and the unbiased variance);
 4. and the eval loss: the engine's step-2 checkpoint in eval mode (running
    statistics) on the first N validation images, against the engine's
    eval loss of step 2.
The engine runs once in f64 (must agree with torch float64 within --tol64:
the same arithmetic, so only summation order differs) and once in f32
(passes within --tol, or when no worse than torch's own float32 run of the
same step against its float64 one: f32 rounding is amplified by this deep
network, by as much as 1e-2 relative in some gradients).
Exit 0 pass, 1 fail, 2 bad setup.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

RECORDS_PER_FILE = 10000  # the reader insists on full CIFAR-10 files
CIFAR10_MEAN = np.array([0.4914, 0.4822, 0.4465], dtype=np.float32)  # image_augment.h
CIFAR10_STD = np.array([0.2470, 0.2435, 0.2616], dtype=np.float32)


def write_cifar10(folder, rng):
    """data_batch_1..5.bin and test_batch.bin: records of label byte + 3 x 32 x 32 pixel bytes."""
    first = {}
    for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
        labels = rng.integers(0, 10, RECORDS_PER_FILE, dtype=np.uint8)
        pixels = rng.integers(0, 256, (RECORDS_PER_FILE, 3072), dtype=np.uint8)
        np.concatenate([labels[:, None], pixels], axis=1).tofile(os.path.join(folder, name))
        first[name] = (labels, pixels)
    return first


def normalized(pixels):
    """[N, 3072] uint8 -> [N, 3, 32, 32] float32 as the engine: (p / 255 - mean) / std in f32."""
    x = pixels.reshape(-1, 3, 32, 32).astype(np.float32) / np.float32(255.0)
    return (x - CIFAR10_MEAN[None, :, None, None]) / CIFAR10_STD[None, :, None, None]


def rel(a, b, scale):
    return float(np.max(np.abs(a - b))) / scale if scale > 0 else float(np.max(np.abs(a - b)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", default=os.path.join(HERE, "..", "..", "build", "bin", "sdp-train"))
    p.add_argument("--model", default="resnet-mini")
    p.add_argument("--images", type=int, default=64, help="N: train batch = eval batch")
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--dtype", nargs="+", choices=("f64", "f32"), default=["f64", "f32"],
                   help="the engine's dtypes to check (default both)")
    p.add_argument("--tol", type=float, default=1e-4,
                   help="f32: pass within this relative error, or within torch f32's own error")
    p.add_argument("--tol64", type=float, default=1e-10, help="f64: pass within this")
    p.add_argument("--keep", default=None, help="keep the data and checkpoints in this folder")
    args = p.parse_args(argv)
    if not os.access(args.bin, os.X_OK):
        print(f"resnet_check_step: no executable {args.bin}: build sdp-train first", file=sys.stderr)
        return 2

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    work = args.keep or tempfile.mkdtemp(prefix="resnet_check_")
    data_dir = os.path.join(work, "cifar10")
    os.makedirs(data_dir, exist_ok=True)
    files = write_cifar10(data_dir, np.random.default_rng(20261130))
    torch.set_num_threads(1)
    ok = True
    for dtype in args.dtype:
        ok &= check(args, dtype, work, data_dir, files) == 0
    print(("PASS" if ok else "FAIL") + f"; files in {work}")
    return 0 if ok else 1


def engine_run(args, dtype, work, data_dir):
    """sdp-train's 2 steps; returns (metrics of step 2, save dir) or None."""
    n = args.images
    save_dir = os.path.join(work, f"ckpt_{dtype}")
    metrics = os.path.join(work, f"metrics_{dtype}.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [args.bin, "--model", args.model, "--data", f"cifar10:{data_dir},augment=0,limit={n}",
           "--batch", str(n), "--steps", "2", "--save-every", "1", "--save-dir", save_dir,
           "--lr", str(args.lr), "--min-lr", str(args.lr), "--warmup", "0", "--beta1", "0",
           "--beta2", "0", "--eps", "1", "--weight-decay", str(args.weight_decay),
           "--grad-clip", "0", "--eval-every", "2", "--eval-batches", "1", "--threads", "1",
           "--dtype", dtype, "--seed", "7", "--metrics", metrics, "--progress", "false"]
    print("$ " + " ".join(cmd))
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        print(run.stdout + run.stderr, file=sys.stderr)
        return None
    with open(metrics, encoding="utf-8") as f:
        step2 = next(r for r in map(json.loads, f) if r.get("step") == 2)
    return step2, save_dir


def torch_step(cfg, w1, w2, files, n, lr, weight_decay, dt):
    """Step 2 from the step-1 checkpoint w1, and eval of the engine's step-2 checkpoint w2."""
    import torch
    import torch.nn.functional as F
    from resnet_torch import CifarResNet, load_tensors

    model = load_tensors(CifarResNet(cfg), w1, dtype=dt).train()
    train_labels, train_pixels = files["data_batch_1.bin"]
    x = torch.from_numpy(normalized(train_pixels[:n])).to(dt)
    y = torch.from_numpy(train_labels[:n].astype(np.int64))
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    grad_norm = math.sqrt(sum(float((q.grad.double() ** 2).sum()) for q in model.parameters()))
    opt = torch.optim.AdamW(model.decay_groups(weight_decay), lr=lr, betas=(0.0, 0.0), eps=1.0)
    opt.step()
    state = {k: v.detach().double().numpy() for k, v in model.state_dict().items()}

    evaluated = load_tensors(CifarResNet(cfg), w2, dtype=dt).eval()
    val_labels, val_pixels = files["test_batch.bin"]
    with torch.no_grad():
        eval_loss = F.cross_entropy(
            evaluated(torch.from_numpy(normalized(val_pixels[:n])).to(dt)),
            torch.from_numpy(val_labels[:n].astype(np.int64))).item()
    return {"loss": loss.item(), "grad_norm": grad_norm, "state": state, "eval_loss": eval_loss}


def errors(got, ref, w1):
    """Relative errors of `got` (loss, grad norm, parameters after the update, running
    statistics, eval loss) against the float64 reference `ref`."""
    worst_param, worst_stat = ("", 0.0), ("", 0.0)
    for name, value in got["state"].items():
        if name.endswith("num_batches_tracked"):
            continue
        r = ref["state"][name]
        if name.endswith("running_mean") or name.endswith("running_var"):
            e = rel(value, r, float(np.max(np.abs(r))))
            worst_stat = max(worst_stat, (name, e), key=lambda t: t[1])
        else:
            e = rel(value, r, float(np.max(np.abs(r - w1[name]))))
            worst_param = max(worst_param, (name, e), key=lambda t: t[1])
    return [
        ("train loss, step 2", abs(got["loss"] - ref["loss"]) / abs(ref["loss"])),
        ("gradient norm, step 2", abs(got["grad_norm"] - ref["grad_norm"]) / ref["grad_norm"]),
        ("parameters after the update, worst tensor, relative to its update "
         f"({worst_param[0]})", worst_param[1]),
        (f"BatchNorm running statistics, worst tensor ({worst_stat[0]})", worst_stat[1]),
        ("eval loss (running statistics), step 2",
         abs(got["eval_loss"] - ref["eval_loss"]) / abs(ref["eval_loss"])),
    ]


def check(args, dtype, work, data_dir, files):
    import torch
    from resnet_torch import ResNetConfig
    from safetensors_np import load_collection

    ran = engine_run(args, dtype, work, data_dir)
    if ran is None:
        return 2
    step2, save_dir = ran
    n = args.images
    cfg = ResNetConfig.from_json(os.path.join(save_dir, "step-000001", "config.json"))
    w1 = load_collection(os.path.join(save_dir, "step-000001"))
    w2 = load_collection(os.path.join(save_dir, "step-000002"))
    w1_64 = {k: v.astype(np.float64) for k, v in w1.items()}
    ref = torch_step(cfg, w1, w2, files, n, args.lr, args.weight_decay, torch.float64)
    ours = {"loss": step2["loss"], "grad_norm": step2["grad_norm"],
            "eval_loss": step2["eval_loss"], "state": {k: v.astype(np.float64) for k, v in w2.items()}}
    ours_err = errors(ours, ref, w1_64)
    # Float32 rounding is amplified by the network (BatchNorm backward over
    # few pixels in the last stage, a large first step): torch's own float32
    # step from the same checkpoint says how much error f32 itself brings.
    torch32_err = None
    if dtype == "f32":
        torch32_err = errors(torch_step(cfg, w1, w2, files, n, args.lr, args.weight_decay,
                                        torch.float32), ref, w1_64)
    print(f"{cfg.name}: {cfg.parameter_count()} parameters, batch {n} images 3x32x32; "
          f"sdp-train {dtype} and torch {torch.__version__} float32 against torch float64")
    print(f"  train loss  ours {step2['loss']:.10f}  torch f64 {ref['loss']:.10f}")
    print(f"  grad norm   ours {step2['grad_norm']:.10f}  torch f64 {ref['grad_norm']:.10f}")
    print(f"  eval loss   ours {step2['eval_loss']:.10f}  torch f64 {ref['eval_loss']:.10f}")
    tol = args.tol if dtype == "f32" else args.tol64
    ok = True
    for i, (what, e) in enumerate(ours_err):
        # f32: within tol, or no worse than torch's own float32 computation.
        bound = tol if torch32_err is None else max(tol, torch32_err[i][1])
        good = e <= bound
        ok &= good
        theirs = "" if torch32_err is None else f"  (torch f32: {torch32_err[i][1]:.2e})"
        print(f"  {'ok  ' if good else 'FAIL'} ours {e:.2e}{theirs}  {what}")
    print(f"  {dtype}: {'pass' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
