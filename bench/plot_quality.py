#!/usr/bin/env python3
"""Summarizes and plots bench/quality_study.sh's runs.

    python3 bench/plot_quality.py --dir out/quality [--plot bench/results/quality.svg]
                                  [--report bench/results/quality.md]

Reads DIR/MODEL/BUDGET/STRATEGY_cC_sSEED.jsonl (sdp-train metrics; BUDGET is
equal_steps or equal_flops; DDP runs under equal_steps, C 1, and is the
baseline of both budgets; DDP_cC under equal_flops is DDP trained for the
steps SDP gets at C, a control) and, for every model, budget, strategy and C,
gives over the seeds the mean and the range (min..max) of the full model's
final eval loss and eval top-1 (LLaMA: next-token top-1), the gap between
eval loss and the last steps' train loss (for SDP the train loss is that of
the ranks' subnetworks), and the FLOPs sdp-train counted (mean over ranks,
summed over steps) against DDP's. Then it checks three claims on these
numbers and says for each what holds. The plot (only with --plot; only that
needs matplotlib) draws eval loss and top-1 against C, one line per
strategy, bars from min to max, DDP as a band.
"""
import argparse
import collections
import glob
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flops_estimate  # noqa: E402  (the sibling module, found through the line above)
from plot_convergence import COLOR, PRETTY  # noqa: E402

NAME = re.compile(r"(?P<strategy>[a-z-]+)_c(?P<c>[0-9.]+)_s(?P<seed>\d+)\.jsonl$")
BUDGETS = ("equal_steps", "equal_flops")
MODELS = {"llama": "LLaMA on English text", "resnet": "ResNet on synthetic images"}
SDP = ("b-sdp", "n-sdp", "bb-sdp", "nb-sdp")


def fail(message):
    sys.exit(f"plot_quality: {message}")


def read_runs(root):
    """{(model, budget, strategy, C): [run figures, one per seed]}."""
    runs = collections.defaultdict(list)
    for model in MODELS:
        for budget in BUDGETS:
            for path in sorted(glob.glob(os.path.join(root, model, budget, "*.jsonl"))):
                m = NAME.search(os.path.basename(path))
                if not m:
                    continue
                run = flops_estimate.read_run(path, " (rerun bench/quality_study.sh)")
                s = run["summary"]
                flops = sum(step.get("ranks", {}).get("flops", {}).get("mean", step.get("flops", 0))
                            for step in run["steps"])
                top1 = s.get("final_eval_top1")
                runs[model, budget, m["strategy"], float(m["c"])].append({
                    "seed": int(m["seed"]), "steps": s["steps"],
                    "eval": s["final_eval_loss"], "train": s["final_train_loss"],
                    "top1": math.nan if top1 is None else 100 * top1, "flops": flops,
                    "world": s["parallel"]["world"], "config": s["config"]})
    if not runs:
        fail(f"no runs under {root} (run bench/quality_study.sh first)")
    return runs


def stats(values):
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return {"mean": math.nan, "min": math.nan, "max": math.nan, "n": 0}
    return {"mean": sum(values) / len(values), "min": min(values), "max": max(values),
            "n": len(values)}


def summarize(runs):
    """{(model, budget, strategy, C): figures over the seeds}; DDP under both budgets."""
    out = {}
    for (model, budget, s, c), seeds in runs.items():
        out[model, budget, s, c] = {
            "eval": stats([r["eval"] for r in seeds]), "top1": stats([r["top1"] for r in seeds]),
            "gap": stats([r["eval"] - r["train"] for r in seeds]),
            "steps": sorted({r["steps"] for r in seeds}), "flops": stats([r["flops"] for r in seeds]),
            "seeds": sorted(r["seed"] for r in seeds)}
    for model in MODELS:
        if (model, "equal_steps", "ddp", 1.0) in out:
            out[model, "equal_flops", "ddp", 1.0] = out[model, "equal_steps", "ddp", 1.0]
    return out


def spread(st, digits=3, unit=""):
    if st["n"] == 0:
        return "n/a"
    f = f"{{:.{digits}f}}"
    return (f"{f.format(st['mean'])}{unit} [{f.format(st['min'])}..{f.format(st['max'])}]"
            if st["n"] > 1 else f"{f.format(st['mean'])}{unit}")


def fractions_of(summary, model):
    return sorted({c for (m, _, s, c) in summary if m == model and s != "ddp"}, reverse=True)


def controls_of(summary, model):
    """The C whose equal-FLOPs step count DDP also ran (the control runs)."""
    return sorted({c for (m, b, s, c) in summary
                   if m == model and b == "equal_flops" and s == "ddp" and c != 1.0}, reverse=True)


def table(summary, model):
    lines = ["| strategy | C | eval loss, equal steps | top-1 %, equal steps | eval - train "
             "| steps, equal FLOPs | FLOPs vs DDP | eval loss, equal FLOPs | top-1 %, equal FLOPs |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    ddp = summary.get((model, "equal_steps", "ddp", 1.0))
    controls = [c for c in controls_of(summary, model)]
    rows = ([("ddp", 1.0)] + [("ddp", c) for c in controls]
            + [(s, c) for c in fractions_of(summary, model) for s in SDP])
    for s, c in rows:
        a = summary.get((model, "equal_steps", s, c))
        b = summary.get((model, "equal_flops", s, c))
        if s == "ddp" and c != 1.0:
            cells = [f"DDP, the steps of C = {c:g}", "1"]
        else:
            cells = [PRETTY[s], "1" if s == "ddp" else f"{c:g}"]
        for x in (a,):
            cells += ([spread(x["eval"]), spread(x["top1"], 1), spread(x["gap"])] if x
                      else ["-"] * 3)
        if b and ddp:
            ratio = b["flops"]["mean"] / ddp["flops"]["mean"]
            cells += ["/".join(map(str, b["steps"])), f"{ratio:.2f}", spread(b["eval"]),
                      spread(b["top1"], 1)]
        else:
            cells += ["-"] * 4
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def separated(a, b):
    """'below' when every seed of a is below every seed of b, 'above' the other
    way, else 'overlapping' (also when either has a single seed: no range)."""
    if a["n"] < 2 or b["n"] < 2:
        return "overlapping"
    if a["max"] < b["min"]:
        return "below"
    if a["min"] > b["max"]:
        return "above"
    return "overlapping"


def claims(summary, model):
    """Sentences on the three claims, from the numbers alone."""
    out = []
    fr = fractions_of(summary, model)
    ddp = summary.get((model, "equal_steps", "ddp", 1.0))
    if not fr or not ddp:
        return out
    low, high = min(fr), max(fr)
    for budget in BUDGETS:
        got = {s: summary.get((model, budget, s, low)) for s in SDP}
        got = {s: v for s, v in got.items() if v}
        if len(got) < 2:
            continue
        order = sorted(got, key=lambda s: got[s]["eval"]["mean"])
        best, second = order[0], order[1]
        holds = best == "bb-sdp"
        verdict = "holds" if holds else "does not hold"
        rel = separated(got[best]["eval"], got[second]["eval"])
        out.append(f"- Bb-SDP best at C = {low:g} ({budget.replace('_', ' ')}): {verdict}. "
                   f"Lowest mean eval loss: {PRETTY[best]} {got[best]['eval']['mean']:.3f}, "
                   f"then {PRETTY[second]} {got[second]['eval']['mean']:.3f} (seed ranges "
                   f"{'separate' if rel != 'overlapping' else 'overlap'}); order: "
                   + ", ".join(f"{PRETTY[s]} {got[s]['eval']['mean']:.3f}" for s in order) + ".")
        backward = [got[s]["eval"] for s in ("bb-sdp", "nb-sdp") if s in got]
        forward = [got[s]["eval"] for s in ("b-sdp", "n-sdp") if s in got]
        if backward and forward:
            apart = all(b["max"] < f["min"] for b in backward for f in forward)
            out.append(f"  Backward masking (Bb-, Nb-SDP) below forward masking (B-, N-SDP) at "
                       f"C = {low:g} in every seed: {'yes' if apart else 'no'}.")
        if budget == "equal_steps":
            falls = []
            for s in ("b-sdp", "n-sdp"):
                hi = summary.get((model, budget, s, high))
                if hi and s in got:
                    falls.append(f"{PRETTY[s]} {hi['eval']['mean']:.3f} at C = {high:g} -> "
                                 f"{got[s]['eval']['mean']:.3f} at C = {low:g}")
            if falls:
                out.append(f"  Forward masking from C = {high:g} to {low:g} (DDP "
                           f"{ddp['eval']['mean']:.3f}): " + "; ".join(falls) + ".")
    gaps = []
    for s in ("n-sdp", "nb-sdp"):
        for c in fr:
            x = summary.get((model, "equal_steps", s, c))
            if x:
                gaps.append((s, c, x["gap"]))
    if gaps:
        listed = (f"DDP {ddp['gap']['mean']:+.3f} [{ddp['gap']['min']:+.3f}.."
                  f"{ddp['gap']['max']:+.3f}], "
                  + ", ".join(f"{PRETTY[s]} C = {c:g} {g['mean']:+.3f}" for s, c, g in gaps))
        if ddp["gap"]["max"] < 0:
            out.append(f"- N-SDP regularizes: not testable here. The eval - train gap (equal "
                       f"steps: {listed}) is negative for DDP in every seed: the models still "
                       "under-fit (the final eval loss is below the train loss of the last 10 "
                       "steps), so there is no over-fitting for N-SDP to reduce.")
        else:
            smaller = [g for g in gaps if g[2]["max"] < ddp["gap"]["min"]]
            out.append(f"- N-SDP regularizes (eval - train gap, equal steps: {listed}): gap "
                       f"below DDP's in every seed for {len(smaller)} of {len(gaps)}. A smaller "
                       "gap from a subnetwork's train loss is no proof by itself: the eval loss "
                       "against DDP's says whether the full model generalizes better.")
    better, worse, level = [], [], []
    for c in fr:
        for s in SDP:
            x = summary.get((model, "equal_flops", s, c))
            if not x:
                continue
            rel = separated(x["eval"], ddp["eval"])
            tag = f"{PRETTY[s]} C = {c:g} ({x['eval']['mean'] - ddp['eval']['mean']:+.3f})"
            {"below": better, "above": worse, "overlapping": level}[rel].append(tag)
    if better or worse or level:
        out.append(f"- SDP at equal FLOPs against DDP (eval loss {ddp['eval']['mean']:.3f}): "
                   f"lower in every seed: {', '.join(better) or 'none'}; higher in every seed: "
                   f"{', '.join(worse) or 'none'}; seed ranges overlap: {', '.join(level) or 'none'}.")
    for c in controls_of(summary, model):
        ctl = summary[model, "equal_flops", "ddp", c]
        got = [(s, summary.get((model, "equal_flops", s, c))) for s in SDP]
        got = [(s, x) for s, x in got if x]
        if not got:
            continue
        out.append(f"  Control: DDP trained for the same {'/'.join(map(str, ctl['steps']))} steps "
                   f"as SDP at C = {c:g} ({1 / c:.2f}x the FLOPs of DDP's equal-steps run) reaches eval loss "
                   f"{spread(ctl['eval'])}; against it: "
                   + ", ".join(f"{PRETTY[s]} {x['eval']['mean'] - ctl['eval']['mean']:+.3f} "
                               f"({separated(x['eval'], ctl['eval'])})" for s, x in got) + ".")
    return out


def report(summary, runs):
    lines = ["Mean over the seeds [min..max]; eval: the full model (union of the ranks' "
             "subnetworks) on the validation batches; top-1: the full model's (LLaMA: next "
             "token); eval - train: final eval loss minus the mean train loss of the last 10 "
             "steps (SDP: the ranks' subnetworks' losses); FLOPs: counted by sdp-train, mean "
             "over ranks, summed over the run, against DDP's run.", ""]
    for model, title in MODELS.items():
        seeds = [r for (m, *_), rs in runs.items() if m == model for r in rs]
        if not seeds:
            continue
        cfg = seeds[0]["config"]
        lines += [f"### {title}", "",
                  f"`{cfg['model']}` on `{cfg['data'].split('/')[0] if cfg['data'].startswith('llmc:') else cfg['data']}`, "
                  f"{seeds[0]['world']} ranks, batch {cfg['batch']} per rank"
                  + (f" x {cfg['seq']} tokens" if model == "llama" else "")
                  + f", lr {cfg['lr']:g} (warmup {cfg['warmup']}, cosine), seeds "
                  + ", ".join(map(str, sorted({r['seed'] for r in seeds}))) + ".", ""]
        lines += table(summary, model) + [""] + claims(summary, model) + [""]
    return "\n".join(lines)


def draw(path, summary):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = [m for m in MODELS if any(k[0] == m for k in summary)]
    fig, axes = plt.subplots(len(models), 4, figsize=(18, 4.2 * len(models)), squeeze=False)
    for row, model in enumerate(models):
        ddp = summary.get((model, "equal_steps", "ddp", 1.0))
        fr = fractions_of(summary, model)
        for col, (budget, key, label) in enumerate(
                [(b, k, l) for k, l in (("eval", "eval loss"), ("top1", "top-1 %"))
                 for b in BUDGETS]):
            ax = axes[row][col]
            for i, s in enumerate(SDP):
                pts = [(c, summary[model, budget, s, c][key]) for c in fr
                       if (model, budget, s, c) in summary]
                if not pts:
                    continue
                x = [c + (i - 1.5) * 0.008 for c, _ in pts]  # side by side
                y = [st["mean"] for _, st in pts]
                err = [[st["mean"] - st["min"] for _, st in pts],
                       [st["max"] - st["mean"] for _, st in pts]]
                ax.errorbar(x, y, yerr=err, marker="o", capsize=3, color=COLOR[s], label=PRETTY[s])
            if budget == "equal_flops":
                for c in controls_of(summary, model):
                    st = summary[model, budget, "ddp", c][key]
                    ax.errorbar([c], [st["mean"]], yerr=[[st["mean"] - st["min"]],
                                [st["max"] - st["mean"]]], marker="x", capsize=3, linestyle="none",
                                color=COLOR["ddp"], label=f"DDP for the steps of C = {c:g}")
            if ddp:
                st = ddp[key]
                ax.axhline(st["mean"], color=COLOR["ddp"], label="DDP (min..max band)")
                ax.axhspan(st["min"], st["max"], color=COLOR["ddp"], alpha=0.12)
            ax.set_xticks(fr)
            ax.set_xlabel("C (fraction of the model per rank)")
            ax.set_ylabel(label)
            ax.set_title(f"{MODELS[model]}: {label}, {budget.replace('_', ' ')}", fontsize=10)
            ax.grid(alpha=0.3)
        axes[row][0].legend(fontsize=8)
        axes[row][1].legend(fontsize=8)  # with the DDP control
    fig.tight_layout()
    fig.savefig(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="out/quality")
    ap.add_argument("--plot", help="write the plot here (.svg or .png; needs matplotlib)")
    ap.add_argument("--report", help="also write the Markdown summary here")
    args = ap.parse_args()
    runs = read_runs(args.dir)
    summary = summarize(runs)
    text = report(summary, runs)
    print(text)
    written = []
    if args.report:
        with open(args.report, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        written.append(args.report)
    if args.plot:
        try:
            draw(args.plot, summary)
        except ImportError:
            fail(f"matplotlib is missing for {sys.executable}: apt-get install -y "
                 "python3-matplotlib (Debian's /usr/bin/python3) or pip install matplotlib; "
                 "without --plot only the summary is written")
        written.append(args.plot)
    if written:
        print(f"plot_quality: wrote {' and '.join(written)}", file=sys.stderr)


if __name__ == "__main__":
    main()
