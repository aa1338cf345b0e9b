#include "models/common/packed_pieces.h"

#include "kernels/ops.h"

namespace sdp {

std::vector<GroupPack> held_group_packs(const ParameterSet& params,
                                        const std::vector<int>& first_param) {
  GroupPack pack;
  for (size_t g = 0; g < first_param.size(); ++g) {
    const int id = first_param[g];
    if (!params.is_materialized(id)) continue;
    if (params.is_trained(id)) pack.trained.push_back(static_cast<int>(pack.groups.size()));
    pack.groups.push_back(static_cast<int>(g));
  }
  if (pack.groups.empty()) return {};
  return {std::move(pack)};
}

std::vector<int> trained_ids(const GroupPack& pack, const std::vector<int>& ids) {
  SDP_CHECK(ids.size() == pack.groups.size(), "a pack of ", pack.groups.size(),
            " groups got ", ids.size(), " parameters");
  std::vector<int> out;
  for (int pos : pack.trained) out.push_back(ids[static_cast<size_t>(pos)]);
  return out;
}

PackedTensor trained_share(const GroupPack& pack, const Tensor& x, int axis, Allocator& alloc) {
  if (pack.all_trained()) return {OwnedTensor(), x};
  const int64_t n = static_cast<int64_t>(pack.groups.size());
  SDP_CHECK(x.size(axis) % n == 0, "activation ", x.describe(), " does not hold ", n,
            " equal groups along dim ", axis);
  const int64_t width = x.size(axis) / n;
  Shape shape = x.shape();
  shape[axis] = width * static_cast<int64_t>(pack.trained.size());
  PackedTensor out;
  out.owned = OwnedTensor(alloc, shape, x.dtype(), MemCategory::workspace);  // the trained share
  out.view = *out.owned;
  for (size_t j = 0; j < pack.trained.size(); ++j) {
    Tensor dst = out.view.narrow(axis, static_cast<int64_t>(j) * width, width);
    ops::copy(x.narrow(axis, pack.trained[j] * width, width), dst);
  }
  return out;
}

namespace {
// The axis the pieces are cut along and the packed shape; checks that the
// ids are pieces of one tensor with one shape.
struct PackShape {
  int axis = 0;
  int64_t length = 0;  // of one piece along `axis`
  Shape shape;         // packed
};

PackShape pack_shape(const ParameterSet& params, const std::vector<int>& ids) {
  SDP_CHECK(!ids.empty(), "a pack needs at least one parameter");
  const ParamDecl& first = params.decl(ids.front());
  SDP_CHECK(ids.size() == 1 || first.is_piece(), "pack of ", first.name,
            ": several whole tensors cannot be packed");
  PackShape s{first.piece_axis, first.shape[first.piece_axis], first.shape};
  for (int id : ids) {
    const ParamDecl& d = params.decl(id);
    SDP_CHECK(d.full_name == first.full_name && d.piece_axis == first.piece_axis &&
                  d.shape == first.shape,
              "pack of ", first.full_name, ": ", d.name, " is not a piece of the same cut");
  }
  s.shape[s.axis] = s.length * static_cast<int64_t>(ids.size());
  return s;
}

// Piece i's place in the packed tensor: rows (axis 0) are a contiguous
// range of it; for axis 1 both are seen as matrices [outer, run], a strided
// copy of long contiguous runs rather than of single elements.
int64_t inner_of(const Shape& shape, int axis) {
  int64_t inner = 1;
  for (int a = axis + 1; a < shape.ndim(); ++a) inner *= shape[a];
  return inner;
}
Tensor piece_matrix(const Tensor& piece, const PackShape& s) {
  if (s.axis == 0) return piece;
  const int64_t run = s.length * inner_of(s.shape, s.axis);
  return piece.view({piece.numel() / run, run});
}
Tensor slot(const Tensor& packed, const PackShape& s, size_t i) {
  if (s.axis == 0) return packed.narrow(0, static_cast<int64_t>(i) * s.length, s.length);
  const int64_t inner = inner_of(s.shape, s.axis), run = s.length * inner;
  const int64_t row = s.shape[s.axis] * inner;
  return packed.view({packed.numel() / row, row}).narrow(1, static_cast<int64_t>(i) * run, run);
}
}  // namespace

PackedTensor pack_values(const ParameterSet& params, const std::vector<int>& ids,
                         Allocator& alloc) {
  const PackShape s = pack_shape(params, ids);
  if (ids.size() == 1) return {OwnedTensor(), params.param(ids.front())};
  const Tensor first = params.param(ids.front());
  PackedTensor out;
  out.owned = OwnedTensor(alloc, s.shape, first.dtype(), MemCategory::workspace);  // packed
  out.view = *out.owned;
  for (size_t i = 0; i < ids.size(); ++i) {
    Tensor dst = slot(out.view, s, i);
    ops::copy(piece_matrix(params.param(ids[i]), s), dst);
  }
  return out;
}

void unpack_values(const ParameterSet& params, const std::vector<int>& ids,
                   const PackedTensor& packed) {
  if (!packed.is_copy()) return;
  const PackShape s = pack_shape(params, ids);
  for (size_t i = 0; i < ids.size(); ++i) {
    Tensor dst = piece_matrix(params.param(ids[i]), s);
    ops::copy(slot(packed.view, s, i), dst);
  }
}

PackedTensor pack_grads(const ParameterSet& params, const std::vector<int>& ids,
                        Allocator& alloc) {
  const PackShape s = pack_shape(params, ids);
  if (ids.size() == 1) return {OwnedTensor(), params.grad(ids.front())};
  PackedTensor out;
  out.owned = OwnedTensor(alloc, s.shape, params.state_dtype(), MemCategory::workspace);
  out.view = *out.owned;
  ops::fill(out.view, 0.0);
  return out;
}

void add_packed_grads(const ParameterSet& params, const std::vector<int>& ids,
                      const PackedTensor& grads, Allocator& alloc) {
  if (!grads.is_copy()) return;
  const PackShape s = pack_shape(params, ids);
  // Rows (axis 0) of the pack are contiguous and add in place; columns go
  // through one piece-sized copy.
  OwnedTensor column;  // [piece shape], axis 1 only
  if (s.axis != 0)
    column = OwnedTensor(alloc, params.decl(ids.front()).shape, params.state_dtype(),
                         MemCategory::workspace);
  for (size_t i = 0; i < ids.size(); ++i) {
    Tensor g = piece_matrix(params.grad(ids[i]), s);
    const Tensor part = slot(grads.view, s, i);
    if (s.axis == 0) {
      ops::accumulate(g, part);
    } else {
      Tensor tmp = piece_matrix(*column, s);
      ops::copy(part, tmp);
      ops::accumulate(g, tmp);
    }
  }
}

}  // namespace sdp
