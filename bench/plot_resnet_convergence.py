#!/usr/bin/env python3
"""Plots and summarizes bench/resnet_convergence.sh's runs.

    python3 bench/plot_resnet_convergence.py --dir out/resnet_convergence \\
        --plot bench/results/resnet_convergence.svg --report bench/results/resnet_convergence.md

Reads DIR/<strategy>.jsonl (sdp-train metrics: train loss and per-rank
figures every step, full-model eval loss every k steps, a summary line),
DIR/<strategy>.recal.jsonl (the final model's eval loss after BatchNorm
recalibration, see resnet_convergence.sh) when present, and DIR/times.tsv,
draws the eval loss (markers) and a moving average of the train
loss (faint) against the step, with ln(classes) (chance) for reference, and
writes a Markdown table: final losses, the mean of the ranks' own
subnetworks' eval losses, peak memory per rank (the max over ranks, from the
metrics' "ranks" field) and bytes sent per rank per step. Needs matplotlib.
"""
import argparse
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The sibling modules, found through the line above: one metrics-file reader
# and the LLaMA convergence plot's colours and smoothing.
from flops_estimate import read_run as read_metrics  # noqa: E402
from plot_convergence import COLOR, SMOOTH, moving_average  # noqa: E402

MIB = 2.0 ** 20


def fail(message):
    sys.exit(f"plot_resnet_convergence: {message}")


def read_run(path):
    return read_metrics(path, " (run bench/resnet_convergence.sh first)")


def label_of(run, s):
    parallel = run["summary"].get("parallel", {})
    text = parallel.get("description") or s.upper()
    return text.replace(", cyclic", "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="out/resnet_convergence")
    ap.add_argument("--plot", default="bench/results/resnet_convergence.svg")
    ap.add_argument("--report", default="bench/results/resnet_convergence.md")
    ap.add_argument("--strategies", default="ddp b-sdp n-sdp")
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        fail(f"matplotlib is missing for {sys.executable}: apt-get install -y python3-matplotlib "
             "(Debian's /usr/bin/python3) or pip install matplotlib")

    strategies = args.strategies.split()
    runs = {s: read_run(os.path.join(args.dir, s + ".jsonl")) for s in strategies}
    recal = {}
    for s in strategies:
        path = os.path.join(args.dir, s + ".recal.jsonl")
        if os.path.exists(path):
            recal[s] = read_run(path)["summary"]["final_eval_loss"]
    first = runs[strategies[0]]["summary"]
    cfg = first["config"]
    world = first["parallel"]["world"]
    classes = None
    for token in cfg["data"].replace(":", ",").split(","):
        if token.startswith("classes="):
            classes = int(token.split("=", 1)[1])
    classes = classes or 10  # synthetic-images' default
    chance = math.log(classes)

    # --- plot ------------------------------------------------------------------
    matplotlib.rcParams["svg.hashsalt"] = "sdp-resnet-convergence"  # stable SVG ids
    fig, ax = plt.subplots(figsize=(8, 5))
    for s in strategies:
        run = runs[s]
        xs = [x["step"] for x in run["steps"]]
        train = moving_average([x["loss"] for x in run["steps"]], SMOOTH)
        ev = [(x["step"], x["eval_loss"]) for x in run["steps"] if "eval_loss" in x]
        ax.plot(xs, train, "-", color=COLOR.get(s), alpha=0.25, linewidth=1)
        ax.plot([x for x, _ in ev], [v for _, v in ev], "-", marker="o", markersize=3,
                color=COLOR.get(s), label=label_of(run, s))
        if s in recal:
            ax.plot([xs[-1]], [recal[s]], "*", markersize=11, color=COLOR.get(s),
                    markeredgecolor="white",
                    label=label_of(run, s) + ": final, BatchNorm recalibrated")
        sub = [(x["step"], statistics.mean(x["eval_subnet_loss"])) for x in run["steps"]
               if x.get("eval_subnet_loss") and s != "ddp"
               and run["summary"]["parallel"].get("masking") == "forward"]
        if sub:
            ax.plot([x for x, _ in sub], [v for _, v in sub], ":", marker="x", markersize=3,
                    color=COLOR.get(s), alpha=0.7, label=label_of(run, s) + ": mean of subnetworks")
    ax.axhline(chance, color="gray", linestyle=":", linewidth=1)
    ax.text(0.01, chance, f"chance, ln {classes}", va="bottom", ha="left", color="gray",
            fontsize=8, transform=ax.get_yaxis_transform())
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats): eval (markers), train (faint, 20-step mean)")
    # Log scale: DDP ends near 0.02 while SDP's unrecalibrated full-model
    # evaluations go far above chance.
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")
    ax.set_title(f"{cfg['model']} on {cfg['data']}, {world} ranks, batch {cfg['batch']} per rank, "
                 f"lr {cfg['lr']:g}", fontsize=9)
    fig.tight_layout()
    fig.savefig(args.plot, metadata={"Date": None} if args.plot.endswith(".svg") else None)

    # --- report ----------------------------------------------------------------
    times = {}
    times_path = os.path.join(args.dir, "times.tsv")
    if os.path.exists(times_path):
        with open(times_path, encoding="utf-8") as f:
            for line in f:
                s, seconds = line.rstrip("\n").split("\t")[:2]
                times[s] = float(seconds)
    ddp = runs.get("ddp")

    def ranks_stat(run, key, stat):
        values = [x["ranks"][key][stat] for x in run["steps"] if "ranks" in x]
        return values

    lines = [
        "| strategy | final eval loss | eval loss, BatchNorm recalibrated "
        "| final train loss (last 10) | mean subnet eval loss "
        "| best eval (step) | peak memory / rank, max over ranks (MiB) | vs DDP "
        "| sent / rank / step, mean (max) MiB | vs DDP | GFLOP / rank / step | images/s | wall s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in strategies:
        run = runs[s]
        summ = run["summary"]
        evals = [(x["eval_loss"], x["step"]) for x in run["steps"] if "eval_loss" in x]
        best = min(evals) if evals else (float("nan"), "-")
        peak = max(ranks_stat(run, "peak_bytes", "max")) / MIB
        sent_mean = statistics.median(ranks_stat(run, "sent_bytes", "mean")) / MIB
        sent_max = max(ranks_stat(run, "sent_bytes", "max")) / MIB
        flops = statistics.median(ranks_stat(run, "flops", "mean")) / 1e9
        sub = [v for v in summ.get("eval_subnet_loss") or [] if v is not None]
        forward_masked = s != "ddp" and summ["parallel"].get("masking") == "forward"
        sub_text = f"{statistics.mean(sub):.4f}" if sub and forward_masked else "(full)"
        if ddp is not None:
            ddp_peak = max(ranks_stat(ddp, "peak_bytes", "max")) / MIB
            ddp_sent = statistics.median(ranks_stat(ddp, "sent_bytes", "mean")) / MIB
            peak_ratio, sent_ratio = f"{peak / ddp_peak:.2f}", f"{sent_mean / ddp_sent:.2f}"
        else:
            peak_ratio = sent_ratio = "-"
        per_s = summ.get("images_per_s")
        wall = times.get(s)
        lines.append(
            f"| {label_of(run, s)} | {summ['final_eval_loss']:.4f} "
            f"| {'-' if s not in recal else f'{recal[s]:.4f}'} | {summ['final_train_loss']:.4f} "
            f"| {sub_text} | {best[0]:.4f} ({best[1]}) | {peak:.2f} | {peak_ratio} "
            f"| {sent_mean:.2f} ({sent_max:.2f}) | {sent_ratio} | {flops:.3f} "
            f"| {'-' if per_s is None else f'{per_s:.0f}'} | {'-' if wall is None else f'{wall:.0f}'} |")
    info_path = os.path.join(args.dir, "run_info.txt")
    info = open(info_path, encoding="utf-8").read().strip() if os.path.exists(info_path) else ""
    with open(args.report, "w", encoding="utf-8") as f:
        f.write(f"Convergence of `{cfg['model']}` on `{cfg['data']}`: {world} ranks, batch "
                f"{cfg['batch']} images per rank, {cfg['steps']} steps, lr {cfg['lr']:g} (warmup "
                f"{cfg['warmup']}, cosine to {cfg['min_lr']:g}), AdamW weight decay "
                f"{cfg['weight_decay']:g}, grad clip {cfg['grad_clip']:g}, eval every "
                f"{cfg['eval_every']} steps on {cfg['eval_batches']} batches of {cfg['batch']} "
                f"validation images, seed {cfg['seed']}. Chance: ln {classes} = {chance:.4f}. "
                f"Plot: `{args.plot}`.\n")
        if info:
            f.write("\n" + "; ".join(info.splitlines()) + ".\n")
        f.write("\n" + "\n".join(lines) + "\n")
    print(open(args.report, encoding="utf-8").read())
    print(f"plot_resnet_convergence: wrote {args.plot} and {args.report}", file=sys.stderr)


if __name__ == "__main__":
    main()
