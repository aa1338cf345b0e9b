#!/bin/sh
# check_checkpoint_integrity.sh CASE WORK SDP_TRAIN SDP_EXPORT
# Saves a tiny checkpoint, damages it as CASE says (corrupt_checkpoint.py)
# and checks that sdp-train's resume (and sdp-export where it reads the
# same file) refuses it with a message naming the file or tensor, exit
# status 3 (sdp-export: 1) for a corrupted checkpoint; `latest` must not advance.
set -u
case_name=$1
work=$2/$case_name
train=$3
export_tool=$4
here=$(dirname "$0")
corrupt="${SDP_PYTHON3:-python3} $here/corrupt_checkpoint.py"
tiny="--model tiny --batch 2 --seq 16"

rm -rf "$work" && mkdir -p "$work" || exit 2
format=hf
case $case_name in sharded_* | index_* | chunk_*) format=sharded ;; esac
# cuda_* cases run on the CUDA device in bf16 (f32 master weights updated by
# the CUDA AdamW); without a usable GPU they are skipped (exit 77).
case $case_name in cuda_*) tiny="$tiny --device cuda --dtype bf16" ;; esac
if ! "$train" $tiny --steps 2 --checkpoint-format $format --save-dir "$work/ck" >/dev/null 2>"$work/save.err"; then
  case $case_name in cuda_*) echo "SKIPPED: no usable CUDA device:"; cat "$work/save.err"; exit 77 ;; esac
  cat "$work/save.err"; exit 2
fi
ck=$work/ck/step-000002
rank_file=$ck/rank-00000-of-00001.safetensors

# expect STATUS TEXT COMMAND...: the command's exit status and stderr text.
expect() {
  sh "$here/expect_status.sh" "$@" || exit 1
}
# expect_resume STATUS TEXT: the same for resuming from the save directory.
expect_resume() {
  expect "$1" "$2" "$train" $tiny --steps 4 --save-every 1 --save-dir "$work/ck" --resume "$work/ck"
}

case $case_name in
  hf_flip_model)
    $corrupt flip "$ck/model.safetensors"
    expect_resume 3 "corrupted checkpoint file '$ck/model.safetensors': tensor" ;;
  hf_flip_optimizer)
    $corrupt flip "$ck/optimizer.safetensors"
    expect_resume 3 "corrupted checkpoint file '$ck/optimizer.safetensors': tensor" ;;
  sharded_flip)
    $corrupt flip "$rank_file"
    expect_resume 3 "corrupted checkpoint file '$rank_file': tensor"
    expect 1 "corrupted checkpoint file '$rank_file': tensor" "$export_tool" "$ck" "$work/hf" ;;
  hf_negative_second_moment)
    $corrupt set "$ck/optimizer.safetensors" exp_avg_sq.model.norm.weight 3 -1
    expect_resume 3 "tensor 'exp_avg_sq.model.norm.weight' element 3 is -1" ;;
  sharded_negative_second_moment)
    $corrupt set "$rank_file" exp_avg_sq.model.norm.weight 3 -1
    expect_resume 3 "tensor 'exp_avg_sq of 'model.norm.weight'' element 3 is -1" ;;
  hf_nonfinite_update | cuda_nonfinite_update)
    # Finite, so loading accepts it, but the update divides a huge first
    # moment by a zero second moment.
    $corrupt set "$ck/optimizer.safetensors" exp_avg.model.norm.weight 0 3e38
    $corrupt set "$ck/optimizer.safetensors" exp_avg_sq.model.norm.weight 0 0
    expect_resume 3 "step 3: after the AdamW update parameter 'model.norm.weight' holds values that are not finite"
    grep -q '"checkpoint": "step-000002"' "$work/ck/latest" || {
      echo "FAIL: latest advanced past the bad update:"; cat "$work/ck/latest"; exit 1; }
    test ! -e "$work/ck/step-000003" || { echo "FAIL: step-000003 was saved"; exit 1; } ;;
  index_dtype_q7)
    $corrupt index "$ck" dtype '"q7"'
    msg="field 'dtype' = \"q7\" (valid: \"f32\", \"f64\")"
    expect_resume 3 "$msg"
    expect 1 "$msg" "$export_tool" "$ck" "$work/hf" ;;
  index_dtype_f64)
    # The chunks are f32: neither tool may take them for f64 (sdp-export
    # wrote F64 tensors under config.json's torch_dtype float32).
    $corrupt index "$ck" dtype '"f64"'
    msg="is f32, but sdp_shards.json says the chunks are f64"
    expect_resume 3 "$msg"
    expect 1 "$msg" "$export_tool" "$ck" "$work/hf" ;;
  sharded_header_shape)
    $corrupt reshape "$rank_file" model.embed_tokens.weight '[128, 128]'
    expect_resume 3 "tensor 'model.embed_tokens.weight' has shape [128, 128] in the file's header, but sdp_shards.json says [256, 64]" ;;
  index_is_directory)
    rm "$ck/sdp_shards.json" && mkdir "$ck/sdp_shards.json"
    expect_resume 3 "cannot read JSON file '$ck/sdp_shards.json': it is a directory"
    expect 1 "cannot read JSON file '$ck/sdp_shards.json': it is a directory" "$export_tool" "$ck" "$work/hf" ;;
  chunk_nul_in_name)
    $corrupt chunk "$ck" full_name '"model.embed\u0000tokens.weight"'
    expect_resume 3 "names tensor 'model.embed\\u0000tokens.weight', which the index does not list" ;;
  chunk_axis_beyond_int)
    $corrupt chunk "$ck" axis 4294967296
    expect_resume 3 "field 'axis' = 4294967296 is invalid" ;;
  *) echo "unknown case $case_name" >&2; exit 2 ;;
esac
echo "ok: $case_name"
