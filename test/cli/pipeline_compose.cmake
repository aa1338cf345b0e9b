# Every step is a schedule: pipelines compose with sharding (ZeRO-1/2/3),
# gradient buckets and backward masking, sdp-plan lists those compositions
# by default, and --pipeline-timeline works for a job without a pipeline
# (one stage running its micro-batches in turn). The f64 equalities with
# the same compositions without a pipeline are MPI tests
# (test/mpi/test_pipeline_training.cpp); these are the command lines.
# Included from test/CMakeLists.txt.
if(TARGET sdp-train AND TARGET sdp-plan)
  set(_compose_work ${CMAKE_CURRENT_BINARY_DIR}/cli/pipeline_compose)
  file(MAKE_DIRECTORY ${_compose_work})
  set(_compose_job --model mini --steps 2 --batch 2 --seq 16 --progress false
                   --pipeline-stages 2 --micro-batches 2 --emulate-world 4)
  # One emulated rank of a 2 x 2 pipeline on the CPU (its collectives
  # counted, its own stage computed), for each new composition.
  foreach(composition "fsdp;zb-h1;1" "ddp --shard grad;1f1b-2bp;0" "bb-sdp --active-fraction 0.5 --shard full;1f1b-2bp;2"
                      "nb-sdp --active-fraction 0.5;1f1b;3" "ddp --bucket-mb 0.0001;1f1b-2bp;1")
    list(GET composition 0 _strategy)
    list(GET composition 1 _schedule)
    list(GET composition 2 _rank)
    separate_arguments(_strategy_args UNIX_COMMAND "${_strategy}")
    string(REGEX REPLACE "[^a-z0-9]+" "_" _name "${_strategy}_${_schedule}")
    add_test(NAME cli.pipeline_compose.${_name}
             COMMAND $<TARGET_FILE:sdp-train> ${_compose_job} --emulate-rank ${_rank}
                     --device cpu --strategy ${_strategy_args} --schedule ${_schedule})
    set_tests_properties(cli.pipeline_compose.${_name} PROPERTIES
                         PASS_REGULAR_EXPRESSION "step +2  train loss")
  endforeach()
  # The planner's default list keeps backward masking with a pipeline.
  add_test(NAME cli.pipeline_compose.plan_defaults
           COMMAND $<TARGET_FILE:sdp-plan> --model mini --world 4 --batch 2 --seq 16
                   --pipeline-stages 2 --micro-batches 2 --format csv)
  set_tests_properties(cli.pipeline_compose.plan_defaults PROPERTIES
                       PASS_REGULAR_EXPRESSION "Bb-SDP[^\n]*PP2")
  # A job without a pipeline draws and measures its one-stage schedule.
  add_test(NAME cli.pipeline_compose.one_stage_timeline
           COMMAND sh -c "rm -rf \"$1\" && \"$0\" --model tiny --steps 2 --batch 2 --seq 16 --grad-accum 2 --progress false --pipeline-timeline \"$1\" && test -s \"$1/schedule.svg\" && test -s \"$1/timeline.svg\" && test -s \"$1/costs.json\""
                   $<TARGET_FILE:sdp-train> ${_compose_work}/one_stage_timeline)
endif()
