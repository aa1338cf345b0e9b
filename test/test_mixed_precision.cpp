// Mixed precision bookkeeping, checked where this machine can: on the meta
// device (bytes) and in the config checks. bf16 parameters and activations,
// f32 master values, gradients and AdamW moments; the statistics next to
// bf16 activations are f32.
#include <catch2/catch.hpp>

#include "engine/train/trainer.h"

using namespace sdp;

namespace {

TrainConfig tiny_meta(const std::string& dtype) {
  TrainConfig c;
  c.model = "tiny";
  c.batch = 2;
  c.seq = 16;
  c.steps = 1;
  c.eval_every = 0;
  c.progress = false;
  c.device = "meta";
  c.dtype = dtype;
  return c;
}

size_t at_peak(const StepResult& r, MemCategory category) { return r.memory.at_peak[category]; }

}  // namespace

TEST_CASE("bf16 keeps f32 master values, gradients and moments beside bf16 parameters",
          "[trainer][mixed]") {
  Trainer bf(tiny_meta("bf16"), std::make_unique<MetaAllocator>(512, Device::cuda));
  Trainer f32(tiny_meta("f32"), std::make_unique<MetaAllocator>(512, Device::cuda));
  const StepResult rb = bf.train_step(), rf = f32.train_step();
  const ParameterSet& p = bf.model().params();
  const TrainingState& state = bf.training_state();
  CHECK(p.dtype() == DType::bf16);
  CHECK(p.state_dtype() == DType::f32);
  // Per group: bf16 parameters are half the f32 ones (up to 512-byte rounding).
  size_t half = 0, full = 0;
  for (int g = 0; g < p.group_count(); ++g) {
    const auto n = static_cast<size_t>(p.group_decl(g).numel);
    half += (n * 2 + 511) / 512 * 512;
    full += (n * 4 + 511) / 512 * 512;
    CHECK(state.has_master(g));
    CHECK(state.group_master(g).dtype() == DType::f32);
    CHECK(p.group_grads(g).dtype() == DType::f32);
    CHECK(state.group_adam_m(g).dtype() == DType::f32);
  }
  CHECK(at_peak(rb, MemCategory::param) == half);
  CHECK(at_peak(rb, MemCategory::master) == full);
  CHECK(at_peak(rb, MemCategory::grad) == full);
  CHECK(at_peak(rb, MemCategory::optim) == 2 * full);
  CHECK(at_peak(rf, MemCategory::param) == full);
  CHECK(at_peak(rf, MemCategory::master) == 0);  // f32 runs update the parameters themselves
  // Activations are bf16, their statistics f32: well under the f32 run's.
  CHECK(at_peak(rb, MemCategory::activation) < at_peak(rf, MemCategory::activation));
  CHECK(at_peak(rb, MemCategory::activation) * 10 > at_peak(rf, MemCategory::activation) * 5);
}

TEST_CASE("backward masking keeps no master copy of the groups a rank does not train",
          "[trainer][mixed]") {
  TrainConfig c = tiny_meta("bf16");
  c.parallel.strategy = "bb-sdp";
  c.parallel.active_fraction = 0.5;
  c.emulate_world = 2;
  c.emulate_rank = 1;
  Trainer t(c, std::make_unique<MetaAllocator>(512, Device::cuda));
  const ParameterSet& p = t.model().params();
  int untrained = 0;
  for (int g = 0; g < p.group_count(); ++g) {
    CHECK(p.group_decl(g).materialized);
    CHECK(t.training_state().has_master(g) == p.group_decl(g).trained);
    untrained += !p.group_decl(g).trained;
  }
  CHECK(untrained > 0);
}

TEST_CASE("dtype and device combinations are checked", "[trainer][mixed]") {
  TrainConfig c = tiny_meta("bf16");
  c.device = "cpu";
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("dtype = 'bf16' needs device cuda"));
  c.device = "cuda";
  c.dtype = "f64";
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("'f64' is CPU-only"));
  c.dtype = "f16";
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("valid: f32, f64, bf16"));
}

TEST_CASE("gradients averaged in bf16 send half the bytes, through a bf16 copy in comm",
          "[trainer][mixed]") {
  for (double bucket_mb : {0.0, 0.01}) {  // after backward, and in buckets during it
    CAPTURE(bucket_mb);
    auto sent_and_comm = [&](const std::string& wire) {
      TrainConfig c = tiny_meta("bf16");
      c.emulate_world = 4;
      c.emulate_rank = 1;
      c.bucket_mb = bucket_mb;
      c.grad_reduce_dtype = wire;
      Trainer t(c, std::make_unique<MetaAllocator>(512, Device::cuda));
      const StepResult r = t.train_step();
      const comm::Traffic& all_reduce = r.comm.by_op(comm::Op::all_reduce);
      return std::pair{all_reduce.payload_bytes, r.memory.peak[MemCategory::comm]};
    };
    const auto [f32_bytes, f32_comm] = sent_and_comm("f32");
    const auto [bf16_bytes, bf16_comm] = sent_and_comm("bf16");
    // The gradients' payload halves; the 16-byte control reduction (loss and
    // norm share, f64) stays.
    CHECK(bf16_bytes - 16 == (f32_bytes - 16) / 2);
    CHECK(f32_comm == 0);
    CHECK(bf16_comm > 0);
  }
  TrainConfig c = tiny_meta("bf16");
  c.device = "cpu";
  c.dtype = "f32";
  c.grad_reduce_dtype = "bf16";
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("grad_reduce_dtype = 'bf16' needs device cuda"));
  c.grad_reduce_dtype = "f16";
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("valid: f32, bf16"));
}
