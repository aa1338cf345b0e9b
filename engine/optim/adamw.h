#pragma once
// AdamW over a ParameterSet: one update per parameter tensor held by this
// process, weight decay on matrices only (norm gains and other vectors are
// not decayed, the usual choice for transformers).
#include <cstdint>

#include "models/common/parameter_set.h"

namespace sdp {

struct AdamWSettings {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

class AdamW {
 public:
  AdamW(ParameterSet& params, const AdamWSettings& settings);
  // Applies update number `step` (1-based, for bias correction) at rate lr.
  void update(int64_t step, double lr);
  const AdamWSettings& settings() const { return settings_; }

 private:
  ParameterSet& params_;
  AdamWSettings settings_;
};

}  // namespace sdp
