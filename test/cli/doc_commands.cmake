# Every command the README, docs/ and the READMEs beside the code show for
# the tools works with the tools as built (check_doc_commands.py says how
# each is checked): a documented command that no longer works fails here.
# Included from test/CMakeLists.txt.
if(TARGET sdp-train AND TARGET sdp-plan AND TARGET sdp-pipeline AND TARGET sdp-export
   AND SDP_PYTHON3)
  sdp_cli_case(doc_commands PASSES
               ${SDP_PYTHON3} ${SDP_CLI_DIR}/check_doc_commands.py
               $<TARGET_FILE_DIR:sdp-train> ${CMAKE_SOURCE_DIR})
endif()
