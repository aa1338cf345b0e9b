#pragma once
// Everything a training run is configured by. One struct, read from a JSON
// config file and overridden by command-line flags (apps/sdp-train); every
// field is validated with a message naming it and its valid range.
#include <cstdint>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/core/config_field_error.h"
#include "engine/core/config_limits.h"
#include "engine/core/error.h"
#include "engine/parallel/parallel_settings.h"

namespace sdp {

// The most OpenMP threads a run may ask for (config field threads): the
// logical CPUs this process may use.
int max_threads();

// Every field of TrainConfig once, X(field), then the parallel settings'
// (SDP_PARALLEL_SETTINGS_FIELDS, flat keys as well): to_json, from_json and
// its unknown-key check iterate them, and so do the apps' shared flags
// (apps/training_options.h), so a new field cannot be forgotten there.
#define SDP_TRAIN_CONFIG_FIELDS(X)                                                      \
  X(model) X(data) X(shuffle) X(batch) X(seq) X(grad_accum) X(steps) X(drop_path) X(lr) \
  X(min_lr) X(warmup) X(weight_decay) X(beta1) X(beta2) X(eps) X(grad_clip)             \
  X(eval_every) X(eval_batches) X(recalibration_images) X(seed) X(device) X(dtype)      \
  X(threads) X(comm_timeout) X(bucket_mb) X(grad_reduce_dtype) X(emulate_world)         \
  X(emulate_rank) X(save_dir) X(save_every) X(resume) X(max_shard_size)                 \
  X(checkpoint_format) X(metrics) X(progress) X(log_every) X(skip_nonfinite)             \
  X(pipeline_timeline) X(world)

struct TrainConfig {
  // model and data
  std::string model = "tiny";           // a named model (models/registry.h): LLaMA or CIFAR ResNet
  // Data spec (engine/data): token sources for LLaMA, image sources for
  // ResNets; "synthetic" is the model family's synthetic data (the
  // synthetic language, or synthetic-images for a ResNet).
  std::string data = "synthetic";
  // The training split's order: each epoch a permutation of the sequences
  // (token files: windows of seq + 1 tokens; image sets: images) drawn from
  // (seed, epoch), the same for every world size, so resumes and rank-count
  // equalities hold; false = the stored order (files front to back). The
  // synthetic language has no stored order and ignores it; evaluation always
  // reads the val split in stored order.
  bool shuffle = true;
  // batch: micro-batches of `batch` sequences of `seq` tokens (LLaMA) or of
  // `batch` images (ResNet; seq unused), grad_accum of them per optimizer step
  int64_t batch = 8;
  int64_t seq = 64;
  int64_t grad_accum = 1;
  int64_t steps = 200;
  // Stochastic depth (drop path) rate of the model's last block, rising
  // linearly from 0 at the first (models with stochastic depth: the Swin
  // Transformers); -1 = the model's own default (0.2 for swin-t, Swin-T's
  // recipe from scratch; 0 otherwise). A nonzero rate for a model without
  // stochastic depth is refused when the trainer builds it.
  double drop_path = -1;
  // optimizer
  double lr = 3e-3;
  // The end of the cosine decay; a config read without it (sdp-train with no
  // --min-lr and none in --config) gets kDefaultMinLrFraction x lr
  // (derive_defaults), so any --lr is a valid run. 3e-4 = that of the
  // default lr.
  double min_lr = 3e-4;
  static constexpr double kDefaultMinLrFraction = 0.1;
  int64_t warmup = 20;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;               // 0 disables clipping
  // evaluation
  int64_t eval_every = 50;              // 0 disables periodic evaluation
  int64_t eval_batches = 4;
  // Image models with BatchNorm under forward masking: the full model
  // assembled from the subnetworks (evaluation, checkpoints) re-estimates its
  // running statistics on this many training images first (the ranks'
  // statistics belong to their subnetworks, not to the union); 0 = keep the
  // gathered ones.
  int64_t recalibration_images = 1024;
  // reproducibility and execution
  uint64_t seed = 1234;
  // cpu | meta | meta-cpu | cuda; meta counts what a CUDA run would hold,
  // meta-cpu what a CPU run would (the allocators' block sizes, workspaces)
  std::string device = "cpu";
  std::string dtype = "f32";            // f32 | f64
  int threads = 0;                      // OpenMP threads, 0 = runtime default
  // How the job is parallelized (engine/parallel/parallel_settings.h):
  // ownership plan, sharding, recomputation. Its fields are flat keys of
  // the JSON form (strategy, active_fraction, ..., shard,
  // reshard_after_forward, activation_checkpointing), as they have always
  // been, so that older config files and checkpoints load unchanged.
  ParallelSettings parallel;
  double comm_timeout = 600;            // seconds a collective may take before the job ends
  // Gradient buckets (MiB) reduced during backward (overlap); 0 = one
  // reduction per storage group after backward; -1 = auto: 25 on cuda, 0
  // on cpu and meta (host MPI progresses a non-blocking reduction only
  // inside MPI calls, so buckets would only add calls there).
  double bucket_mb = -1;
  // Dtype gradients are averaged in on the wire: f32, or bf16 (half the
  // bytes; each reduction goes through a bf16 copy, category comm). bf16
  // needs --device cuda or meta (MPI cannot reduce bf16 host buffers).
  std::string grad_reduce_dtype = "f32";
  // Steps whose loss or gradient norm is not finite (NaN, inf) that may be
  // skipped (no update applied) before the run stops; 0 = stop at the first.
  int64_t skip_nonfinite = 0;
  // rank emulation: run rank `emulate_rank` of an `emulate_world`-rank job in
  // this process (collectives skipped but counted); 0 = off
  int64_t emulate_world = 0;
  int64_t emulate_rank = 0;
  // The ranks this config was written for (sdp-plan --write-config records
  // its --world, since C and the per-rank batch were chosen for it): a job
  // of another size is refused at start-up (world_fit.h); 0 = any.
  int64_t world = 0;
  // checkpoints and metrics
  std::string save_dir;                 // empty: no checkpoints
  int64_t save_every = 0;               // 0: only at the end (when save_dir is set)
  std::string resume;                   // checkpoint dir, or a save_dir with `latest`
  // Largest safetensors file of a checkpoint ("5GB", "500MB", "2GiB", bytes;
  // GB = 10^9, GiB = 2^30); above it model / optimizer tensors are sharded.
  std::string max_shard_size = "5GB";
  // Form of a checkpoint directory: "hf" (rank 0 assembles the whole model
  // and writes Hugging Face files) or "sharded" (every rank writes its own
  // parts in parallel, with one index: sharded_checkpoint.h). Either loads.
  std::string checkpoint_format = "hf";
  std::string metrics;                  // JSON-lines path; empty: none
  // Pipelines: a directory for the schedule drawn before the first step
  // (schedule.json, schedule.svg) and the last step's measured timeline
  // beside the one simulated from its measured action costs (timeline.json,
  // costs.json, timeline.svg); empty: none.
  std::string pipeline_timeline;
  bool progress = true;                 // progress line on a terminal
  // Plain progress lines (step, loss, lr, rate, peak memory, ETA) where no
  // live line is drawn (stdout not a terminal, a rank under mpirun,
  // --progress false): the first step, every log_every-th and the last; 0 = none.
  int64_t log_every = 10;

  nlohmann::json to_json() const;
  // Unknown keys, wrong types (a float or a string for an integer field), and
  // integers outside their field's type (a negative seed) are errors naming
  // the key (ConfigFieldError).
  static TrainConfig from_json(const nlohmann::json& j);
  // The fields whose default depends on another field, for a config whose
  // fields named in `given` were set explicitly (by a flag or a config
  // file) and the others left at their defaults: min_lr =
  // kDefaultMinLrFraction x lr, active_fraction =
  // ParallelSettings::default_active_fraction(strategy). Given fields are
  // kept as they are.
  void derive_defaults(const std::set<std::string>& given);
  // Throws ConfigFieldError naming the first invalid field and its valid
  // range (ParallelSettings::validate for the parallel fields).
  void validate() const;
};

}  // namespace sdp
