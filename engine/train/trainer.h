#pragma once
// The trainer of one rank: builds the rank's subnetwork from the strategy
// and plan (engine/parallel), runs micro-batches with gradient accumulation,
// averages each component's gradients over its owners, clips by the global
// norm of the full model's gradient, applies AdamW to what this rank owns
// (backward masking then broadcasts the new values), evaluates, checkpoints
// (resuming bit-identically) and reports per-step memory from the device
// allocator and communication from the communicator's counters.
//
// A single process is the world of one (DDP with C = 1 on one rank). With
// TrainConfig::emulate_world set, the process is one rank of a larger job:
// collectives are skipped but counted, and memory is that rank's.
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "engine/core/allocator.h"
#include "engine/metrics/memory_report.h"
#include "engine/metrics/stage_stats.h"
#include "engine/metrics/top_k_accuracy.h"
#include "engine/train/batch_loader.h"
#include "engine/optim/adamw.h"
#include "engine/optim/lr_schedule.h"
#include "engine/parallel/gradient_buckets.h"
#include "engine/parallel/owner_groups.h"
#include "engine/parallel/sharding.h"
#include "engine/parallel/strategy.h"
#include "engine/pipeline/stage_executor.h"
#include "engine/train/train_config.h"
#include "kernels/compute_stream.h"
#include "models/common/model.h"

namespace sdp {

struct StepResult {
  int64_t step = 0;          // 1-based number of the update just applied
  double loss = 0;           // mean loss over the step's tokens on all ranks
  double rank_loss = 0;      // this rank's mean loss (its subnetwork's)
  // Classifiers (Model::accuracy_top_k): the top-k accuracy of the step's
  // training forwards over all ranks' examples (counts carried by the loss's
  // all-reduce), and this rank's subnetwork's own; empty for token models,
  // NaN where the loss is.
  TopKAccuracy accuracy;
  TopKAccuracy rank_accuracy;
  double lr = 0;
  double grad_norm = 0;      // of the full model's averaged gradient, before clipping
  int64_t examples = 0;      // tokens or images processed by this step, all ranks
  const char* unit = "tokens";  // what an example is: "tokens" or "images"
  double seconds = 0;        // wall time of the step
  double flops = 0;          // this rank's FLOPs in the step (kernels/flop_count.h)
  MemorySnapshot memory;     // the step window's (written out by its to_json())
  comm::CommStats comm;      // the step's collectives, counted by the communicator
  // The loss or gradient norm was not finite and config.skip_nonfinite
  // allowed skipping the step: no update was applied (on any rank).
  bool skipped = false;
  int64_t skipped_steps = 0;  // skipped so far in this run, this step included
  // Pipelined jobs: this rank's stage in the step (stage, schedule,
  // measured busy time and bubble, bytes sent to each neighbour); empty
  // otherwise.
  std::optional<StageStats> pipeline;
};

struct EvalResult {
  double full_loss = 0;              // the full model (union of all components)
  std::vector<double> subnet_loss;   // each rank's own subnetwork, by rank
  // Classifiers: the top-k accuracies on the same batches (over their valid
  // labels), of the full model and of each rank's subnetwork; empty for
  // token models, NaN where the loss is.
  TopKAccuracy full_accuracy;
  std::vector<TopKAccuracy> subnet_accuracy;  // by rank
};

class Trainer {
 public:
  // A world of one, or the emulated rank of config.emulate_world.
  explicit Trainer(const TrainConfig& config);
  // Same, on a given allocator (tests compare a meta allocator with the CPU
  // one at equal granularity); its device must match config.device.
  Trainer(const TrainConfig& config, std::unique_ptr<Allocator> allocator);
  // Rank world.rank() of a world.size()-rank job. Collective: every rank
  // constructs its trainer together (the start-up checks and the owner-set
  // communicators exchange data). `allocator` null = one for config.device.
  Trainer(const TrainConfig& config, comm::Communicator& world,
          std::unique_ptr<Allocator> allocator = nullptr);
  ~Trainer();

  // Fails with a clear message when `device` cannot run here (cuda without
  // a usable GPU or driver, or in a build without CUDA); callers that set up
  // device resources before the trainer (the NCCL world) ask first.
  static void require_device(const std::string& device);

  // Collective.
  StepResult train_step();
  // Mean loss over config.eval_batches batches of the validation split (the
  // same batches every call) of the full model, on every rank. NaN on meta
  // and where the full model cannot be assembled (emulated forward masking).
  // Collective.
  double evaluate() { return evaluate_all().full_loss; }
  EvalResult evaluate_all();
  int64_t step() const { return step_; }
  // Steps skipped for a non-finite loss or gradient norm (config.skip_nonfinite).
  int64_t skipped_steps() const { return skipped_steps_; }

  // Writes a checkpoint directory atomically (rank 0 writes; every rank must
  // call it): model.safetensors (full tensors, Hugging Face names),
  // config.json, optimizer.safetensors, sdp_state.json; with
  // config.checkpoint_format = "sharded" every rank writes its own parts
  // (sharded_checkpoint.h). load_checkpoint reads either form.
  void save_checkpoint(const std::filesystem::path& dir);
  // Restores this rank's parts of the weights and optimizer moments, step and
  // data position; the checkpoint may come from another world size or plan.
  void load_checkpoint(const std::filesystem::path& dir);

  const TrainConfig& config() const { return config_; }
  Model& model() { return *model_; }
  const Model& model() const { return *model_; }
  // What training keeps for the model's parameters on this rank: shards,
  // master values, AdamW moments.
  TrainingState& training_state() { return *state_; }
  const TrainingState& training_state() const { return *state_; }
  Allocator& allocator() { return *alloc_; }
  comm::Communicator& world() { return *world_; }
  const comm::Communicator& world() const { return *world_; }
  const SubnetLayout& layout() const { return layout_; }
  const BatchLoader& train_data() const { return *train_data_; }
  // The executor of this rank's stage (its schedule: one stage running the
  // micro-batches in turn without a pipeline) and the measured timings of
  // the latest step's actions.
  const pipeline::StageExecutor* pipeline_executor() const { return executor_.get(); }
  const std::vector<pipeline::ActionTiming>& last_stage_timings() const { return last_timings_; }
  // Best mean loss any model can reach on the data, when the data knows it.
  std::optional<double> best_achievable_loss() const;

 private:
  Trainer(const TrainConfig& config, std::unique_ptr<comm::Communicator> own_world,
          comm::Communicator* world, std::unique_ptr<Allocator> allocator);
  // The mean loss and top-k accuracies of `model` on the validation batches.
  struct EvalFigures {
    double loss = 0;
    TopKAccuracy accuracy;
  };
  EvalFigures evaluate_model(Model& model);
  // The pipeline's stage spans for this job (balanced by counted FLOPs
  // unless config.parallel.stage_blocks says).
  std::vector<StageSpan> pipeline_spans() const;
  // The step's schedule and its executor: the pipeline's, or one stage
  // running the micro-batches in turn.
  void build_step_schedule();
  // Where this rank's samples lie in a step's stream (Model::SampleKey).
  struct SampleStream {
    int64_t replica = 0, replicas = 1;
    int64_t per_micro = 0;  // samples of one micro-batch over all replicas: B D
  };
  SampleStream sample_stream() const;
  // Forward and backward of the step's micro-batches through the executor,
  // with the strategy's collectives as its hooks; returns the loss sum and
  // sets `top_k_correct` (the model's accuracy_top_k() counts, summed).
  // Pipelined jobs: fills `report` (StepResult::pipeline).
  double run_schedule(double loss_scale, std::optional<StageStats>& report,
                      std::vector<int64_t>& top_k_correct);
  // Whether every rank holds the whole model (DDP, backward masking).
  bool full_model_everywhere() const;
  // Rank 0: the whole model assembled from the owners (collective); its
  // training state is full_state_.
  Model& gather_full_model(bool optimizer_state);
  // Where every rank runs the full model (DDP, backward masking): averages
  // the BatchNorm running statistics over the ranks (before evaluation and
  // checkpoints; collective). Under forward masking each rank's statistics
  // belong to its own subnetwork and stay as they are.
  void merge_buffers();
  // Re-estimates the batch statistics of rank 0's assembled full model on
  // config.recalibration_images training images.
  void recalibrate_full_model(Model& full);

  TrainConfig config_;
  std::unique_ptr<comm::Communicator> own_world_;
  comm::Communicator* world_ = nullptr;
  SubnetLayout layout_;
  std::unique_ptr<Allocator> alloc_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<TrainingState> state_;  // model_'s parameters' training state
  std::unique_ptr<OwnerGroups> groups_;
  std::unique_ptr<Sharding> sharding_;        // FSDP / ZeRO collectives of the sharded groups
  std::unique_ptr<GradientBuckets> buckets_;  // null: one reduction per group after backward
  DType reduce_dtype_ = DType::f32;           // gradients on the wire
  std::unique_ptr<ops::ComputeStream> stream_;  // cuda: this trainer's compute stream
  std::unique_ptr<AdamW> optimizer_;
  // Every step runs as this rank's stage of a schedule.
  std::unique_ptr<pipeline::StageExecutor> executor_;
  std::vector<pipeline::ActionTiming> last_timings_;
  std::vector<OwnedTensor> micro_inputs_, micro_targets_;  // [M] a step's micro-batches
  LrSchedule schedule_;
  std::unique_ptr<BatchLoader> train_data_;
  ModelDataFacts facts_;
  // [2 + K] f64 on the host: loss sum, gradient square share, and the
  // step's correct counts of each of the model's K top-k accuracies.
  OwnedTensor control_;
  int64_t step_ = 0;
  int64_t skipped_steps_ = 0;
  // Rank 0 of a forward-masked job: the full model for evaluation and
  // checkpoints, outside the step's memory accounting.
  std::unique_ptr<Allocator> full_alloc_;
  std::unique_ptr<Model> full_model_;
  std::unique_ptr<TrainingState> full_state_;
};

}  // namespace sdp
