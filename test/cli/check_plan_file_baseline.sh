#!/bin/sh
# check_plan_file_baseline.sh SDP_PLAN PLAN_FILE
# sdp-plan --plan file:PLAN_FILE (a 4-rank plan of tiny's 2 blocks, two
# owners each) applies the file to the SDP row only: the DDP baseline keeps
# all 4 ranks owning every block and a saving of 0, and B-SDP shows the
# file's 2 owners and a real saving against it (columns found by name).
if [ $# -ne 2 ]; then
  echo "usage: $0 SDP_PLAN PLAN_FILE" >&2
  exit 2
fi
out=$("$1" --model tiny --world 4 --strategies ddp,b-sdp:0.5 --plan "file:$2" --format csv) || exit 1
printf '%s\n' "$out"
printf '%s\n' "$out" | awk -F, '
  NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
  $col["strategy"] == "ddp" && $col["owners"] == 4 && $col["saving_vs_ddp"] == 0 { ddp = 1 }
  $col["strategy"] == "b-sdp" && $col["owners"] == 2 && $col["saving_vs_ddp"] > 0.2 { sdp = 1 }
  END {
    if (!ddp) print "FAIL: the DDP row is not 4 owners of 4 with a saving of 0"
    if (!sdp) print "FAIL: the B-SDP row is not the file'"'"'s 2 owners with a saving over 20%"
    exit !(ddp && sdp)
  }'
