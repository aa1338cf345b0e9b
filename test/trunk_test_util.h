#pragma once
// Helpers of the trunk tests (micro-batches in flight, activation
// checkpointing, parameter hooks) shared by LLaMA and ResNet: gradients as
// full tensors, exact comparisons, and hooks that hide every parameter
// outside its site's needed / done window (NaN), as a sharding layer that
// frees gathered parameters would, so any read outside the window poisons
// the result.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "kernels/flop_count.h"
#include "kernels/ops.h"
#include "models/common/model.h"
#include "model_test_util.h"
#include "test_support.h"

namespace sdp::testing {

inline Weights grads_of(const Model& m, Arena& arena) { return full_values(m.params(), true, arena); }

// Every full tensor of `a` equals `b`'s to `tol` relative to the tensor's
// largest entry (0 = bit-identical).
inline void require_same(const Weights& a, const Weights& b, double tol) {
  REQUIRE(a.size() == b.size());
  for (const auto& [name, va] : a) {
    CAPTURE(name);
    const auto& vb = b.at(name);
    REQUIRE(va.size() == vb.size());
    double scale = 0, diff = 0;
    for (size_t i = 0; i < va.size(); ++i) {
      scale = std::max(scale, std::abs(va[i]));
      diff = std::max(diff, std::abs(va[i] - vb[i]));
    }
    REQUIRE(std::isfinite(diff));
    REQUIRE(diff <= tol * std::max(scale, 1e-300));
  }
}

// One hook call.
struct HookCall {
  int site;
  ParamPass pass;
  bool needed;  // needed or done
  bool operator==(const HookCall& o) const {
    return site == o.site && pass == o.pass && needed == o.needed;
  }
};

inline std::string describe(const std::vector<HookCall>& calls) {
  std::string out;
  for (const HookCall& c : calls) {
    out.push_back(c.needed ? '+' : '-');
    out.append(std::to_string(c.site));
    out.append(c.pass == ParamPass::forward ? "f " : "b ");
  }
  return out;
}

// Installs hooks on `model` that log every call and keep each materialized
// parameter NaN except while a site that lists it is needed; restores the
// values when destroyed. Checks that needed / done pair up per site.
class ParamWindows {
 public:
  explicit ParamWindows(Model& model) : model_(model) {
    ParameterSet& p = model.params();
    for (int id = 0; id < p.count(); ++id) {
      if (p.decl(id).buffer || !p.is_materialized(id)) continue;
      saved_[id] = to_vector(p.param(id));
      open_[id] = 0;
      hide(id);
    }
    ParamHooks hooks;
    hooks.needed = [this](int site, ParamPass pass) { on(site, pass, true); };
    hooks.done = [this](int site, ParamPass pass) { on(site, pass, false); };
    model.set_param_hooks(std::move(hooks));
  }
  ~ParamWindows() {
    model_.set_param_hooks({});
    for (const auto& [id, values] : saved_) show(id);
  }
  ParamWindows(const ParamWindows&) = delete;
  ParamWindows& operator=(const ParamWindows&) = delete;

  std::vector<HookCall> calls;
  bool none_open() const {
    for (const auto& [id, n] : open_)
      if (n != 0) return false;
    return true;
  }

 private:
  void on(int site, ParamPass pass, bool needed) {
    calls.push_back({site, pass, needed});
    // A site's windows do not nest: done follows needed, of the same pass.
    auto& state = site_open_[site];
    if (needed) {
      REQUIRE(state == 0);
      state = pass == ParamPass::forward ? 1 : 2;
    } else {
      REQUIRE(state == (pass == ParamPass::forward ? 1 : 2));
      state = 0;
    }
    for (int id : model_.site_params(site)) {
      if (!open_.count(id)) continue;  // not held here
      int& n = open_[id];
      if (needed) {
        if (n++ == 0) show(id);
      } else {
        REQUIRE(n > 0);
        if (--n == 0) hide(id);
      }
    }
  }
  void hide(int id) {
    Tensor t = model_.params().param(id);
    ops::fill(t, std::numeric_limits<double>::quiet_NaN());
  }
  void show(int id) {
    Tensor t = model_.params().param(id);
    std::copy(saved_[id].begin(), saved_[id].end(), t.data<double>());
  }

  Model& model_;
  std::map<int, std::vector<double>> saved_;
  std::map<int, int> open_;
  std::map<int, int> site_open_;
};

// Forward FLOPs of each site, measured between its needed and done calls
// (forward pass only), summed over the forwards run while installed.
class SiteFlops {
 public:
  explicit SiteFlops(Model& model) : model_(model) {
    ParamHooks hooks;
    hooks.needed = [this](int, ParamPass pass) {
      if (pass == ParamPass::forward) start_ = ops::flops_counted();
    };
    hooks.done = [this](int site, ParamPass pass) {
      if (pass == ParamPass::forward) forward[site] += ops::flops_counted() - start_;
    };
    model.set_param_hooks(std::move(hooks));
  }
  ~SiteFlops() { model_.set_param_hooks({}); }
  std::map<int, double> forward;

 private:
  Model& model_;
  double start_ = 0;
};

// Peaks of one forward + backward, by category and in total.
struct Peaks {
  size_t total = 0;
  std::vector<size_t> by_category, at_peak;
  bool operator==(const Peaks& o) const {
    return total == o.total && by_category == o.by_category && at_peak == o.at_peak;
  }
};

// The peaks `stats` recorded since its last reset_peaks().
inline Peaks peaks_of(const MemoryStats& stats) {
  Peaks p;
  p.total = stats.peak_total();
  for (size_t c = 0; c < kMemCategoryCount; ++c) {
    p.by_category.push_back(stats.peak(static_cast<MemCategory>(c)));
    p.at_peak.push_back(stats.at_peak(static_cast<MemCategory>(c)));
  }
  return p;
}

// `measure(alloc, policy)` (one forward + backward, returning its Peaks)
// under no recomputation, "block" and "every:2": the meta device must give
// the CPU's peaks exactly, and recomputation must lower the activation peak
// (with split weight gradients, every rebuilt context stays until
// backward_weight(): the end of backward holds what no recomputation holds,
// so the peak cannot drop, but must not grow).
template <typename Measure>
void require_recompute_peaks(Measure&& measure, bool split) {
  std::map<std::string, Peaks> by_policy;
  for (const char* policy : {"none", "block", "every:2"}) {
    CAPTURE(policy);
    CpuAllocator cpu;
    MetaAllocator meta(64);
    const Peaks on_cpu = measure(cpu, policy);
    const Peaks on_meta = measure(meta, policy);
    REQUIRE(on_cpu == on_meta);
    by_policy[policy] = on_cpu;
  }
  const size_t act = static_cast<size_t>(MemCategory::activation);
  if (split) {
    REQUIRE(by_policy["block"].by_category[act] <= by_policy["none"].by_category[act]);
  } else {
    REQUIRE(by_policy["block"].by_category[act] < by_policy["every:2"].by_category[act]);
    REQUIRE(by_policy["every:2"].by_category[act] < by_policy["none"].by_category[act]);
    REQUIRE(by_policy["block"].total < by_policy["none"].total);
  }
}

}  // namespace sdp::testing
