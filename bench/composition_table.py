#!/usr/bin/env python3
"""The SDP paper's composition table from dry runs: per-rank peak memory and
bytes sent of DDP, FSDP, activation checkpointing (AC) and B-SDP, N-SDP and
Bb-SDP composed with them, for the paper's LLaMA models and for the CIFAR
image models (ResNets, Swin-T), from sdp-plan (one meta-device step of
every emulated rank, no MPI, no GPU), beside the paper's ratios.

Usage: python3 bench/composition_table.py [--sdp-plan build/bin/sdp-plan]
           [--models llama-134m,llama-500m,llama-1b] [--worlds 8,16]
           [--dtypes f32,bf16] [--fraction 0.6875] [--no-resnet]
           [--check-ordering]
Prints markdown to stdout. For every LLaMA table it prints one line
"ordering B-SDP+FSDP+AC < FSDP+AC < DDP (peak max per rank): holds|fails";
--check-ordering exits 1 when one fails. Standard library only.
"""
import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys

GIB, MIB, MB = 2**30, 2**20, 1e6

# Per rank: the batch of the dry-run tables of bench/RESULTS.md ("Dry-run
# memory of the paper's LLaMA models", "SDP dry-run planner tables").
LLAMA_BATCH, LLAMA_SEQ = 8, 1024
RESNET_MODELS, RESNET_WORLD, RESNET_BATCH, RESNET_DTYPE, RESNET_C = (
    ["resnet18", "wrn18", "swin-t"], 8, 128, "f32", 0.5)

# The SDP paper's composition figure lives in sdp-plan's preset
# (apps/sdp-plan/paper_presets.cpp): `sdp-plan --paper sdp-composition` runs
# the setup a sweep found for it and carries the paper's peaks per GPU (GB).
COMPOSITION_PRESET = "sdp-composition"

BREAKDOWN = ["param", "master", "gathered", "grad", "optim", "activation"]


def owners_text(s):
    """Owners per component: "6", or "5..6" where a fractional plan varies."""
    lo, hi = s["owners_per_component"], s.get("owners_per_component_max", s["owners_per_component"])
    return f"{lo}" if lo == hi else f"{lo}..{hi}"

def llama_items(c):
    """(row name, --strategies item). Bb-SDP runs the full forward on every
    rank: with ZeRO-2 its gradients and AdamW state are sharded over each
    component's owners; with FSDP every group is sharded over the world and
    gathered per block, only the owners computing its weight gradients."""
    rows = [("DDP", "ddp"), ("FSDP", "fsdp"), ("FSDP+AC", "fsdp+ac")]
    for label, name in (("B-SDP", "b-sdp"), ("N-SDP", "n-sdp")):
        rows += [(label, f"{name}:{c}"), (f"{label}+AC", f"{name}:{c}+ac"),
                 (f"{label}+FSDP", f"{name}:{c}+fsdp"),
                 (f"{label}+FSDP+AC", f"{name}:{c}+fsdp+ac")]
    rows += [("Bb-SDP", f"bb-sdp:{c}"), ("Bb-SDP+AC", f"bb-sdp:{c}+ac"),
             ("Bb-SDP+ZeRO-2", f"bb-sdp:{c}+zero2"), ("Bb-SDP+ZeRO-2+AC", f"bb-sdp:{c}+zero2+ac"),
             ("Bb-SDP+FSDP", f"bb-sdp:{c}+fsdp"), ("Bb-SDP+FSDP+AC", f"bb-sdp:{c}+fsdp+ac")]
    return rows


def resnet_items(c):
    return [("DDP", "ddp"), ("FSDP", "fsdp"), ("FSDP+AC", "fsdp+ac"), ("B-SDP", f"b-sdp:{c}"),
            ("B-SDP+FSDP+AC", f"b-sdp:{c}+fsdp+ac"), ("N-SDP+FSDP+AC", f"n-sdp:{c}+fsdp+ac")]


def image_groups(rep):
    """What N-SDP splits in an image model (a ResNet's channels, a Swin's heads and MLP units)."""
    if rep.get("channel_groups"):
        return f"{rep['channel_groups']} channel groups per block (N-SDP)"
    return (f"{rep['head_groups']} head groups and {rep['ffn_groups']} MLP unit groups per "
            "block (N-SDP)")


def run_plan(binary, model, world, dtype, batch, seq, items):
    cmd = [binary, "--model", model, "--world", str(world), "--batch", str(batch)]
    if seq:
        cmd += ["--seq", str(seq)]
    cmd += ["--dtype", dtype, "--strategies", ",".join(i for _, i in items), "--format", "json"]
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if run.returncode != 0:
        sys.exit(f"composition_table: {' '.join(cmd)} failed ({run.returncode}): {run.stderr}")
    report = json.loads(run.stdout)
    got = [s["label"] for s in report["strategies"]]
    want = [name for name, _ in items]
    if got != want:
        sys.exit(f"composition_table: sdp-plan labels {got}, expected {want}")
    return cmd, report


def paper_composition(binary):
    """(command, report) of the composition preset; report["paper"] has the
    paper's figures, each beside one of the preset's rows."""
    cmd = [binary, "--paper", COMPOSITION_PRESET, "--format", "json"]
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if run.returncode != 0:
        sys.exit(f"composition_table: {' '.join(cmd)} failed ({run.returncode}): {run.stderr}")
    return cmd, json.loads(run.stdout)


def paper_peaks(report):
    """{row label: the paper's peak per GPU in GB} from the preset's figures."""
    return {f["label"]: f["paper"] for f in report["paper"]["figures"]
            if f["metric"] == "peak_gb"}


def git(*args):
    try:
        return subprocess.run(["git", *args], check=True, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def table(report, unit, unit_name):
    """Markdown rows of one sdp-plan report; returns (text, {label: strategy})."""
    by = {s["label"]: s for s in report["strategies"]}
    ddp = by["DDP"]
    ddp_peak, ddp_sent = ddp["peak_bytes"]["max"], ddp["sent_bytes"]["mean"]
    head = (f"| composition | shard | peak max {unit_name} | vs DDP | sent mean MB | vs DDP | "
            + " | ".join(BREAKDOWN) + f" | other | peak gathered | recompute / step |\n"
            + "|---|---|" + "---:|" * (4 + len(BREAKDOWN) + 3) + "\n")
    lines = []
    for s in report["strategies"]:
        top = s["ranks"][s["peak_bytes"]["max_rank"]]["memory"]["peak"]["at_peak"]
        other = sum(v for k, v in top.items() if k not in BREAKDOWN)
        flops, rec = s["flops"]["mean"], s["recompute_flops"]["mean"]
        cells = [s["label"], s["shard"], f"{s['peak_bytes']['max'] / unit:.2f}",
                 f"{s['peak_bytes']['max'] / ddp_peak:.3f}", f"{s['sent_bytes']['mean'] / MB:.1f}",
                 f"{s['sent_bytes']['mean'] / ddp_sent:.3f}" if ddp_sent > 0 else "n/a"]
        cells += [f"{top[k] / unit:.2f}" for k in BREAKDOWN]
        cells += [f"{other / unit:.2f}", f"{s['gathered_peak_bytes']['max'] / unit:.2f}",
                  f"{100 * rec / flops:.1f}%"]
        lines.append("| " + " | ".join(cells) + " |\n")
    return head + "".join(lines), by


def ordering(by):
    """B-SDP+FSDP+AC < FSDP+AC < DDP on the highest per-rank peak."""
    a, b, c = (by[k]["peak_bytes"]["max"] for k in ("B-SDP+FSDP+AC", "FSDP+AC", "DDP"))
    return a < b < c, (a, b, c)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--sdp-plan", default=os.path.join(here, "..", "build", "bin", "sdp-plan"))
    ap.add_argument("--models", default="llama-134m,llama-500m,llama-1b")
    ap.add_argument("--worlds", default="8,16")
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--fraction", type=float, default=0.6875, help="C of the SDP rows")
    ap.add_argument("--no-resnet", action="store_true",
                    help="skip the image-model tables (ResNets, Swin-T)")
    ap.add_argument("--check-ordering", action="store_true",
                    help="exit 1 when B-SDP+FSDP+AC < FSDP+AC < DDP fails for a table")
    args = ap.parse_args()
    if not os.path.exists(args.sdp_plan):
        sys.exit(f"composition_table: --sdp-plan '{args.sdp_plan}' does not exist (build "
                 "sdp-plan first, or give its path)")
    models = [m for m in args.models.split(",") if m]
    worlds = [int(w) for w in args.worlds.split(",") if w]
    dtypes = [d for d in args.dtypes.split(",") if d]
    c = args.fraction

    out = []
    commands = []
    summary = []
    all_hold = True
    meta_seconds = 0.0
    for model in models:
        for world in worlds:
            for dtype in dtypes:
                cmd, rep = run_plan(args.sdp_plan, model, world, dtype, LLAMA_BATCH, LLAMA_SEQ,
                                    llama_items(c))
                commands.append(cmd)
                meta_seconds += rep["seconds"]
                text, by = table(rep, GIB, "GiB")
                r, held = owners_text(by["B-SDP"]), by["B-SDP"]["effective_active_fraction"]
                holds, (a, b, d) = ordering(by)
                all_hold &= holds
                out.append(f"### {model} ({rep['parameters'] / 1e6:.1f}M parameters), {world} "
                           f"ranks, {dtype}, C = {c} (held {held:.4g}; owners per component {r}/{world})\n\n")
                out.append(text)
                out.append(f"\nordering B-SDP+FSDP+AC < FSDP+AC < DDP (peak max per rank): "
                           f"{'holds' if holds else 'fails'} ({a / GIB:.2f} < {b / GIB:.2f} < "
                           f"{d / GIB:.2f} GiB)\n\n")
                summary.append((model, world, dtype, r, by, holds))

    preset_cmd, preset = paper_composition(args.sdp_plan)
    commands.append(preset_cmd)
    meta_seconds += preset["seconds"]
    paper_gb = paper_peaks(preset)
    paper_ratio = {k: v / paper_gb["DDP"] for k, v in paper_gb.items()}
    out.append("### Against the paper's ratios (peak per rank / DDP's)\n\n")
    out.append(f"Paper: DDP {paper_gb['DDP']} GB, FSDP+AC {paper_gb['FSDP+AC']} GB "
               f"({paper_ratio['FSDP+AC']:.3f} of DDP), B-SDP+FSDP+AC {paper_gb['B-SDP+FSDP+AC']}"
               f" GB ({paper_ratio['B-SDP+FSDP+AC']:.3f} of DDP); ordering B-SDP+FSDP+AC < "
               "FSDP+AC < DDP.\n\n")
    pb = {s["label"]: s["peak_bytes"]["max"] for s in preset["strategies"]}
    setup = preset["paper"]["setup"]
    out.append(f"The paper's setup as a sweep found it (`sdp-plan --paper {COMPOSITION_PRESET}`: "
               f"{setup['model']}, {setup['world']} ranks, {setup['dtype']}, {setup['batch']} x "
               f"{setup['seq']} tokens per rank): DDP {pb['DDP'] / GIB:.2f}, FSDP+AC "
               f"{pb['FSDP+AC'] / GIB:.2f}, B-SDP+FSDP+AC {pb['B-SDP+FSDP+AC'] / GIB:.2f} GiB "
               f"(ratios {pb['FSDP+AC'] / pb['DDP']:.3f}, {pb['B-SDP+FSDP+AC'] / pb['DDP']:.3f}); "
               "the grid below keeps 8 x 1024 tokens per rank.\n\n")
    out.append(f"| model | ranks | dtype | owners/N | DDP peak GiB | FSDP+AC / DDP (paper "
               f"{paper_ratio['FSDP+AC']:.3f}) | B-SDP+FSDP+AC / DDP (paper "
               f"{paper_ratio['B-SDP+FSDP+AC']:.3f}) | B-SDP+FSDP+AC / FSDP+AC (paper "
               f"{paper_gb['B-SDP+FSDP+AC'] / paper_gb['FSDP+AC']:.3f}) | "
               "N-SDP+FSDP+AC / DDP | ordering |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---|\n")
    for model, world, dtype, r, by, holds in summary:
        p = {k: by[k]["peak_bytes"]["max"] for k in ("DDP", "FSDP+AC", "B-SDP+FSDP+AC",
                                                     "N-SDP+FSDP+AC")}
        out.append(f"| {model} | {world} | {dtype} | {r}/{world} | {p['DDP'] / GIB:.2f} | "
                   f"{p['FSDP+AC'] / p['DDP']:.3f} | {p['B-SDP+FSDP+AC'] / p['DDP']:.3f} | "
                   f"{p['B-SDP+FSDP+AC'] / p['FSDP+AC']:.3f} | "
                   f"{p['N-SDP+FSDP+AC'] / p['DDP']:.3f} | {'holds' if holds else 'fails'} |\n")
    out.append("\n")

    if not args.no_resnet:
        for model in RESNET_MODELS:
            cmd, rep = run_plan(args.sdp_plan, model, RESNET_WORLD, RESNET_DTYPE, RESNET_BATCH,
                                None, resnet_items(RESNET_C))
            commands.append(cmd)
            meta_seconds += rep["seconds"]
            text, by = table(rep, MIB, "MiB")
            r = owners_text(by["B-SDP"])
            out.append(f"### {model} ({rep['parameters'] / 1e6:.1f}M parameters), "
                       f"{RESNET_WORLD} ranks, batch {RESNET_BATCH} images per rank, "
                       f"{RESNET_DTYPE}, C = {RESNET_C} (owners per component {r}/{RESNET_WORLD}), "
                       f"{image_groups(rep)}\n\n")
            out.append(text)
            p = {k: by[k]["peak_bytes"]["max"] for k in by}
            out.append(f"\nB-SDP+FSDP+AC / FSDP+AC = {p['B-SDP+FSDP+AC'] / p['FSDP+AC']:.3f}, "
                       f"N-SDP+FSDP+AC / FSDP+AC = {p['N-SDP+FSDP+AC'] / p['FSDP+AC']:.3f} "
                       f"(peak max per rank); B-SDP peak over ranks: min "
                       f"{by['B-SDP']['peak_bytes']['min'] / MIB:.2f}, max "
                       f"{by['B-SDP']['peak_bytes']['max'] / MIB:.2f} MiB\n\n")

    notes = (
        "Notes: one training step of every rank on the meta device (bytes at the CUDA caching "
        "allocator's 512-byte granularity; bytes sent by the ring formulas). LLaMA: batch "
        f"{LLAMA_BATCH} x seq {LLAMA_SEQ} tokens per rank, the per-rank batch of the dry-run "
        "tables above; bf16 = bf16 parameters with f32 masters, f32 gradients and AdamW "
        "moments. \"peak max\" is the highest per-rank peak, \"vs DDP\" its ratio to DDP's; "
        "\"sent mean\" bytes per rank per step (MB = 10^6). The breakdown (param ... activation, "
        "other = workspace + comm) is at the peak of the rank with the highest peak; \"peak "
        "gathered\" is the gathered category's own peak (whole parameters of fully sharded "
        "groups while read), which need not fall at the total's peak; \"recompute / step\" the "
        "share of the step's FLOPs spent recomputing checkpointed blocks. Each rank holds "
        "round(C K) of the K components, so C = 0.6875 is 11 of 16 blocks at 1B on any world "
        "(5 or 6 owners per block on 8 ranks, 11 on 16). Bb-SDP runs the full "
        "forward on every rank: with ZeRO-2 its gradients and AdamW state are sharded over each "
        "component's owners (parameters whole); with FSDP every group is sharded over the world "
        "and gathered per block like the shared group, and only owners compute its weight "
        "gradients.\n")
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    root = os.path.dirname(here)

    def shown(cmd):  # the binary relative to the repository when it lies inside
        rel = os.path.relpath(os.path.abspath(cmd[0]), root)
        return shlex.join([cmd[0] if rel.startswith("..") else rel] + cmd[1:])

    invocation = " ".join(["python3 bench/composition_table.py"] +
                          [shlex.quote(a) for a in sys.argv[1:]])
    head = (f"**When:** {when}. **Commit:** `{git('rev-parse', '--short', 'HEAD')}`. "
            f"**Meta steps:** {meta_seconds:.2f} s in all (sdp-plan's own timing).\n\n"
            f"**Command:** `{invocation}`, which runs:\n\n"
            + "".join("    " + shown(cmd) + "\n" for cmd in commands) + "\n" + notes + "\n")
    sys.stdout.write(head + "".join(out))
    if args.check_ordering and not all_hold:
        sys.exit(1)


if __name__ == "__main__":
    main()
