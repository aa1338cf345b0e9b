// Packs of held neuron groups (models/common/packed_pieces.h): the packed
// weight is the full tensor's rows or columns of the held groups side by
// side, running statistics written back land in their pieces, packed
// gradients add into the trained pieces only, and a trained share holds
// exactly the trained groups' slices of an activation.
#include <catch2/catch.hpp>

#include <vector>

#include "kernels/ops.h"
#include "models/common/packed_pieces.h"

using namespace sdp;

namespace {

// A [4, 3, 2] tensor "w" cut into 4 row groups and a [3, 4, 2] tensor "v"
// cut into 4 column groups; groups 0, 2, 3 are held (three storage groups,
// as three owner sets would make them), group 2 untrained.
struct Fixture {
  CpuAllocator alloc;  // outlives the parameters
  ParameterSet p;
  std::vector<int> rows, cols;  // [group] piece ids
  Fixture() {
    for (int g = 0; g < 4; ++g) p.add_group("owners." + std::to_string(g));
    for (int g = 0; g < 4; ++g) {
      const std::string label = "g" + std::to_string(g);
      rows.push_back(p.declare_piece("w", {4, 3, 2}, 0, g, 1, label, g, InitKind::normal));
      cols.push_back(p.declare_piece("v", {3, 4, 2}, 1, g, 1, label, g, InitKind::normal));
    }
    p.materialize(alloc, DType::f64, {true, false, true, true}, {true, false, false, true});
    p.allocate_grads();
    // Element (i, j, k) of the full tensor holds 100 i + 10 j + k.
    for (int g : {0, 2, 3}) {
      const Tensor w = p.param(rows[static_cast<size_t>(g)]), v = p.param(cols[static_cast<size_t>(g)]);
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 2; ++k) {
          w.data<double>()[j * 2 + k] = 100 * g + 10 * j + k;
          v.data<double>()[j * 2 + k] = 100 * j + 10 * g + k;
        }
    }
  }
  GroupPack pack() const { return held_group_packs(p, rows).at(0); }
  std::vector<int> held(const std::vector<int>& ids) const {
    return {ids[0], ids[2], ids[3]};
  }
};

}  // namespace

TEST_CASE("a pack holds the held groups in order, trained ones marked", "[packs]") {
  Fixture f;
  const auto packs = held_group_packs(f.p, f.rows);
  REQUIRE(packs.size() == 1);
  CHECK(packs[0].groups == std::vector<int>{0, 2, 3});
  CHECK(packs[0].trained == std::vector<int>{0, 2});  // positions of groups 0 and 3
  CHECK(trained_ids(packs[0], f.held(f.rows)) == std::vector<int>{f.rows[0], f.rows[3]});
}

TEST_CASE("packed rows and columns are the full tensor's held slices", "[packs]") {
  Fixture f;
  const PackedTensor w = pack_values(f.p, f.held(f.rows), f.alloc);  // [3, 3, 2]
  const PackedTensor v = pack_values(f.p, f.held(f.cols), f.alloc);  // [3, 3, 2]
  REQUIRE(w.is_copy());
  REQUIRE(w.view.shape() == Shape{3, 3, 2});
  REQUIRE(v.view.shape() == Shape{3, 3, 2});
  const int held[] = {0, 2, 3};
  for (int a = 0; a < 3; ++a)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k) {
        CHECK(w.view.data<double>()[(a * 3 + j) * 2 + k] == 100 * held[a] + 10 * j + k);
        CHECK(v.view.data<double>()[(j * 3 + a) * 2 + k] == 100 * j + 10 * held[a] + k);
      }
  // One group reads its parameter in place.
  const PackedTensor one = pack_values(f.p, {f.cols[2]}, f.alloc);
  CHECK_FALSE(one.is_copy());
  CHECK(one.view.raw() == f.p.param(f.cols[2]).raw());
}

TEST_CASE("unpacking writes a packed copy back into its pieces", "[packs]") {
  Fixture f;
  const std::vector<int> ids = f.held(f.cols);
  const PackedTensor v = pack_values(f.p, ids, f.alloc);
  Tensor t = v.view;
  ops::scale(t, 2.0);
  unpack_values(f.p, ids, v);
  CHECK(f.p.param(f.cols[3]).data<double>()[2 * 2 + 1] == 2 * (100 * 2 + 10 * 3 + 1));
}

TEST_CASE("packed gradients add into each trained piece", "[packs]") {
  Fixture f;
  const GroupPack pack = f.pack();
  const std::vector<int> mine = trained_ids(pack, f.held(f.cols));  // groups 0 and 3
  PackedTensor g = pack_grads(f.p, mine, f.alloc);                   // [3, 2, 2]
  REQUIRE(g.view.shape() == Shape{3, 2, 2});
  for (int64_t i = 0; i < g.view.numel(); ++i) g.view.data<double>()[i] = static_cast<double>(i);
  Tensor before = f.p.grad(f.cols[3]);
  before.data<double>()[0] = 0.5;  // gradients accumulate
  add_packed_grads(f.p, mine, g, f.alloc);
  // Column slot 1 of the pack (group 3), row j, element k: 4 j + 2 + k.
  for (int j = 0; j < 3; ++j)
    for (int k = 0; k < 2; ++k) {
      CHECK(f.p.grad(f.cols[0]).data<double>()[j * 2 + k] == 4 * j + k);
      CHECK(f.p.grad(f.cols[3]).data<double>()[j * 2 + k] == 4 * j + 2 + k + (j + k == 0 ? 0.5 : 0));
    }
}

TEST_CASE("a trained share holds the trained groups' slices of an activation", "[packs]") {
  Fixture f;
  const GroupPack pack = f.pack();  // 3 held groups, positions 0 and 2 trained
  OwnedTensor x(f.alloc, {2, 6, 2}, DType::f64, MemCategory::workspace);  // [B, 3 groups x 2, 2]
  for (int64_t i = 0; i < x->numel(); ++i) x->data<double>()[i] = static_cast<double>(i);
  const PackedTensor s = trained_share(pack, *x, 1, f.alloc);
  REQUIRE(s.view.shape() == Shape{2, 4, 2});
  const int from[] = {0, 1, 4, 5};  // channels of positions 0 and 2
  for (int b = 0; b < 2; ++b)
    for (int c = 0; c < 4; ++c)
      for (int k = 0; k < 2; ++k)
        CHECK(s.view.data<double>()[(b * 4 + c) * 2 + k] == (b * 6 + from[c]) * 2 + k);
  GroupPack all = pack;
  all.trained = {0, 1, 2};
  CHECK(trained_share(all, *x, 1, f.alloc).view.raw() == x->raw());
}
