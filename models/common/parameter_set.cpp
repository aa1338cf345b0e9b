#include "models/common/parameter_set.h"

#include <algorithm>
#include <cstring>

#include "engine/core/counter_rng.h"
#include "kernels/ops.h"
#include "models/common/tensor_staging.h"

namespace sdp {

int ParameterSet::add_group(std::string name) {
  SDP_CHECK(storage_.empty(), "cannot add group ", name, " after materialize()");
  groups_.push_back({std::move(name), 0, false, false});
  return static_cast<int>(groups_.size()) - 1;
}

int ParameterSet::add_decl(ParamDecl d, bool buffer) {
  SDP_CHECK(storage_.empty(), "cannot declare ", d.name, " after materialize()");
  SDP_CHECK(d.group >= 0 && d.group < group_count(), "parameter ", d.name, ": no group ", d.group);
  SDP_CHECK(!find(d.name), "parameter ", d.name, " declared twice");
  SDP_CHECK(!buffer || d.init != InitKind::normal, "buffer ", d.name,
            ": buffers start as ones or zeros");
  ParamGroupDecl& g = groups_[static_cast<size_t>(d.group)];
  int64_t& end = buffer ? g.buffer_numel : g.numel;
  d.offset = end;
  d.buffer = buffer;
  d.full_name = d.name;
  d.full_shape = d.shape;
  end += d.shape.numel();
  decls_.push_back(std::move(d));
  return static_cast<int>(decls_.size()) - 1;
}

int ParameterSet::declare(std::string name, Shape shape, int group, InitKind init,
                          double init_std) {
  return add_decl({std::move(name), shape, group, 0, init, init_std, {}, shape, 0, 0, false},
                  false);
}

int ParameterSet::declare_buffer(std::string name, Shape shape, int group, InitKind init) {
  return add_decl({std::move(name), shape, group, 0, init, 0.0, {}, shape, 0, 0, true}, true);
}

namespace {
Shape piece_shape(const std::string& full_name, const Shape& full_shape, int axis, int64_t start,
                  int64_t length) {
  SDP_CHECK(full_shape.ndim() >= 1 && axis >= 0 && axis <= 1 && axis < full_shape.ndim(),
            "piece of ", full_name, ": pieces are ranges along axis 0 or 1, got axis ", axis,
            " of a ", full_shape.ndim(), "-D tensor");
  SDP_CHECK(start >= 0 && length > 0 && start + length <= full_shape[axis], "piece of ",
            full_name, ": range [", start, ", ", start + length, ") outside dimension ", axis,
            " of size ", full_shape[axis]);
  Shape shape = full_shape;
  shape[axis] = length;
  return shape;
}
}  // namespace

int ParameterSet::set_piece(int id, const std::string& full_name, const Shape& full_shape,
                            int axis, int64_t start) {
  ParamDecl& d = decls_[static_cast<size_t>(id)];
  d.full_name = full_name;
  d.full_shape = full_shape;
  d.piece_axis = axis;
  d.piece_start = start;
  return id;
}

int ParameterSet::declare_piece(const std::string& full_name, const Shape& full_shape, int axis,
                                int64_t start, int64_t length, const std::string& piece_label,
                                int group, InitKind init, double init_std) {
  const Shape shape = piece_shape(full_name, full_shape, axis, start, length);
  const int id = declare(full_name + "@" + piece_label, shape, group, init, init_std);
  return set_piece(id, full_name, full_shape, axis, start);
}

int ParameterSet::declare_buffer_piece(const std::string& full_name, const Shape& full_shape,
                                       int axis, int64_t start, int64_t length,
                                       const std::string& piece_label, int group, InitKind init) {
  const Shape shape = piece_shape(full_name, full_shape, axis, start, length);
  const int id = declare_buffer(full_name + "@" + piece_label, shape, group, init);
  return set_piece(id, full_name, full_shape, axis, start);
}

std::optional<int> ParameterSet::find(const std::string& name) const {
  for (size_t i = 0; i < decls_.size(); ++i)
    if (decls_[i].name == name) return static_cast<int>(i);
  return std::nullopt;
}

void ParameterSet::materialize(Allocator& allocator, DType dtype, const std::vector<bool>& held,
                               const std::vector<bool>& trained,
                               const std::vector<GroupShard>& shards) {
  SDP_CHECK(storage_.empty(), "parameters are already materialized");
  SDP_CHECK(held.empty() || held.size() == groups_.size(), "ownership mask has ", held.size(),
            " entries for ", groups_.size(), " parameter groups");
  SDP_CHECK(trained.empty() || trained.size() == groups_.size(), "training mask has ",
            trained.size(), " entries for ", groups_.size(), " parameter groups");
  SDP_CHECK(shards.empty() || shards.size() == groups_.size(), "shard list has ", shards.size(),
            " entries for ", groups_.size(), " parameter groups");
  allocator_ = &allocator;
  dtype_ = dtype;
  storage_.resize(groups_.size());
  shards_.assign(groups_.size(), GroupShard{});
  for (size_t g = 0; g < groups_.size(); ++g) {
    groups_[g].materialized = held.empty() || held[g];
    groups_[g].trained = trained.empty() ? groups_[g].materialized : trained[g];
    SDP_CHECK(groups_[g].materialized || !groups_[g].trained, "group ", groups_[g].name,
              " is marked trained but not held");
    if (!shards.empty()) {
      const GroupShard& s = shards[g];
      SDP_CHECK(s.parts >= 1 && s.index >= 0 && s.index < s.parts, "group ", groups_[g].name,
                ": shard ", s.index, " of ", s.parts);
      SDP_CHECK(!s.sharded() || groups_[g].materialized, "group ", groups_[g].name,
                " is sharded but not held here");
      shards_[g] = s;
    }
    if (!groups_[g].materialized) continue;
    const GroupShard& s = shards_[g];
    const int gi = static_cast<int>(g);
    // Whole buffers of a sharded group are padded so collectives work on
    // equal chunks; unsharded groups keep their exact size.
    const int64_t whole = s.sharded() ? padded_numel(gi) : groups_[g].numel;
    const int64_t params = s.shards_params() ? shard_numel(gi) : whole;
    storage_[g].params = OwnedTensor(allocator, {params}, dtype, MemCategory::param);
    if (s.sharded()) ops::fill(storage_[g].params.view, 0.0);  // the padding
    if (keeps_training_state(gi) && state_dtype() != dtype) {
      storage_[g].master = OwnedTensor(allocator, {s.sharded() ? shard_numel(gi) : whole},
                                       state_dtype(), MemCategory::master);
      // The last shard's padding too: fresh device memory is not zero, and
      // the update and the all-gather carry the padding along.
      if (s.sharded()) ops::fill(storage_[g].master.view, 0.0);
    }
    if (groups_[g].buffer_numel > 0)
      storage_[g].buffers =
          OwnedTensor(allocator, {groups_[g].buffer_numel}, state_dtype(), MemCategory::param);
  }
}

const GroupShard& ParameterSet::group_shard(int g) const {
  static const GroupShard whole;
  return shards_.empty() ? whole : shards_[static_cast<size_t>(g)];
}

bool ParameterSet::any_sharded() const {
  for (const GroupShard& s : shards_)
    if (s.sharded()) return true;
  return false;
}

int64_t ParameterSet::padded_numel(int g) const {
  const int64_t parts = group_shard(g).sharded() ? group_shard(g).parts : 1;
  const int64_t n = group_decl(g).numel;
  return (n + parts - 1) / parts * parts;
}

int64_t ParameterSet::shard_numel(int g) const {
  return group_shard(g).sharded() ? padded_numel(g) / group_shard(g).parts : group_decl(g).numel;
}

int64_t ParameterSet::shard_begin(int g) const {
  return group_shard(g).sharded() ? group_shard(g).index * shard_numel(g) : 0;
}

void ParameterSet::allocate_full_params(int g) {
  const GroupShard& s = group_shard(g);
  SDP_CHECK(s.shards_params(), "group ", group_decl(g).name,
            " keeps whole parameters: nothing to allocate");
  Storage& st = storage_[static_cast<size_t>(g)];
  SDP_CHECK(!st.full_params, "whole parameters of group ", group_decl(g).name,
            " are already allocated");
  st.full_params = OwnedTensor(*allocator_, {padded_numel(g)}, dtype_, MemCategory::gathered);
}

void ParameterSet::release_full_params(int g) {
  if (group_shard(g).shards_params()) storage_[static_cast<size_t>(g)].full_params = OwnedTensor();
}

bool ParameterSet::has_full_params(int g) const {
  return !group_shard(g).shards_params() ||
         static_cast<bool>(storage_[static_cast<size_t>(g)].full_params);
}

void ParameterSet::allocate_full_grads(int g) {
  const GroupShard& s = group_shard(g);
  SDP_CHECK(s.shards_grads(), "group ", group_decl(g).name,
            " keeps whole gradients: nothing to allocate");
  Storage& st = storage_[static_cast<size_t>(g)];
  SDP_CHECK(!st.full_grads, "whole gradients of group ", group_decl(g).name,
            " are already allocated");
  st.full_grads = OwnedTensor(*allocator_, {padded_numel(g)}, state_dtype(), MemCategory::grad);
  ops::fill(st.full_grads.view, 0.0);
}

void ParameterSet::release_full_grads(int g) {
  if (group_shard(g).shards_grads()) storage_[static_cast<size_t>(g)].full_grads = OwnedTensor();
}

bool ParameterSet::has_full_grads(int g) const {
  if (!keeps_training_state(g) || !has_grads_) return false;
  return !group_shard(g).shards_grads() ||
         static_cast<bool>(storage_[static_cast<size_t>(g)].full_grads);
}

const OwnedTensor& ParameterSet::whole_params(int g) const {
  const Storage& s = storage_[static_cast<size_t>(g)];
  return group_shard(g).shards_params() ? s.full_params : s.params;
}

const OwnedTensor& ParameterSet::whole_grads(int g) const {
  const Storage& s = storage_[static_cast<size_t>(g)];
  return group_shard(g).shards_grads() ? s.full_grads : s.grads;
}

void ParameterSet::allocate_grads() {
  SDP_CHECK(allocator_, "materialize() parameters before their gradients");
  if (has_grads_) return;
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (!keeps_training_state(static_cast<int>(g))) continue;
    const GroupShard& s = shards_[g];
    const int gi = static_cast<int>(g);
    // Sharded gradients persist as this rank's shard; an optimizer-sharded
    // group keeps them whole, padded for the in-place reduce-scatter.
    const int64_t n = s.shards_grads() ? shard_numel(gi) : s.sharded() ? padded_numel(gi)
                                                                       : groups_[g].numel;
    storage_[g].grads = OwnedTensor(*allocator_, {n}, state_dtype(), MemCategory::grad);
    ops::fill(storage_[g].grads.view, 0.0);
  }
  has_grads_ = true;
}

void ParameterSet::release_grads() {
  for (auto& s : storage_) {
    s.grads = OwnedTensor();
    s.full_grads = OwnedTensor();
  }
  has_grads_ = false;
}

void ParameterSet::allocate_adam_state() {
  SDP_CHECK(allocator_, "materialize() parameters before optimizer state");
  if (has_adam_) return;
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (!keeps_training_state(static_cast<int>(g))) continue;
    const int64_t n = shard_numel(static_cast<int>(g));
    // Moments stay f32 (or f64 in checks) whatever the parameter dtype.
    storage_[g].m = OwnedTensor(*allocator_, {n}, state_dtype(), MemCategory::optim);
    storage_[g].v = OwnedTensor(*allocator_, {n}, state_dtype(), MemCategory::optim);
    ops::fill(storage_[g].m.view, 0.0);
    ops::fill(storage_[g].v.view, 0.0);
  }
  has_adam_ = true;
}

void ParameterSet::zero_grads() {
  SDP_CHECK(has_grads_, "zero_grads() before allocate_grads()");
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (!keeps_training_state(static_cast<int>(g))) continue;
    ops::fill(storage_[g].grads.view, 0.0);
    if (storage_[g].full_grads) ops::fill(storage_[g].full_grads.view, 0.0);
  }
}

void ParameterSet::init_values(uint64_t seed) {
  SDP_CHECK(allocator_, "materialize() parameters before initializing them");
  static CpuAllocator host;
  for (int id = 0; id < count(); ++id) {
    if (!is_materialized(id)) continue;
    const ParamDecl& d = decl(id);
    if (allocator_->device() == Device::meta) continue;
    // Drawn on the host in the state dtype, then placed (and rounded) where
    // the values live: the master copy and the parameter.
    OwnedTensor drawn(host, d.shape, state_dtype(), MemCategory::workspace);  // d.shape
    switch (d.init) {
      case InitKind::ones: ops::fill(*drawn, 1.0); break;
      case InitKind::zeros: ops::fill(*drawn, 0.0); break;
      case InitKind::normal: {
        // Keyed by the full tensor and its flat index there: a piece draws
        // exactly the values of its rows / columns of the whole tensor.
        const uint64_t key = splitmix64(seed) ^ stable_hash(d.full_name);
        const int64_t n = drawn->numel();
        // A piece is [outer, length, inner] inside the full [outer, full, inner].
        int64_t inner = 1;
        for (int a = d.piece_axis + 1; a < d.shape.ndim(); ++a) inner *= d.shape[a];
        const int64_t length = d.shape[d.piece_axis], full_length = d.full_shape[d.piece_axis];
        auto full_index = [&](int64_t i) -> uint64_t {
          if (!d.is_piece()) return static_cast<uint64_t>(i);
          const int64_t outer = i / (length * inner), rest = i % (length * inner);
          return static_cast<uint64_t>(outer * full_length * inner + d.piece_start * inner + rest);
        };
        if (drawn->dtype() == DType::f64) {
          double* x = drawn->data<double>();
          for (int64_t i = 0; i < n; ++i) x[i] = d.init_std * counter_normal(key, full_index(i));
        } else {
          float* x = drawn->data<float>();
          for (int64_t i = 0; i < n; ++i)
            x[i] = static_cast<float>(d.init_std * counter_normal(key, full_index(i)));
        }
        break;
      }
    }
    assign(id, Part::values, *drawn);
  }
}

void ParameterSet::refresh_from_master(int id) {
  const int g = decl(id).group;
  if (decl(id).buffer || !has_master(g)) return;
  if (group_shard(g).sharded()) {
    // This rank's slice: the rest arrives with the next all-gather.
    const ShardSlice sl = shard_slice(id);
    if (sl.length == 0) return;
    Tensor low = shard_params(g).narrow(0, sl.shard_begin, sl.length);
    stage_copy(shard_values(g).narrow(0, sl.shard_begin, sl.length), low);
    return;
  }
  Tensor low = param(id);
  stage_copy(values(id), low);
}

ParameterSet::ShardSlice ParameterSet::shard_slice(int id) const {
  const ParamDecl& d = decl(id);
  SDP_CHECK(!d.buffer, d.name, " is a buffer: buffers are never sharded");
  const int64_t begin = shard_begin(d.group), end = begin + shard_numel(d.group);
  const int64_t lo = std::max(begin, d.offset), hi = std::min(end, d.offset + d.shape.numel());
  if (lo >= hi) return {};
  return {lo - d.offset, lo - begin, hi - lo};
}

void ParameterSet::assign(int id, Part part, const Tensor& full) {
  const ParamDecl& d = decl(id);
  SDP_CHECK(is_materialized(id), "assign: parameter ", d.name, " is not held here");
  SDP_CHECK(full.shape() == d.shape, "assign: ", d.name, " is ", d.shape.str(), ", got ",
            full.describe());
  const int g = d.group;
  if (d.buffer) {
    SDP_CHECK(part == Part::values, "assign: buffer ", d.name, " has no optimizer state");
    Tensor dst = param(id);
    stage_copy(full, dst);
    return;
  }
  const GroupShard& s = group_shard(g);
  const ShardSlice sl = shard_slice(id);
  const Tensor flat = full.view({d.shape.numel()});
  auto write_shard = [&](const Tensor& shard) {
    if (sl.length == 0) return;
    Tensor dst = shard.narrow(0, sl.shard_begin, sl.length);
    stage_copy(flat.narrow(0, sl.param_begin, sl.length), dst);
  };
  if (part != Part::values) {
    SDP_CHECK(keeps_training_state(g) && has_adam_, "assign: ", d.name,
              " has no optimizer state here");
    write_shard(part == Part::adam_m ? shard_adam_m(g) : shard_adam_v(g));
    return;
  }
  if (!s.sharded()) {
    Tensor target = values(id);
    stage_copy(full, target);
    refresh_from_master(id);
    return;
  }
  // The authoritative shard (master, or the parameters themselves) ...
  write_shard(shard_values(g));
  // ... and whole low-precision parameters where they persist: the same
  // rounding of the same values the optimizer's all-gather would bring.
  if (s.shards_params()) {
    if (has_master(g)) write_shard(shard_params(g));
  } else {
    Tensor low = param(id);
    stage_copy(full, low);
  }
}

Tensor ParameterSet::slice(const OwnedTensor& flat, int id, const char* what) const {
  const ParamDecl& d = decl(id);
  SDP_CHECK(is_materialized(id), "parameter ", d.name, " is not held by this rank (group ",
            group_decl(d.group).name, " is not owned)");
  SDP_CHECK(flat.view.numel() > 0 || d.shape.numel() == 0, what, " of ", d.name,
            " are not allocated");
  const size_t esize = dtype_size(flat.view.dtype());
  void* p = static_cast<char*>(flat.view.raw()) + static_cast<size_t>(d.offset) * esize;
  return Tensor(p, d.shape, flat.view.dtype(), flat.view.device());
}

Tensor ParameterSet::param(int id) const {
  const int g = decl(id).group;
  if (decl(id).buffer) return slice(storage_[static_cast<size_t>(g)].buffers, id, "buffer values");
  SDP_CHECK(!is_materialized(id) || has_full_params(g), "parameter ", decl(id).name,
            ": group ", group_decl(g).name, " is sharded and its whole parameters are not "
            "gathered now");
  return slice(whole_params(g), id, "values");
}
Tensor ParameterSet::values(int id) const {
  const int g = decl(id).group;
  if (!has_master(g) || decl(id).buffer) return param(id);
  SDP_CHECK(!group_shard(g).sharded(), "parameter ", decl(id).name, ": the master values of group ",
            group_decl(g).name, " are sharded (shard_values)");
  return slice(storage_[static_cast<size_t>(g)].master, id, "master values");
}
Tensor ParameterSet::grad(int id) const {
  SDP_CHECK(!decl(id).buffer, decl(id).name, " is a buffer: it has no gradient");
  SDP_CHECK(is_trained(id), "parameter ", decl(id).name,
            " is not trained by this rank (no gradient is kept for group ",
            group_decl(decl(id).group).name, ")");
  const int g = decl(id).group;
  SDP_CHECK(has_full_grads(g), "parameter ", decl(id).name, ": the whole gradients of group ",
            group_decl(g).name, " do not exist now (sharded; allocate_full_grads)");
  return slice(whole_grads(g), id, "gradients");
}
Tensor ParameterSet::adam_m(int id) const {
  SDP_CHECK(!decl(id).buffer, decl(id).name, " is a buffer: it has no optimizer state");
  SDP_CHECK(is_trained(id), "parameter ", decl(id).name, " has no optimizer state on this rank");
  SDP_CHECK(!group_shard(decl(id).group).sharded(), "parameter ", decl(id).name,
            ": its AdamW moments are sharded (shard_adam_m)");
  return slice(storage_[static_cast<size_t>(decl(id).group)].m, id, "AdamW first moments");
}
Tensor ParameterSet::adam_v(int id) const {
  SDP_CHECK(!decl(id).buffer, decl(id).name, " is a buffer: it has no optimizer state");
  SDP_CHECK(is_trained(id), "parameter ", decl(id).name, " has no optimizer state on this rank");
  SDP_CHECK(!group_shard(decl(id).group).sharded(), "parameter ", decl(id).name,
            ": its AdamW moments are sharded (shard_adam_v)");
  return slice(storage_[static_cast<size_t>(decl(id).group)].v, id, "AdamW second moments");
}
namespace {
// The first n elements of a (possibly padded) flat buffer; empty if absent.
Tensor first(const OwnedTensor& t, int64_t n) {
  return t ? t.view.narrow(0, 0, n) : Tensor();
}
}  // namespace
Tensor ParameterSet::group_params(int g) const {
  SDP_CHECK(!group_decl(g).materialized || has_full_params(g), "group ", group_decl(g).name,
            " is sharded and its whole parameters are not gathered now");
  return first(whole_params(g), group_decl(g).numel);
}
Tensor ParameterSet::group_master(int g) const {
  SDP_CHECK(!group_shard(g).sharded() || !has_master(g), "group ", group_decl(g).name,
            ": its master values are sharded (shard_values)");
  return storage_[static_cast<size_t>(g)].master.view;
}
Tensor ParameterSet::group_values(int g) const {
  return has_master(g) ? group_master(g) : group_params(g);
}
Tensor ParameterSet::group_grads(int g) const {
  if (!keeps_training_state(g) || !has_grads_) return Tensor();
  SDP_CHECK(has_full_grads(g), "group ", group_decl(g).name,
            ": its whole gradients do not exist now (sharded)");
  return first(whole_grads(g), group_decl(g).numel);
}
Tensor ParameterSet::group_adam_m(int g) const {
  SDP_CHECK(!group_shard(g).sharded(), "group ", group_decl(g).name, ": its moments are sharded");
  return storage_[static_cast<size_t>(g)].m.view;
}
Tensor ParameterSet::group_adam_v(int g) const {
  SDP_CHECK(!group_shard(g).sharded(), "group ", group_decl(g).name, ": its moments are sharded");
  return storage_[static_cast<size_t>(g)].v.view;
}
Tensor ParameterSet::group_buffers(int g) const {
  return storage_[static_cast<size_t>(g)].buffers.view;
}
Tensor ParameterSet::group_params_padded(int g) const {
  SDP_CHECK(has_full_params(g), "group ", group_decl(g).name, ": whole parameters not gathered");
  return whole_params(g).view;
}
Tensor ParameterSet::group_grads_padded(int g) const {
  SDP_CHECK(has_full_grads(g), "group ", group_decl(g).name, ": whole gradients absent");
  return whole_grads(g).view;
}
Tensor ParameterSet::shard_params(int g) const {
  const Storage& s = storage_[static_cast<size_t>(g)];
  if (!group_shard(g).sharded() || group_shard(g).shards_params()) return s.params.view;
  return s.params.view.narrow(0, shard_begin(g), shard_numel(g));
}
Tensor ParameterSet::shard_values(int g) const {
  if (has_master(g)) return storage_[static_cast<size_t>(g)].master.view;
  return shard_params(g);
}
Tensor ParameterSet::shard_grads(int g) const {
  const Storage& s = storage_[static_cast<size_t>(g)];
  if (!group_shard(g).sharded() || group_shard(g).shards_grads()) return s.grads.view;
  return s.grads.view.narrow(0, shard_begin(g), shard_numel(g));
}
Tensor ParameterSet::shard_adam_m(int g) const { return storage_[static_cast<size_t>(g)].m.view; }
Tensor ParameterSet::shard_adam_v(int g) const { return storage_[static_cast<size_t>(g)].v.view; }
bool ParameterSet::has_buffers() const {
  for (const auto& g : groups_)
    if (g.buffer_numel > 0) return true;
  return false;
}

int64_t ParameterSet::total_numel() const {
  int64_t n = 0;
  for (const auto& g : groups_) n += g.numel;
  return n;
}

int64_t ParameterSet::trained_numel() const {
  int64_t n = 0;
  for (const auto& g : groups_)
    if (g.trained) n += g.numel;
  return n;
}

int64_t ParameterSet::materialized_numel() const {
  int64_t n = 0;
  for (const auto& g : groups_)
    if (g.materialized) n += g.numel;
  return n;
}

void ParameterSet::report_trained(const std::vector<int>& ids, const GradsReady& ready) const {
  if (!ready) return;
  std::vector<int> trained;
  for (int id : ids)
    if (id >= 0 && is_trained(id)) trained.push_back(id);
  if (!trained.empty()) ready(trained);
}

}  // namespace sdp
