// Top-k correct counts on CUDA against the CPU on the same (rounded) values:
// coarse integer logits so that ties are common, ignored rows, NaN rows,
// more rows than one block holds, and the hand-counted batch of the CPU test.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "kernels/ops.h"
#include "test/cuda/cuda_test_support.h"

using namespace sdp;
using namespace sdp::cuda_testing;

TEST_CASE("count_top_k on CUDA matches the CPU, ties, ignored and NaN rows included",
          "[ops][top_k]") {
  struct Case {
    int64_t rows, classes;
  };
  const Case cases[] = {{10, 7}, {300, 10}, {17, 100}, {5, 1}};
  const std::vector<int> ks = {1, 5, 10};
  for (DType dt : kGpuDtypes)
    for (const Case& c : cases) {
      CAPTURE(name_of(dt), c.rows, c.classes);
      TwinArena a;
      // Integers in [0, 4): most rows hold ties, some at the target.
      std::vector<double> v(static_cast<size_t>(c.rows * c.classes));
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 7919 + i / 3) % 4);
      v[static_cast<size_t>(c.classes) * 2 % v.size()] = NAN;  // row 2 (or 0) holds a NaN
      Twin logits = a.values({c.rows, c.classes}, dt, v);
      Twin targets = a.integers({c.rows}, 3, 0, static_cast<int32_t>(c.classes));
      int32_t* t = targets.host.data<int32_t>();
      for (int64_t i = 0; i < c.rows; i += 4) t[i] = -100;  // every fourth row ignored
      ops::transfer(targets.host, targets.dev);

      std::vector<int64_t> on_gpu(ks.size()), on_cpu(ks.size());
      ops::count_top_k(logits.dev, targets.dev, ks, on_gpu);
      ops::count_top_k(logits.host, targets.host, ks, on_cpu);
      CHECK(on_gpu == on_cpu);
      // Not vacuous: with few classes some rows are right at top-1, and
      // top-10 takes every valid row without a NaN.
      if (c.classes <= 10) {
        int64_t valid_rows = 0;
        for (int64_t i = 0; i < c.rows; ++i) valid_rows += t[i] >= 0 && i != 2 % c.rows;
        CHECK(on_cpu[0] > 0);
        CHECK(on_cpu[2] == valid_rows);
      }
    }
}

// A token model's evaluation (the LLaMA's next-token top-1): logits
// [B, T, V] over a vocabulary, targets [B, T], the same op on both devices.
TEST_CASE("count_top_k on CUDA matches the CPU on a token model's [B, T, V] logits",
          "[ops][top_k]") {
  const int64_t B = 2, T = 48, V = 512;
  const std::vector<int> top1 = {1};
  for (DType dt : kGpuDtypes) {
    CAPTURE(name_of(dt));
    TwinArena a;
    Twin targets = a.integers({B, T}, 11, 0, static_cast<int32_t>(V));
    const int32_t* t = targets.host.data<int32_t>();
    // Distinct logits per row; every third position's target is made the
    // largest, so about a third of the rows are right.
    std::vector<double> v(static_cast<size_t>(B * T * V));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 7919) % 1021) / 256.0;
    int64_t planted = 0;
    for (int64_t row = 0; row < B * T; row += 3, ++planted)
      v[static_cast<size_t>(row * V + t[row])] = 8.0;
    Twin logits = a.values({B, T, V}, dt, v);
    std::vector<int64_t> on_gpu(1), on_cpu(1);
    ops::count_top_k(logits.dev, targets.dev, top1, on_gpu);
    ops::count_top_k(logits.host, targets.host, top1, on_cpu);
    CHECK(on_gpu == on_cpu);
    CHECK(on_cpu[0] >= planted);
  }
}
