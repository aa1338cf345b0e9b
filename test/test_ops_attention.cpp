// Causal grouped-query attention: forward against fully materialized masked
// scores, all three input gradients against finite differences, meta device
// and bad input.
#include <catch2/catch.hpp>
#include <cmath>
#include <deque>
#include <limits>
#include <omp.h>
#include <vector>

#include "kernels/cpu/attention.h"
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

TEST_CASE("attention_forward matches masked full-score attention", "[ops][attention]") {
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

TEST_CASE("attention_backward_input matches finite differences", "[ops][attention]") {
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

TEST_CASE("attention on meta computes nothing; bad input throws naming the op",
          "[ops][attention]") {
  MetaAllocator meta;
  std::deque<OwnedTensor> owned;
  auto make = [&](Shape s, DType dt = DType::f32) {
    return owned.emplace_back(meta, s, dt, MemCategory::activation).view;
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
  Tensor dk_bad = make({B, T, Hq, Dh});
  REQUIRE_THROWS_AS(ops::attention_backward_input(out, q, k, v, out, lse, dq, dk_bad, dv, ws),
                    Error);
  // An f32 run keeps f32 statistics: f64 lse next to f32 q is refused.
  Tensor lse64 = make({B, Hq, T}, DType::f64);
  REQUIRE_THROWS_WITH(ops::attention_forward(q, k, v, out, lse64, ws),
                      Catch::Contains("attention_forward") && Catch::Contains("lse"));
}

TEST_CASE("attention on meta takes bf16 activations with f32 lse, as on CUDA",
          "[ops][attention]") {
  MetaAllocator meta(512, Device::cuda);
  std::deque<OwnedTensor> owned;
  auto make = [&](Shape s, DType dt) {
    return owned.emplace_back(meta, s, dt, MemCategory::activation).view;
  };
  const int64_t B = 2, T = 100, Hq = 4, Hkv = 1, Dh = 24;
  const DType bf = DType::bf16;
  Tensor q = make({B, T, Hq, Dh}, bf), k = make({B, T, Hkv, Dh}, bf),
         v = make({B, T, Hkv, Dh}, bf), out = make({B, T, Hq, Dh}, bf);
  Tensor lse = make({B, Hq, T}, DType::f32);
  // sized for the device the dry run mirrors: CUDA needs no scratch
  const int64_t ws_elems =
      ops::attention_workspace_elems(B, T, Hq, Hkv, Dh, meta.target_device());
  REQUIRE(ws_elems == 0);
  Tensor ws = make({ws_elems}, bf);
  ops::attention_forward(q, k, v, out, lse, ws);
  Tensor dq = make(q.shape(), bf), dk = make(k.shape(), bf), dv = make(v.shape(), bf);
  ops::attention_backward_input(out, q, k, v, out, lse, dq, dk, dv, ws);

  // lse must be f32 (accum_dtype of bf16), not bf16
  Tensor lse_bf = make({B, Hq, T}, bf);
  REQUIRE_THROWS_WITH(ops::attention_forward(q, k, v, out, lse_bf, ws),
                      Catch::Contains("attention_forward") && Catch::Contains("lse") &&
                          Catch::Contains("f32"));
  REQUIRE_THROWS_WITH(ops::attention_backward_input(out, q, k, v, out, lse_bf, dq, dk, dv, ws),
                      Catch::Contains("attention_backward_input") && Catch::Contains("lse"));
  // k, v, out, gradients and workspace share q's dtype
  Tensor k32 = make({B, T, Hkv, Dh}, DType::f32);
  REQUIRE_THROWS_WITH(ops::attention_forward(q, k32, v, out, lse, ws),
                      Catch::Contains("attention_forward") && Catch::Contains("k has dtype f32"));
  Tensor dq32 = make(q.shape(), DType::f32);
  REQUIRE_THROWS_WITH(ops::attention_backward_input(out, q, k, v, out, lse, dq32, dk, dv, ws),
                      Catch::Contains("dq has dtype f32"));
  Tensor ws32 = make({16}, DType::f32);
  REQUIRE_THROWS_WITH(ops::attention_forward(q, k, v, out, lse, ws32),
                      Catch::Contains("workspace"));
  // integer activations are refused on every device
  Tensor qi = make({B, T, Hq, Dh}, DType::i32), ki = make({B, T, Hkv, Dh}, DType::i32);
  REQUIRE_THROWS_WITH(ops::attention_forward(qi, ki, ki, qi, lse, ws),
                      Catch::Contains("attention_forward") && Catch::Contains("i32"));
}

TEST_CASE("attention workspace: CPU score tiles, none on CUDA; CPU checks its size",
          "[ops][attention]") {
  const int64_t B = 2, T = 300, Hq = 8, Hkv = 2, Dh = 32;
  const int64_t cpu_elems = ops::attention_workspace_elems(B, T, Hq, Hkv, Dh, Device::cpu);
  // a pure function of shape and thread count; the default device is the CPU
  REQUIRE(cpu_elems == ops::attention_workspace_elems(B, T, Hq, Hkv, Dh));
  REQUIRE(cpu_elems ==
          cpu::attention_workspace_elems({B, T, Hq, Hkv, Dh}, omp_get_max_threads()));
  REQUIRE(cpu_elems > 0);
  REQUIRE(ops::attention_workspace_elems(B, T, Hq, Hkv, Dh, Device::cuda) == 0);
  REQUIRE(ops::attention_workspace_elems(B, T, Hq, Hkv, Dh, Device::meta) == 0);

  Arena arena;
  AttentionTensors a(arena, {1, 70, 2, 1, 8}, DType::f32);
  Tensor small_ws = arena.make({16}, DType::f32);
  REQUIRE_THROWS_WITH(ops::attention_forward(a.q, a.k, a.v, a.out, a.lse, small_ws),
                      Catch::Contains("attention_forward") && Catch::Contains("workspace"));
  // bf16 has no CPU kernel: a clear error, not a wrong result
  Tensor qb = arena.make({1, 4, 2, 8}, DType::bf16), kb = arena.make({1, 4, 1, 8}, DType::bf16);
  Tensor lse = arena.make({1, 2, 4}, DType::f32), ws = arena.make({1024}, DType::bf16);
  REQUIRE_THROWS_WITH(ops::attention_forward(qb, kb, kb, qb, lse, ws),
                      Catch::Contains("attention_forward") && Catch::Contains("bf16"));
}

// ---- host model of the CUDA kernels' tiling ------------------------------------
// kernels/cuda/attention_{forward,backward}.cu cannot run without a GPU. This
// model walks the tiles those kernels walk, in the same order: forward, query
// tiles of 64 against key tiles 0..(own tile) of 64 with an online softmax in
// the exp2 domain; backward, a kv pass over key tiles of 64 stepping through
// query tiles of 64 (32 at padded head dim 128) from the one holding the
// tile's first key, and a q pass over query tiles of 64 stepping through key
// tiles of 64 (32 at 128) up to the tile's last row; D recomputed from dout
// and out; the same causal masks. With `round` the identity it must give the
// reference to rounding error; with bf16 rounding where the tensor-core
// kernels round (inputs, P and dS before their products, outputs) it measures
// the error a GPU-versus-CPU comparison should allow.
namespace {

struct ModelTensors {
  std::vector<double> q, k, v, dout;  // inputs ([B, T, H, Dh] like the op's)
  std::vector<double> out, lse, dq, dk, dv;
};

int64_t padded_head_dim(int64_t dh) { return dh <= 16 ? 16 : dh <= 32 ? 32 : dh <= 64 ? 64 : 128; }

struct ModelIndex {
  const Dims& d;
  size_t q(int64_t b, int64_t t, int64_t h) const {
    return static_cast<size_t>(((b * d.T + t) * d.Hq + h) * d.Dh);
  }
  size_t kv(int64_t b, int64_t t, int64_t g) const {
    return static_cast<size_t>(((b * d.T + t) * d.Hkv + g) * d.Dh);
  }
  size_t lse(int64_t b, int64_t h, int64_t t) const {
    return static_cast<size_t>((b * d.Hq + h) * d.T + t);
  }
  double dot(const std::vector<double>& x, size_t xi, const std::vector<double>& y,
             size_t yi) const {
    double s = 0;
    for (size_t c = 0; c < static_cast<size_t>(d.Dh); ++c) s += x[xi + c] * y[yi + c];
    return s;
  }
};

constexpr double kModelLog2e = 1.4426950408889634;

template <typename Round>
void model_forward(ModelTensors& m, const Dims& d, Round round) {
  constexpr int64_t kRows = 64, kKeys = 64;
  const ModelIndex at{d};
  const double scale_log2 = kModelLog2e / std::sqrt(static_cast<double>(d.Dh));
  const double inf = std::numeric_limits<double>::infinity();
  m.out.assign(static_cast<size_t>(d.B * d.T * d.Hq * d.Dh), 0.0);
  m.lse.assign(static_cast<size_t>(d.B * d.Hq * d.T), 0.0);
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.Hq; ++h) {
      const int64_t g = h / (d.Hq / d.Hkv);
      for (int64_t q0 = 0; q0 < d.T; q0 += kRows)
        for (int64_t row = q0; row < std::min(q0 + kRows, d.T); ++row) {
          double row_max = -inf, row_sum = 0;
          std::vector<double> o(static_cast<size_t>(d.Dh), 0.0);
          for (int64_t k0 = 0; k0 <= q0; k0 += kKeys) {
            std::vector<double> s(kKeys);
            double tile_max = -inf;
            for (int64_t j = 0; j < kKeys; ++j) {
              const int64_t key = k0 + j;
              const bool causal = key <= row && key < d.T;
              s[static_cast<size_t>(j)] =
                  causal ? at.dot(m.q, at.q(b, row, h), m.k, at.kv(b, key, g)) * scale_log2 : -inf;
              tile_max = std::max(tile_max, s[static_cast<size_t>(j)]);
            }
            const double new_max = std::max(row_max, tile_max);
            const double ref = new_max == -inf ? 0.0 : new_max;
            const double rescale = std::exp2(row_max - ref);
            row_max = new_max;
            double sum = 0;
            for (double& e : s) {
              e = std::exp2(e - ref);
              sum += e;
            }
            row_sum = row_sum * rescale + sum;
            for (double& x : o) x *= rescale;
            for (int64_t j = 0; j < kKeys && k0 + j < d.T; ++j) {
              const double pj = round(s[static_cast<size_t>(j)]);
              const size_t vi = at.kv(b, k0 + j, g);
              for (size_t c = 0; c < o.size(); ++c) o[c] += pj * m.v[vi + c];
            }
          }
          const size_t oi = at.q(b, row, h);
          for (int64_t c = 0; c < d.Dh; ++c)
            m.out[oi + static_cast<size_t>(c)] = round(o[static_cast<size_t>(c)] / row_sum);
          m.lse[at.lse(b, h, row)] = (row_max + std::log2(row_sum)) / kModelLog2e;
        }
    }
}

template <typename Round>
void model_backward(ModelTensors& m, const Dims& d, Round round) {
  const bool wide = padded_head_dim(d.Dh) >= 128;
  const int64_t kv_keys = 64, kv_queries = wide ? 32 : 64;
  const int64_t q_rows = 64, q_keys = wide ? 32 : 64;
  const int64_t group = d.Hq / d.Hkv;
  const ModelIndex at{d};
  const double scale = 1.0 / std::sqrt(static_cast<double>(d.Dh));
  const double scale_log2 = scale * kModelLog2e;
  auto row_d = [&](int64_t b, int64_t h, int64_t row) {
    return at.dot(m.dout, at.q(b, row, h), m.out, at.q(b, row, h));
  };
  // dS of one causal pair (query < T); P through `prob`.
  auto pair = [&](int64_t b, int64_t h, int64_t row, int64_t key, double& prob) {
    const int64_t g = h / group;
    prob = key <= row ? std::exp2(at.dot(m.q, at.q(b, row, h), m.k, at.kv(b, key, g)) * scale_log2 -
                                  m.lse[at.lse(b, h, row)] * kModelLog2e)
                      : 0.0;
    const double dp = at.dot(m.dout, at.q(b, row, h), m.v, at.kv(b, key, g));
    return prob * (dp - row_d(b, h, row));
  };
  m.dq.assign(m.q.size(), 0.0);
  m.dk.assign(m.k.size(), 0.0);
  m.dv.assign(m.v.size(), 0.0);
  // kv pass
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t g = 0; g < d.Hkv; ++g)
      for (int64_t k0 = 0; k0 < d.T; k0 += kv_keys)
        for (int64_t h = g * group; h < (g + 1) * group; ++h)
          for (int64_t q0 = k0 / kv_queries * kv_queries; q0 < d.T; q0 += kv_queries)
            for (int64_t key = k0; key < std::min(k0 + kv_keys, d.T); ++key)
              for (int64_t query = q0; query < std::min(q0 + kv_queries, d.T); ++query) {
                double prob = 0;
                const double ds = pair(b, h, query, key, prob);
                const size_t ki = at.kv(b, key, g), qi = at.q(b, query, h);
                const double pr = round(prob), dsr = round(ds);
                for (int64_t c = 0; c < d.Dh; ++c) {
                  m.dv[ki + static_cast<size_t>(c)] += pr * m.dout[qi + static_cast<size_t>(c)];
                  m.dk[ki + static_cast<size_t>(c)] += dsr * m.q[qi + static_cast<size_t>(c)];
                }
              }
  for (double& x : m.dk) x = round(x * scale);
  for (double& x : m.dv) x = round(x);
  // q pass
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.Hq; ++h)
      for (int64_t q0 = 0; q0 < d.T; q0 += q_rows) {
        const int64_t last_key = std::min(q0 + q_rows - 1, d.T - 1);
        for (int64_t k0 = 0; k0 / q_keys <= last_key / q_keys; k0 += q_keys)
          for (int64_t row = q0; row < std::min(q0 + q_rows, d.T); ++row)
            for (int64_t key = k0; key < std::min(k0 + q_keys, d.T); ++key) {
              double prob = 0;
              const double dsr = round(pair(b, h, row, key, prob));
              const size_t qi = at.q(b, row, h), ki = at.kv(b, key, h / group);
              for (int64_t c = 0; c < d.Dh; ++c)
                m.dq[qi + static_cast<size_t>(c)] += dsr * m.k[ki + static_cast<size_t>(c)];
            }
      }
  for (double& x : m.dq) x = round(x * scale);
}

double round_bf16(double x) { return bf16::from_float(static_cast<float>(x)).to_float(); }

void round_tensor_bf16(const Tensor& t) {
  double* p = t.data<double>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = round_bf16(p[i]);
}

}  // namespace

TEST_CASE("host model of the CUDA attention tiling matches the CPU op", "[ops][attention]") {
  // head dims padded to 32 and 128 (32-wide backward steps), T across and
  // inside tile edges, GQA and plain heads, a single token
  const Dims cases[] = {{2, 130, 4, 2, 24}, {1, 200, 2, 1, 72}, {1, 64, 3, 3, 16},
                        {1, 1, 2, 1, 8}, {1, 97, 2, 2, 128}};
  for (const Dims& d : cases)
    for (const bool bf16_rounding : {false, true}) {
      CAPTURE(d.B, d.T, d.Hq, d.Hkv, d.Dh, bf16_rounding);
      Arena arena;
      AttentionTensors a(arena, d, DType::f64);
      testing::fill_uniform(a.q, 11, -2, 2);
      testing::fill_uniform(a.k, 12, -2, 2);
      testing::fill_uniform(a.v, 13);
      Tensor dout = arena.make(a.out.shape());
      testing::fill_uniform(dout, 14);
      if (bf16_rounding)  // bf16 storage: the reference sees the same rounded inputs
        for (const Tensor* t : {&a.q, &a.k, &a.v, &dout}) round_tensor_bf16(*t);
      a.forward();
      Tensor dq = arena.make(a.q.shape()), dk = arena.make(a.k.shape()),
             dv = arena.make(a.v.shape());
      ops::attention_backward_input(dout, a.q, a.k, a.v, a.out, a.lse, dq, dk, dv, a.ws);

      ModelTensors m{testing::to_vector(a.q), testing::to_vector(a.k), testing::to_vector(a.v),
                     testing::to_vector(dout), {}, {}, {}, {}, {}};
      auto identity = [](double x) { return x; };
      if (bf16_rounding) {
        model_forward(m, d, round_bf16);
        model_backward(m, d, round_bf16);
      } else {
        model_forward(m, d, identity);
        model_backward(m, d, identity);
      }
      const double e_out = testing::max_rel_error(m.out, testing::to_vector(a.out));
      const double e_lse = testing::max_rel_error(m.lse, testing::to_vector(a.lse));
      const double e_dq = testing::max_rel_error(m.dq, testing::to_vector(dq));
      const double e_dk = testing::max_rel_error(m.dk, testing::to_vector(dk));
      const double e_dv = testing::max_rel_error(m.dv, testing::to_vector(dv));
      INFO("relative errors: out " << e_out << ", lse " << e_lse << ", dq " << e_dq << ", dk "
                                   << e_dk << ", dv " << e_dv);
      // exact arithmetic: only summation order differs; bf16: the tolerance a
      // GPU-versus-CPU check of the tensor-core kernels should start from
      const double tol = bf16_rounding ? 2e-2 : 1e-12;
      CHECK(e_out < tol);
      CHECK(e_lse < (bf16_rounding ? 1e-6 : tol));  // lse sums unrounded probabilities
      CHECK(e_dq < tol);
      CHECK(e_dk < tol);
      CHECK(e_dv < tol);
    }
}
