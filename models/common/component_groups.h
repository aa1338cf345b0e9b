#pragma once
// Between a model's components and its ParameterSet's storage groups, shared
// by every model family: placing components in the groups a ModelLayout
// names (one group per component when it names none), and counting what
// each component covers once its parameters are declared.
#include <functional>
#include <vector>

#include "models/common/component.h"
#include "models/common/parameter_set.h"

namespace sdp {

// The components every family's list starts with, in model order: the
// shared parameters (one component, or with ModelLayout::split_shared one
// per site that reads them: the input, each block b with block_shares(b),
// the output) and, at block granularity, one component per block. At
// neuron granularity the family appends its groups.
std::vector<Component> shared_and_block_components(int blocks, const ModelLayout& layout,
                                                   const std::function<bool(int)>& block_shares);

// Completes `layout` (one group per component, named after it, when it maps
// none), adds its groups to `params` and sets each component's group.
void place_components(std::vector<Component>& components, ModelLayout& layout,
                      ParameterSet& params);

// Each component's numel: its trainable parameters (buffers excluded).
void count_component_numel(std::vector<Component>& components, const ParameterSet& params);

}  // namespace sdp
