#pragma once
// What the emulated vendor libraries (cuBLASLt, cuDNN, NCCL) need from the
// emulated CUDA runtime: device-memory checks, work queued in stream order,
// and one way to report a fault the emulator found.
//
// Stream work runs in stream order: `start` is called once every operation it
// must follow (earlier work on its stream, work on streams it waited for
// through events, the legacy default stream's implicit barriers) has
// finished. That may be inside submit() itself (the stream is idle) or later,
// from whichever runtime call drives progress (a query, a synchronize, the
// next submit). Everything `start` and `finished` use must therefore be
// captured by value: descriptors, sizes, host scalars (alpha, beta) are read
// at submit time, never through a pointer the caller may have freed.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace sdp::emu {

enum class AccessKind { read, write };

// One range of device memory an operation reads or writes; `role` names it in
// reports ("A", "D", "sendbuff", "dy").
struct DeviceAccess {
  const void* ptr = nullptr;
  size_t bytes = 0;
  AccessKind kind = AccessKind::read;
  std::string role;
};

struct StreamWork {
  std::string name;                    // "cublasLtMatmul", "ncclAllReduce"
  std::vector<DeviceAccess> accesses;  // checked for stream-order races
  std::function<void()> start;         // runs once, in stream order
  // Polled after start until it returns true (communication in flight);
  // empty: the work is finished when start returns.
  std::function<bool()> finished;
};

// Queues work on `stream` (0, cudaStreamLegacy and cudaStreamPerThread mean
// the legacy default stream). Every access must lie inside one live device
// allocation, else the call fails with cudaErrorInvalidValue and a message on
// stderr naming the work, the role and the pointer.
cudaError_t submit(cudaStream_t stream, StreamWork work);

// Empty when [ptr, ptr + bytes) lies inside one live device allocation of
// this process; otherwise a sentence saying what is wrong with it.
std::string check_device_range(const void* ptr, size_t bytes);

// A fault the emulator found in the code it runs (a race between streams, a
// barrier not every thread reached, an illegal access, a library call with
// arguments the real library would reject as undefined).
struct Fault : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Reports such a fault. By default the report goes to stderr and the process
// aborts, as a GPU fault ends the process's use of the device; with
// set_faults_throw(true) (the emulator's own tests) it throws Fault instead.
[[noreturn]] void fault(const std::string& report);
void set_faults_throw(bool on);

}  // namespace sdp::emu
