// Sharding (ZeRO-1/2/3, FSDP) on a real MPI job, in f64: every shard level
// equals the unsharded run step by step (losses, gradient norms and every
// parameter), for DDP and for SDP strategies, with gradient accumulation and
// clipping; recomputation composes; each rank holds exactly its shards; the
// counters equal the analytic volume of each level; checkpoints of sharded
// runs are whole and load into any shard level, world size and plan. (The
// meta device's prediction of a sharded rank: test_family_invariants.cpp.)
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <map>

#include <unistd.h>

#include "engine/train/trainer.h"
#include "kernels/ops.h"
#include "test/mpi/mpi_test_support.h"
#include "test/mpi/whole_values.h"

using namespace sdp;
using namespace sdp::testing::mpi;
namespace fs = std::filesystem;

namespace {

const char* const kLevels[] = {"optimizer", "grad", "full"};

TrainConfig sharded_config(const std::string& strategy, double C, const std::string& shard) {
  TrainConfig c;
  c.model = "mini";
  c.batch = 2;
  c.seq = 16;
  c.grad_accum = 2;
  c.steps = 4;
  c.warmup = 1;
  c.lr = 1e-2;
  c.grad_clip = 0.05;  // small enough to clip every step: the norm must be right
  c.eval_every = 0;
  c.eval_batches = 2;
  c.progress = false;
  c.dtype = "f64";
  c.comm_timeout = 60;
  c.parallel.strategy = strategy;
  c.parallel.active_fraction = C;
  c.parallel.shard = shard;
  return c;
}

// Steps both trainers in lock step, comparing losses and norms, then every
// parameter.
void expect_same_training(Trainer& a, Trainer& b, int steps) {
  for (int s = 0; s < steps; ++s) {
    const StepResult ra = a.train_step(), rb = b.train_step();
    CAPTURE(s);
    CHECK(ra.loss == Approx(rb.loss).epsilon(1e-12));
    CHECK(ra.rank_loss == Approx(rb.rank_loss).epsilon(1e-12));
    CHECK(ra.grad_norm == Approx(rb.grad_norm).epsilon(1e-10));
  }
  CHECK(max_difference(whole_values(a), whole_values(b)) < 1e-12);
}

}  // namespace

TEST_CASE("every shard level equals DDP step by step", "[mpi][shard]") {
  Trainer ddp(sharded_config("ddp", 1.0, "none"), world());
  std::vector<std::unique_ptr<Trainer>> sharded;
  for (const char* level : kLevels) sharded.push_back(
      std::make_unique<Trainer>(sharded_config("ddp", 1.0, level), world()));
  TrainConfig kept = sharded_config("ddp", 1.0, "full");
  kept.parallel.reshard_after_forward = false;
  sharded.push_back(std::make_unique<Trainer>(kept, world()));
  sharded.push_back(std::make_unique<Trainer>(sharded_config("fsdp", 1.0, ""), world()));  // = full
  for (int s = 0; s < 3; ++s) {
    const StepResult want = ddp.train_step();
    for (size_t i = 0; i < sharded.size(); ++i) {
      CAPTURE(s, i);
      const StepResult got = sharded[i]->train_step();
      CHECK(got.loss == Approx(want.loss).epsilon(1e-12));
      CHECK(got.grad_norm == Approx(want.grad_norm).epsilon(1e-10));
    }
  }
  const auto want = whole_values(ddp);
  for (const auto& t : sharded) CHECK(max_difference(whole_values(*t), want) < 1e-12);
  // ZeRO-1/2 keep whole parameters: after each update's all-gather every
  // owner holds the same bytes.
  for (size_t i = 0; i < 2; ++i) CHECK(same_parameters_everywhere(sharded[i]->model().params()));
}

TEST_CASE("each SDP strategy with sharding equals the same strategy without it",
          "[mpi][shard]") {
  SDP_MPI_NEEDS_RANKS(2);
  for (const char* strategy : {"b-sdp", "n-sdp"})
    for (const char* level : kLevels) {
      CAPTURE(strategy, level);
      Trainer plain(sharded_config(strategy, 0.5, "none"), world());
      Trainer sharded(sharded_config(strategy, 0.5, level), world());
      expect_same_training(sharded, plain, 3);
    }
}

TEST_CASE("recomputation composes with sharding and SDP", "[mpi][shard][recompute]") {
  for (const char* strategy : {"ddp", "b-sdp"}) {
    CAPTURE(strategy);
    const double C = std::string(strategy) == "ddp" ? 1.0 : 0.5;
    Trainer plain(sharded_config(strategy, C, "none"), world());
    TrainConfig c = sharded_config(strategy, C, "full");
    c.parallel.activation_checkpointing = "block";
    Trainer composed(c, world());
    expect_same_training(composed, plain, 3);
  }
}

TEST_CASE("a sharded rank holds its shards and gathers one block at a time", "[mpi][shard]") {
  for (const char* level : kLevels) {
    CAPTURE(level);
    TrainConfig c = sharded_config("ddp", 1.0, level);
    c.dtype = "f32";
    Trainer t(c, world());
    const TrainingState& p = t.training_state();
    const Allocator& a = t.allocator();
    size_t params = 0, grads = 0, moments = 0, largest_group = 0;
    for (int g = 0; g < p.params().group_count(); ++g) {
      const bool sharded = p.group_shard(g).sharded();
      const int64_t whole = sharded ? p.padded_numel(g) : p.params().group_decl(g).numel;
      const int64_t shard = p.shard_numel(g);
      const bool full = std::string(level) == "full", grad = std::string(level) != "optimizer";
      params += held_bytes(a, full ? shard : whole, DType::f32);
      grads += held_bytes(a, grad ? shard : whole, DType::f32);
      moments += 2 * held_bytes(a, shard, DType::f32);
      largest_group = std::max(largest_group, held_bytes(a, whole, DType::f32));
    }
    CHECK(a.stats().current(MemCategory::param) == params);
    CHECK(a.stats().current(MemCategory::grad) == grads);
    CHECK(a.stats().current(MemCategory::optim) == moments);
    const StepResult r = t.train_step();
    CHECK(a.stats().current(MemCategory::gathered) == 0);  // nothing stays gathered
    const double gathered = static_cast<double>(r.memory.peak[MemCategory::gathered]);
    if (std::string(level) == "full" && size() > 1) {
      // The shared group, the block at work and the next one prefetched.
      CHECK(gathered > 0);
      CHECK(gathered <= 3.0 * static_cast<double>(largest_group));
    } else {
      CHECK(gathered == 0);
    }
  }
}

TEST_CASE("sharded collectives equal the analytic volume of each level", "[mpi][shard]") {
  const int N = size();
  for (const char* level : kLevels)
    for (bool reshard : {true, false}) {
      if (!reshard && std::string(level) != "full") continue;
      CAPTURE(level, reshard);
      TrainConfig c = sharded_config("ddp", 1.0, level);
      c.dtype = "f32";
      c.parallel.reshard_after_forward = reshard;
      Trainer t(c, world());
      const StepResult r = t.train_step();
      const TrainingState& p = t.training_state();
      const int64_t M = c.grad_accum;
      double rs = 0, ag = 0;
      int64_t rs_calls = 0, ag_calls = 0;
      const int output_stage = t.model().site_count() - 1;
      for (int g = 0; g < p.params().group_count(); ++g) {
        if (!p.group_shard(g).sharded()) continue;
        const double bytes = static_cast<double>(p.padded_numel(g)) * 4;
        const double ring = (N - 1.0) / N * bytes;
        const std::string lv = level;
        const int64_t reductions = lv == "optimizer" ? 1 : M;
        rs += reductions * ring;
        rs_calls += reductions;
        if (lv != "full") {
          ag += ring;  // the updated parameters, once
          ++ag_calls;
          continue;
        }
        // Gathered for each forward, and again for backward unless kept
        // (kept: the group the output stage reads, or no resharding).
        bool read_by_output = false;
        for (int id : t.model().site_params(output_stage))
          read_by_output |= p.params().decl(id).group == g;
        const int64_t per_micro = (reshard && !read_by_output) ? 2 : 1;
        ag += static_cast<double>(M * per_micro) * ring;
        ag_calls += M * per_micro;
      }
      const comm::CommStats& sent = r.comm;
      CHECK(sent.by_op(comm::Op::reduce_scatter).sent_bytes == Approx(rs).epsilon(1e-12));
      CHECK(sent.by_op(comm::Op::reduce_scatter).calls == rs_calls);
      CHECK(sent.by_op(comm::Op::all_gather).sent_bytes == Approx(ag).epsilon(1e-12));
      CHECK(sent.by_op(comm::Op::all_gather).calls == ag_calls);
      // Only the control values are all-reduced: every group is sharded.
      CHECK(sent.by_op(comm::Op::all_reduce).calls == 1);
    }
}

TEST_CASE("checkpoints of a sharded job are whole and load into any shard level",
          "[mpi][shard][checkpoint]") {
  const std::string dir = same_path_everywhere("sdp_shard_ckpt");
  for (const char* level : {"grad", "full", "bb-sdp full"}) {
    CAPTURE(level);
    const bool masked = std::string(level) == "bb-sdp full";
    TrainConfig c = masked ? sharded_config("bb-sdp", 0.5, "full") : sharded_config("ddp", 1.0, level);
    Trainer job(c, world());
    job.train_step();
    job.train_step();
    const double before = job.evaluate();
    job.save_checkpoint(dir);
    // One process, unsharded.
    Trainer single(sharded_config("ddp", 1.0, "none"));
    single.load_checkpoint(dir);
    CHECK(single.evaluate() == Approx(before).epsilon(1e-12));
    // Another level and an SDP plan over the same world.
    Trainer other(sharded_config("b-sdp", 0.5, "optimizer"), world());
    other.load_checkpoint(dir);
    CHECK(other.evaluate() == Approx(before).epsilon(1e-12));
    // Resuming the job continues as if uninterrupted (f64: to rounding).
    const StepResult next = job.train_step();
    Trainer resumed(c, world());
    resumed.load_checkpoint(dir);
    CHECK(resumed.train_step().loss == Approx(next.loss).epsilon(1e-12));
    Trainer unsharded(sharded_config("ddp", 1.0, "none"), world());
    unsharded.load_checkpoint(dir);
    CHECK(unsharded.train_step().loss == Approx(next.loss).epsilon(1e-12));
    // And back: what an unsharded job writes loads into a sharded one.
    world().barrier();
    unsharded.save_checkpoint(dir);
    const StepResult after = unsharded.train_step();
    Trainer back(c, world());
    back.load_checkpoint(dir);
    CHECK(back.train_step().loss == Approx(after.loss).epsilon(1e-12));
    world().barrier();
    if (rank() == 0) fs::remove_all(dir);
  }
}

namespace {

TrainConfig resnet_config(const std::string& strategy, double C, const std::string& shard) {
  TrainConfig c = sharded_config(strategy, C, shard);
  c.model = "resnet-tiny";
  c.data = "synthetic-images:height=8,width=8,classes=5";
  c.batch = 4;
  c.recalibration_images = 16;
  return c;
}

}  // namespace

TEST_CASE("a ResNet with FSDP and recomputation matches its unsharded twin", "[mpi][shard][resnet]") {
  for (const char* strategy : {"ddp", "b-sdp", "n-sdp"}) {
    CAPTURE(strategy);
    const double C = std::string(strategy) == "ddp" ? 1.0 : 0.5;
    Trainer plain(resnet_config(strategy, C, "none"), world());
    TrainConfig c = resnet_config(strategy, C, "full");
    c.parallel.activation_checkpointing = "block";
    Trainer composed(c, world());
    expect_same_training(composed, plain, 3);
    // BatchNorm running statistics were updated once per forward, alike.
    const EvalResult a = composed.evaluate_all(), b = plain.evaluate_all();
    CHECK(a.full_loss == Approx(b.full_loss).epsilon(1e-12));
  }
}

TEST_CASE("backward masking composes with ZeRO-1 and ZeRO-2 over each component's owners",
          "[mpi][shard]") {
  SDP_MPI_NEEDS_RANKS(2);
  for (const char* strategy : {"bb-sdp", "nb-sdp"})
    for (const char* level : {"optimizer", "grad"}) {
      CAPTURE(strategy, level);
      Trainer plain(sharded_config(strategy, 0.5, "none"), world());
      Trainer sharded(sharded_config(strategy, 0.5, level), world());
      expect_same_training(sharded, plain, 3);
      // Every rank holds the same whole parameters after each update.
      CHECK(same_parameters_everywhere(sharded.model().params()));
    }
}

TEST_CASE("backward masking with full sharding cuts every group over the world",
          "[mpi][shard]") {
  SDP_MPI_NEEDS_RANKS(2);
  for (const char* strategy : {"bb-sdp", "nb-sdp"}) {
    CAPTURE(strategy);
    Trainer plain(sharded_config(strategy, 0.5, "none"), world());
    TrainConfig c = sharded_config(strategy, 0.5, "full");
    c.parallel.activation_checkpointing = "block";
    Trainer sharded(c, world());
    expect_same_training(sharded, plain, 3);
    // Every group is a world shard on every rank, owned or not: FSDP's
    // memory, with weight gradients only where owned.
    const TrainingState& p = sharded.training_state();
    for (int g = 0; g < p.params().group_count(); ++g) {
      CHECK(p.group_shard(g).parts == size());
      CHECK(p.keeps_training_state(g));
    }
    TrainConfig f = sharded_config("fsdp", 1.0, "");
    f.parallel.activation_checkpointing = "block";
    Trainer fsdp(f, world());
    const StepResult a = sharded.train_step(), b = fsdp.train_step();
    CHECK(a.flops < b.flops);
    // The same whole model is gathered and reduced: FSDP's traffic, up to
    // the padding of the finer groups.
    CHECK(a.comm.by_op(comm::Op::reduce_scatter).sent_bytes ==
          Approx(b.comm.by_op(comm::Op::reduce_scatter).sent_bytes).epsilon(0.01));
    const EvalResult ea = sharded.evaluate_all(), eb = plain.evaluate_all();
    (void)eb;
    CHECK(std::isfinite(ea.full_loss));
  }
}

TEST_CASE("a sharded job resumes in one process with the same global batch",
          "[mpi][shard][checkpoint]") {
  const std::string dir = same_path_everywhere("sdp_shard_resume");
  TrainConfig c = sharded_config("ddp", 1.0, "full");
  c.parallel.activation_checkpointing = "every:2";
  Trainer job(c, world());
  job.train_step();
  job.save_checkpoint(dir);
  const StepResult next = job.train_step();
  // The windows of every rank in one process: the same global batch.
  TrainConfig single = sharded_config("ddp", 1.0, "grad");
  single.batch = c.batch * size();
  Trainer one(single);
  one.load_checkpoint(dir);
  CHECK(one.train_step().loss == Approx(next.loss).epsilon(1e-12));
  world().barrier();
  if (rank() == 0) fs::remove_all(dir);
}

TEST_CASE("sharded jobs write the sharded checkpoint form, every rank its own shards",
          "[mpi][shard][checkpoint]") {
  const std::string dir = same_path_everywhere("sdp_shard_dcp");
  for (const char* strategy : {"fsdp", "bb-sdp"}) {
    CAPTURE(strategy);
    const bool masked = std::string(strategy) == "bb-sdp";
    TrainConfig c = masked ? sharded_config("bb-sdp", 0.5, "full") : sharded_config("fsdp", 1.0, "");
    c.checkpoint_format = "sharded";
    Trainer job(c, world());
    job.train_step();
    const double before = job.evaluate();
    job.save_checkpoint(dir);
    CHECK(fs::exists(fs::path(dir) / "sdp_shards.json"));
    const StepResult next = job.train_step();
    // Into one process, unsharded, and into another shard level.
    Trainer single(sharded_config("ddp", 1.0, "none"));
    single.load_checkpoint(dir);
    CHECK(single.evaluate() == Approx(before).epsilon(1e-12));
    Trainer zero2(sharded_config("ddp", 1.0, "grad"), world());
    zero2.load_checkpoint(dir);
    CHECK(zero2.train_step().loss == Approx(next.loss).epsilon(1e-12));
    Trainer resumed(c, world());
    resumed.load_checkpoint(dir);
    CHECK(resumed.train_step().loss == Approx(next.loss).epsilon(1e-12));
    world().barrier();
    if (rank() == 0) fs::remove_all(dir);
  }
}
