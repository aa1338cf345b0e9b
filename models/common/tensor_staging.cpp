#include "models/common/tensor_staging.h"

#include "kernels/ops.h"

namespace sdp {

namespace {

CpuAllocator& bounce_allocator() {
  static CpuAllocator host;
  return host;
}

}  // namespace

void stage_copy(const Tensor& src, Tensor& dst) {
  expect_shape(dst, src.shape(), "stage_copy", "dst");
  if (src.device() == Device::meta || dst.device() == Device::meta) return;
  if (src.device() == dst.device()) {
    if (src.dtype() == dst.dtype())
      ops::copy(src, dst);
    else
      ops::convert(src, dst);
    return;
  }
  if (src.dtype() == dst.dtype()) {
    ops::transfer(src, dst);
    return;
  }
  // Convert on the host side, where the bounce buffer lives.
  if (src.device() == Device::cpu) {
    OwnedTensor host(bounce_allocator(), src.shape(), dst.dtype(), MemCategory::workspace);
    ops::convert(src, *host);
    ops::transfer(*host, dst);
  } else {
    OwnedTensor host(bounce_allocator(), src.shape(), src.dtype(), MemCategory::workspace);
    ops::transfer(src, *host);
    ops::convert(*host, dst);
  }
}

}  // namespace sdp
