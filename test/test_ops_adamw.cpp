// AdamW against a scalar reference loop, multi-tensor AdamW over segments
// against per-segment calls.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <deque>
#include <initializer_list>
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

namespace {

// A flat buffer of kFlat elements with three segments and a gap [kGap0, kGap1)
// that no segment covers (segments given out of offset order on purpose).
constexpr int64_t kFlat = 50, kGap0 = 20, kGap1 = 24;
const ops::AdamWSegment kSegments[] = {{24, 26, 0.0}, {0, 12, 0.1}, {12, 8, 0.05}};

ops::AdamWConfig segment_config(int64_t step) {
  ops::AdamWConfig cfg;
  cfg.lr = 3e-2;
  cfg.weight_decay = 123.0;  // ignored by adamw_update_segments
  cfg.step = step;
  return cfg;
}

}  // namespace

TEST_CASE("adamw_update_segments equals adamw_update on each segment", "[ops]") {
  for (DType dt : {DType::f64, DType::f32}) {
    Arena arena;
    Tensor p = arena.make({kFlat}, dt), g = arena.make({kFlat}, dt), m = arena.make({kFlat}, dt),
           v = arena.make({kFlat}, dt);  // [kFlat] each
    Tensor copy = arena.make({kFlat}, DType::bf16);
    testing::fill_uniform(p, 7);
    ops::fill(m, 0.0);
    ops::fill(v, 0.0);
    std::memset(copy.raw(), 0xff, copy.bytes());
    // The reference: per-segment views updated one adamw_update call each.
    Tensor rp = arena.make({kFlat}, dt), rm = arena.make({kFlat}, dt),
           rv = arena.make({kFlat}, dt);
    ops::copy(p, rp);
    ops::fill(rm, 0.0);
    ops::fill(rv, 0.0);
    for (int64_t step = 1; step <= 3; ++step) {
      testing::fill_uniform(g, 40 + step);
      const ops::AdamWConfig cfg = segment_config(step);
      ops::adamw_update_segments(p, g, m, v, kSegments, cfg, &copy);
      for (const ops::AdamWSegment& s : kSegments) {
        Tensor sp = rp.narrow(0, s.offset, s.numel), sm = rm.narrow(0, s.offset, s.numel),
               sv = rv.narrow(0, s.offset, s.numel);
        ops::AdamWConfig seg_cfg = cfg;
        seg_cfg.weight_decay = s.weight_decay;
        ops::adamw_update(sp, g.narrow(0, s.offset, s.numel), sm, sv, seg_cfg);
      }
    }
    // The same kernel on the same values: equal bit for bit, gap untouched.
    REQUIRE(testing::to_vector(p) == testing::to_vector(rp));
    REQUIRE(testing::to_vector(m) == testing::to_vector(rm));
    REQUIRE(testing::to_vector(v) == testing::to_vector(rv));
    const auto pv = testing::to_vector(p), mv = testing::to_vector(m);  // [kFlat]
    for (int64_t i = kGap0; i < kGap1; ++i) REQUIRE(mv[static_cast<size_t>(i)] == 0.0);
    // The copy holds the new values rounded to bf16; the gap keeps its bytes.
    const bf16* c = copy.data<bf16>();
    for (int64_t i = 0; i < kFlat; ++i) {
      const bool in_gap = i >= kGap0 && i < kGap1;
      const uint16_t expect =
          in_gap ? uint16_t{0xffff}
                 : bf16::from_float(static_cast<float>(pv[static_cast<size_t>(i)])).bits;
      REQUIRE(c[i].bits == expect);
    }
  }
}

TEST_CASE("adamw_update_segments applies each segment's own weight decay", "[ops]") {
  Arena arena;
  // Two runs from the same state: the segments' decays, and no decay at all.
  Tensor p = arena.make({kFlat}), g = arena.make({kFlat}), m = arena.make({kFlat}),
         v = arena.make({kFlat});  // [kFlat] each, f64
  Tensor p0 = arena.make({kFlat}), m0 = arena.make({kFlat}), v0 = arena.make({kFlat});
  testing::fill_uniform(p, 3);
  testing::fill_uniform(g, 4);
  ops::copy(p, p0);
  for (Tensor* t : {&m, &v, &m0, &v0}) ops::fill(*t, 0.0);
  const auto before = testing::to_vector(p);
  ops::adamw_update_segments(p, g, m, v, kSegments, segment_config(1));
  const ops::AdamWSegment no_decay[] = {{24, 26, 0.0}, {0, 12, 0.0}, {12, 8, 0.0}};
  ops::adamw_update_segments(p0, g, m0, v0, no_decay, segment_config(1));
  const auto with = testing::to_vector(p), without = testing::to_vector(p0);
  const double lr = segment_config(1).lr;
  for (const ops::AdamWSegment& s : kSegments)
    for (int64_t i = s.offset; i < s.offset + s.numel; ++i) {
      // Decoupled decay: the runs differ by exactly lr * wd * p_old.
      const auto k = static_cast<size_t>(i);
      REQUIRE(with[k] - without[k] == Approx(-lr * s.weight_decay * before[k]).margin(1e-15));
    }
  for (int64_t i = kGap0; i < kGap1; ++i)
    REQUIRE(with[static_cast<size_t>(i)] == before[static_cast<size_t>(i)]);
}

TEST_CASE("adamw_update_segments rejects bad segments, dtypes and copies", "[ops]") {
  Arena arena;
  Tensor p = arena.make({kFlat}, DType::f32), g = arena.make({kFlat}, DType::f32),
         m = arena.make({kFlat}, DType::f32), v = arena.make({kFlat}, DType::f32);
  const ops::AdamWConfig cfg = segment_config(1);
  auto run = [&](std::initializer_list<ops::AdamWSegment> segs, Tensor* copy = nullptr) {
    const std::vector<ops::AdamWSegment> list(segs);
    ops::adamw_update_segments(p, g, m, v, list, cfg, copy);
  };
  REQUIRE_NOTHROW(run({}));
  REQUIRE_NOTHROW(run({{0, 0, 0.0}, {kFlat, 0, 0.0}, {0, kFlat, 0.1}}));
  REQUIRE_THROWS_WITH(run({{0, 10, 0.0}, {40, 11, 0.0}}),
                      Catch::Contains("adamw_update_segments") && Catch::Contains("segment 1") &&
                          Catch::Contains("outside the buffer of 50 elements"));
  REQUIRE_THROWS_WITH(run({{-1, 3, 0.0}}), Catch::Contains("segment 0") &&
                                                Catch::Contains("offset >= 0"));
  REQUIRE_THROWS_WITH(run({{0, -3, 0.0}}), Catch::Contains("numel -3"));
  REQUIRE_THROWS_WITH(run({{0, 10, 0.0}, {30, 5, 0.0}, {8, 4, 0.0}}),
                      Catch::Contains("segments 0 [0, 10) and 2 [8, 12) overlap"));
  REQUIRE_THROWS_WITH(run({{0, 10, -0.1}}), Catch::Contains("segment 0 has weight_decay -0.1"));
  REQUIRE_THROWS_WITH(run({{0, 10, std::nan("")}}), Catch::Contains("weight_decay"));

  Tensor f32_copy = arena.make({kFlat}, DType::f32);
  Tensor short_copy = arena.make({kFlat - 1}, DType::bf16);
  REQUIRE_THROWS_WITH(run({{0, 10, 0.0}}, &f32_copy),
                      Catch::Contains("low_precision_copy has dtype f32, expected bf16"));
  REQUIRE_THROWS_WITH(run({{0, 10, 0.0}}, &short_copy),
                      Catch::Contains("low_precision_copy has 49 elements"));

  Tensor g64 = arena.make({kFlat}, DType::f64), bf16_p = arena.make({kFlat}, DType::bf16);
  const ops::AdamWSegment all[] = {{0, kFlat, 0.0}};
  REQUIRE_THROWS_WITH(ops::adamw_update_segments(p, g64, m, v, all, cfg),
                      Catch::Contains("grad has dtype f64, expected f32"));
  REQUIRE_THROWS_WITH(ops::adamw_update_segments(bf16_p, g, m, v, all, cfg),
                      Catch::Contains("param has dtype bf16 (valid: f32, f64)"));
  ops::AdamWConfig bad = cfg;
  bad.beta2 = 1.0;
  REQUIRE_THROWS_WITH(ops::adamw_update_segments(p, g, m, v, all, bad), Catch::Contains("beta2"));

  // CUDA keeps master values and moments in f32: the check runs before any
  // dispatch, so a dangling device pointer is never touched.
  Tensor cuda_bf16(reinterpret_cast<void*>(0x1000), {kFlat}, DType::bf16, Device::cuda);
  REQUIRE_THROWS_WITH(
      ops::adamw_update_segments(cuda_bf16, cuda_bf16, cuda_bf16, cuda_bf16, all, cfg),
      Catch::Contains("valid on CUDA: f32"));
}

TEST_CASE("adamw_update_segments on meta checks but computes nothing", "[ops]") {
  MetaAllocator meta;
  std::deque<OwnedTensor> owned;
  auto make = [&](DType dt) {
    return owned.emplace_back(meta, Shape{kFlat}, dt, MemCategory::optim).view;
  };
  Tensor p = make(DType::f32), g = make(DType::f32), m = make(DType::f32), v = make(DType::f32);
  Tensor copy = make(DType::bf16), bad_copy = make(DType::f32);
  ops::adamw_update_segments(p, g, m, v, kSegments, segment_config(1), &copy);
  REQUIRE_THROWS_WITH(ops::adamw_update_segments(p, g, m, v, kSegments, segment_config(1),
                                                 &bad_copy),
                      Catch::Contains("low_precision_copy"));
  const ops::AdamWSegment outside[] = {{kFlat - 1, 2, 0.0}};
  REQUIRE_THROWS_WITH(ops::adamw_update_segments(p, g, m, v, outside, segment_config(1)),
                      Catch::Contains("outside the buffer"));
}
