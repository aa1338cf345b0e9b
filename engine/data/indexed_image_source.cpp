#include "engine/data/indexed_image_source.h"

#include <algorithm>
#include <exception>
#include <limits>
#include <numeric>
#include <utility>

#include "engine/core/counter_rng.h"
#include "engine/core/error.h"
#include "engine/core/json_integer.h"
#include "engine/data/image_augment.h"

namespace sdp::data {

std::vector<int32_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  SDP_CHECK(n >= 1 && n <= std::numeric_limits<int32_t>::max(), "cannot permute ", n,
            " images");
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  const uint64_t key =
      splitmix64(splitmix64(seed ^ stable_hash("image-shuffle")) ^ static_cast<uint64_t>(epoch));
  for (int64_t i = n - 1; i > 0; --i) {
    const auto choices = static_cast<double>(i + 1);
    const int64_t j = std::min<int64_t>(
        static_cast<int64_t>(counter_uniform(key, static_cast<uint64_t>(i)) * choices), i);
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

IndexedImageSource::IndexedImageSource(std::string kind, uint64_t seed, Split split,
                                       StreamPart part, ImageSourceOptions options)
    : kind_(std::move(kind)),
      seed_(seed),
      split_(split),
      part_(part),
      augment_(options.augment && split == Split::train),
      shuffle_(options.shuffle && split == Split::train),
      limit_(options.limit) {
  detail::check_stream_part(part);
  if (limit_ < 0) fail(kind_, " image source: limit=", limit_, " is invalid; valid: >= 1");
}

void IndexedImageSource::set_available(int64_t available) {
  SDP_CHECK(size_ == 0, "set_available called twice");
  if (available < 1)
    fail(error_name(), ": the ", split_name(split_), " split holds no images");
  size_ = limit_ > 0 ? std::min(limit_, available) : available;
  if (size_ > std::numeric_limits<int32_t>::max())
    fail(error_name(), ": ", size_, " images in one split are more than this reader indexes (",
         std::numeric_limits<int32_t>::max(), ")");
}

const std::vector<int32_t>& IndexedImageSource::order_of(int64_t epoch) {
  if (epoch != order_epoch_) {
    order_ = epoch_permutation(size_, seed_, epoch);
    order_epoch_ = epoch;
  }
  return order_;
}

int64_t IndexedImageSource::image_at(int64_t position) {
  SDP_CHECK(position >= 0, "negative stream position ", position);
  const int64_t slot = position % size_;
  if (!shuffle_) return slot;
  return order_of(position / size_)[static_cast<size_t>(slot)];
}

int32_t IndexedImageSource::render_into(int64_t index, int64_t epoch, float* image,
                                        float* scratch) const {
  if (!augment_) return load(index, image);
  const int32_t label = load(index, scratch);
  const int64_t pad = crop_padding(image_shape());
  apply_crop_flip(scratch, image_shape(), pad,
                  draw_crop_flip(augment_key(seed_, epoch), index, pad), padding_fill(), image);
  return label;
}

int32_t IndexedImageSource::render(int64_t index, int64_t epoch, float* image) const {
  SDP_CHECK(index >= 0 && index < size_, "image index ", index, " outside [0, ", size_, ")");
  std::vector<float> scratch(static_cast<size_t>(image_shape().numel()));
  return render_into(index, epoch, image, scratch.data());
}

void IndexedImageSource::next_batch(float* images, int32_t* labels, int64_t batch) {
  if (images == nullptr || labels == nullptr)
    fail(error_name(), " next_batch: the images or labels buffer is null");
  if (batch < 1) fail(error_name(), " next_batch: batch must be >= 1, got ", batch);
  const int64_t numel = image_shape().numel();
  // Which image each row gets, serially: the epoch order is cached.
  std::vector<int64_t> index(static_cast<size_t>(batch));  // [batch]
  std::vector<int64_t> epoch(static_cast<size_t>(batch));  // [batch]
  for (int64_t row = 0; row < batch; ++row) {
    const int64_t position = position_ + row * part_.world + part_.rank;
    index[static_cast<size_t>(row)] = image_at(position);
    epoch[static_cast<size_t>(row)] = position / size_;
  }
  // Rows are independent and each is a fixed function of its (index,
  // epoch), so the result does not depend on the thread count. Exceptions
  // cannot leave an OpenMP region: keep the first and rethrow it after.
  std::exception_ptr error;
#pragma omp parallel if (batch > 1)
  {
    std::vector<float> scratch(static_cast<size_t>(augment_ ? numel : 0));  // [C, H, W]
#pragma omp for schedule(static)
    for (int64_t row = 0; row < batch; ++row) {
      try {
        const auto r = static_cast<size_t>(row);
        labels[row] = render_into(index[r], epoch[r], images + row * numel, scratch.data());
      } catch (...) {
#pragma omp critical(sdp_image_batch_error)
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
  const int64_t classes = num_classes();
  for (int64_t row = 0; row < batch; ++row)
    SDP_CHECK(labels[row] >= 0 && labels[row] < classes, error_name(), ": label ", labels[row],
              " outside [0, ", classes, ")");
  position_ += batch * part_.world;
}

nlohmann::json IndexedImageSource::full_identity() const {
  nlohmann::json id = {{"source", identity()},
                       {"images", size_},
                       {"seed", seed_},
                       {"augment", augment_}};
  // Only an unshuffled train split says so: the states of shuffled train and
  // of val splits stay what they have always been, and old checkpoints load.
  if (split_ == Split::train && !shuffle_) id["order"] = "index";
  return id;
}

nlohmann::json IndexedImageSource::state() const {
  return {{"kind", kind_},
          {"identity", full_identity()},
          {"split", split_name(split_)},
          {"epoch", epoch()},
          {"index", index_in_epoch()}};
}

void IndexedImageSource::restore(const nlohmann::json& state) {
  const std::string who = error_name();
  detail::expect_state_field(state, "kind", kind_, who);
  detail::expect_state_field(state, "identity", full_identity(), who);
  detail::expect_state_field(state, "split", split_name(split_), who);
  for (const char* field : {"epoch", "index"})
    if (!state.contains(field) || !state[field].is_number_integer())
      fail(who, ": saved data state has no non-negative integer field '", field, "'");
  const int64_t epoch =
      json_integer<int64_t>(state["epoch"], who + ": saved data state field 'epoch'", 0);
  const int64_t index =
      json_integer<int64_t>(state["index"], who + ": saved data state field 'index'", 0);
  if (index >= size_)
    fail(who, ": saved data state has 'index' ", index, ", outside the ", size_,
         " images of an epoch");
  if (epoch > (std::numeric_limits<int64_t>::max() - index) / size_)
    fail(who, ": saved data state has 'epoch' ", epoch, ", too large a position");
  position_ = epoch * size_ + index;
}

std::string IndexedImageSource::describe_stream() const {
  const ImageShape s = image_shape();
  std::string text = format(split_name(split_), " split: ", size_, " images of ", s.channels,
                            "x", s.height, "x", s.width, ", ", num_classes(), " classes");
  if (limit_ > 0) text += format(" (limit ", limit_, ")");
  text += shuffle_ ? format(", shuffled each epoch (seed ", seed_, ")")
                   : std::string(", in index order (unshuffled)");
  if (augment_)
    text += format(", random crop (pad ", crop_padding(s), ") + horizontal flip");
  else
    text += ", no augmentation";
  return text;
}

}  // namespace sdp::data
