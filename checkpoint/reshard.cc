#include "checkpoint/reshard.h"

#include <vector>

#include "checkpoint/checkpoint_layout.h"
#include "checkpoint/offline_writer.h"
#include "core/status_macros.h"

namespace zeroshard {

absl::StatusOr<std::string> ReshardCheckpoint(const CheckpointReader& reader, const std::string& out_root,
                                              const GridShape& target) {
  ASSIGN_OR_RETURN(CheckpointManifest m, ManifestAtLayout(reader.manifest(), target));
  m.set_producer("zeroshard ckpt reshard");
  const std::vector<std::string> kinds(m.kinds().begin(), m.kinds().end());
  return WriteCheckpointOffline(out_root, std::move(m), [&](int u, int p, int k) {
    return reader.ReadParam(u, p, kinds[k]);
  });
}

}  // namespace zeroshard
