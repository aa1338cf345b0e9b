// Utility ops: fill, copy, add, accumulate, scale, sum_squares, item.
#include <catch2/catch.hpp>

#include <cmath>

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
