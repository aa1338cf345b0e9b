// CUDA token embedding: one block per token row (grid-stride over rows),
// threads across the row. Rows move in 16-byte packs when every row starts
// 16-byte aligned.
#include "kernels/cuda/embedding.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <mutex>

#include "kernels/cuda/bf16_math.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/stream.h"

namespace sdp::cuda {
namespace {

constexpr int64_t kMaxBlocks = int64_t{1} << 20;  // rows beyond: grid-stride
constexpr unsigned long long kNoBadToken = ~0ull;

// Smallest row index holding an out-of-range token since the last check
// (kNoBadToken: none). Guarded by flag_mutex() from launch to check.
__device__ unsigned long long g_first_bad_token = kNoBadToken;

std::mutex& flag_mutex() {
  static std::mutex m;
  return m;
}

// 16 bytes of T: the unit of one vector load or store.
template <typename T>
struct alignas(16) Pack {
  static constexpr int kSize = 16 / sizeof(T);
  T v[kSize];
};

__device__ __forceinline__ bool valid_token(int32_t token, int64_t vocab) {
  return token >= 0 && token < vocab;
}

// out[row] = table[tokens[row]] for rows [0, n) of width d.
template <typename T>
__global__ void embedding_forward_kernel(const int32_t* tokens, const T* table, T* out, int64_t n,
                                         int64_t vocab, int64_t d, bool packed) {
  constexpr int K = Pack<T>::kSize;
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
    const int32_t token = tokens[row];
    if (!valid_token(token, vocab)) {
      if (threadIdx.x == 0) atomicMin(&g_first_bad_token, static_cast<unsigned long long>(row));
      continue;
    }
    const T* src = table + static_cast<int64_t>(token) * d;
    T* dst = out + row * d;
    if (packed) {  // d % K == 0 and both rows 16-byte aligned
      const Pack<T>* s = reinterpret_cast<const Pack<T>*>(src);
      Pack<T>* o = reinterpret_cast<Pack<T>*>(dst);
      for (int64_t k = threadIdx.x; k < d / K; k += blockDim.x) o[k] = s[k];
    } else {
      for (int64_t j = threadIdx.x; j < d; j += blockDim.x) dst[j] = src[j];
    }
  }
}

// dtable[tokens[row]] += dout[row] for rows [0, n) of width d.
template <typename T>
__global__ void embedding_backward_kernel(const int32_t* tokens, const T* dout, float* dtable,
                                          int64_t n, int64_t vocab, int64_t d) {
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
    const int32_t token = tokens[row];
    if (!valid_token(token, vocab)) {
      if (threadIdx.x == 0) atomicMin(&g_first_bad_token, static_cast<unsigned long long>(row));
      continue;
    }
    float* dst = dtable + static_cast<int64_t>(token) * d;
    const T* src = dout + row * d;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) atomicAdd(dst + j, to_f32(src[j]));
  }
}

// Threads per block for rows of `items` work items: whole warps, at most 256.
int row_threads(int64_t items) {
  return static_cast<int>(std::clamp<int64_t>((items + 31) / 32 * 32, 32, 256));
}

int row_blocks(int64_t rows) { return static_cast<int>(std::min(rows, kMaxBlocks)); }

// Reads the flag the kernels just set (waiting for the stream) and fails
// naming the first bad token; resets the flag for the next call.
void check_tokens(const Tensor& tokens, int64_t vocab, const char* op) {
  cudaStream_t stream = compute_stream();
  unsigned long long first_bad = kNoBadToken;
  CUDA_CHECK(cudaMemcpyFromSymbolAsync(&first_bad, g_first_bad_token, sizeof first_bad, 0,
                                       cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  if (first_bad == kNoBadToken) return;
  int32_t token = 0;
  CUDA_CHECK(cudaMemcpyAsync(&token, tokens.data<int32_t>() + first_bad, sizeof token,
                             cudaMemcpyDeviceToHost, stream));
  static const unsigned long long reset = kNoBadToken;
  CUDA_CHECK(cudaMemcpyToSymbolAsync(g_first_bad_token, &reset, sizeof reset, 0,
                                     cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  fail(op, ": token ", token, " at position ", first_bad, " is out of range (valid: 0 to ",
       vocab - 1, ", the table has ", vocab, " rows)");
}

}  // namespace

void embedding_forward(const Tensor& tokens, const Tensor& table, Tensor& out) {
  constexpr const char* op = "embedding_forward";
  const int64_t n = tokens.numel(), vocab = table.size(0), d = table.size(1);
  if (n == 0 || d == 0) return;
  std::lock_guard<std::mutex> lock(flag_mutex());
  on_cuda_float(table.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    constexpr int K = Pack<T>::kSize;
    const T* src = device_ptr<T>(table);
    T* dst = device_ptr<T>(out);
    const bool packed = d % K == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0 &&
                        reinterpret_cast<uintptr_t>(dst) % 16 == 0;
    launch<embedding_forward_kernel<T>>(row_blocks(n), row_threads(packed ? d / K : d), 0,
        compute_stream(), tokens.data<int32_t>(), src, dst, n, vocab, d, packed);
    SDP_CUDA_LAUNCH_CHECK("embedding_forward_kernel");
  });
  check_tokens(tokens, vocab, op);
}

void embedding_backward_weight(const Tensor& tokens, const Tensor& dout, Tensor& dtable) {
  constexpr const char* op = "embedding_backward_weight";
  const int64_t n = tokens.numel(), vocab = dtable.size(0), d = dtable.size(1);
  if (n == 0 || d == 0) return;
  std::lock_guard<std::mutex> lock(flag_mutex());
  on_cuda_float(dout.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    launch<embedding_backward_kernel<T>>(row_blocks(n), row_threads(d), 0, compute_stream(),
        tokens.data<int32_t>(), device_ptr<T>(dout), dtable.data<float>(), n, vocab, d);
    SDP_CUDA_LAUNCH_CHECK("embedding_backward_kernel");
  });
  check_tokens(tokens, vocab, op);
}

}  // namespace sdp::cuda
