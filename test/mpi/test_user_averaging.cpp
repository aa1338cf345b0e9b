// Masked averaging among holders on a real MPI job: a shared parameter that
// serves one sublayer (an N-SDP block's norm gains) is averaged over the
// ranks that run that sublayer, every other parameter over its group's
// owners; held equal in float64 to a reference that sums each rank's own
// gradient by plain MPI and divides by those counts; sharded jobs (ZeRO-1,
// FSDP) rescale their shards to the same gradient norm and values.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/checkpoint/json_file.h"
#include "engine/train/trainer.h"
#include "kernels/ops.h"
#include "test/mpi/mpi_test_support.h"
#include "test/mpi/whole_values.h"

using namespace sdp;
using namespace sdp::testing::mpi;
namespace fs = std::filesystem;

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// The plan: rank 0 owns every component; the other ranks hold no head
// group of block 1 (only rank 0 runs its attention) and rank 1 no FFN group
// of block 2, so that some sublayers have fewer users than ranks.
bool owns(int r, const std::string& component) {
  if (r == 0) return true;
  if (starts_with(component, "block.1.heads.")) return false;
  if (r == 1 && starts_with(component, "block.2.ffn.")) return false;
  return true;
}

// Whether rank r runs the sublayer a LLaMA block's norm serves: the
// attention's (input_layernorm) where it holds a head group of the block,
// the FFN's (post_attention_layernorm) where it holds an FFN group; every
// rank under backward masking. Empty optional: not a norm of a block.
std::optional<bool> runs_sublayer(const std::string& param, int r, const SubnetLayout& L) {
  for (int b = 0; b < 4; ++b) {
    const std::string layer = "model.layers." + std::to_string(b) + ".";
    std::string kind;
    if (param == layer + "input_layernorm.weight") kind = ".heads.";
    if (param == layer + "post_attention_layernorm.weight") kind = ".ffn.";
    if (kind.empty()) continue;
    if (L.spec.masking == Masking::backward) return true;
    for (const std::string& c : L.component_names)
      if (starts_with(c, "block." + std::to_string(b) + kind) && owns(r, c)) return true;
    return false;
  }
  return std::nullopt;
}

std::vector<double> values_of(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = ops::item(t, i);
  return out;
}

}  // namespace

TEST_CASE("a shared parameter of a sublayer is averaged over the ranks that run it (f64)",
          "[mpi][train]") {
  SDP_MPI_NEEDS_RANKS(2);
  const std::string path = same_path_everywhere("sdp_user_average_plan") + ".json";
  TrainConfig c = mini_job_config("n-sdp", 0.5);
  c.dtype = "f64";
  c.grad_clip = 0;  // the gradients stay as averaged
  const std::vector<std::string> names =
      SubnetLayout::build(c.model, StrategySpec::from_settings(c.parallel, c.model), size(), rank())
          .component_names;
  if (rank() == 0) {
    nlohmann::json rows = nlohmann::json::array();
    for (int r = 0; r < size(); ++r) {
      std::string row;
      for (const std::string& name : names) row += owns(r, name) ? '1' : '0';
      rows.push_back(row);
    }
    checkpoint::write_json_atomically(path, {{"matrix", rows}});
  }
  MPI_Barrier(MPI_COMM_WORLD);
  c.parallel.plan = "file:" + path;

  for (const char* strategy : {"n-sdp", "nb-sdp"}) {
    CAPTURE(strategy);
    c.parallel.strategy = strategy;
    Trainer job(c, world());
    Trainer twin(c, world());  // the same initial values, not stepped
    const SubnetLayout& L = job.layout();
    // Forward masking: both norms of the plan's short sublayers (block 1's
    // attention, block 2's FFN on np2) have fewer users than ranks.
    CHECK(L.sublayer_users.empty() == (L.spec.masking == Masking::backward));
    const StepResult step = job.train_step();

    // Each rank's own gradient on the batch the step read (grad_accum = 1).
    const BatchLoader& batch = job.train_data();
    twin.training_state().zero_grads();
    twin.model().forward(batch.inputs(), batch.targets());
    twin.model().backward(1.0 / static_cast<double>(batch.examples()));

    const ParameterSet& mine = twin.model().params();
    const ParameterSet& averaged = job.model().params();
    double square_norm = 0, worst = 0;
    int short_sublayers = 0;
    for (int id = 0; id < mine.count(); ++id) {
      const ParamDecl& d = mine.decl(id);
      const size_t n = static_cast<size_t>(d.shape.numel());
      const std::optional<bool> sublayer = runs_sublayer(d.name, rank(), L);
      // Who adds to the average: the sublayer's users, or the owners.
      const bool contributes = sublayer.value_or(mine.is_trained(id));
      std::vector<double> local(n, 0.0), sum(n, 0.0);
      if (mine.is_trained(id)) local = values_of(mine.grad(id));
      if (sublayer) {
        // A rank that skips the sublayer adds an exact zero; a user does not
        // (so that averaging over the wrong count shows).
        bool zero = true;
        for (double v : local) zero &= v == 0.0;
        CHECK(zero == !*sublayer);
      }
      int count = contributes ? 1 : 0, users = 0;
      MPI_Allreduce(local.data(), sum.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM,
                    MPI_COMM_WORLD);
      MPI_Allreduce(&count, &users, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
      if (sublayer && users < size()) ++short_sublayers;
      for (double& v : sum) {
        v /= users;
        square_norm += v * v;
      }
      if (!averaged.is_trained(id)) continue;
      const std::vector<double> got = values_of(averaged.grad(id));
      for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(got[i] - sum[i]));
    }
    CHECK(worst < 1e-12);
    CHECK(step.grad_norm == Approx(std::sqrt(square_norm)).epsilon(1e-10));
    CHECK((short_sublayers > 0) == (L.spec.masking == Masking::forward));
    if (L.spec.masking == Masking::backward) continue;
    // Sharded, each rank rescales its shard's part of the norms: the same
    // gradient norm and the same values after the update.
    for (const char* level : {"optimizer", "full"}) {
      CAPTURE(level);
      TrainConfig sc = c;
      sc.parallel.shard = level;
      Trainer sharded(sc, world());
      CHECK(sharded.train_step().grad_norm == Approx(step.grad_norm).epsilon(1e-10));
      CHECK(max_difference(whole_values(sharded), whole_values(job)) < 1e-12);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() == 0) fs::remove(path);
}
