#pragma once
// Swin Transformers for CIFAR-sized images (Liu et al. 2021), exactly the
// networks timm 1.0.9's SwinTransformer builds with qkv_bias, patch_norm,
// no dropout, global average pooling:
//   patch embedding (a p x p stride-p convolution with bias) + LayerNorm,
//   stages of shifted-window blocks (stage i > 0 starts with patch merging:
//   2 x 2 neighbours gathered to 4C, LayerNorm, a linear 4C -> 2C without
//   bias), a final LayerNorm, the mean over tokens and a linear head.
//   swin-t      img 32, patch 2, embed 96, depths 2-2-6-2, heads 3-6-12-24,
//               window 4 (27.5M parameters at 10 classes)
//   swin-mini   img 32, patch 2, embed 32, depths 2-2-2-2, heads 2-4-8-16,
//               window 4 (2.3M)
//   swin-micro  img 16, patch 2, embed 8, depths 2-2, heads 2-4, window 4
//               (9,790: gradient checks)
// Where a stage's resolution is at most the window, its window shrinks to
// the resolution and its blocks do not shift (timm's rule); otherwise odd
// blocks shift by window / 2. Stochastic depth rates rise linearly from 0 at
// the first block to drop_path_rate at the last (timm's schedule); the rate
// is a training setting, not part of the architecture.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sdp::swin {

struct SwinConfig {
  std::string name = "custom";
  int64_t img_size = 32;
  int64_t patch_size = 2;
  int64_t in_chans = 3;
  int64_t num_classes = 10;
  int64_t embed_dim = 96;
  std::vector<int64_t> depths{2, 2, 6, 2};
  std::vector<int64_t> num_heads{3, 6, 12, 24};
  int64_t window_size = 4;
  double mlp_ratio = 4.0;
  double drop_path_rate = 0.0;
  double ln_eps = 1e-5;  // torch.nn.LayerNorm's default

  int stage_count() const { return static_cast<int>(depths.size()); }
  int64_t block_count() const;
  int64_t stage_dim(int stage) const { return embed_dim << stage; }
  int64_t stage_resolution(int stage) const { return (img_size / patch_size) >> stage; }
  // The window a stage's blocks use, and the shift of its block j.
  int64_t stage_window(int stage) const;
  int64_t block_shift(int stage, int64_t j) const;
  int64_t mlp_hidden(int stage) const;
  int64_t head_dim(int stage) const;
  // Entries of a stage's relative position bias table: (2 w - 1)^2.
  int64_t table_rows(int stage) const;
  // The stochastic depth rate of block b (model order, 0 .. block_count() - 1).
  double block_drop_path(int64_t b) const;
  int64_t parameter_count() const;
  // Throws sdp::Error naming the first invalid field and what is valid.
  void validate() const;

  static SwinConfig named(const std::string& name, int64_t num_classes = 10);
  static std::vector<std::string> names();
  static bool is_name(const std::string& name);

  // Replaces one field by a model spec override (models/common/model_spec.h):
  // embed, depths and heads ('-'-joined, one per stage: depths=2-2-6-2),
  // window, img, patch, mlp_ratio.
  void set(const std::string& key, const std::string& value);
  static std::vector<std::string> keys();
  // The stochastic depth rate a named model trains with by default: Swin-T's
  // recipe (0.2) for swin-t trained from scratch, none for the small ones.
  static double default_drop_path(const std::string& name);

  nlohmann::json to_json() const;
  static SwinConfig from_json(const nlohmann::json& j);
};

}  // namespace sdp::swin
