"""One sdp-train training step of a Swin Transformer against timm's SwinTransformer, in float64.

    python test/hf/test_swin_timm_step.py --sdp-train build/bin/sdp-train [--model swin-mini]
        [--images 16] [--dtype f64] [--keep DIR]

Run with the Python environment of scripts/setup-python-ref.sh (Debian's torch
1.13 with a pinned timm); ctest runs it as hf.swin_timm_step.

What it checks:
 1. Writes a CIFAR-10 binary data set of random pixels and labels into a
    temporary folder, so both sides read the same images: the engine through
    its cifar10: reader (augmentation off, the first N images), timm from the
    same bytes normalized by the engine's float32 formula.
 2. Runs sdp-train for 2 steps of batch N = all N images, drop path off,
    saving a checkpoint after each. AdamW is made stateless and invertible:
    beta1 = beta2 = 0 and eps = 1 give the update lr g / (|g| + 1), so each
    gradient element g is recovered exactly from the two checkpoints.
 3. Builds timm's SwinTransformer from the step-1 checkpoint's config.json,
    loads model.safetensors with strict=True (every name and shape must be
    timm's), and repeats step 2 there in float64: the mean cross entropy,
    backward, the same AdamW step (decay on tensors of 2 or more dimensions
    but the relative position bias tables, as the engine and timm's
    no_weight_decay() decay them).
 4. Compares the train loss, every parameter's gradient (max |ours - timm|
    over max |timm|, per tensor) and every parameter after the update (max
    error over the size of timm's update, per tensor).
Exit 0 pass, 1 fail, 2 bad setup.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

RECORDS_PER_FILE = 10000  # the engine's reader insists on full CIFAR-10 files
CIFAR10_MEAN = np.array([0.4914, 0.4822, 0.4465], dtype=np.float32)  # engine/data/image_augment.h
CIFAR10_STD = np.array([0.2470, 0.2435, 0.2616], dtype=np.float32)


def write_cifar10(folder, rng):
    """data_batch_1..5.bin and test_batch.bin: label byte + 3 x 32 x 32 pixel bytes per record.
    Returns the labels and pixels of data_batch_1.bin (the first images the reader serves)."""
    first = None
    for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
        labels = rng.integers(0, 10, RECORDS_PER_FILE, dtype=np.uint8)
        pixels = rng.integers(0, 256, (RECORDS_PER_FILE, 3072), dtype=np.uint8)
        np.concatenate([labels[:, None], pixels], axis=1).tofile(os.path.join(folder, name))
        if first is None:
            first = (labels, pixels)
    return first


def normalized(pixels):
    """[N, 3072] uint8 -> [N, 3, 32, 32] float32 as the engine computes it: (p / 255 - mean) / std."""
    x = pixels.reshape(-1, 3, 32, 32).astype(np.float32) / np.float32(255.0)
    return (x - CIFAR10_MEAN[None, :, None, None]) / CIFAR10_STD[None, :, None, None]


def load_safetensors(path):
    """name -> float64 array of a safetensors file (F32 / F64 tensors), with numpy alone."""
    with open(path, "rb") as f:
        header_len = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(header_len))
        data = f.read()
    kinds = {"F32": np.float32, "F64": np.float64}
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] not in kinds:
            raise ValueError(f"{path}: tensor {name} has dtype {entry['dtype']} (expected F32 or F64)")
        begin, end = entry["data_offsets"]
        values = np.frombuffer(data[begin:end], dtype=kinds[entry["dtype"]])
        out[name] = values.reshape(entry["shape"]).astype(np.float64)
    return out


def checkpoint_tensors(step_dir):
    single = os.path.join(step_dir, "model.safetensors")
    if os.path.exists(single):
        return load_safetensors(single)
    index = os.path.join(step_dir, "model.safetensors.index.json")
    with open(index, encoding="utf-8") as f:
        files = sorted(set(json.load(f)["weight_map"].values()))
    out = {}
    for name in files:
        out.update(load_safetensors(os.path.join(step_dir, name)))
    return out


def timm_model(config):
    """timm's SwinTransformer for the engine's config.json (model_type sdp-swin)."""
    from timm.models.swin_transformer import SwinTransformer

    if config.get("model_type") != "sdp-swin":
        raise ValueError(f"config.json has model_type {config.get('model_type')!r}, not sdp-swin")
    return SwinTransformer(
        img_size=config["img_size"], patch_size=config["patch_size"],
        in_chans=config["in_chans"], num_classes=config["num_classes"],
        embed_dim=config["embed_dim"], depths=tuple(config["depths"]),
        num_heads=tuple(config["num_heads"]), window_size=config["window_size"],
        mlp_ratio=config["mlp_ratio"], qkv_bias=True, drop_rate=0.0, attn_drop_rate=0.0,
        drop_path_rate=0.0)


def engine_run(args, work, data_dir):
    """sdp-train's 2 steps; returns (metrics of step 2, save dir) or None."""
    save_dir = os.path.join(work, f"ckpt_{args.dtype}")
    metrics = os.path.join(work, f"metrics_{args.dtype}.jsonl")
    cmd = [args.sdp_train, "--model", args.model,
           "--data", f"cifar10:{data_dir},augment=0,limit={args.images}",
           "--batch", str(args.images), "--steps", "2", "--save-every", "1", "--save-dir", save_dir,
           "--lr", str(args.lr), "--min-lr", str(args.lr), "--warmup", "0", "--beta1", "0",
           "--beta2", "0", "--eps", "1", "--weight-decay", str(args.weight_decay),
           "--grad-clip", "0", "--eval-every", "0", "--threads", "1", "--drop-path", "0",
           "--dtype", args.dtype, "--seed", "11", "--metrics", metrics, "--progress", "false"]
    print("$ " + " ".join(cmd))
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        print(run.stdout + run.stderr, file=sys.stderr)
        return None
    with open(metrics, encoding="utf-8") as f:
        step2 = next(r for r in map(json.loads, f) if r.get("step") == 2)
    return step2, save_dir


def decayed(name, array):
    """engine/optim/adamw.cpp: matrices and filters, not vectors, and not what the model exempts:
    the relative position bias tables, as timm's SwinTransformer.no_weight_decay() names them."""
    return array.ndim >= 2 and "relative_position_bias_table" not in name


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sdp-train", required=True)
    p.add_argument("--model", default="swin-mini")
    p.add_argument("--images", type=int, default=16, help="N: the batch, all of the data")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--dtype", default="f64", choices=("f64",))
    p.add_argument("--tol", type=float, default=1e-9, help="relative error allowed (f64)")
    p.add_argument("--keep", default=None, help="keep the data and checkpoints in this folder")
    args = p.parse_args(argv)
    if not os.access(args.sdp_train, os.X_OK):
        print(f"test_swin_timm_step: no executable {args.sdp_train}", file=sys.stderr)
        return 2
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    import torch.nn.functional as F
    import timm

    torch.set_num_threads(1)
    work = args.keep or tempfile.mkdtemp(prefix="swin_timm_")
    data_dir = os.path.join(work, "cifar10")
    os.makedirs(data_dir, exist_ok=True)
    labels, pixels = write_cifar10(data_dir, np.random.default_rng(20261202))
    ran = engine_run(args, work, data_dir)
    if ran is None:
        return 2
    step2, save_dir = ran
    step1_dir = os.path.join(save_dir, "step-000001")
    with open(os.path.join(step1_dir, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    w1 = checkpoint_tensors(step1_dir)
    w2 = checkpoint_tensors(os.path.join(save_dir, "step-000002"))

    model = timm_model(config).double().train()
    try:
        model.load_state_dict({k: torch.from_numpy(v) for k, v in w1.items()}, strict=True)
    except RuntimeError as e:
        print(f"FAIL: timm {timm.__version__} does not load the checkpoint strictly: {e}")
        return 1
    n = args.images
    x = torch.from_numpy(normalized(pixels[:n])).double()
    y = torch.from_numpy(labels[:n].astype(np.int64))
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    params = dict(model.named_parameters())
    grads = {k: q.grad.detach().numpy().copy() for k, q in params.items()}
    nwd = model.no_weight_decay()
    if any(decayed(k, w1[k]) for k in nwd):
        print(f"FAIL: timm exempts {sorted(nwd)} from weight decay; the engine decays some of them")
        return 1
    groups = [{"params": [q for k, q in params.items() if decayed(k, w1[k])],
               "weight_decay": args.weight_decay},
              {"params": [q for k, q in params.items() if not decayed(k, w1[k])],
               "weight_decay": 0.0}]
    torch.optim.AdamW(groups, lr=args.lr, betas=(0.0, 0.0), eps=1.0).step()
    after = {k: q.detach().numpy() for k, q in params.items()}

    print(f"{args.model}: {sum(v.size for v in w1.values())} parameters, batch {n} images "
          f"3x32x32; sdp-train {args.dtype} against timm {timm.__version__} on torch "
          f"{torch.__version__} float64")
    print(f"  train loss  ours {step2['loss']:.12f}  timm {loss.item():.12f}")
    failures = []
    loss_err = abs(step2["loss"] - loss.item()) / abs(loss.item())
    if loss_err > args.tol:
        failures.append(f"train loss: relative error {loss_err:.2e}")
    worst_grad, worst_update = ("", 0.0), ("", 0.0)
    for name, g_timm in grads.items():
        lr_wd = args.lr * args.weight_decay if decayed(name, w1[name]) else 0.0
        # w2 = w1 (1 - lr wd) - lr g / (|g| + 1): s = g / (|g| + 1), g = s / (1 - |s|).
        s = (w1[name] * (1.0 - lr_wd) - w2[name]) / args.lr
        g_ours = s / (1.0 - np.abs(s))
        scale = float(np.max(np.abs(g_timm)))
        g_err = float(np.max(np.abs(g_ours - g_timm))) / scale if scale > 0 else float(
            np.max(np.abs(g_ours)))
        update = float(np.max(np.abs(after[name] - w1[name])))
        u_err = float(np.max(np.abs(w2[name] - after[name]))) / update if update > 0 else 0.0
        worst_grad = max(worst_grad, (name, g_err), key=lambda t: t[1])
        worst_update = max(worst_update, (name, u_err), key=lambda t: t[1])
        if g_err > args.tol:
            failures.append(f"gradient of {name}: relative error {g_err:.2e}")
        if u_err > args.tol:
            failures.append(f"update of {name}: relative error {u_err:.2e}")
    print(f"  loss: relative error {loss_err:.2e}")
    print(f"  gradients ({len(grads)} tensors): worst {worst_grad[1]:.2e} ({worst_grad[0]})")
    print(f"  updates: worst {worst_update[1]:.2e} ({worst_update[0]})")
    for f in failures:
        print("  FAIL " + f)
    print(("PASS" if not failures else "FAIL") + f" within {args.tol:g}; files in {work}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
