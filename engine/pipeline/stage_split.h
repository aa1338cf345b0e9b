#pragma once
// Cutting a model's blocks into pipeline stages: either as the user lists
// them (--stage-blocks 3,3,3,3) or balanced over counted per-site costs
// (site_costs.h), so that the slowest stage, which sets the pipeline's pace,
// is as fast as any contiguous cut allows.
#include <string>
#include <vector>

#include "models/common/stage_span.h"

namespace sdp::pipeline {

// "3,3,3,3" -> {3, 3, 3, 3}: positive integers separated by commas, no
// spaces, no empty entries. Fails naming the text and the valid form.
std::vector<int> parse_stage_blocks(const std::string& text);

// The stages of a model with `blocks` blocks (L) cut into `stages` (P)
// contiguous spans, in order, every span at least one block; the first holds
// the input stage and the last the output stage (StageSpan), and every span
// has an explicit end_block (P = 1: the whole model).
//  * stage_blocks non-empty: exactly those block counts (P entries, each
//    >= 1, summing to L).
//  * stage_blocks empty: balanced. site_costs has one cost per site, L + 2
//    (model.h: 0 input stage, 1 + b block b, L + 1 output stage), finite
//    and >= 0; empty = every block costs 1 and the ends nothing. A stage
//    costs the sum of its blocks' costs, plus site 0 on the first stage and
//    site L + 1 on the last. The cut minimizes the largest stage cost
//    exactly; among cuts that reach the minimum it takes the one whose cut
//    positions are lexicographically smallest (every cut as early as the
//    optimum allows), so the answer depends only on the inputs.
// Fails for P < 1, for P > L ("a pipeline of P stages needs at least P
// blocks; model <model_name> has L"), and for stage_blocks or site_costs of
// the wrong form, naming the model's block count and the given list.
std::vector<StageSpan> split_stages(int blocks, int stages, const std::vector<int>& stage_blocks,
                                    const std::vector<double>& site_costs,
                                    const std::string& model_name = "the model");

// The cost of each span under site_costs as split_stages counts it (input
// stage on the first span, output stage on the last); site_costs as there
// (empty = every block 1).
std::vector<double> stage_cost_sums(int blocks, const std::vector<StageSpan>& spans,
                                    const std::vector<double>& site_costs);

// "3,3,3,3": the block counts of spans, the inverse of parse_stage_blocks.
std::string describe_stage_blocks(int blocks, const std::vector<StageSpan>& spans);

}  // namespace sdp::pipeline
