#!/usr/bin/env python3
"""Analytic FLOPs per rank per training step of an sdp-train run (an estimate).

    python3 bench/flops_estimate.py METRICS.jsonl [...]   # one line per file
    python3 bench/flops_estimate.py --equal-flops 300 ddp.jsonl b-sdp.jsonl ...
        # steps each run needs for the FLOPs of 300 steps of ddp.jsonl's run

The engine counts the FLOPs of the ops it runs (kernels/flop_count.h; the
metrics' "flops" per step and "ranks.flops" per rank); where a run's metrics
have them, those counted figures are used, and this analytic estimate, from
the model shape, the batch and what each rank of the run's subnet plan holds
and trains (read from the summary line: config and parallel.plan), is printed
beside them as a cross-check (metrics written before the counter existed get
the estimate alone). Standard library only; bench/convergence.sh and
bench/plot_convergence.py use it.

The counted attention FLOPs include the recomputation of Q K^T in the
backward (7 products per causal pair instead of the estimate's 6), so counted
figures run slightly above the estimate.

The estimate, per rank and per optimizer step, with T = batch x seq x
grad_accum tokens per rank and S = seq:

    matmuls:    2 T W_fwd  (forward)
              + 2 T W_fwd  (backward, input gradients)
              + 2 T W_trn  (backward, weight gradients)
    attention:  12 x (batch x grad_accum) x Dh x S (S + 1) / 2 x (query heads run)

W_fwd counts the matmul weights the rank runs its forward through, W_trn those
it computes weight gradients for (matmul weights: q, k, v, o, gate, up, down
of each block and the LM head; the embedding is a lookup and the norms are
elementwise, so neither counts). DDP: W_fwd = W_trn = the whole model, i.e.
the usual 6 x params x tokens. Forward masking (B-SDP, N-SDP): a rank builds
only its subnetwork, so W_fwd = W_trn = its owned blocks or neuron groups plus
the shared head, and attention runs only its heads. Backward masking (Bb-SDP,
Nb-SDP): every rank runs the full forward and the input gradients through
everything (the shared embedding needs them), but weight gradients only for
what it owns: W_fwd = all, W_trn = owned + head, i.e. 2 of the 6 are skipped
for unowned parts. Attention (QK^T and PV: 2 x 2 Dh flops per causal
query-key pair forward, twice that backward) has no weights, so backward
masking does not reduce it. Not counted: elementwise ops (norms, RoPE,
SwiGLU, softmax, AdamW), cross-entropy, and the recomputation of QK^T that
our attention backward does; whole 64-row tiles are counted as causal.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def fail(message):
    sys.exit(f"flops_estimate: {message}")


def model_shapes(sdp_train):
    """{name: (dim, layers, heads, kv_heads, ffn)} from `sdp-train --list-models`."""
    try:
        text = subprocess.run([sdp_train, "--list-models"], check=True, capture_output=True,
                              text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        fail(f"cannot run {sdp_train} --list-models ({e}); build it first")
    # The LLaMA table comes first: a header, one row per model, then a blank
    # line before the image models' sections (which are not read).
    shapes = {}
    for line in text.splitlines()[1:]:
        if not line.strip():
            break
        cols = line.split()
        if len(cols) == 7 and all(c.isdigit() for c in cols[1:6]):
            shapes[cols[0]] = tuple(int(c) for c in cols[1:6])
    if not shapes:
        fail(f"{sdp_train} --list-models printed no LLaMA table")
    return shapes


def automatic_groups(requested, total):
    # As engine/parallel/strategy.cpp: 0 = the largest count <= 4 dividing `total`.
    if requested > 0:
        return requested
    g = 4
    while total % g:
        g -= 1
    return g


class Model:
    """The matmul shape of a LLaMA and its SDP components (in the plan's order)."""

    def __init__(self, shape, parameters):
        self.dim, self.layers, self.heads, self.kv_heads, self.ffn = shape
        d, L = self.dim, self.layers
        self.head_dim = d // self.heads
        self.attn = d * self.head_dim * (2 * self.heads + 2 * self.kv_heads)  # q, k, v, o
        self.mlp = 3 * d * self.ffn                                             # gate, up, down
        # The vocabulary is not in the metrics; the exact parameter count of
        # an untied model (embedding + head + blocks with 2 norms + final norm)
        # gives it, and must give an integer.
        rest = parameters - L * (self.attn + self.mlp + 2 * d) - d
        if rest <= 0 or rest % (2 * d):
            fail(f"parameter count {parameters} does not fit an untied LLaMA of this shape")
        self.vocab = rest // (2 * d)

    def components(self, granularity, ffn_groups, head_groups):
        """[(block, matmul weights, query heads)] in the order of the plan's columns
        (models/llama/llama_model.cpp, component_specs)."""
        if granularity == "block":
            return [(b, self.attn + self.mlp, self.heads) for b in range(self.layers)]
        fg = automatic_groups(ffn_groups, self.ffn)
        hg = automatic_groups(head_groups, self.kv_heads)
        out = []
        for g in range(max(fg, hg)):
            for b in range(self.layers):
                if g < fg:
                    out.append((b, self.mlp // fg, 0))
                if g < hg:
                    out.append((b, self.attn // hg, self.heads // hg))
        return out


def estimate(summary, shapes):
    """Per-rank FLOPs per step and what enters them, for one run's summary line."""
    cfg, par = summary["config"], summary["parallel"]
    if cfg["model"] not in shapes:
        fail(f"unknown model {cfg['model']}")
    m = Model(shapes[cfg["model"]], summary["parameters"])
    plan = par["plan"]
    comps = m.components(par["granularity"], cfg["ffn_groups"], cfg["head_groups"])
    if len(comps) != plan["components"]:
        fail(f"the plan has {plan['components']} components, the model shape gives {len(comps)}")
    sequences = cfg["batch"] * cfg["grad_accum"]
    tokens = sequences * cfg["seq"]
    pairs = cfg["seq"] * (cfg["seq"] + 1) // 2
    head = m.vocab * m.dim
    all_weights = sum(w for _, w, _ in comps) + head
    all_heads = sum(h for _, _, h in comps)
    per_rank = []
    for row in plan["matrix"]:
        owned = [c for c, bit in zip(comps, row) if bit == "1"]
        trained = sum(w for _, w, _ in owned) + head
        if par["masking"] == "forward":
            forward, heads_run = trained, sum(h for _, _, h in owned)
        else:
            forward, heads_run = all_weights, all_heads
        matmul = 4 * tokens * forward + 2 * tokens * trained
        attention = 12 * sequences * m.head_dim * pairs * heads_run
        # What the rank holds, to check this reading of the plan against the
        # allocator's param bytes: matmul weights, the embedding, the final
        # norm and the block norms (shared at neuron granularity, part of
        # each block at block granularity).
        held = comps if par["masking"] == "backward" else owned
        norm_blocks = (m.layers if par["granularity"] == "neuron"
                       else len({b for b, _, _ in held}))
        held_parameters = (sum(w for _, w, _ in held) + 2 * head + m.dim
                           + 2 * m.dim * norm_blocks)
        per_rank.append({"matmul": matmul, "attention": attention, "total": matmul + attention,
                         "forward_weights": forward, "trained_weights": trained,
                         "held_parameters": held_parameters})
    mean = sum(r["total"] for r in per_rank) / len(per_rank)
    return {"strategy": cfg["strategy"], "description": par["description"],
            "per_rank": per_rank, "mean": mean, "max": max(r["total"] for r in per_rank),
            "tokens_per_rank": tokens, "vocab": m.vocab}


def read_run(path, hint=""):
    """{"steps": step lines, "summary": the summary line} of a metrics file;
    stops with `hint` when the file is missing, not JSON lines, or unfinished."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = [json.loads(line) for line in f if line.strip()]
    except (OSError, json.JSONDecodeError) as e:
        fail(f"cannot read {path}: {e}{hint}")
    steps = [x for x in lines if "step" in x and not x.get("summary")]
    summary = next((x for x in lines if x.get("summary")), None)
    if summary is None or not steps:
        fail(f"{path}: the run did not finish (no summary line){hint}")
    return {"steps": steps, "summary": summary}


def counted(run):
    """Mean over ranks of the counted FLOPs per step (the last step's), or None."""
    last = run["steps"][-1]
    if "flops" not in last:
        return None
    return last.get("ranks", {}).get("flops", {}).get("mean", last["flops"])


def per_rank_flops(path, shapes):
    """(FLOPs per rank per step, estimate, 'counted' or 'estimated')."""
    run = read_run(path)
    e = estimate(run["summary"], shapes)
    c = counted(run)
    return (c if c is not None else e["mean"]), e, ("counted" if c is not None else "estimated")


def main(argv):
    usage = ("usage: flops_estimate.py METRICS.jsonl [...]\n"
             "       flops_estimate.py --equal-flops STEPS REF.jsonl METRICS.jsonl [...]\n"
             "       (BIN=path/to/sdp-train, default build/bin/sdp-train)")
    if not argv:
        fail(usage)
    shapes = model_shapes(os.environ.get("BIN", os.path.join(HERE, "..", "build/bin/sdp-train")))
    if argv[0] == "--equal-flops":
        # Steps that give each run the total FLOPs of REF's STEPS steps (same
        # ranks, so per-rank means compare): prints "strategy steps" lines.
        if len(argv) < 4:
            fail(usage)
        ref_steps = int(argv[1])
        ref, _, _ = per_rank_flops(argv[2], shapes)
        for path in argv[3:]:
            flops, e, _ = per_rank_flops(path, shapes)
            print(e["strategy"], round(ref_steps * ref / flops))
        return
    for path in argv:
        flops, e, source = per_rank_flops(path, shapes)
        ranks = ", ".join(f"{r['total'] / 1e9:.3f}" for r in e["per_rank"])
        print(f"{path}\t{e['description']}\tmean {flops:.6g} FLOP per rank per step ({source}; "
              f"estimate {e['mean']:.6g}, GFLOP by rank: {ranks})")


if __name__ == "__main__":
    main(sys.argv[1:])
