#include "offload/offload_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "offload/async_io.h"

namespace zeroshard::offload_internal {
namespace {

constexpr absl::string_view kNamePrefix = "zeroshard-offload-";

std::atomic<int64_t> g_name_counter{0};
std::atomic<bool> g_warned_buffered{false};

bool TmpfileUnsupported(int err) { return err == EOPNOTSUPP || err == EISDIR || err == EINVAL; }

absl::Status OpenError(const std::string& dir, const std::string& label, const char* what, int err) {
  std::string msg = absl::StrCat("offload file ", label, ": ", what, " in directory '", dir, "': ",
                                 std::strerror(err));
  if (err == EACCES || err == EPERM || err == EROFS || err == ENOENT || err == ENOTDIR) {
    return absl::FailedPreconditionError(msg);
  }
  if (err == ENOSPC || err == EDQUOT || err == EMFILE || err == ENFILE) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

// O_TMPFILE: the file has no name at all. -1 with errno on failure.
int OpenTmpfile(const std::string& dir, bool direct) {
  return ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC | (direct ? O_DIRECT : 0), 0600);
}

// A named file, unlinked at once. Linux checks O_DIRECT after creating the
// file, so a refused O_DIRECT leaves the name behind: unlink it then too.
int OpenNamed(const std::string& dir, bool direct, std::string* leftover) {
  const std::string path =
      absl::StrCat(dir, "/", kNamePrefix, ::getpid(), "-", g_name_counter.fetch_add(1));
  const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | (direct ? O_DIRECT : 0), 0600);
  const int err = errno;
  if (fd < 0) {
    if (err == EINVAL) ::unlink(path.c_str());
    errno = err;
    return -1;
  }
  if (::unlink(path.c_str()) != 0) *leftover = path;  // the stale-file sweep is the backstop
  return fd;
}

void WarnBuffered(const std::string& dir) {
  if (g_warned_buffered.exchange(true)) return;
  auto info = InspectFilesystem(dir);
  const std::string type = info.ok() ? info->type : "unknown filesystem";
  std::fprintf(stderr, "zeroshard: warning: %s refuses O_DIRECT (%s); offload I/O is buffered\n", dir.c_str(),
               type.c_str());
}

}  // namespace

int RemoveStaleOffloadFiles(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  int removed = 0;
  while (struct dirent* e = ::readdir(d)) {
    absl::string_view name = e->d_name;
    if (!absl::ConsumePrefix(&name, kNamePrefix)) continue;
    std::vector<absl::string_view> parts = absl::StrSplit(name, '-');
    int64_t pid = 0, n = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &pid) || !absl::SimpleAtoi(parts[1], &n) || pid <= 0) {
      continue;
    }
    if (pid == ::getpid()) continue;
    // Only a pid that certainly does not exist: EPERM means it is alive.
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    if (::unlink(absl::StrCat(dir, "/", e->d_name).c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

absl::StatusOr<CreatedFile> CreateOffloadFile(const std::string& dir, const std::string& label, int64_t bytes,
                                              bool direct, bool allow_tmpfile) {
  if (bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("offload file ", label, ": bytes ", bytes, ", want > 0"));
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("offload file ", label, ": directory '", dir,
                                                      "' does not exist or is not a directory"));
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("offload file ", label, ": directory '", dir, "' is not writable: ", std::strerror(errno)));
  }
  RemoveStaleOffloadFiles(dir);

  CreatedFile file;
  file.direct = direct;
  int fd = -1;
  int err = EOPNOTSUPP;
  if (allow_tmpfile) {
    fd = OpenTmpfile(dir, direct);
    err = errno;
  }
  if (fd < 0 && direct && err == EINVAL) {
    // EINVAL is ambiguous: O_TMPFILE or O_DIRECT. Without O_DIRECT tells.
    fd = OpenTmpfile(dir, false);
    err = errno;
    if (fd >= 0) file.direct = false;
  }
  if (fd < 0 && TmpfileUnsupported(err)) {
    fd = OpenNamed(dir, file.direct, &file.leftover_path);
    err = errno;
    if (fd < 0 && file.direct && err == EINVAL) {
      file.direct = false;
      fd = OpenNamed(dir, false, &file.leftover_path);
      err = errno;
    }
  }
  if (fd < 0) return OpenError(dir, label, "cannot create a file", err);
  if (direct && !file.direct) WarnBuffered(dir);

  file.fd = fd;
  file.bytes = AlignIo(bytes);
  if (::fallocate(fd, 0, 0, file.bytes) != 0) {
    err = errno;
    if (err == EOPNOTSUPP && ::ftruncate(fd, file.bytes) == 0) {
      err = 0;  // no preallocation here (ramfs): the size is set, space taken on write
    } else if (err == EOPNOTSUPP) {
      err = errno;
    }
    if (err != 0) {
      ::close(fd);
      if (!file.leftover_path.empty()) ::unlink(file.leftover_path.c_str());
      if (err == ENOSPC || err == EDQUOT || err == EFBIG) {
        auto info = InspectFilesystem(dir);
        return absl::ResourceExhaustedError(absl::StrCat(
            "offload file ", label, ": no space in directory '", dir, "' for ", file.bytes, " bytes (",
            info.ok() ? absl::StrCat(info->available_bytes) : std::string("unknown"), " bytes available)"));
      }
      return OpenError(dir, label, "cannot preallocate a file", err);
    }
  }
  return file;
}

}  // namespace zeroshard::offload_internal
