# The sdp-train command line, one row per case (the runner and its
# expectations: test/cli/cli_case.cmake): bad input fails with a message
# naming the problem, a short run writes valid metrics, --help is complete.
if(TARGET sdp-train)
  file(WRITE ${SDP_CLI_WORK}/unknown_key.json "{\"model\": \"tiny\", \"bacth\": 4}\n")
  file(WRITE ${SDP_CLI_WORK}/invalid.json "{\"model\": \"tiny\", \"batch\": }\n")
  # The cases of a missing path: each path is its own, under the build tree.
  set(SDP_CLI_ABSENT ${SDP_CLI_WORK}/absent)

  sdp_cli_case(batch_zero FAILS "--batch: '0' is invalid (valid: an integer in [1, 16777216])"
               ${SDP_TRAIN} --batch 0)
  # Every count flag is bounded, so nothing downstream overflows or asks the
  # OpenMP runtime for a team it cannot make.
  sdp_cli_case(threads_beyond_cpus FAILS "--threads: '100000' is invalid (valid: an integer in [0, "
               ${SDP_TRAIN} --model tiny --batch 4 --seq 64 --steps 2 --threads 100000)
  sdp_cli_case(batch_beyond_int64_products FAILS
               "--batch: '4611686018427387904' is invalid (valid: an integer in [1, 16777216])"
               ${SDP_TRAIN} --batch 4611686018427387904)
  sdp_cli_case(batch_times_seq FAILS
               "--batch: batch = 100000 with seq = 100000 is invalid: batch * seq must be <= 2147483648 tokens per micro-batch"
               ${SDP_TRAIN} --batch 100000 --seq 100000)
  sdp_cli_case(grad_accum_times_tokens FAILS
               "--grad-accum: grad_accum = 1048576 with batch * seq = 2147483648 is invalid: batch * seq * grad_accum must be <= 1099511627776"
               ${SDP_TRAIN} --batch 16777216 --seq 128 --grad-accum 1048576)
  sdp_cli_case(emulate_world_beyond_int FAILS
               "--emulate-world: '2147483648' is invalid (valid: an integer in [0, 65536])"
               ${SDP_TRAIN} --emulate-world 2147483648)
  sdp_cli_case(ffn_groups_beyond_int FAILS
               "--ffn-groups: '2147483648' is invalid (valid: an integer in [0, 65536])"
               ${SDP_TRAIN} --ffn-groups 2147483648)
  sdp_cli_case(seed_negative FAILS
               "--seed: '-1' is invalid (valid: an integer in [0, 18446744073709551615])"
               ${SDP_TRAIN} --seed -1)
  sdp_cli_case(plan_seed_beyond_uint64 FAILS
               "--plan-seed: '18446744073709551616' is invalid (valid: an integer in [0, 18446744073709551615])"
               ${SDP_TRAIN} --plan-seed 18446744073709551616)
  sdp_cli_case(comm_timeout_huge FAILS
               "--comm-timeout: comm_timeout = 1e+300 is invalid (valid: [0, 31536000] seconds"
               ${SDP_TRAIN} --comm-timeout 1e300)
  sdp_cli_case(bucket_mb_huge FAILS "--bucket-mb: bucket_mb = 1e+12 is invalid" ${SDP_TRAIN} --bucket-mb 1e12)
  # The JSON config file gets the same checks, naming the file and the field.
  file(WRITE ${SDP_CLI_WORK}/negative_seed.json "{\"seed\": -1}\n")
  file(WRITE ${SDP_CLI_WORK}/float_batch.json "{\"batch\": 2.5}\n")
  file(WRITE ${SDP_CLI_WORK}/many_threads.json "{\"threads\": 100000}\n")
  file(WRITE ${SDP_CLI_WORK}/huge_world.json "{\"emulate_world\": 2147483648}\n")
  sdp_cli_case(config_negative_unsigned FAILS
               "--config '${SDP_CLI_WORK}/negative_seed.json': field 'seed' = -1 is out of range (valid: an integer in [0, 18446744073709551615])"
               ${SDP_TRAIN} --config ${SDP_CLI_WORK}/negative_seed.json)
  sdp_cli_case(config_float_for_integer FAILS
               "--config '${SDP_CLI_WORK}/float_batch.json': field 'batch' has the wrong type (number 2.5; expected an integer in"
               ${SDP_TRAIN} --config ${SDP_CLI_WORK}/float_batch.json)
  sdp_cli_case(config_threads_beyond_cpus FAILS
               "--config '${SDP_CLI_WORK}/many_threads.json': threads = 100000 is invalid (valid: [0, "
               ${SDP_TRAIN} --config ${SDP_CLI_WORK}/many_threads.json)
  sdp_cli_case(config_world_beyond_limit FAILS
               "--config '${SDP_CLI_WORK}/huge_world.json': emulate_world = 2147483648 is invalid (valid: [0, 65536]"
               ${SDP_TRAIN} --config ${SDP_CLI_WORK}/huge_world.json)
  sdp_cli_case(config_is_directory FAILS
               "--config: '${SDP_CLI_WORK}' is a directory (expected a JSON file of config fields)"
               ${SDP_TRAIN} --config ${SDP_CLI_WORK})
  # The emulated device with no devices is a machine without a GPU.
  set(no_gpu_environment "OMP_NUM_THREADS=1")
  if(SDP_CUDA_EMULATED)
    set(no_gpu_environment "SDP_CUDA_EMULATOR_DEVICES=0")
  endif()
  sdp_cli_case(cuda_without_gpu PASSES sh ${SDP_CLI_DIR}/expect_no_gpu_error.sh
               ${SDP_TRAIN} PROPERTIES SKIP_RETURN_CODE 77 ENVIRONMENT "${no_gpu_environment}")
  sdp_cli_case(bf16_on_cpu FAILS "dtype = 'bf16' needs device cuda" ${SDP_TRAIN} --device cpu --dtype bf16)
  sdp_cli_case(unknown_device FAILS "device = 'tpu' is invalid (valid: cpu, meta, meta-cpu, cuda)"
               ${SDP_TRAIN} --device tpu)
  sdp_cli_case(unknown_model FAILS
               "unknown model 'llama-7b' (valid: tiny, mini, small, small-32k, llama-134m, llama-500m, llama-1b, resnet-tiny, resnet-mini, resnet18, wrn18, resnet152-basic, swin-micro, swin-mini, swin-t)"
               ${SDP_TRAIN} --model llama-7b)
  sdp_cli_case(resnet_with_tokens FAILS "model resnet18 classifies images; valid data:"
               ${SDP_TRAIN} --model resnet18 --data text:README.md)
  sdp_cli_case(swin_with_tokens FAILS "model swin-mini classifies images; valid data:"
               ${SDP_TRAIN} --model swin-mini --data text:README.md)
  sdp_cli_case(drop_path_without_stochastic_depth FAILS
               "drop_path = 0.1: model tiny has no stochastic depth (only 0 is valid)"
               ${SDP_TRAIN} --model tiny --drop-path 0.1 --dry-run)
  sdp_cli_case(drop_path_out_of_range FAILS
               "drop_path = 1 is invalid (valid: -1 = the model's default, or [0, 1))"
               ${SDP_TRAIN} --model swin-mini --drop-path 1)
  sdp_cli_case(cifar_missing_dir FAILS "cifar10 data directory '${SDP_CLI_ABSENT}/cifar' does not exist" ABSENT ${SDP_CLI_ABSENT}/cifar
               ${SDP_TRAIN} --model resnet18 --data cifar10:${SDP_CLI_ABSENT}/cifar)
  sdp_cli_case(llmc_no_match FAILS "'${SDP_CLI_ABSENT}/llmc/*.bin' matches no files" ABSENT ${SDP_CLI_ABSENT}/llmc
               ${SDP_TRAIN} --data "llmc:${SDP_CLI_ABSENT}/llmc/*.bin")
  sdp_cli_case(text_missing FAILS "text data file '${SDP_CLI_ABSENT}/text' does not exist" ABSENT ${SDP_CLI_ABSENT}/text
               ${SDP_TRAIN} --data text:${SDP_CLI_ABSENT}/text)
  sdp_cli_case(config_unknown_key FAILS "unknown field 'bacth'"
               ${SDP_TRAIN} --config ${SDP_CLI_WORK}/unknown_key.json)
  sdp_cli_case(config_invalid_json FAILS "invalid.json' is not valid JSON"
               ${SDP_TRAIN} --config ${SDP_CLI_WORK}/invalid.json)
  sdp_cli_case(config_missing FAILS "cannot open '${SDP_CLI_ABSENT}/config/config.json'" ABSENT ${SDP_CLI_ABSENT}/config
               ${SDP_TRAIN} --config ${SDP_CLI_ABSENT}/config/config.json)
  sdp_cli_case(resume_missing FAILS "no checkpoint at '${SDP_CLI_ABSENT}/resume'" ABSENT ${SDP_CLI_ABSENT}/resume
               ${SDP_TRAIN} --resume ${SDP_CLI_ABSENT}/resume)
  sdp_cli_case(seq_too_long FAILS "seq = 5000 exceeds model tiny's max_seq" ${SDP_TRAIN} --seq 5000)
  sdp_cli_case(lr_negative FAILS "lr = -1 is invalid (valid: (0, 10])" ${SDP_TRAIN} --lr -1)
  sdp_cli_case(min_lr_above_lr FAILS "min_lr = 0.5 is invalid (valid: [0, lr = 0.1])"
               ${SDP_TRAIN} --lr 0.1 --min-lr 0.5)
  sdp_cli_case(beta1_one FAILS "beta1 = 1 is invalid (valid: [0, 1))" ${SDP_TRAIN} --beta1 1)
  sdp_cli_case(grad_clip_negative FAILS "grad_clip = -1 is invalid (valid: >= 0)" ${SDP_TRAIN} --grad-clip -1)
  sdp_cli_case(batch_not_a_number FAILS "--batch: 'abc' is invalid (valid: an integer in [1, "
               ${SDP_TRAIN} --batch abc)
  sdp_cli_case(strategy_unknown FAILS
               "strategy = 'zero' is invalid (valid: ddp, fsdp, b-sdp, n-sdp, bb-sdp, nb-sdp)"
               ${SDP_TRAIN} --strategy zero)
  sdp_cli_case(shard_unknown FAILS
               "--shard: shard = 'zero3' is invalid (valid: none, optimizer, grad, full"
               ${SDP_TRAIN} --shard zero3)
  sdp_cli_case(fsdp_with_other_shard FAILS
               "fsdp means --shard full; use --strategy ddp --shard optimizer"
               ${SDP_TRAIN} --strategy fsdp --shard optimizer)
  sdp_cli_case(activation_checkpointing_unknown FAILS
               "--activation-checkpointing: activation_checkpointing = 'every:0' is invalid (valid: none, block, every:K"
               ${SDP_TRAIN} --activation-checkpointing every:0)
  # Combinations of the parallel axes that make no sense, refused with what works.
  sdp_cli_case(bf16_reduce_with_shard FAILS
               "'bf16' with shard = grad is not supported: sharded gradients are reduce-scattered"
               ${SDP_TRAIN} --shard grad --grad-reduce-dtype bf16 --device meta)
  sdp_cli_case(ddp_with_fraction FAILS "needs an SDP strategy" ${SDP_TRAIN} --active-fraction 0.5)
  sdp_cli_case(plan_unknown FAILS "plan = 'ring' is invalid (valid: cyclic, random, file:PATH of an ownership matrix, weighted:W0,W1,..."
               ${SDP_TRAIN} --plan ring)
  sdp_cli_case(emulate_rank_out_of_range FAILS
               "emulate_rank = 4 is invalid (valid: [0, emulate_world - 1 = 3])"
               ${SDP_TRAIN} --emulate-world 4 --emulate-rank 4)
  sdp_cli_case(plan_without_owners FAILS
               "strategy B-SDP (C = 0.1, cyclic) on 4 ranks with model tiny"
               ${SDP_TRAIN} --strategy b-sdp --active-fraction 0.1 --emulate-world 4 --dry-run)
  sdp_cli_case(head_groups_not_dividing FAILS
               "head_groups = 3 must divide the number of KV heads 2"
               ${SDP_TRAIN} --strategy n-sdp --active-fraction 0.5 --head-groups 3 --emulate-world 2
               --dry-run)
  sdp_cli_case(emulated_checkpoint FAILS "an emulated rank (emulate_world = 2) has only its own"
               ${SDP_TRAIN} --emulate-world 2 --steps 1 --batch 1 --seq 8 --eval-every 0
               --save-dir ${SDP_CLI_WORK}/emulated_ckpt)
  sdp_cli_case(max_shard_size_invalid FAILS "max_shard_size = '5 gigs' is not a byte size"
               ${SDP_TRAIN} --max-shard-size "5 gigs" --dry-run)

  # A model that needs another image size than the synthetic images' default
  # (swin-micro: 16 x 16) gets it without a --data spec, in training and in
  # the planner's dry run.
  sdp_cli_case(swin_micro_default_data PASSES
               ${SDP_TRAIN} --model swin-micro --steps 1 --batch 2 --eval-every 1 --eval-batches 1
               --progress false)
  sdp_cli_case(plan_swin_micro_default_data PASSES
               ${SDP_PLAN} --model swin-micro --world 2 --batch 2 --strategies ddp,b-sdp:0.5)

  # A full disk loses no output silently: a failed write of the metrics or
  # of the report on stdout ends the run non-zero, naming what failed.
  # /dev/full (Linux) is a real device that is always full; skipped where
  # there is none.
  set(SDP_NEEDS_DEV_FULL sh -c "test -e /dev/full || exit 77 && exec \"$@\"" sh)
  sdp_cli_case(metrics_on_full_device PASSES
               ${SDP_NEEDS_DEV_FULL} sh ${SDP_CLI_DIR}/expect_fail.sh
               "metrics: cannot write to \"/dev/full\": No space left on device"
               ${SDP_TRAIN} --model tiny --steps 2 --batch 2 --seq 16 --eval-every 0 --metrics /dev/full
               PROPERTIES SKIP_RETURN_CODE 77)
  sdp_cli_case(report_on_full_device PASSES
               ${SDP_NEEDS_DEV_FULL} sh ${SDP_CLI_DIR}/expect_fail.sh
               "cannot write the report to standard output: No space left on device"
               sh -c "\"$@\" >/dev/full" sh
               ${SDP_TRAIN} --model tiny --steps 2 --batch 2 --seq 16 --eval-every 0
               PROPERTIES SKIP_RETURN_CODE 77)

  if(SDP_PYTHON3)
    set(metrics ${SDP_CLI_WORK}/train_metrics.jsonl)
    sdp_cli_case(train_writes_metrics PASSES
                 sh -c "rm -f \"$2\" && \"$1\" --model tiny --steps 3 --batch 2 --seq 16 --eval-every 3 --metrics \"$2\" && \"$3\" \"$4\" \"$2\" 3"
                 sh ${SDP_TRAIN} ${metrics} ${SDP_PYTHON3} ${SDP_CLI_DIR}/check_metrics.py)
    # swin-mini end to end with drop path: a checkpoint at step 2, resumed
    # bit for bit (test/cli/check_swin_resume.sh).
    sdp_cli_case(swin_mini_resume PASSES
                 sh ${SDP_CLI_DIR}/check_swin_resume.sh ${SDP_TRAIN} ${SDP_CLI_WORK}/swin_resume
                 ${SDP_PYTHON3})
    # scripts/sdp-run (restarts; its runs are the mpi.restart.* tests): its
    # help names every option, and a job it could not restart is refused.
    set(sdp_run ${SDP_PYTHON3} ${CMAKE_SOURCE_DIR}/scripts/sdp-run)
    sdp_cli_case(sdp_run_help PASSES
                 sh -c "\"$1\" \"$2\" --help | grep -F -- '--min-ranks M' && \"$1\" \"$2\" --help | grep -F -- '--launcher CMD'"
                 sh ${sdp_run})
    sdp_cli_case(sdp_run_needs_save_dir FAILS "the sdp-train flags have no --save-dir"
                 ${sdp_run} --np 2 -- --model tiny)
    sdp_cli_case(sdp_run_min_ranks_range FAILS "--min-ranks 3 is invalid (valid: 1..--np = 2)"
                 ${sdp_run} --np 2 --min-ranks 3 -- --save-dir ck)
  else()
    message(STATUS "python3 not found: skipping the sdp-train metrics test")
  endif()
  # ---- Pipelines: bad input is refused naming the flag or field and what is
  # valid. One emulated rank of a 2-rank job on the meta device reaches every
  # check a real rank does (the schedule and stage split are built before any
  # collective).
  set(pipe_flags --model mini --steps 1 --batch 2 --seq 16 --device meta --progress false
                 --emulate-world 2 --emulate-rank 0 --pipeline-stages 2)
  set(SDP_CLI_SCHEDULES ${SDP_CLI_WORK}/schedules)
  file(MAKE_DIRECTORY ${SDP_CLI_SCHEDULES})
  file(WRITE ${SDP_CLI_SCHEDULES}/malformed.json "{\"microbatches\": 2, \"stages\": [[\"F0\", \n")
  file(WRITE ${SDP_CLI_SCHEDULES}/unknown_action.json
       "{\"microbatches\": 2, \"stages\": [[\"F0\", \"F1\", \"X3\", \"B0\", \"B1\"], [\"F0\", \"B0\", \"F1\", \"B1\"]]}\n")
  # Stage 1 waits for F1 first, which stage 0 sends only after B0, which
  # needs stage 1's B0: each waits for the other.
  file(WRITE ${SDP_CLI_SCHEDULES}/deadlock.json
       "{\"microbatches\": 2, \"stages\": [[\"F0\", \"B0\", \"F1\", \"B1\"], [\"F1\", \"B1\", \"F0\", \"B0\"]]}\n")
  file(WRITE ${SDP_CLI_SCHEDULES}/three_stages.json
       "{\"microbatches\": 2, \"stages\": [[\"F0\", \"F1\", \"B0\", \"B1\"], [\"F0\", \"F1\", \"B0\", \"B1\"], [\"F0\", \"B0\", \"F1\", \"B1\"]]}\n")
  file(WRITE ${SDP_CLI_SCHEDULES}/three_micro_batches.json
       "{\"microbatches\": 3, \"stages\": [[\"F0\", \"F1\", \"F2\", \"B0\", \"B1\", \"B2\"], [\"F0\", \"B0\", \"F1\", \"B1\", \"F2\", \"B2\"]]}\n")
  sdp_cli_case(pipeline_refuses_fewer_micro_batches_than_stages FAILS
               "grad_accum = 1 micro-batches for 2 pipeline stages is invalid: with M < P some stage idles most of every step (valid: grad_accum, the pipeline's --micro-batches, >= pipeline_stages = 2)"
               ${SDP_TRAIN} ${pipe_flags} --micro-batches 1)
  sdp_cli_case(pipeline_refuses_unknown_schedule FAILS
               "schedule = 'zb-v': pipeline schedule \"zb-v\" is unknown (valid: gpipe, 1f1b, gpipe-2bp, 1f1b-2bp, zb-h1, 1f1b-2bp-cooldown, naive, naive-2bp); or file:PATH, a schedule JSON"
               ${SDP_TRAIN} ${pipe_flags} --micro-batches 2 --schedule zb-v)
  sdp_cli_case(pipeline_refuses_batched_weight_grads_without_w FAILS
               "deferred_weight_grads = 'batched' needs a split schedule, one with W actions"
               ${SDP_TRAIN} ${pipe_flags} --micro-batches 2 --schedule 1f1b --deferred-weight-grads batched)
  sdp_cli_case(pipeline_refuses_unknown_deferred_weight_grads FAILS
               "'all' is invalid (valid: per-micro-batch, batched)"
               ${SDP_TRAIN} ${pipe_flags} --micro-batches 2 --deferred-weight-grads all)
  sdp_cli_case(pipeline_refuses_malformed_schedule_file FAILS
               "malformed.json\" is not valid JSON"
               ${SDP_TRAIN} ${pipe_flags} --micro-batches 2 --schedule file:${SDP_CLI_SCHEDULES}/malformed.json)
  sdp_cli_case(pipeline_refuses_unknown_action FAILS
               "pipeline action \"X3\": valid forms are F<mb>, B<mb>, I<mb>, W<mb>"
               ${SDP_TRAIN} ${pipe_flags} --micro-batches 2 --schedule file:${SDP_CLI_SCHEDULES}/unknown_action.json)
  sdp_cli_case(pipeline_refuses_deadlocking_schedule FAILS
               "pipeline schedule deadlocks (no stage can progress); stage 0 action 1 (B0) waits for B0 on stage 1; stage 1 action 0 (F1) waits for F1 on stage 0"
               ${SDP_TRAIN} ${pipe_flags} --micro-batches 2 --schedule file:${SDP_CLI_SCHEDULES}/deadlock.json)
  sdp_cli_case(pipeline_refuses_schedule_stage_count FAILS
               "the schedule has 3 stages and 2 micro-batches; this job has pipeline_stages = 2 and grad_accum (its micro-batches) = 2"
               ${SDP_TRAIN} ${pipe_flags} --micro-batches 2 --schedule file:${SDP_CLI_SCHEDULES}/three_stages.json)
  sdp_cli_case(pipeline_refuses_schedule_micro_batch_count FAILS
               "the schedule has 2 stages and 3 micro-batches; this job has pipeline_stages = 2 and grad_accum (its micro-batches) = 2"
               ${SDP_TRAIN} ${pipe_flags} --micro-batches 2 --schedule file:${SDP_CLI_SCHEDULES}/three_micro_batches.json)
  sdp_cli_case(pipeline_refuses_stage_blocks_sum FAILS
               "--stage-blocks 1,2: model mini has 4 blocks, and a pipeline of 2 stages needs 2 counts, each >= 1, summing to 4 (got 2 summing to 3)"
               ${SDP_TRAIN} ${pipe_flags} --micro-batches 2 --stage-blocks 1,2)
  sdp_cli_case(pipeline_refuses_stage_blocks_zero FAILS
               "--stage-blocks '0,4': a stage of 0 blocks (valid: blocks per stage as positive integers"
               ${SDP_TRAIN} ${pipe_flags} --micro-batches 2 --stage-blocks 0,4)
  sdp_cli_case(pipeline_refuses_more_stages_than_blocks FAILS
               "a pipeline of 8 stages needs at least 8 blocks; model mini has 4"
               ${SDP_TRAIN} --model mini --steps 1 --batch 2 --seq 16 --device meta --emulate-world 8
               --emulate-rank 0 --pipeline-stages 8 --micro-batches 8)
  sdp_cli_case(pipeline_refuses_world_not_stages_times_replicas FAILS
               "--emulate-world: emulate_world = 3 is not a multiple of pipeline_stages = 2 (the world is stages x replicas)"
               ${SDP_TRAIN} --model mini --steps 1 --device meta --emulate-world 3 --emulate-rank 0
               --pipeline-stages 2 --micro-batches 2)
  if(SDP_HAVE_MPI AND MPIEXEC_EXECUTABLE)
    # A real world of 3 ranks cannot be 2 stages x D replicas.
    sdp_cli_case(pipeline_refuses_world_of_three FAILS
                 "pipeline_stages = 2 needs a world of P x D ranks (D data-parallel replicas of each stage); 3 ranks is not a multiple of 2"
                 ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 3 ${SDP_MPIEXEC_OVERSUBSCRIBE}
                 ${SDP_TRAIN} --model mini --steps 1 --batch 2 --seq 16 --pipeline-stages 2
                 --micro-batches 2 --progress false
                 PROPERTIES LABELS "cli;mpi" ENVIRONMENT "${SDP_MPI_ENVIRONMENT}" TIMEOUT 120)
    # End to end: 2 ranks train mini on 2 stages by zb-h1 and write the
    # timeline files and metrics that test/cli/check_pipeline_run.sh checks,
    # sdp-pipeline reading the measured costs back. Registered directly, not
    # by the runner: the launcher flags are positional and may be empty,
    # which a list passed on to add_test would drop.
    add_test(NAME cli.pipeline_train_timeline
             COMMAND sh ${SDP_CLI_DIR}/check_pipeline_run.sh ${SDP_CLI_WORK}/pipeline_run
                     ${MPIEXEC_EXECUTABLE} "${MPIEXEC_NUMPROC_FLAG}" "${SDP_MPIEXEC_OVERSUBSCRIBE}"
                     ${SDP_TRAIN} ${SDP_PIPELINE})
    set_tests_properties(cli.pipeline_train_timeline PROPERTIES LABELS "cli;mpi"
                         ENVIRONMENT "${SDP_MPI_ENVIRONMENT}" TIMEOUT 300)
  else()
    message(STATUS "mpiexec not found: skipping the pipeline end-to-end test")
  endif()

  # An emulated rank other than 0 is the one process of its run: it reports.
  sdp_cli_case(emulated_rank_reports PASSES
               sh -c "\"$1\" --model tiny --strategy b-sdp --active-fraction 0.5 --emulate-world 4 --emulate-rank 3 --dry-run | grep -F 'rank 3 of 4'"
               sh ${SDP_TRAIN})
  sdp_cli_case(help_lists_every_flag PASSES sh ${SDP_CLI_DIR}/check_help.sh ${SDP_TRAIN})
  # sdp-train writes a sharded checkpoint that sdp-export turns into the hf
  # form and sdp-train resumes; an hf checkpoint is refused by sdp-export.
  if(TARGET sdp-export)
    set(export_work ${SDP_CLI_WORK}/export)
    set(export_flags "--model tiny --batch 2 --seq 16 --eval-every 0 --progress false")
    sdp_cli_case(export_sharded_checkpoint PASSES
                 sh -c "rm -rf \"$1\" && \"$2\" $4 --steps 2 --checkpoint-format sharded --save-dir \"$1/ck\" && \"$3\" \"$1/ck\" \"$1/hf\" --max-shard-size 100KB && test -f \"$1/hf/model.safetensors.index.json\" && \"$2\" $4 --steps 3 --resume \"$1/hf\""
                 sh ${export_work} ${SDP_TRAIN} ${SDP_EXPORT} "${export_flags}"
                 PROPERTIES FIXTURES_SETUP export_checkpoints)
    sdp_cli_case(export_refuses_hf_checkpoint FAILS
                 "is not a sharded checkpoint (it has no sdp_shards.json)"
                 ${SDP_EXPORT} ${export_work}/hf ${export_work}/again
                 PROPERTIES FIXTURES_REQUIRED export_checkpoints)
  endif()
endif()