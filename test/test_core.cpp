// Tensor views, the allocators and their byte accounting.
#include <catch2/catch.hpp>

#include "engine/core/tensor.h"

using namespace sdp;

TEST_CASE("tensor views share storage and check shapes", "[core]") {
  CpuAllocator alloc;
  OwnedTensor t(alloc, {2, 3, 4}, DType::f32, MemCategory::activation);  // [2, 3, 4]
  REQUIRE(t->numel() == 24);
  REQUIRE(t->is_contiguous());
  Tensor v = t->view({6, 4});
  REQUIRE(v.raw() == t->raw());
  Tensor r = t->narrow(1, 1, 2);  // [2, 2, 4], strides of the parent
  REQUIRE(r.shape() == Shape{2, 2, 4});
  REQUIRE_FALSE(r.is_contiguous());
  REQUIRE(static_cast<float*>(r.raw()) == t->data<float>() + 4);
  REQUIRE_THROWS_WITH(t->view({5, 5}), Catch::Contains("element counts differ"));
  REQUIRE_THROWS_WITH(t->data<double>(), Catch::Contains("accessed as f64"));
}

TEST_CASE("element and byte counts that int64 or size_t cannot hold are refused", "[core]") {
  // 2^62 * 4 wraps int64; a zero dimension makes any product empty.
  const Shape huge{int64_t{1} << 62, 4};
  REQUIRE_THROWS_WITH(huge.numel(), Catch::Contains("[4611686018427387904, 4] has more elements "
                                                    "than int64 can count"));
  CHECK(Shape({int64_t{1} << 62, 4, 0}).numel() == 0);
  CHECK(Shape({int64_t{1} << 31, int64_t{1} << 31}).numel() == int64_t{1} << 62);
  // 2^62 f64 elements are 2^65 bytes: refused before any allocation.
  MetaAllocator meta(64);
  REQUIRE_THROWS_WITH(OwnedTensor(meta, {int64_t{1} << 62}, DType::f64, MemCategory::activation),
                      Catch::Contains("needs more bytes than size_t can count"));
}

TEST_CASE("allocator tracks current, peak and per-phase bytes by category", "[core]") {
  CpuAllocator alloc;
  auto& s = alloc.stats();
  {
    Buffer p(alloc, 100, MemCategory::param);  // rounded up to 128
    REQUIRE(s.current(MemCategory::param) == 128);
    s.set_phase(Phase::forward);
    {
      Buffer a(alloc, 64, MemCategory::activation);
      REQUIRE(s.current_total() == 192);
    }
    s.set_phase(Phase::optimizer);
    Buffer o(alloc, 10, MemCategory::optim);
    REQUIRE(s.peak_total() == 192);
    REQUIRE(s.at_peak(MemCategory::activation) == 64);
    REQUIRE(s.phase_peak(Phase::forward) == 192);
    REQUIRE(s.phase_peak(Phase::optimizer) == 192);
    s.reset_peaks();
    REQUIRE(s.peak_total() == 192);
  }
  REQUIRE(s.current_total() == 0);
  REQUIRE(s.peak(MemCategory::activation) == 0);
}

TEST_CASE("CPU allocator reuses freed large blocks of the same size", "[core]") {
  CpuAllocator alloc;
  auto& s = alloc.stats();
  const size_t big = CpuAllocator::kCacheMin * 4;
  void* first = nullptr;
  {
    Buffer a(alloc, big, MemCategory::activation);
    first = a.data();
  }
  // Freed: cached, but no longer counted as held.
  REQUIRE(s.current_total() == 0);
  REQUIRE(alloc.cached_bytes() == big);
  {
    Buffer other(alloc, big + 64, MemCategory::activation);  // another size: not this block
    REQUIRE(other.data() != first);
    Buffer again(alloc, big, MemCategory::workspace);
    REQUIRE(again.data() == first);
    REQUIRE(s.current_total() == 2 * big + 64);
    static_cast<char*>(again.data())[big - 1] = 1;  // the whole block is usable
  }
  {
    Buffer small(alloc, 100, MemCategory::activation);  // small blocks go back to malloc
  }
  REQUIRE(alloc.cached_bytes() == 2 * big + 64);
  alloc.release_cache();
  REQUIRE(alloc.cached_bytes() == 0);
  REQUIRE(s.current_total() == 0);
}

TEST_CASE("meta allocator charges bytes without allocating", "[core]") {
  MetaAllocator meta(512);
  OwnedTensor t(meta, {1000, 1000}, DType::f32, MemCategory::param);
  REQUIRE(meta.stats().current(MemCategory::param) == 4000256);  // 4e6 rounded to 512
  REQUIRE(t->device() == Device::meta);
}

TEST_CASE("bf16 conversion rounds to nearest even", "[core]") {
  REQUIRE(bf16::from_float(1.0f).to_float() == 1.0f);
  REQUIRE(bf16::from_float(1.00390625f).to_float() == 1.0f);      // halfway, even stays
  REQUIRE(bf16::from_float(1.01171875f).to_float() == 1.015625f);  // halfway, rounds up to even
}
