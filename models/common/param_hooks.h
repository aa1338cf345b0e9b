#pragma once
// Parameter hooks: a model tells a listener (the sharding layer) just before
// a part of it reads its parameters and just after its last read, so the
// parameters can be gathered (and the next ones prefetched) in time and
// freed again. The parts are the model's sites (Model::site_count); the
// exact order of the calls is Model's contract (model.h).
#include <cstdint>
#include <functional>

namespace sdp {

enum class ParamPass : uint8_t { forward, backward };

struct ParamHooks {
  std::function<void(int site, ParamPass pass)> needed, done;

  void call_needed(int site, ParamPass pass) const {
    if (needed) needed(site, pass);
  }
  void call_done(int site, ParamPass pass) const {
    if (done) done(site, pass);
  }
};

}  // namespace sdp
