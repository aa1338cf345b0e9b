#include "cuda_emulator/runtime/api_state.h"

#include <cstdarg>
#include <cstdio>

namespace sdp::emu {

namespace {
thread_local int device = 0;
thread_local cudaError_t last_error = cudaSuccess;
}  // namespace

int current_device() { return device; }
void set_current_device(int d) { device = d; }

cudaError_t note_status(cudaError_t status) {
  if (status != cudaSuccess && status != cudaErrorNotReady) last_error = status;
  return status;
}

cudaError_t take_last_error() {
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

cudaError_t peek_last_error() { return last_error; }

void say(const char* format, ...) {
  std::va_list args;
  va_start(args, format);
  std::fputs("sdp emulated CUDA device: ", stderr);
  std::vfprintf(stderr, format, args);
  std::fputc('\n', stderr);
  va_end(args);
}

}  // namespace sdp::emu
