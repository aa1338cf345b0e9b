#include "engine/pipeline/costs_json.h"

#include <cmath>
#include <initializer_list>

#include "engine/checkpoint/json_file.h"
#include "engine/core/error.h"
#include "engine/core/json_integer.h"

namespace sdp::pipeline {


const char* const kCostsForm =
    "{\"stages\": [{\"forward\": s, \"backward\": s, \"input_grad\": s, \"weight_grad\": s, "
    "\"activation_bytes\": n, \"weight_grad_bytes\": n}, ...], \"boundary_bytes\": [n, ...], "
    "\"link\": {\"latency\": s, \"bandwidth\": bytes_per_s}}";

namespace {

void only_keys(const nlohmann::json& object, const std::string& where,
               std::initializer_list<const char*> valid) {
  if (!object.is_object()) fail("costs: ", where, " must be an object (expected ", kCostsForm, ")");
  for (const auto& [key, value] : object.items()) {
    (void)value;
    bool known = false;
    std::string list;
    for (const char* v : valid) {
      known = known || key == v;
      list += (list.empty() ? "" : ", ") + std::string(v);
    }
    if (!known) fail("costs: ", where, " has an unknown key \"", key, "\" (valid: ", list, ")");
  }
}

// Reads `key` into `out` when present: a finite number >= 0.
void read_seconds(const nlohmann::json& object, const char* key, const std::string& where, double& out) {
  if (!object.contains(key)) return;
  const auto& v = object[key];
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
    fail("costs: ", where, " \"", key, "\" = ", v.dump(), " is invalid (valid: a number >= 0)");
  out = v.get<double>();
}

// A whole number of bytes >= 0 (written as an integer or as 1e9).
int64_t bytes_value(const nlohmann::json& v, const std::string& what) {
  if (v.is_number_integer()) return json_integer<int64_t>(v, "costs: " + what, 0);
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d >= 0 && d <= 4.0e18 && std::floor(d) == d) return static_cast<int64_t>(d);
  }
  fail("costs: ", what, " = ", v.dump(), " is invalid (valid: a whole number of bytes >= 0)");
}

void read_bytes(const nlohmann::json& object, const char* key, const std::string& where, int64_t& out) {
  if (object.contains(key)) out = bytes_value(object[key], where + " \"" + key + "\"");
}

}  // namespace

SimulationCosts costs_from_json(const nlohmann::json& j, int stages) {
  only_keys(j, "the top level", {"stages", "boundary_bytes", "link"});
  SimulationCosts c;
  if (j.contains("stages")) {
    const auto& list = j["stages"];
    if (!list.is_array()) fail("costs: \"stages\" must be a list of per-stage objects");
    if (static_cast<int>(list.size()) != stages)
      fail("costs: \"stages\" lists ", list.size(), " stages for a ", stages,
           "-stage pipeline (valid: ", stages, " entries, or no \"stages\" for the uniform defaults)");
    for (size_t st = 0; st < list.size(); ++st) {
      const std::string where = format("stage ", st);
      only_keys(list[st], where,
                {"forward", "backward", "input_grad", "weight_grad", "activation_bytes", "weight_grad_bytes"});
      StageCosts s;
      read_seconds(list[st], "forward", where, s.forward);
      read_seconds(list[st], "backward", where, s.backward);
      read_seconds(list[st], "input_grad", where, s.input_grad);
      read_seconds(list[st], "weight_grad", where, s.weight_grad);
      read_bytes(list[st], "activation_bytes", where, s.activation_bytes);
      read_bytes(list[st], "weight_grad_bytes", where, s.weight_grad_bytes);
      c.stages.push_back(s);
    }
  }
  if (j.contains("boundary_bytes")) {
    const auto& list = j["boundary_bytes"];
    if (!list.is_array()) fail("costs: \"boundary_bytes\" must be a list of byte counts");
    if (static_cast<int>(list.size()) != stages - 1)
      fail("costs: \"boundary_bytes\" lists ", list.size(), " boundaries for a ", stages,
           "-stage pipeline (valid: ", stages - 1, ", one per pair of adjacent stages)");
    for (size_t b = 0; b < list.size(); ++b)
      c.boundary_bytes.push_back(bytes_value(list[b], format("boundary_bytes[", b, "]")));
  }
  if (j.contains("link")) {
    only_keys(j["link"], "\"link\"", {"latency", "bandwidth"});
    read_seconds(j["link"], "latency", "link", c.hop_latency);
    read_seconds(j["link"], "bandwidth", "link", c.link_bandwidth);
  }
  return c;
}

SimulationCosts load_costs(const std::string& path, int stages) {
  const nlohmann::json j = checkpoint::read_json_file(path);
  try {
    return costs_from_json(j, stages);
  } catch (const Error& e) {
    fail("--costs '", path, "': ", e.what());
  }
}

nlohmann::json costs_to_json(const SimulationCosts& c) {
  nlohmann::json stages = nlohmann::json::array();
  for (const StageCosts& s : c.stages)
    stages.push_back({{"forward", s.forward},
                      {"backward", s.backward},
                      {"input_grad", s.input_grad},
                      {"weight_grad", s.weight_grad},
                      {"activation_bytes", s.activation_bytes},
                      {"weight_grad_bytes", s.weight_grad_bytes}});
  nlohmann::json j = {{"link", {{"latency", c.hop_latency}, {"bandwidth", c.link_bandwidth}}}};
  if (!c.stages.empty()) j["stages"] = stages;
  if (!c.boundary_bytes.empty()) j["boundary_bytes"] = c.boundary_bytes;
  return j;
}

}  // namespace sdp::pipeline
