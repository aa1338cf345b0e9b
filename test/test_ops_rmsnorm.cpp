// RMSNorm forward against a loop; both backward halves against finite differences.
#include <catch2/catch.hpp>

#include <cmath>

#include "ops_test_util.h"

using namespace sdp;
using namespace sdp::testing;

namespace {
constexpr int64_t kN = 6, kD = 8;
constexpr double kEps = 1e-5;
}

TEST_CASE("rmsnorm_forward matches a naive loop", "[ops]") {
  for (const auto& c : kFloatCases) {
    Arena arena;
    Tensor x64 = arena.make({2, 3, kD}), w64 = arena.make({kD});  // [2, 3, D], [D]
    fill_uniform(x64, 1);
    fill_uniform(w64, 2, 0.5, 1.5);
    Tensor x = cast_copy(arena, x64, c.dtype), w = cast_copy(arena, w64, c.dtype);
    Tensor y = arena.make({2, 3, kD}, c.dtype), rstd = arena.make({2, 3}, c.dtype);
    fill_garbage(y);
    ops::rmsnorm_forward(x, w, kEps, y, rstd);
    const auto xv = to_vector(x), wv = to_vector(w);
    std::vector<double> ref_y, ref_r;
    for (int64_t i = 0; i < kN; ++i) {
      double ss = 0;
      for (int64_t j = 0; j < kD; ++j) ss += xv[i * kD + j] * xv[i * kD + j];
      const double r = 1.0 / std::sqrt(ss / kD + kEps);
      ref_r.push_back(r);
      for (int64_t j = 0; j < kD; ++j) ref_y.push_back(xv[i * kD + j] * r * wv[j]);
    }
    REQUIRE(max_rel_error(to_vector(y), ref_y) < c.tol);
    REQUIRE(max_rel_error(to_vector(rstd), ref_r) < c.tol);
  }
}

TEST_CASE("rmsnorm backward matches finite differences", "[ops]") {
  Arena arena;
  Tensor x = arena.make({kN, kD}), w = arena.make({kD}), g = arena.make({kN, kD});
  Tensor y = arena.make({kN, kD}), rstd = arena.make({kN});  // [N, D], [N]
  fill_uniform(x, 3);
  fill_uniform(w, 4, 0.5, 1.5);
  fill_uniform(g, 5);  // d loss / d y
  auto loss = [&] {
    ops::rmsnorm_forward(x, w, kEps, y, rstd);
    return weighted_sum(y, g);
  };
  const auto num_dx = numeric_gradient(x, loss);
  const auto num_dw = numeric_gradient(w, loss);
  loss();  // rstd for the unperturbed x

  Tensor dx = arena.make({kN, kD}), dw = arena.make({kD});
  fill_garbage(dx);
  ops::rmsnorm_backward_input(g, x, w, rstd, dx);
  REQUIRE(max_rel_error(to_vector(dx), num_dx) < 1e-7);

  ops::fill(dw, 0.0);
  ops::rmsnorm_backward_weight(g, x, rstd, dw);
  REQUIRE(max_rel_error(to_vector(dw), num_dw) < 1e-7);
  ops::rmsnorm_backward_weight(g, x, rstd, dw);
  auto twice = num_dw;
  for (double& v : twice) v *= 2;
  REQUIRE(max_rel_error(to_vector(dw), twice) < 1e-7);
}

TEST_CASE("rmsnorm rejects bad shapes and dtypes", "[ops]") {
  Arena arena;
  Tensor x = arena.make({kN, kD}), w = arena.make({kD}), y = arena.make({kN, kD});
  Tensor rstd = arena.make({kN});
  Tensor bad_w = arena.make({kD + 1}), bad_r = arena.make({kN + 1});
  Tensor f32_y = arena.make({kN, kD}, DType::f32);
  REQUIRE_THROWS_WITH(ops::rmsnorm_forward(x, bad_w, kEps, y, rstd),
                      Catch::Contains("rmsnorm_forward") && Catch::Contains("weight"));
  REQUIRE_THROWS_WITH(ops::rmsnorm_forward(x, w, kEps, y, bad_r),
                      Catch::Contains("rmsnorm_forward") && Catch::Contains("rstd"));
  REQUIRE_THROWS_WITH(ops::rmsnorm_forward(x, w, kEps, f32_y, rstd),
                      Catch::Contains("rmsnorm_forward") && Catch::Contains("f32"));
  REQUIRE_THROWS_WITH(ops::rmsnorm_backward_input(bad_r, x, w, rstd, y),
                      Catch::Contains("rmsnorm_backward_input") && Catch::Contains("dy"));
  REQUIRE_THROWS_WITH(ops::rmsnorm_backward_weight(y, x, rstd, bad_w),
                      Catch::Contains("rmsnorm_backward_weight") && Catch::Contains("dweight"));
}

TEST_CASE("rmsnorm on meta computes nothing but checks shapes", "[ops]") {
  MetaAllocator meta;
  auto make = [&](Shape s) { return OwnedTensor(meta, s, DType::f32, MemCategory::activation); };
  OwnedTensor x = make({kN, kD}), w = make({kD}), y = make({kN, kD}), r = make({kN});
  OwnedTensor bad = make({kN, kD + 1});
  ops::rmsnorm_forward(*x, *w, kEps, *y, *r);
  ops::rmsnorm_backward_input(*y, *x, *w, *r, *y);
  ops::rmsnorm_backward_weight(*y, *x, *r, *w);
  REQUIRE_THROWS_WITH(ops::rmsnorm_backward_input(*bad, *x, *w, *r, *y),
                      Catch::Contains("rmsnorm_backward_input"));
}

TEST_CASE("rmsnorm keeps rstd and dweight in the accum dtype (f32 next to bf16)", "[ops]") {
  MetaAllocator meta(512, Device::cuda);
  auto make = [&](Shape s, DType dtype) {
    return OwnedTensor(meta, s, dtype, MemCategory::activation);
  };
  OwnedTensor x = make({2, kN, kD}, DType::bf16), y = make({2, kN, kD}, DType::bf16);
  OwnedTensor w = make({kD}, DType::bf16), dw = make({kD}, DType::f32);
  OwnedTensor r = make({2, kN}, DType::f32);
  ops::rmsnorm_forward(*x, *w, kEps, *y, *r);
  ops::rmsnorm_backward_input(*y, *x, *w, *r, *y);
  ops::rmsnorm_backward_weight(*y, *x, *r, *dw);

  OwnedTensor r64 = make({2, kN}, DType::f64), r16 = make({2, kN}, DType::bf16);
  OwnedTensor dw16 = make({kD}, DType::bf16), w32 = make({kD}, DType::f32);
  REQUIRE_THROWS_WITH(ops::rmsnorm_forward(*x, *w, kEps, *y, *r64),
                      Catch::Contains("rmsnorm_forward") && Catch::Contains("rstd") &&
                          Catch::Contains("f64") && Catch::Contains("expected f32"));
  REQUIRE_THROWS_WITH(ops::rmsnorm_backward_input(*y, *x, *w, *r16, *y),
                      Catch::Contains("rstd") && Catch::Contains("expected f32"));
  REQUIRE_THROWS_WITH(ops::rmsnorm_backward_weight(*y, *x, *r, *dw16),
                      Catch::Contains("dweight") && Catch::Contains("expected f32"));
  REQUIRE_THROWS_WITH(ops::rmsnorm_forward(*x, *w32, kEps, *y, *r),
                      Catch::Contains("weight") && Catch::Contains("expected bf16"));

  // f32 and f64 activations keep their own dtype for everything.
  OwnedTensor x64 = make({kN, kD}, DType::f64), w64 = make({kD}, DType::f64);
  OwnedTensor r32 = make({kN}, DType::f32);
  REQUIRE_THROWS_WITH(ops::rmsnorm_forward(*x64, *w64, kEps, *x64, *r32),
                      Catch::Contains("rstd") && Catch::Contains("expected f64"));

  Arena arena;  // the CPU has no bf16 kernels
  Tensor xc = arena.make({kN, kD}, DType::bf16), wc = arena.make({kD}, DType::bf16);
  Tensor rc = arena.make({kN}, DType::f32);
  REQUIRE_THROWS_WITH(ops::rmsnorm_forward(xc, wc, kEps, xc, rc),
                      Catch::Contains("rmsnorm_forward") && Catch::Contains("bf16") &&
                          Catch::Contains("CPU"));
}
