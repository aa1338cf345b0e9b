// A step whose loss or gradient norm is not finite stops the run with the
// step and what to try, or, within config.skip_nonfinite, is skipped: no
// update reaches the weights or the AdamW moments.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/train/trainer.h"
#include "test/train_config_util.h"

using namespace sdp;

namespace {

TrainConfig tiny_run() { return testing::tiny_train_config(); }

std::vector<float> copy_of(const Tensor& t) {
  const float* p = t.data<float>();
  return std::vector<float>(p, p + t.numel());
}

void fill(const Tensor& t, float value) {
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = value;
}

// The embedding (parameter 0) poisoned with `value`; its saved values.
std::vector<float> poison(Trainer& t, float value) {
  const Tensor embedding = t.training_state().values(0);
  std::vector<float> saved = copy_of(embedding);
  fill(embedding, value);
  return saved;
}

}  // namespace

TEST_CASE("non-finite steps: the first one stops the run, naming the step and what to try",
          "[trainer][nonfinite]") {
  Trainer t(tiny_run());
  t.train_step();
  poison(t, std::numeric_limits<float>::quiet_NaN());
  const TrainingState& p = t.training_state();
  const int last = p.params().count() - 1;
  const std::vector<float> before = copy_of(p.values(last));
  try {
    t.train_step();
    FAIL("a NaN loss was trained on");
  } catch (const CollectiveError& e) {
    const std::string m = e.what();
    CHECK_THAT(m, Catch::Contains("step 2: the loss is nan and the gradient norm is nan (not "
                                  "finite); training stopped before applying this update"));
    CHECK_THAT(m, Catch::Contains("Try a lower --lr (now 0.003), gradient clipping "
                                  "(--grad-clip, now 1), or check the data; --skip-nonfinite N "
                                  "skips up to N such steps"));
  }
  CHECK(copy_of(p.values(last)) == before);
  CHECK(t.step() == 1);
}

TEST_CASE("non-finite steps: --skip-nonfinite skips up to N, applying no update",
          "[trainer][nonfinite]") {
  TrainConfig c = tiny_run();
  c.skip_nonfinite = 2;
  Trainer t(c);
  const TrainingState& p = t.training_state();
  const int last = p.params().count() - 1;
  t.train_step();
  const std::vector<float> saved = poison(t, std::numeric_limits<float>::infinity());
  const std::vector<float> weights = copy_of(p.values(last));
  const std::vector<float> moment = copy_of(p.adam_m(last));
  const StepResult skipped = t.train_step();
  CHECK(skipped.skipped);
  CHECK(skipped.skipped_steps == 1);
  CHECK_FALSE(std::isfinite(skipped.loss));
  CHECK(skipped.step == 2);
  CHECK(copy_of(p.values(last)) == weights);
  CHECK(copy_of(p.adam_m(last)) == moment);
  // Healthy weights again: the run goes on and updates.
  std::copy(saved.begin(), saved.end(), p.values(0).data<float>());
  const StepResult healthy = t.train_step();
  CHECK_FALSE(healthy.skipped);
  CHECK(healthy.skipped_steps == 1);
  CHECK(std::isfinite(healthy.loss));
  CHECK(copy_of(p.values(last)) != weights);
  // A second skip is allowed, a third is not.
  poison(t, std::numeric_limits<float>::quiet_NaN());
  CHECK(t.train_step().skipped_steps == 2);
  REQUIRE_THROWS_WITH(t.train_step(),
                      Catch::Contains("step 5: the loss is nan") &&
                          Catch::Contains("(2 such steps skipped already, --skip-nonfinite 2)"));
  CHECK(t.skipped_steps() == 2);
}
