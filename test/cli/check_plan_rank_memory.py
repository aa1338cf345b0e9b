#!/usr/bin/env python3
"""check_plan_rank_memory.py SDP_PLAN

sdp-plan --rank-memory on ranks of unequal memory (mini, 4 ranks, budgets
10 MiB on ranks 0-1 and 5 MiB on ranks 2-3): every SDP plan keeps r owners
per component while the large ranks own more components and peak higher
than the small ones; ranks_over_budget lists exactly the ranks whose peak
exceeds their own budget (DDP, which cannot shrink, overflows the small
ranks); the plan's spectral gap is positive (the ranks still mix); and
--write-plan writes the weighted matrix (every component 2 owners, the
large ranks owning more) in the form sdp-train --plan file:PATH reads.
Exits 1 naming the first failure.
"""
import json
import os
import subprocess
import sys
import tempfile

MIB = 1 << 20
BUDGETS = [10 * MIB, 10 * MIB, 5 * MIB, 5 * MIB]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = subprocess.run([sys.argv[1], "--model", "mini", "--world", "4", "--batch", "2",
                          "--seq", "32", "--device", "cpu", "--rank-memory", "10MiBx2,5MiBx2",
                          "--strategies", "ddp,b-sdp:0.5,n-sdp:0.5+zero2,b-sdp:0.5+fsdp+ac",
                          "--format", "json"], check=True, capture_output=True, text=True).stdout
    report = json.loads(out)
    failures = []
    if report["rank_memory"] != BUDGETS:
        failures.append(f"rank_memory {report['rank_memory']} != {BUDGETS}")
    for s in report["strategies"]:
        name = f"{s['label']} C={s['active_fraction']}"
        peaks = s["peak_bytes"]["by_rank"]
        over = [r for r in range(4) if peaks[r] > BUDGETS[r]]
        if s["ranks_over_budget"] != over:
            failures.append(f"{name}: ranks_over_budget {s['ranks_over_budget']}, peaks say {over}")
        if s["strategy"] == "ddp":
            if over != [2, 3]:
                failures.append(f"{name}: DDP should overflow the 5 MiB ranks, overflows {over}")
            continue
        owned = s["owned_per_rank"]
        if owned["max"] <= owned["min"]:
            failures.append(f"{name}: every rank owns the same count {owned}")
        if min(peaks[0], peaks[1]) <= max(peaks[2], peaks[3]):
            failures.append(f"{name}: the 10 MiB ranks do not hold more than the 5 MiB ones: {peaks}")
        if not s["spectral_gap"] > 0:
            failures.append(f"{name}: spectral gap {s['spectral_gap']}: the plan splits the ranks")
        print(f"{name}: owned {owned['min']}..{owned['max']}, peaks {peaks}, over budget {over}")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "plan.json")
        subprocess.run([sys.argv[1], "--model", "mini", "--world", "4", "--batch", "2", "--seq",
                        "32", "--rank-memory", "10MiBx2,5MiBx2", "--strategies", "b-sdp:0.5",
                        "--write-plan", path], check=True, capture_output=True)
        matrix = json.load(open(path))["matrix"]
        owners = [sum(row[k] == "1" for row in matrix) for k in range(len(matrix[0]))]
        owned = [row.count("1") for row in matrix]
        if len(matrix) != 4 or set(owners) != {2} or min(owned[:2]) <= max(owned[2:]):
            failures.append(f"--write-plan matrix {matrix}: owners per component {owners}, "
                            f"owned per rank {owned}")
        print(f"written plan {matrix}")
    for f in failures:
        print("FAIL:", f)
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
