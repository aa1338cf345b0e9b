#pragma once
// The part of a model one pipeline stage runs: a contiguous range of blocks,
// with the model's input stage (embedding, stem) when the range starts at
// block 0 and its output stage (norm, head and loss; pooling, classifier and
// loss) when it ends at the last block. The whole model is the span of
// every block. Stages are cut between blocks only, so what crosses a stage
// boundary is one residual-stream tensor (model.h, stage_input_shape).
#include <string>

namespace sdp {

struct StageSpan {
  int first_block = 0;
  int end_block = -1;  // one past the last block; -1 = through the last block

  // With the model's block count L resolved.
  int end(int blocks) const { return end_block < 0 ? blocks : end_block; }
  bool has_input_stage() const { return first_block == 0; }
  bool has_output_stage(int blocks) const { return end(blocks) == blocks; }
  bool whole(int blocks) const { return has_input_stage() && has_output_stage(blocks); }
  bool contains_block(int b, int blocks) const { return b >= first_block && b < end(blocks); }
  // Site s (model.h: 0 input stage, 1 + b block b, L + 1 output stage).
  bool contains_site(int site, int blocks) const {
    if (site == 0) return has_input_stage();
    if (site == blocks + 1) return has_output_stage(blocks);
    return contains_block(site - 1, blocks);
  }
  // "input + blocks 0-3", "blocks 4-5", "blocks 6-7 + output", for messages.
  std::string describe(int blocks) const {
    std::string s = has_input_stage() ? "input + " : "";
    s += "blocks " + std::to_string(first_block) + "-" + std::to_string(end(blocks) - 1);
    if (has_output_stage(blocks)) s += " + output";
    return s;
  }
};

}  // namespace sdp
