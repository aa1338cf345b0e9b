#include "models/llama/llama_config.h"

#include "engine/core/error.h"
#include "models/common/config_json.h"
#include "models/common/model_spec.h"

namespace sdp::llama {

namespace {
// The parameters a config.json's sizes may add up to: far above any model
// this engine trains, and within int64 (parameter_count()).
constexpr double kMaxParameters = 0x1p40;
}  // namespace

int64_t LlamaConfig::parameter_count() const {
  const int64_t hd = head_dim();
  const int64_t attn = dim * n_heads * hd * 2 + dim * n_kv_heads * hd * 2;  // q, o, k, v
  const int64_t mlp = 3 * dim * ffn_dim;
  const int64_t per_layer = attn + mlp + 2 * dim;  // two RMSNorm weights
  const int64_t embed = vocab * dim;
  return embed + (tie_embeddings ? 0 : embed) + n_layers * per_layer + dim;
}

void LlamaConfig::validate() const {
  auto positive = [&](const char* field, int64_t v) {
    if (v <= 0) fail("model config: ", field, " = ", v, " must be positive");
  };
  positive("dim", dim);
  positive("n_layers", n_layers);
  positive("n_heads", n_heads);
  positive("n_kv_heads", n_kv_heads);
  positive("ffn_dim", ffn_dim);
  positive("vocab", vocab);
  positive("max_seq", max_seq);
  if (dim % n_heads != 0)
    fail("model config: dim = ", dim, " must be divisible by n_heads = ", n_heads);
  if (head_dim() % 2 != 0)
    fail("model config: head dim = dim / n_heads = ", head_dim(), " must be even for RoPE");
  if (n_heads % n_kv_heads != 0)
    fail("model config: n_heads = ", n_heads, " must be a multiple of n_kv_heads = ",
         n_kv_heads, " (grouped-query attention)");
  if (!(norm_eps > 0)) fail("model config: norm_eps = ", norm_eps, " must be > 0");
  if (!(rope_theta > 0)) fail("model config: rope_theta = ", rope_theta, " must be > 0");
}

std::vector<std::string> LlamaConfig::names() {
  return {"tiny", "mini", "small", "small-32k", "llama-134m", "llama-500m", "llama-1b"};
}

LlamaConfig LlamaConfig::named(const std::string& name) {
  LlamaConfig c;
  c.name = name;
  if (name == "tiny") {  // unit tests and the convergence test: seconds on 2 cores
    c.dim = 64; c.n_layers = 2; c.n_heads = 4; c.n_kv_heads = 2; c.ffn_dim = 176;
    c.vocab = 256; c.max_seq = 256;
  } else if (name == "mini") {  // the multi-rank demo: 4 blocks of 4 heads, seconds per run
    c.dim = 96; c.n_layers = 4; c.n_heads = 4; c.n_kv_heads = 4; c.ffn_dim = 256;
    c.vocab = 256; c.max_seq = 256;
  } else if (name == "small") {  // the CPU benchmark against PyTorch
    c.dim = 256; c.n_layers = 4; c.n_heads = 8; c.n_kv_heads = 8; c.ffn_dim = 688;
    c.vocab = 256; c.max_seq = 1024;
  } else if (name == "small-32k") {  // "small" with a LLaMA-size vocabulary: the head dominates
    c.dim = 256; c.n_layers = 4; c.n_heads = 8; c.n_kv_heads = 8; c.ffn_dim = 688;
    c.vocab = 32000; c.max_seq = 1024;
  } else if (name == "llama-134m") {  // the SDP paper's 134M model
    c.dim = 768; c.n_layers = 12; c.n_heads = 12; c.n_kv_heads = 12; c.ffn_dim = 2048;
    c.vocab = 32000; c.max_seq = 1024;
  } else if (name == "llama-500m") {  // 508M: F = 3 D, head dim 64
    c.dim = 1280; c.n_layers = 20; c.n_heads = 20; c.n_kv_heads = 20; c.ffn_dim = 3840;
    c.vocab = 32000; c.max_seq = 1024;
  } else if (name == "llama-1b") {  // 1.003B: F = 3 D, head dim 128
    c.dim = 2048; c.n_layers = 16; c.n_heads = 16; c.n_kv_heads = 16; c.ffn_dim = 6144;
    c.vocab = 32000; c.max_seq = 1024;
  } else {
    std::string valid;
    for (const auto& n : names()) valid += (valid.empty() ? "" : ", ") + n;
    fail("unknown model '", name, "' (valid: ", valid, ")");
  }
  c.validate();
  return c;
}

std::vector<std::string> LlamaConfig::keys() {
  return {"vocab", "layers", "dim", "heads", "kv_heads", "ffn", "max_seq", "rope_theta",
          "norm_eps", "tie"};
}

void LlamaConfig::set(const std::string& key, const std::string& value) {
  namespace ms = model_spec;
  if (key == "vocab") vocab = ms::positive(key, value);
  else if (key == "layers") n_layers = ms::positive(key, value);
  else if (key == "dim") dim = ms::positive(key, value);
  else if (key == "heads") n_heads = ms::positive(key, value);
  else if (key == "kv_heads") n_kv_heads = ms::positive(key, value);
  else if (key == "ffn") ffn_dim = ms::positive(key, value);
  else if (key == "max_seq") max_seq = ms::positive(key, value);
  else if (key == "rope_theta") rope_theta = ms::positive_number(key, value);
  else if (key == "norm_eps") norm_eps = ms::positive_number(key, value);
  else if (key == "tie") tie_embeddings = ms::boolean(key, value);
  else ms::unknown_key(name, key, keys());
}

nlohmann::json LlamaConfig::to_hf_json() const {
  return {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"hidden_size", dim},
      {"intermediate_size", ffn_dim},
      {"num_hidden_layers", n_layers},
      {"num_attention_heads", n_heads},
      {"num_key_value_heads", n_kv_heads},
      {"head_dim", head_dim()},
      {"vocab_size", vocab},
      {"max_position_embeddings", max_seq},
      {"rms_norm_eps", norm_eps},
      {"rope_theta", rope_theta},
      {"tie_word_embeddings", tie_embeddings},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"mlp_bias", false},
      // transformers' LlamaConfig fields, stated because they hold: no
      // dropout, no RoPE scaling, unsplit projections, and the init's std
      // of the normal weights (llama_model.cpp).
      {"attention_dropout", 0.0},
      {"rope_scaling", nullptr},
      {"pretraining_tp", 1},
      {"initializer_range", 0.02},
      {"sdp_name", name},
  };
}

LlamaConfig LlamaConfig::from_hf_json(const nlohmann::json& j) {
  LlamaConfig c;
  // Sizes exactly as written and bounded (models/common/config_json.h).
  auto size = [&](const char* key) { return model_config::size(j, key); };
  auto size_or = [&](const char* key, int64_t fallback) {
    return model_config::size_or(j, key, fallback);
  };
  try {
    c.dim = size("hidden_size");
    c.ffn_dim = size("intermediate_size");
    c.n_layers = size("num_hidden_layers");
    c.n_heads = size("num_attention_heads");
    c.n_kv_heads = size_or("num_key_value_heads", c.n_heads);
    c.vocab = size("vocab_size");
    c.max_seq = size_or("max_position_embeddings", 2048);
    c.norm_eps = j.value("rms_norm_eps", 1e-6);
    c.rope_theta = j.value("rope_theta", 10000.0);
    c.tie_embeddings = j.value("tie_word_embeddings", false);
    c.name = j.value("sdp_name", std::string("custom"));
  } catch (const nlohmann::json::exception& e) {
    fail("config.json: a field has the wrong type: ", e.what());
  }
  if (j.contains("head_dim") && c.n_heads > 0 && size("head_dim") != c.dim / c.n_heads)
    fail("config.json: head_dim = ", j["head_dim"].dump(),
         " differs from hidden_size / num_attention_heads = ", c.dim / c.n_heads,
         " (only that layout is supported)");
  {
    // In doubles: the int64 sum of a config at the bounds could overflow.
    const double d = static_cast<double>(c.dim), f = static_cast<double>(c.ffn_dim);
    const double layers = static_cast<double>(c.n_layers), vocab = static_cast<double>(c.vocab);
    const double parameters = layers * (4 * d * d + 3 * d * f) + 2 * vocab * d;
    if (parameters > kMaxParameters)
      fail("config.json: hidden_size = ", c.dim, ", intermediate_size = ", c.ffn_dim,
           ", num_hidden_layers = ", c.n_layers, ", vocab_size = ", c.vocab, " make about ",
           parameters, " parameters (valid: at most ", kMaxParameters, ")");
  }
  if (j.contains("hidden_act") && j["hidden_act"] != "silu")
    fail("config.json: hidden_act = ", j["hidden_act"].dump(), " (only \"silu\" is supported)");
  c.validate();
  return c;
}

}  // namespace sdp::llama
