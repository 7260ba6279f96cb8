#include "offload/loop_filesystem_testing.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"

namespace zeroshard {
namespace {

// The first of `candidates` that is executable; empty if none.
std::string FindTool(const std::vector<std::string>& candidates) {
  for (const std::string& c : candidates) {
    if (::access(c.c_str(), X_OK) == 0) return c;
  }
  return "";
}

// Runs `command` with its output in `log`; its exit status, and the log's
// text in *output.
int RunLogged(const std::string& command, const std::string& log, std::string* output) {
  const int rc = std::system(absl::StrCat(command, " >", log, " 2>&1").c_str());
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  *output = text.str();
  while (!output->empty() && output->back() == '\n') output->pop_back();
  return rc;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoopFilesystem>> LoopFilesystem::Mount(const std::string& type, int mib,
                                                                       const std::string& parent) {
  if (::geteuid() != 0) return absl::UnavailableError(absl::StrCat("mounting a loop ", type, " needs root"));
  const std::string mkfs = FindTool({"/usr/sbin/mkfs." + type, "/sbin/mkfs." + type});
  const std::string mount = FindTool({"/usr/bin/mount", "/bin/mount"});
  if (mkfs.empty() || mount.empty()) {
    return absl::UnavailableError(absl::StrCat("mkfs.", type, " or mount is not installed"));
  }
  std::unique_ptr<LoopFilesystem> fs(new LoopFilesystem());
  std::string work = parent + "/zs_loopfs_XXXXXX";
  if (::mkdtemp(work.data()) == nullptr) {
    return absl::UnavailableError(absl::StrCat("mkdtemp under ", parent, ": ", std::strerror(errno)));
  }
  fs->work_dir_ = work;
  fs->mount_dir_ = work + "/mnt";
  const std::string image = work + "/image";
  std::error_code ec;
  std::filesystem::create_directory(fs->mount_dir_, ec);
  const int fd = ::open(image.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  const bool sized = fd >= 0 && ::ftruncate(fd, int64_t{mib} << 20) == 0;
  if (fd >= 0) ::close(fd);
  if (!sized) return absl::UnavailableError(absl::StrCat("creating ", image, ": ", std::strerror(errno)));
  std::string output;
  std::string command = absl::StrCat(mkfs, " -q -F -m 0 ", image);
  if (RunLogged(command, work + "/mkfs.log", &output) != 0) {
    return absl::UnavailableError(absl::StrCat(mkfs, " failed: ", output));
  }
  command = absl::StrCat(mount, " -o loop -t ", type, " ", image, " ", fs->mount_dir_);
  if (RunLogged(command, work + "/mount.log", &output) != 0) {
    return absl::UnavailableError(absl::StrCat("mount -o loop -t ", type, " failed: ", output));
  }
  fs->mounted_ = true;
  return fs;
}

LoopFilesystem::~LoopFilesystem() {
  if (mounted_) ::umount2(mount_dir_.c_str(), MNT_DETACH);
  std::error_code ec;
  if (!work_dir_.empty()) std::filesystem::remove_all(work_dir_, ec);
}

absl::StatusOr<int64_t> LoopFilesystem::Fill() {
  const std::string path = mount_dir_ + "/filler";
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", path, ": ", std::strerror(errno)));
  std::vector<char> block(64 << 10, 'f');
  int64_t written = 0;
  int err = 0;
  // Ever smaller writes, each size until ENOSPC: a large write fails while
  // a few blocks are still free, and those would take a small store.
  for (const size_t size : {size_t{64} << 10, size_t{4} << 10, size_t{512}}) {
    for (;;) {
      const ssize_t n = ::write(fd, block.data(), size);
      if (n > 0) {
        written += n;
        continue;
      }
      const int e = n < 0 ? errno : ENOSPC;
      if (e == EINTR) continue;
      if (e != ENOSPC) err = e;
      break;
    }
    if (err == 0 && ::fsync(fd) != 0 && errno != ENOSPC) err = errno;
    if (err != 0) break;
  }
  ::close(fd);
  if (err != 0) return absl::InternalError(absl::StrCat("filling ", path, ": ", std::strerror(err)));
  return written;
}

}  // namespace zeroshard
