// Model specs (models/common/model_spec.h, models/registry.h): a named model
// with fields replaced, or a Hugging Face LLaMA config.json, builds, trains,
// checkpoints and exports like a named one; bad specs fail naming what is
// wrong and what is valid.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <functional>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/checkpoint/json_file.h"
#include "engine/core/error.h"
#include "engine/train/checkpoint_dir.h"
#include "engine/train/sharded_export.h"
#include "engine/train/trainer.h"
#include "models/common/model_spec.h"
#include "models/llama/llama_config.h"
#include "models/registry.h"
#include "test/test_temp_dir.h"
#include "test/train_config_util.h"

using namespace sdp;
namespace fs = std::filesystem;

namespace {
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void write_json(const fs::path& path, const nlohmann::json& j) {
  std::ofstream(path) << j.dump(2);
}
}  // namespace

TEST_CASE("model spec: the forms parse and print back in one canonical text", "[model_spec]") {
  const ModelSpec named = ModelSpec::parse("mini");
  CHECK(named.name == "mini");
  CHECK_FALSE(named.custom());
  CHECK(named.text() == "mini");

  const ModelSpec custom = ModelSpec::parse("mini:vocab=1024,layers=8");
  CHECK(custom.name == "mini");
  CHECK(custom.custom());
  CHECK(custom.has("vocab"));
  CHECK_FALSE(custom.has("dim"));
  CHECK(custom.text() == "mini:layers=8,vocab=1024");

  const ModelSpec file = ModelSpec::parse("config:some/dir/config.json");
  CHECK(file.config_path == "some/dir/config.json");
  CHECK(file.custom());
  CHECK(file.text() == "config:some/dir/config.json");

  CHECK(with_model_override("mini", "vocab", "1024") == "mini:vocab=1024");
  CHECK(with_model_override("mini:vocab=300,layers=2", "vocab", "1024") ==
        "mini:layers=2,vocab=1024");
  CHECK_THAT(error_of([] { with_model_override("config:c.json", "vocab", "9"); }),
             Catch::Contains("its config.json states vocab"));

  CHECK_THAT(error_of([] { ModelSpec::parse("mini:layers"); }),
             Catch::Contains("'layers' is not key=value"));
  CHECK_THAT(error_of([] { ModelSpec::parse("mini:layers=2,layers=3"); }),
             Catch::Contains("layers is given twice"));
  CHECK_THAT(error_of([] { ModelSpec::parse(":layers=2"); }), Catch::Contains("names no model"));
  CHECK_THAT(error_of([] { ModelSpec::parse("config:"); }), Catch::Contains("config:PATH"));
}

TEST_CASE("model spec: overrides replace a named model's fields, named models stay as they are",
          "[model_spec]") {
  const llama::LlamaConfig mini = llama::LlamaConfig::named("mini");
  CHECK(make_model("mini")->config_json() == make_model("mini")->config_json());
  CHECK(llama_config("mini").to_hf_json() == mini.to_hf_json());

  const llama::LlamaConfig c = llama_config("mini:vocab=1024,layers=8,tie=true,rope_theta=5e5");
  CHECK(c.vocab == 1024);
  CHECK(c.n_layers == 8);
  CHECK(c.tie_embeddings);
  CHECK(c.rope_theta == 500000.0);
  CHECK(c.dim == mini.dim);
  CHECK(c.name == "mini:layers=8,rope_theta=5e5,tie=true,vocab=1024");
  const auto model = make_model("mini:vocab=1024,layers=8,tie=true,rope_theta=5e5");
  CHECK(model->parameter_count() == c.parameter_count());
  CHECK(model->token_vocabulary() == 1024);
  CHECK(model->block_count() == 8);
  CHECK(model_family("mini:layers=8") == ModelFamily::llama);
  CHECK_THAT(model_summary("mini:layers=8"), Catch::Contains("8 blocks"));
  // A custom model's checkpoint is described by its spec.
  CHECK_THAT(describe_model_config(model->config_json()),
             Catch::StartsWith("mini:layers=8,rope_theta=5e5,tie=true,vocab=1024"));

  const auto resnet = make_model("resnet-tiny:widths=4-8-8-8,blocks=1-1-1-1", {}, {5});
  CHECK(resnet->config_json()["widths"] == nlohmann::json({4, 8, 8, 8}));
  CHECK(resnet->config_json()["blocks"] == nlohmann::json({1, 1, 1, 1}));
  const auto swin = make_model("swin-micro:embed=16,depths=2-1", {}, {5});
  CHECK(swin->config_json()["embed_dim"] == 16);
  CHECK(swin->config_json()["depths"] == nlohmann::json({2, 1}));
  CHECK(required_image_size("swin-micro:img=32") == 32);
}

TEST_CASE("model spec: unknown keys, bad values and invalid combinations are refused",
          "[model_spec]") {
  CHECK_THAT(error_of([] { make_model("mini:layer=8"); }),
             Catch::Contains("unknown key 'layer'") && Catch::Contains("valid: vocab, layers"));
  CHECK_THAT(error_of([] { make_model("mini:layers=0"); }),
             Catch::Contains("layers=0 is invalid (valid: an integer in [1, "));
  CHECK_THAT(error_of([] { make_model("mini:layers=2.5"); }),
             Catch::Contains("layers=2.5 is invalid"));
  CHECK_THAT(error_of([] { make_model("mini:tie=yes"); }),
             Catch::Contains("tie=yes is invalid (valid: true or false)"));
  CHECK_THAT(error_of([] { make_model("mini:heads=5"); }),
             Catch::Contains("model 'mini:heads=5'") && Catch::Contains("divisible by n_heads"));
  CHECK_THAT(error_of([] { make_model("resnet-tiny:widths=4-8"); }),
             Catch::Contains("widths=4-8 has 2 entries (valid: 4"));
  CHECK_THAT(error_of([] { make_model("resnet-tiny:dim=4"); }),
             Catch::Contains("valid: widths, blocks"));
  CHECK_THAT(error_of([] { make_model("swin-micro:depths=2-2-2"); }),
             Catch::Contains("num_heads has 2 entries, depths 3"));
  CHECK_THAT(error_of([] { make_model("nano:layers=2"); }),
             Catch::Contains("unknown model 'nano'") && Catch::Contains("config:PATH"));
  CHECK_THAT(error_of([] { llama_config("resnet-tiny"); }), Catch::Contains("not a LLaMA"));
}

TEST_CASE("model spec: config:PATH reads a Hugging Face LLaMA config.json, nothing else",
          "[model_spec]") {
  const testing::TempDir temp;
  llama::LlamaConfig want = llama::LlamaConfig::named("tiny");
  want.vocab = 300;
  want.n_layers = 1;
  const fs::path path = temp / "config.json";
  nlohmann::json hf = want.to_hf_json();
  hf.erase("sdp_name");  // as transformers writes it
  write_json(path, hf);
  const llama::LlamaConfig got = llama_config("config:" + path.string());
  CHECK(got.to_hf_json() == [&] { auto j = want.to_hf_json(); j["sdp_name"] = "custom"; return j; }());
  CHECK(make_model("config:" + path.string())->token_vocabulary() == 300);

  const fs::path gpt2 = temp / "gpt2.json";
  write_json(gpt2, {{"model_type", "gpt2"}, {"n_embd", 768}, {"vocab_size", 50257}});
  CHECK_THAT(error_of([&] { make_model("config:" + gpt2.string()); }),
             Catch::Contains("model_type \"gpt2\" is not a LLaMA"));
  CHECK_THAT(error_of([&] { make_model("config:" + (temp / "absent.json").string()); }),
             Catch::Contains("cannot open the file"));
  const fs::path broken = temp / "broken.json";
  hf["hidden_act"] = "gelu";
  write_json(broken, hf);
  CHECK_THAT(error_of([&] { make_model("config:" + broken.string()); }),
             Catch::Contains("only \"silu\" is supported"));
}

TEST_CASE("model spec: a run records the spec it built, the data's vocabulary included",
          "[model_spec]") {
  CHECK(resolved_model_spec("mini", 1024) == "mini");  // named models stay as they are
  CHECK(resolved_model_spec("mini:layers=8", 1024) == "mini:layers=8,vocab=1024");
  CHECK(resolved_model_spec("mini:vocab=2048,layers=8", 1024) == "mini:layers=8,vocab=2048");
  CHECK(resolved_model_spec("resnet-tiny:blocks=1-1-1-1", 0) == "resnet-tiny:blocks=1-1-1-1");
  const std::string file = resolved_model_spec("config:rel/config.json", 1024);
  CHECK(fs::path(file.substr(7)).is_absolute());
}

TEST_CASE("model spec: a custom model trains on the data's vocabulary, checkpoints and exports",
          "[model_spec][trainer]") {
  const testing::TempDir temp;
  TrainConfig c = testing::tiny_train_config(2, 16, 2);
  c.data = "synthetic:vocab=300";
  c.model = "tiny";
  CHECK_THAT(error_of([&] { Trainer t(c); }),
             Catch::Contains("has vocabulary 300 but model tiny has only 256") &&
                 Catch::Contains("--model tiny --vocab-size 300"));
  c.model = "tiny:vocab=280";
  CHECK_THAT(error_of([&] { Trainer t(c); }), Catch::Contains("has only 280 embeddings"));

  c.model = "tiny:layers=1";
  c.checkpoint_format = "sharded";
  {
    Trainer t(c);
    CHECK(t.model().token_vocabulary() == 300);
    CHECK(t.model().block_count() == 1);
    for (int i = 0; i < 2; ++i) CHECK(std::isfinite(t.train_step().loss));
    save_and_mark_latest(t, temp / "run");
  }
  const fs::path dir = resolve_checkpoint(temp / "run");
  const nlohmann::json state = checkpoint::read_json_file(state_file_of(dir));
  CHECK(state["train_config"]["model"] == "tiny:layers=1,vocab=300");
  // The exported config.json is a LLaMA that names the same architecture.
  export_sharded_checkpoint(dir, temp / "hf", uint64_t{1} << 30);
  const nlohmann::json exported = checkpoint::read_json_file(temp / "hf" / "config.json");
  const llama::LlamaConfig back = llama::LlamaConfig::from_hf_json(exported);
  CHECK(back.vocab == 300);
  CHECK(back.n_layers == 1);
  CHECK(model_architecture(back.to_hf_json()) ==
        model_architecture(llama_config("tiny:layers=1,vocab=300").to_hf_json()));
  // And trains again from that file, resuming the checkpoint.
  c.model = "config:" + (temp / "hf" / "config.json").string();
  c.checkpoint_format = "hf";
  c.steps = 3;
  Trainer resumed(c);
  resumed.load_checkpoint(dir);
  CHECK(resumed.model().token_vocabulary() == 300);
  CHECK(std::isfinite(resumed.train_step().loss));
}
