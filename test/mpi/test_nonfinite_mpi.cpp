// A non-finite loss on one rank reaches every rank through the all-reduced
// loss and gradient norm: every rank skips the same step (no update, copies
// stay identical) or stops with the same message.
#include <catch2/catch.hpp>

#include <limits>
#include <string>
#include <vector>

#include "engine/train/trainer.h"
#include "test/mpi/mpi_test_support.h"
#include "test/train_config_util.h"

using namespace sdp;
using namespace sdp::testing::mpi;

TEST_CASE("a NaN on one rank makes every rank skip, then stop, alike", "[mpi][train][nonfinite]") {
  SDP_MPI_NEEDS_RANKS(2);
  TrainConfig c = testing::tiny_train_config();
  c.comm_timeout = 60;
  c.skip_nonfinite = 1;
  Trainer t(c, world());
  t.train_step();
  TrainingState& p = t.training_state();
  const int last = p.params().count() - 1;
  if (rank() == size() - 1) {
    float* embedding = p.values(0).data<float>();
    for (int64_t i = 0; i < p.values(0).numel(); ++i)
      embedding[i] = std::numeric_limits<float>::quiet_NaN();
  }
  const uint64_t before = bytes_hash(p.values(last));
  const StepResult r = t.train_step();
  CHECK(on_all_ranks(r.skipped && r.skipped_steps == 1));
  CHECK(on_all_ranks(bytes_hash(p.values(last)) == before));
  std::string message;
  try {
    t.train_step();
  } catch (const CollectiveError& e) {
    message = e.what();
  }
  CHECK_THAT(message, Catch::Contains("step 3: the loss is nan"));
  // The same text everywhere: rank 0's length and bytes compared on every rank.
  const std::vector<std::string> all = [&] {
    std::vector<std::string> out;
    try {
      comm::require_same_on_all_ranks(world(), "the stop message", message);
    } catch (const CollectiveError& e) {
      out.push_back(e.what());
    }
    return out;
  }();
  CHECK(on_all_ranks(all.empty() && !message.empty()));
}
