#pragma once
// How two ranks' values differ, for the message of a failed agreement check
// (require_same_on_all_ranks): "lr: rank 0 has 0.01, rank 1 has 0.02".
#include <functional>
#include <string>

namespace sdp::comm {

struct ValueDifference {
  std::string where;   // e.g. the first differing field; empty: the values alone
  std::string first;   // rank 0's value there, as shown
  std::string second;  // the differing rank's value there, as shown
};

// Describes how two different values differ.
using DescribeDifference =
    std::function<ValueDifference(const std::string& first, const std::string& second)>;

// Any text: both values quoted when short; for long ones the part around
// the first differing character, with `where` naming its position.
ValueDifference describe_text_difference(const std::string& first, const std::string& second);

// JSON objects (a run configuration): the first key, in key order, whose
// value differs or that only one of them has ("(absent)"),
// values as compact JSON. Text that is not a JSON object falls back to
// describe_text_difference.
ValueDifference describe_json_difference(const std::string& first, const std::string& second);

}  // namespace sdp::comm
