// The pipeline simulator in bytes and seconds: memory peaks against hand
// counts, the link model's exact shifts, the timeline read-out shared by
// simulated and measured timings, the timeline file round trip, and the SVG
// picture's structure and well-formedness.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/pipeline/schedule.h"
#include "engine/pipeline/schedule_simulator.h"
#include "engine/pipeline/timeline.h"
#include "engine/pipeline/timeline_svg.h"
#include "test_temp_dir.h"

using namespace sdp::pipeline;

namespace {

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The pieces of each <g class="panel"> ... </g>, in order.
std::vector<std::string> panels_of(const std::string& svg) {
  std::vector<std::string> out;
  const std::string open = "<g class=\"panel\">";
  for (size_t at = svg.find(open); at != std::string::npos; at = svg.find(open, at + 1)) {
    const size_t end = svg.find("</g>", at);
    REQUIRE(end != std::string::npos);
    out.push_back(svg.substr(at, end - at));
  }
  return out;
}

// A small XML well-formedness check, enough for what timeline_svg writes:
// one root element, every element closed in order, attribute values quoted,
// no raw '<' in text and every '&' an entity. Returns "" or the problem.
std::string xml_problem(const std::string& xml) {
  std::vector<std::string> open;
  size_t i = 0, roots = 0;
  auto name_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == ':' || c == '_'; };
  auto check_entities = [](const std::string& text) -> bool {
    static const std::regex entity("&(amp|lt|gt|quot|apos|#[0-9]+);");
    for (size_t at = text.find('&'); at != std::string::npos; at = text.find('&', at + 1))
      if (!std::regex_search(text.substr(at, 8), entity, std::regex_constants::match_continuous)) return false;
    return true;
  };
  if (xml.rfind("<?xml", 0) == 0) {
    i = xml.find("?>");
    if (i == std::string::npos) return "unterminated XML declaration";
    i += 2;
  }
  while (i < xml.size()) {
    const size_t lt = xml.find('<', i);
    const std::string text = xml.substr(i, lt == std::string::npos ? std::string::npos : lt - i);
    if (!check_entities(text)) return "bad entity in text: " + text;
    if (open.empty() && text.find_first_not_of(" \n\t\r") != std::string::npos) return "text outside the root";
    if (lt == std::string::npos) break;
    const size_t gt = xml.find('>', lt);
    if (gt == std::string::npos) return "unterminated tag";
    std::string tag = xml.substr(lt + 1, gt - lt - 1);
    i = gt + 1;
    if (!tag.empty() && tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) return "closing </" + name + "> does not match";
      open.pop_back();
      continue;
    }
    const bool self_closing = !tag.empty() && tag.back() == '/';
    if (self_closing) tag.pop_back();
    size_t k = 0;
    while (k < tag.size() && name_char(tag[k])) ++k;
    if (k == 0) return "tag without a name: <" + tag + ">";
    const std::string name = tag.substr(0, k);
    // Attributes: name="value" separated by spaces, each name once.
    std::map<std::string, int> seen;
    while (k < tag.size()) {
      if (tag[k] == ' ') { ++k; continue; }
      const size_t eq = tag.find('=', k);
      if (eq == std::string::npos || eq + 1 >= tag.size() || tag[eq + 1] != '"') return "unquoted attribute in <" + tag + ">";
      const std::string attr = tag.substr(k, eq - k);
      for (char c : attr)
        if (!name_char(c)) return "bad attribute name '" + attr + "'";
      if (seen[attr]++) return "repeated attribute " + attr;
      const size_t close = tag.find('"', eq + 2);
      if (close == std::string::npos) return "unterminated attribute value";
      const std::string value = tag.substr(eq + 2, close - eq - 2);
      if (value.find('<') != std::string::npos || !check_entities(value)) return "bad attribute value " + value;
      k = close + 1;
    }
    if (open.empty() && ++roots > 1) return "more than one root element";
    if (!self_closing) open.push_back(name);
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  if (roots != 1) return "no root element";
  return "";
}

// Largest x + width of the compute rectangles of one panel.
double right_edge(const std::string& panel) {
  static const std::regex rect("<rect class=\"action [FBIW]\" x=\"([0-9.]+)\" y=\"[0-9.]+\" width=\"([0-9.]+)\"");
  double edge = 0;
  for (auto it = std::sregex_iterator(panel.begin(), panel.end(), rect); it != std::sregex_iterator(); ++it)
    edge = std::max(edge, std::stod((*it)[1]) + std::stod((*it)[2]));
  return edge;
}

// Per-stage costs in one place for the memory case: stage 0 holds 10 bytes
// of activations per micro-batch and 4 of deferred-W state; stage 1, 6 and 3.
SimulationCosts memory_costs() {
  SimulationCosts c;
  c.stages = {StageCosts{}, StageCosts{}};
  c.stages[0].activation_bytes = 10;
  c.stages[0].weight_grad_bytes = 4;
  c.stages[1].activation_bytes = 6;
  c.stages[1].weight_grad_bytes = 3;
  return c;
}

}  // namespace

// P = 2, M = 3. 1f1b, stage 0: F0 F1 B0 F2 B1 B2 holds 10, 20, 10, 20, 10, 0
// bytes (peak 20); stage 1: F0 B0 F1 B1 F2 B2 holds one set at most (6).
// 1f1b-2bp, stage 0: F0 F1 I0 F2 I1 I2 W0 W1 W2 holds 10, 20, 10+4, 20+4,
// 10+8, 12, 8, 4, 0 (peak 24: 1f1b's 20 plus one deferred W); stage 1: F0 I0
// F1 I1 F2 I2 ... holds 6, 3, 9, 6, 12, 9 (peak 12: one set plus two W).
// In flight (until B or W): 1f1b 2 and 1, 1f1b-2bp all 3 on both stages.
TEST_CASE("pipeline simulator: memory peaks in bytes, 1f1b against 1f1b-2bp", "[pipeline]") {
  const SimulationCosts costs = memory_costs();
  const SimulationResult one = simulate(make_schedule("1f1b", 2, 3), costs);
  const SimulationResult split = simulate(make_schedule("1f1b-2bp", 2, 3), costs);
  REQUIRE(one.peak_memory_bytes == std::vector<int64_t>{20, 6});
  REQUIRE(split.peak_memory_bytes == std::vector<int64_t>{24, 12});
  REQUIRE(one.peak_live_activations == std::vector<int>{2, 1});
  REQUIRE(split.peak_live_activations == std::vector<int>{3, 3});
  // With the defaults (1 byte per set, nothing for W) the bytes count sets.
  const SimulationResult counted = simulate(make_schedule("1f1b", 4, 8));
  REQUIRE(counted.peak_memory_bytes == std::vector<int64_t>{4, 3, 2, 1});
  // Without deferred-W state, 2BP frees each set at I: 1f1b's peak.
  SimulationCosts free_at_i = costs;
  for (auto& s : free_at_i.stages) s.weight_grad_bytes = 0;
  REQUIRE(simulate(make_schedule("1f1b-2bp", 2, 3), free_at_i).peak_memory_bytes ==
          std::vector<int64_t>{20, 6});
}

TEST_CASE("pipeline simulator: memory peaks follow times, ties in list order", "[pipeline]") {
  // Zero-length actions all at t = 0: list order says F0, B0, F1, B1, so
  // one set at most; ordering by time alone (releases first or acquires
  // first) would give 0 or 2.
  const Schedule s = make_schedule("gpipe", 1, 2);  // F0 F1 B0 B1
  Schedule serial = s;
  serial.stages[0] = {{ActionKind::forward, 0}, {ActionKind::backward, 0},
                      {ActionKind::forward, 1}, {ActionKind::backward, 1}};
  Timeline zero{{std::vector<ActionTiming>(4)}};
  REQUIRE(memory_peaks(serial, zero).bytes == std::vector<int64_t>{1});
  REQUIRE(memory_peaks(s, zero).bytes == std::vector<int64_t>{2});
  // A measured timeline where B0 ends exactly when F1 starts: the intervals
  // are half-open, so they do not overlap.
  const Timeline touching{{{{0, 1}, {1, 3}, {3, 4}, {4, 6}}}};
  REQUIRE(memory_peaks(serial, touching).bytes == std::vector<int64_t>{1});
  REQUIRE(memory_peaks(serial, touching).in_flight == std::vector<int>{1});
  REQUIRE_THROWS_WITH(memory_peaks(serial, Timeline{{{{0, 1}}}}),
                      Catch::Contains("stage 0 has 1 timings for 4 actions"));
}

// gpipe with M = 1 is one chain: F on stage s crosses boundaries 0..s-1, B
// on stage s crosses all P - 1 forward and then P-1..s backward. Every
// timing moves by exactly the sum of its hops' latency + bytes / bandwidth.
TEST_CASE("pipeline simulator: link latency and bandwidth shift timings per hop", "[pipeline]") {
  const int P = 4;
  const Schedule s = make_schedule("gpipe", P, 1);
  SimulationCosts base;
  base.stages = {{1.0, 3.0, 1.5, 1.5}, {2.0, 5.0, 2.5, 2.5}, {1.0, 2.0, 1.0, 1.0}, {0.5, 1.0, 0.5, 0.5}};
  SimulationCosts linked = base;
  linked.hop_latency = 0.25;
  linked.boundary_bytes = {1000, 2000, 3000};
  linked.link_bandwidth = 1000.0;  // boundary b costs 0.25 + (b + 1)
  auto hop = [](int b) { return 0.25 + (b + 1); };
  REQUIRE(hop_time(linked, 2) == 3.25);
  const SimulationResult r0 = simulate(s, base);
  const SimulationResult r1 = simulate(s, linked);
  double forward_hops = 0;
  for (int b = 0; b < P - 1; ++b) forward_hops += hop(b);
  for (int st = 0; st < P; ++st) {
    INFO("stage " << st);
    double f_shift = 0, b_shift = forward_hops;
    for (int b = 0; b < st; ++b) f_shift += hop(b);
    for (int b = st; b < P - 1; ++b) b_shift += hop(b);
    REQUIRE(r1.timings[st][0].start - r0.timings[st][0].start == f_shift);
    REQUIRE(r1.timings[st][0].end - r0.timings[st][0].end == f_shift);
    REQUIRE(r1.timings[st][1].start - r0.timings[st][1].start == b_shift);
  }
  REQUIRE(r1.makespan - r0.makespan == 2 * forward_hops);
  // Bandwidth 0 is an infinite link: the bytes cost nothing, latency stays.
  SimulationCosts latency_only = linked;
  latency_only.link_bandwidth = 0;
  REQUIRE(simulate(s, latency_only).makespan - r0.makespan == 2 * (P - 1) * 0.25);
  SimulationCosts bad = linked;
  bad.boundary_bytes = {1, 2};
  REQUIRE_THROWS_WITH(simulate(s, bad), Catch::Contains("2 boundary_bytes entries for 4 stages (valid: 3"));
  bad = linked;
  bad.link_bandwidth = -1;
  REQUIRE_THROWS_WITH(simulate(s, bad), Catch::Contains("link_bandwidth = -1"));
  bad = linked;
  bad.stages[1].weight_grad_bytes = -5;
  REQUIRE_THROWS_WITH(simulate(s, bad), Catch::Contains("stage 1 has negative activation_bytes or weight_grad_bytes"));
}

TEST_CASE("pipeline timeline: measured bubbles come from the same read-out", "[pipeline]") {
  SECTION("a hand-made measured timeline") {
    // Stage 0 computes F0 [0, 1] and B0 [3, 5]: busy 3 of 5; stage 1 waits
    // 0.5 in a receive (not busy), then F0 and B0 for 1.5.
    Schedule s{1, {{{ActionKind::forward, 0}, {ActionKind::backward, 0}},
                   {{ActionKind::recv_activation, 0}, {ActionKind::forward, 0}, {ActionKind::backward, 0}}}};
    const Timeline t{{{{0, 1}, {3, 5}}, {{1, 1.5}, {1.5, 2.5}, {2.5, 3}}}};
    const TimelineStats stats = timeline_stats(s, t);
    REQUIRE(stats.makespan == 5);
    REQUIRE(stats.busy == std::vector<double>{3, 1.5});
    REQUIRE(stats.bubble_fraction == std::vector<double>{0.4, 0.7});
    REQUIRE(stats.mean_bubble() == Approx(0.55).epsilon(1e-12));
  }
  SECTION("the simulator's own timings, read back as a measurement") {
    SimulationCosts costs;
    costs.stages = {{1.1, 2.3, 1.2, 1.1}, {0.9, 1.7, 0.8, 0.9}, {1.3, 2.1, 1.0, 1.1}};
    costs.hop_latency = 0.07;
    for (const auto& name : schedule_names()) {
      INFO(name);
      const Schedule s = make_schedule(name, 3, 5);
      const SimulationResult r = simulate(s, costs);
      const Timeline measured{r.timings};
      const TimelineStats stats = timeline_stats(s, measured);
      REQUIRE(stats.makespan == r.makespan);
      REQUIRE(stats.busy == r.busy);
      REQUIRE(stats.bubble_fraction == r.bubble_fraction);
      REQUIRE(memory_peaks(s, measured, costs).bytes == r.peak_memory_bytes);
    }
  }
  SECTION("refusals") {
    const Schedule s = make_schedule("gpipe", 1, 1);
    REQUIRE_THROWS_WITH(timeline_stats(s, Timeline{{{{0, 1}, {2, 1}}}}),
                        Catch::Contains("stage 0 action 1 (B0) runs from 2 to 1"));
    REQUIRE_THROWS_WITH(timeline_stats(s, Timeline{{{{-1, 1}, {2, 3}}}}), Catch::Contains("0 <= start <= end"));
    REQUIRE_THROWS_WITH(timeline_stats(s, Timeline{}), Catch::Contains("0 stages of timings for a schedule of 1"));
  }
}

TEST_CASE("pipeline timeline: JSON round trip", "[pipeline]") {
  sdp::testing::TempDir dir;
  SimulationCosts costs;
  costs.stages = {{0.1, 0.3, 0.1, 0.2}, {0.7, 1.3, 0.6, 0.7}};
  costs.hop_latency = 0.013;
  for (const auto& name : schedule_names()) {
    INFO(name);
    const Schedule s = make_schedule(name, 2, 4);
    const SimulationResult r = simulate(s, costs);
    const std::string path = (dir.path() / (name + ".timeline.json")).string();
    save_timeline(path, s, r);
    const TimedSchedule back = load_timeline(path);
    REQUIRE(back.schedule.microbatches == s.microbatches);
    REQUIRE(back.schedule.stages == s.stages);
    REQUIRE(back.timeline.timings.size() == r.timings.size());
    for (size_t st = 0; st < r.timings.size(); ++st)
      for (size_t k = 0; k < r.timings[st].size(); ++k) {
        REQUIRE(back.timeline.timings[st][k].start == r.timings[st][k].start);  // exact: doubles round-trip
        REQUIRE(back.timeline.timings[st][k].end == r.timings[st][k].end);
      }
  }
  const auto j = nlohmann::json::parse(R"({"stages": [[{"action": "F0", "start": 0, "end": 1},
                                                      {"action": "B0", "start": 1, "end": 3}]]})");
  const TimedSchedule t = timed_schedule_from_json(j);
  REQUIRE(t.schedule.microbatches == 1);
  REQUIRE(timeline_to_json(t.schedule, t.timeline)["stages"] == j["stages"]);
  REQUIRE_THROWS_WITH(timed_schedule_from_json(nlohmann::json::parse(
                          R"({"stages": [[{"action": "F0", "start": 0, "stop": 1}]]})")),
                      Catch::Contains("unknown key \"stop\" (valid: action, start, end)"));
  REQUIRE_THROWS_WITH(timed_schedule_from_json(nlohmann::json::parse(
                          R"({"stages": [[{"action": "F0", "start": 2, "end": 1}]]})")),
                      Catch::Contains("runs from 2 to 1"));
  REQUIRE_THROWS_WITH(timed_schedule_from_json(nlohmann::json::parse(R"({"stages": [["F0"]]})")),
                      Catch::Contains("stage 0 entry 0 is not an object"));
}

TEST_CASE("pipeline timeline SVG: one rect per compute action per panel, well-formed", "[pipeline]") {
  const int P = 4, M = 8;
  std::vector<TimelinePanel> panels;
  for (const std::string name : {"1f1b", "1f1b-2bp", "zb-h1"}) {
    const Schedule s = make_schedule(name, P, M);
    panels.push_back({name, s, simulate(s)});
  }
  panels[0].title = "1f1b <baseline> & \"friends\"";  // must be escaped
  const std::string svg = timeline_svg(panels);
  REQUIRE(xml_problem(svg) == "");
  REQUIRE(svg.find("&lt;baseline&gt; &amp; &quot;friends&quot;") != std::string::npos);
  const std::vector<std::string> drawn = panels_of(svg);
  REQUIRE(drawn.size() == panels.size());
  for (size_t i = 0; i < panels.size(); ++i) {
    INFO(panels[i].title);
    std::map<char, size_t> expected;
    size_t compute = 0;
    for (const auto& stage : panels[i].schedule.stages)
      for (const Action& a : stage) {
        ++compute;
        ++expected["FBIW"[static_cast<int>(a.kind)]];
      }
    REQUIRE(count_of(drawn[i], "<rect class=\"action ") == compute);
    for (char k : std::string("FBIW"))
      REQUIRE(count_of(drawn[i], std::string("<rect class=\"action ") + k + "\"") == expected[k]);
    REQUIRE(count_of(drawn[i], "stage ") >= static_cast<size_t>(P));  // row labels
    REQUIRE(count_of(drawn[i], "class=\"tick\"") >= 2);
  }
  REQUIRE(count_of(svg, "class=\"legend\"") == 5);
  // A shared scale puts the longest step (1f1b) at the right end of the
  // plot and the shorter zb-h1 short of it; its own scale stretches it.
  REQUIRE(right_edge(drawn[0]) == Approx(1000 - 64).margin(0.02));
  REQUIRE(right_edge(drawn[2]) < right_edge(drawn[0]) - 10);
  SvgOptions own;
  own.shared_time_scale = false;
  REQUIRE(right_edge(panels_of(timeline_svg(panels, own))[2]) == Approx(1000 - 64).margin(0.02));
  // Per-row bubble at the right: 1f1b at uniform cost, (P-1)/(M+P-1) = 27.27%.
  REQUIRE(count_of(drawn[0], ">27.27%</text>") == static_cast<size_t>(P));
}

TEST_CASE("pipeline timeline SVG: communication is thin or left out; file written whole", "[pipeline]") {
  // Stage 0: F0, SEND_F0, B0 after RECV_B0; stage 1: RECV_F0, F0, B0, SEND_B0.
  const Schedule s{1,
                   {{{ActionKind::forward, 0}, {ActionKind::send_activation, 0}, {ActionKind::recv_grad, 0},
                     {ActionKind::backward, 0}},
                    {{ActionKind::recv_activation, 0}, {ActionKind::forward, 0}, {ActionKind::backward, 0},
                     {ActionKind::send_grad, 0}}}};
  const Timeline t{{{{0, 1}, {1, 1.2}, {1.2, 4.5}, {4.5, 6.5}}, {{0, 1.3}, {1.3, 2.3}, {2.3, 4.3}, {4.3, 4.4}}}};
  const std::vector<TimelinePanel> panels{{"explicit sends", s, t}};
  const std::string svg = timeline_svg(panels);
  REQUIRE(xml_problem(svg) == "");
  REQUIRE(count_of(svg, "<rect class=\"action ") == 4);
  REQUIRE(count_of(svg, "<rect class=\"comm\"") == 4);
  SvgOptions quiet;
  quiet.show_communication = false;
  REQUIRE(count_of(timeline_svg(panels, quiet), "<rect class=\"comm\"") == 0);
  // Each stage computes F0 + B0 = 3 of the 6.5 step: 53.85% bubble on both rows.
  REQUIRE(count_of(svg, ">53.85%</text>") == 2);

  sdp::testing::TempDir dir;
  const std::string path = (dir.path() / "timeline.svg").string();
  write_timeline_svg(path, panels);
  std::ifstream in(path);
  std::stringstream read;
  read << in.rdbuf();
  REQUIRE(read.str() == svg);

  REQUIRE_THROWS_WITH(timeline_svg({}), Catch::Contains("no panels"));
  REQUIRE_THROWS_WITH(timeline_svg({{"short", s, Timeline{}}}), Catch::Contains("panel 0 (\"short\")"));
  SvgOptions narrow;
  narrow.width = 50;
  REQUIRE_THROWS_WITH(timeline_svg(panels, narrow), Catch::Contains("width 50 px (valid: 228 or more)"));
}
