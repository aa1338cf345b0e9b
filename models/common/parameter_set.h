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
// Each group is held (parameters allocated) or not, and trained (its
// gradients computed here) or not: forward masking holds only what a rank
// owns; backward masking holds everything but trains only what it owns.
//
// This is what a model declares and reads: declarations, and the whole
// tensors forward and backward touch (parameters in the model's dtype,
// gradients in the state dtype, buffers). What training keeps beside them
// (f32 master values, AdamW moments, the shards a rank keeps of a
// partitioned group) is the engine's TrainingState, which also decides, per
// group, how the whole tensors are stored (WholeStorage): padded for equal
// collective chunks, and persistent or present only while a pass needs them.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/tensor.h"
#include "models/common/grads_ready.h"

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
  bool trained = false;       // gradients computed here
};

// How this process stores one group's whole tensors, as the engine's
// training state decides. The model reads only whole tensors.
struct WholeStorage {
  // Elements of each whole buffer: 0 = the group's numel; more pads with
  // zeros so that a collective cuts equal chunks.
  int64_t padded_numel = 0;
  // false: the whole parameters exist only between allocate_full_params()
  // and release_full_params() (the engine keeps a shard meanwhile).
  bool params_persist = true;
  // Gradient storage for a held group this process does not train (it adds
  // zeros to its owners' reduction); trained groups always have it.
  bool untrained_grads = false;
  // false: the whole gradients exist only between allocate_full_grads() and
  // release_full_grads().
  bool grads_persist = true;
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
  // (default: = held) marks the groups whose gradients this process
  // computes; it must be a subset of `held`. `storage` (empty: whole and
  // persistent) says how each held group's whole tensors are stored.
  void materialize(Allocator& allocator, DType dtype, const std::vector<bool>& held = {},
                   const std::vector<bool>& trained = {},
                   const std::vector<WholeStorage>& storage = {});
  // Persistent whole gradients of the groups that keep gradients, category
  // grad, zero-filled.
  void allocate_grads();
  void release_grads();
  // Every held parameter's initial value (counter-based: independent of
  // layout, owner and device), written into the whole parameters. Values are
  // drawn on the host in f64 and rounded once into the stored dtype.
  void init_values(uint64_t seed);
  // The initial value of parameter id, drawn into `out` (host, [decl.shape],
  // f32 or f64): what init_values writes.
  void draw_initial_value(int id, uint64_t seed, Tensor& out) const;
  // Calls write(id, value) with the initial value of every held parameter
  // and buffer (host, state dtype, [decl(id).shape]); nothing on meta.
  void for_each_initial_value(uint64_t seed,
                              const std::function<void(int, const Tensor&)>& write) const;
  // Writes parameter (or buffer) id's whole value from `full`
  // ([decl(id).shape], any device and dtype). A training state that keeps
  // master values or shards writes through TrainingState::assign instead.
  void assign(int id, const Tensor& full);
  // Zeroes every whole gradient buffer that exists.
  void zero_grads();

  // ---- whole tensors that are not always there (see WholeStorage) ----
  int64_t padded_numel(int g) const;  // elements of group g's whole buffers
  const WholeStorage& whole_storage(int g) const;
  // The whole parameters of a group that does not keep them, category
  // gathered, left uninitialized: the all-gather writes every element.
  void allocate_full_params(int g);
  void release_full_params(int g);
  bool has_full_params(int g) const;
  // The whole gradients of a group that does not keep them, zero-filled,
  // category grad (backward accumulates into them, a reduce-scatter empties
  // them).
  void allocate_full_grads(int g);
  void release_full_grads(int g);
  bool has_full_grads(int g) const;
  // Whether this process keeps gradient storage for group g.
  bool keeps_grads(int g) const {
    return group_decl(g).trained || whole_storage(g).untrained_grads;
  }
  // [padded_numel] whole buffers, padding included (collective buffers).
  Tensor group_params_padded(int g) const;
  Tensor group_grads_padded(int g) const;

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
  bool has_grads() const { return has_grads_; }

  // Whole tensors of one parameter (fail where they do not exist now).
  Tensor param(int id) const;
  Tensor grad(int id) const;
  // Flat views over a whole group: [numel].
  Tensor group_params(int g) const;
  Tensor group_grads(int g) const;    // empty where no gradients are kept
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
  DType state_dtype() const { return accum_dtype(dtype_); }  // gradients, buffers

 private:
  struct Storage {
    OwnedTensor params, grads;            // whole, where they persist: [padded_numel]
    OwnedTensor full_params, full_grads;  // whole, while they exist: [padded_numel]
    OwnedTensor buffers;                  // [group buffer_numel], state dtype
  };
  // The whole-parameter buffer of group g; undefined while absent.
  const OwnedTensor& whole_params(int g) const;
  const OwnedTensor& whole_grads(int g) const;
  Tensor slice(const OwnedTensor& flat, int id, const char* what) const;
  int add_decl(ParamDecl d, bool buffer);
  int set_piece(int id, const std::string& full_name, const Shape& full_shape, int axis,
                int64_t start);

  std::vector<ParamDecl> decls_;
  std::vector<ParamGroupDecl> groups_;
  std::vector<Storage> storage_;
  std::vector<WholeStorage> whole_;
  Allocator* allocator_ = nullptr;
  DType dtype_ = DType::f32;
  bool has_grads_ = false;
};

}  // namespace sdp
