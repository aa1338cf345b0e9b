#!/usr/bin/env python3
"""check_plan_classes.py SDP_PLAN

sdp-plan measures one rank of each class of ranks that hold the same plan row
at the same pipeline stage and gives the others its figures. This runs the
same jobs with and without --every-rank (sdp-plan --format json) and checks
that every rank's figures agree: memory (peaks, categories, phases), traffic
(totals and per op), FLOPs with recomputation, stage and pipeline sends;
only the per-group traffic (which names the owner groups) and the timing may
differ. Jobs: LLaMA, ResNet and Swin models over every strategy, with sharding
and recomputation, and a pipeline; at least one job must have measured fewer
ranks than it has. Exits 1 naming the first figure that differs.
"""
import json
import subprocess
import sys

JOBS = [
    ["--model", "mini", "--world", "8", "--batch", "2", "--seq", "32", "--strategies",
     "ddp,b-sdp:0.5,n-sdp:0.5,bb-sdp:0.5,nb-sdp:0.5,b-sdp:0.5+fsdp+ac,n-sdp:0.375+zero2,"
     "fsdp,ddp+zero1,b-sdp:0.25+zero3"],
    ["--model", "mini", "--world", "8", "--batch", "2", "--seq", "32", "--strategies",
     "ddp,b-sdp:0.5,n-sdp:0.5+ac", "--pipeline-stages", "2", "--micro-batches", "2",
     "--schedule", "1f1b-2bp"],
    # More ranks than plan rows: SDP ranks share rows (and Bb-SDP's roots
    # split them).
    ["--model", "mini", "--world", "24", "--batch", "2", "--seq", "32", "--strategies",
     "b-sdp:0.5,bb-sdp:0.25,n-sdp:0.5+zero2,nb-sdp:0.5+fsdp"],
    ["--model", "resnet-mini", "--world", "6", "--batch", "2", "--strategies",
     "ddp,b-sdp:0.5,n-sdp:0.5+fsdp+ac,bb-sdp:0.34"],
    ["--model", "swin-micro", "--world", "4", "--batch", "2", "--strategies",
     "ddp,b-sdp:0.5+zero2,n-sdp:0.5+ac"],
]

# Timing, and what names the groups, are the only figures allowed to differ.
IGNORED = {"seconds", "measured_as"}


def plan(sdp_plan, args, every_rank):
    cmd = [sdp_plan, *args, "--format", "json"] + (["--every-rank"] if every_rank else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def comparable(rank):
    out = {k: v for k, v in rank.items() if k not in IGNORED}
    out["comm"] = {k: v for k, v in rank["comm"].items() if k not in ("by_group", "wait_seconds")}
    if rank["pipeline"] is not None:
        # The schedule's measured times (a meta step's mean nothing).
        out["pipeline"] = {k: v for k, v in rank["pipeline"].items()
                           if k not in ("seconds", "busy_seconds", "bubble_fraction")}
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sdp_plan = sys.argv[1]
    failures, saved = [], 0
    for args in JOBS:
        fast, every = plan(sdp_plan, args, False), plan(sdp_plan, args, True)
        label = " ".join(args)
        for fs, es in zip(fast["strategies"], every["strategies"]):
            name = fs["label"]
            measured = sum(1 for r in fs["ranks"] if r["measured_as"] == r["rank"])
            if any(r["measured_as"] != r["rank"] for r in es["ranks"]):
                failures.append(f"{label}: {name}: --every-rank copied a step")
            saved += len(fs["ranks"]) - measured
            for fr, er in zip(fs["ranks"], es["ranks"]):
                if comparable(fr) != comparable(er):
                    keys = [k for k in comparable(fr) if comparable(fr)[k] != comparable(er).get(k)]
                    failures.append(f"{label}: {name}: rank {fr['rank']} (measured as rank "
                                    f"{fr['measured_as']}) differs from its own step in {keys}")
                    break
            print(f"{name}: {measured} of {len(fs['ranks'])} ranks measured")
    if saved == 0:
        failures.append("no job measured fewer ranks than it has: the classes were never used")
    for f in failures:
        print("FAIL:", f)
    if failures:
        sys.exit(1)
    print(f"every copied rank's figures equal its own step ({saved} steps saved)")


if __name__ == "__main__":
    main()
