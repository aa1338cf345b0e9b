// Pipelined layouts: every component on the ranks of the stage that runs
// it, one ownership plan per stage (so every replica owns its share of every
// stage), and ownership matrices given as plan files.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "engine/parallel/strategy.h"

using namespace sdp;
namespace fs = std::filesystem;

namespace {

StrategySpec bsdp_half() {
  ParallelSettings p;
  p.strategy = "b-sdp";
  p.active_fraction = 0.5;
  return StrategySpec::from_settings(p, "mini");
}

// A plan file in a fresh temporary directory, removed with the object.
struct PlanFile {
  fs::path dir = fs::temp_directory_path() /
                 ("sdp-plan-file-" + std::to_string(reinterpret_cast<uintptr_t>(this)));
  fs::path path = dir / "plan.json";
  explicit PlanFile(const std::string& text) {
    fs::create_directories(dir);
    std::ofstream(path) << text;
  }
  ~PlanFile() { fs::remove_all(dir); }
};

}  // namespace

TEST_CASE("pipelined layout: stages on their own ranks, each stage planned over its replicas",
          "[pipeline][layout]") {
  // mini: 4 blocks; 2 stages x 2 replicas, B-SDP C = 0.5 among the replicas.
  const std::vector<StageSpan> spans{{0, 2}, {2, 4}};
  for (int rank = 0; rank < 4; ++rank) {
    CAPTURE(rank);
    const SubnetLayout L = SubnetLayout::build("mini", bsdp_half(), 4, rank, {}, spans);
    CHECK(L.stage == rank / 2);
    CHECK(L.replica == rank % 2);
    CHECK(L.plan.world() == 2);
    // Each replica owns one block of each stage.
    for (int d = 0; d < 2; ++d) {
      const std::vector<int> owned = L.plan.owned(d);
      REQUIRE(owned.size() == 2);
      CHECK(owned[0] < 2);
      CHECK(owned[1] >= 2);
    }
    // No group has owners on two stages, and this rank holds only its stage's.
    for (const StorageGroup& g : L.groups) {
      const int stage = g.owners.front() / 2;
      for (int r : g.owners) CHECK(r / 2 == stage);
      if (g.held) CHECK(stage == L.stage);
    }
  }
}

TEST_CASE("plan files: a given ownership matrix, refused when it does not fit",
          "[pipeline][layout]") {
  ParallelSettings p;
  p.strategy = "b-sdp";
  p.active_fraction = 0.5;
  {
    PlanFile f(R"({"matrix": ["1010", "0101"]})");
    p.plan = "file:" + f.path.string();
    p.validate();
    const StrategySpec spec = StrategySpec::from_settings(p, "mini");
    const SubnetLayout L = SubnetLayout::build("mini", spec, 2, 0, {});
    CHECK(L.plan.owned(0) == std::vector<int>{0, 2});
    CHECK(L.plan.owned(1) == std::vector<int>{1, 3});
    CHECK_THAT(spec.describe(), Catch::Contains("plan " + f.path.string()));
  }
  const std::pair<const char*, const char*> bad[] = {
      {R"({"matrix": ["1010"]})", "has 1 rows; this job's plan has 2 ranks"},
      {R"({"matrix": ["101", "010"]})", "row 0 has 3 columns; the model has 4 maskable components"},
      {R"({"matrix": ["10x0", "0101"]})", "row 0 has 'x' (valid: 0, 1)"},
      {R"({"matrix": ["1000", "0100"]})", "components block.2, block.3 have no owner"},
      {R"({"rows": []})", "expected {\"matrix\""}};
  for (const auto& [text, message] : bad) {
    CAPTURE(text);
    PlanFile f(text);
    p.plan = "file:" + f.path.string();
    const StrategySpec spec = StrategySpec::from_settings(p, "mini");
    CHECK_THROWS_WITH(SubnetLayout::build("mini", spec, 2, 0, {}), Catch::Contains(message));
  }
  p.plan = "file:";
  CHECK_THROWS_WITH(p.validate(), Catch::Contains("valid: cyclic, random, file:PATH"));
}
