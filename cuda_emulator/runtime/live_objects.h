#pragma once
// The objects an emulated library created and has not destroyed yet (its
// handles and descriptors), so that a destroyed or never-created pointer is
// refused instead of read.
#include <mutex>
#include <unordered_set>

namespace sdp::emu {

template <typename T>
class LiveObjects {
 public:
  void add(const T* p) {
    std::lock_guard<std::mutex> lock(mutex_);
    live_.insert(p);
  }
  bool remove(const T* p) {
    std::lock_guard<std::mutex> lock(mutex_);
    return live_.erase(p) > 0;
  }
  bool contains(const T* p) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return live_.count(p) > 0;
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_set<const T*> live_;
};

}  // namespace sdp::emu
