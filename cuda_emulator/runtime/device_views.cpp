#include "cuda_emulator/runtime/device_views.h"

#include <algorithm>
#include <unordered_map>

namespace sdp::emu {

namespace {
// A handful of entries between two launches: the views of one op's tensors.
thread_local std::unordered_map<const void*, size_t> views;
}  // namespace

void note_device_view(const void* data, size_t bytes) {
  if (views.size() > 4096) views.clear();  // notes nobody launched with
  size_t& noted = views[data];
  noted = std::max(noted, bytes);
}

std::optional<size_t> noted_view_bytes(const void* data) {
  auto it = views.find(data);
  if (it == views.end()) return std::nullopt;
  return it->second;
}

void clear_device_views() { views.clear(); }

}  // namespace sdp::emu
