// Window attention against a plain f64 loop (with and without the shifted
// windows' mask), its backward against finite differences for qkv and the
// bias table, the row-blocked backward path, thread-count independence,
// FLOP counts, bad arguments and the meta device.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/flop_count.h"
#include "ops_test_util.h"

using namespace sdp;
using namespace sdp::testing;

namespace {

struct Case {
  int64_t windows, window, heads, head_dim, mask_windows;  // mask_windows 0: no mask
  int64_t tokens() const { return window * window; }
  int64_t table_rows() const { return (2 * window - 1) * (2 * window - 1); }
};

// Swin's relative position index of a w x w window: token (r1, c1) against
// (r2, c2) reads row (r1 - r2 + w - 1) (2w - 1) + (c1 - c2 + w - 1).
void fill_relative_index(const Tensor& index, int64_t w) {
  int32_t* p = index.data<int32_t>();
  for (int64_t a = 0; a < w * w; ++a)
    for (int64_t b = 0; b < w * w; ++b)
      p[a * w * w + b] = static_cast<int32_t>((a / w - b / w + w - 1) * (2 * w - 1) +
                                              (a % w - b % w + w - 1));
}

// The plain definition, in f64: scores, softmax, probs times v.
void reference_forward(const Case& c, const std::vector<double>& qkv,
                       const std::vector<double>& table, const Tensor& index,
                       const std::vector<double>& mask, double scale, std::vector<double>& out,
                       std::vector<double>& probs) {
  const int64_t N = c.tokens(), H = c.heads, Dh = c.head_dim;
  auto at = [&](int64_t b, int64_t t, int64_t which, int64_t h, int64_t e) {
    return qkv[(((b * N + t) * 3 + which) * H + h) * Dh + e];
  };
  out.assign(static_cast<size_t>(c.windows * N * H * Dh), 0.0);
  probs.assign(static_cast<size_t>(c.windows * H * N * N), 0.0);
  const int32_t* idx = index.data<int32_t>();
  for (int64_t b = 0; b < c.windows; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < N; ++i) {
        std::vector<double> s(static_cast<size_t>(N));
        double mx = -INFINITY;
        for (int64_t j = 0; j < N; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < Dh; ++e) dot += at(b, i, 0, h, e) * at(b, j, 1, h, e);
          s[j] = scale * dot + table[idx[i * N + j] * H + h];
          if (c.mask_windows > 0) s[j] += mask[((b % c.mask_windows) * N + i) * N + j];
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (double& v : s) sum += (v = std::exp(v - mx));
        for (int64_t j = 0; j < N; ++j) {
          const double pj = s[j] / sum;
          probs[((b * H + h) * N + i) * N + j] = pj;
          for (int64_t e = 0; e < Dh; ++e)
            out[((b * N + i) * H + h) * Dh + e] += pj * at(b, j, 2, h, e);
        }
      }
}

// The tensors of one case, in `dtype`.
struct Inputs {
  Tensor qkv, table, index, mask, out, probs;
};
Inputs make_inputs(Arena& arena, const Case& c, DType dtype, double mask_low) {
  const int64_t N = c.tokens();
  Inputs in;
  Tensor qkv64 = arena.make({c.windows, N, 3, c.heads, c.head_dim});
  Tensor table64 = arena.make({c.table_rows(), c.heads});
  fill_uniform(qkv64, 1, -1.5, 1.5);
  fill_uniform(table64, 2, -0.5, 0.5);
  in.qkv = cast_copy(arena, qkv64, dtype);
  in.table = cast_copy(arena, table64, dtype);
  in.index = arena.make({N, N}, DType::i32);
  fill_relative_index(in.index, c.window);
  if (c.mask_windows > 0) {
    // 0 or mask_low, with 0 on the diagonal as in Swin's region masks.
    Tensor m64 = arena.make({c.mask_windows, N, N});
    fill_uniform(m64, 3);
    double* m = m64.data<double>();
    for (int64_t i = 0; i < m64.numel(); ++i)
      m[i] = (i % (N * N)) % (N + 1) == 0 || m[i] > 0 ? 0.0 : mask_low;
    in.mask = cast_copy(arena, m64, dtype);
  }
  in.out = arena.make({c.windows, N, c.heads, c.head_dim}, dtype);
  in.probs = arena.make({c.windows, c.heads, N, N}, dtype);
  return in;
}

// The values of an optional tensor (none for ndim 0).
std::vector<double> maybe(const Tensor& t) {
  return t.ndim() == 0 ? std::vector<double>{} : to_vector(t);
}

}  // namespace

TEST_CASE("window_attention_forward matches the plain definition", "[ops][window_attention]") {
  for (const Case c : {Case{4, 2, 2, 3, 0}, Case{6, 3, 3, 4, 2}, Case{2, 4, 1, 8, 1}}) {
    for (const auto& dc : kFloatCases) {
      INFO("windows " << c.windows << " window " << c.window << " mask " << c.mask_windows
                      << " " << dtype_name(dc.dtype));
      Arena arena;
      Inputs in = make_inputs(arena, c, dc.dtype, -100.0);
      fill_garbage(in.out);
      fill_garbage(in.probs);
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
      ops::window_attention_forward(in.qkv, in.table, in.index, in.mask, scale, in.out, in.probs);
      std::vector<double> ref_out, ref_probs;
      reference_forward(c, to_vector(in.qkv), to_vector(in.table), in.index, maybe(in.mask),
                        scale, ref_out, ref_probs);
      REQUIRE(max_rel_error(to_vector(in.out), ref_out) < dc.tol);
      REQUIRE(max_rel_error(to_vector(in.probs), ref_probs) < dc.tol);
    }
  }
}

TEST_CASE("window attention backward matches finite differences", "[ops][window_attention]") {
  // The last case has N = 81 > 4096 / 81 query rows per tile: the row-blocked path.
  for (const Case c : {Case{4, 2, 2, 3, 0}, Case{4, 3, 2, 2, 2}, Case{1, 9, 1, 2, 0}}) {
    INFO("windows " << c.windows << " window " << c.window << " mask " << c.mask_windows);
    Arena arena;
    // A mild mask (-2) so the masked scores still carry gradient.
    Inputs in = make_inputs(arena, c, DType::f64, -2.0);
    const double scale = 0.7;
    Tensor g = arena.make(in.out.shape());
    fill_uniform(g, 4);  // d loss / d out
    auto loss = [&] {
      ops::window_attention_forward(in.qkv, in.table, in.index, in.mask, scale, in.out,
                                    in.probs);
      return weighted_sum(in.out, g);
    };
    const auto num_qkv = numeric_gradient(in.qkv, loss);
    const auto num_table = numeric_gradient(in.table, loss);
    loss();  // the probabilities of the unperturbed inputs

    Tensor dqkv = arena.make(in.qkv.shape()), dtable = arena.make(in.table.shape());
    fill_garbage(dqkv);
    ops::fill(dtable, 0.0);
    ops::window_attention_backward_input(g, in.qkv, in.probs, in.index, scale, dqkv, &dtable);
    REQUIRE(max_rel_error(to_vector(dqkv), num_qkv) < 1e-7);
    REQUIRE(max_rel_error(to_vector(dtable), num_table) < 1e-7);

    // dtable accumulates; without it dqkv is the same.
    loss();
    Tensor dqkv2 = arena.make(in.qkv.shape());
    ops::window_attention_backward_input(g, in.qkv, in.probs, in.index, scale, dqkv2, &dtable);
    auto twice = num_table;
    for (double& v : twice) v *= 2;
    REQUIRE(max_rel_error(to_vector(dtable), twice) < 1e-7);
    loss();
    ops::window_attention_backward_input(g, in.qkv, in.probs, in.index, scale, dqkv2, nullptr);
    REQUIRE(to_vector(dqkv2) == to_vector(dqkv));
  }
}

TEST_CASE("window attention backward leaves the score gradients in probs",
          "[ops][window_attention]") {
  // With q = k = 0 the scores are the bias alone, so d loss / d table[r, h]
  // is the sum of probs (now dS) over the windows and the (i, j) that read r.
  const Case c{3, 2, 2, 2, 0};
  Arena arena;
  Inputs in = make_inputs(arena, c, DType::f64, 0.0);
  Tensor g = arena.make(in.out.shape());
  fill_uniform(g, 5);
  ops::window_attention_forward(in.qkv, in.table, in.index, in.mask, 0.5, in.out, in.probs);
  Tensor dqkv = arena.make(in.qkv.shape()), dtable = arena.make(in.table.shape());
  ops::fill(dtable, 0.0);
  ops::window_attention_backward_input(g, in.qkv, in.probs, in.index, 0.5, dqkv, &dtable);
  const int64_t N = c.tokens();
  const auto ds = to_vector(in.probs);
  std::vector<double> sums(static_cast<size_t>(c.table_rows() * c.heads), 0.0);
  for (int64_t b = 0; b < c.windows; ++b)
    for (int64_t h = 0; h < c.heads; ++h)
      for (int64_t ij = 0; ij < N * N; ++ij)
        sums[in.index.data<int32_t>()[ij] * c.heads + h] += ds[(b * c.heads + h) * N * N + ij];
  REQUIRE(max_rel_error(to_vector(dtable), sums) < 1e-12);
  // Each row of dS sums to 0 (softmax's Jacobian annihilates constants).
  for (int64_t row = 0; row < c.windows * c.heads * N; ++row) {
    double s = 0;
    for (int64_t j = 0; j < N; ++j) s += ds[row * N + j];
    REQUIRE(std::abs(s) < 1e-12);
  }
}

TEST_CASE("window attention f32 gives the same bits on 1 and 2 threads",
          "[ops][window_attention]") {
  const Case c{32, 4, 3, 8, 4};
  Arena arena;
  Inputs in = make_inputs(arena, c, DType::f32, -100.0);
  Tensor g = arena.make(in.out.shape(), DType::f32);
  fill_uniform(g, 6);
  auto run = [&](int threads) {
    ThreadCount guard(threads);
    Tensor dqkv = arena.make(in.qkv.shape(), DType::f32);
    Tensor dtable = arena.make(in.table.shape(), DType::f32);
    ops::fill(dtable, 0.0);
    ops::window_attention_forward(in.qkv, in.table, in.index, in.mask, 0.35, in.out, in.probs);
    std::vector<double> all = to_vector(in.out);
    ops::window_attention_backward_input(g, in.qkv, in.probs, in.index, 0.35, dqkv, &dtable);
    for (const Tensor* t : {&dqkv, &dtable}) {
      const auto v = to_vector(*t);
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  };
  REQUIRE(run(1) == run(2));
}

TEST_CASE("window attention counts the products' FLOPs on meta", "[ops][window_attention]") {
  MetaAllocator meta(512, Device::cuda);
  auto make = [&](Shape s, DType dtype = DType::bf16) {
    return OwnedTensor(meta, s, dtype, MemCategory::activation);
  };
  constexpr int64_t Bw = 8, N = 16, H = 3, Dh = 32, nW = 4, R = 49;
  OwnedTensor qkv = make({Bw, N, 3, H, Dh}), table = make({R, H}), mask = make({nW, N, N});
  OwnedTensor index = make({N, N}, DType::i32), out = make({Bw, N, H, Dh});
  OwnedTensor probs = make({Bw, H, N, N}), dqkv = make({Bw, N, 3, H, Dh});
  OwnedTensor dtable = make({R, H}, DType::f32);
  ops::reset_flop_count();
  ops::window_attention_forward(*qkv, *table, *index, *mask, 0.17, *out, *probs);
  REQUIRE(ops::flops_counted() == 4.0 * Bw * H * N * N * Dh);
  ops::reset_flop_count();
  ops::window_attention_backward_input(*out, *qkv, *probs, *index, 0.17, *dqkv, &*dtable);
  REQUIRE(ops::flops_counted() == 8.0 * Bw * H * N * N * Dh);
  ops::window_attention_forward(*qkv, *table, *index, Tensor(), 0.17, *out, *probs);  // no mask

  OwnedTensor dtable16 = make({R, H}), table32 = make({R, H}, DType::f32);
  REQUIRE_THROWS_WITH(
      ops::window_attention_backward_input(*out, *qkv, *probs, *index, 0.17, *dqkv, &*dtable16),
      Catch::Contains("dtable") && Catch::Contains("expected f32"));
  REQUIRE_THROWS_WITH(
      ops::window_attention_forward(*qkv, *table32, *index, *mask, 0.17, *out, *probs),
      Catch::Contains("table") && Catch::Contains("expected bf16"));

  Arena arena;  // the CPU has no bf16 kernels
  Tensor q = arena.make({1, 1, 3, 1, 1}, DType::bf16), t = arena.make({1, 1}, DType::bf16);
  Tensor ix = arena.make({1, 1}, DType::i32), o = arena.make({1, 1, 1, 1}, DType::bf16);
  Tensor p = arena.make({1, 1, 1, 1}, DType::bf16);
  ops::fill(ix, 0.0);
  REQUIRE_THROWS_WITH(ops::window_attention_forward(q, t, ix, Tensor(), 1.0, o, p),
                      Catch::Contains("bf16") && Catch::Contains("CPU"));
}

TEST_CASE("window attention rejects bad arguments", "[ops][window_attention]") {
  const Case c{4, 2, 2, 3, 2};
  Arena arena;
  Inputs in = make_inputs(arena, c, DType::f64, -100.0);
  const int64_t N = c.tokens();
  auto fwd = [&](const Tensor& qkv, const Tensor& table, const Tensor& index, const Tensor& mask,
                 double scale, Tensor& out, Tensor& probs) {
    ops::window_attention_forward(qkv, table, index, mask, scale, out, probs);
  };
  constexpr const char* op = "window_attention_forward";
  Tensor bad_qkv = arena.make({4, N, 2, 2, 3});
  REQUIRE_THROWS_WITH(fwd(bad_qkv, in.table, in.index, in.mask, 1, in.out, in.probs),
                      Catch::Contains(op) && Catch::Contains("[Bw, N, 3, H, Dh]"));
  Tensor bad_table = arena.make({9, 3});
  REQUIRE_THROWS_WITH(fwd(in.qkv, bad_table, in.index, in.mask, 1, in.out, in.probs),
                      Catch::Contains("table must be [R, H]"));
  Tensor flat_index = arena.make({N * N}, DType::i32);
  fill_relative_index(flat_index, c.window);
  fwd(in.qkv, in.table, flat_index, in.mask, 1, in.out, in.probs);  // [N N] is fine
  Tensor bad_index = arena.make({N, N + 1}, DType::i32);
  REQUIRE_THROWS_WITH(fwd(in.qkv, in.table, bad_index, in.mask, 1, in.out, in.probs),
                      Catch::Contains("index must be [N, N]"));
  Tensor f64_index = arena.make({N, N});
  REQUIRE_THROWS_WITH(fwd(in.qkv, in.table, f64_index, in.mask, 1, in.out, in.probs),
                      Catch::Contains("index") && Catch::Contains("i32"));
  Tensor far_index = arena.make({N, N}, DType::i32);
  fill_relative_index(far_index, c.window);
  far_index.data<int32_t>()[5] = static_cast<int32_t>(c.table_rows());
  REQUIRE_THROWS_WITH(fwd(in.qkv, in.table, far_index, in.mask, 1, in.out, in.probs),
                      Catch::Contains("index[5] = 9 is out of range"));
  Tensor mask3 = arena.make({3, N, N});
  REQUIRE_THROWS_WITH(fwd(in.qkv, in.table, in.index, mask3, 1, in.out, in.probs),
                      Catch::Contains("not a multiple of the mask's nW = 3"));
  Tensor bad_mask = arena.make({2, N, N + 1});
  REQUIRE_THROWS_WITH(fwd(in.qkv, in.table, in.index, bad_mask, 1, in.out, in.probs),
                      Catch::Contains(op) && Catch::Contains("mask"));
  REQUIRE_THROWS_WITH(fwd(in.qkv, in.table, in.index, in.mask, NAN, in.out, in.probs),
                      Catch::Contains("scale must be finite"));
  REQUIRE_THROWS_WITH(fwd(in.qkv, in.table, in.index, in.mask, 1, in.probs, in.probs),
                      Catch::Contains(op) && Catch::Contains("out"));
  Tensor bad_probs = arena.make({4, N, 2, N});
  REQUIRE_THROWS_WITH(fwd(in.qkv, in.table, in.index, in.mask, 1, in.out, bad_probs),
                      Catch::Contains(op) && Catch::Contains("probs"));

  constexpr const char* bop = "window_attention_backward_input";
  Tensor dqkv = arena.make(in.qkv.shape()), dtable = arena.make(in.table.shape());
  Tensor dtable32 = arena.make(in.table.shape(), DType::f32), small = arena.make({4, 3});
  REQUIRE_THROWS_WITH(ops::window_attention_backward_input(in.out, in.qkv, in.probs, in.index, 1,
                                                           dqkv, &dtable32),
                      Catch::Contains(bop) && Catch::Contains("dtable") &&
                          Catch::Contains("expected f64"));
  REQUIRE_THROWS_WITH(ops::window_attention_backward_input(in.out, in.qkv, in.probs, in.index, 1,
                                                           dqkv, &small),
                      Catch::Contains("dtable must be [R, H]"));
  Tensor small_rows = arena.make({3, 2});  // the index reaches row 8
  REQUIRE_THROWS_WITH(ops::window_attention_backward_input(in.out, in.qkv, in.probs, in.index, 1,
                                                           dqkv, &small_rows),
                      Catch::Contains("out of range") && Catch::Contains("dtable has 3 rows"));
  REQUIRE_THROWS_WITH(ops::window_attention_backward_input(in.probs, in.qkv, in.probs, in.index,
                                                           1, dqkv, &dtable),
                      Catch::Contains(bop) && Catch::Contains("dout"));
  Tensor dqkv_bad = arena.make({4, N, 3, 2, 2});
  REQUIRE_THROWS_WITH(ops::window_attention_backward_input(in.out, in.qkv, in.probs, in.index, 1,
                                                           dqkv_bad, &dtable),
                      Catch::Contains(bop) && Catch::Contains("dqkv"));
  REQUIRE_THROWS_WITH(ops::window_attention_backward_input(in.out, in.qkv, in.probs, in.index, 1,
                                                           in.qkv, &dtable),
                      Catch::Contains("overlaps"));
}
