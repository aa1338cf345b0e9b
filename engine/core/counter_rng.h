#pragma once
// Counter-based random numbers: the value at (key, index) depends on nothing
// else, so initialization does not depend on memory layout, thread count or
// which rank owns a parameter (every owner of a component draws the same
// values), and resuming needs no saved generator state.
#include <cmath>
#include <cstdint>
#include <string_view>

namespace sdp {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// FNV-1a: a stable hash of a name, used to key per-tensor streams.
inline uint64_t stable_hash(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

// Uniform in (0, 1), never exactly 0 (safe for log).
inline double counter_uniform(uint64_t key, uint64_t index) {
  const uint64_t bits = splitmix64(key ^ splitmix64(index));
  return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
}

// Standard normal by Box-Muller on two counter-based uniforms.
inline double counter_normal(uint64_t key, uint64_t index) {
  const double u1 = counter_uniform(key, 2 * index);
  const double u2 = counter_uniform(key, 2 * index + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace sdp
