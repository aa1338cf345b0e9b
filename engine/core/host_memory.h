#pragma once
// How much host memory this process may use: the machine's physical memory,
// lowered by the process's address-space and data-segment limits (ulimit -v,
// ulimit -d) where they are set. Sizes that are known before allocating (a
// dense matrix over the ranks) are checked against it, so that a request the
// machine cannot satisfy fails with a message saying what would fit.
#include <cstdint>
#include <string>

namespace sdp {

uint64_t usable_host_memory_bytes();

// "24.0 GiB"
std::string gib_text(double bytes);

}  // namespace sdp
