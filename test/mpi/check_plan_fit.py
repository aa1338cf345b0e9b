#!/usr/bin/env python3
"""check_plan_fit.py SDP_PLAN SDP_TRAIN MPIEXEC NUMPROC_FLAG [MPIEXEC_ARGS ...]

sdp-plan --fit on a small LLaMA over 4 ranks, checked three ways:
- the list: every configuration's peak is within the budget; the rows marked
  Pareto are dominated by no row and every other row is dominated by one
  (peak, step time, C); the preferred rows (every component averaged over
  at least 2 ranks, C >= 0.25: the defaults) come first, each part by step
  time;
- the search: for every (composition, micro-batch, stages) whose largest
  fitting C is below (N - 1) / N, the next C, r + 1 owners, measured by
  sdp-plan --strategies on its own, is over the budget (the bisection found
  the boundary);
- the config: --write-config of the first row and of a sharded, recomputing
  SDP row, run for one step by sdp-train under MPIEXEC on 4 ranks, gives
  the peak the planner predicted, byte for byte.
Exits 1 naming the first failure.
"""
import json
import os
import subprocess
import sys
import tempfile

WORLD = 4
BUDGET = "6MiB"
JOB = ["--model", "mini", "--world", str(WORLD), "--batch", "4", "--seq", "32", "--device", "cpu"]
SHARD_SUFFIX = {"none": "", "optimizer": "+zero1", "grad": "+zero2", "full": "+fsdp"}


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def dominates(a, b):
    ta, tb = a["step_time"]["seconds"], b["step_time"]["seconds"]
    no_worse = a["peak_bytes"] <= b["peak_bytes"] and ta <= tb and \
        a["active_fraction"] >= b["active_fraction"]
    better = a["peak_bytes"] < b["peak_bytes"] or ta < tb or \
        a["active_fraction"] > b["active_fraction"]
    return no_worse and better


def composition(row, fraction):
    text = row["strategy"]
    if row["strategy"] != "ddp":
        text += f":{fraction}"
    text += SHARD_SUFFIX[row["shard"]]
    if row["activation_checkpointing"] != "none":
        text += "+ac"
    return text


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    sdp_plan, sdp_train = sys.argv[1], sys.argv[2]
    mpiexec = [sys.argv[3], sys.argv[4], str(WORLD), *sys.argv[5:]]
    failures = []
    result = json.loads(run([sdp_plan, *JOB, "--fit", BUDGET, "--format", "json"]))
    rows, budget = result["fitting"], result["budget_bytes"]
    if not rows:
        sys.exit("FAIL: no configuration fits; the budget is meant to admit some")

    # The list.
    for i, row in enumerate(rows):
        if row["peak_bytes"] > budget:
            failures.append(f"row {i + 1} ({row['label']}) peaks at {row['peak_bytes']} > {budget}")
        dominated = any(dominates(other, row) for other in rows)
        if row["pareto"] == dominated:
            failures.append(f"row {i + 1} ({row['label']}, C = {row['active_fraction']}) is "
                            f"marked pareto={row['pareto']} but dominated={dominated}")
    for i, row in enumerate(rows):
        want = row["owners"] >= 2 and row["active_fraction"] >= 0.25 - 1e-12
        if row["preferred"] != want:
            failures.append(f"row {i + 1} ({row['label']}, {row['owners']} owners, C = "
                            f"{row['active_fraction']}) is marked preferred={row['preferred']}")
    marks = [row["preferred"] for row in rows]
    if marks != sorted(marks, reverse=True):
        failures.append("the preferred rows do not come first")
    if not any(marks):
        failures.append("no preferred row fits; the budget is meant to admit some")
    for a, b in zip(rows, rows[1:]):
        if a["preferred"] == b["preferred"] and \
                a["step_time"]["seconds"] > b["step_time"]["seconds"]:
            failures.append(f"{a['label']} ranks above {b['label']} but is slower")

    # The search's boundaries.
    largest = {}
    for row in rows:
        key = (composition(row, "C"), row["micro_batch"], row["pipeline_stages"])
        if key not in largest or row["active_fraction"] > largest[key]["active_fraction"]:
            largest[key] = row
    checked = 0
    for (_, micro_batch, stages), row in sorted(largest.items()):
        replicas = WORLD // stages
        owners = round(row["active_fraction"] * replicas)
        if row["strategy"] == "ddp" or owners >= replicas - 1:
            continue
        item = composition(row, (owners + 1) / replicas)
        args = [sdp_plan, *JOB[:4], "--batch", str(micro_batch), "--seq", "32",
                "--grad-accum", str(row["grad_accum"]), "--device", "cpu",
                "--strategies", item, "--format", "json"]
        if stages > 1:
            args += ["--pipeline-stages", str(stages)]
        plan = json.loads(run(args))
        peak = [s for s in plan["strategies"] if s["requested"]][-1]["peak_bytes"]["max"]
        if peak <= budget:
            failures.append(f"{item} at micro-batch {micro_batch}, {stages} stage(s) fits "
                            f"({peak} <= {budget}) but the search stopped below it")
        checked += 1
    if checked == 0:
        failures.append("no combination stopped below C = (N - 1) / N: the bisection was not tested")

    # Written configs run with the predicted peak.
    chosen = [0]
    headline = [i for i, row in enumerate(rows) if row["strategy"] == "b-sdp" and
                row["shard"] != "none" and row["activation_checkpointing"] != "none"]
    # B-SDP + FSDP + AC (the paper's composition) when it fits, else another level.
    headline.sort(key=lambda i: rows[i]["shard"] != "full")
    chosen += headline[:1]
    if len(chosen) < 2:
        failures.append("no B-SDP row with sharding and recomputation fits the budget")
    with tempfile.TemporaryDirectory() as tmp:
        for index in chosen:
            config = os.path.join(tmp, f"row{index + 1}.json")
            metrics = os.path.join(tmp, f"row{index + 1}.jsonl")
            run([sdp_plan, *JOB, "--fit", BUDGET, "--write-config", config,
                 "--choose", str(index + 1)])
            run([*mpiexec, sdp_train, "--config", config, "--steps", "1",
                 "--progress", "false", "--metrics", metrics])
            records = [json.loads(line) for line in open(metrics)]
            measured = [r for r in records if "step" in r][0]["ranks"]["peak_bytes"]["max"]
            predicted = rows[index]["peak_bytes"]
            label = f"row {index + 1} ({rows[index]['label']}, C = {rows[index]['active_fraction']})"
            print(f"{label}: predicted peak {predicted}, measured {measured}")
            if measured != predicted:
                failures.append(f"{label}: sdp-train peaked at {measured} bytes, the plan said "
                                f"{predicted}")
    for f in failures:
        print("FAIL:", f)
    if failures:
        sys.exit(1)
    print(f"{len(rows)} configurations fit; {checked} search boundaries and "
          f"{len(chosen)} written configs hold")


if __name__ == "__main__":
    main()
