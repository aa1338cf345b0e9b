// Causal grouped-query attention: forward against fully materialized masked
// scores, all three input gradients against finite differences, meta device
// and bad input.
#include <catch2/catch.hpp>
#include <cmath>
#include <deque>
#include <limits>
#include <vector>

#include "kernels/ops.h"
#include "test/test_support.h"

using namespace sdp;
using sdp::testing::Arena;

namespace {

struct Dims {
  int64_t B, T, Hq, Hkv, Dh;
};

// out [B, T, Hq, Dh] and lse [B, Hq, T] from a full [T, T] score matrix per
// head, masked above the diagonal, in double.
void reference_attention(const std::vector<double>& q, const std::vector<double>& k,
                         const std::vector<double>& v, const Dims& d, std::vector<double>& out,
                         std::vector<double>& lse) {
  out.assign(static_cast<size_t>(d.B * d.T * d.Hq * d.Dh), 0.0);
  lse.assign(static_cast<size_t>(d.B * d.Hq * d.T), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d.Dh));
  auto qi = [&](int64_t b, int64_t t, int64_t h, int64_t c) {
    return static_cast<size_t>(((b * d.T + t) * d.Hq + h) * d.Dh + c);
  };
  auto ki = [&](int64_t b, int64_t t, int64_t h, int64_t c) {
    return static_cast<size_t>(((b * d.T + t) * d.Hkv + h) * d.Dh + c);
  };
  std::vector<double> s(static_cast<size_t>(d.T * d.T));
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.Hq; ++h) {
      const int64_t g = h / (d.Hq / d.Hkv);
      for (int64_t i = 0; i < d.T; ++i)
        for (int64_t j = 0; j < d.T; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < d.Dh; ++c) dot += q[qi(b, i, h, c)] * k[ki(b, j, g, c)];
          s[static_cast<size_t>(i * d.T + j)] =
              j <= i ? dot * scale : -std::numeric_limits<double>::infinity();
        }
      for (int64_t i = 0; i < d.T; ++i) {
        double mx = -std::numeric_limits<double>::infinity(), sum = 0;
        for (int64_t j = 0; j < d.T; ++j) mx = std::max(mx, s[static_cast<size_t>(i * d.T + j)]);
        for (int64_t j = 0; j < d.T; ++j) sum += std::exp(s[static_cast<size_t>(i * d.T + j)] - mx);
        lse[static_cast<size_t>((b * d.Hq + h) * d.T + i)] = mx + std::log(sum);
        for (int64_t j = 0; j < d.T; ++j) {
          const double p = std::exp(s[static_cast<size_t>(i * d.T + j)] - mx) / sum;
          for (int64_t c = 0; c < d.Dh; ++c) out[qi(b, i, h, c)] += p * v[ki(b, j, g, c)];
        }
      }
    }
}

struct AttentionTensors {
  Tensor q, k, v, out, lse, ws;
  AttentionTensors(Arena& arena, const Dims& d, DType dt)
      : q(arena.make({d.B, d.T, d.Hq, d.Dh}, dt)),
        k(arena.make({d.B, d.T, d.Hkv, d.Dh}, dt)),
        v(arena.make({d.B, d.T, d.Hkv, d.Dh}, dt)),
        out(arena.make({d.B, d.T, d.Hq, d.Dh}, dt)),
        lse(arena.make({d.B, d.Hq, d.T}, dt)),
        ws(arena.make({ops::attention_workspace_elems(d.B, d.T, d.Hq, d.Hkv, d.Dh)}, dt)) {}
  void forward() { ops::attention_forward(q, k, v, out, lse, ws); }
};

}  // namespace

TEST_CASE("attention_forward matches masked full-score attention", "[ops]") {
  const sdp::testing::ThreadCount threads(2);  // exercise the OpenMP paths
  // GQA and plain heads; T below, at and above the 64-row block, not multiples
  const Dims cases[] = {{2, 5, 4, 2, 8}, {1, 70, 4, 2, 8}, {2, 64, 2, 2, 16},
                        {1, 131, 3, 1, 4}, {1, 1, 2, 1, 6}};
  for (const Dims& d : cases)
    for (DType dt : {DType::f64, DType::f32}) {
      CAPTURE(d.B, d.T, d.Hq, d.Hkv, d.Dh, dtype_name(dt));
      Arena arena;
      AttentionTensors a(arena, d, dt);
      testing::fill_uniform(a.q, 1, -2, 2);
      testing::fill_uniform(a.k, 2, -2, 2);
      testing::fill_uniform(a.v, 3);
      a.forward();
      std::vector<double> out, lse;
      reference_attention(testing::to_vector(a.q), testing::to_vector(a.k),
                          testing::to_vector(a.v), d, out, lse);
      const double tol = dt == DType::f64 ? 1e-12 : 2e-5;
      REQUIRE(testing::max_rel_error(testing::to_vector(a.out), out) < tol);
      REQUIRE(testing::max_rel_error(testing::to_vector(a.lse), lse) < tol);
    }
}

TEST_CASE("attention_backward_input matches finite differences", "[ops]") {
  const sdp::testing::ThreadCount threads(2);  // exercise the OpenMP paths
  const Dims cases[] = {{2, 5, 4, 2, 4}, {1, 67, 2, 1, 4}, {1, 6, 2, 2, 3 * 2}};
  for (const Dims& d : cases) {
    CAPTURE(d.B, d.T, d.Hq, d.Hkv, d.Dh);
    Arena arena;
    AttentionTensors a(arena, d, DType::f64);
    testing::fill_uniform(a.q, 4, -2, 2);
    testing::fill_uniform(a.k, 5, -2, 2);
    testing::fill_uniform(a.v, 6);
    Tensor w = arena.make(a.out.shape());
    testing::fill_uniform(w, 7);
    auto loss = [&] {
      a.forward();
      return testing::weighted_sum(a.out, w);
    };
    const auto nq = testing::numeric_gradient(a.q, loss);
    const auto nk = testing::numeric_gradient(a.k, loss);
    const auto nv = testing::numeric_gradient(a.v, loss);

    Tensor dq = arena.make(a.q.shape()), dk = arena.make(a.k.shape()),
           dv = arena.make(a.v.shape());
    // stale values must be overwritten, not accumulated into
    testing::fill_uniform(dq, 8);
    testing::fill_uniform(dk, 9);
    testing::fill_uniform(dv, 10);
    a.forward();
    ops::attention_backward_input(w, a.q, a.k, a.v, a.out, a.lse, dq, dk, dv, a.ws);
    REQUIRE(testing::max_rel_error(testing::to_vector(dq), nq) < 1e-7);
    REQUIRE(testing::max_rel_error(testing::to_vector(dk), nk) < 1e-7);
    REQUIRE(testing::max_rel_error(testing::to_vector(dv), nv) < 1e-7);

    // f32 agrees with f64
    Arena arena32;
    AttentionTensors b(arena32, d, DType::f32);
    auto cast = [](const Tensor& src, const Tensor& dst) {
      const auto s = testing::to_vector(src);
      for (size_t i = 0; i < s.size(); ++i) dst.data<float>()[i] = static_cast<float>(s[i]);
    };
    cast(a.q, b.q);
    cast(a.k, b.k);
    cast(a.v, b.v);
    Tensor w32 = arena32.make(w.shape(), DType::f32);
    cast(w, w32);
    b.forward();
    Tensor dq32 = arena32.make(a.q.shape(), DType::f32), dk32 = arena32.make(a.k.shape(), DType::f32),
           dv32 = arena32.make(a.v.shape(), DType::f32);
    ops::attention_backward_input(w32, b.q, b.k, b.v, b.out, b.lse, dq32, dk32, dv32, b.ws);
    REQUIRE(testing::max_rel_error(testing::to_vector(dq32), testing::to_vector(dq)) < 1e-4);
    REQUIRE(testing::max_rel_error(testing::to_vector(dk32), testing::to_vector(dk)) < 1e-4);
    REQUIRE(testing::max_rel_error(testing::to_vector(dv32), testing::to_vector(dv)) < 1e-4);
  }
}

TEST_CASE("attention on meta computes nothing; bad input throws naming the op", "[ops]") {
  MetaAllocator meta;
  std::deque<OwnedTensor> owned;
  auto make = [&](Shape s) {
    return owned.emplace_back(meta, s, DType::f32, MemCategory::activation).view;
  };
  const int64_t B = 2, T = 300, Hq = 8, Hkv = 2, Dh = 32;
  Tensor q = make({B, T, Hq, Dh}), k = make({B, T, Hkv, Dh}), v = make({B, T, Hkv, Dh});
  Tensor out = make({B, T, Hq, Dh}), lse = make({B, Hq, T});
  Tensor ws = make({ops::attention_workspace_elems(B, T, Hq, Hkv, Dh)});
  ops::attention_forward(q, k, v, out, lse, ws);
  Tensor dq = make(q.shape()), dk = make(k.shape()), dv = make(v.shape());
  ops::attention_backward_input(out, q, k, v, out, lse, dq, dk, dv, ws);

  Tensor bad_lse = make({B, T, Hq});
  REQUIRE_THROWS_WITH(ops::attention_forward(q, k, v, out, bad_lse, ws),
                      Catch::Contains("attention_forward") && Catch::Contains("lse"));
  REQUIRE_THROWS_WITH(ops::attention_backward_input(out, q, k, v, out, bad_lse, dq, dk, dv, ws),
                      Catch::Contains("attention_backward_input"));
  Tensor k3 = make({B, T, 3, Dh});
  REQUIRE_THROWS_WITH(ops::attention_forward(q, k3, k3, out, lse, ws),
                      Catch::Contains("attention_forward") && Catch::Contains("multiple"));
  Tensor small_ws = make({16});
  REQUIRE_THROWS_WITH(ops::attention_forward(q, k, v, out, lse, small_ws),
                      Catch::Contains("workspace"));
  Tensor dk_bad = make({B, T, Hq, Dh});
  REQUIRE_THROWS_AS(ops::attention_backward_input(out, q, k, v, out, lse, dq, dk_bad, dv, ws),
                    Error);

  // the workspace size is a pure function of shape and thread count
  REQUIRE(ops::attention_workspace_elems(B, T, Hq, Hkv, Dh) ==
          ops::attention_workspace_elems(B, T, Hq, Hkv, Dh));
  REQUIRE(ops::attention_workspace_elems(B, T, Hq, Hkv, Dh) > 0);
}
