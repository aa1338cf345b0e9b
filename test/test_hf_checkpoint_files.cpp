// The Hugging Face files of a LLaMA checkpoint besides the weights:
// config.json's torch_dtype and special token ids, generation_config.json,
// and the tokenizer the data was made with (generated for bytes, copied for
// prepared llm.c shards, none for the synthetic language). Loading compares
// the architecture only, so the stored dtype and the token ids may differ.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <numeric>
#include <set>
#include <string>

#include "engine/checkpoint/json_file.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/train/hf_tokenizer.h"
#include "engine/train/trainer.h"
#include "test/test_data_support.h"
#include "test/test_temp_dir.h"

using namespace sdp;
namespace fs = std::filesystem;
using checkpoint::read_json_file;

namespace {

TrainConfig one_step(const std::string& data) {
  TrainConfig c;
  c.model = "tiny";
  c.data = data;
  c.batch = 2;
  c.seq = 16;
  c.steps = 1;
  c.warmup = 0;
  c.eval_every = 0;
  c.progress = false;
  return c;
}

fs::path train_and_save(const TrainConfig& c, const fs::path& dir) {
  Trainer t(c);
  t.train_step();
  t.save_checkpoint(dir);
  return dir;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  REQUIRE(out.good());
}

std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

// The UTF-8 encoding of a code point below U+0800.
std::string utf8(uint32_t cp) {
  if (cp < 0x80) return std::string(1, static_cast<char>(cp));
  return {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
}

}  // namespace

TEST_CASE("the byte-level tokenizer maps byte b to id b through GPT-2's byte alphabet",
          "[checkpoint][tokenizer]") {
  const nlohmann::json t = byte_level_tokenizer_json();
  const nlohmann::json& vocab = t.at("model").at("vocab");
  REQUIRE(t.at("model").at("type") == "BPE");
  REQUIRE(t.at("model").at("merges").empty());
  REQUIRE(vocab.size() == 256);
  std::set<int> ids;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) ids.insert(it.value().get<int>());
  REQUIRE(ids.size() == 256);
  REQUIRE(*ids.begin() == 0);
  REQUIRE(*ids.rbegin() == 255);
  // Printable bytes stand for themselves; the others are 256 + their rank
  // among the non-printable bytes: 0 -> U+0100, ' ' (32) -> U+0120 ("Ġ"),
  // 127 -> U+0121, 0xAD (soft hyphen) -> U+0143.
  REQUIRE(vocab.at("A") == 65);
  REQUIRE(vocab.at("~") == 126);
  REQUIRE(vocab.at(utf8(0xE9)) == 0xE9);
  REQUIRE(vocab.at(utf8(0x100)) == 0);
  REQUIRE(vocab.at(utf8(0x120)) == 32);
  REQUIRE(vocab.at(utf8(0x121)) == 127);
  REQUIRE(vocab.at(utf8(0x143)) == 0xAD);
  for (const char* part : {"pre_tokenizer", "decoder"}) {
    REQUIRE(t.at(part).at("type") == "ByteLevel");
    REQUIRE(t.at(part).at("add_prefix_space") == false);
    REQUIRE(t.at(part).at("use_regex") == false);
  }
}

TEST_CASE("a checkpoint of text data holds a byte-level tokenizer and null special ids",
          "[checkpoint][tokenizer]") {
  const sdp::testing::TempDir temp;
  write_text(temp / "text.txt", std::string(4000, 'a') + "some text to read as bytes");
  const fs::path dir = train_and_save(one_step("text:" + temp.file("text.txt")), temp / "ck");
  const std::set<std::string> expected = {
      "config.json", "generation_config.json", "model.safetensors", "optimizer.safetensors",
      "sdp_state.json", "tokenizer.json", "tokenizer_config.json"};
  REQUIRE(files_in(dir) == expected);
  const nlohmann::json config = read_json_file(dir / "config.json");
  REQUIRE(config.at("torch_dtype") == "float32");
  REQUIRE_FALSE(config.contains("transformers_version"));
  const nlohmann::json generation = read_json_file(dir / "generation_config.json");
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"}) {
    REQUIRE(config.at(key).is_null());
    REQUIRE(generation.at(key).is_null());
  }
  REQUIRE(read_json_file(dir / "tokenizer.json") == byte_level_tokenizer_json());
  const nlohmann::json tok_config = read_json_file(dir / "tokenizer_config.json");
  REQUIRE(tok_config.at("tokenizer_class") == "PreTrainedTokenizerFast");
  REQUIRE(tok_config.at("model_max_length") == 256);
  REQUIRE_FALSE(tok_config.contains("bos_token"));
}

TEST_CASE("a checkpoint of synthetic data has no tokenizer but null special ids",
          "[checkpoint][tokenizer]") {
  const sdp::testing::TempDir temp;
  const fs::path dir = train_and_save(one_step("synthetic"), temp / "ck");
  REQUIRE_FALSE(fs::exists(dir / "tokenizer.json"));
  REQUIRE_FALSE(fs::exists(dir / "tokenizer_config.json"));
  REQUIRE(read_json_file(dir / "generation_config.json").at("eos_token_id").is_null());
  REQUIRE(read_json_file(dir / "config.json").at("bos_token_id").is_null());
}

TEST_CASE("a checkpoint of prepared llm.c shards copies their tokenizer and its special ids",
          "[checkpoint][tokenizer]") {
  const sdp::testing::TempDir temp;
  const fs::path data = temp / "data";
  fs::create_directories(data);
  std::vector<uint32_t> tokens(3000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint32_t>(i * 7 % 250);
  sdp::testing::write_llmc_shard((data / "x_train_000.bin").string(), tokens);
  sdp::testing::write_llmc_shard((data / "x_val_000.bin").string(), tokens);
  // eos is an added token, bos an ordinary vocabulary entry.
  const std::string tokenizer =
      R"({"version": "1.0", "added_tokens": [{"id": 255, "content": "<|end|>", "special": true}],)"
      R"( "model": {"type": "BPE", "vocab": {"a": 0, "<s>": 254}, "merges": []}})";
  write_text(data / "tok.json", tokenizer);
  write_text(data / "data.json",
             R"({"format": "sdp-llmc-data", "version": 1, "vocab_size": 256, "bos_token_id": 254,)"
             R"( "eos_token_id": 255, "pad_token_id": null, "tokenizer": "tok.json"})");
  const fs::path dir =
      train_and_save(one_step("llmc:" + (data / "x_*.bin").string()), temp / "ck");
  REQUIRE(read_text(dir / "tokenizer.json") == tokenizer);  // byte for byte
  const nlohmann::json tok_config = read_json_file(dir / "tokenizer_config.json");
  REQUIRE(tok_config.at("tokenizer_class") == "PreTrainedTokenizerFast");
  REQUIRE(tok_config.at("bos_token") == "<s>");
  REQUIRE(tok_config.at("eos_token") == "<|end|>");
  REQUIRE_FALSE(tok_config.contains("pad_token"));
  const nlohmann::json config = read_json_file(dir / "config.json");
  const nlohmann::json generation = read_json_file(dir / "generation_config.json");
  for (const auto* j : {&config, &generation}) {
    REQUIRE(j->at("bos_token_id") == 254);
    REQUIRE(j->at("eos_token_id") == 255);
    REQUIRE(j->at("pad_token_id").is_null());
  }
}

TEST_CASE("checkpoints load across stored dtype and token ids; the architecture must match",
          "[checkpoint][tokenizer]") {
  const sdp::testing::TempDir temp;
  TrainConfig f64 = one_step("synthetic");
  f64.dtype = "f64";
  const fs::path dir = train_and_save(f64, temp / "f64");
  REQUIRE(read_json_file(dir / "config.json").at("torch_dtype") == "float64");
  REQUIRE(checkpoint::SafetensorsFile(dir / "model.safetensors")
              .info("model.embed_tokens.weight")
              .dtype == DType::f64);

  // An f32 run of the same model reads the f64 values, rounded.
  Trainer f32(one_step("synthetic"));
  REQUIRE_NOTHROW(f32.load_checkpoint(dir));
  REQUIRE(f32.step() == 1);
  {
    Trainer again(f64);
    again.load_checkpoint(dir);
    const Tensor a = again.training_state().values(0);
    const Tensor b = f32.training_state().values(0);
    REQUIRE(a.dtype() == DType::f64);
    REQUIRE(b.dtype() == DType::f32);
    for (int64_t i = 0; i < a.numel(); i += 97)
      REQUIRE(b.data<float>()[i] == static_cast<float>(a.data<double>()[i]));
  }

  // Other token ids in config.json still load.
  nlohmann::json config = read_json_file(dir / "config.json");
  config["eos_token_id"] = 3;
  checkpoint::write_json_atomically(dir / "config.json", config);
  REQUIRE_NOTHROW(Trainer(f64).load_checkpoint(dir));

  // Another architecture does not, with the model named.
  config["num_hidden_layers"] = 3;
  checkpoint::write_json_atomically(dir / "config.json", config);
  REQUIRE_THROWS_WITH(Trainer(f64).load_checkpoint(dir),
                      Catch::Contains("holds model of type 'llama' that matches no named model") &&
                          Catch::Contains("this run builds tiny"));
}
