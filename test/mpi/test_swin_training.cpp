// Distributed training of a Swin Transformer (swin-micro, f64) with
// stochastic depth on: drop path is keyed by the global sample index, so a
// DDP job drops exactly the samples one process drops on the same global
// batch and trains identically; B-SDP with C = 1 is DDP bit for bit; a
// pipelined Swin trains as one process with its micro-batches accumulated.
#include <catch2/catch.hpp>
#include <string>

#include "engine/train/trainer.h"
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

}  // namespace

TEST_CASE("Swin DDP with drop path trains as one process on the same global batch", "[mpi][swin]") {
  const TrainConfig c = swin_job("ddp");
  TrainConfig single = c;
  single.batch = c.batch * size();  // the windows of all ranks together
  Trainer distributed(c, world());
  Trainer reference(single);  // a local world of one on every rank
  for (int s = 0; s < 3; ++s) {
    CAPTURE(s);
    const StepResult got = distributed.train_step(), want = reference.train_step();
    CHECK(got.loss == Approx(want.loss).epsilon(1e-12));
    CHECK(got.grad_norm == Approx(want.grad_norm).epsilon(1e-10));
  }
  CHECK(max_difference(whole_values(distributed, false), whole_values(reference, false)) < 1e-12);
  // Without drop path the losses differ: the samples dropped above mattered.
  TrainConfig plain = single;
  plain.drop_path = 0;
  Trainer undropped(plain);
  Trainer again(single);
  CHECK(undropped.train_step().loss != again.train_step().loss);
}

TEST_CASE("Swin B-SDP with C = 1 is DDP bit for bit, drop path included", "[mpi][swin]") {
  Trainer ddp(swin_job("ddp"), world());
  Trainer blocks(swin_job("b-sdp", 1.0), world());
  for (int s = 0; s < 2; ++s) CHECK(blocks.train_step().loss == ddp.train_step().loss);
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
