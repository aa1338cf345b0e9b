#pragma once
// The limits the emulated device enforces and reports: those of an H200
// (sm_90). A launch beyond them fails as it would there.
#include <cstddef>

namespace sdp::emu::limits {

inline constexpr int kMaxThreadsPerBlock = 1024;
inline constexpr int kMultiprocessors = 132;
// Dynamic shared memory a kernel may use without opting in, and the most it
// may opt in to with cudaFuncAttributeMaxDynamicSharedMemorySize (227 KiB).
inline constexpr int kDefaultDynamicShared = 48 * 1024;
inline constexpr int kMaxDynamicSharedOptIn = 232448;

}  // namespace sdp::emu::limits
