// Ranks that resumed different checkpoints: the step, the data position and
// every storage group's contents are compared after loading, and any
// difference ends the job with the same message on every rank.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "engine/core/error.h"
#include "engine/train/rank_agreement.h"
#include "engine/train/trainer.h"
#include "kernels/ops.h"
#include "models/registry.h"
#include "test/mpi/mpi_test_support.h"

using namespace sdp;
using namespace sdp::testing::mpi;

namespace {

TrainConfig agreement_config(const std::string& strategy, double active_fraction) {
  TrainConfig c;
  c.model = "tiny";
  c.batch = 2;
  c.seq = 16;
  c.steps = 2;
  c.eval_every = 0;
  c.progress = false;
  c.parallel.strategy = strategy;
  c.parallel.active_fraction = active_fraction;
  c.comm_timeout = 60;
  return c;
}

// The message `fn` throws as a CollectiveError ("" for none), and whether
// every rank got the same one.
template <typename Fn>
std::string collective_error(Fn&& fn) {
  std::string message;
  try {
    fn();
  } catch (const CollectiveError& e) {
    message = e.what();
  }
  // Every rank must hold the same text: compare rank 0's with each.
  comm::require_same_on_all_ranks(world(), "the agreement error", message);
  return message;
}

}  // namespace

TEST_CASE("rank agreement: identical resumed state passes", "[mpi][agreement]") {
  for (const char* strategy : {"ddp", "n-sdp", "nb-sdp"}) {
    Trainer t(agreement_config(strategy, std::string(strategy) == "ddp" ? 1.0 : 0.5), world());
    t.train_step();
    const std::string message = collective_error([&] {
      require_same_resumed_state(world(), t.layout(), t.training_state(), t.step(),
                                 t.train_data().state());
    });
    CHECK(message.empty());
  }
}

TEST_CASE("rank agreement: a different step names every rank's step", "[mpi][agreement]") {
  Trainer t(agreement_config("ddp", 1.0), world());
  const int64_t step = rank() == size() - 1 ? 8 : 4;
  const std::string message = collective_error([&] {
    require_same_resumed_state(world(), t.layout(), t.training_state(), step,
                               t.train_data().state());
  });
  std::string others = size() == 2 ? "step 4 on rank 0" : "step 4 on ranks 0";
  for (int r = 1; r < size() - 1; ++r) others += ", " + std::to_string(r);
  CHECK_THAT(message, Catch::Contains("ranks resumed different checkpoints: " + others +
                                      "; step 8 on rank " + std::to_string(size() - 1)));
}

TEST_CASE("rank agreement: another data position is refused", "[mpi][agreement]") {
  Trainer t(agreement_config("ddp", 1.0), world());
  nlohmann::json state = t.train_data().state();
  if (rank() == 1) state["cursor"] = 12345;
  const std::string message = collective_error([&] {
    require_same_resumed_state(world(), t.layout(), t.training_state(), t.step(), state);
  });
  CHECK_THAT(message, Catch::Contains("the resumed data position") &&
                          Catch::Contains("rank 1 differs from rank 0"));
}

TEST_CASE("rank agreement: one changed weight or moment names its group and rank",
          "[mpi][agreement]") {
  // Backward masking at C = 0.5: every rank holds every group's weights
  // (compared on all), only owners hold the moments (compared among them).
  Trainer t(agreement_config("nb-sdp", 0.5), world());
  t.train_step();
  ParameterSet& p = t.model().params();
  const SubnetLayout& L = t.layout();
  const int last = size() - 1;
  auto first_message = [&] {
    return collective_error([&] {
      require_same_resumed_state(world(), L, t.training_state(), t.step(),
                                 t.train_data().state());
    });
  };

  SECTION("a weight the rank holds but does not own") {
    // The same choice on every rank, from the shared plan.
    int g = -1;
    for (int i = 0; i < p.group_count(); ++i) {
      const auto& owners = L.groups[static_cast<size_t>(i)].owners;
      if (std::find(owners.begin(), owners.end(), last) == owners.end()) g = i;
    }
    REQUIRE(g >= 0);
    if (rank() == last) {
      Tensor values = p.group_params(g);
      ops::fill(values, 0.5);
    }
    CHECK_THAT(first_message(),
               Catch::Contains("ranks resumed different checkpoints of step 1: group " +
                               L.groups[static_cast<size_t>(g)].name + ": the weights on rank " +
                               std::to_string(last) + " differ from rank 0's"));
  }
  SECTION("an AdamW moment of the group every rank owns") {
    REQUIRE(L.all_ranks(L.groups[0]));
    if (rank() == last) {
      Tensor m = t.training_state().group_adam_m(0);
      ops::fill(m, 0.25);
    }
    CHECK_THAT(first_message(),
               Catch::Contains("group owners:all: the optimizer state on rank " +
                               std::to_string(last) + " differs from rank 0's"));
  }
}

TEST_CASE("rank agreement: storage group sizes are compared", "[mpi][agreement]") {
  // Declarations only (nothing allocated): the last rank's model code
  // declares other sizes, as another build of the engine would.
  const int last = size() - 1;
  const auto same = make_model("tiny");
  CHECK(collective_error([&] { require_same_group_sizes(world(), same->params()); }).empty());
  const auto other = make_model(rank() == last ? "mini" : "tiny");
  CHECK_THAT(collective_error([&] { require_same_group_sizes(world(), other->params()); }),
             Catch::Contains("the storage groups' sizes") &&
                 Catch::Contains("rank " + std::to_string(last) + " differs from rank 0"));
}
