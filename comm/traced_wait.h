// Waiting for a Work while drawing it on a Timeline (core/timeline.h).
//
// WaitTraced waits like Work::Wait and, when the timeline is recording, adds
//   kComm:    `what` (+ " " + `detail` when not empty) over when the operation ran (Work::ExecutedSpan; for a
//             backend that does not say, from `issued` to the end of the wait),
//             with args bytes and queued_us (issue to start of execution);
//   kCompute: "wait <what>" over the time this thread was blocked, when the
//             operation had not completed before the call.
#ifndef ZEROSHARD_COMM_TRACED_WAIT_H_
#define ZEROSHARD_COMM_TRACED_WAIT_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "comm/communicator.h"
#include "core/timeline.h"

namespace zeroshard {

// No string is built unless the timeline records.
absl::Status WaitTraced(Work& work, Timeline* timeline, const char* category, absl::string_view what,
                        absl::string_view detail, std::chrono::steady_clock::time_point issued, int64_t bytes);

// The same with Work::WaitOn(cuda_stream): for a device backend the compute
// stream waits and the host goes on (the comm span then ends when the wait
// was enqueued: the backend does not say when it ran); host backends block
// as in WaitTraced.
absl::Status WaitTracedOn(Work& work, void* cuda_stream, Timeline* timeline, const char* category,
                          absl::string_view what, absl::string_view detail,
                          std::chrono::steady_clock::time_point issued, int64_t bytes);

}  // namespace zeroshard

#endif  // ZEROSHARD_COMM_TRACED_WAIT_H_
