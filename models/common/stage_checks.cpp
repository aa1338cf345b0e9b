#include "models/common/stage_checks.h"

#include "engine/core/error.h"

namespace sdp {

void check_stage_span(const StageSpan& span, int blocks, const std::string& model) {
  const int L = blocks;
  if (span.first_block < 0 || span.first_block >= L || span.end(L) <= span.first_block ||
      span.end(L) > L)
    fail("set_stage: blocks [", span.first_block, ", ", span.end(L), ") are not a stage of model ",
         model, " (valid: a non-empty range [first, end) within blocks 0 .. ", L - 1, ")");
}

void check_no_micro_batch_in_flight(size_t in_flight, const std::string& model) {
  if (in_flight != 0)
    fail("set_stage: ", in_flight, " micro-batch(es) of model ", model,
         " are between forward and backward; finish them before changing the stage");
}

void check_whole_stage(const StageSpan& stage, int blocks, const char* call,
                       const std::string& model) {
  if (stage.whole(blocks)) return;
  fail(call, " of model ", model, " needs the whole model, but it is set to the pipeline ",
       "stage ", stage.describe(blocks), " (use forward_stage / backward_stage; evaluation of a ",
       "partial stage is not supported)");
}

void check_later_stage_start(int first_block, int blocks, const std::string& model) {
  if (first_block <= 0 || first_block >= blocks)
    fail("stage_input_shape: block ", first_block, " of model ", model,
         " does not start a later stage (valid: 1 .. ", blocks - 1, ")");
}

void check_hands_on(const StageSpan& stage, int blocks, const std::string& model) {
  if (stage.has_output_stage(blocks))
    fail("stage_output: stage ", stage.describe(blocks), " of model ", model,
         " ends in the loss and hands nothing on");
}

}  // namespace sdp
