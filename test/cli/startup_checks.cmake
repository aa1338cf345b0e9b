# What a researcher meets at start-up, before any step: defaults that take
# good input (min_lr follows --lr; an SDP strategy without --active-fraction
# trains real subnetworks, C = 0.5), a world that does not fit the job (a
# config written for another world is refused, too few ranks for C is said
# loudly), and every output path checked before training, naming its flag
# (sdp-train exits 3, a permanent error; sdp-plan 2). One row per case (the
# runner: test/cli/cli_case.cmake). Included from test/CMakeLists.txt.
if(TARGET sdp-train AND TARGET sdp-plan)
  set(startup_work ${SDP_CLI_WORK}/startup)
  file(MAKE_DIRECTORY ${startup_work}/dir)
  file(WRITE ${startup_work}/afile "a regular file\n")
  file(WRITE ${startup_work}/lr_only.json "{\"lr\": 0.001}\n")
  file(WRITE ${startup_work}/min_lr_set.json "{\"min_lr\": 0.0003}\n")
  file(WRITE ${startup_work}/sdp_only.json "{\"strategy\": \"b-sdp\"}\n")
  file(WRITE ${startup_work}/world4.json "{\"model\": \"tiny\", \"world\": 4}\n")
  set(startup_job --model tiny --batch 2 --seq 16 --eval-every 0 --progress false)

  # min_lr: lr / 10 unless given; a given one above lr is refused saying so.
  sdp_cli_case(startup.min_lr_follows_lr PRINTS "\"min_lr\": 1e-05"
               ${SDP_TRAIN} --lr 1e-4 --print-config)
  sdp_cli_case(startup.small_lr_trains PRINTS "final train loss"
               ${SDP_TRAIN} ${startup_job} --steps 1 --lr 1e-4)
  sdp_cli_case(startup.min_lr_above_lr EXITS 3
               "--min-lr: min_lr = 0.0002 is invalid (valid: [0, lr = 0.0001]); left unset it is 0.1 lr"
               ${SDP_TRAIN} --lr 1e-4 --min-lr 2e-4)
  sdp_cli_case(startup.config_lr_derives_min_lr PRINTS "\"min_lr\": 0.0001,"
               ${SDP_TRAIN} --config ${startup_work}/lr_only.json --print-config)
  sdp_cli_case(startup.config_min_lr_kept FAILS
               "--config '${startup_work}/min_lr_set.json': min_lr = 0.0003 is invalid (valid: [0, lr = 0.0001])"
               ${SDP_TRAIN} --config ${startup_work}/min_lr_set.json --lr 1e-4)
  # C: 0.5 for an SDP strategy given without it, 1 for ddp.
  sdp_cli_case(startup.sdp_default_fraction PRINTS "\"active_fraction\": 0.5,"
               ${SDP_TRAIN} --strategy n-sdp --print-config)
  sdp_cli_case(startup.config_sdp_default_fraction PRINTS "\"active_fraction\": 0.5,"
               ${SDP_TRAIN} --config ${startup_work}/sdp_only.json --print-config)
  sdp_cli_case(startup.ddp_fraction_one PRINTS "\"active_fraction\": 1.0,"
               ${SDP_TRAIN} --print-config)
  sdp_cli_case(startup.help_says_defaults PRINTS "default 0.5 for the SDP strategies"
               ${SDP_TRAIN} --help)

  # A world too small for C: one loud line on stderr, with what to do.
  sdp_cli_case(startup.one_owner_warns PRINTS
               "warning: b-sdp with C = 0.5 on 2 ranks gives every component 1 owner of 2[^\n]*run on at least 4 ranks"
               ${SDP_TRAIN} ${startup_job} --strategy b-sdp --emulate-world 2 --dry-run)
  sdp_cli_case(startup.one_rank_warns PRINTS
               "warning: b-sdp with C = 0.5 on 1 rank: its one rank owns every component: every rank trains the whole model, which is DDP"
               ${SDP_TRAIN} ${startup_job} --strategy b-sdp --dry-run)
  # A config written for 4 ranks: refused on 1, accepted on 4 (emulated).
  sdp_cli_case(startup.config_world_refused EXITS 3
               "world = 4 (the ranks this config is for) but this job has 1 rank"
               ${SDP_TRAIN} --config ${startup_work}/world4.json --steps 1)
  sdp_cli_case(startup.config_world_emulated PRINTS "rank 0 of 4"
               ${SDP_TRAIN} --config ${startup_work}/world4.json --emulate-world 4 --dry-run)
  # sdp-plan --write-config records its world and leaves min_lr to follow lr.
  sdp_cli_case(startup.plan_config_records_world PASSES
               sh -c "\"$0\" --model tiny --world 4 --seq 16 --tokens-per-rank 32 --fit 1GiB --write-config \"$2\" >/dev/null && grep -q '\"world\": 4' \"$2\" && ! grep -q min_lr \"$2\" && \"$1\" --config \"$2\" --steps 1 2>&1 | grep -F 'world = 4 (the ranks this config is for) but this job has 1 rank'"
               ${SDP_PLAN} ${SDP_TRAIN} ${startup_work}/fitted.json)
  # A plan file written for 4 ranks, on 2.
  sdp_cli_case(startup.plan_file_other_world PASSES
               sh -c "\"$0\" --model tiny --world 4 --strategies b-sdp:0.5 --write-plan \"$2\" >/dev/null && \"$1\" --model tiny --batch 2 --seq 16 --strategy b-sdp --plan file:\"$2\" --emulate-world 2 --dry-run 2>&1 | grep -F 'has 4 rows'"
               ${SDP_PLAN} ${SDP_TRAIN} ${startup_work}/plan4.json)

  # Output paths, before the first step, naming the flag.
  sdp_cli_case(startup.save_dir_is_file EXITS 3
               "--save-dir: cannot create save directory '${startup_work}/afile': it exists and is not a directory"
               ${SDP_TRAIN} ${startup_job} --steps 20 --save-dir ${startup_work}/afile)
  sdp_cli_case(startup.metrics_through_file EXITS 3
               "--metrics: cannot create metrics file '${startup_work}/afile/m.jsonl': Not a directory ('${startup_work}/afile' is a file)"
               ${SDP_TRAIN} ${startup_job} --steps 20 --metrics ${startup_work}/afile/m.jsonl)
  sdp_cli_case(startup.metrics_is_directory EXITS 3
               "--metrics: cannot create metrics file '${startup_work}/dir': it is a directory (expected a file)"
               ${SDP_TRAIN} ${startup_job} --steps 20 --metrics ${startup_work}/dir)
  sdp_cli_case(startup.timeline_is_file EXITS 3
               "--pipeline-timeline: cannot create timeline directory '${startup_work}/afile': it exists and is not a directory"
               ${SDP_TRAIN} ${startup_job} --steps 20 --pipeline-timeline ${startup_work}/afile)
  sdp_cli_case(startup.dry_run_metrics_checked EXITS 3
               "--metrics: cannot create metrics file '${startup_work}/afile/m.jsonl'"
               ${SDP_TRAIN} ${startup_job} --dry-run --metrics ${startup_work}/afile/m.jsonl)
  sdp_cli_case(startup.plan_output_missing_dir FAILS
               "--output: cannot create report file '${startup_work}/none/r.md': its directory '${startup_work}/none' does not exist"
               ${SDP_PLAN} --model tiny --world 4 --output ${startup_work}/none/r.md
               ABSENT ${startup_work}/none)
  sdp_cli_case(startup.plan_write_config_through_file FAILS
               "--write-config: cannot create config file '${startup_work}/afile/c.json': Not a directory"
               ${SDP_PLAN} --model tiny --world 4 --seq 16 --tokens-per-rank 32 --fit 1GiB
               --write-config ${startup_work}/afile/c.json)
  sdp_cli_case(startup.plan_write_plan_through_file FAILS
               "--write-plan: cannot create plan file '${startup_work}/afile/p.json': Not a directory"
               ${SDP_PLAN} --model tiny --world 4 --strategies b-sdp:0.5 --write-plan ${startup_work}/afile/p.json)
  if(TARGET sdp-pipeline)
    sdp_cli_case(startup.pipeline_svg_through_file FAILS
                 "--svg: cannot create timeline SVG '${startup_work}/afile/t.svg': Not a directory"
                 ${SDP_PIPELINE} --stages 4 --micro-batches 8 --svg ${startup_work}/afile/t.svg)
    sdp_cli_case(startup.pipeline_costs_through_file FAILS
                 "--write-costs: cannot create costs file '${startup_work}/afile/c.json': Not a directory"
                 ${SDP_PIPELINE} --model mini --batch 2 --seq 16 --stages 2 --micro-batches 4
                 --flops-per-second 1e9 --write-costs ${startup_work}/afile/c.json)
  endif()

  # Under mpirun every rank stops alike, with rank 0's message; the warning
  # comes from rank 0.
  if(SDP_HAVE_MPI AND MPIEXEC_EXECUTABLE)
    set(startup_mpi ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${SDP_MPIEXEC_OVERSUBSCRIBE})
    sdp_cli_case(startup.mpi_metrics_through_file FAILS
                 "--metrics: cannot create metrics file '${startup_work}/afile/m.jsonl': Not a directory"
                 ${startup_mpi} ${SDP_TRAIN} ${startup_job} --steps 20
                 --metrics ${startup_work}/afile/m.jsonl
                 PROPERTIES LABELS "cli;mpi" ENVIRONMENT "${SDP_MPI_ENVIRONMENT}" TIMEOUT 120)
    sdp_cli_case(startup.mpi_config_world_refused FAILS
                 "world = 4 (the ranks this config is for) but this job has 2 ranks"
                 ${startup_mpi} ${SDP_TRAIN} --config ${startup_work}/world4.json --steps 1
                 PROPERTIES LABELS "cli;mpi" ENVIRONMENT "${SDP_MPI_ENVIRONMENT}" TIMEOUT 120)
    sdp_cli_case(startup.mpi_one_owner_warns PRINTS
                 "warning: b-sdp with C = 0.5 on 2 ranks gives every component 1 owner of 2"
                 ${startup_mpi} ${SDP_TRAIN} ${startup_job} --steps 1 --strategy b-sdp
                 PROPERTIES LABELS "cli;mpi" ENVIRONMENT "${SDP_MPI_ENVIRONMENT}" TIMEOUT 120)
  endif()
endif()
