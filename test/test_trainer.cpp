// The trainer end to end (its meta dry run, against the CPU allocator's
// bytes: test_family_invariants.cpp): a billion-parameter step runs on the
// meta device, resuming from a checkpoint reproduces an uninterrupted run
// bit for bit, configs are validated, and a tiny model learns the synthetic
// language to within 0.1 nats/token of its entropy rate.
#include <catch2/catch.hpp>

#include <filesystem>
#include <vector>

#include "test/test_temp_dir.h"
#include "engine/train/checkpoint_dir.h"
#include "engine/train/trainer.h"
#include "test/train_config_util.h"

using namespace sdp;
namespace fs = std::filesystem;

namespace {

TrainConfig small_run() { return testing::tiny_train_config(4, 32, 6, 2); }

}  // namespace

TEST_CASE("a one-billion-parameter step runs on the meta device", "[trainer][meta]") {
  TrainConfig c;
  c.model = "llama-1b";
  c.device = "meta";
  c.batch = 2;
  c.seq = 1024;
  c.steps = 1;
  Trainer t(c);
  const StepResult r = t.train_step();
  const CategoryBytes& peak = r.memory.at_peak;
  const double params = static_cast<double>(t.model().parameter_count());
  // f32 weights, grads and two AdamW moments, each rounded to 512-byte blocks.
  REQUIRE(static_cast<double>(peak[MemCategory::param]) >= params * 4);
  REQUIRE(static_cast<double>(peak[MemCategory::param]) < params * 4 * 1.001);
  REQUIRE(static_cast<double>(peak[MemCategory::optim]) >= params * 8);
  REQUIRE(static_cast<double>(peak[MemCategory::activation]) > 0);
}

TEST_CASE("resuming from a checkpoint gives bit-identical losses", "[trainer][checkpoint]") {
  const sdp::testing::TempDir temp;
  const fs::path dir = temp / "resume";
  TrainConfig c = small_run();
  std::vector<double> straight;
  {
    Trainer t(c);
    for (int i = 0; i < 6; ++i) straight.push_back(t.train_step().loss);
  }
  std::vector<double> resumed;
  {
    Trainer t(c);
    for (int i = 0; i < 3; ++i) resumed.push_back(t.train_step().loss);
    save_and_mark_latest(t, dir);
  }
  {
    Trainer t(c);
    t.load_checkpoint(resolve_checkpoint(dir));
    REQUIRE(t.step() == 3);
    for (int i = 0; i < 3; ++i) resumed.push_back(t.train_step().loss);
  }
  REQUIRE(resumed == straight);
}

TEST_CASE("checkpoints of another model or a missing directory are refused", "[trainer][errors]") {
  const sdp::testing::TempDir temp;
  const fs::path dir = temp / "mismatch";
  TrainConfig c = small_run();
  {
    Trainer t(c);
    t.train_step();
    t.save_checkpoint(dir);
  }
  TrainConfig other = c;
  other.model = "small";
  Trainer t(other);
  REQUIRE_THROWS_WITH(t.load_checkpoint(dir), Catch::Contains("holds model tiny"));
  REQUIRE_THROWS_WITH(resolve_checkpoint(dir / "nope"), Catch::Contains("no checkpoint at"));
}

TEST_CASE("train configs are validated field by field", "[trainer][errors]") {
  TrainConfig c = small_run();
  c.batch = 0;
  REQUIRE_THROWS_WITH(c.validate(), Catch::Contains("batch = 0 is invalid (valid: [1, 16777216])"));
  c = small_run();
  c.device = "tpu";
  REQUIRE_THROWS_WITH(c.validate(), Catch::Contains("valid: cpu, meta, meta-cpu, cuda"));
  REQUIRE_THROWS_WITH(TrainConfig::from_json({{"bacth", 3}}), Catch::Contains("unknown field 'bacth'"));
  REQUIRE_THROWS_WITH(TrainConfig::from_json({{"lr", "fast"}}), Catch::Contains("field 'lr' has the wrong type"));
  c = small_run();
  c.seq = 4096;
  REQUIRE_THROWS_WITH(Trainer(c), Catch::Contains("exceeds model tiny's max_seq"));
}

TEST_CASE("a tiny LLaMA learns the synthetic language to within 0.1 nats of its entropy rate",
          "[trainer][convergence]") {
  TrainConfig c;
  c.model = "tiny";
  c.data = "synthetic";
  c.batch = 16;
  c.seq = 64;
  c.steps = 200;
  c.warmup = 20;
  c.lr = 3e-3;
  c.min_lr = 3e-4;
  c.eval_batches = 8;
  c.progress = false;
  Trainer t(c);
  const double best = t.best_achievable_loss().value();
  const double initial = t.evaluate();
  REQUIRE(initial > best + 2.0);  // starts near log(vocab), far above the floor
  while (t.step() < c.steps) t.train_step();
  const double final_loss = t.evaluate();
  INFO("entropy rate " << best << ", eval loss " << final_loss);
  REQUIRE(final_loss < best + 0.1);
  REQUIRE(final_loss > best - 0.05);  // the floor cannot be beaten (beyond sampling noise)
}

TEST_CASE("the same seed gives bit-identical losses; another seed does not", "[trainer]") {
  TrainConfig c = small_run();
  c.steps = 3;
  auto losses = [](const TrainConfig& cfg) {
    Trainer t(cfg);
    std::vector<double> out;
    while (t.step() < cfg.steps) out.push_back(t.train_step().loss);
    return out;
  };
  const auto first = losses(c);
  REQUIRE(losses(c) == first);
  TrainConfig other = c;
  other.seed = c.seed + 1;
  REQUIRE(losses(other) != first);
}
