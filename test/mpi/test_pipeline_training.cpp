// Pipeline parallelism on a real MPI job, in f64: every named schedule, with
// and without two-stage backward, at P = 2 and 4 stages and M = P and 2P
// micro-batches, trains exactly as one process does on the same global
// batch (losses, gradient norms, every parameter; a ResNet's BatchNorm
// statistics too); a pipeline composed with SDP (forward and backward
// masking), ZeRO-1/2/3 and gradient buckets equals the same composition
// without a pipeline, and the meta device predicts its memory and traffic;
// checkpoints move between pipelined and plain jobs;
// the bytes a stage sends are the micro-batches' boundary tensors; batched
// deferred weight gradients train as per-micro-batch ones on every split
// schedule (a file schedule included).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "engine/pipeline/schedule.h"
#include "engine/pipeline/stage_executor.h"
#include "kernels/ops.h"
#include "models/registry.h"
#include "engine/train/trainer.h"
#include "test/mpi/mpi_test_support.h"
#include "test/mpi/whole_values.h"

using namespace sdp;
using namespace sdp::testing::mpi;
namespace fs = std::filesystem;

namespace {

TrainConfig pipeline_config(const std::string& model, int stages, int micro_batches,
                            const std::string& schedule) {
  TrainConfig c = mini_job_config("ddp");
  c.model = model;
  c.dtype = "f64";
  c.grad_accum = micro_batches;
  c.grad_clip = 0.05;  // small enough to clip every step: the norm must be right
  c.parallel.pipeline_stages = stages;
  c.parallel.schedule = schedule;
  if (model.rfind("resnet", 0) == 0) {
    c.batch = 4;
    c.seq = 1;
  }
  return c;
}

// The same job without the pipeline: one process (D = 1) on every rank.
TrainConfig twin_of(TrainConfig c) {
  c.parallel.pipeline_stages = 1;
  c.parallel.stage_blocks.clear();
  return c;
}

// Steps the pipelined trainer and its twin in lock step; the twin's loss
// and norm are the global ones on every rank, the pipeline's likewise.
void expect_same_training(Trainer& pipelined, Trainer& twin, int steps, bool with_buffers) {
  for (int s = 0; s < steps; ++s) {
    const StepResult got = pipelined.train_step(), want = twin.train_step();
    CAPTURE(s);
    CHECK(got.loss == Approx(want.loss).epsilon(1e-12));
    CHECK(got.grad_norm == Approx(want.grad_norm).epsilon(1e-10));
    CHECK(got.examples == want.examples);
  }
  CHECK(max_difference(whole_values(pipelined, with_buffers), whole_values(twin, with_buffers)) <
        1e-12);
}

}  // namespace

TEST_CASE("every schedule trains a LLaMA as one process does", "[mpi][pipeline]") {
  const int P = size();  // one replica: P = 2 on two ranks, 4 on four
  if (P != 2 && P != 4) return;
  // The 2BP paper's forms (naive, the cool-down 1F1B) at M = 2P only: CI
  // time is scarce, and they share the executor with the others.
  const std::set<std::string> paper_forms{"naive", "naive-2bp", "1f1b-2bp-cooldown"};
  for (const std::string& schedule : pipeline::schedule_names())
    for (int M : {P, 2 * P}) {
      if (M == P && paper_forms.count(schedule)) continue;
      CAPTURE(schedule, P, M);
      const TrainConfig c = pipeline_config("mini", P, M, schedule);
      Trainer pipelined(c, world());
      Trainer twin(twin_of(c));
      expect_same_training(pipelined, twin, 3, false);
    }
}

TEST_CASE("batched deferred weight gradients train as per-micro-batch ones, every split schedule",
          "[mpi][pipeline]") {
  const int P = size();
  if (P != 2 && P != 4) return;
  std::vector<std::string> split;
  for (const std::string& schedule : pipeline::schedule_names())
    if (pipeline::has_weight_grads(pipeline::make_schedule(schedule, P, 2 * P)))
      split.push_back(schedule);
  // A file schedule: 1f1b-2bp with each stage's Ws in two runs, one in the
  // cool-down, one at the end.
  const std::string file = same_path_everywhere("batched_w_schedule") + ".json";
  pipeline::Schedule s = pipeline::make_schedule("1f1b-2bp", P, 2 * P);
  for (auto& list : s.stages) {
    auto first_w = std::find_if(list.begin(), list.end(), [](const pipeline::Action& a) {
      return a.kind == pipeline::ActionKind::weight_grad;
    });
    std::rotate(first_w - 1, first_w, first_w + P);  // W0 .. W(P-1) before the last I
  }
  if (rank() == 0) pipeline::save_schedule(s, file);
  world().barrier();
  split.push_back("file:" + file);
  for (const std::string& schedule : split) {
    CAPTURE(schedule, P);
    TrainConfig c = pipeline_config("mini", P, 2 * P, schedule);
    Trainer per_micro_batch(c, world());
    c.parallel.deferred_weight_grads = "batched";
    Trainer batched(c, world());
    expect_same_training(batched, per_micro_batch, 2, false);
  }
  world().barrier();
  if (rank() == 0) fs::remove(file);
}

TEST_CASE("uneven stages and recomputation compose with a pipeline", "[mpi][pipeline]") {
  if (size() != 2) return;
  for (const char* blocks : {"1,3", "3,1"})
    for (const char* ac : {"none", "block"}) {
      CAPTURE(blocks, ac);
      TrainConfig c = pipeline_config("mini", 2, 4, "1f1b-2bp");
      c.parallel.stage_blocks = blocks;
      c.parallel.activation_checkpointing = ac;
      Trainer pipelined(c, world());
      Trainer twin(twin_of(c));
      expect_same_training(pipelined, twin, 2, false);
    }
}

TEST_CASE("a pipelined ResNet trains as one process with per-micro-batch BatchNorm",
          "[mpi][pipeline]") {
  // BatchNorm under a pipeline normalizes each micro-batch by its own
  // statistics and moves the running ones micro-batch by micro-batch in
  // order, exactly as gradient accumulation does in one process.
  const int P = size();
  if (P != 2 && P != 4) return;
  for (const char* schedule : {"gpipe", "1f1b", "1f1b-2bp", "zb-h1"}) {
    CAPTURE(schedule, P);
    const TrainConfig c = pipeline_config("resnet-tiny", P, P, schedule);
    Trainer pipelined(c, world());
    Trainer twin(twin_of(c));
    expect_same_training(pipelined, twin, 2, true);
  }
}

// One composition of a pipeline with the data-parallel strategies.
struct Composition {
  const char* model;
  const char* strategy;
  double active_fraction;
  const char* shard;  // "" = the strategy's level
  double bucket_mb;   // 0 = one all-reduce per group
  const char* schedule;
  bool with_buffers;  // compare BatchNorm statistics too
};

TrainConfig composition_config(const Composition& k) {
  TrainConfig c = pipeline_config(k.model, 2, 4, k.schedule);
  c.parallel.strategy = k.strategy;
  c.parallel.active_fraction = k.active_fraction;
  c.parallel.shard = k.shard;
  c.bucket_mb = k.bucket_mb;
  return c;
}

TEST_CASE("pipelines compose with SDP, ZeRO-1/2/3, gradient buckets and backward masking",
          "[mpi][pipeline]") {
  if (size() != 4) return;
  // P = 2 stages x D = 2 replicas against the same composition without a
  // pipeline on 2 ranks, run by both pairs {0, 1} and {2, 3} alike (the
  // pair {0, 1} counted in whole_values). Two-stage backward schedules put
  // sharding's reduce-scatters and the buckets' reports on I and W apart.
  const std::unique_ptr<comm::Communicator> pair = world().split(rank() / 2, rank());
  const Composition compositions[] = {
      {"mini", "ddp", 1.0, "", 0, "1f1b", false},
      {"mini", "b-sdp", 0.5, "", 0, "1f1b", false},
      {"mini", "ddp", 1.0, "optimizer", 0, "1f1b", false},
      {"mini", "ddp", 1.0, "grad", 0, "1f1b-2bp", false},
      {"mini", "fsdp", 1.0, "", 0, "zb-h1", false},
      {"mini", "b-sdp", 0.5, "full", 0, "1f1b-2bp", false},
      {"mini", "ddp", 1.0, "", 0.0001, "1f1b-2bp", false},  // buckets of ~100 bytes
      {"mini", "bb-sdp", 0.5, "", 0, "1f1b-2bp", false},
      {"mini", "nb-sdp", 0.5, "", 0, "1f1b", false},
      {"mini", "bb-sdp", 0.5, "full", 0, "zb-h1", false},  // cut over each stage
      {"resnet-tiny", "n-sdp", 0.5, "grad", 0, "1f1b-2bp", true},
  };
  for (const Composition& k : compositions) {
    CAPTURE(k.model, k.strategy, k.shard, k.bucket_mb, k.schedule);
    const TrainConfig c = composition_config(k);
    Trainer pipelined(c, world());
    // A pipeline plans each stage's blocks among its replicas on its own
    // (every replica owns its share of every stage); the twin takes that
    // ownership matrix from a plan file.
    const std::string plan = same_path_everywhere("sdp-pipeline-plan") + ".json";
    if (rank() == 0) {
      std::ofstream out(plan);
      out << nlohmann::json{{"matrix", pipelined.layout().plan.to_json()["matrix"]}}.dump();
    }
    MPI_Barrier(MPI_COMM_WORLD);
    TrainConfig t = twin_of(c);
    t.parallel.plan = "file:" + plan;
    Trainer twin(t, *pair);
    CHECK(twin.layout().plan.hash() == pipelined.layout().plan.hash());
    for (int s = 0; s < 2; ++s) {
      const StepResult got = pipelined.train_step(), want = twin.train_step();
      CAPTURE(s);
      CHECK(got.loss == Approx(want.loss).epsilon(1e-12));
      CHECK(got.grad_norm == Approx(want.grad_norm).epsilon(1e-10));
    }
    CHECK(max_difference(whole_values(pipelined, k.with_buffers),
                         whole_values(twin, k.with_buffers, rank() < 2)) < 1e-12);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank() == 0) fs::remove(plan);
  }
}

TEST_CASE("composed pipelines write whole checkpoints that one process loads",
          "[mpi][pipeline]") {
  if (size() != 4) return;
  // Backward masking cut over each stage (hf form: rank 0 assembles every
  // stage's shards) and FSDP (sharded form: every rank writes its own).
  const Composition compositions[] = {
      {"mini", "bb-sdp", 0.5, "full", 0, "zb-h1", false},
      {"mini", "fsdp", 1.0, "", 0, "1f1b-2bp", false},
  };
  const std::string dir = same_path_everywhere("sdp-composed-ckpt");
  for (const Composition& k : compositions) {
    CAPTURE(k.strategy, k.shard, k.schedule);
    TrainConfig c = composition_config(k);
    c.checkpoint_format = std::string(k.strategy) == "fsdp" ? "sharded" : "hf";
    Trainer pipelined(c, world());
    for (int s = 0; s < 2; ++s) pipelined.train_step();
    pipelined.save_checkpoint(dir);
    MPI_Barrier(MPI_COMM_WORLD);
    // One process per rank, DDP on the whole model: the values it loads
    // are every stage's, assembled from every replica's shards.
    TrainConfig one = twin_of(c);
    one.batch *= 2;  // the global batch of the 2 replicas
    Trainer plain(one);
    plain.load_checkpoint(dir);
    CHECK(plain.step() == 2);
    CHECK(max_difference(whole_values(plain), whole_values(pipelined)) < 1e-12);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank() == 0) fs::remove_all(dir);
  }
}

TEST_CASE("the meta device predicts a composed pipeline's memory and traffic exactly",
          "[mpi][pipeline]") {
  if (size() != 4) return;
  const Composition compositions[] = {
      {"mini", "fsdp", 1.0, "", 0, "zb-h1", false},
      {"mini", "ddp", 1.0, "grad", 0, "1f1b-2bp", false},
      {"mini", "bb-sdp", 0.5, "full", 0, "1f1b-2bp", false},
      {"mini", "ddp", 1.0, "", 0.0001, "1f1b", false},
  };
  for (const Composition& k : compositions) {
    CAPTURE(k.strategy, k.shard, k.bucket_mb, k.schedule);
    TrainConfig c = composition_config(k);
    c.dtype = "f32";
    Trainer real(c, world());
    const StepResult got = real.train_step();
    TrainConfig m = c;
    m.device = "meta";
    m.emulate_world = size();
    m.emulate_rank = rank();
    Trainer dry(m, std::make_unique<MetaAllocator>(64));
    const StepResult want = dry.train_step();
    CHECK(got.memory.peak_total == want.memory.peak_total);
    CHECK(got.memory.peak == want.memory.peak);
    CHECK(got.memory.phase_peak == want.memory.phase_peak);
    CHECK(got.comm.total().sent_bytes == want.comm.total().sent_bytes);
    CHECK(got.comm.total().calls == want.comm.total().calls);
  }
}

TEST_CASE("pipeline checkpoints are whole and resume into plain jobs and back",
          "[mpi][pipeline]") {
  const int P = size();
  if (P != 2 && P != 4) return;
  const std::string dir = same_path_everywhere("sdp-pipeline-ckpt");
  const TrainConfig c = pipeline_config("mini", P, P, "1f1b-2bp");
  // Pipelined for 2 steps, saved; a plain process resumes and takes 2 more;
  // they equal 4 uninterrupted plain steps, and a pipeline resumed from the
  // plain run's checkpoint continues like it.
  Trainer reference(twin_of(c));
  std::vector<double> losses;
  for (int s = 0; s < 4; ++s) losses.push_back(reference.train_step().loss);
  {
    Trainer pipelined(c, world());
    for (int s = 0; s < 2; ++s) CHECK(pipelined.train_step().loss == Approx(losses[s]).epsilon(1e-12));
    pipelined.save_checkpoint(fs::path(dir) / "pipelined");
  }
  Trainer plain(twin_of(c));
  plain.load_checkpoint(fs::path(dir) / "pipelined");
  CHECK(plain.step() == 2);
  for (int s = 2; s < 4; ++s) CHECK(plain.train_step().loss == Approx(losses[s]).epsilon(1e-12));
  CHECK(max_difference(whole_values(plain), whole_values(reference)) < 1e-12);
  // And back: the plain run at step 2 into a pipeline.
  {
    Trainer plain2(twin_of(c));
    for (int s = 0; s < 2; ++s) plain2.train_step();
    if (rank() == 0) plain2.save_checkpoint(fs::path(dir) / "plain");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  Trainer resumed(c, world());
  resumed.load_checkpoint(fs::path(dir) / "plain");
  for (int s = 2; s < 4; ++s) CHECK(resumed.train_step().loss == Approx(losses[s]).epsilon(1e-12));
  CHECK(max_difference(whole_values(resumed), whole_values(reference)) < 1e-12);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() == 0) fs::remove_all(dir);
}

TEST_CASE("a stage sends exactly its micro-batches' boundary tensors", "[mpi][pipeline]") {
  const int P = size();
  if (P != 2 && P != 4) return;
  TrainConfig c = pipeline_config("mini", P, 2 * P, "zb-h1");
  c.dtype = "f32";
  Trainer t(c, world());
  const StepResult r = t.train_step();
  const int stage = rank();
  const int64_t M = 2 * P, boundary = c.batch * c.seq * 96 * 4;  // [B, T, D] f32, mini: D = 96
  REQUIRE(r.pipeline);
  CHECK(r.pipeline->stage == stage);
  CHECK(r.pipeline->activation_bytes_sent == (stage < P - 1 ? M * boundary : 0));
  CHECK(r.pipeline->gradient_bytes_sent == (stage > 0 ? M * boundary : 0));
  CHECK(r.comm.by_op(comm::Op::send).payload_bytes ==
        M * boundary * ((stage < P - 1) + (stage > 0)));
  CHECK(r.comm.by_op(comm::Op::recv).payload_bytes ==
        M * boundary * ((stage < P - 1) + (stage > 0)));
  const double bubble = r.pipeline->bubble_fraction;
  CHECK(bubble >= 0);
  CHECK(bubble < 1);
  CHECK(t.last_stage_timings().size() == t.pipeline_executor()->schedule().stages[stage].size());
}

TEST_CASE("the meta device predicts each stage's memory exactly, deferred W included",
          "[mpi][pipeline]") {
  const int P = size();
  if (P != 2 && P != 4) return;
  std::map<std::string, double> activation_peak;
  for (const char* schedule : {"1f1b", "1f1b-2bp", "zb-h1", "1f1b-2bp-batched",
                               "1f1b-2bp-cooldown-batched"}) {
    CAPTURE(schedule);
    // "-batched": the schedule with --deferred-weight-grads batched.
    std::string name = schedule;
    const bool batched = name.size() > 8 && name.substr(name.size() - 8) == "-batched";
    if (batched) name.resize(name.size() - 8);
    TrainConfig c = pipeline_config("mini", P, 2 * P, name);
    if (batched) c.parallel.deferred_weight_grads = "batched";
    c.dtype = "f32";
    Trainer real(c, world());
    const StepResult got = real.train_step();
    // This rank alone, emulated: collectives counted, nothing computed.
    TrainConfig m = c;
    m.device = "meta";
    m.emulate_world = P;
    m.emulate_rank = rank();
    Trainer dry(m, std::make_unique<MetaAllocator>(64));
    const StepResult want = dry.train_step();
    CHECK(got.memory.peak_total == want.memory.peak_total);
    CHECK(got.memory.peak == want.memory.peak);
    CHECK(got.memory.at_peak == want.memory.at_peak);
    CHECK(got.comm.total().sent_bytes == want.comm.total().sent_bytes);
    activation_peak[schedule] = static_cast<double>(got.memory.at_peak[MemCategory::activation]);
  }
  // Two-stage backward keeps each micro-batch's weight-gradient inputs
  // until its W: more activation memory than 1F1B on the first stage,
  // which defers the most.
  if (rank() == 0) CHECK(activation_peak["1f1b-2bp"] > activation_peak["1f1b"]);
}

TEST_CASE("one micro-batch through every schedule's executor gives the model's gradients",
          "[mpi][pipeline]") {
  // Below the trainer (which asks for M >= P): the stage executor with a
  // single micro-batch, each stage's weight gradients against one process's
  // backward of the whole model.
  const int P = size();
  if (P != 2 && P != 4) return;
  const std::vector<StageSpan> spans =
      P == 2 ? std::vector<StageSpan>{{0, 2}, {2, 4}}
             : std::vector<StageSpan>{{0, 1}, {1, 2}, {2, 3}, {3, 4}};
  const SubnetLayout layout = SubnetLayout::build("mini", StrategySpec{}, P, rank(), {}, spans);
  CpuAllocator alloc;
  const int64_t B = 2, T = 8;
  OwnedTensor tokens(alloc, {B, T}, DType::i32, MemCategory::workspace);    // [B, T]
  OwnedTensor targets(alloc, {B, T}, DType::i32, MemCategory::workspace);   // [B, T]
  for (int64_t i = 0; i < B * T; ++i) {
    tokens->data<int32_t>()[i] = static_cast<int32_t>((i * 37 + 11) % 256);
    targets->data<int32_t>()[i] = static_cast<int32_t>((i * 53 + 5) % 256);
  }
  const double scale = 1.0 / static_cast<double>(B * T);
  std::unique_ptr<Model> whole = make_model("mini");
  whole->materialize(alloc, DType::f64);
  whole->params().init_values(7);
  whole->params().allocate_grads();
  const double want_loss = whole->forward(*tokens, *targets);
  whole->backward(scale);
  const std::unique_ptr<comm::Communicator> pipe = world().split(0, rank());
  for (const std::string& name : pipeline::schedule_names()) {
    CAPTURE(name);
    std::unique_ptr<Model> stage = make_model("mini", layout.model_layout);
    stage->materialize(alloc, DType::f64, layout.held_mask(), layout.trained_mask());
    stage->params().init_values(7);
    stage->params().allocate_grads();
    stage->set_stage(spans[static_cast<size_t>(rank())]);
    pipeline::Schedule s = pipeline::with_communication(pipeline::make_schedule(name, P, 1));
    pipeline::validate(s);
    pipeline::StageExecutor executor(*stage, s, rank(), pipe.get());
    const pipeline::StageStepResult r = executor.run({{*tokens, *targets}}, scale);
    if (rank() == P - 1) CHECK(r.loss_sum == Approx(want_loss).epsilon(1e-13));
    const ParameterSet& got = stage->params();
    const ParameterSet& ref = whole->params();
    double worst = 0;
    int compared = 0;
    for (int id = 0; id < got.count(); ++id) {
      if (got.decl(id).buffer || !got.is_trained(id)) continue;
      const int ref_id = ref.find(got.decl(id).name).value();
      const Tensor a = got.grad(id), b = ref.grad(ref_id);
      for (int64_t e = 0; e < a.numel(); ++e)
        worst = std::max(worst, std::abs(ops::item(a, e) - ops::item(b, e)));
      ++compared;
    }
    CHECK(compared > 0);
    CHECK(worst < 1e-14);
  }
}
