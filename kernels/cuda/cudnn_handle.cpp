#ifdef SDP_HAVE_CUDNN

#include "kernels/cuda/cudnn_handle.h"

#include <map>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/stream.h"

namespace sdp::cuda {
namespace {

// One thread's handles, by device. A handle is not safe to share between
// threads that queue work at the same time, hence one per thread; the
// destructor runs at thread exit (for the main thread: before the CUDA
// runtime's own teardown at process exit, so the destroy calls still find a
// live context).
class ThreadHandles {
 public:
  ThreadHandles() = default;
  ThreadHandles(const ThreadHandles&) = delete;
  ThreadHandles& operator=(const ThreadHandles&) = delete;
  ~ThreadHandles() {
    // Never throws; a failed destroy only leaks host and device memory that
    // the process is about to give back anyway.
    for (auto& [device, handle] : by_device_) cudnnDestroy(handle);
  }

  cudnnHandle_t for_device(int device) {
    auto it = by_device_.find(device);
    if (it != by_device_.end()) return it->second;
    cudnnHandle_t handle = nullptr;
    CUDNN_CHECK(cudnnCreate(&handle));
    by_device_.emplace(device, handle);
    return handle;
  }

 private:
  std::map<int, cudnnHandle_t> by_device_;
};

}  // namespace

cudnnHandle_t cudnn_handle() {
  thread_local ThreadHandles handles;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  cudnnHandle_t handle = handles.for_device(device);
  CUDNN_CHECK(cudnnSetStream(handle, compute_stream()));
  return handle;
}

}  // namespace sdp::cuda

#endif  // SDP_HAVE_CUDNN
