#pragma once
// The pipeline-stage checks every model makes the same way (set_stage,
// check_whole, stage_input_shape, stage_output), in one place so that their messages stay
// alike; each model adds only what differs (a tied embedding, the shape of
// what crosses a boundary).
#include <cstddef>
#include <string>

#include "models/common/stage_span.h"

namespace sdp {

// set_stage: span must be a non-empty block range of a model of `blocks`
// blocks, and no micro-batch may be between forward and backward.
void check_stage_span(const StageSpan& span, int blocks, const std::string& model);
void check_no_micro_batch_in_flight(size_t in_flight, const std::string& model);

// forward() / evaluate(): the model must be set to the whole span; `call`
// names the caller in the message.
void check_whole_stage(const StageSpan& stage, int blocks, const char* call,
                       const std::string& model);

// stage_input_shape: first_block must start a later stage (1 .. blocks - 1).
void check_later_stage_start(int first_block, int blocks, const std::string& model);

// stage_output: only a stage without the output stage hands an activation on.
void check_hands_on(const StageSpan& stage, int blocks, const std::string& model);

}  // namespace sdp
