// One background write at a time on a thread of its own: an asynchronous
// checkpoint's shard file (checkpoint/async_checkpoint.h). The job's result
// is kept until Wait takes it, so a caller can poll done() at each step
// boundary and collect the result (or the error) later.
#ifndef ZEROSHARD_CHECKPOINT_BACKGROUND_WRITER_H_
#define ZEROSHARD_CHECKPOINT_BACKGROUND_WRITER_H_

#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/status/statusor.h"
#include "proto/checkpoint.pb.h"

namespace zeroshard {

class BackgroundWriter {
 public:
  using Job = std::function<absl::StatusOr<CheckpointFile>()>;

  // `nice`: the job thread's niceness relative to the process (Linux
  // setpriority on the thread; > 0 lets compute threads go first on a busy
  // host; ignored where it cannot be set).
  explicit BackgroundWriter(int nice = 0) : nice_(nice) {}
  // Waits for a running job; a result not taken is dropped.
  ~BackgroundWriter();
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;

  // Runs `job` on a new thread. kFailedPrecondition while a job is in flight
  // (started and its result not yet taken by Wait): at most one at a time.
  absl::Status Start(Job job);
  // A job was started and its result not yet taken.
  bool in_flight() const;
  // The job in flight has returned (Wait will not block); false when none.
  bool done() const;
  // Blocks until the job in flight returns, and takes its result (the job's
  // error as it returned it). kFailedPrecondition when none is in flight.
  absl::StatusOr<CheckpointFile> Wait();

 private:
  const int nice_;
  mutable std::mutex mu_;
  std::thread thread_;
  bool in_flight_ = false;
  std::optional<absl::StatusOr<CheckpointFile>> result_;  // set by the thread when the job returned
};

}  // namespace zeroshard

#endif  // ZEROSHARD_CHECKPOINT_BACKGROUND_WRITER_H_
