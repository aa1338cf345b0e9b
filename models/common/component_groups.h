#pragma once
// Between a model's components and its ParameterSet's storage groups, shared
// by every model family: placing components in the groups a ModelLayout
// names (one group per component when it names none), and counting what
// each component covers once its parameters are declared.
#include <vector>

#include "models/common/component.h"
#include "models/common/parameter_set.h"

namespace sdp {

// Completes `layout` (one group per component, named after it, when it maps
// none), adds its groups to `params` and sets each component's group.
void place_components(std::vector<Component>& components, ModelLayout& layout,
                      ParameterSet& params);

// Each component's numel: its trainable parameters (buffers excluded).
void count_component_numel(std::vector<Component>& components, const ParameterSet& params);

}  // namespace sdp
