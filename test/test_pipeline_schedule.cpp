// Pipeline schedules: the generators' shapes, the validator's refusals, the
// simulator's timings against closed forms, and the JSON round trip.
#include <catch2/catch.hpp>

#include <string>

#include "engine/core/error.h"
#include "engine/pipeline/schedule.h"
#include "engine/pipeline/schedule_simulator.h"
#include "test_temp_dir.h"

using namespace sdp::pipeline;

namespace {

Schedule parse(const std::string& text) { return schedule_from_json(nlohmann::json::parse(text)); }

double mean_bubble(const SimulationResult& r) {
  double sum = 0;
  for (double b : r.bubble_fraction) sum += b;
  return sum / static_cast<double>(r.bubble_fraction.size());
}

}  // namespace

TEST_CASE("pipeline: every generated schedule validates", "[pipeline]") {
  for (const auto& name : schedule_names())
    for (int P : {1, 2, 3, 4, 8})
      for (int M : {1, 2, 3, 4, 8, 13}) {
        INFO(name << " P=" << P << " M=" << M);
        REQUIRE_NOTHROW(validate(make_schedule(name, P, M)));
      }
  REQUIRE_THROWS_WITH(make_schedule("zb-v", 4, 8), Catch::Contains("valid: gpipe, 1f1b"));
  REQUIRE_THROWS_WITH(make_schedule("1f1b", 0, 8), Catch::Contains("stages = 0"));
}

TEST_CASE("pipeline: 1f1b's order on a 2-stage pipeline", "[pipeline]") {
  const Schedule s = make_schedule("1f1b", 2, 3);
  REQUIRE(to_json(s)["stages"] ==
          nlohmann::json::parse(R"([["F0","F1","B0","F2","B1","B2"],["F0","B0","F1","B1","F2","B2"]])"));
}

// Uniform costs F = 1, B = 2 (= I + W), no latency. For gpipe and 1f1b every
// stage computes M (F + B) = 3M and the step lasts (M + P - 1)(F + B), so
// each stage's bubble is (P - 1) / (M + P - 1).
TEST_CASE("pipeline: gpipe and 1f1b bubbles are (P-1)/(M+P-1) at uniform cost", "[pipeline]") {
  for (const std::string name : {"gpipe", "1f1b"})
    for (int P : {2, 4, 5})
      for (int M : {1, 4, 8, 16}) {
        INFO(name << " P=" << P << " M=" << M);
        const SimulationResult r = simulate(make_schedule(name, P, M));
        REQUIRE(r.makespan == Approx(3.0 * (M + P - 1)).epsilon(1e-12));
        for (double b : r.bubble_fraction)
          REQUIRE(b == Approx(double(P - 1) / (M + P - 1)).epsilon(1e-12));
      }
}

TEST_CASE("pipeline: peak live activations, 1f1b P - s and gpipe M", "[pipeline]") {
  const int P = 4, M = 8;
  const SimulationResult one = simulate(make_schedule("1f1b", P, M));
  const SimulationResult gp = simulate(make_schedule("gpipe", P, M));
  for (int s = 0; s < P; ++s) {
    REQUIRE(one.peak_live_activations[s] == P - s);
    REQUIRE(gp.peak_live_activations[s] == M);
  }
}

TEST_CASE("pipeline: zb-h1 has 1f1b's peak and a smaller bubble", "[pipeline]") {
  for (int P : {2, 4, 8})
    for (int M : {8, 16, 32}) {
      INFO("P=" << P << " M=" << M);
      const SimulationResult zb = simulate(make_schedule("zb-h1", P, M));
      const SimulationResult one = simulate(make_schedule("1f1b", P, M));
      REQUIRE(zb.peak_live_activations == one.peak_live_activations);
      REQUIRE(zb.makespan < one.makespan);
      for (int s = 0; s < P; ++s) REQUIRE(zb.bubble_fraction[s] < one.bubble_fraction[s]);
    }
}

TEST_CASE("pipeline: 2bp schedules have smaller bubbles than their base", "[pipeline]") {
  for (const std::string base : {"gpipe", "1f1b"})
    for (double latency : {0.0, 0.25}) {
      INFO(base << " latency=" << latency);
      SimulationCosts costs;
      costs.hop_latency = latency;
      const SimulationResult plain = simulate(make_schedule(base, 4, 8), costs);
      const SimulationResult split = simulate(make_schedule(base + "-2bp", 4, 8), costs);
      REQUIRE(mean_bubble(split) < mean_bubble(plain));
      REQUIRE(split.makespan < plain.makespan);
    }
  // gpipe-2bp at uniform cost: the I wave ends on stage 0 at 2(P-1) + 2M,
  // then its M weight gradients: makespan 2(P-1) + 3M.
  REQUIRE(simulate(make_schedule("gpipe-2bp", 4, 8)).makespan == Approx(2.0 * 3 + 3.0 * 8).epsilon(1e-12));
}

TEST_CASE("pipeline: simulator timings follow costs and latency", "[pipeline]") {
  // Two stages, one micro-batch: F0 on 0, hop, F0 and B0 on 1, hop, B0 on 0.
  SimulationCosts costs;
  costs.stages = {{1.0, 3.0, 1.5, 1.5}, {2.0, 5.0, 2.5, 2.5}};
  costs.hop_latency = 0.5;
  const SimulationResult r = simulate(make_schedule("gpipe", 2, 1), costs);
  REQUIRE(r.timings[1][0].start == Approx(1.5).epsilon(1e-12));
  REQUIRE(r.timings[1][1].end == Approx(8.5).epsilon(1e-12));
  REQUIRE(r.timings[0][1].start == Approx(9.0).epsilon(1e-12));
  REQUIRE(r.makespan == Approx(12.0).epsilon(1e-12));
  REQUIRE(r.bubble_fraction[0] == Approx(8.0 / 12.0).epsilon(1e-12));
  costs.stages.pop_back();
  REQUIRE_THROWS_WITH(simulate(make_schedule("gpipe", 2, 1), costs), Catch::Contains("valid: 2"));
}

TEST_CASE("pipeline: the validator refuses broken schedules", "[pipeline]") {
  SECTION("a missing W") {
    REQUIRE_THROWS_WITH(validate(parse(R"({"stages": [["F0","I0","F1","B1"]]})")),
                        Catch::Contains("stage 0 has I0 but no W0"));
  }
  SECTION("a W before its I") {
    REQUIRE_THROWS_WITH(validate(parse(R"({"stages": [["F0","W0","I0"]]})")),
                        Catch::Contains("stage 0 action 1 (W0): runs before I0"));
  }
  SECTION("a duplicated F") {
    REQUIRE_THROWS_WITH(validate(parse(R"({"stages": [["F0","F0","B0"]]})")),
                        Catch::Contains("stage 0 action 1 (F0): repeats action 0"));
  }
  SECTION("a cross-stage order that deadlocks") {
    // Stage 0 waits for B1's gradient before sending F0; stage 1 needs F0 first.
    const Schedule s = parse(R"({"stages": [["F1","B1","F0","B0"], ["F0","B0","F1","B1"]]})");
    REQUIRE_THROWS_WITH(validate(s), Catch::Contains("deadlocks") &&
                                         Catch::Contains("stage 0 action 1 (B1) waits for B1 on stage 1") &&
                                         Catch::Contains("stage 1 action 0 (F0) waits for F0 on stage 0"));
  }
  SECTION("a missing backward, a mixed one, a micro-batch out of range") {
    REQUIRE_THROWS_WITH(validate(parse(R"({"microbatches": 2, "stages": [["F0","B0","F1"]]})")),
                        Catch::Contains("no backward for micro-batch 1"));
    REQUIRE_THROWS_WITH(validate(parse(R"({"stages": [["F0","I0","B0","W0"]]})")),
                        Catch::Contains("not both"));
    REQUIRE_THROWS_WITH(validate(parse(R"({"microbatches": 1, "stages": [["F0","B0","F1","B1"]]})")),
                        Catch::Contains("out of range (valid: 0 to 0)"));
  }
  REQUIRE_THROWS_WITH(parse(R"({"stages": [["X0"]]})"), Catch::Contains("valid forms are F<mb>"));
  REQUIRE_THROWS_WITH(parse(R"({"stage": []})"), Catch::Contains("\"stages\""));
}

TEST_CASE("pipeline: JSON round trip", "[pipeline]") {
  sdp::testing::TempDir dir;
  for (const auto& name : schedule_names()) {
    const Schedule s = make_schedule(name, 4, 6);
    const std::string path = (dir.path() / (name + ".json")).string();
    save_schedule(s, path);
    const Schedule back = load_schedule(path);
    REQUIRE(back.microbatches == s.microbatches);
    REQUIRE(back.stages == s.stages);
    REQUIRE(to_json(back) == to_json(s));
  }
  // Without "microbatches" the count is inferred from the largest micro-batch.
  REQUIRE(parse(R"({"stages": [["F0","F1","B0","B1"]]})").microbatches == 2);
}
