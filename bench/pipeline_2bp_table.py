#!/usr/bin/env python3
"""Tables of bench/pipeline_2bp_paper.sh (standard library only).

    python3 bench/pipeline_2bp_table.py --dir out/pipeline_2bp_paper --runs naive naive-2bp ...

Measured (DIR/<schedule>-<per-micro-batch|batched>-m<M>/metrics-r<round>.jsonl):
the median step over the steps after the first of every round, every such
step listed, the speed-up over the
schedule's own form without 2BP (naive-2bp over naive, gpipe-2bp over gpipe,
1f1b-2bp, 1f1b-2bp-cooldown and zb-h1 over 1f1b) and over naive, each
stage's bubble (median), the measured mean time of one W action per stage
(costs.json; a batched run's time shared evenly among its Ws) and stage 0's
peak bytes. Simulated (DIR/sim/<mode>-p<P>-m<M>.json, sdp-pipeline --json):
the same speed-ups for 4 and 8 stages.
"""
import argparse
import glob
import json
import os
import re
import statistics

MIB = 1024.0 * 1024.0
BASE = {"naive-2bp": "naive", "gpipe-2bp": "gpipe", "1f1b-2bp": "1f1b",
        "1f1b-2bp-cooldown": "1f1b", "zb-h1": "1f1b"}
# The paper's names: 1F1B at M = P is its 1F1B-1, at M = 2P its 1F1B-2.
PAPER = {"naive": "naive", "gpipe": "GPipe", "1f1b": "1F1B"}


def paper_name(schedule, m, p):
    base = BASE.get(schedule, schedule)
    name = PAPER.get(base, base)
    if base == "1f1b":
        name += "-%d" % (m // p)
    return name


def measured(directory, runs):
    rows = {}
    for path in sorted(os.listdir(directory)):
        hit = re.match(r"(.+)-(per-micro-batch|batched)-m(\d+)$", path)
        rounds = sorted(glob.glob(os.path.join(directory, path, "metrics-r*.jsonl")))
        if not hit or not rounds:
            continue
        timed = []  # steps 2..N of every round
        for metrics in rounds:
            steps = []
            with open(metrics) as f:
                for line in f:
                    d = json.loads(line)
                    if "step" in d and not d.get("summary"):
                        steps.append(d)
            timed += steps[1:] if len(steps) > 1 else steps
        stages = len(timed[0]["ranks"]["bubble"]["by_rank"])
        w = "-"
        costs = os.path.join(directory, path, "timeline", "costs.json")
        schedule, mode, m = hit.group(1), hit.group(2), int(hit.group(3))
        if "2bp" in schedule or schedule.startswith("zb"):
            with open(costs) as f:
                w = " / ".join("%.0f" % (1e3 * s["weight_grad"]) for s in json.load(f)["stages"])
        rows[(schedule, mode, m)] = {
            "step": statistics.median(d["seconds"] for d in timed),
            "best": min(d["seconds"] for d in timed),
            "steps": [d["seconds"] for d in timed],
            "bubble": [statistics.median(d["ranks"]["bubble"]["by_rank"][r] for d in timed)
                       for r in range(stages)],
            "peak": timed[-1]["ranks"]["peak_bytes"]["by_rank"][0],
            "w": w}
    out = ["| M | paper's name | schedule | W | step: median / best (s) | steps 2..N (s) "
           "| speed-up over no 2BP: median / best | over naive: median / best | bubble s0 / s1 "
           "| one W, s0 / s1 (ms) | peak s0 (MiB) |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for m in sorted({k[2] for k in rows}):
        for run in runs:
            schedule = run.split(":")[0]
            mode = "batched" if run.endswith(":batched") else "per-micro-batch"
            r = rows.get((schedule, mode, m))
            if r is None:
                continue
            base = rows.get((BASE.get(schedule, ""), "per-micro-batch", m))
            naive = rows.get(("naive", "per-micro-batch", m))
            split = "2bp" in schedule or schedule.startswith("zb")
            def ratio(ref):
                return "%.3f / %.3f" % (ref["step"] / r["step"], ref["best"] / r["best"]) if ref else "-"
            out.append("| %d | %s | %s | %s | %.2f / %.2f | %s | %s | %s | %s | %s | %.0f |" % (
                m, paper_name(schedule, m, 2) + (" + 2BP" if "2bp" in schedule else ""), schedule,
                mode if split else "-", r["step"], r["best"], ", ".join("%.2f" % x for x in r["steps"]),
                ratio(base), ratio(naive),
                " / ".join("%.1f%%" % (100 * b) for b in r["bubble"]), r["w"], r["peak"] / MIB))
    return "\n".join(out)


def simulated(directory):
    out = ["| P | M | schedule | step per-micro-batch W (s) | step batched W (s) | speed-up over no 2BP "
           "(per-mb / batched) | over naive (per-mb / batched) | mean bubble (per-mb / batched) |",
           "|---|---|---|---|---|---|---|---|"]
    keyed = []
    for f in os.listdir(os.path.join(directory, "sim")):
        hit = re.match(r"per-micro-batch-p(\d+)-m(\d+)\.json$", f)
        if hit:
            keyed.append((int(hit.group(1)), int(hit.group(2))))
    for p, m in sorted(keyed):
        by = {}
        for mode in ("per-micro-batch", "batched"):
            with open(os.path.join(directory, "sim", "%s-p%d-m%d.json" % (mode, p, m))) as f:
                by[mode] = {s["name"]: s for s in json.load(f)["schedules"]}
        for name in by["per-micro-batch"]:
            per, bat = by["per-micro-batch"][name], by["batched"][name]
            split = "2bp" in name or name.startswith("zb")
            base = BASE.get(name)
            gain = "-"
            if base:
                gain = "%.3f / %.3f" % (by["per-micro-batch"][base]["makespan"] / per["makespan"],
                                        by["per-micro-batch"][base]["makespan"] / bat["makespan"])
            naive = by["per-micro-batch"]["naive"]["makespan"]
            out.append("| %d | %d | %s | %.2f | %s | %s | %s | %s |" % (
                p, m, name, per["makespan"], "%.2f" % bat["makespan"] if split else "-", gain,
                "%.3f / %.3f" % (naive / per["makespan"], naive / bat["makespan"]) if split
                else "%.3f" % (naive / per["makespan"]),
                "%.1f%% / %.1f%%" % (100 * per["mean_bubble"], 100 * bat["mean_bubble"]) if split
                else "%.1f%%" % (100 * per["mean_bubble"])))
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--runs", nargs="+", required=True)
    a = ap.parse_args()
    print("Measured, 2 stages on 2 ranks:")
    print()
    print(measured(a.dir, a.runs))
    print()
    if os.path.isdir(os.path.join(a.dir, "sim")):
        print("Simulated from the measured costs:")
        print()
        print(simulated(a.dir))


if __name__ == "__main__":
    main()
