"""check_accuracy.py FILE STEPS KS [RANKS]: the metrics of a classifier's
run (STEPS steps, evaluated at the last) carry its top-k accuracies, KS
comma-separated (1,5): every step line its training accuracy, the last its
evaluation's, the summary both; with RANKS > 1 also each rank's training
accuracy and each subnetwork's evaluation. Every value a share in [0, 1]
and top-1 <= top-5."""
import json
import sys

path, steps, ks = sys.argv[1], int(sys.argv[2]), [int(k) for k in sys.argv[3].split(",")]
ranks = int(sys.argv[4]) if len(sys.argv) > 4 else 1
with open(path) as f:
    records = [json.loads(line) for line in f if line.strip()]
if len(records) != steps + 1:
    sys.exit(f"{path}: {len(records)} records, expected {steps} steps + summary")


def share(rec, key, where):
    value = rec.get(key)
    if not isinstance(value, (int, float)) or not 0 <= value <= 1:
        sys.exit(f"{path}: {where}: '{key}' = {value!r}, expected a share in [0, 1]")
    return value


def ordered(values, where):
    if values != sorted(values):
        sys.exit(f"{path}: {where}: top-k accuracies {values} decrease with k")


for i, rec in enumerate(records[:-1], 1):
    ordered([share(rec, f"top{k}", f"step {i}") for k in ks], f"step {i}")
    absent = [key for key in rec if key.startswith("top") and int(key[3:]) not in ks]
    if absent:
        sys.exit(f"{path}: step {i}: unexpected {absent} (expected top-k for k in {ks})")
    if ranks > 1:
        for k in ks:
            by_rank = rec["ranks"][f"train_top{k}"]["by_rank"]
            if len(by_rank) != ranks:
                sys.exit(f"{path}: step {i}: ranks.train_top{k} has {len(by_rank)} ranks")
            for r, v in enumerate(by_rank):
                share({"v": v}, "v", f"step {i} rank {r} train top-{k}")
last, summary = records[-2], records[-1]
ordered([share(last, f"eval_top{k}", "last step") for k in ks], "last step eval")
for k in ks:
    share(summary, f"final_train_top{k}", "summary")
    share(summary, f"final_eval_top{k}", "summary")
    if ranks > 1:
        for key, rec in (("eval_subnet_top", last), ("eval_subnet_top", summary)):
            values = rec.get(f"{key}{k}")
            if not isinstance(values, list) or len(values) != ranks:
                sys.exit(f"{path}: '{key}{k}' = {values!r}, expected one share per rank")
            for r, v in enumerate(values):
                share({"v": v}, "v", f"subnet {r} eval top-{k}")
if summary["final_eval_top1"] != last["eval_top1"]:
    sys.exit(f"{path}: the summary's eval top-1 differs from the last evaluation's")
print(f"ok: top-{ks} in {steps} step lines, the evaluation and the summary")
