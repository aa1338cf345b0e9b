#pragma once
// Per-host-thread state of the emulated runtime API: the current device and
// the last error (what cudaGetLastError returns and clears).
#include <cuda_runtime_api.h>

namespace sdp::emu {

int current_device();
void set_current_device(int device);

// Records a failed call's status for cudaGetLastError and returns it.
cudaError_t note_status(cudaError_t status);
cudaError_t take_last_error();
cudaError_t peek_last_error();

// One line on stderr, prefixed with the emulator's name (a message the real
// runtime would not print, but that names what was wrong).
void say(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace sdp::emu
