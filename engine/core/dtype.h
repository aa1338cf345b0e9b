#pragma once
// Element types and devices. Kernels are templates over the scalar type; the
// op API dispatches on these runtime tags.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace sdp {

enum class DType : uint8_t { f32, f64, bf16, i32, u16 };
enum class Device : uint8_t { cpu, cuda, meta };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::u16: return 2;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::u16: return "u16";
  }
  return "?";
}

constexpr std::string_view device_name(Device d) {
  switch (d) {
    case Device::cpu: return "cpu";
    case Device::cuda: return "cuda";
    case Device::meta: return "meta";
  }
  return "?";
}

// The dtype that accumulates next to activations of dtype `activation`:
// statistics (RMSNorm's rstd, log-sum-exps, per-token losses), weight
// gradients, master weights and optimizer state. bf16 activations get f32
// (mixed precision); f32 and f64 runs keep their own dtype.
constexpr DType accum_dtype(DType activation) {
  return activation == DType::bf16 ? DType::f32 : activation;
}

// bfloat16 storage: the top 16 bits of an IEEE f32. Conversion rounds to
// nearest even, as hardware bf16 conversion does, and keeps NaNs quiet.
struct bf16 {
  uint16_t bits = 0;

  static bf16 from_float(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    bf16 r;
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      r.bits = static_cast<uint16_t>((u >> 16) | 0x40u);
      return r;
    }
    const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
    r.bits = static_cast<uint16_t>((u + rounding) >> 16);
    return r;
  }
  float to_float() const {
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<bf16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<uint16_t> { static constexpr DType value = DType::u16; };

}  // namespace sdp
