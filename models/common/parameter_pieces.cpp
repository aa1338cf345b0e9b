#include "models/common/parameter_pieces.h"

#include <cstring>
#include <map>

namespace sdp {

std::vector<FullTensor> full_tensors(const ParameterSet& params) {
  std::vector<FullTensor> out;
  std::map<std::string, size_t> index;
  for (int id = 0; id < params.count(); ++id) {
    const ParamDecl& d = params.decl(id);
    auto [it, fresh] = index.emplace(d.full_name, out.size());
    if (fresh) out.push_back({d.full_name, d.full_shape, {}});
    out[it->second].parts.push_back(id);
  }
  return out;
}

namespace {
// Walks the runs of a piece: calls f(piece run pointer, full run pointer, bytes).
template <typename F>
void for_piece_rows(const ParamDecl& d, const Tensor& part, const Tensor& full, F f) {
  SDP_CHECK(part.device() == Device::cpu && full.device() == Device::cpu,
            "parameter ", d.name, ": pieces are assembled in host memory");
  SDP_CHECK(part.dtype() == full.dtype(), "parameter ", d.name, ": dtype ",
            dtype_name(part.dtype()), " against full tensor ", dtype_name(full.dtype()));
  expect_shape(part, d.shape, "parameter pieces", d.name.c_str());
  expect_shape(full, d.full_shape, "parameter pieces", d.full_name.c_str());
  const size_t e = dtype_size(part.dtype());
  auto* p = static_cast<char*>(part.raw());
  auto* q = static_cast<char*>(full.raw());
  if (!d.is_piece()) {
    f(p, q, static_cast<size_t>(part.numel()) * e);
    return;
  }
  // A piece is [outer, length, inner] inside the full [outer, full, inner]:
  // one contiguous run of length * inner elements per outer index.
  int64_t outer = 1, inner = 1;
  for (int a = 0; a < d.piece_axis; ++a) outer *= d.shape[a];
  for (int a = d.piece_axis + 1; a < d.shape.ndim(); ++a) inner *= d.shape[a];
  const int64_t run = d.shape[d.piece_axis] * inner, full_run = d.full_shape[d.piece_axis] * inner;
  for (int64_t o = 0; o < outer; ++o)
    f(p + static_cast<size_t>(o * run) * e,
      q + static_cast<size_t>(o * full_run + d.piece_start * inner) * e,
      static_cast<size_t>(run) * e);
}
}  // namespace

void copy_part_to_full(const ParamDecl& d, const Tensor& part, Tensor& full) {
  for_piece_rows(d, part, full, [](char* p, char* q, size_t n) { std::memcpy(q, p, n); });
}

void copy_full_to_part(const ParamDecl& d, const Tensor& full, Tensor& part) {
  for_piece_rows(d, part, full, [](char* p, char* q, size_t n) { std::memcpy(p, q, n); });
}

}  // namespace sdp
