#!/usr/bin/env python3
"""Dry-run memory table: one training step of each named LLaMA on the meta
device (no memory allocated, no arithmetic), reporting the bytes a device
would hold per category at the step's peak.

Usage: python3 bench/dry_run_table.py [--bin build/bin/sdp-train]
       [--models llama-134m,llama-500m,llama-1b] [--batch 8] [--seq 1024]
Prints a Markdown table. Uses only the standard library.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

CATEGORIES = ["param", "master", "grad", "optim", "activation", "workspace", "comm"]


def gib(b):
    return f"{b / 2**30:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="build/bin/sdp-train")
    ap.add_argument("--models", default="llama-134m,llama-500m,llama-1b")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16"],
                    help="bf16: the CUDA mixed-precision step (bf16 parameters and "
                         "activations, f32 master weights, gradients and AdamW state)")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models.split(","):
            path = os.path.join(tmp, model + ".jsonl")
            subprocess.run([args.bin, "--dry-run", "--model", model, "--batch", str(args.batch),
                            "--seq", str(args.seq), "--dtype", args.dtype, "--metrics", path],
                           check=True, stdout=subprocess.DEVNULL)
            with open(path) as f:
                rows.append(json.loads(f.readline()))
    print(f"Dry run (meta device, 512-byte blocks), {args.dtype}, one step, batch {args.batch} x seq "
          f"{args.seq} per rank, single process (no SDP). GiB at the step's peak.\n")
    print("| model | params | " + " | ".join(CATEGORIES) + " | peak total |")
    print("|---|---:|" + "---:|" * (len(CATEGORIES) + 1))
    for r in rows:
        at_peak = r["memory"]["peak"]["at_peak"]
        cells = [gib(at_peak[c]) for c in CATEGORIES]
        print(f"| {r['model']} | {r['parameters'] / 1e6:.1f}M | " + " | ".join(cells) +
              f" | {gib(r['memory']['peak']['total'])} |")


if __name__ == "__main__":
    sys.exit(main())
