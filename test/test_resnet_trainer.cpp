// The trainer with a CIFAR ResNet end to end (its meta dry run, against the
// CPU allocator's bytes: test_family_invariants.cpp): resuming from a
// checkpoint (BatchNorm running statistics included) is bit for bit the
// uninterrupted run, the checkpoint holds full torchvision-named tensors, a
// small ResNet learns the synthetic images, and data that does not fit the
// model is refused with the valid forms.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <vector>

#include "engine/checkpoint/safetensors.h"
#include "engine/train/checkpoint_dir.h"
#include "engine/train/trainer.h"
#include "test/test_checkpoint_support.h"
#include "test/test_temp_dir.h"
#include "test/train_config_util.h"

using namespace sdp;
namespace fs = std::filesystem;

namespace {

using sdp::testing::tiny_resnet_run;

}  // namespace

TEST_CASE("a ResNet-18 step at batch 128 runs on the meta device", "[trainer][meta][resnet]") {
  TrainConfig c;
  c.model = "resnet18";
  c.device = "meta";
  c.batch = 128;
  c.steps = 1;
  c.progress = false;
  Trainer t(c);
  const StepResult r = t.train_step();
  const CategoryBytes& peak = r.memory.at_peak;
  // f32 weights (and BatchNorm buffers), grads and two AdamW moments.
  const double params = static_cast<double>(t.model().parameter_count());
  REQUIRE(static_cast<double>(peak[MemCategory::param]) >= params * 4);
  REQUIRE(static_cast<double>(peak[MemCategory::param]) < params * 4 * 1.01);
  // About 1.2M saved values per 32x32 image (stem, 4 per block, shortcuts).
  REQUIRE(static_cast<double>(peak[MemCategory::activation]) > 128 * 1.1e6 * 4);
  REQUIRE(r.flops > 3 * 0.55e9 * 128);  // ~0.56 GFLOP per image forward, x3 with backward
}

TEST_CASE("resuming a ResNet from a checkpoint gives bit-identical losses",
          "[trainer][checkpoint][resnet]") {
  const sdp::testing::TempDir temp;
  const fs::path dir = temp / "resume";
  // Evaluation reads the running statistics: the resume check's equal
  // evaluation shows they were restored too.
  sdp::testing::require_bit_identical_resume(tiny_resnet_run(), dir);

  // Full tensors under torchvision's names, running statistics included.
  const checkpoint::SafetensorsFile weights(resolve_checkpoint(dir) / "model.safetensors");
  for (const char* name : {"conv1.weight", "bn1.running_var", "layer2.0.downsample.0.weight",
                           "layer4.0.bn2.running_mean", "fc.bias"})
    REQUIRE(weights.contains(name));
}

TEST_CASE("a small ResNet learns the synthetic images", "[trainer][resnet]") {
  TrainConfig c;
  c.model = "resnet-tiny";
  c.data = "synthetic-images:height=8,width=8,classes=4";
  c.batch = 16;
  c.steps = 200;
  c.lr = 1e-2;
  c.warmup = 10;
  c.eval_every = 0;
  c.eval_batches = 8;
  c.progress = false;
  Trainer t(c);
  const double before = t.evaluate();
  for (int64_t i = 0; i < c.steps; ++i) t.train_step();
  const double after = t.evaluate();
  REQUIRE(before > 0.8 * std::log(4.0));
  REQUIRE(after < 0.65 * std::log(4.0));  // 0.70 measured at this seed
}

TEST_CASE("data that does not fit the model is refused with the valid forms",
          "[trainer][resnet][errors]") {
  TrainConfig c = tiny_resnet_run();
  c.data = "synthetic:vocab=64";
  REQUIRE_THROWS_WITH(Trainer(c), Catch::Contains("classifies images") &&
                                      Catch::Contains("cifar10:DIR"));
  TrainConfig l;
  l.model = "tiny";
  l.data = "synthetic-images";
  l.progress = false;
  REQUIRE_THROWS_WITH(Trainer(l), Catch::Contains("needs tokens"));
  TrainConfig g = tiny_resnet_run();
  g.parallel.strategy = "n-sdp";
  g.parallel.active_fraction = 0.5;
  g.parallel.channel_groups = 3;
  g.emulate_world = 2;
  REQUIRE_THROWS_WITH(Trainer(g), Catch::Contains("channel_groups = 3 must divide"));
}
