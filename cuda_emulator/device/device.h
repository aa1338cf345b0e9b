#pragma once
// The device side of the emulated CUDA device: what a .cu file sees when the
// host compiler builds it for the emulator (the build force-includes this
// header first; see kernels/cuda/CMakeLists.txt). Qualifiers become plain C++
// (a __shared__ variable is one per block because the threads of a block are
// fibers of one host thread), the built-in variables read the running
// thread's coordinates, and barriers, warp shuffles and the one tensor-core
// instruction are collective operations of the block scheduler
// (cuda_emulator/runtime/thread_block.cpp), which reports a barrier or
// shuffle that cannot complete as a fault naming kernel, block and thread.
#if defined(__CUDACC__)
#error "cuda_emulator/device/device.h is for the host compiler's emulated build, not nvcc"
#endif

// Qualifiers, defined before the toolkit's host_defines.h (which keeps a
// definition it finds).
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __grid_constant__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// One variable per block: the block's threads are fibers of one host thread,
// and blocks that run at the same time run on different host threads.
#define __shared__ static thread_local

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <source_location>
#include <type_traits>

namespace sdp::emu {

// Coordinates of the device thread running on this host thread, set by the
// block scheduler before it switches into the thread's fiber.
struct ThreadCoordinates {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
};

extern thread_local const ThreadCoordinates* current_coordinates
    __attribute__((tls_model("initial-exec")));

inline const ThreadCoordinates& coordinates() { return *current_coordinates; }

// Block-wide barrier; `site` names the __syncthreads in reports (threads of
// one block must meet at the same one).
void block_barrier(std::source_location site);

// The collective operations of the threads of one warp named by `mask`.
// Every lane named in the mask must make the same call with the same mask;
// a lane missing from it (exited, or waiting elsewhere) is a fault.
enum class WarpOp : int { sync, shfl_xor, shfl_index, shfl_down, shfl_up, ballot, any, all };
// `value` holds up to 8 bytes of the lane's operand; `arg` the lane mask,
// source lane or delta; the result is the value taken from the source lane
// (or the ballot).
uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int arg, int width,
                         std::source_location site);

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 for the calling warp:
// d += A B with the PTX ISA's fragment layouts (a: 4 registers of two bf16,
// b: 2, c/d: 4 floats per lane). All 32 lanes take part.
void mma_m16n8k16_row_col_f32_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                   std::source_location site = std::source_location::current());

// The calling block's dynamic shared memory (the launch's shared_bytes).
void* dynamic_shared_memory();

// A kernel declared __launch_bounds__(max_threads) launched with a larger
// block: on a GPU the launch fails; here the kernel's first thread reports
// it (the attribute itself leaves no trace the host compiler can read).
void check_launch_bounds(int max_threads, std::source_location site);

// __trap(): ends the kernel with a fault naming it, the block and the thread.
[[noreturn]] void device_trap(std::source_location site);

template <typename T>
uint64_t to_lane_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "warp operands up to 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}
template <typename T>
T from_lane_bits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}

}  // namespace sdp::emu

// ---- the runtime's C++ overloads that the toolkit declares for nvcc only ----------
template <typename T>
cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const T& symbol, size_t count, size_t offset = 0,
                                      cudaMemcpyKind kind = cudaMemcpyDeviceToHost,
                                      cudaStream_t stream = 0) {
  return ::cudaMemcpyFromSymbolAsync(dst, static_cast<const void*>(&symbol), count, offset, kind,
                                     stream);
}
template <typename T>
cudaError_t cudaMemcpyToSymbolAsync(const T& symbol, const void* src, size_t count,
                                    size_t offset = 0, cudaMemcpyKind kind = cudaMemcpyHostToDevice,
                                    cudaStream_t stream = 0) {
  return ::cudaMemcpyToSymbolAsync(static_cast<const void*>(&symbol), src, count, offset, kind,
                                   stream);
}
template <typename T>
cudaError_t cudaFuncSetAttribute(T* entry, cudaFuncAttribute attr, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(entry), attr, value);
}

// ---- built-in variables --------------------------------------------------------
#define threadIdx (::sdp::emu::coordinates().thread_idx)
#define blockIdx (::sdp::emu::coordinates().block_idx)
#define blockDim (::sdp::emu::coordinates().block_dim)
#define gridDim (::sdp::emu::coordinates().grid_dim)
#define warpSize 32

// ---- synchronization -------------------------------------------------------------
inline void __syncthreads(std::source_location site = std::source_location::current()) {
  ::sdp::emu::block_barrier(site);
}
inline void __syncwarp(unsigned mask = 0xffffffffu,
                       std::source_location site = std::source_location::current()) {
  ::sdp::emu::warp_collective(::sdp::emu::WarpOp::sync, mask, 0, 0, 32, site);
}
// One host thread runs a block's fibers in turn, so every store is visible to
// the next fiber that runs: the fences order nothing further.
inline void __threadfence() {}
inline void __threadfence_block() {}

// ---- warp shuffles and votes ---------------------------------------------------------
template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32,
                  std::source_location site = std::source_location::current()) {
  return ::sdp::emu::from_lane_bits<T>(::sdp::emu::warp_collective(
      ::sdp::emu::WarpOp::shfl_xor, mask, ::sdp::emu::to_lane_bits(var), lane_mask, width, site));
}
template <typename T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32,
              std::source_location site = std::source_location::current()) {
  return ::sdp::emu::from_lane_bits<T>(::sdp::emu::warp_collective(
      ::sdp::emu::WarpOp::shfl_index, mask, ::sdp::emu::to_lane_bits(var), src_lane, width, site));
}
template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32,
                   std::source_location site = std::source_location::current()) {
  return ::sdp::emu::from_lane_bits<T>(
      ::sdp::emu::warp_collective(::sdp::emu::WarpOp::shfl_down, mask,
                                  ::sdp::emu::to_lane_bits(var), static_cast<int>(delta), width, site));
}
template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32,
                 std::source_location site = std::source_location::current()) {
  return ::sdp::emu::from_lane_bits<T>(
      ::sdp::emu::warp_collective(::sdp::emu::WarpOp::shfl_up, mask,
                                  ::sdp::emu::to_lane_bits(var), static_cast<int>(delta), width, site));
}
inline unsigned __ballot_sync(unsigned mask, int predicate,
                              std::source_location site = std::source_location::current()) {
  return static_cast<unsigned>(::sdp::emu::warp_collective(
      ::sdp::emu::WarpOp::ballot, mask, predicate != 0, 0, 32, site));
}
inline int __any_sync(unsigned mask, int predicate,
                      std::source_location site = std::source_location::current()) {
  return static_cast<int>(::sdp::emu::warp_collective(::sdp::emu::WarpOp::any, mask,
                                                      predicate != 0, 0, 32, site));
}
inline int __all_sync(unsigned mask, int predicate,
                      std::source_location site = std::source_location::current()) {
  return static_cast<int>(::sdp::emu::warp_collective(::sdp::emu::WarpOp::all, mask,
                                                      predicate != 0, 0, 32, site));
}

// ---- integer and bit intrinsics --------------------------------------------------------
inline int __popc(unsigned x) { return std::popcount(x); }
inline int __popcll(unsigned long long x) { return std::popcount(x); }
inline int __clz(int x) { return std::countl_zero(static_cast<unsigned>(x)); }
inline int __ffs(int x) { return x == 0 ? 0 : std::countr_zero(static_cast<unsigned>(x)) + 1; }
inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline int __float_as_int(float x) { return std::bit_cast<int>(x); }
inline float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }
inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
template <typename T>
T __ldg(const T* p) {
  return *p;
}
inline void __trap_at(std::source_location site) { ::sdp::emu::device_trap(site); }
#define __trap() __trap_at(std::source_location::current())

// ---- fast math: the emulator computes them exactly (a GPU's approximations
// differ by a few ulp, inside every CUDA test's tolerance) ------------------------------
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float x) { return fminf(fmaxf(x, 0.0f), 1.0f); }

// CUDA's global min and max overloads for device code.
#define SDP_EMU_MIN_MAX(T)                                   \
  inline T min(T a, T b) { return b < a ? b : a; }          \
  inline T max(T a, T b) { return a < b ? b : a; }
SDP_EMU_MIN_MAX(int)
SDP_EMU_MIN_MAX(unsigned)
SDP_EMU_MIN_MAX(long)
SDP_EMU_MIN_MAX(unsigned long)
SDP_EMU_MIN_MAX(long long)
SDP_EMU_MIN_MAX(unsigned long long)
SDP_EMU_MIN_MAX(float)
SDP_EMU_MIN_MAX(double)
#undef SDP_EMU_MIN_MAX

// ---- atomics ---------------------------------------------------------------------------
// Threads of the emulated device are fibers switched only at barriers and
// warp collectives, but blocks of separate launches may run on separate host
// threads, so the read-modify-writes are real atomics.
template <typename T>
T atomicAdd(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_add(value);
}
template <typename T>
T atomicSub(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_sub(value);
}
template <typename T>
T atomicExch(T* address, T value) {
  return std::atomic_ref<T>(*address).exchange(value);
}
template <typename T>
T atomicCAS(T* address, T compare, T value) {
  std::atomic_ref<T>(*address).compare_exchange_strong(compare, value);
  return compare;  // the old value either way
}
template <typename T>
T atomicMin(T* address, T value) {
  std::atomic_ref<T> ref(*address);
  T old = ref.load();
  while (value < old && !ref.compare_exchange_weak(old, value)) {
  }
  return old;
}
template <typename T>
T atomicMax(T* address, T value) {
  std::atomic_ref<T> ref(*address);
  T old = ref.load();
  while (value > old && !ref.compare_exchange_weak(old, value)) {
  }
  return old;
}
