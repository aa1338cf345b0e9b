#!/usr/bin/env python3
"""plan_time_model.py BUILD_DIR [OUT_JSONL]

The planner's step-time model against measured CPU runs. For 2 and 4 ranks
(one thread each; 4 ranks share this machine's 2 cores, so their rates are
their own), runs sdp-train on LLaMA 'small' (batch 4, seq 128, STEPS steps)
under DDP, B-SDP (C = 0.5) and FSDP with --metrics, then asks sdp-plan for
each run's step time:
  - calibrated on the DDP run of the same world only (--calibrate), so the
    B-SDP and FSDP figures are predictions of runs the model never saw;
  - calibrated on all three runs of that world (how well one model fits them).
Measured = the median step seconds of the run (its first step left out).
Prints a Markdown table of predicted / measured and appends every figure to
OUT_JSONL (default bench/results/plan_time_model.jsonl).

Environment: STEPS (default 12), MODEL (small), BATCH (4), SEQ (128),
MPIEXEC (mpiexec), OMPI_ALLOW_RUN_AS_ROOT* as Open MPI needs them.
"""
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

STRATEGIES = [
    ("DDP", ["--strategy", "ddp"], "ddp"),
    ("B-SDP C=0.5", ["--strategy", "b-sdp", "--active-fraction", "0.5"], "b-sdp:0.5"),
    ("FSDP", ["--strategy", "fsdp"], "fsdp"),
]


def median_step_seconds(path):
    steps = [json.loads(l) for l in open(path) if l.strip()]
    seconds = [s["seconds"] for s in steps if "step" in s and "seconds" in s]
    return statistics.median(seconds[1:] if len(seconds) > 1 else seconds)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = sys.argv[1]
    out_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results", "plan_time_model.jsonl")
    steps = os.environ.get("STEPS", "12")
    model = os.environ.get("MODEL", "small")
    batch, seq = os.environ.get("BATCH", "4"), os.environ.get("SEQ", "128")
    mpiexec = os.environ.get("MPIEXEC", "mpiexec").split()
    train = os.path.join(build, "bin", "sdp-train")
    plan = os.path.join(build, "bin", "sdp-plan")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for world in (2, 4):
            files = {}
            for name, flags, _ in STRATEGIES:
                metrics = os.path.join(tmp, f"{world}-{name.split()[0]}.jsonl")
                subprocess.run([*mpiexec, "-n", str(world), "--oversubscribe", train,
                                "--model", model, "--batch", batch, "--seq", seq, "--steps", steps,
                                "--eval-every", "0", "--progress", "false", "--metrics", metrics,
                                *flags], check=True, env=env, capture_output=True)
                files[name] = metrics

            def predict(calibration):
                args = [plan, "--model", model, "--world", str(world), "--batch", batch, "--seq",
                        seq, "--device", "cpu", "--format", "json", "--strategies",
                        ",".join(item for _, _, item in STRATEGIES)]
                for f in calibration:
                    args += ["--calibrate", f]
                report = json.loads(subprocess.run(args, check=True, capture_output=True,
                                                   text=True, env=env).stdout)
                by_label = {}
                for s in report["strategies"]:
                    if s["requested"]:
                        by_label[s["label"]] = s["step_time"]["seconds"]
                return by_label, report["step_time_model"]

            from_ddp, model_ddp = predict([files["DDP"]])
            from_all, model_all = predict(list(files.values()))
            for (name, _, item), label in zip(STRATEGIES, ["DDP", "B-SDP", "FSDP"]):
                measured = median_step_seconds(files[name])
                rows.append({"world": world, "strategy": name, "measured_seconds": measured,
                             "predicted_from_ddp": from_ddp[label],
                             "predicted_from_all": from_all[label],
                             "model_from_ddp": model_ddp, "model_from_all": model_all})
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), platform.machine())
    print(f"LLaMA {model}, batch {batch} x seq {seq}, one thread per rank, {steps} steps, "
          f"median step ({cpu})\n")
    print("| ranks | strategy | measured s | predicted s (DDP-calibrated) | ratio | "
          "predicted s (all-calibrated) | ratio |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['world']} | {r['strategy']} | {r['measured_seconds']:.4f} | "
              f"{r['predicted_from_ddp']:.4f} | "
              f"{r['predicted_from_ddp'] / r['measured_seconds']:.2f} | "
              f"{r['predicted_from_all']:.4f} | "
              f"{r['predicted_from_all'] / r['measured_seconds']:.2f} |")
    for world in (2, 4):
        m = next(r for r in rows if r["world"] == world)["model_from_ddp"]
        print(f"\n{world} ranks, calibrated on DDP: {m['flops_per_second'] / 1e9:.2f} GFLOP/s per "
              f"rank, latency {m['link']['latency_seconds'] * 1e6:.1f} us per step, "
              f"{m['link']['intra_node_bytes_per_second'] / 1e9:.3f} GB/s")
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path, "a") as out:
        for r in rows:
            out.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
