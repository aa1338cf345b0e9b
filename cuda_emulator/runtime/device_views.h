#pragma once
// Extents of the device views whose pointers the host code took since the
// last queued work (Tensor::data notes them in the emulated build). A
// kernel's pointer argument that starts a noted view stands for that view;
// any other stands for the rest of its caching-allocator block.
#include <cstddef>
#include <optional>

namespace sdp::emu {

void note_device_view(const void* data, size_t bytes);
// The largest extent noted for `data`, if any.
std::optional<size_t> noted_view_bytes(const void* data);
// Forgets the notes (each queued piece of work starts afresh).
void clear_device_views();

}  // namespace sdp::emu
