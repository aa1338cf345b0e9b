"""check_cuda_job.py: one multi-rank sdp-train job on the emulated CUDA device
held against the same job on the CPU.

    check_cuda_job.py --sdp-train BIN --work DIR --dtype f32|bf16
                      [--resume-on-cpu] -- LAUNCH... -- FLAGS...

LAUNCH is the mpiexec command line up to the program (mpiexec -n 4
--oversubscribe); FLAGS are the job's sdp-train flags (model, strategy,
sharding, pipeline, steps, batch). The script runs the job twice, with
--device cpu --dtype f32 and with --device cuda --dtype DTYPE, each with its
own metrics file and save directory, and compares step by step: the train
loss and the gradient norm of every step and the final eval loss.

Tolerances are those of the CUDA tests: f32 (cuBLASLt and cuDNN accumulate
in another order than OpenBLAS, reductions on the device take a tree order)
2e-4 relative on losses and 2e-3 on gradient norms over a few steps (a ResNet's BatchNorm, recalibrated before the eval loss, measured 4e-5 and 9e-5); bf16
(parameters and activations rounded to 8 bits of mantissa, f32 master
weights) 3e-2 and 1e-1, the mixed-precision tests' bounds.

--resume-on-cpu: the CUDA job's checkpoint is resumed by a CPU job for two
more steps, and so is the CPU job's: the two continuations must agree to the
same tolerance, which shows the checkpoint the device wrote loads, whole and
right, on the CPU.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

TOLERANCE = {"f32": (2e-4, 2e-3), "bf16": (3e-2, 1e-1)}


def fail(message):
    print(f"FAILED: {message}")
    sys.exit(1)


def run(command, log):
    print("$ " + " ".join(command), flush=True)
    with open(log, "w") as out:
        status = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT).returncode
    with open(log) as f:
        text = f.read()
    if status != 0:
        print(text[-6000:])
        fail(f"exit status {status} (log: {log})")
    return text


def records(path):
    with open(path) as f:
        lines = [json.loads(line) for line in f.read().splitlines() if line.strip()]
    return [r for r in lines if "step" in r and not r.get("summary")]


def close(a, b, rtol):
    return abs(a - b) <= rtol * max(abs(a), abs(b), 1e-12)


def compare(cpu, cuda, rtol_loss, rtol_norm, label):
    if len(cpu) != len(cuda) or not cpu:
        fail(f"{label}: {len(cpu)} CPU steps, {len(cuda)} CUDA steps")
    worst = 0.0
    for a, b in zip(cpu, cuda):
        if a["step"] != b["step"]:
            fail(f"{label}: step {a['step']} on the CPU, {b['step']} on CUDA")
        for key, rtol in (("loss", rtol_loss), ("grad_norm", rtol_norm), ("eval_loss", rtol_loss)):
            if key not in a:
                continue
            x, y = a[key], b.get(key)
            if y is None or not close(x, y, rtol):
                fail(f"{label}: step {a['step']}: {key} {x!r} on the CPU, {y!r} on CUDA "
                     f"(relative tolerance {rtol})")
            worst = max(worst, abs(x - y) / max(abs(x), 1e-12))
    print(f"ok: {label}: {len(cpu)} steps agree; largest relative difference {worst:.2e}")


def main():
    argv = sys.argv[1:]
    if argv.count("--") != 2:
        fail("usage: check_cuda_job.py OPTIONS -- LAUNCH... -- FLAGS...")
    first = argv.index("--")
    second = argv.index("--", first + 1)
    p = argparse.ArgumentParser()
    p.add_argument("--sdp-train", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--dtype", choices=sorted(TOLERANCE), default="f32")
    p.add_argument("--resume-on-cpu", action="store_true")
    args = p.parse_args(argv[:first])
    launch, flags = argv[first + 1:second], argv[second + 1:]
    steps = int(flags[flags.index("--steps") + 1])
    rtol_loss, rtol_norm = TOLERANCE[args.dtype]

    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    runs = {}
    for device, dtype in (("cpu", "f32"), ("cuda", args.dtype)):
        metrics = os.path.join(args.work, f"{device}.jsonl")
        save = os.path.join(args.work, f"{device}_ck")
        run(launch + [args.sdp_train] + flags +
            ["--device", device, "--dtype", dtype, "--metrics", metrics, "--save-dir", save,
             "--progress", "false"], os.path.join(args.work, f"{device}.log"))
        runs[device] = records(metrics)
    compare(runs["cpu"], runs["cuda"], rtol_loss, rtol_norm, f"{args.dtype} job")

    if args.resume_on_cpu:
        continued = {}
        for source in ("cpu", "cuda"):
            metrics = os.path.join(args.work, f"resumed_from_{source}.jsonl")
            longer = list(flags)
            longer[longer.index("--steps") + 1] = str(steps + 2)
            run(launch + [args.sdp_train] + longer +
                ["--device", "cpu", "--dtype", "f32", "--resume",
                 os.path.join(args.work, f"{source}_ck"), "--metrics", metrics,
                 "--progress", "false"], os.path.join(args.work, f"resumed_from_{source}.log"))
            continued[source] = [r for r in records(metrics) if r["step"] > steps]
        if len(continued["cpu"]) != 2:
            fail(f"the resumed CPU job ran steps {[r['step'] for r in continued['cpu']]}, "
                 f"expected {steps + 1} and {steps + 2}")
        compare(continued["cpu"], continued["cuda"], rtol_loss, rtol_norm,
                "CPU jobs resumed from the CPU and from the CUDA checkpoint")


if __name__ == "__main__":
    main()
