#include "engine/train/trainer.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <limits>

#include "engine/core/device_target.h"
#include "engine/data/cifar_binary.h"
#include "engine/metrics/memory_report.h"
#include "engine/pipeline/site_costs.h"
#include "engine/pipeline/stage_split.h"
#include "engine/train/rank_agreement.h"
#include "kernels/flop_count.h"
#include "kernels/ops.h"
#include "models/common/model_spec.h"
#include "models/llama/llama_config.h"
#include "models/registry.h"
#ifdef SDP_HAVE_CUDA
#include "kernels/cuda/device_allocator.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/gemm.h"
#endif

namespace sdp {

namespace {

std::unique_ptr<Allocator> make_allocator(const DeviceTarget& target) {
  switch (target.device) {
    case Device::cpu:
      return std::make_unique<CpuAllocator>();
    case Device::meta:
      // A dry run reports the bytes the allocator it stands for would hand
      // out: CUDA's (512-byte blocks, the CUDA kernels' workspaces) or the
      // CPU's (64-byte blocks, the CPU kernels' workspaces).
      return target.stands_for == Device::cuda ? std::make_unique<MetaAllocator>(512, Device::cuda)
                                               : std::make_unique<MetaAllocator>(64, Device::cpu);
    case Device::cuda:
      // Fails with a clear message when no GPU or driver is present, or the
      // build has no CUDA.
      Trainer::require_device("cuda");
#ifdef SDP_HAVE_CUDA
      return std::make_unique<cuda::DeviceAllocator>();
#endif
      break;
  }
  fail("device '", target.name(), "' is not available (valid: ", DeviceTarget::kValidNames, ")");
}

DType parse_dtype(const std::string& s) {
  return s == "f64" ? DType::f64 : s == "bf16" ? DType::bf16 : DType::f32;
}

std::unique_ptr<comm::Communicator> make_own_world(const TrainConfig& c) {
  // Before the world's size is narrowed to an int: the bounds come first.
  c.validate();
  comm::CommOptions options;
  options.timeout_seconds = c.comm_timeout;
  if (c.emulate_world > 0)
    return comm::make_world("emulated", options, static_cast<int>(c.emulate_world),
                            static_cast<int>(c.emulate_rank));
  return comm::make_world("local", options);
}

}  // namespace

void Trainer::require_device(const std::string& device) {
  if (device != "cuda") return;
#ifdef SDP_HAVE_CUDA
  cuda::require_device();
#else
  fail("--device cuda: this build has no CUDA support (no toolkit was found when it was "
       "configured); use --device cpu, or --device meta for a dry run");
#endif
}

Trainer::Trainer(const TrainConfig& config) : Trainer(config, nullptr) {}

Trainer::Trainer(const TrainConfig& config, std::unique_ptr<Allocator> allocator)
    : Trainer(config, make_own_world(config), nullptr, std::move(allocator)) {}

Trainer::Trainer(const TrainConfig& config, comm::Communicator& world,
                 std::unique_ptr<Allocator> allocator)
    : Trainer(config, nullptr, &world, std::move(allocator)) {}

Trainer::Trainer(const TrainConfig& config, std::unique_ptr<comm::Communicator> own_world,
                 comm::Communicator* world, std::unique_ptr<Allocator> allocator)
    : config_(config), own_world_(std::move(own_world)) {
  config_.validate();
  world_ = own_world_ ? own_world_.get() : world;
  if (!own_world_ && config_.emulate_world > 0)
    fail("config: emulate_world is for single-process runs; this process is already rank ",
         world_->rank(), " of a ", world_->size(), "-rank job");
  const DeviceTarget target = DeviceTarget::parse(config_.device);
  alloc_ = allocator ? std::move(allocator) : make_allocator(target);
  SDP_CHECK(alloc_->device() == target.device, "allocator for device ",
            device_name(alloc_->device()), " given to a run configured for ", config_.device);
  if (config_.threads > 0) omp_set_num_threads(config_.threads);
  stream_ = std::make_unique<ops::ComputeStream>(alloc_->device());
  ops::ComputeStream::Scope on_stream(*stream_);
  const ModelFamily family = model_family(config_.model);  // a clear error for an unknown name
  if (family == ModelFamily::llama) {
    const llama::LlamaConfig mc = llama_config(config_.model);
    if (config_.seq > mc.max_seq)
      fail("config: seq = ", config_.seq, " exceeds model ", mc.name, "'s max_seq ", mc.max_seq);
  }
  const DType dtype = parse_dtype(config_.dtype);

  // Every rank must run the same job: a different config or plan would make
  // collectives disagree (wrong sizes, a hang). Checked once, before any
  // collective of the training step.
  comm::Communicator& w = *world_;
  comm::require_same_on_all_ranks(w, "the run configuration", config_.to_json().dump(),
                                 comm::describe_json_difference);
  // Replica d of D reads examples d, d + D, d + 2D, ... of the stream:
  // together the replicas see exactly the global batch a single process
  // would. Without a pipeline every rank is a replica; with one, every
  // stage of a replica reads the same micro-batches (the first stage its
  // inputs, the last its targets).
  const RankMesh mesh(w.size(), static_cast<int>(config_.parallel.pipeline_stages));
  train_data_ = make_batch_loader(config_, data::Split::train,
                                  data::StreamPart{mesh.replica_of(w.rank()), mesh.replicas()},
                                  *alloc_, dtype);
  // A custom model without a vocabulary takes the data's; the spec recorded
  // in checkpoints then names it, so a resume or an export builds the same.
  config_.model = resolved_model_spec(config_.model, train_data_->vocab_size());
  facts_ = train_data_->facts();
  layout_ = SubnetLayout::build(config_.model,
                                StrategySpec::from_settings(config_.parallel, config_.model),
                                w.size(), w.rank(), facts_, pipeline_spans());
  comm::require_same_on_all_ranks(w, "the subnet plan", std::to_string(layout_.plan.hash()));

  model_ = make_model(config_.model, layout_.model_layout, facts_);
  // Stochastic depth: the run's rate, or the model's own (Swin-T's recipe);
  // a model without it refuses a nonzero rate.
  model_->set_drop_path(config_.drop_path >= 0 ? config_.drop_path
                                               : default_drop_path(config_.model));
  // A token model embeds only the ids it has rows for.
  if (model_->token_vocabulary() > 0 && train_data_->vocab_size() > model_->token_vocabulary()) {
    const std::string named = ModelSpec::parse(config_.model).name;
    fail("data '", config_.data, "' has vocabulary ", train_data_->vocab_size(), " but model ",
         model_->name(), " has only ", model_->token_vocabulary(), " embeddings (valid: ",
         "a model with at least ", train_data_->vocab_size(), ", e.g. --model ",
         named.empty() ? "config:PATH with a larger vocab_size" : named, " --vocab-size ",
         train_data_->vocab_size(), ")");
  }
  state_ = TrainingState::materialize(*model_, *alloc_, dtype, layout_.held_mask(),
                                      layout_.trained_mask(), layout_.shard_plan());
  model_->set_recompute(config_.parallel.recompute());
  if (layout_.pipelined()) model_->set_stage(layout_.stages[static_cast<size_t>(layout_.stage)]);
  state_->init_values(config_.seed);  // same values on every owner
  state_->allocate_grads();
  require_same_group_sizes(w, model_->params());  // before the first collective on them
  groups_ = std::make_unique<OwnerGroups>(w, layout_);
  const double bucket_mb =
      config_.bucket_mb >= 0 ? config_.bucket_mb : alloc_->device() == Device::cuda ? 25.0 : 0.0;
  reduce_dtype_ = config_.grad_reduce_dtype == "bf16" ? DType::bf16 : model_->params().state_dtype();
  std::vector<std::vector<int>> site_params;
  for (int site = 0; site < model_->site_count(); ++site)
    site_params.push_back(model_->site_params(site));
  sharding_ = std::make_unique<Sharding>(*state_, *groups_, std::move(site_params),
                                         config_.parallel.reshard_after_forward);
  if (sharding_->active())
    model_->set_param_hooks({[this](int site, ParamPass pass) { sharding_->params_needed(site, pass); },
                             [this](int site, ParamPass pass) { sharding_->params_done(site, pass); }});
  // Sharded groups reduce-scatter each site's gradients as soon as they are
  // final (Sharding), which is bucketing by block; the few groups left
  // whole (one owner) need no reduction then.
  if (bucket_mb > 0 && !sharding_->active())
    buckets_ = std::make_unique<GradientBuckets>(model_->params(), *groups_,
                                                 static_cast<size_t>(bucket_mb * (1 << 20)),
                                                 reduce_dtype_, alloc_.get());
  optimizer_ = std::make_unique<AdamW>(
      *state_,
      AdamWSettings{config_.beta1, config_.beta2, config_.eps, config_.weight_decay});
  schedule_ = LrSchedule{config_.lr, config_.min_lr, config_.warmup, config_.steps};
  const int64_t accuracies = static_cast<int64_t>(model_->accuracy_top_k().size());
  control_ = OwnedTensor(host_allocator(), {2 + accuracies}, DType::f64, MemCategory::comm);
  build_step_schedule();
}

std::vector<StageSpan> Trainer::pipeline_spans() const {
  const ParallelSettings& p = config_.parallel;
  if (!p.pipelined()) return {};
  const int P = static_cast<int>(p.pipeline_stages);
  try {
    const std::unique_ptr<Model> shape = make_model(config_.model, ModelLayout{}, facts_);
    const int blocks = shape->block_count();
    // Image models take the side of their images where LLaMA takes seq.
    const int64_t cost_seq =
        model_family(config_.model) == ModelFamily::llama ? config_.seq : data::kCifarSide;
    if (!p.stage_blocks.empty())
      return pipeline::split_stages(blocks, P, pipeline::parse_stage_blocks(p.stage_blocks), {},
                                    config_.model);
    // Balanced by the FLOPs each site runs (forward and backward) for this
    // job's micro-batch, counted on the meta device.
    const pipeline::SiteCosts costs =
        pipeline::count_site_costs(config_.model, facts_, config_.batch, cost_seq);
    return pipeline::split_stages(blocks, P, {}, costs.compute_flops(), config_.model);
  } catch (const ConfigFieldError&) {
    throw;
  } catch (const Error& e) {
    // Every rank computes the same split: every rank fails alike.
    throw CollectiveError(format("pipeline_stages = ", P, ", stage_blocks = '", p.stage_blocks,
                                 "' for model ", config_.model, ": ", e.what()));
  }
}

void Trainer::build_step_schedule() {
  const ParallelSettings& p = config_.parallel;
  const int P = layout_.stage_count();
  const int M = static_cast<int>(config_.grad_accum);
  const pipeline::DeferredWeightGrads weight_grads =
      pipeline::parse_deferred_weight_grads(p.deferred_weight_grads);
  const bool batched = weight_grads == pipeline::DeferredWeightGrads::batched;
  if (!layout_.pipelined()) {
    if (batched)
      throw CollectiveError(
          "config: deferred_weight_grads = 'batched' needs a pipeline (pipeline_stages > 1) "
          "with a split schedule; a job without one runs each backward whole");
    // One stage: the micro-batches one after another. The pipeline
    // schedule setting names how a pipeline's stages interleave them.
    executor_ = std::make_unique<pipeline::StageExecutor>(
        *model_, pipeline::StageExecutor::one_stage(M), 0, nullptr);
    return;
  }
  pipeline::Schedule schedule;
  try {
    const std::string file_prefix = "file:";
    if (p.schedule.rfind(file_prefix, 0) == 0) {
      // The same reading and checks as sdp-pipeline's file:PATH.
      schedule = pipeline::load_valid_schedule(p.schedule.substr(file_prefix.size()));
      if (schedule.num_stages() != P || schedule.microbatches != M)
        fail("the schedule has ", schedule.num_stages(), " stages and ", schedule.microbatches,
             " micro-batches; this job has pipeline_stages = ", P, " and grad_accum (its "
             "micro-batches) = ", M);
    } else {
      schedule = pipeline::make_schedule(p.schedule, P, M);
    }
    pipeline::validate(schedule);
    schedule = pipeline::with_communication(schedule);  // the sends and receives, listed
    pipeline::validate(schedule);
    if (batched && !pipeline::has_weight_grads(schedule))
      fail("deferred_weight_grads = 'batched' needs a split schedule, one with W actions "
           "(gpipe-2bp, 1f1b-2bp, zb-h1, 1f1b-2bp-cooldown, naive-2bp, or a file with I/W)");
  } catch (const Error& e) {
    // A generated schedule's error lists the names; a file is the other form.
    const bool named = p.schedule.rfind("file:", 0) != 0;
    throw CollectiveError(format("config: schedule = '", p.schedule, "': ", e.what(),
                                 named ? "; or file:PATH, a schedule JSON" : ""));
  }
  // The replica's P ranks, in stage order: its line of the mesh's
  // pipeline axis.
  executor_ = std::make_unique<pipeline::StageExecutor>(*model_, std::move(schedule), layout_.stage,
                                                        groups_->along(MeshAxis::pipeline),
                                                        weight_grads);
  micro_inputs_.resize(static_cast<size_t>(M));
  micro_targets_.resize(static_cast<size_t>(M));
}

Trainer::~Trainer() = default;

Trainer::SampleStream Trainer::sample_stream() const {
  // As the loader reads them: replica d of D gets samples d, d + D, ... of
  // each micro-batch's B D (every stage of a pipeline replica alike).
  return {layout_.replica, layout_.replicas, config_.batch * layout_.replicas};
}

double Trainer::run_schedule(double loss_scale, std::optional<StageStats>& report,
                             std::vector<int64_t>& top_k_correct) {
  // The executor runs micro-batch mb as the model's micro-batch mb: its
  // samples lie mb B D further in the step's stream.
  const SampleStream samples = sample_stream();
  model_->set_sample_key({config_.seed, step_ + 1, samples.replica, samples.replicas,
                          samples.per_micro});
  // A pipeline has every micro-batch of the step in flight at some point,
  // so each keeps its own copy of the loader's batch (input batches are
  // workspace, as the loader's are). One stage runs them one at a time,
  // each straight from the loader's buffers.
  std::vector<pipeline::MicroBatchData> batches;
  if (layout_.pipelined()) {
    for (size_t mb = 0; mb < micro_inputs_.size(); ++mb) {
      train_data_->next();
      auto keep = [&](const Tensor& from, OwnedTensor& to) {
        if (!to || to->shape() != from.shape())
          to = OwnedTensor(*alloc_, from.shape(), from.dtype(), MemCategory::workspace);
        ops::copy(from, *to);
      };
      keep(train_data_->inputs(), micro_inputs_[mb]);
      keep(train_data_->targets(), micro_targets_[mb]);
      batches.push_back({*micro_inputs_[mb], *micro_targets_[mb]});
    }
  }
  pipeline::MicroBatchData current;
  int loaded = -1;
  const pipeline::MicroBatchFeed feed = [&](int mb) -> const pipeline::MicroBatchData& {
    if (layout_.pipelined()) return batches[static_cast<size_t>(mb)];
    if (mb != loaded) {
      SDP_CHECK(mb == loaded + 1, "one-stage step: micro-batch ", mb, " asked for after ", loaded);
      train_data_->next();
      current = {train_data_->inputs(), train_data_->targets()};
      loaded = mb;
    }
    return current;
  };

  // The strategy's collectives around the compute actions.
  const int M = static_cast<int>(config_.grad_accum);
  if (buckets_) buckets_->start(M);  // a gradient is final at its M-th report
  pipeline::StepHooks hooks;
  using pipeline::ActionKind;
  if (sharding_->active()) {
    // Every micro-batch's gradients leave for their shards as they become
    // final: sharded gradients never exist whole for a whole step.
    hooks.before = [this](const pipeline::Action& a, bool) {
      if (a.kind == ActionKind::forward) return;
      sharding_->begin_backward(a.kind == ActionKind::backward     ? Sharding::BackwardPart::whole
                                : a.kind == ActionKind::input_grad ? Sharding::BackwardPart::input
                                                                   : Sharding::BackwardPart::weight);
    };
    hooks.after = [this](const pipeline::Action& a, bool) {
      if (a.kind != ActionKind::forward) sharding_->end_backward();
    };
    hooks.ready = [this](std::span<const int> ids) { sharding_->grads_ready(ids); };
  } else if (buckets_) {
    // Buckets of final gradients start reducing while backward goes on.
    hooks.ready = [this](std::span<const int> ids) { buckets_->ready(ids); };
  }
  const pipeline::StageStepResult result = executor_->run(feed, loss_scale, hooks);
  last_timings_ = result.timings;
  top_k_correct = result.top_k_correct;
  if (layout_.pipelined()) {
    const double makespan = result.timings.empty() ? 0.0 : result.timings.back().end;
    StageStats& s = report.emplace();
    s.stage = executor_->stage();
    s.stages = layout_.stage_count();
    s.replica = layout_.replica;
    s.schedule = config_.parallel.schedule;
    s.micro_batches = config_.grad_accum;
    s.blocks = layout_.stages[static_cast<size_t>(layout_.stage)].describe(model_->block_count());
    s.seconds = makespan;
    s.busy_seconds = result.busy_seconds;
    s.bubble_fraction = makespan > 0 ? (makespan - result.busy_seconds) / makespan : 0.0;
    s.activation_bytes_sent = result.activation_bytes_sent;
    s.gradient_bytes_sent = result.gradient_bytes_sent;
  }
  return result.loss_sum;
}

StepResult Trainer::train_step() {
  ops::ComputeStream::Scope on_stream(*stream_);
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  MemoryStats& mem = alloc_->stats();
  mem.reset_peaks();
  comm::Communicator& w = *world_;
  w.stats().reset();
  ops::reset_flop_count();
  state_->zero_grads();

  const int64_t examples_per_micro = train_data_->examples();
  const double loss_scale = 1.0 / static_cast<double>(examples_per_micro * config_.grad_accum);
  StepResult r;
  std::vector<int64_t> top_k_correct;
  const double loss_sum = run_schedule(loss_scale, r.pipeline, top_k_correct);

  {
    PhaseScope phase(mem, Phase::communication);
    sharding_->reduce_remaining_gradients();  // ZeRO-1: the step's one reduce-scatter
    if (buckets_)
      buckets_->finish();  // what backward did not start yet, then wait for all
    else
      groups_->average_gradients(*state_, reduce_dtype_, alloc_.get());
    // Shared parameters of a sublayer some ranks skip: over its users only.
    groups_->average_over_users(*state_);
    // One small all-reduce carries the loss, this rank's share of the
    // squared gradient norm (each whole group counted once, by its root;
    // each sharded group by its shards) and a classifier's correct counts.
    double* ctl = control_->data<double>();
    ctl[0] = loss_sum;
    ctl[1] = groups_->gradient_square_share(*state_) + sharding_->gradient_square_share();
    for (size_t i = 0; i < top_k_correct.size(); ++i)
      ctl[2 + i] = static_cast<double>(top_k_correct[i]);
    w.all_reduce(*control_, comm::ReduceOp::sum);
  }
  const double* ctl = control_->data<double>();
  r.grad_norm = std::sqrt(ctl[1]);
  r.lr = schedule_.at(step_);
  // The all-reduced loss and gradient norm are the same on every rank, so
  // every rank stops, or skips the update, alike: the owners' copies stay
  // identical. Meta runs compute nothing to check.
  const bool finite = alloc_->device() == Device::meta ||
                      (std::isfinite(ctl[0]) && std::isfinite(r.grad_norm));
  if (!finite) {
    const int64_t examples = examples_per_micro * config_.grad_accum * layout_.replicas;
    const double loss = ctl[0] / static_cast<double>(examples);
    if (skipped_steps_ >= config_.skip_nonfinite)
      throw CollectiveError(format(
          "step ", step_ + 1, ": the loss is ", loss, " and the gradient norm is ", r.grad_norm,
          " (not finite); training stopped before applying this update",
          skipped_steps_ > 0 ? format(" (", skipped_steps_, " such steps skipped already, "
                                      "--skip-nonfinite ", config_.skip_nonfinite, ")")
                             : std::string(),
          ". Try a lower --lr (now ", config_.lr, "), gradient clipping (--grad-clip, now ",
          config_.grad_clip, "), or check the data; --skip-nonfinite N skips up to N such "
          "steps"));
    ++skipped_steps_;
    r.skipped = true;
  }
  if (!r.skipped) {
    PhaseScope phase(mem, Phase::optimizer);
    // The same coefficient on every rank keeps the owners' copies identical.
    if (config_.grad_clip > 0 && r.grad_norm > config_.grad_clip) {
      const double coef = config_.grad_clip / (r.grad_norm + 1e-6);
      for (int g = 0; g < model_->params().group_count(); ++g)
        if (state_->keeps_training_state(g)) {
          Tensor grads = state_->shard_grads(g);  // the whole group when not sharded
          ops::scale(grads, coef);
        }
    }
    optimizer_->update(step_ + 1, r.lr);
  }
  if (!r.skipped) {
    PhaseScope phase(mem, Phase::communication);
    // ZeRO-1/2: each owner updated its shard of whole parameters.
    sharding_->gather_updated_parameters();
    if (layout_.spec.masking == Masking::backward) groups_->broadcast_updated_values(*state_);
  }
  // Device work is queued asynchronously: the step ends when it has run.
  ops::synchronize(alloc_->device());
  ++step_;
  r.step = step_;
  r.skipped_steps = skipped_steps_;
  // Per replica: every rank without a pipeline, every stage of one with.
  const int64_t examples_per_rank = examples_per_micro * config_.grad_accum;
  r.rank_loss = loss_sum * loss_scale;
  // A pipeline's loss is its last stage's; the other stages have none.
  if (layout_.stage + 1 < layout_.stage_count())
    r.rank_loss = std::numeric_limits<double>::quiet_NaN();
  r.loss = ctl[0] / static_cast<double>(examples_per_rank * layout_.replicas);
  // Accuracies share the loss's denominators: the step's examples.
  const std::vector<int> top_k = model_->accuracy_top_k();
  const std::vector<double> rank_correct(top_k_correct.begin(), top_k_correct.end());
  r.accuracy = TopKAccuracy::of(top_k, std::span<const double>(ctl + 2, top_k.size()),
                                static_cast<double>(examples_per_rank * layout_.replicas));
  r.rank_accuracy =
      TopKAccuracy::of(top_k, rank_correct, static_cast<double>(examples_per_rank));
  if (layout_.stage + 1 < layout_.stage_count()) r.rank_accuracy = TopKAccuracy::unknown(top_k);
  r.examples = examples_per_rank * layout_.replicas;
  r.unit = train_data_->unit();
  r.seconds = std::chrono::duration<double>(clock::now() - start).count();
  r.flops = ops::flops_counted();
  r.memory = MemorySnapshot::of(mem, alloc_->device_memory_info());
#ifdef SDP_HAVE_CUDA
  // cuBLASLt's workspace is the one device buffer outside the allocator: a
  // fixed per-process cost, like the CUDA context, shown beside the figures.
  if (alloc_->device() == Device::cuda) r.memory.gemm_workspace = cuda::gemm_workspace_bytes();
#endif
  r.comm = w.stats();
  if (alloc_->device() == Device::meta || !w.moves_data()) {
    // Meta computes nothing; an emulated rank never hears from the others.
    if (alloc_->device() == Device::meta) {
      r.rank_loss = std::numeric_limits<double>::quiet_NaN();
      r.rank_accuracy = TopKAccuracy::unknown(top_k);
    }
    r.loss = std::numeric_limits<double>::quiet_NaN();
    r.accuracy = TopKAccuracy::unknown(top_k);
    r.grad_norm = std::numeric_limits<double>::quiet_NaN();
  }
  return r;
}

bool Trainer::full_model_everywhere() const {
  if (layout_.pipelined()) return false;  // a rank holds its stage's parameters only
  if (layout_.spec.masking == Masking::backward) return true;
  for (const StorageGroup& g : layout_.groups)
    if (!layout_.all_ranks(g)) return false;
  return true;
}

Model& Trainer::gather_full_model(bool optimizer_state) {
  const bool rank0 = world_->rank() == 0;
  if (rank0 && !full_model_) {
    // A host copy in the state dtype (f32 for a bf16 run).
    const DeviceTarget target = DeviceTarget::parse(config_.device);
    full_alloc_ = make_allocator(target.dry_run() ? target : DeviceTarget{});
    full_model_ = make_model(config_.model, layout_.model_layout, facts_);
    full_model_->set_drop_path(model_->drop_path());  // its config.json says the run's rate
    full_state_ =
        TrainingState::materialize(*full_model_, *full_alloc_, accum_dtype(model_->dtype()));
  }
  if (rank0 && optimizer_state) full_state_->allocate_adam_state();
  groups_->gather_to_rank0(*state_, rank0 ? full_state_.get() : nullptr, optimizer_state);
  return rank0 ? *full_model_ : *model_;
}

Trainer::EvalFigures Trainer::evaluate_model(Model& model) {
  // A fresh, unsplit validation stream each time: every evaluation and every
  // rank sees the same batches. Its buffers live on the evaluated model's
  // allocator (rank 0's full copy is on the host).
  auto val = make_batch_loader(config_, data::Split::val, data::StreamPart{}, model.allocator(),
                               model.dtype());
  const std::vector<int> top_k = model.evaluation_top_k();
  double sum = 0;
  int64_t count = 0;
  std::vector<double> correct(top_k.size(), 0.0);
  for (int64_t i = 0; i < config_.eval_batches; ++i) {
    val->next();
    sum += model.forward(val->inputs(), val->targets(), /*keep_for_backward=*/false);
    count += model.valid_targets();
    const std::vector<int64_t> batch_correct = model.top_k_correct();
    for (size_t k = 0; k < correct.size(); ++k)
      correct[k] += static_cast<double>(batch_correct[k]);
  }
  EvalFigures out;
  out.loss = sum / static_cast<double>(count);
  out.accuracy = model.allocator().device() == Device::meta
                     ? TopKAccuracy::unknown(top_k)
                     : TopKAccuracy::of(top_k, correct, static_cast<double>(count));
  return out;
}

void Trainer::merge_buffers() {
  if (model_->params().has_buffers() && full_model_everywhere())
    groups_->merge_buffers(model_->params());
}

void Trainer::recalibrate_full_model(Model& full) {
  if (!full.has_batch_statistics() || config_.recalibration_images == 0) return;
  // The first images of a fresh, unsplit training stream: the same on every
  // evaluation and for every world size.
  auto source = make_batch_loader(config_, data::Split::train, data::StreamPart{},
                                  full.allocator(), full.dtype());
  const int64_t batches =
      (config_.recalibration_images + source->examples() - 1) / source->examples();
  int64_t done = 0;
  full.recalibrate_statistics([&](Tensor& inputs, Tensor& targets) {
    if (done++ == batches) return false;
    source->next();
    inputs = source->inputs();
    targets = source->targets();
    return true;
  });
}

EvalResult Trainer::evaluate_all() {
  ops::ComputeStream::Scope on_stream(*stream_);
  comm::Communicator& w = *world_;
  EvalResult out;
  // Each rank's own subnetwork's loss and accuracies, gathered to every rank:
  // [1 + K] per rank, K = the model's evaluation top-k accuracies.
  const std::vector<int> top_k = model_->evaluation_top_k();
  const int64_t figures = 1 + static_cast<int64_t>(top_k.size());
  auto pack = [&](const EvalFigures& f, double* to) {
    to[0] = f.loss;
    for (size_t k = 0; k < top_k.size(); ++k) to[1 + k] = f.accuracy.value[k];
  };
  auto unpack = [&](const double* from) {
    return EvalFigures{from[0], TopKAccuracy{top_k, std::vector<double>(from + 1, from + figures)}};
  };
  OwnedTensor mine(host_allocator(), {figures}, DType::f64, MemCategory::comm);
  OwnedTensor all(host_allocator(), {w.size() * figures}, DType::f64, MemCategory::comm);
  merge_buffers();  // every holder of a component evaluates with the same statistics
  // Evaluation forwards free each gathered group after its last read.
  sharding_->set_training(false);
  // A pipeline stage is not a network of its own: it has no loss.
  pack(layout_.pipelined()
           ? EvalFigures{std::numeric_limits<double>::quiet_NaN(), TopKAccuracy::unknown(top_k)}
           : evaluate_model(*model_),
       mine->data<double>());
  sharding_->set_training(true);
  sharding_->release_all();
  w.all_gather(*mine, *all);
  for (int r = 0; r < w.size(); ++r) {
    const EvalFigures f = unpack(all->data<double>() + r * figures);
    out.subnet_loss.push_back(f.loss);
    out.subnet_accuracy.push_back(f.accuracy);
  }

  if (full_model_everywhere()) {
    out.full_loss = out.subnet_loss[static_cast<size_t>(w.rank())];
    out.full_accuracy = out.subnet_accuracy[static_cast<size_t>(w.rank())];
  } else if (!w.moves_data()) {
    // The other ranks' parts are absent.
    out.full_loss = std::numeric_limits<double>::quiet_NaN();
    out.full_accuracy = TopKAccuracy::unknown(top_k);
  } else {
    Model& full = gather_full_model(false);
    OwnedTensor result(host_allocator(), {figures}, DType::f64, MemCategory::comm);
    if (w.rank() == 0) {
      recalibrate_full_model(full);
      pack(evaluate_model(full), result->data<double>());
    }
    w.broadcast(*result, 0);
    const EvalFigures f = unpack(result->data<double>());
    out.full_loss = f.loss;
    out.full_accuracy = f.accuracy;
  }
  return out;
}

std::optional<double> Trainer::best_achievable_loss() const {
  return train_data_->best_achievable_loss();
}

}  // namespace sdp
