# Checkpoint integrity: a flipped byte, a negative second moment, a
# non-finite update, an index whose dtype, shapes, names or integers are
# wrong; each refused naming the file or tensor, by sdp-train and sdp-export
# alike, and `latest` never advanced past a bad update
# (test/cli/check_checkpoint_integrity.sh, which damages a tiny checkpoint
# with test/cli/corrupt_checkpoint.py).
if(TARGET sdp-train AND TARGET sdp-export AND SDP_PYTHON3)
  foreach(integrity_case hf_flip_model hf_flip_optimizer sharded_flip hf_negative_second_moment
                         sharded_negative_second_moment hf_nonfinite_update index_dtype_q7
                         index_dtype_f64 sharded_header_shape index_is_directory
                         chunk_nul_in_name chunk_axis_beyond_int)
    add_test(NAME cli.checkpoint_integrity.${integrity_case}
             COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/check_checkpoint_integrity.sh
                     ${integrity_case} ${CMAKE_CURRENT_BINARY_DIR}/cli/checkpoint_integrity
                     $<TARGET_FILE:sdp-train> $<TARGET_FILE:sdp-export>)
    set_tests_properties(cli.checkpoint_integrity.${integrity_case} PROPERTIES
                         LABELS cli ENVIRONMENT "OMP_NUM_THREADS=1;SDP_PYTHON3=${SDP_PYTHON3}")
  endforeach()
  # The same bad update on the CUDA device (the emulated one in the
  # sanitizer build); Skipped where no GPU is usable.
  if(SDP_HAVE_CUDA)
    add_test(NAME cli.checkpoint_integrity.cuda_nonfinite_update
             COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/check_checkpoint_integrity.sh
                     cuda_nonfinite_update ${CMAKE_CURRENT_BINARY_DIR}/cli/checkpoint_integrity
                     $<TARGET_FILE:sdp-train> $<TARGET_FILE:sdp-export>)
    set_tests_properties(cli.checkpoint_integrity.cuda_nonfinite_update PROPERTIES
                         LABELS "cli;cuda" SKIP_RETURN_CODE 77
                         ENVIRONMENT "OMP_NUM_THREADS=1;SDP_PYTHON3=${SDP_PYTHON3}")
  endif()
endif()
