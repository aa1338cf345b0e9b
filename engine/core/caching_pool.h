#pragma once
// The caching logic of a device allocator, independent of the device: big
// segments are mapped from a SegmentSource (cudaMalloc on a GPU; tests use
// host memory), cut into blocks for requests, and blocks freed go back to
// the pool, merged with free neighbours, instead of back to the driver.
// A training step allocates the same tensors every step, so after the first
// step every request is served from the pool with no driver call.
//
// Policy (the one PyTorch's caching allocator made familiar, so `reserved`
// figures compare): requests up to 1 MiB share 2 MiB segments; requests up
// to 10 MiB share 20 MiB segments; larger ones get a segment of their own,
// rounded up to 2 MiB. A block is taken best-fit from the free blocks of
// its class and split when the rest is worth keeping. When the source is
// out of memory, cached free segments are released and the request tried
// once more before failing.
#include <cstddef>
#include <map>
#include <memory>
#include <set>
#include <vector>

namespace sdp {

struct DeviceMemoryInfo {
  size_t free_bytes = 0;   // cudaMemGetInfo: free on the whole device
  size_t total_bytes = 0;  //   and its capacity
  bool operator==(const DeviceMemoryInfo&) const = default;
};

class SegmentSource {
 public:
  virtual ~SegmentSource() = default;
  // nullptr when the device is out of memory (any other failure throws).
  virtual void* map(size_t bytes) = 0;
  virtual void unmap(void* ptr, size_t bytes) = 0;
};

class CachingPool {
 public:
  static constexpr size_t kSmallRequest = size_t{1} << 20;   // <= 1 MiB: small segments
  static constexpr size_t kSmallSegment = size_t{2} << 20;   // 2 MiB
  static constexpr size_t kMediumRequest = size_t{10} << 20; // <= 10 MiB: medium segments
  static constexpr size_t kMediumSegment = size_t{20} << 20; // 20 MiB
  static constexpr size_t kLargeRounding = size_t{2} << 20;  // large segments: 2 MiB multiples
  static constexpr size_t kAlignment = 512;

  explicit CachingPool(SegmentSource& source);
  // Releases every segment; blocks still in use at that point are a bug of
  // the caller (their owners outlive the pool) and are reported on stderr.
  ~CachingPool();
  CachingPool(const CachingPool&) = delete;
  CachingPool& operator=(const CachingPool&) = delete;

  // `bytes` > 0; rounded up to kAlignment. Throws sdp::Error naming the
  // request, the bytes in use and reserved when the device is out of memory.
  void* allocate(size_t bytes);
  void free(void* ptr);
  // Unmaps every segment with no block in use.
  void release_cached();

  size_t reserved_bytes() const { return reserved_; }      // mapped segments
  size_t in_use_bytes() const { return in_use_; }          // blocks handed out
  size_t segment_count() const { return segments_.size(); }
  size_t map_calls() const { return map_calls_; }          // segments ever mapped

 private:
  struct Block {
    char* ptr = nullptr;
    size_t size = 0;
    char* segment = nullptr;  // start of its segment
    bool used = false;
    int pool = 0;             // size class: 0 small, 1 medium, 2 large
  };
  using BySize = std::set<std::pair<size_t, char*>>;  // free blocks by (size, address)

  static int size_class(size_t bytes);
  static size_t segment_size(size_t bytes);
  Block* find_free(size_t bytes, int pool);
  Block* map_segment(size_t bytes, int pool);
  void insert_free(Block& b);
  void erase_free(const Block& b);

  SegmentSource& source_;
  std::map<char*, Block> blocks_;             // every block, by address
  std::map<char*, size_t> segments_;          // segment start -> size
  BySize free_[3];
  size_t reserved_ = 0;
  size_t in_use_ = 0;
  size_t map_calls_ = 0;
};

}  // namespace sdp
