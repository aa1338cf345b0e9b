// Linear (y = x w^T): forward against a loop; both backward halves against
// finite differences.
#include <catch2/catch.hpp>

#include "ops_test_util.h"

using namespace sdp;
using namespace sdp::testing;

namespace {
constexpr int64_t kN = 5, kIn = 4, kOut = 3;
}

TEST_CASE("linear_forward matches a naive loop", "[ops]") {
  for (const auto& c : kFloatCases) {
    Arena arena;
    Tensor x64 = arena.make({kN, kIn}), w64 = arena.make({kOut, kIn});  // [N, in], [out, in]
    fill_uniform(x64, 1);
    fill_uniform(w64, 2);
    Tensor x = cast_copy(arena, x64, c.dtype), w = cast_copy(arena, w64, c.dtype);
    Tensor y = arena.make({kN, kOut}, c.dtype);  // [N, out]
    fill_garbage(y);
    ops::linear_forward(x, w, y);
    const auto xv = to_vector(x), wv = to_vector(w);
    std::vector<double> ref;
    for (int64_t i = 0; i < kN; ++i)
      for (int64_t o = 0; o < kOut; ++o) {
        double s = 0;
        for (int64_t k = 0; k < kIn; ++k) s += xv[i * kIn + k] * wv[o * kIn + k];
        ref.push_back(s);
      }
    REQUIRE(max_rel_error(to_vector(y), ref) < c.tol);

    // Leading dims are folded into N: x [1, N, in] gives y [1, N, out].
    Tensor y3 = arena.make({1, kN, kOut}, c.dtype);
    ops::linear_forward(x.view({1, kN, kIn}), w, y3);
    REQUIRE(max_rel_error(to_vector(y3), ref) < c.tol);
  }
}

TEST_CASE("linear backward matches finite differences", "[ops]") {
  Arena arena;
  Tensor x = arena.make({kN, kIn}), w = arena.make({kOut, kIn});  // [N, in], [out, in]
  Tensor y = arena.make({kN, kOut}), g = arena.make({kN, kOut});  // [N, out] each
  fill_uniform(x, 3);
  fill_uniform(w, 4);
  fill_uniform(g, 5);
  auto loss = [&] {
    ops::linear_forward(x, w, y);
    return weighted_sum(y, g);
  };
  const auto num_dx = numeric_gradient(x, loss);
  const auto num_dw = numeric_gradient(w, loss);

  Tensor dx = arena.make({kN, kIn}), dw = arena.make({kOut, kIn});
  fill_garbage(dx);
  ops::linear_backward_input(g, w, dx);
  REQUIRE(max_rel_error(to_vector(dx), num_dx) < 1e-7);

  ops::fill(dw, 0.0);
  ops::linear_backward_weight(g, x, dw);
  REQUIRE(max_rel_error(to_vector(dw), num_dw) < 1e-7);
  ops::linear_backward_weight(g, x, dw);
  auto twice = num_dw;
  for (double& v : twice) v *= 2;
  REQUIRE(max_rel_error(to_vector(dw), twice) < 1e-7);
}

TEST_CASE("linear rejects bad shapes and dtypes", "[ops]") {
  Arena arena;
  Tensor x = arena.make({kN, kIn}), w = arena.make({kOut, kIn}), y = arena.make({kN, kOut});
  Tensor wt = arena.make({kIn, kOut}), bad_y = arena.make({kN + 1, kOut});
  Tensor f32_w = arena.make({kOut, kIn}, DType::f32);
  REQUIRE_THROWS_WITH(ops::linear_forward(x, wt, y),
                      Catch::Contains("linear_forward") && Catch::Contains("in = 3"));
  REQUIRE_THROWS_WITH(ops::linear_forward(x, w, bad_y),
                      Catch::Contains("linear_forward") && Catch::Contains("y"));
  REQUIRE_THROWS_WITH(ops::linear_forward(x, f32_w, y),
                      Catch::Contains("linear_forward") && Catch::Contains("f64"));
  REQUIRE_THROWS_WITH(ops::linear_backward_input(bad_y, w, x),
                      Catch::Contains("linear_backward_input") && Catch::Contains("dy"));
  REQUIRE_THROWS_WITH(ops::linear_backward_weight(y, x, wt),
                      Catch::Contains("linear_backward_weight"));
}

TEST_CASE("linear on meta computes nothing but checks shapes", "[ops]") {
  MetaAllocator meta;
  auto make = [&](Shape s) { return OwnedTensor(meta, s, DType::f32, MemCategory::activation); };
  OwnedTensor x = make({kN, kIn}), w = make({kOut, kIn}), y = make({kN, kOut});
  OwnedTensor bad = make({kN, kOut + 1});
  ops::linear_forward(*x, *w, *y);
  ops::linear_backward_input(*y, *w, *x);
  ops::linear_backward_weight(*y, *x, *w);
  REQUIRE_THROWS_WITH(ops::linear_forward(*x, *w, *bad), Catch::Contains("linear_forward"));
}

TEST_CASE("linear on meta accepts mixed precision: bf16 activations, f32 weight gradient",
          "[ops]") {
  MetaAllocator meta(512, Device::cuda);
  auto make = [&](Shape s, DType dt) {
    return OwnedTensor(meta, s, dt, MemCategory::activation);
  };
  OwnedTensor x = make({kN, kIn}, DType::bf16), w = make({kOut, kIn}, DType::bf16);
  OwnedTensor y = make({kN, kOut}, DType::bf16);     // also dy
  OwnedTensor dw = make({kOut, kIn}, DType::f32);     // accum_dtype(bf16)
  OwnedTensor bf16_dw = make({kOut, kIn}, DType::bf16), f32_x = make({kN, kIn}, DType::f32);
  OwnedTensor f32_y = make({kN, kOut}, DType::f32), f32_w = make({kOut, kIn}, DType::f32);
  ops::linear_forward(*x, *w, *y);
  ops::linear_backward_input(*y, *w, *x);
  ops::linear_backward_weight(*y, *x, *dw);
  // f32 mode: all f32, dw too.
  ops::linear_backward_weight(*f32_y, *f32_x, *dw);

  REQUIRE_THROWS_WITH(ops::linear_backward_weight(*y, *x, *bf16_dw),
                      Catch::Contains("linear_backward_weight") &&
                          Catch::Contains("dw has dtype bf16, expected f32"));
  REQUIRE_THROWS_WITH(ops::linear_backward_weight(*f32_y, *x, *dw),
                      Catch::Contains("linear_backward_weight") &&
                          Catch::Contains("dy has dtype f32, expected bf16"));
  REQUIRE_THROWS_WITH(ops::linear_backward_weight(*y, *f32_x, *dw),
                      Catch::Contains("dy has dtype bf16, expected f32"));
  REQUIRE_THROWS_WITH(ops::linear_forward(*x, *f32_w, *y),
                      Catch::Contains("linear_forward") &&
                          Catch::Contains("w has dtype f32, expected bf16"));
  REQUIRE_THROWS_WITH(ops::linear_forward(*x, *w, *f32_y),
                      Catch::Contains("y has dtype f32, expected bf16"));
  REQUIRE_THROWS_WITH(ops::linear_backward_input(*y, *f32_w, *x),
                      Catch::Contains("linear_backward_input") && Catch::Contains("w has dtype"));
}

TEST_CASE("linear on the CPU rejects bf16 and a weight gradient of another dtype", "[ops]") {
  Arena arena;
  Tensor x = arena.make({kN, kIn}), dy = arena.make({kN, kOut});
  Tensor f32_dw = arena.make({kOut, kIn}, DType::f32);
  REQUIRE_THROWS_WITH(ops::linear_backward_weight(dy, x, f32_dw),
                      Catch::Contains("dw has dtype f32, expected f64"));
  Tensor bx = arena.make({kN, kIn}, DType::bf16), bw = arena.make({kOut, kIn}, DType::bf16);
  Tensor by = arena.make({kN, kOut}, DType::bf16);
  REQUIRE_THROWS_WITH(ops::linear_forward(bx, bw, by),
                      Catch::Contains("linear_forward") && Catch::Contains("valid on the CPU"));
}
