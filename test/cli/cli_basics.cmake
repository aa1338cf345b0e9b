# What every tool's command line shares (apps/cli_common.h): --version names
# the version and the backends of the build, a mistyped flag is answered
# with the nearest known one, and sdp-train's --help shows each default.
# Included from test/CMakeLists.txt.
if(TARGET sdp-train AND TARGET sdp-plan AND TARGET sdp-pipeline AND TARGET sdp-export)
  foreach(tool train plan pipeline export)
    string(TOUPPER ${tool} tool_var)
    sdp_cli_case(version_${tool} PRINTS "^sdp-${tool} [0-9]+\\.[0-9]+\\.[0-9]+ \\(CPU backend"
                 ${SDP_${tool_var}} --version)
  endforeach()
  # sdp-train's bad flags are permanent errors (exit 3: sdp-run does not retry them).
  sdp_cli_case(unknown_flag_suggests_nearest EXITS 3
               "sdp-train: unknown flag --stpes: did you mean --steps?"
               ${SDP_TRAIN} --model tiny --stpes 3)
  sdp_cli_case(unknown_flag_with_value_suggests_nearest EXITS 3
               "sdp-train: unknown flag --active-fracton=0.5: did you mean --active-fraction?"
               ${SDP_TRAIN} --model tiny --active-fracton=0.5)
  sdp_cli_case(plan_unknown_flag_suggests_nearest FAILS
               "sdp-plan: unknown flag --strateiges: did you mean --strategies?"
               ${SDP_PLAN} --model tiny --world 4 --strateiges ddp)
  sdp_cli_case(pipeline_unknown_flag_suggests_nearest EXITS 2
               "sdp-pipeline: unknown flag --schedlue: did you mean --schedule?"
               ${SDP_PIPELINE} --schedlue gpipe)
  sdp_cli_case(help_shows_defaults PRINTS "--steps INT:[^\n]*=[0-9]+" ${SDP_TRAIN} --help)
endif()
