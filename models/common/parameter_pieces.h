#pragma once
// Between a ParameterSet and the full Hugging Face tensors it stores, whole
// or as row / column pieces: used to write checkpoints with full tensors and
// to load a checkpoint into any cut of the model (another plan, world size or
// granularity).
#include <string>
#include <vector>

#include "models/common/parameter_set.h"

namespace sdp {

struct FullTensor {
  std::string name;        // Hugging Face name
  Shape shape;
  std::vector<int> parts;  // parameter ids storing it: one whole tensor, or its pieces
};

// Full tensors in order of first declaration.
std::vector<FullTensor> full_tensors(const ParameterSet& params);

// Host tensors of the same dtype: copy a stored piece (or whole tensor) into
// its place in the full tensor, or read it back from there.
void copy_part_to_full(const ParamDecl& decl, const Tensor& part, Tensor& full);
void copy_full_to_part(const ParamDecl& decl, const Tensor& full, Tensor& part);

}  // namespace sdp
