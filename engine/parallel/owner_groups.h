#pragma once
// The communication of SDP for one rank: a communicator per storage group
// (its owner set, split from the world once at start-up) and one along each
// axis of the rank mesh, gradient averaging among owners, the broadcast of
// updated values after backward masking (over the stage's replicas), the
// global gradient norm, and moving groups to rank 0 (evaluation of the full
// model, checkpoints).
#include <memory>
#include <optional>
#include <vector>

#include "comm/communicator.h"
#include "engine/parallel/rank_mesh.h"
#include "engine/parallel/strategy.h"
#include "engine/optim/training_state.h"

namespace sdp {

// All-reduce average of `grads` over `c`, through a `wire`-dtype copy from
// `staging` when `wire` differs from the gradients' dtype.
void average_in(comm::Communicator& c, Tensor& grads, DType wire, Allocator* staging);

class OwnerGroups {
 public:
  // Collective over `world`: every rank builds the same groups in order.
  OwnerGroups(comm::Communicator& world, const SubnetLayout& layout);

  // Averages each trained group's gradients over its owners: one all-reduce
  // per group (a group with a single owner has nothing to average). With a
  // `wire` dtype other than the gradients' (bf16 next to f32 gradients) each
  // group travels as a copy in that dtype (category comm, from `staging`):
  // half the bytes, bf16's precision. Default: the gradients' own dtype.
  void average_gradients(TrainingState& state, std::optional<DType> wire = std::nullopt,
                         Allocator* staging = nullptr);
  // Masked averaging among holders: each parameter of the layout's
  // sublayer_users (a shared parameter that serves one sublayer, which
  // some owners of its group skip) becomes the mean over its users. Called
  // once every reduction of the step is over (whole groups, buckets,
  // shards) and before the gradient norm. The group's average summed an
  // exact zero from every non-user, so k / users times it (k: the ranks
  // it was averaged over) is the users' sum over their number: exact where
  // k and the users' count are powers of two, within an ulp or two
  // otherwise. Rescaling keeps the one all-reduce per group (no collective,
  // no buffer): traffic and memory stay what they were; a separate owner
  // set per such parameter would add a collective per sublayer and block.
  void average_over_users(TrainingState& state);
  // Backward masking: every group of this rank's stage not owned by all its
  // replicas goes from its root to every replica (one broadcast per group
  // over the stage's replicas: the world without a pipeline), so all ranks
  // of a stage keep its full, identical parameters.
  void broadcast_updated_values(TrainingState& state);
  // Sum of squares of this rank's share of the gradients: each group is
  // counted by its root only, so an all-reduce over the world gives the
  // squared norm of the full model's (averaged) gradient.
  double gradient_square_share(const TrainingState& state) const;

  // Buffers (BatchNorm running statistics) of every held group become the
  // mean over the ranks that hold it: its owners under forward masking,
  // every rank under backward masking. Meant for jobs where every rank runs
  // the same (full) network, DDP and backward masking (the trainer calls it
  // only there): each rank's running statistics then estimate the same
  // population statistics from different batches, so their average is the
  // better estimate; the spread of the ranks' means is not added to the
  // variance. Under forward masking a statistic depends on the rank's whole
  // subnetwork upstream, so owners' values are not estimates of one thing.
  // Collective over the world.
  void merge_buffers(ParameterSet& params);

  // Copies every group of `local` into `full` on rank 0 (full holds and
  // trains every group, same layout, nothing sharded): values and buffers,
  // and with optimizer_state the AdamW moments. Groups rank 0 lacks come
  // from their roots by send/recv.
  void gather_to_rank0(const TrainingState& local, TrainingState* full, bool optimizer_state);

  comm::Communicator& world() { return world_; }
  const SubnetLayout& layout() const { return layout_; }
  // The communicator a sharded group is cut over: its owners, or its
  // stage's replicas (backward masking with full sharding: every rank of
  // the stage holds a shard; the world without a pipeline).
  comm::Communicator& shard_comm(int g, const TrainingState& state);
  // The communicator of group g on this rank (nullptr when not an owner).
  comm::Communicator* group_comm(int g) { return comms_[static_cast<size_t>(g)]; }
  // This rank's communicator along a mesh axis (nullptr for an axis of size 1).
  comm::Communicator* along(MeshAxis axis) const { return mesh_.along(axis); }

 private:
  comm::Communicator& world_;
  const SubnetLayout& layout_;
  MeshCommunicators mesh_;
  std::vector<std::unique_ptr<comm::Communicator>> owned_;  // split communicators
  std::vector<comm::Communicator*> comms_;                  // per group
};

}  // namespace sdp
