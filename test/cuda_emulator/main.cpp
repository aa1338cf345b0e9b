// Entry point of the emulated device's own tests. Faults the emulator
// reports throw here (instead of aborting), so a test can show that a broken
// kernel or a missing stream wait is caught.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "cuda_emulator/runtime/stream_work.h"

int main(int argc, char** argv) {
  sdp::emu::set_faults_throw(true);
  return Catch::Session().run(argc, argv);
}
