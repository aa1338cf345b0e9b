# No input sets a size the tools allocate for unchecked, and calibration
# files are read field by field: a weighted plan whose repeat counts add up
# to a billion ranks fails at once (under a memory cap, where the build
# allows one, so that a regression fails instead of filling the node), and
# --calibrate names the file, line and field of a null, absurd or negative
# value, and skips a last line a killed run cut off, saying so.
set(input_bounds_work ${CMAKE_CURRENT_BINARY_DIR}/cli/input_bounds)
file(MAKE_DIRECTORY ${input_bounds_work})

# Runs a command under a 4 GB address-space cap (not under sanitizers, which
# reserve far more address space than that).
set(input_bounds_capped)
if(NOT SDP_SANITIZE)
  set(input_bounds_capped sh -c "ulimit -v 4000000 && exec \"$@\"" sh)
endif()

function(input_bounds_expect_fail name expected)
  add_test(NAME cli.input_bounds.${name}
           COMMAND ${input_bounds_capped} sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_fail.sh
                   "${expected}" ${ARGN})
  set_tests_properties(cli.input_bounds.${name} PROPERTIES LABELS cli TIMEOUT 60
                       ENVIRONMENT "OMP_NUM_THREADS=1")
endfunction()

if(TARGET sdp-train)
  # "weighted:" + "1x1048576," x 1000 + "1": 8 GB of weights per rank if expanded.
  string(REPEAT "1x1048576," 1000 input_bounds_weights)
  file(WRITE ${input_bounds_work}/weighted_total.json
       "{\"strategy\": \"b-sdp\", \"active_fraction\": 0.5, \"plan\": \"weighted:${input_bounds_weights}1\"}\n")
  input_bounds_expect_fail(weighted_plan_total
                           "name 1048576001 ranks in total (the repeat counts summed), more than the largest world of 65536 ranks"
                           $<TARGET_FILE:sdp-train> --config ${input_bounds_work}/weighted_total.json
                           --model tiny --batch 2 --seq 16 --steps 1 --dry-run)
endif()

if(TARGET sdp-plan)
  input_bounds_expect_fail(plan_rank_memory_total
                           "name 5 ranks in total (the repeat counts summed), more than the job's 4 ranks"
                           $<TARGET_FILE:sdp-plan> --model mini --world 4 --rank-memory 40GiBx3,20GiBx2)

  # Metrics files as sdp-train --metrics writes them: step records, then the
  # summary; each case changes one field of the second step record.
  function(input_bounds_metrics name second_record tail)
    set(comm "\"comm\": {\"wait_seconds\": 0.001, \"sent_bytes\": 1000000, \"latency_steps\": 4}")
    file(WRITE ${input_bounds_work}/${name}.jsonl
         "{\"step\": 1, \"seconds\": 0.01, \"flops\": 1e9, ${comm}}\n"
         "${second_record}\n"
         "{\"step\": 3, \"seconds\": 0.01, \"flops\": 1e9, ${comm}}\n"
         "{\"summary\": true, \"steps\": 3}\n${tail}")
  endfunction()
  set(comm "\"comm\": {\"wait_seconds\": 0.001, \"sent_bytes\": 1000000, \"latency_steps\": 4}")
  input_bounds_metrics(null_seconds "{\"step\": 2, \"seconds\": null, \"flops\": 1e9, ${comm}}" "")
  input_bounds_metrics(absurd_flops "{\"step\": 2, \"seconds\": 0.01, \"flops\": 1e308, ${comm}}" "")
  input_bounds_metrics(negative_wait
                       "{\"step\": 2, \"seconds\": 0.01, \"flops\": 1e9, \"comm\": {\"wait_seconds\": -0.5}}" "")
  input_bounds_metrics(cut_last_line "{\"step\": 2, \"seconds\": 0.01, \"flops\": 1e9, ${comm}}"
                       "{\"step\": 4, \"seconds\": 0.0")
  input_bounds_metrics(cut_middle_line "{\"step\": 2, \"seconds\": 0.0" "")
  input_bounds_expect_fail(calibrate_null_field
                           "null_seconds.jsonl' line 2: field 'seconds' = null is invalid (valid: a step time in seconds in (0, 1e+06])"
                           $<TARGET_FILE:sdp-plan> --model tiny --world 2
                           --calibrate ${input_bounds_work}/null_seconds.jsonl)
  input_bounds_expect_fail(calibrate_absurd_flops
                           "absurd_flops.jsonl' line 2: field 'flops' = 1e+308 is invalid"
                           $<TARGET_FILE:sdp-plan> --model tiny --world 2
                           --calibrate ${input_bounds_work}/absurd_flops.jsonl)
  input_bounds_expect_fail(calibrate_negative_wait
                           "negative_wait.jsonl' line 2: field 'wait_seconds' = -0.5 is invalid"
                           $<TARGET_FILE:sdp-plan> --model tiny --world 2
                           --calibrate ${input_bounds_work}/negative_wait.jsonl)
  input_bounds_expect_fail(calibrate_cut_middle_line "cut_middle_line.jsonl' line 2 is not JSON"
                           $<TARGET_FILE:sdp-plan> --model tiny --world 2
                           --calibrate ${input_bounds_work}/cut_middle_line.jsonl)
  add_test(NAME cli.input_bounds.calibrate_cut_last_line
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_status.sh 0
                   "warning: --calibrate: '${input_bounds_work}/cut_last_line.jsonl' line 5 is cut off (a run stopped while writing it); skipped"
                   $<TARGET_FILE:sdp-plan> --model tiny --world 2
                   --calibrate ${input_bounds_work}/cut_last_line.jsonl)
  set_tests_properties(cli.input_bounds.calibrate_cut_last_line PROPERTIES LABELS cli TIMEOUT 60
                       ENVIRONMENT "OMP_NUM_THREADS=1")
endif()

if(TARGET sdp-pipeline)
  # Costs files of a measured 2-stage run (sdp-pipeline --calibrate).
  function(input_bounds_costs name forward)
    file(WRITE ${input_bounds_work}/${name}.json
         "{\"stages\": [{\"forward\": ${forward}, \"backward\": 6e-6, \"input_grad\": 3e-6, \"weight_grad\": 3e-6},"
         " {\"forward\": 4e-6, \"backward\": 8e-6, \"input_grad\": 5e-6, \"weight_grad\": 3e-6}]}\n")
  endfunction()
  input_bounds_costs(costs_null null)
  input_bounds_costs(costs_huge 1e308)
  input_bounds_costs(costs_tiny 1e-310)
  set(input_bounds_case --model tiny --batch 2 --seq 16 --stages 2 --micro-batches 4)
  input_bounds_expect_fail(pipeline_calibrate_null_field
                           "--calibrate ${input_bounds_work}/costs_null.json: costs: stage 0 \"forward\" = null is invalid"
                           $<TARGET_FILE:sdp-pipeline> ${input_bounds_case}
                           --calibrate ${input_bounds_work}/costs_null.json)
  input_bounds_expect_fail(pipeline_calibrate_huge_time
                           "stage 0's measured forward time of 1e+308 s for"
                           $<TARGET_FILE:sdp-pipeline> ${input_bounds_case}
                           --calibrate ${input_bounds_work}/costs_huge.json)
  input_bounds_expect_fail(pipeline_calibrate_tiny_time
                           "FLOPs is no finite rate (valid: 1000 to 1e+18 FLOP/s"
                           $<TARGET_FILE:sdp-pipeline> ${input_bounds_case}
                           --calibrate ${input_bounds_work}/costs_tiny.json)
endif()
