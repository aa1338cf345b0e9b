// Token embedding: lookup, scatter-add gradient, token validation.
#include <catch2/catch.hpp>

#include "ops_test_util.h"

using namespace sdp;
using namespace sdp::testing;

namespace {
constexpr int64_t kV = 7, kD = 5, kN = 9;
}

TEST_CASE("embedding_forward copies table rows", "[ops]") {
  for (const auto& c : kFloatCases) {
    Arena arena;
    Tensor tokens = arena.make({3, 3}, DType::i32);  // [3, 3], N = 9
    fill_tokens(tokens, 1, kV);
    Tensor table64 = arena.make({kV, kD});  // [V, D]
    fill_uniform(table64, 2);
    Tensor table = cast_copy(arena, table64, c.dtype);
    Tensor out = arena.make({3, 3, kD}, c.dtype);  // [3, 3, D]
    fill_garbage(out);
    ops::embedding_forward(tokens, table, out);
    const auto tv = to_vector(table);
    std::vector<double> ref;
    for (int64_t i = 0; i < kN; ++i)
      for (int64_t j = 0; j < kD; ++j)
        ref.push_back(tv[static_cast<size_t>(tokens.data<int32_t>()[i] * kD + j)]);
    REQUIRE(max_rel_error(to_vector(out), ref) == 0.0);
  }
}

TEST_CASE("embedding_backward_weight matches finite differences and accumulates", "[ops]") {
  Arena arena;
  Tensor tokens = arena.make({kN}, DType::i32);  // [N]
  fill_tokens(tokens, 3, kV);
  tokens.data<int32_t>()[1] = tokens.data<int32_t>()[0];  // a repeated token must sum
  Tensor table = arena.make({kV, kD}), out = arena.make({kN, kD});  // [V, D], [N, D]
  Tensor w = arena.make({kN, kD});                                  // [N, D] loss weights
  fill_uniform(table, 4);
  fill_uniform(w, 5);
  auto loss = [&] {
    ops::embedding_forward(tokens, table, out);
    return weighted_sum(out, w);
  };
  const auto numeric = numeric_gradient(table, loss);

  Tensor dtable = arena.make({kV, kD});  // [V, D]
  ops::fill(dtable, 0.0);
  ops::embedding_backward_weight(tokens, w, dtable);
  REQUIRE(max_rel_error(to_vector(dtable), numeric) < 1e-8);

  ops::embedding_backward_weight(tokens, w, dtable);
  auto twice = numeric;
  for (double& g : twice) g *= 2;
  REQUIRE(max_rel_error(to_vector(dtable), twice) < 1e-8);
}

TEST_CASE("embedding rejects out-of-range tokens, bad shapes and dtypes", "[ops]") {
  Arena arena;
  Tensor tokens = arena.make({4}, DType::i32);  // [4]
  fill_tokens(tokens, 6, kV);
  Tensor table = arena.make({kV, kD}), out = arena.make({4, kD});  // [V, D], [4, D]
  tokens.data<int32_t>()[2] = static_cast<int32_t>(kV);
  REQUIRE_THROWS_WITH(ops::embedding_forward(tokens, table, out),
                      Catch::Contains("embedding_forward") && Catch::Contains("token 7") &&
                          Catch::Contains("position 2") && Catch::Contains("0 to 6"));
  tokens.data<int32_t>()[2] = -1;
  REQUIRE_THROWS_WITH(ops::embedding_backward_weight(tokens, out, table),
                      Catch::Contains("embedding_backward_weight") &&
                          Catch::Contains("token -1"));
  tokens.data<int32_t>()[2] = 0;
  Tensor bad_out = arena.make({4, kD + 1});
  REQUIRE_THROWS_WITH(ops::embedding_forward(tokens, table, bad_out),
                      Catch::Contains("embedding_forward") && Catch::Contains("out"));
  Tensor f_tokens = arena.make({4});
  REQUIRE_THROWS_WITH(ops::embedding_forward(f_tokens, table, out),
                      Catch::Contains("embedding_forward") && Catch::Contains("tokens"));
  Tensor f32_out = arena.make({4, kD}, DType::f32);
  REQUIRE_THROWS_WITH(ops::embedding_forward(tokens, table, f32_out),
                      Catch::Contains("embedding_forward") && Catch::Contains("f32"));
}

TEST_CASE("embedding on meta computes nothing but checks shapes", "[ops]") {
  MetaAllocator meta;
  OwnedTensor tokens(meta, {4}, DType::i32, MemCategory::activation);       // [4]
  OwnedTensor table(meta, {kV, kD}, DType::f32, MemCategory::param);       // [V, D]
  OwnedTensor out(meta, {4, kD}, DType::f32, MemCategory::activation);     // [4, D]
  OwnedTensor bad(meta, {5, kD}, DType::f32, MemCategory::activation);     // [5, D]
  ops::embedding_forward(*tokens, *table, *out);
  ops::embedding_backward_weight(*tokens, *out, *table);
  REQUIRE_THROWS_WITH(ops::embedding_forward(*tokens, *table, *bad),
                      Catch::Contains("embedding_forward"));
}

TEST_CASE("embedding's dtable is the accum dtype (f32 next to bf16)", "[ops]") {
  MetaAllocator meta(512, Device::cuda);
  OwnedTensor tokens(meta, {2, 3}, DType::i32, MemCategory::activation);     // [2, 3]
  OwnedTensor table(meta, {kV, kD}, DType::bf16, MemCategory::param);        // [V, D]
  OwnedTensor out(meta, {2, 3, kD}, DType::bf16, MemCategory::activation);   // [2, 3, D]
  OwnedTensor dtable(meta, {kV, kD}, DType::f32, MemCategory::grad);         // [V, D]
  ops::embedding_forward(*tokens, *table, *out);
  ops::embedding_backward_weight(*tokens, *out, *dtable);
  REQUIRE_THROWS_WITH(ops::embedding_backward_weight(*tokens, *out, *table),
                      Catch::Contains("embedding_backward_weight") && Catch::Contains("dtable") &&
                          Catch::Contains("expected f32"));
  OwnedTensor out32(meta, {2, 3, kD}, DType::f32, MemCategory::activation);  // [2, 3, D]
  REQUIRE_THROWS_WITH(ops::embedding_forward(*tokens, *table, *out32),
                      Catch::Contains("embedding_forward") && Catch::Contains("out"));
  OwnedTensor dtable64(meta, {kV, kD}, DType::f64, MemCategory::grad);       // [V, D]
  REQUIRE_THROWS_WITH(ops::embedding_backward_weight(*tokens, *out, *dtable64),
                      Catch::Contains("dtable") && Catch::Contains("f64"));
}
