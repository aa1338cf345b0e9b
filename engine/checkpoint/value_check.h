#pragma once
// Checks of the values a checkpoint holds: every value finite and, for
// AdamW's second moment, non-negative (its square root divides the update,
// so one negative entry turns the parameter into NaN at the next step).
#include <cstdint>
#include <filesystem>
#include <string>

#include "engine/core/tensor.h"

namespace sdp::checkpoint {

// The flat index of the first element of `t` (CPU, contiguous, f32 / f64 /
// bf16; other dtypes hold no floating values and pass) that is not finite,
// or negative where `non_negative`; -1 where none is.
int64_t first_invalid_value(const Tensor& t, bool non_negative);

// Throws sdp::PermanentError naming `file` and `tensor`, the element and its
// value where first_invalid_value finds one.
void check_loaded_values(const Tensor& t, bool non_negative, const std::filesystem::path& file,
                         const std::string& tensor);

}  // namespace sdp::checkpoint
