// The CUDA allocator's figures: a meta dry run mirroring CUDA (512-byte
// blocks) predicts the allocated bytes of a real CUDA step byte for byte, in
// total and per category; the reserved bytes cover the allocated ones; and
// once the first step has filled the caching pool, later steps are served
// from it with no new cudaMalloc.
#include <catch2/catch.hpp>

#include <cstdio>
#include <memory>
#include <string>

#include "engine/train/trainer.h"
#include "kernels/cuda/device_allocator.h"
#include "test/cuda/cuda_test_support.h"

using namespace sdp;

TEST_CASE("a meta dry run predicts a CUDA step's bytes exactly; the pool serves later steps",
          "[memory]") {
  for (const char* model : {"tiny", "small", "resnet-mini"})
    for (const char* dtype : {"f32", "bf16"}) {
      CAPTURE(model, dtype);
      TrainConfig c;
      c.model = model;
      // A ResNet reads images: 16 x 16 keeps the step small; its convolutions
      // take their (capped) cuDNN workspaces from the allocator.
      if (std::string(model) == "resnet-mini") c.data = "synthetic-images:height=16,width=16";
      c.dtype = dtype;
      c.device = "cuda";
      c.batch = 4;
      c.seq = 64;
      c.steps = 3;
      c.eval_every = 0;
      c.progress = false;
      TrainConfig m = c;
      m.device = "meta";

      auto owned_allocator = std::make_unique<cuda::DeviceAllocator>();
      cuda::DeviceAllocator& device_allocator = *owned_allocator;
      Trainer gpu(c, std::move(owned_allocator));
      Trainer meta(m, std::make_unique<MetaAllocator>(512, Device::cuda));

      gpu.train_step();
      meta.train_step();
      const size_t maps_after_step1 = device_allocator.pool().map_calls();
      const StepResult g = gpu.train_step();  // step 2: the pool is warm
      const StepResult p = meta.train_step();
      const size_t maps_after_step2 = device_allocator.pool().map_calls();

      const MemorySnapshot& got = g.memory;
      const MemorySnapshot& want = p.memory;
      // The metrics record of each: the groups every step writes.
      const nlohmann::json got_json = got.to_json(), want_json = want.to_json();
      INFO("cuda memory: " << got_json.dump() << "\nmeta memory: " << want_json.dump());
      for (const char* group : {"current", "peak", "phase_peak"}) {
        CAPTURE(group);
        REQUIRE(got_json.contains(group));
        REQUIRE(want_json.contains(group));
      }
      std::printf("  %s %s step 2: allocated peak cuda %zu, meta %zu; reserved %s; "
                  "cudaMalloc segments after step 1: %zu, after step 2: %zu\n",
                  model, dtype, got.peak_total, want.peak_total,
                  got_json.contains("reserved") ? got_json.at("reserved").dump().c_str() : "missing",
                  maps_after_step1, maps_after_step2);
      CHECK(got.peak_total == want.peak_total);
      CHECK(got.at_peak == want.at_peak);
      CHECK(got.peak == want.peak);
      CHECK(got.current == want.current);
      CHECK(got.current_total == want.current_total);
      CHECK(got.phase_peak == want.phase_peak);
      CHECK(gpu.allocator().stats().alloc_count() == meta.allocator().stats().alloc_count());

      // reserved: what cudaMalloc holds, cached blocks included; the pool
      // only grows within a step, so it covers the step's allocated peak
      REQUIRE(got.reserved);
      CHECK(got.reserved->peak >= got.peak_total);
      CHECK(got.reserved->current >= got.current_total);
      CHECK(device_allocator.pool().in_use_bytes() == gpu.allocator().stats().current_total());
      CHECK(device_allocator.pool().reserved_bytes() >= device_allocator.pool().in_use_bytes());

      gpu.train_step();  // step 3: the same requests as step 2
      CHECK(device_allocator.pool().map_calls() == maps_after_step2);
    }
}
