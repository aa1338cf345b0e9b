// Top-k correct counts against a batch counted by hand: ties go to the lower
// class, ignored rows (negative targets), a row with a NaN logit, k at the
// class count; f32 and f64, meta, and the argument checks.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <vector>

#include "ops_test_util.h"

using namespace sdp;
using namespace sdp::testing;

namespace {

constexpr int64_t kRows = 10, kClasses = 7;

// Row by row: the logits, the target, and by hand the target's rank (how
// many classes come before it) and so whether it is top-1 / top-5 / top-7.
struct Row {
  std::array<double, kClasses> logits;
  int32_t target;
};
const Row kBatch[kRows] = {
    {{0.1, 0.5, 0.2, 0.9, 0.3, 0.0, 0.4}, 3},     // rank 0: top-1, top-5, top-7
    {{0.1, 0.5, 0.2, 0.9, 0.3, 0.0, 0.4}, 1},     // rank 1 (0.9 above): top-5, top-7
    {{0.1, 0.5, 0.2, 0.9, 0.3, 0.0, 0.4}, 5},     // rank 6 (the smallest): top-7 only
    {{1, 1, 1, 1, 1, 1, 1}, 0},                   // all tied, lowest class: rank 0
    {{1, 1, 1, 1, 1, 1, 1}, 6},                   // all tied, highest class: rank 6
    {{2, 0, 2, 0, 0, 0, 0}, 2},                   // tied with class 0 below it: rank 1
    {{0, 0, 9, 0, 0, 0, 0}, -100},                // ignored (would be top-1)
    {{0, 0, 0, 9, NAN, 0, 0}, 3},                 // a NaN logit: never correct
    {{5, 4, 4, 4, 4, 4, 4}, 5},                   // 1 above + 4 tied below: rank 5
    {{5, 4, 4, 4, 4, 4, 4}, 4},                   // 1 above + 3 tied below: rank 4
};
// Counted by hand from the ranks above.
constexpr int64_t kTop1 = 2;  // rows 0, 3
constexpr int64_t kTop5 = 5;  // rows 0, 1, 3, 5, 9
constexpr int64_t kTop7 = 8;  // every valid row without a NaN: 0-5, 8, 9

}  // namespace

TEST_CASE("count_top_k matches a batch counted by hand, ties and ignored rows included", "[ops]") {
  for (const auto& c : kFloatCases) {
    CAPTURE(dtype_name(c.dtype));
    Arena arena;
    Tensor l64 = arena.make({kRows, kClasses});  // [N, V]
    Tensor targets = arena.make({kRows}, DType::i32);
    for (int64_t i = 0; i < kRows; ++i) {
      for (int64_t j = 0; j < kClasses; ++j)
        l64.data<double>()[i * kClasses + j] = kBatch[i].logits[static_cast<size_t>(j)];
      targets.data<int32_t>()[i] = kBatch[i].target;
    }
    Tensor logits = cast_copy(arena, l64, c.dtype);
    const std::vector<int> ks = {1, 5, 7};
    std::vector<int64_t> correct(3, -1);
    ops::count_top_k(logits, targets, ks, correct);
    CHECK(correct == std::vector<int64_t>{kTop1, kTop5, kTop7});

    // One k at a time gives the same counts.
    for (size_t i = 0; i < ks.size(); ++i) {
      std::vector<int64_t> one(1);
      ops::count_top_k(logits, targets, std::span<const int>(&ks[i], 1), one);
      CHECK(one[0] == correct[i]);
    }
    // Leading dims are rows: [2, 5, V] counts the same rows.
    Tensor logits3 = logits.view({2, 5, kClasses});
    Tensor targets2 = targets.view({2, 5});
    std::vector<int64_t> again(3);
    ops::count_top_k(logits3, targets2, ks, again);
    CHECK(again == correct);
  }
}

TEST_CASE("count_top_k computes nothing on meta and checks its arguments", "[ops]") {
  MetaAllocator meta(64);
  OwnedTensor logits(meta, {4, 3}, DType::f32, MemCategory::workspace);
  OwnedTensor targets(meta, {4}, DType::i32, MemCategory::workspace);
  std::vector<int64_t> correct(1, 7);
  const std::vector<int> top1 = {1};
  ops::count_top_k(*logits, *targets, top1, correct);
  CHECK(correct[0] == 0);

  Arena arena;
  Tensor l = arena.make({2, 3}, DType::f32), t = arena.make({2}, DType::i32);
  ops::fill(l, 0.0);
  t.data<int32_t>()[0] = 0;
  t.data<int32_t>()[1] = 3;  // V = 3
  CHECK_THROWS_WITH(ops::count_top_k(l, t, top1, correct),
                    Catch::Contains("target 3 at row 1 is out of range (valid: 0 to 2"));
  t.data<int32_t>()[1] = 2;
  const std::vector<int> descending = {5, 1};
  std::vector<int64_t> two(2);
  CHECK_THROWS_WITH(ops::count_top_k(l, t, descending, two),
                    Catch::Contains("each larger than the one before"));
  const std::vector<int> zero = {0};
  CHECK_THROWS_WITH(ops::count_top_k(l, t, zero, correct), Catch::Contains("k >= 1"));
  const std::vector<int> many = {1, 2, 3, 4, 5};
  std::vector<int64_t> five(5);
  CHECK_THROWS_WITH(ops::count_top_k(l, t, many, five), Catch::Contains("valid: 1 to 4"));
  CHECK_THROWS_WITH(ops::count_top_k(l, t, top1, two), Catch::Contains("2 counts for 1 values"));
  Tensor wrong_rows = arena.make({3}, DType::i32);
  CHECK_THROWS(ops::count_top_k(l, wrong_rows, top1, correct));
}
