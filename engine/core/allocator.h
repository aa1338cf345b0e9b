#pragma once
// One allocator per device. Every byte a run holds comes from here and carries
// a category, so reports can say where memory went.
#include <cstddef>
#include <memory>
#include <utility>

#include <optional>

#include "engine/core/caching_pool.h"
#include "engine/core/dtype.h"
#include "engine/core/memory_stats.h"

namespace sdp {

class Allocator {
 public:
  // Destroying an allocator that still has live allocations is a programming
  // error (their Buffers would later free into a dead object): it is reported
  // with the bytes per category and the process aborts.
  virtual ~Allocator();
  virtual Device device() const = 0;
  // The device whose memory this allocator's figures stand for: device()
  // itself, or for a meta allocator the device its dry run mirrors. Code
  // whose scratch sizes differ by device (kernels' workspaces) asks this.
  virtual Device target_device() const { return device(); }

  // Returns storage for `bytes` (rounded up to granularity()); zero bytes gives
  // nullptr and is not counted.
  void* allocate(size_t bytes, MemCategory category);
  void deallocate(void* ptr, size_t bytes, MemCategory category);

  // Bytes actually charged for a request of `bytes`.
  size_t rounded(size_t bytes) const {
    const size_t g = granularity();
    return (bytes + g - 1) / g * g;
  }
  virtual size_t granularity() const = 0;

  // The whole device's free and total bytes as its driver reports them
  // (cudaMemGetInfo); none for host and meta memory.
  virtual std::optional<DeviceMemoryInfo> device_memory_info() const { return std::nullopt; }

  MemoryStats& stats() { return stats_; }
  const MemoryStats& stats() const { return stats_; }

 protected:
  virtual void* raw_allocate(size_t bytes) = 0;
  virtual void raw_deallocate(void* ptr, size_t bytes) = 0;

 private:
  MemoryStats stats_;
};

// Host memory aligned to 64 bytes (a cache line, and enough for AVX-512).
// Freed blocks of kCacheMin bytes or more are kept, by exact size, and handed
// out again (up to kCacheMax bytes in all): a training step allocates the
// same activations every step, and large blocks from malloc are fresh mmaps
// whose pages fault in, zeroed, on every step. Reused blocks are not zeroed
// (malloc's never promised that either). Statistics count bytes handed out,
// not bytes cached.
class CpuAllocator final : public Allocator {
 public:
  CpuAllocator();
  CpuAllocator(const CpuAllocator&) = delete;
  CpuAllocator& operator=(const CpuAllocator&) = delete;
  ~CpuAllocator() override;
  Device device() const override { return Device::cpu; }
  size_t granularity() const override { return 64; }
  // Returns every cached block to the system.
  void release_cache();
  size_t cached_bytes() const;

  static constexpr size_t kCacheMin = size_t{1} << 16;
  static constexpr size_t kCacheMax = size_t{2} << 30;

 protected:
  void* raw_allocate(size_t bytes) override;
  void raw_deallocate(void* ptr, size_t bytes) override;

 private:
  struct Cache;
  std::unique_ptr<Cache> cache_;
};

// One process-wide CPU allocator for host memory outside any run's device
// accounting (token windows before they move to the device, the trainer's
// control scalars, staging copies for checks), whatever the run's device.
CpuAllocator& host_allocator();

// Allocates nothing and hands out addresses that must never be dereferenced;
// ops on meta tensors compute nothing. Running the ordinary code path on it
// gives the bytes a real device with the same granularity would hold.
// Granularity 64 mirrors the CPU allocator; 512 mirrors the CUDA caching
// allocator's block rounding. `mirrors` names the device whose run it
// stands for (target_device()).
class MetaAllocator final : public Allocator {
 public:
  explicit MetaAllocator(size_t granularity = 64, Device mirrors = Device::cpu)
      : granularity_(granularity), mirrors_(mirrors) {}
  Device device() const override { return Device::meta; }
  Device target_device() const override { return mirrors_; }
  size_t granularity() const override { return granularity_; }

 protected:
  void* raw_allocate(size_t bytes) override;
  void raw_deallocate(void*, size_t) override {}

 private:
  size_t granularity_;
  Device mirrors_;
  size_t next_address_ = 0x1000;
};

// Move-only owner of one allocation; frees it on destruction.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Allocator& allocator, size_t bytes, MemCategory category)
      : allocator_(&allocator), bytes_(bytes), category_(category),
        ptr_(allocator.allocate(bytes, category)) {}
  ~Buffer() { release(); }
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      release();
      allocator_ = std::exchange(o.allocator_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      category_ = o.category_;
      ptr_ = std::exchange(o.ptr_, nullptr);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void release() {
    if (allocator_ && bytes_) allocator_->deallocate(ptr_, bytes_, category_);
    allocator_ = nullptr;
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  MemCategory category() const { return category_; }
  Allocator* allocator() const { return allocator_; }
  Device device() const { return allocator_ ? allocator_->device() : Device::cpu; }

 private:
  Allocator* allocator_ = nullptr;
  size_t bytes_ = 0;
  MemCategory category_ = MemCategory::workspace;
  void* ptr_ = nullptr;
};

}  // namespace sdp
