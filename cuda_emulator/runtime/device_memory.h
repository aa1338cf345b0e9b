#pragma once
// Device memory of the emulated devices: every cudaMalloc is its own host
// allocation (so AddressSanitizer sees an access past its end), counted
// against the device's capacity (SDP_CUDA_EMULATOR_MEMORY, default 16 GiB)
// so that out-of-memory paths run. A caching allocator built on top may tell
// the emulator which blocks it hands out (note_pool_block): a kernel's
// pointer argument then stands for the rest of that block, not of the whole
// segment, and under ASan the segment's free space is poisoned.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace sdp::emu {

struct DeviceRange {
  uintptr_t begin = 0, end = 0;  // [begin, end)
  int device = 0;
};

// The allocation holding `p` (one past its end counts as inside), if any.
std::optional<DeviceRange> find_allocation(const void* p);
// The innermost block holding `p`: a pool block noted by the caching
// allocator, else the allocation.
std::optional<DeviceRange> find_block(const void* p);

void* allocate_device(int device, size_t bytes);  // nullptr when the device is full
// Returns false when p is not the start of a live allocation.
bool free_device(void* p);
size_t device_capacity(int device);
size_t device_used(int device);

// A caching allocator's block handed out / returned (see the header comment).
void note_pool_block(const void* p, size_t bytes);
void note_pool_free(const void* p);

}  // namespace sdp::emu
