#include "models/resnet/resnet_config.h"

#include <algorithm>

#include "engine/core/error.h"
#include "models/common/config_json.h"
#include "models/common/model_spec.h"

namespace sdp::resnet {

int64_t ResNetConfig::block_count() const {
  int64_t n = 0;
  for (int64_t b : blocks) n += b;
  return n;
}

int64_t ResNetConfig::parameter_count() const {
  auto conv = [](int64_t out, int64_t in, int64_t k) { return out * in * k * k; };
  auto bn = [](int64_t c) { return 2 * c; };
  int64_t n = conv(widths[0], in_channels, 3) + bn(widths[0]);  // stem
  int64_t in = widths[0];
  for (int s = 0; s < 4; ++s) {
    const int64_t w = widths[static_cast<size_t>(s)];
    for (int64_t b = 0; b < blocks[static_cast<size_t>(s)]; ++b) {
      n += conv(w, in, 3) + bn(w) + conv(w, w, 3) + bn(w);
      if (b == 0 && (stage_stride(s) != 1 || in != w)) n += conv(w, in, 1) + bn(w);
      in = w;
    }
  }
  return n + num_classes * in + num_classes;  // classifier with bias
}

void ResNetConfig::validate() const {
  for (size_t s = 0; s < 4; ++s) {
    if (widths[s] <= 0)
      fail("model config: widths[", s, "] = ", widths[s], " must be positive");
    if (blocks[s] <= 0)
      fail("model config: blocks[", s, "] = ", blocks[s], " must be positive");
  }
  if (in_channels <= 0) fail("model config: in_channels = ", in_channels, " must be positive");
  if (num_classes < 2) fail("model config: num_classes = ", num_classes, " must be at least 2");
  if (!(bn_eps > 0)) fail("model config: bn_eps = ", bn_eps, " must be > 0");
  if (!(bn_momentum > 0 && bn_momentum <= 1))
    fail("model config: bn_momentum = ", bn_momentum, " must be in (0, 1]");
}

std::vector<std::string> ResNetConfig::names() {
  return {"resnet-tiny", "resnet-mini", "resnet18", "wrn18", "resnet152-basic"};
}

bool ResNetConfig::is_name(const std::string& name) {
  const auto n = names();
  return std::find(n.begin(), n.end(), name) != n.end();
}

ResNetConfig ResNetConfig::named(const std::string& name, int64_t num_classes) {
  ResNetConfig c;
  c.name = name;
  c.num_classes = num_classes;
  if (name == "resnet18") {
    c.widths = {64, 128, 256, 512};
  } else if (name == "wrn18") {
    c.width_multiplier = 2;
    c.widths = {128, 256, 512, 1024};
  } else if (name == "resnet152-basic") {
    // ResNet-152's stage depths built from this engine's basic blocks (it has
    // no bottleneck blocks): 50 blocks deep, for pipeline simulations that
    // need more blocks than stages.
    c.widths = {64, 128, 256, 512};
    c.blocks = {3, 8, 36, 3};
  } else if (name == "resnet-mini") {  // the multi-rank demo and tests: seconds per step
    c.widths = {16, 32, 64, 128};
  } else if (name == "resnet-tiny") {  // gradient checks: both shortcut kinds, 4 channels
    c.widths = {4, 8, 8, 16};
    c.blocks = {2, 1, 1, 1};
  } else {
    std::string valid;
    for (const auto& n : names()) valid += (valid.empty() ? "" : ", ") + n;
    fail("unknown ResNet '", name, "' (valid: ", valid, ")");
  }
  c.validate();
  return c;
}

std::vector<std::string> ResNetConfig::keys() { return {"widths", "blocks"}; }

void ResNetConfig::set(const std::string& key, const std::string& value) {
  if (key != "widths" && key != "blocks") model_spec::unknown_key(name, key, keys());
  const std::vector<int64_t> four = model_spec::positive_list(key, value, 4);
  std::copy(four.begin(), four.end(), (key == "widths" ? widths : blocks).begin());
}

nlohmann::json ResNetConfig::to_json() const {
  return {{"architectures", {"CifarResNet"}},
          {"model_type", "sdp-cifar-resnet"},
          {"name", name},
          {"widths", widths},
          {"blocks", blocks},
          {"width_multiplier", width_multiplier},
          {"in_channels", in_channels},
          {"num_classes", num_classes},
          {"bn_eps", bn_eps},
          {"bn_momentum", bn_momentum},
          {"stem", "conv3x3-bn-relu"},
          {"shortcut", "conv1x1-bn where the shape changes, else identity"}};
}

ResNetConfig ResNetConfig::from_json(const nlohmann::json& j) {
  if (j.value("model_type", std::string()) != "sdp-cifar-resnet")
    fail("config.json: model_type '", j.value("model_type", std::string()),
         "' is not a CIFAR ResNet (expected sdp-cifar-resnet)");
  ResNetConfig c;
  try {
    c.name = j.at("name").get<std::string>();
    for (const char* key : {"widths", "blocks"}) {
      const std::vector<int64_t> four = model_config::sizes(j, key, 4);
      if (four.size() != 4)
        fail("config.json: ", key, " = ", j.at(key).dump(), " is invalid (valid: 4 integers)");
      std::copy(four.begin(), four.end(), (key[0] == 'w' ? c.widths : c.blocks).begin());
    }
    c.width_multiplier = model_config::size_or(j, "width_multiplier", 1);
    c.in_channels = model_config::size(j, "in_channels");
    c.num_classes = model_config::size(j, "num_classes");
    c.bn_eps = j.at("bn_eps").get<double>();
    c.bn_momentum = j.at("bn_momentum").get<double>();
  } catch (const nlohmann::json::exception& e) {
    fail("config.json: not a valid CIFAR ResNet config (", e.what(), ")");
  }
  c.validate();
  return c;
}

}  // namespace sdp::resnet
