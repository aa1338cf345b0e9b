# sdp-export never deletes what it did not write: it refuses its own save
# directory and an unrelated non-empty directory, leaving every file as it
# was; --force adds its files beside others; an earlier export is replaced
# whole (test/cli/check_export_safety.sh).
if(TARGET sdp-train AND TARGET sdp-export)
  set(export_safety_work ${CMAKE_CURRENT_BINARY_DIR}/cli/export_safety)
  foreach(export_case make own_save_dir foreign_dir force_beside reexport)
    add_test(NAME cli.export_safety.${export_case}
             COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/check_export_safety.sh ${export_case}
                     ${export_safety_work} $<TARGET_FILE:sdp-train> $<TARGET_FILE:sdp-export>)
    set_tests_properties(cli.export_safety.${export_case} PROPERTIES LABELS cli
                         ENVIRONMENT "OMP_NUM_THREADS=1")
    if(export_case STREQUAL "make")
      set_tests_properties(cli.export_safety.make PROPERTIES
                           FIXTURES_SETUP export_safety_checkpoints)
    else()
      set_tests_properties(cli.export_safety.${export_case} PROPERTIES
                           FIXTURES_REQUIRED export_safety_checkpoints)
    endif()
  endforeach()
endif()
