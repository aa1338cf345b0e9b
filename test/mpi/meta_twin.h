#pragma once
// The meta dry run of a distributed job: this rank's real trainer and a
// meta trainer emulating the same rank of the same world must account the
// same memory and the same traffic, step by step.
#include <catch2/catch.hpp>
#include <memory>

#include "engine/train/trainer.h"
#include "test/mpi/mpi_test_support.h"

namespace sdp::testing::mpi {

// Two steps of `c` on the world and on the meta device; CHECKs, so that a
// caller's loop over settings reports every mismatch.
inline void check_meta_matches_real(const TrainConfig& c) {
  Trainer real(c, world());
  TrainConfig m = c;
  m.device = "meta";
  m.emulate_world = size();
  m.emulate_rank = rank();
  Trainer meta(m, std::make_unique<MetaAllocator>(64));  // the CPU allocator's blocks
  for (int s = 0; s < 2; ++s) {
    const StepResult a = real.train_step(), b = meta.train_step();
    CHECK(a.memory == b.memory);
    CHECK(a.comm["by_op"] == b.comm["by_op"]);
  }
  CHECK(real.allocator().stats().alloc_count() == meta.allocator().stats().alloc_count());
}

}  // namespace sdp::testing::mpi
