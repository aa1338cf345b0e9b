#pragma once
// Components: the units of ownership of Subnetwork Data Parallelism.
// Block-level plans (B-SDP) assign whole blocks (transformer blocks, ResNet
// basic blocks); neuron-level plans (N-SDP) assign groups of FFN hidden
// units or attention heads (LLaMA) or of a basic block's inner channels
// (ResNet: conv1's output channels = bn1's channels = conv2's input
// channels). Shared components (embeddings, final norm, head; the ResNet
// stem, downsampling shortcuts and classifier; at neuron granularity also
// what every neuron group of a block reads or writes: the LLaMA blocks'
// norms, the ResNet blocks' bn2) are held by every rank.
//
// A component owns whole parameters of the model's ParameterSet (a neuron
// group's rows / columns are stored as pieces, see parameter_set.h), and all
// of them live in one storage group, so the component moves in one
// collective together with the other components of that group.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sdp {

enum class ComponentKind : uint8_t { shared, block, ffn_group, head_group, channel_group };

constexpr std::string_view component_kind_name(ComponentKind k) {
  constexpr std::string_view names[] = {"shared", "block", "ffn_group", "head_group",
                                        "channel_group"};
  return names[static_cast<size_t>(k)];
}

enum class Granularity : uint8_t { block, neuron };

constexpr std::string_view granularity_name(Granularity g) {
  return g == Granularity::block ? "block" : "neuron";
}

struct Component {
  std::string name;  // "shared", "block.3", "block.3.ffn.2", "block.3.heads.1", "block.3.channels.5"
  ComponentKind kind = ComponentKind::shared;
  int block = -1;    // owning block, -1 for model-wide shared parameters
  int index = 0;     // group index inside its block (neuron kinds)
  std::vector<int> params;  // parameter ids (set by the model's constructor)
  int64_t numel = 0;        // parameters it covers
  int group = -1;           // storage group holding it
  // The one site (model.h) whose parameters it holds: 1 + block for
  // block-bound components; for shared ones split by site (ModelLayout::
  // split_shared) 0, 1 + b or L + 1; -1 for the unsplit shared component,
  // which serves several sites.
  int site = -1;
};

// A shared parameter that only one sublayer of a block reads (neuron
// granularity: the norm in front of a LLaMA or Swin block's head groups or
// FFN groups, a ResNet block's bn2 after its channel groups). Under forward
// masking a rank that holds none of the block's components of kind `serves`
// skips that sublayer, so the parameter's gradient there is an exact zero;
// it is averaged over the ranks that run the sublayer
// (SubnetLayout::sublayer_users).
struct SublayerParam {
  int param = -1;  // parameter id in the model's ParameterSet
  int block = -1;
  ComponentKind serves = ComponentKind::head_group;
};

// How a process lays out a model's parameters: the granularity of the
// components and which storage group holds each component.
struct ModelLayout {
  Granularity granularity = Granularity::block;
  int ffn_groups = 4;   // neuron granularity: FFN unit groups per block
  int head_groups = 4;  // neuron granularity: groups of KV heads (with their query heads)
  int channel_groups = 8;  // neuron granularity (ResNet): inner-channel groups per basic block
  // Storage group of each component, in the model's component order, and the
  // groups' names; both empty = one group per component, named after it.
  std::vector<int> component_group;
  std::vector<std::string> group_names;
  // Pipelines: the shared parameters become one shared component per site
  // that reads them, so that each stage holds only its own: "shared.input"
  // (site 0: embedding; stem), "shared.block.<b>" (site 1 + b, only where
  // block b declares shared parameters: a ResNet downsampling shortcut;
  // at neuron granularity the LLaMA blocks' norms, the ResNet blocks' bn2)
  // and "shared.output" (site L + 1: final norm and head; classifier), in
  // site order, before the maskable components. A tied LLaMA embedding is
  // read at sites 0 and L + 1 and stays in "shared.input".
  bool split_shared = false;
};

}  // namespace sdp
