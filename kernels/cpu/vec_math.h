#pragma once
// Helpers for the CPU kernels' elementwise loops: an exp that vectorizes and
// function multiversioning. Internal to kernels/cpu.
#include <bit>
#include <cmath>
#include <cstdint>

// The default x86-64 target has 128-bit vectors only; the f32 loops that
// matter are also built for AVX2 and AVX-512 and picked at load time (GCC
// function multiversioning). No -march flags needed: the binary still runs on
// any x86-64.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define SDP_MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SDP_MULTIVERSION
#endif

namespace sdp::cpu {

// std::exp is a scalar libm call. For f32: exp(x) = 2^n e^r with
// n = round(x / ln 2), |r| <= ln2 / 2, and a degree-6 Taylor polynomial for
// e^r (relative error ~1e-7, about one ulp). x is clamped to [-87, 88] so
// that 2^n stays a normal, finite number: exp(-87) ~ 1.6e-38 stands for 0 and
// exp(88) ~ 1.7e38 for overflow (callers that divide by 1 + exp(..) get 0 or
// 1 as they should).
[[gnu::always_inline]] inline float exp_fast(float x) {
  // ternaries, not std::max: they map onto vector min/max instructions
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (x * kLog2e + kRound) - kRound;
  float r = x - n * 0.693145751953125f;  // ln 2, high part (exact in f32)
  r = r - n * 1.428606765330187e-06f;    // ln 2, low part
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

// f64 kernels are the reference path (gradient checks): they keep libm's exp,
// under the same name so templates over T call one function.
inline double exp_fast(double x) { return std::exp(x); }

}  // namespace sdp::cpu
