#include "core/host_heap.h"

#include <sys/resource.h>

#include <cstdlib>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

// Writes one byte a page through a volatile pointer: a memset of a buffer
// that is then freed is a dead store the compiler may drop.
void TouchPages(char* p, size_t bytes) {
  for (size_t i = 0; i < bytes; i += 4096) static_cast<volatile char*>(p)[i] = 1;
}

long MinorFaults() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// A large buffer freed and allocated again reuses its pages: touching it the
// second time faults (almost) nothing in. Under glibc's defaults 64 MiB is a
// fresh mapping each time, 16384 page faults.
TEST(HostHeap, AFreedLargeBufferIsReusedWithoutFaults) {
  if (std::getenv("MALLOC_MMAP_MAX_") || std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("MALLOC_TRIM_THRESHOLD_")) {
    GTEST_SKIP() << "a MALLOC_* setting in the environment overrides the policy";
  }
  KeepFreedHostMemory();
  KeepFreedHostMemory();  // idempotent
  constexpr size_t kBytes = size_t{64} << 20;
  char* first = static_cast<char*>(std::malloc(kBytes));
  ASSERT_NE(first, nullptr);
  TouchPages(first, kBytes);
  std::free(first);
  const long before = MinorFaults();
  char* second = static_cast<char*>(std::malloc(kBytes));
  ASSERT_NE(second, nullptr);
  TouchPages(second, kBytes);
  const long faults = MinorFaults() - before;
  std::free(second);
  EXPECT_LT(faults, 256) << "pages of a 64 MiB buffer (16384 pages) faulted in again";
}

}  // namespace
}  // namespace zeroshard
