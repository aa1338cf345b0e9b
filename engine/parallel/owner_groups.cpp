#include "engine/parallel/owner_groups.h"

#include "models/common/tensor_staging.h"

#include "kernels/ops.h"

namespace sdp {

OwnerGroups::OwnerGroups(comm::Communicator& world, const SubnetLayout& layout)
    : world_(world), layout_(layout), mesh_(world, layout.mesh) {
  SDP_CHECK(world.size() == layout.world && world.rank() == layout.rank, "layout for rank ",
            layout.rank, " of ", layout.world, " used on rank ", world.rank(), " of ",
            world.size());
  for (const StorageGroup& g : layout.groups) {
    if (layout.all_ranks(g)) {
      comms_.push_back(&world);
      continue;
    }
    // Collective: every rank asks for every owner set in the same order.
    owned_.push_back(world.subgroup(g.owners));
    comms_.push_back(owned_.back().get());
  }
}

void OwnerGroups::average_gradients(TrainingState& state, std::optional<DType> wire,
                                    Allocator* staging) {
  ParameterSet& params = state.params();
  for (int g = 0; g < params.group_count(); ++g) {
    // Sharded groups are reduce-scattered instead (Sharding).
    if (!params.group_decl(g).trained || state.group_shard(g).sharded()) continue;
    comm::Communicator* c = comms_[static_cast<size_t>(g)];
    SDP_CHECK(c, "rank ", layout_.rank, " trains group ", params.group_decl(g).name,
              " but is not one of its owners");
    if (c->size() == 1) continue;
    Tensor grads = params.group_grads(g);
    average_in(*c, grads, wire.value_or(grads.dtype()), staging);
  }
}

void OwnerGroups::average_over_users(TrainingState& state) {
  const ParameterSet& params = state.params();
  for (const SublayerUsers& u : layout_.sublayer_users) {
    const int g = params.decl(u.param).group;
    if (!state.keeps_training_state(g)) continue;  // another stage's
    const size_t owners = layout_.groups[static_cast<size_t>(g)].owners.size();
    const TrainingState::ShardSlice slice = state.shard_slice(u.param);
    if (slice.length == 0) continue;  // outside this rank's shard
    Tensor grads = state.shard_grads(g).narrow(0, slice.shard_begin, slice.length);
    ops::scale(grads, static_cast<double>(owners) / static_cast<double>(u.users.size()));
  }
}

void average_in(comm::Communicator& c, Tensor& grads, DType wire, Allocator* staging) {
  if (wire == grads.dtype()) {
    c.all_reduce(grads, comm::ReduceOp::average);
    return;
  }
  SDP_CHECK(staging, "a reduction in ", dtype_name(wire), " needs a staging allocator");
  OwnedTensor copy(*staging, grads.shape(), wire, MemCategory::comm);  // [numel] on the wire
  ops::convert(grads, *copy);
  c.all_reduce(*copy, comm::ReduceOp::average);
  ops::convert(*copy, grads);
}

comm::Communicator& OwnerGroups::shard_comm(int g, const TrainingState& state) {
  const GroupShard& s = state.group_shard(g);
  comm::Communicator* owners = comms_[static_cast<size_t>(g)];
  if (owners && owners->size() == s.parts) return *owners;
  comm::Communicator* stage = mesh_.along(MeshAxis::data);
  SDP_CHECK(stage && stage->size() == s.parts, "group ", state.params().group_decl(g).name,
            " is cut into ", s.parts, " shards, but has ", owners ? owners->size() : 0,
            " owners and its stage ", layout_.replicas, " replicas");
  return *stage;
}

void OwnerGroups::broadcast_updated_values(TrainingState& state) {
  ParameterSet& params = state.params();
  for (int g = 0; g < params.group_count(); ++g) {
    const StorageGroup& sg = layout_.groups[static_cast<size_t>(g)];
    if (!sg.held) continue;  // another stage's
    // Every replica of the stage applied the same update.
    if (static_cast<int>(sg.owners.size()) == layout_.replicas) continue;
    // Every rank updated its own shard: there are no whole values to send.
    if (state.group_shard(g).shards_params()) continue;
    Tensor values = params.group_params(g);
    mesh_.along(MeshAxis::data)->broadcast(values, layout_.mesh.replica_of(sg.root));
  }
}

void OwnerGroups::merge_buffers(ParameterSet& params) {
  // Under backward masking every replica of a stage holds its groups.
  const bool stage_holds = layout_.spec.masking == Masking::backward;
  for (int g = 0; g < params.group_count(); ++g) {
    if (params.group_decl(g).buffer_numel == 0) continue;
    comm::Communicator* c = stage_holds ? mesh_.along(MeshAxis::data) : comms_[static_cast<size_t>(g)];
    if (!c || !params.group_decl(g).materialized) continue;  // not a holder
    if (c->size() == 1) continue;
    Tensor buffers = params.group_buffers(g);
    c->all_reduce(buffers, comm::ReduceOp::average);
  }
}

double OwnerGroups::gradient_square_share(const TrainingState& state) const {
  const ParameterSet& params = state.params();
  double sum = 0;
  for (int g = 0; g < params.group_count(); ++g)
    if (params.group_decl(g).trained && !state.group_shard(g).sharded() &&
        layout_.groups[static_cast<size_t>(g)].root == layout_.rank)
      sum += ops::sum_squares(params.group_grads(g));
  return sum;
}

void OwnerGroups::gather_to_rank0(const TrainingState& local, TrainingState* full,
                                  bool optimizer_state) {
  const bool me0 = world_.rank() == 0;
  SDP_CHECK(!me0 || full, "gather_to_rank0: rank 0 needs a full parameter set");
  enum Part { values, buffers, first_moment, second_moment };
  // A sharded group's part exists whole nowhere: its owners all-gather it
  // into `whole` (category comm) first, every owner taking part.
  OwnedTensor whole;
  auto view = [&](const TrainingState& p, int g, Part part) -> Tensor {
    const GroupShard& s = p.group_shard(g);
    if (s.sharded() && part != buffers) {
      const Tensor shard = part == values         ? p.shard_values(g)
                           : part == first_moment ? p.shard_adam_m(g)
                                                  : p.shard_adam_v(g);
      whole = OwnedTensor(p.params().allocator(), {p.padded_numel(g)}, shard.dtype(),
                          MemCategory::comm);
      shard_comm(g, p).all_gather(shard, *whole);
      return whole->narrow(0, 0, p.params().group_decl(g).numel);
    }
    switch (part) {
      case values: return p.group_values(g);
      case buffers: return p.params().group_buffers(g);
      case first_moment: return p.group_adam_m(g);
      case second_moment: break;
    }
    return p.group_adam_v(g);
  };
  for (int g = 0; g < local.params().group_count(); ++g) {
    const StorageGroup& sg = layout_.groups[static_cast<size_t>(g)];
    for (Part part : {values, buffers, first_moment, second_moment}) {
      if ((part == first_moment || part == second_moment) && !optimizer_state) break;
      if (part == buffers && local.params().group_decl(g).buffer_numel == 0) continue;
      // Whether rank 0 has this part, known to every rank from the layout:
      // values and buffers wherever the group is held, moments only where
      // it is owned.
      const bool owner0 = sg.owners.front() == 0;
      // A group cut over its whole stage is assembled on every rank of it:
      // on rank 0 too when that is rank 0's stage.
      const bool cut_with_rank0 = local.group_shard(g).sharded() && part != buffers &&
                                  layout_.cut_over_stage() &&
                                  layout_.stage_of(sg) == layout_.mesh.stage_of(0);
      const bool have0 =
          cut_with_rank0 || (part == values || part == buffers ? layout_.held_by(sg, 0) : owner0);
      // Every owner of a sharded group takes part in assembling it.
      const bool assembles = local.group_shard(g).sharded() && part != buffers;
      const bool sends = !me0 && !have0 && world_.rank() == sg.root;
      Tensor src;
      if (assembles || (me0 && have0) || sends) src = view(local, g, part);
      if (me0) {
        Tensor dst = view(*full, g, part);
        if (have0) {
          stage_copy(src, dst);
        } else {
          world_.recv(dst, sg.root);
        }
      } else if (sends && src.device() != Device::cuda) {
        world_.send(src, 0);
      } else if (sends) {
        // Rank 0's copy is on the host, and a communicator carries host
        // buffers on the host path (MPI) and device buffers on the device
        // path (NCCL): a device part travels through a host staging copy,
        // so both ends of the exchange are host buffers.
        OwnedTensor staged(host_allocator(), src.shape(), src.dtype(), MemCategory::comm);
        stage_copy(src, *staged);
        world_.send(*staged, 0);
      }
    }
  }
}

}  // namespace sdp
