#include "cuda_emulator/runtime/device_memory.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "cuda_emulator/runtime/emulator_config.h"
#include "cuda_emulator/runtime/stream_work.h"

#include "cuda_emulator/runtime/address_sanitizer.h"

namespace sdp::emu {

namespace {

struct Allocation {
  size_t bytes = 0;
  int device = 0;
};

struct Memory {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> allocations;      // by start
  std::map<uintptr_t, uintptr_t> pool_blocks;       // start -> end
  std::vector<size_t> used = std::vector<size_t>(64, 0);
};

Memory& memory() {
  static Memory m;
  return m;
}

// The allocation holding p, with the caller holding the lock.
std::map<uintptr_t, Allocation>::const_iterator holding(const Memory& m, uintptr_t p) {
  auto it = m.allocations.upper_bound(p);
  if (it == m.allocations.begin()) return m.allocations.end();
  --it;
  if (p > it->first + it->second.bytes) return m.allocations.end();
  return it;
}

}  // namespace

std::optional<DeviceRange> find_allocation(const void* p) {
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  auto it = holding(m, reinterpret_cast<uintptr_t>(p));
  if (it == m.allocations.end()) return std::nullopt;
  return DeviceRange{it->first, it->first + it->second.bytes, it->second.device};
}

std::optional<DeviceRange> find_block(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  auto it = holding(m, address);
  if (it == m.allocations.end()) return std::nullopt;
  DeviceRange range{it->first, it->first + it->second.bytes, it->second.device};
  auto block = m.pool_blocks.upper_bound(address);
  if (block != m.pool_blocks.begin()) {
    --block;
    if (address <= block->second && block->first >= range.begin && block->second <= range.end) {
      range.begin = block->first;
      range.end = block->second;
    }
  }
  return range;
}

void* allocate_device(int device, size_t bytes) {
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  // Allocations are rounded to 256 bytes, as cudaMalloc aligns them.
  const size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  if (m.used[static_cast<size_t>(device)] + rounded > config().device_memory_bytes) return nullptr;
  void* p = std::aligned_alloc(256, rounded);
  if (!p) return nullptr;
  // Fresh device memory is not zero on a GPU: all-ones bytes (NaN as floats)
  // make a read of memory nobody wrote visible.
  std::memset(p, 0xff, rounded);
#ifdef SDP_EMU_ASAN
  // The rounding's tail is not the caller's: an access there is reported.
  if (rounded > bytes) ASAN_POISON_MEMORY_REGION(static_cast<char*>(p) + bytes, rounded - bytes);
#endif
  m.allocations[reinterpret_cast<uintptr_t>(p)] = Allocation{bytes, device};
  m.used[static_cast<size_t>(device)] += rounded;
  return p;
}

bool free_device(void* p) {
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  auto it = m.allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == m.allocations.end()) return false;
  const size_t rounded = (std::max<size_t>(it->second.bytes, 1) + 255) / 256 * 256;
  m.used[static_cast<size_t>(it->second.device)] -= rounded;
  const uintptr_t begin = it->first, end = begin + it->second.bytes;
  m.pool_blocks.erase(m.pool_blocks.lower_bound(begin), m.pool_blocks.lower_bound(end + 1));
  m.allocations.erase(it);
#ifdef SDP_EMU_ASAN
  ASAN_UNPOISON_MEMORY_REGION(p, rounded);
#endif
  std::free(p);
  return true;
}

size_t device_capacity(int) { return config().device_memory_bytes; }

size_t device_used(int device) {
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  return m.used[static_cast<size_t>(device)];
}

void note_pool_block(const void* p, size_t bytes) {
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  const auto begin = reinterpret_cast<uintptr_t>(p);
  m.pool_blocks[begin] = begin + bytes;
#ifdef SDP_EMU_ASAN
  ASAN_UNPOISON_MEMORY_REGION(p, bytes);
#endif
}

void note_pool_free(const void* p) {
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  auto it = m.pool_blocks.find(reinterpret_cast<uintptr_t>(p));
  if (it == m.pool_blocks.end()) return;
#ifdef SDP_EMU_ASAN
  // A freed block stays poisoned until the pool hands it out again: a
  // kernel still using a freed tensor is reported with both stacks.
  ASAN_POISON_MEMORY_REGION(p, it->second - it->first);
#endif
  m.pool_blocks.erase(it);
}

}  // namespace sdp::emu
