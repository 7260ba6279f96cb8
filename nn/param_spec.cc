#include "nn/param_spec.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeroshard {

std::string Partition::DebugString() const {
  if (replicated()) return "replicated";
  return absl::StrCat("split(dim=", dim, ", blocks=", blocks, ")");
}

int64_t ParamSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t ParamSpec::logical_numel() const {
  int64_t n = 1;
  for (int64_t d : logical()) n *= d;
  return n;
}

absl::Status ValidateLogicalShape(const ParamSpec& spec) {
  if (spec.logical_shape.empty()) return absl::OkStatus();
  bool ok = spec.logical_shape.size() == spec.shape.size();
  for (size_t d = 0; ok && d < spec.shape.size(); ++d) {
    ok = spec.logical_shape[d] >= 1 && spec.logical_shape[d] <= spec.shape[d];
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("parameter '", spec.name, "' [", absl::StrJoin(spec.shape, ", "),
                                                 "] has logical shape [", absl::StrJoin(spec.logical_shape, ", "),
                                                 "], expected as many dimensions, each in [1, the shape's]"));
}

int64_t LogicalIndex(const ParamSpec& spec, int64_t global_index) {
  if (spec.logical_shape.empty()) return global_index;
  const std::vector<int64_t>& shape = spec.shape;
  const std::vector<int64_t>& logical = spec.logical_shape;
  // Unravel over shape (last dimension fastest), ravel over logical.
  int64_t rest = global_index, index = 0, stride = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    const int64_t i = rest % shape[d];
    rest /= shape[d];
    if (i >= logical[d]) return -1;
    index += i * stride;
    stride *= logical[d];
  }
  return index;
}

std::vector<GlobalRun> LogicalToGlobalRuns(const ParamSpec& spec) {
  const int64_t logical_numel = spec.logical_numel();
  const std::vector<int64_t>& shape = spec.shape;
  const std::vector<int64_t>& logical = spec.logical();
  // Dimensions after the last padded one are whole: a run is one row of them.
  int last_padded = -1;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (logical[d] != shape[d]) last_padded = d;
  }
  if (last_padded <= 0) return {GlobalRun{0, 0, logical_numel}};
  int64_t inner = 1;  // elements of one run: logical[last_padded] x the whole dims after it
  for (size_t d = last_padded; d < shape.size(); ++d) inner *= logical[d];
  std::vector<GlobalRun> runs;
  for (int64_t begin = 0; begin < logical_numel; begin += inner) {
    // The global index of logical element `begin` (its trailing coordinates are 0).
    int64_t rest = begin, global = 0, stride = 1;
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      const int64_t i = rest % logical[d];
      rest /= logical[d];
      global += i * stride;
      stride *= shape[d];
    }
    runs.push_back(GlobalRun{begin, global, inner});
  }
  return runs;
}

void PlaceLocalSlice(const ParamSpec& spec, int tp_rank, int tp_size, const float* local, float* global) {
  for (const GlobalRun& run : LocalToGlobalRuns(spec, tp_rank, tp_size)) {
    std::memcpy(global + run.global_begin, local + run.local_begin, static_cast<size_t>(run.length) * sizeof(float));
  }
}

std::vector<float> DropPadding(const ParamSpec& spec, const float* global) {
  std::vector<float> out(static_cast<size_t>(spec.logical_numel()));
  for (const GlobalRun& run : LogicalToGlobalRuns(spec)) {
    std::memcpy(out.data() + run.local_begin, global + run.global_begin,
                static_cast<size_t>(run.length) * sizeof(float));
  }
  return out;
}

std::vector<float> AddPadding(const ParamSpec& spec, const float* logical) {
  std::vector<float> out(static_cast<size_t>(spec.numel()), 0.0f);
  for (const GlobalRun& run : LogicalToGlobalRuns(spec)) {
    std::memcpy(out.data() + run.global_begin, logical + run.local_begin,
                static_cast<size_t>(run.length) * sizeof(float));
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> LocalShape(const ParamSpec& spec, int tp_size) {
  if (tp_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("parameter '", spec.name, "': tp size ", tp_size, ", expected >= 1"));
  }
  std::vector<int64_t> local = spec.shape;
  if (spec.partition.replicated()) return local;
  const int dim = spec.partition.dim, blocks = spec.partition.blocks;
  if (dim < 0 || dim >= static_cast<int>(local.size()) || blocks < 1) {
    return absl::InvalidArgumentError(absl::StrCat("parameter '", spec.name, "' [", absl::StrJoin(spec.shape, ", "),
                                                   "] has partition ", spec.partition.DebugString(),
                                                   ", expected a dimension in [0, ", local.size(),
                                                   ") and blocks >= 1"));
  }
  const int64_t parts = static_cast<int64_t>(blocks) * tp_size;
  if (local[dim] % parts != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter '", spec.name, "' [", absl::StrJoin(spec.shape, ", "), "] is split on dimension ", dim, " in ",
        blocks, " block(s) over tp ", tp_size, ": ", local[dim], " is not a multiple of ", parts));
  }
  local[dim] /= tp_size;
  return local;
}

std::vector<GlobalRun> LocalToGlobalRuns(const ParamSpec& spec, int tp_rank, int tp_size) {
  const int64_t numel = spec.numel();
  if (spec.partition.replicated() || tp_size == 1) return {GlobalRun{0, 0, numel}};
  const int dim = spec.partition.dim;
  const int64_t blocks = spec.partition.blocks;
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < dim; ++d) outer *= spec.shape[d];
  for (size_t d = dim + 1; d < spec.shape.size(); ++d) inner *= spec.shape[d];
  const int64_t global_dim = spec.shape[dim];
  const int64_t local_dim = global_dim / tp_size;
  const int64_t block = global_dim / blocks;     // global block size
  const int64_t local_block = block / tp_size;  // this rank's slice of one block
  std::vector<GlobalRun> runs;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t b = 0; b < blocks; ++b) {
      GlobalRun run;
      run.local_begin = (o * local_dim + b * local_block) * inner;
      run.global_begin = (o * global_dim + b * block + tp_rank * local_block) * inner;
      run.length = local_block * inner;
      if (!runs.empty() && runs.back().local_begin + runs.back().length == run.local_begin &&
          runs.back().global_begin + runs.back().length == run.global_begin) {
        runs.back().length += run.length;
      } else if (run.length > 0) {
        runs.push_back(run);
      }
    }
  }
  return runs;
}

}  // namespace zeroshard
