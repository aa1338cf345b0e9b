#include "engine/plan/plan_file.h"

#include "engine/checkpoint/json_file.h"
#include "engine/core/error.h"

namespace sdp {

std::vector<std::vector<bool>> read_plan_matrix(const std::string& path, int ranks,
                                                int components) {
  const nlohmann::json j = checkpoint::read_json_file(path);
  const auto where = [&] { return format("plan file '", path, "'"); };
  if (!j.is_object() || !j.contains("matrix") || !j["matrix"].is_array())
    fail(where(), ": expected {\"matrix\": [\"0101...\", ...]} (one string per rank)");
  const nlohmann::json& rows = j["matrix"];
  if (static_cast<int>(rows.size()) != ranks)
    fail(where(), " has ", rows.size(), " rows; this job's plan has ", ranks, " ranks",
         " (data-parallel replicas of a pipeline stage count once)");
  std::vector<std::vector<bool>> owns;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (!rows[r].is_string()) fail(where(), ": row ", r, " is not a string of 0 and 1");
    const std::string row = rows[r].get<std::string>();
    if (static_cast<int>(row.size()) != components)
      fail(where(), ": row ", r, " has ", row.size(), " columns; the model has ", components,
           " maskable components");
    std::vector<bool> bits;
    for (char c : row) {
      if (c != '0' && c != '1') fail(where(), ": row ", r, " has '", c, "' (valid: 0, 1)");
      bits.push_back(c == '1');
    }
    owns.push_back(std::move(bits));
  }
  return owns;
}

}  // namespace sdp
