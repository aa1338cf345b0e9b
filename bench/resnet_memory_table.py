#!/usr/bin/env python3
"""Peak memory per rank of the CIFAR image models under DDP, B-SDP and N-SDP.

    python3 bench/resnet_memory_table.py [--models resnet18,wrn18,swin-t] [--world 8]
        [--batch 128] [--fractions 0.75,0.5,0.375] [--dtype f32] [--measure]

Dry run: `sdp-plan` runs one training step of every rank of a WORLD-rank job
on the meta device (the bytes the CUDA caching allocator would hold: 512-byte
blocks, cuDNN's capped workspace), and the table gives the highest and the
mean peak over the ranks, and their ratio to DDP's. With --measure, the rank
with the highest dry-run peak of every strategy also runs one real step on
the CPU (`sdp-train --device cpu`, that rank emulated: its collectives are
counted, not run) and the CPU allocator's measured peak is shown beside it
(64-byte blocks and the CPU convolution's im2col workspace instead of
cuDNN's, so the two differ by those buffers only). Prints Markdown; uses only
the standard library.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

MIB = 2**20
# The paper's figures live in sdp-plan's presets (apps/sdp-plan/paper_presets.cpp);
# `sdp-plan --paper NAME --format json` gives them.
PRESET = {"resnet": "sdp-resnet18", "swin": "sdp-swin-t"}


def paper_text(plan_bin, fam):
    """The paper's figures for a family, in words, from its preset."""
    rep = json.loads(run([plan_bin, "--paper", PRESET[fam], "--format", "json"]))
    figures = "; ".join(f["what"] for f in rep["paper"]["figures"])
    return f"The SDP paper ({rep['paper']['source']}): {figures}."


def family(model):
    return "swin" if model.startswith("swin") else "resnet"


def groups(rep):
    """What N-SDP splits, as sdp-plan reports it."""
    if rep.get("channel_groups"):
        return f"{rep['channel_groups']} channel groups per block (N-SDP)"
    return (f"{rep['head_groups']} head groups and {rep['ffn_groups']} MLP unit groups per "
            "block (N-SDP)")


def run(cmd):
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"resnet_memory_table: {' '.join(cmd)} failed:\n{done.stderr}")
    return done.stdout


def plan(args, model):
    strategies = ["ddp"] + [f"{s}:{c}" for s in ("b-sdp", "n-sdp") for c in args.fractions]
    out = run([args.plan_bin, "--model", model, "--world", str(args.world), "--batch",
               str(args.batch), "--dtype", args.dtype, "--strategies", ",".join(strategies),
               "--format", "json"])
    return json.loads(out)


def measured_peak(args, model, strategy, fraction, rank):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        cmd = [args.train_bin, "--model", model, "--device", "cpu", "--batch", str(args.batch),
               "--steps", "1", "--eval-every", "0", "--progress", "false", "--metrics", metrics,
               "--strategy", strategy, "--threads", str(args.threads)]
        if strategy != "ddp":
            cmd += ["--active-fraction", str(fraction)]
        cmd += ["--emulate-world", str(args.world), "--emulate-rank", str(rank)]
        run(cmd)
        lines = [json.loads(l) for l in open(metrics) if l.strip()]
        return lines[0]["memory"]["peak"]["total"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan-bin", default="build/bin/sdp-plan")
    ap.add_argument("--train-bin", default="build/bin/sdp-train")
    ap.add_argument("--models", default="resnet18,wrn18")
    ap.add_argument("--world", type=int, default=8)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--fractions", default="0.75,0.5,0.375")
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    ap.add_argument("--measure", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    args.fractions = args.fractions.split(",")
    for b in (args.plan_bin, args.train_bin):
        if not os.path.exists(b):
            sys.exit(f"resnet_memory_table: {b} is missing; build first (bash scripts/build.sh)")

    for model in args.models.split(","):
        rep = plan(args, model)
        rows = rep["strategies"]
        ddp = rows[rep["baseline"]]
        ddp_max = ddp["peak_bytes"]["max"]
        ddp_mean = ddp["peak_bytes"]["mean"]
        print(f"\n### {model} ({rep['parameters'] / 1e6:.1f}M parameters), {args.world} ranks, "
              f"batch {args.batch} per rank, {args.dtype}, {groups(rep)}\n")
        head = ("| strategy | C | owners/N | dry-run peak max MiB | max vs DDP | dry-run peak mean MiB | "
                "mean vs DDP | activation at peak MiB | param+grad+optim MiB |")
        sep = "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
        if args.measure:
            head += " measured CPU peak MiB (rank) | measured vs DDP |"
            sep += "---:|---:|"
        print(head)
        print(sep)
        ddp_measured = None
        for r in rows:
            peak = r["peak_bytes"]
            at = r["at_peak"]
            state = at["param"] + at["master"] + at["grad"] + at["optim"]
            line = (f"| {r['label']} | {r['active_fraction']:g} | "
                    f"{r['owners_per_component']}"
                    f"{'' if r.get('owners_per_component_max', r['owners_per_component']) == r['owners_per_component'] else '..' + str(r['owners_per_component_max'])}"
                    f"/{args.world} | {peak['max'] / MIB:.1f} | "
                    f"{peak['max'] / ddp_max:.0%} | {peak['mean'] / MIB:.1f} | "
                    f"{peak['mean'] / ddp_mean:.0%} | {at['activation'] / MIB:.1f} | "
                    f"{state / MIB:.1f} |")
            if args.measure:
                rank = peak["max_rank"]
                got = measured_peak(args, model, r["strategy"], r["active_fraction"], rank)
                if r["strategy"] == "ddp":
                    ddp_measured = got
                line += f" {got / MIB:.1f} ({rank}) | {got / ddp_measured:.0%} |"
            print(line, flush=True)
    for fam in dict.fromkeys(family(m) for m in args.models.split(",")):
        print(f"\n{paper_text(args.plan_bin, fam)}")


if __name__ == "__main__":
    main()
