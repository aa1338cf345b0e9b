# The one runner of the command-line cases: each row of the tables
# (train_cases.cmake, plan_cases.cmake, pipeline_tool_cases.cmake) is one
# call that registers the ctest entry cli.<name>.
#
#   sdp_cli_case(<name> <expectation> <command...> [ABSENT <path>]
#                [PROPERTIES <property> <value>...])
#
# <expectation>, what the command must do:
#   FAILS <text>          exit non-zero, not by a signal, with <text> on stderr
#                         (expect_fail.sh)
#   EXITS <status> <text> exit with exactly <status>, with <text> on stderr
#                         (expect_status.sh)
#   PRINTS <regex>        exit 0 with output that matches <regex>
#   PASSES                exit 0 (the command checks what it needs itself)
# ABSENT <path>: a path of the case's own, removed before the run
# (with_absent_path.sh), for the cases of a missing file or directory.
# Every case is labelled cli and runs with one OpenMP thread (ctest runs
# entries side by side); PROPERTIES adds to those or overrides them.
# ${SDP_TRAIN}, ${SDP_PLAN}, ${SDP_PIPELINE} and ${SDP_EXPORT} name the
# built tools in a command. Arguments keep any ';' in them (PARSE_ARGV).
set(SDP_CLI_DIR ${CMAKE_CURRENT_LIST_DIR})
set(SDP_CLI_WORK ${CMAKE_CURRENT_BINARY_DIR}/cli)
file(MAKE_DIRECTORY ${SDP_CLI_WORK})
set(SDP_TRAIN $<TARGET_FILE:sdp-train>)
set(SDP_PLAN $<TARGET_FILE:sdp-plan>)
set(SDP_PIPELINE $<TARGET_FILE:sdp-pipeline>)
set(SDP_EXPORT $<TARGET_FILE:sdp-export>)

function(sdp_cli_case name expectation)
  if(expectation STREQUAL "FAILS" OR expectation STREQUAL "PRINTS")
    set(first_command_arg 3)
  elseif(expectation STREQUAL "EXITS")
    set(first_command_arg 4)
  elseif(expectation STREQUAL "PASSES")
    set(first_command_arg 2)
  else()
    message(FATAL_ERROR "sdp_cli_case(${name}): expectation '${expectation}' is none of "
                        "FAILS, EXITS, PRINTS, PASSES")
  endif()
  cmake_parse_arguments(PARSE_ARGV ${first_command_arg} case "" "ABSENT" "PROPERTIES")
  set(command "${case_UNPARSED_ARGUMENTS}")
  set(absent)
  if(case_ABSENT)
    set(absent sh ${SDP_CLI_DIR}/with_absent_path.sh ${case_ABSENT})
  endif()
  set(properties LABELS cli ENVIRONMENT "OMP_NUM_THREADS=1")
  if(expectation STREQUAL "FAILS")
    add_test(NAME cli.${name}
             COMMAND ${absent} sh ${SDP_CLI_DIR}/expect_fail.sh "${ARGV2}" ${command})
  elseif(expectation STREQUAL "EXITS")
    add_test(NAME cli.${name}
             COMMAND ${absent} sh ${SDP_CLI_DIR}/expect_status.sh ${ARGV2} "${ARGV3}" ${command})
  else()
    add_test(NAME cli.${name} COMMAND ${absent} ${command})
    if(expectation STREQUAL "PRINTS")
      list(APPEND properties PASS_REGULAR_EXPRESSION "${ARGV2}")
    endif()
  endif()
  set_tests_properties(cli.${name} PROPERTIES ${properties} ${case_PROPERTIES})
endfunction()
