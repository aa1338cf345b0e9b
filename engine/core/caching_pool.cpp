#include "engine/core/caching_pool.h"

#include <cstdio>
#include <iterator>

#include "engine/core/error.h"

namespace sdp {

namespace {

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// A split leaves a free remainder only when it can serve another request of
// the class: a smaller remainder would only fragment the segment.
size_t min_remainder(int pool) { return pool == 0 ? CachingPool::kAlignment : CachingPool::kSmallRequest + 1; }

}  // namespace

CachingPool::CachingPool(SegmentSource& source) : source_(source) {}

CachingPool::~CachingPool() {
  if (in_use_ > 0)
    std::fprintf(stderr, "sdp: caching pool destroyed with %zu bytes still in use\n", in_use_);
  for (const auto& [start, size] : segments_) source_.unmap(start, size);
}

int CachingPool::size_class(size_t bytes) {
  if (bytes <= kSmallRequest) return 0;
  if (bytes <= kMediumRequest) return 1;
  return 2;
}

size_t CachingPool::segment_size(size_t bytes) {
  switch (size_class(bytes)) {
    case 0: return kSmallSegment;
    case 1: return kMediumSegment;
    default: return round_up(bytes, kLargeRounding);
  }
}

void CachingPool::insert_free(Block& b) { free_[b.pool].insert({b.size, b.ptr}); }
void CachingPool::erase_free(const Block& b) { free_[b.pool].erase({b.size, b.ptr}); }

CachingPool::Block* CachingPool::find_free(size_t bytes, int pool) {
  auto it = free_[pool].lower_bound({bytes, nullptr});
  if (it == free_[pool].end()) return nullptr;
  return &blocks_.at(it->second);
}

CachingPool::Block* CachingPool::map_segment(size_t bytes, int pool) {
  const size_t size = segment_size(bytes);
  void* p = source_.map(size);
  if (!p) {
    release_cached();  // give cached segments back and try once more
    p = source_.map(size);
  }
  if (!p)
    fail("device out of memory: a request of ", bytes, " bytes needs a new segment of ", size,
         " bytes, but the device has none left (this process holds ", in_use_,
         " bytes in tensors and ", reserved_, " bytes reserved)");
  ++map_calls_;
  char* start = static_cast<char*>(p);
  segments_[start] = size;
  reserved_ += size;
  Block& b = blocks_[start];
  b = Block{start, size, start, false, pool};
  insert_free(b);
  return &b;
}

void* CachingPool::allocate(size_t bytes) {
  SDP_CHECK(bytes > 0, "CachingPool::allocate of zero bytes");
  bytes = round_up(bytes, kAlignment);
  const int pool = size_class(bytes);
  Block* b = find_free(bytes, pool);
  if (!b) b = map_segment(bytes, pool);
  erase_free(*b);
  if (b->size - bytes >= min_remainder(pool)) {
    // The tail stays free in the same segment.
    Block rest{b->ptr + bytes, b->size - bytes, b->segment, false, pool};
    b->size = bytes;
    Block& r = blocks_[rest.ptr];
    r = rest;
    insert_free(r);
  }
  b->used = true;
  in_use_ += b->size;
  return b->ptr;
}

void CachingPool::free(void* ptr) {
  auto it = blocks_.find(static_cast<char*>(ptr));
  SDP_CHECK(it != blocks_.end() && it->second.used, "CachingPool::free of a pointer it did not hand out");
  Block& b = it->second;
  b.used = false;
  in_use_ -= b.size;
  // Merge with the next block of the same segment when it is free ...
  auto next = std::next(it);
  if (next != blocks_.end() && next->second.segment == b.segment && !next->second.used) {
    erase_free(next->second);
    b.size += next->second.size;
    blocks_.erase(next);
  }
  // ... and into the previous one.
  if (it != blocks_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.segment == b.segment && !prev->second.used) {
      erase_free(prev->second);
      prev->second.size += b.size;
      blocks_.erase(it);
      insert_free(prev->second);
      return;
    }
  }
  insert_free(b);
}

void CachingPool::release_cached() {
  for (auto seg = segments_.begin(); seg != segments_.end();) {
    auto it = blocks_.find(seg->first);
    // A segment is wholly free when its first block is free and spans it.
    if (it != blocks_.end() && !it->second.used && it->second.size == seg->second) {
      erase_free(it->second);
      blocks_.erase(it);
      source_.unmap(seg->first, seg->second);
      reserved_ -= seg->second;
      seg = segments_.erase(seg);
    } else {
      ++seg;
    }
  }
}

}  // namespace sdp
