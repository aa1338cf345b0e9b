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
  # Every paper table in one command, printed (about 10 s of meta steps):
  # the three groups, and the headline ordering holding in every LLaMA table.
  sdp_cli_case(bench_paper_tables PRINTS
               "## SDP dry-run planner tables.*## The paper's composition figure.*holds.*## CIFAR image models"
               ${SDP_PYTHON3} ${CMAKE_SOURCE_DIR}/bench/paper_tables.py
               --bin-dir $<TARGET_FILE_DIR:sdp-plan> PROPERTIES LABELS "cli;bench")
  sdp_cli_case(bench_paper_tables_unknown FAILS "unknown table(s) accuracy (valid: llama, composition, vision)"
               ${SDP_PYTHON3} ${CMAKE_SOURCE_DIR}/bench/paper_tables.py --only accuracy
               --bin-dir $<TARGET_FILE_DIR:sdp-plan> PROPERTIES LABELS "cli;bench")
endif()
