#include "checkpoint/background_writer.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include <utility>

namespace zeroshard {

BackgroundWriter::~BackgroundWriter() {
  if (thread_.joinable()) thread_.join();
}

absl::Status BackgroundWriter::Start(Job job) {
  std::lock_guard<std::mutex> lock(mu_);
  if (in_flight_) {
    return absl::FailedPreconditionError("a background write is in flight; Wait for it before starting another");
  }
  // The previous job's thread has returned (Wait took its result): join it.
  if (thread_.joinable()) thread_.join();
  in_flight_ = true;
  result_.reset();
  thread_ = std::thread([this, job = std::move(job)] {
    if (nice_ != 0) {
      const id_t tid = static_cast<id_t>(syscall(SYS_gettid));
      errno = 0;
      const int base = getpriority(PRIO_PROCESS, tid);
      if (errno == 0) (void)setpriority(PRIO_PROCESS, tid, base + nice_);
    }
    absl::StatusOr<CheckpointFile> r = job();
    std::lock_guard<std::mutex> lock(mu_);
    result_.emplace(std::move(r));
  });
  return absl::OkStatus();
}

bool BackgroundWriter::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_;
}

bool BackgroundWriter::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_ && result_.has_value();
}

absl::StatusOr<CheckpointFile> BackgroundWriter::Wait() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!in_flight_) return absl::FailedPreconditionError("no background write is in flight");
  }
  thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_ = false;
  absl::StatusOr<CheckpointFile> r = std::move(*result_);
  result_.reset();
  return r;
}

}  // namespace zeroshard
