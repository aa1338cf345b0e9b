#!/usr/bin/env python3
"""Markdown report of bench/multi_rank_measured.sh's runs (standard library only).

    python3 bench/multi_rank_table.py --dir out/multi_rank --ranks 4 ddp b-sdp@0.5 ...

Each label (STRATEGY@C, or ddp) names DIR/<STRATEGY>-C<C>.mpi.jsonl (the
sdp-train metrics of the mpirun job: rank 0 writes every rank's peak and sent
bytes per step, and its own memory and traffic breakdown) and
DIR/<...>.dry<r>.jsonl (the meta-device dry run emulating rank r).

Three tables: the measured per-rank figures with their ratios to DDP; rank 0's
peak broken down by category, with its traffic by collective; and dry run
against measurement, rank by rank.
"""
import argparse
import json
import os
import sys

MIB = 1024.0 * 1024.0
CATEGORIES = ["param", "master", "grad", "optim", "activation", "workspace", "comm"]
PRETTY = {"ddp": "DDP", "b-sdp": "B-SDP", "n-sdp": "N-SDP", "bb-sdp": "Bb-SDP", "nb-sdp": "Nb-SDP"}


def fail(message):
    sys.exit(f"multi_rank_table: {message}")


def read_lines(path):
    try:
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror} (run bench/multi_rank_measured.sh first)")
    except json.JSONDecodeError as e:
        fail(f"{path}: not JSON lines ({e})")


def mib(x):
    return f"{x / MIB:.2f}"


def load(directory, label, ranks):
    strategy, _, c = label.partition("@")
    stem = strategy if strategy == "ddp" else f"{strategy}-C{c}"
    lines = read_lines(os.path.join(directory, stem + ".mpi.jsonl"))
    steps = [x for x in lines if not x.get("summary")]
    summary = next((x for x in lines if x.get("summary")), None)
    if not steps or summary is None:
        fail(f"{stem}.mpi.jsonl: the run did not finish (no steps or no summary line)")
    world = len(steps[0]["ranks"]["peak_bytes"]["by_rank"])
    if world != ranks:
        fail(f"{stem}.mpi.jsonl has {world} ranks, expected {ranks}")
    # Every step of a run should charge the same bytes; the tables use the
    # largest peak and the mean traffic, and say so when steps differ.
    peak = [max(s["ranks"]["peak_bytes"]["by_rank"][r] for s in steps) for r in range(ranks)]
    sent = [sum(s["ranks"]["sent_bytes"]["by_rank"][r] for s in steps) / len(steps)
            for r in range(ranks)]
    constant = all(s["ranks"] == steps[0]["ranks"] for s in steps)
    dry = []
    for r in range(ranks):
        path = os.path.join(directory, f"{stem}.dry{r}.jsonl")
        got = read_lines(path) if os.path.exists(path) else []
        dry.append(got[0] if got else None)
    return {
        "label": PRETTY.get(strategy, strategy),
        "c": 1.0 if strategy == "ddp" else float(c),
        "strategy": strategy,
        "peak": peak,
        "sent": sent,
        "constant": constant,
        "steps": len(steps),
        "memory0": steps[-1]["memory"],
        "comm0": steps[-1]["comm"],
        "dry": dry,
        "config": summary["config"],
        "parameters": summary["parameters"],
    }


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" if i == 0 else "---:"
                                                          for i in range(len(head))) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("labels", nargs="+")
    args = ap.parse_args()
    runs = [load(args.dir, label, args.ranks) for label in args.labels]
    ddp = next((r for r in runs if r["strategy"] == "ddp"), None)
    cfg = runs[0]["config"]
    n = args.ranks

    print(f"Model `{cfg['model']}` ({runs[0]['parameters'] / 1e6:.2f}M parameters), "
          f"{n} ranks, batch {cfg['batch']} x seq {cfg['seq']} tokens per rank, f32, AdamW, "
          f"{runs[0]['steps']} steps per run, cyclic plans. MiB = 2^20 bytes.\n")

    print(f"**Measured** (mpirun, {n} processes, CPU allocator). Peak: the allocator's "
          "peak of all categories in one training step; sent: bytes a rank sends per step "
          "by the ring formulas (all-reduce 2(k-1)/k S, broadcast S at the root).\n")
    rows = []
    for r in runs:
        ratio_peak = f"{max(r['peak']) / max(ddp['peak']):.2f}" if ddp else "-"
        ratio_sent = (f"{(sum(r['sent']) / n) / (sum(ddp['sent']) / n):.2f}"
                      if ddp and sum(ddp["sent"]) > 0 else "-")
        rows.append([r["label"], f"{r['c']:g}", mib(min(r["peak"])), mib(max(r["peak"])),
                     ratio_peak, mib(min(r["sent"])), mib(sum(r["sent"]) / n), mib(max(r["sent"])),
                     ratio_sent])
    print(table(["strategy", "C", "peak min MiB", "peak max MiB", "max peak / DDP",
                 "sent min MiB", "sent mean MiB", "sent max MiB", "mean sent / DDP"], rows))
    varying = [r["label"] + f" C={r['c']:g}" for r in runs if not r["constant"]]
    print("\nEvery step of every run had the same per-rank figures." if not varying else
          "\nPer-rank figures differed between steps in: " + ", ".join(varying) +
          " (peak: the largest; sent: the mean).")

    print(f"\n**Rank 0 at its peak**, by category (MiB), and its traffic per step by "
          "collective (MiB sent):\n")
    used = [c for c in CATEGORIES
            if any(r["memory0"]["peak"]["at_peak"].get(c, 0) for r in runs)]
    ops = [o for o in ["all_reduce", "broadcast", "all_gather", "reduce_scatter", "send"]
           if any(r["comm0"]["by_op"].get(o, {}).get("sent_bytes", 0) for r in runs)]
    rows = []
    for r in runs:
        at_peak = r["memory0"]["peak"]["at_peak"]
        rows.append([r["label"], f"{r['c']:g}"] + [mib(at_peak.get(c, 0)) for c in used]
                    + [mib(r["memory0"]["peak"]["total"])]
                    + [mib(r["comm0"]["by_op"][o]["sent_bytes"]) for o in ops]
                    + [str(r["comm0"]["calls"])])
    print(table(["strategy", "C"] + used + ["total"] + [o.replace("_", "-") for o in ops]
                + ["collectives"], rows))
    unused = [c for c in CATEGORIES if c not in used]
    if unused:
        print(f"\n({', '.join(unused)}: 0 in every run.)")

    print(f"\n**Dry run vs measured**, per rank: `--device meta --emulate-world {n} "
          "--emulate-rank r --dry-run` (one process, one step, 512-byte blocks) against the "
          "mpirun job's rank r (64-byte alignment). Bytes.\n")
    rows, missing, worst, sent_equal, cat_worst, compared = [], [], (0.0, 0, ""), True, 0, 0
    for r in runs:
        for rank in range(n):
            d = r["dry"][rank]
            measured_peak, measured_sent = r["peak"][rank], r["sent"][rank]
            if d is None:
                missing.append(f"{r['label']} C={r['c']:g} rank {rank}")
                rows.append([r["label"], f"{r['c']:g}", str(rank), f"{measured_peak:.0f}",
                             "(no output)", "-", f"{measured_sent:.0f}", "(no output)", "-"])
                continue
            compared += 1
            dry_peak, dry_sent = d["memory"]["peak"]["total"], d["comm"]["sent_bytes"]
            diff = dry_peak - measured_peak
            rel = 100.0 * diff / measured_peak
            if abs(rel) > abs(worst[0]):
                worst = (rel, diff, f"{r['label']} C={r['c']:g} rank {rank}")
            sent_equal &= dry_sent == measured_sent
            if rank == 0:
                for c in CATEGORIES:
                    cat_worst = max(cat_worst, abs(d["memory"]["peak"]["at_peak"].get(c, 0)
                                                   - r["memory0"]["peak"]["at_peak"].get(c, 0)))
            rows.append([r["label"], f"{r['c']:g}", str(rank), f"{measured_peak:.0f}",
                         f"{dry_peak:.0f}", f"{diff:+.0f} ({rel:+.3f}%)", f"{measured_sent:.0f}",
                         f"{dry_sent:.0f}", "yes" if dry_sent == measured_sent else "**no**"])
    print(table(["strategy", "C", "rank", "measured peak", "dry-run peak", "dry - measured",
                 "measured sent", "dry-run sent", "sent equal"], rows))
    print()
    sent_text = "Sent bytes: " + ("identical for every rank compared." if sent_equal else
                                  "**differ** for some ranks (see the table).")
    if worst[2]:
        print(f"Largest relative peak difference: {worst[1]:+.0f} bytes ({worst[0]:+.3f}%), "
              f"{worst[2]}; largest per-category difference at rank 0's peak: {cat_worst:.0f} "
              f"bytes. {sent_text}")
    elif compared:
        print(f"Peak bytes: identical, in total and per category, for all {compared} ranks "
              f"compared. {sent_text}" if cat_worst == 0 else
              f"Peak totals identical for all {compared} ranks compared; per-category "
              f"differences up to {cat_worst:.0f} bytes at rank 0's peak. {sent_text}")
    if missing:
        print(f"\nNo dry-run output for {len(missing)} of {len(runs) * n} emulated ranks "
              f"({missing[0]}, ...): sdp-train exited 0 but printed and wrote nothing.")


if __name__ == "__main__":
    main()
