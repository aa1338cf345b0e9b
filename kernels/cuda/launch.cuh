#pragma once
// Every kernel launch goes through launch<Kernel>(...): under nvcc it is the
// `<<<grid, block, shared_bytes, stream>>>` form, unchanged; in the emulated
// build (SDP_CUDA_EMULATION) the emulated device runs the grid on the host
// with CUDA's execution model and checks the launch. One helper at every
// launch site keeps the real build and the emulated one the same code.
//
//   launch<scale_kernel<T>>(blocks, kThreads, 0, stream, x, y, n);
//
// Dynamic shared memory is declared with SDP_DYNAMIC_SHARED(type, name):
// `extern __shared__` under nvcc, the block's own buffer in the emulator.
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

// A kernel with __launch_bounds__(N) states N again as its first statement,
// SDP_LAUNCH_BOUNDS_CHECK(N): nothing under nvcc (the GPU refuses a larger
// block itself); in the emulated build a larger block is reported, since the
// attribute leaves nothing the host compiler can read.
#ifdef SDP_CUDA_EMULATION
#include "cuda_emulator/device/launch.h"
#define SDP_LAUNCH_BOUNDS_CHECK(max_threads) \
  ::sdp::emu::check_launch_bounds(max_threads, std::source_location::current())
#define SDP_DYNAMIC_SHARED(type, name) \
  type* const name = static_cast<type*>(::sdp::emu::dynamic_shared_memory())
#else
#define SDP_LAUNCH_BOUNDS_CHECK(max_threads) static_assert((max_threads) > 0)
#define SDP_DYNAMIC_SHARED(type, name) extern __shared__ __align__(16) type name[]
#endif

namespace sdp::cuda {

template <auto Kernel, typename... Args>
void launch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream, Args&&... args) {
#ifdef SDP_CUDA_EMULATION
  ::sdp::emu::launch_kernel<Kernel>(grid, block, shared_bytes, stream, std::forward<Args>(args)...);
#else
  Kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
#endif
}

}  // namespace sdp::cuda
