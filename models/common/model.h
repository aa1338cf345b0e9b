#pragma once
// The interface the engine trains: a model of any family (LLaMA language
// models, CIFAR ResNets) cut into components (component.h), its parameters
// in a ParameterSet, and one micro-batch's forward / backward with the
// backward split into input and weight gradients (2BP, backward masking).
// The trainer, strategies and checkpoints see only this; each family keeps
// its own configuration and layers (models/llama, models/resnet), and
// models/registry.h builds one by name.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/tensor.h"
#include "models/common/component.h"
#include "models/common/parameter_set.h"

namespace sdp {

// Told, during backward, which parameters' gradients are final (their last
// contribution of this backward has been accumulated), so their reduction
// can start while backward goes on.
using GradsReady = std::function<void(std::span<const int> param_ids)>;

class Model {
 public:
  virtual ~Model() = default;

  // The registry name ("tiny", "llama-134m", "resnet18", ...).
  virtual const std::string& name() const = 0;
  // Trainable parameters of the full model (buffers excluded; a tied
  // embedding counted once).
  virtual int64_t parameter_count() const = 0;
  // The model's configuration as written to a checkpoint's config.json and
  // compared when one is loaded (for LLaMA: the Hugging Face config).
  virtual nlohmann::json config_json() const = 0;

  virtual ParameterSet& params() = 0;
  virtual const ParameterSet& params() const = 0;
  // Components with their parameters and storage groups, in model order.
  virtual const std::vector<Component>& components() const = 0;
  virtual const ModelLayout& layout() const = 0;

  // Allocates the parameters (and buffers) of the held storage groups (all
  // when empty), keeps gradients for the trained ones (default = held), and
  // any model constants, on `alloc`, which also serves every activation.
  // `shards` partitions trained groups (ParameterSet::materialize).
  virtual void materialize(Allocator& alloc, DType dtype, const std::vector<bool>& held_groups = {},
                           const std::vector<bool>& trained_groups = {},
                           const std::vector<GroupShard>& shards = {}) = 0;
  virtual Allocator& allocator() const = 0;
  virtual DType dtype() const = 0;

  // One micro-batch. inputs: tokens [B, T] i32 (LLaMA) or images
  // [B, C, H, W] in the model's dtype (ResNet); targets: next tokens [B, T]
  // or labels [B], i32, negative = ignored. Returns the summed loss over
  // valid targets (NaN on meta) and sets valid_targets().
  // keep_for_backward = false is evaluation: nothing is kept for backward,
  // and layers with a train / eval difference (BatchNorm) use eval mode.
  virtual double forward(const Tensor& inputs, const Tensor& targets,
                         bool keep_for_backward = true) = 0;
  virtual int64_t valid_targets() const = 0;
  // Backward of the last forward; loss_scale multiplies each example's loss
  // (1 / examples in the global batch). Weight gradients of trained
  // parameters accumulate into params().grad(); held but untrained ones get
  // none. With split_weight_grads the caller runs backward_weight() later.
  // `ready` hears of every trained parameter once its gradient is final.
  virtual void backward(double loss_scale, bool split_weight_grads = false,
                        const GradsReady& ready = {}) = 0;
  virtual void backward_weight(const GradsReady& ready = {}) = 0;

  // Models with batch statistics (BatchNorm running statistics, buffers of
  // the ParameterSet) re-estimate them for the parameters they hold now:
  // reset, then the exact mean over training-mode forwards of the batches
  // `next` yields (it fills inputs and targets and returns false when done);
  // nothing is kept, no gradient is computed. Used where the statistics at
  // hand do not belong to this network (a full model assembled from
  // subnetworks). Models without batch statistics do nothing.
  using BatchFeed = std::function<bool(Tensor& inputs, Tensor& targets)>;
  virtual bool has_batch_statistics() const { return false; }
  virtual void recalibrate_statistics(const BatchFeed& next) { (void)next; }
};

}  // namespace sdp
