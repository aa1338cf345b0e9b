#pragma once
// How a stage runs the deferred weight gradients (W actions) of a split
// schedule (gpipe-2bp, 1f1b-2bp, zb-h1, 1f1b-2bp-cooldown, a file with
// I/W):
//   per-micro-batch  each W(mb) is its own backward_weight: one
//                    accumulating GEMM per weight and micro-batch (default);
//   batched          each maximal run of W actions adjacent in the stage's
//                    list (explicit form: nothing between them, not even a
//                    send or receive) is ONE Model::backward_weight_batched
//                    over the run's micro-batches, in which every linear
//                    weight's gradient is one GEMM over their rows
//                    concatenated (the 2BP authors' form). A lone W is a
//                    run of one and runs as per-micro-batch does.
// The gradients are the same up to rounding (a GEMM sums the rows in
// another order). A batched run counts as one action for the strategy's
// hooks (sharding reduces after it once) and its measured time is shared
// evenly among its actions' timings.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/pipeline/schedule.h"

namespace sdp::pipeline {

enum class DeferredWeightGrads : uint8_t { per_micro_batch, batched };

// "per-micro-batch" or "batched".
const char* to_string(DeferredWeightGrads mode);
// The inverse; fails naming the text and the valid values.
DeferredWeightGrads parse_deferred_weight_grads(const std::string& text);

// The maximal runs of adjacent W actions of a stage's list, as [begin, end)
// indices, in list order.
std::vector<std::pair<size_t, size_t>> weight_grad_runs(const std::vector<Action>& actions);

// Whether any stage of the schedule has a W action (a split schedule).
bool has_weight_grads(const Schedule& schedule);

}  // namespace sdp::pipeline
