#!/usr/bin/env python3
"""Tables of bench/pipeline_cpu.sh (standard library only).

    python3 bench/pipeline_table.py --dir out/pipeline_cpu --model llama-134m \
        --microbatches 4 8 --schedules gpipe 1f1b 1f1b-2bp zb-h1 \
        --simulated llama-134m llama-1b resnet152-basic

Measured (DIR/<schedule>-m<M>/): from the metrics JSON lines, the median step
time over the steps after the first (the first pays for first touches of
memory), each stage's measured bubble (median over the same steps), each
stage's peak bytes, and stage 0's peak by category (the metrics carry rank 0's
categories only); from the log, the last step's measured makespan beside the
one simulated from its own measured action costs.
Simulated (DIR/sim/<model>-p<P>-m<M>.json, sdp-pipeline --json): per
schedule the step, the gain over 1f1b (1f1b's step / this step), the mean
bubble, the largest per-stage peak of activation + weight-gradient bytes, and
how much more that is than 1f1b's.
"""
import argparse
import glob
import json
import os
import re
import statistics

MIB = 1024.0 * 1024.0


def load_metrics(path):
    steps, summary = [], None
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            if d.get("summary"):
                summary = d
            elif "step" in d:
                steps.append(d)
    return steps, summary


def measured_table(directory, model, microbatches, schedules):
    rows = []
    for m in microbatches:
        for s in schedules:
            run = os.path.join(directory, "%s-m%d" % (s, m))
            metrics = os.path.join(run, "metrics.jsonl")
            if not os.path.exists(metrics):
                continue
            steps, _ = load_metrics(metrics)
            timed = steps[1:] if len(steps) > 1 else steps
            step = statistics.median(d["seconds"] for d in timed)
            stages = len(timed[0]["ranks"]["bubble"]["by_rank"])
            bubble = [statistics.median(d["ranks"]["bubble"]["by_rank"][r] for d in timed) for r in range(stages)]
            peak = [timed[-1]["ranks"]["peak_bytes"]["by_rank"][r] for r in range(stages)]
            at_peak = timed[-1]["memory"]["peak"]["at_peak"]
            sim = ""
            with open(os.path.join(run, "log")) as f:
                hit = re.search(r"measured ([0-9.]+) ms, simulated from its action costs ([0-9.]+) ms", f.read())
            if hit:
                sim = "%.2f / %.2f" % (float(hit.group(1)) / 1e3, float(hit.group(2)) / 1e3)
            model_sim = ""
            sim_file = os.path.join(directory, "sim", "%s-p2-m%d.json" % (model, m))
            if os.path.exists(sim_file):
                with open(sim_file) as f:
                    by = {x["name"]: x for x in json.load(f)["schedules"]}
                if s in by:
                    model_sim = "%.2f / %.0f" % (by[s]["makespan"], by[s]["peak_memory_bytes"][0] / MIB)
            rows.append((m, s, step, [d["seconds"] for d in timed], bubble, peak, at_peak, sim, model_sim))
    out = ["Measured: %s, 2 ranks = 2 stages, 1 thread each. Step: median of steps 2..N (all listed);"
           " bubble: each stage's idle share of its step (median); peak: each rank's peak bytes in the"
           " last step; stage 0 by category at its peak (param / grad / optim / activation)." % model, "",
           "| M | schedule | step (s) | steps 2..N (s) | vs 1f1b | bubble s0 / s1 | peak s0 / s1 (MiB) "
           "| stage 0 at peak: param / grad / optim / activation (MiB) | last step measured / simulated from its costs (s) "
           "| model, calibrated: step (s) / stage 0 activation peak (MiB) |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    ref = {(r[0], r[1]): r[2] for r in rows}
    for m, s, step, all_steps, bubble, peak, at_peak, sim, model_sim in rows:
        base = ref.get((m, "1f1b"))
        vs = "%.3f" % (base / step) if base else "-"
        out.append("| %d | %s | %.2f | %s | %s | %s | %s | %s | %s | %s |" % (
            m, s, step, ", ".join("%.2f" % x for x in all_steps), vs,
            " / ".join("%.1f%%" % (100 * b) for b in bubble),
            " / ".join("%.0f" % (p / MIB) for p in peak),
            " / ".join("%.0f" % (at_peak.get(k, 0) / MIB) for k in ("param", "grad", "optim", "activation")),
            sim, model_sim))
    out.append("")
    out.append("Last column: sdp-pipeline --model for this very case (2 stages), its rates calibrated on the"
               " measured costs.json named below; its activation peak is the meta-device bytes of the"
               " micro-batches the schedule holds at once on stage 0.")
    out.append("vs 1f1b: 1f1b's median step over this schedule's (above 1 = faster).")
    return "\n".join(out)


def simulated_table(directory, models):
    out = ["Simulated (sdp-pipeline --model): step and gain over 1f1b (1f1b's step / this step), mean"
           " bubble over stages, largest per-stage peak of activation + pending-W bytes (meta-device counts"
           " per micro-batch, held as the simulator's memory model says) and its excess over 1f1b's.", "",
           "| model | P | M | 1f1b step (s) | 1f1b-2bp step (s) | zb-h1 step (s) | gain 2bp | gain zb-h1 "
           "| bubble 1f1b / 2bp / zb-h1 | peak 1f1b / 2bp / zb-h1 (MiB) | extra of 2bp / zb-h1 (MiB) |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    rates = {}
    for model in models:
        files = glob.glob(os.path.join(directory, "sim", "%s-p*-m*.json" % model))
        keyed = []
        for f in files:
            hit = re.search(r"-p(\d+)-m(\d+)\.json$", f)
            keyed.append((int(hit.group(1)), int(hit.group(2)), f))
        for p, m, f in sorted(keyed):
            if p == 2:
                continue  # the measured case, shown beside the measurement
            with open(f) as fh:
                d = json.load(fh)
            rates[model] = d["model"]["rates_source"]
            by = {s["name"]: s for s in d["schedules"]}
            a, b, z = by["1f1b"], by["1f1b-2bp"], by["zb-h1"]
            peak = [max(s["peak_memory_bytes"]) for s in (a, b, z)]
            out.append("| %s | %d | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %s | %s | %s |" % (
                model, p, m, a["makespan"], b["makespan"], z["makespan"], a["makespan"] / b["makespan"],
                a["makespan"] / z["makespan"],
                " / ".join("%.1f%%" % (100 * s["mean_bubble"]) for s in (a, b, z)),
                " / ".join("%.0f" % (x / MIB) for x in peak),
                " / ".join("%+.0f" % ((x - peak[0]) / MIB) for x in peak[1:])))
    out.append("")
    for model, source in rates.items():
        out.append("- %s: %s" % (model, source))
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--microbatches", type=int, nargs="+", required=True)
    ap.add_argument("--schedules", nargs="+", required=True)
    ap.add_argument("--simulated", nargs="*", default=[])
    a = ap.parse_args()
    print(measured_table(a.dir, a.model, a.microbatches, a.schedules))
    print()
    print(simulated_table(a.dir, [m for m in a.simulated if m != "none"]))


if __name__ == "__main__":
    main()
