// Kernel launches on the emulated device: the configuration is checked as
// the GPU checks it (a bad one is the launch error cudaGetLastError returns,
// with a line saying which limit and which kernel), the pointer arguments
// become the accesses the stream-order checker sees, and the grid runs in
// stream order (thread_block.cpp).
#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <string>

#include "cuda_emulator/device/launch.h"
#include "cuda_emulator/runtime/api_state.h"
#include "cuda_emulator/runtime/device_memory.h"
#include "cuda_emulator/runtime/device_views.h"
#include "cuda_emulator/runtime/emulated_limits.h"
#include "cuda_emulator/runtime/stream_engine.h"
#include "cuda_emulator/runtime/thread_block.h"

namespace sdp::emu {

namespace {

std::mutex attribute_mutex;
std::map<const void*, int> dynamic_shared_limits;  // per kernel, set by cudaFuncSetAttribute

int dynamic_shared_limit(const void* kernel) {
  std::lock_guard lock(attribute_mutex);
  auto it = dynamic_shared_limits.find(kernel);
  return it == dynamic_shared_limits.end() ? limits::kDefaultDynamicShared : it->second;
}

std::string dims(dim3 d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

// Why the configuration is invalid, or empty.
std::string configuration_problem(const KernelLaunch& l, cudaError_t& status) {
  status = cudaErrorInvalidConfiguration;
  const dim3 b = l.block, g = l.grid;
  if (b.x == 0 || b.y == 0 || b.z == 0) return "block " + dims(b) + " has a zero dimension";
  if (b.x > 1024 || b.y > 1024 || b.z > 64)
    return "block " + dims(b) + " exceeds the per-dimension limits (1024, 1024, 64)";
  const unsigned long long threads = 1ull * b.x * b.y * b.z;
  if (threads > static_cast<unsigned long long>(limits::kMaxThreadsPerBlock))
    return "block " + dims(b) + " has " + std::to_string(threads) + " threads, more than " +
           std::to_string(limits::kMaxThreadsPerBlock);
  if (g.x == 0 || g.y == 0 || g.z == 0) return "grid " + dims(g) + " has a zero dimension";
  if (g.x > 2147483647u || g.y > 65535 || g.z > 65535)
    return "grid " + dims(g) + " exceeds the limits (2147483647, 65535, 65535)";
  const int limit = dynamic_shared_limit(l.kernel);
  if (l.shared_bytes > static_cast<size_t>(limit)) {
    status = cudaErrorInvalidValue;
    return std::to_string(l.shared_bytes) + " bytes of dynamic shared memory exceed the kernel's " +
           std::to_string(limit) + (limit == limits::kDefaultDynamicShared
                                        ? " (raise it with cudaFuncSetAttribute"
                                          "(cudaFuncAttributeMaxDynamicSharedMemorySize))"
                                        : " (its cudaFuncAttributeMaxDynamicSharedMemorySize)");
  }
  status = cudaSuccess;
  return "";
}

}  // namespace

std::string kernel_name_from_signature(std::string_view f) {
  // GCC: "... [with auto Kernel = ns::name<args>; ...]"; Clang: "[Kernel = &ns::name<args>]".
  size_t at = f.find("Kernel = ");
  if (at == std::string_view::npos) return std::string(f);
  at += 9;
  if (at < f.size() && f[at] == '&') ++at;
  int depth = 0;
  size_t end = at;
  for (; end < f.size(); ++end) {
    const char c = f[end];
    if (c == '<' || c == '(' || c == '[') ++depth;
    else if ((c == '>' || c == ')') && depth > 0) --depth;
    else if (c == ']' && depth == 0) break;
    else if (c == ']') --depth;
    else if (c == ';' && depth == 0) break;
  }
  // Kernels in unnamed namespaces read better without the compiler's tag.
  std::string name(f.substr(at, end - at));
  for (const std::string tag : {"{anonymous}::", "(anonymous namespace)::"})
    for (size_t p = name.find(tag); p != std::string::npos; p = name.find(tag))
      name.erase(p, tag.size());
  return name;
}

void submit_launch(KernelLaunch launch) {
  cudaError_t status = cudaSuccess;
  const std::string problem = configuration_problem(launch, status);
  if (!problem.empty()) {
    say("launch of kernel %s: %s", launch.name.c_str(), problem.c_str());
    note_status(status);
    return;
  }
  StreamWork work;
  work.name = "kernel " + launch.name;
  for (const KernelPointerArgument& p : launch.pointers) {
    if (!p.pointer) continue;
    const auto block = find_block(p.pointer);
    if (!block) {
      // A GPU would fault on the first access; the emulator says so at the
      // launch, naming the argument.
      fault("kernel " + launch.name + ": argument " + std::to_string(p.index) + " (" +
            std::to_string(reinterpret_cast<uintptr_t>(p.pointer)) +
            ") is not device memory (no live cudaMalloc holds it)");
    }
    const auto begin = reinterpret_cast<uintptr_t>(p.pointer);
    // The tensor the pointer came from, when the host code noted it and it
    // lies inside the block; else the rest of the block.
    size_t bytes = block->end - begin;
    if (const auto view = noted_view_bytes(p.pointer); view && *view <= bytes) bytes = *view;
    work.accesses.push_back(DeviceAccess{p.pointer, bytes,
                                         p.writes ? AccessKind::write : AccessKind::read,
                                         "argument " + std::to_string(p.index)});
  }
  clear_device_views();
  auto shared = std::make_shared<const KernelLaunch>(std::move(launch));
  work.start = [shared] { run_grid(*shared); };
  note_status(submit(shared->stream, std::move(work)));
}

}  // namespace sdp::emu

extern "C" cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  using namespace sdp::emu;
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) {
    say("cudaFuncSetAttribute: attribute %d is not emulated (emulated: "
        "cudaFuncAttributeMaxDynamicSharedMemorySize)", static_cast<int>(attr));
    return note_status(cudaErrorInvalidValue);
  }
  if (value < 0 || value > limits::kMaxDynamicSharedOptIn) {
    say("cudaFuncSetAttribute: %d bytes of dynamic shared memory (valid: 0 to %d)", value,
        limits::kMaxDynamicSharedOptIn);
    return note_status(cudaErrorInvalidValue);
  }
  std::lock_guard lock(attribute_mutex);
  dynamic_shared_limits[func] = value;
  return cudaSuccess;
}
