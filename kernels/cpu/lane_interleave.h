#pragma once
// Planes <-> channel-interleaved rows, the layout the F(4 x 4) Winograd
// transforms run their vectors across (kLanes channels side by side):
//
//   interleaved[j * 16 + l] = planes[l * stride + j],  l < lanes, j < width
//
// A plain loop over (l, j) compiles to one scalar load and one scalar store
// per element, 64 bytes apart on one side, and was two thirds of the input
// transform's time on the 16-channel 32 x 32 layers (perf, bench_conv).
// Here f32 goes through 8 x 8 register transposes on CPUs with AVX2 (picked
// at run time), the rest (remainder columns and lanes, f64, other CPUs)
// through the plain loop. Both are exact copies, so results do not depend on
// which one ran.
#include <cstdint>

namespace sdp::cpu {

constexpr int64_t kInterleaveLanes = 16;  // = winograd_common::kLanes

// interleaved [width, 16] (lanes past `lanes` untouched) <- `lanes` planes
// of `width` values, `stride` apart.
template <typename T>
void interleave_lanes(const T* planes, int64_t stride, int64_t lanes, int64_t width,
                      T* interleaved);

// planes <- interleaved [width, 16], the first `lanes` lanes; added to the
// planes' values when `accumulate`.
template <typename T>
void deinterleave_lanes(const T* interleaved, int64_t lanes, int64_t width, T* planes,
                        int64_t stride, bool accumulate);

}  // namespace sdp::cpu
