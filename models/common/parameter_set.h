#pragma once
// ParameterSet: every trainable tensor of a model, stored as flat buffers per
// storage group so that a group moves in one collective and a group this
// process does not hold is simply never allocated. The model decides which
// parameters share a group (by default one group per component; a
// distributed run puts all components with the same owner set in one group:
// one bucket, one collective).
//
// A parameter is either a whole Hugging Face tensor or a *piece* of one: a
// contiguous range of rows (axis 0) or columns (axis 1) stored as its own
// dense matrix. Neuron-level components (FFN unit groups, head groups) are
// pieces, which is what makes a rank's matrices physically narrower.
// Initialization and checkpoints work on the full tensor's coordinates, so
// values never depend on how the model is cut.
//
// A group may also hold *buffers*: model state that is saved, loaded and
// moved with the group's parameters but is not trained (BatchNorm running
// statistics). They live in their own flat storage per held group, always in
// the state dtype (f32 next to bf16 parameters) and category param, and have
// no gradient, no master copy and no optimizer state; group_params(),
// group_grads() etc. never include them.
//
// Each group is held (parameters allocated) or not, and trained (gradients
// and AdamW moments allocated) or not: forward masking holds only what a rank
// owns; backward masking holds everything but trains only what it owns.
//
// Mixed precision: with bf16 parameters, each trained group also keeps f32
// master values (category master) that the optimizer updates and rounds
// into the bf16 copy the forward reads; gradients and moments are f32
// (accum_dtype). Held but untrained groups keep only the bf16 values.
//
// Sharding (shard_level.h): a trained group may be cut into `parts` equal
// shards of its flat buffer (padded with zeros to P = a multiple of parts
// elements, shard s = [s * S, (s + 1) * S), S = P / parts). By level:
//   optimizer  master, m, v hold this rank's shard [S]; parameters and
//              gradients stay whole, padded to [P] (so that the all-gather
//              of updated values and the reduce-scatter of gradients work
//              in place on this rank's chunk)
//   grad       gradients too: a persistent shard [S] plus a whole [P]
//              buffer that exists only between allocate_full_grads() and
//              release_full_grads() (while backward produces them)
//   full       parameters too: the shard [S] persists (category param); the
//              whole [P] exists only between allocate_full_params() and
//              release_full_params() (category gathered)
// param(id) / grad(id) / group_params(g) / group_grads(g) read the whole
// buffers and fail while they do not exist; shard_*(g) read this rank's
// shard. Padding stays zero: no update touches it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/tensor.h"
#include "models/common/grads_ready.h"
#include "models/common/shard_level.h"

namespace sdp {

enum class InitKind : uint8_t { normal, ones, zeros };

struct ParamDecl {
  std::string name;   // unique: the HF name, plus "@<piece>" for a piece
  Shape shape;        // as stored here (a piece is narrower than full_shape)
  int group = 0;
  int64_t offset = 0; // element offset inside its group's flat buffer
  InitKind init = InitKind::normal;
  double init_std = 0.02;
  std::string full_name;  // Hugging Face name, e.g. "model.layers.0.mlp.up_proj.weight"
  Shape full_shape;       // shape of the whole HF tensor
  int piece_axis = 0;     // piece = [piece_start, piece_start + shape[piece_axis])
  int64_t piece_start = 0;//   of full_shape along piece_axis
  bool buffer = false;    // untrained state (offset is into the group's buffer storage)
  // Left out of weight decay even as a matrix (Swin's relative position
  // bias tables, as timm's no_weight_decay() names them).
  bool no_weight_decay = false;
  bool is_piece() const { return shape != full_shape; }
};

struct ParamGroupDecl {
  std::string name;     // e.g. "shared", "block.3"
  int64_t numel = 0;    // elements of all its parameters
  int64_t buffer_numel = 0;   // elements of its buffers
  bool materialized = false;  // parameters held by this process
  bool trained = false;       // gradients and optimizer state held too
};

class ParameterSet {
 public:
  // ---- declaration (before materialize) ----
  int add_group(std::string name);
  int declare(std::string name, Shape shape, int group, InitKind init, double init_std = 0.02);
  // The range [start, start + length) along axis 0 or 1 of the HF tensor
  // `full_name` of shape `full_shape` (rows or columns of a matrix, output or
  // input channels of a conv filter, channels of a 1-D tensor), stored as a
  // dense tensor named full_name + "@" + piece_label.
  int declare_piece(const std::string& full_name, const Shape& full_shape, int axis,
                    int64_t start, int64_t length, const std::string& piece_label, int group,
                    InitKind init, double init_std = 0.02);
  // Buffers (see above): init ones or zeros. A buffer piece cuts like a
  // parameter piece.
  int declare_buffer(std::string name, Shape shape, int group, InitKind init);
  int declare_buffer_piece(const std::string& full_name, const Shape& full_shape, int axis,
                           int64_t start, int64_t length, const std::string& piece_label,
                           int group, InitKind init);

  // Marks a declared parameter as never weight-decayed (ParamDecl).
  void exempt_from_weight_decay(int id) { decls_[static_cast<size_t>(id)].no_weight_decay = true; }

  // ---- storage ----
  // Allocates the parameter buffers of the held groups (all when empty) on
  // `allocator` in `dtype`; groups not held are never allocated. `trained`
  // (default: = held) marks the groups whose gradients and optimizer state
  // this process keeps; it must be a subset of `held`.
  // `shards` (empty = none) gives each group's partition; only held groups
  // may be sharded (an untrained one then keeps its shard's training state).
  void materialize(Allocator& allocator, DType dtype, const std::vector<bool>& held = {},
                   const std::vector<bool>& trained = {},
                   const std::vector<GroupShard>& shards = {});
  void allocate_grads();           // trained groups, category grad, zero-filled
  void allocate_adam_state();      // trained groups, category optim (m and v), zero-filled
  void release_grads();
  // Counter-based: independent of layout, owner and device (values are drawn
  // on the host in f64 and rounded once into the stored dtype).
  void init_values(uint64_t seed);
  // Zeroes every gradient buffer that exists (shards and whole buffers).
  void zero_grads();

  // ---- sharded groups ----
  const GroupShard& group_shard(int g) const;
  bool any_sharded() const;
  int64_t padded_numel(int g) const;  // P: numel rounded up to a multiple of parts
  int64_t shard_numel(int g) const;   // S = P / parts (= numel when not sharded)
  int64_t shard_begin(int g) const;   // index * S
  // The whole parameters of a `full` group, category gathered, left
  // uninitialized: the all-gather writes every element (the padding arrives
  // as the shards' zeros). Other groups always have them.
  void allocate_full_params(int g);
  void release_full_params(int g);
  bool has_full_params(int g) const;
  // The whole gradients of a `grad` / `full` group, zero-filled, category
  // grad (backward accumulates into them, the reduce-scatter empties them);
  // other trained groups always have them (once allocate_grads() ran).
  void allocate_full_grads(int g);
  void release_full_grads(int g);
  bool has_full_grads(int g) const;
  // [P] whole buffers, padding included (collective buffers).
  Tensor group_params_padded(int g) const;
  Tensor group_grads_padded(int g) const;
  // [S] this rank's shard (the whole group, [numel], when not sharded):
  // parameters (the stored shard, or this rank's chunk of the whole buffer),
  // authoritative values (master where kept), gradients, moments.
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
  // What this rank stores of one parameter (values) or of its AdamW moments,
  // written from the whole parameter's value `full` ([decl(id).shape], any
  // device and dtype): the whole parameter, or its slice in this rank's
  // shard. Values also refresh the low-precision copy where one is kept.
  enum class Part : uint8_t { values, adam_m, adam_v };
  void assign(int id, Part part, const Tensor& full);

  // ---- access ----
  int count() const { return static_cast<int>(decls_.size()); }
  int group_count() const { return static_cast<int>(groups_.size()); }
  const ParamDecl& decl(int id) const { return decls_[static_cast<size_t>(id)]; }
  const ParamGroupDecl& group_decl(int g) const { return groups_[static_cast<size_t>(g)]; }
  std::optional<int> find(const std::string& name) const;
  bool is_materialized(int id) const { return group_decl(decl(id).group).materialized; }
  // Whether this rank computes the parameter's gradient.
  bool is_trained(int id) const { return group_decl(decl(id).group).trained; }
  // Tells `ready` (when set), in one call, that the gradients of the trained
  // parameters among `ids` are final; negative ids (absent parameters) and
  // untrained ones are left out, and nothing is called when none remain.
  void report_trained(const std::vector<int>& ids, const GradsReady& ready) const;
  // Whether group g keeps gradients, master values and AdamW state here:
  // the trained groups, and a held but untrained group that is sharded (its
  // shard's state, filled by the owners' gradients: backward masking with
  // full sharding, see shard_level.h).
  bool keeps_training_state(int g) const {
    return group_decl(g).trained || group_shard(g).sharded();
  }
  bool has_grads() const { return has_grads_; }
  bool has_adam_state() const { return has_adam_; }

  // Whole tensors of one parameter (fail where only a shard exists).
  Tensor param(int id) const;
  // The authoritative values: the f32 master copy where one is kept, else
  // the parameter itself (checkpoints and gathers read these).
  Tensor values(int id) const;
  // Rounds parameter id's master values into the low-precision copy the
  // forward reads (after the master was written: initialization, a
  // checkpoint); nothing where no master is kept.
  void refresh_from_master(int id);
  bool has_master(int group) const {
    return static_cast<size_t>(group) < storage_.size() &&
           static_cast<bool>(storage_[static_cast<size_t>(group)].master);
  }
  Tensor grad(int id) const;
  Tensor adam_m(int id) const;
  Tensor adam_v(int id) const;
  // Flat views over a whole group: [numel].
  Tensor group_params(int g) const;
  Tensor group_master(int g) const;  // [numel] f32; empty where no master copy is kept
  Tensor group_values(int g) const;  // master where kept, else params
  Tensor group_grads(int g) const;
  Tensor group_adam_m(int g) const;
  Tensor group_adam_v(int g) const;
  Tensor group_buffers(int g) const;  // [buffer_numel] state dtype; empty where none
  bool has_buffers() const;           // any group declares buffers

  int64_t total_numel() const;          // all declared parameters
  int64_t materialized_numel() const;   // what this process holds
  int64_t trained_numel() const;        // what it keeps gradients for
  DType dtype() const { return dtype_; }               // of the parameters
  Allocator& allocator() const {
    SDP_CHECK(allocator_, "parameters are not materialized");
    return *allocator_;
  }
  DType state_dtype() const { return accum_dtype(dtype_); }  // master, grads, moments

 private:
  struct Storage {
    // [numel] each, or as the group's shard level says (see above)
    OwnedTensor params, master, grads, m, v;
    OwnedTensor full_params, full_grads;  // sharded groups, while they exist: [P]
    OwnedTensor buffers;                  // [group buffer_numel], state dtype
  };
  // The whole-parameter buffer of group g ([P] or [numel]); undefined while absent.
  const OwnedTensor& whole_params(int g) const;
  const OwnedTensor& whole_grads(int g) const;
  Tensor slice(const OwnedTensor& flat, int id, const char* what) const;
  int add_decl(ParamDecl d, bool buffer);
  int set_piece(int id, const std::string& full_name, const Shape& full_shape, int axis,
                int64_t start);

  std::vector<ParamDecl> decls_;
  std::vector<ParamGroupDecl> groups_;
  std::vector<Storage> storage_;
  std::vector<GroupShard> shards_;
  Allocator* allocator_ = nullptr;
  DType dtype_ = DType::f32;
  bool has_grads_ = false;
  bool has_adam_ = false;
};

}  // namespace sdp
