#!/usr/bin/env bash
# Sets up, builds and runs the main job: a short single-process training run
# of the tiny LLaMA on the built-in synthetic language, printing the loss
# reached against the best achievable loss. Extra arguments go to sdp-train.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh >/dev/null
exec ./build/bin/sdp-train --model tiny --data synthetic --batch 16 --seq 64 --steps 300 \
  --lr 3e-3 --warmup 30 --eval-every 100 --metrics out/demo/metrics.jsonl "$@"
