// Engine's timeline trace (engine.logging.trace_path): the recording set-up,
// memory samples and the merged write. The spans themselves are recorded
// where the work happens (engine.cc, sharding/).
#include <unistd.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/file_io.h"
#include "core/status_macros.h"
#include "engine/engine_impl.h"

namespace zeroshard {

absl::Status EngineImpl::InitTrace(const LoggingConfig& logging) {
  if (logging.trace_path().empty()) return absl::OkStatus();
  trace_path_ = logging.trace_path();
  trace_steps_ = logging.trace_steps();
  if (trace_steps_ < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("engine.logging.trace_steps: ", trace_steps_, ", expected >= 0 (0: every step)"));
  }
  timeline_ = std::make_unique<Timeline>();
  if (dp_->rank() != 0) return absl::OkStatus();
  const std::string dir = DirName(trace_path_);
  absl::Status made = MakeDirectories(dir);
  if (!made.ok() || access(dir.c_str(), W_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("engine.logging.trace_path: '", trace_path_, "': directory '", dir,
                                                   "' cannot be created or written (",
                                                   made.ok() ? "not writable" : made.message(), ")"));
  }
  return absl::OkStatus();
}

void EngineImpl::TraceMemory() {
  if (timeline_ == nullptr || !timeline_->recording()) return;
  std::vector<TraceArg> bytes;
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    const MemoryCategory category = static_cast<MemoryCategory>(c);
    bytes.push_back({MemoryCategoryName(category), tracker_.Usage(category).current});
  }
  timeline_->AddCounter("memory", Timeline::Clock::now(), std::move(bytes));
}

absl::StatusOr<TraceFileInfo> EngineImpl::WriteTrace() {
  if (timeline_ == nullptr) {
    return absl::FailedPreconditionError("WriteTrace: engine.logging.trace_path is empty, nothing was recorded");
  }
  if (trace_written_) return trace_result_;
  RETURN_IF_ERROR(CheckUsable());
  timeline_->set_recording(false);
  trace_written_ = true;
  const std::vector<std::pair<std::string, std::string>> other_data = {
      {"zero_stage", absl::StrCat(options_.zero.stage())},
      {"dp", absl::StrCat(dp_size())},
      {"shard_group_size", absl::StrCat(dp_->size())},
      {"tp", absl::StrCat(tp_size())},
      {"sequence_parallel", options_.tensor.sequence_parallel ? "true" : "false"},
      {"compute_dtype", absl::StrCat("\"", DTypeName(options_.compute_dtype), "\"")},
      {"traced_steps", absl::StrCat(traced_steps_)},
  };
  trace_result_ = WriteMergedTrace(*control_, *timeline_, trace_path_, other_data);
  timeline_->Clear();
  return trace_result_;
}

}  // namespace zeroshard
