// The emulated cuDNN (cuda_emulator/cudnn) against a direct-loop reference
// in double: forward, backward data and backward filter, called through the C
// API as kernels/cuda/conv2d.cpp calls it, for the ResNet geometries, odd
// sizes, f32 and bf16, beta 0 and 1; then the refusals, each with its status.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cuda_emulator/runtime/stream_work.h"

namespace {

// ---- problem geometry --------------------------------------------------------

// x [n, c, h, w], w [k, c, r, s], y [n, k, out_h(), out_w()].
struct Geometry {
  const char* name = "";
  int n = 1, c = 1, h = 1, w = 1, k = 1, r = 1, s = 1;
  int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;

  int out_h() const { return (h + 2 * pad_h - dilation_h * (r - 1) - 1) / stride_h + 1; }
  int out_w() const { return (w + 2 * pad_w - dilation_w * (s - 1) - 1) / stride_w + 1; }
  size_t x_count() const { return size_t(n) * c * h * w; }
  size_t w_count() const { return size_t(k) * c * r * s; }
  size_t y_count() const { return size_t(n) * k * out_h() * out_w(); }
};

const Geometry kGeometries[] = {
    {"3x3 stride 1 pad 1", 2, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1},
    {"3x3 stride 2 pad 1", 2, 3, 9, 8, 5, 3, 3, 1, 1, 2, 2, 1, 1},
    {"1x1 stride 2 (ResNet shortcut)", 2, 4, 7, 8, 6, 1, 1, 0, 0, 2, 2, 1, 1},
    {"7x7 stride 2 pad 3 (ResNet stem)", 2, 3, 19, 17, 4, 7, 7, 3, 3, 2, 2, 1, 1},
    {"odd sizes, 3x5 filter, asymmetric pad and stride", 3, 5, 11, 13, 3, 3, 5, 2, 1, 3, 2, 1, 1},
    {"3x3 dilation 2 pad 2, batch 1", 1, 2, 9, 10, 3, 3, 3, 2, 2, 1, 1, 2, 2},
};

enum class Pass { forward, backward_data, backward_filter };

const char* pass_name(Pass pass) {
  switch (pass) {
    case Pass::forward:
      return "forward";
    case Pass::backward_data:
      return "backward data";
    case Pass::backward_filter:
      return "backward filter";
  }
  return "?";
}

const char* type_name(cudnnDataType_t type) { return type == CUDNN_DATA_BFLOAT16 ? "bf16" : "f32"; }

// ---- host values and their device storage --------------------------------------

// Random values exactly representable in the storage type, as doubles: for
// bf16 multiples of 1/64 in [-2, 2] (8 significant bits), for f32 any float
// in [-1, 1].
std::vector<double> random_values(size_t count, cudnnDataType_t type, std::mt19937& rng) {
  std::vector<double> v(count);
  std::uniform_int_distribution<int> steps(-128, 128);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  for (double& e : v)
    e = type == CUDNN_DATA_BFLOAT16 ? steps(rng) / 64.0 : static_cast<double>(real(rng));
  return v;
}

size_t element_size(cudnnDataType_t type) { return type == CUDNN_DATA_BFLOAT16 ? 2 : 4; }

std::vector<unsigned char> to_storage(const std::vector<double>& v, cudnnDataType_t type) {
  std::vector<unsigned char> bytes(v.size() * element_size(type));
  for (size_t i = 0; i < v.size(); ++i) {
    if (type == CUDNN_DATA_BFLOAT16) {
      const __nv_bfloat16 b = __float2bfloat16_rn(static_cast<float>(v[i]));
      std::memcpy(bytes.data() + 2 * i, &b, 2);
    } else {
      const float f = static_cast<float>(v[i]);
      std::memcpy(bytes.data() + 4 * i, &f, 4);
    }
  }
  return bytes;
}

std::vector<double> from_storage(const std::vector<unsigned char>& bytes, cudnnDataType_t type) {
  std::vector<double> v(bytes.size() / element_size(type));
  for (size_t i = 0; i < v.size(); ++i) {
    if (type == CUDNN_DATA_BFLOAT16) {
      __nv_bfloat16 b;
      std::memcpy(&b, bytes.data() + 2 * i, 2);
      v[i] = __bfloat162float(b);
    } else {
      float f;
      std::memcpy(&f, bytes.data() + 4 * i, 4);
      v[i] = f;
    }
  }
  return v;
}

// ---- RAII for the CUDA and cuDNN objects a test makes ---------------------------

class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes > 0) REQUIRE(cudaMalloc(&ptr_, bytes) == cudaSuccess);
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  void upload(const std::vector<unsigned char>& host) const {
    REQUIRE(host.size() == bytes_);
    REQUIRE(cudaMemcpy(ptr_, host.data(), bytes_, cudaMemcpyHostToDevice) == cudaSuccess);
  }
  std::vector<unsigned char> download() const {
    std::vector<unsigned char> host(bytes_);
    REQUIRE(cudaMemcpy(host.data(), ptr_, bytes_, cudaMemcpyDeviceToHost) == cudaSuccess);
    return host;
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

struct Handle {
  cudnnHandle_t h = nullptr;
  Handle() { REQUIRE(cudnnCreate(&h) == CUDNN_STATUS_SUCCESS); }
  ~Handle() { cudnnDestroy(h); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

// The four descriptors of one problem, set exactly as conv2d.cpp sets them:
// NCHW tensors, an NCHW (KCRS) filter, cross-correlation computed in f32,
// FMA math for f32 data and tensor-op math for bf16.
struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;

  Descriptors(const Geometry& g, cudnnDataType_t type) {
    REQUIRE(cudnnCreateTensorDescriptor(&x) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnCreateTensorDescriptor(&y) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnCreateFilterDescriptor(&w) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnCreateConvolutionDescriptor(&conv) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, type, g.n, g.c, g.h, g.w) ==
            CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, type, g.n, g.k, g.out_h(),
                                       g.out_w()) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnSetFilter4dDescriptor(w, type, CUDNN_TENSOR_NCHW, g.k, g.c, g.r, g.s) ==
            CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnSetConvolution2dDescriptor(conv, g.pad_h, g.pad_w, g.stride_h, g.stride_w,
                                            g.dilation_h, g.dilation_w, CUDNN_CROSS_CORRELATION,
                                            CUDNN_DATA_FLOAT) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnSetConvolutionMathType(
                conv, type == CUDNN_DATA_BFLOAT16 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH) ==
            CUDNN_STATUS_SUCCESS);
  }
  ~Descriptors() { release(); }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;

  // Destroys them now (the calls must have copied what they need).
  void release() {
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyConvolutionDescriptor(conv);
    x = y = nullptr;
    w = nullptr;
    conv = nullptr;
  }
};

// ---- the reference ----------------------------------------------------------------

// The three passes as direct loops in double over every (output, tap) pair,
// with the sum of |terms| of each result element (for the tolerance).
struct Reference {
  std::vector<double> value, magnitude;
};

template <typename Visit>
void for_each_tap(const Geometry& g, Visit visit) {
  for (int n = 0; n < g.n; ++n)
    for (int k = 0; k < g.k; ++k)
      for (int oh = 0; oh < g.out_h(); ++oh)
        for (int ow = 0; ow < g.out_w(); ++ow)
          for (int c = 0; c < g.c; ++c)
            for (int r = 0; r < g.r; ++r)
              for (int s = 0; s < g.s; ++s) {
                const int ih = oh * g.stride_h - g.pad_h + r * g.dilation_h;
                const int iw = ow * g.stride_w - g.pad_w + s * g.dilation_w;
                if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                const size_t xi = ((size_t(n) * g.c + c) * g.h + ih) * g.w + iw;
                const size_t wi = ((size_t(k) * g.c + c) * g.r + r) * g.s + s;
                const size_t yi = ((size_t(n) * g.k + k) * g.out_h() + oh) * g.out_w() + ow;
                visit(xi, wi, yi);
              }
}

// y = x (*) w
Reference reference_forward(const Geometry& g, const std::vector<double>& x,
                            const std::vector<double>& w) {
  Reference ref{std::vector<double>(g.y_count()), std::vector<double>(g.y_count())};
  for_each_tap(g, [&](size_t xi, size_t wi, size_t yi) {
    ref.value[yi] += x[xi] * w[wi];
    ref.magnitude[yi] += std::fabs(x[xi] * w[wi]);
  });
  return ref;
}

// dx[xi] = sum over the taps that read x[xi] of w * dy
Reference reference_backward_data(const Geometry& g, const std::vector<double>& w,
                                  const std::vector<double>& dy) {
  Reference ref{std::vector<double>(g.x_count()), std::vector<double>(g.x_count())};
  for_each_tap(g, [&](size_t xi, size_t wi, size_t yi) {
    ref.value[xi] += w[wi] * dy[yi];
    ref.magnitude[xi] += std::fabs(w[wi] * dy[yi]);
  });
  return ref;
}

// dw[wi] = sum over the taps that use w[wi] of x * dy
Reference reference_backward_filter(const Geometry& g, const std::vector<double>& x,
                                    const std::vector<double>& dy) {
  Reference ref{std::vector<double>(g.w_count()), std::vector<double>(g.w_count())};
  for_each_tap(g, [&](size_t xi, size_t wi, size_t yi) {
    ref.value[wi] += x[xi] * dy[yi];
    ref.magnitude[wi] += std::fabs(x[xi] * dy[yi]);
  });
  return ref;
}

// Elements of `got` farther from alpha * ref + beta * before than f32
// summation (1e-5 of the terms' magnitude) plus, for bf16, one rounding of
// the result (half an ulp: 2^-8 of it) allow. Describes the first few.
size_t count_mismatches(const std::vector<double>& got, const Reference& ref,
                        const std::vector<double>& before, float alpha, float beta,
                        cudnnDataType_t type, std::string& report) {
  REQUIRE(got.size() == ref.value.size());
  size_t bad = 0;
  std::ostringstream s;
  for (size_t i = 0; i < got.size(); ++i) {
    const double want = alpha * ref.value[i] + (beta != 0.0f ? beta * before[i] : 0.0);
    const double magnitude =
        std::fabs(alpha) * ref.magnitude[i] + (beta != 0.0f ? std::fabs(beta * before[i]) : 0.0);
    double tolerance = 2e-5 * magnitude + 1e-30;
    if (type == CUDNN_DATA_BFLOAT16) tolerance += std::ldexp(std::fabs(want), -8);
    if (!(std::fabs(got[i] - want) <= tolerance)) {  // NaN fails too
      if (bad < 5)
        s << " [" << i << "] got " << got[i] << " want " << want << " (tolerance " << tolerance
          << ");";
      ++bad;
    }
  }
  report = s.str();
  return bad;
}

// ---- one pass through the C API -----------------------------------------------------

// The algorithms the _v7 query reports usable, with their workspace.
struct AlgoEntry {
  int algo = 0;
  size_t memory = 0;
  cudnnDeterminism_t determinism = CUDNN_NON_DETERMINISTIC;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

template <typename Perf>
std::vector<AlgoEntry> usable(const std::vector<Perf>& perfs, int returned) {
  std::vector<AlgoEntry> out;
  for (int i = 0; i < returned; ++i)
    if (perfs[size_t(i)].status == CUDNN_STATUS_SUCCESS)
      out.push_back({static_cast<int>(perfs[size_t(i)].algo), perfs[size_t(i)].memory,
                     perfs[size_t(i)].determinism, perfs[size_t(i)].mathType});
  return out;
}

std::vector<AlgoEntry> query_algorithms(cudnnHandle_t handle, const Descriptors& d, Pass pass) {
  int max_count = 0, returned = 0;
  switch (pass) {
    case Pass::forward: {
      REQUIRE(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_count) ==
              CUDNN_STATUS_SUCCESS);
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perfs(static_cast<size_t>(max_count));
      REQUIRE(cudnnGetConvolutionForwardAlgorithm_v7(handle, d.x, d.w, d.conv, d.y, max_count,
                                                     &returned,
                                                     perfs.data()) == CUDNN_STATUS_SUCCESS);
      return usable(perfs, returned);
    }
    case Pass::backward_data: {
      REQUIRE(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &max_count) ==
              CUDNN_STATUS_SUCCESS);
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perfs(static_cast<size_t>(max_count));
      REQUIRE(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, d.w, d.y, d.conv, d.x, max_count,
                                                          &returned,
                                                          perfs.data()) == CUDNN_STATUS_SUCCESS);
      return usable(perfs, returned);
    }
    case Pass::backward_filter: {
      REQUIRE(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &max_count) ==
              CUDNN_STATUS_SUCCESS);
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perfs(static_cast<size_t>(max_count));
      REQUIRE(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, d.x, d.y, d.conv, d.w,
                                                            max_count, &returned,
                                                            perfs.data()) == CUDNN_STATUS_SUCCESS);
      return usable(perfs, returned);
    }
  }
  return {};
}

cudnnStatus_t workspace_size(cudnnHandle_t handle, const Descriptors& d, Pass pass, int algo,
                             size_t& bytes) {
  switch (pass) {
    case Pass::forward:
      return cudnnGetConvolutionForwardWorkspaceSize(
          handle, d.x, d.w, d.conv, d.y, static_cast<cudnnConvolutionFwdAlgo_t>(algo), &bytes);
    case Pass::backward_data:
      return cudnnGetConvolutionBackwardDataWorkspaceSize(
          handle, d.w, d.y, d.conv, d.x, static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), &bytes);
    case Pass::backward_filter:
      return cudnnGetConvolutionBackwardFilterWorkspaceSize(
          handle, d.x, d.y, d.conv, d.w, static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo),
          &bytes);
  }
  return CUDNN_STATUS_INTERNAL_ERROR;
}

// The pass's compute call. `in_a`, `in_b`: (x, w) forward, (w, dy) backward
// data, (x, dy) backward filter; `out`: y, dx or dw.
cudnnStatus_t compute(cudnnHandle_t handle, const Descriptors& d, Pass pass, int algo,
                      const void* in_a, const void* in_b, void* out, void* workspace,
                      size_t workspace_bytes, const float* alpha, const float* beta) {
  switch (pass) {
    case Pass::forward:
      return cudnnConvolutionForward(handle, alpha, d.x, in_a, d.w, in_b, d.conv,
                                     static_cast<cudnnConvolutionFwdAlgo_t>(algo), workspace,
                                     workspace_bytes, beta, d.y, out);
    case Pass::backward_data:
      return cudnnConvolutionBackwardData(handle, alpha, d.w, in_a, d.y, in_b, d.conv,
                                          static_cast<cudnnConvolutionBwdDataAlgo_t>(algo),
                                          workspace, workspace_bytes, beta, d.x, out);
    case Pass::backward_filter:
      return cudnnConvolutionBackwardFilter(handle, alpha, d.x, in_a, d.y, in_b, d.conv,
                                            static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo),
                                            workspace, workspace_bytes, beta, d.w, out);
  }
  return CUDNN_STATUS_INTERNAL_ERROR;
}

// Host data of one pass: the two inputs, the output's prior contents, and
// the reference.
struct PassData {
  std::vector<double> in_a, in_b, out_before;
  Reference ref;
  size_t out_count = 0;
};

PassData make_pass_data(const Geometry& g, Pass pass, cudnnDataType_t type, float beta,
                        std::mt19937& rng) {
  PassData p;
  const std::vector<double> x = random_values(g.x_count(), type, rng);
  const std::vector<double> w = random_values(g.w_count(), type, rng);
  const std::vector<double> dy = random_values(g.y_count(), type, rng);
  switch (pass) {
    case Pass::forward:
      p.in_a = x;
      p.in_b = w;
      p.ref = reference_forward(g, x, w);
      p.out_count = g.y_count();
      break;
    case Pass::backward_data:
      p.in_a = w;
      p.in_b = dy;
      p.ref = reference_backward_data(g, w, dy);
      p.out_count = g.x_count();
      break;
    case Pass::backward_filter:
      p.in_a = x;
      p.in_b = dy;
      p.ref = reference_backward_filter(g, x, dy);
      p.out_count = g.w_count();
      break;
  }
  // beta == 0: the output starts as NaN, which must not leak into the result
  // (cuDNN does not read it); otherwise values the result must add to.
  p.out_before = beta == 0.0f
                     ? std::vector<double>(p.out_count, std::numeric_limits<double>::quiet_NaN())
                     : random_values(p.out_count, type, rng);
  return p;
}

// Runs `pass` with every algorithm the query offers, each with exactly the
// workspace its size query asks for, on the legacy default stream; checks
// each result against the reference and all of them bit for bit against the
// first (the emulator computes every algorithm the same way).
void check_pass(const Geometry& g, Pass pass, cudnnDataType_t type, float alpha, float beta) {
  INFO(g.name << ", " << pass_name(pass) << ", " << type_name(type) << ", alpha " << alpha
              << ", beta " << beta);
  std::mt19937 rng(1234u + static_cast<unsigned>(pass) * 7u + g.c * 131u + g.h);
  const PassData data = make_pass_data(g, pass, type, beta, rng);
  Handle handle;
  const Descriptors d(g, type);

  DeviceBuffer a(data.in_a.size() * element_size(type)), b(data.in_b.size() * element_size(type));
  DeviceBuffer out(data.out_count * element_size(type));
  a.upload(to_storage(data.in_a, type));
  b.upload(to_storage(data.in_b, type));

  const std::vector<AlgoEntry> algos = query_algorithms(handle.h, d, pass);
  REQUIRE(!algos.empty());
  std::vector<unsigned char> first;
  for (const AlgoEntry& entry : algos) {
    INFO("algo " << entry.algo);
    size_t ws_bytes = 0;
    REQUIRE(workspace_size(handle.h, d, pass, entry.algo, ws_bytes) == CUDNN_STATUS_SUCCESS);
    CHECK(ws_bytes == entry.memory);
    DeviceBuffer workspace(ws_bytes);
    out.upload(to_storage(data.out_before, type));
    REQUIRE(compute(handle.h, d, pass, entry.algo, a.get(), b.get(), out.get(), workspace.get(),
                    ws_bytes, &alpha, &beta) == CUDNN_STATUS_SUCCESS);
    const std::vector<unsigned char> got_bytes = out.download();
    std::string report;
    const size_t bad = count_mismatches(from_storage(got_bytes, type), data.ref, data.out_before,
                                        alpha, beta, type, report);
    INFO(bad << " of " << data.out_count << " elements off:" << report);
    CHECK(bad == 0);
    if (first.empty())
      first = got_bytes;
    else
      CHECK(got_bytes == first);
  }
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
}

void check_all_geometries(Pass pass) {
  for (const Geometry& g : kGeometries)
    for (cudnnDataType_t type : {CUDNN_DATA_FLOAT, CUDNN_DATA_BFLOAT16})
      for (float beta : {0.0f, 1.0f}) check_pass(g, pass, type, 1.0f, beta);
}

// Runs `fn` with stderr sent to a temporary file; returns what was written.
template <typename Fn>
std::string capture_stderr(Fn fn) {
  std::fflush(stderr);
  std::FILE* file = std::tmpfile();
  REQUIRE(file != nullptr);
  const int saved = dup(2);
  dup2(fileno(file), 2);
  fn();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::rewind(file);
  std::string text;
  char buffer[512];
  size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, got);
  std::fclose(file);
  return text;
}

const Geometry kSmall{"small 3x3", 2, 3, 6, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1};

}  // namespace

// ---- results against the reference ---------------------------------------------------

TEST_CASE("emulated cudnnConvolutionForward matches the direct reference", "[emulated][cudnn]") {
  check_all_geometries(Pass::forward);
}

TEST_CASE("emulated cudnnConvolutionBackwardData matches the direct reference",
          "[emulated][cudnn]") {
  check_all_geometries(Pass::backward_data);
}

TEST_CASE("emulated cudnnConvolutionBackwardFilter matches the direct reference",
          "[emulated][cudnn]") {
  check_all_geometries(Pass::backward_filter);
}

TEST_CASE("emulated cuDNN scales by alpha and blends with beta", "[emulated][cudnn]") {
  for (Pass pass : {Pass::forward, Pass::backward_data, Pass::backward_filter})
    for (cudnnDataType_t type : {CUDNN_DATA_FLOAT, CUDNN_DATA_BFLOAT16})
      check_pass(kGeometries[1], pass, type, 0.5f, -0.25f);
}

TEST_CASE("emulated cuDNN rounds bf16 results to nearest even once", "[emulated][cudnn]") {
  // 1x1 convolution over two channels: y = x0 * 1 + x1 * 1, exact in f32.
  // 1 + 2^-8 lies halfway between the bf16 values 1 and 1 + 2^-7 and must
  // round to 1 (even); 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and
  // 1 + 2^-6 and must round to 1 + 2^-6 (even). Truncation or ties-away
  // gets one of the two wrong.
  const Geometry g{"1x1, two channels", 1, 2, 1, 2, 1, 1, 1, 0, 0, 1, 1, 1, 1};
  Handle handle;
  const Descriptors d(g, CUDNN_DATA_BFLOAT16);
  // x [1, 2, 1, 2]: channel 0 = (1, 1), channel 1 = (2^-8, 3 * 2^-8)
  const std::vector<double> x = {1.0, 1.0, std::ldexp(1.0, -8), 3 * std::ldexp(1.0, -8)};
  const std::vector<double> w = {1.0, 1.0};
  DeviceBuffer dx(4 * 2), dw(2 * 2), dy(2 * 2);
  dx.upload(to_storage(x, CUDNN_DATA_BFLOAT16));
  dw.upload(to_storage(w, CUDNN_DATA_BFLOAT16));
  const float alpha = 1.0f, beta = 0.0f;
  REQUIRE(cudnnConvolutionForward(handle.h, &alpha, d.x, dx.get(), d.w, dw.get(), d.conv,
                                  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &beta, d.y,
                                  dy.get()) == CUDNN_STATUS_SUCCESS);
  const std::vector<double> y = from_storage(dy.download(), CUDNN_DATA_BFLOAT16);
  CHECK(y[0] == 1.0);
  CHECK(y[1] == 1.0 + std::ldexp(1.0, -6));
}

// ---- stream order ----------------------------------------------------------------------

TEST_CASE("emulated cuDNN queues on the handle's stream and copies its arguments",
          "[emulated][cudnn]") {
  const Geometry& g = kGeometries[0];
  const cudnnDataType_t type = CUDNN_DATA_FLOAT;
  std::mt19937 rng(77);
  const PassData data = make_pass_data(g, Pass::forward, type, 1.0f, rng);
  DeviceBuffer x(g.x_count() * 4), w(g.w_count() * 4), y(g.y_count() * 4);
  x.upload(to_storage(data.in_a, type));
  w.upload(to_storage(data.in_b, type));
  y.upload(to_storage(data.out_before, type));

  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  Handle handle;
  REQUIRE(cudnnSetStream(handle.h, stream) == CUDNN_STATUS_SUCCESS);

  // A gate ahead of the convolution: the stream cannot pass it until it opens.
  std::atomic<bool> open{false};
  sdp::emu::StreamWork gate;
  gate.name = "test gate";
  gate.start = [] {};
  gate.finished = [&open] { return open.load(); };
  REQUIRE(sdp::emu::submit(stream, std::move(gate)) == cudaSuccess);

  auto d = std::make_unique<Descriptors>(g, type);
  size_t ws_bytes = 0;
  REQUIRE(cudnnGetConvolutionForwardWorkspaceSize(handle.h, d->x, d->w, d->conv, d->y,
                                                  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                                  &ws_bytes) == CUDNN_STATUS_SUCCESS);
  REQUIRE(ws_bytes > 0);
  DeviceBuffer workspace(ws_bytes);
  float alpha = 2.0f, beta = 1.0f;
  REQUIRE(cudnnConvolutionForward(handle.h, &alpha, d->x, x.get(), d->w, w.get(), d->conv,
                                  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, workspace.get(),
                                  ws_bytes, &beta, d->y, y.get()) == CUDNN_STATUS_SUCCESS);
  // The caller's descriptors and scalars may go away at once.
  d.reset();
  alpha = 100.0f;
  beta = 100.0f;
  CHECK(cudaStreamQuery(stream) == cudaErrorNotReady);  // still behind the gate
  // Nothing computed yet: the call queued its work instead of running it.
  // (Emulated device memory is host memory, and nothing runs on it now.)
  const std::vector<unsigned char> before = to_storage(data.out_before, type);
  CHECK(std::memcmp(y.get(), before.data(), before.size()) == 0);

  open = true;
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  std::string report;
  const size_t bad = count_mismatches(from_storage(y.download(), type), data.ref, data.out_before,
                                      2.0f, 1.0f, type, report);
  INFO(report);
  CHECK(bad == 0);
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
}

// ---- queries ------------------------------------------------------------------------------

TEST_CASE("emulated cuDNN algorithm queries", "[emulated][cudnn]") {
  Handle handle;
  const Descriptors d(kSmall, CUDNN_DATA_FLOAT);
  int count = 0;
  REQUIRE(cudnnGetConvolutionForwardAlgorithmMaxCount(handle.h, &count) == CUDNN_STATUS_SUCCESS);
  CHECK(count == CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
  REQUIRE(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle.h, &count) ==
          CUDNN_STATUS_SUCCESS);
  CHECK(count == CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
  REQUIRE(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle.h, &count) ==
          CUDNN_STATUS_SUCCESS);
  CHECK(count == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);

  // Forward: every algorithm of the enum is listed, the usable ones first.
  std::vector<cudnnConvolutionFwdAlgoPerf_t> perfs(CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
  int returned = 0;
  REQUIRE(cudnnGetConvolutionForwardAlgorithm_v7(handle.h, d.x, d.w, d.conv, d.y,
                                                 CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned,
                                                 perfs.data()) == CUDNN_STATUS_SUCCESS);
  CHECK(returned == CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
  REQUIRE(perfs[0].status == CUDNN_STATUS_SUCCESS);
  CHECK(perfs[0].algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);
  const size_t columns =
      size_t(kSmall.c) * kSmall.r * kSmall.s * kSmall.out_h() * kSmall.out_w() * sizeof(float);
  CHECK(perfs[0].memory == columns);
  CHECK(perfs[1].algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM);
  CHECK(perfs[1].memory == 0);
  for (int i = 0; i < 2; ++i) {
    CHECK(perfs[size_t(i)].determinism == CUDNN_DETERMINISTIC);
    CHECK(perfs[size_t(i)].mathType == CUDNN_FMA_MATH);  // no TF32 in f32 runs
  }
  for (int i = 2; i < returned; ++i) CHECK(perfs[size_t(i)].status == CUDNN_STATUS_NOT_SUPPORTED);

  // A shorter list is the head of the full one.
  REQUIRE(cudnnGetConvolutionForwardAlgorithm_v7(handle.h, d.x, d.w, d.conv, d.y, 1, &returned,
                                                 perfs.data()) == CUDNN_STATUS_SUCCESS);
  CHECK(returned == 1);
  CHECK(perfs[0].algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);
  CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle.h, d.x, d.w, d.conv, d.y, 0, &returned,
                                               perfs.data()) == CUDNN_STATUS_BAD_PARAM);

  // The backward passes: ALGO_1 (deterministic, columns) before ALGO_0.
  const std::vector<AlgoEntry> data_algos = query_algorithms(handle.h, d, Pass::backward_data);
  REQUIRE(data_algos.size() == 2);
  CHECK(data_algos[0].algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1);
  CHECK(data_algos[0].determinism == CUDNN_DETERMINISTIC);
  CHECK(data_algos[0].memory == columns);
  CHECK(data_algos[1].algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0);
  CHECK(data_algos[1].memory == 0);
  const std::vector<AlgoEntry> filter_algos = query_algorithms(handle.h, d, Pass::backward_filter);
  REQUIRE(filter_algos.size() == 2);
  CHECK(filter_algos[0].algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1);
  CHECK(filter_algos[0].memory == columns);
  CHECK(filter_algos[1].algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0);

  // bf16 reports the descriptor's math type (conv2d.cpp sets tensor-op math).
  const Descriptors bf(kSmall, CUDNN_DATA_BFLOAT16);
  const std::vector<AlgoEntry> bf_algos = query_algorithms(handle.h, bf, Pass::forward);
  REQUIRE(!bf_algos.empty());
  CHECK(bf_algos[0].math == CUDNN_TENSOR_OP_MATH);
}

TEST_CASE("emulated cudnnGetConvolution2dForwardOutputDim", "[emulated][cudnn]") {
  for (const Geometry& g : kGeometries) {
    INFO(g.name);
    const Descriptors d(g, CUDNN_DATA_FLOAT);
    int n = 0, c = 0, h = 0, w = 0;
    REQUIRE(cudnnGetConvolution2dForwardOutputDim(d.conv, d.x, d.w, &n, &c, &h, &w) ==
            CUDNN_STATUS_SUCCESS);
    CHECK(n == g.n);
    CHECK(c == g.k);
    CHECK(h == g.out_h());
    CHECK(w == g.out_w());
  }
  // ResNet's stem on a 224 x 224 image: 112 x 112.
  const Geometry stem{"stem", 1, 3, 224, 224, 64, 7, 7, 3, 3, 2, 2, 1, 1};
  const Descriptors d(stem, CUDNN_DATA_FLOAT);
  int n = 0, c = 0, h = 0, w = 0;
  REQUIRE(cudnnGetConvolution2dForwardOutputDim(d.conv, d.x, d.w, &n, &c, &h, &w) ==
          CUDNN_STATUS_SUCCESS);
  CHECK(h == 112);
  CHECK(w == 112);
}

TEST_CASE("emulated cudnnGetErrorString returns cuDNN's names", "[emulated][cudnn]") {
  CHECK(std::string(cudnnGetErrorString(CUDNN_STATUS_SUCCESS)) == "CUDNN_STATUS_SUCCESS");
  CHECK(std::string(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM)) == "CUDNN_STATUS_BAD_PARAM");
  CHECK(std::string(cudnnGetErrorString(CUDNN_STATUS_NOT_SUPPORTED)) ==
        "CUDNN_STATUS_NOT_SUPPORTED");
  CHECK(std::string(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER)) ==
        "CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER");
  CHECK(std::string(cudnnGetErrorString(CUDNN_STATUS_EXECUTION_FAILED_CUDART)) ==
        "CUDNN_STATUS_EXECUTION_FAILED_CUDART");
  CHECK(std::string(cudnnGetErrorString(static_cast<cudnnStatus_t>(12345))) ==
        "CUDNN_UNKNOWN_STATUS_FOUND");
}

// ---- refusals -----------------------------------------------------------------------------

TEST_CASE("emulated cuDNN refuses an output descriptor of the wrong shape", "[emulated][cudnn]") {
  Handle handle;
  const cudnnDataType_t type = CUDNN_DATA_FLOAT;
  const Geometry& g = kSmall;
  Descriptors d(g, type);
  // y one row taller than (h + 2p - r) / s + 1.
  REQUIRE(cudnnSetTensor4dDescriptor(d.y, CUDNN_TENSOR_NCHW, type, g.n, g.k, g.out_h() + 1,
                                     g.out_w()) == CUDNN_STATUS_SUCCESS);
  DeviceBuffer x(g.x_count() * 4), w(g.w_count() * 4),
      y(size_t(g.n) * g.k * (g.out_h() + 1) * g.out_w() * 4);
  const float alpha = 1.0f, beta = 0.0f;
  size_t bytes = 0;
  std::string err;
  for (Pass pass : {Pass::forward, Pass::backward_data, Pass::backward_filter}) {
    INFO(pass_name(pass));
    CHECK(workspace_size(handle.h, d, pass, 0, bytes) == CUDNN_STATUS_BAD_PARAM);
    err = capture_stderr([&] {
      const void* in_a = pass == Pass::backward_data ? w.get() : x.get();
      const void* in_b = pass == Pass::forward ? w.get() : y.get();
      void* out = pass == Pass::forward ? y.get() : pass == Pass::backward_data ? x.get() : w.get();
      CHECK(compute(handle.h, d, pass, 0, in_a, in_b, out, nullptr, 0, &alpha, &beta) ==
            CUDNN_STATUS_BAD_PARAM);
    });
    CHECK(err.find("Convolution") != std::string::npos);
  }
  // The last message (backward filter) names the call and both shapes.
  CHECK(err.find("cudnnConvolutionBackwardFilter") != std::string::npos);
  CHECK(err.find("[2, 4, 7, 5]") != std::string::npos);  // what was given
  CHECK(err.find("[2, 4, 6, 5]") != std::string::npos);  // what x, w and conv give
  int returned = 0;
  cudnnConvolutionFwdAlgoPerf_t perf;
  CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle.h, d.x, d.w, d.conv, d.y, 1, &returned,
                                               &perf) == CUDNN_STATUS_BAD_PARAM);

  // Channels of x and w that differ are refused too.
  Descriptors other(g, type);
  REQUIRE(cudnnSetFilter4dDescriptor(other.w, type, CUDNN_TENSOR_NCHW, g.k, g.c + 1, g.r, g.s) ==
          CUDNN_STATUS_SUCCESS);
  CHECK(workspace_size(handle.h, other, Pass::forward, 0, bytes) == CUDNN_STATUS_BAD_PARAM);
  int n = 0, c = 0, h = 0, wd = 0;
  CHECK(cudnnGetConvolution2dForwardOutputDim(other.conv, other.x, other.w, &n, &c, &h, &wd) ==
        CUDNN_STATUS_BAD_PARAM);
  // So is a filter larger than the padded input.
  Descriptors big(g, type);
  REQUIRE(cudnnSetFilter4dDescriptor(big.w, type, CUDNN_TENSOR_NCHW, g.k, g.c, g.h + 3, g.s) ==
          CUDNN_STATUS_SUCCESS);
  CHECK(cudnnGetConvolution2dForwardOutputDim(big.conv, big.x, big.w, &n, &c, &h, &wd) ==
        CUDNN_STATUS_BAD_PARAM);
}

TEST_CASE("emulated cuDNN refuses unsupported data types", "[emulated][cudnn]") {
  cudnnTensorDescriptor_t t = nullptr;
  cudnnFilterDescriptor_t f = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  REQUIRE(cudnnCreateTensorDescriptor(&t) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnCreateFilterDescriptor(&f) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnCreateConvolutionDescriptor(&conv) == CUDNN_STATUS_SUCCESS);
  const std::string err = capture_stderr([&] {
    CHECK(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_HALF, 1, 2, 3, 4) ==
          CUDNN_STATUS_NOT_SUPPORTED);
  });
  CHECK(err.find("cudnnSetTensor4dDescriptor") != std::string::npos);
  CHECK(err.find("CUDNN_DATA_HALF") != std::string::npos);
  CHECK(err.find("CUDNN_DATA_BFLOAT16") != std::string::npos);  // what is supported
  CHECK(err.find("CUDNN_STATUS_NOT_SUPPORTED") != std::string::npos);
  CHECK(err.find('\n') == err.size() - 1);  // one line
  CHECK(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_DOUBLE, 1, 2, 3, 4) ==
        CUDNN_STATUS_NOT_SUPPORTED);
  CHECK(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_INT8, 1, 2, 3, 4) ==
        CUDNN_STATUS_NOT_SUPPORTED);
  CHECK(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, static_cast<cudnnDataType_t>(99), 1, 2, 3,
                                   4) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnSetFilter4dDescriptor(f, CUDNN_DATA_HALF, CUDNN_TENSOR_NCHW, 1, 2, 3, 3) ==
        CUDNN_STATUS_NOT_SUPPORTED);
  CHECK(cudnnSetConvolution2dDescriptor(conv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_HALF) == CUDNN_STATUS_NOT_SUPPORTED);
  CHECK(cudnnSetConvolution2dDescriptor(conv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_DOUBLE) == CUDNN_STATUS_NOT_SUPPORTED);
  cudnnDestroyTensorDescriptor(t);
  cudnnDestroyFilterDescriptor(f);
  cudnnDestroyConvolutionDescriptor(conv);

  // Mixed types (bf16 x with an f32 filter) are a bad combination, as in cuDNN.
  Handle handle;
  Descriptors d(kSmall, CUDNN_DATA_FLOAT);
  REQUIRE(cudnnSetTensor4dDescriptor(d.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_BFLOAT16, kSmall.n,
                                     kSmall.c, kSmall.h, kSmall.w) == CUDNN_STATUS_SUCCESS);
  size_t bytes = 0;
  CHECK(workspace_size(handle.h, d, Pass::forward, 0, bytes) == CUDNN_STATUS_BAD_PARAM);
}

TEST_CASE("emulated cuDNN refuses unsupported formats, modes, groups and ranks",
          "[emulated][cudnn]") {
  cudnnTensorDescriptor_t t = nullptr;
  cudnnFilterDescriptor_t f = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  REQUIRE(cudnnCreateTensorDescriptor(&t) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnCreateFilterDescriptor(&f) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnCreateConvolutionDescriptor(&conv) == CUDNN_STATUS_SUCCESS);
  const std::string err = capture_stderr([&] {
    CHECK(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 1, 2, 3, 4) ==
          CUDNN_STATUS_NOT_SUPPORTED);
  });
  CHECK(err.find("CUDNN_TENSOR_NHWC") != std::string::npos);
  CHECK(err.find("CUDNN_TENSOR_NCHW only") != std::string::npos);
  CHECK(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW_VECT_C, CUDNN_DATA_FLOAT, 1, 2, 3, 4) ==
        CUDNN_STATUS_NOT_SUPPORTED);
  CHECK(cudnnSetTensor4dDescriptor(t, static_cast<cudnnTensorFormat_t>(7), CUDNN_DATA_FLOAT, 1, 2,
                                   3, 4) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnSetFilter4dDescriptor(f, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, 1, 2, 3, 3) ==
        CUDNN_STATUS_NOT_SUPPORTED);
  // Extents must be positive.
  CHECK(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 0, 2, 3, 4) ==
        CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnSetFilter4dDescriptor(f, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 1, -2, 3, 3) ==
        CUDNN_STATUS_BAD_PARAM);
  // More than INT_MAX elements.
  CHECK(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1024, 1024, 1024, 4) ==
        CUDNN_STATUS_NOT_SUPPORTED);
  // Convolution mode, geometry, groups, math.
  CHECK(cudnnSetConvolution2dDescriptor(conv, 1, 1, 1, 1, 1, 1, CUDNN_CONVOLUTION,
                                        CUDNN_DATA_FLOAT) == CUDNN_STATUS_NOT_SUPPORTED);
  CHECK(cudnnSetConvolution2dDescriptor(conv, -1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnSetConvolution2dDescriptor(conv, 1, 1, 0, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnSetConvolution2dDescriptor(conv, 1, 1, 1, 1, 1, 0, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnSetConvolutionGroupCount(conv, 2) == CUDNN_STATUS_NOT_SUPPORTED);
  CHECK(cudnnSetConvolutionGroupCount(conv, 1) == CUDNN_STATUS_SUCCESS);
  CHECK(cudnnSetConvolutionMathType(conv, static_cast<cudnnMathType_t>(9)) ==
        CUDNN_STATUS_BAD_PARAM);
  // Other ranks.
  const int dims5[5] = {1, 2, 3, 4, 5}, strides5[5] = {120, 60, 20, 5, 1};
  CHECK(cudnnSetTensorNdDescriptor(t, CUDNN_DATA_FLOAT, 5, dims5, strides5) ==
        CUDNN_STATUS_NOT_SUPPORTED);
  const int dims4[4] = {1, 2, 3, 4}, packed4[4] = {24, 12, 4, 1}, strided4[4] = {48, 24, 8, 2};
  CHECK(cudnnSetTensorNdDescriptor(t, CUDNN_DATA_FLOAT, 4, dims4, packed4) == CUDNN_STATUS_SUCCESS);
  CHECK(cudnnSetTensorNdDescriptor(t, CUDNN_DATA_FLOAT, 4, dims4, strided4) ==
        CUDNN_STATUS_NOT_SUPPORTED);
  CHECK(cudnnSetFilterNdDescriptor(f, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 5, dims5) ==
        CUDNN_STATUS_NOT_SUPPORTED);
  const int pads3[3] = {1, 1, 1}, ones3[3] = {1, 1, 1};
  CHECK(cudnnSetConvolutionNdDescriptor(conv, 3, pads3, ones3, ones3, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT) == CUDNN_STATUS_NOT_SUPPORTED);
  cudnnDestroyTensorDescriptor(t);
  cudnnDestroyFilterDescriptor(f);
  cudnnDestroyConvolutionDescriptor(conv);
}

TEST_CASE("emulated cuDNN refuses too small a workspace and unknown algorithms",
          "[emulated][cudnn]") {
  Handle handle;
  const cudnnDataType_t type = CUDNN_DATA_FLOAT;
  const Geometry& g = kSmall;
  const Descriptors d(g, type);
  DeviceBuffer x(g.x_count() * 4), w(g.w_count() * 4), y(g.y_count() * 4);
  // A sentinel in every output: a refused call must queue nothing.
  const std::vector<double> sentinel_y(g.y_count(), 42.0), sentinel_x(g.x_count(), 42.0),
      sentinel_w(g.w_count(), 42.0);
  y.upload(to_storage(sentinel_y, type));
  x.upload(to_storage(sentinel_x, type));
  w.upload(to_storage(sentinel_w, type));
  const float alpha = 1.0f, beta = 0.0f;
  const int column_algo[3] = {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                              CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
                              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1};
  const int unemulated_algo[3] = {CUDNN_CONVOLUTION_FWD_ALGO_FFT,
                                  CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD,
                                  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT};
  const int past_enum[3] = {CUDNN_CONVOLUTION_FWD_ALGO_COUNT, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT};
  int i = 0;
  for (Pass pass : {Pass::forward, Pass::backward_data, Pass::backward_filter}) {
    INFO(pass_name(pass));
    const void* in_a = pass == Pass::backward_data ? w.get() : x.get();
    const void* in_b = pass == Pass::forward ? w.get() : y.get();
    void* out = pass == Pass::forward ? y.get() : pass == Pass::backward_data ? x.get() : w.get();
    size_t required = 0;
    REQUIRE(workspace_size(handle.h, d, pass, column_algo[i], required) == CUDNN_STATUS_SUCCESS);
    REQUIRE(required > 0);
    DeviceBuffer workspace(required);
    const std::string err = capture_stderr([&] {
      CHECK(compute(handle.h, d, pass, column_algo[i], in_a, in_b, out, workspace.get(),
                    required - 1, &alpha, &beta) == CUDNN_STATUS_BAD_PARAM);
    });
    CHECK(err.find("workSpaceSizeInBytes = " + std::to_string(required - 1)) != std::string::npos);
    CHECK(compute(handle.h, d, pass, column_algo[i], in_a, in_b, out, nullptr, required, &alpha,
                  &beta) == CUDNN_STATUS_BAD_PARAM);
    // In the enum but not emulated: NOT_SUPPORTED, from the size query and the call.
    size_t bytes = 0;
    CHECK(workspace_size(handle.h, d, pass, unemulated_algo[i], bytes) ==
          CUDNN_STATUS_NOT_SUPPORTED);
    CHECK(compute(handle.h, d, pass, unemulated_algo[i], in_a, in_b, out, workspace.get(), required,
                  &alpha, &beta) == CUDNN_STATUS_NOT_SUPPORTED);
    // Outside the enum: BAD_PARAM.
    CHECK(workspace_size(handle.h, d, pass, past_enum[i], bytes) == CUDNN_STATUS_BAD_PARAM);
    CHECK(workspace_size(handle.h, d, pass, -1, bytes) == CUDNN_STATUS_BAD_PARAM);
    CHECK(compute(handle.h, d, pass, past_enum[i], in_a, in_b, out, workspace.get(), required,
                  &alpha, &beta) == CUDNN_STATUS_BAD_PARAM);
    ++i;
  }
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(from_storage(y.download(), type) == sentinel_y);
  CHECK(from_storage(x.download(), type) == sentinel_x);
  CHECK(from_storage(w.download(), type) == sentinel_w);
}

TEST_CASE("emulated cuDNN refuses bad pointers and stale descriptors", "[emulated][cudnn]") {
  Handle handle;
  const cudnnDataType_t type = CUDNN_DATA_FLOAT;
  const Geometry& g = kSmall;
  DeviceBuffer x(g.x_count() * 4), w(g.w_count() * 4), y(g.y_count() * 4 + 4);
  const float alpha = 1.0f, beta = 0.0f;
  {
    const Descriptors d(g, type);
    const int algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    CHECK(compute(handle.h, d, Pass::forward, algo, nullptr, w.get(), y.get(), nullptr, 0, &alpha,
                  &beta) == CUDNN_STATUS_BAD_PARAM);
    CHECK(compute(handle.h, d, Pass::forward, algo, x.get(), w.get(), y.get(), nullptr, 0, nullptr,
                  &beta) == CUDNN_STATUS_BAD_PARAM);
    CHECK(compute(handle.h, d, Pass::forward, algo, x.get(), w.get(),
                  static_cast<char*>(y.get()) + 2, nullptr, 0, &alpha,
                  &beta) == CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER);
    // Host memory is not device memory: the runtime refuses the work.
    std::vector<float> host_x(g.x_count());
    CHECK(compute(handle.h, d, Pass::forward, algo, host_x.data(), w.get(), y.get(), nullptr, 0,
                  &alpha, &beta) == CUDNN_STATUS_EXECUTION_FAILED_CUDART);
  }
  // Destroyed descriptors and handles are refused, not read.
  cudnnTensorDescriptor_t stale = nullptr;
  REQUIRE(cudnnCreateTensorDescriptor(&stale) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnDestroyTensorDescriptor(stale) == CUDNN_STATUS_SUCCESS);
  CHECK(cudnnSetTensor4dDescriptor(stale, CUDNN_TENSOR_NCHW, type, 1, 1, 1, 1) ==
        CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnDestroyTensorDescriptor(nullptr) == CUDNN_STATUS_SUCCESS);
  // A created but never set descriptor is refused by the calls that read it.
  Descriptors d(g, type);
  cudnnTensorDescriptor_t unset = nullptr;
  REQUIRE(cudnnCreateTensorDescriptor(&unset) == CUDNN_STATUS_SUCCESS);
  size_t bytes = 0;
  CHECK(cudnnGetConvolutionForwardWorkspaceSize(handle.h, unset, d.w, d.conv, d.y,
                                                CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                                &bytes) == CUDNN_STATUS_BAD_PARAM);
  cudnnDestroyTensorDescriptor(unset);
  cudnnHandle_t gone = nullptr;
  REQUIRE(cudnnCreate(&gone) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnDestroy(gone) == CUDNN_STATUS_SUCCESS);
  CHECK(cudnnSetStream(gone, nullptr) == CUDNN_STATUS_BAD_PARAM);
  int count = 0;
  CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(gone, &count) == CUDNN_STATUS_BAD_PARAM);
}
