#include "engine/train/batch_loader.h"

#include "engine/core/error.h"
#include "engine/data/image_source.h"
#include "engine/data/synthetic_images.h"
#include "kernels/ops.h"
#include "models/common/tensor_staging.h"

namespace sdp {

namespace {

class TokenBatches final : public BatchLoader {
 public:
  TokenBatches(std::unique_ptr<data::TokenSource> source, int64_t batch, int64_t seq,
               Allocator& device)
      : source_(std::move(source)), B_(batch), T_(seq) {
    windows_ = OwnedTensor(host_allocator(), {B_, T_ + 1}, DType::i32, MemCategory::workspace);
    tokens_ = OwnedTensor(device, {B_, T_}, DType::i32, MemCategory::workspace);
    targets_ = OwnedTensor(device, {B_, T_}, DType::i32, MemCategory::workspace);
    if (device.device() == Device::cuda) {
      host_tokens_ = OwnedTensor(host_allocator(), {B_, T_}, DType::i32, MemCategory::workspace);
      host_targets_ = OwnedTensor(host_allocator(), {B_, T_}, DType::i32, MemCategory::workspace);
    }
  }

  void next() override {
    source_->next_batch(windows_->data<int32_t>(), B_, T_);
    if (tokens_->device() == Device::meta) return;  // nothing to copy
    // Inputs and shifted targets are cut on the host; a device run uploads them.
    const bool on_host = tokens_->device() == Device::cpu;
    Tensor x_host = on_host ? *tokens_ : *host_tokens_;    // [B, T]
    Tensor y_host = on_host ? *targets_ : *host_targets_;  // [B, T]
    const int32_t* w = windows_->data<int32_t>();
    int32_t* x = x_host.data<int32_t>();
    int32_t* y = y_host.data<int32_t>();
    for (int64_t b = 0; b < B_; ++b)
      for (int64_t t = 0; t < T_; ++t) {
        x[b * T_ + t] = w[b * (T_ + 1) + t];
        y[b * T_ + t] = w[b * (T_ + 1) + t + 1];
      }
    if (on_host) return;
    ops::transfer(x_host, *tokens_);
    ops::transfer(y_host, *targets_);
  }
  const Tensor& inputs() const override { return *tokens_; }
  const Tensor& targets() const override { return *targets_; }
  int64_t examples() const override { return B_ * T_; }
  const char* unit() const override { return "tokens"; }
  ModelDataFacts facts() const override { return {}; }
  int64_t vocab_size() const override { return source_->vocab_size(); }
  data::TokenizerFacts tokenizer() const override { return source_->tokenizer(); }
  nlohmann::json state() const override { return source_->state(); }
  void restore(const nlohmann::json& state) override { source_->restore(state); }
  std::string describe() const override { return source_->describe(); }
  std::optional<double> best_achievable_loss() const override {
    return source_->best_achievable_loss(T_);
  }

 private:
  std::unique_ptr<data::TokenSource> source_;
  int64_t B_, T_;
  OwnedTensor windows_;                     // [B, T + 1] i32, host
  OwnedTensor tokens_, targets_;            // [B, T] i32 on the device
  OwnedTensor host_tokens_, host_targets_;  // [B, T] i32 host staging of a device run
};

class ImageBatches final : public BatchLoader {
 public:
  ImageBatches(std::unique_ptr<data::ImageSource> source, int64_t batch, Allocator& device,
               DType dtype)
      : source_(std::move(source)), B_(batch) {
    const data::ImageShape s = source_->image_shape();
    const Shape images{B_, s.channels, s.height, s.width};
    host_images_ = OwnedTensor(host_allocator(), images, DType::f32, MemCategory::workspace);
    host_labels_ = OwnedTensor(host_allocator(), {B_}, DType::i32, MemCategory::workspace);
    // The model's copy lives on the trainer's allocator (counted, as the
    // token tensors are), whatever the device: the source writes host f32.
    device_images_ = OwnedTensor(device, images, dtype, MemCategory::workspace);
    device_labels_ = OwnedTensor(device, {B_}, DType::i32, MemCategory::workspace);
  }

  void next() override {
    source_->next_batch(host_images_->data<float>(), host_labels_->data<int32_t>(), B_);
    if (device_images_->device() == Device::meta) return;
    stage_copy(*host_images_, *device_images_);  // to the device and the model's dtype
    ops::transfer(*host_labels_, *device_labels_);
  }
  const Tensor& inputs() const override { return *device_images_; }
  const Tensor& targets() const override { return *device_labels_; }
  int64_t examples() const override { return B_; }
  const char* unit() const override { return "images"; }
  ModelDataFacts facts() const override { return {source_->num_classes()}; }
  nlohmann::json state() const override { return source_->state(); }
  void restore(const nlohmann::json& state) override { source_->restore(state); }
  std::string describe() const override { return source_->describe(); }

 private:
  std::unique_ptr<data::ImageSource> source_;
  int64_t B_;
  OwnedTensor host_images_;  // [B, C, H, W] f32, host
  OwnedTensor host_labels_;  // [B] i32, host
  OwnedTensor device_images_;  // [B, C, H, W] on the model's device, in its dtype
  OwnedTensor device_labels_;  // [B] i32 on the model's device
};

}  // namespace

std::string resolved_data_spec(const TrainConfig& config) {
  const ModelFamily family = model_family(config.model);
  if (!is_image_family(family) || config.data != "synthetic") return config.data;
  // The synthetic images' default size, unless the model needs another
  // (swin-micro: 16 x 16).
  const int64_t side = required_image_size(config.model);
  const data::ImageShape fallback = data::SyntheticImagesConfig{}.shape;
  if (side > 0 && (side != fallback.height || side != fallback.width))
    return format("synthetic-images:height=", side, ",width=", side);
  return "synthetic-images";
}

std::unique_ptr<BatchLoader> make_batch_loader(const TrainConfig& config, data::Split split,
                                               data::StreamPart part, Allocator& device,
                                               DType dtype) {
  const std::string spec = resolved_data_spec(config);
  const ModelFamily family = model_family(config.model);
  const bool images = data::is_image_spec(spec);
  if (is_image_family(family) && !images)
    fail("data '", spec, "': model ", config.model, " classifies images; valid data:\n",
         data::image_source_spec_help());
  if (!is_image_family(family) && images)
    fail("data '", spec, "': model ", config.model, " is a language model and needs tokens; "
         "valid data:\n", data::token_source_spec_help());
  // config.shuffle orders the train split of file-backed data (and image
  // sets); the sources read the val split in stored order whatever it says.
  if (images)
    return std::make_unique<ImageBatches>(
        data::make_image_source(spec, config.seed, split, part, config.shuffle), config.batch,
        device, dtype);
  return std::make_unique<TokenBatches>(
      data::make_token_source(spec, config.seed, split, part, config.shuffle), config.batch,
      config.seq, device);
}

}  // namespace sdp
