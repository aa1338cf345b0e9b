// LayerNorm forward against a loop; both backward halves against finite
// differences; thread-count independence of the weight gradients.
#include <catch2/catch.hpp>

#include <cmath>

#include "ops_test_util.h"

using namespace sdp;
using namespace sdp::testing;

namespace {
constexpr int64_t kN = 6, kD = 8;
constexpr double kEps = 1e-5;
}  // namespace

TEST_CASE("layernorm_forward matches a naive loop", "[ops][layernorm]") {
  for (const auto& c : kFloatCases) {
    Arena arena;
    Tensor x64 = arena.make({2, 3, kD}), w64 = arena.make({kD}), b64 = arena.make({kD});
    fill_uniform(x64, 1, -1.0, 3.0);  // a mean well away from 0
    fill_uniform(w64, 2, 0.5, 1.5);
    fill_uniform(b64, 3);
    Tensor x = cast_copy(arena, x64, c.dtype), w = cast_copy(arena, w64, c.dtype);
    Tensor b = cast_copy(arena, b64, c.dtype);
    Tensor y = arena.make({2, 3, kD}, c.dtype);  // [2, 3, D]
    Tensor mean = arena.make({2, 3}, c.dtype), rstd = arena.make({2, 3}, c.dtype);
    fill_garbage(y);
    ops::layernorm_forward(x, w, b, kEps, y, mean, rstd);
    const auto xv = to_vector(x), wv = to_vector(w), bv = to_vector(b);
    std::vector<double> ref_y, ref_m, ref_r;
    for (int64_t i = 0; i < kN; ++i) {
      double s = 0;
      for (int64_t j = 0; j < kD; ++j) s += xv[i * kD + j];
      const double mu = s / kD;
      double v = 0;
      for (int64_t j = 0; j < kD; ++j) v += (xv[i * kD + j] - mu) * (xv[i * kD + j] - mu);
      const double r = 1.0 / std::sqrt(v / kD + kEps);
      ref_m.push_back(mu);
      ref_r.push_back(r);
      for (int64_t j = 0; j < kD; ++j) ref_y.push_back((xv[i * kD + j] - mu) * r * wv[j] + bv[j]);
    }
    REQUIRE(max_rel_error(to_vector(y), ref_y) < c.tol);
    REQUIRE(max_rel_error(to_vector(mean), ref_m) < c.tol);
    REQUIRE(max_rel_error(to_vector(rstd), ref_r) < c.tol);
  }
}

TEST_CASE("layernorm backward matches finite differences", "[ops][layernorm]") {
  Arena arena;
  Tensor x = arena.make({kN, kD}), w = arena.make({kD}), b = arena.make({kD});
  Tensor g = arena.make({kN, kD}), y = arena.make({kN, kD});  // [N, D]
  Tensor mean = arena.make({kN}), rstd = arena.make({kN});     // [N]
  fill_uniform(x, 4, -2.0, 2.0);
  fill_uniform(w, 5, 0.5, 1.5);
  fill_uniform(b, 6);
  fill_uniform(g, 7);  // d loss / d y
  auto loss = [&] {
    ops::layernorm_forward(x, w, b, kEps, y, mean, rstd);
    return weighted_sum(y, g);
  };
  const auto num_dx = numeric_gradient(x, loss);
  const auto num_dw = numeric_gradient(w, loss);
  const auto num_db = numeric_gradient(b, loss);
  loss();  // statistics of the unperturbed x

  Tensor dx = arena.make({kN, kD}), dw = arena.make({kD}), db = arena.make({kD});
  fill_garbage(dx);
  ops::layernorm_backward_input(g, x, w, mean, rstd, dx);
  REQUIRE(max_rel_error(to_vector(dx), num_dx) < 1e-7);

  ops::fill(dw, 0.0);
  ops::fill(db, 0.0);
  ops::layernorm_backward_weight(g, x, mean, rstd, dw, db);
  REQUIRE(max_rel_error(to_vector(dw), num_dw) < 1e-7);
  REQUIRE(max_rel_error(to_vector(db), num_db) < 1e-7);
  ops::layernorm_backward_weight(g, x, mean, rstd, dw, db);  // accumulates
  auto twice_w = num_dw, twice_b = num_db;
  for (double& v : twice_w) v *= 2;
  for (double& v : twice_b) v *= 2;
  REQUIRE(max_rel_error(to_vector(dw), twice_w) < 1e-7);
  REQUIRE(max_rel_error(to_vector(db), twice_b) < 1e-7);

  // dx may alias dy.
  Tensor gy = arena.make({kN, kD});
  ops::copy(g, gy);
  ops::layernorm_backward_input(gy, x, w, mean, rstd, gy);
  REQUIRE(to_vector(gy) == to_vector(dx));
}

TEST_CASE("layernorm f32 gives the same bits for 1 and 2 threads", "[ops][layernorm]") {
  constexpr int64_t n = 700, d = 96;  // above the parallel threshold, several column blocks
  Arena arena;
  Tensor x = arena.make({n, d}, DType::f32), g = arena.make({n, d}, DType::f32);
  Tensor w = arena.make({d}, DType::f32), b = arena.make({d}, DType::f32);
  fill_uniform(x, 8);
  fill_uniform(g, 9);
  fill_uniform(w, 10);
  fill_uniform(b, 11);
  auto run = [&](int threads) {
    ThreadCount guard(threads);
    Tensor y = arena.make({n, d}, DType::f32), dx = arena.make({n, d}, DType::f32);
    Tensor mean = arena.make({n}, DType::f32), rstd = arena.make({n}, DType::f32);
    Tensor dw = arena.make({d}, DType::f32), db = arena.make({d}, DType::f32);
    ops::fill(dw, 0.0);
    ops::fill(db, 0.0);
    ops::layernorm_forward(x, w, b, kEps, y, mean, rstd);
    ops::layernorm_backward_input(g, x, w, mean, rstd, dx);
    ops::layernorm_backward_weight(g, x, mean, rstd, dw, db);
    std::vector<double> all;
    for (const Tensor* t : {&y, &dx, &dw, &db}) {
      const auto v = to_vector(*t);
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  };
  REQUIRE(run(1) == run(2));
}

TEST_CASE("layernorm rejects bad shapes and dtypes", "[ops][layernorm]") {
  Arena arena;
  Tensor x = arena.make({kN, kD}), w = arena.make({kD}), b = arena.make({kD});
  Tensor y = arena.make({kN, kD}), mean = arena.make({kN}), rstd = arena.make({kN});
  Tensor bad_w = arena.make({kD + 1}), bad_r = arena.make({kN + 1});
  Tensor f32_y = arena.make({kN, kD}, DType::f32);
  REQUIRE_THROWS_WITH(ops::layernorm_forward(x, bad_w, b, kEps, y, mean, rstd),
                      Catch::Contains("layernorm_forward") && Catch::Contains("weight"));
  REQUIRE_THROWS_WITH(ops::layernorm_forward(x, w, bad_w, kEps, y, mean, rstd),
                      Catch::Contains("layernorm_forward") && Catch::Contains("bias"));
  REQUIRE_THROWS_WITH(ops::layernorm_forward(x, w, b, kEps, y, bad_r, rstd),
                      Catch::Contains("layernorm_forward") && Catch::Contains("mean"));
  REQUIRE_THROWS_WITH(ops::layernorm_forward(x, w, b, kEps, y, mean, bad_r),
                      Catch::Contains("layernorm_forward") && Catch::Contains("rstd"));
  REQUIRE_THROWS_WITH(ops::layernorm_forward(x, w, b, kEps, f32_y, mean, rstd),
                      Catch::Contains("layernorm_forward") && Catch::Contains("f32"));
  REQUIRE_THROWS_WITH(ops::layernorm_forward(x, w, b, -1.0, y, mean, rstd),
                      Catch::Contains("eps"));
  REQUIRE_THROWS_WITH(ops::layernorm_backward_input(bad_r, x, w, mean, rstd, y),
                      Catch::Contains("layernorm_backward_input") && Catch::Contains("dy"));
  REQUIRE_THROWS_WITH(ops::layernorm_backward_input(y, x, w, mean, rstd, f32_y),
                      Catch::Contains("layernorm_backward_input") && Catch::Contains("dx"));
  REQUIRE_THROWS_WITH(ops::layernorm_backward_weight(y, x, mean, rstd, bad_w, b),
                      Catch::Contains("layernorm_backward_weight") && Catch::Contains("dweight"));
  REQUIRE_THROWS_WITH(ops::layernorm_backward_weight(y, x, mean, rstd, w, bad_w),
                      Catch::Contains("layernorm_backward_weight") && Catch::Contains("dbias"));
  REQUIRE_THROWS_WITH(ops::layernorm_backward_weight(y, x, mean, rstd, w, w),
                      Catch::Contains("distinct"));
}

TEST_CASE("layernorm on meta computes nothing but checks shapes", "[ops][layernorm]") {
  MetaAllocator meta;
  auto make = [&](Shape s) { return OwnedTensor(meta, s, DType::f32, MemCategory::activation); };
  OwnedTensor x = make({kN, kD}), w = make({kD}), b = make({kD}), y = make({kN, kD});
  OwnedTensor m = make({kN}), r = make({kN}), bad = make({kN, kD + 1});
  ops::layernorm_forward(*x, *w, *b, kEps, *y, *m, *r);
  ops::layernorm_backward_input(*y, *x, *w, *m, *r, *y);
  ops::layernorm_backward_weight(*y, *x, *m, *r, *w, *b);
  REQUIRE_THROWS_WITH(ops::layernorm_backward_input(*bad, *x, *w, *m, *r, *y),
                      Catch::Contains("layernorm_backward_input"));
}

TEST_CASE("layernorm keeps statistics and weight gradients in the accum dtype",
          "[ops][layernorm]") {
  MetaAllocator meta(512, Device::cuda);
  auto make = [&](Shape s, DType dtype) {
    return OwnedTensor(meta, s, dtype, MemCategory::activation);
  };
  OwnedTensor x = make({2, kN, kD}, DType::bf16), y = make({2, kN, kD}, DType::bf16);
  OwnedTensor w = make({kD}, DType::bf16), b = make({kD}, DType::bf16);
  OwnedTensor dw = make({kD}, DType::f32), db = make({kD}, DType::f32);
  OwnedTensor m = make({2, kN}, DType::f32), r = make({2, kN}, DType::f32);
  ops::layernorm_forward(*x, *w, *b, kEps, *y, *m, *r);
  ops::layernorm_backward_input(*y, *x, *w, *m, *r, *y);
  ops::layernorm_backward_weight(*y, *x, *m, *r, *dw, *db);

  OwnedTensor m16 = make({2, kN}, DType::bf16), db16 = make({kD}, DType::bf16);
  OwnedTensor b32 = make({kD}, DType::f32);
  REQUIRE_THROWS_WITH(ops::layernorm_forward(*x, *w, *b, kEps, *y, *m16, *r),
                      Catch::Contains("mean") && Catch::Contains("expected f32"));
  REQUIRE_THROWS_WITH(ops::layernorm_forward(*x, *w, *b32, kEps, *y, *m, *r),
                      Catch::Contains("bias") && Catch::Contains("expected bf16"));
  REQUIRE_THROWS_WITH(ops::layernorm_backward_weight(*y, *x, *m, *r, *dw, *db16),
                      Catch::Contains("dbias") && Catch::Contains("expected f32"));

  Arena arena;  // the CPU has no bf16 kernels
  Tensor xc = arena.make({kN, kD}, DType::bf16), wc = arena.make({kD}, DType::bf16);
  Tensor mc = arena.make({kN}, DType::f32);
  REQUIRE_THROWS_WITH(ops::layernorm_forward(xc, wc, wc, kEps, xc, mc, mc),
                      Catch::Contains("layernorm_forward") && Catch::Contains("bf16") &&
                          Catch::Contains("CPU"));
}
