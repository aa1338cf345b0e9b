"""check_metrics.py FILE STEPS: FILE is JSON lines, one per step and a final
summary line; every line must parse as a JSON object."""
import json
import sys

path, steps = sys.argv[1], int(sys.argv[2])
with open(path) as f:
    lines = f.read().splitlines()
if len(lines) != steps + 1:
    sys.exit(f"{path}: {len(lines)} lines, expected {steps + 1} ({steps} steps + summary)")
records = []
for i, line in enumerate(lines, 1):
    try:
        rec = json.loads(line)
    except ValueError as e:
        sys.exit(f"{path}:{i}: not valid JSON: {e}")
    if not isinstance(rec, dict):
        sys.exit(f"{path}:{i}: expected a JSON object")
    records.append(rec)
for i, rec in enumerate(records[:-1], 1):
    if rec.get("step") != i or "loss" not in rec:
        sys.exit(f"{path}:{i}: expected step {i} with a loss, got keys {sorted(rec)}")
if records[-1].get("summary") is not True or records[-1].get("steps") != steps:
    sys.exit(f"{path}: last line is not the summary of {steps} steps")
if "eval_loss" not in records[steps - 1]:
    sys.exit(f"{path}:{steps}: the last step has no eval_loss")
print(f"ok: {steps} step lines + summary")
