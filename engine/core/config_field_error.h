#pragma once
// An invalid value of one config field; field() names it (the JSON key), so
// that a front end can say where the value came from (a flag, a config file).
#include <string>
#include <utility>

#include "engine/core/error.h"

namespace sdp {

// A permanent error: the same configuration fails the same way on a restart.
class ConfigFieldError : public PermanentError {
 public:
  ConfigFieldError(std::string field, const std::string& message)
      : PermanentError(message), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

}  // namespace sdp
