// Interoperability with other LLaMA implementations: a checkpoint the engine
// exports (Hugging Face names + config.json) must give the engine's logits
// when loaded into the independent PyTorch reference of bench/torch_ref
// (check_logits.py, float64). Covers a trained GQA model saved by the
// trainer, a tied-embedding GQA model written by export_hf_model, a
// negative control showing the comparison can fail, and a sharded export.
//
// Needs /usr/bin/python3 with torch and numpy (scripts/install-deps.sh
// installs them); without them the tests warn and pass.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <fstream>
#include <random>
#include <string>

#include "test/test_temp_dir.h"
#include "engine/checkpoint/tensor_collection.h"
#include "engine/train/hf_export.h"
#include "engine/train/trainer.h"
#include "models/llama/llama_model.h"

using namespace sdp;
namespace fs = std::filesystem;

namespace {

static_assert(std::endian::native == std::endian::little,
              "the raw token/logit files are little-endian");

constexpr const char* kPython = "/usr/bin/python3";
constexpr int64_t kBatch = 2, kSeq = 32;

void write_raw(const fs::path& path, const Tensor& t) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(t.raw()),
            static_cast<std::streamsize>(t.numel() * static_cast<int64_t>(dtype_size(t.dtype()))));
  REQUIRE(out.good());
}

struct Outcome {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

Outcome run(const std::string& command) {
  Outcome r;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[512];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string quoted(const fs::path& p) {
  std::string q(1, '\'');
  q += p.string();
  q += '\'';
  return q;
}

// Runs check_logits.py on a checkpoint dir holding tokens.i32 and logits.f32.
Outcome check_logits(const fs::path& dir, double tol = 1e-4) {
  const fs::path script = fs::path(SDP_SOURCE_DIR) / "bench" / "torch_ref" / "check_logits.py";
  return run("OPENBLAS_NUM_THREADS=2 OMP_NUM_THREADS=2 " + std::string(kPython) + " " +
             quoted(script) + " --checkpoint " + quoted(dir) + " --tokens " +
             quoted(dir / "tokens.i32") + " --logits " + quoted(dir / "logits.f32") +
             " --batch " + std::to_string(kBatch) + " --seq " + std::to_string(kSeq) +
             " --tol " + std::to_string(tol));
}

// True when the reference cannot run here (no interpreter, no torch/numpy).
bool reference_unavailable(const Outcome& r) {
  return r.exit_code == 127 || r.exit_code == 126 ||
         r.output.find("ModuleNotFoundError") != std::string::npos ||
         r.output.find("No module named") != std::string::npos;
}

// check_logits, or nothing (with a visible warning) when the reference
// cannot run on this machine.
std::optional<Outcome> check_logits_or_skip(const fs::path& dir) {
  Outcome r = check_logits(dir);
  if (!reference_unavailable(r)) return r;
  WARN("skipped: " << kPython << " cannot run the PyTorch reference (needs torch + numpy):\n"
                   << r.output);
  return std::nullopt;
}

// Fixed tokens [B, T] and the model's f32 logits [B, T, V] for them, both
// written next to the checkpoint.
void write_tokens_and_logits(llama::LlamaModel& model, Allocator& alloc, const fs::path& dir) {
  const int64_t V = model.config().vocab;
  OwnedTensor tokens(alloc, {kBatch, kSeq}, DType::i32, MemCategory::activation);
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(V - 1));
  for (int64_t i = 0; i < tokens->numel(); ++i) tokens->data<int32_t>()[i] = dist(rng);
  OwnedTensor logits(alloc, {kBatch, kSeq, V}, DType::f32, MemCategory::activation);
  model.logits(*tokens, *logits);
  int64_t non_finite = 0;
  for (int64_t i = 0; i < logits->numel(); ++i) non_finite += !std::isfinite(logits->data<float>()[i]);
  REQUIRE(non_finite == 0);
  write_raw(dir / "tokens.i32", *tokens);
  write_raw(dir / "logits.f32", *logits);
}

}  // namespace

TEST_CASE("a trained GQA checkpoint gives the engine's logits in PyTorch, and a wrong logit fails",
          "[interop]") {
  const sdp::testing::TempDir temp;
  const fs::path dir = temp / "trained";
  TrainConfig c;
  c.model = "tiny";  // 4 query heads, 2 kv heads
  c.batch = 4;
  c.seq = 32;
  c.steps = 3;
  c.warmup = 1;
  c.lr = 1e-2;  // moves the weights visibly away from the init in 3 steps
  c.eval_every = 0;
  c.progress = false;
  Trainer trainer(c);
  const auto& mc = dynamic_cast<llama::LlamaModel&>(trainer.model()).config();
  REQUIRE(mc.n_kv_heads < mc.n_heads);
  for (int i = 0; i < 3; ++i) trainer.train_step();
  trainer.save_checkpoint(dir);
  REQUIRE(fs::exists(dir / "model.safetensors"));
  REQUIRE(fs::exists(dir / "config.json"));
  write_tokens_and_logits(dynamic_cast<llama::LlamaModel&>(trainer.model()), trainer.allocator(), dir);

  const std::optional<Outcome> ok = check_logits_or_skip(dir);
  if (!ok) return;
  INFO(ok->output);
  REQUIRE(ok->exit_code == 0);
  REQUIRE(ok->output.find("PASS") != std::string::npos);

  // Negative control: one logit off by more than the largest logit.
  {
    std::fstream f(dir / "logits.f32", std::ios::binary | std::ios::in | std::ios::out);
    const std::streamoff at = static_cast<std::streamoff>(sizeof(float)) * 1234;
    float v = 0;
    f.seekg(at);
    f.read(reinterpret_cast<char*>(&v), sizeof v);
    v += 100.0f;
    f.seekp(at);
    f.write(reinterpret_cast<const char*>(&v), sizeof v);
    REQUIRE(f.good());
  }
  const Outcome bad = check_logits(dir);
  INFO(bad.output);
  REQUIRE(bad.exit_code == 1);
  REQUIRE(bad.output.find("FAIL") != std::string::npos);
}

TEST_CASE("a tied-embedding GQA model written by export_hf_model gives the same logits in PyTorch",
          "[interop]") {
  llama::LlamaConfig mc;
  mc.dim = 48;
  mc.n_layers = 2;
  mc.n_heads = 6;
  mc.n_kv_heads = 2;
  mc.ffn_dim = 80;
  mc.vocab = 97;
  mc.max_seq = 64;
  mc.norm_eps = 1e-6;
  mc.rope_theta = 500000.0;
  mc.tie_embeddings = true;
  CpuAllocator alloc;  // declared first: it must outlive the model's buffers
  llama::LlamaModel model(mc);
  model.materialize(alloc, DType::f32);
  model.params().init_values(7);
  REQUIRE_FALSE(model.params().find("lm_head.weight").has_value());
  // Perturb every weight (norm weights included, which init to ones) so that
  // a swapped or mis-mapped tensor cannot go unnoticed.
  std::mt19937 rng(99);
  std::uniform_real_distribution<float> noise(-0.05f, 0.05f);
  for (int id = 0; id < model.params().count(); ++id) {
    const Tensor p = model.params().param(id);
    for (int64_t i = 0; i < p.numel(); ++i) p.data<float>()[i] += noise(rng);
  }

  const sdp::testing::TempDir temp;
  const fs::path dir = temp / "tied";
  export_hf_model(model, dir);
  REQUIRE(fs::exists(dir / "model.safetensors"));
  REQUIRE(fs::exists(dir / "config.json"));
  write_tokens_and_logits(model, alloc, dir);

  const std::optional<Outcome> ok = check_logits_or_skip(dir);
  if (!ok) return;
  INFO(ok->output);
  REQUIRE(ok->exit_code == 0);
  REQUIRE(ok->output.find("tied=True") != std::string::npos);
  REQUIRE(ok->output.find("PASS") != std::string::npos);
}

TEST_CASE("a sharded export gives the same logits in PyTorch", "[interop][shards]") {
  llama::LlamaConfig mc;
  mc.dim = 32;
  mc.n_layers = 2;
  mc.n_heads = 4;
  mc.n_kv_heads = 2;
  mc.ffn_dim = 64;
  mc.vocab = 97;
  mc.max_seq = 64;
  CpuAllocator alloc;  // declared first: it must outlive the model's buffers
  llama::LlamaModel model(mc);
  model.materialize(alloc, DType::f32);
  model.params().init_values(11);
  const sdp::testing::TempDir temp;
  const fs::path dir = temp / "sharded";
  HfExportOptions options;
  options.max_shard_bytes = 16 * 1024;  // a 12 KiB embedding: several shards
  export_hf_model(model, dir, options);
  REQUIRE_FALSE(fs::exists(dir / "model.safetensors"));
  REQUIRE(fs::exists(dir / "model.safetensors.index.json"));
  REQUIRE(checkpoint::TensorCollection(dir, "model").file_count() > 1);
  write_tokens_and_logits(model, alloc, dir);

  const std::optional<Outcome> ok = check_logits_or_skip(dir);
  if (!ok) return;
  INFO(ok->output);
  REQUIRE(ok->exit_code == 0);
  REQUIRE(ok->output.find("PASS") != std::string::npos);
}
