#pragma once
// CIFAR-style residual networks (He et al. 2016, the CIFAR variant used by
// the SDP paper): a 3x3 stem convolution with BatchNorm and ReLU (no max
// pooling: CIFAR images are 32x32), four stages of basic blocks (two 3x3
// convolutions), global average pooling and a linear classifier.
//   resnet18  widths 64-128-256-512, 2 blocks per stage, 11.2M parameters
//   wrn18     WideResNet-18: the same network with every width doubled
//             (width multiplier k = 2: 128-256-512-1024), 44.7M parameters
//   resnet152-basic  ResNet-152's stage depths (3, 8, 36, 3) in basic blocks
//             at resnet18's widths, for pipeline simulations
//   resnet-mini, resnet-tiny: small widths for tests and the demo
// The first block of stages 2-4 halves the resolution (stride 2) and
// doubles the width; its shortcut is a 1x1 stride-2 convolution with
// BatchNorm ("projection"); every other shortcut is the identity.
// The number of classes comes from the data (10 for CIFAR-10, 100 for
// CIFAR-100); the network is independent of the image size.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sdp::resnet {

struct ResNetConfig {
  std::string name = "custom";
  std::array<int64_t, 4> widths{64, 128, 256, 512};  // channels of each stage
  std::array<int64_t, 4> blocks{2, 2, 2, 2};         // basic blocks per stage
  int64_t width_multiplier = 1;  // informational: widths already include it
  int64_t in_channels = 3;
  int64_t num_classes = 10;
  double bn_eps = 1e-5;
  double bn_momentum = 0.1;  // PyTorch's convention: running += momentum (batch - running)

  int64_t stage_stride(int stage) const { return stage == 0 ? 1 : 2; }
  int64_t block_count() const;
  // Trainable parameters (BatchNorm running statistics excluded).
  int64_t parameter_count() const;
  // Throws sdp::Error naming the first invalid field and what is valid.
  void validate() const;

  static ResNetConfig named(const std::string& name, int64_t num_classes = 10);
  static std::vector<std::string> names();
  static bool is_name(const std::string& name);

  // Replaces fields by a model spec override (models/common/model_spec.h):
  // widths or blocks, four '-'-joined sizes (widths=32-64-128-256).
  void set(const std::string& key, const std::string& value);
  static std::vector<std::string> keys();

  nlohmann::json to_json() const;
  static ResNetConfig from_json(const nlohmann::json& j);
};

}  // namespace sdp::resnet
