// InspectFilesystem: statfs for the type, statvfs for the free space.
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "offload/async_io.h"

namespace zeroshard {
namespace {

// f_type values from linux/magic.h (not every libc header has them all).
std::string FilesystemTypeName(int64_t magic) {
  switch (static_cast<uint32_t>(magic)) {
    case 0x01021994u: return "tmpfs";
    case 0x858458f6u: return "ramfs";
    case 0xEF53u: return "ext4";  // ext2/3/4 share the magic
    case 0x58465342u: return "xfs";
    case 0x9123683Eu: return "btrfs";
    case 0x794c7630u: return "overlayfs";
    case 0xF2F52010u: return "f2fs";
    case 0x2FC12FC1u: return "zfs";
    case 0x6969u: return "nfs";
    case 0x65735546u: return "fuse";
    case 0x01021997u: return "9p";
    default: return absl::StrFormat("unknown (f_type 0x%x)", static_cast<uint32_t>(magic));
  }
}

}  // namespace

absl::StatusOr<FilesystemInfo> InspectFilesystem(const std::string& dir) {
  struct statfs fs;
  if (::statfs(dir.c_str(), &fs) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("offload directory '", dir, "': statfs: ", std::strerror(errno)));
  }
  struct statvfs vfs;
  if (::statvfs(dir.c_str(), &vfs) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("offload directory '", dir, "': statvfs: ", std::strerror(errno)));
  }
  FilesystemInfo info;
  info.type = FilesystemTypeName(fs.f_type);
  info.ram_backed = info.type == "tmpfs" || info.type == "ramfs";
  info.available_bytes = static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
  info.writable = ::access(dir.c_str(), W_OK) == 0;
  return info;
}

}  // namespace zeroshard
