#pragma once
// Told, during backward, which parameters' gradients are final (their last
// contribution of this backward has been accumulated), so their reduction
// can start while backward goes on.
#include <functional>
#include <span>

namespace sdp {

using GradsReady = std::function<void(std::span<const int> param_ids)>;

}  // namespace sdp
