// RoPE: tables and forward against the HF rotate-half formula, backward
// against finite differences, round trip, meta device and bad input.
#include <catch2/catch.hpp>
#include <cmath>
#include <deque>

#include "kernels/ops.h"
#include "test/test_support.h"

using namespace sdp;
using sdp::testing::Arena;

namespace {

// y = rope(x) by the explicit formula, every value computed in double.
std::vector<double> reference_rope(const std::vector<double>& x, int64_t B, int64_t T, int64_t H,
                                   int64_t Dh, double theta) {
  std::vector<double> y(x.size());
  const int64_t half = Dh / 2;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < half; ++i) {
          const double a = static_cast<double>(t) * std::pow(theta, -2.0 * i / Dh);
          const size_t base = static_cast<size_t>(((b * T + t) * H + h) * Dh);
          const double lo = x[base + i], hi = x[base + i + half];
          y[base + i] = lo * std::cos(a) - hi * std::sin(a);
          y[base + i + half] = hi * std::cos(a) + lo * std::sin(a);
        }
  return y;
}

}  // namespace

TEST_CASE("rope_tables match cos/sin of t * theta^(-2i/Dh)", "[ops]") {
  Arena arena;
  for (DType dt : {DType::f64, DType::f32}) {
    Tensor c = arena.make({7, 4}, dt), s = arena.make({7, 4}, dt);
    ops::rope_tables(10000.0, c, s);
    const auto cv = testing::to_vector(c), sv = testing::to_vector(s);
    const double tol = dt == DType::f64 ? 1e-15 : 1e-7;
    for (int t = 0; t < 7; ++t)
      for (int i = 0; i < 4; ++i) {
        const double a = t * std::pow(10000.0, -2.0 * i / 8);
        REQUIRE(std::abs(cv[t * 4 + i] - std::cos(a)) < tol);
        REQUIRE(std::abs(sv[t * 4 + i] - std::sin(a)) < tol);
      }
  }
}

TEST_CASE("rope_forward matches the HF rotate-half formula", "[ops]") {
  const int64_t B = 2, T = 5, H = 3, Dh = 8;
  const double theta = 500.0;
  for (DType dt : {DType::f64, DType::f32}) {
    Arena arena;
    Tensor c = arena.make({T, Dh / 2}, dt), s = arena.make({T, Dh / 2}, dt);
    ops::rope_tables(theta, c, s);
    Tensor x = arena.make({B, T, H, Dh}, dt), y = arena.make({B, T, H, Dh}, dt);
    testing::fill_uniform(x, 1);
    ops::rope_forward(x, c, s, y);
    const auto xv = testing::to_vector(x), yv = testing::to_vector(y);
    const auto ref = reference_rope(xv, B, T, H, Dh, theta);
    REQUIRE(testing::max_rel_error(yv, ref) < (dt == DType::f64 ? 1e-14 : 1e-6));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < Dh / 2; ++i) {
            const size_t base = static_cast<size_t>(((b * T + t) * H + h) * Dh);
            // position 0 is the identity; every rotation keeps the pair's norm
            if (t == 0) {
              REQUIRE(yv[base + i] == xv[base + i]);
              REQUIRE(yv[base + i + Dh / 2] == xv[base + i + Dh / 2]);
            }
            const double nx = std::hypot(xv[base + i], xv[base + i + Dh / 2]);
            const double ny = std::hypot(yv[base + i], yv[base + i + Dh / 2]);
            REQUIRE(std::abs(nx - ny) < 1e-6);
          }
    // in place gives the same result
    ops::rope_forward(x, c, s, x);
    REQUIRE(testing::max_rel_error(testing::to_vector(x), yv) == 0);
  }
}

TEST_CASE("rope_backward_input matches finite differences and inverts forward", "[ops]") {
  const int64_t B = 1, T = 4, H = 2, Dh = 6;
  Arena arena;
  Tensor c = arena.make({T, Dh / 2}), s = arena.make({T, Dh / 2});
  ops::rope_tables(10000.0, c, s);
  Tensor x = arena.make({B, T, H, Dh}), y = arena.make({B, T, H, Dh}),
         w = arena.make({B, T, H, Dh}), dx = arena.make({B, T, H, Dh});
  testing::fill_uniform(x, 2);
  testing::fill_uniform(w, 3);
  const auto numeric = testing::numeric_gradient(x, [&] {
    ops::rope_forward(x, c, s, y);
    return testing::weighted_sum(y, w);
  });
  ops::rope_backward_input(w, c, s, dx);
  REQUIRE(testing::max_rel_error(testing::to_vector(dx), numeric) < 1e-8);

  // backward is the inverse rotation: rope_backward(rope_forward(x)) == x
  ops::rope_forward(x, c, s, y);
  ops::rope_backward_input(y, c, s, y);  // in place
  REQUIRE(testing::max_rel_error(testing::to_vector(y), testing::to_vector(x)) < 1e-14);
}

TEST_CASE("rope on meta computes nothing; bad shapes throw naming the op", "[ops]") {
  MetaAllocator meta;
  std::deque<OwnedTensor> owned;
  auto make = [&](Shape shape) {
    return owned.emplace_back(meta, shape, DType::f32, MemCategory::activation).view;
  };
  Tensor c = make({16, 4}), s = make({16, 4}), x = make({2, 16, 3, 8});
  ops::rope_tables(10000.0, c, s);
  ops::rope_forward(x, c, s, x);
  ops::rope_backward_input(x, c, s, x);

  Tensor bad_cos = make({16, 3});
  REQUIRE_THROWS_WITH(ops::rope_forward(x, bad_cos, s, x), Catch::Contains("rope_forward"));
  Tensor odd = make({2, 16, 3, 7}), c7 = make({16, 3});
  REQUIRE_THROWS_AS(ops::rope_forward(odd, c7, c7, odd), Error);
  REQUIRE_THROWS_WITH(ops::rope_backward_input(odd, c7, c7, odd),
                      Catch::Contains("rope_backward_input") && Catch::Contains("even"));
  Tensor y3 = make({2, 16, 8});
  REQUIRE_THROWS_WITH(ops::rope_forward(x, c, s, y3), Catch::Contains("rope_forward"));

  Arena arena;  // dtype mismatch on the CPU
  Tensor xc = arena.make({1, 2, 1, 4}, DType::f64), cc = arena.make({2, 2}, DType::f32);
  REQUIRE_THROWS_WITH(ops::rope_forward(xc, cc, cc, xc), Catch::Contains("dtype"));
}

TEST_CASE("rope tables are the accum dtype (f32 next to bf16)", "[ops]") {
  sdp::MetaAllocator meta(512, Device::cuda);
  std::deque<OwnedTensor> owned;
  auto make = [&](Shape shape, DType dtype) {
    return owned.emplace_back(meta, shape, dtype, MemCategory::activation).view;
  };
  Tensor c = make({16, 4}, DType::f32), s = make({16, 4}, DType::f32);   // [T, Dh/2]
  Tensor x = make({2, 16, 3, 8}, DType::bf16);                         // [B, T, H, Dh]
  ops::rope_tables(10000.0, c, s);
  ops::rope_forward(x, c, s, x);
  ops::rope_backward_input(x, c, s, x);

  Tensor c16 = make({16, 4}, DType::bf16), c64 = make({16, 4}, DType::f64);
  REQUIRE_THROWS_WITH(ops::rope_forward(x, c16, c16, x),
                      Catch::Contains("rope_forward") && Catch::Contains("cos") &&
                          Catch::Contains("expected f32"));
  REQUIRE_THROWS_WITH(ops::rope_backward_input(x, c64, c64, x),
                      Catch::Contains("rope_backward_input") && Catch::Contains("expected f32"));
  REQUIRE_THROWS_WITH(ops::rope_tables(10000.0, c16, c16),
                      Catch::Contains("rope_tables") && Catch::Contains("bf16"));
  Tensor y32 = make({2, 16, 3, 8}, DType::f32);
  REQUIRE_THROWS_WITH(ops::rope_forward(x, c, s, y32),
                      Catch::Contains("rope_forward") && Catch::Contains("y"));
}
