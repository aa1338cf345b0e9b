#include "engine/core/tensor.h"

#include <limits>
#include <sstream>

namespace sdp {

Shape::Shape(std::initializer_list<int64_t> dims) {
  for (int64_t d : dims) push_back(d);
}

void Shape::push_back(int64_t d) {
  SDP_CHECK(ndim_ < kMaxDims, "a tensor has at most ", kMaxDims, " dimensions");
  SDP_CHECK(d >= 0, "negative dimension ", d);
  dims_[static_cast<size_t>(ndim_++)] = d;
}

int64_t Shape::numel() const {
  for (int i = 0; i < ndim_; ++i)
    if (dims_[static_cast<size_t>(i)] == 0) return 0;
  int64_t n = 1;
  for (int i = 0; i < ndim_; ++i)
    // A wrapped count would size buffers and loops wrongly, so it is refused.
    if (__builtin_mul_overflow(n, dims_[static_cast<size_t>(i)], &n))
      fail("tensor of shape ", str(), " has more elements than int64 can count (valid: a "
           "product of dimensions <= ", std::numeric_limits<int64_t>::max(), ")");
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (ndim_ != o.ndim_) return false;
  for (int i = 0; i < ndim_; ++i)
    if ((*this)[i] != o[i]) return false;
  return true;
}

std::string Shape::str() const {
  std::ostringstream os;
  os << '[';
  for (int i = 0; i < ndim_; ++i) os << (i ? ", " : "") << (*this)[i];
  os << ']';
  return os.str();
}

static Shape contiguous_strides(const Shape& shape) {
  Shape s;
  for (int i = 0; i < shape.ndim(); ++i) s.push_back(0);
  int64_t acc = 1;
  for (int i = shape.ndim() - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

Tensor::Tensor(void* data, Shape shape, DType dtype, Device device)
    : data_(data), shape_(shape), strides_(contiguous_strides(shape)), dtype_(dtype),
      device_(device) {}

Tensor::Tensor(void* data, Shape shape, Shape strides, DType dtype, Device device)
    : data_(data), shape_(shape), strides_(strides), dtype_(dtype), device_(device) {
  SDP_CHECK(shape.ndim() == strides.ndim(), "shape ", shape.str(), " and strides ",
            strides.str(), " differ in rank");
}

bool Tensor::is_contiguous() const { return strides_ == contiguous_strides(shape_); }

Tensor Tensor::view(Shape new_shape) const {
  SDP_CHECK(is_contiguous(), "view of a non-contiguous tensor ", describe());
  SDP_CHECK(new_shape.numel() == numel(), "cannot view ", describe(), " as ",
            new_shape.str(), ": element counts differ");
  return Tensor(data_, new_shape, dtype_, device_);
}

Tensor Tensor::narrow(int dim, int64_t start, int64_t length) const {
  if (dim < 0) dim += ndim();
  SDP_CHECK(dim >= 0 && dim < ndim(), "narrow: dim out of range for ", describe());
  SDP_CHECK(start >= 0 && length >= 0 && start + length <= shape_[dim], "narrow: range [",
            start, ", ", start + length, ") outside dim ", dim, " of ", describe());
  Shape s = shape_;
  s[dim] = length;
  char* p = static_cast<char*>(data_) +
            static_cast<size_t>(start * strides_[dim]) * dtype_size(dtype_);
  return Tensor(p, s, strides_, dtype_, device_);
}

std::string Tensor::describe() const {
  return format(dtype_name(dtype_), ' ', device_name(device_), ' ', shape_.str());
}

namespace {
size_t checked_bytes(const Shape& shape, DType dtype) {
  size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(shape.numel()), dtype_size(dtype), &bytes))
    fail("a ", dtype_name(dtype), " tensor of shape ", shape.str(),
         " needs more bytes than size_t can count");
  return bytes;
}
}  // namespace

OwnedTensor::OwnedTensor(Allocator& allocator, Shape shape, DType dtype, MemCategory category)
    : storage(allocator, checked_bytes(shape, dtype), category),
      view(storage.data(), shape, dtype, allocator.device()) {}

void expect_shape(const Tensor& t, const Shape& shape, const char* op, const char* arg) {
  if (t.shape() != shape)
    fail(op, ": ", arg, " has shape ", t.shape().str(), ", expected ", shape.str());
}

void expect_dtype(const Tensor& t, DType dtype, const char* op, const char* arg) {
  if (t.dtype() != dtype)
    fail(op, ": ", arg, " has dtype ", dtype_name(t.dtype()), ", expected ", dtype_name(dtype));
}

void expect_contiguous(const Tensor& t, const char* op, const char* arg) {
  if (!t.is_contiguous()) fail(op, ": ", arg, " must be contiguous, got ", t.describe());
}

void expect_same_device(const Tensor& a, const Tensor& b, const char* op) {
  if (a.device() != b.device())
    fail(op, ": tensors on different devices (", device_name(a.device()), " and ",
         device_name(b.device()), ")");
}

}  // namespace sdp
