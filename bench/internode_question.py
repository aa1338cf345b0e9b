#!/usr/bin/env python3
"""internode_question.py BUILD_DIR

The SDP paper's inter-node question through the planner's step-time model:
LLaMA 1B on 16 ranks, 8 ranks per node (two nodes), batch 8 x seq 1024 per
rank, DDP against B-SDP + FSDP + activation checkpointing at several C. For
each C: the step-time ratio (B-SDP+FSDP+AC / DDP) at inter-node links of
100 Gb/s and 400 Gb/s, and the link bandwidth below which B-SDP + FSDP + AC
is the faster of the two (found by bisection over the bandwidth, or "always"
/ "never" within 1 Gb/s .. 100 Tb/s).

Model settings (sdp-plan flags, overridable through the environment):
FLOPS (default 4e14 FLOP/s per rank), INTRA (400GB/s), LATENCY (5e-6 s),
OVERLAP (on). Every figure is the model's: FLOPs and bytes counted by meta
steps, times from the alpha-beta model (engine/plan/step_time.h).
"""
import json
import os
import subprocess
import sys

FRACTIONS = [0.5, 0.625, 0.75, 0.875]


def step_times(plan, gbits, fraction):
    env = os.environ
    args = [plan, "--model", "llama-1b", "--world", "16", "--batch", "8", "--seq", "1024",
            "--ranks-per-node", "8", "--flops-per-second", env.get("FLOPS", "4e14"),
            "--intra-node-bandwidth", env.get("INTRA", "400GB/s"),
            "--link-latency", env.get("LATENCY", "5e-6"), "--overlap", env.get("OVERLAP", "on"),
            "--inter-node-bandwidth", f"{gbits}Gb/s", "--strategies",
            f"ddp,b-sdp:{fraction}+fsdp+ac", "--format", "json"]
    report = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
    by = {s["strategy"]: s["step_time"]["seconds"] for s in report["strategies"]}
    return by["ddp"], by["b-sdp"]


def crossover(plan, fraction):
    """The bandwidth (Gb/s) below which B-SDP+FSDP+AC beats DDP."""
    lo, hi = 1.0, 1e5
    faster = lambda g: step_times(plan, g, fraction)[1] < step_times(plan, g, fraction)[0]
    at_lo, at_hi = faster(lo), faster(hi)
    if at_lo and at_hi:
        return "always"
    if not at_lo and not at_hi:
        return "never"
    for _ in range(30):  # bisection in log space
        mid = (lo * hi) ** 0.5
        if faster(mid) == at_lo:
            lo = mid
        else:
            hi = mid
    return f"{'below' if at_lo else 'above'} {(lo * hi) ** 0.5:.0f} Gb/s"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    plan = os.path.join(sys.argv[1], "bin", "sdp-plan")
    print("| C | DDP step s @100 Gb/s | B-SDP+FSDP+AC step s @100 | ratio | DDP s @400 Gb/s | "
          "B-SDP+FSDP+AC s @400 | ratio | B-SDP+FSDP+AC faster |")
    print("|---:|---:|---:|---:|---:|---:|---:|---|")
    for c in FRACTIONS:
        d100, b100 = step_times(plan, 100, c)
        d400, b400 = step_times(plan, 400, c)
        print(f"| {c} | {d100:.4f} | {b100:.4f} | {b100 / d100:.3f} | {d400:.4f} | {b400:.4f} | "
              f"{b400 / d400:.3f} | {crossover(plan, c)} |")


if __name__ == "__main__":
    main()
