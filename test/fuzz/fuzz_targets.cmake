# The libFuzzer targets of test/fuzz (fuzz_<name>.cpp each), read by the
# fuzz project (CMakeLists.txt) and the ctest entries (fuzz_tests.cmake).
set(SDP_FUZZ_TARGETS safetensors llmc_shard cifar_binary json_config schedule plan calibration)
