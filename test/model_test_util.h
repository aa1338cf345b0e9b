#pragma once
// Helpers of the model tests (LLaMA, ResNet, Swin): a model's parameters as
// full tensors by name (assembled from whole tensors and pieces), loading full
// tensors into any cut of a model, the storage-group masks that hold or train
// a chosen set of components, and the gradient comparisons of the masking
// tests.
#include <algorithm>
#include <catch2/catch.hpp>
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

// Forward masking: every trained part of `p` (f64; buffers have no
// gradient) has the gradient its slice of `full_grads` (a reference model's
// full tensors by name) holds, within `tol` (max_rel_error with `floor`).
inline void require_part_grads(const ParameterSet& p, const Weights& full_grads, double tol,
                               double floor = 1e-12) {
  Arena scratch;
  for (int id = 0; id < p.count(); ++id) {
    if (!p.is_trained(id) || p.decl(id).buffer) continue;
    const ParamDecl& d = p.decl(id);
    CAPTURE(d.name);
    Tensor whole = scratch.make(d.full_shape, DType::f64);
    const auto& g = full_grads.at(d.full_name);
    std::copy(g.begin(), g.end(), whole.data<double>());
    Tensor part = scratch.make(d.shape, DType::f64);
    copy_full_to_part(d, whole, part);
    const std::vector<double> got = to_vector(p.grad(id)), want = to_vector(part);
    REQUIRE(got.size() == want.size());
    REQUIRE(max_rel_error(got, want, floor) < tol);
  }
}

// Backward masking: `masked` (the same cut as `full`, training fewer groups)
// has bit-equal gradients for what it trains, none for the rest, and leaves
// at least one part untrained.
inline void require_masked_grads(const ParameterSet& masked, const ParameterSet& full) {
  int untrained = 0;
  for (int id = 0; id < masked.count(); ++id) {
    if (masked.decl(id).buffer) continue;
    CAPTURE(masked.decl(id).name);
    if (!masked.is_trained(id)) {
      ++untrained;
      REQUIRE_THROWS_WITH(masked.grad(id), Catch::Contains("is not trained by this rank"));
      continue;
    }
    REQUIRE(to_vector(masked.grad(id)) == to_vector(full.grad(id)));
  }
  REQUIRE(untrained > 0);
}

}  // namespace sdp::testing
