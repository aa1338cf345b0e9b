#include "apps/sdp-train/fault_hook.h"

#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <sstream>

#include "engine/core/error.h"

namespace sdp::app {

namespace {
constexpr const char* kVariable = "SDP_TEST_KILL";

[[noreturn]] void bad(const std::string& value, const std::string& why) {
  fail(kVariable, "='", value, "' is invalid: ", why,
       " (valid: rank=R,step=S[,once=FILE] with integers R >= 0, S >= 1)");
}

int64_t parse_int(const std::string& value, const std::string& field, const std::string& text) {
  size_t used = 0;
  int64_t v = -1;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) bad(value, field + " '" + text + "' is not an integer");
  return v;
}
}  // namespace

FaultHook FaultHook::from_environment() {
  FaultHook hook;
  const char* env = std::getenv(kVariable);
  if (!env || !*env) return hook;
  const std::string value = env;
  std::stringstream fields(value);
  std::string field;
  while (std::getline(fields, field, ',')) {
    const size_t eq = field.find('=');
    if (eq == std::string::npos) bad(value, "'" + field + "' is not key=value");
    const std::string key = field.substr(0, eq), text = field.substr(eq + 1);
    if (key == "rank")
      hook.rank_ = static_cast<int>(parse_int(value, key, text));
    else if (key == "step")
      hook.step_ = parse_int(value, key, text);
    else if (key == "once")
      hook.once_file_ = text;
    else
      bad(value, "unknown key '" + key + "'");
  }
  if (hook.rank_ < 0) bad(value, "rank is missing or negative");
  if (hook.step_ < 1) bad(value, "step is missing or below 1");
  return hook;
}

void FaultHook::after_step(int64_t step, int rank) const {
  if (step != step_ || rank != rank_) return;
  if (!once_file_.empty()) {
    // O_EXCL: of all attempts, only the one that creates the file fires.
    const int fd = ::open(once_file_.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) return;
    ::close(fd);
  }
  std::raise(SIGKILL);
}

}  // namespace sdp::app
