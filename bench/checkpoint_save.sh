#!/bin/sh
# Checkpoint forms compared: for ddp, b-sdp 0.5 and fsdp on 4 ranks (one OpenMP
# thread each, oversubscribed on a small machine), the save time and rank
# 0's peak host memory above its level before the save, for the hf form
# (rank 0 assembles the whole model) and the sharded form (every rank
# writes its own parts). Prints a table; results in bench/RESULTS.md.
#
#   bench/checkpoint_save.sh [BUILD_DIR] [MODEL] [CHECKPOINT_DIR]
#   (defaults: build-cpu, llama-134m, a fresh directory under /tmp)
set -eu
build=${1:-build-cpu}
model=${2:-llama-134m}
dir=${3:-$(mktemp -d /tmp/sdp_ckpt_bench.XXXXXX)/ck}
bin=$build/bin/bench_checkpoint_save
[ -x "$bin" ] || { echo "no $bin: build the bench target first" >&2; exit 1; }
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
lines=$(mktemp)
trap 'rm -f "$lines"' EXIT
for strategy in "ddp 1" "b-sdp 0.5" "fsdp 1"; do
  set -- $strategy
  for format in hf sharded; do
    mpirun -np 4 --oversubscribe "$bin" --model "$model" --strategy "$1" \
      --active-fraction "$2" --format "$format" --dir "$dir" >>"$lines"
  done
done
python3 - "$lines" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print(f"{rows[0]['model']} ({rows[0]['parameters'] / 1e6:.1f}M parameters), {rows[0]['ranks']} ranks")
print(f"{'strategy':<12} {'form':<8} {'save s':>8} {'rank 0 peak +MiB':>17} {'files MiB':>10}")
for r in rows:
    s = r["strategy"] + ("" if r["strategy"] == "ddp" else f" {r['active_fraction']:g}")
    print(f"{s:<12} {r['format']:<8} {r['save_seconds']:>8.2f} "
          f"{r['rank0_peak_increase_bytes'] / 2**20:>17.1f} {r['checkpoint_bytes'] / 2**20:>10.1f}")
PY
