#!/usr/bin/env bash
# Quality of DDP against the SDP variants at several C, small and on the CPU:
# a LLaMA on real English text and a CIFAR ResNet on augmented synthetic
# images, RANKS ranks under mpirun (one thread each), several seeds, then
# bench/plot_quality.py draws the final eval loss and top-1 against C and
# writes a Markdown table (mean and min..max over the seeds).
#
#   bash bench/quality_study.sh          # runs everything (about 40 min on 2 cores)
#   bash bench/quality_study.sh --list   # prints the planned runs, runs nothing
#   bash bench/quality_study.sh --plot   # only re-plots the runs in OUT
#
# Every SDP variant (forward masking B-SDP, N-SDP; backward masking Bb-SDP,
# Nb-SDP) runs at every C of FRACTIONS under two budgets:
#   equal_steps  STEPS steps, as DDP;
#   equal_flops  round(STEPS / C) steps: the SDP paper's scaling, which
#                matches DDP's FLOPs for forward masking (a rank computes
#                about C of the model) and gives backward masking more (it
#                skips only the unowned weight gradients); the table shows
#                each run's FLOPs, counted by sdp-train, against DDP's.
# DDP runs once per seed (its equal-steps run is the baseline of both),
# and again at the equal-FLOPs step count of each C in CONTROL_FRACTIONS (a
# control: how much of an equal-FLOPs gain longer training alone gives).
# Everything else is the same for all runs of a model and seed: per-rank
# batch, learning-rate schedule shape (warmup, then cosine over the run's
# own steps), data order, evaluation batches (the full model, evaluated once
# at the end). A run whose metrics already end in a summary is kept, so a
# stopped study continues where it stopped (FRESH=1 reruns everything).
#
# LLaMA data: English prose shipped by Debian on every machine that runs
# this project's tests: the license texts of /usr/share/common-licenses
# (package base-files) and Python's release notes
# (/usr/share/doc/python3.*/NEWS.gz, package python3.X, which python3-numpy
# and python3-venv of scripts/install-deps.sh pull in), one document per
# paragraph, shuffled and tokenized into a VOCAB-entry byte-level BPE by
# scripts/prepare_text_data.py (run by the Python of
# scripts/setup-python-ref.sh, BUILD/pyref/bin/python). About 0.89 M tokens
# at vocab 512, so no run reads a token twice.
#
# The models are small enough that the ~150 runs fit about 40 minutes of
# two cores: `small` takes 0.8 s per step of 8 x 2 x 64 tokens on 8 ranks,
# about a dozen steps in a run's share of time, so the LLaMA is `tiny`
# widened to 8 blocks of 8 heads (C of 8 blocks or groups is a whole count at
# 0.75, 0.5 and 3/8); the ResNet is resnet-mini (8 basic blocks, 8 channel
# groups) on 16 x 16 images, trained on a 1024-image set (about 5 epochs
# at equal steps, so over-fitting can show) with crops and flips.
#
# Environment: MODELS ("llama resnet"), SEEDS ("1 2 3"), FRACTIONS
# ("0.75 0.5 0.375"), STRATEGIES ("b-sdp n-sdp bb-sdp nb-sdp"), RANKS (8),
# BUDGETS ("equal_steps equal_flops"), CONTROL_FRACTIONS ("0.375"; "" for
# none; DDP's equal-FLOPs runs); LLaMA: LLAMA_MODEL
# (tiny:layers=8,heads=8,kv_heads=8), VOCAB (512), LLAMA_STEPS (80),
# LLAMA_BATCH (2), LLAMA_SEQ (64), LLAMA_LR (3e-3), LLAMA_WARMUP (10);
# ResNet: RESNET_MODEL (resnet-mini), RESNET_DATA
# (synthetic-images:height=16,width=16,size=1024), RESNET_STEPS (80),
# RESNET_BATCH (8), RESNET_LR (5e-3), RESNET_WARMUP (10), CHANNEL_GROUPS (8);
# EVAL_BATCHES (16); CORETYPE (OpenBLAS's kernels: SkylakeX with AVX-512,
# Haswell with AVX2, "unset" leaves OpenBLAS to choose); BUILD (build), BIN (BUILD/bin/sdp-train), PYREF
# (BUILD/pyref/bin/python), OUT (out/quality), FRESH (0),
# PLOT (bench/results/quality.svg), REPORT (bench/results/quality.md).
set -euo pipefail
cd "$(dirname "$0")/.."
MODELS=${MODELS:-"llama resnet"}
SEEDS=${SEEDS:-"1 2 3"}
FRACTIONS=${FRACTIONS:-"0.75 0.5 0.375"}
STRATEGIES=${STRATEGIES:-"b-sdp n-sdp bb-sdp nb-sdp"}
RANKS=${RANKS:-8}
BUDGETS=${BUDGETS:-"equal_steps equal_flops"}
CONTROL_FRACTIONS=${CONTROL_FRACTIONS-0.375}
LLAMA_MODEL=${LLAMA_MODEL:-tiny:layers=8,heads=8,kv_heads=8}
VOCAB=${VOCAB:-512}
LLAMA_STEPS=${LLAMA_STEPS:-80}
LLAMA_BATCH=${LLAMA_BATCH:-2}
LLAMA_SEQ=${LLAMA_SEQ:-64}
LLAMA_LR=${LLAMA_LR:-3e-3}
LLAMA_WARMUP=${LLAMA_WARMUP:-10}
RESNET_MODEL=${RESNET_MODEL:-resnet-mini}
RESNET_DATA=${RESNET_DATA:-synthetic-images:height=16,width=16,size=1024}
RESNET_STEPS=${RESNET_STEPS:-80}
RESNET_BATCH=${RESNET_BATCH:-8}
RESNET_LR=${RESNET_LR:-5e-3}
RESNET_WARMUP=${RESNET_WARMUP:-10}
CHANNEL_GROUPS=${CHANNEL_GROUPS:-8}
EVAL_BATCHES=${EVAL_BATCHES:-16}
BUILD=${BUILD:-build}
BIN=${BIN:-$BUILD/bin/sdp-train}
PYREF=${PYREF:-$BUILD/pyref/bin/python}
OUT=${OUT:-out/quality}
FRESH=${FRESH:-0}
PLOT=${PLOT:-bench/results/quality.svg}
REPORT=${REPORT:-bench/results/quality.md}
me=quality_study
source bench/plotting_python.sh

for m in $MODELS; do
  [[ $m == llama || $m == resnet ]] || { echo "$me: MODELS has '$m' (valid: llama, resnet)" >&2; exit 2; }
done
for b in $BUDGETS; do
  [[ $b == equal_steps || $b == equal_flops ]] ||
    { echo "$me: BUDGETS has '$b' (valid: equal_steps, equal_flops)" >&2; exit 2; }
done
for c in $FRACTIONS $CONTROL_FRACTIONS; do
  awk -v c="$c" 'BEGIN { exit !(c + 0 > 0 && c + 0 <= 1) }' ||
    { echo "$me: FRACTIONS has '$c' (valid: numbers in (0, 1])" >&2; exit 2; }
done

# The planned runs, one a line: MODEL BUDGET STRATEGY C SEED STEPS (C is 1
# for DDP's equal-steps run; its equal-FLOPs runs have the C whose steps
# they take). Seeds outermost, so that a study stopped early has whole seeds.
plan() {
  local seed m b s c steps
  scaled() { awk -v n="$1" -v c="$2" 'BEGIN { printf "%d", n / c + 0.5 }'; }
  for seed in $SEEDS; do
    for m in $MODELS; do
      if [[ $m == llama ]]; then steps=$LLAMA_STEPS; else steps=$RESNET_STEPS; fi
      echo "$m equal_steps ddp 1 $seed $steps"
      for b in $BUDGETS; do
        for c in $FRACTIONS; do
          for s in $STRATEGIES; do
            if [[ $b == equal_steps ]]; then
              echo "$m $b $s $c $seed $steps"
            else
              echo "$m $b $s $c $seed $(scaled "$steps" "$c")"
            fi
          done
        done
        if [[ $b == equal_flops ]]; then
          for c in $CONTROL_FRACTIONS; do echo "$m $b ddp $c $seed $(scaled "$steps" "$c")"; done
        fi
      done
    done
  done
}

plot() {
  local py
  py=$(sdp_plotting_python "$me" "bash bench/quality_study.sh --plot")
  mkdir -p "$(dirname "$PLOT")" "$(dirname "$REPORT")"
  "$py" bench/plot_quality.py --dir "$OUT" --plot "$PLOT" --report "$REPORT"
}

case ${1:-} in
  --list) plan; exit 0 ;;
  --plot) plot; exit 0 ;;
  "") ;;
  *) echo "$me: unknown argument '$1' (valid: --list, --plot, or none)" >&2; exit 2 ;;
esac

source scripts/mpi_env.sh
sdp_require_sdp_train "$BIN" "$BUILD"
sdp_mpi_setup
# OpenBLAS's kernels for this CPU (CORETYPE; Debian's OpenBLAS may take a
# slow generic one otherwise: twice the step time here).
sdp_pick_openblas_core "$BIN"
mkdir -p "$OUT"

# The corpus: every file must be there (a fresh machine of this kind has
# them); stops naming what is missing and which package ships it.
prepare_corpus() {
  local data=$OUT/llama_data text=$OUT/llama_text f news=()
  if [[ -s $data/data.json ]]; then return; fi
  if [[ ! -x $PYREF ]]; then
    echo "$me: $PYREF is missing: it tokenizes the corpus; create it with" \
         "bash scripts/setup-python-ref.sh $BUILD (docs/building.md)" >&2
    exit 1
  fi
  local licenses=(/usr/share/common-licenses/*)
  if [[ ! -f ${licenses[0]} ]]; then
    echo "$me: /usr/share/common-licenses holds no files: it is Debian's base-files package" >&2
    exit 1
  fi
  # Once each: python3.X-dev and -venv link to python3.X's directory.
  local seen=" "
  for f in /usr/share/doc/python3.*/NEWS.gz; do
    f=$(realpath "$f")
    [[ -f $f && $seen != *" $f "* ]] || continue
    seen+="$f "
    news+=("$f")
  done
  if [[ ${#news[@]} -eq 0 ]]; then
    echo "$me: no /usr/share/doc/python3.*/NEWS.gz: install python3 (Debian: apt-get install" \
         "python3; scripts/install-deps.sh pulls it in)" >&2
    exit 1
  fi
  rm -rf "$text"
  mkdir -p "$text"
  # Regular files only: GPL, LGPL and GFDL are links to a versioned text.
  for f in "${licenses[@]}"; do
    [[ -f $f && ! -L $f ]] && cp "$f" "$text/license-${f##*/}"
  done
  for f in "${news[@]}"; do
    gzip -dc "$f" >"$text/$(basename "$(dirname "$f")")-NEWS"
  done
  "$PYREF" scripts/prepare_text_data.py --out "$data" --vocab-size "$VOCAB" \
    --documents paragraphs "$text"/* >&2
}

# run MODEL BUDGET STRATEGY C SEED STEPS: one mpirun job, metrics in
# OUT/MODEL/BUDGET/STRATEGY_cC_sSEED.jsonl. stdin is closed: mpirun forwards
# it to rank 0 and would eat the plan read below.
run() {
  local m=$1 b=$2 s=$3 c=$4 seed=$5 steps=$6 args=() dir name
  dir=$OUT/$m/$b
  name=${s}_c${c}_s${seed}
  mkdir -p "$dir"
  if [[ $FRESH != 1 && -s $dir/$name.jsonl ]] && tail -n 1 "$dir/$name.jsonl" | grep -q '"summary"'; then
    return
  fi
  if [[ $m == llama ]]; then
    args=(--model "$LLAMA_MODEL" --vocab-size "$VOCAB" --data "llmc:$OUT/llama_data/*.bin"
          --batch "$LLAMA_BATCH" --seq "$LLAMA_SEQ" --lr "$LLAMA_LR" --warmup "$LLAMA_WARMUP")
  else
    args=(--model "$RESNET_MODEL" --data "$RESNET_DATA" --batch "$RESNET_BATCH"
          --lr "$RESNET_LR" --warmup "$RESNET_WARMUP")
    [[ $s == n-sdp || $s == nb-sdp ]] && args+=(--channel-groups "$CHANNEL_GROUPS")
  fi
  [[ $s == ddp ]] || args+=(--active-fraction "$c")
  echo "$me: $(date -u +%H:%M:%S) $m $b $s C=$c seed $seed: $steps steps on $RANKS ranks" >&2
  if ! "${MPIRUN[@]}" -np "$RANKS" "$BIN" "${args[@]}" --strategy "$s" --steps "$steps" \
         --seed "$seed" --eval-every "$steps" --eval-batches "$EVAL_BATCHES" --progress false \
         --metrics "$dir/$name.jsonl.part" </dev/null >"$dir/$name.log" 2>&1; then
    tail -n 20 "$dir/$name.log" >&2
    echo "$me: the run failed; its output is $dir/$name.log" >&2
    exit 1
  fi
  mv "$dir/$name.jsonl.part" "$dir/$name.jsonl"
}

[[ " $MODELS " == *" llama "* ]] && prepare_corpus
start=$SECONDS
echo "started $(date -u '+%Y-%m-%d %H:%M UTC'), MODELS $MODELS, SEEDS $SEEDS, commit" \
     "$(git rev-parse --short HEAD), $cpu_model, OpenBLAS $core ($CORETYPE)," \
     "$(getconf _NPROCESSORS_ONLN) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/run_info.txt"
while read -r m b s c seed steps; do
  run "$m" "$b" "$s" "$c" "$seed" "$steps"
done < <(plan)
echo "finished $(date -u '+%Y-%m-%d %H:%M UTC') after $((SECONDS - start)) s," \
     "load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/run_info.txt"
plot
