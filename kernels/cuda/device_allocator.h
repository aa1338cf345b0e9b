#pragma once
// The CUDA device allocator: a caching allocator over cudaMalloc, with the
// same categories, peaks and 512-byte rounding as every sdp allocator (so a
// meta dry run with MetaAllocator(512, Device::cuda) predicts its allocated
// bytes exactly), plus the reserved bytes (what cudaMalloc holds, cached
// blocks included) and cudaMemGetInfo's view of the whole device.
// Allocation and free are host-side bookkeeping; memory freed while kernels
// that use it are still queued is safe to hand out again because every op
// runs on one compute stream in order (cuda/stream.h).
#include <cstddef>
#include <memory>

#include "engine/core/allocator.h"
#include "engine/core/caching_pool.h"

namespace sdp::cuda {

class DeviceAllocator final : public Allocator {
 public:
  // Selects `device` for the calling thread; fails clearly when no GPU is usable.
  explicit DeviceAllocator(int device = 0);
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;
  ~DeviceAllocator() override;

  Device device() const override { return Device::cuda; }
  size_t granularity() const override { return 512; }
  std::optional<DeviceMemoryInfo> device_memory_info() const override;
  // Returns every cached block that is not in use to the driver.
  void release_cache();
  const CachingPool& pool() const { return *pool_; }

 protected:
  void* raw_allocate(size_t bytes) override;
  void raw_deallocate(void* ptr, size_t bytes) override;

 private:
  int device_ = 0;
  std::unique_ptr<CachingPool> pool_;
};

}  // namespace sdp::cuda
