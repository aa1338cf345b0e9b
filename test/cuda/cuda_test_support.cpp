#include "test/cuda/cuda_test_support.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <sstream>

#include "kernels/ops.h"

namespace sdp::cuda_testing {

Comparison compare(const std::vector<double>& got, const std::vector<double>& want,
                   double floor) {
  Comparison c;
  if (got.size() != want.size()) {
    c.size_mismatch = true;
    c.error = std::numeric_limits<double>::infinity();
    return c;
  }
  double max_diff = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = got[i], w = want[i];
    if (std::isfinite(w)) c.scale = std::max(c.scale, std::abs(w));
    double diff;
    if (std::isnan(g) || std::isnan(w))
      diff = std::isnan(g) && std::isnan(w) ? 0 : std::numeric_limits<double>::infinity();
    else if (std::isinf(g) || std::isinf(w))
      diff = g == w ? 0 : std::numeric_limits<double>::infinity();
    else
      diff = std::abs(g - w);
    if (c.worst < 0 || diff > max_diff) {
      max_diff = diff;
      c.worst = static_cast<int64_t>(i);
      c.got_at_worst = g;
      c.want_at_worst = w;
    }
  }
  c.error = max_diff == 0 ? 0 : max_diff / std::max(c.scale, floor);
  return c;
}

void expect_close(const std::string& label, const std::vector<double>& got,
                  const std::vector<double>& want, double threshold, double floor) {
  const Comparison c = compare(got, want, floor);
  std::ostringstream message;
  message << label << ": ";
  if (c.size_mismatch)
    message << "cuda gave " << got.size() << " values, the cpu reference " << want.size();
  else
    message << "max |cuda - cpu| / max |cpu| = " << c.error << " (threshold " << threshold
            << "; max |cpu| = " << c.scale << "; worst at element " << c.worst << ": cuda "
            << c.got_at_worst << ", cpu " << c.want_at_worst << ")";
  if (floor > kTiny) message << " (scale at least " << floor << ")";
  const bool ok = c.error <= threshold;
  std::printf("  %s %s\n", ok ? "ok  " : "FAIL", message.str().c_str());
  INFO(message.str());
  CHECK(ok);
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

double round_to(DType dtype, double value) {
  switch (dtype) {
    case DType::f32: return static_cast<float>(value);
    case DType::bf16: return bf16::from_float(static_cast<float>(value)).to_float();
    default: return value;
  }
}

std::vector<double> host_values(const Tensor& host) {
  REQUIRE(host.device() == Device::cpu);
  REQUIRE(host.is_contiguous());
  const size_t n = static_cast<size_t>(host.numel());
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    switch (host.dtype()) {
      case DType::f64: out[i] = host.data<double>()[i]; break;
      case DType::f32: out[i] = host.data<float>()[i]; break;
      case DType::bf16: out[i] = host.data<bf16>()[i].to_float(); break;
      case DType::i32: out[i] = host.data<int32_t>()[i]; break;
      case DType::u16: out[i] = host.data<uint16_t>()[i]; break;
    }
  }
  return out;
}

std::vector<double> values_of(const Tensor& t) {
  if (t.device() == Device::cpu) return host_values(t);
  REQUIRE(t.device() == Device::cuda);
  CpuAllocator cpu;
  OwnedTensor staging(cpu, t.shape(), t.dtype(), MemCategory::workspace);
  ops::transfer(t, *staging);
  return host_values(*staging);
}

Tensor TwinArena::host(Shape shape, DType dtype) {
  return owned_.emplace_back(cpu_, shape, dtype, MemCategory::activation).view;
}

Tensor TwinArena::device(Shape shape, DType dtype) {
  return owned_.emplace_back(gpu_, shape, dtype, MemCategory::activation).view;
}

Twin TwinArena::uniform(Shape shape, DType dtype, uint64_t seed, double lo, double hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(shape.numel()));
  for (double& x : v) x = dist(rng);
  return values(shape, dtype, v);
}

Twin TwinArena::values(Shape shape, DType dtype, const std::vector<double>& v) {
  REQUIRE(static_cast<int64_t>(v.size()) == shape.numel());
  Twin t{host(shape, DType::f64), device(shape, dtype)};
  std::copy(v.begin(), v.end(), t.host.data<double>());
  upload(t.host, t.dev);
  return t;
}

Twin TwinArena::integers(Shape shape, uint64_t seed, int32_t lo, int32_t hi) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> dist(lo, hi - 1);
  Twin t{host(shape, DType::i32), device(shape, DType::i32)};
  for (int64_t i = 0; i < t.host.numel(); ++i) t.host.data<int32_t>()[i] = dist(rng);
  ops::transfer(t.host, t.dev);
  return t;
}

Twin TwinArena::output(Shape shape, DType dtype) {
  Twin t{host(shape, DType::f64), device(shape, dtype)};
  std::fill_n(t.host.data<double>(), t.host.numel(), 0.0);
  poison(t.dev);
  return t;
}

void TwinArena::poison(const Tensor& dev) {
  REQUIRE((dev.dtype() == DType::f32 || dev.dtype() == DType::bf16));
  upload_values(std::vector<double>(static_cast<size_t>(dev.numel()),
                                    std::numeric_limits<double>::quiet_NaN()),
                dev);
}

void TwinArena::upload(const Tensor& host_f64, const Tensor& dev) {
  REQUIRE(host_f64.dtype() == DType::f64);
  REQUIRE(host_f64.shape() == dev.shape());
  double* h = host_f64.data<double>();
  for (int64_t i = 0; i < host_f64.numel(); ++i) h[i] = round_to(dev.dtype(), h[i]);
  upload_values(host_values(host_f64), dev);
}

void TwinArena::upload_values(const std::vector<double>& values, const Tensor& dev) {
  REQUIRE(dev.device() == Device::cuda);
  REQUIRE(static_cast<int64_t>(values.size()) == dev.numel());
  OwnedTensor staging(cpu_, dev.shape(), dev.dtype(), MemCategory::workspace);
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dev.dtype()) {
      case DType::f32: staging->data<float>()[i] = static_cast<float>(values[i]); break;
      case DType::bf16:
        staging->data<bf16>()[i] = bf16::from_float(static_cast<float>(values[i]));
        break;
      case DType::i32: staging->data<int32_t>()[i] = static_cast<int32_t>(values[i]); break;
      default: FAIL("upload: no GPU tensors of dtype " << dtype_name(dev.dtype()));
    }
  }
  Tensor dst = dev;
  ops::transfer(*staging, dst);
}

std::vector<double> TwinArena::download(const Tensor& dev) {
  REQUIRE(dev.device() == Device::cuda);
  return values_of(dev);
}

void TwinArena::expect_close(const std::string& label, const Tensor& dev, const Tensor& host_ref,
                             const Threshold& threshold, double floor) {
  cuda_testing::expect_close(label + " [" + name_of(dev.dtype()) + "]", download(dev),
                             host_values(host_ref), threshold_for(threshold, dev.dtype()), floor);
}

}  // namespace sdp::cuda_testing
