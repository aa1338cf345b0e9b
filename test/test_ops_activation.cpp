// ReLU, global average pooling and bias: exact checks against loops, in place
// where allowed, the meta device (bf16 with an f32 dbias) and argument errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "ops_test_util.h"

using namespace sdp;
using namespace sdp::testing;

TEST_CASE("relu forward and backward, in place too", "[ops][activation]") {
  for (const auto& dc : kFloatCases) {
    Arena arena;
    const Shape shape{3, 4, 5, 6};
    Tensor x64 = arena.make(shape);
    fill_uniform(x64, 1);
    Tensor x = cast_copy(arena, x64, dc.dtype), y = arena.make(shape, dc.dtype);
    fill_garbage(y);
    ops::relu_forward(x, y);
    const auto xv = to_vector(x);
    std::vector<double> want;
    for (double v : xv) want.push_back(v > 0 ? v : 0.0);
    REQUIRE(to_vector(y) == want);

    Tensor dy = arena.make(shape, dc.dtype), dx = arena.make(shape, dc.dtype);
    fill_uniform(dy, 2);
    fill_garbage(dx);
    ops::relu_backward_input(dy, y, dx);
    const auto dyv = to_vector(dy);
    std::vector<double> want_dx;
    for (size_t i = 0; i < xv.size(); ++i) want_dx.push_back(xv[i] > 0 ? dyv[i] : 0.0);
    REQUIRE(to_vector(dx) == want_dx);

    ops::relu_backward_input(dy, y, dy);  // dx aliasing dy
    REQUIRE(to_vector(dy) == want_dx);
    ops::relu_forward(x, x);  // y aliasing x
    REQUIRE(to_vector(x) == want);
  }
}

TEST_CASE("relu keeps NaN visible and is parallel-safe", "[ops][activation]") {
  ThreadCount guard(2);
  Arena arena;
  const int64_t n = 100003;  // past the one-thread threshold, not a multiple of the block
  Tensor x = arena.make({n}, DType::f32), y = arena.make({n}, DType::f32);
  fill_uniform(x, 3);
  x.data<float>()[17] = std::numeric_limits<float>::quiet_NaN();
  ops::relu_forward(x, y);
  REQUIRE(std::isnan(y.data<float>()[17]));
  for (int64_t i = 0; i < n; ++i) {
    if (i == 17) continue;
    const float v = x.data<float>()[i];
    REQUIRE(y.data<float>()[i] == (v > 0 ? v : 0.0f));
  }
}

TEST_CASE("global average pooling forward and backward", "[ops][activation]") {
  for (const auto& dc : kFloatCases) {
    Arena arena;
    const int64_t B = 3, C = 5, H = 4, W = 3;
    Tensor x64 = arena.make({B, C, H, W});
    fill_uniform(x64, 4);
    Tensor x = cast_copy(arena, x64, dc.dtype), y = arena.make({B, C}, dc.dtype);
    fill_garbage(y);
    ops::global_avg_pool_forward(x, y);
    const auto xv = to_vector(x);
    std::vector<double> want(static_cast<size_t>(B * C), 0.0);
    for (size_t i = 0; i < xv.size(); ++i) want[i / (H * W)] += xv[i] / (H * W);
    REQUIRE(max_rel_error(to_vector(y), want) < dc.tol);

    Tensor dy = arena.make({B, C}, dc.dtype), dx = arena.make({B, C, H, W}, dc.dtype);
    fill_uniform(dy, 5);
    fill_garbage(dx);
    ops::global_avg_pool_backward_input(dy, dx);
    const auto dyv = to_vector(dy);
    std::vector<double> want_dx;
    for (size_t i = 0; i < xv.size(); ++i) want_dx.push_back(dyv[i / (H * W)] / (H * W));
    REQUIRE(max_rel_error(to_vector(dx), want_dx) < dc.tol);
  }
}

TEST_CASE("bias add and its gradient", "[ops][activation]") {
  for (const auto& dc : kFloatCases) {
    for (Shape shape : {Shape{7, 5}, Shape{2, 3, 70}}) {  // [N, C] and [..., C] (> 64 columns)
      INFO(dtype_name(dc.dtype) << " " << shape.str());
      Arena arena;
      const int64_t C = shape[shape.ndim() - 1], N = shape.numel() / C;
      Tensor y64 = arena.make(shape), bias64 = arena.make({C});
      fill_uniform(y64, 6);
      fill_uniform(bias64, 7);
      Tensor y = cast_copy(arena, y64, dc.dtype), bias = cast_copy(arena, bias64, dc.dtype);
      const auto y0 = to_vector(y), bv = to_vector(bias);
      ops::bias_add_forward(y, bias);
      std::vector<double> want;
      for (size_t i = 0; i < y0.size(); ++i) want.push_back(y0[i] + bv[i % static_cast<size_t>(C)]);
      REQUIRE(max_rel_error(to_vector(y), want) < dc.tol);

      Tensor dbias = arena.make({C}, dc.dtype);
      ops::fill(dbias, 1.0);
      ops::bias_backward_weight(y, dbias);  // += column sums
      const auto yv = to_vector(y);
      std::vector<double> sums(static_cast<size_t>(C), 1.0);
      for (int64_t i = 0; i < N * C; ++i)
        sums[static_cast<size_t>(i % C)] += yv[static_cast<size_t>(i)];
      REQUIRE(max_rel_error(to_vector(dbias), sums) < dc.tol);
    }
  }
}

TEST_CASE("activation ops on meta: bf16 with an f32 dbias, nothing computed",
          "[ops][activation]") {
  MetaAllocator meta(512, Device::cuda);
  auto make = [&](Shape s, DType dtype) {
    return OwnedTensor(meta, s, dtype, MemCategory::activation);
  };
  OwnedTensor x = make({8, 16, 4, 4}, DType::bf16), pooled = make({8, 16}, DType::bf16);
  OwnedTensor logits = make({8, 10}, DType::bf16), bias = make({10}, DType::bf16);
  OwnedTensor dbias = make({10}, DType::f32);
  ops::relu_forward(*x, *x);
  ops::relu_backward_input(*x, *x, *x);
  ops::global_avg_pool_forward(*x, *pooled);
  ops::global_avg_pool_backward_input(*pooled, *x);
  ops::bias_add_forward(*logits, *bias);
  ops::bias_backward_weight(*logits, *dbias);

  OwnedTensor dbias16 = make({10}, DType::bf16), bad_pool = make({8, 15}, DType::bf16);
  REQUIRE_THROWS_WITH(ops::bias_backward_weight(*logits, *dbias16),
                      Catch::Contains("bias_backward_weight") &&
                          Catch::Contains("dbias has dtype bf16") &&
                          Catch::Contains("expected f32"));
  REQUIRE_THROWS_WITH(ops::global_avg_pool_forward(*x, *bad_pool),
                      Catch::Contains("global_avg_pool_forward") &&
                          Catch::Contains("y has shape"));
}

TEST_CASE("activation ops reject bad arguments, naming them", "[ops][activation]") {
  Arena arena;
  Tensor x = arena.make({2, 3, 4, 4}), y = arena.make({2, 3, 4, 5});
  Tensor flat = arena.make({2, 3}), bias = arena.make({4}), dbias32 = arena.make({3}, DType::f32);
  Tensor empty_plane = arena.make({2, 3, 0, 4}), pooled = arena.make({2, 3});
  REQUIRE_THROWS_WITH(ops::relu_forward(x, y),
                      Catch::Contains("relu_forward") && Catch::Contains("y has shape"));
  REQUIRE_THROWS_WITH(ops::relu_backward_input(y, x, x),
                      Catch::Contains("relu_backward_input") && Catch::Contains("dy has shape"));
  REQUIRE_THROWS_WITH(ops::global_avg_pool_forward(flat, flat),
                      Catch::Contains("global_avg_pool_forward") &&
                          Catch::Contains("x must be [B, C, H, W]"));
  REQUIRE_THROWS_WITH(ops::global_avg_pool_forward(empty_plane, pooled),
                      Catch::Contains("no pixels"));
  REQUIRE_THROWS_WITH(ops::global_avg_pool_backward_input(x, x),
                      Catch::Contains("global_avg_pool_backward_input") &&
                          Catch::Contains("dy has shape"));
  REQUIRE_THROWS_WITH(ops::bias_add_forward(flat, bias),
                      Catch::Contains("bias_add_forward") && Catch::Contains("bias has shape"));
  REQUIRE_THROWS_WITH(ops::bias_backward_weight(flat, dbias32),
                      Catch::Contains("bias_backward_weight") &&
                          Catch::Contains("dbias has dtype f32") &&
                          Catch::Contains("expected f64"));
}
