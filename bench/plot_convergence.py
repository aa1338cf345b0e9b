#!/usr/bin/env python3
"""Plots and summarizes bench/convergence.sh's runs.

    python3 bench/plot_convergence.py --dir out/convergence \\
        [--plot bench/results/convergence.svg] [--report bench/results/convergence.md]

Reads DIR/equal_steps/<strategy>.jsonl and DIR/equal_flops/<strategy>.jsonl
(sdp-train metrics: train loss every step, full-model eval loss every k
steps, a summary line), estimates each run's FLOPs per rank per step with
bench/flops_estimate.py, draws the eval loss (markers) and the train loss
(moving average, faint) against steps for (a) and against estimated FLOPs per
rank for (b), with the entropy rate of the language as the floor, and prints
a Markdown summary (also written to --report when given). The plot is drawn
only with --plot, and only that needs matplotlib (the only non-standard
module here).
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flops_estimate  # noqa: E402  (the sibling module, found through the line above)

PRETTY = {"ddp": "DDP", "b-sdp": "B-SDP", "n-sdp": "N-SDP", "bb-sdp": "Bb-SDP", "nb-sdp": "Nb-SDP"}
COLOR = {"ddp": "black", "b-sdp": "tab:blue", "n-sdp": "tab:orange", "bb-sdp": "tab:green",
         "nb-sdp": "tab:red"}
SMOOTH = 20  # steps in the train-loss moving average
NEAR = 0.02  # "converged": eval loss within this of the entropy rate (nats/token)


def fail(message):
    sys.exit(f"plot_convergence: {message}")


def moving_average(values, window):
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="out/convergence")
    ap.add_argument("--plot", help="write the plot here (.svg or .png; needs matplotlib)")
    ap.add_argument("--report", help="also write the Markdown summary here")
    ap.add_argument("--strategies", default="ddp b-sdp n-sdp bb-sdp nb-sdp")
    args = ap.parse_args()
    if args.plot:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            fail(f"matplotlib is missing for {sys.executable}: apt-get install -y "
                 "python3-matplotlib (Debian's /usr/bin/python3) or pip install matplotlib; "
                 "without --plot only the summary is written")

    shapes = flops_estimate.model_shapes(
        os.environ.get("BIN", os.path.join(os.path.dirname(__file__), "..", "build/bin/sdp-train")))
    strategies = args.strategies.split()
    runs = {}
    for part in ("equal_steps", "equal_flops"):
        for s in strategies:
            run = flops_estimate.read_run(os.path.join(args.dir, part, s + ".jsonl"),
                                          " (run bench/convergence.sh first)")
            run["flops"] = flops_estimate.estimate(run["summary"], shapes)
            # The estimate's reading of the plan must give the parameters the
            # allocator actually held on rank 0 (f32: 4 bytes each).
            held = run["flops"]["per_rank"][0]["held_parameters"]
            measured = run["steps"][-1]["memory"]["peak"]["at_peak"]["param"] / 4
            if abs(held - measured) > 0.001 * measured:
                fail(f"{part}/{s}: the FLOPs estimate reads {held} parameters held on rank 0, "
                     f"the allocator held {measured:.0f}: the plan decoding is wrong")
            runs[part, s] = run
    if "ddp" not in strategies:
        fail("the comparison needs the ddp runs")
    best = runs["equal_steps", "ddp"]["summary"].get("best_achievable_loss")
    cfg = runs["equal_steps", "ddp"]["summary"]["config"]
    world = runs["equal_steps", "ddp"]["summary"]["parallel"]["world"]

    if args.plot:
        draw(plt, matplotlib, args.plot, runs, strategies, best, cfg, world)
    write_report(args, runs, strategies, best, cfg, world)


def draw(plt, matplotlib, path, runs, strategies, best, cfg, world):
    matplotlib.rcParams["svg.hashsalt"] = "sdp-convergence"  # stable SVG ids
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
    evals_all = []
    for ax, part in zip(axes, ("equal_steps", "equal_flops")):
        for s in strategies:
            run = runs[part, s]
            per_step = run["flops"]["mean"] / 1e9 if part == "equal_flops" else 1.0
            xs = [x["step"] * per_step for x in run["steps"]]
            train = moving_average([x["loss"] for x in run["steps"]], SMOOTH)
            ev = [(x["step"] * per_step, x["eval_loss"]) for x in run["steps"] if "eval_loss" in x]
            evals_all += [v for _, v in ev]
            style = "--" if run["summary"]["parallel"]["masking"] == "backward" else "-"
            label = run["summary"]["parallel"]["description"].replace(", cyclic", "")
            if part == "equal_flops":
                label += f", {run['summary']['steps']} steps"
            ax.plot(xs, train, style, color=COLOR.get(s), alpha=0.25, linewidth=1)
            ax.plot([x for x, _ in ev], [v for _, v in ev], style, marker="o", markersize=3,
                    color=COLOR.get(s), label=label)
        if best is not None:
            ax.axhline(best, color="gray", linestyle=":", linewidth=1)
            ax.text(0.01, best, "entropy rate", va="bottom", ha="left", color="gray",
                    fontsize=8, transform=ax.get_yaxis_transform())
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_xlabel("step")
    axes[0].set_ylabel("loss (nats/token): eval (markers), train (faint, 20-step mean)")
    axes[0].set_title(f"(a) equal steps: {cfg['steps']} each")
    axes[1].set_xlabel("estimated GFLOP per rank (analytic, bench/flops_estimate.py)")
    axes[1].set_title("(b) equal FLOPs: DDP's budget")
    low = (best if best is not None else min(evals_all)) - 0.02
    axes[0].set_ylim(low, low + 0.4)
    fig.suptitle(f"{cfg['model']} LLaMA on the synthetic language, {world} ranks, batch "
                 f"{cfg['batch']} x {cfg['seq']} tokens per rank, lr {cfg['lr']:g}; "
                 f"SDP at C = {runs['equal_steps', strategies[-1]]['summary']['config']['active_fraction']:g}",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None} if path.endswith(".svg") else None)


def write_report(args, runs, strategies, best, cfg, world):
    times = {}
    times_path = os.path.join(args.dir, "times.tsv")
    if os.path.exists(times_path):
        with open(times_path, encoding="utf-8") as f:
            for line in f:
                part, s, _, seconds = line.rstrip("\n").split("\t")
                times[part, s] = float(seconds)
    ddp_flops = runs["equal_steps", "ddp"]["flops"]["mean"]

    def gap(x):
        return "-" if x is None or best is None else f"{x - best:+.4f}"

    def subnet(run, s):
        sub = [v for v in run["summary"].get("eval_subnet_loss", []) if v is not None]
        same = run["summary"]["parallel"]["masking"] == "backward" or s == "ddp"
        return "(full)" if same or not sub else f"{sum(sub) / len(sub):.4f}"

    def reached(run, per_step):
        # The first evaluation within NEAR of the entropy rate: a speed of
        # convergence, as noisy as one evaluation is.
        for x in run["steps"]:
            if "eval_loss" in x and best is not None and x["eval_loss"] <= best + NEAR:
                return f"{x['step'] * per_step:.0f}"
        return "not reached"

    lines = [
        "| strategy | GFLOP / rank / step (est.) | vs DDP | (a) steps | (a) eval loss | (a) gap "
        f"| (a) mean subnet loss | (a) step within {NEAR} | (b) steps | (b) eval loss | (b) gap "
        f"| (b) GFLOP/rank within {NEAR} | wall s (a) / (b) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in strategies:
        a, b = runs["equal_steps", s], runs["equal_flops", s]
        ea, eb = a["summary"]["final_eval_loss"], b["summary"]["final_eval_loss"]
        ta = times.get(("equal_steps", s))
        tb = times.get(("equal_flops", s), ta if s == "ddp" else None)
        wall = " / ".join("-" if t is None else f"{t:.0f}" for t in (ta, tb))
        lines.append(
            f"| {a['summary']['parallel']['description'].replace(', cyclic', '')} "
            f"| {a['flops']['mean'] / 1e9:.3f} | {a['flops']['mean'] / ddp_flops:.3f} "
            f"| {a['summary']['steps']} | {ea:.4f} | {gap(ea)} | {subnet(a, s)} "
            f"| {reached(a, 1)} | {b['summary']['steps']} | {eb:.4f} | {gap(eb)} "
            f"| {reached(b, b['flops']['mean'] / 1e9)} | {wall} |")
    text = "\n".join(lines)
    info_path = os.path.join(args.dir, "run_info.txt")
    info = open(info_path, encoding="utf-8").read().strip() if os.path.exists(info_path) else ""
    entropy = "unknown" if best is None else f"{best:.4f} nats/token"
    report = (f"Convergence on the synthetic language: model `{cfg['model']}`, {world} ranks, "
              f"batch {cfg['batch']} x seq {cfg['seq']} per rank, lr {cfg['lr']:g} (warmup "
              f"{cfg['warmup']}, cosine to {cfg['min_lr']:g}), eval every {cfg['eval_every']} "
              f"steps on {cfg['eval_batches']} batches, seed {cfg['seed']}. Entropy rate "
              f"(best achievable loss): {entropy}."
              + (f" Plot: `{args.plot}`." if args.plot else "") + "\n")
    if info:
        report += "\n" + "; ".join(info.splitlines()) + ".\n"
    report += "\n" + text + "\n"
    print(report)
    if args.report:
        with open(args.report, "w", encoding="utf-8") as f:
            f.write(report)
    written = [p for p in (args.plot, args.report) if p]
    if written:
        print(f"plot_convergence: wrote {' and '.join(written)}", file=sys.stderr)


if __name__ == "__main__":
    main()
