#pragma once
// The rank weights of a weighted subnet plan (engine/plan/subnet_plan.h),
// as a config writes them: plan = "weighted:LIST".
#include <string>
#include <vector>

namespace sdp {

// "80GiB,80GiB,40GiB,40GiB" or "2x4,1x4" (a value, then x and a repeat
// count): one weight per rank, sizes in bytes (engine/checkpoint/byte_size.h)
// or plain numbers. Throws sdp::Error naming the first bad item and the
// valid forms.
std::vector<double> parse_rank_weights(const std::string& list);

}  // namespace sdp
