#pragma once
// ParameterSet: every trainable tensor of a model, stored as flat buffers per
// group (one group per block, one for the shared parameters) so that a group
// moves in one collective and an unowned group is simply never materialized.
// Gradients and AdamW moments mirror the parameter layout group by group.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/tensor.h"

namespace sdp {

enum class InitKind : uint8_t { normal, ones, zeros };

struct ParamDecl {
  std::string name;   // Hugging Face name, e.g. "model.layers.0.mlp.up_proj.weight"
  Shape shape;
  int group = 0;
  int64_t offset = 0; // element offset inside its group's flat buffer
  InitKind init = InitKind::normal;
  double init_std = 0.02;
};

struct ParamGroupDecl {
  std::string name;     // e.g. "shared", "block.3"
  int64_t numel = 0;    // elements of all its parameters
  bool materialized = false;
};

class ParameterSet {
 public:
  // ---- declaration (before materialize) ----
  int add_group(std::string name);
  int declare(std::string name, Shape shape, int group, InitKind init, double init_std = 0.02);

  // ---- storage ----
  // Allocates the parameter buffers of the listed groups (all when empty) on
  // `allocator` in `dtype`. Groups not listed are never allocated.
  void materialize(Allocator& allocator, DType dtype, const std::vector<bool>& groups = {});
  void allocate_grads();           // category grad, zero-filled
  void allocate_adam_state();      // category optim (m and v), zero-filled
  void release_grads();
  void init_values(uint64_t seed); // counter-based: independent of layout and owner
  void zero_grads();

  // ---- access ----
  int count() const { return static_cast<int>(decls_.size()); }
  int group_count() const { return static_cast<int>(groups_.size()); }
  const ParamDecl& decl(int id) const { return decls_[static_cast<size_t>(id)]; }
  const ParamGroupDecl& group_decl(int g) const { return groups_[static_cast<size_t>(g)]; }
  std::optional<int> find(const std::string& name) const;
  bool is_materialized(int id) const { return group_decl(decl(id).group).materialized; }
  bool has_grads() const { return has_grads_; }
  bool has_adam_state() const { return has_adam_; }

  Tensor param(int id) const;
  Tensor grad(int id) const;
  Tensor adam_m(int id) const;
  Tensor adam_v(int id) const;
  // Flat views over a whole group: [numel].
  Tensor group_params(int g) const;
  Tensor group_grads(int g) const;
  Tensor group_adam_m(int g) const;
  Tensor group_adam_v(int g) const;

  int64_t total_numel() const;          // all declared parameters
  int64_t materialized_numel() const;   // what this process holds
  DType dtype() const { return dtype_; }

 private:
  struct Storage {
    OwnedTensor params, grads, m, v;  // each [group numel]
  };
  Tensor slice(const OwnedTensor& flat, int id, const char* what) const;

  std::vector<ParamDecl> decls_;
  std::vector<ParamGroupDecl> groups_;
  std::vector<Storage> storage_;
  Allocator* allocator_ = nullptr;
  DType dtype_ = DType::f32;
  bool has_grads_ = false;
  bool has_adam_ = false;
};

}  // namespace sdp
