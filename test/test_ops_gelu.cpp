// GELU against std::erf (f32 elementwise over both tails), its backward
// against finite differences, and stochastic depth's per-sample scale.
#include <catch2/catch.hpp>

#include <cmath>

#include "ops_test_util.h"

using namespace sdp;
using namespace sdp::testing;

namespace {
// Phi(x) as erfc(-x / sqrt 2) / 2: 1 + erf(x / sqrt 2) would round the
// negative tail to 0 in f64 as well.
double phi_ref(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
double gelu_ref(double x) { return x * phi_ref(x); }
double gelu_slope_ref(double x) {
  return phi_ref(x) +
         x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
}

// Points over [-12, 12], denser near 0, plus the points where the f32
// kernel changes branch.
Tensor gelu_points(Arena& arena, DType dtype) {
  std::vector<double> v;
  for (int i = -1200; i <= 1200; ++i) v.push_back(i * 0.01);
  for (double s : {-1.0, 1.0})
    for (double a : {0.0, 1e-30, 1e-7, 13.43, 13.44, 20.0, 1e30}) v.push_back(s * a);
  Tensor t64 = arena.make({static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t64.data<double>()[i] = v[i];
  return cast_copy(arena, t64, dtype);
}
}  // namespace

TEST_CASE("gelu_forward matches the erf form elementwise", "[ops][gelu]") {
  for (const auto& c : kFloatCases) {
    Arena arena;
    Tensor x = gelu_points(arena, c.dtype);
    Tensor y = arena.make(x.shape(), c.dtype), dx = arena.make(x.shape(), c.dtype);
    Tensor ones = arena.make(x.shape(), c.dtype);
    fill_garbage(y);
    ops::fill(ones, 1.0);
    ops::gelu_forward(x, y);
    ops::gelu_backward_input(ones, x, dx);  // the slope itself
    const auto xv = to_vector(x), yv = to_vector(y), sv = to_vector(dx);
    // Per element, against the f64 value at the same (rounded) input: the
    // negative tail is tiny and must keep its relative accuracy too. In f32
    // the exponent -x^2 / 2 carries a rounding error that grows with x^2, so
    // the bound does (4e-7 at 0, 7e-5 at |x| = 13, where Phi(x) ~ 1e-38).
    const double base = c.dtype == DType::f64 ? 1e-12 : 4e-7;
    double worst_y = 0, worst_s = 0;  // error / bound
    for (size_t i = 0; i < xv.size(); ++i) {
      const double ry = gelu_ref(xv[i]), rs = gelu_slope_ref(xv[i]);
      const double bound = base * (1 + std::min(xv[i] * xv[i], 169.0));
      worst_y = std::max(worst_y, std::abs(yv[i] - ry) / std::max(std::abs(ry), 1e-30) / bound);
      // The slope Phi(x) + x phi(x) crosses 0 near x = -0.75: relative to the
      // size of its two terms, not to their sum.
      const double terms = phi_ref(xv[i]) + std::abs(xv[i]) * std::exp(-0.5 * xv[i] * xv[i]);
      worst_s = std::max(worst_s, std::abs(sv[i] - rs) / std::max(terms, 1e-30) / bound);
    }
    INFO("dtype " << dtype_name(c.dtype) << ": worst error / bound: y " << worst_y << ", slope "
                  << worst_s);
    REQUIRE(worst_y < 1);
    REQUIRE(worst_s < 1);
  }
}

TEST_CASE("gelu passes NaN through and saturates at the infinities", "[ops][gelu]") {
  Arena arena;
  Tensor x = arena.make({3}, DType::f32), y = arena.make({3}, DType::f32);
  x.data<float>()[0] = NAN;
  x.data<float>()[1] = INFINITY;
  x.data<float>()[2] = -1e38f;
  ops::gelu_forward(x, y);
  REQUIRE(std::isnan(y.data<float>()[0]));
  REQUIRE(y.data<float>()[1] == INFINITY);
  REQUIRE(y.data<float>()[2] == 0.0f);
}

TEST_CASE("gelu backward matches finite differences", "[ops][gelu]") {
  Arena arena;
  Tensor x = arena.make({4, 9}), y = arena.make({4, 9}), g = arena.make({4, 9});
  fill_uniform(x, 1, -4.0, 4.0);
  fill_uniform(g, 2);
  auto loss = [&] {
    ops::gelu_forward(x, y);
    return weighted_sum(y, g);
  };
  const auto num = numeric_gradient(x, loss);
  Tensor dx = arena.make({4, 9});
  fill_garbage(dx);
  ops::gelu_backward_input(g, x, dx);
  REQUIRE(max_rel_error(to_vector(dx), num) < 1e-8);
  ops::gelu_backward_input(g, x, g);  // dx may alias dy
  REQUIRE(to_vector(g) == to_vector(dx));
}

TEST_CASE("gelu f32 gives the same values on 1 and 2 threads", "[ops][gelu]") {
  Arena arena;
  Tensor x = arena.make({100000}, DType::f32);  // above the parallel threshold
  fill_uniform(x, 3, -6.0, 6.0);
  auto run = [&](int threads) {
    ThreadCount guard(threads);
    Tensor y = arena.make(x.shape(), DType::f32);
    ops::gelu_forward(x, y);
    return to_vector(y);
  };
  REQUIRE(run(1) == run(2));
}

TEST_CASE("scale_per_sample scales each sample by its factor", "[ops][gelu]") {
  for (const auto& c : kFloatCases) {
    Arena arena;
    Tensor x64 = arena.make({3, 4, 5});  // [B, L, C]
    fill_uniform(x64, 4);
    Tensor x = cast_copy(arena, x64, c.dtype);
    Tensor f = arena.make({3}, c.dtype), y = arena.make({3, 4, 5}, c.dtype);
    ops::fill(f, 0.0);
    f.dtype() == DType::f64 ? void(f.data<double>()[1] = 1.25) : void(f.data<float>()[1] = 1.25f);
    f.dtype() == DType::f64 ? void(f.data<double>()[2] = 4.0) : void(f.data<float>()[2] = 4.0f);
    fill_garbage(y);
    ops::scale_per_sample(x, f, y);
    const auto xv = to_vector(x), yv = to_vector(y);
    const double factor[3] = {0.0, 1.25, 4.0};
    for (int64_t i = 0; i < 60; ++i) {
      const double ref = xv[i] * factor[i / 20];  // exact in f64; f32 rounds once
      REQUIRE(yv[i] == (c.dtype == DType::f64 ? ref : static_cast<float>(ref)));
    }
    ops::scale_per_sample(x, f, x);  // y may alias x
    REQUIRE(to_vector(x) == yv);
  }
}

TEST_CASE("scale_per_sample is its own backward", "[ops][gelu]") {
  Arena arena;
  Tensor x = arena.make({2, 3, 2, 2}), y = arena.make({2, 3, 2, 2}), g = arena.make({2, 3, 2, 2});
  Tensor f = arena.make({2});
  fill_uniform(x, 5);
  fill_uniform(g, 6);
  fill_uniform(f, 7, 0.5, 2.0);
  auto loss = [&] {
    ops::scale_per_sample(x, f, y);
    return weighted_sum(y, g);
  };
  const auto num = numeric_gradient(x, loss);
  Tensor dx = arena.make({2, 3, 2, 2});
  ops::scale_per_sample(g, f, dx);
  REQUIRE(max_rel_error(to_vector(dx), num) < 1e-8);
}

TEST_CASE("gelu and scale_per_sample reject bad arguments", "[ops][gelu]") {
  Arena arena;
  Tensor x = arena.make({2, 3}), y = arena.make({2, 3}), y32 = arena.make({2, 3}, DType::f32);
  Tensor bad = arena.make({3, 2}), f = arena.make({2}), f3 = arena.make({3});
  Tensor f32 = arena.make({2}, DType::f32);
  REQUIRE_THROWS_WITH(ops::gelu_forward(x, bad),
                      Catch::Contains("gelu_forward") && Catch::Contains("y"));
  REQUIRE_THROWS_WITH(ops::gelu_forward(x, y32),
                      Catch::Contains("gelu_forward") && Catch::Contains("f32"));
  REQUIRE_THROWS_WITH(ops::gelu_backward_input(bad, x, y),
                      Catch::Contains("gelu_backward_input") && Catch::Contains("dy"));
  REQUIRE_THROWS_WITH(ops::gelu_backward_input(y, x, bad),
                      Catch::Contains("gelu_backward_input") && Catch::Contains("dx"));
  REQUIRE_THROWS_WITH(ops::scale_per_sample(x, f3, y),
                      Catch::Contains("scale_per_sample") && Catch::Contains("factors"));
  REQUIRE_THROWS_WITH(ops::scale_per_sample(x, f32, y),
                      Catch::Contains("factors") && Catch::Contains("expected f64"));
  REQUIRE_THROWS_WITH(ops::scale_per_sample(x, f, bad),
                      Catch::Contains("scale_per_sample") && Catch::Contains("y"));
  Tensor i32 = arena.make({2, 3}, DType::i32);
  REQUIRE_THROWS_WITH(ops::gelu_forward(i32, i32), Catch::Contains("i32"));
}

TEST_CASE("gelu and scale_per_sample on meta: bf16 with f32 factors", "[ops][gelu]") {
  MetaAllocator meta(512, Device::cuda);
  auto make = [&](Shape s, DType dtype) {
    return OwnedTensor(meta, s, dtype, MemCategory::activation);
  };
  OwnedTensor x = make({4, 16, 8}, DType::bf16), f = make({4}, DType::f32);
  OwnedTensor f16 = make({4}, DType::bf16), bad = make({4, 16, 9}, DType::bf16);
  ops::gelu_forward(*x, *x);
  ops::gelu_backward_input(*x, *x, *x);
  ops::scale_per_sample(*x, *f, *x);
  REQUIRE_THROWS_WITH(ops::scale_per_sample(*x, *f16, *x),
                      Catch::Contains("factors") && Catch::Contains("expected f32"));
  REQUIRE_THROWS_WITH(ops::gelu_forward(*x, *bad), Catch::Contains("gelu_forward"));

  Arena arena;  // the CPU has no bf16 kernels
  Tensor xc = arena.make({4}, DType::bf16);
  REQUIRE_THROWS_WITH(ops::gelu_forward(xc, xc), Catch::Contains("bf16") && Catch::Contains("CPU"));
}
