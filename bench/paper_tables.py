#!/usr/bin/env python3
"""Every SDP paper table the engine reproduces by exact dry runs, in one command.

    python3 bench/paper_tables.py [--bin-dir build/bin] [--only NAME[,NAME...]]

Prints Markdown to stdout and writes no file: each table with the setup that
produced it (the sdp-plan commands), the paper's figures beside ours where
the paper gives them. The paper's figures live in one place, sdp-plan's
presets (apps/sdp-plan/paper_presets.cpp); every script here reads them from
`sdp-plan --paper NAME --format json`. The tables (NAME for --only):

  presets      every preset of `sdp-plan --paper list` (the LLaMA 134M / 500M /
               1B planner tables, the composition figure's setup found by a
               sweep, ResNet-18, WRN-18, Swin-T), each run as
               `sdp-plan --paper NAME`: our tables, then ours beside the
               paper's figures, which parts of the setup are the paper's and
               which inferred, and communication counted as sent and with
               each buffer once
  llama        the LLaMA 134M / 500M / 1B planner tables on 8 ranks: DDP and
               the four SDP variants at C = 0.69, 0.5, 0.375, their analytic
               expectations, the paper's 1B and 500M savings
               (bench/sdp_dry_run_tables.py)
  composition  the paper's composition figure: DDP, FSDP, activation
               checkpointing and B-SDP / N-SDP / Bb-SDP composed with them
               (the headline B-SDP + FSDP + AC), LLaMA on 8 and 16 ranks in
               f32 and bf16, and the CIFAR image models
               (bench/composition_table.py)
  vision       ResNet-18 and WRN-18 peak memory per rank under DDP, B-SDP
               and N-SDP on 8 ranks (bench/resnet_memory_table.py)

Every figure is a meta-device step of every emulated rank (no MPI, no GPU):
the bytes the CUDA caching allocator would hold and the bytes each rank
would send. Accuracy tables need real training runs and are not here.
Standard library only.
"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TABLES = ("presets", "llama", "composition", "vision")


def fail(message):
    sys.exit(f"paper_tables: {message}")


def script_output(script, *args):
    cmd = [sys.executable, os.path.join(HERE, script), *args]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        fail(f"{script} failed (exit {done.returncode}):\n{done.stderr.strip()}")
    return done.stdout


def preset_names(sdp_plan):
    """The names `sdp-plan --paper list` prints, one an indented line."""
    done = subprocess.run([sdp_plan, "--paper", "list"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        fail(f"sdp-plan --paper list failed (exit {done.returncode}):\n{done.stderr.strip()}")
    return [line.split()[0] for line in done.stdout.splitlines() if line.startswith("  ")]


def presets_section(sdp_plan):
    parts = ["## The paper's setups: `sdp-plan --paper NAME`\n"]
    for name in preset_names(sdp_plan):
        done = subprocess.run([sdp_plan, "--paper", name], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            fail(f"sdp-plan --paper {name} failed (exit {done.returncode}):\n"
                 f"{done.stderr.strip()}")
        # One level down: the report's "## sdp-plan: MODEL ..." heads this
        # preset, its "### Against the SDP paper" comes under it.
        text = done.stdout.replace("### Against the SDP paper", "#### Against the SDP paper")
        text = text.replace("## sdp-plan: ", f"### `sdp-plan --paper {name}`: ", 1)
        parts.append(text)
    return "\n".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin-dir", default=os.path.join(HERE, "..", "build", "bin"),
                    help="where sdp-plan and sdp-train are (default: build/bin)")
    ap.add_argument("--only", default=",".join(TABLES),
                    help="comma-separated tables to print: " + ", ".join(TABLES))
    args = ap.parse_args()
    wanted = [t for t in args.only.split(",") if t]
    unknown = [t for t in wanted if t not in TABLES]
    if unknown:
        fail(f"unknown table(s) {', '.join(unknown)} (valid: {', '.join(TABLES)})")
    sdp_plan = os.path.join(args.bin_dir, "sdp-plan")
    sdp_train = os.path.join(args.bin_dir, "sdp-train")
    if not os.path.exists(sdp_plan):
        fail(f"no sdp-plan in {args.bin_dir} (build first, or give --bin-dir)")

    start = time.monotonic()
    sections = []
    if "presets" in wanted:
        sections.append(presets_section(sdp_plan))
    if "llama" in wanted:
        sys.path.insert(0, HERE)
        import sdp_dry_run_tables  # noqa: E402  (the sibling script, as a module)
        sections.append(sdp_dry_run_tables.build_section(sdp_plan))
    if "composition" in wanted:
        sections.append("## The paper's composition figure: DDP, FSDP, AC and SDP composed\n\n"
                        + script_output("composition_table.py", "--sdp-plan", sdp_plan))
    if "vision" in wanted:
        sections.append("## CIFAR image models: peak memory per rank (8 ranks)\n\n"
                        + script_output("resnet_memory_table.py", "--plan-bin", sdp_plan,
                                        "--train-bin", sdp_train))
    sys.stdout.write("\n".join(sections))
    print(f"\n(paper_tables: {len(sections)} table group(s) in "
          f"{time.monotonic() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
