#!/usr/bin/env python3
"""Runs and tabulates bench/fsdp_overhead.sh's configurations (standard library only).

    python3 bench/fsdp_overhead.py run --metrics M.jsonl --cpu M.cpu.json -- mpirun ... sdp-train ...
    python3 bench/fsdp_overhead.py table --dir out/fsdp_overhead --warmup 3 LABEL...

`run` starts the mpirun job and, whenever rank 0 appends a line to the metrics
file, samples every rank's CPU time (utime + stime of the sdp-train processes,
found by OMPI_COMM_WORLD_RANK in their environment). The step times sdp-train
reports are wall time; on a shared machine a rank can wait for the core while
another job runs, and the CPU time per step shows how much of the wall time the
rank actually ran (Open MPI's waiting in a collective spins, so it counts as
CPU time too).

`table` prints the Markdown tables of the runs DIR/<LABEL>.jsonl (+ .cpu.json):
per configuration the median step time, the share of the step spent in
collectives (the metrics' comm.wait_seconds over the step's seconds, summed
over the measured steps), peak memory per rank, FLOPs and bytes sent per rank;
then the recomputation's cost for each pair (configuration, the same +AC).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

MIB = 1024.0 * 1024.0

# label -> (shown name, what it is); the shell script owns the flags.
NAMES = {
    "ddp": "DDP",
    "zero1": "ZeRO-1 (optimizer)",
    "zero2": "ZeRO-2 (grad)",
    "zero3": "ZeRO-3 / FSDP, reshard after forward",
    "zero3-keep": "ZeRO-3 / FSDP, keep after forward",
    "bsdp": "B-SDP C=0.5",
    "bsdp-fsdp": "B-SDP C=0.5 + FSDP",
}


def fail(message):
    sys.exit(f"fsdp_overhead: {message}")


def pretty(label):
    base, ac = (label[:-3], True) if label.endswith("-ac") else (label, False)
    return NAMES.get(base, base) + (" + AC" if ac else "")


# --- run ---------------------------------------------------------------------------------

def rank_processes(root_pid):
    """{rank: pid} of the descendants of root_pid that carry an Open MPI rank."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = {}, [root_pid]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            todo.append(child)
            try:
                with open(f"/proc/{child}/environ", "rb") as f:
                    env = f.read().split(b"\0")
            except OSError:
                continue
            for var in env:
                if var.startswith(b"OMPI_COMM_WORLD_RANK="):
                    found[int(var.split(b"=", 1)[1])] = child
    return found


def cpu_seconds(pid, tick):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    except (OSError, ValueError, IndexError):
        return None


def run(args):
    if not args.command:
        fail("run: the command to start follows --")
    if os.path.exists(args.metrics):
        os.remove(args.metrics)
    tick = os.sysconf("SC_CLK_TCK")
    with open(args.log, "w") as log:
        proc = subprocess.Popen(args.command, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT)
        ranks, samples, seen = {}, [], 0
        while proc.poll() is None:
            if len(ranks) < args.ranks:
                ranks = rank_processes(proc.pid)
            try:
                with open(args.metrics) as f:
                    n = sum(1 for _ in f)
            except OSError:
                n = 0
            if n > seen:
                cpu = {str(r): cpu_seconds(pid, tick) for r, pid in sorted(ranks.items())}
                samples.append({"lines": n, "cpu": cpu})
                seen = n
            time.sleep(0.02)
    with open(args.cpu, "w") as f:
        json.dump(samples, f)
    if proc.returncode != 0:
        fail(f"the job exited with {proc.returncode}; its output is {args.log}")


# --- table -------------------------------------------------------------------------------

def load(directory, label, warmup):
    path = os.path.join(directory, label + ".jsonl")
    try:
        with open(path, encoding="utf-8") as f:
            lines = [json.loads(line) for line in f if line.strip()]
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror} (run bench/fsdp_overhead.sh first)")
    steps = [x for x in lines if not x.get("summary")]
    summary = next((x for x in lines if x.get("summary")), None)
    if summary is None or len(steps) <= warmup:
        fail(f"{path}: the run did not finish ({len(steps)} steps, warm-up {warmup})")
    timed = steps[warmup:]
    # CPU time of each rank between the metrics lines of consecutive steps.
    cpu = []
    cpu_path = os.path.join(directory, label + ".cpu.json")
    if os.path.exists(cpu_path):
        with open(cpu_path) as f:
            samples = {s["lines"]: s["cpu"] for s in json.load(f)}
        for i in range(warmup + 1, len(steps) + 1):
            a, b = samples.get(i - 1), samples.get(i)
            if a and b and a.get("0") is not None and b.get("0") is not None:
                cpu.append(b["0"] - a["0"])
    ranks = [s["ranks"] for s in timed]
    world = len(ranks[0]["peak_bytes"]["by_rank"])
    return {
        "label": label,
        "name": pretty(label),
        "seconds": statistics.median(s["seconds"] for s in timed),
        "cpu": statistics.median(cpu) if cpu else None,
        "wait_share": sum(s["comm"]["wait_seconds"] for s in timed)
                      / sum(s["seconds"] for s in timed),
        "wait": statistics.median(s["comm"]["wait_seconds"] for s in timed),
        "peak": [max(r["peak_bytes"]["by_rank"][k] for r in ranks) for k in range(world)],
        "flops": statistics.median(r["flops"]["max"] for r in ranks),
        "flops_equal": all(r["flops"]["min"] == r["flops"]["max"] for r in ranks),
        "sent": statistics.mean(r["sent_bytes"]["mean"] for r in ranks),
        "steps": len(timed),
        "summary": summary,
        "world": world,
    }


def table(head, rows):
    out = ["| " + " | ".join(head) + " |",
           "|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(out)


def show_table(args):
    runs = {label: load(args.dir, label, args.warmup) for label in args.labels}
    first = runs[args.labels[0]]
    cfg = first["summary"]["config"]
    ddp = runs.get("ddp")
    print(f"Model `{cfg['model']}` ({first['summary']['parameters'] / 1e6:.2f}M parameters), "
          f"{first['world']} ranks, batch {cfg['batch']} x seq {cfg['seq']} tokens per rank, "
          f"f32, AdamW; {args.warmup} warm-up steps, then the median of {first['steps']} steps. "
          "MiB = 2^20 bytes.\n")
    rows = []
    for label in args.labels:
        r = runs[label]
        vs = (f"{r['seconds'] / ddp['seconds']:.2f}" if ddp else "-")
        rows.append([r["name"], f"{r['seconds']:.3f}", vs,
                     "-" if r["cpu"] is None else f"{r['cpu']:.3f}",
                     f"{r['wait']:.3f}", f"{100 * r['wait_share']:.1f}",
                     f"{max(r['peak']) / MIB:.1f}",
                     f"{max(r['peak']) / max(ddp['peak']):.2f}" if ddp else "-",
                     f"{r['flops'] / 1e9:.2f}" + ("" if r["flops_equal"] else " (max)"),
                     f"{r['sent'] / MIB:.2f}"])
    print(table(["configuration", "step s (median)", "step / DDP", "rank-0 CPU s/step",
                 "wait s", "wait % of step", "peak MiB/rank", "peak / DDP", "GFLOP/step/rank",
                 "sent MiB/rank/step"], rows))
    uneven = [runs[l]["name"] for l in args.labels if max(runs[l]["peak"]) != min(runs[l]["peak"])]
    print("\nPeak: the largest over the measured steps, of the rank with the highest"
          + (" (ranks differ in: " + ", ".join(uneven) + ")." if uneven else
             " (every rank had the same peak).")
          + " Wait: rank 0's time inside collectives, including waits on asynchronous ones"
          " (all-gathers prefetched one block ahead); share = sum of waits / sum of step"
          " times. Sent: by the ring formulas, mean over ranks.")

    # The recomputation's cost: each configuration against itself + AC.
    pairs = [(l, l + "-ac") for l in args.labels if l + "-ac" in runs]
    if "bsdp" in runs and "bsdp-fsdp-ac" in runs and ("bsdp", "bsdp-ac") not in pairs:
        pairs.append(("bsdp", "bsdp-fsdp-ac"))
    if not pairs:
        return
    # The blocks' forward+backward FLOPs, from DDP and B-SDP: B-SDP drops (L-k) of the L
    # blocks and nothing else, so their difference is (L-k)/L of all blocks' FLOPs.
    blocks = None
    if ddp and "bsdp" in runs:
        plan = runs["bsdp"]["summary"]["parallel"]["plan"]
        total, held = plan["components"], plan["owned_per_rank"][0]
        if total > held:
            blocks = (ddp["flops"] - runs["bsdp"]["flops"]) * total / (total - held)
            block_share = {l: (1.0 if not l.startswith("bsdp") else held / total) for l in runs}
    rows = []
    for base, ac in pairs:
        a, b = runs[base], runs[ac]
        expected = share = "-"
        if blocks is not None:
            mine = blocks * block_share[base]
            expected = f"{1 + mine / 3 / a['flops']:.4f}"
            share = f"{(b['flops'] - a['flops']) / mine:.4f}"
        rows.append([f"{a['name']} -> {b['name']}", f"{b['flops'] / a['flops']:.4f}", expected,
                     share, f"{b['seconds'] / a['seconds']:.3f}",
                     "-" if not a["cpu"] or b["cpu"] is None else f"{b['cpu'] / a['cpu']:.3f}",
                     f"{max(b['peak']) / max(a['peak']):.3f}"])
    print("\n**Recomputation** (`--activation-checkpointing block`): measured against the same"
          " configuration without it.\n")
    print(table(["pair", "FLOPs ratio", "expected (1/3 rule)", "recomputed / blocks' fwd+bwd",
                 "step-time ratio", "CPU-time ratio", "peak ratio"], rows))
    if blocks is not None:
        rest = ddp["flops"] - blocks
        print(f"\nBlocks' forward+backward FLOPs per rank (full model): {blocks / 1e9:.3f} G of "
              f"DDP's {ddp['flops'] / 1e9:.3f} G (derived from DDP - B-SDP, which drops "
              f"{total - held} of {total} blocks); embedding, final norm, head and loss: "
              f"{rest / 1e9:.3f} G. Expected (1/3 rule) = 1 + (blocks' FLOPs / 3) / step FLOPs;"
              " the measured recomputation is the blocks' forward exactly, so the"
              " 'recomputed / blocks' fwd+bwd' column is the blocks' true forward share.")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run")
    r.add_argument("--metrics", required=True)
    r.add_argument("--cpu", required=True)
    r.add_argument("--log", required=True)
    r.add_argument("--ranks", type=int, default=2)
    r.add_argument("command", nargs=argparse.REMAINDER)
    t = sub.add_parser("table")
    t.add_argument("--dir", required=True)
    t.add_argument("--warmup", type=int, required=True)
    t.add_argument("labels", nargs="+")
    args = ap.parse_args()
    if args.what == "run":
        if args.command and args.command[0] == "--":
            args.command = args.command[1:]
        run(args)
    else:
        show_table(args)


if __name__ == "__main__":
    main()
