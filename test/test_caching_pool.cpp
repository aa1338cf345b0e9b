// The device-independent caching logic of the CUDA allocator, run on host
// memory: reuse without new segments, splitting, merging, size classes,
// release, and the out-of-memory retry.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>

#include "engine/core/caching_pool.h"
#include "engine/core/error.h"

namespace {

using sdp::CachingPool;

// Host memory as "device" segments, with an optional capacity to provoke
// out-of-memory.
class HostSegments final : public sdp::SegmentSource {
 public:
  explicit HostSegments(size_t capacity = SIZE_MAX) : capacity_(capacity) {}
  ~HostSegments() override { REQUIRE(live_.empty()); }
  void* map(size_t bytes) override {
    if (mapped_ + bytes > capacity_) return nullptr;
    void* p = std::aligned_alloc(512, bytes);
    live_[p] = bytes;
    mapped_ += bytes;
    return p;
  }
  void unmap(void* ptr, size_t bytes) override {
    REQUIRE(live_.at(ptr) == bytes);
    live_.erase(ptr);
    mapped_ -= bytes;
    std::free(ptr);
  }
  size_t mapped() const { return mapped_; }

 private:
  size_t capacity_;
  size_t mapped_ = 0;
  std::map<void*, size_t> live_;
};

constexpr size_t MiB = size_t{1} << 20;

}  // namespace

TEST_CASE("caching pool: small requests share a 2 MiB segment and are reused", "[core][pool]") {
  HostSegments src;
  {
    CachingPool pool(src);
    void* a = pool.allocate(1000);  // rounds to 1024
    void* b = pool.allocate(512);
    CHECK(pool.segment_count() == 1);
    CHECK(pool.reserved_bytes() == CachingPool::kSmallSegment);
    CHECK(pool.in_use_bytes() == 1024 + 512);
    CHECK(static_cast<char*>(b) == static_cast<char*>(a) + 1024);
    pool.free(a);
    void* c = pool.allocate(700);  // best fit: a's 1024-byte hole
    CHECK(c == a);
    pool.free(b);
    pool.free(c);
    CHECK(pool.in_use_bytes() == 0);
    CHECK(pool.map_calls() == 1);
  }
  CHECK(src.mapped() == 0);
}

TEST_CASE("caching pool: a repeated step allocates no new segment", "[core][pool]") {
  HostSegments src;
  CachingPool pool(src);
  const size_t sizes[] = {3 * MiB, 512, 40 * MiB, 700 * 1024, 12 * MiB, 5 * MiB};
  auto step = [&] {
    std::vector<void*> held;
    for (size_t s : sizes) held.push_back(pool.allocate(s));
    for (void* p : held) pool.free(p);
  };
  step();
  const size_t maps = pool.map_calls(), reserved = pool.reserved_bytes();
  step();
  step();
  CHECK(pool.map_calls() == maps);
  CHECK(pool.reserved_bytes() == reserved);
}

TEST_CASE("caching pool: freed neighbours merge back into one block", "[core][pool]") {
  HostSegments src;
  CachingPool pool(src);
  void* a = pool.allocate(4 * MiB);  // medium: a 20 MiB segment
  void* b = pool.allocate(4 * MiB);
  void* c = pool.allocate(4 * MiB);
  CHECK(pool.segment_count() == 1);
  pool.free(a);
  pool.free(c);
  pool.free(b);  // merges with both sides
  void* whole = pool.allocate(CachingPool::kMediumRequest);
  CHECK(whole == a);
  CHECK(pool.segment_count() == 1);
  pool.free(whole);
  pool.release_cached();
  CHECK(pool.segment_count() == 0);
  CHECK(pool.reserved_bytes() == 0);
}

TEST_CASE("caching pool: large requests get their own rounded segment", "[core][pool]") {
  HostSegments src;
  CachingPool pool(src);
  void* p = pool.allocate(33 * MiB + 1);
  CHECK(pool.reserved_bytes() == 34 * MiB);
  void* q = pool.allocate(11 * MiB);
  CHECK(pool.segment_count() == 2);
  pool.free(p);
  pool.free(q);
}

TEST_CASE("caching pool: out of memory releases the cache, then fails clearly", "[core][pool]") {
  HostSegments src(30 * MiB);
  CachingPool pool(src);
  void* a = pool.allocate(20 * MiB);
  pool.free(a);  // cached: 20 MiB reserved, none in use
  void* b = pool.allocate(25 * MiB);  // needs the cache released first
  CHECK(pool.reserved_bytes() == 26 * MiB);
  CHECK_THROWS_WITH(pool.allocate(8 * MiB),
                    Catch::Contains("device out of memory") && Catch::Contains("bytes reserved"));
  pool.free(b);
}
