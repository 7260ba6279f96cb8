// Reading a committed checkpoint step directory: its manifest, integrity
// checks of its shard files, and any range of any unit's flat buffer at any
// dp (the basis of loading with resharding, `ckpt reshard`, `consolidate`
// and `diff`).
//
// Every read checks what it reads: the file's size and header checksum
// against the manifest, and the CRC-32C of each tensor it touches. Errors
// are kDataLoss naming the file and the tensor (kNotFound for a missing
// file). The reader holds no file open between calls; it is immutable after
// Open and may be used from several threads.
#ifndef ZEROSHARD_CHECKPOINT_CHECKPOINT_READER_H_
#define ZEROSHARD_CHECKPOINT_CHECKPOINT_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/checkpoint.pb.h"
#include "sharding/flat_param_layout.h"

namespace zeroshard {

class CheckpointReader {
 public:
  // `dir_or_root` is a step directory or a root (following `latest`).
  // Reads and validates the manifest (checkpoint/manifest.h); does not open
  // the shard files.
  static absl::StatusOr<CheckpointReader> Open(const std::string& dir_or_root);

  const std::string& dir() const { return dir_; }
  const CheckpointManifest& manifest() const { return manifest_; }
  int dp() const { return manifest_.topology().dp(); }
  int tp() const { return manifest_.topology().tp(); }
  // Layouts at the saved dp (of one tp rank's slices when tp > 1).
  const std::vector<FlatParamLayout>& layouts() const { return layouts_; }
  bool HasKind(absl::string_view kind) const;

  // Every check on shard file `file` (an index into the manifest's files:
  // world-rank order): present, size, header checksum, header
  // contents equal to the manifest's record, every tensor's checksum.
  absl::Status VerifyFile(int file) const;

  // Elements [begin, begin + count) of tp rank `tp_rank`'s flat buffer of
  // unit `unit` and `kind` into out[0, count). Requires 0 <= begin,
  // begin + count <= padded numel at the saved dp (kInvalidArgument
  // otherwise; any begin >= 0 with count 0 is an empty read); elements past
  // the unit's numel are padding and read as 0.
  absl::Status ReadFlat(int unit, absl::string_view kind, int64_t begin, int64_t count, float* out,
                        int tp_rank = 0) const;

  // One parameter's value of `kind` in the shape users see (every tp rank's
  // slice in place, vocabulary padding dropped).
  absl::StatusOr<std::vector<float>> ReadParam(int unit, int param, absl::string_view kind) const;

 private:
  CheckpointReader() = default;
  std::string FilePath(int file) const;
  // Size and header checksum of a file against the manifest.
  absl::Status CheckFileFrame(int file) const;
  // The whole tensor `unit.<unit>.<kind>` of file `file`, checksum
  // verified; valid until the next call. The last one read is kept: reading
  // a unit parameter by parameter reads each shard tensor once.
  absl::StatusOr<const std::vector<float>*> ShardTensor(int file, int unit, absl::string_view kind) const;

  std::string dir_;
  CheckpointManifest manifest_;
  std::vector<FlatParamLayout> layouts_;
  struct CachedTensor {
    int file = -1;
    std::string name;
    std::vector<float> values;
  };
  mutable CachedTensor cached_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_CHECKPOINT_CHECKPOINT_READER_H_
