#include "engine/parallel/sharding.h"

#include <algorithm>

#include "kernels/ops.h"

namespace sdp {

Sharding::Sharding(TrainingState& training, OwnerGroups& groups,
                   std::vector<std::vector<int>> site_params, bool reshard_after_forward)
    : training_state_(training), params_(training.params()),
      reshard_after_forward_(reshard_after_forward) {
  const ParameterSet& params = params_;
  const int G = params.group_count();
  state_.resize(static_cast<size_t>(G));
  for (int g = 0; g < G; ++g) {
    const GroupShard& s = training_state_.group_shard(g);
    if (!s.sharded()) continue;
    comm::Communicator& c = groups.shard_comm(g, training_state_);
    SDP_CHECK(c.rank() == s.index, "group ", params.group_decl(g).name, ": shard ", s.index,
              " on rank ", c.rank(), " of its communicator");
    GroupState& st = state_[static_cast<size_t>(g)];
    st.comm = &c;
    // Cut over more ranks than own it (backward masking, full sharding):
    // the non-owners' whole gradients stay zero, so the average over the
    // world is rescaled to the average over the owners, and every rank
    // reduces when the site's backward is over, whether it owns the group
    // or not, so that all ranks call the collectives in the same order.
    comm::Communicator* owners = groups.group_comm(g);
    const int owner_count = owners ? owners->size() : 0;
    if (c.size() != owner_count) {
      st.reduce_after_site = true;
      st.owner_scale = static_cast<double>(c.size()) /
                       static_cast<double>(groups.layout().groups[static_cast<size_t>(g)].owners.size());
    }
    active_ = true;
  }
  group_of_param_.resize(static_cast<size_t>(params.count()));
  for (int id = 0; id < params.count(); ++id) {
    const int g = params.decl(id).group;
    group_of_param_[static_cast<size_t>(id)] = g;
    if (training_state_.group_shard(g).shards_grads() && !params.decl(id).buffer &&
        !state_[static_cast<size_t>(g)].reduce_after_site)
      ++state_[static_cast<size_t>(g)].trained_params;
  }
  const int sites = static_cast<int>(site_params.size());
  site_groups_.resize(site_params.size());
  site_grad_groups_.resize(site_params.size());
  for (int site = 0; site < sites; ++site) {
    std::vector<int> gs;
    for (int id : site_params[static_cast<size_t>(site)]) gs.push_back(params.decl(id).group);
    std::sort(gs.begin(), gs.end());
    gs.erase(std::unique(gs.begin(), gs.end()), gs.end());
    for (int g : gs) {
      const GroupShard& s = training_state_.group_shard(g);
      if (!params.group_decl(g).materialized) continue;
      if (s.shards_params()) {
        site_groups_[static_cast<size_t>(site)].push_back(g);
        GroupState& st = state_[static_cast<size_t>(g)];
        if (st.first_site < 0) st.first_site = site;
        st.last_site = site;
      }
      if (s.shards_grads()) site_grad_groups_[static_cast<size_t>(site)].push_back(g);
    }
  }
  for (int g = 0; g < G; ++g)
    SDP_CHECK(!training_state_.group_shard(g).shards_params() ||
                  state_[static_cast<size_t>(g)].first_site >= 0,
              "group ", params.group_decl(g).name, " is sharded but no site reads it");
  if (sites > 0)
    for (int g : site_grad_groups_[0]) {
      bool elsewhere = false;
      for (int site = 1; site < sites; ++site)
        for (int other : site_grad_groups_[static_cast<size_t>(site)]) elsewhere |= other == g;
      if (!elsewhere) input_stage_grad_groups_.push_back(g);
    }
}

void Sharding::gather(int g, bool wait) {
  GroupState& st = state_[static_cast<size_t>(g)];
  if (st.pending) {
    if (wait) finish_gather(g);
    return;
  }
  if (params_.has_full_params(g)) return;  // still gathered
  params_.allocate_full_params(g);
  Tensor whole = params_.group_params_padded(g);  // [P]
  const Tensor shard = training_state_.shard_params(g);   // [P / parts]
  if (wait)
    st.comm->all_gather(shard, whole);
  else
    st.pending = st.comm->all_gather_async(shard, whole);
}

void Sharding::finish_gather(int g) {
  GroupState& st = state_[static_cast<size_t>(g)];
  if (!st.pending) return;
  st.pending->wait();
  st.pending.reset();
}

void Sharding::release(int g) {
  finish_gather(g);
  params_.release_full_params(g);
}

int Sharding::next_site_to_gather(int site, ParamPass pass) const {
  const int step = pass == ParamPass::forward ? 1 : -1;
  const int sites = static_cast<int>(site_groups_.size());
  for (int t = site + step; t >= 0 && t < sites; t += step) {
    const auto& gs = site_groups_[static_cast<size_t>(t)];
    if (gs.empty()) continue;  // reads nothing sharded here (or does not run on this rank)
    for (int g : gs)
      if (!params_.has_full_params(g)) return t;
    return -1;  // the next site's parameters are there already
  }
  return -1;
}

void Sharding::reduce_finished_sites() {
  for (int g : finished_site_groups_) reduce_scatter_into_shard(g);
  finished_site_groups_.clear();
}

void Sharding::params_needed(int site, ParamPass pass) {
  if (!active_) return;
  // The previous site's weight gradients are done by now.
  if (pass == ParamPass::backward) reduce_finished_sites();
  for (int g : site_groups_[static_cast<size_t>(site)]) gather(g, true);
  if (pass == ParamPass::backward)
    for (int g : site_grad_groups_[static_cast<size_t>(site)])
      if (!params_.has_full_grads(g)) params_.allocate_full_grads(g);
  // One site ahead: its gather runs while this site computes.
  const int next = next_site_to_gather(site, pass);
  if (next >= 0)
    for (int g : site_groups_[static_cast<size_t>(next)]) gather(g, false);
}

void Sharding::params_done(int site, ParamPass pass) {
  if (!active_) return;
  if (pass == ParamPass::backward && part_ == BackwardPart::whole)
    for (int g : site_grad_groups_[static_cast<size_t>(site)])
      if (state_[static_cast<size_t>(g)].reduce_after_site) finished_site_groups_.push_back(g);
  const int output_stage = static_cast<int>(site_groups_.size()) - 1;
  for (int g : site_groups_[static_cast<size_t>(site)]) {
    const GroupState& st = state_[static_cast<size_t>(g)];
    if (pass == ParamPass::forward) {
      if (st.last_site != site) continue;  // read again later in this forward
      // A training forward's backward starts with the output stage: what it
      // read stays; without resharding after forward everything stays.
      if (training_ && (!reshard_after_forward_ || site == output_stage)) continue;
    } else if (st.first_site != site) {
      continue;  // backward reads it again at an earlier site
    }
    release(g);
  }
}

void Sharding::begin_backward(BackwardPart part) {
  part_ = part;
  if (part != BackwardPart::weight)
    for (int g : input_stage_grad_groups_)
      if (!params_.has_full_grads(g)) params_.allocate_full_grads(g);
  if (part == BackwardPart::weight) {
    // No parameter hook runs in W: the blocks' buffers are allocated now.
    for (size_t site = 1; site + 1 < site_grad_groups_.size(); ++site)
      for (int g : site_grad_groups_[site])
        if (!params_.has_full_grads(g)) params_.allocate_full_grads(g);
  }
  if (part != BackwardPart::whole) return;
  for (GroupState& st : state_) st.unreported = st.trained_params;
  reported_.assign(static_cast<size_t>(params_.count()), 0);
}

void Sharding::end_backward() {
  if (part_ == BackwardPart::weight) {
    // In the order a whole backward reduces, the output stage's first, so
    // every rank of a communicator calls the same collectives in turn.
    for (auto site = site_grad_groups_.rbegin(); site != site_grad_groups_.rend(); ++site)
      for (int g : *site)
        if (params_.has_full_grads(g)) reduce_scatter_into_shard(g);
  }
  reduce_finished_sites();
  release_all();
  part_ = BackwardPart::whole;
}

void Sharding::grads_ready(std::span<const int> param_ids) {
  for (int id : param_ids) {
    const int g = group_of_param_[static_cast<size_t>(id)];
    if (!training_state_.group_shard(g).shards_grads()) continue;
    GroupState& st = state_[static_cast<size_t>(g)];
    if (st.reduce_after_site) continue;  // reduced when its site's backward is over
    if (part_ != BackwardPart::whole) continue;  // reduced when a W ends
    char& seen = reported_[static_cast<size_t>(id)];
    SDP_CHECK(!seen, "gradient of ", params_.decl(id).name, " reported final twice in one backward");
    seen = 1;
    if (--st.unreported == 0) reduce_scatter_into_shard(g);
  }
}

void Sharding::reduce_scatter_into_shard(int g) {
  GroupState& st = state_[static_cast<size_t>(g)];
  Tensor whole = params_.group_grads_padded(g);  // [P]
  Tensor mine =
      whole.narrow(0, training_state_.shard_begin(g), training_state_.shard_numel(g));  // [S]
  st.comm->reduce_scatter(whole, mine, comm::ReduceOp::average);
  if (st.owner_scale != 1.0) ops::scale(mine, st.owner_scale);
  // Micro-batches add up in the shard, as they would in whole gradients.
  Tensor shard = training_state_.shard_grads(g);
  ops::add(shard, mine, shard);
  params_.release_full_grads(g);
}

void Sharding::reduce_remaining_gradients() {
  for (int g = 0; g < params_.group_count(); ++g) {
    const GroupShard& s = training_state_.group_shard(g);
    if (!s.sharded()) continue;
    if (s.shards_grads()) {
      SDP_CHECK(!params_.has_full_grads(g), "group ", params_.group_decl(g).name, ": ",
                state_[static_cast<size_t>(g)].unreported,
                " parameters' gradients were never reported final in the last backward");
      continue;
    }
    // Whole gradients, accumulated over the micro-batches: one reduce-scatter
    // in place leaves this rank's averaged shard in its chunk.
    Tensor whole = params_.group_grads_padded(g);
    Tensor mine = training_state_.shard_grads(g);
    state_[static_cast<size_t>(g)].comm->reduce_scatter(whole, mine, comm::ReduceOp::average);
  }
}

void Sharding::gather_updated_parameters() {
  for (int g = 0; g < params_.group_count(); ++g) {
    const GroupShard& s = training_state_.group_shard(g);
    if (!s.sharded() || s.shards_params()) continue;
    Tensor whole = params_.group_params_padded(g);  // [P], this rank's chunk updated
    const Tensor mine = training_state_.shard_params(g);
    state_[static_cast<size_t>(g)].comm->all_gather(mine, whole);
  }
}

double Sharding::gradient_square_share() const {
  double sum = 0;
  for (int g = 0; g < params_.group_count(); ++g)
    if (training_state_.group_shard(g).sharded())
      sum += ops::sum_squares(training_state_.shard_grads(g));
  return sum;
}

void Sharding::release_all() {
  for (int g = 0; g < params_.group_count(); ++g)
    if (training_state_.group_shard(g).shards_params()) release(g);
}

}  // namespace sdp
