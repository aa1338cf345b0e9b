# What sdp-train prints while it runs (the runner: test/cli/cli_case.cmake):
# the OpenMP threads it chose, once, and plain progress lines where stdout
# is no terminal, flushed as they are printed (test/cli/check_run_output.sh).
# Included from test/CMakeLists.txt.
if(TARGET sdp-train)
  set(run_output_work ${SDP_CLI_WORK}/run_output)
  set(tiny_run --model tiny --batch 2 --seq 16 --steps 1 --eval-every 0)
  # --log-every: bounded like every step count, from flags and config files alike.
  sdp_cli_case(log_every_negative FAILS
               "--log-every: '-1' is invalid (valid: an integer in [0, "
               ${SDP_TRAIN} ${tiny_run} --log-every -1)
  file(WRITE ${SDP_CLI_WORK}/negative_log_every.json "{\"log_every\": -1}\n")
  sdp_cli_case(config_log_every_negative FAILS
               "--config '${SDP_CLI_WORK}/negative_log_every.json': log_every = -1 is invalid (valid: [0, "
               ${SDP_TRAIN} --config ${SDP_CLI_WORK}/negative_log_every.json)
  sdp_cli_case(log_every_default PRINTS "\"log_every\": 10"
               ${SDP_TRAIN} --print-config)
  sdp_cli_case(step_log_plain_lines PASSES
               sh ${SDP_CLI_DIR}/check_run_output.sh plain_lines ${run_output_work}/plain ${SDP_TRAIN})
  sdp_cli_case(step_log_survives_kill PASSES
               sh ${SDP_CLI_DIR}/check_run_output.sh killed ${run_output_work}/killed ${SDP_TRAIN})

  # The thread choice: --threads, then OMP_NUM_THREADS (the cases' own
  # environment sets it to 1), then the share of this process's cores. (A
  # '.' stands for the ';' of the printed line: CMake splits lists at ';'.)
  sdp_cli_case(threads_from_flag PRINTS "threads: 1 \\(--threads\\)"
               ${SDP_TRAIN} ${tiny_run} --threads 1)
  sdp_cli_case(threads_from_environment PRINTS
               "threads: 1 \\(OMP_NUM_THREADS=1. --threads to override\\)"
               ${SDP_TRAIN} ${tiny_run})
  sdp_cli_case(threads_default_share PRINTS
               "threads: [0-9]+ \\([0-9]+ cores? in this process's affinity mask. --threads or OMP_NUM_THREADS to override\\)"
               env -u OMP_NUM_THREADS ${SDP_TRAIN} ${tiny_run})
  sdp_cli_case(threads_bad_environment EXITS 3
               "OMP_NUM_THREADS = 'many' is not a thread count (valid: an integer >= 1"
               ${SDP_TRAIN} ${tiny_run}
               PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=many")
  if(SDP_HAVE_MPI AND MPIEXEC_EXECUTABLE)
    # Two ranks on this host: the choice is printed once (by rank 0) and
    # names the ranks of the node.
    sdp_cli_case(threads_printed_once_under_mpiexec PASSES
                 sh ${SDP_CLI_DIR}/check_run_output.sh threads_once ${run_output_work}/threads
                 ${SDP_TRAIN} ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2
                 ${SDP_MPIEXEC_OVERSUBSCRIBE}
                 PROPERTIES LABELS "cli;mpi" ENVIRONMENT "${SDP_MPI_ENVIRONMENT}" TIMEOUT 120
                 PROCESSORS 2)
  endif()
endif()
