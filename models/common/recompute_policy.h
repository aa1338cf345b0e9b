#pragma once
// Activation checkpointing: which blocks of a model's trunk keep only their
// input during forward and run their forward again just before their
// backward (trading about one more forward of those blocks for their saved
// activations).
//   none      every block keeps what its backward needs
//   block     every block is checkpointed
//   every:K   blocks whose model index is a multiple of K (0, K, 2K, ...)
// Block indices are the model's (not the rank's), so every rank of a job
// checkpoints the same blocks of those it runs.
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/core/error.h"

namespace sdp {

struct RecomputePolicy {
  int64_t every = 0;  // 0: none; 1: every block; K: every K-th block

  bool enabled() const { return every > 0; }
  bool checkpoints(int block) const { return every > 0 && block % every == 0; }
  std::string name() const {
    return every == 0 ? "none" : every == 1 ? "block" : "every:" + std::to_string(every);
  }
  // Throws sdp::Error naming `what` (e.g. "--activation-checkpointing") and
  // the valid forms.
  static RecomputePolicy parse(std::string_view text, std::string_view what) {
    RecomputePolicy p;
    if (text == "none") return p;
    if (text == "block") {
      p.every = 1;
      return p;
    }
    constexpr std::string_view prefix = "every:";
    if (text.substr(0, prefix.size()) == prefix) {
      const std::string_view k = text.substr(prefix.size());
      int64_t v = 0;
      bool ok = !k.empty() && k.size() <= 9;
      for (char ch : k) ok = ok && ch >= '0' && ch <= '9';
      if (ok)
        for (char ch : k) v = v * 10 + (ch - '0');
      if (ok && v >= 1) {
        p.every = v;
        return p;
      }
    }
    fail(what, " = '", text, "' is invalid (valid: none, block, every:K with K a positive integer)");
  }
};

}  // namespace sdp
