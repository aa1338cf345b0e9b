#pragma once
// The micro-batches a trainer feeds its model, whatever the data: token
// windows for a language model (inputs [B, T] and next-token targets
// [B, T], i32) or images and labels for an image classifier (images
// [B, C, H, W] in the model's dtype, labels [B] i32). Sources produce host
// data; the loader places it on the model's device (a copy to the GPU for
// cuda, nothing on meta, where only the shapes matter).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/core/allocator.h"
#include "engine/core/tensor.h"
#include "engine/data/token_source.h"
#include "engine/train/train_config.h"
#include "models/registry.h"

namespace sdp {

class BatchLoader {
 public:
  virtual ~BatchLoader() = default;
  // Loads this rank's next micro-batch into inputs() and targets().
  virtual void next() = 0;
  virtual const Tensor& inputs() const = 0;
  virtual const Tensor& targets() const = 0;
  // Loss terms in one micro-batch: B * T tokens, or B images.
  virtual int64_t examples() const = 0;
  virtual const char* unit() const = 0;  // "tokens" or "images"
  // What the model needs to know of the data (the classes of an image set).
  virtual ModelDataFacts facts() const = 0;
  // The vocabulary of a token source (0 for images).
  virtual int64_t vocab_size() const { return 0; }
  // The tokenizer behind a token source's ids (Kind::none for images).
  virtual data::TokenizerFacts tokenizer() const { return {}; }
  // The global stream position; enough to resume bit-identically.
  virtual nlohmann::json state() const = 0;
  virtual void restore(const nlohmann::json& state) = 0;
  virtual std::string describe() const = 0;
  // The lowest mean loss any model can reach, when the data knows it.
  virtual std::optional<double> best_achievable_loss() const { return std::nullopt; }
};

// The data spec a config means for its model: "synthetic" is the model
// family's synthetic data (synthetic-images for an image model).
std::string resolved_data_spec(const TrainConfig& config);

// Batches of config.batch (x config.seq for tokens) examples from the data
// of config, rank part.rank of part.world, placed on `device` (the trainer's
// allocator) in `dtype` (image models; tokens are i32). The train split is in
// config.shuffle's order: every part.world reads the same global stream, and
// replica d of D gets its samples d, d + D, d + 2D, ... (token_source.h).
std::unique_ptr<BatchLoader> make_batch_loader(const TrainConfig& config, data::Split split,
                                               data::StreamPart part, Allocator& device,
                                               DType dtype);

}  // namespace sdp
