// A whole LLaMA training step on CUDA against the CPU from the same seed:
// f32 agrees with the CPU's losses, gradient norms and parameters; bf16
// mixed precision trains to within 2% of f32's loss; an emulated SDP rank
// computes the same subnetwork loss on either device.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <string>

#include "engine/train/trainer.h"
#include "test/cuda/cuda_test_support.h"

using namespace sdp;
using namespace sdp::cuda_testing;

namespace {

// Same-step agreement between devices: both run f32 with different
// summation orders, so results differ by roundoff (~1e-6) that three steps
// do not amplify much; 1e-4 relative.
constexpr double kStepTolerance = 1e-4;

TrainConfig tiny_run(const std::string& device, const std::string& dtype) {
  TrainConfig c;
  c.model = "tiny";
  c.batch = 4;
  c.seq = 64;
  c.steps = 3;
  c.warmup = 2;
  c.eval_every = 0;
  c.progress = false;
  c.device = device;
  c.dtype = dtype;
  // At step 1 AdamW moves a parameter by lr * g / (|g| + eps): +-lr for any
  // gradient well above eps, so a gradient within f32 roundoff of zero
  // (which two devices may round to opposite signs) becomes an lr-sized
  // difference in the parameters. Measured on the CPU, f32 against f64 after
  // 3 steps: 1.8e-4 with the default eps 1e-8, 1.6e-5 with 1e-6, 4.4e-6
  // with 1e-5, still far below the typical gradient of 3e-3.
  c.eps = 1e-5;
  return c;
}

// An emulated rank knows only its own loss: the job's loss and gradient
// norm need the other ranks and are NaN on both devices, which compare()
// counts as agreeing.
void expect_same_step(const std::string& what, const StepResult& gpu, const StepResult& cpu) {
  const std::string at = " at step " + std::to_string(cpu.step);
  CHECK(gpu.step == cpu.step);
  CHECK(std::isfinite(cpu.rank_loss));
  expect_close(what + " loss" + at, {gpu.loss}, {cpu.loss}, kStepTolerance);
  expect_close(what + " rank loss" + at, {gpu.rank_loss}, {cpu.rank_loss}, kStepTolerance);
  expect_close(what + " grad norm" + at, {gpu.grad_norm}, {cpu.grad_norm}, kStepTolerance);
}

}  // namespace

TEST_CASE("a tiny LLaMA step in f32 on CUDA matches the CPU: losses, grad norms, parameters",
          "[step]") {
  Trainer cpu(tiny_run("cpu", "f32"));
  Trainer gpu(tiny_run("cuda", "f32"));
  for (int i = 0; i < 3; ++i) {
    const StepResult want = cpu.train_step(), got = gpu.train_step();
    CHECK(std::isfinite(want.loss));
    CHECK(std::isfinite(want.grad_norm));
    expect_same_step("cuda f32", got, want);
  }

  const ParameterSet& want = cpu.model().params();
  const ParameterSet& got = gpu.model().params();
  REQUIRE(got.count() == want.count());
  for (int id = 0; id < want.count(); ++id) {
    if (!want.is_materialized(id)) continue;
    REQUIRE(got.is_materialized(id));
    expect_close("parameter " + want.decl(id).name + " after 3 steps",
                 values_of(got.param(id)), values_of(want.param(id)), kStepTolerance);
  }
}

TEST_CASE("a tiny LLaMA trains in bf16 on CUDA to within 2% of the f32 loss", "[step]") {
  Trainer f32(tiny_run("cpu", "f32"));
  Trainer bf16(tiny_run("cuda", "bf16"));
  StepResult want, got;
  for (int i = 0; i < 3; ++i) {
    want = f32.train_step();
    got = bf16.train_step();
    std::printf("  step %lld: loss cpu f32 %.6f, cuda bf16 %.6f; grad norm %.6f, %.6f\n",
                static_cast<long long>(got.step), want.loss, got.loss, want.grad_norm,
                got.grad_norm);
    CHECK(std::isfinite(got.loss));
    CHECK(std::isfinite(got.grad_norm));
  }
  INFO("after 3 steps: loss cpu f32 " << want.loss << ", cuda bf16 " << got.loss);
  CHECK(std::abs(got.loss - want.loss) <= 0.02 * want.loss);
}

TEST_CASE("an emulated B-SDP rank computes the same losses on CUDA as on the CPU", "[step]") {
  auto emulated = [](const std::string& device) {
    TrainConfig c = tiny_run(device, "f32");
    c.parallel.strategy = "b-sdp";
    c.parallel.active_fraction = 0.5;
    c.emulate_world = 4;
    c.emulate_rank = 1;
    return c;
  };
  Trainer cpu(emulated("cpu"));
  Trainer gpu(emulated("cuda"));
  for (int i = 0; i < 3; ++i) {
    const StepResult want = cpu.train_step(), got = gpu.train_step();
    expect_same_step("emulated rank 1 of 4 (b-sdp, C = 0.5)", got, want);
  }
}
