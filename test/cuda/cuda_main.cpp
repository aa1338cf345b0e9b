// The runner of the CUDA tests. Without a usable GPU it says so and exits
// with 77, which ctest (SKIP_RETURN_CODE) shows as Skipped rather than
// passed: a machine without a GPU has not shown that the CUDA code works.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cstdio>
#include <string_view>

#include "kernels/cuda/device_info.h"

namespace {

constexpr int kSkipped = 77;

// Listing or help needs no GPU.
bool only_lists(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help" || arg == "-?" || arg.starts_with("--list") ||
        arg == "-l" || arg == "-t")
      return true;
  }
  return false;
}

// A fault inside a kernel surfaces at the next synchronizing call and leaves
// the context unusable for the rest of the process. Synchronizing after each
// test case names the test that caused it, so the failures of every test
// after it can be read for what they are.
class CudaFaultReporter : public Catch::TestEventListenerBase {
 public:
  using TestEventListenerBase::TestEventListenerBase;

  void testCaseEnded(const Catch::TestCaseStats& stats) override {
    if (context_lost_) return;
    const cudaError_t status = cudaDeviceSynchronize();
    if (status == cudaSuccess) return;
    context_lost_ = true;
    std::fprintf(stderr,
                 "\nCUDA error after test case \"%s\": %s (%s). A fault in a kernel leaves "
                 "the CUDA context unusable: the test cases after this one fail because of "
                 "it. Rerun them alone (sdp_cuda_tests \"<name>\") to see their own results.\n",
                 stats.testInfo.name.c_str(), cudaGetErrorName(status),
                 cudaGetErrorString(status));
  }

 private:
  bool context_lost_ = false;
};

}  // namespace

CATCH_REGISTER_LISTENER(CudaFaultReporter)

int main(int argc, char** argv) {
  if (!only_lists(argc, argv)) {
    const sdp::cuda::DeviceReport gpu = sdp::cuda::query_devices();
    if (gpu.device_count == 0) {
      std::printf("SKIPPED: no usable GPU (%s); the CUDA tests need one\n", gpu.reason.c_str());
      return kSkipped;
    }
    std::printf("CUDA tests on %s (compute capability %d.%d, %.1f GiB), %d device(s)\n",
                gpu.name.c_str(), gpu.compute_major, gpu.compute_minor,
                static_cast<double>(gpu.total_bytes) / (1u << 30), gpu.device_count);
  }
  return Catch::Session().run(argc, argv);
}
