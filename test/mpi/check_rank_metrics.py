"""check_rank_metrics.py FILE STEPS RANKS: the metrics of a multi-rank run
carry, on every step, each rank's peak memory and bytes sent (none missing,
traffic on every rank), and the summary has each rank's subnet eval loss and
the plan."""
import json
import sys

path, steps, ranks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path) as f:
    records = [json.loads(line) for line in f.read().splitlines()]
if len(records) != steps + 1:
    sys.exit(f"{path}: {len(records)} lines, expected {steps} steps + summary")
for rec in records[:-1]:
    figures = rec.get("ranks")
    if not figures:
        sys.exit(f"{path}: step {rec.get('step')} has no per-rank figures")
    for key in ("peak_bytes", "sent_bytes"):
        by_rank = figures[key]["by_rank"]
        if len(by_rank) != ranks or any(v is None or v <= 0 for v in by_rank):
            sys.exit(f"{path}: step {rec['step']}: {key} by rank is {by_rank}")
    if rec["comm"]["by_op"]["all_reduce"]["calls"] < 1:
        sys.exit(f"{path}: step {rec['step']}: no all-reduce counted")
summary = records[-1]
if summary.get("summary") is not True or len(summary.get("eval_subnet_loss", [])) != ranks:
    sys.exit(f"{path}: the summary lacks the {ranks} subnet eval losses")
plan = summary.get("parallel", {}).get("plan", {})
if plan.get("world") != ranks or len(plan.get("matrix", [])) != ranks:
    sys.exit(f"{path}: the summary lacks the {ranks}-rank plan: {plan}")
print(f"ok: {steps} steps with per-rank figures for {ranks} ranks, subnet losses, plan")
