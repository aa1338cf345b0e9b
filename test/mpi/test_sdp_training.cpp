// Distributed training on a real MPI job (ctest runs it with 2 and 4 ranks;
// the invariants every model family keeps, N ranks = one process, C = 1 is
// DDP, allocations and traffic equal the plan's analytic figures, are in
// test_family_invariants.cpp): owners stay bit-identical, uneven and
// file-given plans train, rank emulation reproduces a real rank, backward
// masking yields the full-model gradient on a fixed batch, checkpoints move
// between world sizes and plans, and bad plans or disagreeing ranks fail
// with clear messages.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <set>
#include <string_view>

#include <unistd.h>

#include "comm/mpi_runtime.h"
#include "engine/checkpoint/json_file.h"
#include "engine/core/counter_rng.h"
#include "engine/parallel/owner_groups.h"
#include "engine/train/trainer.h"
#include "models/llama/llama_model.h"
#include "kernels/ops.h"
#include "test/mpi/mpi_test_support.h"

using namespace sdp;
using namespace sdp::testing::mpi;
namespace fs = std::filesystem;

namespace {

const char* const kSdpStrategies[] = {"b-sdp", "n-sdp", "bb-sdp", "nb-sdp"};

std::vector<double> values_of(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = ops::item(t, i);
  return out;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = a.size() == b.size() ? 0 : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace

TEST_CASE("owners of every component hold bit-identical values after every step",
          "[mpi][train]") {
  SDP_MPI_NEEDS_RANKS(2);
  for (const char* strategy : kSdpStrategies)
    for (const char* plan : {"cyclic", "random"}) {
      CAPTURE(strategy, plan);
      TrainConfig c = mini_job_config(strategy, 0.5);
      c.parallel.plan = plan;
      c.parallel.plan_seed = 7;
      Trainer t(c, world());
      const SubnetLayout& L = t.layout();
      for (int s = 0; s < 3; ++s) {
        t.train_step();
        const ParameterSet& p = t.model().params();
        for (int g = 0; g < p.group_count(); ++g) {
          uint64_t mine = p.group_decl(g).materialized ? bytes_hash(p.group_params(g)) : 0;
          std::vector<uint64_t> all(static_cast<size_t>(size()));
          MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
          // Forward masking: the owners agree; backward masking: every rank.
          const StorageGroup& sg = L.groups[static_cast<size_t>(g)];
          const std::vector<int> holders =
              L.spec.masking == Masking::backward ? L.groups[0].owners : sg.owners;
          for (int r : holders) CHECK(all[static_cast<size_t>(r)] == all[static_cast<size_t>(holders[0])]);
        }
      }
    }
}

namespace {

// Three steps of `t`: its state is what its plan asks of this rank, every
// step's traffic the plan's analytic volume, and the holders of every group
// bit-identical after each step.
void check_uneven_training(Trainer& t) {
  const SubnetLayout& L = t.layout();
  const ParameterSet& p = t.model().params();
  const StateBytes want_state = expected_state(L, p, t.allocator(), rank());
  CHECK(want_state.flags_follow_plan);
  CHECK(t.allocator().stats().current(MemCategory::param) == want_state.params);
  CHECK(t.allocator().stats().current(MemCategory::optim) == want_state.moments);
  for (int s = 0; s < 3; ++s) {
    const StepResult step = t.train_step();
    const StepTraffic want = analytic_step_traffic(L, p, rank());
    const comm::CommStats& sent = step.comm;
    CHECK(sent.by_op(comm::Op::all_reduce).sent_bytes ==
          Approx(want.reduce_bytes).epsilon(1e-12));
    CHECK(sent.by_op(comm::Op::all_reduce).calls == want.reduce_calls);
    CHECK(sent.by_op(comm::Op::broadcast).sent_bytes == want.broadcast_bytes);
    for (int g = 0; g < p.group_count(); ++g) {
      const uint64_t mine = p.group_decl(g).materialized ? bytes_hash(p.group_params(g)) : 0;
      std::vector<uint64_t> all(static_cast<size_t>(size()));
      MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
      const StorageGroup& sg = L.groups[static_cast<size_t>(g)];
      const std::vector<int> holders =
          L.spec.masking == Masking::backward ? L.groups[0].owners : sg.owners;
      for (int h : holders)
        CHECK(all[static_cast<size_t>(h)] == all[static_cast<size_t>(holders[0])]);
    }
  }
}

}  // namespace

TEST_CASE("an uneven plan (ranks weighted 3:1) trains with identical owners and the plan's "
          "analytic traffic and state", "[mpi][train]") {
  SDP_MPI_NEEDS_RANKS(2);
  // The first half of the ranks has three times the memory of the second.
  std::string weights;
  for (int r = 0; r < size(); ++r) weights += std::string(r ? "," : "") + (r < size() / 2 ? "3" : "1");
  for (const char* strategy : kSdpStrategies) {
    CAPTURE(strategy, weights);
    TrainConfig c = mini_job_config(strategy, 0.5);
    c.parallel.plan = "weighted:" + weights;
    Trainer t(c, world());
    const SubnetLayout& L = t.layout();
    // Every component keeps r owners; the heavy ranks own more of them.
    const int r = static_cast<int>(std::lround(0.5 * size()));
    for (int k = 0; k < L.plan.components(); ++k)
      CHECK(static_cast<int>(L.plan.owners(k).size()) == r);
    CHECK(L.plan.owned(0).size() > L.plan.owned(size() - 1).size());
    check_uneven_training(t);
  }
}

TEST_CASE("any ownership matrix from a plan file trains: unequal owner counts and shares",
          "[mpi][train]") {
  SDP_MPI_NEEDS_RANKS(2);
  const std::string path = same_path_everywhere("sdp_uneven_plan") + ".json";
  for (const char* strategy : kSdpStrategies) {
    CAPTURE(strategy);
    TrainConfig c = mini_job_config(strategy, 0.5);
    // The model's component count, from the plan of an ordinary layout.
    const int K = Trainer(c, world()).layout().plan.components();
    // Rank 0 owns everything; rank i > 0 owns the components k with
    // (k + i) % (i + 2) != 0: owner counts differ between components,
    // shares between ranks.
    if (rank() == 0) {
      nlohmann::json rows = nlohmann::json::array();
      for (int i = 0; i < size(); ++i) {
        std::string row;
        for (int k = 0; k < K; ++k) row += (i == 0 || (k + i) % (i + 2) != 0) ? '1' : '0';
        rows.push_back(row);
      }
      checkpoint::write_json_atomically(path, {{"matrix", rows}});
    }
    MPI_Barrier(MPI_COMM_WORLD);
    c.parallel.plan = "file:" + path;
    Trainer t(c, world());
    const SubnetLayout& L = t.layout();
    std::set<size_t> owner_counts;
    for (int k = 0; k < L.plan.components(); ++k) owner_counts.insert(L.plan.owners(k).size());
    CHECK(owner_counts.size() > 1);
    CHECK(L.plan.owned(0).size() == static_cast<size_t>(K));
    check_uneven_training(t);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank() == 0) fs::remove(path);
  }
}

TEST_CASE("an emulated rank holds and sends exactly what the real rank does", "[mpi][train]") {
  for (const char* strategy : {"b-sdp", "n-sdp", "nb-sdp"}) {
    CAPTURE(strategy);
    TrainConfig c = mini_job_config(strategy, 0.5);
    Trainer real(c, world());
    TrainConfig e = c;
    e.emulate_world = size();
    e.emulate_rank = rank();
    Trainer emulated(e);  // this process alone, pretending to be this rank
    const StepResult a = real.train_step(), b = emulated.train_step();
    CHECK(a.memory.peak_total == b.memory.peak_total);
    CHECK(a.memory.at_peak == b.memory.at_peak);
    CHECK(a.memory.peak == b.memory.peak);
    CHECK(a.comm.by_op() == b.comm.by_op());
    CHECK(a.rank_loss == b.rank_loss);  // same subnetwork, same data, same first step
  }
}

TEST_CASE("backward masking yields the full-model gradient on a fixed batch", "[mpi][train]") {
  // Every rank sees the same batch: each owner's gradient of a component is
  // the full model's, so their average is too (exactly, up to rounding).
  for (const char* strategy : {"bb-sdp", "nb-sdp"}) {
    CAPTURE(strategy);
    TrainConfig c = mini_job_config(strategy, 0.5);
    const llama::LlamaConfig mc = llama::LlamaConfig::named(c.model);
    const SubnetLayout L = SubnetLayout::build(
        c.model, StrategySpec::from_settings(c.parallel, c.model), size(), rank());
    CpuAllocator a1, a2;
    llama::LlamaModel masked(mc, L.model_layout), full(mc, L.model_layout);
    const auto masked_state =
        TrainingState::materialize(masked, a1, DType::f64, L.held_mask(), L.trained_mask());
    full.materialize(a2, DType::f64);
    for (llama::LlamaModel* m : {&masked, &full}) {
      m->params().init_values(3);
      m->params().allocate_grads();
    }
    std::vector<int32_t> tok(32), tgt(32);
    for (int i = 0; i < 32; ++i) {
      tok[static_cast<size_t>(i)] = (i * 7 + 3) % 256;
      tgt[static_cast<size_t>(i)] = (i * 11 + 5) % 256;
    }
    const Tensor tokens = host_view(tok).view({2, 16}), targets = host_view(tgt).view({2, 16});
    for (llama::LlamaModel* m : {&masked, &full}) {
      m->forward(tokens, targets);
      m->backward(1.0 / 32);
    }
    OwnerGroups groups(world(), L);
    groups.average_gradients(*masked_state);
    const ParameterSet& p = masked.params();
    int compared = 0;
    for (int g = 0; g < p.group_count(); ++g) {
      if (!p.group_decl(g).trained) continue;
      CHECK(max_abs_diff(values_of(p.group_grads(g)), values_of(full.params().group_grads(g))) <
            1e-14);
      ++compared;
    }
    CHECK(compared > 0);
  }
}

TEST_CASE("checkpoints of an SDP job load into one process and into another plan",
          "[mpi][train]") {
  const std::string dir = same_path_everywhere("sdp_mpi_ckpt");
  const std::pair<const char*, double> written_by[] = {{"b-sdp", 0.5}, {"nb-sdp", 0.5}, {"ddp", 1}};
  for (const auto& [strategy, C] : written_by) {
    CAPTURE(strategy);
    TrainConfig c = mini_job_config(strategy, C);
    Trainer job(c, world());
    job.train_step();
    job.train_step();
    const EvalResult before = job.evaluate_all();
    CHECK(before.subnet_loss.size() == static_cast<size_t>(size()));
    job.save_checkpoint(dir);

    // A single process (DDP, whole blocks) and a neuron cut of the same
    // weights evaluate the full model to the job's full-model loss.
    Trainer single(mini_job_config("ddp"));
    single.load_checkpoint(dir);
    CHECK(single.step() == 2);
    CHECK(single.evaluate() == Approx(before.full_loss).epsilon(1e-6));
    Trainer other(mini_job_config("n-sdp", 0.5), world());
    other.load_checkpoint(dir);
    CHECK(other.evaluate() == Approx(before.full_loss).epsilon(1e-6));

    // Resuming the same job from the checkpoint continues bit-identically.
    const StepResult next = job.train_step();
    Trainer resumed(c, world());
    resumed.load_checkpoint(dir);
    CHECK(resumed.train_step().loss == next.loss);
    world().barrier();  // everyone has read it before it is replaced
    if (rank() == 0) fs::remove_all(dir);
  }
}

TEST_CASE("impossible plans and disagreeing ranks fail with clear messages", "[mpi][train]") {
  SDP_MPI_NEEDS_RANKS(2);
  // C N rounds to no owner at all: refused on every rank alike.
  TrainConfig tiny_c = mini_job_config("b-sdp", 0.1);
  const std::string too_small = error_message([&] { Trainer t(tiny_c, world()); });
  CHECK_THAT(too_small, Catch::Contains("B-SDP (C = 0.1, cyclic)") &&
                            Catch::Contains("ranks with model mini"));
  // Rank 1 was started with another learning rate.
  TrainConfig differs = mini_job_config("ddp");
  if (rank() == 1) differs.lr = 2e-2;
  const std::string mismatch = error_message([&] { Trainer t(differs, world()); });
  CHECK_THAT(mismatch, Catch::Contains("the run configuration differs between ranks") &&
                           Catch::Contains("rank 1"));
  // An emulated rank inside a real job is a mistake, said so.
  TrainConfig nested = mini_job_config("ddp");
  nested.emulate_world = 8;
  const std::string emulate = error_message([&] { Trainer t(nested, world()); });
  CHECK_THAT(emulate, Catch::Contains("emulate_world is for single-process runs"));
}
