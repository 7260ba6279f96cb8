#include "checkpoint/inspect.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/manifest.h"

namespace zeroshard {

std::string InspectCheckpoint(const CheckpointReader& reader) {
  const CheckpointManifest& m = reader.manifest();
  const CheckpointTopology& t = m.topology();
  std::string out;
  absl::StrAppend(&out, "checkpoint:  ", reader.dir(), "\n");
  absl::StrAppendFormat(&out, "format:      version %d, produced by %s\n", m.format_version(), m.producer());
  absl::StrAppendFormat(&out, "step:        %d (optimizer steps %d%s)\n", m.step(), m.optimizer_steps(),
                        m.skipped_steps() > 0 ? absl::StrCat(", skipped ", m.skipped_steps()) : "");
  absl::StrAppendFormat(&out, "topology:    dp=%d tp=%d pp=%d, saved by ZeRO stage %d, alignment %d elements\n",
                        t.dp(), t.tp(), t.pp(), t.zero_stage(), t.alignment());
  int64_t padded = 0;
  for (const FlatParamLayout& l : reader.layouts()) padded += l.padded_numel();
  absl::StrAppendFormat(&out, "parameters:  %d (%d stored with padding) in %d units\n", ManifestParamCount(m), padded,
                        m.units_size());
  absl::StrAppendFormat(&out, "optimizer:   %s; kinds %s\n", m.optimizer(), absl::StrJoin(m.kinds(), ", "));
  absl::StrAppendFormat(&out, "dtypes:      stored F32; the run computed in %s\n",
                        DTypeProto_Name(m.config().engine().precision().compute_dtype()));
  for (const std::string& kind : m.kinds()) {
    absl::StrAppendFormat(&out, "  %-11s %d bytes\n", kind, padded * 4);
  }
  int64_t total = 0;
  for (const CheckpointFile& f : m.files()) total += f.size_bytes();
  absl::StrAppendFormat(&out, "files:       %d shard files, %d bytes (headers %d)\n", m.files_size(), total,
                        [&] {
                          int64_t h = 0;
                          for (const CheckpointFile& f : m.files()) h += 8 + f.header_bytes();
                          return h;
                        }());
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
  absl::StrAppend(&out, "units:\n");
  for (const CheckpointUnit& u : m.units()) {
    absl::StrAppendFormat(&out, "  %3d %-8s %10d elements, shard %d, %d parameters%s\n", u.index(), u.name(),
                          u.numel(), u.shard_numel(), u.params_size(),
                          u.borrowed_size() > 0 ? absl::StrCat(", borrows ", absl::StrJoin(u.borrowed(), ", "))
                                                : std::string());
  }
  return out;
}

}  // namespace zeroshard
