#pragma once
// Helpers for the checkpoint tests: raw file access (TempDir and
// write_bytes come from test_temp_dir.h), and the resume check the model
// families' trainer tests share.
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/train/checkpoint_dir.h"
#include "engine/train/trainer.h"
#include "test/test_temp_dir.h"

namespace sdp::testing {

inline std::vector<uint8_t> read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Names of the entries directly inside `dir`.
inline std::set<std::string> list_dir(const std::filesystem::path& dir) {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    names.insert(e.path().filename().string());
  return names;
}

// `before` + `after` steps of run `c` straight, and `before` steps, a
// checkpoint into `dir` and `after` more in a fresh trainer, must give the
// same losses and then the same evaluation, bit for bit. Returns the
// straight run's losses.
inline std::vector<double> require_bit_identical_resume(const TrainConfig& c,
                                                        const std::filesystem::path& dir,
                                                        int before = 3, int after = 3) {
  std::vector<double> straight;
  double straight_eval = 0;
  {
    Trainer t(c);
    for (int i = 0; i < before + after; ++i) straight.push_back(t.train_step().loss);
    straight_eval = t.evaluate();
  }
  std::vector<double> resumed;
  {
    Trainer t(c);
    for (int i = 0; i < before; ++i) resumed.push_back(t.train_step().loss);
    save_and_mark_latest(t, dir);
  }
  Trainer t(c);
  t.load_checkpoint(resolve_checkpoint(dir));
  REQUIRE(t.step() == before);
  for (int i = 0; i < after; ++i) resumed.push_back(t.train_step().loss);
  REQUIRE(resumed == straight);
  REQUIRE(t.evaluate() == straight_eval);
  return straight;
}

}  // namespace sdp::testing
