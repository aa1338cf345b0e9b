// Memory calls of the emulated runtime: allocation against the device's
// capacity, copies and fills in stream order with the stream-order checker
// told what each touches. Host memory is pageable (the engine pins none), so
// as CUDA documents for pageable memory a host-to-device copy takes its
// source at the call and a device-to-host copy has finished when the call
// returns.
#include <cuda_runtime_api.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cuda_emulator/runtime/api_state.h"
#include "cuda_emulator/runtime/device_memory.h"
#include "cuda_emulator/runtime/emulator_config.h"
#include "cuda_emulator/runtime/stream_engine.h"

namespace {

using sdp::emu::AccessKind;
using sdp::emu::DeviceAccess;
using sdp::emu::note_status;
using sdp::emu::say;
using sdp::emu::StreamWork;

bool is_device(const void* p) { return sdp::emu::find_allocation(p).has_value(); }

const char* kind_name(cudaMemcpyKind kind) {
  switch (kind) {
    case cudaMemcpyHostToHost: return "cudaMemcpyHostToHost";
    case cudaMemcpyHostToDevice: return "cudaMemcpyHostToDevice";
    case cudaMemcpyDeviceToHost: return "cudaMemcpyDeviceToHost";
    case cudaMemcpyDeviceToDevice: return "cudaMemcpyDeviceToDevice";
    case cudaMemcpyDefault: return "cudaMemcpyDefault";
  }
  return "an unknown cudaMemcpyKind";
}

// Checks that each side of a copy is the memory its kind says, and resolves
// cudaMemcpyDefault from the pointers.
cudaError_t resolve_kind(const char* call, void* dst, const void* src, size_t count,
                         cudaMemcpyKind& kind) {
  const bool dst_device = is_device(dst), src_device = is_device(src);
  if (kind == cudaMemcpyDefault)
    kind = dst_device ? (src_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                      : (src_device ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  const bool want_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool want_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) {
    say("%s: kind %d is not a cudaMemcpyKind", call, static_cast<int>(kind));
    return cudaErrorInvalidMemcpyDirection;
  }
  if (want_dst != dst_device || want_src != src_device) {
    say("%s(dst %p, src %p, %zu bytes, %s): the destination is %s memory and the source %s "
        "memory, which is not what the kind says",
        call, dst, src, count, kind_name(kind), dst_device ? "device" : "host",
        src_device ? "device" : "host");
    return cudaErrorInvalidValue;
  }
  for (const void* p : {static_cast<const void*>(dst), src}) {
    if (!is_device(p)) continue;
    const std::string problem = sdp::emu::check_device_range(p, count);
    if (!problem.empty()) {
      say("%s of %zu bytes: %s", call, count, problem.c_str());
      return cudaErrorInvalidValue;
    }
  }
  return cudaSuccess;
}

cudaError_t copy(const char* call, void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                 cudaStream_t stream, bool wait_for_it) {
  if (count == 0) return cudaSuccess;
  if (!dst || !src) {
    say("%s: a null pointer (dst %p, src %p)", call, dst, static_cast<const void*>(src));
    return cudaErrorInvalidValue;
  }
  if (const cudaError_t status = resolve_kind(call, dst, src, count, kind); status != cudaSuccess)
    return status;
  StreamWork work;
  work.name = call;
  if (kind == cudaMemcpyHostToDevice) {
    // Pageable source: staged at the call, the caller may reuse it at once.
    auto staged = std::make_shared<std::vector<unsigned char>>(
        static_cast<const unsigned char*>(src), static_cast<const unsigned char*>(src) + count);
    work.accesses.push_back(DeviceAccess{dst, count, AccessKind::write, "dst"});
    work.start = [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); };
  } else {
    if (kind != cudaMemcpyHostToHost)
      work.accesses.push_back(DeviceAccess{src, count, AccessKind::read, "src"});
    if (kind == cudaMemcpyDeviceToDevice)
      work.accesses.push_back(DeviceAccess{dst, count, AccessKind::write, "dst"});
    work.start = [dst, src, count] { std::memmove(dst, src, count); };
    wait_for_it = wait_for_it || kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost;
  }
  return wait_for_it ? sdp::emu::submit_and_wait(stream, std::move(work))
                     : sdp::emu::submit(stream, std::move(work));
}

cudaError_t fill(const char* call, void* p, int value, size_t count, cudaStream_t stream,
                 bool wait_for_it) {
  if (count == 0) return cudaSuccess;
  const std::string problem = sdp::emu::check_device_range(p, count);
  if (!problem.empty()) {
    say("%s of %zu bytes: %s", call, count, problem.c_str());
    return cudaErrorInvalidValue;
  }
  StreamWork work;
  work.name = call;
  work.accesses.push_back(DeviceAccess{p, count, AccessKind::write, "devPtr"});
  work.start = [p, value, count] { std::memset(p, value, count); };
  return wait_for_it ? sdp::emu::submit_and_wait(stream, std::move(work))
                     : sdp::emu::submit(stream, std::move(work));
}

// __device__ variables are ordinary host globals in the emulated build: a
// symbol copy is a copy in stream order on the symbol's bytes. (The checker
// does not track them: kernels reach them by name, not through an argument.)
cudaError_t symbol_copy(const char* call, void* dst, const void* src, size_t count,
                        cudaStream_t stream, bool to_host) {
  if (count == 0) return cudaSuccess;
  StreamWork work;
  work.name = call;
  work.start = [dst, src, count] { std::memmove(dst, src, count); };
  return to_host ? sdp::emu::submit_and_wait(stream, std::move(work))
                 : sdp::emu::submit(stream, std::move(work));
}

}  // namespace

extern "C" {

cudaError_t cudaMalloc(void** devPtr, size_t size) {
  if (!devPtr) return note_status(cudaErrorInvalidValue);
  *devPtr = nullptr;
  if (size == 0) return cudaSuccess;
  const int device = sdp::emu::current_device();
  void* p = sdp::emu::allocate_device(device, size);
  if (!p) {
    say("cudaMalloc of %zu bytes: device %d is full (%zu of %zu bytes in use; "
        "SDP_CUDA_EMULATOR_MEMORY sets its size)",
        size, device, sdp::emu::device_used(device), sdp::emu::device_capacity(device));
    return note_status(cudaErrorMemoryAllocation);
  }
  *devPtr = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void* devPtr) {
  if (!devPtr) return cudaSuccess;
  const auto range = sdp::emu::find_allocation(devPtr);
  if (!range || range->begin != reinterpret_cast<uintptr_t>(devPtr)) {
    say("cudaFree(%p): not the start of a live cudaMalloc allocation", devPtr);
    return note_status(cudaErrorInvalidValue);
  }
  // cudaFree waits for the device: nothing queued may still use the memory.
  sdp::emu::synchronize_device();
  sdp::emu::forget_accesses(range->begin, range->end);
  sdp::emu::free_device(devPtr);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  if (!free || !total) return note_status(cudaErrorInvalidValue);
  const int device = sdp::emu::current_device();
  *total = sdp::emu::device_capacity(device);
  *free = *total - sdp::emu::device_used(device);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  return note_status(copy("cudaMemcpy", dst, src, count, kind, nullptr, true));
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  return note_status(copy("cudaMemcpyAsync", dst, src, count, kind, stream, false));
}

cudaError_t cudaMemset(void* devPtr, int value, size_t count) {
  return note_status(fill("cudaMemset", devPtr, value, count, nullptr, true));
}

cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream) {
  return note_status(fill("cudaMemsetAsync", devPtr, value, count, stream, false));
}

cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const void* symbol, size_t count, size_t offset,
                                      cudaMemcpyKind kind, cudaStream_t stream) {
  if (kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDefault) {
    say("cudaMemcpyFromSymbolAsync: kind %s is not emulated (valid: cudaMemcpyDeviceToHost, "
        "cudaMemcpyDefault)", kind_name(kind));
    return note_status(cudaErrorInvalidMemcpyDirection);
  }
  return note_status(symbol_copy("cudaMemcpyFromSymbolAsync", dst,
                                 static_cast<const char*>(symbol) + offset, count, stream, true));
}

cudaError_t cudaMemcpyToSymbolAsync(const void* symbol, const void* src, size_t count,
                                    size_t offset, cudaMemcpyKind kind, cudaStream_t stream) {
  if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDefault) {
    say("cudaMemcpyToSymbolAsync: kind %s is not emulated (valid: cudaMemcpyHostToDevice, "
        "cudaMemcpyDefault)", kind_name(kind));
    return note_status(cudaErrorInvalidMemcpyDirection);
  }
  // Pageable source: staged at the call.
  auto staged = std::make_shared<std::vector<unsigned char>>(
      static_cast<const unsigned char*>(src), static_cast<const unsigned char*>(src) + count);
  void* dst = const_cast<char*>(static_cast<const char*>(symbol)) + offset;
  StreamWork work;
  work.name = "cudaMemcpyToSymbolAsync";
  work.start = [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); };
  return note_status(sdp::emu::submit(stream, std::move(work)));
}

}  // extern "C"
