#!/bin/sh
# Usage: check_local_ranks.sh RANKS GPUS MPIEXEC_COMMAND...
# Runs the local-rank probe as RANKS ranks on this one host and checks that
# rank r finds node-local rank r through MPI and in the launcher's
# environment, and picks GPU r % GPUS.
ranks=$1
gpus=$2
shift 2
out=$("$@" "$gpus") || { echo "FAIL: the probe job failed: $out"; exit 1; }
echo "$out"
status=0
r=0
while [ "$r" -lt "$ranks" ]; do
  want="rank $r of $ranks: local rank $r (MPI_COMM_TYPE_SHARED), environment $r (.*), gpu $((r % gpus)) of $gpus"
  if ! printf '%s\n' "$out" | grep -qx "$want"; then
    echo "FAIL: no line matching: $want"
    status=1
  fi
  r=$((r + 1))
done
[ "$(printf '%s\n' "$out" | grep -c '^rank ')" -eq "$ranks" ] || { echo "FAIL: expected $ranks rank lines"; status=1; }
[ "$status" -eq 0 ] && echo "PASS: $ranks ranks on one host, node-local ranks 0..$((ranks - 1)), GPUs mod $gpus"
exit $status
