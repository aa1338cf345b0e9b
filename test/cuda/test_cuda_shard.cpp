// Sharding on the GPU. One process holds one GPU, and NCCL refuses two ranks
// of one communicator on the same device, so the k ranks of an owner set
// stand here as k parameter sets in device memory (for the storage and the
// optimizer) or as emulated ranks (for a whole training step):
//   - each rank's shard views of device buffers tile the whole group, AdamW
//     on a device shard gives bit for bit the whole update's chunk (f32, and
//     bf16 with f32 master shards), and whole parameters assembled from the
//     ranks' bf16 shards equal the unsharded ones bit for bit;
//   - an emulated rank of a ZeRO-1/2/3 job (FSDP with recomputation, B-SDP
//     with FSDP and recomputation) computes the same step on CUDA as on the
//     CPU: every device op of the sharding layer against its CPU twin;
//   - the meta device predicts that rank's CUDA bytes exactly, category
//     gathered included.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "engine/optim/adamw.h"
#include "engine/optim/training_state.h"
#include "engine/train/trainer.h"
#include "kernels/ops.h"
#include "models/common/parameter_set.h"
#include "test/cuda/cuda_test_support.h"

using namespace sdp;
using namespace sdp::cuda_testing;

namespace {

// One group of 37 * 29 + 29 + 3 * 41 = 1225 elements (a decayed matrix, an
// undecayed gain, rows of a second matrix) and a second, unsharded group.
// Cut into 3 shards of 409 (padding 2), the shard boundaries fall inside
// parameters and at offsets that are not multiples of 4 elements, so the
// device views are not 16-byte aligned.
constexpr int64_t kGroupNumel = 37 * 29 + 29 + 3 * 41;
constexpr int kParts = 3;

void declare(ParameterSet& p) {
  const int g = p.add_group("block");
  p.add_group("other");
  p.declare("w", {37, 29}, g, InitKind::normal, 0.5);
  p.declare("gain", {29}, g, InitKind::ones);
  p.declare_piece("m", {7, 41}, 0, 2, 3, "rows", g, InitKind::normal, 0.3);
  p.declare("solo", {11}, 1, InitKind::normal, 0.1);
}

std::vector<GroupShard> plan(ShardLevel level, int index) {
  return {GroupShard{level, kParts, index}, GroupShard{}};
}

// A gradient value for element i of the group at `step`, the same in every layout.
double grad_at(int64_t i, int step) {
  return 0.01 * static_cast<double>((i * 7919 + step * 31) % 23) - 0.1;
}

// Writes values (rounded to f32) into an f32 device tensor.
void upload_f32(const std::vector<double>& values, Tensor dev) {
  REQUIRE(dev.dtype() == DType::f32);
  REQUIRE(static_cast<int64_t>(values.size()) == dev.numel());
  CpuAllocator cpu;
  OwnedTensor staging(cpu, dev.shape(), DType::f32, MemCategory::workspace);
  for (size_t i = 0; i < values.size(); ++i)
    staging->data<float>()[i] = static_cast<float>(values[i]);
  ops::transfer(*staging, dev);
}

std::vector<double> chunk(const std::vector<double>& whole, int64_t begin, int64_t length) {
  std::vector<double> out(static_cast<size_t>(length), 0.0);  // padding reads as zero
  for (int64_t e = 0; e < length; ++e)
    if (begin + e < static_cast<int64_t>(whole.size()))
      out[static_cast<size_t>(e)] = whole[static_cast<size_t>(begin + e)];
  return out;
}

// One rank of the owner set: its parameter set, optimizer and emulated
// group communicator (whose collectives move this rank's chunks on the
// device as the sharding layer calls them).
struct Rank {
  ParameterSet params;
  std::unique_ptr<TrainingState> state;  // of params
  std::unique_ptr<AdamW> adamw;
  std::unique_ptr<comm::Communicator> comm;
};

}  // namespace

TEST_CASE("device shards: AdamW on each rank's shard equals the whole update's chunk, bit for "
          "bit; gathered bf16 shards equal the whole parameters",
          "[shard]") {
  const AdamWSettings settings{0.9, 0.95, 1e-8, 0.1};
  for (DType dtype : kGpuDtypes)
    for (ShardLevel level : {ShardLevel::optimizer, ShardLevel::grad, ShardLevel::full}) {
      CAPTURE(name_of(dtype), shard_level_name(level));
      cuda::DeviceAllocator gpu;
      ParameterSet whole;
      declare(whole);
      const auto whole_state = TrainingState::materialize(whole, gpu, dtype);
      whole_state->init_values(7);
      whole_state->allocate_grads();
      AdamW reference(*whole_state, settings);

      std::vector<std::unique_ptr<Rank>> ranks;
      for (int i = 0; i < kParts; ++i) {
        auto r = std::make_unique<Rank>();
        declare(r->params);
        r->state = TrainingState::materialize(r->params, gpu, dtype, {}, {}, plan(level, i));
        r->state->init_values(7);
        r->state->allocate_grads();
        r->adamw = std::make_unique<AdamW>(*r->state, settings);
        r->comm = comm::make_world("emulated", {}, kParts, i);
        REQUIRE(r->state->shard_numel(0) == 409);
        REQUIRE(r->state->group_shard(0).sharded());
        ranks.push_back(std::move(r));
      }

      // The initial shards are the whole group's chunks (padding zero).
      const std::vector<double> initial = values_of(whole_state->group_values(0));
      for (int i = 0; i < kParts; ++i) {
        const TrainingState& p = *ranks[static_cast<size_t>(i)]->state;
        CAPTURE(i);
        CHECK(values_of(p.shard_values(0)) == chunk(initial, p.shard_begin(0), 409));
      }

      for (int step = 1; step <= 2; ++step) {
        std::vector<double> g(static_cast<size_t>(kGroupNumel));
        for (int64_t e = 0; e < kGroupNumel; ++e) g[static_cast<size_t>(e)] = grad_at(e, step);
        upload_f32(g, whole.group_grads(0));
        reference.update(step, 1e-2);
        const std::vector<double> padded = chunk(g, 0, kParts * 409);  // [P]
        for (auto& r : ranks) {
          TrainingState& p = *r->state;
          // The gradients as backward leaves them (whole, padded), then the
          // sharding layer's reduce-scatter into this rank's shard.
          if (level == ShardLevel::optimizer) {
            upload_f32(padded, r->params.group_grads_padded(0));
            Tensor mine = p.shard_grads(0);  // in place: this rank's chunk of the whole
            r->comm->reduce_scatter(r->params.group_grads_padded(0), mine,
                                    comm::ReduceOp::average);
          } else {
            r->params.allocate_full_grads(0);
            Tensor full = r->params.group_grads_padded(0);
            upload_f32(padded, full);
            Tensor mine = full.narrow(0, p.shard_begin(0), p.shard_numel(0));
            r->comm->reduce_scatter(full, mine, comm::ReduceOp::average);
            Tensor shard = p.shard_grads(0);
            ops::fill(shard, 0.0);  // this step's gradients only, as after zero_grads()
            ops::add(shard, mine, shard);
            r->params.release_full_grads(0);
          }
          r->adamw->update(step, 1e-2);
        }
      }

      const std::vector<double> want = values_of(whole_state->group_values(0));
      const std::vector<double> want_low = values_of(whole.group_params(0));
      for (int i = 0; i < kParts; ++i) {
        const TrainingState& p = *ranks[static_cast<size_t>(i)]->state;
        CAPTURE(i);
        // Master (bf16) or the parameters themselves (f32): bit for bit.
        CHECK(values_of(p.shard_values(0)) == chunk(want, p.shard_begin(0), 409));
        // The copy the forward reads: this rank's chunk (optimizer, grad)
        // or its stored shard (full).
        CHECK(values_of(p.shard_params(0)) == chunk(want_low, p.shard_begin(0), 409));
      }

      // Whole parameters again on rank 0: the updated chunks of every rank
      // (what the owners' all-gather assembles), in the parameter dtype.
      ParameterSet& p0 = ranks[0]->params;
      if (level == ShardLevel::full) p0.allocate_full_params(0);
      Tensor assembled = p0.group_params_padded(0);  // [P]
      CHECK(assembled.dtype() == dtype);
      for (int i = 0; i < kParts; ++i) {
        const TrainingState& p = *ranks[static_cast<size_t>(i)]->state;
        Tensor dst = assembled.narrow(0, p.shard_begin(0), p.shard_numel(0));
        ops::copy(p.shard_params(0), dst);
      }
      for (int id = 0; id < 3; ++id) {
        CAPTURE(whole.decl(id).name);
        CHECK(values_of(p0.param(id)) == values_of(whole.param(id)));
      }
      // The rank's own chunk also arrives through its communicator's all-gather.
      ranks[0]->comm->all_gather(ranks[0]->state->shard_params(0), assembled);
      CHECK(values_of(assembled.narrow(0, 0, 409)) == chunk(want_low, 0, 409));
      if (level == ShardLevel::full) {
        CHECK(gpu.stats().current(MemCategory::gathered) > 0);
        p0.release_full_params(0);
        CHECK(gpu.stats().current(MemCategory::gathered) == 0);
      }
      // The unsharded group trained whole on every rank, like the reference.
      CHECK(values_of(ranks[0]->state->group_values(1)) == values_of(whole_state->group_values(1)));
    }
}

namespace {

// As test_cuda_step.cpp: the same tiny LLaMA run on either device, with
// eps 1e-5 so that near-zero gradients rounded to opposite signs stay small.
TrainConfig tiny_sharded(const std::string& device, const std::string& strategy, double C,
                         const std::string& shard, const std::string& ac, int world, int rank) {
  TrainConfig c;
  c.model = "tiny";
  c.batch = 4;
  c.seq = 64;
  c.steps = 3;
  c.warmup = 2;
  c.eval_every = 0;
  c.progress = false;
  c.device = device;
  c.dtype = "f32";
  c.eps = 1e-5;
  c.parallel.strategy = strategy;
  c.parallel.active_fraction = C;
  c.parallel.shard = shard;
  c.parallel.activation_checkpointing = ac;
  c.emulate_world = world;
  c.emulate_rank = rank;
  return c;
}

constexpr double kStepTolerance = 1e-4;  // f32 on two devices, three steps (test_cuda_step.cpp)

struct Composition {
  const char* label;
  const char* strategy;
  double C;
  const char* shard;  // "" = the strategy's own level
  const char* ac;
  int world, rank;
};

constexpr Composition kCompositions[] = {
    {"DDP+ZeRO-1", "ddp", 1.0, "optimizer", "none", 2, 1},
    {"DDP+ZeRO-2", "ddp", 1.0, "grad", "none", 2, 1},
    {"FSDP+AC", "fsdp", 1.0, "", "block", 2, 1},
    {"B-SDP+FSDP+AC", "b-sdp", 0.5, "full", "block", 4, 1},
};

}  // namespace

TEST_CASE("an emulated sharded rank's steps on CUDA match the CPU (ZeRO-1/2, FSDP+AC, "
          "B-SDP+FSDP+AC)",
          "[shard]") {
  for (const Composition& k : kCompositions) {
    CAPTURE(k.label);
    Trainer cpu(tiny_sharded("cpu", k.strategy, k.C, k.shard, k.ac, k.world, k.rank));
    Trainer gpu(tiny_sharded("cuda", k.strategy, k.C, k.shard, k.ac, k.world, k.rank));
    REQUIRE(gpu.training_state().any_sharded());
    for (int i = 0; i < 3; ++i) {
      const StepResult want = cpu.train_step(), got = gpu.train_step();
      CHECK(std::isfinite(want.rank_loss));
      std::printf("  %s step %lld: rank loss cpu %.8f, cuda %.8f\n", k.label,
                  static_cast<long long>(want.step), want.rank_loss, got.rank_loss);
      expect_close(std::string(k.label) + " rank loss at step " + std::to_string(want.step),
                   {got.rank_loss}, {want.rank_loss}, kStepTolerance);
    }
    // What each rank stores: its shard of every sharded group (master or
    // parameters), every unsharded group whole.
    const TrainingState& want = cpu.training_state();
    const TrainingState& got = gpu.training_state();
    for (int g = 0; g < want.params().group_count(); ++g) {
      if (!want.params().group_decl(g).materialized) continue;
      REQUIRE(got.params().group_decl(g).materialized);
      expect_close(std::string(k.label) + " group " + want.params().group_decl(g).name +
                       " after 3 steps",
                   values_of(got.shard_values(g)), values_of(want.shard_values(g)),
                   kStepTolerance);
    }
  }
}

TEST_CASE("the meta device predicts an emulated sharded rank's CUDA bytes exactly, recomputation "
          "and category gathered included",
          "[shard]") {
  for (const Composition& k : kCompositions)
    for (const char* dtype : {"f32", "bf16"}) {
      CAPTURE(k.label, dtype);
      TrainConfig c = tiny_sharded("cuda", k.strategy, k.C, k.shard, k.ac, k.world, k.rank);
      c.dtype = dtype;
      TrainConfig m = c;
      m.device = "meta";
      Trainer gpu(c, std::make_unique<cuda::DeviceAllocator>());
      Trainer meta(m, std::make_unique<MetaAllocator>(512, Device::cuda));
      for (int s = 0; s < 2; ++s) {
        const StepResult g = gpu.train_step(), p = meta.train_step();
        INFO("cuda memory: " << g.memory.to_json().dump()
                             << "\nmeta memory: " << p.memory.to_json().dump());
        CHECK(g.memory.peak_total == p.memory.peak_total);
        CHECK(g.memory.peak == p.memory.peak);
        CHECK(g.memory.current == p.memory.current);
        CHECK(g.memory.current_total == p.memory.current_total);
        CHECK(g.memory.phase_peak == p.memory.phase_peak);
        CHECK(g.comm.by_op() == p.comm.by_op());
      }
      CHECK(gpu.allocator().stats().alloc_count() == meta.allocator().stats().alloc_count());
      if (std::string(k.shard) != "optimizer" && std::string(k.shard) != "grad")
        CHECK(gpu.allocator().stats().peak(MemCategory::gathered) > 0);
    }
}
