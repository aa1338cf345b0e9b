// Sizes large enough to take the OpenMP paths (the other op tests stay below
// the parallel thresholds), checked against plain loops in f64.
#include <catch2/catch.hpp>

#include <cmath>

#include "ops_test_util.h"

using namespace sdp;
using namespace sdp::testing;

TEST_CASE("embedding backward over many repeated tokens matches a serial loop", "[ops]") {
  const ThreadCount threads(2);  // exercise the OpenMP paths
  constexpr int64_t kV = 11, kN = 300, kD = 150;  // D spans several 64-column blocks
  Arena arena;
  Tensor tokens = arena.make({kN}, DType::i32);  // [N], each token repeats ~27 times
  fill_tokens(tokens, 1, kV);
  Tensor dout = arena.make({kN, kD}), dtable = arena.make({kV, kD});  // [N, D], [V, D]
  fill_uniform(dout, 2);
  fill_uniform(dtable, 3);
  std::vector<double> ref = to_vector(dtable);
  const auto dv = to_vector(dout);
  for (int64_t i = 0; i < kN; ++i)
    for (int64_t j = 0; j < kD; ++j)
      ref[static_cast<size_t>(tokens.data<int32_t>()[i] * kD + j)] += dv[i * kD + j];
  ops::embedding_backward_weight(tokens, dout, dtable);
  REQUIRE(max_rel_error(to_vector(dtable), ref) < 1e-13);
}

TEST_CASE("rmsnorm weight gradient and cross-entropy on large rows match loops", "[ops]") {
  const ThreadCount threads(2);  // exercise the OpenMP paths
  constexpr int64_t kN = 128, kD = 150;
  Arena arena;
  Tensor dy = arena.make({kN, kD}), x = arena.make({kN, kD}), rstd = arena.make({kN});
  Tensor dw = arena.make({kD});
  fill_uniform(dy, 4);
  fill_uniform(x, 5);
  fill_uniform(rstd, 6, 0.5, 2.0);
  ops::fill(dw, 1.0);
  std::vector<double> ref(kD, 1.0);
  for (int64_t i = 0; i < kN; ++i)
    for (int64_t j = 0; j < kD; ++j)
      ref[j] += dy.data<double>()[i * kD + j] * x.data<double>()[i * kD + j] *
                rstd.data<double>()[i];
  ops::rmsnorm_backward_weight(dy, x, rstd, dw);
  REQUIRE(max_rel_error(to_vector(dw), ref) < 1e-12);

  // Cross-entropy over the same [N, D] as logits: losses and the gradient's
  // row sums (softmax sums to 1, minus the one-hot) check every row.
  Tensor targets = arena.make({kN}, DType::i32), losses = arena.make({kN}),
         lse = arena.make({kN});
  fill_tokens(targets, 7, static_cast<int32_t>(kD));
  ops::cross_entropy_forward(x, targets, losses, lse);
  for (int64_t i = 0; i < kN; ++i) {
    double s = 0;
    for (int64_t j = 0; j < kD; ++j) s += std::exp(x.data<double>()[i * kD + j]);
    REQUIRE(ops::item(lse, i) == Approx(std::log(s)).epsilon(1e-12));
  }
  ops::cross_entropy_backward_input(x, targets, lse, 1.0, x);
  for (int64_t i = 0; i < kN; ++i) {
    double s = 0;
    for (int64_t j = 0; j < kD; ++j) s += x.data<double>()[i * kD + j];
    REQUIRE(std::abs(s) < 1e-12);
  }
}
