# sdp-train's save directory, checked before training: one that cannot be
# written, one another job holds (and a killed job's lock file, which does
# not block), a resume with --steps below the checkpoint's step; each a
# permanent error with exit code 3 (test/cli/check_save_dir.sh). The
# `latest` file cannot lead out of the save directory.
if(TARGET sdp-train)
  foreach(save_dir_case unwritable second_job steps_below)
    add_test(NAME cli.save_dir.${save_dir_case}
             COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/check_save_dir.sh ${save_dir_case}
                     ${CMAKE_CURRENT_BINARY_DIR}/cli/save_dir $<TARGET_FILE:sdp-train>)
    set_tests_properties(cli.save_dir.${save_dir_case} PROPERTIES LABELS cli TIMEOUT 120
                         ENVIRONMENT "OMP_NUM_THREADS=1")
  endforeach()
  set(save_dir_work ${CMAKE_CURRENT_BINARY_DIR}/cli/save_dir)
  file(MAKE_DIRECTORY ${save_dir_work}/outside/ck/step-000001 ${save_dir_work}/outside/other)
  file(WRITE ${save_dir_work}/outside/ck/latest
       "{\"checkpoint\": \"../other/step-000010\", \"step\": 10}\n")
  add_test(NAME cli.save_dir.latest_outside
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_status.sh 3
                   "checkpoint = \"../other/step-000010\" leads to"
                   $<TARGET_FILE:sdp-train> --model tiny --batch 2 --seq 16 --steps 20
                   --resume ${save_dir_work}/outside/ck)
  add_test(NAME cli.save_dir.bad_flag_is_permanent
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_status.sh 3
                   "The following argument was not expected: --bogus"
                   $<TARGET_FILE:sdp-train> --bogus)
  add_test(NAME cli.save_dir.unknown_model_is_permanent
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_status.sh 3
                   "unknown model 'nosuch' (valid: tiny"
                   $<TARGET_FILE:sdp-train> --model nosuch --steps 1)
  set_tests_properties(cli.save_dir.latest_outside cli.save_dir.bad_flag_is_permanent
                       cli.save_dir.unknown_model_is_permanent
                       PROPERTIES LABELS cli ENVIRONMENT "OMP_NUM_THREADS=1")
endif()
