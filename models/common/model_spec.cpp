#include "models/common/model_spec.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "engine/core/error.h"
#include "models/common/config_json.h"

namespace sdp {

namespace {
constexpr const char* kConfigPrefix = "config:";

bool valid_key(const std::string& key) {
  if (key.empty()) return false;
  for (char c : key)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}
}  // namespace

const char* model_spec_forms() {
  return "NAME (a named model), NAME:key=value,... (a named model with fields replaced, e.g. "
         "mini:vocab=1024,layers=8), or config:PATH (a Hugging Face LLaMA config.json)";
}

bool ModelSpec::has(const std::string& key) const {
  for (const auto& [k, v] : overrides)
    if (k == key) return true;
  return false;
}

std::string ModelSpec::text() const {
  if (!config_path.empty()) return kConfigPrefix + config_path;
  auto sorted = overrides;
  std::sort(sorted.begin(), sorted.end());
  std::string out = name;
  for (size_t i = 0; i < sorted.size(); ++i)
    out += (i == 0 ? ":" : ",") + sorted[i].first + "=" + sorted[i].second;
  return out;
}

ModelSpec ModelSpec::parse(const std::string& text) {
  ModelSpec spec;
  if (text.rfind(kConfigPrefix, 0) == 0) {
    spec.config_path = text.substr(std::string(kConfigPrefix).size());
    if (spec.config_path.empty())
      fail("model '", text, "': config: needs the path of a config.json (config:PATH)");
    return spec;
  }
  const size_t colon = text.find(':');
  spec.name = text.substr(0, colon);
  if (spec.name.empty()) fail("model '", text, "' names no model (valid: ", model_spec_forms(), ")");
  if (colon == std::string::npos) return spec;
  const std::string rest = text.substr(colon + 1);
  size_t start = 0;
  while (true) {
    const size_t comma = rest.find(',', start);
    const std::string item = rest.substr(start, comma == std::string::npos ? comma : comma - start);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size() || !valid_key(item.substr(0, eq)))
      fail("model '", text, "': '", item, "' is not key=value (valid: ", model_spec_forms(), ")");
    const std::string key = item.substr(0, eq);
    if (spec.has(key)) fail("model '", text, "': ", key, " is given twice");
    spec.overrides.emplace_back(key, item.substr(eq + 1));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return spec;
}

std::string with_model_override(const std::string& spec_text, const std::string& key,
                                const std::string& value) {
  ModelSpec spec = ModelSpec::parse(spec_text);
  if (!spec.config_path.empty())
    fail("model '", spec_text, "': its config.json states ", key,
         "; edit the file rather than overriding it");
  for (auto& [k, v] : spec.overrides)
    if (k == key) {
      v = value;
      return spec.text();
    }
  spec.overrides.emplace_back(key, value);
  return spec.text();
}

namespace model_spec {

int64_t positive(const std::string& key, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno == ERANGE || v <= 0 || v > model_config::kMaxSize ||
      !(value[0] >= '0' && value[0] <= '9'))
    fail("model override ", key, "=", value, " is invalid (valid: an integer in [1, ",
         model_config::kMaxSize, "])");
  return static_cast<int64_t>(v);
}

double positive_number(const std::string& key, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v) || !(v > 0))
    fail("model override ", key, "=", value, " is invalid (valid: a positive number)");
  return v;
}

bool boolean(const std::string& key, const std::string& value) {
  if (value == "true") return true;
  if (value == "false") return false;
  fail("model override ", key, "=", value, " is invalid (valid: true or false)");
}

std::vector<int64_t> positive_list(const std::string& key, const std::string& value,
                                   size_t count, size_t max_count) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (true) {
    const size_t dash = value.find('-', start);
    const std::string item =
        value.substr(start, dash == std::string::npos ? dash : dash - start);
    out.push_back(positive(key, item));
    if (dash == std::string::npos) break;
    start = dash + 1;
  }
  if (count > 0 && out.size() != count)
    fail("model override ", key, "=", value, " has ", out.size(), " entries (valid: ", count,
         " positive integers joined by '-', e.g. 64-128-256-512)");
  if (count == 0 && out.size() > max_count)
    fail("model override ", key, "=", value, " has ", out.size(), " entries (valid: at most ",
         max_count, ")");
  return out;
}

void unknown_key(const std::string& model, const std::string& key,
                 const std::vector<std::string>& valid) {
  std::string names;
  for (const auto& k : valid) names += (names.empty() ? "" : ", ") + k;
  fail("model '", model, "': unknown key '", key, "' (valid: ", names, ")");
}

}  // namespace model_spec

}  // namespace sdp
