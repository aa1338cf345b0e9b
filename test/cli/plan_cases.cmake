# The sdp-plan command line, one row per case (the runner and its
# expectations: test/cli/cli_case.cmake): its figures match the plan's
# analytic volume and ownership (check_plan.py), every format renders, bad
# input names the flag.
if(TARGET sdp-plan)
  sdp_cli_case(plan_bad_strategy FAILS
               "--strategies item 'foo:0.5': strategy 'foo' is invalid (valid: ddp, fsdp, b-sdp, n-sdp, bb-sdp, nb-sdp; an item is name[:C][+fsdp|+zero1|+zero2|+zero3][+ac|+ac:K])"
               ${SDP_PLAN} --model mini --world 4 --strategies ddp,foo:0.5)
  sdp_cli_case(plan_bad_composition FAILS
               "--strategies item 'b-sdp:0.5+zero4': '+zero4' is invalid (valid after the strategy: +fsdp or +zero3"
               ${SDP_PLAN} --model mini --world 4 --strategies b-sdp:0.5+zero4)
  sdp_cli_case(plan_fsdp_other_shard FAILS
               "--strategies item 'fsdp+zero2': fsdp means --shard full; for '+zero2' use ddp+zero2"
               ${SDP_PLAN} --model mini --world 4 --strategies fsdp+zero2)
  sdp_cli_case(plan_bad_fraction FAILS "--strategies item 'b-sdp:half': C = 'half' is not a number"
               ${SDP_PLAN} --model mini --world 4 --strategies b-sdp:half)
  sdp_cli_case(plan_impossible FAILS "gives each rank round(C K) = 0 of them"
               ${SDP_PLAN} --model mini --world 4 --strategies b-sdp:0.1)
  # Fractional C: 8 ranks at C = 0.6875 hold 11 of LLaMA-1B's 16 blocks
  # (5 or 6 owners each), the SDP paper's 1B setup, and save its 28%.
  sdp_cli_case(plan_fractional_c_1b PRINTS
               "[|] B-SDP [|] 0[.]6875 [|] 5[.][.]6/8 [|] 0[.][0-9]+ [|] 23[.]75 [|] 23[.]75 [|] 23[.]75 [|] 28[.]3% [|]"
               ${SDP_PLAN} --model llama-1b --world 8 --batch 8 --seq 1024
               --strategies ddp,b-sdp:0.6875)
  sdp_cli_case(plan_world_beyond_int FAILS
               "--world: '2147483648' is invalid (valid: an integer in [1, 65536])"
               ${SDP_PLAN} --model tiny --world 2147483648)
  sdp_cli_case(plan_seq_beyond_bound FAILS
               "--seq: '99999999999999999999' is invalid (valid: an integer in [1, 16777216])"
               ${SDP_PLAN} --model tiny --world 2 --seq 99999999999999999999)
  sdp_cli_case(plan_rank_memory_count FAILS
               "--rank-memory names 2 budgets for --world = 4 ranks"
               ${SDP_PLAN} --model mini --world 4 --rank-memory 40GiB,20GiB)
  sdp_cli_case(plan_rank_memory_bad_item FAILS "item 'twenty' is not a size or a number"
               ${SDP_PLAN} --model mini --world 2 --rank-memory 40GiB,twenty)
  sdp_cli_case(plan_fit_with_strategies FAILS "--fit searches every strategy"
               ${SDP_PLAN} --model mini --world 4 --fit 1GiB --strategies ddp)
  sdp_cli_case(plan_write_config_without_fit FAILS "--write-config needs --fit BUDGET"
               ${SDP_PLAN} --model mini --world 4 --write-config unused.json)
  sdp_cli_case(plan_write_plan_of_many FAILS "--write-plan writes the plan of one SDP item; --strategies has 2"
               ${SDP_PLAN} --model mini --world 4 --strategies b-sdp,n-sdp --write-plan unused.json)
  sdp_cli_case(plan_bad_bandwidth FAILS
               "--inter-node-bandwidth = 'fast' is invalid (valid: a positive number"
               ${SDP_PLAN} --model mini --world 4 --inter-node-bandwidth fast)
  sdp_cli_case(plan_bad_format FAILS "--format = 'xml' is invalid (valid: markdown, csv, json)"
               ${SDP_PLAN} --model mini --world 4 --format xml)
  # The largest world plans in bounded memory (here capped by ulimit -v at
  # about 3.8 GiB): one measured rank per class and a spectral gap on the
  # reduced matrix, never a rank x rank one. Sanitizers reserve far more
  # address space than that cap.
  if(NOT SDP_SANITIZE)
    sdp_cli_case(plan_world_65536 PRINTS "measured ranks of 327680 = 5 strategies x 65536 ranks"
                 sh -c "ulimit -v 4000000 && exec \"$@\"" sh ${SDP_PLAN} --model tiny --world 65536)
  endif()

  if(SDP_PYTHON3)
    sdp_cli_case(plan_matches_analytic PASSES
                 ${SDP_PYTHON3} ${SDP_CLI_DIR}/check_plan.py ${SDP_PLAN} mini 4)
    # bench/composition_table.py on one small configuration: it exits 0 and
    # prints that B-SDP+FSDP+AC < FSDP+AC < DDP holds (--check-ordering makes
    # a failed ordering exit 1 as well).
    sdp_cli_case(composition_table_ordering PASSES
                 sh -c "out=$(\"$1\" \"$2\" --sdp-plan \"$3\" --models llama-134m --worlds 8 --dtypes f32 --no-resnet --check-ordering) || exit 1; printf '%s\\n' \"$out\"; printf '%s\\n' \"$out\" | grep -F 'ordering B-SDP+FSDP+AC < FSDP+AC < DDP (peak max per rank): holds'"
                 sh ${SDP_PYTHON3} ${CMAKE_SOURCE_DIR}/bench/composition_table.py
                 ${SDP_PLAN} PROPERTIES TIMEOUT 60)
    # One measured rank per class of ranks (same plan row, stage and roots):
    # every copied rank's figures equal its own step (--every-rank).
    sdp_cli_case(plan_classes PASSES
                 ${SDP_PYTHON3} ${SDP_CLI_DIR}/check_plan_classes.py
                 ${SDP_PLAN} PROPERTIES TIMEOUT 120)
    # Ranks of unequal memory: weighted plans, each rank against its budget.
    sdp_cli_case(plan_rank_memory PASSES
                 ${SDP_PYTHON3} ${SDP_CLI_DIR}/check_plan_rank_memory.py ${SDP_PLAN})
    # A pipeline's plan: per rank its stage, M x boundary bytes to each
    # neighbour, and 2BP's stage-0 activation peak above 1F1B's (P = 2, 4).
    foreach(stages 2 4)
      sdp_cli_case(plan_pipeline_p${stages} PASSES
                   ${SDP_PYTHON3} ${SDP_CLI_DIR}/check_plan_pipeline.py ${SDP_PLAN} mini ${stages} 8)
    endforeach()
  else()
    message(STATUS "python3 not found: skipping the sdp-plan analytic tests")
  endif()
  sdp_cli_case(plan_pipeline_refuses_world FAILS
               "--world = 3 is not a multiple of --pipeline-stages = 2 (the world is P stages x D replicas; valid: 2, 4, 6, ...)"
               ${SDP_PLAN} --model mini --world 3 --pipeline-stages 2 --micro-batches 2)
  sdp_cli_case(plan_pipeline_refuses_stage_blocks FAILS
               "--stage-blocks 1,2: model mini has 4 blocks, and a pipeline of 2 stages needs 2 counts"
               ${SDP_PLAN} --model mini --world 2 --pipeline-stages 2 --micro-batches 2 --stage-blocks 1,2)
  # --plan file:PATH is the SDP rows' ownership: the DDP baseline stays DDP;
  # a block without an owner is refused by name, whichever row reads the
  # file (the DDP row alone reads it as a plan over the blocks).
  file(WRITE ${SDP_CLI_WORK}/plan_tiny_two_owners.json "{\"matrix\": [\"10\", \"10\", \"01\", \"01\"]}\n")
  file(WRITE ${SDP_CLI_WORK}/plan_tiny_unowned.json "{\"matrix\": [\"10\", \"10\", \"10\", \"10\"]}\n")
  sdp_cli_case(plan_file_baseline_stays_ddp PASSES
               sh ${SDP_CLI_DIR}/check_plan_file_baseline.sh ${SDP_PLAN}
               ${SDP_CLI_WORK}/plan_tiny_two_owners.json)
  sdp_cli_case(plan_file_unowned_block FAILS
               "--strategies item 'b-sdp:0.5': strategy B-SDP (C = 0.5, plan ${SDP_CLI_WORK}/plan_tiny_unowned.json) on 4 ranks with model tiny (2 block components): plan file '${SDP_CLI_WORK}/plan_tiny_unowned.json': component block.1 has no owner"
               ${SDP_PLAN} --model tiny --world 4 --strategies ddp,b-sdp:0.5
               --plan file:${SDP_CLI_WORK}/plan_tiny_unowned.json)
  sdp_cli_case(plan_file_unowned_block_ddp_row FAILS
               "strategy DDP on 4 ranks with model tiny (2 block components): plan file '${SDP_CLI_WORK}/plan_tiny_unowned.json': component block.1 has no owner"
               ${SDP_PLAN} --model tiny --world 4 --strategies ddp
               --plan file:${SDP_CLI_WORK}/plan_tiny_unowned.json)
  sdp_cli_case(plan_every_format PASSES
               sh -c "for f in markdown csv json; do \"$1\" --model tiny --world 2 --per-rank --format $f > /dev/null || exit 1; done"
               sh ${SDP_PLAN})
  # --paper: the paper's setups (apps/sdp-plan/paper_presets.cpp). The list
  # names every preset; a bad name is refused naming them; the composition
  # preset (its three rows only: --strategies overrides the preset, which
  # the report says) prints our peak beside the paper's.
  sdp_cli_case(plan_paper_list PRINTS
               "sdp-llama-134m[^#]*sdp-llama-500m[^#]*sdp-llama-1b[^#]*sdp-composition[^#]*sdp-resnet18[^#]*sdp-wrn18[^#]*sdp-swin-t"
               ${SDP_PLAN} --paper list)
  # Batched deferred weight gradients are planned like sdp-train runs them:
  # refused without a pipeline, their concatenation workspace counted with one.
  sdp_cli_case(plan_batched_w_needs_pipeline FAILS
               "deferred_weight_grads = 'batched' needs a pipeline (pipeline_stages > 1) with a split schedule"
               ${SDP_PLAN} --model tiny --world 2 --strategies ddp --deferred-weight-grads batched)
  sdp_cli_case(plan_paper_bad_name FAILS
               "--paper: 'sdp-llama-2b' is not a setup of the paper (valid: sdp-llama-134m, sdp-llama-500m, sdp-llama-1b, sdp-composition, sdp-resnet18, sdp-wrn18, sdp-swin-t; --paper list describes them)"
               ${SDP_PLAN} --paper sdp-llama-2b)
  sdp_cli_case(plan_paper_composition PRINTS
               "Given beside --paper, replacing the preset's: --strategies[^#]*\\| peak memory per GPU, B-SDP \\+ FSDP \\+ AC \\| 9.70 GB \\| 9.88 GiB \\|"
               ${SDP_PLAN} --paper sdp-composition --strategies ddp,fsdp+ac,b-sdp:0.6875+fsdp+ac)
endif()