#!/bin/sh
# check_save_dir.sh CASE WORK SDP_TRAIN
# What sdp-train checks about its save directory before training. CASE:
#   unwritable     a save directory that cannot be created (its parent is a
#                  regular file: that stops root too, where a read-only
#                  chmod would not, and CI runs as root) ends the run at
#                  start-up with exit code 3, before any step
#   second_job     while one job runs on a save directory, a second one is
#                  refused at start-up (exit 3) naming the first as the
#                  holder; once the first is killed (kill -9), its lock
#                  file left behind does not block a third job
#   steps_below    --resume from a checkpoint at step 4 with --steps 2 is a
#                  clear error (exit 3), not a run that trains nothing
set -u
case_name=$1 work=$2/$1 train=$3
flags="--model tiny --batch 2 --seq 16 --eval-every 0 --progress false"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# expect_exit STATUS TEXT ARGS...: sdp-train ARGS exits STATUS, says TEXT on
# stderr and prints nothing on stdout (so it trained no step).
expect_exit() {
  status=$1 text=$2
  shift 2
  # shellcheck disable=SC2086
  "$train" $flags "$@" >"$work/out" 2>"$work/err"
  rc=$?
  echo "--- sdp-train $*: exit $rc"
  cat "$work/out" "$work/err"
  [ "$rc" -eq "$status" ] || fail "exit status $rc, expected $status"
  grep -qF -- "$text" "$work/err" || fail "stderr does not say: $text"
  [ ! -s "$work/out" ] || fail "it printed a report: it should have stopped before training"
}

rm -rf "$work"
mkdir -p "$work"
case $case_name in
  unwritable)
    echo "a regular file" >"$work/file"
    expect_exit 3 "cannot create save directory '$work/file/ck': Not a directory" \
      --steps 2 --save-dir "$work/file/ck"
    ;;
  second_job)
    # shellcheck disable=SC2086
    "$train" $flags --steps 1000000 --save-dir "$work/ck" >/dev/null 2>&1 &
    first=$!
    # Waits (bounded) until the first job holds the lock: its lock file names it.
    tries=0
    until grep -qF "\"pid\":$first," "$work/ck/sdp-train.lock" 2>/dev/null; do
      tries=$((tries + 1))
      if [ "$tries" -gt 600 ]; then
        kill -9 "$first"
        fail "the first job did not take the lock within 60 s"
      fi
      sleep 0.1
    done
    expect_exit 3 "is in use by another job: host $(uname -n), pid $first, started" \
      --steps 2 --save-dir "$work/ck"
    kill -9 "$first"
    wait "$first"
    # shellcheck disable=SC2086
    "$train" $flags --steps 2 --save-dir "$work/ck" >/dev/null ||
      fail "the lock file of the killed job blocked a new one"
    [ "$(cat "$work/ck/latest")" != "" ] || fail "the third job saved no checkpoint"
    ;;
  steps_below)
    # shellcheck disable=SC2086
    "$train" $flags --steps 4 --save-dir "$work/ck" >/dev/null || fail "the first run failed"
    expect_exit 3 "steps = 2 (--steps) is below the step of the checkpoint it resumes, $work/ck/step-000004 at step 4" \
      --steps 2 --resume "$work/ck"
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
echo "ok: $case_name"
