# The training order flag (sdp-train --shuffle, config field shuffle): a bad
# value names what is valid, false reaches the config and the data source,
# and a run says the order it reads in. Included from test/CMakeLists.txt.
if(TARGET sdp-train)
  sdp_cli_case(shuffle_bad_value FAILS "--shuffle: 'maybe' is invalid (valid: true or false)"
               ${SDP_TRAIN} --shuffle maybe)
  file(WRITE ${SDP_CLI_WORK}/shuffle_string.json "{\"shuffle\": \"no\"}\n")
  sdp_cli_case(shuffle_config_wrong_type FAILS
               "--config '${SDP_CLI_WORK}/shuffle_string.json': field 'shuffle' has the wrong type (string \"no\""
               ${SDP_TRAIN} --config ${SDP_CLI_WORK}/shuffle_string.json)
  sdp_cli_case(shuffle_false_in_config PRINTS "\"shuffle\": false"
               ${SDP_TRAIN} --shuffle false --print-config)
  set(_text_run --model tiny --data text:${CMAKE_SOURCE_DIR}/docs/training.md --steps 1 --batch 2
                --seq 16 --eval-every 0 --progress false)
  sdp_cli_case(shuffle_default_text PRINTS "windows shuffled each epoch \\(seed 1234\\)"
               ${SDP_TRAIN} ${_text_run})
  sdp_cli_case(shuffle_false_text PRINTS "file order \\(unshuffled\\)"
               ${SDP_TRAIN} ${_text_run} --shuffle false)
endif()
