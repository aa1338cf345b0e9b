#include "engine/train/train_config.h"

#include <limits>
#include <type_traits>

#include "engine/core/error.h"

namespace sdp {
namespace {

// Reads one field. Integer fields take only JSON integers in the range of
// their type: nlohmann would otherwise truncate 2.5 to 2, wrap -1 into a
// huge seed, and convert 1e30 with undefined behaviour.
template <typename T>
void read_field(const std::string& key, const nlohmann::json& value, T& out) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using Limits = std::numeric_limits<T>;
    const auto range = [&] {
      return format(" (valid: an integer in [", +Limits::min(), ", ", +Limits::max(), "])");
    };
    if (!value.is_number_integer())
      fail("config: field '", key, "' = ", value.dump(), " is not an integer", range());
    if (value.is_number_unsigned()) {
      const uint64_t v = value.get<uint64_t>();
      if (v > static_cast<uint64_t>(Limits::max()))
        fail("config: field '", key, "' = ", v, " is out of range", range());
      out = static_cast<T>(v);
    } else {
      const int64_t v = value.get<int64_t>();
      if ((std::is_unsigned_v<T> && v < 0) ||
          (std::is_signed_v<T> && (v < static_cast<int64_t>(Limits::min()) ||
                                   v > static_cast<int64_t>(Limits::max()))))
        fail("config: field '", key, "' = ", v, " is out of range", range());
      out = static_cast<T>(v);
    }
  } else {
    static_assert(std::is_floating_point_v<T> || std::is_same_v<T, bool> ||
                  std::is_same_v<T, std::string>);
    // Checked here: nlohmann would read true as 1.0 into a double field.
    bool type_ok = value.is_string();
    if constexpr (std::is_floating_point_v<T>) type_ok = value.is_number();
    if constexpr (std::is_same_v<T, bool>) type_ok = value.is_boolean();
    if (!type_ok)
      fail("config: field '", key, "' has the wrong type (", value.type_name(),
           "; expected the type of its default ", nlohmann::json(out).dump(), ")");
    value.get_to(out);
  }
}

}  // namespace

// One table of fields serves to_json, from_json and the unknown-key check.
#define SDP_TRAIN_CONFIG_FIELDS(X)                                                      \
  X(model) X(data) X(batch) X(seq) X(grad_accum) X(steps) X(lr) X(min_lr) X(warmup)      \
  X(weight_decay) X(beta1) X(beta2) X(eps) X(grad_clip) X(eval_every) X(eval_batches) X(recalibration_images)     \
  X(seed) X(device) X(dtype) X(threads) X(strategy) X(active_fraction) X(plan)            \
  X(plan_seed) X(ffn_groups) X(head_groups) X(channel_groups) X(comm_timeout) X(bucket_mb) X(grad_reduce_dtype) X(emulate_world)              \
  X(emulate_rank) X(save_dir) X(save_every) X(resume) X(metrics) X(progress)

nlohmann::json TrainConfig::to_json() const {
  nlohmann::json j;
#define SDP_TO_JSON(f) j[#f] = f;
  SDP_TRAIN_CONFIG_FIELDS(SDP_TO_JSON)
#undef SDP_TO_JSON
  return j;
}

TrainConfig TrainConfig::from_json(const nlohmann::json& j) {
  if (!j.is_object()) fail("config: expected a JSON object, got ", j.type_name());
  TrainConfig c;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    bool known = false;
#define SDP_FROM_JSON(f)                                                                  \
  if (key == #f) {                                                                        \
    known = true;                                                                         \
    read_field(key, it.value(), c.f);                                                     \
  }
    SDP_TRAIN_CONFIG_FIELDS(SDP_FROM_JSON)
#undef SDP_FROM_JSON
    if (!known) {
      std::string valid;
#define SDP_NAME(f) valid += std::string(valid.empty() ? "" : ", ") + #f;
      SDP_TRAIN_CONFIG_FIELDS(SDP_NAME)
#undef SDP_NAME
      fail("config: unknown field '", key, "' (valid fields: ", valid, ")");
    }
  }
  return c;
}

void TrainConfig::validate() const {
  auto at_least = [](const char* field, int64_t v, int64_t lo) {
    if (v < lo) fail("config: ", field, " = ", v, " is invalid (valid: >= ", lo, ")");
  };
  // Interval [lo, hi] with either end open; hi_name describes hi when it is
  // another field (min_lr's upper bound is lr).
  auto in_range = [](const char* field, double v, double lo, double hi, bool open_lo,
                     bool open_hi = false, const char* hi_name = "") {
    if (!(open_lo ? v > lo : v >= lo) || !(open_hi ? v < hi : v <= hi))
      fail("config: ", field, " = ", v, " is invalid (valid: ", open_lo ? "(" : "[", lo, ", ",
           hi_name, hi, open_hi ? ")" : "]", ")");
  };
  auto non_negative = [](const char* field, double v) {
    if (!(v >= 0)) fail("config: ", field, " = ", v, " is invalid (valid: >= 0)");
  };
  at_least("batch", batch, 1);
  at_least("seq", seq, 1);
  at_least("grad_accum", grad_accum, 1);
  at_least("steps", steps, 0);
  at_least("warmup", warmup, 0);
  at_least("eval_every", eval_every, 0);
  at_least("eval_batches", eval_batches, 1);
  at_least("recalibration_images", recalibration_images, 0);
  at_least("save_every", save_every, 0);
  at_least("threads", threads, 0);
  in_range("lr", lr, 0, 10, true);
  in_range("min_lr", min_lr, 0, lr, false, false, "lr = ");
  in_range("weight_decay", weight_decay, 0, 1, false);
  in_range("beta1", beta1, 0, 1, false, true);
  in_range("beta2", beta2, 0, 1, false, true);
  in_range("eps", eps, 0, 1, true);
  non_negative("grad_clip", grad_clip);
  if (device != "cpu" && device != "meta" && device != "cuda")
    fail("config: device = '", device, "' is invalid (valid: cpu, meta, cuda)");
  if (dtype != "f32" && dtype != "f64" && dtype != "bf16")
    fail("config: dtype = '", dtype, "' is invalid (valid: f32, f64, bf16)");
  if (dtype == "bf16" && device == "cpu")
    fail("config: dtype = 'bf16' needs device cuda (or meta for a dry run); the CPU kernels "
         "compute in f32 or f64");
  if (dtype == "f64" && device == "cuda")
    fail("config: dtype = 'f64' is CPU-only (valid on cuda: f32, bf16)");
  const bool known_strategy = strategy == "ddp" || strategy == "b-sdp" || strategy == "n-sdp" ||
                              strategy == "bb-sdp" || strategy == "nb-sdp";
  if (!known_strategy)
    fail("config: strategy = '", strategy,
         "' is invalid (valid: ddp, b-sdp, n-sdp, bb-sdp, nb-sdp)");
  in_range("active_fraction", active_fraction, 0, 1, true);
  if (grad_reduce_dtype != "f32" && grad_reduce_dtype != "bf16")
    fail("config: grad_reduce_dtype = '", grad_reduce_dtype, "' is invalid (valid: f32, bf16)");
  if (grad_reduce_dtype == "bf16" && device == "cpu")
    fail("config: grad_reduce_dtype = 'bf16' needs device cuda (or meta for a dry run); MPI "
         "cannot reduce bf16 host buffers");
  if (!(bucket_mb == -1 || bucket_mb >= 0))
    fail("config: bucket_mb = ", bucket_mb, " is invalid (valid: -1 = auto, 0 = no buckets, or > 0 MiB)");
  if (strategy == "ddp" && active_fraction != 1.0)
    fail("config: active_fraction = ", active_fraction,
         " needs an SDP strategy (ddp trains the whole model on every rank: C = 1)");
  if (plan != "cyclic" && plan != "random")
    fail("config: plan = '", plan, "' is invalid (valid: cyclic, random)");
  at_least("ffn_groups", ffn_groups, 0);
  at_least("head_groups", head_groups, 0);
  at_least("channel_groups", channel_groups, 0);
  non_negative("comm_timeout", comm_timeout);
  at_least("emulate_world", emulate_world, 0);
  if (emulate_world > 0 && (emulate_rank < 0 || emulate_rank >= emulate_world))
    fail("config: emulate_rank = ", emulate_rank, " is invalid (valid: [0, emulate_world - 1 = ",
         emulate_world - 1, "])");
  if (emulate_world == 0 && emulate_rank != 0)
    fail("config: emulate_rank = ", emulate_rank, " needs emulate_world to be set");
  if (save_every > 0 && save_dir.empty())
    fail("config: save_every = ", save_every, " needs save_dir to be set");
}

}  // namespace sdp
