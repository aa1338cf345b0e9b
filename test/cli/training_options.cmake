# The flags of config fields that several tools take have one help text
# (apps/training_options.cpp): each tool's --help is checked against that
# table, so no tool can describe a shared field its own way.
# Included from test/CMakeLists.txt.
if(TARGET sdp-train AND TARGET sdp-plan AND TARGET sdp-pipeline AND SDP_PYTHON3)
  sdp_cli_case(shared_flags_one_help_text PASSES
               ${SDP_PYTHON3} ${SDP_CLI_DIR}/check_shared_help.py
               ${CMAKE_SOURCE_DIR}/apps/training_options.cpp ${SDP_TRAIN} ${SDP_PLAN} ${SDP_PIPELINE})
endif()
