#pragma once
// What a run's device setting names: the device that computes, and for a
// dry run (the meta device, which computes nothing and counts every byte)
// the device whose allocator it stands in for. The setting's text forms are
// the user's vocabulary ("cpu", "cuda", "meta" = a CUDA run's bytes,
// "meta-cpu" = a CPU run's); everything else asks this struct.
#include <string>

#include "engine/core/dtype.h"
#include "engine/core/error.h"

namespace sdp {

struct DeviceTarget {
  Device device = Device::cpu;     // where kernels run (meta: nowhere)
  Device stands_for = Device::cpu;  // the allocator counted: itself unless meta

  static constexpr const char* kValidNames = "cpu, meta, meta-cpu, cuda";
  // Whether `name` is one of kValidNames.
  static bool known(const std::string& name) {
    return name == "cpu" || name == "cuda" || name == "meta" || name == "meta-cpu";
  }
  static DeviceTarget parse(const std::string& name) {
    if (name == "cpu") return {Device::cpu, Device::cpu};
    if (name == "cuda") return {Device::cuda, Device::cuda};
    if (name == "meta") return {Device::meta, Device::cuda};
    if (name == "meta-cpu") return {Device::meta, Device::cpu};
    fail("device '", name, "' is invalid (valid: ", kValidNames, ")");
  }
  // A dry run of a job on `d`.
  static DeviceTarget dry_run_of(Device d) { return {Device::meta, d}; }

  bool dry_run() const { return device == Device::meta; }
  // Kernels of the device counted (the CPU's compute in f32 or f64 only).
  bool cpu_kernels() const { return stands_for == Device::cpu; }
  std::string name() const {
    if (device != Device::meta) return std::string(device_name(device));
    return stands_for == Device::cpu ? "meta-cpu" : "meta";
  }
};

}  // namespace sdp
