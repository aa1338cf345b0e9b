#!/usr/bin/python3
"""Check that an engine-exported checkpoint gives the engine's logits in PyTorch.

Loads <checkpoint>/config.json and <checkpoint>/model.safetensors (or its
shards) into the reference model, runs it in float64 with the
explicit-softmax attention, and compares against the raw float32 logits the
engine wrote for the same tokens.

Pass criterion: max |ours - torch| / max |torch| <= --tol.  Normalising by the
largest logit makes the tolerance independent of the logit scale, which
differs a lot between a fresh and a trained model.

Exit status: 0 within tolerance, 1 outside it, 2 on bad input (mismatched
checkpoint, wrong file sizes, ...).  Writes no files.
"""

import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_torch import CheckpointMismatch, Llama, LlamaConfig, load_hf_tensors  # noqa: E402
from safetensors_np import SafetensorsError, load_collection  # noqa: E402


def read_raw(path, dtype, count, what):
    size = os.path.getsize(path)
    want = count * np.dtype(dtype).itemsize
    if size != want:
        raise ValueError(f"{what} file {path} has {size} bytes, expected {want} "
                         f"({count} x {np.dtype(dtype).name})")
    return np.fromfile(path, dtype=dtype, count=count)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, help="dir with config.json and model.safetensors")
    p.add_argument("--tokens", required=True, help="raw little-endian int32 tokens [B,T]")
    p.add_argument("--logits", required=True, help="raw little-endian float32 logits [B,T,V]")
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--tol", type=float, default=1e-4,
                   help="max error relative to max |logit| (default 1e-4)")
    p.add_argument("--attn", choices=("explicit", "sdpa"), default="explicit",
                   help="attention path of the reference (default explicit)")
    args = p.parse_args(argv)

    if args.batch < 1 or args.seq < 1:
        p.error("--batch and --seq must be positive")

    try:
        cfg = LlamaConfig.from_json(os.path.join(args.checkpoint, "config.json"))
        b, t, v = args.batch, args.seq, cfg.vocab_size
        tokens = read_raw(args.tokens, "<i4", b * t, "tokens").reshape(b, t)
        ours = read_raw(args.logits, "<f4", b * t * v, "logits").reshape(b, t, v)
        if tokens.min() < 0 or tokens.max() >= v:
            raise ValueError(f"token ids must be in [0, {v}), got range "
                             f"[{tokens.min()}, {tokens.max()}]")
        model = Llama(cfg, attn_impl=args.attn)
        load_hf_tensors(model, load_collection(args.checkpoint, "model"),
                        dtype=torch.float64)
    except (OSError, ValueError, SafetensorsError, CheckpointMismatch) as e:
        print(f"check_logits: error: {e}", file=sys.stderr)
        return 2

    model.eval()
    with torch.no_grad():
        ref = model(torch.from_numpy(tokens.astype(np.int64))).numpy()

    ours64 = ours.astype(np.float64)
    if not np.all(np.isfinite(ours64)):
        bad = int(np.count_nonzero(~np.isfinite(ours64)))
        print(f"FAIL: engine logits contain {bad} non-finite values")
        return 1
    diff = np.abs(ours64 - ref)
    max_abs = float(diff.max())
    scale = float(np.abs(ref).max())
    max_rel = max_abs / scale if scale > 0 else max_abs
    where = np.unravel_index(int(diff.argmax()), diff.shape)
    ok = max_rel <= args.tol
    print(f"tokens [B={b}, T={t}], vocab {v}, layers {cfg.num_hidden_layers}, "
          f"heads {cfg.num_attention_heads}/{cfg.num_key_value_heads}, "
          f"tied={cfg.tie_word_embeddings}")
    print(f"max |logit| (torch fp64): {scale:.6g}")
    print(f"max abs error: {max_abs:.6g} at [b={where[0]}, t={where[1]}, v={where[2]}] "
          f"(ours {ours64[where]:.8g}, torch {ref[where]:.8g})")
    print(f"max rel error: {max_rel:.6g} (tol {args.tol:g})")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
