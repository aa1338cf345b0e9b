// How a failed agreement check shows two ranks' values (comm/value_difference.h).
#include <catch2/catch.hpp>

#include <string>

#include "comm/value_difference.h"

using namespace sdp::comm;

TEST_CASE("value difference: a JSON object names its first differing field", "[comm]") {
  const ValueDifference d = describe_json_difference(R"({"model":"tiny","lr":0.01,"seed":1})",
                                                     R"({"model":"tiny","lr":0.02,"seed":2})");
  CHECK(d.where == "lr");
  CHECK(d.first == "0.01");
  CHECK(d.second == "0.02");
  // Strings keep their quotes; a field only one side has is "(absent)".
  const ValueDifference s =
      describe_json_difference(R"({"data":"synthetic"})", R"({"data":"text:a.txt"})");
  CHECK(s.where == "data");
  CHECK(s.first == "\"synthetic\"");
  CHECK(s.second == "\"text:a.txt\"");
  const ValueDifference missing = describe_json_difference(R"({"lr":1})", R"({"lr":1,"x":2})");
  CHECK(missing.where == "x");
  CHECK(missing.first == "(absent)");
  CHECK(missing.second == "2");
  const ValueDifference gone = describe_json_difference(R"({"lr":1,"x":2})", R"({"lr":1})");
  CHECK(gone.where == "x");
  CHECK(gone.second == "(absent)");
}

TEST_CASE("value difference: text is shown whole when short, around the change when long",
          "[comm]") {
  const ValueDifference d = describe_text_difference("value 0", "value 1");
  CHECK(d.where.empty());
  CHECK(d.first == "'value 0'");
  CHECK(d.second == "'value 1'");
  // Not JSON objects: the text description.
  CHECK(describe_json_difference("[1]", "[2]").first == "'[1]'");
  const std::string common(100, 'a');
  const ValueDifference long_text = describe_text_difference(common + "X" + common, common + "Y");
  CHECK(long_text.where == "from character 100");
  CHECK(long_text.first.find("aX") != std::string::npos);
  CHECK(long_text.first.rfind("'...", 0) == 0);
  CHECK(long_text.second == "'..." + std::string(20, 'a') + "Y'");
}
