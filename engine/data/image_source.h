#pragma once
// Image sources for image classification (the CIFAR ResNets). The
// conventions are those of token_source.h:
// - deterministic from spec, seed, split and stream position;
// - the stream is one global sequence of images, independent of the world
//   size: next_batch(batch) consumes batch * world images and rank r of
//   world gets images r, r + world, r + 2 * world, ... of them, so the ranks
//   together read exactly what one process with batch * world rows reads;
// - state() holds only the global position (and what identifies the data),
//   the same on every rank, so a run may resume on another world size;
// - every random draw (shuffle, augmentation, synthetic pixels) is a
//   counter-based function of (seed, epoch, image index, ...), never of the
//   rank or world size.
//
// Train order: epoch e of the stream is a permutation of the split drawn from
// (seed, e); the global stream is epoch 0's permutation, then epoch 1's, ...
// With shuffle off (make_image_source's `shuffle`), index order 0, 1, 2, ...
// every epoch, as the val split reads. Val order: images 0, 1, 2, ... of the split, unshuffled, from image 0 each
// time a source is created (wrapping to image 0 after the last).
//
// Images are float32 [C, H, W], normalized per channel (CIFAR: the data
// set's mean and std; synthetic images are generated normalized). Train
// images are augmented unless augment=0: see image_augment.h.
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/data/token_source.h"  // Split, StreamPart

namespace sdp::data {

struct ImageShape {
  int64_t channels = 3;
  int64_t height = 32;
  int64_t width = 32;
  int64_t numel() const { return channels * height * width; }
  bool operator==(const ImageShape&) const = default;
};

class ImageSource {
 public:
  virtual ~ImageSource() = default;
  virtual ImageShape image_shape() const = 0;
  virtual int64_t num_classes() const = 0;
  // Images in this split: one epoch.
  virtual int64_t size() const = 0;
  // images: [batch, C, H, W] float32, row-major, normalized (and augmented
  // for the train split when augmentation is on);
  // labels: [batch] int32 in [0, num_classes()).
  // Consumes batch * world images of the global stream.
  virtual void next_batch(float* images, int32_t* labels, int64_t batch) = 0;
  // The global stream position (epoch, index within the epoch) and the
  // identity of the source; enough to resume bit-identically.
  virtual nlohmann::json state() const = 0;
  // Throws sdp::Error naming the field when the state is from another source.
  virtual void restore(const nlohmann::json& state) = 0;
  virtual std::string describe() const = 0;
};

// Builds an image source from a spec. Valid forms:
//   cifar10:DIR[,OPTIONS]    DIR holds data_batch_1.bin .. data_batch_5.bin
//                            (train) and test_batch.bin (val)
//   cifar100:DIR[,OPTIONS]   DIR holds train.bin and test.bin; fine labels
//   synthetic-images[:OPTIONS]
//       synthetic options: classes=K, size=N (train images), val_size=M,
//       dataset=D (which synthetic data set), noise=X, shift=P (max circular
//       shift in pixels; default any), height=H, width=W, channels=C; see
//       synthetic_images.h
// OPTIONS common to all (comma-separated key=value, any subset):
//   augment=0|1   random crop + flip on the train split (default 1; val never)
//   limit=N       use only the first N images of each split (N >= 1; a split
//                 with fewer images keeps them all)
//   seed=S        overrides `seed`, which keys the shuffle and augmentation
// DIR may not contain a comma. Throws sdp::Error listing the valid forms on a
// bad spec, and naming the file on a missing or malformed data file.
// shuffle: the train split in a permutation per epoch (default, as image sets
// have always been read) or, off, in index order; the val split never shuffles.
std::unique_ptr<ImageSource> make_image_source(const std::string& spec, uint64_t seed,
                                               Split split = Split::train,
                                               StreamPart part = {}, bool shuffle = true);

// The text of the valid spec forms, for error messages and --help.
std::string image_source_spec_help();

// True for specs of the image kinds (synthetic-images, cifar10:, cifar100:),
// so a caller can tell an image spec from a token spec before building it.
bool is_image_spec(const std::string& spec);

}  // namespace sdp::data
