#pragma once
// Packs: the held neuron groups of one layer run as one wider operation.
//
// Under N-SDP a rank holds some groups of every block (FFN units, heads, a
// basic block's inner channels), each group's rows or columns stored as a
// piece in the storage group of its owner set (parameter_set.h). A *pack* is
// a set of held groups of one block that computes together: one GEMM or one
// convolution per layer, over activations that carry only the pack's
// units / heads / channels, in the pack's group order. Since the groups of a
// layer are independent (their contributions to the block's output are
// summed), any grouping is the same function.
//
// The parameter storage is not changed: the pieces stay in their storage
// groups (so a rank never allocates what it does not own, and each owner
// set's gradients stay one flat buffer for its collective). A layer's
// packed weight is assembled per use into a workspace, which is cheap beside
// the layer itself (a weight of R x K elements against a GEMM of 2 N R K
// FLOPs: 1 / (2 N) of the work, N = tokens or images x output pixels), and a
// pack of one group (B-SDP, DDP, a rank holding one group) reads its
// parameter in place, with no copy at all.
#include <vector>

#include "engine/core/tensor.h"
#include "models/common/parameter_set.h"

namespace sdp {

// The held groups of one block as one pack, in group order (none when no
// group is held). The pack does not depend on what this rank trains, so a
// rank under backward masking runs exactly the full model's forward and
// input gradients. `trained`: whether any of its groups is trained here;
// the weight gradients are then computed for the whole pack (one op) and
// kept for the trained pieces only (add_packed_grads), so held but
// untrained groups beside trained ones cost weight-gradient FLOPs (Nb-SDP),
// while a pack with no trained group (Bb-SDP's untrained blocks) costs none.
// `first_param[g]` is any parameter of group g (its storage group decides).
struct GroupPack {
  std::vector<int> groups;
  bool trained = false;
};
std::vector<GroupPack> held_group_packs(const ParameterSet& params,
                                        const std::vector<int>& first_param);

// A packed tensor: the parameter itself (`view` only) or a workspace copy.
struct PackedTensor {
  OwnedTensor owned;  // absent when `view` is the parameter's own storage
  Tensor view;
  const Tensor& operator*() const { return view; }
  bool is_copy() const { return static_cast<bool>(owned); }
};

// Pieces `ids` of one full tensor, all cut along one axis with one shape
// (or a single whole tensor), concatenated along that axis in the given
// order: [.., sum of lengths, ..]. Parameters or buffers, as declared.
PackedTensor pack_values(const ParameterSet& params, const std::vector<int>& ids,
                         Allocator& alloc);
// Writes a packed copy back into the pieces (buffers moved by an op:
// BatchNorm running statistics); nothing for an in-place pack.
void unpack_values(const ParameterSet& params, const std::vector<int>& ids,
                   const PackedTensor& packed);
// The gradient of a pack, in the state dtype: the parameter's own gradient
// for one (trained) id (weight-gradient ops accumulate into it directly),
// else a zero-filled workspace that add_packed_grads() adds into the
// gradient of each trained piece.
PackedTensor pack_grads(const ParameterSet& params, const std::vector<int>& ids,
                        Allocator& alloc);
void add_packed_grads(const ParameterSet& params, const std::vector<int>& ids,
                      const PackedTensor& grads, Allocator& alloc);

}  // namespace sdp
