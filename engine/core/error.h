#pragma once
// Error reporting used at every API boundary: exceptions carry a message that
// names what was wrong and, where it helps, what would have been valid.
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <string>

namespace sdp {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An error every rank of a job throws with the same text at the same point
// (a failed agreement check, an impossible plan): rank 0 alone reports it and
// the ranks end together, rather than each printing and aborting the others.
class CollectiveError : public Error {
 public:
  using Error::Error;
  // permanent: also an error that a restart cannot cure (PermanentError
  // below), such as a save directory that another job holds.
  CollectiveError(const std::string& message, bool permanent)
      : Error(message), permanent_(permanent) {}
  bool permanent() const { return permanent_; }

 private:
  bool permanent_ = false;
};

// An error that running the job again cannot cure: a configuration or flag
// out of range, a save directory that cannot be written, a full disk, a
// corrupted checkpoint. sdp-train exits with kExitPermanentError for it, and
// scripts/sdp-run, which restarts jobs that failed, does not retry that code.
class PermanentError : public Error {
 public:
  using Error::Error;
};
inline constexpr int kExitPermanentError = 3;

namespace detail {
inline void append(std::ostringstream&) {}
template <typename T, typename... Rest>
void append(std::ostringstream& os, const T& first, const Rest&... rest) {
  os << first;
  append(os, rest...);
}
}  // namespace detail

// Builds a message from any streamable pieces: sdp::format("dim ", d, " > ", n).
template <typename... Parts>
std::string format(const Parts&... parts) {
  std::ostringstream os;
  detail::append(os, parts...);
  return os.str();
}

// v with exactly `decimals` digits after the point: format_fixed(0.1234, 2) = "0.12".
inline std::string format_fixed(double v, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, v);
  return text;
}

template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  throw Error(format(parts...));
}

}  // namespace sdp

// SDP_CHECK(cond, "message", value, ...) throws sdp::Error naming the failed
// condition and its location; used for programming errors and bad input alike.
#define SDP_CHECK(cond, ...)                                                   \
  do {                                                                         \
    if (!(cond))                                                               \
      ::sdp::fail(__FILE__, ":", __LINE__, ": ", ::sdp::format(__VA_ARGS__),   \
                  " [check failed: " #cond "]");                               \
  } while (0)
