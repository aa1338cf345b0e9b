#pragma once
// Settings of the emulated device, read once from the environment:
//   SDP_CUDA_EMULATOR_DEVICES   devices per process (default 8, as on one
//                               HGX node, so that rank r of a job gets its own;
//                               0 is a machine without a GPU)
//   SDP_CUDA_EMULATOR_MEMORY    bytes per device, with an optional K/M/G/T
//                               suffix or KiB/MiB/GiB/TiB (default 16GiB)
//   SDP_CUDA_EMULATOR_TIMEOUT   seconds a synchronizing call waits for work
//                               that cannot finish (a peer that never joins
//                               a collective) before it reports it (default 600)
//   SDP_CUDA_EMULATOR_STACK_KIB stack of each device thread (default 256)
#include <cstddef>

namespace sdp::emu {

struct EmulatorConfig {
  int device_count = 8;
  size_t device_memory_bytes = size_t{16} << 30;
  double timeout_seconds = 600;
};

const EmulatorConfig& config();

}  // namespace sdp::emu
