// Token embedding on CUDA against the CPU: the gather, and the scatter-add of
// backward_weight into an f32 table gradient (accum_dtype) that already
// holds values, with many tokens hitting the same rows.
#include <catch2/catch.hpp>

#include "kernels/ops.h"
#include "test/cuda/cuda_test_support.h"

using namespace sdp;
using namespace sdp::cuda_testing;

TEST_CASE("embedding forward and backward_weight on CUDA match the CPU", "[ops][embedding]") {
  struct Case {
    int64_t vocab, dim, batch, seq;
    int32_t token_range;  // tokens in [0, token_range): small ranges collide
  };
  const Case cases[] = {
      {1000, 96, 2, 150, 1000},  // mostly distinct rows
      {77, 100, 4, 64, 7},       // 256 tokens on 7 rows; rows of 200 bytes in bf16
      {5000, 256, 1, 1, 5000},   // a single token
      {512, 768, 8, 64, 512}};   // a model-sized row
  for (DType dt : kGpuDtypes)
    for (const Case& c : cases) {
      CAPTURE(name_of(dt), c.vocab, c.dim, c.batch, c.seq, c.token_range);
      const std::string shape = " V=" + std::to_string(c.vocab) + " D=" + std::to_string(c.dim) +
                                " N=" + std::to_string(c.batch * c.seq);
      TwinArena a;
      const DType acc = accum_dtype(dt);
      Twin tokens = a.integers({c.batch, c.seq}, 1, 0, c.token_range);
      Twin table = a.uniform({c.vocab, c.dim}, dt, 2, -0.05, 0.05);
      Twin out = a.output({c.batch, c.seq, c.dim}, dt);
      ops::embedding_forward(tokens.dev, table.dev, out.dev);
      ops::embedding_forward(tokens.host, table.host, out.host);
      a.expect_close("embedding_forward out" + shape, out.dev, out.host, kExact);

      Twin dout = a.uniform({c.batch, c.seq, c.dim}, dt, 3, -1, 1);
      Twin dtable = a.uniform({c.vocab, c.dim}, acc, 4, -0.5, 0.5);  // accumulated into
      ops::embedding_backward_weight(tokens.dev, dout.dev, dtable.dev);
      ops::embedding_backward_weight(tokens.host, dout.host, dtable.host);
      a.expect_close("embedding_backward_weight dtable" + shape, dtable.dev, dtable.host,
                     kReduction);
    }
}
