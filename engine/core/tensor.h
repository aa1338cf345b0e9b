#pragma once
// Tensor: a non-owning view (pointer, shape, strides in elements, dtype,
// device). Views are cheap to copy; storage lives in a Buffer from an
// Allocator. OwnedTensor pairs a Buffer with its contiguous view.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "engine/core/allocator.h"
#include "engine/core/dtype.h"
#include "engine/core/error.h"

#ifdef SDP_CUDA_EMULATION
namespace sdp::emu {
// The emulated CUDA device learns the extent of each device view a kernel's
// pointer comes from (cuda_emulator/runtime/device_views.cpp): its
// stream-order checker then sees what the kernel can touch, not the rest of
// the buffer the view lies in.
void note_device_view(const void* data, size_t bytes);
}  // namespace sdp::emu
#endif

namespace sdp {

inline constexpr int kMaxDims = 6;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  template <typename It>
  Shape(It begin, It end) {
    for (; begin != end; ++begin) push_back(static_cast<int64_t>(*begin));
  }

  int ndim() const { return ndim_; }
  int64_t operator[](int i) const { return dims_[static_cast<size_t>(i)]; }
  int64_t& operator[](int i) { return dims_[static_cast<size_t>(i)]; }
  int64_t numel() const;
  void push_back(int64_t d);
  const int64_t* begin() const { return dims_.data(); }
  const int64_t* end() const { return dims_.data() + ndim_; }
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }
  std::string str() const;  // "[2, 3, 4]"

 private:
  std::array<int64_t, kMaxDims> dims_{};
  int ndim_ = 0;
};

class Tensor {
 public:
  Tensor() = default;
  // Contiguous (row-major) view of `data`.
  Tensor(void* data, Shape shape, DType dtype, Device device);
  Tensor(void* data, Shape shape, Shape strides, DType dtype, Device device);

  void* raw() const { return data_; }
  template <typename T>
  T* data() const {
    SDP_CHECK(dtype_of<T>::value == dtype_, "tensor holds ", dtype_name(dtype_),
              ", accessed as ", dtype_name(dtype_of<T>::value));
#ifdef SDP_CUDA_EMULATION
    if (device_ == Device::cuda) emu::note_device_view(data_, span_bytes());
#endif
    return static_cast<T*>(data_);
  }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t size(int i) const { return shape_[i < 0 ? i + shape_.ndim() : i]; }
  int64_t stride(int i) const { return strides_[i < 0 ? i + shape_.ndim() : i]; }
  int ndim() const { return shape_.ndim(); }
  int64_t numel() const { return shape_.numel(); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool defined() const { return data_ != nullptr || numel() == 0; }
  bool is_contiguous() const;
  // Bytes from the first element to one past the last (non-negative strides).
  size_t span_bytes() const {
    if (numel() == 0) return 0;
    int64_t last = 0;
    for (int i = 0; i < shape_.ndim(); ++i) last += (shape_[i] - 1) * strides_[i];
    return static_cast<size_t>(last + 1) * dtype_size(dtype_);
  }

  // Same storage, new shape; requires a contiguous view and the same numel.
  Tensor view(Shape new_shape) const;
  // Sub-range [start, start+length) along `dim`; shares storage.
  Tensor narrow(int dim, int64_t start, int64_t length) const;
  // Rows [start, start+length) of dim 0 as a contiguous tensor of the same rank.
  Tensor rows(int64_t start, int64_t length) const { return narrow(0, start, length); }

  std::string describe() const;  // "f32 cpu [2, 3]"

 private:
  void* data_ = nullptr;
  Shape shape_;
  Shape strides_;
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu;
};

// A tensor that owns its (contiguous) storage.
struct OwnedTensor {
  Buffer storage;
  Tensor view;

  OwnedTensor() = default;
  OwnedTensor(Allocator& allocator, Shape shape, DType dtype, MemCategory category);
  const Tensor& operator*() const { return view; }
  const Tensor* operator->() const { return &view; }
  Tensor& operator*() { return view; }
  Tensor* operator->() { return &view; }
  // Whether it holds a tensor (a default-constructed one holds none).
  explicit operator bool() const { return view.ndim() > 0; }
};

// Checks used by ops: clear messages naming the op and the argument.
void expect_shape(const Tensor& t, const Shape& shape, const char* op, const char* arg);
void expect_dtype(const Tensor& t, DType dtype, const char* op, const char* arg);
void expect_contiguous(const Tensor& t, const char* op, const char* arg);
void expect_same_device(const Tensor& a, const Tensor& b, const char* op);

}  // namespace sdp
