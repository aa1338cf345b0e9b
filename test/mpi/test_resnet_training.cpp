// Distributed training of the CIFAR ResNet-18 (on small synthetic images, so
// that four ranks share two cores; its allocations, traffic and C = 1 are in
// test_family_invariants.cpp): owners keep identical parameters, and
// evaluation averages the BatchNorm running statistics over the ranks only
// where they all run the full model (backward masking).
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

TEST_CASE("ResNet-18: owners agree after every step, BatchNorm statistics are averaged only "
          "where every rank runs the full model",
          "[mpi][resnet]") {
  SDP_MPI_NEEDS_RANKS(2);
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
