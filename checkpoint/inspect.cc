#include "checkpoint/inspect.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/manifest.h"
#include "sharding/optimizer_registry.h"

namespace zeroshard {

std::string InspectCheckpoint(const CheckpointReader& reader) {
  const CheckpointManifest& m = reader.manifest();
  const CheckpointTopology& t = m.topology();
  std::string out;
  absl::StrAppend(&out, "checkpoint:  ", reader.dir(), "\n");
  absl::StrAppendFormat(&out, "format:      version %d, produced by %s\n", m.format_version(), m.producer());
  absl::StrAppendFormat(&out, "step:        %d (optimizer steps %d%s)\n", m.step(), m.optimizer_steps(),
                        m.skipped_steps() > 0 ? absl::StrCat(", skipped ", m.skipped_steps()) : "");
  absl::StrAppendFormat(&out, "topology:    dp=%d tp=%d pp=%d, saved by ZeRO stage %d%s, alignment %d elements\n",
                        t.dp(), t.tp(), t.pp(), t.zero_stage(),
                        t.shard_group_size() > 0
                            ? absl::StrCat(" with hybrid sharding over groups of ", t.shard_group_size())
                            : "",
                        t.alignment());
  // Units, numel and shards are one tp rank's (its slices of the split
  // parameters); at tp > 1 the model's own count is that of the whole,
  // unpadded tensors (ParamSpec::logical()).
  int64_t padded = 0;
  for (const FlatParamLayout& l : reader.layouts()) padded += l.padded_numel();
  if (t.tp() == 1) {
    absl::StrAppendFormat(&out, "parameters:  %d (%d stored with padding) in %d units\n", ManifestParamCount(m),
                          padded, m.units_size());
  } else {
    int64_t whole = 0;
    for (const CheckpointUnit& u : m.units()) {
      for (const CheckpointParam& p : u.params()) whole += ParamSpecOf(p).logical_numel();
    }
    absl::StrAppendFormat(&out,
                          "parameters:  %d in %d units; each tp rank holds %d (%d stored with padding)\n", whole,
                          m.units_size(), ManifestParamCount(m), padded);
  }
  const CheckpointRunConfig& run = m.config();
  // Manifests written before the model registry record no model: GPT-2's.
  absl::StrAppendFormat(&out, "model:       %s (%s)\n", run.model_name().empty() ? "unrecorded" : run.model_name(),
                        run.config_message().empty() ? "no run config recorded" : run.config_message());
  absl::StrAppendFormat(&out, "optimizer:   %s; kinds %s\n", m.optimizer(), absl::StrJoin(m.kinds(), ", "));
  absl::StrAppendFormat(&out, "dtypes:      stored F32; the run computed in %s\n",
                        DTypeProto_Name(m.config().engine().precision().compute_dtype()));
  // Bytes per element from the saving optimizer's plug-in (master: f32);
  // every tp rank stores its slices.
  std::map<std::string, int64_t> element_bytes = {{kKindMaster, 4}};
  if (absl::StatusOr<const Optimizer*> plugin = FindOptimizer(m.optimizer()); plugin.ok()) {
    for (const OptimizerStateKind& k : (*plugin)->AllStateKinds()) element_bytes[k.checkpoint_name] = k.bytes_per_element;
  }
  for (const std::string& kind : m.kinds()) {
    const auto it = element_bytes.find(kind);
    absl::StrAppendFormat(&out, "  %-11s %d bytes\n", kind, padded * (it == element_bytes.end() ? 4 : it->second) * t.tp());
  }
  int64_t total = 0;
  for (const CheckpointFile& f : m.files()) total += f.size_bytes();
  absl::StrAppendFormat(&out, "files:       %d shard files, %d bytes (headers %d)\n", m.files_size(), total,
                        [&] {
                          int64_t h = 0;
                          for (const CheckpointFile& f : m.files()) h += 8 + f.header_bytes();
                          return h;
                        }());
  for (const CheckpointFile& f : m.files()) {
    absl::StrAppendFormat(&out, "  %-24s pp %d dp %d tp %d, %d bytes\n", f.path(), f.pp_rank(), f.dp_rank(),
                          f.tp_rank(), f.size_bytes());
  }
  if (t.tp() > 1) {
    // How each split parameter is cut (nn/param_spec.h's Partition); the
    // others are whole on every tp rank.
    int split = 0, replicated = 0;
    for (const CheckpointUnit& u : m.units()) {
      for (const CheckpointParam& p : u.params()) (p.split_dim() >= 0 ? split : replicated)++;
    }
    absl::StrAppendFormat(&out, "tensor parallel: tp=%d; %d split parameters (whole -> per tp rank), %d replicated\n",
                          t.tp(), split, replicated);
    for (const CheckpointUnit& u : m.units()) {
      for (const CheckpointParam& p : u.params()) {
        if (p.split_dim() < 0) continue;
        const ParamSpec spec = ParamSpecOf(p);
        absl::StrAppendFormat(&out, "  %-28s [%s] -> [%s] %s%s\n", p.name(), absl::StrJoin(spec.shape, ", "),
                              absl::StrJoin(p.shape(), ", "), spec.partition.DebugString(),
                              spec.padded() ? absl::StrCat(", logical [", absl::StrJoin(spec.logical(), ", "),
                                                           "] (the rest is padding)")
                                            : std::string());
      }
    }
  }
  if (m.loss_scaler().has_scale()) {
    absl::StrAppendFormat(&out, "loss scaler: scale %g, growth tracker %d, hysteresis left %d, skipped steps %d\n",
                          m.loss_scaler().scale(), m.loss_scaler().growth_tracker(),
                          m.loss_scaler().hysteresis_left(), m.loss_scaler().skipped_steps());
  } else {
    absl::StrAppend(&out, "loss scaler: none\n");
  }
  absl::StrAppendFormat(&out, "rng:         seed %d, data shuffle seed %d\n", m.rng().seed(),
                        m.rng().data_shuffle_seed());
  absl::StrAppendFormat(&out, "data:        %d sequences consumed\n", m.data().sequences_consumed());
  absl::StrAppend(&out, t.tp() > 1 ? "units (one tp rank's slices):\n" : "units:\n");
  for (const CheckpointUnit& u : m.units()) {
    absl::StrAppendFormat(&out, "  %3d %-8s %10d elements, shard %d, %d parameters%s\n", u.index(), u.name(),
                          u.numel(), u.shard_numel(), u.params_size(),
                          u.borrowed_size() > 0 ? absl::StrCat(", borrows ", absl::StrJoin(u.borrowed(), ", "))
                                                : std::string());
  }
  return out;
}

}  // namespace zeroshard
