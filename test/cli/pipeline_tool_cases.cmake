# The sdp-pipeline command line, one row per case (the runner and its
# expectations: test/cli/cli_case.cmake): its table holds the simulator's
# closed forms, a costs file moves the figures as the link model says, the
# SVG has a panel per schedule, and bad input exits 2 naming the flag or key.
if(TARGET sdp-pipeline)
  set(SDP_PIPE_WORK ${CMAKE_CURRENT_BINARY_DIR}/cli/pipeline)
  file(MAKE_DIRECTORY ${SDP_PIPE_WORK})
  # Two stages: F 1 and 2, B 3 and 5; a 1000-byte boundary over a 500 B/s
  # link with latency 0.5, so each hop costs 2.5. gpipe with M = 2: stage 1
  # runs F0 at 3.5, F1 at 5.5, B0 and B1 to 17.5; stage 0's B1 gets its
  # gradient at 20 and ends at 23.
  file(WRITE ${SDP_PIPE_WORK}/costs.json
       "{\"stages\": [{\"forward\": 1, \"backward\": 3, \"activation_bytes\": 10},\n"
       "            {\"forward\": 2, \"backward\": 5, \"activation_bytes\": 7, \"weight_grad_bytes\": 2}],\n"
       " \"boundary_bytes\": [1000], \"link\": {\"latency\": 0.5, \"bandwidth\": 500}}\n")
  file(WRITE ${SDP_PIPE_WORK}/three_stages.json "{\"stages\": [{}, {}, {}]}\n")
  file(WRITE ${SDP_PIPE_WORK}/negative.json "{\"stages\": [{\"forward\": 1}, {\"weight_grad\": -2}]}\n")
  file(WRITE ${SDP_PIPE_WORK}/unknown_key.json "{\"stages\": [{\"forwrad\": 1}, {}]}\n")
  file(WRITE ${SDP_PIPE_WORK}/unknown_link_key.json "{\"link\": {\"latency\": 1, \"bw\": 2}}\n")
  file(WRITE ${SDP_PIPE_WORK}/schedule.json
       "{\"microbatches\": 2, \"stages\": [[\"F0\", \"F1\", \"B0\", \"B1\"], [\"F0\", \"B0\", \"F1\", \"B1\"]]}\n")

  # Uniform costs, P = 4, M = 8: 1f1b and gpipe take 3 (M + P - 1) = 33 with
  # (P-1)/(M+P-1) = 27.27% bubble; zb-h1 takes 3M + 2(P-1) = 30.
  sdp_cli_case(pipeline_table PRINTS "1f1b +8 +33 +1\\.000 +27\\.27%.*zb-h1 +8 +27 +0\\.818 +11\\.11%"
               ${SDP_PIPELINE} --stages 4 --micro-batches 8 --compare gpipe,zb-h1)
  # gpipe's stage 0 holds both sets (2 x 10 bytes); stage 1 of 1f1b-2bp
  # holds F1's set (7) while W0's state (2) waits: 9.
  sdp_cli_case(pipeline_costs_file PRINTS
               "gpipe +2 +23 +1\\.000 +.*gpipe +0 +[0-9.]+% +[0-9.]+ +20 +2\n.*1f1b-2bp +1 +[0-9.]+% +[0-9.]+ +9 +2\n"
               ${SDP_PIPELINE} --schedule gpipe --stages 2 --micro-batches 2 --compare 1f1b-2bp
               --costs ${SDP_PIPE_WORK}/costs.json)
  sdp_cli_case(pipeline_schedule_file PRINTS "file:[^ ]*schedule\\.json +2 +9 +1\\.000"
               ${SDP_PIPELINE} --schedule file:${SDP_PIPE_WORK}/schedule.json --compare 1f1b --stages 2 --micro-batches 2)
  sdp_cli_case(pipeline_json PRINTS "\"relative_step\": 0\\.8181"
               ${SDP_PIPELINE} --stages 4 --micro-batches 8 --compare zb-h1 --json)
  sdp_cli_case(pipeline_svg PASSES
               sh -c "rm -f \"$2\" && \"$1\" --stages 4 --micro-batches 8 --compare 1f1b-2bp,zb-h1 --svg \"$2\" > /dev/null || exit 1; head -c 5 \"$2\" | grep -qF '<?xml' || exit 1; n=$(grep -c '<g class=\"panel\">' \"$2\"); echo \"panels: $n\"; [ \"$n\" -eq 3 ] || exit 1; if command -v xmllint > /dev/null; then xmllint --noout \"$2\" || exit 1; fi"
               sh ${SDP_PIPELINE} ${SDP_PIPE_WORK}/timeline.svg)

  sdp_cli_case(pipeline_unknown_schedule EXITS 2
               "--schedule 'zb-v' is unknown (valid: gpipe, 1f1b, gpipe-2bp, 1f1b-2bp, zb-h1, 1f1b-2bp-cooldown, naive, naive-2bp, or file:PATH"
               ${SDP_PIPELINE} --schedule zb-v --stages 4 --micro-batches 8)
  sdp_cli_case(pipeline_unknown_compare EXITS 2 "--compare item 'pipedream' is unknown (valid: gpipe"
               ${SDP_PIPELINE} --stages 4 --micro-batches 8 --compare zb-h1,pipedream)
  sdp_cli_case(pipeline_zero_microbatches EXITS 2
               "--micro-batches: '0' is invalid (valid: an integer in [1, 1048576])"
               ${SDP_PIPELINE} --stages 4 --micro-batches 0)
  sdp_cli_case(pipeline_zero_stages EXITS 2 "--stages: '0' is invalid (valid: an integer in [1, 4096])"
               ${SDP_PIPELINE} --stages 0 --micro-batches 8)
  sdp_cli_case(pipeline_needs_stages EXITS 2 "--stages is required for a generated schedule"
               ${SDP_PIPELINE} --micro-batches 8)
  sdp_cli_case(pipeline_costs_stage_count EXITS 2
               "\"stages\" lists 3 stages for a 2-stage pipeline (valid: 2 entries"
               ${SDP_PIPELINE} --stages 2 --micro-batches 4 --costs ${SDP_PIPE_WORK}/three_stages.json)
  sdp_cli_case(pipeline_costs_negative EXITS 2 "stage 1 \"weight_grad\" = -2 is invalid (valid: a number >= 0)"
               ${SDP_PIPELINE} --stages 2 --micro-batches 4 --costs ${SDP_PIPE_WORK}/negative.json)
  sdp_cli_case(pipeline_costs_unknown_key EXITS 2
               "stage 0 has an unknown key \"forwrad\" (valid: forward, backward, input_grad"
               ${SDP_PIPELINE} --stages 2 --micro-batches 4 --costs ${SDP_PIPE_WORK}/unknown_key.json)
  sdp_cli_case(pipeline_costs_unknown_link_key EXITS 2
               "\"link\" has an unknown key \"bw\" (valid: latency, bandwidth)"
               ${SDP_PIPELINE} --stages 2 --micro-batches 4 --costs ${SDP_PIPE_WORK}/unknown_link_key.json)
  sdp_cli_case(pipeline_file_count_mismatch EXITS 2 "has 2 stages but --stages is 3"
               ${SDP_PIPELINE} --schedule file:${SDP_PIPE_WORK}/schedule.json --stages 3)

  # --model: costs counted from the model. LLaMA tiny (D 64, 4 heads of 16,
  # 2 KV heads, FFN 176, vocab 256) at micro-batch 2 x 8 = 16 tokens, one
  # block per stage. A block's matmuls: 2 * 16 * 64 * (64 + 32 + 32 + 64 +
  # 3 * 176) = 1474560 (its W, and the matmul part of its I); attention over
  # the 36 causal pairs of 8 positions, 2 products of 16 per pair, 2 batches x
  # 4 heads: 4 * 16 * 36 * 8 = 18432 more in F, so block F = 1492992; stage
  # 0's embedding adds nothing. Stage 1 adds the head, 2 * 16 * 64 * 256 =
  # 524288, to F (2017280) and twice to I (input and weight gradient; the
  # head's weight gradient runs inside its window): 1520640 + 1048576 =
  # 2569216. The boundary is 16 x 64 f32 = 4096 bytes. At 1e9 FLOP/s a FLOP
  # is a nanosecond.
  sdp_cli_case(pipeline_model_llama_flops PRINTS
               "\n0 +0-0 +1492992 +1520640 +1474560 +0\\.00149299 +0\\.00152064 +0\\.00147456 +[0-9]+ +[0-9]+ +0 .*\n1 +1-1 +2017280 +2569216 +1474560 +0\\.00201728 +0\\.00256922 +0\\.00147456 +[0-9]+ +[0-9]+ +4096 "
               ${SDP_PIPELINE} --model tiny --batch 2 --seq 8 --stages 2 --micro-batches 4 --flops-per-second 1e9)
  # The written costs file simulated as a file gives the same step, and
  # calibrating on it (the same case) gives back exactly the rate it was
  # written with, with no error on either stage.
  sdp_cli_case(pipeline_model_calibrate PASSES
               sh -c "set -e; a=$(\"$1\" --model tiny --batch 2 --seq 8 --stages 2 --micro-batches 4 --flops-per-second 1e9 --write-costs \"$2\" | grep '^1f1b '); b=$(\"$1\" --costs \"$2\" --stages 2 --micro-batches 4 | grep '^1f1b '); c=$(\"$1\" --model tiny --batch 2 --seq 8 --stages 2 --micro-batches 4 --calibrate \"$2\"); echo \"$a|$b\"; [ -n \"$a\" ] && [ \"$a\" = \"$b\" ]; echo \"$c\" | grep -q 'F 1e+09, I 1e+09, W 1e+09 FLOP/s'; echo \"$c\" | grep -q 'stage 0 0.00% stage 1 0.00%'; [ \"$(echo \"$c\" | grep '^1f1b ')\" = \"$a\" ]"
               sh ${SDP_PIPELINE} ${SDP_PIPE_WORK}/tiny_costs.json)
  # resnet152-basic has 3 + 8 + 36 + 3 = 50 blocks: its stages can be cut as
  # ResNet-152's stage depths, and 51 stages are refused.
  sdp_cli_case(pipeline_model_resnet152_blocks PRINTS "\n0 +0-2 .*\n1 +3-10 .*\n2 +11-46 .*\n3 +47-49 "
               ${SDP_PIPELINE} --model resnet152-basic --batch 2 --seq 32 --stages 4 --stage-blocks 3,8,36,3
               --micro-batches 8 --flops-per-second 1e12)
  sdp_cli_case(pipeline_model_resnet152_too_many_stages EXITS 2
               "a pipeline of 51 stages needs at least 51 blocks; model resnet152-basic has 50"
               ${SDP_PIPELINE} --model resnet152-basic --batch 1 --seq 32 --stages 51 --micro-batches 2 --flops-per-second 1)
  sdp_cli_case(pipeline_model_unknown EXITS 2 "unknown model 'llama-7b' (valid: tiny, mini"
               ${SDP_PIPELINE} --model llama-7b --batch 1 --seq 8 --stages 2 --micro-batches 2 --flops-per-second 1)
  sdp_cli_case(pipeline_model_needs_rate EXITS 2 "--model needs exactly one of --flops-per-second X or --calibrate"
               ${SDP_PIPELINE} --model tiny --batch 1 --seq 8 --stages 2 --micro-batches 2)
  sdp_cli_case(pipeline_model_calibrate_family EXITS 2
               "--calibrate-model tiny is a llama model, --model resnet-tiny a resnet one"
               ${SDP_PIPELINE} --model resnet-tiny --batch 1 --seq 8 --stages 2 --micro-batches 2
               --calibrate ${SDP_PIPE_WORK}/costs.json --calibrate-model tiny)
  sdp_cli_case(pipeline_model_calibrate_flags_need_file EXITS 2
               "--calibrate-model, --calibrate-batch, --calibrate-seq and --calibrate-stage-blocks describe the run of a --calibrate file"
               ${SDP_PIPELINE} --model tiny --batch 1 --seq 8 --stages 2 --micro-batches 2 --flops-per-second 1
               --calibrate-model mini)
  sdp_cli_case(pipeline_model_flags_need_model EXITS 2
               "--batch, --seq, --stage-blocks, --flops-per-second, --calibrate and --write-costs need --model"
               ${SDP_PIPELINE} --stages 2 --micro-batches 2 --batch 3)
endif()