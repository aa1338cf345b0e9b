// Sharding and recomputation in one process: a shard level on one rank is
// a no-op (the same losses, to rounding), and recomputation keeps the
// losses while holding fewer activations.
#include <catch2/catch.hpp>

#include "engine/train/trainer.h"
#include "test/train_config_util.h"

using namespace sdp;

TEST_CASE("a shard level on one rank is allowed and changes nothing", "[trainer][shard]") {
  TrainConfig c = testing::tiny_train_config(2, 16, 3);
  c.grad_accum = 2;
  Trainer plain(c);
  std::vector<std::unique_ptr<Trainer>> levels;
  for (const char* level : {"optimizer", "grad", "full"}) {
    TrainConfig s = c;
    s.parallel.shard = level;
    levels.push_back(std::make_unique<Trainer>(s));
  }
  for (int step = 0; step < 3; ++step) {
    const StepResult want = plain.train_step();
    for (auto& t : levels) {
      const StepResult got = t->train_step();
      // One group per block instead of one for all: the norm's sum runs in
      // another order, so the last bits may differ.
      CHECK(got.loss == Approx(want.loss).epsilon(1e-12));
      CHECK(got.grad_norm == Approx(want.grad_norm).epsilon(1e-12));
      CHECK(got.comm.by_op(comm::Op::all_gather).sent_bytes == 0);
    }
  }
}

TEST_CASE("activation checkpointing in one process: the same losses, fewer activation bytes",
          "[trainer][recompute]") {
  TrainConfig c = testing::tiny_train_config(4, 32, 2);
  c.device = "meta";
  Trainer plain(c, std::make_unique<MetaAllocator>(64));
  c.parallel.activation_checkpointing = "block";
  Trainer recomputed(c, std::make_unique<MetaAllocator>(64));
  const StepResult a = plain.train_step(), b = recomputed.train_step();
  CHECK(b.memory.at_peak[MemCategory::activation] < a.memory.at_peak[MemCategory::activation]);
  CHECK(b.flops > a.flops);  // the recomputed forwards are counted
  TrainConfig cpu = testing::tiny_train_config(4, 32, 2);
  Trainer x(cpu);
  cpu.parallel.activation_checkpointing = "every:2";
  Trainer y(cpu);
  for (int s = 0; s < 2; ++s) CHECK(x.train_step().loss == y.train_step().loss);
}
