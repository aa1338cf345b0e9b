#include "engine/parallel/gradient_buckets.h"

#include <algorithm>

#include "kernels/ops.h"

namespace sdp {

GradientBuckets::GradientBuckets(ParameterSet& params, OwnerGroups& groups, size_t bucket_bytes,
                                 DType wire, Allocator* staging)
    : params_(params), groups_(groups), wire_(wire), staging_(staging) {
  SDP_CHECK(wire == params.state_dtype() || staging,
            "gradient buckets in ", dtype_name(wire), " need a staging allocator");
  const size_t element = dtype_size(wire);
  bucket_elems_ = static_cast<int64_t>(std::max<size_t>(bucket_bytes / element, 1));
  state_.resize(static_cast<size_t>(params.group_count()));
  position_.assign(static_cast<size_t>(params.count()), -1);
  for (int g = 0; g < params.group_count(); ++g) {
    if (!params.group_decl(g).trained) continue;
    comm::Communicator* c = groups.group_comm(g);
    SDP_CHECK(c, "rank trains group ", params.group_decl(g).name, " but is not one of its owners");
    if (c->size() == 1) continue;  // a single owner has nothing to average
    GroupState& s = state_[static_cast<size_t>(g)];
    s.comm = c;
    for (int id = 0; id < params.count(); ++id)
      if (params.decl(id).group == g && !params.decl(id).buffer) s.params_by_offset.push_back(id);
    std::sort(s.params_by_offset.begin(), s.params_by_offset.end(),
              [&](int a, int b) { return params.decl(a).offset < params.decl(b).offset; });
    for (size_t i = 0; i < s.params_by_offset.size(); ++i)
      position_[static_cast<size_t>(s.params_by_offset[i])] = static_cast<int>(i);
  }
  start();
}

void GradientBuckets::start(int reports) {
  SDP_CHECK(pending_.empty(), "GradientBuckets::start() while reductions are in flight");
  SDP_CHECK(reports >= 1, "gradient buckets: ", reports, " reports per parameter");
  reports_needed_ = reports;
  reports_.assign(position_.size(), 0);
  for (int g = 0; g < static_cast<int>(state_.size()); ++g) {
    GroupState& s = state_[static_cast<size_t>(g)];
    s.done.assign(s.params_by_offset.size(), 0);
    s.next_pending = s.params_by_offset.size();
    s.launched_from = params_.group_decl(g).numel;
  }
}

void GradientBuckets::ready(std::span<const int> param_ids) {
  std::vector<int> touched;
  for (int id : param_ids) {
    const int pos = position_[static_cast<size_t>(id)];
    if (pos < 0) continue;  // not reduced here
    if (++reports_[static_cast<size_t>(id)] < reports_needed_) continue;  // more to come
    const int g = params_.decl(id).group;
    state_[static_cast<size_t>(g)].done[static_cast<size_t>(pos)] = 1;
    touched.push_back(g);
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (int g : touched) launch_ready(g, false);
}

void GradientBuckets::launch_ready(int g, bool force) {
  GroupState& s = state_[static_cast<size_t>(g)];
  if (!s.comm) return;
  // The final tail grows while the parameter just below it is done.
  while (s.next_pending > 0 && s.done[s.next_pending - 1]) --s.next_pending;
  const int64_t final_from =
      s.next_pending == 0 ? 0 : params_.decl(s.params_by_offset[s.next_pending - 1]).offset +
                                    params_.decl(s.params_by_offset[s.next_pending - 1]).shape.numel();
  const int64_t length = s.launched_from - final_from;
  if (length <= 0) return;
  if (length < bucket_elems_ && final_from > 0 && !force) return;  // wait for a fuller bucket
  Pending p;
  p.target = params_.group_grads(g).narrow(0, final_from, length);
  Tensor on_wire = p.target;
  if (wire_ != p.target.dtype()) {
    p.wire_copy = OwnedTensor(*staging_, {length}, wire_, MemCategory::comm);  // [length]
    ops::convert(p.target, *p.wire_copy);
    on_wire = *p.wire_copy;
  }
  p.reduction = s.comm->all_reduce_async(on_wire, comm::ReduceOp::average);
  pending_.push_back(std::move(p));
  s.launched_from = final_from;
}

void GradientBuckets::finish() {
  for (int g = 0; g < static_cast<int>(state_.size()); ++g) {
    GroupState& s = state_[static_cast<size_t>(g)];
    if (!s.comm) continue;
    SDP_CHECK(s.next_pending == 0 || std::all_of(s.done.begin(), s.done.end(), [](char d) { return d; }),
              "gradient buckets: group ", params_.group_decl(g).name,
              " has parameters whose gradients backward never reported final");
    s.next_pending = 0;
    launch_ready(g, true);
  }
  for (Pending& p : pending_) {
    p.reduction->wait();
    if (p.wire_copy) ops::convert(*p.wire_copy, p.target);
  }
  pending_.clear();
}

}  // namespace sdp
