// AsyncIo over one io_uring: a queue of requests, submitted in batches at
// Poll/Wait/Flush, at most queue_depth in flight, per-region and per-buffer
// ordering.
#include "offload/async_io.h"

#include <liburing.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "offload/async_io_testing.h"
#include "offload/offload_file.h"

namespace zeroshard {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMaxQueueDepth = 256;
// One SQE moves at most this much; longer requests continue as if short.
constexpr int64_t kMaxChunk = int64_t{1} << 30;

struct File {
  int fd = -1;
  std::string dir, label;
  int64_t bytes = 0;
  bool direct = false;
  std::string leftover_path;
};

struct Request {
  int file = 0;
  bool write = false;
  int64_t offset = 0, bytes = 0, done = 0;
  char* buffer = nullptr;
  bool finished = false;
  absl::Status status;
  int injected_error = 0;  // InjectIoFaultForTesting: complete with this errno
};

// Two requests that must complete in issue order: they share file bytes
// and either writes the file, or they share buffer memory and either
// reads (fills the buffer): a read into a staging buffer still being
// written out waits for that write.
bool Overlap(const Request& a, const Request& b) {
  const bool file = a.file == b.file && (a.write || b.write) && a.offset < b.offset + b.bytes &&
                    b.offset < a.offset + a.bytes;
  const bool memory =
      (!a.write || !b.write) && a.buffer < b.buffer + b.bytes && b.buffer < a.buffer + a.bytes;
  return file || memory;
}

class UringIo final : public AsyncIo {
 public:
  UringIo(const AsyncIoOptions& options) : options_(options) {}
  ~UringIo() override;

  absl::Status Init();

  absl::StatusOr<int> OpenFile(const std::string& dir, const std::string& label, int64_t bytes) override;
  bool direct(int file) const override { return ValidFile(file) && files_[file].direct; }
  int64_t file_bytes(int file) const override { return ValidFile(file) ? files_[file].bytes : 0; }
  std::string file_path(int file) const override;

  absl::StatusOr<IoTicket> Read(int file, int64_t offset, void* buffer, int64_t bytes) override {
    return Enqueue(file, /*write=*/false, offset, static_cast<char*>(buffer), bytes);
  }
  absl::StatusOr<IoTicket> Write(int file, int64_t offset, const void* buffer, int64_t bytes) override {
    return Enqueue(file, /*write=*/true, offset, static_cast<char*>(const_cast<void*>(buffer)), bytes);
  }

  bool Poll(IoTicket ticket) override;
  void Flush() override { Submit(); }
  void Progress() override {
    while (ReapOne(/*block=*/false)) {
    }
    Submit();
  }
  absl::Status Wait(IoTicket ticket) override;
  absl::Status WaitAll() override;
  int in_flight() const override { return static_cast<int>(queue_.size() + submitted_.size()); }

  IoStats stats() const override;
  void ResetStats() override;

  void ArmFault(const IoFault& fault) {
    fault_ = fault;
    fault_left_ = fault.nth;
  }

 private:
  bool ValidFile(int file) const { return file >= 0 && file < static_cast<int>(files_.size()); }
  absl::StatusOr<IoTicket> Enqueue(int file, bool write, int64_t offset, char* buffer, int64_t bytes);
  absl::Status Validate(int file, bool write, int64_t offset, const char* buffer, int64_t bytes) const;
  // Prepares SQEs for retries and for queued requests not held back by
  // ordering, up to queue_depth in flight; one io_uring_submit.
  void Submit();
  void PrepareSqe(IoTicket ticket, Request& r);
  // Handles one completion; false when none was ready (or on error).
  bool ReapOne(bool block);
  void Complete(IoTicket ticket, Request& r, absl::Status status);
  std::string Describe(const Request& r) const;
  bool Blocked(const Request& r, const std::vector<IoTicket>& held) const;

  AsyncIoOptions options_;
  io_uring ring_;
  bool ring_ready_ = false;
  absl::Status ring_error_;  // sticky: the ring itself failed
  std::vector<File> files_;

  IoTicket next_ticket_ = 0;
  std::unordered_map<IoTicket, Request> requests_;  // issued, not yet waited
  std::deque<IoTicket> queue_;                      // issued, not submitted, in order
  std::vector<IoTicket> submitted_;                 // in flight (or awaiting resubmission)
  std::vector<IoTicket> retry_;                     // short transfers to resubmit

  IoStats stats_;
  Clock::time_point busy_since_;

  IoFault fault_;
  int64_t fault_left_ = 0;  // requests of fault_'s kind until it hits; 0: none armed
};

UringIo::~UringIo() {
  if (ring_ready_) {
    (void)WaitAll();  // the kernel may still write into callers' buffers
    io_uring_queue_exit(&ring_);
  }
  for (File& f : files_) {
    if (f.fd >= 0) ::close(f.fd);
    if (!f.leftover_path.empty()) ::unlink(f.leftover_path.c_str());
  }
}

absl::Status UringIo::Init() {
  const int rc = io_uring_queue_init(static_cast<unsigned>(options_.queue_depth), &ring_, 0);
  if (rc < 0) {
    return absl::UnavailableError(absl::StrCat("io_uring_queue_init(", options_.queue_depth,
                                               " entries): ", std::strerror(-rc)));
  }
  ring_ready_ = true;
  return absl::OkStatus();
}

absl::StatusOr<int> UringIo::OpenFile(const std::string& dir, const std::string& label, int64_t bytes) {
  auto created = offload_internal::CreateOffloadFile(dir, label, bytes, options_.direct);
  if (!created.ok()) return created.status();
  File f;
  f.fd = created->fd;
  f.dir = dir;
  f.label = label;
  f.bytes = created->bytes;
  f.direct = created->direct;
  f.leftover_path = created->leftover_path;
  files_.push_back(std::move(f));
  return static_cast<int>(files_.size() - 1);
}

std::string UringIo::file_path(int file) const {
  if (!ValidFile(file)) return "";
  char target[4096];
  const std::string link = absl::StrCat("/proc/self/fd/", files_[file].fd);
  const ssize_t n = ::readlink(link.c_str(), target, sizeof(target) - 1);
  if (n < 0) return link;
  return std::string(target, static_cast<size_t>(n));
}

absl::Status UringIo::Validate(int file, bool write, int64_t offset, const char* buffer, int64_t bytes) const {
  const char* op = write ? "Write" : "Read";
  if (!ValidFile(file)) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": file index ", file, " is not open (", files_.size(), " files)"));
  }
  const File& f = files_[file];
  if (buffer == nullptr) return absl::InvalidArgumentError(absl::StrCat(op, " on ", f.label, ": null buffer"));
  if (bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, " on ", f.label, ": length ", bytes, ", want > 0"));
  }
  if (f.direct) {
    const auto address = reinterpret_cast<uintptr_t>(buffer);
    if (offset % kIoAlignment != 0) {
      return absl::InvalidArgumentError(absl::StrCat(op, " on ", f.label, ": offset ", offset,
                                                     " is not a multiple of ", kIoAlignment, " (O_DIRECT)"));
    }
    if (bytes % kIoAlignment != 0) {
      return absl::InvalidArgumentError(absl::StrCat(op, " on ", f.label, ": length ", bytes,
                                                     " is not a multiple of ", kIoAlignment, " (O_DIRECT)"));
    }
    if (address % kIoAlignment != 0) {
      return absl::InvalidArgumentError(absl::StrCat(op, " on ", f.label, ": buffer address 0x",
                                                     absl::Hex(address), " is not aligned to ", kIoAlignment,
                                                     " (O_DIRECT)"));
    }
  }
  if (offset < 0 || bytes > f.bytes || offset > f.bytes - bytes) {
    return absl::OutOfRangeError(absl::StrCat(op, " on ", f.label, ": offset ", offset, " length ", bytes,
                                              " is outside the file's ", f.bytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::StatusOr<IoTicket> UringIo::Enqueue(int file, bool write, int64_t offset, char* buffer, int64_t bytes) {
  absl::Status valid = Validate(file, write, offset, buffer, bytes);
  if (!valid.ok()) return valid;
  const IoTicket ticket = next_ticket_++;
  Request& r = requests_[ticket];
  r.file = file;
  r.write = write;
  r.offset = offset;
  r.bytes = bytes;
  r.buffer = buffer;
  if (fault_left_ > 0 && write == fault_.write && --fault_left_ == 0) r.injected_error = fault_.error;
  queue_.push_back(ticket);
  return ticket;
}

std::string UringIo::Describe(const Request& r) const {
  const File& f = files_[r.file];
  return absl::StrCat("offload file ", f.label, " (", file_path(r.file), "): ", r.write ? "write" : "read", " of ",
                      r.bytes, " bytes at offset ", r.offset);
}

bool UringIo::Blocked(const Request& r, const std::vector<IoTicket>& held) const {
  for (IoTicket t : submitted_) {
    if (Overlap(r, requests_.at(t))) return true;
  }
  for (IoTicket t : held) {
    if (Overlap(r, requests_.at(t))) return true;
  }
  return false;
}

void UringIo::PrepareSqe(IoTicket ticket, Request& r) {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  // Never null: at most queue_depth requests are in flight and the ring has
  // queue_depth entries, all submitted at the end of every Submit.
  const File& f = files_[r.file];
  const int64_t left = std::min(r.bytes - r.done, kMaxChunk);
  if (r.injected_error != 0) {
    io_uring_prep_nop(sqe);  // completes through the ring; ReapOne gives it the errno
  } else if (r.write) {
    io_uring_prep_write(sqe, f.fd, r.buffer + r.done, static_cast<unsigned>(left), r.offset + r.done);
  } else {
    io_uring_prep_read(sqe, f.fd, r.buffer + r.done, static_cast<unsigned>(left), r.offset + r.done);
  }
  io_uring_sqe_set_data64(sqe, static_cast<uint64_t>(ticket));
}

void UringIo::Submit() {
  if (!ring_error_.ok()) return;
  const bool was_idle = submitted_.empty();
  int prepared = 0;
  for (IoTicket t : retry_) {
    PrepareSqe(t, requests_.at(t));
    ++prepared;
  }
  retry_.clear();
  std::vector<IoTicket> held;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (static_cast<int>(submitted_.size()) >= options_.queue_depth) break;
    Request& r = requests_.at(*it);
    if (Blocked(r, held)) {
      held.push_back(*it);
      ++it;
      continue;
    }
    PrepareSqe(*it, r);
    ++prepared;
    submitted_.push_back(*it);
    it = queue_.erase(it);
  }
  if (prepared == 0) return;
  if (was_idle && !submitted_.empty()) busy_since_ = Clock::now();
  int rc;
  do {
    rc = io_uring_submit(&ring_);
  } while (rc == -EINTR || rc == -EAGAIN || rc == -EBUSY);
  if (rc < 0) ring_error_ = absl::InternalError(absl::StrCat("io_uring_submit: ", std::strerror(-rc)));
}

void UringIo::Complete(IoTicket ticket, Request& r, absl::Status status) {
  r.finished = true;
  r.status = std::move(status);
  submitted_.erase(std::find(submitted_.begin(), submitted_.end(), ticket));
  if (r.status.ok()) {
    (r.write ? stats_.write_bytes : stats_.read_bytes) += r.bytes;
    ++(r.write ? stats_.writes : stats_.reads);
  }
  if (submitted_.empty()) {
    stats_.busy_seconds += std::chrono::duration<double>(Clock::now() - busy_since_).count();
  }
}

bool UringIo::ReapOne(bool block) {
  if (!ring_error_.ok()) return false;
  io_uring_cqe* cqe = nullptr;
  int rc = block ? io_uring_wait_cqe(&ring_, &cqe) : io_uring_peek_cqe(&ring_, &cqe);
  if (rc == -EAGAIN || rc == -EINTR) return false;
  if (rc < 0) {
    ring_error_ = absl::InternalError(absl::StrCat("io_uring_wait_cqe: ", std::strerror(-rc)));
    return false;
  }
  const IoTicket ticket = static_cast<IoTicket>(io_uring_cqe_get_data64(cqe));
  int res = cqe->res;
  io_uring_cqe_seen(&ring_, cqe);
  Request& r = requests_.at(ticket);
  if (r.injected_error != 0) res = -std::exchange(r.injected_error, 0);
  if (res == -EAGAIN || res == -EINTR) {
    retry_.push_back(ticket);
  } else if (res < 0) {
    const std::string msg = absl::StrCat(Describe(r), ": ", std::strerror(-res));
    Complete(ticket, r,
             res == -ENOSPC || res == -EDQUOT ? absl::ResourceExhaustedError(msg) : absl::InternalError(msg));
  } else if (res == 0) {
    // No progress: a read past the end (someone truncated the file).
    const std::string msg =
        absl::StrCat("offload file ", files_[r.file].label, " (", file_path(r.file), "): ",
                     r.write ? "write" : "read", " of ", r.bytes - r.done, " bytes at offset ", r.offset + r.done,
                     " returned 0", r.write ? " (no progress)" : " (file truncated?)");
    Complete(ticket, r, r.write ? absl::InternalError(msg) : absl::DataLossError(msg));
  } else {
    r.done += res;
    if (r.done < r.bytes) {
      retry_.push_back(ticket);  // short transfer: the rest goes again
    } else {
      Complete(ticket, r, absl::OkStatus());
    }
  }
  return true;
}

bool UringIo::Poll(IoTicket ticket) {
  while (ReapOne(/*block=*/false)) {
  }
  Submit();
  auto it = requests_.find(ticket);
  if (it == requests_.end()) return ticket < next_ticket_;  // already waited
  return it->second.finished || !ring_error_.ok();
}

absl::Status UringIo::Wait(IoTicket ticket) {
  auto it = requests_.find(ticket);
  if (it == requests_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("Wait: ticket ", ticket,
                                                   ticket < next_ticket_ ? " was already waited" : " was never issued"));
  }
  while (!it->second.finished) {
    while (ReapOne(/*block=*/false)) {
    }
    Submit();
    if (!ring_error_.ok()) return ring_error_;
    if (it->second.finished) break;
    ReapOne(/*block=*/true);
  }
  absl::Status status = std::move(it->second.status);
  requests_.erase(it);
  return status;
}

absl::Status UringIo::WaitAll() {
  while (!queue_.empty() || !submitted_.empty()) {
    while (ReapOne(/*block=*/false)) {
    }
    Submit();
    if (!ring_error_.ok()) break;
    if (!submitted_.empty()) ReapOne(/*block=*/true);
  }
  // The first error in issue order.
  absl::Status first;
  IoTicket first_ticket = next_ticket_;
  for (auto& [t, r] : requests_) {
    if (!r.status.ok() && t < first_ticket) {
      first = r.status;
      first_ticket = t;
    }
  }
  if (!ring_error_.ok() && first.ok()) first = ring_error_;
  requests_.clear();
  queue_.clear();
  return first;
}

IoStats UringIo::stats() const {
  IoStats s = stats_;
  if (!submitted_.empty()) s.busy_seconds += std::chrono::duration<double>(Clock::now() - busy_since_).count();
  return s;
}

void UringIo::ResetStats() {
  stats_ = IoStats();
  busy_since_ = Clock::now();
}

}  // namespace

absl::StatusOr<std::unique_ptr<AsyncIo>> AsyncIo::Create(const AsyncIoOptions& options) {
  if (options.queue_depth < 1 || options.queue_depth > kMaxQueueDepth) {
    return absl::InvalidArgumentError(absl::StrCat("AsyncIo: queue_depth ", options.queue_depth,
                                                   " is outside [1, ", kMaxQueueDepth, "]"));
  }
  auto io = std::make_unique<UringIo>(options);
  absl::Status init = io->Init();
  if (!init.ok()) return init;
  return std::unique_ptr<AsyncIo>(std::move(io));
}

absl::Status InjectIoFaultForTesting(AsyncIo& io, const IoFault& fault) {
  auto* uring = dynamic_cast<UringIo*>(&io);
  if (uring == nullptr) return absl::InvalidArgumentError("InjectIoFaultForTesting: not an AsyncIo::Create AsyncIo");
  if (fault.nth < 1) {
    return absl::InvalidArgumentError(absl::StrCat("InjectIoFaultForTesting: nth ", fault.nth, ", want >= 1"));
  }
  if (fault.error <= 0 || fault.error == EAGAIN || fault.error == EINTR) {
    return absl::InvalidArgumentError(absl::StrCat("InjectIoFaultForTesting: error ", fault.error,
                                                   ", want a failure errno (> 0, not EAGAIN or EINTR)"));
  }
  uring->ArmFault(fault);
  return absl::OkStatus();
}

}  // namespace zeroshard
