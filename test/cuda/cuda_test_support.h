#pragma once
// Shared by the CUDA tests. Every tensor of an op test lives twice: on the
// GPU in the dtype under test, and on the host in f64 as the CPU reference's
// copy, both holding exactly the same values (inputs are rounded to the GPU
// dtype before either side sees them). The CPU op then runs in f64, so the
// error measured against it is the GPU's own, and each comparison reports
//   max |cuda - cpu| / max(max |cpu|, tiny)
// against the thresholds of the table below.
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "engine/core/allocator.h"
#include "engine/core/tensor.h"
#include "kernels/cuda/device_allocator.h"

namespace sdp::cuda_testing {

// ---- thresholds --------------------------------------------------------------
// By the kind of computation, and by the dtype of the output compared (an f32
// statistic or weight gradient next to bf16 activations is computed in f32
// from exact bf16 inputs, so it is held to the f32 column). For scale: the
// CPU's own f32 kernels, run through these tests against the same f64
// reference, err by at most 6e-7 (SwiGLU backward), 5e-7 (GEMMs, K = 1024)
// and 9e-7 (attention backward, Dh = 128).
struct Threshold {
  double f32;
  double bf16;
};

// Elementwise maps with no sum behind them (add, scale, SwiGLU, RoPE, the
// AdamW update): a few f32 roundings per element (6e-8 each) plus fast
// intrinsics such as __expf (2 ulp); 1e-5 leaves a hundredfold margin.
// bf16: the output's own rounding is up to 2^-9 = 2e-3 of the element; 1e-2
// also allows a few bf16 intermediates.
inline constexpr Threshold kElementwise{1e-5, 1e-2};
// Everything with a sum behind it: sums, norms, RMSNorm (a row's mean
// square), cross-entropy (a row's log-sum-exp), scatter-adds, GEMMs with K up
// to 1024. An f32 accumulation of K terms errs by ~sqrt(K) * 6e-8 of the
// terms' scale, 2e-6 at K = 1024, whatever the order; 1e-4 still fails TF32
// (10-bit mantissa, ~1e-3), which f32 mode must not use. bf16 as above.
inline constexpr Threshold kReduction{1e-4, 1e-2};
// Attention: T-term sums and the online softmax's rescaling in f32: as a
// reduction. bf16: the probabilities (and in backward dS) are rounded to
// bf16 for the tensor-core products on top of the output's rounding, and dK,
// dV sum them over every query of the group: 2e-2.
inline constexpr Threshold kAttention{1e-4, 2e-2};
// fill, copy, transfer, convert move or round values: exact.
inline constexpr Threshold kExact{0, 0};

inline double threshold_for(const Threshold& t, DType output) {
  return output == DType::bf16 ? t.bf16 : t.f32;
}

// The activation dtypes every op test runs in.
inline constexpr DType kGpuDtypes[] = {DType::f32, DType::bf16};

// ---- error metric ----------------------------------------------------------
struct Comparison {
  // max |got - want| / max(max |want|, floor); infinite on a non-finite mismatch
  double error = 0;
  double scale = 0;    // max |want|
  int64_t worst = -1;  // the element of the largest difference
  double got_at_worst = 0, want_at_worst = 0;
  bool size_mismatch = false;
};

inline constexpr double kTiny = 1e-30;

// NaN against NaN and an infinity against the same infinity count as equal;
// any other non-finite value makes the error infinite. `floor` bounds the
// scale from below: an output that is zero up to roundoff (a gradient that
// cancels exactly) is measured against the scale its terms have instead.
Comparison compare(const std::vector<double>& got, const std::vector<double>& want,
                   double floor = kTiny);

// CHECKs the comparison against `threshold`, the failure message giving the
// measured error, the worst element and both values there; every comparison
// is also printed (the first GPU run's errors size the thresholds).
void expect_close(const std::string& label, const std::vector<double>& got,
                  const std::vector<double>& want, double threshold, double floor = kTiny);

// max |v|
double max_abs(const std::vector<double>& v);

// f64 `value` rounded to `dtype` (f32: round to nearest; bf16: to f32, then
// to nearest even as sdp::bf16 does; f64 and i32 unchanged).
double round_to(DType dtype, double value);

// Values of a contiguous host tensor (f64, f32, bf16 or i32) as doubles.
std::vector<double> host_values(const Tensor& host);

// Values of any contiguous tensor, copied to the host first when it lives
// on the GPU.
std::vector<double> values_of(const Tensor& t);

// ---- tensors in pairs --------------------------------------------------------
// One logical tensor: `host` is f64 (or i32) on the CPU, `dev` on the GPU
// in the dtype under test.
struct Twin {
  Tensor host;
  Tensor dev;
};

// Owns every tensor of a test: GPU ones on its own cuda::DeviceAllocator,
// host ones on a CPU allocator.
class TwinArena {
 public:
  TwinArena() = default;
  TwinArena(const TwinArena&) = delete;
  TwinArena& operator=(const TwinArena&) = delete;

  Tensor host(Shape shape, DType dtype = DType::f64);
  Tensor device(Shape shape, DType dtype);

  // An input with values uniform in [lo, hi), seeded, rounded to `dtype`.
  Twin uniform(Shape shape, DType dtype, uint64_t seed, double lo, double hi);
  // An input with the given values (row-major), rounded to `dtype`.
  Twin values(Shape shape, DType dtype, const std::vector<double>& values);
  // An i32 input with integers uniform in [lo, hi).
  Twin integers(Shape shape, uint64_t seed, int32_t lo, int32_t hi);
  // An output the op overwrites: NaN on the GPU (an element it leaves
  // unwritten then fails the comparison), zeros on the host.
  Twin output(Shape shape, DType dtype);
  // The f64 host tensor's values, rounded to the dtype of `dev`, become
  // `dev`'s (through a host staging tensor and ops::transfer) and are
  // written back rounded into `host`, so both sides hold the same values.
  void upload(const Tensor& host, const Tensor& dev);
  // Fills a GPU tensor of floats with NaN (scratch a kernel must not read
  // before writing it).
  void poison(const Tensor& dev);
  // A contiguous GPU tensor's values.
  std::vector<double> download(const Tensor& dev);

  // The GPU result against the CPU reference, threshold by the GPU dtype.
  void expect_close(const std::string& label, const Tensor& dev, const Tensor& host_ref,
                    const Threshold& threshold, double floor = kTiny);

  cuda::DeviceAllocator& gpu_allocator() { return gpu_; }

 private:
  void upload_values(const std::vector<double>& values, const Tensor& dev);

  cuda::DeviceAllocator gpu_;  // declared before the tensors: destroyed after them
  CpuAllocator cpu_;
  std::deque<OwnedTensor> owned_;
};

// "bf16", "f32": test labels.
inline std::string name_of(DType dtype) { return std::string(dtype_name(dtype)); }

}  // namespace sdp::cuda_testing
