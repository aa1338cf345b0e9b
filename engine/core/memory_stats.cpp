#include "engine/core/memory_stats.h"

#include <algorithm>

#include "engine/core/error.h"

namespace sdp {

void MemoryStats::on_alloc(MemCategory c, size_t bytes) {
  const size_t i = idx(c);
  current_[i] += bytes;
  current_total_ += bytes;
  ++alloc_count_;
  peak_[i] = std::max(peak_[i], current_[i]);
  if (current_total_ > peak_total_) {
    peak_total_ = current_total_;
    at_peak_ = current_;
  }
  size_t& pp = phase_peak_[static_cast<size_t>(phase_)];
  pp = std::max(pp, current_total_);
}

void MemoryStats::on_free(MemCategory c, size_t bytes) {
  const size_t i = idx(c);
  SDP_CHECK(current_[i] >= bytes, "freeing ", bytes, " bytes of category ",
            category_name(c), " but only ", current_[i], " are held");
  current_[i] -= bytes;
  current_total_ -= bytes;
}

void MemoryStats::set_phase(Phase p) {
  phase_ = p;
  size_t& pp = phase_peak_[static_cast<size_t>(p)];
  pp = std::max(pp, current_total_);
}

void MemoryStats::reset_peaks() {
  peak_ = current_;
  at_peak_ = current_;
  peak_total_ = current_total_;
  phase_peak_.fill(0);
  phase_peak_[static_cast<size_t>(phase_)] = current_total_;
  peak_reserved_ = reserved_;
}

void MemoryStats::set_reserved(size_t bytes) {
  tracks_reserved_ = true;
  reserved_ = bytes;
  peak_reserved_ = std::max(peak_reserved_, bytes);
}

}  // namespace sdp
