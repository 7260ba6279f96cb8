// manifest.pbtxt: encoding, decoding and validation of CheckpointManifest
// (proto/checkpoint.proto; docs/checkpoint_format.md).
//
// Encoded form: the text-format proto, then one last line
//   "# crc32c=XXXXXXXX\n"  (8 lowercase hex digits)
// holding the CRC-32C of every byte before that line. Decoding checks the
// line first, so any changed byte of the manifest, the checksum line
// included, is caught (kDataLoss); then parses, then rejects a
// format_version outside [kOldestManifestFormatVersion,
// kManifestFormatVersion] (kUnimplemented), then
// validates the contents (kDataLoss naming the inconsistent field).
#ifndef ZEROSHARD_CHECKPOINT_MANIFEST_H_
#define ZEROSHARD_CHECKPOINT_MANIFEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nn/param_spec.h"
#include "proto/checkpoint.pb.h"
#include "sharding/flat_param_layout.h"

namespace zeroshard {

// Written by this build; every version from the oldest on is read.
inline constexpr int kManifestFormatVersion = 2;
inline constexpr int kOldestManifestFormatVersion = 1;
inline constexpr char kManifestFileName[] = "manifest.pbtxt";

// Tensor kinds a shard file holds for each non-empty unit.
inline constexpr char kKindMaster[] = "master";
inline constexpr char kKindExpAvg[] = "exp_avg";
inline constexpr char kKindExpAvgSq[] = "exp_avg_sq";
inline constexpr char kKindMomentum[] = "momentum";

// "shard_pp001_dp00002_tp003.safetensors": the file of the rank at those
// grid coordinates.
std::string ShardFileName(int pp_rank, int dp_rank, int tp_rank);
// "unit.3.exp_avg".
std::string ShardTensorName(int unit, absl::string_view kind);

// The parameter as nn/param_spec.h describes it: the whole tensor's shape
// and its tp partition (replicated when the manifest records no split).
ParamSpec ParamSpecOf(const CheckpointParam& param);

std::string EncodeManifest(const CheckpointManifest& manifest);
// `source` names the file in errors.
absl::StatusOr<CheckpointManifest> DecodeManifest(absl::string_view text, absl::string_view source);

// The structural rules of docs/checkpoint_format.md: version, topology,
// units (contiguous parameters, numel, shard size from dp and alignment),
// kinds, and one file per dp rank listing every unit's tensors of every
// kind, tiling its data region, with a size that adds up. kDataLoss naming
// the first violation.
absl::Status ValidateManifest(const CheckpointManifest& manifest);

// The FlatParamLayouts of the manifest's units, for `dp` ranks (the
// manifest's own dp or another one, for resharding).
absl::StatusOr<std::vector<FlatParamLayout>> LayoutsFromManifest(const CheckpointManifest& manifest, int dp);

// Unit records for `layouts` (and each unit's borrowed names).
void SetManifestUnits(const std::vector<FlatParamLayout>& layouts,
                      const std::vector<std::vector<std::string>>& borrowed, CheckpointManifest* manifest);

// Elements over every unit (tied parameters count once).
int64_t ManifestParamCount(const CheckpointManifest& manifest);

}  // namespace zeroshard

#endif  // ZEROSHARD_CHECKPOINT_MANIFEST_H_
