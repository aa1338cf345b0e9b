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
// input gradients. Weight gradients are computed for the trained groups
// only: one op over their share of the pack's activations (trained_share),
// so held but untrained groups get no weight-gradient work.
// `first_param[g]` is any parameter of group g (its storage group decides).
struct GroupPack {
  std::vector<int> groups;   // held groups, ascending
  std::vector<int> trained;  // positions in `groups` of those trained here
  bool any_trained() const { return !trained.empty(); }
  bool all_trained() const { return trained.size() == groups.size(); }
};
std::vector<GroupPack> held_group_packs(const ParameterSet& params,
                                        const std::vector<int>& first_param);

// The trained groups' entries of `ids` (one per group of the pack).
std::vector<int> trained_ids(const GroupPack& pack, const std::vector<int>& ids);

// A packed tensor: the parameter itself (`view` only) or a workspace copy.
struct PackedTensor {
  OwnedTensor owned;  // absent when `view` is the parameter's own storage
  Tensor view;
  const Tensor& operator*() const { return view; }
  bool is_copy() const { return static_cast<bool>(owned); }
};

// The trained groups' share of an activation whose dimension `axis` holds
// the pack's groups side by side (equal widths, e.g. [B, c, H, W] or
// [N, units]): the tensor itself when every group is trained, else a
// contiguous workspace copy of the trained groups' slices in pack order.
PackedTensor trained_share(const GroupPack& pack, const Tensor& x, int axis, Allocator& alloc);

// Pieces `ids` of one full tensor, all cut along one axis with one shape
// (or a single whole tensor), concatenated along that axis in the given
// order: [.., sum of lengths, ..]. Parameters or buffers, as declared.
PackedTensor pack_values(const ParameterSet& params, const std::vector<int>& ids,
                         Allocator& alloc);
// Writes a packed copy back into the pieces (buffers moved by an op:
// BatchNorm running statistics); nothing for an in-place pack.
void unpack_values(const ParameterSet& params, const std::vector<int>& ids,
                   const PackedTensor& packed);
// The gradient of trained pieces `ids` packed like pack_values(): the
// parameter's own gradient for one id (weight-gradient ops accumulate into
// it directly), else a zero-filled workspace that add_packed_grads() adds
// into each piece's gradient.
PackedTensor pack_grads(const ParameterSet& params, const std::vector<int>& ids,
                        Allocator& alloc);
void add_packed_grads(const ParameterSet& params, const std::vector<int>& ids,
                      const PackedTensor& grads, Allocator& alloc);

}  // namespace sdp
