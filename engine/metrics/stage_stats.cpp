#include "engine/metrics/stage_stats.h"

namespace sdp {

nlohmann::json StageStats::to_json() const {
  return {{"stage", stage},
          {"stages", stages},
          {"replica", replica},
          {"schedule", schedule},
          {"micro_batches", micro_batches},
          {"blocks", blocks},
          {"seconds", seconds},
          {"busy_seconds", busy_seconds},
          {"bubble_fraction", bubble_fraction},
          {"activation_bytes_sent", activation_bytes_sent},
          {"gradient_bytes_sent", gradient_bytes_sent}};
}

}  // namespace sdp
