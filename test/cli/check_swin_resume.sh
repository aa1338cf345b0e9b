#!/bin/sh
# Usage: check_swin_resume.sh SDP_TRAIN WORK_DIR PYTHON3
# sdp-train end to end on swin-mini with stochastic depth: 4 steps saving a
# checkpoint at step 2, then a run resumed from that checkpoint; steps 3
# and 4 must report bit-identical losses, and the checkpoint must carry
# timm's tensor names and the run's drop path rate.
set -eu
train=$1
work=$2
py=$3
rm -rf "$work"
mkdir -p "$work"
set -- --model swin-mini --data synthetic-images --batch 4 --steps 4 --warmup 1 \
  --eval-every 0 --threads 1 --progress false --drop-path 0.3
"$train" "$@" --save-dir "$work/ckpt" --save-every 2 --metrics "$work/straight.jsonl"
"$train" "$@" --resume "$work/ckpt/step-000002" --metrics "$work/resumed.jsonl"
"$py" - "$work" <<'PY'
import json, os, sys
work = sys.argv[1]
def losses(name):
    with open(os.path.join(work, name)) as f:
        return {r["step"]: r["loss"] for r in map(json.loads, f) if "loss" in r and "step" in r}
straight, resumed = losses("straight.jsonl"), losses("resumed.jsonl")
for step in (3, 4):
    if straight.get(step) != resumed.get(step):
        sys.exit(f"step {step}: straight loss {straight.get(step)} != resumed {resumed.get(step)}")
ckpt = os.path.join(work, "ckpt", "step-000002")
config = json.load(open(os.path.join(ckpt, "config.json")))
if config.get("model_type") != "sdp-swin" or config.get("drop_path_rate") != 0.3:
    sys.exit(f"config.json: {config}")
with open(os.path.join(ckpt, "model.safetensors"), "rb") as f:
    header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
for name in ("patch_embed.proj.weight", "layers.3.downsample.reduction.weight",
             "layers.0.blocks.1.attn.relative_position_bias_table", "head.fc.weight"):
    if name not in header:
        sys.exit(f"model.safetensors has no {name}")
print("swin-mini resume: steps 3 and 4 bit-identical;", len(header) - 1, "tensors")
PY
