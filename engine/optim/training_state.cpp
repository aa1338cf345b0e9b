#include "engine/optim/training_state.h"

#include <algorithm>

#include "kernels/ops.h"
#include "models/common/tensor_staging.h"

namespace sdp {

std::unique_ptr<TrainingState> TrainingState::materialize(Model& model, Allocator& allocator,
                                                          DType dtype,
                                                          const std::vector<bool>& held,
                                                          const std::vector<bool>& trained,
                                                          std::vector<GroupShard> shards) {
  std::unique_ptr<TrainingState> state(new TrainingState(model.params(), held, std::move(shards)));
  model.materialize(allocator, dtype, held, trained, state->whole_storage());
  state->allocate();
  return state;
}

std::unique_ptr<TrainingState> TrainingState::materialize(ParameterSet& params,
                                                          Allocator& allocator, DType dtype,
                                                          const std::vector<bool>& held,
                                                          const std::vector<bool>& trained,
                                                          std::vector<GroupShard> shards) {
  std::unique_ptr<TrainingState> state(new TrainingState(params, held, std::move(shards)));
  params.materialize(allocator, dtype, held, trained, state->whole_storage());
  state->allocate();
  return state;
}

TrainingState::TrainingState(ParameterSet& params, const std::vector<bool>& held,
                             std::vector<GroupShard> shards)
    : params_(params), shards_(std::move(shards)) {
  const size_t groups = static_cast<size_t>(params_.group_count());
  SDP_CHECK(shards_.empty() || shards_.size() == groups, "shard list has ", shards_.size(),
            " entries for ", groups, " parameter groups");
  if (shards_.empty()) shards_.assign(groups, GroupShard{});
  for (size_t g = 0; g < groups; ++g) {
    const GroupShard& s = shards_[g];
    const std::string& name = params_.group_decl(static_cast<int>(g)).name;
    SDP_CHECK(s.parts >= 1 && s.index >= 0 && s.index < s.parts, "group ", name, ": shard ",
              s.index, " of ", s.parts);
    SDP_CHECK(!s.sharded() || g >= held.size() || held[g], "group ", name,
              " is sharded but not held here");
  }
}

std::vector<WholeStorage> TrainingState::whole_storage() const {
  std::vector<WholeStorage> out(shards_.size());
  for (size_t g = 0; g < shards_.size(); ++g) {
    const GroupShard& s = shards_[g];
    if (!s.sharded()) continue;
    // Whole buffers of a sharded group are padded so collectives work on
    // equal chunks; unsharded groups keep their exact size.
    const int64_t n = params_.group_decl(static_cast<int>(g)).numel;
    out[g].padded_numel = (n + s.parts - 1) / s.parts * s.parts;
    out[g].params_persist = !s.shards_params();
    out[g].untrained_grads = true;  // a sharded group keeps its shard's state here
    out[g].grads_persist = !s.shards_grads();
  }
  return out;
}

void TrainingState::allocate() {
  storage_.resize(shards_.size());
  Allocator& alloc = params_.allocator();
  for (int g = 0; g < params_.group_count(); ++g) {
    const GroupShard& s = group_shard(g);
    Storage& st = storage_[static_cast<size_t>(g)];
    if (s.shards_params()) {
      st.params = OwnedTensor(alloc, {shard_numel(g)}, params_.dtype(), MemCategory::param);
      ops::fill(st.params.view, 0.0);  // the padding
    }
    if (keeps_training_state(g) && params_.state_dtype() != params_.dtype()) {
      st.master = OwnedTensor(alloc, {shard_numel(g)}, params_.state_dtype(), MemCategory::master);
      // The last shard's padding too: fresh device memory is not zero, and
      // the update and the all-gather carry the padding along.
      if (s.sharded()) ops::fill(st.master.view, 0.0);
    }
  }
}

const GroupShard& TrainingState::group_shard(int g) const {
  return shards_[static_cast<size_t>(g)];
}

bool TrainingState::any_sharded() const {
  return std::any_of(shards_.begin(), shards_.end(),
                     [](const GroupShard& s) { return s.sharded(); });
}

int64_t TrainingState::shard_numel(int g) const {
  return group_shard(g).sharded() ? padded_numel(g) / group_shard(g).parts
                                  : params_.group_decl(g).numel;
}

int64_t TrainingState::shard_begin(int g) const {
  return group_shard(g).sharded() ? group_shard(g).index * shard_numel(g) : 0;
}

void TrainingState::allocate_grads() {
  if (params_.has_grads()) return;
  params_.allocate_grads();
  // Sharded gradients persist as this rank's shard; an optimizer-sharded
  // group keeps them whole in the model, padded for the in-place
  // reduce-scatter.
  for (int g = 0; g < params_.group_count(); ++g) {
    if (!group_shard(g).shards_grads()) continue;
    OwnedTensor& grads = storage_[static_cast<size_t>(g)].grads;
    grads = OwnedTensor(params_.allocator(), {shard_numel(g)}, params_.state_dtype(),
                        MemCategory::grad);
    ops::fill(grads.view, 0.0);
  }
}

void TrainingState::allocate_adam_state() {
  if (has_adam_) return;
  for (int g = 0; g < params_.group_count(); ++g) {
    if (!keeps_training_state(g)) continue;
    Storage& st = storage_[static_cast<size_t>(g)];
    // Moments stay f32 (or f64 in checks) whatever the parameter dtype.
    st.m = OwnedTensor(params_.allocator(), {shard_numel(g)}, params_.state_dtype(),
                       MemCategory::optim);
    st.v = OwnedTensor(params_.allocator(), {shard_numel(g)}, params_.state_dtype(),
                       MemCategory::optim);
    ops::fill(st.m.view, 0.0);
    ops::fill(st.v.view, 0.0);
  }
  has_adam_ = true;
}

void TrainingState::zero_grads() {
  params_.zero_grads();
  for (Storage& st : storage_)
    if (st.grads) ops::fill(st.grads.view, 0.0);
}

void TrainingState::init_values(uint64_t seed) {
  // Written where the values live: the master copy, the shard and the
  // parameter.
  params_.for_each_initial_value(
      seed, [this](int id, const Tensor& value) { assign(id, Part::values, value); });
}

void TrainingState::refresh_from_master(int id) {
  const int g = params_.decl(id).group;
  if (params_.decl(id).buffer || !has_master(g)) return;
  if (group_shard(g).sharded()) {
    // This rank's slice: the rest arrives with the next all-gather.
    const ShardSlice sl = shard_slice(id);
    if (sl.length == 0) return;
    Tensor low = shard_params(g).narrow(0, sl.shard_begin, sl.length);
    stage_copy(shard_values(g).narrow(0, sl.shard_begin, sl.length), low);
    return;
  }
  Tensor low = params_.param(id);
  stage_copy(values(id), low);
}

TrainingState::ShardSlice TrainingState::shard_slice(int id) const {
  const ParamDecl& d = params_.decl(id);
  SDP_CHECK(!d.buffer, d.name, " is a buffer: buffers are never sharded");
  const int64_t begin = shard_begin(d.group), end = begin + shard_numel(d.group);
  const int64_t lo = std::max(begin, d.offset), hi = std::min(end, d.offset + d.shape.numel());
  if (lo >= hi) return {};
  return {lo - d.offset, lo - begin, hi - lo};
}

void TrainingState::assign(int id, Part part, const Tensor& full) {
  const ParamDecl& d = params_.decl(id);
  SDP_CHECK(params_.is_materialized(id), "assign: parameter ", d.name, " is not held here");
  SDP_CHECK(full.shape() == d.shape, "assign: ", d.name, " is ", d.shape.str(), ", got ",
            full.describe());
  const int g = d.group;
  if (d.buffer) {
    SDP_CHECK(part == Part::values, "assign: buffer ", d.name, " has no optimizer state");
    params_.assign(id, full);
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
    params_.assign(id, full);
  }
}

namespace {
// Parameter `d`'s elements of a group's flat [numel] buffer.
Tensor slice_of(const Tensor& flat, const ParamDecl& d, const char* what) {
  SDP_CHECK(flat.numel() > 0 || d.shape.numel() == 0, what, " of ", d.name, " are not allocated");
  return flat.narrow(0, d.offset, d.shape.numel()).view(d.shape);
}
}  // namespace

Tensor TrainingState::values(int id) const {
  const ParamDecl& d = params_.decl(id);
  if (d.buffer || !has_master(d.group)) return params_.param(id);
  return slice_of(group_master(d.group), d, "master values");
}

Tensor TrainingState::adam_m(int id) const {
  const ParamDecl& d = params_.decl(id);
  SDP_CHECK(!d.buffer, d.name, " is a buffer: it has no optimizer state");
  SDP_CHECK(params_.is_trained(id), "parameter ", d.name, " has no optimizer state on this rank");
  return slice_of(group_adam_m(d.group), d, "AdamW first moments");
}

Tensor TrainingState::adam_v(int id) const {
  const ParamDecl& d = params_.decl(id);
  SDP_CHECK(!d.buffer, d.name, " is a buffer: it has no optimizer state");
  SDP_CHECK(params_.is_trained(id), "parameter ", d.name, " has no optimizer state on this rank");
  return slice_of(group_adam_v(d.group), d, "AdamW second moments");
}

namespace {
// A whole-group view of state that exists whole only when not sharded.
Tensor unsharded(const OwnedTensor& t, const GroupShard& s, const std::string& group,
                 const char* what) {
  SDP_CHECK(!s.sharded(), "group ", group, ": its ", what, " are sharded (shard_*)");
  return t.view;
}
}  // namespace

Tensor TrainingState::group_values(int g) const {
  return has_master(g) ? group_master(g) : params_.group_params(g);
}
Tensor TrainingState::group_master(int g) const {
  return unsharded(storage_[static_cast<size_t>(g)].master, group_shard(g),
                   params_.group_decl(g).name, "master values");
}
Tensor TrainingState::group_adam_m(int g) const {
  return unsharded(storage_[static_cast<size_t>(g)].m, group_shard(g),
                   params_.group_decl(g).name, "AdamW moments");
}
Tensor TrainingState::group_adam_v(int g) const {
  return unsharded(storage_[static_cast<size_t>(g)].v, group_shard(g),
                   params_.group_decl(g).name, "AdamW moments");
}

Tensor TrainingState::shard_params(int g) const {
  const GroupShard& s = group_shard(g);
  if (s.shards_params()) return storage_[static_cast<size_t>(g)].params.view;
  if (!s.sharded()) return params_.group_params(g);
  return params_.group_params_padded(g).narrow(0, shard_begin(g), shard_numel(g));
}
Tensor TrainingState::shard_values(int g) const {
  if (has_master(g)) return storage_[static_cast<size_t>(g)].master.view;
  return shard_params(g);
}
Tensor TrainingState::shard_grads(int g) const {
  const GroupShard& s = group_shard(g);
  if (s.shards_grads()) return storage_[static_cast<size_t>(g)].grads.view;
  if (!s.sharded()) return params_.group_grads(g);
  return params_.group_grads_padded(g).narrow(0, shard_begin(g), shard_numel(g));
}
Tensor TrainingState::shard_adam_m(int g) const { return storage_[static_cast<size_t>(g)].m.view; }
Tensor TrainingState::shard_adam_v(int g) const { return storage_[static_cast<size_t>(g)].v.view; }

}  // namespace sdp
