#!/usr/bin/env python3
"""Summarize a check.sh run: stages, test counts, throughput, MFU and memory, as Markdown and JSON.

    python3 bench/gpu/summarize.py --work /tmp/sdp-gpu-check \
        --markdown summary.md --json results.json --failures failures.txt

Reads what check.sh's stages left in WORK (stages.tsv, results/*), never
fails on a missing or partial file (a stage that died says so in its row),
and prints the Markdown. Standard library only.

Throughput: ours from the metrics file's step lines after the first 3
(allocator and caches warm up there, as sdp-train's own summary does), the
median step time; torch's from torch_llama_step.py (median after warm-up).
MFU = FLOPs per step / step time / peak: ours with the FLOPs the engine
counted (metrics "flops"), every implementation also with the formula of
torch_llama_step.py (6 x matmul weights x tokens + causal attention), so
the two can be compared; the peak is the measured bf16 GEMM rate
(gemm_peak.py) and the datasheet's 989 TFLOP/s.

The CIFAR ResNet stage (check.sh st_resnet) gets a table of its own: ours in
bf16 and f32 against torch eager with bf16 autocast and in f32, images/s from
the same median step times, TFLOP/s by torch_resnet_step.step_flops (the
engine counts the same figure), peak memory as above.

The sharding stage (check.sh st_sharding) gets a table too: per composition
(DDP, FSDP, FSDP+AC, B-SDP+FSDP+AC), dtype and kind of rank (rank 0 of an
emulated 8-rank job, or the real one-rank NCCL job), the first step's peak
bytes per category on the device against a meta --dry-run of the same
step, which must agree byte for byte on CUDA. `--sharding-check` prints
that comparison alone and exits 1 when a run failed or a figure differs.

The pipeline stage (check.sh st_pipeline) gets one as well: per schedule
(1f1b, 1f1b-2bp) and stage of a 2-stage pipeline, each rank run alone as an
emulated rank, the mean measured ms of each action kind in the last step
(F, B, I, W; sends and receives are counted, not run), the median step,
and the peak and activation peak on the device against a meta --dry-run.
`--pipeline-check` prints those rows alone and exits 1 when a run failed or
left no measured actions.
"""

import argparse
import json
import os
import statistics
import sys
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_resnet_step  # noqa: E402  (stdlib only at import: its FLOPs formula)

SPEC_TFLOPS = 989.0
GIB = 2.0 ** 30
SKIPPED_WARMUP_STEPS = 3

# As torch_llama_step.MODELS (dim, layers, heads, kv_heads, ffn, vocab):
# duplicated so that this file needs no torch.
MODELS = {
    "tiny": (64, 2, 4, 2, 176, 256),
    "mini": (96, 4, 4, 4, 256, 256),
    "small": (256, 4, 8, 8, 688, 256),
    "small-32k": (256, 4, 8, 8, 688, 32000),
    "llama-134m": (768, 12, 12, 12, 2048, 32000),
    "llama-500m": (1280, 20, 20, 20, 3840, 32000),
    "llama-1b": (2048, 16, 16, 16, 6144, 32000),
}


def formula_flops(model, batch, seq):
    """torch_llama_step.step_flops, restated: 6 x matmul weights x tokens + causal attention."""
    if model not in MODELS:
        return None
    dim, layers, heads, kv_heads, ffn, vocab = MODELS[model]
    head_dim = dim // heads
    weights = layers * (dim * heads * head_dim * 2 + dim * kv_heads * head_dim * 2 + 3 * dim * ffn)
    weights += vocab * dim
    attention = 12 * batch * layers * heads * head_dim * seq * (seq + 1) // 2
    return 6 * weights * batch * seq + attention


# ---- readers: each returns None (or empty) for a missing or broken file ----

def read_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def read_kv(path):
    out = {}
    for line in (read_text(path) or "").splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def read_json(path):
    text = read_text(path)
    if not text:
        return None
    try:
        return json.loads(text.strip().splitlines()[-1])
    except ValueError:
        return None


def read_jsonl(path):
    records = []
    for line in (read_text(path) or "").splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            pass  # a line cut short by a killed run
    return records


def read_stages(path):
    rows = []
    for line in (read_text(path) or "").splitlines():
        cols = line.split("\t")
        if len(cols) >= 4:
            rows.append({"stage": cols[0], "status": cols[1], "seconds": cols[2],
                         "limit": cols[3], "note": cols[4] if len(cols) > 4 else ""})
    return rows


def read_junit(path):
    """ctest --output-junit: {tests, failed, skipped, passed, failed_names}."""
    text = read_text(path)
    if text is None:
        return None
    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        return None
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        return None
    failed, skipped, total = [], 0, 0
    for case in suite.iter("testcase"):
        total += 1
        status = case.get("status", "")
        if (case.find("failure") is not None or case.find("error") is not None
                or status == "fail"):
            failed.append(case.get("name", "?"))
        elif case.find("skipped") is not None or status in ("notrun", "disabled"):
            skipped += 1
    return {"tests": total, "failed": len(failed), "skipped": skipped,
            "passed": total - len(failed) - skipped, "failed_names": failed}


def smi_peak_bytes(path):
    values = []
    for line in (read_text(path) or "").splitlines():
        try:
            values.append(float(line.strip().split()[0]))
        except (ValueError, IndexError):
            pass
    return max(values) * 2 ** 20 if values else None


def find_bytes(node, key):
    """The figure under `key` anywhere in `node`: a number, or a dict's peak / total."""
    if isinstance(node, dict):
        if key in node:
            return as_bytes(node[key])
        for value in node.values():
            found = find_bytes(value, key)
            if found is not None:
                return found
    return None


def as_bytes(value):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, dict):
        for key in ("peak", "total", "bytes", "max", "current"):
            if key in value:
                found = as_bytes(value[key])
                if found is not None:
                    return found
    return None


# ---- figures per implementation --------------------------------------------

def ours_figures(path, batch, seq):
    records = read_jsonl(path)
    steps = [r for r in records if isinstance(r, dict) and "step" in r and "seconds" in r]
    summary = next((r for r in records if isinstance(r, dict) and r.get("summary")), None)
    if not steps:
        return None
    timed = [r for r in steps if r["step"] > SKIPPED_WARMUP_STEPS] or steps[1:] or steps
    step_s = statistics.median(float(r["seconds"]) for r in timed)
    tokens = float(timed[-1].get("tokens", batch * seq))
    flops = [float(r["flops"]) for r in timed if isinstance(r.get("flops"), (int, float))]
    peaks = [find_bytes(r.get("memory", {}).get("peak", {}), "total") for r in steps
             if isinstance(r.get("memory"), dict)]
    reserved = [find_bytes(r.get("memory", {}), "reserved") for r in steps
                if isinstance(r.get("memory"), dict)]
    peaks = [p for p in peaks if p is not None]
    reserved = [p for p in reserved if p is not None]
    return {
        "status": "ok" if summary else "partial: no summary line",
        "steps": len(steps), "timed_steps": len(timed),
        "step_s": step_s, "tokens_per_step": tokens, "tokens_per_s": tokens / step_s,
        "flops_counted": statistics.median(flops) if flops else None,
        "peak_allocated": max(peaks) if peaks else None,
        "peak_reserved": max(reserved) if reserved else None,
        "loss_first": steps[0].get("loss"), "loss_last": steps[-1].get("loss"),
        "parameters": (summary or {}).get("parameters"),
        "engine_tokens_per_s": (summary or {}).get("tokens_per_s"),
    }


def torch_figures(path):
    r = read_json(path)
    if not r:
        return None
    if r.get("status") != "ok":
        return {"status": r.get("status", "?"), "reason": r.get("reason", "")}
    step_s = r["step_ms"] / 1e3
    return {
        "status": "ok", "step_s": step_s, "tokens_per_step": r["batch"] * r["seq"],
        "tokens_per_s": r["tokens_per_s"], "flops_counted": None,
        "peak_allocated": r.get("max_memory_allocated"),
        "peak_reserved": r.get("max_memory_reserved"),
        "loss_first": r.get("loss_first"), "loss_last": r.get("loss_last"),
        "parameters": r.get("params"), "precision": r.get("precision"),
        "warmup_s": r.get("warmup_s"),
    }


def resnet_ours_figures(path):
    """Ours on a ResNet: the median step after the first 3, as ours_figures."""
    records = read_jsonl(path)
    steps = [r for r in records if isinstance(r, dict) and "step" in r and "seconds" in r]
    if not steps:
        return None
    summary = next((r for r in records if isinstance(r, dict) and r.get("summary")), None)
    timed = [r for r in steps if r["step"] > SKIPPED_WARMUP_STEPS] or steps[1:] or steps
    step_s = statistics.median(float(r["seconds"]) for r in timed)
    images = float(timed[-1].get("images", 0))
    flops = [float(r["flops"]) for r in timed if isinstance(r.get("flops"), (int, float))]
    peaks = [find_bytes(r.get("memory", {}).get("peak", {}), "total") for r in steps
             if isinstance(r.get("memory"), dict)]
    reserved = [find_bytes(r.get("memory", {}), "reserved") for r in steps
                if isinstance(r.get("memory"), dict)]
    peaks = [p for p in peaks if p is not None]
    reserved = [p for p in reserved if p is not None]
    return {
        "status": "ok" if summary else "partial: no summary line", "steps": len(steps),
        "step_s": step_s, "images_per_step": images,
        "images_per_s": images / step_s if images else None,
        "flops_counted": statistics.median(flops) if flops else None,
        "peak_allocated": max(peaks) if peaks else None,
        "peak_reserved": max(reserved) if reserved else None,
        "loss_first": steps[0].get("loss"), "loss_last": steps[-1].get("loss"),
        "parameters": (summary or {}).get("parameters"),
    }


def resnet_torch_figures(path):
    r = read_json(path)
    if not r:
        return None
    if r.get("status") != "ok":
        return {"status": r.get("status", "?"), "reason": r.get("reason", "")}
    return {
        "status": "ok", "step_s": r["step_ms"] / 1e3, "images_per_step": r["batch"],
        "images_per_s": r["images_per_s"], "flops_counted": None,
        "peak_allocated": r.get("max_memory_allocated"),
        "peak_reserved": r.get("max_memory_reserved"),
        "loss_first": r.get("loss_first"), "loss_last": r.get("loss_last"),
        "parameters": r.get("params"), "warmup_s": r.get("warmup_s"),
    }


def resnet_runs(res, config, measured_peak):
    """The ResNet stage's rows: ours bf16 / f32, torch autocast / f32."""
    model = config.get("resnet_model", "")
    batch = int(config.get("resnet_batch", 0) or 0)
    if not model:
        return []
    formula = (torch_resnet_step.step_flops(model, batch, 32, 32, 10)
               if model in torch_resnet_step.MODELS and batch else None)
    runs = []
    impls = [(f"ours {dt}", dt, resnet_ours_figures(
        os.path.join(res, f"resnet_ours_{dt}_{model}.jsonl")),
        os.path.join(res, f"smi_resnet_ours_{dt}_{model}.txt")) for dt in ("bf16", "f32")]
    impls += [(f"torch eager {p}", "bf16" if p == "autocast" else "f32", resnet_torch_figures(
        os.path.join(res, f"resnet_torch_{p}_{model}.json")),
        os.path.join(res, f"smi_resnet_torch_{p}_{model}.txt")) for p in ("autocast", "f32")]
    # resnet-tiny at the same batch: ours' data, copy and launch floor.
    impls.append(("ours floor: resnet-tiny", "bf16" if config.get("dry") != "1" else "f32",
                  resnet_ours_figures(os.path.join(res, f"resnet_ours_floor_{model}.jsonl")), ""))
    for name, dtype, fig, smi in impls:
        if fig is None:
            continue
        fig = dict(fig, impl=name, model=model, dtype=dtype, smi_peak=smi_peak_bytes(smi))
        if name.startswith("ours floor"):
            fig["model"] = "resnet-tiny"
            fig.pop("flops_counted", None)
            runs.append(fig)
            continue
        if "step_s" in fig:
            same_batch = fig.get("images_per_step") == batch
            fig["flops_formula"] = formula if same_batch else None
            fig["tflops_formula"] = (formula / fig["step_s"] / 1e12
                                     if formula and same_batch else None)
            fig["tflops_counted"] = (fig["flops_counted"] / fig["step_s"] / 1e12
                                     if fig.get("flops_counted") else None)
            # MFU only against bf16 peaks: f32 runs on other units.
            peak = fig["tflops_formula"] if dtype == "bf16" else None
            fig["mfu_formula_measured"] = peak / measured_peak if peak and measured_peak else None
            fig["mfu_formula_spec"] = peak / SPEC_TFLOPS if peak else None
        runs.append(fig)
    return runs


def predicted_peak(path):
    for r in read_jsonl(path):
        if isinstance(r, dict) and r.get("dry_run"):
            return find_bytes(r.get("memory", {}).get("peak", {}), "total")
    return None



# ---- the sharding stage -----------------------------------------------------

CATEGORIES = ("param", "master", "grad", "optim", "activation", "workspace", "comm", "gathered")
COMPOSITIONS = {"ddp": "DDP", "fsdp": "FSDP", "fsdp_ac": "FSDP+AC", "bsdp_fsdp_ac": "B-SDP+FSDP+AC"}
RANK_KINDS = {"r0/8": "rank 0 of 8 (emulated)", "w1": "1 of 1 (real; NCCL on cuda)"}


def mib(value):
    return "-" if value is None else f"{value / 2 ** 20:,.1f}"


def memory_figures(memory):
    """(total peak, peak per category, bytes per category at the peak) of a memory object."""
    peak = (memory or {}).get("peak") or {}
    total = peak.get("total")
    return (total if isinstance(total, (int, float)) else None,
            peak.get("by_category") or {}, peak.get("at_peak") or {})


def sharding_runs(res, dry):
    """One row per line of sharding.tsv: the device run's first step against the meta dry run."""
    rows = []
    for line in (read_text(os.path.join(res, "sharding.tsv")) or "").splitlines():
        cols = line.split("\t")
        if len(cols) < 8:
            continue
        tag, comp, dtype, ranks, run_file, meta_file, rc_run, rc_meta = cols[:8]
        records = read_jsonl(os.path.join(res, run_file))
        steps = [r for r in records if isinstance(r, dict) and "step" in r and "memory" in r]
        meta = next((r for r in read_jsonl(os.path.join(res, meta_file))
                     if isinstance(r, dict) and r.get("dry_run")), None)
        row = {"tag": tag, "composition": COMPOSITIONS.get(comp, comp), "dtype": dtype,
               "ranks": RANK_KINDS.get(ranks, ranks), "rc_run": rc_run, "rc_meta": rc_meta,
               "steps": len(steps)}
        problems = []
        if rc_run != "0":
            problems.append(f"run exit {rc_run}")
        if rc_meta != "0":
            problems.append(f"meta exit {rc_meta}")
        first = next((r for r in steps if r.get("step") == 1), None)
        if first is None:
            problems.append("no step 1 record")
        if meta is None:
            problems.append("no dry-run record")
        if first is not None and meta is not None:
            total, by_cat, at_peak = memory_figures(first.get("memory"))
            m_total, m_by_cat, m_at_peak = memory_figures(meta.get("memory"))
            row.update(peak=total, meta_peak=m_total, by_category=by_cat,
                       meta_by_category=m_by_cat)
            differ = [c for c in CATEGORIES
                      if by_cat.get(c, 0) != m_by_cat.get(c, 0) or
                      at_peak.get(c, 0) != m_at_peak.get(c, 0)]
            if total != m_total:
                differ.insert(0, "total")
            row["differ"] = differ
            row["match"] = not differ
            if differ and not dry:  # --dry: the CPU allocator's blocks are not CUDA's
                problems.append("meta differs: " + ", ".join(differ))
        timed = [float(r["seconds"]) for r in steps[1:] if isinstance(r.get("seconds"), (int, float))]
        row["step_s"] = statistics.median(timed) if timed else None
        peaks = [memory_figures(r.get("memory"))[0] for r in steps]
        peaks = [p for p in peaks if p is not None]
        row["max_peak"] = max(peaks) if peaks else None
        sent = [((r.get("comm") or {}).get("sent_bytes")) for r in steps[1:]]
        sent = [x for x in sent if isinstance(x, (int, float))]
        row["sent_bytes_per_step"] = statistics.median(sent) if sent else None
        row["problems"] = problems
        row["status"] = "ok" if not problems else "; ".join(problems)
        rows.append(row)
    return rows


def sharding_markdown(s):
    rows = s.get("sharding_runs") or []
    config = s["config"]
    if not rows:
        if config.get("sharding", "off") != "off":
            return ["", "Sharding and recomputation: no results (see the stages above)"]
        return []
    lines = ["", f"Sharding and recomputation: {config.get('models', '?').split()[0]}, batch "
             f"{config.get('batch')} x seq {config.get('seq')}, {config.get('sharding_steps')} "
             "steps per run on " + config.get("device", "?") + "; step 1's peak per category on "
             "the device against a meta --dry-run of the same step (equal byte for byte on CUDA"
             + ("; --dry: the CPU allocator's blocks differ from the CUDA ones meta mirrors"
                if s["dry"] else "") + "); step ms and sent MiB: the median after step 1", ""]
    body = []
    for r in rows:
        cat = r.get("by_category") or {}
        meta_ratio = (f"{r['peak'] / r['meta_peak']:.4f}"
                      if r.get("peak") and r.get("meta_peak") else "-")
        body.append((r["composition"], r["dtype"], r["ranks"], r["status"][:60],
                     num(r["step_s"] * 1e3, 1) if r.get("step_s") else "-",
                     mib(r.get("peak")), mib(r.get("meta_peak")), meta_ratio,
                     mib(cat.get("param", 0) + cat.get("master", 0)) if cat else "-",
                     mib(cat.get("grad")) if cat else "-", mib(cat.get("optim")) if cat else "-",
                     mib(cat.get("activation")) if cat else "-",
                     mib(cat.get("gathered")) if cat else "-",
                     mib(r.get("sent_bytes_per_step")),
                     ", ".join(r.get("differ") or []) or ("none" if r.get("match") else "-")))
    lines += table(["composition", "dtype", "rank", "result", "step ms", "peak MiB (device)",
                    "peak MiB (meta)", "device / meta", "param+master", "grad", "optim",
                    "activation", "gathered", "sent MiB", "categories differing"], body)
    return lines


def sharding_check(work):
    """Prints the sharding stage's comparison; 1 when a run failed or meta differs (CUDA)."""
    res = os.path.join(work, "results")
    dry = read_kv(os.path.join(res, "config.txt")).get("dry") == "1"
    rows = sharding_runs(res, dry)
    if not rows:
        print("sharding check: no runs in sharding.tsv")
        return 1
    bad = 0
    for r in rows:
        bad += bool(r["problems"])
        print(f"{r['tag']}: {r['status']}; step 1 peak device {r.get('peak')}, meta "
              f"{r.get('meta_peak')}; differing: {', '.join(r.get('differ') or []) or 'none'}")
    print(f"sharding check: {len(rows) - bad} of {len(rows)} runs ok")
    return 1 if bad else 0


# ---- formatting -------------------------------------------------------------

# ---- the pipeline stage -----------------------------------------------------

ACTION_KINDS = ("F", "B", "I", "W")


def action_costs(actions):
    """Mean seconds of each compute action kind (F, B, I, W) of one stage's list."""
    by_kind = {}
    for a in actions or []:
        name = str(a.get("action", ""))
        kind = name.rstrip("0123456789")
        if kind in ACTION_KINDS and isinstance(a.get("start"), (int, float)) \
                and isinstance(a.get("end"), (int, float)):
            by_kind.setdefault(kind, []).append(a["end"] - a["start"])
    return {k: sum(v) / len(v) for k, v in by_kind.items()}


def pipeline_runs(res):
    """One row per line of pipeline.tsv: an emulated pipeline rank's measured actions and memory."""
    rows = []
    for line in (read_text(os.path.join(res, "pipeline.tsv")) or "").splitlines():
        cols = line.split("\t")
        if len(cols) < 8:
            continue
        tag, sched, rank, run_dir, run_file, meta_file, rc_run, rc_meta = cols[:8]
        steps = [r for r in read_jsonl(os.path.join(res, run_file))
                 if isinstance(r, dict) and "step" in r and "memory" in r]
        meta = next((r for r in read_jsonl(os.path.join(res, meta_file))
                     if isinstance(r, dict) and r.get("dry_run")), None)
        row = {"tag": tag, "schedule": sched, "rank": rank, "rc_run": rc_run,
               "rc_meta": rc_meta, "steps": len(steps)}
        problems = []
        if rc_run != "0":
            problems.append(f"run exit {rc_run}")
        if rc_meta != "0":
            problems.append(f"meta exit {rc_meta}")
        stage = None
        if steps and isinstance(steps[-1].get("pipeline"), dict):
            stage = steps[-1]["pipeline"].get("stage")
        row["stage"] = stage
        actions_file = os.path.join(res, run_dir, f"stage{stage}_actions.json")
        actions = None
        if stage is not None:
            try:  # one JSON document, possibly over many lines (read_json takes the last line)
                actions = json.loads(read_text(actions_file) or "null")
            except ValueError:
                actions = None
        if not isinstance(actions, dict) or not actions.get("actions"):
            problems.append(f"no measured actions ({run_dir}/stage{stage}_actions.json)")
            actions = {}
        row["action_seconds"] = action_costs(actions.get("actions"))
        row["actions_seconds_total"] = actions.get("seconds")
        timed = [float(r["seconds"]) for r in steps[1:] if isinstance(r.get("seconds"), (int, float))]
        row["step_s"] = statistics.median(timed) if timed else None
        if steps:
            total, by_cat, _ = memory_figures(steps[0].get("memory"))
            row.update(peak=total, activation_peak=by_cat.get("activation"))
        if meta is not None:
            m_total, m_by_cat, _ = memory_figures(meta.get("memory"))
            row.update(meta_peak=m_total, meta_activation_peak=m_by_cat.get("activation"))
        row["problems"] = problems
        row["status"] = "ok" if not problems else "; ".join(problems)
        rows.append(row)
    return rows


def two_bp_note(rows):
    """Whether 1f1b-2bp's stage-0 activation peak exceeds 1f1b's, on the device and on meta."""
    by = {(r["schedule"], r.get("stage")): r for r in rows}
    a, b = by.get(("1f1b", 0)), by.get(("1f1b-2bp", 0))
    if not a or not b:
        return None
    out = []
    for key, what in (("activation_peak", "device"), ("meta_activation_peak", "meta")):
        if a.get(key) and b.get(key):
            out.append(f"{what} {b[key] / a[key]:.2f}x")
    return "stage 0 activation peak, 1f1b-2bp / 1f1b: " + (", ".join(out) or "-")


def pipeline_markdown(s):
    rows = s.get("pipeline_runs") or []
    config = s["config"]
    if not rows:
        if config.get("pipeline", "off") != "off":
            return ["", "Pipeline: no results (see the stages above)"]
        return []
    lines = ["", f"Pipeline: {config.get('models', '?').split()[0]}, 2 stages, "
             f"{config.get('pipeline_micro_batches')} micro-batches of "
             f"{config.get('pipeline_batch')} x seq {config.get('seq')}, "
             f"{config.get('pipeline_steps')} steps per run on {config.get('device', '?')}; each "
             "rank run alone (emulated: sends and receives counted, not run); action ms: the "
             "mean of each kind in the last step; step ms: the median after step 1; peaks: step 1 "
             "on the device and a meta --dry-run", ""]
    body = []
    for r in rows:
        cost = r.get("action_seconds") or {}
        body.append((r["schedule"], "-" if r.get("stage") is None else str(r["stage"]),
                     r["status"][:60],
                     *[num(cost[k] * 1e3, 2) if k in cost else "-" for k in ACTION_KINDS],
                     num(r["step_s"] * 1e3, 1) if r.get("step_s") else "-",
                     mib(r.get("peak")), mib(r.get("meta_peak")),
                     mib(r.get("activation_peak")), mib(r.get("meta_activation_peak"))))
    lines += table(["schedule", "stage", "result", "F ms", "B ms", "I ms", "W ms", "step ms",
                    "peak MiB (device)", "peak MiB (meta)", "activation MiB (device)",
                    "activation MiB (meta)"], body)
    note = two_bp_note(rows)
    if note:
        lines += ["", note]
    return lines


def pipeline_check(work):
    """Prints the pipeline stage's rows; 1 when a run failed or left no measured actions."""
    rows = pipeline_runs(os.path.join(work, "results"))
    if not rows:
        print("pipeline check: no runs in pipeline.tsv")
        return 1
    bad = 0
    for r in rows:
        bad += bool(r["problems"])
        cost = ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in sorted(r["action_seconds"].items()))
        print(f"{r['tag']}: {r['status']}; stage {r.get('stage')}; {cost or 'no actions'}; "
              f"peak device {r.get('peak')}, meta {r.get('meta_peak')}")
    note = two_bp_note(rows)
    if note:
        print(note)
    print(f"pipeline check: {len(rows) - bad} of {len(rows)} runs ok")
    return 1 if bad else 0


def gib(value):
    return "-" if value is None else f"{value / GIB:.2f} GiB"


def num(value, digits=0, unit=""):
    if value is None:
        return "-"
    return f"{value:,.{digits}f}{unit}"


def pct(value):
    return "-" if value is None else f"{100 * value:.1f}%"


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def summarize(work):
    res = os.path.join(work, "results")
    config = read_kv(os.path.join(res, "config.txt"))
    env = read_kv(os.path.join(res, "env.txt"))
    stages = read_stages(os.path.join(work, "stages.tsv"))
    batch, seq = int(config.get("batch", 0) or 0), int(config.get("seq", 0) or 0)
    models = config.get("models", "").split()
    gemm = read_json(os.path.join(res, "gemm.json")) or {}
    measured_peak = gemm.get("tflops_median") if gemm.get("status") == "ok" else None
    dry = config.get("dry") == "1"

    tests = {}
    cuda = read_junit(os.path.join(res, "ctest_cuda.xml"))
    if cuda:
        tests["cuda (ctest -L cuda)"] = cuda
    listed = read_text(os.path.join(res, "ctest_cuda_listed.txt"))
    if listed is not None and not cuda:
        count = next((line.split(":")[-1].strip() for line in listed.splitlines()
                      if line.startswith("Total Tests")), "?")
        tests["cuda (ctest -L cuda)"] = {"listed": count}
    cpu = read_junit(os.path.join(res, "ctest_cpu.xml"))
    if cpu:
        tests["cpu (ctest, all but cuda and mpi labels)"] = cpu

    runs = []
    for model in models:
        formula = formula_flops(model, batch, seq)
        predicted = predicted_peak(os.path.join(res, f"predict_{model}.jsonl"))
        impls = [("ours", ours_figures(os.path.join(res, f"ours_{model}.jsonl"), batch, seq),
                  os.path.join(res, f"smi_ours_{model}.txt"))]
        for mode in ("eager", "compile"):
            impls.append((f"torch {mode}", torch_figures(os.path.join(res, f"torch_{mode}_{model}.json")),
                          os.path.join(res, f"smi_torch_{mode}_{model}.txt")))
        # One emulated rank of an 8-rank SDP job at C = 0.5 (check.sh st_ours_sdp).
        for strategy in ("b-sdp", "n-sdp"):
            # Its tokens are the whole job's (8 ranks' batches), as the metrics count them.
            impls.append((f"ours {strategy} rank 0/8 (job tokens/s)", ours_figures(
                os.path.join(res, f"ours_{strategy}_{model}.jsonl"), batch, seq),
                os.path.join(res, f"smi_ours_{strategy}_{model}.txt")))
        for name, fig, smi in impls:
            if fig is None:
                continue
            fig = dict(fig, impl=name, model=model, smi_peak=smi_peak_bytes(smi))
            if fig["status"] != "ok" and "step_s" not in fig:
                runs.append(fig)
                continue
            # A subnetwork runs fewer FLOPs than the whole model's formula.
            fig["flops_formula"] = None if name.startswith("ours ") else formula
            if fig.get("tokens_per_step") and batch and seq and fig["tokens_per_step"] != batch * seq:
                fig["flops_formula"] = None  # another batch than the formula assumes
            for key in ("flops_counted", "flops_formula"):
                flops = fig.get(key)
                tflops = flops / fig["step_s"] / 1e12 if flops else None
                fig[key.replace("flops", "tflops")] = tflops
                fig[key.replace("flops", "mfu") + "_measured"] = (
                    tflops / measured_peak if tflops and measured_peak else None)
                fig[key.replace("flops", "mfu") + "_spec"] = tflops / SPEC_TFLOPS if tflops else None
            if name == "ours":
                fig["predicted_peak"] = predicted
            runs.append(fig)

    return {"config": config, "env": env, "stages": stages, "gemm": gemm, "tests": tests,
            "runs": runs, "dry": dry, "measured_peak_tflops": measured_peak,
            "resnet_runs": resnet_runs(res, config, measured_peak),
            "sharding_runs": sharding_runs(res, dry),
            "pipeline_runs": pipeline_runs(res)}


def markdown(s):
    config, env = s["config"], s["env"]
    lines = []
    title = "GPU check"
    if s["dry"]:
        title += f" - DRY RUN ({config.get('dry_reason', '')}): CPU stand-ins, no GPU figures"
    lines.append(f"## {title}")
    lines.append("")
    lines.append(f"GPU {env.get('gpu') or '-'} (driver {env.get('driver') or '-'}), "
                 f"nvcc {env.get('nvcc') or '-'}, torch {env.get('torch') or '-'}, "
                 f"{env.get('cmake') or 'cmake ?'}, {env.get('gcc') or 'gcc ?'}")
    lines.append("")
    used = sum(int(r["seconds"]) for r in s["stages"] if r["seconds"].isdigit())
    lines += table(["stage", "result", "s", "note"],
                   [(r["stage"], r["status"], r["seconds"], r["note"][:110]) for r in s["stages"]])
    lines.append(f"\nstages took {used} s of the {config.get('budget_s', '?')} s budget")
    lines.append("")

    rows = []
    for suite, t in s["tests"].items():
        if "listed" in t:
            rows.append((suite, "-", "-", "-", t["listed"], "listed only: not run without a GPU"))
        else:
            note = ", ".join(t["failed_names"][:4]) + (" ..." if len(t["failed_names"]) > 4 else "")
            rows.append((suite, t["passed"], t["failed"], t["skipped"], t["tests"], note))
    if rows:
        lines += table(["tests", "passed", "failed", "skipped", "total", "failed tests"], rows)
    else:
        lines.append("tests: no results (see the stages above)")
    lines.append("")

    gemm = s["gemm"]
    if gemm.get("status") == "ok":
        lines.append(f"GEMM peak ({gemm.get('dtype')} {gemm.get('size')}^3, torch, "
                     f"{gemm.get('device_name')}): {gemm.get('tflops_median')} TFLOP/s median, "
                     f"{gemm.get('tflops_best')} best; datasheet dense bf16 {SPEC_TFLOPS:.0f}")
    else:
        lines.append(f"GEMM peak: not measured ({gemm.get('reason') or 'stage failed or skipped'})")
    lines.append(f"Training step: {config.get('dtype', '?')} on {config.get('device', '?')}, "
                 f"batch {config.get('batch')} x seq {config.get('seq')}; MFU = FLOPs / step time / "
                 f"peak (measured GEMM | {SPEC_TFLOPS:.0f} spec); ours counted, all by formula")
    lines.append("")
    rows = []
    for r in s["runs"]:
        if "step_s" not in r:
            rows.append((r["model"], r["impl"], r.get("status", "?"), "", "", "", "", "", "", "",
                         r.get("reason", "")[:60]))
            continue
        mfu_counted = (f"{pct(r.get('mfu_counted_measured'))} / {pct(r.get('mfu_counted_spec'))}"
                       if r.get("tflops_counted") else "-")
        mfu_formula = f"{pct(r.get('mfu_formula_measured'))} / {pct(r.get('mfu_formula_spec'))}"
        loss = (f"{r['loss_first']:.3f}->{r['loss_last']:.3f}"
                if isinstance(r.get("loss_first"), (int, float))
                and isinstance(r.get("loss_last"), (int, float)) else "-")
        impl = r["impl"] if r.get("status") == "ok" else f"{r['impl']} ({r.get('status')})"
        rows.append((r["model"], impl, num(r["tokens_per_s"]), num(r["step_s"] * 1e3, 1),
                     mfu_counted, mfu_formula, gib(r.get("peak_allocated")),
                     gib(r.get("peak_reserved")), gib(r.get("smi_peak")),
                     gib(r.get("predicted_peak")) if r["impl"] == "ours" else "", loss))
    if rows:
        lines += table(["model", "impl", "tokens/s", "step ms", "MFU counted", "MFU formula",
                        "peak alloc", "peak reserved", "nvidia-smi max", "meta predicted",
                        "loss"], rows)
    else:
        lines.append("no benchmark results (see the stages above)")
    notes = []
    for r in s["runs"]:
        if r["impl"].startswith("ours ") and r.get("peak_allocated"):
            ddp = next((d for d in s["runs"] if d["model"] == r["model"] and d["impl"] == "ours"
                        and d.get("peak_allocated")), None)
            if ddp:
                notes.append(f"{r['model']}: {r['impl']} peak / DDP peak = "
                             f"{r['peak_allocated'] / ddp['peak_allocated']:.3f}")
    for r in s["runs"]:
        if r["impl"] == "ours" and "step_s" in r:
            if r.get("predicted_peak") and r.get("peak_allocated"):
                notes.append(f"{r['model']}: measured peak / meta prediction = "
                             f"{r['peak_allocated'] / r['predicted_peak']:.3f}")
            if r.get("flops_counted") and r.get("flops_formula"):
                notes.append(f"{r['model']}: counted FLOPs / formula = "
                             f"{r['flops_counted'] / r['flops_formula']:.3f}")
            torch_params = next((t.get("parameters") for t in s["runs"]
                                 if t["model"] == r["model"] and t["impl"] != "ours"
                                 and t.get("parameters")), None)
            if r.get("parameters") and torch_params and r["parameters"] != torch_params:
                notes.append(f"{r['model']}: PARAMETER COUNTS DIFFER: ours {r['parameters']}, "
                             f"torch {torch_params}")
    if notes:
        lines.append("")
        lines.append("; ".join(notes))
    lines += resnet_markdown(s)
    lines += sharding_markdown(s)
    lines += pipeline_markdown(s)
    return "\n".join(lines) + "\n"


def resnet_markdown(s):
    runs = s.get("resnet_runs") or []
    config = s["config"]
    if not runs:
        if config.get("resnet_model") and config.get("resnet") != "off":
            return ["", f"CIFAR ResNet {config['resnet_model']}: no results (see the stages above)"]
        return []
    lines = ["", f"CIFAR ResNet {config.get('resnet_model')}: batch {config.get('resnet_batch')} "
             f"x 3 x 32 x 32, {config.get('resnet_steps')} steps; ours draws its batch on the host "
             "in the step, torch reuses one device batch; TFLOP/s by formula (torch_resnet_step.py); "
             "MFU of the bf16 rows against the measured GEMM peak | the spec; the resnet-tiny row "
             "(ours, same batch) is the floor of data, copy and launches under ours' step", ""]
    rows = []
    for r in runs:
        if "step_s" not in r:
            rows.append((r["model"], r["impl"], r.get("status", "?"), "", "", "", "", "", "", "",
                         r.get("reason", "")[:60]))
            continue
        mfu = (f"{pct(r.get('mfu_formula_measured'))} / {pct(r.get('mfu_formula_spec'))}"
               if r.get("mfu_formula_spec") else "-")
        loss = (f"{r['loss_first']:.3f}->{r['loss_last']:.3f}"
                if isinstance(r.get("loss_first"), (int, float))
                and isinstance(r.get("loss_last"), (int, float)) else "-")
        impl = r["impl"] if r.get("status") == "ok" else f"{r['impl']} ({r.get('status')})"
        rows.append((r["model"], impl, num(r.get("images_per_s")), num(r["step_s"] * 1e3, 2),
                     num(r.get("tflops_formula"), 2), mfu, gib(r.get("peak_allocated")),
                     gib(r.get("peak_reserved")), gib(r.get("smi_peak")),
                     num((r.get("flops_counted") or 0) / r["flops_formula"], 3)
                     if r.get("flops_counted") and r.get("flops_formula") else "-", loss))
    lines += table(["model", "impl", "images/s", "step ms", "TFLOP/s", "MFU bf16",
                    "peak alloc", "peak reserved", "nvidia-smi max", "counted / formula FLOPs",
                    "loss"], rows)
    return lines


def failures(s, work):
    """The end of each failed or timed-out stage's log, to read without unpacking the logs."""
    out = []
    for r in s["stages"]:
        if r["status"] in ("failed", "timeout"):
            lines = (read_text(os.path.join(work, "logs", r["stage"] + ".log")) or "").splitlines()
            # The first errors (a build's first failure is far from its end), then the end.
            errors = [line for line in lines
                      if "error" in line.lower() or line.startswith("FAILED")][:30]
            tail = lines[-40:]
            out.append(f"===== {r['stage']}: {r['status']} {r['note']}")
            if errors:
                out += ["--- first error lines:"] + errors + ["--- last lines:"]
            out += tail + [""]
    return "\n".join(out) if out else "no stage failed\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", required=True)
    p.add_argument("--markdown")
    p.add_argument("--json")
    p.add_argument("--failures")
    p.add_argument("--sharding-check", action="store_true",
                   help="only compare the sharding stage's runs with meta; exit 1 on a difference")
    p.add_argument("--pipeline-check", action="store_true",
                   help="only print the pipeline stage's runs; exit 1 when one failed")
    args = p.parse_args(argv)
    if args.pipeline_check:
        return pipeline_check(args.work)
    if args.sharding_check:
        return sharding_check(args.work)
    s = summarize(args.work)
    text = markdown(s)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(s, f, indent=1, sort_keys=True, default=str)
    if args.failures:
        with open(args.failures, "w", encoding="utf-8") as f:
            f.write(failures(s, args.work))
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
