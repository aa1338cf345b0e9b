// The global gradient norm over tensors of mixed dtypes, and clipping by it,
// against a direct sum of squares.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "kernels/ops.h"
#include "test/test_support.h"

using namespace sdp;
using sdp::testing::Arena;

TEST_CASE("global_norm and clip_grad_norm", "[ops]") {
  Arena arena;
  Tensor a = arena.make({3, 4}), b = arena.make({5}, DType::f64);
  Tensor c = arena.make({6}, DType::f32);
  testing::fill_uniform(a, 1);
  testing::fill_uniform(b, 2);
  testing::fill_uniform(c, 3);
  double expect = 0;
  for (const Tensor& t : {a, b, c})
    for (double x : testing::to_vector(t)) expect += x * x;
  expect = std::sqrt(expect);
  std::vector<Tensor> grads{a, b, c};
  REQUIRE(ops::global_norm(grads) == Approx(expect).epsilon(1e-12));

  // below the limit: untouched
  const auto before = testing::to_vector(a);
  REQUIRE(ops::clip_grad_norm(grads, expect * 2) == Approx(expect).epsilon(1e-12));
  REQUIRE(testing::to_vector(a) == before);

  // above: scaled to max_norm (up to the 1e-6 guard), pre-clip norm returned
  REQUIRE(ops::clip_grad_norm(grads, 0.5) == Approx(expect).epsilon(1e-12));
  REQUIRE(ops::global_norm(grads) == Approx(0.5).epsilon(1e-5));
  REQUIRE(testing::to_vector(a)[0] == Approx(before[0] * 0.5 / (expect + 1e-6)));

  REQUIRE_THROWS_WITH(ops::clip_grad_norm(grads, 0.0), Catch::Contains("clip_grad_norm"));
  REQUIRE_THROWS_WITH(ops::clip_grad_norm(grads, -1.0), Catch::Contains("max_norm"));
}
