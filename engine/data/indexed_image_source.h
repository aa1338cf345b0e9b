#pragma once
// The reading logic shared by image sources over a finite split of images
// numbered 0 .. size-1 (CIFAR files, the synthetic set): the order of the
// global stream (epoch permutations for train, plain order for val), the
// rank's share of each batch, augmentation, and state()/restore(). A
// subclass only renders image i of its split, normalized.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/data/image_source.h"

namespace sdp::data {

// Options every image source takes (see make_image_source).
struct ImageSourceOptions {
  bool augment = true;  // crop + flip on the train split; the val split never augments
  int64_t limit = 0;    // > 0: only the first min(limit, split size) images
  bool shuffle = true;  // the train split in a permutation per epoch; false: index order
};

// Epoch `epoch`'s order of n images: a permutation of 0 .. n-1 drawn from
// (seed, epoch) by a counter-based Fisher-Yates shuffle, so every rank and
// world size computes the same one.
std::vector<int32_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch);

class IndexedImageSource : public ImageSource {
 public:
  int64_t size() const final { return size_; }
  void next_batch(float* images, int32_t* labels, int64_t batch) final;
  nlohmann::json state() const final;
  void restore(const nlohmann::json& state) final;

  Split split() const { return split_; }
  StreamPart part() const { return part_; }
  uint64_t seed() const { return seed_; }
  bool augments() const { return augment_; }
  bool shuffles() const { return shuffle_; }
  // The global position of the next image of the stream: epoch and index
  // within the epoch.
  int64_t epoch() const { return position_ / size_; }
  int64_t index_in_epoch() const { return position_ % size_; }
  // Which image of the split stands at global stream position `position`.
  int64_t image_at(int64_t position);
  // Image `index` of the split as next_batch would give it in epoch `epoch`
  // (augmented if this source augments); image: [C, H, W]. For tests and
  // inspection; does not move the stream.
  int32_t render(int64_t index, int64_t epoch, float* image) const;

 protected:
  IndexedImageSource(std::string kind, uint64_t seed, Split split, StreamPart part,
                     ImageSourceOptions options);
  // Called once by the subclass constructor when it knows how many images
  // its split holds; applies the limit.
  void set_available(int64_t available);
  // Writes image `index` (< size()) normalized and unaugmented into
  // image [C, H, W]; returns its label.
  virtual int32_t load(int64_t index, float* image) const = 0;
  // [C]: the normalized value of a padding pixel, per channel.
  virtual const float* padding_fill() const = 0;
  // What a saved state must match to be restored here, besides the split,
  // size, seed and augmentation, which this class adds.
  virtual nlohmann::json identity() const = 0;
  // Names the source in errors, e.g. "cifar10 source 'DIR'".
  virtual std::string error_name() const = 0;
  // "train split: 50000 images, shuffled each epoch (seed 1), crop pad 4 + flip".
  std::string describe_stream() const;
  const std::string& kind() const { return kind_; }

 private:
  nlohmann::json full_identity() const;
  // scratch: [C, H, W], used when augmenting.
  int32_t render_into(int64_t index, int64_t epoch, float* image, float* scratch) const;
  const std::vector<int32_t>& order_of(int64_t epoch);

  std::string kind_;
  uint64_t seed_;
  Split split_;
  StreamPart part_;
  bool augment_;
  bool shuffle_;  // train split with options.shuffle
  int64_t limit_;
  int64_t size_ = 0;
  int64_t position_ = 0;            // global stream position of the next image
  std::vector<int32_t> order_;      // [size]: the permutation of epoch order_epoch_
  int64_t order_epoch_ = -1;
};

}  // namespace sdp::data
