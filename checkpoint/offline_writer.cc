#include "checkpoint/offline_writer.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checkpoint/checkpoint_root.h"
#include "checkpoint/manifest.h"
#include "checkpoint/shard_file.h"
#include "core/file_io.h"
#include "core/status_macros.h"
#include "nn/param_spec.h"

namespace zeroshard {
namespace {

// Tp rank `tp_rank`'s flat buffer (padded_numel, zero-filled) of unit `u`,
// kind `k`, from the logical tensors.
absl::StatusOr<std::vector<float>> LocalFlatBuffer(const CheckpointManifest& m, const FlatParamLayout& layout, int u,
                                                   int k, int tp_rank, LogicalTensorSource source) {
  std::vector<float> flat(static_cast<size_t>(layout.padded_numel()), 0.0f);
  const int tp = m.topology().tp();
  for (int p = 0; p < m.units(u).params_size(); ++p) {
    const CheckpointParam& cp = m.units(u).params(p);
    const ParamSpec spec = ParamSpecOf(cp);
    ASSIGN_OR_RETURN(std::vector<float> values, source(u, p, k));
    if (values.empty()) continue;
    if (static_cast<int64_t>(values.size()) != spec.logical_numel()) {
      return absl::InternalError(absl::StrCat("parameter '", cp.name(), "' (", m.kinds(k), "): the source gave ",
                                              values.size(), " values, expected ", spec.logical_numel()));
    }
    if (spec.padded()) values = AddPadding(spec, values.data());
    for (const GlobalRun& run : LocalToGlobalRuns(spec, tp_rank, tp)) {
      std::copy(values.begin() + run.global_begin, values.begin() + run.global_begin + run.length,
                flat.begin() + cp.offset() + run.local_begin);
    }
  }
  return flat;
}

absl::Status WriteFiles(const std::string& tmp_dir, CheckpointManifest& m, LogicalTensorSource source) {
  const CheckpointTopology& topo = m.topology();
  const int dp = topo.dp(), tp = topo.tp(), pp = topo.pp();
  ASSIGN_OR_RETURN(const std::vector<FlatParamLayout> layouts, LayoutsFromManifest(m, dp));
  for (int u = 0; u < m.units_size(); ++u) m.mutable_units(u)->set_shard_numel(layouts[u].shard_numel());
  const std::vector<std::string> kinds(m.kinds().begin(), m.kinds().end());
  std::vector<CheckpointFile> files(static_cast<size_t>(pp) * dp * tp);
  for (int s = 0; s < pp; ++s) {
    std::vector<FlatParamLayout> stage_layouts;
    for (int u = 0; u < m.units_size(); ++u) {
      if (m.units(u).stage() == s) stage_layouts.push_back(layouts[u]);
    }
    for (int t = 0; t < tp; ++t) {
      std::vector<std::vector<std::vector<float>>> data(layouts.size());  // [unit][kind]
      for (const FlatParamLayout& l : stage_layouts) {
        const int u = l.unit_index();
        if (l.numel() == 0) continue;
        for (int k = 0; k < static_cast<int>(kinds.size()); ++k) {
          ASSIGN_OR_RETURN(std::vector<float> flat, LocalFlatBuffer(m, l, u, k, t, source));
          data[u].push_back(std::move(flat));
        }
      }
      for (int d = 0; d < dp; ++d) {
        ASSIGN_OR_RETURN(CheckpointFile file,
                         WriteShardFile(tmp_dir, s, d, t, m.step(), stage_layouts, kinds, [&](int u, int k) {
                           return data[u][k].data() + layouts[u].ShardBegin(d);
                         }));
        files[(static_cast<size_t>(s) * dp + d) * tp + t] = std::move(file);
      }
    }
  }
  for (CheckpointFile& f : files) *m.add_files() = std::move(f);
  return ValidateManifest(m);
}

}  // namespace

absl::StatusOr<std::string> WriteCheckpointOffline(const std::string& root, CheckpointManifest manifest,
                                                   LogicalTensorSource source) {
  const CheckpointTopology& topo = manifest.topology();
  if (topo.dp() < 1 || topo.tp() < 1 || topo.pp() < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("layout dp %d tp %d pp %d: every size must be >= 1", topo.dp(), topo.tp(), topo.pp()));
  }
  manifest.clear_files();
  std::random_device rd;
  const std::string tmp_dir =
      JoinPath(root, TempStepDirName(manifest.step(), absl::StrFormat("%08x%08x", rd(), rd())));
  RETURN_IF_ERROR(MakeDirectories(tmp_dir));
  absl::Status status = WriteFiles(tmp_dir, manifest, source);
  if (status.ok()) status = WriteFileDurably(JoinPath(tmp_dir, kManifestFileName), {EncodeManifest(manifest)});
  if (status.ok()) status = CommitStepDirectory(root, tmp_dir, manifest.step());
  if (!status.ok()) {
    RemoveTree(tmp_dir).IgnoreError();
    return status;
  }
  return JoinPath(root, StepDirName(manifest.step()));
}

}  // namespace zeroshard
