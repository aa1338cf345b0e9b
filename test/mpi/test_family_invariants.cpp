// The invariants every model family must keep on a real MPI job, as one
// matrix: each invariant is written once below and run for each family's
// smallest configuration (the single-process ones are in
// test/test_family_invariants.cpp).
//
//   invariant                     LLaMA mini        ResNet resnet-tiny   Swin swin-micro (f64,
//                                                                        drop path 0.5)
//   a rank allocates exactly      yes               yes                  yes
//   what it owns
//   counters = analytic volume    yes               yes                  yes
//   C = 1 is DDP                  b-sdp, bb-sdp bit yes: b-sdp bit for   yes: b-sdp bit for bit
//                                 for bit; n-sdp    bit
//                                 in f64 to 1e-12
//   N ranks = one process         yes (f64)         no: BatchNorm        yes, drop path keyed
//                                                   normalizes over each by the global sample
//                                                   rank's own batch     index
//   meta rank = real rank         yes: B-SDP        yes: N-SDP           yes: N-SDP
//
// "a rank allocates exactly what it owns": for DDP, B-SDP, N-SDP, BB-SDP and
// NB-SDP (C = 0.5), the allocator holds exactly the parameters, gradients
// and AdamW moments the plan gives this rank, before a step and at its
// peak, and forward masking holds a real share of the network, backward
// masking all of it (in f32, which the analytic figures count).
// "counters = analytic volume": in the same step, the all-reduce and
// broadcast calls and bytes, and the bytes sent in all, equal the plan's
// analytic figures for this rank.
// "C = 1 is DDP": an SDP strategy whose every component is owned by every
// rank trains as DDP step by step, with the same parameters after.
// "N ranks = one process": DDP on N ranks equals one process on the same
// global batch: losses, gradient norms, examples, a classifier's training
// top-k accuracies and the parameters each rank holds; then a classifier's
// evaluation (loss, top-k accuracies of the full model and of every rank's
// subnetwork) on the same validation images.
// "meta rank = real rank": the meta device emulating this rank predicts its
// memory (every category, current and at the peak), its traffic by
// collective and its number of allocations, with C = 0.5, at every shard
// level (none, ZeRO-1, ZeRO-2, full), with and without block recomputation,
// with gradient accumulation and clipping.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/train/trainer.h"
#include "kernels/ops.h"
#include "test/mpi/mpi_test_support.h"

using namespace sdp;
using namespace sdp::testing::mpi;

namespace {

// A model family's row of the matrix.
struct Family {
  TrainConfig (*job)(const std::string& strategy, double active_fraction);
  std::vector<const char*> same_path_at_c1;  // SDP strategies whose C = 1 is DDP's code path
  bool reordered_at_c1;  // N-SDP at C = 1: the same sums in another order, compared in f64
  int c1_steps;
  int one_process_steps;          // 0: the invariant does not hold (see the table)
  double one_process_tolerance;  // on each parameter
  const char* masked_strategy;   // the SDP strategy of "the meta device predicts a rank"
};

TrainConfig llama_job(const std::string& strategy, double active_fraction) {
  return mini_job_config(strategy, active_fraction);
}

TrainConfig resnet_job(const std::string& strategy, double active_fraction) {
  TrainConfig c = mini_job_config(strategy, active_fraction);
  c.model = "resnet-tiny";
  c.data = "synthetic-images:height=8,width=8,classes=5";
  c.batch = 2;
  c.seq = 1;
  c.steps = 3;
  c.lr = 1e-3;
  c.eval_batches = 1;
  c.recalibration_images = 16;
  return c;
}

TrainConfig swin_job(const std::string& strategy, double active_fraction) {
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

const Family kLlama{llama_job, {"b-sdp", "bb-sdp"}, true, 3, 4, 1e-10, "b-sdp"};
const Family kResNet{resnet_job, {"b-sdp"}, false, 2, 0, 0, "n-sdp"};
const Family kSwin{swin_job, {"b-sdp"}, false, 2, 3, 1e-12, "n-sdp"};

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

// "a rank allocates exactly what it owns" and "counters = analytic volume",
// on one trainer per strategy and its first step.
void owned_state_and_analytic_traffic(const Family& family) {
  for (const char* strategy : {"ddp", "b-sdp", "n-sdp", "bb-sdp", "nb-sdp"}) {
    CAPTURE(strategy);
    const std::string name = strategy;
    TrainConfig c = family.job(name, name == "ddp" ? 1.0 : 0.5);
    c.dtype = "f32";  // the analytic figures count f32 state and traffic
    Trainer t(c, world());
    const SubnetLayout& L = t.layout();
    const ParameterSet& p = t.model().params();
    const Allocator& a = t.allocator();

    const StateBytes want = expected_state(L, p, a, rank());
    CHECK(want.flags_follow_plan);
    CHECK(a.stats().current(MemCategory::param) == want.params);
    CHECK(a.stats().current(MemCategory::grad) == want.grads);
    CHECK(a.stats().current(MemCategory::optim) == want.moments);
    // Forward masking holds a real share of the network; backward masking all of it.
    if (name == "b-sdp" || name == "n-sdp")
      CHECK(want.held_numel < t.model().parameter_count());
    else
      CHECK(want.held_numel == t.model().parameter_count());
    const StepResult r = t.train_step();
    // What a step holds at its peak keeps to the same figures.
    CHECK(static_cast<double>(r.memory.at_peak[MemCategory::param]) == static_cast<double>(want.params));
    CHECK(static_cast<double>(r.memory.at_peak[MemCategory::grad]) == static_cast<double>(want.grads));

    const int accuracies = static_cast<int>(t.model().accuracy_top_k().size());
    const StepTraffic traffic = analytic_step_traffic(L, p, rank(), accuracies);
    const comm::CommStats& sent = r.comm;
    CHECK(sent.by_op(comm::Op::all_reduce).sent_bytes ==
          Approx(traffic.reduce_bytes).epsilon(1e-12));
    CHECK(sent.by_op(comm::Op::all_reduce).calls == traffic.reduce_calls);
    CHECK(sent.by_op(comm::Op::broadcast).calls == traffic.broadcast_calls);
    CHECK(sent.by_op(comm::Op::broadcast).sent_bytes == traffic.broadcast_bytes);
    CHECK(r.comm.total().sent_bytes ==
          Approx(traffic.reduce_bytes + traffic.broadcast_bytes).epsilon(1e-12));
  }
}

void c1_is_ddp(const Family& family) {
  Trainer ddp(family.job("ddp", 1.0), world());
  std::vector<std::unique_ptr<Trainer>> same_path;
  for (const char* strategy : family.same_path_at_c1)
    same_path.push_back(std::make_unique<Trainer>(family.job(strategy, 1.0), world()));
  // The same plan (all ones) is the same code path: bit for bit.
  for (int s = 0; s < family.c1_steps; ++s) {
    const StepResult d = ddp.train_step();
    for (size_t k = 0; k < same_path.size(); ++k) {
      CAPTURE(family.same_path_at_c1[k], s);
      CHECK(same_path[k]->train_step().loss == d.loss);
    }
  }
  const ParameterSet& p = ddp.model().params();
  for (size_t k = 0; k < same_path.size(); ++k) {
    CAPTURE(family.same_path_at_c1[k]);
    const ParameterSet& q = same_path[k]->model().params();
    REQUIRE(q.group_count() == p.group_count());
    for (int g = 0; g < p.group_count(); ++g)
      CHECK(bytes_hash(q.group_params(g)) == bytes_hash(p.group_params(g)));
  }
  if (!family.reordered_at_c1) return;
  // Neuron pieces sum the same products in another order.
  TrainConfig neuron_cfg = family.job("n-sdp", 1.0), ddp_cfg = family.job("ddp", 1.0);
  neuron_cfg.dtype = ddp_cfg.dtype = "f64";
  Trainer neurons(neuron_cfg, world());
  Trainer ddp64(ddp_cfg, world());
  for (int s = 0; s < family.c1_steps; ++s)
    CHECK(neurons.train_step().loss == Approx(ddp64.train_step().loss).epsilon(1e-12));
}

void n_ranks_equal_one_process(const Family& family) {
  TrainConfig c = family.job("ddp", 1.0);
  c.dtype = "f64";  // rounding differences stay far below what is compared
  TrainConfig single = c;
  single.batch = c.batch * size();  // the windows of all ranks together
  // The same validation images: N times the batches of a rank's size
  // (the validation stream is read in order).
  c.eval_batches = single.eval_batches * size();
  Trainer job(c, world());
  Trainer reference(single);  // a local world of one on every rank
  for (int s = 0; s < family.one_process_steps; ++s) {
    CAPTURE(s);
    const StepResult a = job.train_step(), b = reference.train_step();
    CHECK(a.loss == Approx(b.loss).epsilon(1e-12));
    CHECK(a.grad_norm == Approx(b.grad_norm).epsilon(1e-10));
    CHECK(a.examples == b.examples);
    // A classifier's correct counts travel with the loss: the same shares.
    CHECK(a.accuracy.k == b.accuracy.k);
    CHECK(a.accuracy.value == b.accuracy.value);
  }
  const ParameterSet& p = job.model().params();
  const ParameterSet& q = reference.model().params();
  REQUIRE(p.group_count() == q.group_count());
  for (int g = 0; g < p.group_count(); ++g)
    CHECK(max_abs_diff(values_of(p.group_params(g)), values_of(q.group_params(g))) <
          family.one_process_tolerance);
  // Every rank evaluates the full model it holds on the same inputs: the
  // loss and accuracies (a classifier's, a token model's next-token top-1)
  // are the one process's, on every rank, for the full model and for each
  // rank's (here whole) subnetwork.
  if (job.model().evaluation_top_k().empty()) return;
  const EvalResult e = job.evaluate_all(), f = reference.evaluate_all();
  CHECK(e.full_loss == Approx(f.full_loss).epsilon(1e-12));
  CHECK(e.full_accuracy.k == f.full_accuracy.k);
  CHECK(e.full_accuracy.value == f.full_accuracy.value);
  REQUIRE(e.subnet_accuracy.size() == static_cast<size_t>(size()));
  for (const TopKAccuracy& subnet : e.subnet_accuracy) CHECK(subnet.value == f.full_accuracy.value);
}

// Two steps on the world and on the meta device emulating this rank of the
// same world: the same memory and traffic, step by step, and as many
// allocations. CHECKs, so that the loop over settings reports every mismatch.
void meta_rank_equals_real_rank(const Family& family) {
  for (const char* level : {"none", "optimizer", "grad", "full"})
    for (const char* ac : {"none", "block"}) {
      CAPTURE(family.masked_strategy, level, ac);
      TrainConfig c = family.job(family.masked_strategy, 0.5);
      c.dtype = "f32";
      c.grad_accum = 2;
      c.grad_clip = 0.05;
      c.parallel.shard = level;
      c.parallel.activation_checkpointing = ac;
      Trainer real(c, world());
      TrainConfig m = c;
      m.device = "meta";
      m.emulate_world = size();
      m.emulate_rank = rank();
      Trainer meta(m, std::make_unique<MetaAllocator>(64));  // the CPU allocator's blocks
      for (int s = 0; s < 2; ++s) {
        const StepResult a = real.train_step(), b = meta.train_step();
        CHECK(a.memory == b.memory);
        CHECK(a.comm.by_op() == b.comm.by_op());
      }
      CHECK(real.allocator().stats().alloc_count() == meta.allocator().stats().alloc_count());
    }
}

}  // namespace

TEST_CASE("family matrix: a rank allocates exactly what it owns and its counters equal the "
          "analytic volume", "[mpi][matrix]") {
  SECTION("LLaMA mini") { owned_state_and_analytic_traffic(kLlama); }
  SECTION("ResNet resnet-tiny") { owned_state_and_analytic_traffic(kResNet); }
  SECTION("Swin swin-micro") { owned_state_and_analytic_traffic(kSwin); }
}

TEST_CASE("family matrix: C = 1 is DDP", "[mpi][matrix]") {
  SECTION("LLaMA mini") { c1_is_ddp(kLlama); }
  SECTION("ResNet resnet-tiny") { c1_is_ddp(kResNet); }
  SECTION("Swin swin-micro") { c1_is_ddp(kSwin); }
}

TEST_CASE("family matrix: DDP on N ranks equals one process on the same global batch",
          "[mpi][matrix]") {
  SECTION("LLaMA mini") { n_ranks_equal_one_process(kLlama); }
  // ResNet: no (BatchNorm normalizes over each rank's own batch).
  SECTION("Swin swin-micro") { n_ranks_equal_one_process(kSwin); }
}

TEST_CASE("family matrix: the meta device predicts a sharded rank's bytes exactly",
          "[mpi][matrix][shard][meta]") {
  SECTION("LLaMA mini") { meta_rank_equals_real_rank(kLlama); }
  SECTION("ResNet resnet-tiny") { meta_rank_equals_real_rank(kResNet); }
  SECTION("Swin swin-micro") { meta_rank_equals_real_rank(kSwin); }
}
