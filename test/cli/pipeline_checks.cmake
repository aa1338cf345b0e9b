# Pipeline schedule files: one reader and one validator
# (engine/pipeline/schedule.h, load_valid_schedule) for every tool, so that
# sdp-train and sdp-pipeline accept and refuse the same files with the same
# message; integers read in their declared range; validation linear in the
# actions. Included from test/CMakeLists.txt.
if(TARGET sdp-train AND TARGET sdp-pipeline)
  set(_checks_work ${CMAKE_CURRENT_BINARY_DIR}/cli/pipeline_checks)
  set(_checks_scripts ${CMAKE_CURRENT_SOURCE_DIR}/cli)
  file(MAKE_DIRECTORY ${_checks_work})
  # Stage 1 runs F1 before F0, but stage 0 sends F0's activation first:
  # no deadlock, yet stage 1 would take micro-batch 0's activation for 1's.
  file(WRITE ${_checks_work}/crossed.json
       "{\"microbatches\": 2, \"stages\": [[\"F0\", \"F1\", \"B0\", \"B1\"], [\"F1\", \"F0\", \"B0\", \"B1\"]]}\n")
  # 2^32 + 2 micro-batches, which a conversion to int made 2.
  file(WRITE ${_checks_work}/wrapped.json
       "{\"microbatches\": 4294967298, \"stages\": [[\"F0\", \"F1\", \"B0\", \"B1\"], [\"F0\", \"F1\", \"B0\", \"B1\"]]}\n")
  set(_train_pipe --model mini --steps 1 --batch 2 --seq 16 --device meta --progress false
                  --emulate-world 2 --emulate-rank 0 --pipeline-stages 2 --micro-batches 2)

  # The same file, the same message, from both tools.
  set(_crossed_message
      "pipeline schedule: stage 1 action 0 (F1) is stage 1's forward number 1, so it reads activation number 1 from stage 0, which stage 0 sends after its forward number 1, F0 (action 0): micro-batch 0, not 1; messages between neighbours arrive in the order they are sent")
  set(_wrapped_message
      "pipeline schedule JSON: microbatches = 4294967298 is invalid (valid: an integer in [1, 1048576])")
  foreach(case crossed wrapped)
    add_test(NAME cli.schedule_file_${case}_refused_by_sdp_train
             COMMAND sh ${_checks_scripts}/expect_fail.sh "${_${case}_message}"
                     $<TARGET_FILE:sdp-train> ${_train_pipe}
                     --schedule file:${_checks_work}/${case}.json)
    add_test(NAME cli.schedule_file_${case}_refused_by_sdp_pipeline
             COMMAND sh ${_checks_scripts}/expect_fail.sh "${_${case}_message}"
                     $<TARGET_FILE:sdp-pipeline>
                     --schedule file:${_checks_work}/${case}.json)
    set_tests_properties(cli.schedule_file_${case}_refused_by_sdp_train
                         cli.schedule_file_${case}_refused_by_sdp_pipeline
                         PROPERTIES LABELS cli ENVIRONMENT "OMP_NUM_THREADS=1")
  endforeach()

  # Stages x micro-batches is bounded (the validator's and simulator's tables
  # grow with it), with a message naming the limit.
  add_test(NAME cli.schedule_size_bounded
           COMMAND sh ${_checks_scripts}/expect_fail.sh
                   "pipeline schedule: 4096 stages x 1048576 micro-batches = 4294967296 is more than the limit of 4194304"
                   $<TARGET_FILE:sdp-pipeline> --stages 4096 --micro-batches 1048576)
  # Validation and simulation are linear in the actions: 100,000
  # micro-batches take a fraction of a second (more than 60 s when every
  # dependency lookup scanned its stage). The timeout is a hang guard, a
  # hundred times the expected time, not a measurement.
  add_test(NAME cli.schedule_many_micro_batches
           COMMAND $<TARGET_FILE:sdp-pipeline> --schedule 1f1b --stages 4 --micro-batches 100000)
  set_tests_properties(cli.schedule_many_micro_batches PROPERTIES TIMEOUT 30
                       PASS_REGULAR_EXPRESSION "1f1b +100000 ")
  set_tests_properties(cli.schedule_size_bounded cli.schedule_many_micro_batches
                       PROPERTIES LABELS cli ENVIRONMENT "OMP_NUM_THREADS=1")
endif()
