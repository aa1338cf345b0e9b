# ctest entries (label fuzz) for the libFuzzer targets of test/fuzz: one
# fixture builds them with clang into <build>/fuzz, then each target runs
# for SDP_FUZZ_SECONDS on its seed corpus and fails on any finding. Where
# clang or libFuzzer is missing, every entry reports Skipped with the reason.
# 7 targets x 13 s (plus about 1 s each to start): no more wall time than
# the first four took at 25 s each.
set(SDP_FUZZ_SECONDS 13 CACHE STRING "Seconds each fuzz target runs under ctest")
set(SDP_FUZZ_DIR ${CMAKE_CURRENT_LIST_DIR})
set(SDP_FUZZ_BUILD ${CMAKE_BINARY_DIR}/fuzz)

add_test(NAME fuzz.build
         COMMAND sh ${SDP_FUZZ_DIR}/build_fuzzers.sh ${CMAKE_SOURCE_DIR} ${SDP_FUZZ_BUILD}
                 "${CMAKE_CXX_COMPILER_LAUNCHER}")
set_tests_properties(fuzz.build PROPERTIES LABELS fuzz FIXTURES_SETUP sdp_fuzz_targets
                     SKIP_RETURN_CODE 77 TIMEOUT 1200)

# CIFAR inputs hold whole 3073-byte records: room for a few.
set(SDP_FUZZ_MAX_LEN_cifar_binary 16384)
include(${SDP_FUZZ_DIR}/fuzz_targets.cmake)
foreach(target ${SDP_FUZZ_TARGETS})
  set(max_len 8192)
  if(DEFINED SDP_FUZZ_MAX_LEN_${target})
    set(max_len ${SDP_FUZZ_MAX_LEN_${target}})
  endif()
  add_test(NAME fuzz.${target}
           COMMAND sh ${SDP_FUZZ_DIR}/run_fuzzer.sh ${SDP_FUZZ_BUILD} ${target}
                   ${SDP_FUZZ_DIR}/corpus/${target} ${SDP_FUZZ_SECONDS} -max_len=${max_len})
  math(EXPR timeout "${SDP_FUZZ_SECONDS} * 3 + 60")
  set_tests_properties(fuzz.${target} PROPERTIES LABELS fuzz FIXTURES_REQUIRED sdp_fuzz_targets
                       SKIP_RETURN_CODE 77 TIMEOUT ${timeout})
endforeach()
