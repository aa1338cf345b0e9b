#pragma once
// The rank weights of a weighted subnet plan (engine/plan/subnet_plan.h),
// as a config writes them: plan = "weighted:LIST".
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/config_limits.h"

namespace sdp {

// "80GiB,80GiB,40GiB,40GiB" or "2x4,1x4" (a value, then x and a repeat
// count): one weight per rank, sizes in bytes (engine/checkpoint/byte_size.h)
// or plain numbers. The repeat counts are summed first and the total checked
// against `max_ranks` (the job's world where it is known, else the largest
// world a job may have) before any weight is expanded: a list that names
// more ranks than that fails without allocating for them. Throws sdp::Error
// naming the first bad item and the valid forms, or the total and the bound.
std::vector<double> parse_rank_weights(const std::string& list,
                                       int64_t max_ranks = config_limits::kWorld);

}  // namespace sdp
