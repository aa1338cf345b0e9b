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
                               const std::vector<WholeStorage>& storage) {
  SDP_CHECK(storage_.empty(), "parameters are already materialized");
  SDP_CHECK(held.empty() || held.size() == groups_.size(), "ownership mask has ", held.size(),
            " entries for ", groups_.size(), " parameter groups");
  SDP_CHECK(trained.empty() || trained.size() == groups_.size(), "training mask has ",
            trained.size(), " entries for ", groups_.size(), " parameter groups");
  SDP_CHECK(storage.empty() || storage.size() == groups_.size(), "storage list has ",
            storage.size(), " entries for ", groups_.size(), " parameter groups");
  allocator_ = &allocator;
  dtype_ = dtype;
  storage_.resize(groups_.size());
  whole_.assign(groups_.size(), WholeStorage{});
  for (size_t g = 0; g < groups_.size(); ++g) {
    ParamGroupDecl& gd = groups_[g];
    gd.materialized = held.empty() || held[g];
    gd.trained = trained.empty() ? gd.materialized : trained[g];
    SDP_CHECK(gd.materialized || !gd.trained, "group ", gd.name, " is marked trained but not held");
    if (!storage.empty()) {
      const WholeStorage& w = storage[g];
      SDP_CHECK(w.padded_numel == 0 || w.padded_numel >= gd.numel, "group ", gd.name, ": ",
                w.padded_numel, " padded elements for ", gd.numel);
      const bool plain = w.padded_numel == 0 && w.params_persist && !w.untrained_grads &&
                         w.grads_persist;
      SDP_CHECK(plain || gd.materialized, "group ", gd.name,
                " is stored in pieces but not held here");
      whole_[g] = w;
    }
    if (!gd.materialized) continue;
    const int gi = static_cast<int>(g);
    if (whole_[g].params_persist) {
      storage_[g].params = OwnedTensor(allocator, {padded_numel(gi)}, dtype, MemCategory::param);
      if (padded_numel(gi) > gd.numel) ops::fill(storage_[g].params.view, 0.0);  // the padding
    }
    if (gd.buffer_numel > 0)
      storage_[g].buffers =
          OwnedTensor(allocator, {gd.buffer_numel}, state_dtype(), MemCategory::param);
  }
}

const WholeStorage& ParameterSet::whole_storage(int g) const {
  static const WholeStorage plain;
  return whole_.empty() ? plain : whole_[static_cast<size_t>(g)];
}

int64_t ParameterSet::padded_numel(int g) const {
  const int64_t padded = whole_storage(g).padded_numel;
  return padded > 0 ? padded : group_decl(g).numel;
}

void ParameterSet::allocate_full_params(int g) {
  SDP_CHECK(!whole_storage(g).params_persist, "group ", group_decl(g).name,
            " keeps whole parameters: nothing to allocate");
  Storage& st = storage_[static_cast<size_t>(g)];
  SDP_CHECK(!st.full_params, "whole parameters of group ", group_decl(g).name,
            " are already allocated");
  st.full_params = OwnedTensor(*allocator_, {padded_numel(g)}, dtype_, MemCategory::gathered);
}

void ParameterSet::release_full_params(int g) {
  if (!whole_storage(g).params_persist) storage_[static_cast<size_t>(g)].full_params = OwnedTensor();
}

bool ParameterSet::has_full_params(int g) const {
  return whole_storage(g).params_persist ||
         static_cast<bool>(storage_[static_cast<size_t>(g)].full_params);
}

void ParameterSet::allocate_full_grads(int g) {
  SDP_CHECK(!whole_storage(g).grads_persist, "group ", group_decl(g).name,
            " keeps whole gradients: nothing to allocate");
  Storage& st = storage_[static_cast<size_t>(g)];
  SDP_CHECK(!st.full_grads, "whole gradients of group ", group_decl(g).name,
            " are already allocated");
  st.full_grads = OwnedTensor(*allocator_, {padded_numel(g)}, state_dtype(), MemCategory::grad);
  ops::fill(st.full_grads.view, 0.0);
}

void ParameterSet::release_full_grads(int g) {
  if (!whole_storage(g).grads_persist) storage_[static_cast<size_t>(g)].full_grads = OwnedTensor();
}

bool ParameterSet::has_full_grads(int g) const {
  if (!keeps_grads(g) || !has_grads_) return false;
  return whole_storage(g).grads_persist ||
         static_cast<bool>(storage_[static_cast<size_t>(g)].full_grads);
}

const OwnedTensor& ParameterSet::whole_params(int g) const {
  const Storage& s = storage_[static_cast<size_t>(g)];
  return whole_storage(g).params_persist ? s.params : s.full_params;
}

const OwnedTensor& ParameterSet::whole_grads(int g) const {
  const Storage& s = storage_[static_cast<size_t>(g)];
  return whole_storage(g).grads_persist ? s.grads : s.full_grads;
}

void ParameterSet::allocate_grads() {
  SDP_CHECK(allocator_, "materialize() parameters before their gradients");
  if (has_grads_) return;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const int gi = static_cast<int>(g);
    if (!keeps_grads(gi) || !whole_storage(gi).grads_persist) continue;
    storage_[g].grads = OwnedTensor(*allocator_, {padded_numel(gi)}, state_dtype(), MemCategory::grad);
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

void ParameterSet::zero_grads() {
  SDP_CHECK(has_grads_, "zero_grads() before allocate_grads()");
  for (auto& s : storage_) {
    if (s.grads) ops::fill(s.grads.view, 0.0);
    if (s.full_grads) ops::fill(s.full_grads.view, 0.0);
  }
}

void ParameterSet::draw_initial_value(int id, uint64_t seed, Tensor& out) const {
  const ParamDecl& d = decl(id);
  SDP_CHECK(out.shape() == d.shape && (out.dtype() == DType::f32 || out.dtype() == DType::f64) &&
                out.device() == Device::cpu,
            "initial value of ", d.name, ": needs a host f32/f64 tensor of shape ", d.shape.str(),
            ", got ", out.describe());
  switch (d.init) {
    case InitKind::ones: ops::fill(out, 1.0); return;
    case InitKind::zeros: ops::fill(out, 0.0); return;
    case InitKind::normal: break;
  }
  // Keyed by the full tensor and its flat index there: a piece draws
  // exactly the values of its rows / columns of the whole tensor.
  const uint64_t key = splitmix64(seed) ^ stable_hash(d.full_name);
  const int64_t n = out.numel();
  // A piece is [outer, length, inner] inside the full [outer, full, inner].
  int64_t inner = 1;
  for (int a = d.piece_axis + 1; a < d.shape.ndim(); ++a) inner *= d.shape[a];
  const int64_t length = d.shape[d.piece_axis], full_length = d.full_shape[d.piece_axis];
  auto full_index = [&](int64_t i) -> uint64_t {
    if (!d.is_piece()) return static_cast<uint64_t>(i);
    const int64_t outer = i / (length * inner), rest = i % (length * inner);
    return static_cast<uint64_t>(outer * full_length * inner + d.piece_start * inner + rest);
  };
  if (out.dtype() == DType::f64) {
    double* x = out.data<double>();
    for (int64_t i = 0; i < n; ++i) x[i] = d.init_std * counter_normal(key, full_index(i));
  } else {
    float* x = out.data<float>();
    for (int64_t i = 0; i < n; ++i)
      x[i] = static_cast<float>(d.init_std * counter_normal(key, full_index(i)));
  }
}

void ParameterSet::for_each_initial_value(
    uint64_t seed, const std::function<void(int, const Tensor&)>& write) const {
  SDP_CHECK(allocator_, "materialize() parameters before initializing them");
  if (allocator_->device() == Device::meta) return;
  static CpuAllocator host;
  for (int id = 0; id < count(); ++id) {
    if (!is_materialized(id)) continue;
    // Drawn on the host in the state dtype; the writer places (and rounds) it.
    OwnedTensor drawn(host, decl(id).shape, state_dtype(), MemCategory::workspace);  // decl.shape
    draw_initial_value(id, seed, *drawn);
    write(id, *drawn);
  }
}

void ParameterSet::init_values(uint64_t seed) {
  for_each_initial_value(seed, [this](int id, const Tensor& value) { assign(id, value); });
}

void ParameterSet::assign(int id, const Tensor& full) {
  const ParamDecl& d = decl(id);
  SDP_CHECK(is_materialized(id), "assign: parameter ", d.name, " is not held here");
  SDP_CHECK(full.shape() == d.shape, "assign: ", d.name, " is ", d.shape.str(), ", got ",
            full.describe());
  Tensor dst = param(id);
  stage_copy(full, dst);
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
Tensor ParameterSet::group_grads(int g) const {
  if (!keeps_grads(g) || !has_grads_) return Tensor();
  SDP_CHECK(has_full_grads(g), "group ", group_decl(g).name,
            ": its whole gradients do not exist now (sharded)");
  return first(whole_grads(g), group_decl(g).numel);
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
