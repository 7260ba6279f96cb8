#include "core/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zeroshard {
namespace {

absl::Status ErrnoStatus(absl::string_view what, const std::string& path, int err) {
  std::string msg = absl::StrCat(what, " '", path, "': ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(msg);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
  if (err == ENOSPC || err == EDQUOT) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

using FaultFn = std::function<int(FileOp, const std::string&)>;

// Read on every file operation, set only by tests: the flag keeps the
// common path free of the lock.
std::atomic<bool> g_fault_set{false};
std::mutex g_fault_mu;
std::shared_ptr<const FaultFn> g_fault;

// The errno the test fault injects into `op` on `path`, or 0.
int InjectedFault(FileOp op, const std::string& path) {
  if (!g_fault_set.load(std::memory_order_acquire)) return 0;
  std::shared_ptr<const FaultFn> fault;
  {
    std::lock_guard<std::mutex> lock(g_fault_mu);
    fault = g_fault;
  }
  return fault != nullptr ? (*fault)(op, path) : 0;
}

// Closes on scope exit; Close() reports the error of an explicit close.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void Reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  int Close() {
    int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

}  // namespace

void SetFileFaultForTesting(std::function<int(FileOp op, const std::string& path)> fault) {
  std::lock_guard<std::mutex> lock(g_fault_mu);
  g_fault = fault ? std::make_shared<const FaultFn>(std::move(fault)) : nullptr;
  g_fault_set.store(g_fault != nullptr, std::memory_order_release);
}

std::string JoinPath(absl::string_view a, absl::string_view b) {
  if (a.empty()) return std::string(b);
  if (a.back() == '/') return absl::StrCat(a, b);
  return absl::StrCat(a, "/", b);
}

std::string DirName(absl::string_view path) {
  const size_t slash = path.rfind('/');
  if (slash == absl::string_view::npos) return ".";
  return slash == 0 ? "/" : std::string(path.substr(0, slash));
}

absl::StatusOr<int64_t> FileSize(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("cannot stat", path, errno);
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not a regular file"));
  return static_cast<int64_t>(st.st_size);
}

absl::Status ReadFileRange(const std::string& path, int64_t offset, int64_t n, void* out) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus("cannot open", path, errno);
  char* p = static_cast<char*>(out);
  int64_t done = 0;
  while (done < n) {
    ssize_t got = ::pread(fd.get(), p + done, static_cast<size_t>(std::min<int64_t>(n - done, 1 << 30)),
                          static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("cannot read", path, errno);
    }
    if (got == 0) {
      return absl::DataLossError(absl::StrCat("'", path, "' ends at byte ", offset + done, ", expected at least ",
                                              offset + n, " bytes"));
    }
    done += got;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  absl::StatusOr<int64_t> size = FileSize(path);
  if (!size.ok()) return size.status();
  std::string out(static_cast<size_t>(*size), '\0');
  absl::Status s = ReadFileRange(path, 0, *size, out.data());
  if (!s.ok()) return s;
  return out;
}

namespace {

// Large files bypass the page cache (O_DIRECT): buffered writes of a
// checkpoint shard cost the writing process a page-cache copy and page
// allocation per byte, several times the file's own bytes of CPU time on a
// VM, and a checkpoint is read back rarely. Small files stay buffered.
constexpr int64_t kDirectWriteMinBytes = int64_t{1} << 20;
constexpr size_t kDirectAlignment = 4096;  // every block size Linux filesystems use
constexpr size_t kDirectStagingBytes = size_t{8} << 20;

// Writes n bytes at `offset`; 0 or the errno. Repeating a call rewrites the
// same bytes, so a write refused part-way can be retried whole.
int PwriteAll(int fd, const char* p, size_t n, int64_t offset) {
  while (n > 0) {
    ssize_t put = ::pwrite(fd, p, std::min(n, size_t{1} << 30), static_cast<off_t>(offset));
    if (put < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += put;
    n -= static_cast<size_t>(put);
    offset += put;
  }
  return 0;
}

struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};

}  // namespace

absl::Status WriteFileDurablyFrom(const std::string& path, int64_t total_bytes,
                                  absl::FunctionRef<absl::StatusOr<absl::string_view>()> next_piece) {
  if (int err = InjectedFault(FileOp::kCreate, path)) return ErrnoStatus("cannot create", path, err);
  constexpr int kFlags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  bool direct = total_bytes >= kDirectWriteMinBytes;
  Fd fd(::open(path.c_str(), kFlags | (direct ? O_DIRECT : 0), 0644));
  if (fd.get() < 0 && direct && errno == EINVAL) {
    // The filesystem refuses O_DIRECT (ramfs; Linux creates the file first).
    direct = false;
    fd.Reset(::open(path.c_str(), kFlags, 0644));
  }
  if (fd.get() < 0) return ErrnoStatus("cannot create", path, errno);
  // A failed write must not leave a partial file taking the space a retry needs.
  const auto fail = [&](absl::string_view what, int err) {
    ::unlink(path.c_str());
    return ErrnoStatus(what, path, err);
  };
  // Under O_DIRECT bytes go through an aligned staging buffer in whole
  // blocks; the last block is padded and the file truncated to its size.
  std::unique_ptr<char, FreeDeleter> staging;
  if (direct) staging.reset(static_cast<char*>(std::aligned_alloc(kDirectAlignment, kDirectStagingBytes)));
  if (direct && staging == nullptr) direct = false;
  size_t staged = 0;
  int64_t flushed = 0;  // file offset of the staging buffer's first byte
  // n is a whole number of blocks.
  const auto flush = [&](size_t n) -> int {
    int err = PwriteAll(fd.get(), staging.get(), n, flushed);
    if (err == EINVAL) {
      // Opened O_DIRECT but refused at the write: continue buffered.
      const int flags = ::fcntl(fd.get(), F_GETFL);
      if (flags >= 0 && ::fcntl(fd.get(), F_SETFL, flags & ~O_DIRECT) == 0) {
        err = PwriteAll(fd.get(), staging.get(), n, flushed);
      }
    }
    flushed += static_cast<int64_t>(n);
    staged = 0;
    return err;
  };
  const int write_fault = InjectedFault(FileOp::kWrite, path);
  // Bytes the injected fault lets through.
  size_t budget = write_fault != 0 ? static_cast<size_t>(total_bytes) / 2 : static_cast<size_t>(-1);
  int64_t written = 0;
  while (written < total_bytes) {
    absl::StatusOr<absl::string_view> piece = next_piece();
    if (!piece.ok()) {
      ::unlink(path.c_str());
      return piece.status();
    }
    if (piece->empty()) break;
    const char* p = piece->data();
    size_t left = piece->size();
    while (left > 0) {
      if (budget == 0) return fail("cannot write", write_fault);
      size_t put = std::min({left, size_t{1} << 30, budget});
      if (direct) {
        put = std::min(put, kDirectStagingBytes - staged);
        std::memcpy(staging.get() + staged, p, put);
        staged += put;
        if (staged == kDirectStagingBytes) {
          if (int err = flush(staged)) return fail("cannot write", err);
        }
      } else if (int err = PwriteAll(fd.get(), p, put, written)) {
        return fail("cannot write", err);
      }
      p += put;
      left -= put;
      written += static_cast<int64_t>(put);
      if (write_fault != 0) budget -= put;
    }
  }
  if (write_fault != 0) return fail("cannot write", write_fault);
  if (written != total_bytes) {
    ::unlink(path.c_str());
    return absl::InternalError(
        absl::StrCat("'", path, "': the writer produced ", written, " bytes, expected ", total_bytes));
  }
  if (direct && staged > 0) {
    const size_t padded = (staged + kDirectAlignment - 1) / kDirectAlignment * kDirectAlignment;
    std::memset(staging.get() + staged, 0, padded - staged);
    if (int err = flush(padded)) return fail("cannot write", err);
    if (::ftruncate(fd.get(), static_cast<off_t>(total_bytes)) != 0) return fail("cannot truncate", errno);
  }
  if (int err = InjectedFault(FileOp::kSync, path)) return fail("cannot fsync", err);
  if (::fsync(fd.get()) != 0) return fail("cannot fsync", errno);
  if (fd.Close() != 0) return fail("cannot close", errno);
  return absl::OkStatus();
}

absl::Status WriteFileDurably(const std::string& path, const std::vector<absl::string_view>& pieces) {
  int64_t total = 0;
  for (absl::string_view piece : pieces) total += static_cast<int64_t>(piece.size());
  size_t next = 0;
  return WriteFileDurablyFrom(path, total, [&]() -> absl::StatusOr<absl::string_view> {
    while (next < pieces.size() && pieces[next].empty()) ++next;
    return next < pieces.size() ? pieces[next++] : absl::string_view();
  });
}

absl::Status SyncDirectory(const std::string& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus("cannot open directory", dir, errno);
  if (int err = InjectedFault(FileOp::kSync, dir)) return ErrnoStatus("cannot fsync directory", dir, err);
  if (::fsync(fd.get()) != 0) return ErrnoStatus("cannot fsync directory", dir, errno);
  return absl::OkStatus();
}

absl::Status MakeDirectories(const std::string& dir) {
  if (PathExists(dir) && !IsDirectory(dir)) {
    return absl::FailedPreconditionError(absl::StrCat("'", dir, "' exists and is not a directory"));
  }
  if (int err = InjectedFault(FileOp::kMakeDirectory, dir)) return ErrnoStatus("cannot create directory", dir, err);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return ErrnoStatus("cannot create directory", dir, ec.value());
  if (!IsDirectory(dir)) return absl::FailedPreconditionError(absl::StrCat("'", dir, "' exists and is not a directory"));
  return absl::OkStatus();
}

absl::Status RenamePath(const std::string& from, const std::string& to) {
  if (int err = InjectedFault(FileOp::kRename, to)) {
    return ErrnoStatus(absl::StrCat("cannot rename to '", to, "' from"), from, err);
  }
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return ErrnoStatus(absl::StrCat("cannot rename to '", to, "' from"), from, errno);
  }
  return absl::OkStatus();
}

absl::Status ExchangePaths(const std::string& a, const std::string& b) {
  if (int err = InjectedFault(FileOp::kRename, b)) {
    return ErrnoStatus(absl::StrCat("cannot exchange with '", b, "'"), a, err);
  }
  if (::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0) return absl::OkStatus();
  const int err = errno;
  if (err == EINVAL || err == ENOSYS || err == ENOTSUP) {
    return absl::UnimplementedError(absl::StrCat("cannot exchange '", a, "' and '", b, "' atomically here: ",
                                                 std::strerror(err)));
  }
  return ErrnoStatus(absl::StrCat("cannot exchange with '", b, "'"), a, err);
}

absl::Status RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return ErrnoStatus("cannot remove", path, ec.value());
  return absl::OkStatus();
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

absl::StatusOr<std::vector<std::string>> ListDirectory(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> names;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) return ErrnoStatus("cannot list directory", dir, ec.value());
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (ec) return ErrnoStatus("cannot list directory", dir, ec.value());
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace zeroshard
