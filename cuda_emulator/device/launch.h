#pragma once
// Kernel launches in the emulated build (kernels/cuda/launch.cuh calls
// launch_kernel where nvcc would see <<<...>>>). The arguments are converted
// to the kernel's parameter types once, as a launch does, and every device
// thread runs the kernel body on its own copy of them. Pointer parameters
// tell the stream-order checker what the kernel touches: a pointer to const
// is read, any other pointer is read and written, each from where it points
// to the end of the memory block holding it.
#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace sdp::emu {

struct KernelPointerArgument {
  const void* pointer = nullptr;
  bool writes = false;
  int index = 0;  // parameter position, for reports
};

struct KernelLaunch {
  const void* kernel = nullptr;  // identity: per-kernel limits (cudaFuncSetAttribute)
  std::string name;
  dim3 grid, block;
  size_t shared_bytes = 0;
  cudaStream_t stream = nullptr;
  std::vector<KernelPointerArgument> pointers;
  std::function<void()> run_thread;  // the kernel body for the current device thread
};

// Checks the configuration (a bad one sets the error cudaGetLastError
// returns and prints why, naming the kernel) and queues the grid on its
// stream.
void submit_launch(KernelLaunch launch);

// The kernel's name as the compiler spells it, for reports.
std::string kernel_name_from_signature(std::string_view pretty_function);
template <auto Kernel>
const std::string& kernel_name() {
  static const std::string name = kernel_name_from_signature(__PRETTY_FUNCTION__);
  return name;
}

template <typename F>
struct KernelParameters;
template <typename... P>
struct KernelParameters<void (*)(P...)> {
  using Tuple = std::tuple<std::remove_cv_t<std::remove_reference_t<P>>...>;
};
template <typename... P>
struct KernelParameters<void (*)(P...) noexcept> : KernelParameters<void (*)(P...)> {};

template <typename T>
void note_pointer(std::vector<KernelPointerArgument>& out, const T& value, int index) {
  if constexpr (std::is_pointer_v<T>) {
    using Pointee = std::remove_pointer_t<T>;
    out.push_back({static_cast<const void*>(value), !std::is_const_v<Pointee>, index});
  }
}

template <auto Kernel, typename... Args>
void launch_kernel(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                   Args&&... args) {
  using Parameters = typename KernelParameters<decltype(Kernel)>::Tuple;
  auto parameters = std::make_shared<const Parameters>(std::forward<Args>(args)...);
  KernelLaunch launch;
  launch.kernel = reinterpret_cast<const void*>(Kernel);
  launch.name = kernel_name<Kernel>();
  launch.grid = grid;
  launch.block = block;
  launch.shared_bytes = shared_bytes;
  launch.stream = stream;
  std::apply(
      [&launch](const auto&... values) {
        int index = 0;
        (note_pointer(launch.pointers, values, index++), ...);
      },
      *parameters);
  // Each device thread gets its own copy of the parameters, as registers.
  launch.run_thread = [parameters] {
    std::apply([](auto... values) { Kernel(values...); }, *parameters);
  };
  submit_launch(std::move(launch));
}

}  // namespace sdp::emu
