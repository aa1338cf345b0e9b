// The invariants every model family must keep, as one matrix: each
// invariant is written once below and run for each family's smallest
// configuration. The multi-rank invariants are in
// test/mpi/test_family_invariants.cpp.
//
//   invariant (single process)         LLaMA tiny   ResNet resnet-tiny   Swin swin-micro
//   meta bytes = CPU bytes             yes          yes                  yes
//
// "meta bytes = CPU bytes": a dry run on the meta device reports exactly
// the CPU allocator's memory (every category, current and at the peak) and
// the same number of allocations, step by step, for DDP and for an emulated
// N-SDP and B-SDP rank (1 of 4), with and without block recomputation; the
// step counts the examples of every rank in the family's unit.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "engine/train/trainer.h"
#include "test/train_config_util.h"

using namespace sdp;

namespace {

// A model family's row of the matrix: its smallest trained configuration.
struct Family {
  TrainConfig config;
  const char* unit;             // what StepResult::examples counts
  bool needs_workspace = false;  // convolutions stage im2col columns in the workspace
};

Family llama_tiny() {
  return {testing::tiny_train_config(4, 32, 6, 2), "tokens"};
}

Family resnet_tiny() { return {testing::tiny_resnet_run(), "images", true}; }

Family swin_micro() { return {testing::micro_swin_run(), "images"}; }

void meta_bytes_equal_cpu_bytes(const Family& family) {
  for (const char* strategy : {"ddp", "n-sdp", "b-sdp"})
    for (const char* recompute : {"none", "block"}) {
      CAPTURE(strategy, recompute);
      TrainConfig c = family.config;
      c.grad_accum = 2;
      c.parallel.activation_checkpointing = recompute;
      if (std::string(strategy) != "ddp") {
        c.parallel.strategy = strategy;
        c.parallel.active_fraction = 0.5;
        c.emulate_world = 4;
        c.emulate_rank = 1;
      }
      Trainer cpu(c, std::make_unique<CpuAllocator>());
      TrainConfig m = c;
      m.device = "meta";
      Trainer meta(m, std::make_unique<MetaAllocator>(64));  // the CPU allocator's blocks
      const bool tokens = std::string(family.unit) == "tokens";
      const int64_t examples = c.batch * (tokens ? c.seq : 1) * c.grad_accum *
                               (c.emulate_world > 0 ? c.emulate_world : 1);
      for (int i = 0; i < 2; ++i) {
        const StepResult a = cpu.train_step();
        const StepResult b = meta.train_step();
        REQUIRE(a.memory == b.memory);
        REQUIRE(a.memory.at_peak[MemCategory::activation] > 0);
        if (family.needs_workspace)
          REQUIRE(a.memory.at_peak[MemCategory::workspace] > 0);
        REQUIRE(a.unit == std::string(family.unit));
        REQUIRE(a.examples == examples);
      }
      REQUIRE(cpu.allocator().stats().alloc_count() == meta.allocator().stats().alloc_count());
    }
}

}  // namespace

// One ctest entry per cell, so that ctest runs the families side by side.
#define SDP_FAMILY_CELL(invariant, title, family, family_name)              \
  TEST_CASE("family matrix: " title " (" family_name ")", "[matrix][meta]") { \
    invariant(family());                                                     \
  }

SDP_FAMILY_CELL(meta_bytes_equal_cpu_bytes, "meta bytes = CPU bytes", llama_tiny, "LLaMA tiny")
SDP_FAMILY_CELL(meta_bytes_equal_cpu_bytes, "meta bytes = CPU bytes", resnet_tiny,
                "ResNet resnet-tiny")
SDP_FAMILY_CELL(meta_bytes_equal_cpu_bytes, "meta bytes = CPU bytes", swin_micro,
                "Swin swin-micro")
