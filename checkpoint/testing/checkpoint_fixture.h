// A small checkpoint written without an engine, for tests of the readers,
// the tools and the fuzz targets: 4 units, one of them empty, one borrowing
// a parameter, sizes indivisible by dp 2, 3 and 4 so parameters straddle
// shard borders, random values.
#ifndef ZEROSHARD_CHECKPOINT_TESTING_CHECKPOINT_FIXTURE_H_
#define ZEROSHARD_CHECKPOINT_TESTING_CHECKPOINT_FIXTURE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/checkpoint.pb.h"

namespace zeroshard::testing {

// Units: "embed" {wte.weight [11, 4], wpe.weight [5, 4]}, "h.0"
// {h.0.mlp.c_fc.weight [4, 6], h.0.mlp.c_fc.bias [6]}, "empty" {},
// "head" {ln_f.weight [4], ln_f.bias [4]} borrowing wte.weight.
// Kinds master, exp_avg, exp_avg_sq; alignment 4 (small shards).
CheckpointManifest FixtureManifest(int dp, int64_t step);

// Full flat values per unit and kind: values[unit][kind][0, numel).
using FlatValues = std::vector<std::vector<std::vector<float>>>;
FlatValues RandomFlatValues(const CheckpointManifest& manifest, uint32_t seed);

// Writes and commits the checkpoint under root; returns the step directory.
absl::StatusOr<std::string> WriteFixture(const std::string& root, const CheckpointManifest& manifest,
                                         const FlatValues& values);

// A fresh empty directory under $TEST_TMPDIR (or /tmp).
std::string FreshTempDir(const std::string& name);

}  // namespace zeroshard::testing

#endif  // ZEROSHARD_CHECKPOINT_TESTING_CHECKPOINT_FIXTURE_H_
