#include "engine/core/allocator.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "engine/core/error.h"

namespace sdp {

Allocator::~Allocator() {
  if (stats_.current_total() == 0) return;
  // (device() is virtual and no longer callable here.)
  std::fprintf(stderr, "sdp: fatal: an allocator was destroyed while %zu bytes are still allocated (",
               stats_.current_total());
  for (size_t i = 0; i < kMemCategoryCount; ++i) {
    const auto c = static_cast<MemCategory>(i);
    if (stats_.current(c))
      std::fprintf(stderr, " %s=%zu", std::string(category_name(c)).c_str(), stats_.current(c));
  }
  std::fprintf(stderr, " ); an owner of Buffers outlived their allocator\n");
  std::abort();
}

void* Allocator::allocate(size_t bytes, MemCategory category) {
  if (bytes == 0) return nullptr;
  const size_t charged = rounded(bytes);
  void* p = raw_allocate(charged);
  stats_.on_alloc(category, charged);
  return p;
}

void Allocator::deallocate(void* ptr, size_t bytes, MemCategory category) {
  if (bytes == 0) return;
  const size_t charged = rounded(bytes);
  raw_deallocate(ptr, charged);
  stats_.on_free(category, charged);
}

struct CpuAllocator::Cache {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free;  // by exact size
  size_t bytes = 0;
};

CpuAllocator::CpuAllocator() : cache_(std::make_unique<Cache>()) {}

CpuAllocator::~CpuAllocator() { release_cache(); }

void CpuAllocator::release_cache() {
  std::lock_guard lock(cache_->mutex);
  for (auto& [size, blocks] : cache_->free)
    for (void* p : blocks) std::free(p);
  cache_->free.clear();
  cache_->bytes = 0;
}

size_t CpuAllocator::cached_bytes() const {
  std::lock_guard lock(cache_->mutex);
  return cache_->bytes;
}

void* CpuAllocator::raw_allocate(size_t bytes) {
  if (bytes >= kCacheMin) {
    std::lock_guard lock(cache_->mutex);
    auto it = cache_->free.find(bytes);
    if (it != cache_->free.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      cache_->bytes -= bytes;
      return p;
    }
  }
  void* p = std::aligned_alloc(64, bytes);
  if (!p && cached_bytes() > 0) {  // the cache may be what fills memory
    release_cache();
    p = std::aligned_alloc(64, bytes);
  }
  if (!p)
    fail("CPU allocator: out of host memory allocating ", bytes, " bytes (",
         stats().current_total(), " bytes already held)");
  return p;
}

void CpuAllocator::raw_deallocate(void* ptr, size_t bytes) {
  if (bytes >= kCacheMin) {
    std::lock_guard lock(cache_->mutex);
    if (cache_->bytes + bytes <= kCacheMax) {
      cache_->free[bytes].push_back(ptr);
      cache_->bytes += bytes;
      return;
    }
  }
  std::free(ptr);
}

void* MetaAllocator::raw_allocate(size_t bytes) {
  void* p = reinterpret_cast<void*>(next_address_);
  next_address_ += bytes;
  return p;
}

CpuAllocator& host_allocator() {
  static CpuAllocator host;
  return host;
}

}  // namespace sdp
