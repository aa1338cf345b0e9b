// The Swin Transformer's index maps: patchify against a loop, the shifted
// window partition against an explicit roll followed by a plain partition,
// partition and merge inverse (and adjoint) to each other, patch merging and
// the token mean against loops, their backwards against finite differences.
#include <catch2/catch.hpp>

#include <cmath>

#include "ops_test_util.h"

using namespace sdp;
using namespace sdp::testing;

namespace {

// x [B, H, W, C] as a vector, index (b, h, w, c).
struct Grid {
  int64_t B, H, W, C;
  int64_t at(int64_t b, int64_t h, int64_t w, int64_t c) const {
    return ((b * H + h) * W + w) * C + c;
  }
};

// torch.roll(x, (-s, -s), dims (1, 2)) done literally: out[h] = x[h + s mod H].
std::vector<double> roll_back(const std::vector<double>& x, const Grid& g, int64_t s) {
  std::vector<double> out(x.size());
  for (int64_t b = 0; b < g.B; ++b)
    for (int64_t h = 0; h < g.H; ++h)
      for (int64_t w = 0; w < g.W; ++w)
        for (int64_t c = 0; c < g.C; ++c)
          out[g.at(b, h, w, c)] = x[g.at(b, (h + s) % g.H, (w + s) % g.W, c)];
  return out;
}

// timm's window_partition of an unshifted [B, H, W, C]: view [B, nH, w, nW,
// w, C], permute to [B, nH, nW, w, w, C], flatten.
std::vector<double> plain_partition(const std::vector<double>& x, const Grid& g, int64_t win) {
  std::vector<double> out;
  for (int64_t b = 0; b < g.B; ++b)
    for (int64_t i = 0; i < g.H / win; ++i)
      for (int64_t j = 0; j < g.W / win; ++j)
        for (int64_t r = 0; r < win; ++r)
          for (int64_t q = 0; q < win; ++q)
            for (int64_t c = 0; c < g.C; ++c)
              out.push_back(x[g.at(b, i * win + r, j * win + q, c)]);
  return out;
}

struct WindowCase {
  int64_t B, H, W, C, window, shift;
};
const WindowCase kWindowCases[] = {
    {2, 8, 8, 3, 4, 0}, {2, 8, 8, 3, 4, 2}, {1, 8, 12, 5, 4, 3}, {3, 6, 6, 2, 3, 1},
    {1, 4, 4, 1, 4, 0}, {2, 2, 4, 4, 1, 0},
};

}  // namespace

TEST_CASE("patchify matches a loop", "[ops][window]") {
  for (const auto& c : kFloatCases) {
    Arena arena;
    constexpr int64_t B = 2, C = 3, H = 8, W = 12, p = 4;
    Tensor img64 = arena.make({B, C, H, W});
    fill_uniform(img64, 1);
    Tensor img = cast_copy(arena, img64, c.dtype);
    Tensor out = arena.make({B, H / p, W / p, C * p * p}, c.dtype);
    fill_garbage(out);
    ops::patchify(img, p, out);
    const auto iv = to_vector(img);
    std::vector<double> ref;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < H / p; ++i)
        for (int64_t j = 0; j < W / p; ++j)
          for (int64_t ch = 0; ch < C; ++ch)
            for (int64_t r = 0; r < p; ++r)
              for (int64_t q = 0; q < p; ++q)
                ref.push_back(iv[((b * C + ch) * H + i * p + r) * W + j * p + q]);
    REQUIRE(to_vector(out) == ref);
  }
}

TEST_CASE("window_partition is a roll then a partition; merge inverts it", "[ops][window]") {
  for (const auto& wc : kWindowCases) {
    for (const auto& c : kFloatCases) {
      INFO("B " << wc.B << " H " << wc.H << " W " << wc.W << " C " << wc.C << " window "
                << wc.window << " shift " << wc.shift << " " << dtype_name(c.dtype));
      Arena arena;
      const Grid g{wc.B, wc.H, wc.W, wc.C};
      const int64_t nwin = wc.B * (wc.H / wc.window) * (wc.W / wc.window);
      Tensor x64 = arena.make({wc.B, wc.H, wc.W, wc.C});
      fill_uniform(x64, 2);
      Tensor x = cast_copy(arena, x64, c.dtype);
      Tensor win = arena.make({nwin, wc.window * wc.window, wc.C}, c.dtype);
      fill_garbage(win);
      ops::window_partition(x, wc.window, wc.shift, win);
      const auto xv = to_vector(x);
      REQUIRE(to_vector(win) == plain_partition(roll_back(xv, g, wc.shift), g, wc.window));

      Tensor back = arena.make(x.shape(), c.dtype);
      fill_garbage(back);
      ops::window_merge(win, wc.window, wc.shift, back);
      REQUIRE(to_vector(back) == xv);

      // And the other way round: partition(merge(windows)) = windows.
      Tensor w2 = arena.make(win.shape(), c.dtype), x2 = arena.make(x.shape(), c.dtype);
      fill_uniform(w2, 3);
      ops::window_merge(w2, wc.window, wc.shift, x2);
      Tensor w3 = arena.make(win.shape(), c.dtype);
      ops::window_partition(x2, wc.window, wc.shift, w3);
      REQUIRE(to_vector(w3) == to_vector(w2));
    }
  }
}

TEST_CASE("window_merge is window_partition's backward (finite differences)", "[ops][window]") {
  Arena arena;
  constexpr int64_t B = 1, H = 6, W = 6, C = 2, win = 3, shift = 1;
  Tensor x = arena.make({B, H, W, C}), y = arena.make({B * 4, win * win, C});
  Tensor g = arena.make({B * 4, win * win, C});
  fill_uniform(x, 4);
  fill_uniform(g, 5);
  auto loss = [&] {
    ops::window_partition(x, win, shift, y);
    return weighted_sum(y, g);
  };
  const auto num = numeric_gradient(x, loss);
  Tensor dx = arena.make({B, H, W, C});
  ops::window_merge(g, win, shift, dx);
  REQUIRE(max_rel_error(to_vector(dx), num) < 1e-8);

  // ... and partition is merge's.
  Tensor gx = arena.make({B, H, W, C}), xm = arena.make({B, H, W, C});
  fill_uniform(gx, 6);
  auto loss_merge = [&] {
    ops::window_merge(y, win, shift, xm);
    return weighted_sum(xm, gx);
  };
  fill_uniform(y, 7);
  const auto num_w = numeric_gradient(y, loss_merge);
  Tensor dw = arena.make(y.shape());
  ops::window_partition(gx, win, shift, dw);
  REQUIRE(max_rel_error(to_vector(dw), num_w) < 1e-8);
}

TEST_CASE("patch_merge matches a loop and its backward finite differences", "[ops][window]") {
  constexpr int64_t B = 2, H = 4, W = 6, C = 3;
  const Grid g{B, H, W, C};
  for (const auto& c : kFloatCases) {
    Arena arena;
    Tensor x64 = arena.make({B, H, W, C});
    fill_uniform(x64, 8);
    Tensor x = cast_copy(arena, x64, c.dtype), y = arena.make({B, H / 2, W / 2, 4 * C}, c.dtype);
    fill_garbage(y);
    ops::patch_merge_forward(x, y);
    const auto xv = to_vector(x);
    std::vector<double> ref;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < H / 2; ++i)
        for (int64_t j = 0; j < W / 2; ++j)
          for (auto [dh, dw] : {std::pair{0, 0}, {1, 0}, {0, 1}, {1, 1}})  // timm's x0..x3
            for (int64_t ch = 0; ch < C; ++ch)
              ref.push_back(xv[g.at(b, 2 * i + dh, 2 * j + dw, ch)]);
    REQUIRE(to_vector(y) == ref);
  }
  Arena arena;
  Tensor x = arena.make({B, H, W, C}), y = arena.make({B, H / 2, W / 2, 4 * C});
  Tensor gy = arena.make(y.shape());
  fill_uniform(x, 9);
  fill_uniform(gy, 10);
  auto loss = [&] {
    ops::patch_merge_forward(x, y);
    return weighted_sum(y, gy);
  };
  const auto num = numeric_gradient(x, loss);
  Tensor dx = arena.make(x.shape());
  fill_garbage(dx);
  ops::patch_merge_backward_input(gy, dx);
  REQUIRE(max_rel_error(to_vector(dx), num) < 1e-8);
}

TEST_CASE("token_mean matches a loop and its backward finite differences", "[ops][window]") {
  for (const auto& c : kFloatCases) {
    for (const Shape& shape : {Shape{3, 5, 70}, Shape{2, 2, 3, 4}}) {
      Arena arena;
      const int64_t B = shape[0], C = shape[shape.ndim() - 1], L = shape.numel() / (B * C);
      Tensor x64 = arena.make(shape);
      fill_uniform(x64, 11);
      Tensor x = cast_copy(arena, x64, c.dtype), y = arena.make({B, C}, c.dtype);
      fill_garbage(y);
      ops::token_mean_forward(x, y);
      const auto xv = to_vector(x);
      std::vector<double> ref;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t ch = 0; ch < C; ++ch) {
          double s = 0;
          for (int64_t l = 0; l < L; ++l) s += xv[(b * L + l) * C + ch];
          ref.push_back(s / L);
        }
      REQUIRE(max_rel_error(to_vector(y), ref) < c.tol);
    }
  }
  Arena arena;
  Tensor x = arena.make({2, 2, 3, 4}), y = arena.make({2, 4}), g = arena.make({2, 4});
  fill_uniform(x, 12);
  fill_uniform(g, 13);
  auto loss = [&] {
    ops::token_mean_forward(x, y);
    return weighted_sum(y, g);
  };
  const auto num = numeric_gradient(x, loss);
  Tensor dx = arena.make(x.shape());
  fill_garbage(dx);
  ops::token_mean_backward_input(g, dx);
  REQUIRE(max_rel_error(to_vector(dx), num) < 1e-8);
}

TEST_CASE("window maps give the same bits on 1 and 2 threads", "[ops][window]") {
  Arena arena;
  constexpr int64_t B = 4, H = 16, W = 16, C = 96;  // above the parallel threshold
  Tensor x = arena.make({B, H, W, C}, DType::f32);
  fill_uniform(x, 14);
  auto run = [&](int threads) {
    ThreadCount guard(threads);
    Tensor win = arena.make({B * 16, 16, C}, DType::f32);
    Tensor m = arena.make({B, 8, 8, 4 * C}, DType::f32);
    Tensor mean = arena.make({B, C}, DType::f32);
    ops::window_partition(x, 4, 2, win);
    ops::patch_merge_forward(x, m);
    ops::token_mean_forward(x, mean);
    std::vector<double> all;
    for (const Tensor* t : {&win, &m, &mean}) {
      const auto v = to_vector(*t);
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  };
  REQUIRE(run(1) == run(2));
}

TEST_CASE("window maps reject bad arguments", "[ops][window]") {
  Arena arena;
  Tensor img = arena.make({1, 3, 8, 8}), x = arena.make({2, 8, 8, 3});
  Tensor patches = arena.make({1, 2, 2, 48}), win = arena.make({8, 16, 3});
  REQUIRE_THROWS_WITH(ops::patchify(img, 3, patches),
                      Catch::Contains("patchify") && Catch::Contains("multiples of the patch 3"));
  REQUIRE_THROWS_WITH(ops::patchify(img, 0, patches), Catch::Contains("patch must be >= 1"));
  REQUIRE_THROWS_WITH(ops::patchify(img, 2, patches),
                      Catch::Contains("patchify") && Catch::Contains("patches"));
  REQUIRE_THROWS_WITH(ops::patchify(x.view({2, 8, 8, 3}).narrow(3, 0, 2), 4, patches),
                      Catch::Contains("patchify") && Catch::Contains("contiguous"));
  REQUIRE_THROWS_WITH(ops::window_partition(x, 3, 0, win),
                      Catch::Contains("window_partition") &&
                          Catch::Contains("multiples of the window 3"));
  REQUIRE_THROWS_WITH(ops::window_partition(x, 4, 4, win), Catch::Contains("shift = 4 is invalid"));
  REQUIRE_THROWS_WITH(ops::window_partition(x, 4, -1, win),
                      Catch::Contains("shift = -1 is invalid"));
  REQUIRE_THROWS_WITH(ops::window_partition(x, 2, 0, win),
                      Catch::Contains("window_partition") && Catch::Contains("windows"));
  Tensor three_d = patches.view({4, 2, 24});
  REQUIRE_THROWS_WITH(ops::window_merge(win, 4, 0, three_d),
                      Catch::Contains("window_merge") && Catch::Contains("[B, H, W, C]"));
  Tensor win32 = arena.make({8, 16, 3}, DType::f32);
  REQUIRE_THROWS_WITH(ops::window_merge(win32, 4, 0, x),
                      Catch::Contains("window_merge") && Catch::Contains("f32"));
  Tensor odd = arena.make({1, 3, 4, 2}), y = arena.make({1, 1, 2, 8});
  REQUIRE_THROWS_WITH(ops::patch_merge_forward(odd, y), Catch::Contains("must be even"));
  Tensor x4 = arena.make({1, 4, 4, 2}), y_bad = arena.make({1, 2, 2, 4});
  REQUIRE_THROWS_WITH(ops::patch_merge_forward(x4, y_bad),
                      Catch::Contains("patch_merge_forward") && Catch::Contains("y"));
  REQUIRE_THROWS_WITH(ops::patch_merge_backward_input(y_bad, x4),
                      Catch::Contains("patch_merge_backward_input") && Catch::Contains("dy"));
  Tensor flat = arena.make({2, 3}), mean = arena.make({2, 3});
  REQUIRE_THROWS_WITH(ops::token_mean_forward(flat, mean), Catch::Contains("[B, L, C]"));
  Tensor empty = arena.make({2, 0, 3});
  REQUIRE_THROWS_WITH(ops::token_mean_forward(empty, mean), Catch::Contains("no tokens"));
  Tensor tokens = arena.make({2, 5, 3}), bad_mean = arena.make({2, 5});
  REQUIRE_THROWS_WITH(ops::token_mean_forward(tokens, bad_mean),
                      Catch::Contains("token_mean_forward") && Catch::Contains("y"));
  REQUIRE_THROWS_WITH(ops::token_mean_backward_input(bad_mean, tokens),
                      Catch::Contains("token_mean_backward_input") && Catch::Contains("dy"));
  // In place would read elements it has already overwritten.
  Tensor sq = arena.make({1, 4, 4, 1}), sq_win = sq.view({1, 16, 1});
  REQUIRE_THROWS_WITH(ops::window_partition(sq, 4, 1, sq_win), Catch::Contains("overlaps"));
}

TEST_CASE("window maps on meta check shapes and take bf16", "[ops][window]") {
  MetaAllocator meta(512, Device::cuda);
  auto make = [&](Shape s, DType dtype = DType::bf16) {
    return OwnedTensor(meta, s, dtype, MemCategory::activation);
  };
  OwnedTensor img = make({2, 3, 32, 32}), patches = make({2, 8, 8, 48});
  OwnedTensor x = make({2, 8, 8, 96}), win = make({8, 16, 96}), m = make({2, 4, 4, 384});
  OwnedTensor mean = make({2, 96}), bad = make({8, 16, 95});
  ops::patchify(*img, 4, *patches);
  ops::window_partition(*x, 4, 2, *win);
  ops::window_merge(*win, 4, 2, *x);
  ops::patch_merge_forward(*x, *m);
  ops::patch_merge_backward_input(*m, *x);
  ops::token_mean_forward(*x, *mean);
  ops::token_mean_backward_input(*mean, *x);
  REQUIRE_THROWS_WITH(ops::window_partition(*x, 4, 2, *bad), Catch::Contains("window_partition"));
  OwnedTensor mean32 = make({2, 96}, DType::f32);
  REQUIRE_THROWS_WITH(ops::token_mean_forward(*x, *mean32),
                      Catch::Contains("y") && Catch::Contains("expected bf16"));

  Arena arena;  // the CPU has no bf16 kernels
  Tensor xc = arena.make({1, 4, 4, 2}, DType::bf16), wc = arena.make({1, 16, 2}, DType::bf16);
  REQUIRE_THROWS_WITH(ops::window_partition(xc, 4, 0, wc),
                      Catch::Contains("bf16") && Catch::Contains("CPU"));
}
