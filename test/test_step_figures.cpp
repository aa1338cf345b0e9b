// A step's typed figures write the JSON that metrics files, sdp-plan's
// reports and the calibration reader share: the same keys, values and
// number types as every earlier metrics file.
#include <catch2/catch.hpp>

#include "engine/metrics/memory_report.h"
#include "engine/metrics/stage_stats.h"

using namespace sdp;

TEST_CASE("a memory snapshot writes the metrics record's memory figures", "[metrics]") {
  MemoryStats s;
  s.set_phase(Phase::forward);
  s.on_alloc(MemCategory::param, 1000);
  s.on_alloc(MemCategory::activation, 300);
  s.set_phase(Phase::backward);
  s.on_alloc(MemCategory::grad, 1000);  // the peak: 2300 B
  s.on_free(MemCategory::activation, 300);
  s.set_phase(Phase::optimizer);
  s.on_alloc(MemCategory::optim, 200);
  MemorySnapshot m = MemorySnapshot::of(s);
  CHECK(m.peak_total == 2300);
  CHECK(m.at_peak[MemCategory::activation] == 300);
  CHECK(m.peak[MemCategory::activation] == 300);
  CHECK(m.current[MemCategory::activation] == 0);
  CHECK(m.current_total == 2200);
  CHECK(m.phase_peak[Phase::backward] == 2300);
  CHECK(m.phase_peak[Phase::optimizer] == 2200);

  const nlohmann::json j = m.to_json();
  CHECK(j.size() == 3);  // a host allocator reserves nothing; no device asked
  CHECK(j["current"].size() == kMemCategoryCount + 1);
  CHECK(j["current"]["total"] == 2200);
  CHECK(j["current"]["grad"] == 1000);
  CHECK(j["peak"]["total"] == 2300);
  CHECK(j["peak"]["at_peak"]["activation"] == 300);
  CHECK(j["peak"]["at_peak"]["optim"] == 0);
  CHECK(j["peak"]["by_category"]["optim"] == 200);
  CHECK(j["peak"]["by_category"].size() == kMemCategoryCount);
  CHECK(j["phase_peak"] == nlohmann::json{{"backward", 2300}, {"communication", 0},
                                          {"forward", 1300}, {"optimizer", 2200}});
  CHECK(j["peak"]["total"].is_number_unsigned());

  s.set_reserved(4096);
  m = MemorySnapshot::of(s, DeviceMemoryInfo{100, 400});
  m.gemm_workspace = 64;
  const nlohmann::json d = m.to_json();
  CHECK(d["reserved"] == nlohmann::json{{"current", 4096}, {"peak", 4096}});
  CHECK(d["device"] == nlohmann::json{{"free", 100}, {"total", 400}});
  CHECK(d["gemm_workspace"] == 64);
}

TEST_CASE("stage statistics write the metrics record's pipeline figures", "[metrics]") {
  StageStats s;
  s.stage = 1;
  s.stages = 2;
  s.replica = 3;
  s.schedule = "1f1b";
  s.micro_batches = 4;
  s.blocks = "blocks 2-3 + output";
  s.seconds = 0.5;
  s.busy_seconds = 0.4;
  s.bubble_fraction = 0.2;
  s.activation_bytes_sent = 0;
  s.gradient_bytes_sent = 4096;
  const nlohmann::json j = s.to_json();
  CHECK(j.dump() ==
        R"({"activation_bytes_sent":0,"blocks":"blocks 2-3 + output","bubble_fraction":0.2,)"
        R"("busy_seconds":0.4,"gradient_bytes_sent":4096,"micro_batches":4,"replica":3,)"
        R"("schedule":"1f1b","seconds":0.5,"stage":1,"stages":2})");
}
