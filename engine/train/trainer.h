#pragma once
// Single-process trainer: micro-batches with gradient accumulation, warmup +
// cosine learning rate, global grad-norm clipping, AdamW, periodic
// evaluation, checkpoints that resume bit-identically, and per-step memory
// figures from the device allocator.
#include <filesystem>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "engine/core/allocator.h"
#include "engine/data/token_source.h"
#include "engine/optim/adamw.h"
#include "engine/optim/lr_schedule.h"
#include "engine/train/train_config.h"
#include "models/llama/llama_model.h"

namespace sdp {

struct StepResult {
  int64_t step = 0;          // 1-based number of the update just applied
  double loss = 0;           // mean loss over the step's tokens
  double lr = 0;
  double grad_norm = 0;      // before clipping
  int64_t tokens = 0;        // tokens processed by this step
  double seconds = 0;        // wall time of the step
  nlohmann::json memory;     // memory_json() of the step window
};

class Trainer {
 public:
  // Builds the allocator for config.device, the model (named config), its
  // parameters, gradients and optimizer state, and the data sources.
  explicit Trainer(const TrainConfig& config);
  // Same, on a given allocator (tests compare a meta allocator with the CPU
  // one at equal granularity); its device must match config.device.
  Trainer(const TrainConfig& config, std::unique_ptr<Allocator> allocator);
  ~Trainer();

  StepResult train_step();
  // Mean loss over config.eval_batches batches of the validation split (the
  // same batches every call). NaN on meta.
  double evaluate();
  int64_t step() const { return step_; }

  // Writes a checkpoint directory atomically: model.safetensors (Hugging
  // Face names), config.json, optimizer.safetensors, trainer_state.json.
  void save_checkpoint(const std::filesystem::path& dir) const;
  // Restores weights, optimizer moments, step and data position.
  void load_checkpoint(const std::filesystem::path& dir);

  const TrainConfig& config() const { return config_; }
  llama::LlamaModel& model() { return *model_; }
  Allocator& allocator() { return *alloc_; }
  const data::TokenSource& train_data() const { return *train_data_; }
  // Best mean loss any model can reach on the data, when the data knows it.
  std::optional<double> best_achievable_loss() const;

 private:
  void load_batch(data::TokenSource& source);

  TrainConfig config_;
  std::unique_ptr<Allocator> alloc_;
  std::unique_ptr<llama::LlamaModel> model_;
  std::unique_ptr<AdamW> optimizer_;
  LrSchedule schedule_;
  std::unique_ptr<data::TokenSource> train_data_;
  OwnedTensor windows_;  // [batch, seq + 1] i32, host
  OwnedTensor tokens_;   // [batch, seq] i32
  OwnedTensor targets_;  // [batch, seq] i32
  int64_t step_ = 0;
};

}  // namespace sdp
