#include "core/host_heap.h"

#include <malloc.h>

#include <cstdlib>
#include <limits>
#include <mutex>

namespace zeroshard {

void KeepFreedHostMemory() {
  static std::once_flag once;
  std::call_once(once, [] {
    const bool mmap_set =
        std::getenv("MALLOC_MMAP_MAX_") != nullptr || std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr;
    if (!mmap_set) mallopt(M_MMAP_MAX, 0);
    if (std::getenv("MALLOC_TRIM_THRESHOLD_") == nullptr) mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  });
}

}  // namespace zeroshard
