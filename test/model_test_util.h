#pragma once
// Helpers of the model tests (LLaMA, ResNet): a model's parameters as full
// tensors by name (assembled from whole tensors and pieces), loading full
// tensors into any cut of a model, and the storage-group masks that hold or
// train a chosen set of components.
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "models/common/component.h"
#include "models/common/parameter_pieces.h"
#include "models/common/parameter_set.h"
#include "test_support.h"

namespace sdp::testing {

// Full tensors by name, as doubles.
using Weights = std::map<std::string, std::vector<double>>;

// Values (and buffers) or gradients of every held / trained part, put back
// into full tensors (absent parts left zero). f64 parameter sets.
inline Weights full_values(const ParameterSet& p, bool grads, Arena& arena) {
  Weights out;
  for (const FullTensor& f : full_tensors(p)) {
    if (grads && p.decl(f.parts.front()).buffer) continue;
    Tensor whole = arena.make(f.shape, p.dtype());
    ops::fill(whole, 0.0);
    bool any = false;
    for (int id : f.parts) {
      if (grads ? !p.is_trained(id) : !p.is_materialized(id)) continue;
      copy_part_to_full(p.decl(id), grads ? p.grad(id) : p.param(id), whole);
      any = true;
    }
    if (any) out[f.name] = to_vector(whole);
  }
  return out;
}

// Sets every held part of `p` (f64) from full tensors.
inline void load_full(ParameterSet& p, const Weights& values, Arena& arena) {
  for (int id = 0; id < p.count(); ++id) {
    if (!p.is_materialized(id)) continue;
    const ParamDecl& d = p.decl(id);
    Tensor whole = arena.make(d.full_shape, p.dtype());
    const auto& v = values.at(d.full_name);
    std::copy(v.begin(), v.end(), whole.data<double>());
    Tensor part = p.param(id);
    copy_full_to_part(d, whole, part);
  }
}

// One flag per storage group: whether the component placed there passes `keep`.
inline std::vector<bool> groups_where(const std::vector<Component>& components, int group_count,
                                      const std::function<bool(const Component&)>& keep) {
  std::vector<bool> held(static_cast<size_t>(group_count), false);
  for (const Component& c : components) held[static_cast<size_t>(c.group)] = keep(c);
  return held;
}

using ComponentFilter = std::function<bool(const Component&)>;

// An f64 model of `config` cut by `layout`, holding the components `held`
// accepts (all when empty) and training those `trained` accepts (= held when
// empty), with gradients allocated and `weights` loaded.
template <typename ModelT, typename Config>
std::unique_ptr<ModelT> build_model(const Config& config, const ModelLayout& layout,
                                    CpuAllocator& alloc, const Weights& weights, Arena& arena,
                                    const ComponentFilter& held = {},
                                    const ComponentFilter& trained = {}) {
  auto m = std::make_unique<ModelT>(config, layout);
  const int groups = m->params().group_count();
  m->materialize(alloc, DType::f64,
                 held ? groups_where(m->components(), groups, held) : std::vector<bool>{},
                 trained ? groups_where(m->components(), groups, trained) : std::vector<bool>{});
  m->params().allocate_grads();
  load_full(m->params(), weights, arena);
  return m;
}

}  // namespace sdp::testing
