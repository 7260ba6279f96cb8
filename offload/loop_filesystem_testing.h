// A small real filesystem on a loop device, for fault tests only: a full
// disk that a write meets (ext2 has no fallocate, so AsyncIo's files are
// sized with ftruncate and their blocks allocated by the writes), where the
// machine allows it (root, loop devices, mkfs and mount installed).
#ifndef ZEROSHARD_OFFLOAD_LOOP_FILESYSTEM_TESTING_H_
#define ZEROSHARD_OFFLOAD_LOOP_FILESYSTEM_TESTING_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace zeroshard {

class LoopFilesystem {
 public:
  // mkfs.`type` (no blocks reserved for root) on a `mib` MiB image in a
  // fresh directory under `parent`, loop-mounted on another. kUnavailable
  // saying why where this machine cannot (a test skips with it).
  static absl::StatusOr<std::unique_ptr<LoopFilesystem>> Mount(const std::string& type, int mib,
                                                               const std::string& parent);
  // Unmounts (lazily: open files keep it alive until closed; the loop
  // device goes with the last of them) and removes the image.
  ~LoopFilesystem();
  LoopFilesystem(const LoopFilesystem&) = delete;
  LoopFilesystem& operator=(const LoopFilesystem&) = delete;

  // The mount point.
  const std::string& dir() const { return mount_dir_; }
  // Writes dir()/filler until no block is left (ENOSPC for writes down to
  // 512 bytes, after fsync); the bytes written. Any other error is
  // kInternal naming it.
  absl::StatusOr<int64_t> Fill();

 private:
  LoopFilesystem() = default;
  std::string work_dir_;   // holds the image and the mount point
  std::string mount_dir_;
  bool mounted_ = false;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_OFFLOAD_LOOP_FILESYSTEM_TESTING_H_
