#include "engine/core/allocator.h"

#include <cstdlib>
#include <new>

#include "engine/core/error.h"

namespace sdp {

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

void* CpuAllocator::raw_allocate(size_t bytes) {
  void* p = std::aligned_alloc(64, bytes);
  if (!p)
    fail("CPU allocator: out of host memory allocating ", bytes, " bytes (",
         stats().current_total(), " bytes already held)");
  return p;
}

void CpuAllocator::raw_deallocate(void* ptr, size_t) { std::free(ptr); }

void* MetaAllocator::raw_allocate(size_t bytes) {
  void* p = reinterpret_cast<void*>(next_address_);
  next_address_ += bytes;
  return p;
}

}  // namespace sdp
