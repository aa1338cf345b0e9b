#!/bin/sh
# check_pipeline_run.sh WORK MPIEXEC NP_FLAG OVERSUBSCRIBE SDP_TRAIN SDP_PIPELINE
# Trains LLaMA mini for 3 steps on 2 ranks as 2 pipeline stages (zb-h1,
# M = 2) with --pipeline-timeline WORK/timeline and --metrics WORK/metrics.jsonl,
# then checks that the timeline files exist, that every step's metrics line
# has a "pipeline" object with its stage and bubble, and that sdp-pipeline
# accepts the measured costs file for the same schedule.
# OVERSUBSCRIBE may be empty (mpiexec other than Open MPI).
set -u
if [ $# -ne 6 ]; then
  echo "usage: $0 WORK MPIEXEC NP_FLAG OVERSUBSCRIBE SDP_TRAIN SDP_PIPELINE" >&2
  exit 2
fi
work=$1 mpiexec=$2 np_flag=$3 oversubscribe=$4 train=$5 pipe=$6
rm -rf "$work" && mkdir -p "$work" || exit 1
# shellcheck disable=SC2086  # OVERSUBSCRIBE is one flag or nothing
"$mpiexec" "$np_flag" 2 $oversubscribe "$train" --model mini --steps 3 --batch 2 --seq 32 \
  --pipeline-stages 2 --micro-batches 2 --schedule zb-h1 --eval-every 0 --progress false \
  --pipeline-timeline "$work/timeline" --metrics "$work/metrics.jsonl" || {
  echo "FAIL: the training run exited non-zero" >&2; exit 1; }
for f in timeline.svg timeline.json costs.json schedule.svg schedule.json; do
  [ -s "$work/timeline/$f" ] || { echo "FAIL: $work/timeline/$f is missing or empty" >&2; exit 1; }
done
head -c 5 "$work/timeline/timeline.svg" | grep -qF '<?xml' || {
  echo "FAIL: timeline.svg does not start with an XML declaration" >&2; exit 1; }
# Every step's line (lines with a "step" and a "loss"; the summary has
# neither) carries its pipeline figures.
steps=0
while IFS= read -r line; do
  case $line in
    *'"loss"'*) ;;
    *) continue ;;
  esac
  steps=$((steps + 1))
  for key in '"pipeline":' '"stage":' '"bubble_fraction":'; do
    printf '%s' "$line" | grep -qF "$key" || {
      echo "FAIL: metrics line $steps has no $key: $line" >&2; exit 1; }
  done
done < "$work/metrics.jsonl"
[ "$steps" -eq 3 ] || { echo "FAIL: $steps step lines in the metrics, expected 3" >&2; exit 1; }
"$pipe" --schedule zb-h1 --stages 2 --micro-batches 2 --costs "$work/timeline/costs.json" || {
  echo "FAIL: sdp-pipeline refused the measured costs file" >&2; exit 1; }
echo "ok: timeline files, $steps metrics lines with their stage and bubble, costs accepted"
