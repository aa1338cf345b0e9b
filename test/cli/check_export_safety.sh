#!/bin/sh
# check_export_safety.sh CASE WORK SDP_TRAIN SDP_EXPORT
# sdp-export never deletes what it did not write. CASE:
#   make            WORK/runs/ck: a save directory of sharded checkpoints
#                   (step-000002, step-000004, latest), for the cases below
#   own_save_dir    exporting step-000004 into its own save directory fails
#                   naming the rule, and every file there is left as it was
#   foreign_dir     exporting into an unrelated non-empty directory fails
#                   and leaves its file (and the save directory) as it was
#   force_beside    with --force the export's files join that directory's
#                   file, which stays as it was
#   reexport        an earlier export (sharded files) is replaced as a whole
#                   by a new one (one file), leaving none of the old shards
set -u
case_name=$1 work=$2 train=$3 export=$4
ck=$work/runs/ck

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Every file under a directory with its checksum, one per line, sorted.
snapshot() {
  (cd "$1" && find . -type f -exec cksum {} + | sort)
}

# expect_refusal TEXT ARGS...: sdp-export fails and says TEXT.
expect_refusal() {
  text=$1
  shift
  if "$export" "$@" 2>"$work/$case_name.err"; then
    fail "sdp-export $* succeeded"
  fi
  cat "$work/$case_name.err"
  grep -qF -- "$text" "$work/$case_name.err" || fail "the error does not say: $text"
}

case $case_name in
  make)
    rm -rf "$work/runs"
    mkdir -p "$work"
    "$train" --model tiny --batch 2 --seq 16 --steps 4 --save-every 2 --eval-every 0 \
      --progress false --checkpoint-format sharded --save-dir "$ck" >/dev/null ||
      fail "sdp-train could not write the sharded checkpoints"
    test -f "$ck/step-000004/sdp_shards.json" || fail "no sharded checkpoint in $ck"
    ;;
  own_save_dir)
    before=$(snapshot "$ck")
    expect_refusal "contains the checkpoint it exports" "$ck/step-000004" "$ck"
    expect_refusal "lies inside the save directory" "$ck/step-000004" "$ck/hf"
    [ "$(snapshot "$ck")" = "$before" ] || fail "files in $ck changed"
    ;;
  foreign_dir)
    victim=$work/victim
    rm -rf "$victim"
    mkdir -p "$victim"
    echo precious >"$victim/notes.txt"
    before=$(snapshot "$ck")
    expect_refusal "is not empty and is not a checkpoint that sdp-export wrote (it holds 'notes.txt')" \
      "$ck" "$victim"
    [ "$(cat "$victim/notes.txt")" = precious ] || fail "$victim/notes.txt changed"
    [ "$(ls "$victim")" = notes.txt ] || fail "files appeared in $victim"
    [ "$(snapshot "$ck")" = "$before" ] || fail "files in $ck changed"
    ;;
  force_beside)
    dir=$work/beside
    rm -rf "$dir"
    mkdir -p "$dir"
    echo precious >"$dir/notes.txt"
    "$export" "$ck" "$dir" --force || fail "sdp-export --force failed"
    [ "$(cat "$dir/notes.txt")" = precious ] || fail "$dir/notes.txt changed"
    test -f "$dir/model.safetensors" || fail "no model.safetensors in $dir"
    ;;
  reexport)
    hf=$work/reexport
    rm -rf "$hf"
    "$export" "$ck" "$hf" --max-shard-size 100KB || fail "the first export failed"
    test -f "$hf/model.safetensors.index.json" || fail "the first export is not sharded"
    "$export" "$ck" "$hf" || fail "exporting over an earlier export failed"
    test -f "$hf/model.safetensors" || fail "no model.safetensors after the second export"
    if ls "$hf" | grep -q -- '-of-'; then fail "shards of the first export are left in $hf"; fi
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
echo "ok: $case_name"
