#pragma once
// Components: the units of ownership of Subnetwork Data Parallelism.
// A component is a set of parameter slices (whole tensors, or row / column
// ranges of them). Block-level plans (B-SDP) assign whole blocks; neuron-level
// plans (N-SDP) assign groups of FFN hidden units or attention heads. Shared
// components are held by every rank.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sdp {

enum class ComponentKind : uint8_t { shared, block, ffn_group, head_group };

constexpr std::string_view component_kind_name(ComponentKind k) {
  constexpr std::string_view names[] = {"shared", "block", "ffn_group", "head_group"};
  return names[static_cast<size_t>(k)];
}

enum class Granularity : uint8_t { block, neuron };

// rows [start, start+length) (axis 0) or columns (axis 1) of one parameter;
// length == -1 means the whole tensor.
struct ParamSlice {
  int param = -1;
  int axis = 0;
  int64_t start = 0;
  int64_t length = -1;
};

struct Component {
  std::string name;  // "shared", "block.3", "block.3.ffn.2", "block.3.heads.1"
  ComponentKind kind = ComponentKind::shared;
  int block = -1;    // owning block, -1 for model-wide shared parameters
  std::vector<ParamSlice> slices;
  int64_t numel = 0; // parameters it covers
};

}  // namespace sdp
