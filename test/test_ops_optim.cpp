// AdamW against a scalar reference loop; global norm and clipping.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <deque>
#include <vector>

#include "kernels/ops.h"
#include "test/test_support.h"

using namespace sdp;
using sdp::testing::Arena;

TEST_CASE("adamw_update matches a scalar reference over several steps", "[ops]") {
  for (DType dt : {DType::f64, DType::f32}) {
    Arena arena;
    const int64_t n = 37;
    Tensor p = arena.make({n}, dt), g = arena.make({n}, dt), m = arena.make({n}, dt),
           v = arena.make({n}, dt);
    testing::fill_uniform(p, 1);
    std::memset(m.raw(), 0, m.bytes());
    std::memset(v.raw(), 0, v.bytes());
    std::vector<double> rp = testing::to_vector(p), rm(n, 0.0), rv(n, 0.0);
    ops::AdamWConfig cfg;
    cfg.lr = 1e-2;
    cfg.beta1 = 0.9;
    cfg.beta2 = 0.95;
    cfg.eps = 1e-8;
    cfg.weight_decay = 0.1;
    for (int64_t step = 1; step <= 5; ++step) {
      testing::fill_uniform(g, 100 + step);
      const auto gv = testing::to_vector(g);
      cfg.step = step;
      ops::adamw_update(p, g, m, v, cfg);
      for (size_t i = 0; i < rp.size(); ++i) {
        rp[i] *= 1 - cfg.lr * cfg.weight_decay;
        rm[i] = cfg.beta1 * rm[i] + (1 - cfg.beta1) * gv[i];
        rv[i] = cfg.beta2 * rv[i] + (1 - cfg.beta2) * gv[i] * gv[i];
        const double mhat = rm[i] / (1 - std::pow(cfg.beta1, step));
        const double vhat = rv[i] / (1 - std::pow(cfg.beta2, step));
        rp[i] -= cfg.lr * mhat / (std::sqrt(vhat) + cfg.eps);
      }
    }
    const double tol = dt == DType::f64 ? 1e-13 : 1e-5;
    REQUIRE(testing::max_rel_error(testing::to_vector(p), rp) < tol);
    REQUIRE(testing::max_rel_error(testing::to_vector(m), rm) < tol);
    REQUIRE(testing::max_rel_error(testing::to_vector(v), rv) < tol);
  }
}

TEST_CASE("adamw_update rejects bad shapes and configs; meta computes nothing", "[ops]") {
  Arena arena;
  Tensor p = arena.make({4}), g = arena.make({5}), m = arena.make({4}), v = arena.make({4});
  ops::AdamWConfig cfg;
  REQUIRE_THROWS_WITH(ops::adamw_update(p, g, m, v, cfg), Catch::Contains("adamw_update"));
  cfg.step = 0;
  REQUIRE_THROWS_WITH(ops::adamw_update(p, m, m, v, cfg), Catch::Contains("step"));

  MetaAllocator meta;
  std::deque<OwnedTensor> owned;
  auto make = [&](Shape s) {
    return owned.emplace_back(meta, s, DType::f32, MemCategory::optim).view;
  };
  Tensor mp = make({1000}), mg = make({1000}), mm = make({1000}), mv = make({1000});
  ops::adamw_update(mp, mg, mm, mv, ops::AdamWConfig{});
  std::vector<Tensor> grads{mg, mm};
  REQUIRE(ops::global_norm(grads) == 0.0);
  REQUIRE(ops::clip_grad_norm(grads, 1.0) == 0.0);
}

TEST_CASE("global_norm and clip_grad_norm", "[ops]") {
  Arena arena;
  Tensor a = arena.make({3, 4}), b = arena.make({5}, DType::f64);
  Tensor c = arena.make({6}, DType::f32);
  testing::fill_uniform(a, 1);
  testing::fill_uniform(b, 2);
  testing::fill_uniform(c, 3);
  double expect = 0;
  for (const Tensor& t : {a, b, c})
    for (double x : testing::to_vector(t)) expect += x * x;
  expect = std::sqrt(expect);
  std::vector<Tensor> grads{a, b, c};
  REQUIRE(ops::global_norm(grads) == Approx(expect).epsilon(1e-12));

  // below the limit: untouched
  const auto before = testing::to_vector(a);
  REQUIRE(ops::clip_grad_norm(grads, expect * 2) == Approx(expect).epsilon(1e-12));
  REQUIRE(testing::to_vector(a) == before);

  // above: scaled to max_norm (up to the 1e-6 guard), pre-clip norm returned
  REQUIRE(ops::clip_grad_norm(grads, 0.5) == Approx(expect).epsilon(1e-12));
  REQUIRE(ops::global_norm(grads) == Approx(0.5).epsilon(1e-5));
  REQUIRE(testing::to_vector(a)[0] == Approx(before[0] * 0.5 / (expect + 1e-6)));

  REQUIRE_THROWS_WITH(ops::clip_grad_norm(grads, 0.0), Catch::Contains("clip_grad_norm"));
  REQUIRE_THROWS_WITH(ops::clip_grad_norm(grads, -1.0), Catch::Contains("max_norm"));
}
