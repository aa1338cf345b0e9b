#include "engine/train/train_config.h"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <limits>
#include <thread>

#include "engine/checkpoint/byte_size.h"

#include "engine/core/device_target.h"
#include "engine/core/error.h"
#include "engine/core/json_integer.h"

namespace sdp {

// The CPUs of this process's affinity mask (what OpenMP's
// omp_get_num_procs() counts), read without OpenMP so that the config layer
// builds alone (the fuzz targets compile it with another compiler).
int max_threads() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

nlohmann::json TrainConfig::to_json() const {
  nlohmann::json j;
#define SDP_TO_JSON(f) j[#f] = f;
#define SDP_TO_JSON_PARALLEL(f) j[#f] = parallel.f;
  SDP_TRAIN_CONFIG_FIELDS(SDP_TO_JSON)
  SDP_PARALLEL_SETTINGS_FIELDS(SDP_TO_JSON_PARALLEL)
#undef SDP_TO_JSON_PARALLEL
#undef SDP_TO_JSON
  return j;
}

namespace {

[[noreturn]] void wrong_type(const std::string& key, const nlohmann::json& v,
                             const char* expected) {
  throw ConfigFieldError(key, format("config: field '", key, "' has the wrong type (",
                                     v.type_name(), " ", v.dump(), "; expected ", expected, ")"));
}

void read_field(const std::string& key, const nlohmann::json& v, std::string& out) {
  if (!v.is_string()) wrong_type(key, v, "a string");
  out = v.get<std::string>();
}

void read_field(const std::string& key, const nlohmann::json& v, bool& out) {
  if (!v.is_boolean()) wrong_type(key, v, "true or false");
  out = v.get<bool>();
}

void read_field(const std::string& key, const nlohmann::json& v, double& out) {
  if (!v.is_number()) wrong_type(key, v, "a number");
  out = v.get<double>();
}

// Integers exactly: a float (even 4.0) or a value outside the field's type
// is an error, never truncated or wrapped.
template <typename Int>
void read_field(const std::string& key, const nlohmann::json& v, Int& out) {
  using limits = std::numeric_limits<Int>;
  const std::string valid = format("an integer in [", +limits::min(), ", ", +limits::max(), "]");
  if (!v.is_number_integer()) wrong_type(key, v, valid.c_str());
  // The type is right, so only the range can be wrong: checked exactly by the
  // shared reader (engine/core/json_integer.h), in the config's own wording
  // and as a ConfigFieldError that names the field.
  if (!json_integer_in_range(v, static_cast<int64_t>(limits::min()),
                             static_cast<uint64_t>(limits::max())))
    throw ConfigFieldError(key, format("config: field '", key, "' = ", v.dump(),
                                       " is out of range (valid: ", valid, ")"));
  out = json_integer<Int>(v, format("config: field '", key, "'"));
}

}  // namespace

TrainConfig TrainConfig::from_json(const nlohmann::json& j) {
  if (!j.is_object()) fail("config: expected a JSON object, got ", j.type_name());
  TrainConfig c;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    bool known = false;
#define SDP_FROM_JSON(f)              \
  if (key == #f) {                    \
    known = true;                     \
    read_field(key, it.value(), c.f); \
  }
#define SDP_FROM_JSON_PARALLEL(f)              \
  if (key == #f) {                             \
    known = true;                              \
    read_field(key, it.value(), c.parallel.f); \
  }
    SDP_TRAIN_CONFIG_FIELDS(SDP_FROM_JSON)
    SDP_PARALLEL_SETTINGS_FIELDS(SDP_FROM_JSON_PARALLEL)
#undef SDP_FROM_JSON_PARALLEL
#undef SDP_FROM_JSON
    if (!known) {
      std::string valid;
#define SDP_NAME(f) valid += std::string(valid.empty() ? "" : ", ") + #f;
      SDP_TRAIN_CONFIG_FIELDS(SDP_NAME)
      SDP_PARALLEL_SETTINGS_FIELDS(SDP_NAME)
#undef SDP_NAME
      throw ConfigFieldError(
          key, format("config: unknown field '", key, "' (valid fields: ", valid, ")"));
    }
  }
  return c;
}

void TrainConfig::derive_defaults(const std::set<std::string>& given) {
  if (!given.count("min_lr")) {
    // The fraction as a decimal would give it, to 15 significant digits: lr
    // 0.003 gives exactly 0.0003 (the fixed default it replaces), not
    // 0.00030000000000000003, and configs print it as written.
    char text[32];
    std::snprintf(text, sizeof text, "%.15g", kDefaultMinLrFraction * lr);
    min_lr = std::strtod(text, nullptr);
  }
  if (!given.count("active_fraction"))
    parallel.active_fraction = ParallelSettings::default_active_fraction(parallel.strategy);
}

void TrainConfig::validate() const {
  namespace L = config_limits;
  auto invalid = [](const char* field, const auto&... parts) {
    throw ConfigFieldError(field, format("config: ", field, " = ", parts...));
  };
  // A count in [lo, hi]; `why` says what bounds it where that is not obvious.
  auto count = [&](const char* field, int64_t v, int64_t lo, int64_t hi, const char* why = "") {
    if (v < lo || v > hi) invalid(field, v, " is invalid (valid: [", lo, ", ", hi, "]", why, ")");
  };
  // Interval [lo, hi] with either end open.
  auto in_range = [&](const char* field, double v, double lo, double hi, bool open_lo,
                      bool open_hi = false) {
    if (!(open_lo ? v > lo : v >= lo) || !(open_hi ? v < hi : v <= hi))
      invalid(field, v, " is invalid (valid: ", open_lo ? "(" : "[", lo, ", ", hi,
              open_hi ? ")" : "]", ")");
  };
  auto non_negative = [&](const char* field, double v) {
    if (!(v >= 0)) invalid(field, v, " is invalid (valid: >= 0)");
  };
  count("batch", batch, 1, L::kBatch);
  count("seq", seq, 1, L::kSeq);
  // Products of bounded factors: checked without overflow, as quotients.
  if (seq > L::kMicroBatchTokens / batch)
    invalid("batch", batch, " with seq = ", seq, " is invalid: batch * seq must be <= ",
            L::kMicroBatchTokens, " tokens per micro-batch");
  count("grad_accum", grad_accum, 1, L::kGradAccum);
  if (grad_accum > L::kRankStepTokens / (batch * seq))
    invalid("grad_accum", grad_accum, " with batch * seq = ", batch * seq,
            " is invalid: batch * seq * grad_accum must be <= ", L::kRankStepTokens,
            " tokens per rank and step");
  count("steps", steps, 0, L::kSteps);
  count("warmup", warmup, 0, L::kSteps);
  count("eval_every", eval_every, 0, L::kSteps);
  count("eval_batches", eval_batches, 1, L::kEvalBatches);
  count("recalibration_images", recalibration_images, 0, L::kImages);
  count("save_every", save_every, 0, L::kSteps);
  count("skip_nonfinite", skip_nonfinite, 0, L::kSteps);
  count("log_every", log_every, 0, L::kSteps);
  // More OpenMP threads than logical CPUs only oversubscribe them, and a
  // huge team exhausts the runtime's own resources.
  count("threads", threads, 0, max_threads(),
        ": 0 = the default, at most the logical CPUs this process may use");
  in_range("lr", lr, 0, 10, true);
  // Its upper bound is another field, and a config without it takes a
  // fraction of lr: the message says both.
  if (!(min_lr >= 0 && min_lr <= lr))
    invalid("min_lr", min_lr, " is invalid (valid: [0, lr = ", lr, "]); left unset it is ",
            kDefaultMinLrFraction, " lr");
  in_range("weight_decay", weight_decay, 0, 1, false);
  in_range("beta1", beta1, 0, 1, false, true);
  in_range("beta2", beta2, 0, 1, false, true);
  in_range("eps", eps, 0, 1, true);
  non_negative("grad_clip", grad_clip);
  if (!(drop_path == -1 || (drop_path >= 0 && drop_path < 1)))
    invalid("drop_path", drop_path, " is invalid (valid: -1 = the model's default, or [0, 1))");
  if (!DeviceTarget::known(device))
    invalid("device", "'", device, "' is invalid (valid: ", DeviceTarget::kValidNames, ")");
  const DeviceTarget target = DeviceTarget::parse(device);
  if (dtype != "f32" && dtype != "f64" && dtype != "bf16")
    invalid("dtype", "'", dtype, "' is invalid (valid: f32, f64, bf16)");
  if (dtype == "bf16" && target.cpu_kernels())
    invalid("dtype", "'bf16' needs device cuda (or meta for a dry run); the CPU kernels "
            "compute in f32 or f64");
  if (dtype == "f64" && target.device == Device::cuda)
    invalid("dtype", "'f64' is CPU-only (valid on cuda: f32, bf16)");
  parallel.validate();
  if (grad_reduce_dtype != "f32" && grad_reduce_dtype != "bf16")
    invalid("grad_reduce_dtype", "'", grad_reduce_dtype, "' is invalid (valid: f32, bf16)");
  if (grad_reduce_dtype == "bf16" && target.cpu_kernels())
    invalid("grad_reduce_dtype", "'bf16' needs device cuda (or meta for a dry run); MPI "
            "cannot reduce bf16 host buffers");
  if (grad_reduce_dtype == "bf16" && parallel.shard_level() != ShardLevel::none)
    invalid("grad_reduce_dtype", "'bf16' with shard = ", shard_level_name(parallel.shard_level()),
            " is not supported: sharded gradients are reduce-scattered in their own dtype (f32); "
            "use grad_reduce_dtype f32 with sharding");
  if (!(bucket_mb == -1 || (bucket_mb >= 0 && bucket_mb <= L::kBucketMb)))
    invalid("bucket_mb", bucket_mb, " is invalid (valid: -1 = auto, 0 = no buckets, or (0, ",
            static_cast<int64_t>(L::kBucketMb), "] MiB)");
  if (!(comm_timeout >= 0 && comm_timeout <= L::kCommTimeout))
    invalid("comm_timeout", comm_timeout, " is invalid (valid: [0, ",
            static_cast<int64_t>(L::kCommTimeout), "] seconds: 0 = wait forever, at most a year)");
  if (parallel.pipelined() && grad_accum < parallel.pipeline_stages)
    invalid("grad_accum", grad_accum, " micro-batches for ", parallel.pipeline_stages,
            " pipeline stages is invalid: with M < P some stage idles most of every step "
            "(valid: grad_accum, the pipeline's --micro-batches, >= pipeline_stages = ",
            parallel.pipeline_stages, ")");
  count("emulate_world", emulate_world, 0, L::kWorld, ": 0 = off");
  count("world", world, 0, L::kWorld, ": 0 = any");
  if (emulate_world > 0 && emulate_world % parallel.pipeline_stages != 0)
    invalid("emulate_world", emulate_world, " is not a multiple of pipeline_stages = ",
            parallel.pipeline_stages, " (the world is stages x replicas)");
  if (emulate_world > 0 && (emulate_rank < 0 || emulate_rank >= emulate_world))
    invalid("emulate_rank", emulate_rank, " is invalid (valid: [0, emulate_world - 1 = ",
            emulate_world - 1, "])");
  if (emulate_world == 0 && emulate_rank != 0)
    invalid("emulate_rank", emulate_rank, " needs emulate_world to be set");
  checkpoint::parse_byte_size(max_shard_size, "config: max_shard_size");
  if (checkpoint_format != "hf" && checkpoint_format != "sharded")
    invalid("checkpoint_format", "'", checkpoint_format, "' is invalid (valid: hf, sharded)");
  if (save_every > 0 && save_dir.empty())
    invalid("save_every", save_every, " needs save_dir to be set");
}

}  // namespace sdp
