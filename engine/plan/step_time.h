#pragma once
// The planner's step-time model: what one training step of a rank costs on
// a device of a given FLOP rate and a network of a given link, from what the
// meta step counted (FLOPs, and each collective's ring bytes and latency
// steps, comm/communicator.h). Nothing here is measured; calibrate() sets the
// rates from a real run's metrics.
//
//   compute  = flops / flops_per_second
//   a group's collectives = latency_steps x latency + sent_bytes / bandwidth,
//              bandwidth the intra-node one when all the group's ranks share a
//              node (rank / ranks_per_node), else the inter-node one
//   exposed  = the collectives that wait in the step: all of them without
//              overlap; with overlap (the CUDA engine: gradient buckets on the
//              NCCL stream, prefetched gathers of full sharding) the
//              all-gathers, reduce-scatters and all-reduces hide behind the
//              compute up to its length, broadcasts (backward masking's
//              updated values, sent after the optimizer) and sends never do
//   step     = compute + exposed
// A pipelined rank's compute and its sends to the neighbours are replaced by
// the pipeline simulator's makespan of the schedule (engine/pipeline), with
// each stage's compute split F : B = 1 : 2 (I = W = B / 2 under 2BP) and the
// link's latency and inter-node bandwidth per boundary message; its replica
// averaging comes after the flush and adds whole.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sdp {

namespace comm {
class CommStats;  // comm/communicator.h
}

struct LinkModel {
  double latency_seconds = 5e-6;             // alpha: per latency step
  double intra_node_bytes_per_second = 4e11; // NVLink-class
  double inter_node_bytes_per_second = 5e10; // 400 Gb/s
  int ranks_per_node = 8;                    // 0: every rank on one node
  bool overlap = true;                       // see the header comment
  nlohmann::json to_json() const;
};

struct StepTimeModel {
  double flops_per_second = 4e14;  // sustained, per rank (an H100/H200-class bf16 rate)
  LinkModel link;
  nlohmann::json to_json() const;
};

struct StepTimeEstimate {
  double compute_seconds = 0;       // FLOPs / rate (a pipeline: its makespan)
  double comm_seconds = 0;          // every collective, overlapped or not
  double exposed_comm_seconds = 0;  // what the step waits for
  double seconds = 0;               // compute + exposed
  nlohmann::json to_json() const;
};

// One rank's step from its FLOPs and its communication statistics of the
// step, by group ("world", or "ranks:" and a rank list).
StepTimeEstimate estimate_step(const StepTimeModel& model, double flops,
                               const comm::CommStats& comm, int world);

// A pipelined job's step: stage s runs stage_flops[s] over M micro-batches
// of `schedule` (a schedule name), boundary_bytes[s] per message between
// stages s and s + 1; replica_comm is the communication of the rank whose
// averaging among its stage's replicas takes longest (sends to neighbours
// are in the makespan, not counted again).
StepTimeEstimate estimate_pipeline_step(const StepTimeModel& model,
                                        const std::vector<double>& stage_flops,
                                        const std::vector<int64_t>& boundary_bytes,
                                        const std::string& schedule, int micro_batches,
                                        const comm::CommStats& replica_comm, int world);

// The seconds of `comm`'s collectives other than its sends to neighbouring
// stages: what estimate_pipeline_step adds for a rank's replica averaging.
double replica_comm_seconds(const StepTimeModel& model, const comm::CommStats& comm, int world);

// What a real run measured, from one metrics JSONL file of sdp-train
// (its step records; the first step, which warms caches and allocators,
// is left out when there are more). engine/plan/calibration.cpp.
struct MeasuredRun {
  std::string path;
  int world = 1;
  std::vector<double> seconds, flops, wait_seconds, sent_bytes, latency_steps;
  // Set when the file's last line was cut off (a run killed mid-write) and
  // skipped: a warning for the user, naming the file and line.
  std::string skipped_cut_line;
  double median_seconds() const;
};

// Step-record fields out of range, of the wrong type or null fail naming the
// file, the line and the field: "seconds" in (0, kMaxStepSeconds], "flops"
// in [0, 1e30], the comm record's "wait_seconds" in [0, kMaxStepSeconds],
// "sent_bytes" and "latency_steps" in [0, 1e30]. A line that is not JSON
// fails, except a last line without its newline: skipped (skipped_cut_line).
MeasuredRun read_metrics(const std::string& path);

// What a calibration may fit: rates beyond these come from measurements no
// device or link makes, and are refused rather than printed as inf or 0.
namespace calibration_limits {
inline constexpr double kMaxStepSeconds = 1e6;      // about 12 days
inline constexpr double kMinFlopsPerSecond = 1e3;
inline constexpr double kMaxFlopsPerSecond = 1e18;  // 1000 x an H200's bf16 rate
inline constexpr double kMaxLatencySeconds = 1;     // per latency step
inline constexpr double kMinBytesPerSecond = 1e3;
inline constexpr double kMaxBytesPerSecond = 1e18;  // also "a free link" (no bytes explain waits)
}  // namespace calibration_limits

// Rates that make the model reproduce measured runs (one or more):
// flops_per_second = median of flops / (seconds - wait_seconds) over their
// steps; then the link's latency and bandwidth by least squares of
// wait_seconds = latency_steps x latency + sent_bytes / bandwidth over the
// steps (one bandwidth: the runs are on one node or counted as such), both
// kept non-negative; with no collectives in them the link stays as given.
// The fitted model's overlap is off: a run's wait time is what it exposed.
// Fails naming the files when a fitted rate lies outside calibration_limits.
StepTimeModel calibrate(const std::vector<MeasuredRun>& runs, const StepTimeModel& start);

}  // namespace sdp
