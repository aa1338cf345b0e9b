#include "models/common/component_groups.h"

#include <string>

#include "engine/core/error.h"

namespace sdp {

std::vector<Component> shared_and_block_components(int blocks, const ModelLayout& layout,
                                                   const std::function<bool(int)>& block_shares) {
  std::vector<Component> out;
  const int L = blocks;
  if (layout.split_shared) {
    out.push_back({"shared.input", ComponentKind::shared, -1, 0, {}, 0, -1, 0});
    for (int b = 0; b < L; ++b)
      if (block_shares(b))
        out.push_back({"shared.block." + std::to_string(b), ComponentKind::shared, b, 0, {}, 0, -1,
                       1 + b});
    out.push_back({"shared.output", ComponentKind::shared, -1, 0, {}, 0, -1, L + 1});
  } else {
    out.push_back({"shared", ComponentKind::shared, -1, 0, {}, 0, -1, -1});
  }
  if (layout.granularity != Granularity::neuron)
    for (int b = 0; b < L; ++b)
      out.push_back({"block." + std::to_string(b), ComponentKind::block, b, 0, {}, 0, -1, 1 + b});
  return out;
}

void place_components(std::vector<Component>& components, ModelLayout& layout,
                      ParameterSet& params) {
  if (layout.component_group.empty()) {
    SDP_CHECK(layout.group_names.empty(), "layout: group names given without a component map");
    for (size_t c = 0; c < components.size(); ++c) {
      layout.component_group.push_back(static_cast<int>(c));
      layout.group_names.push_back(components[c].name);
    }
  }
  SDP_CHECK(layout.component_group.size() == components.size(), "layout maps ",
            layout.component_group.size(), " components, the model has ", components.size());
  for (const std::string& name : layout.group_names) params.add_group(name);
  for (size_t c = 0; c < components.size(); ++c) {
    const int g = layout.component_group[c];
    SDP_CHECK(g >= 0 && g < params.group_count(), "layout: component ", components[c].name,
              " is placed in group ", g, " of ", params.group_count());
    components[c].group = g;
  }
}

void count_component_numel(std::vector<Component>& components, const ParameterSet& params) {
  for (Component& comp : components) {
    comp.numel = 0;
    for (int id : comp.params)
      if (!params.decl(id).buffer) comp.numel += params.decl(id).shape.numel();
  }
}

}  // namespace sdp
