#include "checkpoint/offline_writer.h"

#include <algorithm>
#include <random>
#include <vector>

#include "absl/strings/str_format.h"
#include "checkpoint/checkpoint_root.h"
#include "checkpoint/manifest.h"
#include "checkpoint/shard_file.h"
#include "core/file_io.h"
#include "core/status_macros.h"

namespace zeroshard {

absl::StatusOr<std::string> WriteCheckpointOffline(const std::string& root, CheckpointManifest manifest,
                                                   FlatRangeSource read_flat) {
  const int dp = manifest.topology().dp();
  if (dp < 1) return absl::InvalidArgumentError(absl::StrFormat("dp %d must be >= 1", dp));
  ASSIGN_OR_RETURN(std::vector<FlatParamLayout> layouts, LayoutsFromManifest(manifest, dp));
  // Offline output has one pipeline stage: every unit in the dp files (a
  // job at any pp reads each unit from wherever the manifest says it is).
  manifest.mutable_topology()->set_pp(1);
  for (size_t u = 0; u < layouts.size(); ++u) {
    manifest.mutable_units(u)->set_shard_numel(layouts[u].shard_numel());
    manifest.mutable_units(u)->set_stage(0);
  }
  const std::vector<std::string> kinds(manifest.kinds().begin(), manifest.kinds().end());
  std::random_device rd;
  const std::string tmp_dir =
      JoinPath(root, TempStepDirName(manifest.step(), absl::StrFormat("%08x%08x", rd(), rd())));
  RETURN_IF_ERROR(MakeDirectories(tmp_dir));
  manifest.clear_files();
  absl::Status status;
  for (int r = 0; r < dp && status.ok(); ++r) {
    // This rank's values, unit by unit, kind by kind.
    std::vector<std::vector<std::vector<float>>> data(layouts.size());
    for (size_t u = 0; u < layouts.size() && status.ok(); ++u) {
      const FlatParamLayout& l = layouts[u];
      if (l.numel() == 0) continue;
      const int64_t begin = l.ShardBegin(r);
      const int64_t stored = std::max<int64_t>(0, std::min(begin + l.shard_numel(), l.numel()) - begin);
      data[u].resize(kinds.size());
      for (size_t k = 0; k < kinds.size() && status.ok(); ++k) {
        data[u][k].assign(static_cast<size_t>(l.shard_numel()), 0.0f);
        if (stored > 0) status = read_flat(static_cast<int>(u), static_cast<int>(k), begin, stored, data[u][k].data());
      }
    }
    if (!status.ok()) break;
    absl::StatusOr<CheckpointFile> file = WriteShardFile(
        tmp_dir, r, manifest.step(), layouts, kinds, [&](int u, int k) -> const float* { return data[u][k].data(); });
    if (!file.ok()) {
      status = file.status();
      break;
    }
    *manifest.add_files() = std::move(*file);
  }
  if (status.ok()) status = ValidateManifest(manifest);
  if (status.ok()) status = WriteFileDurably(JoinPath(tmp_dir, kManifestFileName), {EncodeManifest(manifest)});
  if (status.ok()) status = CommitStepDirectory(root, tmp_dir, manifest.step());
  if (!status.ok()) {
    RemoveTree(tmp_dir).IgnoreError();
    return status;
  }
  return JoinPath(root, StepDirName(manifest.step()));
}

}  // namespace zeroshard
