#include "engine/core/host_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace sdp {

uint64_t usable_host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  uint64_t usable = pages > 0 && page_size > 0
                        ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size)
                        : UINT64_MAX;
  for (const int resource : {RLIMIT_AS, RLIMIT_DATA}) {
    rlimit limit{};
    if (getrlimit(resource, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
      usable = std::min<uint64_t>(usable, static_cast<uint64_t>(limit.rlim_cur));
  }
  return usable;
}

std::string gib_text(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return text;
}

}  // namespace sdp
