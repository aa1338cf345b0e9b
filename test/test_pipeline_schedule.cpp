// Pipeline schedules: the generators' shapes, the validator's refusals, the
// simulator's timings against closed forms, and the JSON round trip.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

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
        REQUIRE_NOTHROW(validate(with_communication(make_schedule(name, P, M))));
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

// Most micro-batches between their F and their I at once on one stage
// (list order is time order on a stage).
int peak_before_input_grad(const std::vector<Action>& actions) {
  int in_flight = 0, peak = 0;
  for (const Action& a : actions) {
    if (a.kind == ActionKind::forward) peak = std::max(peak, ++in_flight);
    if (a.kind == ActionKind::input_grad || a.kind == ActionKind::backward) --in_flight;
  }
  return peak;
}

// The published ZB-H1 bubble (P-1)(F + I - W) = P - 1 at F = I = W = 1,
// against 1F1B's (P-1)(F + I + W) = 3(P - 1): the step is 3M + (P - 1).
TEST_CASE("pipeline: zb-h1's bubble is a third of 1f1b's at 1f1b's in-flight peak",
          "[pipeline]") {
  for (int P : {2, 4, 8})
    for (int M : {P, 2 * P, 3 * P}) {
      INFO("P=" << P << " M=" << M);
      const Schedule zb_schedule = make_schedule("zb-h1", P, M);
      const SimulationResult zb = simulate(zb_schedule);
      const SimulationResult one = simulate(make_schedule("1f1b", P, M));
      REQUIRE(zb.makespan == Approx(3.0 * M + (P - 1)).epsilon(1e-12));
      REQUIRE(one.makespan == Approx(3.0 * (M + P - 1)).epsilon(1e-12));
      // Every stage computes 3M, so the idle time per stage is the
      // makespan minus 3M: P - 1 against 3(P - 1).
      REQUIRE(zb.makespan - 3.0 * M == Approx((one.makespan - 3.0 * M) / 3.0).epsilon(1e-12));
      for (int s = 0; s < P; ++s) {
        INFO("stage " << s);
        REQUIRE(peak_before_input_grad(zb_schedule.stages[s]) <= P - s);
        REQUIRE(peak_before_input_grad(zb_schedule.stages[s]) ==
                peak_before_input_grad(make_schedule("1f1b", P, M).stages[s]));
      }
    }
}

// The shape: 1F1B's F/I order (warm-up of P-1-s forwards, then F and I in
// turn), W only where stage 0 would wait for a gradient, the rest at the end.
TEST_CASE("pipeline: zb-h1's order on a 2-stage pipeline", "[pipeline]") {
  const Schedule s = make_schedule("zb-h1", 2, 3);
  REQUIRE(to_json(s)["stages"] ==
          nlohmann::json::parse(R"([["F0","F1","I0","F2","I1","W0","I2","W1","W2"],
                                    ["F0","I0","F1","I1","F2","I2","W0","W1","W2"]])"));
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

TEST_CASE("pipeline: action text of every kind round-trips", "[pipeline]") {
  for (ActionKind kind : {ActionKind::forward, ActionKind::backward, ActionKind::input_grad,
                          ActionKind::weight_grad, ActionKind::send_activation,
                          ActionKind::recv_activation, ActionKind::send_grad,
                          ActionKind::recv_grad})
    for (int mb : {0, 7, 1234}) {
      const Action a{kind, mb};
      REQUIRE(parse_action(to_string(a)) == a);
    }
  REQUIRE(to_string({ActionKind::send_activation, 3}) == "SEND_F3");
  REQUIRE(to_string({ActionKind::recv_activation, 3}) == "RECV_F3");
  REQUIRE(to_string({ActionKind::send_grad, 3}) == "SEND_B3");
  REQUIRE(to_string({ActionKind::recv_grad, 3}) == "RECV_B3");
  for (const std::string bad : {"SEND_X0", "RECV_F", "send_f0", "SEND_F-1", "SENDF0", "F"})
    REQUIRE_THROWS_WITH(parse_action(bad), Catch::Contains("\"" + bad + "\"") &&
                                               Catch::Contains("SEND_F<mb>, RECV_F<mb>"));
}

TEST_CASE("pipeline: with_communication lowers every schedule to a valid explicit form",
          "[pipeline]") {
  sdp::testing::TempDir dir;
  for (const auto& name : schedule_names())
    for (int P : {1, 2, 4})
      for (int M : {1, 3, 8}) {
        INFO(name << " P=" << P << " M=" << M);
        const Schedule implicit_form = make_schedule(name, P, M);
        const Schedule lowered = with_communication(implicit_form);
        REQUIRE_NOTHROW(validate(lowered));
        REQUIRE(lists_communication(lowered) == (P > 1));
        // Each stage: 5 actions per micro-batch minus the sends and receives
        // an end stage has no neighbour for (two each on stage 0 and P - 1).
        for (int s = 0; s < P; ++s) {
          std::vector<Action> compute;
          for (const Action& a : lowered.stages[s])
            if (!is_communication(a.kind)) compute.push_back(a);
          REQUIRE(compute == implicit_form.stages[s]);
          const size_t sends_and_recvs = lowered.stages[s].size() - compute.size();
          REQUIRE(sends_and_recvs == static_cast<size_t>(M) * (4 - 2 * (s == 0) - 2 * (s == P - 1)));
        }
        REQUIRE(with_communication(lowered).stages == lowered.stages);  // explicit stays as given
        const std::string path = (dir.path() / "explicit.json").string();
        save_schedule(lowered, path);
        const Schedule back = load_schedule(path);
        REQUIRE(back.microbatches == M);
        REQUIRE(back.stages == lowered.stages);
        REQUIRE_NOTHROW(validate(back));
      }
  // The places, on the middle stage of three.
  const Schedule s = with_communication(make_schedule("1f1b", 3, 2));
  REQUIRE(to_json(s)["stages"][1] ==
          nlohmann::json::parse(R"(["RECV_F0","F0","SEND_F0","RECV_F1","F1","SEND_F1",
                                    "RECV_B0","B0","SEND_B0","RECV_B1","B1","SEND_B1"])"));
}

TEST_CASE("pipeline: explicit-form dependencies", "[pipeline]") {
  const Schedule s = with_communication(make_schedule("1f1b-2bp", 3, 2));
  auto deps = [&](int stage, const std::string& action) {
    std::vector<std::string> out;  // "A@stage" and "+hop" when cross-stage
    for (const Dependency& d : dependencies(s, stage, parse_action(action)))
      out.push_back(to_string(d.action) + "@" + std::to_string(d.stage) +
                    (d.cross_stage ? "+hop" : ""));
    return out;
  };
  using V = std::vector<std::string>;
  REQUIRE(deps(0, "F0") == V{});
  REQUIRE(deps(1, "F0") == V{"RECV_F0@1"});
  REQUIRE(deps(1, "RECV_F0") == V{"SEND_F0@0+hop"});
  REQUIRE(deps(1, "SEND_F0") == V{"F0@1"});
  REQUIRE(deps(1, "I0") == V{"F0@1", "RECV_B0@1"});
  REQUIRE(deps(2, "I0") == V{"F0@2"});
  REQUIRE(deps(1, "RECV_B0") == V{"SEND_B0@2+hop"});
  REQUIRE(deps(1, "SEND_B0") == V{"I0@1"});
  REQUIRE(deps(1, "W0") == V{"I0@1"});
  // The implicit form keeps its neighbour dependencies.
  const Schedule implicit_form = make_schedule("1f1b-2bp", 3, 2);
  REQUIRE(dependencies(implicit_form, 1, parse_action("F0")).at(0).stage == 0);
  REQUIRE(dependencies(implicit_form, 1, parse_action("F0")).at(0).cross_stage);
}

TEST_CASE("pipeline: the validator refuses broken explicit schedules", "[pipeline]") {
  // The valid base: with_communication(1f1b, 2 stages, 1 micro-batch).
  REQUIRE_NOTHROW(validate(parse(
      R"({"stages": [["F0","SEND_F0","RECV_B0","B0"], ["RECV_F0","F0","B0","SEND_B0"]]})")));
  SECTION("a missing SEND_F") {
    REQUIRE_THROWS_WITH(
        validate(parse(R"({"stages": [["F0","RECV_B0","B0"], ["RECV_F0","F0","B0","SEND_B0"]]})")),
        Catch::Contains("stage 0 has no SEND_F0 (stage 1's RECV_F0 waits for it)"));
  }
  SECTION("a missing RECV_B") {
    REQUIRE_THROWS_WITH(
        validate(parse(R"({"stages": [["F0","SEND_F0","B0"], ["RECV_F0","F0","B0","SEND_B0"]]})")),
        Catch::Contains("stage 0 has no RECV_B0"));
  }
  SECTION("a receive that no stage sends") {
    REQUIRE_THROWS_WITH(
        validate(parse(R"({"stages": [["RECV_F0","F0","SEND_F0","RECV_B0","B0"],
                                      ["RECV_F0","F0","B0","SEND_B0"]]})")),
        Catch::Contains("stage 0 action 0 (RECV_F0): the first stage receives no activations") &&
            Catch::Contains("a receive without its send"));
    REQUIRE_THROWS_WITH(
        validate(parse(R"({"stages": [["F0","SEND_F0","RECV_B0","B0"],
                                      ["RECV_F0","F0","RECV_B0","B0","SEND_B0"]]})")),
        Catch::Contains("stage 1 action 2 (RECV_B0): the last stage receives no gradients"));
  }
  SECTION("a send the stage cannot make") {
    REQUIRE_THROWS_WITH(
        validate(parse(R"({"stages": [["F0","SEND_F0","RECV_B0","B0"],
                                      ["RECV_F0","F0","SEND_F0","B0","SEND_B0"]]})")),
        Catch::Contains("stage 1 action 2 (SEND_F0): the last stage has no next stage"));
  }
  SECTION("a duplicated send") {
    REQUIRE_THROWS_WITH(
        validate(parse(R"({"stages": [["F0","SEND_F0","SEND_F0","RECV_B0","B0"],
                                      ["RECV_F0","F0","B0","SEND_B0"]]})")),
        Catch::Contains("stage 0 action 2 (SEND_F0): repeats action 1"));
  }
  SECTION("a send before what it sends, a receive after what reads it") {
    REQUIRE_THROWS_WITH(
        validate(parse(R"({"stages": [["SEND_F0","F0","RECV_B0","B0"], ["RECV_F0","F0","B0","SEND_B0"]]})")),
        Catch::Contains("stage 0 action 0 (SEND_F0): runs before F0 (action 1) on the same stage "
                        "(it sends the activation F computes)"));
    REQUIRE_THROWS_WITH(
        validate(parse(R"({"stages": [["F0","SEND_F0","RECV_B0","B0"], ["F0","RECV_F0","B0","SEND_B0"]]})")),
        Catch::Contains("stage 1 action 0 (F0): runs before RECV_F0 (action 1) on the same stage"));
    REQUIRE_THROWS_WITH(
        validate(parse(R"({"stages": [["F0","SEND_F0","B0","RECV_B0"], ["RECV_F0","F0","B0","SEND_B0"]]})")),
        Catch::Contains("stage 0 action 2 (B0): runs before RECV_B0 (action 3) on the same stage "
                        "(the backward needs the output gradient RECV_B receives)"));
    REQUIRE_THROWS_WITH(
        validate(parse(R"({"stages": [["F0","SEND_F0","RECV_B0","B0"], ["RECV_F0","F0","SEND_B0","B0"]]})")),
        Catch::Contains("stage 1 action 2 (SEND_B0): runs before B0 (action 3) on the same stage"));
  }
  SECTION("a cycle of receives before the sends that answer them") {
    // Stage 0 waits for micro-batch 0's gradient before sending its activation.
    REQUIRE_THROWS_WITH(
        validate(parse(R"({"stages": [["F0","RECV_B0","SEND_F0","B0"], ["RECV_F0","F0","B0","SEND_B0"]]})")),
        Catch::Contains("deadlocks") &&
            Catch::Contains("stage 0 action 1 (RECV_B0) waits for SEND_B0 on stage 1") &&
            Catch::Contains("stage 1 action 0 (RECV_F0) waits for SEND_F0 on stage 0"));
  }
  SECTION("two stages sending to each other before receiving do not deadlock") {
    // Stage 1 sends B0's gradient while stage 0 still has F1's activation in
    // flight: sends never wait for their receiver.
    REQUIRE_NOTHROW(validate(parse(R"({"stages": [
        ["F0","SEND_F0","F1","SEND_F1","RECV_B0","B0","RECV_B1","B1"],
        ["RECV_F0","F0","B0","SEND_B0","RECV_F1","F1","B1","SEND_B1"]]})")));
  }
  SECTION("the compute checks hold in the explicit form too") {
    const Schedule split = with_communication(make_schedule("1f1b-2bp", 2, 2));
    Schedule no_w = split;
    no_w.stages[1].pop_back();  // W1
    REQUIRE_THROWS_WITH(validate(no_w), Catch::Contains("stage 1 has I1 but no W1"));
    Schedule w_first = split;
    auto& last = w_first.stages[1];
    std::rotate(last.begin(), last.end() - 1, last.end());  // W1 first
    REQUIRE_THROWS_WITH(validate(w_first), Catch::Contains("stage 1 action 0 (W1): runs before I1"));
    Schedule twice = split;
    twice.stages[0].insert(twice.stages[0].begin(), Action{ActionKind::forward, 0});
    REQUIRE_THROWS_WITH(validate(twice), Catch::Contains("stage 0 action 1 (F0): repeats action 0"));
  }
  SECTION("mixing the forms") {
    REQUIRE_THROWS_WITH(
        validate(parse(R"({"stages": [["F0","SEND_F0","RECV_B0","B0"], ["F0","B0"]]})")),
        Catch::Contains("mixes forms: stage 0 lists sends and receives, stage 1 lists none"));
  }
  SECTION("one stage has nothing to send or receive") {
    REQUIRE_THROWS_WITH(validate(parse(R"({"stages": [["F0","SEND_F0","B0"]]})")),
                        Catch::Contains("stage 0 action 1 (SEND_F0): the last stage"));
  }
  SECTION("neighbours in different micro-batch orders") {
    // No deadlock, but stage 1 would read micro-batch 0's activation as
    // micro-batch 1's: messages arrive in sending order. Refused in the
    // implicit form too, so that every tool judges the file alike.
    const Schedule crossed = parse(R"({"stages": [["F0","F1","B0","B1"], ["F1","B1","F0","B0"]]})");
    REQUIRE_THROWS_WITH(validate(crossed),
                        Catch::Contains("stage 1 action 0 (F1) is stage 1's forward number 1, so "
                                        "it reads activation number 1 from stage 0") &&
                            Catch::Contains("same micro-batch order"));
    REQUIRE_THROWS_WITH(validate(with_communication(crossed)),
                        Catch::Contains("stage 1 action 0 (RECV_F1) is stage 1's receive number 1 "
                                        "of activations from stage 0, which sends micro-batch 0") &&
                            Catch::Contains("same micro-batch order"));
  }
  SECTION("unknown action text in JSON") {
    REQUIRE_THROWS_WITH(parse(R"({"stages": [["F0","SEND_A0","B0"]]})"),
                        Catch::Contains("pipeline action \"SEND_A0\": valid forms are") &&
                            Catch::Contains("RECV_B<mb>"));
  }
}
