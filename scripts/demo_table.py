#!/usr/bin/env python3
"""Prints the demo's comparison table from sdp-train JSON-lines metrics.

    python3 scripts/demo_table.py [--step-time] out/demo/ddp.jsonl out/demo/b-sdp.jsonl ...

One row per file: the strategy with its sharding and recomputation (FSDP+AC,
B-SDP+FSDP+AC, ...), the final full-model eval loss and its gap to the best
achievable loss (the synthetic language's entropy rate), the peak memory per
rank (the largest over ranks and steps) with the saving against DDP, the
bytes sent per rank per step (the mean over ranks, averaged over the steps)
with the ratio to DDP, and with --step-time the median step time (rank 0's
wall time of a training step, evaluation excluded). Runs of a classifier
(ResNet, Swin) add the full model's final eval top-1 and top-5 accuracy, and
of a LLaMA its next-token top-1. The DDP row (no sharding, no
recomputation), when present, is the reference; without it the comparison
columns show "-". Standard library only, so that any python3 runs it.
"""
import json
import math
import sys

MIB = 1024.0 * 1024.0


def fail(message):
    sys.exit(f"demo_table: {message}")


def read_run(path):
    steps, summary = [], None
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as e:
                    fail(f"{path}:{n}: not JSON ({e})")
                if record.get("summary"):
                    summary = record
                else:
                    steps.append(record)
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    if summary is None:
        fail(f"{path} has no summary line: the run did not finish")
    if not steps:
        fail(f"{path} has no step lines")
    # Multi-rank runs carry every rank's figures; a single-process run only
    # its own, which is then the max and the mean.
    def rank_stat(step, key, stat):
        ranks = step.get("ranks")
        if ranks is not None:
            return ranks[key][stat]
        return step["memory"]["peak"]["total"] if key == "peak_bytes" else step["comm"]["sent_bytes"]

    parallel = summary.get("parallel", {})
    config = summary["config"]
    times = sorted(s["seconds"] for s in steps)
    return {
        "path": path,
        "strategy": config["strategy"],
        "reference": (config["strategy"] == "ddp" and config.get("shard", "") in ("", "none")
                      and config.get("activation_checkpointing", "none") == "none"),
        "label": composition(parallel.get("description", config["strategy"]), config),
        "step_seconds": times[len(times) // 2],
        "world": parallel.get("world", 1),
        "steps": summary["steps"],
        "eval_loss": summary.get("final_eval_loss"),
        # Classifiers: top-1 and top-5; token models: the next token's top-1.
        "top1": summary.get("final_eval_top1"),
        "top5": summary.get("final_eval_top5"),
        "classifier": "final_eval_top1" in summary,
        "best": summary.get("best_achievable_loss"),
        "peak": max(rank_stat(s, "peak_bytes", "max") for s in steps),
        "sent": sum(rank_stat(s, "sent_bytes", "mean") for s in steps) / len(steps),
    }


SHARD_LABELS = {"optimizer": "ZeRO-1", "grad": "ZeRO-2", "full": "FSDP"}


def composition(description, config):
    """'B-SDP+FSDP+AC (C = 0.5)': the strategy's description with its sharding and
    recomputation added as sdp-plan labels its compositions."""
    name, _, detail = description.replace(", cyclic", "").partition(" (")
    shard = SHARD_LABELS.get(config.get("shard", ""))
    if shard == "FSDP" and name == "DDP":
        name = "FSDP"  # ddp with every parameter sharded is FSDP
    elif shard and name != shard:  # --strategy fsdp is described as FSDP already
        name += "+" + shard
    ac = config.get("activation_checkpointing", "none")
    if ac == "block":
        name += "+AC"
    elif ac.startswith("every:"):
        name += "+AC:" + ac.split(":", 1)[1]
    notes = [detail.rstrip(")")] if detail else []
    if shard == "FSDP" and config.get("reshard_after_forward") is False:
        notes.append("kept after forward")
    return name + (f" ({', '.join(notes)})" if notes else "")


def number(x, fmt):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def main(args):
    step_time = "--step-time" in args
    paths = [a for a in args if a != "--step-time"]
    if not paths:
        fail("usage: demo_table.py METRICS.jsonl [METRICS.jsonl ...]")
    runs = [read_run(p) for p in paths]
    ddp = next((r for r in runs if r["reference"]), None)
    bests = {r["best"] for r in runs if r["best"] is not None}
    if len(bests) > 1:
        fail("the runs are on different data (best achievable losses "
             f"{sorted(bests)}): their losses cannot share a table")
    best = bests.pop() if bests else None

    classifier = any(r["classifier"] for r in runs)
    top5 = any(r["top5"] is not None for r in runs)

    def percent(x):
        return None if x is None else 100.0 * x

    rows = []
    for r in runs:
        gap = None if r["eval_loss"] is None or best is None else r["eval_loss"] - best
        saving = ratio = None
        if ddp is not None:
            saving = 100.0 * (1.0 - r["peak"] / ddp["peak"])
            ratio = r["sent"] / ddp["sent"] if ddp["sent"] > 0 else None
        rows.append([
            r["label"],
            number(r["eval_loss"], ".4f"),
            number(gap, "+.4f"),
        ] + ([number(percent(r["top1"]), ".1f")] if classifier else [])
          + ([number(percent(r["top5"]), ".1f")] if top5 else []) + [
            number(r["peak"] / MIB, ".2f"),
            number(saving, ".1f"),
            number(r["sent"] / MIB, ".3f"),
            number(ratio, ".2f"),
        ] + ([number(1e3 * r["step_seconds"], ".0f")] if step_time else []))
    head = (["strategy", "eval loss", "gap"] + (["top-1 %"] if classifier else [])
            + (["top-5 %"] if top5 else [])
            + ["peak MiB/rank", "saving %", "sent MiB/rank/step", "vs DDP"]
            + (["step ms"] if step_time else []))
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]

    def line(cells):
        first = cells[0].ljust(widths[0])
        rest = (c.rjust(w) for c, w in zip(cells[1:], widths[1:]))
        return "  ".join([first, *rest])

    worlds = sorted({r["world"] for r in runs})
    steps = sorted({r["steps"] for r in runs})
    print(f"{len(runs)} runs, {'/'.join(map(str, worlds))} ranks, "
          f"{'/'.join(map(str, steps))} steps each; best achievable loss (entropy rate) "
          + (f"{best:.4f} nats/token" if best is not None else "unknown for this data"))
    print(line(head))
    print(line(["-" * w for w in widths]))
    for row in rows:
        print(line(row))
    print("eval loss: full model (union of all ranks' subnets) on the validation batches; "
          "gap: eval loss - entropy rate;\n"
          + ("top-1, top-5: the full model's eval accuracy (label, or next token, among the "
             "1 or 5 largest logits);\n" if classifier else "")
          + "peak: largest per-rank peak over ranks and steps, "
          "saving against DDP; sent: bytes per rank per step (mean over ranks), ratio to DDP"
          + (";\nstep: median wall time of a training step on rank 0 (the ranks share the cores)."
             if step_time else "."))


if __name__ == "__main__":
    main(sys.argv[1:])
