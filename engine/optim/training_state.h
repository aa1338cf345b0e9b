#pragma once
// TrainingState: what training keeps for a model's parameters beside the
// whole tensors the model itself reads (ParameterSet): master values, AdamW
// moments, and the shards a rank keeps of a group partitioned over the ranks
// that share it. It also decides how the ParameterSet stores each group's
// whole tensors (WholeStorage), so that a model never hears of shards.
//
// Mixed precision: with bf16 parameters, each group that keeps training
// state also keeps f32 master values (category master) that the optimizer
// updates and rounds into the bf16 copy the forward reads; gradients and
// moments are f32 (the state dtype). Held but untrained groups keep only
// the bf16 values.
//
// Sharding (shard_level.h): a group may be cut into `parts` equal shards of
// its flat buffer (padded with zeros to P = a multiple of parts elements,
// shard s = [s * S, (s + 1) * S), S = P / parts). By level:
//   optimizer  master, m, v hold this rank's shard [S]; the model's whole
//              parameters and gradients stay, padded to [P] (so that the
//              all-gather of updated values and the reduce-scatter of
//              gradients work in place on this rank's chunk)
//   grad       gradients too: a persistent shard [S] here; the model's whole
//              [P] gradients exist only while backward produces them
//   full       parameters too: the shard [S] persists here (category param);
//              the model's whole [P] parameters exist only while a site reads
//              them (category gathered)
// shard_*(g) read this rank's shard (the whole group, [numel], when not
// sharded). Padding stays zero: no update touches it.
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/optim/shard_level.h"
#include "models/common/model.h"
#include "models/common/parameter_set.h"

namespace sdp {

class TrainingState {
 public:
  // Materializes `model` on `allocator` in `dtype` as this process stores
  // it: the held groups' parameters (all when empty), gradients kept for the
  // trained ones (default = held), `shards` partitioning them (empty: none),
  // and this state's own storage (shards, master values). Gradients and
  // moments are allocated by allocate_grads() / allocate_adam_state().
  static std::unique_ptr<TrainingState> materialize(Model& model, Allocator& allocator,
                                                    DType dtype,
                                                    const std::vector<bool>& held = {},
                                                    const std::vector<bool>& trained = {},
                                                    std::vector<GroupShard> shards = {});
  // The same for a parameter set outside a model (tests, tools).
  static std::unique_ptr<TrainingState> materialize(ParameterSet& params, Allocator& allocator,
                                                    DType dtype,
                                                    const std::vector<bool>& held = {},
                                                    const std::vector<bool>& trained = {},
                                                    std::vector<GroupShard> shards = {});

  ParameterSet& params() { return params_; }
  const ParameterSet& params() const { return params_; }

  // ---- allocation and values ----
  // The model's whole gradients and this rank's gradient shards, zero-filled.
  void allocate_grads();
  // AdamW's m and v (category optim), zero-filled.
  void allocate_adam_state();
  bool has_adam_state() const { return has_adam_; }
  // Zeroes every gradient buffer that exists (shards and whole buffers).
  void zero_grads();
  // Every held parameter's initial value (ParameterSet::draw_initial_value),
  // written where the values live: master, shards, whole parameters.
  void init_values(uint64_t seed);

  // ---- the partition ----
  const GroupShard& group_shard(int g) const;
  bool any_sharded() const;
  int64_t padded_numel(int g) const { return params_.padded_numel(g); }  // P
  int64_t shard_numel(int g) const;   // S = P / parts (= numel when not sharded)
  int64_t shard_begin(int g) const;   // index * S
  // Whether group g keeps gradients, master values and AdamW state here:
  // the trained groups, and a held but untrained group that is sharded (its
  // shard's state, filled by the owners' gradients: backward masking with
  // sharding, see shard_level.h).
  bool keeps_training_state(int g) const {
    return params_.group_decl(g).trained || group_shard(g).sharded();
  }
  bool has_master(int g) const {
    return static_cast<bool>(storage_[static_cast<size_t>(g)].master);
  }

  // ---- this rank's shard of a group ----
  // [S]: parameters (the stored shard, or this rank's chunk of the whole
  // buffer), authoritative values (master where kept), gradients, moments.
  Tensor shard_params(int g) const;
  Tensor shard_values(int g) const;
  Tensor shard_grads(int g) const;
  Tensor shard_adam_m(int g) const;
  Tensor shard_adam_v(int g) const;
  // Where parameter `id` meets this rank's shard of its group (elements).
  struct ShardSlice {
    int64_t param_begin = 0;  // offset inside the parameter (flat)
    int64_t shard_begin = 0;  // offset inside the shard
    int64_t length = 0;       // 0: the parameter lies outside the shard
  };
  ShardSlice shard_slice(int id) const;

  // ---- whole tensors of unsharded groups ----
  // The authoritative values: the f32 master copy where one is kept, else
  // the parameter itself (checkpoints and gathers read these).
  Tensor values(int id) const;
  Tensor adam_m(int id) const;
  Tensor adam_v(int id) const;
  Tensor group_values(int g) const;  // [numel]: master where kept, else parameters
  Tensor group_master(int g) const;  // [numel] f32; empty where no master copy is kept
  Tensor group_adam_m(int g) const;
  Tensor group_adam_v(int g) const;

  // What this rank stores of one parameter (values) or of its AdamW moments,
  // written from the whole parameter's value `full` ([decl(id).shape], any
  // device and dtype): the whole parameter, or its slice in this rank's
  // shard. Values also refresh the low-precision copy where one is kept.
  enum class Part : uint8_t { values, adam_m, adam_v };
  void assign(int id, Part part, const Tensor& full);

 private:
  TrainingState(ParameterSet& params, const std::vector<bool>& held,
                std::vector<GroupShard> shards);
  // How the model stores each group's whole tensors under this partition.
  std::vector<WholeStorage> whole_storage() const;
  void allocate();  // shards and master values, after the model's parameters
  // Rounds parameter id's master values into the low-precision copy the
  // forward reads; nothing where no master is kept.
  void refresh_from_master(int id);

  struct Storage {
    OwnedTensor params;  // [S]: the persistent shard of a `full` group
    OwnedTensor grads;   // [S]: the persistent shard of a `grad` / `full` group
    OwnedTensor master;  // [S], or [numel] unsharded: f32 values beside bf16 parameters
    OwnedTensor m, v;    // [S], or [numel] unsharded: AdamW moments
  };
  ParameterSet& params_;
  std::vector<GroupShard> shards_;  // one per group
  std::vector<Storage> storage_;
  bool has_adam_ = false;
};

}  // namespace sdp
