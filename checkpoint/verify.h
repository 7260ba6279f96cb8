// `zeroshard ckpt verify`: every integrity check of a checkpoint.
#ifndef ZEROSHARD_CHECKPOINT_VERIFY_H_
#define ZEROSHARD_CHECKPOINT_VERIFY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace zeroshard {

// The manifest (checksum, version, consistency), then every shard file
// (present, size, header checksum, header = manifest, every tensor's
// checksum). Returns every problem found (empty: the checkpoint is intact);
// a bad manifest stops the checks there.
std::vector<absl::Status> VerifyCheckpoint(const std::string& dir_or_root);

}  // namespace zeroshard

#endif  // ZEROSHARD_CHECKPOINT_VERIFY_H_
