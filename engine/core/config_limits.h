#pragma once
// Upper bounds of the count fields of a run's configuration. Far above any
// real run, so that a typo fails at once, and small enough that every product
// the engine forms from them (tokens of a micro-batch times the model width,
// examples of a step over the whole world, byte counts) fits in int64 with
// room to spare. Here, at the bottom, because every layer that checks a
// count (the parallel settings, the trainer, the front ends) reads them.
#include <cstdint>

namespace sdp::config_limits {
inline constexpr int64_t kBatch = int64_t{1} << 24;             // examples per micro-batch
inline constexpr int64_t kSeq = int64_t{1} << 24;               // tokens per sequence
inline constexpr int64_t kMicroBatchTokens = int64_t{1} << 31;  // batch * seq
inline constexpr int64_t kGradAccum = int64_t{1} << 20;
inline constexpr int64_t kRankStepTokens = int64_t{1} << 40;    // batch * seq * grad_accum
inline constexpr int64_t kSteps = int64_t{1} << 40;  // steps and every count of steps
inline constexpr int64_t kEvalBatches = int64_t{1} << 20;
inline constexpr int64_t kImages = int64_t{1} << 40;            // recalibration_images
inline constexpr int64_t kGroups = int64_t{1} << 16;            // ffn/head/channel groups
inline constexpr int64_t kWorld = 65536;                        // emulate_world
inline constexpr int64_t kPipelineStages = 4096;
inline constexpr double kBucketMb = 1 << 20;                    // 1 TiB
inline constexpr double kCommTimeout = 365.0 * 24 * 3600;       // a year, in seconds
}  // namespace sdp::config_limits
