#pragma once
// LLaMA architecture hyper-parameters, the named configurations, and the
// Hugging Face config.json mapping (so exported checkpoints load elsewhere).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sdp::llama {

struct LlamaConfig {
  std::string name = "custom";
  int64_t dim = 256;          // hidden size D
  int64_t n_layers = 4;
  int64_t n_heads = 8;        // query heads Hq
  int64_t n_kv_heads = 8;     // key/value heads Hkv (GQA when < Hq)
  int64_t ffn_dim = 688;      // SwiGLU intermediate size F
  int64_t vocab = 256;
  int64_t max_seq = 1024;     // longest sequence (RoPE table size)
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;
  bool tie_embeddings = false;

  int64_t head_dim() const { return dim / n_heads; }
  int64_t parameter_count() const;
  // Throws sdp::Error naming the first inconsistent field and what is valid.
  void validate() const;

  // "tiny", "small", "llama-134m", "llama-500m", "llama-1b" (see README).
  static LlamaConfig named(const std::string& name);
  static std::vector<std::string> names();

  // Replaces one field by a model spec override (models/common/model_spec.h):
  // vocab, layers, dim, heads, kv_heads, ffn, max_seq, rope_theta, norm_eps,
  // tie. Throws sdp::Error for an unknown key or a bad value; validate()
  // checks the fields together afterwards.
  void set(const std::string& key, const std::string& value);
  static std::vector<std::string> keys();

  // The architecture as a Hugging Face config. torch_dtype and the special
  // token ids belong to a checkpoint's tensors and data, not to the
  // architecture: the export adds them (engine/train/hf_export.h).
  nlohmann::json to_hf_json() const;
  static LlamaConfig from_hf_json(const nlohmann::json& j);
};

}  // namespace sdp::llama
