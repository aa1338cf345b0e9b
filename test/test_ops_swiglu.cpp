// SwiGLU: forward against a loop; backward against finite differences.
#include <catch2/catch.hpp>

#include <cmath>

#include "ops_test_util.h"

using namespace sdp;
using namespace sdp::testing;

namespace {
constexpr int64_t kN = 4, kF = 6;
}

TEST_CASE("swiglu_forward matches a naive loop", "[ops]") {
  for (const auto& c : kFloatCases) {
    Arena arena;
    Tensor g64 = arena.make({kN, kF}), u64 = arena.make({kN, kF});  // [N, F] each
    fill_uniform(g64, 1, -6.0, 6.0);
    fill_uniform(u64, 2);
    Tensor gate = cast_copy(arena, g64, c.dtype), up = cast_copy(arena, u64, c.dtype);
    Tensor out = arena.make({kN, kF}, c.dtype);
    fill_garbage(out);
    ops::swiglu_forward(gate, up, out);
    const auto gv = to_vector(gate), uv = to_vector(up);
    std::vector<double> ref;
    for (size_t i = 0; i < gv.size(); ++i) ref.push_back(gv[i] / (1 + std::exp(-gv[i])) * uv[i]);
    REQUIRE(max_rel_error(to_vector(out), ref) < c.tol);
  }
}

TEST_CASE("swiglu_backward_input matches finite differences", "[ops]") {
  Arena arena;
  Tensor gate = arena.make({kN, kF}), up = arena.make({kN, kF}), out = arena.make({kN, kF});
  Tensor w = arena.make({kN, kF});  // [N, F] d loss / d out
  fill_uniform(gate, 3, -4.0, 4.0);
  fill_uniform(up, 4);
  fill_uniform(w, 5);
  auto loss = [&] {
    ops::swiglu_forward(gate, up, out);
    return weighted_sum(out, w);
  };
  const auto num_dgate = numeric_gradient(gate, loss);
  const auto num_dup = numeric_gradient(up, loss);
  Tensor dgate = arena.make({kN, kF}), dup = arena.make({kN, kF});
  fill_garbage(dgate);
  fill_garbage(dup);
  ops::swiglu_backward_input(w, gate, up, dgate, dup);
  REQUIRE(max_rel_error(to_vector(dgate), num_dgate) < 1e-7);
  REQUIRE(max_rel_error(to_vector(dup), num_dup) < 1e-7);
}

TEST_CASE("swiglu stays finite for large gates", "[ops]") {
  Arena arena;
  Tensor gate = arena.make({2}, DType::f32), up = arena.make({2}, DType::f32);
  Tensor out = arena.make({2}, DType::f32), dg = arena.make({2}, DType::f32);
  Tensor du = arena.make({2}, DType::f32);
  gate.data<float>()[0] = -200.0f;
  gate.data<float>()[1] = 200.0f;
  ops::fill(up, 1.0);
  ops::swiglu_forward(gate, up, out);
  ops::swiglu_backward_input(up, gate, up, dg, du);
  REQUIRE(ops::item(out, 0) == 0.0);
  REQUIRE(ops::item(out, 1) == 200.0);
  REQUIRE(ops::item(dg, 0) == 0.0);
  REQUIRE(ops::item(dg, 1) == 1.0);
}

TEST_CASE("swiglu rejects bad shapes and dtypes; meta computes nothing", "[ops]") {
  Arena arena;
  Tensor gate = arena.make({kN, kF}), up = arena.make({kN, kF + 1});
  Tensor f32_up = arena.make({kN, kF}, DType::f32), out = arena.make({kN, kF});
  REQUIRE_THROWS_WITH(ops::swiglu_forward(gate, up, out),
                      Catch::Contains("swiglu_forward") && Catch::Contains("up"));
  REQUIRE_THROWS_WITH(ops::swiglu_forward(gate, f32_up, out),
                      Catch::Contains("swiglu_forward") && Catch::Contains("f32"));
  REQUIRE_THROWS_WITH(ops::swiglu_backward_input(out, gate, out, up, out),
                      Catch::Contains("swiglu_backward_input") && Catch::Contains("dgate"));

  MetaAllocator meta;
  auto make = [&](Shape s) { return OwnedTensor(meta, s, DType::f32, MemCategory::activation); };
  OwnedTensor g = make({kN, kF}), u = make({kN, kF}), o = make({kN, kF}), bad = make({kF});
  ops::swiglu_forward(*g, *u, *o);
  ops::swiglu_backward_input(*o, *g, *u, *g, *u);
  REQUIRE_THROWS_WITH(ops::swiglu_forward(*g, *bad, *o), Catch::Contains("swiglu_forward"));
}

TEST_CASE("swiglu on meta accepts bf16 activations; the CPU does not", "[ops]") {
  MetaAllocator meta(512, Device::cuda);
  auto make = [&](DType dtype) {
    return OwnedTensor(meta, {kN, kF}, dtype, MemCategory::activation);  // [N, F]
  };
  OwnedTensor g = make(DType::bf16), u = make(DType::bf16), o = make(DType::bf16);
  ops::swiglu_forward(*g, *u, *o);
  ops::swiglu_backward_input(*o, *g, *u, *g, *u);  // in place, as the CPU allows
  OwnedTensor u32 = make(DType::f32);
  REQUIRE_THROWS_WITH(ops::swiglu_forward(*g, *u32, *o),
                      Catch::Contains("swiglu_forward") && Catch::Contains("up"));
  Arena arena;
  Tensor h = arena.make({kN, kF}, DType::bf16);  // [N, F]
  REQUIRE_THROWS_WITH(ops::swiglu_forward(h, h, h),
                      Catch::Contains("swiglu_forward") && Catch::Contains("CPU"));
}
