// Distributed training of a Swin Transformer (swin-micro, f64) with
// stochastic depth on (DDP as one process, C = 1 as DDP, allocations and
// traffic, the meta device's bytes: test_family_invariants.cpp): drop path changes the loss, so the
// matrix's comparisons exercise its keying; a pipelined Swin trains as one
// process with its micro-batches accumulated; every shard level (with
// recomputation) equals the unsharded run for DDP, B-SDP and N-SDP.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "engine/train/trainer.h"
#include "kernels/ops.h"
#include "test/mpi/mpi_test_support.h"
#include "test/mpi/whole_values.h"

using namespace sdp;
using namespace sdp::testing::mpi;

namespace {

TrainConfig swin_job(const std::string& strategy, double active_fraction = 1.0) {
  TrainConfig c = mini_job_config(strategy, active_fraction);
  c.model = "swin-micro";
  c.data = "synthetic-images:height=16,width=16";
  c.dtype = "f64";
  c.batch = 2;
  c.seq = 1;
  c.grad_accum = 2;
  c.drop_path = 0.5;  // half the last block's samples dropped: the keying must be right
  c.grad_clip = 0.05;
  return c;
}

// The largest difference between the parameters this rank holds in a
// sharded trainer (whole, or its shard's slice of each parameter) and the
// same parameters of an unsharded trainer of the same plan, in f64.
// (whole_values needs every rank to size each group alike, which a
// forward-masked rank that does not hold a sharded group cannot.)
double held_difference(Trainer& sharded, Trainer& plain) {
  const TrainingState& state = sharded.training_state();
  const ParameterSet& ps = state.params();
  const ParameterSet& pp = plain.model().params();
  double worst = 0;
  for (int id = 0; id < ps.count(); ++id) {
    const ParamDecl& d = ps.decl(id);
    if (!ps.is_materialized(id) || d.buffer) continue;
    const Tensor want = pp.param(*pp.find(d.name));
    if (!state.group_shard(d.group).sharded()) {
      const Tensor got = ps.param(id);
      for (int64_t e = 0; e < got.numel(); ++e)
        worst = std::max(worst, std::abs(ops::item(got, e) - ops::item(want, e)));
      continue;
    }
    const TrainingState::ShardSlice sl = state.shard_slice(id);
    const Tensor shard = state.shard_values(d.group);
    for (int64_t k = 0; k < sl.length; ++k)
      worst = std::max(worst, std::abs(ops::item(shard, sl.shard_begin + k) -
                                       ops::item(want, sl.param_begin + k)));
  }
  return worst;
}

}  // namespace

TEST_CASE("Swin drop path changes the loss of the one-process twin", "[mpi][swin]") {
  // The matrix's "N ranks = one process" runs Swin with drop path on
  // (test_family_invariants.cpp); without it the losses differ, so the
  // samples it drops there matter.
  TrainConfig single = swin_job("ddp");
  single.batch *= size();
  TrainConfig plain = single;
  plain.drop_path = 0;
  Trainer undropped(plain);
  Trainer dropped(single);
  CHECK(undropped.train_step().loss != dropped.train_step().loss);
}

TEST_CASE("a pipelined Swin with drop path trains as one process", "[mpi][pipeline][swin]") {
  const int P = size();  // swin-micro has 4 blocks: up to 4 stages
  if (P != 2 && P != 4) return;
  for (const char* schedule : {"1f1b", "zb-h1"}) {
    CAPTURE(schedule, P);
    TrainConfig c = swin_job("ddp");
    c.grad_accum = P;
    c.parallel.pipeline_stages = P;
    c.parallel.schedule = schedule;
    TrainConfig twin = c;
    twin.parallel.pipeline_stages = 1;
    Trainer pipelined(c, world());
    Trainer reference(twin);
    for (int s = 0; s < 2; ++s) {
      CAPTURE(s);
      const StepResult got = pipelined.train_step(), want = reference.train_step();
      CHECK(got.loss == Approx(want.loss).epsilon(1e-12));
      CHECK(got.grad_norm == Approx(want.grad_norm).epsilon(1e-10));
    }
    CHECK(max_difference(whole_values(pipelined, false), whole_values(reference, false)) < 1e-12);
  }
}

TEST_CASE("Swin with sharding and recomputation matches its unsharded twin",
          "[mpi][shard][swin]") {
  for (const char* strategy : {"ddp", "b-sdp", "n-sdp"})
    for (const char* level : {"optimizer", "grad", "full"}) {
      CAPTURE(strategy, level);
      const double C = std::string(strategy) == "ddp" ? 1.0 : 0.5;
      Trainer plain(swin_job(strategy, C), world());
      TrainConfig c = swin_job(strategy, C);
      c.parallel.shard = level;
      c.parallel.activation_checkpointing = "block";
      Trainer sharded(c, world());
      for (int s = 0; s < 2; ++s) {
        CAPTURE(s);
        const StepResult a = sharded.train_step(), b = plain.train_step();
        CHECK(a.loss == Approx(b.loss).epsilon(1e-12));
        CHECK(a.grad_norm == Approx(b.grad_norm).epsilon(1e-10));
      }
      CHECK(held_difference(sharded, plain) < 1e-12);
    }
}

