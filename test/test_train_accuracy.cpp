// A classifier's top-k accuracies as the trainer reports them, against
// counts made here from the model's own logits (ranks found by a stable
// sort, ties to the lower class): a Swin's training step (no stochastic
// depth, so the training forward computes the logits evaluation does) and
// its evaluation with top-1 and top-5; a ResNet's evaluation with top-1 only
// (5 classes); a token model's next-token top-1, counted in evaluation only;
// NaN, with the k kept, on meta.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <vector>

#include "engine/train/batch_loader.h"
#include "engine/train/trainer.h"
#include "kernels/ops.h"
#include "models/llama/llama_model.h"
#include "models/resnet/resnet_model.h"
#include "models/swin/swin_model.h"
#include "test/test_support.h"
#include "test/train_config_util.h"

using namespace sdp;
using namespace sdp::testing;

namespace {

// Fills out [rows, classes] (rows: the batch's targets) from the inputs.
using LogitsOf = std::function<void(const Tensor& inputs, Tensor& out)>;

// For each k: the targets of `batches` batches of `loader` (labels, or next
// tokens) among the k largest logits of their row, ranked by a stable sort
// (equal logits keep class order).
std::vector<double> count_correct(BatchLoader& loader, int64_t batches, int64_t classes,
                                  const std::vector<int>& ks, DType dtype,
                                  const LogitsOf& logits_of) {
  std::vector<double> correct(ks.size(), 0.0);
  Arena arena;
  for (int64_t b = 0; b < batches; ++b) {
    loader.next();
    const Tensor& inputs = loader.inputs();
    const int64_t rows = loader.targets().numel();
    Tensor logits = arena.make({rows, classes}, dtype);  // [rows, classes]
    logits_of(inputs, logits);
    for (int64_t i = 0; i < rows; ++i) {
      std::vector<int64_t> order(static_cast<size_t>(classes));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
        return ops::item(logits, i * classes + x) > ops::item(logits, i * classes + y);
      });
      const int32_t label = loader.targets().data<int32_t>()[i];
      const auto at = std::find(order.begin(), order.end(), static_cast<int64_t>(label));
      const int64_t rank = at - order.begin();
      for (size_t k = 0; k < ks.size(); ++k) correct[k] += rank < ks[k] ? 1.0 : 0.0;
    }
  }
  return correct;
}

}  // namespace

TEST_CASE("accuracy: Swin train and eval top-1 and top-5 equal counts from its logits",
          "[trainer][accuracy]") {
  TrainConfig c = micro_swin_run();
  c.data = "synthetic-images:height=16,width=16,classes=10";
  c.dtype = "f64";
  c.drop_path = 0;  // the training forward is the evaluation forward
  c.batch = 8;
  Trainer t(c);
  auto& swin = dynamic_cast<swin::SwinModel&>(t.model());
  const std::vector<int> ks = {1, 5};
  REQUIRE(swin.accuracy_top_k() == ks);
  const LogitsOf logits_of = [&](const Tensor& x, Tensor& out) { swin.logits(x, out); };

  // The first step's batch, from a loader of our own, with the parameters
  // before the step.
  CpuAllocator alloc;
  auto train = make_batch_loader(c, data::Split::train, data::StreamPart{}, alloc, DType::f64);
  const std::vector<double> train_correct = count_correct(*train, 1, 10, ks, DType::f64, logits_of);
  const StepResult r = t.train_step();
  REQUIRE(r.accuracy.k == ks);
  CHECK(r.accuracy.value == std::vector<double>{train_correct[0] / 8, train_correct[1] / 8});
  CHECK(r.rank_accuracy.value == r.accuracy.value);  // a world of one
  CHECK(r.accuracy.value[0] <= r.accuracy.value[1]);

  auto val = make_batch_loader(c, data::Split::val, data::StreamPart{}, alloc, DType::f64);
  const std::vector<double> eval_correct = count_correct(*val, c.eval_batches, 10, ks, DType::f64, logits_of);
  const EvalResult e = t.evaluate_all();
  const double examples = static_cast<double>(c.eval_batches * c.batch);
  REQUIRE(e.full_accuracy.k == ks);
  CHECK(e.full_accuracy.value ==
        std::vector<double>{eval_correct[0] / examples, eval_correct[1] / examples});
  REQUIRE(e.subnet_accuracy.size() == 1);
  CHECK(e.subnet_accuracy[0].value == e.full_accuracy.value);
  // Not vacuous: top-5 of 10 classes finds some labels.
  CHECK(eval_correct[1] > 0);
}

TEST_CASE("accuracy: a ResNet of 5 classes reports eval top-1 only, equal to counts from its logits",
          "[trainer][accuracy]") {
  TrainConfig c = tiny_resnet_run();
  Trainer t(c);
  auto& resnet = dynamic_cast<resnet::ResNetModel&>(t.model());
  REQUIRE(resnet.accuracy_top_k() == std::vector<int>{1});
  for (int s = 0; s < 2; ++s) CHECK(t.train_step().accuracy.k == std::vector<int>{1});
  CpuAllocator alloc;
  auto val = make_batch_loader(c, data::Split::val, data::StreamPart{}, alloc, DType::f32);
  const std::vector<double> correct = count_correct(
      *val, c.eval_batches, 5, {1}, DType::f32,
      [&](const Tensor& x, Tensor& out) { resnet.logits(x, out); });
  const EvalResult e = t.evaluate_all();
  REQUIRE(e.full_accuracy.k == std::vector<int>{1});
  CHECK(e.full_accuracy.value[0] == correct[0] / static_cast<double>(c.eval_batches * c.batch));
}

TEST_CASE("accuracy: a token model reports eval next-token top-1 only, equal to counts from its logits",
          "[trainer][accuracy]") {
  TrainConfig c = tiny_train_config();
  c.dtype = "f64";
  c.eval_batches = 2;
  Trainer t(c);
  auto& llama = dynamic_cast<llama::LlamaModel&>(t.model());
  REQUIRE(llama.accuracy_top_k().empty());
  REQUIRE(llama.evaluation_top_k() == std::vector<int>{1});
  const StepResult r = t.train_step();  // training forwards count none
  CHECK(r.accuracy.empty());
  CHECK(r.rank_accuracy.empty());

  const int64_t vocab = llama.token_vocabulary();
  CpuAllocator alloc;
  auto val = make_batch_loader(c, data::Split::val, data::StreamPart{}, alloc, DType::f64);
  const LogitsOf logits_of = [&](const Tensor& tokens, Tensor& out) {
    // [B, T, V]: the rows of `out` by position.
    Tensor by_position = out.view({tokens.size(0), tokens.size(1), vocab});
    llama.logits(tokens, by_position);
  };
  const std::vector<double> correct =
      count_correct(*val, c.eval_batches, vocab, {1}, DType::f64, logits_of);
  const EvalResult e = t.evaluate_all();
  REQUIRE(e.full_accuracy.k == std::vector<int>{1});
  CHECK(e.full_accuracy.value[0] ==
        correct[0] / static_cast<double>(c.eval_batches * c.batch * c.seq));
  REQUIRE(e.subnet_accuracy.size() == 1);
  CHECK(e.subnet_accuracy[0].value == e.full_accuracy.value);
  // Not vacuous: after a step some next tokens are the most likely ones.
  CHECK(correct[0] > 0);
}

TEST_CASE("accuracy: a dry run keeps the k with NaN values", "[trainer][accuracy]") {
  TrainConfig m = micro_swin_run();
  m.device = "meta";
  Trainer dry(m);
  const StepResult d = dry.train_step();
  REQUIRE(d.accuracy.k == std::vector<int>{1});  // 5 classes
  CHECK(std::isnan(d.accuracy.value[0]));
  CHECK(std::isnan(d.rank_accuracy.value[0]));
}
