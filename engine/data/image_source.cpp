#include "engine/data/image_source.h"

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "engine/core/error.h"
#include "engine/data/cifar_binary.h"
#include "engine/data/synthetic_images.h"

namespace sdp::data {

std::string image_source_spec_help() {
  return "valid image data specs: 'cifar10:DIR[,OPTIONS]' (DIR holds data_batch_1.bin .. "
         "data_batch_5.bin and test_batch.bin), 'cifar100:DIR[,OPTIONS]' (DIR holds train.bin "
         "and test.bin), 'synthetic-images[:OPTIONS]'; OPTIONS is a comma-separated subset of "
         "augment=0|1, limit=N, seed=S, and for synthetic-images also classes=K, size=N, "
         "val_size=M, dataset=D, noise=X, shift=P, height=H, width=W, channels=C";
}

namespace {

constexpr const char* kCifarKeys = "augment, limit, seed";
constexpr const char* kSyntheticKeys =
    "augment, limit, seed, classes, size, val_size, dataset, noise, shift, height, width, "
    "channels";

std::string kind_of(const std::string& spec) { return spec.substr(0, spec.find(':')); }

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t comma = s.find(',', start);
    parts.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return parts;
    start = comma + 1;
  }
}

// One spec's options, parsed with errors that quote the spec.
class OptionParser {
 public:
  explicit OptionParser(const std::string& spec) : spec_(spec) {}

  [[noreturn]] void bad_value(const std::string& key, const std::string& value,
                              const std::string& what) const {
    fail("image data spec '", spec_, "': ", key, "='", value, "' is not ", what);
  }

  int64_t integer(const std::string& key, const std::string& value, int64_t min) const {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || errno == ERANGE || v < min)
      bad_value(key, value, format("an integer >= ", min));
    return v;
  }

  uint64_t seed(const std::string& key, const std::string& value) const {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(value.c_str(), &end, 0);
    if (value.empty() || value[0] == '-' || *end != '\0' || errno == ERANGE)
      bad_value(key, value, "a non-negative 64-bit integer");
    return v;
  }

  double number(const std::string& key, const std::string& value) const {
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || errno == ERANGE) bad_value(key, value, "a number");
    return v;
  }

  bool flag(const std::string& key, const std::string& value) const {
    if (value == "0") return false;
    if (value == "1") return true;
    bad_value(key, value, "0 or 1");
  }

  // Splits "key=value"; throws on an item without '='.
  std::pair<std::string, std::string> key_value(const std::string& item) const {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      fail("image data spec '", spec_, "': option '", item, "' is not key=value; ",
           image_source_spec_help());
    return {item.substr(0, eq), item.substr(eq + 1)};
  }

  // Handles the options every image source takes; false for other keys.
  bool common(const std::string& key, const std::string& value, ImageSourceOptions& options,
              uint64_t& seed_out) const {
    if (key == "augment")
      options.augment = flag(key, value);
    else if (key == "limit")
      options.limit = integer(key, value, 1);
    else if (key == "seed")
      seed_out = seed(key, value);
    else
      return false;
    return true;
  }

  [[noreturn]] void unknown(const std::string& kind, const std::string& key,
                            const char* valid) const {
    fail("image data spec '", spec_, "': unknown ", kind, " option '", key, "'; valid: ", valid);
  }

 private:
  const std::string& spec_;
};

std::unique_ptr<ImageSource> make_cifar(CifarKind kind, const std::string& spec,
                                        const std::string& rest, uint64_t seed, Split split,
                                        StreamPart part, bool shuffle) {
  const std::vector<std::string> items = split_commas(rest);
  const std::string& dir = items.front();
  if (dir.empty())
    fail("image data spec '", spec, "' names no directory; ", image_source_spec_help());
  const OptionParser parser(spec);
  ImageSourceOptions options;
  options.shuffle = shuffle;
  for (size_t i = 1; i < items.size(); ++i) {
    const auto [key, value] = parser.key_value(items[i]);
    if (!parser.common(key, value, options, seed)) parser.unknown(cifar_name(kind), key, kCifarKeys);
  }
  return std::make_unique<CifarImageSource>(cifar_layout(kind), dir, seed, split, part, options);
}

std::unique_ptr<ImageSource> make_synthetic(const std::string& spec, const std::string& rest,
                                            uint64_t seed, Split split, StreamPart part,
                                            bool shuffle) {
  const OptionParser parser(spec);
  SyntheticImagesConfig config;
  ImageSourceOptions options;
  options.shuffle = shuffle;
  if (!rest.empty()) {
    for (const std::string& item : split_commas(rest)) {
      const auto [key, value] = parser.key_value(item);
      if (parser.common(key, value, options, seed)) continue;
      if (key == "classes")
        config.classes = parser.integer(key, value, 2);
      else if (key == "size")
        config.train_size = parser.integer(key, value, 1);
      else if (key == "val_size")
        config.val_size = parser.integer(key, value, 1);
      else if (key == "dataset")
        config.dataset_seed = parser.seed(key, value);
      else if (key == "noise") {
        config.noise = parser.number(key, value);
        if (config.noise < 0.0) parser.bad_value(key, value, "a number >= 0");
      }
      else if (key == "shift")
        config.shift = parser.integer(key, value, 0);
      else if (key == "height")
        config.shape.height = parser.integer(key, value, 1);
      else if (key == "width")
        config.shape.width = parser.integer(key, value, 1);
      else if (key == "channels")
        config.shape.channels = parser.integer(key, value, 1);
      else
        parser.unknown("synthetic-images", key, kSyntheticKeys);
    }
  }
  return std::make_unique<SyntheticImages>(config, seed, split, part, options);
}

}  // namespace

bool is_image_spec(const std::string& spec) {
  const std::string kind = kind_of(spec);
  return kind == "synthetic-images" || kind == "cifar10" || kind == "cifar100";
}

std::unique_ptr<ImageSource> make_image_source(const std::string& spec, uint64_t seed,
                                               Split split, StreamPart part, bool shuffle) {
  detail::check_stream_part(part);
  const size_t colon = spec.find(':');
  const std::string kind = kind_of(spec);
  const std::string rest = colon == std::string::npos ? std::string() : spec.substr(colon + 1);
  if (kind == "synthetic-images") {
    if (colon != std::string::npos && rest.empty())
      fail("image data spec '", spec, "' has an empty option list; ", image_source_spec_help());
    return make_synthetic(spec, rest, seed, split, part, shuffle);
  }
  if (kind == "cifar10" || kind == "cifar100") {
    if (colon == std::string::npos)
      fail("image data spec '", spec, "' names no directory; ", image_source_spec_help());
    return make_cifar(kind == "cifar10" ? CifarKind::cifar10 : CifarKind::cifar100, spec, rest,
                      seed, split, part, shuffle);
  }
  fail("unknown image data spec '", spec, "'; ", image_source_spec_help());
}

}  // namespace sdp::data
