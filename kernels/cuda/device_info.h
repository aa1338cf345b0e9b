#pragma once
// What CUDA devices this process can use. Safe to call on a machine with no
// GPU or no driver: it reports zero devices and the reason.
#include <string>

namespace sdp::cuda {

struct DeviceReport {
  int device_count = 0;
  std::string reason;  // why there is no usable device, when device_count == 0
  std::string name;    // device 0's name
  int compute_major = 0, compute_minor = 0;
  size_t total_bytes = 0;
};

DeviceReport query_devices();

// Throws sdp::Error with a clear message when no usable GPU is present.
void require_device(int index = 0);

}  // namespace sdp::cuda
