#include "kernels/cuda/device_allocator.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/stream.h"

#ifdef SDP_CUDA_EMULATION
#include "cuda_emulator/runtime/device_memory.h"
#endif

namespace sdp::cuda {

namespace {

// Segments come straight from cudaMalloc; out-of-memory is reported as
// nullptr so the pool can release its cache and retry.
class CudaSegments final : public SegmentSource {
 public:
  void* map(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t status = cudaMalloc(&p, bytes);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear it: the pool may retry after releasing its cache
      return nullptr;
    }
    CUDA_CHECK(status);
    return p;
  }
  void unmap(void* ptr, size_t) override {
    // Blocks of a segment may still be read by queued kernels when their
    // owners are gone; cudaFree waits for the device, so this is safe.
    CUDA_CHECK(cudaFree(ptr));
  }
};

CudaSegments& segments() {
  static CudaSegments source;
  return source;
}

}  // namespace

DeviceAllocator::DeviceAllocator(int device) : device_(device) {
  require_device(device);
  CUDA_CHECK(cudaSetDevice(device));
  pool_ = std::make_unique<CachingPool>(segments());
  stats().set_reserved(0);
}

// The pool returns its segments to the driver; the base class then reports
// any allocation still live.
DeviceAllocator::~DeviceAllocator() = default;

void* DeviceAllocator::raw_allocate(size_t bytes) {
  void* p = pool_->allocate(bytes);
  stats().set_reserved(pool_->reserved_bytes());
#ifdef SDP_CUDA_EMULATION
  // The emulated device learns the block's extent: its stream-order checker
  // then takes a kernel's pointer argument to mean this block, not the whole
  // segment, and AddressSanitizer sees the block's end.
  if (p) sdp::emu::note_pool_block(p, bytes);
#endif
  return p;
}

void DeviceAllocator::raw_deallocate(void* ptr, size_t) {
  // Freed memory is handed out again only to work queued later on the same
  // compute stream, which runs after every kernel that used it. Work on
  // another stream (communication) must have been waited for by its owner
  // before it frees the buffer.
#ifdef SDP_CUDA_EMULATION
  sdp::emu::note_pool_free(ptr);
#endif
  pool_->free(ptr);
}

void DeviceAllocator::release_cache() {
  CUDA_CHECK(cudaDeviceSynchronize());
  pool_->release_cached();
  stats().set_reserved(pool_->reserved_bytes());
}

std::optional<DeviceMemoryInfo> DeviceAllocator::device_memory_info() const {
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return DeviceMemoryInfo{free_bytes, total_bytes};
}

}  // namespace sdp::cuda
