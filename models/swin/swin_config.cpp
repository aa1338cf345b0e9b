#include "models/swin/swin_config.h"

#include <algorithm>

#include "engine/core/error.h"
#include "models/common/config_json.h"
#include "models/common/model_spec.h"

namespace sdp::swin {

int64_t SwinConfig::block_count() const {
  int64_t n = 0;
  for (int64_t d : depths) n += d;
  return n;
}

int64_t SwinConfig::stage_window(int stage) const {
  return std::min(window_size, stage_resolution(stage));
}

int64_t SwinConfig::block_shift(int stage, int64_t j) const {
  // timm: no shift where the whole stage fits in one window.
  if (j % 2 == 0 || stage_resolution(stage) <= window_size) return 0;
  return window_size / 2;
}

int64_t SwinConfig::mlp_hidden(int stage) const {
  return static_cast<int64_t>(static_cast<double>(stage_dim(stage)) * mlp_ratio);
}

int64_t SwinConfig::head_dim(int stage) const {
  return stage_dim(stage) / num_heads[static_cast<size_t>(stage)];
}

int64_t SwinConfig::table_rows(int stage) const {
  const int64_t w = stage_window(stage);
  return (2 * w - 1) * (2 * w - 1);
}

double SwinConfig::block_drop_path(int64_t b) const {
  // torch.linspace(0, rate, L): rate b / (L - 1); a single block gets 0.
  const int64_t L = block_count();
  if (L <= 1) return 0.0;
  return drop_path_rate * static_cast<double>(b) / static_cast<double>(L - 1);
}

int64_t SwinConfig::parameter_count() const {
  auto linear = [](int64_t out, int64_t in, bool bias) { return out * in + (bias ? out : 0); };
  auto ln = [](int64_t c) { return 2 * c; };
  int64_t n = linear(embed_dim, in_chans * patch_size * patch_size, true) + ln(embed_dim);
  for (int s = 0; s < stage_count(); ++s) {
    const int64_t C = stage_dim(s), H = num_heads[static_cast<size_t>(s)], F = mlp_hidden(s);
    if (s > 0) n += ln(2 * C) + linear(C, 2 * C, false);  // patch merging of the C/2-wide input
    const int64_t block = ln(C) + linear(3 * C, C, true) + table_rows(s) * H + linear(C, C, true) +
                          ln(C) + linear(F, C, true) + linear(C, F, true);
    n += depths[static_cast<size_t>(s)] * block;
  }
  const int64_t last = stage_dim(stage_count() - 1);
  return n + ln(last) + linear(num_classes, last, true);
}

void SwinConfig::validate() const {
  if (depths.empty()) fail("model config: depths must name at least one stage");
  if (num_heads.size() != depths.size())
    fail("model config: num_heads has ", num_heads.size(), " entries, depths ", depths.size(),
         " (one per stage)");
  if (in_chans <= 0) fail("model config: in_chans = ", in_chans, " must be positive");
  if (num_classes < 2) fail("model config: num_classes = ", num_classes, " must be at least 2");
  if (embed_dim <= 0) fail("model config: embed_dim = ", embed_dim, " must be positive");
  if (patch_size <= 0 || img_size <= 0 || img_size % patch_size != 0)
    fail("model config: img_size = ", img_size,
         " must be a positive multiple of patch_size = ", patch_size);
  if (window_size <= 0) fail("model config: window_size = ", window_size, " must be positive");
  if (!(mlp_ratio > 0)) fail("model config: mlp_ratio = ", mlp_ratio, " must be > 0");
  if (!(drop_path_rate >= 0 && drop_path_rate < 1))
    fail("model config: drop_path_rate = ", drop_path_rate, " must be in [0, 1)");
  if (!(ln_eps > 0)) fail("model config: ln_eps = ", ln_eps, " must be > 0");
  for (int s = 0; s < stage_count(); ++s) {
    const int64_t r = stage_resolution(s), d = depths[static_cast<size_t>(s)];
    const int64_t h = num_heads[static_cast<size_t>(s)];
    if (d <= 0) fail("model config: depths[", s, "] = ", d, " must be positive");
    if (h <= 0 || stage_dim(s) % h != 0)
      fail("model config: num_heads[", s, "] = ", h, " must divide the stage's width ",
           stage_dim(s));
    // Patch merging halves the resolution; windows must tile it.
    if (r <= 0 || (s + 1 < stage_count() && r % 2 != 0))
      fail("model config: stage ", s, " has resolution ", r, "; every stage but the last needs an ",
           "even one (img_size / patch_size / 2^stage)");
    if (r % stage_window(s) != 0)
      fail("model config: stage ", s, "'s resolution ", r, " is not a multiple of its window ",
           stage_window(s));
    if (mlp_hidden(s) <= 0) fail("model config: mlp_ratio = ", mlp_ratio, " leaves no MLP units");
  }
}

std::vector<std::string> SwinConfig::names() { return {"swin-micro", "swin-mini", "swin-t"}; }

bool SwinConfig::is_name(const std::string& name) {
  const auto n = names();
  return std::find(n.begin(), n.end(), name) != n.end();
}

double SwinConfig::default_drop_path(const std::string& name) {
  return name == "swin-t" ? 0.2 : 0.0;
}

SwinConfig SwinConfig::named(const std::string& name, int64_t num_classes) {
  SwinConfig c;
  c.name = name;
  c.num_classes = num_classes;
  if (name == "swin-t") {
    // Swin-T's widths and depths, on CIFAR: 2x2 patches and 4x4 windows.
    c.img_size = 32;
    c.patch_size = 2;
    c.embed_dim = 96;
    c.depths = {2, 2, 6, 2};
    c.num_heads = {3, 6, 12, 24};
  } else if (name == "swin-mini") {  // the demo and end-to-end tests: seconds per step
    c.img_size = 32;
    c.patch_size = 2;
    c.embed_dim = 32;
    c.depths = {2, 2, 2, 2};
    c.num_heads = {2, 4, 8, 16};
  } else if (name == "swin-micro") {  // gradient checks: shifted and shrunk windows, merging
    c.img_size = 16;
    c.patch_size = 2;
    c.embed_dim = 8;
    c.depths = {2, 2};
    c.num_heads = {2, 4};
  } else {
    std::string valid;
    for (const auto& n : names()) valid += (valid.empty() ? "" : ", ") + n;
    fail("unknown Swin Transformer '", name, "' (valid: ", valid, ")");
  }
  c.window_size = 4;
  c.drop_path_rate = default_drop_path(name);
  c.validate();
  return c;
}

std::vector<std::string> SwinConfig::keys() {
  return {"embed", "depths", "heads", "window", "img", "patch", "mlp_ratio"};
}

void SwinConfig::set(const std::string& key, const std::string& value) {
  namespace ms = model_spec;
  if (key == "embed") embed_dim = ms::positive(key, value);
  else if (key == "depths") depths = ms::positive_list(key, value, 0);
  else if (key == "heads") num_heads = ms::positive_list(key, value, 0);
  else if (key == "window") window_size = ms::positive(key, value);
  else if (key == "img") img_size = ms::positive(key, value);
  else if (key == "patch") patch_size = ms::positive(key, value);
  else if (key == "mlp_ratio") mlp_ratio = ms::positive_number(key, value);
  else ms::unknown_key(name, key, keys());
}

nlohmann::json SwinConfig::to_json() const {
  return {{"architectures", {"SwinTransformer"}},
          {"model_type", "sdp-swin"},
          {"name", name},
          {"img_size", img_size},
          {"patch_size", patch_size},
          {"in_chans", in_chans},
          {"num_classes", num_classes},
          {"embed_dim", embed_dim},
          {"depths", depths},
          {"num_heads", num_heads},
          {"window_size", window_size},
          {"mlp_ratio", mlp_ratio},
          {"drop_path_rate", drop_path_rate},
          {"layer_norm_eps", ln_eps},
          {"qkv_bias", true},
          {"patch_norm", true}};
}

SwinConfig SwinConfig::from_json(const nlohmann::json& j) {
  if (j.value("model_type", std::string()) != "sdp-swin")
    fail("config.json: model_type '", j.value("model_type", std::string()),
         "' is not a Swin Transformer (expected sdp-swin)");
  SwinConfig c;
  try {
    c.name = j.at("name").get<std::string>();
    c.img_size = model_config::size(j, "img_size");
    c.patch_size = model_config::size(j, "patch_size");
    c.in_chans = model_config::size(j, "in_chans");
    c.num_classes = model_config::size(j, "num_classes");
    c.embed_dim = model_config::size(j, "embed_dim");
    // Patch merging halves the resolution per stage: 24 stages exceed any image.
    c.depths = model_config::sizes(j, "depths", 24);
    c.num_heads = model_config::sizes(j, "num_heads", 24);
    c.window_size = model_config::size(j, "window_size");
    c.mlp_ratio = j.at("mlp_ratio").get<double>();
    c.drop_path_rate = j.value("drop_path_rate", 0.0);
    c.ln_eps = j.value("layer_norm_eps", 1e-5);
  } catch (const nlohmann::json::exception& e) {
    fail("config.json: not a valid Swin Transformer config (", e.what(), ")");
  }
  c.validate();
  return c;
}

}  // namespace sdp::swin
