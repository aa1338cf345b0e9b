#include "engine/checkpoint/value_check.h"

#include <cmath>

#include "engine/core/error.h"

namespace sdp::checkpoint {

namespace {

template <typename T>
int64_t first_invalid(const T* v, int64_t n, bool non_negative) {
  for (int64_t i = 0; i < n; ++i) {
    const double x = static_cast<double>(v[i]);
    if (!std::isfinite(x) || (non_negative && x < 0)) return i;
  }
  return -1;
}

double value_at(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::f32: return t.data<float>()[i];
    case DType::f64: return t.data<double>()[i];
    case DType::bf16: return t.data<bf16>()[i].to_float();
    default: return 0;
  }
}

}  // namespace

int64_t first_invalid_value(const Tensor& t, bool non_negative) {
  SDP_CHECK(t.device() == Device::cpu && t.is_contiguous(),
            "first_invalid_value: expected a contiguous CPU tensor, got ", t.describe());
  const int64_t n = t.numel();
  if (n == 0) return -1;
  switch (t.dtype()) {
    case DType::f32: return first_invalid(t.data<float>(), n, non_negative);
    case DType::f64: return first_invalid(t.data<double>(), n, non_negative);
    case DType::bf16: {
      const bf16* v = t.data<bf16>();
      for (int64_t i = 0; i < n; ++i) {
        const float x = v[i].to_float();
        if (!std::isfinite(x) || (non_negative && x < 0)) return i;
      }
      return -1;
    }
    default: return -1;
  }
}

void check_loaded_values(const Tensor& t, bool non_negative, const std::filesystem::path& file,
                         const std::string& tensor) {
  const int64_t at = first_invalid_value(t, non_negative);
  if (at < 0) return;
  const double value = value_at(t, at);
  throw PermanentError(format(
      "corrupted checkpoint '", file.string(), "': tensor '", tensor, "' element ", at, " is ",
      value, " (valid: ", non_negative ? "a finite value >= 0, as AdamW's second moment is"
                                       : "a finite value",
      "); restore the checkpoint or resume from another"));
}

}  // namespace sdp::checkpoint
