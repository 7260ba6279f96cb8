#include "nn/param_spec.h"

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
