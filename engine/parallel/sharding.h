#pragma once
// FSDP / ZeRO for one rank: the collectives of the sharded storage groups
// (engine/optim/shard_level.h). Sharding is an axis of its own: each
// trained group is partitioned over its owners (k ranks of its owner set;
// the shared group over the whole world), so SDP and sharding multiply.
// Per level, for one step of M micro-batches:
//   optimizer  gradients accumulate whole; after the last backward one
//              reduce-scatter (average) leaves each owner its shard; AdamW
//              updates the shard; one all-gather of the updated parameters
//   grad       as soon as a group's gradients of a micro-batch are final
//              (GradsReady) they are reduce-scattered into the persistent
//              shard and the whole buffer is freed: M reduce-scatters;
//              then AdamW on the shard and one all-gather
//   full       before a site of the model reads a group, its parameters are
//              all-gathered into a transient whole buffer (and the next
//              site's are started, to overlap compute); after the site's
//              last read it is freed again (forward: when resharding after
//              forward; backward: always). Gradients as for `grad`. AdamW
//              updates the shards in place: no gather after the update.
// A site is a place of the model that reads parameters (Model::site_params:
// input stage, blocks, output stage); a group may be read at several sites
// (the shared group: embedding and head) and stays gathered from its first
// read to its last in a pass. Unsharded groups (one owner, untrained) are
// not touched here: OwnerGroups averages them.
//
// Backward masking with full sharding: every rank runs the whole model, so
// every group is cut over the world, like the shared group, and gathered
// for each site; only its owners compute its weight gradients, the others
// contribute zeros to the reduce-scatter, and every rank keeps the AdamW
// state of its world shard. Memory and traffic are FSDP's; the weight
// gradients of the groups a rank does not own are not computed.
#include <memory>
#include <span>
#include <vector>

#include "comm/communicator.h"
#include "engine/parallel/owner_groups.h"
#include "engine/parallel/strategy.h"
#include "models/common/param_hooks.h"
#include "engine/optim/training_state.h"

namespace sdp {

class Sharding {
 public:
  // site_params[s]: the parameter ids site s reads. The groups' partition
  // is the training state's (TrainingState::group_shard).
  Sharding(TrainingState& training, OwnerGroups& groups, std::vector<std::vector<int>> site_params,
           bool reshard_after_forward);

  // Whether any group is sharded here (otherwise every call is a no-op).
  bool active() const { return active_; }
  // Training forwards keep the groups the output stage read gathered for
  // the backward that follows at once; evaluation frees everything.
  void set_training(bool training) { training_ = training; }

  // The model's parameter hooks (Model::set_param_hooks).
  void params_needed(int site, ParamPass pass);
  void params_done(int site, ParamPass pass);

  // Before each backward action of a micro-batch (a step's schedule,
  // engine/pipeline):
  //   whole   B: input and weight gradients. Every gradient-sharded group
  //           expects all its gradients; each is reduce-scattered as soon
  //           as `ready` (grads_ready) has reported all its parameters.
  //   input   I of two-stage backward: input gradients and whatever weight
  //           gradients come with them (the input and output stages',
  //           BatchNorm's), written into whole buffers allocated as for B
  //           and kept: nothing is reduced.
  //   weight  W: the blocks' weight gradients (no parameter hook runs, so
  //           their whole buffers are allocated here); when it ends every
  //           whole buffer there is is reduce-scattered into its shard and
  //           freed.
  // Reductions are linear, so a buffer that holds one micro-batch's I
  // contributions beside another's W contributions when reduced still adds
  // each contribution to the shard exactly once. Under two-stage backward a
  // group's whole gradients thus live from the first I that writes them to
  // the end of the next W (the meta device counts exactly that).
  enum class BackwardPart { whole, input, weight };
  void begin_backward(BackwardPart part = BackwardPart::whole);
  // After each backward action: reduces what it finished (W: everything
  // whole) and frees the gathered parameters (a site whose backward reads
  // no parameter makes no done() call).
  void end_backward();
  void grads_ready(std::span<const int> param_ids);
  // After the step's last backward: the optimizer-level groups'
  // reduce-scatter; checks that every other group was reduced.
  void reduce_remaining_gradients();
  // After the update: the optimizer- and grad-level groups' all-gather of
  // their updated parameters.
  void gather_updated_parameters();
  // Sum of squares of this rank's gradient shards (each sharded group's
  // shards together cover it once).
  double gradient_square_share() const;
  // Frees every gathered parameter buffer (after an evaluation, before a
  // checkpoint).
  void release_all();

 private:
  struct GroupState {
    comm::Communicator* comm = nullptr;
    std::unique_ptr<comm::PendingCollective> pending;  // a prefetch in flight
    int first_site = -1, last_site = -1;  // sites reading the group, forward order
    int64_t trained_params = 0;           // parameters whose gradients it expects
    int64_t unreported = 0;               // of them, not final yet in this backward
    // Cut over the world under backward masking: reduced after its site's
    // backward on every rank (not on GradsReady), the world's average
    // rescaled by world / owners.
    bool reduce_after_site = false;
    double owner_scale = 1.0;
  };
  void reduce_finished_sites();
  void gather(int g, bool wait);
  void finish_gather(int g);
  void release(int g);
  void reduce_scatter_into_shard(int g);
  // Next site after `site` in `pass` order with a group to gather, or -1.
  int next_site_to_gather(int site, ParamPass pass) const;

  TrainingState& training_state_;
  ParameterSet& params_;  // training_state_'s
  std::vector<std::vector<int>> site_groups_;  // held, parameter-sharded groups per site
  std::vector<std::vector<int>> site_grad_groups_;  // gradient-sharded groups per site
  std::vector<GroupState> state_;
  std::vector<int> group_of_param_;
  std::vector<char> reported_;  // by parameter id: final in this backward
  std::vector<int> finished_site_groups_;  // to reduce at the next backward hook
  bool reshard_after_forward_;
  BackwardPart part_ = BackwardPart::whole;  // of the backward action under way
  // Gradient-sharded groups read at the input stage (site 0) alone. The
  // hook protocol promises no backward calls there (LLaMA's embedding
  // gradient reads no parameter), so their whole buffers are allocated
  // when a backward that writes them begins (B, I).
  std::vector<int> input_stage_grad_groups_;
  bool training_ = true;
  bool active_ = false;
};

}  // namespace sdp
