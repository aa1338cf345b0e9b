// Shuffled training order (config.shuffle, sdp-train --shuffle): the keyed
// permutation is a bijection; a token file's train split is read each epoch
// as every window once, in an order that changes with the epoch; the global
// order a step sees is the same for 1, 2 and 4 ranks; a stopped stream
// resumes exactly where it was, in one process and through a trainer's
// checkpoint; shuffle off is the file order it always was; states of one
// order do not restore into the other.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "engine/core/allocator.h"
#include "engine/core/error.h"
#include "engine/data/image_source.h"
#include "engine/data/index_permutation.h"
#include "engine/data/sequential_source.h"
#include "engine/data/token_source.h"
#include "engine/train/batch_loader.h"
#include "engine/train/checkpoint_dir.h"
#include "engine/train/trainer.h"
#include "test/test_checkpoint_support.h"
#include "test/test_data_support.h"
#include "test/train_config_util.h"

using namespace sdp;
using data::make_token_source;
using data::Split;
using data::StreamPart;
namespace fs = std::filesystem;

namespace {

// A text file whose byte i is i: a window's first token is its offset, so
// the windows a source reads say where they came from. 240 bytes: the train
// split is bytes [0, 228) (95%), 28 windows of seq 8 + 1 an epoch.
constexpr int64_t kBytes = 240;
constexpr int64_t kTrainBytes = 228;
constexpr int64_t kSeq = 8;
constexpr int64_t kWindows = (kTrainBytes - 1) / kSeq;

std::string counting_text(const testing::TempDir& dir) {
  std::vector<uint8_t> bytes(kBytes);
  for (int64_t i = 0; i < kBytes; ++i) bytes[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
  testing::write_bytes(dir.file("count.txt"), bytes);
  return "text:" + dir.file("count.txt");
}

// The first token of each of `count` windows, read `batch` at a time;
// checks that every window is seq + 1 consecutive tokens.
std::vector<int32_t> window_starts(data::TokenSource& src, int64_t count, int64_t batch,
                                   int64_t seq = kSeq) {
  std::vector<int32_t> starts;
  std::vector<int32_t> w(static_cast<size_t>(batch * (seq + 1)));
  while (static_cast<int64_t>(starts.size()) < count) {
    src.next_batch(w.data(), batch, seq);
    for (int64_t row = 0; row < batch; ++row) {
      const int32_t* window = w.data() + row * (seq + 1);
      for (int64_t t = 0; t <= seq; ++t) REQUIRE(window[t] == window[0] + t);
      starts.push_back(window[0]);
    }
  }
  starts.resize(static_cast<size_t>(count));
  return starts;
}

}  // namespace

TEST_CASE("index permutation: every index exactly once, another key another order",
          "[data][shuffle]") {
  for (const int64_t n : {1, 2, 3, 5, 64, 1000, 4097}) {
    const data::IndexPermutation p(n, 42);
    std::vector<int64_t> seen;
    for (int64_t i = 0; i < n; ++i) seen.push_back(p.at(i));
    std::sort(seen.begin(), seen.end());
    for (int64_t i = 0; i < n; ++i) REQUIRE(seen[static_cast<size_t>(i)] == i);
  }
  const data::IndexPermutation a(1000, 1), b(1000, 2);
  int64_t same = 0, fixed = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    same += a.at(i) == b.at(i);
    fixed += a.at(i) == i;
  }
  // A random permutation agrees with another (or the identity) at about one place.
  REQUIRE(same < 10);
  REQUIRE(fixed < 10);
  REQUIRE_THROWS_AS(data::IndexPermutation(0, 1), Error);
  REQUIRE_THROWS_AS(a.at(1000), Error);
}

TEST_CASE("shuffled windows: each epoch reads every window once, and epochs differ",
          "[data][shuffle]") {
  const testing::TempDir dir;
  auto src = make_token_source(counting_text(dir), 7, Split::train, {}, /*shuffle=*/true);
  const auto& seq_src = dynamic_cast<const data::SequentialTokenSource&>(*src);
  REQUIRE(seq_src.shuffled());
  REQUIRE(seq_src.range_end() == kTrainBytes);
  REQUIRE(seq_src.windows_per_epoch(kSeq) == kWindows);
  REQUIRE_THAT(src->describe(), Catch::Contains("windows shuffled each epoch (seed 7)"));
  // Batches of 5 do not divide the 28 windows: epochs end inside a batch.
  const std::vector<int32_t> starts = window_starts(*src, 3 * kWindows, 5);
  std::vector<std::vector<int32_t>> epochs;
  const int64_t spare = (kTrainBytes - 1) - kWindows * kSeq;  // 3 tokens no window covers
  for (int64_t e = 0; e < 3; ++e) {
    std::vector<int32_t> order(starts.begin() + e * kWindows, starts.begin() + (e + 1) * kWindows);
    std::vector<int32_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    // Every window of the epoch's grid once: o_e + j * seq, j = 0 .. 27.
    REQUIRE(sorted.front() >= 0);
    REQUIRE(sorted.front() <= spare);
    for (int64_t j = 0; j < kWindows; ++j)
      REQUIRE(sorted[static_cast<size_t>(j)] == sorted.front() + j * kSeq);
    REQUIRE(order != sorted);  // not file order
    epochs.push_back(order);
  }
  REQUIRE(epochs[0] != epochs[1]);
  REQUIRE(epochs[1] != epochs[2]);
  REQUIRE(epochs[0] != epochs[2]);
  const nlohmann::json state = src->state();
  REQUIRE(state.at("epoch") == 3);
  REQUIRE(state.at("index") == (3 * kWindows + 4) / 5 * 5 - 3 * kWindows);
  // Another seed, another order; the same seed, the same one.
  auto other = make_token_source(counting_text(dir), 8, Split::train, {}, true);
  REQUIRE(window_starts(*other, kWindows, 1) != epochs[0]);
  auto again = make_token_source(counting_text(dir), 7, Split::train, {}, true);
  REQUIRE(window_starts(*again, kWindows, 1) == epochs[0]);
}

TEST_CASE("shuffled order: a step's global batch is the same for 1, 2 and 4 ranks",
          "[data][shuffle][loader]") {
  const testing::TempDir dir;
  TrainConfig config = testing::tiny_train_config();
  config.data = counting_text(dir);
  config.seq = kSeq;
  REQUIRE(config.shuffle);  // the default
  const int64_t global_batch = 8;
  const int steps = 10;  // 80 windows: into the third epoch of 28
  // [step][global row] -> (first input token, first target token)
  auto global_stream = [&](int world) {
    TrainConfig c = config;
    c.batch = global_batch / world;
    std::vector<std::unique_ptr<BatchLoader>> replicas;
    for (int d = 0; d < world; ++d)
      replicas.push_back(make_batch_loader(c, Split::train, StreamPart{d, world},
                                           host_allocator(), DType::f32));
    std::vector<std::vector<std::pair<int32_t, int32_t>>> stream(steps);
    for (int s = 0; s < steps; ++s) {
      stream[static_cast<size_t>(s)].resize(global_batch);
      for (int d = 0; d < world; ++d) {
        replicas[static_cast<size_t>(d)]->next();
        const int32_t* x = replicas[static_cast<size_t>(d)]->inputs().data<int32_t>();
        const int32_t* y = replicas[static_cast<size_t>(d)]->targets().data<int32_t>();
        // Replica d's row i is sample i * world + d of the global batch.
        for (int64_t i = 0; i < c.batch; ++i)
          stream[static_cast<size_t>(s)][static_cast<size_t>(i * world + d)] = {x[i * kSeq],
                                                                                  y[i * kSeq]};
      }
    }
    // All replicas stand at one global position, the one a checkpoint records.
    for (int d = 1; d < world; ++d)
      REQUIRE(replicas[static_cast<size_t>(d)]->state() == replicas[0]->state());
    return std::make_pair(stream, replicas[0]->state());
  };
  const auto [one, one_state] = global_stream(1);
  std::set<int32_t> first_epoch;
  for (int s = 0; s < 3; ++s)
    for (const auto& [x, y] : one[static_cast<size_t>(s)]) {
      REQUIRE(y == x + 1);
      first_epoch.insert(x);
    }
  REQUIRE(first_epoch.size() == 24);  // 24 different windows in the first three steps
  for (const int world : {2, 4}) {
    const auto [many, state] = global_stream(world);
    REQUIRE(many == one);
    REQUIRE(state == one_state);
  }
}

TEST_CASE("a shuffled stream resumes where it stopped, on another world size",
          "[data][shuffle][checkpoint]") {
  const testing::TempDir dir;
  const std::string spec = counting_text(dir);
  // Uninterrupted: one process, global batch 6, 8 batches (two epochs and a bit).
  auto straight = make_token_source(spec, 3, Split::train, {}, true);
  const std::vector<int32_t> all = window_starts(*straight, 48, 6);
  // Two ranks of batch 3 read 5 batches, then one process takes over.
  auto r0 = make_token_source(spec, 3, Split::train, StreamPart{0, 2}, true);
  auto r1 = make_token_source(spec, 3, Split::train, StreamPart{1, 2}, true);
  std::vector<int32_t> first;
  for (int b = 0; b < 5; ++b) {
    const std::vector<int32_t> a = window_starts(*r0, 3, 3);
    const std::vector<int32_t> c = window_starts(*r1, 3, 3);
    for (size_t i = 0; i < 3; ++i) {
      first.push_back(a[i]);
      first.push_back(c[i]);
    }
  }
  REQUIRE(r0->state() == r1->state());
  REQUIRE(r0->state().at("epoch") == 1);  // 30 windows: past the first epoch of 28
  auto resumed = make_token_source(spec, 3, Split::train, {}, true);
  resumed->restore(r0->state());
  const std::vector<int32_t> rest = window_starts(*resumed, 18, 6);
  first.insert(first.end(), rest.begin(), rest.end());
  REQUIRE(first == all);
}

TEST_CASE("shuffle off is file order; val and the synthetic language are never shuffled",
          "[data][shuffle]") {
  const testing::TempDir dir;
  const std::string spec = counting_text(dir);
  auto plain = make_token_source(spec, 7, Split::train, {}, false);
  REQUIRE_FALSE(dynamic_cast<const data::SequentialTokenSource&>(*plain).shuffled());
  REQUIRE_THAT(plain->describe(), Catch::Contains("file order (unshuffled)"));
  REQUIRE(plain->state().contains("cursor"));
  REQUIRE_FALSE(plain->state().contains("order"));
  const std::vector<int32_t> starts = window_starts(*plain, 5, 5);
  REQUIRE(starts == std::vector<int32_t>{0, 8, 16, 24, 32});
  // Val: the same windows whatever shuffle says.
  auto val_on = make_token_source(spec, 7, Split::val, {}, true);
  auto val_off = make_token_source(spec, 7, Split::val, {}, false);
  std::vector<int32_t> a(3 * 5), b(3 * 5);
  val_on->next_batch(a.data(), 3, 4);
  val_off->next_batch(b.data(), 3, 4);
  REQUIRE(a == b);
  REQUIRE(a[0] == kTrainBytes);
  REQUIRE(val_on->state() == val_off->state());
  // The synthetic language: independent draws, the same either way.
  auto syn_on = make_token_source("synthetic", 5, Split::train, {}, true);
  auto syn_off = make_token_source("synthetic", 5, Split::train, {}, false);
  std::vector<int32_t> s_on(2 * 17), s_off(2 * 17);
  syn_on->next_batch(s_on.data(), 2, 16);
  syn_off->next_batch(s_off.data(), 2, 16);
  REQUIRE(s_on == s_off);
  REQUIRE(syn_on->state() == syn_off->state());
}

TEST_CASE("image sets: shuffle off reads the train split in index order", "[data][shuffle]") {
  // Synthetic image i has label i mod K: index order shows in the labels.
  const std::string spec = "synthetic-images:height=4,width=4,classes=3,size=12,augment=0";
  auto ordered = data::make_image_source(spec, 1, Split::train, {}, /*shuffle=*/false);
  auto shuffled = data::make_image_source(spec, 1, Split::train, {}, /*shuffle=*/true);
  REQUIRE_THAT(ordered->describe(), Catch::Contains("in index order"));
  std::vector<float> images(static_cast<size_t>(12 * 3 * 16));
  std::vector<int32_t> labels(12), shuffled_labels(12);
  ordered->next_batch(images.data(), labels.data(), 12);
  shuffled->next_batch(images.data(), shuffled_labels.data(), 12);
  for (int i = 0; i < 12; ++i) REQUIRE(labels[static_cast<size_t>(i)] == i % 3);
  REQUIRE(shuffled_labels != labels);
  // The two orders are different streams: a state of one is not the other's.
  REQUIRE_THROWS_WITH(shuffled->restore(ordered->state()), Catch::Contains("identity"));
}

TEST_CASE("data states restore only into a source of the same order and seed",
          "[data][shuffle][errors]") {
  const testing::TempDir dir;
  const std::string spec = counting_text(dir);
  auto plain = make_token_source(spec, 7, Split::train, {}, false);
  auto shuffled = make_token_source(spec, 7, Split::train, {}, true);
  std::vector<int32_t> w(2 * (kSeq + 1));
  shuffled->next_batch(w.data(), 2, kSeq);
  REQUIRE_THROWS_WITH(shuffled->restore(plain->state()),
                      Catch::Contains("reads the train split in file order") &&
                          Catch::Contains("--shuffle false"));
  REQUIRE_THROWS_WITH(plain->restore(shuffled->state()),
                      Catch::Contains("in shuffled windows") && Catch::Contains("--shuffle true"));
  auto other_seed = make_token_source(spec, 8, Split::train, {}, true);
  REQUIRE_THROWS_WITH(other_seed->restore(shuffled->state()), Catch::Contains("'order'"));
  nlohmann::json bad = shuffled->state();
  bad["index"] = kWindows;
  REQUIRE_THROWS_WITH(shuffled->restore(bad), Catch::Contains("'index' 28, outside the 28 windows"));
  bad = shuffled->state();
  bad["seq"] = kTrainBytes;
  REQUIRE_THROWS_WITH(shuffled->restore(bad), Catch::Contains("do not fit"));
  bad = shuffled->state();
  bad.erase("epoch");
  REQUIRE_THROWS_WITH(shuffled->restore(bad), Catch::Contains("'epoch'"));
}

TEST_CASE("another seq begins the next shuffled epoch", "[data][shuffle]") {
  const testing::TempDir dir;
  auto src = make_token_source(counting_text(dir), 7, Split::train, {}, true);
  window_starts(*src, 3, 3);
  REQUIRE(src->state().at("epoch") == 0);
  REQUIRE(src->state().at("index") == 3);
  window_starts(*src, 2, 2, 4);
  REQUIRE(src->state().at("epoch") == 1);
  REQUIRE(src->state().at("index") == 2);
  REQUIRE(src->state().at("seq") == 4);
}

TEST_CASE("a resumed shuffled run continues the uninterrupted run's data stream",
          "[trainer][checkpoint][shuffle]") {
  const testing::TempDir temp;
  std::vector<uint8_t> text;
  for (int i = 0; i < 400; ++i) text.push_back(static_cast<uint8_t>("the data order "[i % 15] + i % 7));
  testing::write_bytes(temp.file("corpus.txt"), text);
  // 380 train bytes, 23 windows of 16 + 1 an epoch, 4 a step: the resumed
  // half crosses the epoch boundary.
  TrainConfig c = testing::tiny_train_config(4, 16, 8, 2);
  c.data = "text:" + temp.file("corpus.txt");
  const fs::path dir = temp / "ck";
  const std::vector<double> straight = testing::require_bit_identical_resume(c, dir, 3, 5);
  // The order reaches training: file order gives other losses, and a
  // shuffled checkpoint does not resume a file-order run.
  TrainConfig plain = c;
  plain.shuffle = false;
  Trainer t(plain);
  std::vector<double> in_order;
  for (int i = 0; i < 3; ++i) in_order.push_back(t.train_step().loss);
  REQUIRE(in_order != std::vector<double>(straight.begin(), straight.begin() + 3));
  Trainer fresh(plain);
  REQUIRE_THROWS_WITH(fresh.load_checkpoint(resolve_checkpoint(dir)),
                      Catch::Contains("--shuffle true"));
}
