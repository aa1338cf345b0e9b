# The bench scripts a user runs against the built tools: they must keep up
# with the binaries' output formats. Labelled bench too: the sanitizer run
# leaves them out (they run the same binaries the other cases check, and a
# Debug + ASan planner would spend minutes on the paper's dry runs).
# Included from test/CMakeLists.txt.
if(TARGET sdp-train AND TARGET sdp-plan AND SDP_PYTHON3)
  # bench/plot_convergence.py (its summary; the plot needs matplotlib) on two
  # short runs laid out as bench/convergence.sh lays them out.
  sdp_cli_case(bench_plot_convergence_summary PASSES
               sh ${SDP_CLI_DIR}/check_plot_convergence.sh ${SDP_PYTHON3} ${SDP_TRAIN}
               ${CMAKE_SOURCE_DIR} PROPERTIES LABELS "cli;bench")
  # bench/plot_quality.py's table on two seeds of a short LLaMA run.
  sdp_cli_case(bench_plot_quality_summary PASSES
               sh ${SDP_CLI_DIR}/check_plot_quality.sh ${SDP_PYTHON3} ${SDP_TRAIN}
               ${CMAKE_SOURCE_DIR} PROPERTIES LABELS "cli;bench")
  # bench/quality_study.sh's plan (runs nothing): DDP once per seed, every
  # SDP variant at every C, the equal-FLOPs runs at STEPS / C steps, DDP's
  # control run at the steps of C = 3/8; a bad model name is refused before
  # anything runs.
  sdp_cli_case(bench_quality_study_list PRINTS
               "^llama equal_steps ddp 1 1 80\nllama equal_steps b-sdp 0.75 1 80\n.*llama equal_flops nb-sdp 0.375 1 213\nllama equal_flops ddp 0.375 1 213\nresnet equal_steps ddp 1 1 80\n.*resnet equal_flops nb-sdp 0.375 3 213\nresnet equal_flops ddp 0.375 3 213\n$"
               bash ${CMAKE_SOURCE_DIR}/bench/quality_study.sh --list PROPERTIES LABELS "cli;bench")
  sdp_cli_case(bench_quality_study_bad_model FAILS "MODELS has 'gpt' (valid: llama, resnet)"
               ${CMAKE_COMMAND} -E env MODELS=gpt bash ${CMAKE_SOURCE_DIR}/bench/quality_study.sh --list
               PROPERTIES LABELS "cli;bench")
  # Every paper table in one command, printed (about 15 s of meta steps):
  # the four groups (the --paper presets first, each with the paper's
  # figures beside ours), and the headline ordering holding in every LLaMA
  # table.
  sdp_cli_case(bench_paper_tables PRINTS
               "## The paper's setups.*Against the SDP paper: LLaMA-1B composition.*## SDP dry-run planner tables.*## The paper's composition figure.*holds.*## CIFAR image models"
               ${SDP_PYTHON3} ${CMAKE_SOURCE_DIR}/bench/paper_tables.py
               --bin-dir $<TARGET_FILE_DIR:sdp-plan> PROPERTIES LABELS "cli;bench")
  sdp_cli_case(bench_paper_tables_unknown FAILS "unknown table(s) accuracy (valid: presets, llama, composition, vision)"
               ${SDP_PYTHON3} ${CMAKE_SOURCE_DIR}/bench/paper_tables.py --only accuracy
               --bin-dir $<TARGET_FILE_DIR:sdp-plan> PROPERTIES LABELS "cli;bench")
endif()
