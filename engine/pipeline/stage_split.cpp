#include "engine/pipeline/stage_split.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "engine/core/error.h"

namespace sdp::pipeline {

namespace {

// Largest count one entry of --stage-blocks may name: far above any model's
// block count, low enough that a sum of many entries cannot overflow.
constexpr int64_t kMaxEntry = 1000000;

std::string join(const std::vector<int>& v) {
  std::string s;
  for (size_t k = 0; k < v.size(); ++k) {
    if (k) s += ',';
    s += std::to_string(v[k]);
  }
  return s;
}

// site_costs as split_stages reads it: L + 2 finite, non-negative entries
// (empty = every block 1, the ends 0).
std::vector<double> resolved_costs(int blocks, const std::vector<double>& site_costs,
                                   const std::string& model_name) {
  if (site_costs.empty()) {
    std::vector<double> uniform(static_cast<size_t>(blocks) + 2, 1.0);
    uniform.front() = uniform.back() = 0.0;
    return uniform;
  }
  if (site_costs.size() != static_cast<size_t>(blocks) + 2)
    fail("pipeline stages: ", site_costs.size(), " site costs given for ", model_name, " with ",
         blocks, " blocks (valid: ", blocks + 2,
         " costs, input stage, one per block, output stage)");
  for (size_t s = 0; s < site_costs.size(); ++s)
    if (!std::isfinite(site_costs[s]) || site_costs[s] < 0)
      fail("pipeline stages: the cost of site ", s, " of ", model_name, " is ", site_costs[s],
           " (valid: a finite number >= 0)");
  return site_costs;
}

std::vector<StageSpan> spans_of(const std::vector<int>& counts) {
  std::vector<StageSpan> spans;
  int first = 0;
  for (int n : counts) {
    spans.push_back(StageSpan{first, first + n});
    first += n;
  }
  return spans;
}

// Exact min-max cut by dynamic programming over suffixes, O(P L^2).
std::vector<int> balanced_counts(int L, int P, const std::vector<double>& cost) {
  std::vector<double> prefix(static_cast<size_t>(L) + 1, 0.0);  // [L + 1] over block costs
  for (int b = 0; b < L; ++b) prefix[b + 1] = prefix[b] + cost[static_cast<size_t>(b) + 1];
  const double in = cost.front(), out = cost.back();
  // Stage k over blocks [i, j).
  auto stage_cost = [&](int k, int i, int j) {
    return (prefix[j] - prefix[i]) + (k == 0 ? in : 0.0) + (k == P - 1 ? out : 0.0);
  };
  // best[k][i]: the smallest largest cost of blocks [i, L) cut into stages
  // k .. P - 1; defined where L - i >= P - k (every stage gets a block).
  std::vector<std::vector<double>> best(static_cast<size_t>(P),
                                        std::vector<double>(static_cast<size_t>(L), 0.0));
  for (int i = P - 1; i < L; ++i) best[P - 1][i] = stage_cost(P - 1, i, L);
  for (int k = P - 2; k >= 0; --k)
    for (int i = k; i <= L - (P - k); ++i) {
      double b = INFINITY;
      for (int j = i + 1; j <= L - (P - 1 - k); ++j)
        b = std::min(b, std::max(stage_cost(k, i, j), best[k + 1][j]));
      best[k][i] = b;
    }
  // Every cut as early as the optimum allows: the stages already cut stay
  // within it, so what is left only has to reach it, not its own optimum.
  const double optimum = best[0][0];
  std::vector<int> counts;
  int i = 0;
  for (int k = 0; k < P - 1; ++k) {
    int j = i + 1;
    while (std::max(stage_cost(k, i, j), best[k + 1][j]) > optimum) ++j;
    SDP_CHECK(j <= L - (P - 1 - k), "balanced stage cut lost its optimum at stage ", k);
    counts.push_back(j - i);
    i = j;
  }
  counts.push_back(L - i);
  return counts;
}

}  // namespace

std::vector<int> parse_stage_blocks(const std::string& text) {
  auto bad = [&](const std::string& why) -> std::vector<int> {
    fail("--stage-blocks '", text, "': ", why,
         " (valid: blocks per stage as positive integers separated by commas, e.g. 3,3,3,3)");
  };
  if (text.empty()) return bad("no block counts");
  std::vector<int> counts;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos
                                                                            : comma - start);
    if (item.empty()) return bad("an empty entry");
    int64_t n = 0;
    for (char ch : item) {
      if (ch < '0' || ch > '9') return bad("'" + item + "' is not a positive integer");
      n = n * 10 + (ch - '0');
      if (n > kMaxEntry) return bad("'" + item + "' is larger than " + std::to_string(kMaxEntry));
    }
    if (n == 0) return bad("a stage of 0 blocks");
    counts.push_back(static_cast<int>(n));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return counts;
}

std::vector<StageSpan> split_stages(int blocks, int stages, const std::vector<int>& stage_blocks,
                                    const std::vector<double>& site_costs,
                                    const std::string& model_name) {
  if (blocks < 1) fail("pipeline stages: model ", model_name, " has no blocks to cut");
  if (stages < 1) fail("pipeline stages: ", stages, " stages (valid: 1 .. ", blocks, ")");
  if (stages > blocks)
    fail("a pipeline of ", stages, " stages needs at least ", stages, " blocks; model ",
         model_name, " has ", blocks);
  if (!stage_blocks.empty()) {
    int64_t sum = 0;
    bool positive = true;
    for (int n : stage_blocks) {
      sum += n;
      positive = positive && n >= 1;
    }
    if (static_cast<int>(stage_blocks.size()) != stages || !positive || sum != blocks)
      fail("--stage-blocks ", join(stage_blocks), ": model ", model_name, " has ", blocks,
           " blocks, and a pipeline of ", stages, " stages needs ", stages,
           " counts, each >= 1, summing to ", blocks, " (got ", stage_blocks.size(),
           " summing to ", sum, ")");
    return spans_of(stage_blocks);
  }
  const std::vector<double> cost = resolved_costs(blocks, site_costs, model_name);
  return spans_of(balanced_counts(blocks, stages, cost));
}

std::vector<double> stage_cost_sums(int blocks, const std::vector<StageSpan>& spans,
                                    const std::vector<double>& site_costs) {
  const std::vector<double> cost = resolved_costs(blocks, site_costs, "the model");
  std::vector<double> sums;
  for (const StageSpan& span : spans) {
    SDP_CHECK(span.first_block >= 0 && span.first_block < span.end(blocks) &&
                  span.end(blocks) <= blocks,
              "stage ", span.describe(blocks), " is not a span of a model with ", blocks,
              " blocks");
    double sum = 0;
    for (int site = 0; site < blocks + 2; ++site)
      if (span.contains_site(site, blocks)) sum += cost[static_cast<size_t>(site)];
    sums.push_back(sum);
  }
  return sums;
}

std::string describe_stage_blocks(int blocks, const std::vector<StageSpan>& spans) {
  std::vector<int> counts;
  for (const StageSpan& span : spans) counts.push_back(span.end(blocks) - span.first_block);
  return join(counts);
}

}  // namespace sdp::pipeline
