// The sharded checkpoint form on a real MPI job (ctest runs it with 2 and 4
// ranks): every rank writes its own file; the checkpoint loads into one
// process and into another plan over the world, resumes the same job
// bit-identically, evaluates exactly as the hf form of the same state, and
// sdp-export's output equals that hf form in every tensor, byte for byte.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include <unistd.h>

#include "engine/checkpoint/tensor_collection.h"
#include "engine/train/sharded_checkpoint.h"
#include "engine/train/sharded_export.h"
#include "engine/train/trainer.h"
#include "test/mpi/mpi_test_support.h"

using namespace sdp;
using namespace sdp::testing::mpi;
namespace fs = std::filesystem;

namespace {

// Tensors that differ between two collections (names, dtype, shape or
// bytes); -1 when the name lists differ.
int differing_tensors(const checkpoint::TensorCollection& a,
                      const checkpoint::TensorCollection& b) {
  if (a.names() != b.names()) return -1;
  CpuAllocator scratch;
  int differ = 0;
  for (const std::string& name : a.names()) {
    const auto ia = a.info(name), ib = b.info(name);
    if (ia.dtype != ib.dtype || ia.shape != ib.shape) {
      ++differ;
      continue;
    }
    OwnedTensor ta(scratch, ia.shape, ia.dtype, MemCategory::workspace);
    OwnedTensor tb(scratch, ib.shape, ib.dtype, MemCategory::workspace);
    a.read_into(name, *ta);
    b.read_into(name, *tb);
    differ += std::memcmp(ta->raw(), tb->raw(), ia.nbytes) != 0;
  }
  return differ;
}

}  // namespace

TEST_CASE("sharded checkpoints of an SDP job load anywhere and export to the hf form",
          "[mpi][train][checkpoint]") {
  const fs::path root = same_path_everywhere("sdp_mpi_sharded");
  const fs::path sharded = root / "sharded", hf = root / "hf", exported = root / "exported";
  if (rank() == 0) fs::create_directories(root);
  world().barrier();
  const std::pair<const char*, double> written_by[] = {{"b-sdp", 0.5}, {"nb-sdp", 0.5}, {"ddp", 1}};
  for (const auto& [strategy, C] : written_by) {
    CAPTURE(strategy);
    TrainConfig c = mini_job_config(strategy, C);
    c.checkpoint_format = "sharded";
    Trainer job(c, world());
    Trainer job_hf(mini_job_config(strategy, C), world());  // the same run, saving the hf form
    for (int s = 0; s < 2; ++s) CHECK(job.train_step().loss == job_hf.train_step().loss);
    const EvalResult before = job.evaluate_all();
    job.save_checkpoint(sharded);
    job_hf.save_checkpoint(hf);
    // Every rank's file, and no whole-model file.
    for (int r = 0; r < size(); ++r) CHECK(fs::exists(sharded / rank_file_name(r, size())));
    CHECK(!checkpoint::tensor_collection_exists(sharded, "model"));

    // One process (DDP, whole blocks) and a neuron cut over the world
    // evaluate the full model to the job's full-model loss, and exactly as
    // they do from the hf form of the same state.
    Trainer single(mini_job_config("ddp"));
    single.load_checkpoint(sharded);
    CHECK(single.step() == 2);
    const double single_loss = single.evaluate();
    CHECK(single_loss == Approx(before.full_loss).epsilon(1e-6));
    Trainer single_hf(mini_job_config("ddp"));
    single_hf.load_checkpoint(hf);
    CHECK(single_hf.evaluate() == single_loss);
    Trainer other(mini_job_config("n-sdp", 0.5), world());
    other.load_checkpoint(sharded);
    const double other_loss = other.evaluate();
    CHECK(other_loss == Approx(before.full_loss).epsilon(1e-6));
    Trainer other_hf(mini_job_config("n-sdp", 0.5), world());
    other_hf.load_checkpoint(hf);
    CHECK(other_hf.evaluate() == other_loss);

    // Resuming the same job from the checkpoint continues bit-identically.
    const StepResult next = job.train_step();
    Trainer resumed(c, world());
    resumed.load_checkpoint(sharded);
    CHECK(resumed.train_step().loss == next.loss);

    // sdp-export in one process writes what the hf form holds.
    if (rank() == 0) {
      export_sharded_checkpoint(sharded, exported, checkpoint::kDefaultMaxShardBytes);
      CHECK(differing_tensors(checkpoint::TensorCollection(exported, "model"),
                              checkpoint::TensorCollection(hf, "model")) == 0);
      CHECK(differing_tensors(checkpoint::TensorCollection(exported, "optimizer"),
                              checkpoint::TensorCollection(hf, "optimizer")) == 0);
    }
    world().barrier();  // everyone has read them before they are replaced
  }
  world().barrier();
  if (rank() == 0) fs::remove_all(root);
}

TEST_CASE("sharded checkpoints of a forward-masked ResNet hold the hf form's re-estimated "
          "statistics", "[mpi][train][checkpoint][resnet]") {
  const fs::path root = same_path_everywhere("sdp_mpi_sharded_resnet");
  const fs::path sharded = root / "sharded", hf = root / "hf", exported = root / "exported";
  if (rank() == 0) fs::create_directories(root);
  world().barrier();
  for (const char* strategy : {"b-sdp", "bb-sdp"}) {
    CAPTURE(strategy);
    TrainConfig c;
    c.model = "resnet-tiny";
    c.data = "synthetic-images:height=8,width=8,classes=5";
    c.batch = 2;
    c.steps = 3;
    c.warmup = 1;
    c.eval_every = 0;
    c.eval_batches = 1;
    c.recalibration_images = 16;  // rank 0 re-estimates the full model's statistics
    c.progress = false;
    c.parallel.strategy = strategy;
    c.parallel.active_fraction = 0.5;
    c.comm_timeout = 60;
    TrainConfig cs = c;
    cs.checkpoint_format = "sharded";
    Trainer job(cs, world()), job_hf(c, world());
    for (int s = 0; s < 2; ++s) CHECK(job.train_step().loss == job_hf.train_step().loss);
    job.save_checkpoint(sharded);
    job_hf.save_checkpoint(hf);
    if (rank() == 0) {
      export_sharded_checkpoint(sharded, exported, checkpoint::kDefaultMaxShardBytes);
      const checkpoint::TensorCollection mine(exported, "model"), theirs(hf, "model");
      CHECK(mine.contains("layer1.0.bn1.running_var"));
      CHECK(differing_tensors(mine, theirs) == 0);
      CHECK(differing_tensors(checkpoint::TensorCollection(exported, "optimizer"),
                              checkpoint::TensorCollection(hf, "optimizer")) == 0);
    }
    // The resumed job continues as the uninterrupted one.
    const StepResult next = job.train_step();
    Trainer resumed(cs, world());
    resumed.load_checkpoint(sharded);
    CHECK(resumed.train_step().loss == next.loss);
    world().barrier();
  }
  world().barrier();
  if (rank() == 0) fs::remove_all(root);
}

TEST_CASE("a sharded save that fails permanently says so on every rank", "[mpi][train][checkpoint]") {
  // A save directory below a regular file (ENOTDIR): no restart can write
  // it, so every rank's CollectiveError must carry `permanent` (sdp-train
  // exits 3 for it and sdp-run does not retry) rather than read as a lost
  // peer.
  const fs::path root = same_path_everywhere("sdp_mpi_sharded_permanent");
  if (rank() == 0) {
    fs::create_directories(root);
    std::FILE* f = std::fopen((root / "a_file").c_str(), "w");
    REQUIRE(f != nullptr);
    std::fclose(f);
  }
  world().barrier();
  TrainConfig c = mini_job_config("ddp");
  c.checkpoint_format = "sharded";
  Trainer job(c, world());
  job.train_step();
  bool threw = false;
  try {
    job.save_checkpoint(root / "a_file" / "ck");
  } catch (const CollectiveError& e) {
    threw = true;
    CHECK(e.permanent());
    CHECK(std::string(e.what()).find("failed on rank 0") != std::string::npos);
  }
  CHECK(threw);
  world().barrier();
  if (rank() == 0) fs::remove_all(root);
}
