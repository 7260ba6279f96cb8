#include "engine/data_parallel_program.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace zeroshard {
namespace {

// The lowest unit that runs backward; units.size() when none does.
int FirstBackwardUnit(const std::vector<ProgramUnit>& units) {
  int first = static_cast<int>(units.size());
  while (first > 0 && units[first - 1].backward) --first;
  return first;
}

}  // namespace

std::vector<int> BucketCloseUnits(const std::vector<ProgramUnit>& units, const std::vector<ProgramBucket>& buckets) {
  const int n = static_cast<int>(units.size());
  const int first_backward = FirstBackwardUnit(units);
  std::vector<int> close;
  for (const ProgramBucket& bucket : buckets) {
    int lowest = n;
    for (int u : bucket.units) {
      if (u >= 0 && u < n && units[u].backward) lowest = std::min(lowest, u);
    }
    for (int i = 0; i < n && i < lowest; ++i) {
      if (!units[i].backward) continue;
      for (int o : units[i].needs) {
        if (std::find(bucket.units.begin(), bucket.units.end(), o) != bucket.units.end()) lowest = std::min(lowest, i);
      }
    }
    // Nothing that runs backward writes it: the backward pass's last unit.
    if (lowest == n) lowest = first_backward < n ? first_backward : -1;
    close.push_back(lowest);
  }
  return close;
}

absl::StatusOr<StepProgram> BuildDataParallelProgram(const std::vector<ProgramUnit>& units,
                                                     const std::vector<ProgramBucket>& buckets,
                                                     const DataParallelProgramOptions& options) {
  ProgramCompilerInput in;
  in.units = units;
  in.buckets = buckets;
  in.chunk_begin = {0, static_cast<int>(units.size())};
  in.zero = options.zero;
  in.prefetch = options.prefetch;
  in.reshard_after_forward = options.reshard_after_forward;
  in.reduce_every_micro_batch = options.reduce_every_micro_batch;
  in.training = options.training;
  in.micro_batches = options.micro_batches;
  if (options.micro_batches < 1) {
    return absl::InvalidArgumentError(absl::StrCat("micro_batches is ", options.micro_batches, ", expected >= 1"));
  }
  if (units.empty()) {
    // Nothing to compute: an empty program (the compiler wants a chunk).
    StepProgram program;
    program.micro_batches = options.training ? options.micro_batches : 1;
    program.num_buckets = static_cast<int>(buckets.size());
    for (const ProgramBucket& b : buckets) program.names.buckets.push_back(b.name);
    if (!buckets.empty()) return absl::InvalidArgumentError("buckets given for a program without units");
    return program;
  }
  const int steps = options.training ? options.micro_batches : 1;
  for (int m = 0; m < steps; ++m) {
    in.ops.push_back({ChunkOpKind::kForward, 0, m});
    if (options.training) in.ops.push_back({ChunkOpKind::kBackward, 0, m});
  }
  return CompileProgram(in);
}

}  // namespace zeroshard
