#pragma once
// A pipelined rank's figures of one step: its stage, the schedule, the
// measured busy time and bubble, and the bytes it sent to each neighbour.
// See docs/ARCHITECTURE.md "Measurements".
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace sdp {

struct StageStats {
  int stage = 0;               // this rank's stage
  int stages = 1;              // P
  int replica = 0;             // this rank's replica (mesh coordinate)
  std::string schedule;        // its name, as configured
  int64_t micro_batches = 0;   // M
  std::string blocks;          // the stage's blocks, "input + blocks 0-3"
  double seconds = 0;          // the stage's makespan in the step
  double busy_seconds = 0;     // inside compute actions
  double bubble_fraction = 0;  // (seconds - busy_seconds) / seconds
  int64_t activation_bytes_sent = 0;  // to the next stage (SEND_F payloads)
  int64_t gradient_bytes_sent = 0;    // to the previous stage (SEND_B payloads)

  // {"stage", "stages", "replica", "schedule", "micro_batches", "blocks",
  //  "seconds", "busy_seconds", "bubble_fraction", "activation_bytes_sent",
  //  "gradient_bytes_sent"}
  nlohmann::json to_json() const;
};

}  // namespace sdp
