// Distributed training of the CIFAR ResNet-18 (on small synthetic images, so
// that four ranks share two cores): every strategy allocates exactly what
// its plan gives the rank (parameters, BatchNorm buffers, gradients, AdamW
// moments), the communication counters equal the analytic volume of the
// plan, owners keep identical parameters, SDP(C = 1) is DDP bit for bit,
// and evaluation averages the BatchNorm running statistics over the ranks
// only where they all run the full model (backward masking).
#include <catch2/catch.hpp>

#include <algorithm>

#include "engine/train/trainer.h"
#include "kernels/ops.h"
#include "test/mpi/mpi_test_support.h"

using namespace sdp;
using namespace sdp::testing::mpi;

namespace {

TrainConfig resnet_job(const std::string& strategy, double active_fraction = 1.0) {
  TrainConfig c;
  c.model = "resnet18";
  c.data = "synthetic-images:height=8,width=8";
  c.batch = 2;
  c.steps = 3;
  c.warmup = 1;
  c.lr = 1e-3;
  c.eval_every = 0;
  c.eval_batches = 1;
  c.recalibration_images = 32;  // rank 0 alone re-estimates the full model's statistics
  c.progress = false;
  c.parallel.strategy = strategy;
  c.parallel.active_fraction = active_fraction;
  c.comm_timeout = 120;
  return c;
}

}  // namespace

TEST_CASE("ResNet-18: each rank allocates exactly what it owns, for every strategy",
          "[mpi][resnet]") {
  for (const char* strategy : {"ddp", "b-sdp", "n-sdp", "bb-sdp", "nb-sdp"}) {
    CAPTURE(strategy);
    const double C = std::string(strategy) == "ddp" ? 1.0 : 0.5;
    Trainer t(resnet_job(strategy, C), world());
    const ParameterSet& p = t.model().params();
    const Allocator& a = t.allocator();
    const StateBytes want = expected_state(t.layout(), p, a, rank());
    CHECK(want.flags_follow_plan);
    const size_t params = want.params, grads = want.grads, moments = want.moments;
    const int64_t held_numel = want.held_numel;
    CHECK(a.stats().current(MemCategory::param) == params);
    CHECK(a.stats().current(MemCategory::grad) == grads);
    CHECK(a.stats().current(MemCategory::optim) == moments);
    const StepResult r = t.train_step();
    CHECK(r.memory["peak"]["at_peak"]["param"].get<double>() == static_cast<double>(params));
    CHECK(r.memory["peak"]["at_peak"]["grad"].get<double>() == static_cast<double>(grads));
    // Forward masking holds a real share of the network; backward masking all of it.
    if (std::string(strategy) == "b-sdp" || std::string(strategy) == "n-sdp")
      CHECK(held_numel < t.model().parameter_count());
    else
      CHECK(held_numel == t.model().parameter_count());
  }
}

TEST_CASE("ResNet-18: communication counters equal the analytic volume of the plan",
          "[mpi][resnet]") {
  for (const char* strategy : {"ddp", "b-sdp", "n-sdp", "bb-sdp", "nb-sdp"}) {
    CAPTURE(strategy);
    const double C = std::string(strategy) == "ddp" ? 1.0 : 0.5;
    Trainer t(resnet_job(strategy, C), world());
    const StepResult r = t.train_step();
    const SubnetLayout& L = t.layout();
    const ParameterSet& p = t.model().params();
    const StepTraffic want = analytic_step_traffic(L, p, rank());
    const double reduce_bytes = want.reduce_bytes, broadcast_bytes = want.broadcast_bytes;
    const int64_t reduce_calls = want.reduce_calls, broadcast_calls = want.broadcast_calls;
    const auto& ops = r.comm["by_op"];
    CHECK(ops["all_reduce"]["sent_bytes"].get<double>() == Approx(reduce_bytes).epsilon(1e-12));
    CHECK(ops["all_reduce"]["calls"].get<int64_t>() == reduce_calls);
    CHECK(ops["broadcast"]["calls"].get<int64_t>() == broadcast_calls);
    CHECK(ops["broadcast"]["sent_bytes"].get<double>() == broadcast_bytes);
  }
}

TEST_CASE("ResNet-18: owners agree after every step, SDP(C = 1) is DDP, BatchNorm statistics "
          "are averaged only where every rank runs the full model",
          "[mpi][resnet]") {
  SDP_MPI_NEEDS_RANKS(2);
  Trainer ddp(resnet_job("ddp"), world());
  Trainer blocks(resnet_job("b-sdp", 1.0), world());
  for (int s = 0; s < 2; ++s) CHECK(blocks.train_step().loss == ddp.train_step().loss);

  for (const char* strategy : {"b-sdp", "n-sdp", "bb-sdp"}) {
    CAPTURE(strategy);
    Trainer t(resnet_job(strategy, 0.5), world());
    for (int s = 0; s < 2; ++s) t.train_step();
    const SubnetLayout& L = t.layout();
    const ParameterSet& p = t.model().params();
    const bool everyone_full = L.spec.masking == Masking::backward;
    // Whether the ranks holding group g (its owners; all under backward
    // masking) hold identical bytes of `part`.
    auto agree = [&](int g, const Tensor& part) {
      uint64_t mine = p.group_decl(g).materialized ? bytes_hash(part) : 0;
      std::vector<uint64_t> all(static_cast<size_t>(size()));
      MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
      const std::vector<int>& holders =
          everyone_full ? L.groups[0].owners : L.groups[static_cast<size_t>(g)].owners;
      bool same = true;
      for (int r : holders) same &= all[static_cast<size_t>(r)] == all[static_cast<size_t>(holders[0])];
      return same;
    };
    bool buffers_differ = false;
    for (int g = 0; g < p.group_count(); ++g) {
      CHECK(agree(g, p.group_params(g)));
      if (p.group_decl(g).buffer_numel > 0) buffers_differ |= !agree(g, p.group_buffers(g));
    }
    // Each rank's statistics come from its own images (and, under forward
    // masking, its own subnetwork).
    CHECK(buffers_differ);
    const EvalResult e = t.evaluate_all();
    CHECK(std::isfinite(e.full_loss));
    // Evaluation averages them where every rank runs the full model, and
    // leaves each subnetwork its own under forward masking (rank 0's full
    // model re-estimates its own instead).
    bool merged = true;
    for (int g = 0; g < p.group_count(); ++g)
      if (p.group_decl(g).buffer_numel > 0) merged &= agree(g, p.group_buffers(g));
    CHECK(merged == everyone_full);
  }
}
