#include "engine/train/trainer.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <limits>

#include "engine/metrics/memory_report.h"
#include "kernels/ops.h"
#ifdef SDP_HAVE_CUDA
#include "kernels/cuda/device_info.h"
#endif

namespace sdp {

namespace {

std::unique_ptr<Allocator> make_allocator(const std::string& device) {
  if (device == "cpu") return std::make_unique<CpuAllocator>();
  // Meta runs report the bytes a CUDA device would hold (512-byte blocks).
  if (device == "meta") return std::make_unique<MetaAllocator>(512);
  if (device == "cuda") {
#ifdef SDP_HAVE_CUDA
    cuda::require_device();  // a clear message when no GPU or driver is present
    fail("--device cuda: the CUDA training step is not part of this build yet (the CUDA "
         "backend adds it); use --device cpu, or --device meta for a dry run");
#else
    fail("--device cuda: this build has no CUDA support (no toolkit was found when it was "
         "configured); use --device cpu, or --device meta for a dry run");
#endif
  }
  fail("device '", device, "' is not available (valid: cpu, meta, cuda)");
}

DType parse_dtype(const std::string& s) { return s == "f64" ? DType::f64 : DType::f32; }

}  // namespace

Trainer::Trainer(const TrainConfig& config) : Trainer(config, make_allocator(config.device)) {}

Trainer::Trainer(const TrainConfig& config, std::unique_ptr<Allocator> allocator)
    : config_(config), alloc_(std::move(allocator)) {
  config_.validate();
  SDP_CHECK(device_name(alloc_->device()) == config_.device, "allocator for device ",
            device_name(alloc_->device()), " given to a run configured for ", config_.device);
  if (config_.threads > 0) omp_set_num_threads(config_.threads);
  llama::LlamaConfig mc = llama::LlamaConfig::named(config_.model);
  if (config_.seq > mc.max_seq)
    fail("config: seq = ", config_.seq, " exceeds model ", mc.name, "'s max_seq ", mc.max_seq);
  model_ = std::make_unique<llama::LlamaModel>(mc);
  const DType dt = parse_dtype(config_.dtype);
  model_->materialize(*alloc_, dt);
  model_->params().init_values(config_.seed);
  model_->params().allocate_grads();
  optimizer_ = std::make_unique<AdamW>(
      model_->params(),
      AdamWSettings{config_.beta1, config_.beta2, config_.eps, config_.weight_decay});
  schedule_ = LrSchedule{config_.lr, config_.min_lr, config_.warmup, config_.steps};

  train_data_ = data::make_token_source(config_.data, config_.seed, data::Split::train);
  if (train_data_->vocab_size() > mc.vocab)
    fail("data '", config_.data, "' has vocabulary ", train_data_->vocab_size(),
         " but model ", mc.name, " has only ", mc.vocab, " embeddings");
  // Token windows are host data; on meta they are still real so that the
  // data path runs, but tokens/targets live on the model's device.
  static CpuAllocator host;
  windows_ = OwnedTensor(host, {config_.batch, config_.seq + 1}, DType::i32, MemCategory::workspace);
  tokens_ = OwnedTensor(*alloc_, {config_.batch, config_.seq}, DType::i32, MemCategory::workspace);
  targets_ = OwnedTensor(*alloc_, {config_.batch, config_.seq}, DType::i32, MemCategory::workspace);
}

Trainer::~Trainer() = default;

void Trainer::load_batch(data::TokenSource& source) {
  const int64_t B = config_.batch, T = config_.seq;
  source.next_batch(windows_->data<int32_t>(), B, T);
  if (tokens_->device() != Device::cpu) return;  // meta: nothing to copy
  const int32_t* w = windows_->data<int32_t>();
  int32_t* x = tokens_->data<int32_t>();
  int32_t* y = targets_->data<int32_t>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      x[b * T + t] = w[b * (T + 1) + t];
      y[b * T + t] = w[b * (T + 1) + t + 1];
    }
}

StepResult Trainer::train_step() {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  MemoryStats& mem = alloc_->stats();
  mem.reset_peaks();
  ParameterSet& params = model_->params();
  params.zero_grads();

  const int64_t tokens_per_micro = config_.batch * config_.seq;
  const double loss_scale = 1.0 / static_cast<double>(tokens_per_micro * config_.grad_accum);
  double loss_sum = 0;
  for (int64_t micro = 0; micro < config_.grad_accum; ++micro) {
    load_batch(*train_data_);
    {
      PhaseScope phase(mem, Phase::forward);
      loss_sum += model_->forward(*tokens_, *targets_);
    }
    PhaseScope phase(mem, Phase::backward);
    model_->backward(loss_scale);
  }

  StepResult r;
  {
    PhaseScope phase(mem, Phase::optimizer);
    std::vector<Tensor> grads;
    for (int g = 0; g < params.group_count(); ++g)
      if (params.group_decl(g).trained) grads.push_back(params.group_grads(g));
    r.grad_norm = config_.grad_clip > 0 ? ops::clip_grad_norm(grads, config_.grad_clip)
                                        : ops::global_norm(grads);
    r.lr = schedule_.at(step_);
    optimizer_->update(step_ + 1, r.lr);
  }
  ++step_;
  r.step = step_;
  r.loss = loss_sum * loss_scale;
  r.tokens = tokens_per_micro * config_.grad_accum;
  r.seconds = std::chrono::duration<double>(clock::now() - start).count();
  r.memory = memory_json(mem);
  if (alloc_->device() == Device::meta) {
    r.loss = std::numeric_limits<double>::quiet_NaN();
    r.grad_norm = std::numeric_limits<double>::quiet_NaN();
  }
  return r;
}

double Trainer::evaluate() {
  // A fresh validation stream each time: every evaluation sees the same batches.
  auto val = data::make_token_source(config_.data, config_.seed, data::Split::val);
  double sum = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < config_.eval_batches; ++i) {
    load_batch(*val);
    sum += model_->forward(*tokens_, *targets_, /*keep_for_backward=*/false);
    count += model_->valid_targets();
  }
  return sum / static_cast<double>(count);
}

std::optional<double> Trainer::best_achievable_loss() const {
  return train_data_->best_achievable_loss(config_.seq);
}

}  // namespace sdp
