// Engine's timeline trace (engine.logging.trace_path): the recording set-up
// and the merged write. The spans and memory samples are recorded where the
// work happens (the components, sharding/).
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/file_io.h"
#include "core/status_macros.h"
#include "engine/engine_impl.h"
#include "kernels/context.h"

namespace zeroshard {

absl::Status EngineImpl::InitTrace(const LoggingConfig& logging) {
  if (logging.trace_path().empty()) return absl::OkStatus();
  trace_path_ = logging.trace_path();
  trace_steps_ = logging.trace_steps();
  if (trace_steps_ < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("engine.logging.trace_steps: ", trace_steps_, ", expected >= 0 (0: every step)"));
  }
  res_.timeline = std::make_unique<Timeline>();
  if (res_.comms.dp->rank() != 0) return absl::OkStatus();
  const std::string dir = DirName(trace_path_);
  absl::Status made = MakeDirectories(dir);
  if (!made.ok() || access(dir.c_str(), W_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("engine.logging.trace_path: '", trace_path_, "': directory '", dir,
                                                   "' cannot be created or written (",
                                                   made.ok() ? "not writable" : made.message(), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TraceFileInfo> EngineImpl::WriteTrace() {
  if (res_.timeline == nullptr) {
    return absl::FailedPreconditionError("WriteTrace: engine.logging.trace_path is empty, nothing was recorded");
  }
  if (trace_written_) return trace_result_;
  RETURN_IF_ERROR(res_.CheckUsable());
  res_.timeline->set_recording(false);
  trace_written_ = true;
  const std::vector<std::pair<std::string, std::string>> other_data = {
      {"zero_stage", absl::StrCat(res_.options.zero.stage())},
      {"dp", absl::StrCat(res_.dp_size())},
      {"shard_group_size", absl::StrCat(res_.comms.dp->size())},
      {"tp", absl::StrCat(res_.tp_size())},
      {"sequence_parallel", res_.options.tensor.sequence_parallel ? "true" : "false"},
      {"compute_dtype", absl::StrCat("\"", DTypeName(res_.options.compute_dtype), "\"")},
      {"traced_steps", absl::StrCat(traced_steps_)},
      // How many threads shared this host's cores (a cost profile's
      // contention model, docs/simulator.md); 0 cores on a GPU device.
      {"host_cores", absl::StrCat(res_.device() == Device::kCpu ? std::thread::hardware_concurrency() : 0u)},
      {"ranks_on_host", absl::StrCat(RanksOnHost())},
      {"threads_per_rank", absl::StrCat(res_.device() == Device::kCpu ? kernels::CpuThreads() : 0)},
  };
  trace_result_ = WriteMergedTrace(*res_.comms.control, *res_.timeline, trace_path_, other_data);
  res_.timeline->Clear();
  return trace_result_;
}

}  // namespace zeroshard
