// Fused cross-entropy: forward against a loop, backward against finite
// differences (including ignored rows and in-place use), target validation.
#include <catch2/catch.hpp>

#include <cmath>

#include "ops_test_util.h"

using namespace sdp;
using namespace sdp::testing;

namespace {
constexpr int64_t kN = 5, kV = 7;

// Targets with one ignored row (row 2).
void make_targets(const Tensor& targets) {
  fill_tokens(targets, 11, kV);
  targets.data<int32_t>()[2] = -100;
}
}  // namespace

TEST_CASE("cross_entropy_forward matches a naive loop", "[ops]") {
  for (const auto& c : kFloatCases) {
    Arena arena;
    Tensor l64 = arena.make({kN, kV});  // [N, V]
    fill_uniform(l64, 1, -3.0, 3.0);
    l64.data<double>()[0] = 80.0;  // exp(80) overflows f32: max subtraction must handle it
    Tensor logits = cast_copy(arena, l64, c.dtype);
    Tensor targets = arena.make({kN}, DType::i32);
    make_targets(targets);
    Tensor losses = arena.make({kN}, c.dtype), lse = arena.make({kN}, c.dtype);
    fill_garbage(losses);
    ops::cross_entropy_forward(logits, targets, losses, lse);
    const auto lv = to_vector(logits);
    std::vector<double> ref_loss, ref_lse;
    for (int64_t i = 0; i < kN; ++i) {
      double m = lv[i * kV];
      for (int64_t j = 1; j < kV; ++j) m = std::max(m, lv[i * kV + j]);
      double s = 0;
      for (int64_t j = 0; j < kV; ++j) s += std::exp(lv[i * kV + j] - m);
      ref_lse.push_back(m + std::log(s));
      const int32_t t = targets.data<int32_t>()[i];
      ref_loss.push_back(t < 0 ? 0.0 : ref_lse.back() - lv[i * kV + t]);
    }
    REQUIRE(max_rel_error(to_vector(losses), ref_loss) < c.tol);
    REQUIRE(max_rel_error(to_vector(lse), ref_lse) < c.tol);
    REQUIRE(ops::item(losses, 2) == 0.0);
  }
}

TEST_CASE("cross_entropy_backward_input matches finite differences, also in place", "[ops]") {
  constexpr double kScale = 0.7;
  Arena arena;
  Tensor logits = arena.make({kN, kV}), targets = arena.make({kN}, DType::i32);
  Tensor losses = arena.make({kN}), lse = arena.make({kN}), ones = arena.make({kN});
  fill_uniform(logits, 2, -3.0, 3.0);
  make_targets(targets);
  ops::fill(ones, kScale);
  auto loss = [&] {
    ops::cross_entropy_forward(logits, targets, losses, lse);
    return weighted_sum(losses, ones);  // kScale * sum of losses
  };
  const auto numeric = numeric_gradient(logits, loss);
  loss();

  Tensor dlogits = arena.make({kN, kV});
  fill_garbage(dlogits);
  ops::cross_entropy_backward_input(logits, targets, lse, kScale, dlogits);
  REQUIRE(max_rel_error(to_vector(dlogits), numeric) < 1e-7);
  for (int64_t j = 0; j < kV; ++j) REQUIRE(ops::item(dlogits, 2 * kV + j) == 0.0);

  ops::cross_entropy_backward_input(logits, targets, lse, kScale, logits);  // aliased
  REQUIRE(max_rel_error(to_vector(logits), to_vector(dlogits)) == 0.0);
}

TEST_CASE("cross_entropy rejects bad targets, shapes and dtypes", "[ops]") {
  Arena arena;
  Tensor logits = arena.make({kN, kV}), targets = arena.make({kN}, DType::i32);
  Tensor losses = arena.make({kN}), lse = arena.make({kN});
  make_targets(targets);
  targets.data<int32_t>()[3] = static_cast<int32_t>(kV);
  REQUIRE_THROWS_WITH(ops::cross_entropy_forward(logits, targets, losses, lse),
                      Catch::Contains("cross_entropy_forward") && Catch::Contains("target 7") &&
                          Catch::Contains("row 3") && Catch::Contains("0 to 6"));
  REQUIRE_THROWS_WITH(ops::cross_entropy_backward_input(logits, targets, lse, 1.0, logits),
                      Catch::Contains("cross_entropy_backward_input") &&
                          Catch::Contains("target 7"));
  make_targets(targets);
  Tensor bad = arena.make({kN + 1}), f_targets = arena.make({kN});
  REQUIRE_THROWS_WITH(ops::cross_entropy_forward(logits, targets, bad, lse),
                      Catch::Contains("cross_entropy_forward") && Catch::Contains("losses"));
  REQUIRE_THROWS_WITH(ops::cross_entropy_forward(logits, f_targets, losses, lse),
                      Catch::Contains("cross_entropy_forward") && Catch::Contains("i32"));
  Tensor f32_lse = arena.make({kN}, DType::f32);
  REQUIRE_THROWS_WITH(ops::cross_entropy_backward_input(logits, targets, f32_lse, 1.0, logits),
                      Catch::Contains("cross_entropy_backward_input") && Catch::Contains("lse"));
}

TEST_CASE("cross_entropy on meta computes nothing but checks shapes", "[ops]") {
  MetaAllocator meta;
  auto make = [&](Shape s, DType dt) {
    return OwnedTensor(meta, s, dt, MemCategory::activation);
  };
  OwnedTensor logits = make({kN, kV}, DType::f32), targets = make({kN}, DType::i32);
  OwnedTensor losses = make({kN}, DType::f32), lse = make({kN}, DType::f32);
  OwnedTensor bad = make({kN, kV + 1}, DType::f32);
  ops::cross_entropy_forward(*logits, *targets, *losses, *lse);
  ops::cross_entropy_backward_input(*logits, *targets, *lse, 1.0, *logits);
  REQUIRE_THROWS_WITH(ops::cross_entropy_backward_input(*logits, *targets, *lse, 1.0, *bad),
                      Catch::Contains("cross_entropy_backward_input"));
}

TEST_CASE("cross_entropy on meta takes f32 losses and lse next to bf16 logits", "[ops]") {
  MetaAllocator meta(512, Device::cuda);
  auto make = [&](Shape s, DType dt) {
    return OwnedTensor(meta, s, dt, MemCategory::activation);
  };
  OwnedTensor logits = make({2, kN, kV}, DType::bf16), targets = make({2, kN}, DType::i32);
  OwnedTensor losses = make({2, kN}, DType::f32), lse = make({2, kN}, DType::f32);
  OwnedTensor bf16_lse = make({2, kN}, DType::bf16);
  ops::cross_entropy_forward(*logits, *targets, *losses, *lse);
  ops::cross_entropy_backward_input(*logits, *targets, *lse, 0.5, *logits);
  REQUIRE_THROWS_WITH(ops::cross_entropy_forward(*logits, *targets, *losses, *bf16_lse),
                      Catch::Contains("cross_entropy_forward") &&
                          Catch::Contains("lse has dtype bf16, expected f32"));
  REQUIRE_THROWS_WITH(ops::cross_entropy_forward(*logits, *targets, *bf16_lse, *lse),
                      Catch::Contains("losses has dtype bf16, expected f32"));
  REQUIRE_THROWS_WITH(
      ops::cross_entropy_backward_input(*logits, *targets, *bf16_lse, 0.5, *logits),
      Catch::Contains("cross_entropy_backward_input") && Catch::Contains("lse"));
  OwnedTensor f32_dlogits = make({2, kN, kV}, DType::f32);
  REQUIRE_THROWS_WITH(
      ops::cross_entropy_backward_input(*logits, *targets, *lse, 0.5, *f32_dlogits),
      Catch::Contains("dlogits has dtype f32, expected bf16"));
}
