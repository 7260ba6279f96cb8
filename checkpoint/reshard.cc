#include "checkpoint/reshard.h"

#include "absl/strings/str_cat.h"
#include "checkpoint/offline_writer.h"

namespace zeroshard {

absl::StatusOr<std::string> ReshardCheckpoint(const CheckpointReader& reader, const std::string& out_root, int dp) {
  if (dp < 1) return absl::InvalidArgumentError(absl::StrCat("--dp ", dp, " must be >= 1"));
  if (reader.tp() > 1) {
    return absl::UnimplementedError(absl::StrCat(
        "checkpoint '", reader.dir(), "' was saved at tp ", reader.tp(),
        "; resharding tensor-parallel checkpoints is not supported (tp must be 1): consolidate it (zeroshard ckpt "
        "consolidate) and start from the .safetensors file (--init_from), which loads at any dp and tp"));
  }
  CheckpointManifest m = reader.manifest();
  m.mutable_topology()->set_dp(dp);
  m.set_producer("zeroshard ckpt reshard");
  const std::vector<std::string> kinds(m.kinds().begin(), m.kinds().end());
  return WriteCheckpointOffline(out_root, std::move(m), [&](int u, int k, int64_t begin, int64_t count, float* out) {
    return reader.ReadFlat(u, kinds[k], begin, count, out);
  });
}

}  // namespace zeroshard
