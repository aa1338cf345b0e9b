// Utility ops: fill, copy, add, accumulate, scale, sum_squares, sum,
// count_nonnegative, convert, transfer, item.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "ops_test_util.h"

using namespace sdp;
using namespace sdp::testing;

TEST_CASE("fill, add, accumulate, scale, sum_squares match plain loops", "[ops]") {
  for (const auto& c : kFloatCases) {
    Arena arena;
    Tensor a64 = arena.make({5, 7}), b64 = arena.make({5, 7});  // [5, 7] each
    fill_uniform(a64, 1);
    fill_uniform(b64, 2);
    Tensor a = cast_copy(arena, a64, c.dtype), b = cast_copy(arena, b64, c.dtype);
    const auto av = to_vector(a), bv = to_vector(b);

    Tensor out = arena.make({5, 7}, c.dtype);
    ops::add(a, b, out);
    std::vector<double> ref(av.size());
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = av[i] + bv[i];
    REQUIRE(max_rel_error(to_vector(out), ref) < c.tol);

    ops::add(out, b, out);  // out aliases a
    for (size_t i = 0; i < ref.size(); ++i) ref[i] += bv[i];
    REQUIRE(max_rel_error(to_vector(out), ref) < c.tol);

    ops::accumulate(out, a);
    for (size_t i = 0; i < ref.size(); ++i) ref[i] += av[i];
    REQUIRE(max_rel_error(to_vector(out), ref) < c.tol);

    ops::scale(out, -0.5);
    double ss = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      ref[i] *= -0.5;
      ss += ref[i] * ref[i];
    }
    REQUIRE(max_rel_error(to_vector(out), ref) < c.tol);
    REQUIRE(ops::sum_squares(out) == Approx(ss).epsilon(c.tol * 10));

    ops::fill(out, 2.5);
    for (double v : to_vector(out)) REQUIRE(v == 2.5);
    REQUIRE(ops::item(out, 34) == 2.5);
  }
}

TEST_CASE("sum_squares is exact over large buffers and independent of threads", "[ops]") {
  Arena arena;
  Tensor x = arena.make({100003});  // [100003], large enough to go parallel
  fill_uniform(x, 3);
  double ref = 0;
  for (double v : to_vector(x)) ref += v * v;
  REQUIRE(ops::sum_squares(x) == Approx(ref).epsilon(1e-12));
  REQUIRE(ops::sum_squares(x) == ops::sum_squares(x));
}

TEST_CASE("fill and copy handle i32; copy handles strided views", "[ops]") {
  Arena arena;
  Tensor t = arena.make({6}, DType::i32), u = arena.make({6}, DType::i32);  // [6] each
  ops::fill(t, -3);
  ops::copy(t, u);
  for (int64_t i = 0; i < 6; ++i) REQUIRE(ops::item(u, i) == -3);
  REQUIRE_THROWS_WITH(ops::fill(t, 0.5), Catch::Contains("fill") && Catch::Contains("i32"));

  Tensor m = arena.make({4, 5});  // [4, 5]
  fill_uniform(m, 4);
  Tensor cols = m.narrow(1, 1, 3);  // [4, 3], non-contiguous
  Tensor dst = arena.make({4, 3});
  ops::copy(cols, dst);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      REQUIRE(ops::item(dst, i * 3 + j) == m.data<double>()[i * 5 + j + 1]);
      REQUIRE(ops::item(cols, i * 3 + j) == m.data<double>()[i * 5 + j + 1]);
    }
}

TEST_CASE("utility ops reject bad shapes, dtypes and indices", "[ops]") {
  Arena arena;
  Tensor a = arena.make({3, 4}), b = arena.make({4, 3}), f = arena.make({3, 4}, DType::f32);
  REQUIRE_THROWS_WITH(ops::add(a, b, a), Catch::Contains("add") && Catch::Contains("[4, 3]"));
  REQUIRE_THROWS_WITH(ops::add(a, f, a), Catch::Contains("add") && Catch::Contains("f32"));
  REQUIRE_THROWS_WITH(ops::accumulate(a, b), Catch::Contains("accumulate"));
  REQUIRE_THROWS_WITH(ops::copy(a, b), Catch::Contains("copy"));
  REQUIRE_THROWS_WITH(ops::copy(a, f), Catch::Contains("copy"));
  Tensor i = arena.make({3}, DType::i32);
  REQUIRE_THROWS_WITH(ops::scale(i, 2.0), Catch::Contains("scale") && Catch::Contains("i32"));
  REQUIRE_THROWS_WITH(ops::sum_squares(i), Catch::Contains("sum_squares"));
  REQUIRE_THROWS_WITH(ops::item(a, 12), Catch::Contains("item") && Catch::Contains("12"));
}

TEST_CASE("utility ops on meta compute nothing but still check shapes", "[ops]") {
  MetaAllocator meta;
  OwnedTensor a(meta, {3, 4}, DType::f32, MemCategory::activation);  // [3, 4]
  OwnedTensor b(meta, {3, 4}, DType::f32, MemCategory::activation);  // [3, 4]
  OwnedTensor c(meta, {4, 3}, DType::f32, MemCategory::activation);  // [4, 3]
  ops::fill(*a, 1.0);
  ops::copy(*a, *b);
  ops::add(*a, *b, *b);
  ops::accumulate(*a, *b);
  ops::scale(*a, 3.0);
  REQUIRE(ops::sum_squares(*a) == 0.0);
  REQUIRE(std::isnan(ops::item(*a, 0)));
  REQUIRE_THROWS_WITH(ops::add(*a, *c, *b), Catch::Contains("add"));
}

TEST_CASE("sum and count_nonnegative match plain loops", "[ops]") {
  for (const auto& c : kFloatCases) {
    Arena arena;
    Tensor x64 = arena.make({100003});  // [100003], large enough to go parallel
    fill_uniform(x64, 5, -1.0, 2.0);
    Tensor x = cast_copy(arena, x64, c.dtype);
    double ref = 0;
    for (double v : to_vector(x)) ref += v;
    REQUIRE(ops::sum(x) == Approx(ref).epsilon(1e-12));
    REQUIRE(ops::sum(x) == ops::sum(x));
  }
  Arena arena;
  REQUIRE(ops::sum(arena.make({0})) == 0.0);

  Tensor targets = arena.make({7}, DType::i32);  // [7]
  const int32_t values[7] = {3, -1, 0, -100, 5, -1, 2};
  for (int i = 0; i < 7; ++i) targets.data<int32_t>()[i] = values[i];
  REQUIRE(ops::count_nonnegative(targets) == 4);
  REQUIRE(ops::count_nonnegative(arena.make({0}, DType::i32)) == 0);
  REQUIRE_THROWS_WITH(ops::count_nonnegative(arena.make({3}, DType::f32)),
                      Catch::Contains("count_nonnegative") && Catch::Contains("i32"));
  REQUIRE_THROWS_WITH(ops::sum(targets), Catch::Contains("sum") && Catch::Contains("i32"));
}

namespace {
// A bf16 bit pattern from an f32 one, through ops::convert.
uint16_t bf16_bits_of(Arena& arena, uint32_t f32_bits) {
  Tensor src = arena.make({1}, DType::f32), dst = arena.make({1}, DType::bf16);  // [1] each
  std::memcpy(src.data<float>(), &f32_bits, 4);
  ops::convert(src, dst);
  return dst.data<bf16>()[0].bits;
}
}  // namespace

TEST_CASE("convert rounds into bf16 to nearest even and keeps NaN and inf", "[ops]") {
  Arena arena;
  CHECK(bf16_bits_of(arena, 0x3F800000u) == 0x3F80);  // 1 exactly
  CHECK(bf16_bits_of(arena, 0x3F808000u) == 0x3F80);  // 1 + 2^-8: halfway, down to even
  CHECK(bf16_bits_of(arena, 0x3F818000u) == 0x3F82);  // 1 + 3 2^-8: halfway, up to even
  CHECK(bf16_bits_of(arena, 0x3F808001u) == 0x3F81);  // just above halfway
  CHECK(bf16_bits_of(arena, 0x3F807FFFu) == 0x3F80);  // just below halfway
  CHECK(bf16_bits_of(arena, 0xBF818000u) == 0xBF82);  // negative, halfway to even
  CHECK(bf16_bits_of(arena, 0x7F7FFFFFu) == 0x7F80);  // largest f32 rounds to inf
  CHECK(bf16_bits_of(arena, 0x7F800000u) == 0x7F80);  // inf
  CHECK(bf16_bits_of(arena, 0xFF800000u) == 0xFF80);  // -inf
  CHECK(bf16_bits_of(arena, 0x00000001u) == 0x0000);  // smallest subnormal rounds to 0

  // NaNs stay NaN (a payload in the low bits only must not round to inf).
  for (uint32_t nan : {0x7FC00000u, 0x7F800001u, 0xFFFFFFFFu}) {
    const uint16_t b = bf16_bits_of(arena, nan);
    CHECK((b & 0x7F80) == 0x7F80);
    CHECK((b & 0x007F) != 0);
  }

  // f32 -> bf16 -> f32 and f64 -> bf16 -> f64 give the rounded values back.
  for (DType wide : {DType::f32, DType::f64}) {
    Tensor src = arena.make({4}, wide), mid = arena.make({4}, DType::bf16);  // [4] each
    Tensor back = arena.make({4}, wide);
    const double values[4] = {1.0 + 1.0 / 256, 1.0 + 3.0 / 256, -2.5, 1e30};
    const double rounded[4] = {1.0, 1.0 + 1.0 / 64, -2.5, 1.0002555517425873e30};
    for (int i = 0; i < 4; ++i) {
      if (wide == DType::f64)
        src.data<double>()[i] = values[i];
      else
        src.data<float>()[i] = static_cast<float>(values[i]);
    }
    ops::convert(src, mid);
    ops::convert(mid, back);
    for (int64_t i = 0; i < 4; ++i) {
      CHECK(ops::item(back, i) == ops::item(mid, i));
      CHECK(ops::item(back, i) == Approx(rounded[i]).epsilon(1e-15));
    }
  }
}

TEST_CASE("convert between f32 and f64; bad arguments throw", "[ops]") {
  Arena arena;
  Tensor a = arena.make({2, 3}), f = arena.make({2, 3}, DType::f32);  // [2, 3] each
  Tensor b = arena.make({2, 3});
  fill_uniform(a, 6);
  ops::convert(a, f);
  ops::convert(f, b);
  for (int64_t i = 0; i < 6; ++i) {
    REQUIRE(ops::item(f, i) == static_cast<float>(ops::item(a, i)));
    REQUIRE(ops::item(b, i) == ops::item(f, i));
  }
  ops::convert(a, b);  // same dtype: a copy
  for (int64_t i = 0; i < 6; ++i) REQUIRE(ops::item(b, i) == ops::item(a, i));

  Tensor wrong_shape = arena.make({3, 2}, DType::f32), ints = arena.make({2, 3}, DType::i32);
  Tensor narrow_dst = arena.make({2, 2}, DType::f32);
  REQUIRE_THROWS_WITH(ops::convert(a, wrong_shape),
                      Catch::Contains("convert") && Catch::Contains("[3, 2]"));
  REQUIRE_THROWS_WITH(ops::convert(a, ints), Catch::Contains("convert") && Catch::Contains("i32"));
  REQUIRE_THROWS_WITH(ops::convert(a.narrow(1, 0, 2), narrow_dst),
                      Catch::Contains("convert") && Catch::Contains("contiguous"));
  MetaAllocator meta;
  OwnedTensor m(meta, {2, 3}, DType::bf16, MemCategory::activation);  // [2, 3]
  REQUIRE_THROWS_WITH(ops::convert(a, *m),
                      Catch::Contains("convert") && Catch::Contains("different devices"));
}

TEST_CASE("transfer copies host to host; meta on either side does nothing", "[ops]") {
  Arena arena;
  Tensor src = arena.make({3, 4}), dst = arena.make({3, 4});  // [3, 4] each
  fill_uniform(src, 7);
  ops::transfer(src, dst);
  REQUIRE(to_vector(dst) == to_vector(src));
  Tensor tokens = arena.make({5}, DType::i32), tokens_copy = arena.make({5}, DType::i32);
  ops::fill(tokens, 9);
  ops::transfer(tokens, tokens_copy);
  REQUIRE(ops::item(tokens_copy, 4) == 9);

  MetaAllocator meta;
  OwnedTensor m(meta, {3, 4}, DType::f64, MemCategory::activation);  // [3, 4]
  ops::fill(dst, 1.0);
  ops::transfer(*m, dst);  // nothing to read: dst keeps its values
  for (double v : to_vector(dst)) REQUIRE(v == 1.0);
  ops::transfer(src, *m);

  Tensor wrong_shape = arena.make({4, 3}), wrong_dtype = arena.make({3, 4}, DType::f32);
  Tensor narrow_dst = arena.make({3, 2});
  REQUIRE_THROWS_WITH(ops::transfer(src, wrong_shape),
                      Catch::Contains("transfer") && Catch::Contains("[4, 3]"));
  REQUIRE_THROWS_WITH(ops::transfer(src, wrong_dtype),
                      Catch::Contains("transfer") && Catch::Contains("f32"));
  REQUIRE_THROWS_WITH(ops::transfer(src.narrow(1, 1, 2), narrow_dst),
                      Catch::Contains("transfer") && Catch::Contains("contiguous"));
  OwnedTensor m_bad(meta, {3, 5}, DType::f64, MemCategory::activation);  // [3, 5]
  REQUIRE_THROWS_WITH(ops::transfer(src, *m_bad), Catch::Contains("transfer"));
}

TEST_CASE("utility ops on meta accept bf16; the CPU does not", "[ops]") {
  MetaAllocator meta(512, Device::cuda);
  auto make = [&](DType dtype) {
    return OwnedTensor(meta, {3, 4}, dtype, MemCategory::activation);  // [3, 4]
  };
  OwnedTensor a = make(DType::bf16), b = make(DType::bf16), f = make(DType::f32);
  OwnedTensor t = make(DType::i32);
  ops::fill(*a, 1.0);
  ops::copy(*a, *b);
  ops::add(*a, *b, *b);
  ops::accumulate(*a, *b);
  ops::scale(*a, 0.5);
  ops::convert(*a, *f);
  ops::convert(*f, *a);
  REQUIRE(ops::sum_squares(*a) == 0.0);
  REQUIRE(ops::sum(*a) == 0.0);
  REQUIRE(ops::count_nonnegative(*t) == 12);
  REQUIRE(std::isnan(ops::item(*a, 11)));
  REQUIRE_THROWS_WITH(ops::add(*a, *f, *b), Catch::Contains("add") && Catch::Contains("f32"));
  REQUIRE_THROWS_WITH(ops::count_nonnegative(*a), Catch::Contains("count_nonnegative"));

  Arena arena;
  Tensor h = arena.make({2}, DType::bf16);  // [2]
  REQUIRE_THROWS_WITH(ops::add(h, h, h),
                      Catch::Contains("add") && Catch::Contains("bf16") && Catch::Contains("CPU"));
  REQUIRE_THROWS_WITH(ops::copy(h, h), Catch::Contains("copy") && Catch::Contains("bf16"));
}
