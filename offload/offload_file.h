// Creating the anonymous, preallocated files AsyncIo reads and writes
// (internal to offload/; AsyncIo::OpenFile is the public entry).
#ifndef ZEROSHARD_OFFLOAD_OFFLOAD_FILE_H_
#define ZEROSHARD_OFFLOAD_OFFLOAD_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace zeroshard::offload_internal {

struct CreatedFile {
  int fd = -1;
  bool direct = false;
  int64_t bytes = 0;  // preallocated, a multiple of kIoAlignment
  // Set when the file has a name that could not be unlinked: the owner
  // unlinks it again when closing.
  std::string leftover_path;
};

// Creates a file in `dir` that cannot outlive the process: O_TMPFILE, else
// dir/zeroshard-offload-<pid>-<n> created O_EXCL and unlinked at once
// (stale such files of dead processes are removed first). O_DIRECT when
// `direct` and the filesystem accepts it, else buffered with one warning
// per process on stderr. Preallocates AlignIo(bytes). `allow_tmpfile`
// false goes straight to the named file: the path for filesystems without
// O_TMPFILE, which tests cannot otherwise reach on a kernel whose
// filesystems all have it.
absl::StatusOr<CreatedFile> CreateOffloadFile(const std::string& dir, const std::string& label, int64_t bytes,
                                              bool direct, bool allow_tmpfile = true);

// Removes dir/zeroshard-offload-<pid>-* whose pid is not a live process;
// the number removed.
int RemoveStaleOffloadFiles(const std::string& dir);

}  // namespace zeroshard::offload_internal

#endif  // ZEROSHARD_OFFLOAD_OFFLOAD_FILE_H_
