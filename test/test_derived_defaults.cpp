// Config fields whose default follows another field (TrainConfig::
// derive_defaults): min_lr is 0.1 lr, an SDP strategy's C is 0.5, unless
// the field was set; and min_lr above lr is refused saying both.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "engine/parallel/parallel_settings.h"
#include "engine/train/train_config.h"

using namespace sdp;
using Catch::Contains;

TEST_CASE("derived defaults: min_lr follows lr unless it was set", "[config][defaults]") {
  TrainConfig c;
  c.lr = 1e-4;
  c.derive_defaults({"lr"});
  CHECK(c.min_lr == 1e-5);  // as a decimal gives it, not 1.0000000000000001e-05
  c.validate();
  // The default lr keeps the old fixed default.
  TrainConfig d;
  d.derive_defaults({});
  CHECK(d.min_lr == 3e-4);  // exactly: default runs train as before
  TrainConfig f;
  f.lr = 6e-4;
  f.derive_defaults({"lr"});
  CHECK(f.min_lr == 6e-5);
  // A min_lr that was set stays, and above lr it is refused saying the rule.
  TrainConfig e;
  e.lr = 1e-4;
  e.min_lr = 3e-4;
  e.derive_defaults({"lr", "min_lr"});
  CHECK(e.min_lr == 3e-4);
  try {
    e.validate();
    FAIL("min_lr above lr was accepted");
  } catch (const ConfigFieldError& err) {
    CHECK(err.field() == "min_lr");
    CHECK_THAT(err.what(), Contains("min_lr = 0.0003 is invalid (valid: [0, lr = 0.0001]); left "
                                    "unset it is 0.1 lr"));
  }
}

TEST_CASE("derived defaults: an SDP strategy without C trains half the components",
          "[config][defaults]") {
  CHECK(ParallelSettings::default_active_fraction("b-sdp") == 0.5);
  CHECK(ParallelSettings::default_active_fraction("nb-sdp") == 0.5);
  CHECK(ParallelSettings::default_active_fraction("ddp") == 1.0);
  CHECK(ParallelSettings::default_active_fraction("fsdp") == 1.0);
  CHECK(ParallelSettings::default_active_fraction("nosuch") == 1.0);  // validate() refuses it
  TrainConfig c;
  c.parallel.strategy = "n-sdp";
  c.derive_defaults({"strategy"});
  CHECK(c.parallel.active_fraction == 0.5);
  c.validate();
  // A C that was set stays (C = 1 with an SDP strategy is allowed, and DDP).
  TrainConfig given;
  given.parallel.strategy = "b-sdp";
  given.parallel.active_fraction = 1.0;
  given.derive_defaults({"strategy", "active_fraction"});
  CHECK(given.parallel.active_fraction == 1.0);
  TrainConfig ddp;
  ddp.derive_defaults({});
  CHECK(ddp.parallel.active_fraction == 1.0);
  ddp.validate();
}

TEST_CASE("config world: recorded, bounded, 0 = any", "[config][defaults]") {
  TrainConfig c;
  CHECK(c.world == 0);
  c.world = 8;
  CHECK(TrainConfig::from_json(c.to_json()).world == 8);
  c.world = -1;
  CHECK_THROWS_AS(c.validate(), ConfigFieldError);
}
