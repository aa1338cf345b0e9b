// A whole ResNet training step on CUDA against the CPU from the same seed:
// f32 agrees with the CPU (losses, gradient norms, parameters and BatchNorm
// running statistics after three steps), an emulated N-SDP rank computes the
// same subnetwork loss, and bf16 mixed precision stays within 3% of f32.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <string>

#include "engine/train/trainer.h"
#include "test/cuda/cuda_test_support.h"

using namespace sdp;
using namespace sdp::cuda_testing;

namespace {

constexpr double kStepTolerance = 1e-4;

TrainConfig resnet_run(const std::string& device, const std::string& dtype) {
  TrainConfig c;
  c.model = "resnet-tiny";
  c.data = "synthetic-images:height=16,width=16,classes=5";
  c.batch = 8;
  c.steps = 3;
  c.warmup = 2;
  c.eval_every = 0;
  c.progress = false;
  c.device = device;
  c.dtype = dtype;
  c.eps = 1e-5;  // as in test_cuda_step.cpp: sign flips of near-zero gradients stay small
  return c;
}

}  // namespace

TEST_CASE("a tiny ResNet step in f32 on CUDA matches the CPU", "[step][resnet]") {
  for (const char* strategy : {"ddp", "n-sdp"}) {
    CAPTURE(strategy);
    auto config = [&](const std::string& device) {
      TrainConfig c = resnet_run(device, "f32");
      if (std::string(strategy) != "ddp") {
        c.parallel.strategy = strategy;
        c.parallel.active_fraction = 0.5;
        c.emulate_world = 4;
        c.emulate_rank = 2;
      }
      return c;
    };
    Trainer cpu(config("cpu"));
    Trainer gpu(config("cuda"));
    for (int i = 0; i < 3; ++i) {
      const StepResult want = cpu.train_step(), got = gpu.train_step();
      CHECK(std::isfinite(want.rank_loss));
      expect_close("rank loss at step " + std::to_string(want.step), {got.rank_loss},
                   {want.rank_loss}, kStepTolerance);
      expect_close("grad norm at step " + std::to_string(want.step), {got.grad_norm},
                   {want.grad_norm}, kStepTolerance);
    }
    const ParameterSet& want = cpu.model().params();
    const ParameterSet& got = gpu.model().params();
    for (int id = 0; id < want.count(); ++id) {
      if (!want.is_materialized(id)) continue;
      expect_close("parameter " + want.decl(id).name + " after 3 steps",
                   values_of(got.param(id)), values_of(want.param(id)), kStepTolerance);
    }
  }
}

TEST_CASE("a tiny ResNet trains in bf16 on CUDA to within 3% of the f32 loss", "[step][resnet]") {
  Trainer f32(resnet_run("cpu", "f32"));
  Trainer bf16(resnet_run("cuda", "bf16"));
  StepResult want, got;
  for (int i = 0; i < 3; ++i) {
    want = f32.train_step();
    got = bf16.train_step();
    std::printf("  resnet step %lld: loss cpu f32 %.6f, cuda bf16 %.6f\n",
                static_cast<long long>(got.step), want.loss, got.loss);
    CHECK(std::isfinite(got.loss));
  }
  CHECK(std::abs(got.loss - want.loss) <= 0.03 * want.loss);
}
