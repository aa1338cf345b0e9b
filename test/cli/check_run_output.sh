#!/bin/sh
# check_run_output.sh CASE WORK SDP_TRAIN [MPIEXEC ARGS...]
# What sdp-train prints when its stdout is no terminal (a file here):
#   plain_lines  plain step lines at the first step, every --log-every-th and
#                the last, each with loss, lr, tok/s, peak memory and ETA,
#                without carriage returns or escape codes; the default
#                interval is 10; --log-every 0 prints none
#   killed       a run killed (SIGKILL, as by `timeout -s KILL`) after step 3
#                has the lines of steps 1..3 in its log: none held back until
#                an exit that never comes
#   threads_once the thread choice, printed once by a 2-rank job under
#                MPIEXEC (OMP_NUM_THREADS unset), naming the ranks of the node
case_=$1
work=$2
bin=$3
shift 3
rm -rf "$work" && mkdir -p "$work" || exit 2
flags="--model tiny --batch 2 --seq 16 --eval-every 0"
fail() { echo "FAIL: $*" >&2; [ -f "$log" ] && { echo "--- $log:"; cat "$log"; }; exit 1; }
# The steps of the plain lines in $log, one line.
logged_steps() { sed -n 's|^step \([0-9]*\)/[0-9]*  loss .*|\1|p' "$log" | tr '\n' ' '; }

case $case_ in
plain_lines)
  log=$work/every10.log
  "$bin" $flags --steps 25 --log-every 10 >"$log" 2>&1 || fail "the run failed"
  [ "$(logged_steps)" = "1 10 20 25 " ] || fail "--log-every 10 logged steps '$(logged_steps)', expected 1 10 20 25"
  grep -qE '^step 20/25  loss [0-9.]+  lr [0-9.]+e[-+][0-9]+  [0-9]+ tok/s  peak [0-9.]+ [KMG]?i?B  eta [0-9hms]+$' "$log" ||
    fail "no complete line for step 20 (loss, lr, tok/s, peak, eta)"
  if tr -d '\n' <"$log" | grep -q "$(printf '[\r\033]')"; then fail "the log holds a carriage return or an escape code"; fi
  log=$work/default.log
  "$bin" $flags --steps 25 >"$log" 2>&1 || fail "the run failed"
  [ "$(logged_steps)" = "1 10 20 25 " ] || fail "the default interval logged steps '$(logged_steps)', expected 1 10 20 25"
  log=$work/none.log
  "$bin" $flags --steps 5 --log-every 0 >"$log" 2>&1 || fail "the run failed"
  [ -z "$(logged_steps)" ] || fail "--log-every 0 logged steps '$(logged_steps)'"
  grep -q '^final train loss' "$log" || fail "--log-every 0 lost the final report"
  echo "ok: plain lines at steps 1 10 20 25 (--log-every 10 and the default), none with 0" ;;
killed)
  log=$work/killed.log
  SDP_TEST_KILL=rank=0,step=3 "$bin" $flags --steps 1000 --log-every 1 >"$log" 2>&1
  rc=$?
  [ "$rc" -eq 137 ] || fail "expected the run to die by SIGKILL (137), it exited $rc"
  [ "$(logged_steps)" = "1 2 3 " ] || fail "the killed run's log has steps '$(logged_steps)', expected 1 2 3"
  grep -q '^threads: ' "$log" || fail "the killed run's log lost the thread choice"
  grep -q '^sdp-train: tiny' "$log" || fail "the killed run's log lost the run's header"
  echo "ok: a run killed after step 3 left the lines of steps 1..3" ;;
threads_once)
  log=$work/threads.log
  env -u OMP_NUM_THREADS "$@" "$bin" $flags --steps 2 --progress false >"$log" 2>&1 || fail "the job failed"
  [ "$(grep -c '^threads: ' "$log")" -eq 1 ] || fail "the thread choice is not printed exactly once"
  grep -qE "^threads: [0-9]+ per rank \([0-9]+ cores? in this rank's affinity mask, (2 ranks on this node|used by [12] of the 2 ranks on this node); --threads or OMP_NUM_THREADS to override\)$" "$log" ||
    fail "the thread choice does not name this rank's cores and the 2 ranks of the node"
  echo "ok: $(grep '^threads: ' "$log")" ;;
*)
  echo "usage: $0 plain_lines|killed|threads_once WORK SDP_TRAIN [MPIEXEC ARGS...]" >&2
  exit 2 ;;
esac
