// The emulated device's execution model: kernels written as for nvcc (the
// launch helper, __shared__, barriers, warp shuffles, the tensor-core
// instruction) give the results CUDA defines, and the faults a GPU would
// turn into a hang or garbage are reports naming kernel, block and thread.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda_emulator/runtime/stream_work.h"
#include "kernels/cuda/launch.cuh"

namespace {

using sdp::cuda::launch;

template <typename T>
T* device_copy(const std::vector<T>& host) {
  T* p = nullptr;
  REQUIRE(cudaMalloc(&p, host.size() * sizeof(T)) == cudaSuccess);
  REQUIRE(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  return p;
}

template <typename T>
std::vector<T> host_copy(const T* p, size_t n) {
  std::vector<T> host(n);
  REQUIRE(cudaMemcpy(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
  return host;
}

// Block-wide reversal through static shared memory: wrong without the barrier.
__global__ void reverse_block(const int* in, int* out) {
  __shared__ int tile[256];
  const unsigned i = threadIdx.x;
  tile[i] = in[blockIdx.x * blockDim.x + i];
  __syncthreads();
  out[blockIdx.x * blockDim.x + i] = tile[blockDim.x - 1 - i];
}

// The same with the barrier forgotten: later threads read slots not yet written.
__global__ void reverse_block_no_barrier(const int* in, int* out) {
  __shared__ int tile[256];
  const unsigned i = threadIdx.x;
  tile[i] = in[blockIdx.x * blockDim.x + i];
  out[blockIdx.x * blockDim.x + i] = tile[blockDim.x - 1 - i];
}

// Warp sum by xor shuffles, then the warps' sums through dynamic shared memory.
__global__ void block_sum(const float* in, float* out) {
  SDP_DYNAMIC_SHARED(float, warp_sums);
  float v = in[blockIdx.x * blockDim.x + threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0;
    for (unsigned w = 0; w < blockDim.x / 32; ++w) total += warp_sums[w];
    out[blockIdx.x] = total;
  }
}

__global__ void shuffle_variants(int* out) {
  const int lane = static_cast<int>(threadIdx.x);
  out[lane] = __shfl_sync(0xffffffffu, lane * 10, 7);               // broadcast lane 7
  out[32 + lane] = __shfl_down_sync(0xffffffffu, lane, 3);          // lane + 3, or own at the end
  out[64 + lane] = __shfl_up_sync(0xffffffffu, lane, 2, 8);         // within groups of 8
  out[96 + lane] = static_cast<int>(__ballot_sync(0xffffffffu, lane % 3 == 0) & 0xff);
}

__global__ void shuffle_half_warps(int* out) {
  const int lane = static_cast<int>(threadIdx.x);
  const unsigned mask = lane < 16 ? 0x0000ffffu : 0xffff0000u;
  out[lane] = __shfl_xor_sync(mask, lane, 1);
}

// Thread 0 leaves before the barrier the others wait at.
__global__ void barrier_not_reached(int* out) {
  if (threadIdx.x == 0) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

// Even and odd threads wait at different barriers.
__global__ void divergent_barriers(int* out) {
  if (threadIdx.x % 2 == 0) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

// Lanes 16..31 skip the shuffle that names them in its mask.
__global__ void shuffle_missing_lanes(int* out) {
  int v = static_cast<int>(threadIdx.x);
  if (threadIdx.x < 16) v = __shfl_xor_sync(0xffffffffu, v, 1);
  out[threadIdx.x] = v;
}

__global__ void uses_dynamic_shared(int* out) {
  SDP_DYNAMIC_SHARED(int, scratch);
  scratch[threadIdx.x] = 1;
  out[threadIdx.x] = scratch[threadIdx.x];
}

__global__ void __launch_bounds__(64) bounded_kernel(int* out) {
  SDP_LAUNCH_BOUNDS_CHECK(64);
  out[threadIdx.x] = 1;
}

__global__ void atomic_histogram(const int* values, int* bins, int n) {
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < n;
       i += static_cast<int>(gridDim.x * blockDim.x))
    atomicAdd(bins + values[i] % 4, 1);
}

__global__ void index_coordinates(unsigned* out) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned per_block = blockDim.x * blockDim.y * blockDim.z;
  out[block * per_block + thread] = block * 1000 + thread;
}

uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
float bf16_value(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// One m16n8k16 product: A [16][16] row-major, B given as [8][16] (column n
// of B is row n), C [16][8]; each lane loads its fragments per the PTX layout.
__global__ void mma_once(const uint16_t* a, const uint16_t* bt, const float* c, float* d) {
  const unsigned lane = threadIdx.x, g = lane / 4, t = lane % 4;
  auto pair = [](const uint16_t* p) {
    return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 16);
  };
  const uint32_t fa[4] = {pair(a + g * 16 + 2 * t), pair(a + (g + 8) * 16 + 2 * t),
                          pair(a + g * 16 + 2 * t + 8), pair(a + (g + 8) * 16 + 2 * t + 8)};
  const uint32_t fb[2] = {pair(bt + g * 16 + 2 * t), pair(bt + g * 16 + 2 * t + 8)};
  float acc[4] = {c[g * 8 + 2 * t], c[g * 8 + 2 * t + 1], c[(g + 8) * 8 + 2 * t],
                  c[(g + 8) * 8 + 2 * t + 1]};
  ::sdp::emu::mma_m16n8k16_row_col_f32_bf16(acc, fa, fb);
  d[g * 8 + 2 * t] = acc[0];
  d[g * 8 + 2 * t + 1] = acc[1];
  d[(g + 8) * 8 + 2 * t] = acc[2];
  d[(g + 8) * 8 + 2 * t + 1] = acc[3];
}

std::string fault_text(const std::function<void()>& f) {
  try {
    f();
  } catch (const sdp::emu::Fault& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("emulated kernels: barriers order a block's shared memory", "[emulated][execution]") {
  std::vector<int> in(512);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>(i);
  int* d_in = device_copy(in);
  int* d_out = device_copy(std::vector<int>(512, -1));
  launch<reverse_block>(2, 256, 0, nullptr, d_in, d_out);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  auto out = host_copy(d_out, 512);
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 256; ++i) REQUIRE(out[static_cast<size_t>(b * 256 + i)] == b * 256 + 255 - i);
  // Without the barrier the fibers run one after another, so thread i reads
  // a slot thread 255 - i has not written yet when i < 128: wrong results,
  // as on a GPU.
  launch<reverse_block_no_barrier>(2, 256, 0, nullptr, d_in, d_out);
  out = host_copy(d_out, 512);
  int wrong = 0;
  for (int i = 0; i < 256; ++i) wrong += out[static_cast<size_t>(i)] != 255 - i;
  CHECK(wrong > 0);
  cudaFree(d_in);
  cudaFree(d_out);
}

TEST_CASE("emulated kernels: shuffles, dynamic shared memory and coordinates", "[emulated][execution]") {
  std::vector<float> in(3 * 128);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 7) - 2.5f;
  float* d_in = device_copy(in);
  float* d_out = device_copy(std::vector<float>(3, 0.f));
  launch<block_sum>(3, 128, 4 * sizeof(float), nullptr, d_in, d_out);
  auto sums = host_copy(d_out, 3);
  for (int b = 0; b < 3; ++b) {
    double expected = 0;
    for (int i = 0; i < 128; ++i) expected += in[static_cast<size_t>(b * 128 + i)];
    CHECK(sums[static_cast<size_t>(b)] == Approx(expected));
  }

  int* d_variants = device_copy(std::vector<int>(128, -1));
  launch<shuffle_variants>(1, 32, 0, nullptr, d_variants);
  auto v = host_copy(d_variants, 128);
  for (int lane = 0; lane < 32; ++lane) {
    CHECK(v[static_cast<size_t>(lane)] == 70);
    CHECK(v[static_cast<size_t>(32 + lane)] == (lane + 3 < 32 ? lane + 3 : lane));
    CHECK(v[static_cast<size_t>(64 + lane)] == (lane % 8 < 2 ? lane : lane - 2));
    CHECK(v[static_cast<size_t>(96 + lane)] == 0x49);  // lanes 0, 3, 6 of the low byte
  }

  int* d_halves = device_copy(std::vector<int>(32, -1));
  launch<shuffle_half_warps>(1, 32, 0, nullptr, d_halves);
  auto halves = host_copy(d_halves, 32);
  for (int lane = 0; lane < 32; ++lane) CHECK(halves[static_cast<size_t>(lane)] == (lane ^ 1));

  unsigned* d_ids = nullptr;
  const dim3 grid(2, 3, 2), block(4, 2, 3);
  const size_t total = 12 * 24;
  REQUIRE(cudaMalloc(&d_ids, total * sizeof(unsigned)) == cudaSuccess);
  launch<index_coordinates>(grid, block, 0, nullptr, d_ids);
  auto ids = host_copy(d_ids, total);
  for (size_t i = 0; i < total; ++i) CHECK(ids[i] == (i / 24) * 1000 + i % 24);

  std::vector<int> values(1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int>(i * 7);
  int* d_values = device_copy(values);
  int* d_bins = device_copy(std::vector<int>(4, 0));
  launch<atomic_histogram>(3, 64, 0, nullptr, d_values, d_bins, 1000);
  auto bins = host_copy(d_bins, 4);
  std::vector<int> expected(4, 0);
  for (int x : values) ++expected[static_cast<size_t>(x % 4)];
  CHECK(bins == expected);
  for (void* p : {static_cast<void*>(d_in), static_cast<void*>(d_out), static_cast<void*>(d_variants),
                  static_cast<void*>(d_halves), static_cast<void*>(d_ids),
                  static_cast<void*>(d_values), static_cast<void*>(d_bins)})
    cudaFree(p);
}

TEST_CASE("emulated kernels: mma.sync m16n8k16 follows the PTX fragment layouts", "[emulated][execution]") {
  std::vector<uint16_t> a(256), bt(128);
  std::vector<float> c(128);
  for (int i = 0; i < 256; ++i) a[static_cast<size_t>(i)] = bf16_bits(static_cast<float>((i * 37) % 11) - 5.f);
  for (int i = 0; i < 128; ++i) bt[static_cast<size_t>(i)] = bf16_bits(0.25f * static_cast<float>((i * 13) % 9) - 1.f);
  for (int i = 0; i < 128; ++i) c[static_cast<size_t>(i)] = 0.5f * static_cast<float>(i % 5);
  uint16_t* d_a = device_copy(a);
  uint16_t* d_bt = device_copy(bt);
  float* d_c = device_copy(c);
  float* d_d = device_copy(std::vector<float>(128, 0.f));
  launch<mma_once>(1, 32, 0, nullptr, d_a, d_bt, d_c, d_d);
  auto d = host_copy(d_d, 128);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      double expected = c[static_cast<size_t>(i * 8 + j)];
      for (int k = 0; k < 16; ++k)
        expected += static_cast<double>(bf16_value(a[static_cast<size_t>(i * 16 + k)])) *
                    bf16_value(bt[static_cast<size_t>(j * 16 + k)]);
      CHECK(d[static_cast<size_t>(i * 8 + j)] == Approx(expected).margin(1e-5));
    }
  for (void* p : {static_cast<void*>(d_a), static_cast<void*>(d_bt), static_cast<void*>(d_c),
                  static_cast<void*>(d_d)})
    cudaFree(p);
}

TEST_CASE("emulated kernels: a barrier or shuffle that cannot complete is a fault naming it",
          "[emulated][execution]") {
  int* d_out = device_copy(std::vector<int>(64, 0));
  std::string report = fault_text([&] { launch<barrier_not_reached>(1, 64, 0, nullptr, d_out); });
  CHECK_THAT(report, Catch::Contains("barrier_not_reached"));
  CHECK_THAT(report, Catch::Contains("block (0,0,0)"));
  CHECK_THAT(report, Catch::Contains("threads 1-63 (of 64"));
  CHECK_THAT(report, Catch::Contains("threads 0 have exited"));

  report = fault_text([&] { launch<divergent_barriers>(1, 64, 0, nullptr, d_out); });
  CHECK_THAT(report, Catch::Contains("must meet at the same barrier"));

  report = fault_text([&] { launch<shuffle_missing_lanes>(1, 32, 0, nullptr, d_out); });
  CHECK_THAT(report, Catch::Contains("shuffle_missing_lanes"));
  CHECK_THAT(report, Catch::Contains("lanes 0-15 wait in __shfl_xor_sync"));
  CHECK_THAT(report, Catch::Contains("lanes 16-31 never arrive"));

  report = fault_text([&] { launch<shuffle_missing_lanes>(1, 24, 0, nullptr, d_out); });
  CHECK_THAT(report, Catch::Contains("has only 24 lanes"));
  cudaFree(d_out);
}

TEST_CASE("emulated kernels: launch limits are launch errors naming the kernel", "[emulated][execution]") {
  int* d_out = device_copy(std::vector<int>(2048, 0));
  REQUIRE(cudaGetLastError() == cudaSuccess);
  launch<uses_dynamic_shared>(1, 1025, 1025 * 4, nullptr, d_out);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  launch<uses_dynamic_shared>(0, 32, 128, nullptr, d_out);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  launch<uses_dynamic_shared>(dim3(1, 70000), 32, 128, nullptr, d_out);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  // More dynamic shared memory than 48 KiB needs the kernel's opt-in.
  launch<uses_dynamic_shared>(1, 32, 64 * 1024, nullptr, d_out);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  REQUIRE(cudaFuncSetAttribute(reinterpret_cast<const void*>(&uses_dynamic_shared),
                               cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024) == cudaSuccess);
  launch<uses_dynamic_shared>(1, 32, 64 * 1024, nullptr, d_out);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(&uses_dynamic_shared),
                             cudaFuncAttributeMaxDynamicSharedMemorySize, 300 * 1024) ==
        cudaErrorInvalidValue);
  cudaGetLastError();
  // A kernel that uses dynamic shared memory launched with none.
  const std::string report =
      fault_text([&] { launch<uses_dynamic_shared>(1, 32, 0, nullptr, d_out); });
  CHECK_THAT(report, Catch::Contains("asked for 0 bytes"));
  // More threads than the kernel's __launch_bounds__.
  launch<bounded_kernel>(1, 64, 0, nullptr, d_out);
  CHECK_THAT(fault_text([&] { launch<bounded_kernel>(1, 128, 0, nullptr, d_out); }),
             Catch::Contains("more than its __launch_bounds__(64)"));
  // A host pointer as a kernel argument.
  std::vector<int> host(32);
  CHECK_THAT(fault_text([&] { launch<uses_dynamic_shared>(1, 32, 128, nullptr, host.data()); }),
             Catch::Contains("is not device memory"));
  cudaFree(d_out);
}
