// The data spec factory: bad specs list the valid forms.
#include <catch2/catch.hpp>

#include "engine/core/error.h"
#include "engine/data/token_source.h"

using sdp::data::make_token_source;

TEST_CASE("data factory: bad specs list the valid forms", "[data]") {
  for (const char* spec : {"", "bogus", "bogus:x", "Synthetic", "text", "llmc:", "llmc:vocab=5"}) {
    INFO(spec);
    REQUIRE_THROWS_AS(make_token_source(spec, 0), sdp::Error);
    REQUIRE_THROWS_WITH(make_token_source(spec, 0),
                        Catch::Contains("synthetic") && Catch::Contains("text:PATH") &&
                            Catch::Contains("llmc:GLOB_OR_PATH"));
  }
  REQUIRE_THROWS_WITH(make_token_source("llmc:a.bin,vocab=-3", 0), Catch::Contains("vocab='-3'"));
  REQUIRE(make_token_source("synthetic:vocab=32", 0)->vocab_size() == 32);
}
