#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "cuda_emulator/runtime/stream_work.h"

namespace sdp::emu {

namespace {
std::atomic<bool> faults_throw{false};
}

void set_faults_throw(bool on) { faults_throw = on; }

void fault(const std::string& report) {
  if (faults_throw) throw Fault(report);
  std::fprintf(stderr, "sdp emulated CUDA device: fault: %s\n", report.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace sdp::emu
